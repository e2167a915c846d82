/*
 * test_alloc_peak.c — tpbench's device-memory accounting (kernels/
 * tp_device_alloc.h, results.alloc_peak_bytes) on one GPU at TP 1:
 *
 * - the process's ledger over cudaMalloc: 256 MiB charged to an owner raise
 *   the driver's reading (cudaMemGetInfo's total - free) by at least 256 MiB
 *   and the owner's live bytes and peak by exactly that; its free lowers the
 *   live bytes and keeps the peak; a free of a pointer cudaMalloc made
 *   behind the ledger's back is TP_EINTERNAL and frees nothing (the memory
 *   stays usable);
 * - a case as the workers make it: an 8b FFN block's tensors under the case's
 *   owner equal, byte for byte, the tensors block.h lists for the plan's
 *   shape (computed here, independently), the driver's reading rises by at
 *   least what the ledger allocated (tensors and the group scratch the
 *   prepare grew; less one 2 MiB page the driver may have had partly filled
 *   already), and the joint peak over a step of the case and the
 *   configuration is the tensors + the plan's scratch + the group's
 *   cuBLASLt workspace, exactly;
 * - end to end: `tpbench ops` (debug qkv and w13, bf16 and fp8, fwd and
 *   fwd+bwd) and `tpbench run` (debug ffn and attention, fwd and fwd+bwd)
 *   at TP 1 into fresh databases; every configuration that ran (the stock
 *   op or layer and the GEMM alone) has alloc_peak_bytes equal to its
 *   case's tensors + its own buffers + its requests of the group's shared
 *   buffers computed here from plans made on the same GPU, and
 *   peak_mem_bytes (the driver's reading) at least that;
 * - `tpbench run --axis graph=mixed` (debug ffn fwd+bwd, seqlen 128 and 256,
 *   one mix measured as one case): every configuration has alloc_peak_bytes
 *   too (mixed windows watch the ledger like plain ones), both sizes'
 *   tensors counted (they live at once, under the case's owner).
 *
 * A tensor added to block.h or to the ops' case buffers must be added to
 * the sums here: that is the point. Exit 77 (skipped) without a GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "bench/gpu/block.h"
#include "bench/matrix/presets.h"
#include "kernels/tp_device.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_linear_fp8.h"
#include "tests/cpu/run_program.h"
#include "tests/gpu/gpu_harness.h"

/* one literal, not a concatenation inside the argument lists */
static char tpbench_exe[] = TP_BUILD_DIR "/tpbench";
#define TPBENCH_EXE tpbench_exe
#define MIB ((int64_t)1024 * 1024)

static const tp_alloc_owner CASE_OWNER = {TP_ALLOC_CASE, 0};
static const tp_alloc_owner TEST_CONFIG = {TP_ALLOC_CONFIG, 100000};

static char ops_db[256], run_db[256], mix_db[256];

/* ---- checks inside the GPU worker (no cmocka there: a forked process) ------------------ */

static int failures;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf(" ... %s\n", ok ? "ok" : "FAIL");
  if (!ok) failures++;
}

static int64_t driver_used(void) {
  size_t free_b = 0, total_b = 0;
  if (cudaDeviceSynchronize() != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    printf("cudaMemGetInfo failed\n");
    failures++;
    return 0;
  }
  return (int64_t)(total_b - free_b);
}

static int64_t ledger_live(void) {
  int64_t live = 0, count = 0;
  tp_alloc_totals(tp_device_ledger(), &live, &count);
  return live;
}

static int64_t live_of(tp_alloc_owner o) {
  tp_alloc_stats s;
  tp_device_stats(o, &s);
  return s.live_bytes;
}

static int64_t at_least_one(int64_t bytes) { return bytes > 0 ? bytes : 1; }

/* ---- what a case holds, from block.h's list of tensors ------------------------------------- */

