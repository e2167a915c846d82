/*
 * tp_gemm_scaled.c — the scaled-FP8 cuBLASLt GEMM of tp_gemm_scaled.h, with
 * a per-shape algorithm cache like tp_gemm.c's (a small open-addressed
 * table: a benchmark runs a few dozen shapes). A shape's entry holds its
 * matmul descriptor (transposes and scale modes set), its three layouts and
 * the algorithm the heuristic gave; only the scale pointers change per call.
 */
#include "kernels/tp_gemm_scaled.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device_alloc.h"

/* A group's one context serves every fp8 shape of a run (formats x kinds x
 * projections x row blocks): room for them, and a fresh start when full. */
enum { SCALED_CACHE_SLOTS = 256, SCALED_HEURISTICS = 8 };

typedef struct scaled_key {
  int format;
  int kind; /* tp_gemm_scaled_kind */
  int64_t m, n, k;
  unsigned align; /* smallest alignment of A, B and D, capped at 256 */
} scaled_key;

typedef struct scaled_entry {
  int used;
  scaled_key key;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c; /* cuBLASLt's A (= W), B (= X), C and D */
  cublasLtMatmulAlgo_t algo;
} scaled_entry;

struct tp_gemm_scaled {
  cublasLtHandle_t handle;
  void *workspace;
  size_t workspace_bytes;
  int borrowed; /* handle and workspace are another context's (tp_gemm_scaled_create_on) */
  scaled_entry cache[SCALED_CACHE_SLOTS];
};

tp_rc tp_gemm_scaled_create(size_t workspace_bytes, tp_gemm_scaled **out) {
  tp_gemm_scaled *g = calloc(1, sizeof *g);
  if (!g) return TP_FAIL(TP_EOOM, "out of host memory for the scaled GEMM context");
  cublasStatus_t st = cublasLtCreate(&g->handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    free(g);
    TP_CUBLAS(st);
  }
  g->workspace_bytes = workspace_bytes;
  tp_rc rc = tp_device_malloc(&g->workspace, workspace_bytes > 0 ? workspace_bytes : 256);
  if (rc != TP_OK) {
    cublasLtDestroy(g->handle);
    free(g);
    return rc;
  }
  *out = g;
  return TP_OK;
}

tp_rc tp_gemm_scaled_create_on(const tp_gemm *base, size_t max_workspace_bytes,
                               tp_gemm_scaled **out) {
  if (max_workspace_bytes > tp_gemm_workspace_bytes(base))
    return TP_FAIL(TP_EINTERNAL, "scaled GEMMs offered %zu workspace bytes of %zu",
                   max_workspace_bytes, tp_gemm_workspace_bytes(base));
  tp_gemm_scaled *g = calloc(1, sizeof *g);
  if (!g) return TP_FAIL(TP_EOOM, "out of host memory for the scaled GEMM context");
  g->handle = tp_gemm_handle(base);
  g->workspace = tp_gemm_workspace(base);
  g->workspace_bytes = max_workspace_bytes;
  g->borrowed = 1;
  *out = g;
  return TP_OK;
}

static void entry_release(scaled_entry *e) {
  if (e->op) cublasLtMatmulDescDestroy(e->op);
  if (e->a) cublasLtMatrixLayoutDestroy(e->a);
  if (e->b) cublasLtMatrixLayoutDestroy(e->b);
  if (e->c) cublasLtMatrixLayoutDestroy(e->c);
  memset(e, 0, sizeof *e);
}

void tp_gemm_scaled_destroy(tp_gemm_scaled *g) {
  if (!g) return;
  for (int i = 0; i < SCALED_CACHE_SLOTS; ++i)
    if (g->cache[i].used) entry_release(&g->cache[i]);
  if (!g->borrowed) {
    tp_device_release(g->workspace);
    cublasLtDestroy(g->handle);
  }
  free(g);
}

const char *tp_gemm_scaled_kind_name(tp_gemm_scaled_kind k) {
  static const char *names[TP_GEMM_SCALED_KINDS] = {"forward", "dgrad", "wgrad"};
  return (int)k >= 0 && k < TP_GEMM_SCALED_KINDS ? names[k] : "?";
}

tp_fp8_type tp_gemm_scaled_elem(tp_gemm_scaled_kind k, int b) {
  return k != TP_GEMM_SCALED_FWD && !b ? TP_FP8_E5M2 : TP_FP8_E4M3;
}

tp_quant_role tp_gemm_scaled_role(tp_gemm_scaled_kind k, int b) {
  return b && k != TP_GEMM_SCALED_WGRAD ? TP_QROLE_WEIGHT : TP_QROLE_ACT;
}

