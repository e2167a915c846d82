/*
 * test_linear_forward.c — GPU test of the TP projections' forward pass.
 *
 * Every op (ag_linear, ag_linear_multi, linear_rs), dtype (bf16, fp32) and
 * schedule (stock; dist_gemm ce and sm at several chunk counts; auto) runs on
 * a real group of all visible GPUs, with batch 3 and the sequence sharded
 * (so a flattening that mixes batches fails), on random inputs with the
 * outputs poisoned first. Each rank checks its output against a float64 CPU
 * reference built from the unsharded tensors, and dist_gemm against stock:
 * bit-identical on the all-gather side (no reduction order differs), within
 * a stated tolerance on the reduce-scatter side. multimem and ring must be
 * rejected with a reason. Exit 77 (skipped) without a GPU.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu_harness.h"
#include "kernels/tp_device.h"
#include "kernels/tp_linear.h"

enum { BATCH = 3, SEQ = 128, D_IN = 256, D_OUT = 384 };

/* Tolerances, ||out - ref|| / ||ref||: bf16 output rounding is 2^-9 relative
 * per element; fp32 GEMM with K <= 384 stays far below 1e-5. */
static const double TOL_REF_BF16 = 8e-3, TOL_REF_FP32 = 1e-5;
static const double TOL_RS_VS_STOCK_BF16 = 8e-3, TOL_RS_VS_STOCK_FP32 = 1e-6;

typedef struct case_tensors {
  tp_dtype dt;
  tp_linear_desc desc;
  int rank, world;
  size_t e;
  void *x_full;                  /* [BATCH, SEQ, K] */
  void *w_full[TP_MAX_WEIGHTS];  /* [N, K] */
  void *x_shard, *w_shard[TP_MAX_WEIGHTS];
  double *ref[TP_MAX_WEIGHTS];   /* this rank's expected output */
  size_t x_elems, w_elems, y_elems;
} case_tensors;

static size_t idx_bsk(int b, int s, int k, int K) { return ((size_t)b * SEQ + (size_t)s) * (size_t)K + (size_t)k; }

/* Builds the shards of this rank and its float64 reference output. */
static void build_case(case_tensors *c, const tp_linear_plan *p) {
  const int W = c->world, r = c->rank, K = (int)c->desc.in_features, N = (int)c->desc.out_features;
  const int S_l = SEQ / W;
  c->e = tp_dtype_bytes(c->dt);
  c->x_full = malloc((size_t)BATCH * SEQ * (size_t)K * c->e);
  gpu_fill_host(c->dt, c->x_full, (size_t)BATCH * SEQ * (size_t)K, 11, 1.0f);
  for (int i = 0; i < c->desc.n_weights; ++i) {
    c->w_full[i] = malloc((size_t)N * (size_t)K * c->e);
    gpu_fill_host(c->dt, c->w_full[i], (size_t)N * (size_t)K, 100 + (uint64_t)i, 1.0f / sqrtf((float)K));
  }
  c->x_elems = tp_linear_x_elems(p);
  c->w_elems = tp_linear_w_elems(p);
  c->y_elems = tp_linear_y_elems(p);
  c->x_shard = malloc(c->x_elems * c->e);
  const int gather = c->desc.kind != TP_LINEAR_RS;
  /* Input shard, rows ordered (seq, batch): sequence outermost. */
  if (gather) {
    for (int s = 0; s < S_l; ++s)
      for (int b = 0; b < BATCH; ++b)
        memcpy((char *)c->x_shard + ((size_t)(s * BATCH + b) * (size_t)K) * c->e,
               (char *)c->x_full + idx_bsk(b, r * S_l + s, 0, K) * c->e, (size_t)K * c->e);
  } else {
    const int Kl = K / W;
    for (int s = 0; s < SEQ; ++s)
      for (int b = 0; b < BATCH; ++b)
        memcpy((char *)c->x_shard + ((size_t)(s * BATCH + b) * (size_t)Kl) * c->e,
               (char *)c->x_full + idx_bsk(b, s, r * Kl, K) * c->e, (size_t)Kl * c->e);
  }
  for (int i = 0; i < c->desc.n_weights; ++i) {
    c->w_shard[i] = malloc(c->w_elems * c->e);
    if (gather) {
      const int Nl = N / W;
      memcpy(c->w_shard[i], (char *)c->w_full[i] + (size_t)r * Nl * (size_t)K * c->e,
             (size_t)Nl * (size_t)K * c->e);
    } else {
      const int Kl = K / W;
      for (int n = 0; n < N; ++n)
        memcpy((char *)c->w_shard[i] + (size_t)n * Kl * c->e,
               (char *)c->w_full[i] + ((size_t)n * K + (size_t)r * Kl) * c->e, (size_t)Kl * c->e);
    }
    c->ref[i] = calloc(c->y_elems, sizeof(double));
    /* Output rows: gather side (rank', s_l, b) over all ranks, columns of this rank;
     * scatter side (s_l, b) of this rank's sequence block, all columns. */
    const int rows = gather ? SEQ * BATCH : S_l * BATCH;
    const int cols = gather ? N / W : N;
    for (int row = 0; row < rows; ++row) {
      int s = gather ? row / BATCH : r * S_l + row / BATCH, b = row % BATCH;
      for (int col = 0; col < cols; ++col) {
        int n = gather ? r * (N / W) + col : col;
        double acc = 0.0;
        for (int k = 0; k < K; ++k)
          acc += gpu_host_value(c->dt, c->x_full, idx_bsk(b, s, k, K)) *
                 gpu_host_value(c->dt, c->w_full[i], (size_t)n * K + (size_t)k);
        c->ref[i][(size_t)row * cols + col] = acc;
      }
    }
  }
}