static int64_t attention_bytes(const tp_block_plan *p, int64_t e) {
  const tp_block_shape *s = &p->shape;
  const int64_t L = p->local_rows, T = p->tokens, D = s->dim;
  const int64_t q = p->hq * s->head_dim, k = tp_attention_qkv_width(&p->attn);
  const int64_t probs = (int64_t)(tp_attention_saved_bytes(&p->attn) / (size_t)e) * e;
  /* g, h, inv_rms, w_qkv, qkv, probs, the core's workspace, o, w_o */
  const int64_t sizes[] = {D * e,
                           L * D * e,
                           L * 4,
                           k * D * e,
                           T * k * e,
                           probs,
                           (int64_t)tp_attention_workspace_bytes(&p->attn, s->backward),
                           T * q * e,
                           D * q * e};
  const int64_t grads[] = {D * e, L * D * e, k * D * e, T * k * e, T * q * e, D * q * e};
  int64_t sum = at_least_one((int64_t)tp_rope_table_bytes(s->seq, s->head_dim));
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) sum += at_least_one(sizes[i]);
  if (s->layer == TP_LAYER_BLOCK) sum += L * D * e; /* its own y; else the block's */
  if (s->save_gathered) sum += T * D * e;
  if (s->ac == TP_AC_SELECTIVE) sum += T * k * e; /* RoPE's rotated copy */
  for (size_t i = 0; s->backward && i < sizeof grads / sizeof grads[0]; ++i)
    sum += at_least_one(grads[i]);
  return sum;
}

static int64_t ffn_bytes(const tp_block_plan *p, int64_t e) {
  const tp_block_shape *s = &p->shape;
  const int64_t L = p->local_rows, T = p->tokens, D = s->dim, f = p->ffn_local;
  const int64_t sizes[] = {D * e,     L * D * e, L * 4,     f * D * e, f * D * e,
                           T * f * e, T * f * e, T * f * e, D * f * e};
  const int64_t grads[] = {D * e, L * D * e, f * D * e, f * D * e, T * f * e, D * f * e};
  int64_t sum = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) sum += at_least_one(sizes[i]);
  if (s->layer == TP_LAYER_BLOCK) sum += L * D * e; /* its own y; else the block's */
  if (s->save_gathered) sum += T * D * e;
  for (size_t i = 0; s->backward && i < sizeof grads / sizeof grads[0]; ++i)
    sum += at_least_one(grads[i]);
  return sum;
}

/* Every tensor tp_block_alloc makes for the plan's shape (each at least 1 byte). */
static int64_t block_case_bytes(const tp_block_plan *p) {
  const tp_block_shape *s = &p->shape;
  const int64_t e = (int64_t)tp_dtype_bytes(s->dtype), LD = p->local_rows * s->dim * e;
  int64_t sum = 2 * LD; /* x, y */
  if (s->backward)
    sum += 2 * LD + at_least_one((int64_t)tp_rmsnorm_bwd_workspace_bytes(p->local_rows, s->dim));
  if (s->layer == TP_LAYER_BLOCK) sum += LD + (s->backward ? 2 * LD : 0); /* x1, dx1, dx_part */
  if (s->layer != TP_LAYER_FFN) sum += attention_bytes(p, e);
  if (s->layer != TP_LAYER_ATTENTION) sum += ffn_bytes(p, e);
  return sum;
}

