/*
 * link_pacing.c — GEMMs between gaps (see link_pacing.h).
 */
#include "bench/gpu/link_pacing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/cli/link_args.h"
#include "bench/gpu/harness.h"
#include "bench/stats/stats.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "kernels/tp_gemm.h"

/* From 8B's qkv shard at 4096 tokens (0.1 TFLOP) to 70B's w13 shard at 16384 (7.7). */
const int64_t TP_PACING_SHAPE[TP_PACING_SHAPES][3] = {
    {4096, 4096, 4096}, {8192, 8192, 8192}, {16384, 16384, 8192}};

/* The most calls of a phase: the short GEMM back to back for the settle time. */
enum { MAX_CALLS = 4096, CALIBRATION_CALLS = 5 };

/* One shape's operands on this rank's GPU, and the events and samples of a phase. */
typedef struct pacing_state {
  int64_t m, n, k;
  void *x, *w, *y;
  cudaEvent_t before[MAX_CALLS], after[MAX_CALLS]; /* around each timed GEMM */
  int n_events;                                    /* pairs created */
  double *mine, *all;
} pacing_state;

static tp_rc enqueue_gemm(tp_group *g, const pacing_state *s) {
  tp_gemm_desc d = {0};
  d.dtype = TP_BF16;
  d.trans_b = 1; /* Y[M, N] = X[M, K] · W[N, K]ᵀ, a linear layer's forward */
  d.m = s->m;
  d.n = s->n;
  d.k = s->k;
  d.a = s->x;
  d.lda = s->k;
  d.b = s->w;
  d.ldb = s->k;
  d.c = s->y;
  d.ldc = s->n;
  return tp_gemm_enqueue(g->gemm, &d, g->main_stream);
}

/* calls GEMMs, each after a spin of gap_ns (0: none); with timed, the GEMM's time of each
 * call in s->mine (µs). */
static tp_rc run_calls(tp_group *g, pacing_state *s, uint64_t gap_ns, int calls, int timed) {
  for (int i = 0; i < calls; ++i) {
    if (gap_ns > 0) TP_CUDA(tp_launch_delay(gap_ns, g->main_stream));
    if (timed) TP_CUDA(cudaEventRecord(s->before[i], g->main_stream));
    TP_TRY(enqueue_gemm(g, s));
    if (timed) TP_CUDA(cudaEventRecord(s->after[i], g->main_stream));
  }
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  for (int i = 0; timed && i < calls; ++i) {
    float ms = 0;
    TP_CUDA(cudaEventElapsedTime(&ms, s->before[i], s->after[i]));
    s->mine[i] = 1000.0 * (double)ms;
  }
  return TP_OK;
}

/* The calls that cover settle_ms at per_call_us each, at least least, at most MAX_CALLS (the
 * events and samples held: --iters up to 10000 asks for more). */
static int calls_for(double settle_ms, double per_call_us, int least) {
  return tp_link_pacing_calls(settle_ms, per_call_us, least, MAX_CALLS);
}

/* The slowest rank's time per call, then its statistics. */
static tp_rc slowest_stats(tp_worker_ctx *ctx, pacing_state *s, int calls, tp_stats *st) {
  TP_TRY(tp_rdzv_allgather(ctx->rdzv, s->mine, sizeof(double) * (size_t)calls, s->all));
  const double *per_rank[TP_MAX_WORLD];
  for (int r = 0; r < ctx->world; ++r) per_rank[r] = s->all + (size_t)r * (size_t)calls;
  TP_TRY(tp_stats_slowest_rank(per_rank, ctx->world, calls, s->mine));
  return tp_stats_compute(s->mine, calls, st);
}

/* The largest of every rank's value, so that all ranks run as many calls. */
static tp_rc agree_max(tp_worker_ctx *ctx, double mine, double *out) {
  double all[TP_MAX_WORLD];
  TP_TRY(tp_rdzv_allgather(ctx->rdzv, &mine, sizeof mine, all));
  *out = mine;
  for (int r = 0; r < ctx->world; ++r)
    if (all[r] > *out) *out = all[r];
  return TP_OK;
}

static tp_rc record_point(tp_store *store, int64_t run_id, int world, const pacing_state *s,
                          int gap_pct, const tp_stats *st, int calls) {
  char layer[32];
  snprintf(layer, sizeof layer, "gemm_gap_%d", gap_pct);
  tp_config_axes axes = {0};
  axes.kind = "link";
  axes.op_or_layer = layer;
  axes.backend = "cublaslt";
  axes.tp = world;
  axes.m = s->m;
  axes.n = s->n;
  axes.k = s->k;
  axes.dtype = "bf16";
  axes.pass = "fwd";
  const double flops = 2.0 * (double)s->m * (double)s->n * (double)s->k;
  tp_result res = {0};
  tp_result_set_stats(&res, st); /* st is of the calls' slowest-rank times: n = calls */
  res.tokens_per_s = NAN;
  res.flops = flops;
  res.tflops = flops / (st->median * 1e-6) / 1e12;
  res.bytes_moved = 0;
  res.max_abs_err = NAN;
  res.rel_err = NAN;
  tp_samples set = {0, calls, s->mine, NULL, NULL};
  tp_config_record rec = {0};
  rec.axes = &axes;
  rec.status = TP_STATUS_OK;
  rec.result = &res;
  rec.samples = &set;
  rec.n_sample_sets = 1;
  int64_t config_id = 0;
  return tp_store_put_config(store, run_id, &rec, &config_id);
}

/* One gap of one shape: warm-up calls for the settle time, then the timed ones. t0_us is the
 * back-to-back time (NaN while it is being measured: the calibration's estimate stands in). */
