/*
 * tp_gemm.c — cuBLASLt wrapper with a per-shape algorithm cache (see
 * tp_gemm.h for the layout convention). The cache is owned by one tp_gemm
 * (one per rank); it is a small open-addressed table because a benchmark
 * runs a few dozen distinct shapes.
 */
#include "kernels/tp_gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device_alloc.h"

enum { GEMM_CACHE_SLOTS = 256, GEMM_HEURISTICS = 16 };

typedef struct gemm_key {
  int dt, trans_a, trans_b;
  int64_t m, n, k, lda, ldb, ldc;
  int beta_nonzero;
  unsigned align; /* smallest alignment of the three pointers, capped at 256 */
  /* batched GEMMs only; a single GEMM leaves them zero. */
  int c_dt_plus1;                       /* 0: C has dt; else C's tp_dtype + 1 */
  int64_t batch;                        /* 0: one GEMM; else the batch count */
  int64_t stride_a, stride_b, stride_c; /* elements between consecutive batch members */
} gemm_key;

typedef struct gemm_entry {
  int used;
  gemm_key key;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
} gemm_entry;

struct tp_gemm {
  cublasLtHandle_t handle;
  void *workspace;
  size_t workspace_bytes;
  gemm_entry cache[GEMM_CACHE_SLOTS];
};

tp_rc tp_gemm_create(size_t workspace_bytes, tp_gemm **out) {
  tp_gemm *g = calloc(1, sizeof *g);
  if (!g) return TP_FAIL(TP_EOOM, "out of host memory for the GEMM context");
  cublasStatus_t st = cublasLtCreate(&g->handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    free(g);
    TP_CUBLAS(st);
  }
  g->workspace_bytes = workspace_bytes;
  tp_rc rc = tp_device_malloc(&g->workspace, workspace_bytes);
  if (rc != TP_OK) {
    cublasLtDestroy(g->handle);
    free(g);
    return rc;
  }
  *out = g;
  return TP_OK;
}

static void entry_release(gemm_entry *e) {
  if (!e->used) return;
  cublasLtMatmulDescDestroy(e->op);
  cublasLtMatrixLayoutDestroy(e->a);
  cublasLtMatrixLayoutDestroy(e->b);
  cublasLtMatrixLayoutDestroy(e->c);
  e->used = 0;
}

void tp_gemm_destroy(tp_gemm *gemm) {
  if (!gemm) return;
  for (int i = 0; i < GEMM_CACHE_SLOTS; ++i) entry_release(&gemm->cache[i]);
  tp_device_release(gemm->workspace);
  cublasLtDestroy(gemm->handle);
  free(gemm);
}

size_t tp_gemm_workspace_bytes(const tp_gemm *gemm) { return gemm->workspace_bytes; }

cublasLtHandle_t tp_gemm_handle(const tp_gemm *gemm) { return gemm->handle; }

void *tp_gemm_workspace(const tp_gemm *gemm) { return gemm->workspace; }

void tp_gemm_version(char *buf, size_t cap) {
  size_t v = cublasLtGetVersion();
  snprintf(buf, cap, "%zu.%zu.%zu", v / 10000, (v / 100) % 100, v % 100);
}

static unsigned pointer_alignment(const void *p) {
  uintptr_t v = (uintptr_t)p;
  unsigned align = 256;
  while (align > 1 && v % align != 0) align /= 2;
  return align;
}