/* x, every weight and output (with the backward their gradients, dx), the saved input. */
static int64_t ops_case_bytes(const tp_linear_plan *p) {
  const int64_t e = (int64_t)tp_dtype_bytes(p->desc.dtype), nw = p->desc.n_weights;
  const int64_t x = (int64_t)tp_linear_x_elems(p) * e, w = (int64_t)tp_linear_w_elems(p) * e;
  const int64_t y = (int64_t)tp_linear_y_elems(p) * e;
  int64_t sum = x + nw * (w + y) + (int64_t)p->saved_bytes;
  if (p->desc.backward) sum += nw * (y + w) + x; /* dy, dw per weight; dx */
  return sum;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- 1. the process's ledger over cudaMalloc ---------------------------------------------- */

static void ledger_on_the_device(void) {
  const tp_alloc_owner owner = {TP_ALLOC_TEST, 1};
  const int64_t before = driver_used();
  void *p = NULL;
  check(tp_device_malloc_as(owner, &p, 256 * MIB) == TP_OK && p, "256 MiB through the ledger");
  const int64_t after = driver_used();
  tp_alloc_stats s;
  tp_device_stats(owner, &s);
  check(after - before >= 256 * MIB, "the driver's reading rose by %lld MiB (>= 256)",
        (long long)((after - before) / MIB));
  check(s.live_bytes == 256 * MIB && s.peak_bytes == 256 * MIB,
        "the owner holds 256 MiB, peak 256 MiB (live %lld, peak %lld)", (long long)s.live_bytes,
        (long long)s.peak_bytes);
  check(tp_device_free(p) == TP_OK, "freed through the ledger");
  tp_device_stats(owner, &s);
  check(s.live_bytes == 0 && s.peak_bytes == 256 * MIB, "live 0, the peak kept (%lld)",
        (long long)s.peak_bytes);
  check(tp_device_free(p) == TP_EINTERNAL, "a second free is refused: %s", tp_last_message());
  void *raw = NULL;
  check(cudaMalloc(&raw, MIB) == cudaSuccess, "1 MiB by cudaMalloc, outside the ledger");
  check(tp_device_free(raw) == TP_EINTERNAL, "its free through the ledger is refused");
  check(cudaMemset(raw, 0, MIB) == cudaSuccess && cudaFree(raw) == cudaSuccess,
        "and it was not freed: still usable, then freed by cudaFree");
  check(tp_device_owner_release(owner) == TP_OK, "the owner released");
}

/* ---- 2. a case as the layer worker makes it -------------------------------------------------- */

static tp_block_shape shape_of(const char *model, tp_layer layer, int64_t batch, int64_t seq,
                               int backward) {
  const tp_model_preset *m = NULL;
  TP_EXPECT_OK(tp_preset_find(model, &m));
  tp_block_shape s;
  memset(&s, 0, sizeof s);
  s.layer = layer;
  s.dtype = TP_BF16;
  s.batch = batch;
  s.seq = seq;
  s.dim = m->dim;
  s.n_heads = m->n_heads;
  s.n_kv_heads = m->n_kv_heads;
  s.head_dim = m->head_dim;
  s.ffn_hidden = m->ffn_hidden;
  s.sp = 1;
  s.backward = backward;
  return s;
}

static void block_case(tp_group *g) {
  /* 8b's FFN: tensors of 8 to 112 MiB, so the driver's 2 MiB pages hide little */
  const tp_block_shape shape = shape_of("8b", TP_LAYER_FFN, 1, 1024, 1);
  tp_block_plan plan;
  if (tp_block_plan_make(g, &shape, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &plan) != TP_OK) {
    check(0, "ffn plan: %s", tp_last_message());
    return;
  }
  const int64_t used0 = driver_used(), live0 = ledger_live();
  tp_block_tensors t;
  tp_alloc_owner outer = tp_device_enter(CASE_OWNER);
  tp_rc rc = tp_block_alloc(g, &plan, 1, &t);
  tp_device_leave(outer);
  outer = tp_device_enter(TEST_CONFIG);
  if (rc == TP_OK) rc = tp_block_prepare(g, &plan);
  tp_device_leave(outer);
  if (rc != TP_OK) {
    check(0, "ffn tensors and prepare: %s", tp_last_message());
    return;
  }
  const int64_t used1 = driver_used(), live1 = ledger_live();
  const int64_t tensors = block_case_bytes(&plan);
  check(live_of(CASE_OWNER) == tensors,
        "ffn fwd+bwd tensors: the case holds %lld bytes, block.h "
        "lists %lld",
        (long long)live_of(CASE_OWNER), (long long)tensors);
  /* small tensors may land in a 2 MiB page the driver had partly filled already */
  check(used1 - used0 >= live1 - live0 - 2 * MIB,
        "the driver's reading rose by %lld bytes, at least the %lld the ledger allocated (less "
        "one 2 MiB page)",
        (long long)(used1 - used0), (long long)(live1 - live0));
  const tp_alloc_owner both[] = {CASE_OWNER, TEST_CONFIG};
  int64_t peak = 0;
  outer = tp_device_enter(TEST_CONFIG);
  rc = tp_device_watch_begin(both, 2);
  if (rc == TP_OK) rc = tp_block_step(g, &plan, &t);
  if (rc == TP_OK && cudaStreamSynchronize(g->main_stream) != cudaSuccess)
    rc = TP_FAIL(TP_ECUDA, "synchronise");
  const tp_rc watched = tp_device_watch_end(&peak);
  tp_device_leave(outer);
  const int64_t want =
      tensors + (int64_t)plan.scratch_bytes + (int64_t)tp_gemm_workspace_bytes(g->gemm);
  check(rc == TP_OK && watched == TP_OK && peak == want,
        "a step's joint peak %lld = tensors + scratch %zu + cuBLASLt workspace = %lld (%s)",
        (long long)peak, plan.scratch_bytes, (long long)want, rc == TP_OK ? "" : tp_last_message());
  tp_block_free(&t);
  check(tp_device_owner_release(TEST_CONFIG) == TP_OK &&
            tp_device_owner_release(CASE_OWNER) == TP_OK,
        "every tensor freed: the owners released");
}

/* ---- 3. what tpbench recorded -----------------------------------------------------------------
 */

typedef struct db_row {
  char kind[16], model[32], proj[16], layer[16], dtype[16], pass[16];
  int64_t tp, batch, seqlen, tokens, m, n, k, n_weights, sp, save_gathered;
  int64_t alloc_peak, peak_mem;
  int have_alloc;
} db_row;

static void text_col(sqlite3_stmt *s, int i, char *out, size_t cap) {
  const unsigned char *t = sqlite3_column_text(s, i);
  snprintf(out, cap, "%s", t ? (const char *)t : "");
}

/* Every configuration recorded ok, with its result. */
static int read_rows(const char *path, db_row *rows, int cap, int *n) {
  sqlite3 *db = NULL;
  *n = 0;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    printf("cannot open %s: %s\n", path, db ? sqlite3_errmsg(db) : "no memory");
    sqlite3_close(db);
    return -1;
  }
  const char *sql =
      "SELECT c.kind, c.model, c.proj, c.layer, c.dtype, c.pass, c.tp, c.batch, c.seqlen, "
      "c.tokens, c.m, c.n, c.k, c.n_weights, c.sp, c.save_gathered, r.alloc_peak_bytes, "
      "r.peak_mem_bytes FROM configs c JOIN results r ON r.config_id = c.id "
      "WHERE c.status = 'ok' ORDER BY c.id";
  sqlite3_stmt *s = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
  while (rc == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW && *n < cap) {
    db_row *r = &rows[(*n)++];
    memset(r, 0, sizeof *r);
    text_col(s, 0, r->kind, sizeof r->kind);
    text_col(s, 1, r->model, sizeof r->model);
    text_col(s, 2, r->proj, sizeof r->proj);
    text_col(s, 3, r->layer, sizeof r->layer);
    text_col(s, 4, r->dtype, sizeof r->dtype);
    text_col(s, 5, r->pass, sizeof r->pass);
    int64_t *ints[] = {&r->tp, &r->batch, &r->seqlen,    &r->tokens, &r->m,
                       &r->n,  &r->k,     &r->n_weights, &r->sp,     &r->save_gathered};
    for (int i = 0; i < 10; ++i) *ints[i] = sqlite3_column_int64(s, 6 + i);
    r->have_alloc = sqlite3_column_type(s, 16) != SQLITE_NULL;
    r->alloc_peak = sqlite3_column_int64(s, 16);
    r->peak_mem = sqlite3_column_int64(s, 17);
  }
  if (rc != SQLITE_OK) printf("query: %s\n", sqlite3_errmsg(db));
  sqlite3_finalize(s);
  sqlite3_close(db);
  return rc == SQLITE_OK ? 0 : -1;
}