static void free_case(case_tensors *c) {
  free(c->x_full);
  free(c->x_shard);
  for (int i = 0; i < TP_MAX_WEIGHTS; ++i) {
    free(c->w_full[i]);
    free(c->w_shard[i]);
    free(c->ref[i]);
  }
}

typedef struct device_tensors {
  void *x, *w[TP_MAX_WEIGHTS], *y[TP_MAX_WEIGHTS];
} device_tensors;

static int upload(const case_tensors *c, device_tensors *d) {
  memset(d, 0, sizeof *d);
  if (cudaMalloc(&d->x, c->x_elems * c->e) != cudaSuccess) return 1;
  if (cudaMemcpy(d->x, c->x_shard, c->x_elems * c->e, cudaMemcpyHostToDevice) != cudaSuccess) return 1;
  for (int i = 0; i < c->desc.n_weights; ++i) {
    if (cudaMalloc(&d->w[i], c->w_elems * c->e) != cudaSuccess) return 1;
    if (cudaMemcpy(d->w[i], c->w_shard[i], c->w_elems * c->e, cudaMemcpyHostToDevice) != cudaSuccess)
      return 1;
    if (cudaMalloc(&d->y[i], c->y_elems * c->e) != cudaSuccess) return 1;
  }
  return 0;
}

static void release(device_tensors *d) {
  cudaFree(d->x);
  for (int i = 0; i < TP_MAX_WEIGHTS; ++i) {
    cudaFree(d->w[i]);
    cudaFree(d->y[i]);
  }
}

/* Runs the plan `repeat` times back to back (flags and barriers reused), returns outputs on the host. */
static int run_plan(tp_group *g, const case_tensors *c, const tp_linear_plan *p, device_tensors *d,
                    int repeat, void **host_out) {
  if (tp_linear_prepare(g, p) != TP_OK) {
    fprintf(stderr, "rank %d: prepare: %s\n", g->rank, tp_last_error());
    return 1;
  }
  for (int i = 0; i < c->desc.n_weights; ++i)
    if (tp_launch_poison(c->dt, d->y[i], c->y_elems, g->main_stream) != cudaSuccess) return 1;
  for (int it = 0; it < repeat; ++it) {
    if (tp_linear_forward(g, p, d->x, (const void *const *)d->w, d->y) != TP_OK) {
      fprintf(stderr, "rank %d: forward: %s\n", g->rank, tp_last_error());
      return 1;
    }
  }
  cudaError_t err = cudaStreamSynchronize(g->main_stream);
  if (err != cudaSuccess) {
    fprintf(stderr, "rank %d: %s: %s\n", g->rank, tp_backend_name(p->backend), cudaGetErrorString(err));
    return 1;
  }
  for (int i = 0; i < c->desc.n_weights; ++i) {
    host_out[i] = malloc(c->y_elems * c->e);
    if (cudaMemcpy(host_out[i], d->y[i], c->y_elems * c->e, cudaMemcpyDeviceToHost) != cudaSuccess)
      return 1;
  }
  return 0;
}