static cudaDataType_t cuda_fp8_type(tp_fp8_type t) {
  return t == TP_FP8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
}

/* cuBLASLt's scale mode of each format's roles (indexed by tp_quant_role), from its row. */
#define SCALE_MODE(layout, block_rows, block_cols, mode) CUBLASLT_MATMUL_MATRIX_SCALE_##mode
#define SCALE_MODES_ROW(format, dtype, encoding, agreement, act, weight)                           \
  [format] = {SCALE_MODE act, SCALE_MODE weight},
static const int32_t scale_modes[TP_QFMT_COUNT][2] = {TP_QUANT_FORMAT_LIST(SCALE_MODES_ROW)};
#undef SCALE_MODES_ROW
#undef SCALE_MODE

/* cuBLASLt's scale mode of an operand of this format (known: key_of checks) and role. */
static int32_t scale_mode(tp_quant_format f, tp_quant_role role) { return scale_modes[f][role]; }

/* "sm_90, cuBLASLt 13.0.2" of the current device. */
static tp_rc describe_platform(char *buf, size_t cap) {
  int dev = 0, major = 0, minor = 0;
  TP_CUDA(cudaGetDevice(&dev));
  TP_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  TP_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  size_t v = cublasLtGetVersion();
  snprintf(buf, cap, "sm_%d%d, cuBLASLt %zu.%zu.%zu", major, minor, v / 10000, (v / 100) % 100,
           v % 100);
  return TP_OK;
}

/* The rejection of a format the heuristic turned down, as reason and last error. */
static tp_rc reject(const scaled_key *k, const char *answer, char *reason, size_t cap) {
  char platform[96];
  TP_TRY(describe_platform(platform, sizeof platform));
  const tp_quant_format f = (tp_quant_format)k->format;
  const tp_gemm_scaled_kind kind = (tp_gemm_scaled_kind)k->kind;
  char msg[400];
  if (kind == TP_GEMM_SCALED_FWD)
    snprintf(msg, sizeof msg,
             "%s GEMM (weight scales %s, activation scales %s) m=%lld n=%lld k=%lld is not "
             "supported on %s: cublasLtMatmulAlgoGetHeuristic %s",
             tp_quant_format_name(f), tp_quant_scale_mode_name(f, TP_QROLE_WEIGHT),
             tp_quant_scale_mode_name(f, TP_QROLE_ACT), (long long)k->m, (long long)k->n,
             (long long)k->k, platform, answer);
  else
    snprintf(msg, sizeof msg,
             "%s %s GEMM (A %s scales %s, B %s scales %s) m=%lld n=%lld k=%lld is not "
             "supported on %s: cublasLtMatmulAlgoGetHeuristic %s",
             tp_quant_format_name(f), tp_gemm_scaled_kind_name(kind),
             tp_fp8_type_name(tp_gemm_scaled_elem(kind, 0)),
             tp_quant_scale_mode_name(f, tp_gemm_scaled_role(kind, 0)),
             tp_fp8_type_name(tp_gemm_scaled_elem(kind, 1)),
             tp_quant_scale_mode_name(f, tp_gemm_scaled_role(kind, 1)), (long long)k->m,
             (long long)k->n, (long long)k->k, platform, answer);
  if (reason && cap > 0) snprintf(reason, cap, "%s", msg);
  return TP_FAIL(TP_EREJECT, "%s", msg);
}

static tp_rc set_attr(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr,
                      const void *value, size_t bytes) {
  TP_CUBLAS(cublasLtMatmulDescSetAttribute(op, attr, value, bytes));
  return TP_OK;
}

/* Descriptor of the TN product (see tp_gemm_scaled.h), scale modes set. The
 * scale pointers are set to the workspace (any device address) so the
 * heuristic sees the call as it will be made; enqueue sets the real ones. */