static int has_backward(const db_row *r) { return strcmp(r->pass, "fwd") != 0; }

/* An fp8 op's own buffers (quantized copies, scales),
 * from a plan and prepare made here on bf16 weights of the row's shape. */
static int64_t fp8_own_bytes(tp_group *g, const db_row *r, tp_op op) {
  int dt = TP_BF16;
  if (tp_vocab_parse(&tp_dtype_vocab, r->dtype, &dt) != TP_OK) return -1;
  const tp_fp8_linear_desc d = {(tp_dtype)dt,
                                op,
                                r->tokens,
                                r->k,
                                r->n,
                                (int)r->n_weights,
                                has_backward(r),
                                TP_BACKEND_STOCK,
                                TP_SCHED_AUTO,
                                0,
                                TP_COMM_NONE};
  tp_fp8_linear lin;
  void *w[TP_MAX_WEIGHTS] = {NULL};
  const tp_alloc_owner outer = tp_device_enter(TEST_CONFIG);
  tp_rc rc = tp_fp8_linear_plan(g, &d, &lin);
  for (int i = 0; rc == TP_OK && i < d.n_weights; ++i) {
    rc = tp_device_malloc(&w[i], (size_t)(d.out_features * d.in_features) * 2);
    if (rc == TP_OK &&
        tp_launch_fill_random(TP_BF16, w[i], (size_t)(d.out_features * d.in_features),
                              (uint64_t)i + 1, 0.1f, g->main_stream) != cudaSuccess)
      rc = TP_FAIL(TP_ECUDA, "fill");
  }
  if (rc == TP_OK) rc = tp_fp8_linear_prepare(&lin, (const void *const *)w, g->main_stream);
  const int64_t own = rc == TP_OK ? (int64_t)tp_fp8_linear_workspace_bytes(&lin) : -1;
  if (rc != TP_OK) printf("fp8 plan: %s\n", tp_last_message());
  tp_fp8_linear_release(&lin);
  for (int i = 0; i < TP_MAX_WEIGHTS; ++i) tp_device_release(w[i]);
  tp_device_leave(outer);
  return own;
}

