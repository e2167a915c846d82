/*
 * test_drift.c — GPU test of `tpbench drift`'s pieces: the NCCL-order sum
 * kernel (tp_sum_chain.h) and the training kernels (tp_train.h) against
 * host references; the training steps (bench/gpu/drift.c) at TP 1 — two
 * stock runs bit-identical step for step, the loss falling under SGD on a
 * batch it can learn, a planted change (another seed) seen as a
 * difference, dist_gemm and rs_sum nccl for stock rejected with their
 * reasons (the rejections at every degree; at TP 8 the debug model's own
 * heads rejected with the reason); and at TP 2, 4 and 8 the fused
 * reduce-scatter's rs_sum=nccl against stock bit for bit, on the ops alone
 * and over training steps (loss and grad norm bit-identical). The block is
 * the debug model's where its heads divide by the degree, at TP 8 16 heads
 * and 8 KV heads of 16 (printed per case).
 *
 * Cases per TP degree (gpu_harness.h): NAME/tpN, `--tp LIST`, a degree
 * above the rank slots reported skipped.
 *
 * The block and drift code is compiled in (it lives in the tpbench binary
 * otherwise). Exits 77 (skipped) without a GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/gpu/drift.h"
#include "kernels/tp_device.h"
#include "kernels/tp_sum_chain.h"
#include "kernels/tp_train.h"
#include "tests/gpu/gpu_harness.h"

/* Whether two doubles have the same 64 bits (-0.0 differs from 0.0, a NaN equals its copy). */
static int same_bits(double a, double b) {
  uint64_t x, y;
  memcpy(&x, &a, sizeof x);
  memcpy(&y, &b, sizeof y);
  return x == y;
}

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "rank %d: %s:%d: ", g->rank, __FILE__, __LINE__);                            \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

#define CUDA_OK(call) CHECK((call) == cudaSuccess, "%s failed", #call)

/* ---- kernels ------------------------------------------------------------------------------ */

static float round_to(tp_dtype dt, float v) {
  return dt == TP_BF16 ? gpu_bf16_to_float(gpu_float_to_bf16(v)) : v;
}

/* The chain against the host's: every add rounded, in order; and not the one-rounding sum
 * wherever the two differ (the reference would catch an fp32 accumulation). */
static int check_sum_chain(tp_group *g, tp_dtype dt, int n_src, size_t count, size_t offset) {
  int failures = 0;
  const size_t e = tp_dtype_bytes(dt), bytes = (count + offset) * e;
  void *host[TP_MAX_WORLD], *dev[TP_MAX_WORLD], *out = NULL;
  const void *srcs[TP_MAX_WORLD];
  for (int r = 0; r < n_src; ++r) {
    host[r] = malloc(bytes);
    gpu_fill_host(dt, host[r], count + offset, 40 + (uint64_t)r, r == 0 ? 64.0f : 1.0f);
    CUDA_OK(cudaMalloc(&dev[r], bytes));
    CUDA_OK(cudaMemcpy(dev[r], host[r], bytes, cudaMemcpyHostToDevice));
    srcs[r] = (const char *)dev[r] + offset * e;
  }
  CUDA_OK(cudaMalloc(&out, bytes));
  CUDA_OK(tp_launch_sum_chain(dt, (char *)out + offset * e, srcs, n_src, count, g->main_stream));
  CUDA_OK(cudaStreamSynchronize(g->main_stream));
  void *got = malloc(bytes);
  CUDA_OK(cudaMemcpy(got, out, bytes, cudaMemcpyDeviceToHost));
  size_t wrong = 0, once_differs = 0;
  for (size_t i = offset; i < offset + count; ++i) {
    float acc = (float)gpu_host_value(dt, host[0], i), once = acc;
    for (int r = 1; r < n_src; ++r) {
      acc = round_to(dt, acc + (float)gpu_host_value(dt, host[r], i));
      once += (float)gpu_host_value(dt, host[r], i);
    }
    const double v = gpu_host_value(dt, got, i);
    wrong += v != (double)acc;
    once_differs += round_to(dt, once) != acc;
  }
  CHECK(wrong == 0, "sum_chain %s n=%d count=%zu offset=%zu: %zu of %zu elements wrong",
        tp_dtype_name(dt), n_src, count, offset, wrong, count);
  if (dt == TP_BF16 && n_src >= 3)
    CHECK(once_differs > 0, "the data never tells the chain from one rounding: weak test");
  for (int r = 0; r < n_src; ++r) {
    free(host[r]);
    CUDA_OK(cudaFree(dev[r]));
  }
  free(got);
  CUDA_OK(cudaFree(out));
  return failures;
}