static tp_rc build_desc(tp_gemm_scaled *g, scaled_entry *e, const scaled_key *k) {
  TP_CUBLAS(cublasLtMatmulDescCreate(&e->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = CUBLAS_OP_T, op_b = CUBLAS_OP_N;
  /* cuBLASLt's A is the desc's B (the weight side), its B the desc's A */
  const tp_gemm_scaled_kind kind = (tp_gemm_scaled_kind)k->kind;
  const int32_t mode_a = scale_mode((tp_quant_format)k->format, tp_gemm_scaled_role(kind, 1));
  const int32_t mode_b = scale_mode((tp_quant_format)k->format, tp_gemm_scaled_role(kind, 0));
  TP_TRY(set_attr(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  TP_TRY(set_attr(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  TP_TRY(set_attr(e->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_a, sizeof mode_a));
  TP_TRY(set_attr(e->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_b, sizeof mode_b));
  /* Fast accumulation off (the default, stated): partial sums are promoted
   * into fp32 (tp_quant.h's accuracy model). */
  const int8_t fast_accum = 0;
  TP_TRY(set_attr(e->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum, sizeof fast_accum));
  TP_TRY(set_attr(e->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g->workspace, sizeof g->workspace));
  TP_TRY(set_attr(e->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g->workspace, sizeof g->workspace));
  TP_CUBLAS(cublasLtMatrixLayoutCreate(&e->a, cuda_fp8_type(tp_gemm_scaled_elem(kind, 1)),
                                       (uint64_t)k->k, (uint64_t)k->n, k->k));
  TP_CUBLAS(cublasLtMatrixLayoutCreate(&e->b, cuda_fp8_type(tp_gemm_scaled_elem(kind, 0)),
                                       (uint64_t)k->k, (uint64_t)k->m, k->k));
  TP_CUBLAS(cublasLtMatrixLayoutCreate(&e->c, CUDA_R_16BF, (uint64_t)k->n, (uint64_t)k->m, k->n));
  return TP_OK;
}

static tp_rc make_preference(tp_gemm_scaled *g, unsigned align, cublasLtMatmulPreference_t *out) {
  TP_CUBLAS(cublasLtMatmulPreferenceCreate(out));
  const uint32_t align32 = align;
  cublasStatus_t st =
      cublasLtMatmulPreferenceSetAttribute(*out, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &g->workspace_bytes, sizeof g->workspace_bytes);
  const cublasLtMatmulPreferenceAttributes_t aligns[] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0] && st == CUBLAS_STATUS_SUCCESS; ++i)
    st = cublasLtMatmulPreferenceSetAttribute(*out, aligns[i], &align32, sizeof align32);
  if (st != CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulPreferenceDestroy(*out);
    TP_CUBLAS(st);
  }
  return TP_OK;
}

/* The first algorithm without split-K among the heuristic's answers (the first if all split). */
static int pick_algorithm(const cublasLtMatmulHeuristicResult_t *found, int n_found) {
  for (int i = 0; i < n_found; ++i) {
    int32_t splits = 1;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&found[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                             &splits, sizeof splits,
                                             &written) == CUBLAS_STATUS_SUCCESS &&
        splits <= 1)
      return i;
  }
  return 0;
}

static tp_rc entry_build(tp_gemm_scaled *g, scaled_entry *e, const scaled_key *k, char *reason,
                         size_t cap) {
  TP_TRY(build_desc(g, e, k));
  cublasLtMatmulPreference_t pref;
  TP_TRY(make_preference(g, k->align, &pref));
  cublasLtMatmulHeuristicResult_t found[SCALED_HEURISTICS];
  int n_found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g->handle, e->op, e->a, e->b, e->c, e->c, pref,
                                                     SCALED_HEURISTICS, found, &n_found);
  cublasLtMatmulPreferenceDestroy(pref);
  /* cuBLASLt answers an unknown scale mode for this GPU (VEC32_UE8M0 below
   * sm_100) with INVALID_VALUE from some versions on, NOT_SUPPORTED from
   * others: both are its refusal of the descriptor, passed on in its words. */
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) {
    char answer[160];
    snprintf(answer, sizeof answer, "returned %s (%s)", cublasLtGetStatusName(st),
             cublasLtGetStatusString(st));
    return reject(k, answer, reason, cap);
  }
  TP_CUBLAS(st);
  if (n_found == 0) return reject(k, "found no algorithm", reason, cap);
  e->algo = found[pick_algorithm(found, n_found)].algo;
  e->key = *k;
  e->used = 1;
  return TP_OK;
}

static uint64_t key_hash(const scaled_key *k) {
  const uint64_t parts[] = {(uint64_t)k->format, (uint64_t)k->kind, (uint64_t)k->m,
                            (uint64_t)k->n,      (uint64_t)k->k,    k->align};
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; ++i) h = (h ^ parts[i]) * 1099511628211ull;
  return h;
}

static int key_equal(const scaled_key *a, const scaled_key *b) {
  return a->format == b->format && a->kind == b->kind && a->m == b->m && a->n == b->n &&
         a->k == b->k && a->align == b->align;
}

/* Builds e for key k (the heuristic asked); a failed build leaves e empty. */
static tp_rc entry_fill(tp_gemm_scaled *g, scaled_entry *e, const scaled_key *k, char *reason,
                        size_t cap) {
  tp_rc rc = entry_build(g, e, k, reason, cap);
  if (rc != TP_OK) entry_release(e);
  return rc;
}