static tp_rc probe_gap(tp_worker_ctx *ctx, const tp_pacing_plan *plan, tp_store *store,
                       int64_t run_id, pacing_state *s, int gap_pct, double estimate_us,
                       double *median_us) {
  const uint64_t gap_ns = (uint64_t)llround(estimate_us * 10.0 * gap_pct);
  const double per_call_us = estimate_us * (1.0 + gap_pct / 100.0);
  TP_TRY(
      run_calls(ctx->group, s, gap_ns, calls_for(plan->settle_ms, per_call_us, plan->warmup), 0));
  const int calls = calls_for(plan->settle_ms, per_call_us, plan->iters);
  TP_TRY(tp_rdzv_barrier(ctx->rdzv));
  TP_TRY(run_calls(ctx->group, s, gap_ns, calls, 1));
  tp_stats st;
  TP_TRY(slowest_stats(ctx, s, calls, &st));
  *median_us = st.median;
  if (store) TP_TRY(record_point(store, run_id, ctx->world, s, gap_pct, &st, calls));
  return TP_OK;
}

static tp_rc probe_shape(tp_worker_ctx *ctx, const tp_pacing_plan *plan, tp_store *store,
                         int64_t run_id, pacing_state *s) {
  /* the calibration: a few calls for the number of calls that cover the settle time */
  TP_TRY(run_calls(ctx->group, s, 0, CALIBRATION_CALLS, 1));
  tp_stats cal;
  TP_TRY(tp_stats_compute(s->mine, CALIBRATION_CALLS, &cal));
  double estimate = 0, t0 = 0;
  TP_TRY(agree_max(ctx, cal.median, &estimate));
  TP_TRY(probe_gap(ctx, plan, store, run_id, s, 0, estimate, &t0));
  /* the gaps are fractions of the measured back-to-back time, the same on every rank */
  TP_TRY(agree_max(ctx, t0, &t0));
  if (ctx->rank == 0)
    printf("| %lld×%lld×%lld | 0 | %.1f | 1.000 |\n", (long long)s->m, (long long)s->n,
           (long long)s->k, t0);
  for (int i = 0; i < plan->gaps_pct.count; ++i) {
    const int gap = (int)plan->gaps_pct.items[i];
    if (gap == 0) continue;
    double us = 0;
    TP_TRY(probe_gap(ctx, plan, store, run_id, s, gap, t0, &us));
    if (ctx->rank == 0)
      printf("| %lld×%lld×%lld | %d | %.1f | %.3f |\n", (long long)s->m, (long long)s->n,
             (long long)s->k, gap, us, us / t0);
  }
  return TP_OK;
}

static tp_rc alloc_operands(tp_group *g, pacing_state *s, int shape) {
  s->m = TP_PACING_SHAPE[shape][0];
  s->n = TP_PACING_SHAPE[shape][1];
  s->k = TP_PACING_SHAPE[shape][2];
  const size_t nx = (size_t)(s->m * s->k), nw = (size_t)(s->n * s->k), ny = (size_t)(s->m * s->n);
  TP_CUDA(cudaMalloc(&s->x, nx * 2));
  TP_CUDA(cudaMalloc(&s->w, nw * 2));
  TP_CUDA(cudaMalloc(&s->y, ny * 2));
  TP_CUDA(tp_launch_fill_random(TP_BF16, s->x, nx, (uint64_t)g->rank + 11, 1.0f, g->main_stream));
  TP_CUDA(tp_launch_fill_random(TP_BF16, s->w, nw, (uint64_t)g->rank + 13, 1.0f, g->main_stream));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  return TP_OK;
}

static void free_operands(pacing_state *s) {
  cudaFree(s->x);
  cudaFree(s->w);
  cudaFree(s->y);
  s->x = s->w = s->y = NULL;
}

tp_rc tp_pacing_probe(tp_worker_ctx *ctx, const tp_pacing_plan *plan, tp_store *store,
                      int64_t run_id) {
  pacing_state *s = calloc(1, sizeof *s);
  if (!s) return TP_FAIL(TP_EOOM, "no host memory for the GEMM pacing probe");
  s->mine = calloc(MAX_CALLS, sizeof(double));
  s->all = calloc((size_t)MAX_CALLS * (size_t)ctx->world, sizeof(double));
  tp_rc rc = s->mine && s->all ? TP_OK : TP_FAIL(TP_EOOM, "no host memory for the pacing probe");
  while (rc == TP_OK && s->n_events < MAX_CALLS) {
    cudaError_t err = cudaEventCreate(&s->before[s->n_events]);
    if (err == cudaSuccess) {
      err = cudaEventCreate(&s->after[s->n_events]);
      if (err != cudaSuccess) cudaEventDestroy(s->before[s->n_events]);
    }
    if (err != cudaSuccess)
      rc = TP_FAIL(TP_ECUDA, "cudaEventCreate failed (%s:%d): %s", __FILE__, __LINE__,
                   cudaGetErrorString(err));
    else ++s->n_events;
  }
  if (rc == TP_OK && ctx->rank == 0)
    printf("\nGEMMs between gaps (bf16; gap: a spin before each call, %% of the back-to-back "
           "time; GEMM µs: median of the slowest rank):\n\n| M×N×K | gap %% | GEMM µs | vs back "
           "to back |\n|---|---:|---:|---:|\n");
  for (int shape = 0; rc == TP_OK && shape < TP_PACING_SHAPES; ++shape) {
    rc = alloc_operands(ctx->group, s, shape);
    if (rc == TP_OK) rc = probe_shape(ctx, plan, store, run_id, s);
    free_operands(s);
  }
  for (int i = 0; i < s->n_events; ++i) {
    cudaEventDestroy(s->before[i]);
    cudaEventDestroy(s->after[i]);
  }
  free(s->mine);
  free(s->all);
  free(s);
  fflush(stdout);
  return rc;
}