static uint64_t key_hash(const gemm_key *k) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char *p = (const unsigned char *)k;
  for (size_t i = 0; i < sizeof *k; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static cudaDataType_t cuda_type(int dt) { return dt == TP_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

/* Strided batches (tp_gemm_enqueue_batched): cuBLASLt's first operand is the
 * row-major B, its second the row-major A. */
static tp_rc layouts_set_batch(gemm_entry *e, const gemm_key *k) {
  const int32_t count = (int32_t)k->batch;
  const struct {
    cublasLtMatrixLayout_t layout;
    int64_t stride;
  } sets[] = {{e->a, k->stride_b}, {e->b, k->stride_a}, {e->c, k->stride_c}};
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; ++i) {
    TP_CUBLAS(cublasLtMatrixLayoutSetAttribute(sets[i].layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                               &count, sizeof count));
    TP_CUBLAS(cublasLtMatrixLayoutSetAttribute(sets[i].layout,
                                               CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &sets[i].stride, sizeof sets[i].stride));
  }
  return TP_OK;
}

/* The heuristic's first algorithm without split-K (its first at all if none)
 * for the layouts a, b, c of operation e->op. */
static tp_rc pick_algorithm(tp_gemm *g, const gemm_entry *e, const gemm_key *k,
                            cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                            cublasLtMatrixLayout_t c, cublasLtMatmulAlgo_t *out) {
  cublasLtMatmulPreference_t pref;
  TP_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  uint32_t align = k->align;
  cublasStatus_t st =
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &g->workspace_bytes, sizeof g->workspace_bytes);
  const cublasLtMatmulPreferenceAttributes_t aligns[] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0] && st == CUBLAS_STATUS_SUCCESS; ++i)
    st = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof align);
  cublasLtMatmulHeuristicResult_t found[GEMM_HEURISTICS];
  int n_found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(g->handle, e->op, a, b, c, c, pref, GEMM_HEURISTICS, found,
                                        &n_found);
  cublasLtMatmulPreferenceDestroy(pref);
  TP_CUBLAS(st);
  if (n_found == 0)
    return TP_FAIL(TP_ECUBLAS, "cuBLASLt found no algorithm for %s GEMM m=%lld n=%lld k=%lld",
                   k->dt == TP_BF16 ? "bf16" : "fp32", (long long)k->m, (long long)k->n,
                   (long long)k->k);
  int pick = 0;
  for (int i = 0; i < n_found; ++i) {
    int32_t splits = 1;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&found[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                             &splits, sizeof splits,
                                             &written) == CUBLAS_STATUS_SUCCESS &&
        splits <= 1) {
      pick = i;
      break;
    }
  }
  *out = found[pick].algo;
  return TP_OK;
}

/* fp32 GEMMs take the algorithm the heuristic gives a canonical row count,
 * whatever their own m, when it runs their shape: measured at TP 4 on an
 * H100, the heuristic's own pick for 256 rows summed K in another order than
 * its pick for 1024 (every fused chunk's rows off the whole GEMM's by ~1e-6),
 * which the bf16 picks never did. So a chunk of rows gives the whole's bits. */
enum { FP32_CANONICAL_ROWS = 8192 };

static tp_rc pick_row_invariant(tp_gemm *g, gemm_entry *e, const gemm_key *k) {
  const int64_t m = FP32_CANONICAL_ROWS;
  const uint64_t a_rows = k->trans_a ? (uint64_t)m : (uint64_t)k->k;
  const uint64_t a_cols = k->trans_a ? (uint64_t)k->k : (uint64_t)m;
  const int64_t lda = k->trans_a && k->lda < m ? m : k->lda;
  cublasLtMatrixLayout_t b = NULL, c = NULL;
  cublasLtMatmulAlgo_t algo;
  cublasStatus_t st = cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, a_rows, a_cols, lda);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, (uint64_t)k->n, (uint64_t)m, k->ldc);
  tp_rc rc = st == CUBLAS_STATUS_SUCCESS ? pick_algorithm(g, e, k, e->a, b, c, &algo)
                                         : TP_FAIL(TP_ECUBLAS, "cublasLtMatrixLayoutCreate: %s",
                                                   cublasLtGetStatusString(st));
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (c) cublasLtMatrixLayoutDestroy(c);
  TP_TRY(rc);
  cublasLtMatmulHeuristicResult_t check;
  if (cublasLtMatmulAlgoCheck(g->handle, e->op, e->a, e->b, e->c, e->c, &algo, &check) !=
      CUBLAS_STATUS_SUCCESS)
    return pick_algorithm(g, e, k, e->a, e->b, e->c, &e->algo); /* it cannot: its own */
  e->algo = algo;
  return TP_OK;
}