/* The cached entry of key, built (heuristic asked) on first use. A full
 * cache is emptied first: the heuristic answers a shape the same way again. */
static tp_rc entry_lookup(tp_gemm_scaled *g, const scaled_key *k, scaled_entry **out, char *reason,
                          size_t cap) {
  const uint64_t h = key_hash(k);
  for (int probe = 0; probe < SCALED_CACHE_SLOTS; ++probe) {
    scaled_entry *e = &g->cache[(h + (uint64_t)probe) % SCALED_CACHE_SLOTS];
    if (e->used && key_equal(&e->key, k)) {
      *out = e;
      return TP_OK;
    }
    if (!e->used) {
      *out = e;
      return entry_fill(g, e, k, reason, cap);
    }
  }
  for (int i = 0; i < SCALED_CACHE_SLOTS; ++i) entry_release(&g->cache[i]);
  *out = &g->cache[h % SCALED_CACHE_SLOTS];
  return entry_fill(g, *out, k, reason, cap);
}

static unsigned pointer_alignment(const void *p) {
  const uintptr_t v = (uintptr_t)p;
  unsigned align = 256;
  while (align > 1 && v % align != 0) align /= 2;
  return align;
}

static tp_rc key_of(tp_gemm_scaled_kind kind, tp_quant_format f, int64_t m, int64_t n, int64_t k,
                    unsigned align, scaled_key *out) {
  if ((int)f < 0 || f >= TP_QFMT_COUNT)
    return TP_FAIL(TP_EINTERNAL, "scaled GEMM: unknown format %d", (int)f);
  if ((int)kind < 0 || kind >= TP_GEMM_SCALED_KINDS)
    return TP_FAIL(TP_EINTERNAL, "scaled GEMM: unknown kind %d", (int)kind);
  if (m <= 0 || n <= 0 || k <= 0)
    return TP_FAIL(TP_EINTERNAL, "scaled GEMM with an empty dimension m=%lld n=%lld k=%lld",
                   (long long)m, (long long)n, (long long)k);
  memset(out, 0, sizeof *out);
  out->format = (int)f;
  out->kind = (int)kind;
  out->m = m;
  out->n = n;
  out->k = k;
  out->align = align;
  return TP_OK;
}

tp_rc tp_gemm_scaled_supported_kind(tp_gemm_scaled *g, tp_gemm_scaled_kind kind,
                                    tp_quant_format format, int64_t m, int64_t n, int64_t k,
                                    char *reason, size_t cap) {
  if (reason && cap > 0) reason[0] = '\0';
  scaled_key key;
  /* cudaMalloc's alignment: what tp_gemm_scaled_enqueue sees for whole buffers. */
  TP_TRY(key_of(kind, format, m, n, k, 256, &key));
  scaled_entry *e = NULL;
  return entry_lookup(g, &key, &e, reason, cap);
}

tp_rc tp_gemm_scaled_supported(tp_gemm_scaled *g, tp_quant_format format, int64_t m, int64_t n,
                               int64_t k, char *reason, size_t cap) {
  return tp_gemm_scaled_supported_kind(g, TP_GEMM_SCALED_FWD, format, m, n, k, reason, cap);
}

tp_rc tp_gemm_scaled_enqueue(tp_gemm_scaled *g, const tp_gemm_scaled_desc *d, cudaStream_t stream) {
  unsigned align = pointer_alignment(d->a);
  const unsigned others[] = {pointer_alignment(d->b), pointer_alignment(d->d)};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; ++i)
    if (others[i] < align) align = others[i];
  scaled_key key;
  TP_TRY(key_of(d->kind, d->format, d->m, d->n, d->k, align, &key));
  if (!d->a || !d->b || !d->d || !d->a_scales || !d->b_scales)
    return TP_FAIL(TP_EINTERNAL, "scaled GEMM: missing operand, scale or output pointer");
  scaled_entry *e = NULL;
  TP_TRY(entry_lookup(g, &key, &e, NULL, 0));
  /* cuBLASLt's A is the weight, its B the activation (tp_gemm_scaled.h). */
  TP_TRY(set_attr(e->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &d->b_scales, sizeof d->b_scales));
  TP_TRY(set_attr(e->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &d->a_scales, sizeof d->a_scales));
  const float alpha = 1.0f, beta = 0.0f;
  TP_CUBLAS(cublasLtMatmul(g->handle, e->op, &alpha, d->b, e->a, d->a, e->b, &beta, d->d, e->c,
                           d->d, e->c, &e->algo, g->workspace, g->workspace_bytes, stream));
  return TP_OK;
}