/* What an ops configuration holds: the case's tensors, its own buffers, its
 * requests of the group's scratch and cuBLASLt workspace. */
static int64_t ops_expected(tp_group *g, const db_row *r) {
  const tp_op op = strcmp(r->proj, "w13") == 0 ? TP_OP_AG_LINEAR_MULTI : TP_OP_AG_LINEAR;
  tp_linear_desc d;
  memset(&d, 0, sizeof d);
  d.op = op;
  d.dtype = TP_BF16; /* an fp8 case's tensors are bf16 */
  d.tokens = r->tokens;
  d.in_features = r->k;
  d.out_features = r->n; /* TP 1: the whole weight */
  d.n_weights = (int)r->n_weights;
  d.backward = has_backward(r);
  d.sp = 1;
  d.save_gathered = (int)r->save_gathered;
  tp_linear_plan stock, alone;
  if (tp_linear_plan_make(g, &d, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &stock) != TP_OK ||
      tp_linear_plan_make(g, &d, TP_BACKEND_GEMM_ONLY, TP_SCHED_AUTO, 0, &alone) != TP_OK) {
    printf("ops plan: %s\n", tp_last_message());
    return -1;
  }
  const int64_t tensors = ops_case_bytes(&stock);
  int dt = TP_BF16;
  if (tp_vocab_parse(&tp_dtype_vocab, r->dtype, &dt) != TP_OK) return -1;
  const int64_t gemm_ws = (int64_t)tp_gemm_workspace_bytes(g->gemm);
  if (tp_dtype_is_fp8((tp_dtype)dt)) { /* its own buffers and the group's cuBLASLt workspace */
    const int64_t own = fp8_own_bytes(g, r, op);
    return own < 0 ? -1 : tensors + own + gemm_ws;
  }
  if (strcmp(r->kind, "op") == 0) return tensors + (int64_t)stock.workspace_bytes + gemm_ws;
  /* the GEMM alone: a private scratch of the stock op's size, its own and the stock plan's
   * requests of the group scratch */
  return tensors + (int64_t)stock.workspace_bytes +
         max64((int64_t)alone.workspace_bytes, (int64_t)stock.workspace_bytes) + gemm_ws;
}