static double rel_err_vs_ref(const case_tensors *c, const void *out, const double *ref, int *bad) {
  double d2 = 0, r2 = 0;
  *bad = 0;
  for (size_t i = 0; i < c->y_elems; ++i) {
    double v = gpu_host_value(c->dt, out, i);
    if (!isfinite(v)) {
      (*bad)++;
      continue;
    }
    d2 += (v - ref[i]) * (v - ref[i]);
    r2 += ref[i] * ref[i];
  }
  return sqrt(d2 / (r2 > 0 ? r2 : 1));
}

static double rel_err_between(const case_tensors *c, const void *a, const void *b, size_t *differ) {
  double d2 = 0, r2 = 0;
  *differ = (size_t)0;
  if (memcmp(a, b, c->y_elems * c->e) != 0)
    for (size_t i = 0; i < c->y_elems; ++i)
      if (memcmp((const char *)a + i * c->e, (const char *)b + i * c->e, c->e) != 0) (*differ)++;
  for (size_t i = 0; i < c->y_elems; ++i) {
    double x = gpu_host_value(c->dt, a, i), y = gpu_host_value(c->dt, b, i);
    d2 += (x - y) * (x - y);
    r2 += y * y;
  }
  return sqrt(d2 / (r2 > 0 ? r2 : 1));
}

typedef struct variant {
  tp_backend backend;
  tp_schedule schedule;
  int chunks;
} variant;

static const variant VARIANTS[] = {
    {TP_BACKEND_STOCK, TP_SCHED_AUTO, 0}, {TP_BACKEND_DIST, TP_SCHED_AUTO, 0},
    {TP_BACKEND_DIST, TP_SCHED_CE, 1},    {TP_BACKEND_DIST, TP_SCHED_CE, 2},
    {TP_BACKEND_DIST, TP_SCHED_CE, 4},    {TP_BACKEND_DIST, TP_SCHED_SM, 1},
    {TP_BACKEND_DIST, TP_SCHED_SM, 3},    {TP_BACKEND_DIST, TP_SCHED_SM, 4},
};

static int check_rejections(tp_group *g, const tp_linear_desc *desc) {
  tp_linear_plan p;
  int failures = 0;
  if (tp_linear_plan_make(g, desc, TP_BACKEND_DIST, TP_SCHED_MULTIMEM, 0, &p) != TP_EREJECT ||
      strstr(p.reason, "multicast") == NULL && strstr(p.reason, "multimem") == NULL) {
    fprintf(stderr, "rank %d: multimem not rejected with a reason ('%s')\n", g->rank, p.reason);
    failures++;
  }
  tp_linear_desc odd = *desc;
  odd.tokens = desc->tokens + 1;
  if (g->world > 1 && tp_linear_plan_make(g, &odd, TP_BACKEND_DIST, TP_SCHED_CE, 0, &p) != TP_EREJECT) {
    fprintf(stderr, "rank %d: tokens not divisible by TP were accepted\n", g->rank);
    failures++;
  }
  if (g->world > 1 && tp_linear_plan_make(g, desc, TP_BACKEND_DIST, TP_SCHED_CE, 7, &p) != TP_EREJECT) {
    fprintf(stderr, "rank %d: 7 chunks of %d rows were accepted\n", g->rank, SEQ / g->world * BATCH);
    failures++;
  }
  return failures;
}