/* Column-major view (see tp_gemm.h): cuBLASLt computes Cᶜ[n, m] = op(Bᶜ) · op(Aᶜ). */
static tp_rc entry_build(tp_gemm *g, gemm_entry *e, const gemm_key *k) {
  cudaDataType_t io = k->dt == TP_BF16 ? CUDA_R_16BF : CUDA_R_32F;
  TP_CUBLAS(cublasLtMatmulDescCreate(&e->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t op_first = k->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_second = k->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  TP_CUBLAS(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                           sizeof op_first));
  TP_CUBLAS(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                           sizeof op_second));
  /* First operand Bᶜ: row-major [n, k] (trans_b) is col-major k x n; [k, n] is n x k. */
  uint64_t b_rows = k->trans_b ? (uint64_t)k->k : (uint64_t)k->n;
  uint64_t b_cols = k->trans_b ? (uint64_t)k->n : (uint64_t)k->k;
  uint64_t a_rows = k->trans_a ? (uint64_t)k->m : (uint64_t)k->k;
  uint64_t a_cols = k->trans_a ? (uint64_t)k->k : (uint64_t)k->m;
  TP_CUBLAS(cublasLtMatrixLayoutCreate(&e->a, io, b_rows, b_cols, k->ldb));
  TP_CUBLAS(cublasLtMatrixLayoutCreate(&e->b, io, a_rows, a_cols, k->lda));
  cudaDataType_t c_io = k->c_dt_plus1 ? cuda_type(k->c_dt_plus1 - 1) : io;
  TP_CUBLAS(cublasLtMatrixLayoutCreate(&e->c, c_io, (uint64_t)k->n, (uint64_t)k->m, k->ldc));
  if (k->batch > 0) TP_TRY(layouts_set_batch(e, k));

  if (k->dt == TP_FP32 && k->batch == 0 && !k->c_dt_plus1) TP_TRY(pick_row_invariant(g, e, k));
  else TP_TRY(pick_algorithm(g, e, k, e->a, e->b, e->c, &e->algo));
  e->key = *k;
  e->used = 1;
  return TP_OK;
}

static int key_equal(const gemm_key *a, const gemm_key *b) {
  return a->dt == b->dt && a->trans_a == b->trans_a && a->trans_b == b->trans_b && a->m == b->m &&
         a->n == b->n && a->k == b->k && a->lda == b->lda && a->ldb == b->ldb && a->ldc == b->ldc &&
         a->beta_nonzero == b->beta_nonzero && a->align == b->align &&
         a->c_dt_plus1 == b->c_dt_plus1 && a->batch == b->batch && a->stride_a == b->stride_a &&
         a->stride_b == b->stride_b && a->stride_c == b->stride_c;
}

static tp_rc entry_lookup(tp_gemm *g, const gemm_key *k, gemm_entry **out) {
  uint64_t h = key_hash(k);
  for (int probe = 0; probe < GEMM_CACHE_SLOTS; ++probe) {
    gemm_entry *e = &g->cache[(h + (uint64_t)probe) % GEMM_CACHE_SLOTS];
    if (e->used && key_equal(&e->key, k)) {
      *out = e;
      return TP_OK;
    }
    if (!e->used) {
      tp_rc rc = entry_build(g, e, k);
      if (rc != TP_OK) {
        entry_release(e);
        memset(e, 0, sizeof *e);
        return rc;
      }
      *out = e;
      return TP_OK;
    }
  }
  return TP_FAIL(TP_EINTERNAL, "GEMM algorithm cache full (%d shapes)", GEMM_CACHE_SLOTS);
}

/* The part of the cache key every GEMM has: types, transposes, shape, leading dimensions. */
static gemm_key shape_key(const tp_gemm_desc *d) {
  gemm_key key;
  memset(&key, 0, sizeof key); /* padding bytes take part in hashing */
  key.dt = (int)d->dtype;
  key.trans_a = d->trans_a != 0;
  key.trans_b = d->trans_b != 0;
  key.m = d->m;
  key.n = d->n;
  key.k = d->k;
  key.lda = d->lda;
  key.ldb = d->ldb;
  key.ldc = d->ldc;
  key.beta_nonzero = d->beta != 0.0f;
  return key;
}

/* Largest power of two (capped at 256) dividing an offset in bytes: a batch
 * member's pointer is base + i·stride, so the stride limits its alignment. */
static unsigned offset_alignment(uint64_t bytes) {
  unsigned align = 256;
  while (align > 1 && bytes % align != 0) align /= 2;
  return align;
}