static int64_t run_expected(tp_group *g, const db_row *r) {
  tp_layer layer = TP_LAYER_BLOCK;
  if (strcmp(r->layer, tp_layer_name(TP_LAYER_FFN)) == 0) layer = TP_LAYER_FFN;
  if (strcmp(r->layer, tp_layer_name(TP_LAYER_ATTENTION)) == 0) layer = TP_LAYER_ATTENTION;
  tp_block_shape shape = shape_of(r->model, layer, r->batch, r->seqlen, has_backward(r));
  shape.sp = (int)r->sp;
  shape.save_gathered = (int)r->save_gathered;
  tp_block_plan stock, alone;
  if (tp_block_plan_make(g, &shape, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &stock) != TP_OK ||
      tp_block_plan_make(g, &shape, TP_BACKEND_GEMM_ONLY, TP_SCHED_AUTO, 0, &alone) != TP_OK) {
    printf("block plan: %s\n", tp_last_message());
    return -1;
  }
  const int64_t tensors = block_case_bytes(&stock);
  const int64_t gemm_ws = (int64_t)tp_gemm_workspace_bytes(g->gemm);
  if (strcmp(r->kind, "layer") == 0) return tensors + (int64_t)stock.scratch_bytes + gemm_ws;
  /* the GEMMs alone: a private scratch per projection of the stock layer's size */
  int64_t own = 0;
  for (int k = 0; k < TP_N_PROJ; ++k)
    if (stock.has[k]) own += (int64_t)stock.proj[k].workspace_bytes;
  return tensors + own + max64((int64_t)alone.scratch_bytes, (int64_t)stock.scratch_bytes) +
         gemm_ws;
}

enum { MAX_ROWS = 64 };

static void recorded(tp_group *g, const char *path, int want_rows, int is_ops) {
  db_row rows[MAX_ROWS];
  int n = 0;
  if (read_rows(path, rows, MAX_ROWS, &n) != 0) {
    check(0, "%s readable", path);
    return;
  }
  check(n == want_rows, "%s: %d configurations ok (want %d)", is_ops ? "ops" : "run", n, want_rows);
  for (int i = 0; i < n; ++i) {
    const db_row *r = &rows[i];
    const int64_t want = is_ops ? ops_expected(g, r) : run_expected(g, r);
    check(r->tp == 1 && r->have_alloc && want > 0 && r->alloc_peak == want,
          "%s %s %s %s %s T=%lld: alloc_peak_bytes %lld, from the plan %lld", r->kind,
          is_ops ? r->proj : r->layer, r->dtype, r->pass, r->model, (long long)r->tokens,
          (long long)r->alloc_peak, (long long)want);
    check(r->peak_mem >= r->alloc_peak, "  the driver's peak_mem_bytes %lld >= alloc_peak_bytes",
          (long long)r->peak_mem);
  }
}

enum { MIX_SIZES = 2 };
static const int64_t mix_seqlens[MIX_SIZES] = {128, 256};

/* A graph=mixed configuration: as run_expected, with the tensors of every
 * size of its mix (allocated together under the case's owner). */