static int body_sum_chain(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  int failures = 0;
  const tp_dtype dts[] = {TP_BF16, TP_FP32};
  for (int d = 0; d < 2; ++d)
    for (int n = 1; n <= 4; ++n) {
      failures += check_sum_chain(g, dts[d], n, 4096, 0); /* 16-byte accesses */
      failures += check_sum_chain(g, dts[d], n, 1001, 1); /* element by element */
    }
  const void *none[1] = {NULL};
  CHECK(tp_launch_sum_chain(TP_FP8, NULL, none, 1, 8, g->main_stream) == cudaErrorInvalidValue,
        "an fp8 element type accepted");
  CHECK(tp_launch_sum_chain(TP_BF16, NULL, none, 0, 8, g->main_stream) == cudaErrorInvalidValue,
        "no source accepted");
  return failures ? 1 : 0;
}

/* Sums of squares (fixed order: the same bits twice, near the host's fp64 sum), row sums of
 * squared errors, one SGD and one AdamW step against the host. */
static int body_train_kernels(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  int failures = 0;
  const int64_t rows = 37, cols = 1000;
  const size_t n = (size_t)(rows * cols);
  uint16_t *hy = malloc(n * 2), *ht = malloc(n * 2), *hg = malloc(n * 2);
  float *hm = malloc(n * sizeof(float)), *rows_got = malloc((size_t)rows * sizeof(float));
  gpu_fill_host(TP_BF16, hy, n, 1, 1.0f);
  gpu_fill_host(TP_BF16, ht, n, 2, 1.0f);
  gpu_fill_host(TP_BF16, hg, n, 3, 0.01f);
  for (size_t i = 0; i < n; ++i) hm[i] = 0.02f * (float)gpu_host_value(TP_BF16, hy, i);
  void *y = NULL, *t = NULL, *grad = NULL, *w = NULL;
  float *row_sums = NULL, *partials = NULL, *master = NULL, *m = NULL, *v = NULL;
  double *sums = NULL;
  CUDA_OK(cudaMalloc(&y, n * 2));
  CUDA_OK(cudaMalloc(&t, n * 2));
  CUDA_OK(cudaMalloc(&grad, n * 2));
  CUDA_OK(cudaMalloc(&w, n * 2));
  CUDA_OK(cudaMalloc((void **)&row_sums, (size_t)rows * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&partials, TP_SUM_SQUARES_PARTIALS * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&sums, 2 * sizeof(double)));
  CUDA_OK(cudaMalloc((void **)&master, n * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&m, n * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&v, n * sizeof(float)));
  CUDA_OK(cudaMemcpy(y, hy, n * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(t, ht, n * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(grad, hg, n * 2, cudaMemcpyHostToDevice));
  cudaStream_t s = g->main_stream;
  CUDA_OK(tp_launch_sum_squares(TP_BF16, y, n, partials, sums, s));
  CUDA_OK(tp_launch_sum_squares(TP_BF16, y, n, partials, sums + 1, s));
  CUDA_OK(tp_launch_sq_err_row_sums(TP_BF16, y, t, rows, cols, row_sums, s));
  CUDA_OK(cudaStreamSynchronize(s));
  double got[2];
  CUDA_OK(cudaMemcpy(got, sums, sizeof got, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(rows_got, row_sums, (size_t)rows * sizeof(float), cudaMemcpyDeviceToHost));
  double want = 0;
  for (size_t i = 0; i < n; ++i)
    want += gpu_host_value(TP_BF16, hy, i) * gpu_host_value(TP_BF16, hy, i);
  CHECK(same_bits(got[0], got[1]), "sum of squares: %.17g then %.17g", got[0], got[1]);
  CHECK(fabs(got[0] - want) <= 1e-5 * want, "sum of squares %.9g, host %.9g", got[0], want);
  for (int64_t r = 0; r < rows; ++r) {
    double row = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double d = gpu_host_value(TP_BF16, hy, (size_t)(r * cols + c)) -
                 gpu_host_value(TP_BF16, ht, (size_t)(r * cols + c));
      row += d * d;
    }
    CHECK(fabs(rows_got[r] - row) <= 1e-5 * row, "row %lld: %.9g, host %.9g", (long long)r,
          rows_got[r], row);
  }
  /* SGD: master - lr g; AdamW's first step moves every weight by about lr against its gradient */
  const float lr = 0.5f;
  CUDA_OK(cudaMemcpy(master, hm, n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(tp_launch_sgd_step(TP_BF16, w, master, grad, n, lr, s));
  float *after = malloc(n * sizeof(float));
  uint16_t *hw = malloc(n * 2);
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(after, master, n * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(hw, w, n * 2, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const float want_m = hm[i] - lr * (float)gpu_host_value(TP_BF16, hg, i);
    bad += fabsf(after[i] - want_m) > 1e-6f * fmaxf(1.0f, fabsf(want_m)) ||
           hw[i] != gpu_float_to_bf16(after[i]);
  }
  CHECK(bad == 0, "sgd: %zu of %zu elements wrong", bad, n);
  CUDA_OK(cudaMemcpy(master, hm, n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(m, 0, n * sizeof(float)));
  CUDA_OK(cudaMemset(v, 0, n * sizeof(float)));
  const tp_adamw_step a = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f - 0.9f, 1.0f - 0.95f};
  CUDA_OK(tp_launch_adamw_step(TP_BF16, w, master, m, v, grad, n, &a, s));
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(after, master, n * sizeof(float), cudaMemcpyDeviceToHost));
  bad = 0;
  size_t moved = 0;
  for (size_t i = 0; i < n; ++i) {
    /* PyTorch's AdamW, step 1, in double: m̂ = g, v̂ = g², about lr against the gradient's sign */
    const double gi = gpu_host_value(TP_BF16, hg, i), mi = 0.1 * gi, vi = 0.05 * gi * gi;
    const double want_m =
        hm[i] * (1.0 - 1e-3 * 0.1) - (1e-3 / 0.1) * mi / (sqrt(vi) / sqrt(0.05) + 1e-8);
    bad += fabs(after[i] - want_m) > 1e-6;
    moved += fabs(gi) > 1e-4 && fabs(fabs(after[i] - hm[i] * (1.0 - 1e-4)) - 1e-3) < 1e-5;
  }
  CHECK(bad == 0, "adamw: %zu of %zu elements off its first step", bad, n);
  CHECK(moved > n / 2, "adamw's first step moved only %zu of %zu weights by lr", moved, n);
  void *const frees[] = {y, t, grad, w, row_sums, partials, sums, master, m, v};
  for (size_t i = 0; i < sizeof frees / sizeof frees[0]; ++i) CUDA_OK(cudaFree(frees[i]));
  free(hy);
  free(ht);
  free(hg);
  free(hm);
  free(rows_got);
  free(after);
  free(hw);
  return failures ? 1 : 0;
}

/* ---- training steps ------------------------------------------------------------------------ */

enum { STEPS = 3 };

/* The debug model's heads (bench/matrix/presets.c): 8 query and 4 KV heads of 32. */
enum { DEBUG_HEADS = 8, DEBUG_KV_HEADS = 4, DEBUG_DIM = 256 };

/* The debug model's block, 2 x 256 tokens: small enough for seconds, every part of a block. */
static tp_block_shape debug_block(void) {
  tp_block_shape s;
  memset(&s, 0, sizeof s);
  s.layer = TP_LAYER_BLOCK;
  s.dtype = TP_BF16;
  s.batch = 2;
  s.seq = 256;
  s.dim = 256;
  s.n_heads = 8;
  s.n_kv_heads = 4;
  s.head_dim = 32;
  s.ffn_hidden = 768;
  s.sp = 1;
  s.backward = 1;
  return s;
}

/* The block trained at TP `world`: the debug block where its 4 KV heads divide by the degree;
 * at TP 8 twice the heads at half the size (16 and 8 of 16, the same dim and FFN). */
static tp_block_shape block_at(int world) {
  tp_block_shape s = debug_block();
  if (s.n_kv_heads % world == 0) return s;
  s.n_kv_heads = world;
  s.n_heads = 2 * (int64_t)world;
  s.head_dim = s.dim / s.n_heads;
  return s;
}

static void print_block(int world) {
  const tp_block_shape s = block_at(world);
  printf("TP %d: block batch %lld x seq %lld (%lld rows per rank), dim %lld, %lld heads and %lld "
         "KV heads of %lld, FFN %lld\n",
         world, (long long)s.batch, (long long)s.seq, (long long)(s.batch * s.seq / world),
         (long long)s.dim, (long long)s.n_heads, (long long)s.n_kv_heads, (long long)s.head_dim,
         (long long)s.ffn_hidden);
}

static const tp_drift_variant STOCK = {TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, TP_RS_SUM_EPILOGUE};

typedef struct trained {
  tp_drift_step steps[STEPS];
  double ms[STEPS];
  tp_rc rc;
} trained;

static trained train(tp_group *g, tp_rdzv *rdzv, const tp_drift_variant *v,
                     const tp_drift_recipe *r) {
  trained out;
  memset(&out, 0, sizeof out);
  tp_block_shape shape = block_at(g->world);
  tp_block_plan plan;
  out.rc = tp_drift_plan(g, &shape, v, &plan);
  if (out.rc == TP_OK) out.rc = tp_drift_train(g, gpu_exchange, rdzv, &plan, r, out.steps, out.ms);
  if (out.rc != TP_OK) fprintf(stderr, "rank %d: training: %s\n", g->rank, tp_last_error());
  return out;
}

/* Steps of a and b with the same 64 bits, loss and norm both. */
static int identical_steps(const trained *a, const trained *b) {
  int n = 0;
  for (int k = 0; k < STEPS; ++k)
    n += same_bits(a->steps[k].loss, b->steps[k].loss) &&
         same_bits(a->steps[k].grad_norm, b->steps[k].grad_norm);
  return n;
}

static void print_steps(const tp_group *g, const char *what, const trained *t) {
  if (g->rank != 0) return;
  for (int k = 0; k < STEPS; ++k)
    printf("%s step %d: loss %.17g grad norm %.17g (%.1f ms)\n", what, k, t->steps[k].loss,
           t->steps[k].grad_norm, t->ms[k]);
}

static int all_finite(const trained *t) {
  for (int k = 0; k < STEPS; ++k)
    if (!isfinite(t->steps[k].loss) || !isfinite(t->steps[k].grad_norm)) return 0;
  return 1;
}

/* TP 1: stock twice, bit-identical; SGD on one batch learns it; another seed differs. */
static int body_stock(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)ctx;
  int failures = 0;
  /* The step size: 1 % of the loss at first order, from one probing step (a mean squared error's
   * gradient scale depends on the shape, so no fixed rate fits). */
  tp_drift_recipe probe = {1, 1, TP_DRIFT_SGD, 1e-30, 5, 1};
  trained p = train(g, rdzv, &STOCK, &probe);
  CHECK(p.rc == TP_OK && all_finite(&p) && p.steps[0].grad_norm > 0, "the probing step");
  if (failures) return 1;
  const double lr = 0.01 * p.steps[0].loss / (p.steps[0].grad_norm * p.steps[0].grad_norm);
  if (g->rank == 0) printf("SGD learning rate %.6g\n", lr);
  tp_drift_recipe sgd = {STEPS, 1, TP_DRIFT_SGD, lr, 5, 1};
  trained a = train(g, rdzv, &STOCK, &sgd), b = train(g, rdzv, &STOCK, &sgd);
  CHECK(a.rc == TP_OK && b.rc == TP_OK, "stock training failed");
  print_steps(g, "stock sgd", &a);
  CHECK(all_finite(&a) && all_finite(&b), "a value not finite");
  CHECK(identical_steps(&a, &b) == STEPS, "stock twice: %d of %d steps bit-identical",
        identical_steps(&a, &b), STEPS);
  CHECK(same_bits(a.steps[0].loss, p.steps[0].loss), "the probe's step 0 is the run's step 0");
  for (int k = 1; k < STEPS; ++k)
    CHECK(a.steps[k].loss < a.steps[k - 1].loss, "SGD on its one batch: loss %.9g after %.9g",
          a.steps[k].loss, a.steps[k - 1].loss);
  /* the planted change: another seed, other weights and data */
  tp_drift_recipe other = sgd;
  other.seed = 6;
  trained c = train(g, rdzv, &STOCK, &other);
  CHECK(c.rc == TP_OK && all_finite(&c), "the other seed's training");
  CHECK(!same_bits(c.steps[0].loss, a.steps[0].loss) &&
            !same_bits(c.steps[0].grad_norm, a.steps[0].grad_norm),
        "another seed gave the same loss or norm");
  /* AdamW on fresh batches, a stack of two blocks: deterministic too */
  tp_drift_recipe adamw = {STEPS, 2, TP_DRIFT_ADAMW, 1e-4, 9, 0};
  trained d = train(g, rdzv, &STOCK, &adamw), e = train(g, rdzv, &STOCK, &adamw);
  print_steps(g, "stock adamw x2", &d);
  CHECK(d.rc == TP_OK && e.rc == TP_OK && all_finite(&d), "AdamW training");
  CHECK(identical_steps(&d, &e) == STEPS, "AdamW twice: %d of %d steps bit-identical",
        identical_steps(&d, &e), STEPS);
  CHECK(!same_bits(d.steps[0].loss, d.steps[1].loss), "fresh batches gave step 1 step 0's loss");
  return failures ? 1 : 0;
}

/* Rejections with their reasons, before any GPU work. */
static int body_rejections(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  int failures = 0;
  tp_block_shape shape = block_at(g->world);
  tp_block_plan plan;
  const tp_drift_variant stock_nccl = {TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, TP_RS_SUM_NCCL};
  CHECK(tp_drift_plan(g, &shape, &stock_nccl, &plan) == TP_EREJECT &&
            strstr(tp_last_message(), "stock sums in NCCL itself"),
        "rs_sum nccl for stock: %s", tp_last_message());
  if (g->world == 1) {
    const tp_drift_variant dist = {TP_BACKEND_DIST, TP_SCHED_CE, 0, TP_RS_SUM_NCCL};
    CHECK(tp_drift_plan(g, &shape, &dist, &plan) == TP_EREJECT &&
              strstr(tp_last_message(), "dist_gemm needs TP > 1"),
          "dist_gemm at TP 1: %s", tp_last_message());
  }
  if (DEBUG_KV_HEADS % g->world != 0) {
    /* the debug model's own heads do not split this far: rejected, and why */
    const tp_block_shape debug = debug_block();
    char words[96];
    snprintf(words, sizeof words, "n_heads %d and n_kv_heads %d must both divide by TP %d",
             DEBUG_HEADS, DEBUG_KV_HEADS, g->world);
    CHECK(tp_drift_plan(g, &debug, &STOCK, &plan) == TP_EREJECT && strstr(tp_last_message(), words),
          "the debug model's heads at TP %d: %s", g->world, tp_last_message());
    if (g->rank == 0)
      printf("TP %d: the debug model's heads rejected: %s\n", g->world, tp_last_message());
  }
  shape.sp = 0;
  CHECK(tp_drift_plan(g, &shape, &STOCK, &plan) == TP_EREJECT &&
            strstr(tp_last_message(), "sequence parallelism"),
        "sp off: %s", tp_last_message());
  if (g->rank == 0) printf("TP %d: rejections checked, %d failure(s)\n", g->world, failures);
  return failures ? 1 : 0;
}

/* ---- TP 2 and up --------------------------------------------------------------------------- */

typedef struct op_buffers {
  void *x, *w[2], *y[2], *dy[2], *dx, *dw[2];
} op_buffers;

static void *random_buffer(int *failures_out, size_t count, uint64_t seed, float scale,
                           cudaStream_t s) {
  void *p = NULL;
  if (cudaMalloc(&p, count * 2) != cudaSuccess ||
      tp_launch_fill_random(TP_BF16, p, count, seed, scale, s) != cudaSuccess)
    (*failures_out)++;
  return p;
}

/* Runs desc's pass (forward, or backward when desc->backward) with backend and returns the output
 * the reduce-scatter makes (y[0], or dx) on the host; NULL on a failure. */
static void *run_op(tp_group *g, const tp_linear_desc *desc, tp_backend backend,
                    tp_schedule schedule, int chunks, const op_buffers *b, size_t out_count) {
  tp_linear_plan plan;
  if (tp_linear_plan_make(g, desc, backend, schedule, chunks, &plan) != TP_OK ||
      tp_linear_prepare(g, &plan) != TP_OK) {
    fprintf(stderr, "rank %d: plan: %s\n", g->rank, tp_last_error());
    return NULL;
  }
  tp_linear_tensors t;
  memset(&t, 0, sizeof t);
  t.x = b->x;
  for (int i = 0; i < desc->n_weights; ++i) {
    t.w[i] = b->w[i];
    t.y[i] = b->y[i];
    t.dy[i] = b->dy[i];
    t.dw[i] = b->dw[i];
  }
  t.dx = b->dx;
  tp_rc rc = desc->backward ? tp_linear_backward(g, &plan, &t) : tp_linear_forward(g, &plan, &t);
  void *host = malloc(out_count * 2);
  if (rc != TP_OK || cudaStreamSynchronize(g->main_stream) != cudaSuccess ||
      cudaMemcpy(host, desc->backward ? b->dx : b->y[0], out_count * 2, cudaMemcpyDeviceToHost) !=
          cudaSuccess) {
    fprintf(stderr, "rank %d: %s: %s\n", g->rank, plan.nvtx_fwd, tp_last_error());
    free(host);
    return NULL;
  }
  return host;
}

/* The reduce-scatter outputs of the ops (wo/w2's forward, w1/w3's backward dx) with rs_sum=nccl
 * against stock, byte for byte, for ce and sm and one or two chunks. */
static int body_ops_tp(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  int failures = 0;
  const int W = g->world;
  const int64_t T = 1024, K = 1024, N = 512, S = T / W;
  cudaStream_t s = g->main_stream;
  const uint64_t r = (uint64_t)g->rank * 1000;
  for (int side = 0; side < 2; ++side) {
    const int gather = side == 1; /* 0: linear_rs forward; 1: ag_linear_multi backward */
    tp_linear_desc d = {.op = gather ? TP_OP_AG_LINEAR_MULTI : TP_OP_LINEAR_RS,
                        .dtype = TP_BF16,
                        .tokens = T,
                        .in_features = K,
                        .out_features = N,
                        .n_weights = gather ? 2 : 1,
                        .backward = gather,
                        .sp = 1};
    op_buffers b;
    memset(&b, 0, sizeof b);
    const size_t x_n = (size_t)(gather ? S * K : T * (K / W));
    const size_t w_n = (size_t)(gather ? (N / W) * K : N * (K / W));
    const size_t y_n = (size_t)(gather ? T * (N / W) : S * N);
    b.x = random_buffer(&failures, x_n, r + 1, 1.0f, s);
    b.dx = random_buffer(&failures, x_n, r + 2, 1.0f, s);
    for (int i = 0; i < d.n_weights; ++i) {
      b.w[i] = random_buffer(&failures, w_n, r + 10 + (uint64_t)i, 1.0f / 32, s);
      b.dw[i] = random_buffer(&failures, w_n, r + 20 + (uint64_t)i, 1.0f, s);
      b.y[i] = random_buffer(&failures, y_n, r + 30 + (uint64_t)i, 1.0f, s);
      b.dy[i] = random_buffer(&failures, y_n, r + 40 + (uint64_t)i, 1.0f, s);
    }
    const size_t out_n = gather ? x_n : y_n;
    void *ref = failures ? NULL : run_op(g, &d, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &b, out_n);
    CHECK(ref != NULL, "%s stock", tp_op_name(d.op));
    const tp_schedule schedules[] = {TP_SCHED_CE, TP_SCHED_SM};
    for (int k = 0; ref && k < 2; ++k)
      for (int chunks = 1; chunks <= 2; ++chunks)
        for (int mode = 0; mode < 2; ++mode) {
          d.rs_sum = mode ? TP_RS_SUM_NCCL : TP_RS_SUM_EPILOGUE;
          void *got = run_op(g, &d, TP_BACKEND_DIST, schedules[k], chunks, &b, out_n);
          size_t differ = 0;
          for (size_t i = 0; got && i < out_n; ++i)
            differ += ((uint16_t *)got)[i] != ((uint16_t *)ref)[i];
          printf("rank %d: TP %d %s %s x%d rs_sum=%s: %zu of %zu elements differ from stock\n",
                 g->rank, W, tp_op_name(d.op), tp_schedule_name(schedules[k]), chunks,
                 tp_rs_sum_name(d.rs_sum), differ, out_n);
          CHECK(got != NULL, "%s dist_gemm", tp_op_name(d.op));
          if (mode) CHECK(differ == 0, "rs_sum=nccl: %zu elements differ from stock", differ);
          free(got);
        }
    free(ref);
    void *const all[] = {b.x,     b.dx,   b.w[0], b.w[1],  b.dw[0],
                         b.dw[1], b.y[0], b.y[1], b.dy[0], b.dy[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
      if (all[i]) CUDA_OK(cudaFree(all[i]));
  }
  return failures ? 1 : 0;
}

/* Training at TP W: dist_gemm ce and sm with rs_sum=nccl give stock's loss and grad norm bit for
 * bit; the epilogue's drift is printed (characterized, not judged). */
static int body_training_tp(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)ctx;
  int failures = 0;
  tp_drift_recipe r = {STEPS, 1, TP_DRIFT_ADAMW, 1e-4, 3, 0};
  trained stock = train(g, rdzv, &STOCK, &r);
  CHECK(stock.rc == TP_OK && all_finite(&stock), "stock training at TP %d", g->world);
  print_steps(g, "stock", &stock);
  const tp_schedule schedules[] = {TP_SCHED_CE, TP_SCHED_SM};
  for (int k = 0; stock.rc == TP_OK && k < 2; ++k)
    for (int mode = 0; mode < 2; ++mode) {
      const tp_drift_variant v = {TP_BACKEND_DIST, schedules[k], 0,
                                  mode ? TP_RS_SUM_NCCL : TP_RS_SUM_EPILOGUE};
      trained t = train(g, rdzv, &v, &r);
      char what[64];
      snprintf(what, sizeof what, "dist_gemm %s rs_sum=%s", tp_schedule_name(v.schedule),
               tp_rs_sum_name(v.rs_sum));
      print_steps(g, what, &t);
      CHECK(t.rc == TP_OK && all_finite(&t), "%s training", what);
      if (g->rank == 0)
        printf("%s: %d of %d steps bit-identical to stock\n", what, identical_steps(&stock, &t),
               STEPS);
      if (mode)
        CHECK(identical_steps(&stock, &t) == STEPS, "%s: %d of %d steps bit-identical to stock",
              what, identical_steps(&stock, &t), STEPS);
    }
  return failures ? 1 : 0;
}

/* ---- the tests, one case per TP degree ------------------------------------------------------ */

static void run_at_degree(void **state, gpu_body_fn body) {
  const int world = gpu_case_degree(state);
  print_block(world);
  assert_int_equal(gpu_run_group(world, body, NULL), 0);
}

static void test_sum_chain(void **state) {
  assert_int_equal(gpu_run_group(gpu_case_degree(state), body_sum_chain, NULL), 0);
}
static void test_train_kernels(void **state) {
  assert_int_equal(gpu_run_group(gpu_case_degree(state), body_train_kernels, NULL), 0);
}
static void test_stock_tp1(void **state) { run_at_degree(state, body_stock); }
static void test_rejections(void **state) { run_at_degree(state, body_rejections); }

/* rs_sum=nccl against stock on the ops alone: a peer needed (TP 2 up). */
static void test_ops(void **state) {
  const int world = gpu_case_degree(state);
  printf("TP %d: ops T 1024, K 1024, N 512 (%d rows per rank)\n", world, 1024 / world);
  assert_int_equal(gpu_run_group(world, body_ops_tp, NULL), 0);
}

/* Stock against dist_gemm over training steps (TP 2 up). */
static void test_training(void **state) { run_at_degree(state, body_training_tp); }

int main(int argc, char **argv) {
  const gpu_tp_test tests[] = {
      {"sum_chain", test_sum_chain, 1, 1},  {"train_kernels", test_train_kernels, 1, 1},
      {"stock", test_stock_tp1, 1, 1},      {"rejections", test_rejections, 1, GPU_MAX_DEGREE},
      {"ops", test_ops, 2, GPU_MAX_DEGREE}, {"training", test_training, 2, GPU_MAX_DEGREE},
  };
  return gpu_run_tp_tests("gpu_drift", tests, sizeof tests / sizeof tests[0], argc, argv);
}