static unsigned min_alignment(const unsigned *aligns, size_t n) {
  unsigned out = 256;
  for (size_t i = 0; i < n; ++i)
    if (aligns[i] < out) out = aligns[i];
  return out;
}

/* The smallest alignment cuBLASLt may assume: of A, B, C_in and D, and with
 * a batch, of every member (the strides in bytes). */
static unsigned operand_alignment(const tp_gemm_desc *d, const tp_gemm_batch *batch) {
  const void *c_in = d->c_in ? d->c_in : d->c;
  unsigned aligns[7] = {pointer_alignment(d->a),
                        pointer_alignment(d->b),
                        pointer_alignment(c_in),
                        pointer_alignment(d->c),
                        256,
                        256,
                        256};
  if (batch) {
    const uint64_t e = tp_dtype_bytes(d->dtype), e_c = tp_dtype_bytes(batch->c_dtype);
    aligns[4] = offset_alignment((uint64_t)batch->stride_a * e);
    aligns[5] = offset_alignment((uint64_t)batch->stride_b * e);
    aligns[6] = offset_alignment((uint64_t)batch->stride_c * e_c);
  }
  return min_alignment(aligns, sizeof aligns / sizeof aligns[0]);
}

/* D = alpha·op(A)·op(B) + beta·C_in, one call or a strided batch (batch not NULL). */
static tp_rc enqueue(tp_gemm *gemm, const tp_gemm_desc *d, const tp_gemm_batch *batch, float alpha,
                     cudaStream_t stream) {
  /* Element types only: the fp8 formats go through tp_gemm_scaled. */
  if (d->dtype != TP_BF16 && d->dtype != TP_FP32)
    return TP_FAIL(TP_EINTERNAL, "GEMM of %s elements: tp_gemm takes bf16 or fp32",
                   tp_dtype_name(d->dtype));
  gemm_key key = shape_key(d);
  if (batch) {
    key.c_dt_plus1 = batch->c_dtype == d->dtype ? 0 : (int)batch->c_dtype + 1;
    key.batch = batch->count;
    key.stride_a = batch->stride_a;
    key.stride_b = batch->stride_b;
    key.stride_c = batch->stride_c;
  }
  key.align = operand_alignment(d, batch);
  gemm_entry *e = NULL;
  TP_TRY(entry_lookup(gemm, &key, &e));
  const void *c_in = d->c_in ? d->c_in : d->c;
  TP_CUBLAS(cublasLtMatmul(gemm->handle, e->op, &alpha, d->b, e->a, d->a, e->b, &d->beta, c_in,
                           e->c, d->c, e->c, &e->algo, gemm->workspace, gemm->workspace_bytes,
                           stream));
  return TP_OK;
}

tp_rc tp_gemm_enqueue(tp_gemm *gemm, const tp_gemm_desc *d, cudaStream_t stream) {
  if (d->m <= 0 || d->n <= 0 || d->k <= 0)
    return TP_FAIL(TP_EINTERNAL, "GEMM with an empty dimension m=%lld n=%lld k=%lld",
                   (long long)d->m, (long long)d->n, (long long)d->k);
  return enqueue(gemm, d, NULL, 1.0f, stream);
}

tp_rc tp_gemm_enqueue_batched(tp_gemm *gemm, const tp_gemm_desc *d, const tp_gemm_batch *batch,
                              cudaStream_t stream) {
  if (d->m <= 0 || d->n <= 0 || d->k <= 0 || batch->count <= 0 || batch->count > INT32_MAX)
    return TP_FAIL(TP_EINTERNAL,
                   "batched GEMM with an empty or huge dimension m=%lld n=%lld "
                   "k=%lld batch=%lld",
                   (long long)d->m, (long long)d->n, (long long)d->k, (long long)batch->count);
  if (batch->c_dtype != d->dtype && !(d->dtype == TP_BF16 && batch->c_dtype == TP_FP32))
    return TP_FAIL(TP_EINTERNAL, "batched GEMM: C in %s from %s inputs is not supported",
                   tp_dtype_name(batch->c_dtype), tp_dtype_name(d->dtype));
  if (d->c_in)
    return TP_FAIL(TP_EINTERNAL, "batched GEMM: C is updated in place (c_in must be NULL)");
  return enqueue(gemm, d, batch, batch->alpha, stream);
}