static void recorded_mix(tp_group *g, const char *path, int want_rows) {
  db_row rows[MAX_ROWS];
  int n = 0;
  if (read_rows(path, rows, MAX_ROWS, &n) != 0) {
    check(0, "%s readable", path);
    return;
  }
  check(n == want_rows, "run graph=mixed: %d configurations ok (want %d)", n, want_rows);
  for (int i = 0; i < n; ++i) {
    const db_row *r = &rows[i];
    int64_t want = run_expected(g, r);
    for (int k = 0; want > 0 && k < MIX_SIZES; ++k) {
      if (mix_seqlens[k] == r->seqlen) continue;
      tp_block_shape shape = shape_of(r->model, TP_LAYER_FFN, r->batch, mix_seqlens[k], 1);
      tp_block_plan other;
      if (tp_block_plan_make(g, &shape, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &other) != TP_OK) {
        printf("block plan: %s\n", tp_last_message());
        want = -1;
        break;
      }
      want += block_case_bytes(&other);
    }
    check(r->tp == 1 && r->have_alloc && want > 0 && r->alloc_peak == want,
          "graph=mixed %s %s T=%lld: alloc_peak_bytes %s %lld, from the plans %lld", r->kind,
          r->layer, (long long)r->tokens, r->have_alloc ? "" : "NULL", (long long)r->alloc_peak,
          (long long)want);
  }
}

static int body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  failures = 0;
  ledger_on_the_device();
  block_case(g);
  recorded(g, ops_db, 16, 1);
  recorded(g, run_db, 8, 0);
  recorded_mix(g, mix_db, 2 * MIX_SIZES); /* the stock layer and the GEMMs alone per size */
  fflush(stdout);
  return failures ? 1 : 0;
}

/* ---- the test ---------------------------------------------------------------------------------
 */

static void run_tpbench(const char *what, char *const argv[]) {
  rp_result r = rp_run(argv, 600);
  if (r.status != 0)
    fail_msg("tpbench %s: exit %d\nstdout:\n%.3000s\nstderr:\n%.6000s", what, r.status,
             r.out ? r.out : "", r.err ? r.err : "");
  free(r.out);
  free(r.err);
}

static void test_alloc_peak_at_tp1(void **state) {
  (void)state;
  char dir[] = "/tmp/tpbench-alloc-peak-XXXXXX";
  assert_non_null(mkdtemp(dir));
  snprintf(ops_db, sizeof ops_db, "%s/ops.db", dir);
  snprintf(run_db, sizeof run_db, "%s/run.db", dir);
  snprintf(mix_db, sizeof mix_db, "%s/mix.db", dir);
  char *ops[] = {TPBENCH_EXE, "ops",      "--gpus",   "1",           "--tp",     "1",
                 "--models",  "debug",    "--projs",  "qkv,w13",     "--tokens", "512",
                 "--dtype",   "bf16,fp8", "--pass",   "fwd,fwd+bwd", "--warmup", "2",
                 "--iters",   "5",        "--rounds", "2",           "--quiet",  "--db",
                 ops_db,      NULL};
  char *run[] = {TPBENCH_EXE, "run",         "--gpus",  "1",
                 "--axis",    "model=debug", "--axis",  "layer=ffn,attention",
                 "--axis",    "seqlen=256",  "--axis",  "pass=fwd,fwd+bwd",
                 "--axis",    "graph=off",   "--axis",  "tp=1",
                 "--warmup",  "2",           "--iters", "5",
                 "--rounds",  "2",           "--quiet", "--db",
                 run_db,      NULL};
  char *mix[] = {TPBENCH_EXE, "run",
                 "--gpus",    "1",
                 "--axis",    "model=debug",
                 "--axis",    "layer=ffn",
                 "--axis",    "seqlen=128,256",
                 "--axis",    "pass=fwd+bwd",
                 "--axis",    "graph=mixed",
                 "--axis",    "tp=1",
                 "--axis",    "stock=plain",
                 "--warmup",  "2",
                 "--iters",   "5",
                 "--rounds",  "2",
                 "--quiet",   "--db",
                 mix_db,      NULL};
  run_tpbench("ops", ops);
  run_tpbench("run", run);
  run_tpbench("run graph=mixed", mix);
  assert_int_equal(gpu_run_group(1, body, NULL), 0);
  unlink(ops_db);
  unlink(run_db);
  unlink(mix_db);
  rmdir(dir);
}

int main(void) {
  if (gpu_device_count() == 0) {
    printf("no CUDA device: GPU test skipped\n");
    return GPU_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_alloc_peak_at_tp1)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