static int run_dtype(tp_group *g, tp_linear_kind kind, tp_dtype dt) {
  case_tensors c;
  memset(&c, 0, sizeof c);
  c.dt = dt;
  c.rank = g->rank;
  c.world = g->world;
  c.desc.kind = kind;
  c.desc.dtype = dt;
  c.desc.tokens = (int64_t)BATCH * SEQ;
  c.desc.in_features = kind == TP_LINEAR_RS ? D_OUT : D_IN;
  c.desc.out_features = kind == TP_LINEAR_RS ? D_IN : D_OUT;
  c.desc.n_weights = kind == TP_LINEAR_AG_MULTI ? 2 : 1;
  tp_linear_plan stock;
  if (tp_linear_plan_make(g, &c.desc, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &stock) != TP_OK) {
    fprintf(stderr, "rank %d: stock plan: %s\n", g->rank, tp_last_error());
    return 1;
  }
  build_case(&c, &stock);
  device_tensors d;
  int failures = upload(&c, &d);
  void *stock_out[TP_MAX_WEIGHTS] = {0};
  const double tol_ref = dt == TP_BF16 ? TOL_REF_BF16 : TOL_REF_FP32;
  const double tol_rs = dt == TP_BF16 ? TOL_RS_VS_STOCK_BF16 : TOL_RS_VS_STOCK_FP32;
  for (size_t v = 0; v < sizeof VARIANTS / sizeof VARIANTS[0] && !failures; ++v) {
    tp_linear_plan p;
    tp_rc rc = tp_linear_plan_make(g, &c.desc, VARIANTS[v].backend, VARIANTS[v].schedule,
                                   VARIANTS[v].chunks, &p);
    if (rc == TP_EREJECT && g->world == 1 && VARIANTS[v].backend == TP_BACKEND_DIST) continue;
    if (rc != TP_OK) {
      fprintf(stderr, "rank %d: plan %s: %s\n", g->rank, tp_backend_name(VARIANTS[v].backend), tp_last_error());
      failures++;
      break;
    }
    void *out[TP_MAX_WEIGHTS] = {0};
    if (run_plan(g, &c, &p, &d, 3, out)) {
      failures++;
      break;
    }
    for (int i = 0; i < c.desc.n_weights; ++i) {
      int bad = 0;
      double err = rel_err_vs_ref(&c, out[i], c.ref[i], &bad);
      int ok = bad == 0 && err <= tol_ref;
      size_t differ = 0;
      double vs_stock = 0.0;
      if (v == 0) {
        stock_out[i] = out[i];
        out[i] = NULL;
      } else {
        vs_stock = rel_err_between(&c, out[i], stock_out[i], &differ);
        if (kind == TP_LINEAR_RS)
          ok = ok && vs_stock <= tol_rs;
        else
          ok = ok && differ == 0; /* all-gather side: bit-identical to stock */
      }
      printf("rank %d: %-15s %s %-9s %-4s x%d weight %d: rel err vs fp64 %.2e (tol %.0e), "
             "unwritten %d, vs stock %.2e with %zu elements differing: %s\n",
             g->rank, tp_linear_kind_name(kind), tp_dtype_name(dt), tp_backend_name(p.backend),
             tp_schedule_name(p.schedule), p.chunks, i, err, tol_ref, bad, vs_stock, differ,
             ok ? "ok" : "FAIL");
      failures += !ok;
      free(out[i]);
    }
  }
  failures += check_rejections(g, &c.desc);
  for (int i = 0; i < TP_MAX_WEIGHTS; ++i) free(stock_out[i]);
  release(&d);
  free_case(&c);
  return failures;
}

static int body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  tp_linear_kind kind = *(const tp_linear_kind *)ctx;
  int failures = run_dtype(g, kind, TP_BF16) + run_dtype(g, kind, TP_FP32);
  fflush(stdout);
  return failures ? 1 : 0;
}

static int world_size;

static void run_kind(tp_linear_kind kind) { assert_int_equal(gpu_run_group(world_size, body, &kind), 0); }

static void test_ag_linear(void **state) {
  (void)state;
  run_kind(TP_LINEAR_AG);
}
static void test_ag_linear_multi(void **state) {
  (void)state;
  run_kind(TP_LINEAR_AG_MULTI);
}
static void test_linear_rs(void **state) {
  (void)state;
  run_kind(TP_LINEAR_RS);
}

int main(void) {
  world_size = gpu_device_count();
  if (world_size == 0) {
    printf("no CUDA device: GPU test skipped\n");
    return GPU_TEST_SKIP;
  }
  if (world_size > 8) world_size = 8;
  printf("TP group of %d GPU(s)\n", world_size);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ag_linear),
      cmocka_unit_test(test_ag_linear_multi),
      cmocka_unit_test(test_linear_rs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
