/*
 * cmd_link.c — `tpbench link`: the link probe. Measures, over a sweep of
 * sizes per rank (a small one for the per-call latency, then the MiB
 * sweep), what the lent GPUs' links deliver to each transport tpbench uses:
 * a copy-engine push into a peer's symmetric buffer (the ce schedule), a
 * copy kernel's push on a few SMs (the sm schedule), NCCL's all-gather and
 * reduce-scatter (the stock path), every rank sending at once as in the
 * ops, and a copy within one GPU (the local memory the reduce-scatter
 * side's sums read); then the per-call latencies of a fused op's barrier
 * and flags (link_latency.h), and last the GEMMs between gaps (link_pacing.h;
 * on one GPU only these). Each point is a configuration of kind "link"
 * in the database (median, p10, p90 of back-to-back timed calls, bytes
 * moved), so reports can bound the fused ops by measured ceilings and
 * `tpbench project` can price their per-chunk costs, not datasheets.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "bench/cli/link_args.h"
#include "bench/gpu/job.h"
#include "bench/gpu/link_latency.h"
#include "bench/gpu/link_pacing.h"
#include "bench/gpu/worker_group.h"
#include "bench/launch/launcher.h"
#include "bench/stats/stats.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "store/tp_store.h"

enum { N_TRANSPORTS = 5 };

typedef enum {
  PROBE_CE = 0,
  PROBE_SM,
  PROBE_ALL_GATHER,
  PROBE_REDUCE_SCATTER,
  PROBE_LOCAL_COPY
} probe_kind;
static const char *const PROBE_NAMES[N_TRANSPORTS] = {"ce_push", "sm_push", "nccl_all_gather",
                                                      "nccl_reduce_scatter", "local_copy"};
/* local_copy: cudaMemcpyAsync within one device (the reduce pass and a GEMM's C read touch the
 * same local memory) */
static const char *const PROBE_ENGINES[N_TRANSPORTS] = {"copy-engine", "sm-kernel", "nccl", "nccl",
                                                        "memcpy-d2d"};

/* A probe of the sweep (a transport) or of the latencies: what one call does and its name. */
typedef struct probe_id {
  int latency; /* 1: a tp_latency_kind; 0: a probe_kind */
  int kind;
} probe_id;

typedef struct link_job {
  const char *db;
  tp_int_list sizes_mib;
  int small_kib;
  int iters, warmup, sm_blocks;
  tp_pacing_plan pacing;
  char *command_line;
} link_job;

typedef struct probe_point {
  double median_us, p10_us, p90_us, mean_us, min_us, max_us, cv;
  double gbps; /* bytes per rank over the median time */
} probe_point;

/* One transfer of `bytes` per rank with the given transport, on the comm stream. */
static tp_rc transfer(tp_group *g, probe_kind kind, size_t bytes, int sm_blocks) {
  const int dst = (g->rank + 1) % g->world;
  char *mine = tp_symm_ptr(g->symm, g->rank);
  char *theirs = (char *)tp_symm_ptr(g->symm, dst) + bytes; /* second half: the landing zone */
  cudaStream_t s = g->comm_stream;
  switch (kind) {
  case PROBE_CE:
    TP_CUDA(cudaMemcpyAsync(theirs, mine, bytes, cudaMemcpyDeviceToDevice, s));
    return TP_OK;
  case PROBE_SM:
    TP_CUDA(tp_launch_copy_signal(theirs, mine, bytes, sm_blocks, NULL, 0, NULL, 0, s));
    return TP_OK;
  case PROBE_ALL_GATHER:
    TP_NCCL(ncclAllGather(mine, g->scratch, bytes / 2, ncclBfloat16, g->nccl, s), g->nccl);
    return TP_OK;
  case PROBE_REDUCE_SCATTER:
    TP_NCCL(ncclReduceScatter(g->scratch, mine, bytes / 2, ncclBfloat16, ncclSum, g->nccl, s),
            g->nccl);
    return TP_OK;
  case PROBE_LOCAL_COPY:
    TP_CUDA(cudaMemcpyAsync(mine + bytes, mine, bytes, cudaMemcpyDeviceToDevice, s));
    return TP_OK;
  }
  return TP_FAIL(TP_EINTERNAL, "unknown probe %d", (int)kind);
}

/* One call of a probe. */
static tp_rc call_probe(tp_group *g, probe_id id, size_t bytes, int sm_blocks) {
  if (id.latency) return tp_latency_call(g, (tp_latency_kind)id.kind);
  return transfer(g, (probe_kind)id.kind, bytes, sm_blocks);
}

/* Times iters back-to-back transfers (one event between consecutive ones),
 * every rank together; the point is the slowest rank of each iteration. */
static tp_rc time_probe(tp_worker_ctx *ctx, const link_job *job, probe_id id, size_t bytes,
                        cudaEvent_t *marks, double *mine, double *all, probe_point *out) {
  tp_group *g = ctx->group;
  for (int i = 0; i < job->warmup; ++i) TP_TRY(call_probe(g, id, bytes, job->sm_blocks));
  TP_CUDA(cudaStreamSynchronize(g->comm_stream));
  TP_TRY(tp_rdzv_barrier(ctx->rdzv));
  TP_CUDA(cudaEventRecord(marks[0], g->comm_stream));
  for (int i = 0; i < job->iters; ++i) {
    TP_TRY(call_probe(g, id, bytes, job->sm_blocks));
    TP_CUDA(cudaEventRecord(marks[i + 1], g->comm_stream));
  }
  TP_CUDA(cudaStreamSynchronize(g->comm_stream));
  for (int i = 0; i < job->iters; ++i) {
    float ms = 0;
    TP_CUDA(cudaEventElapsedTime(&ms, marks[i], marks[i + 1]));
    mine[i] = 1000.0 * (double)ms;
  }
  TP_TRY(tp_rdzv_allgather(ctx->rdzv, mine, sizeof(double) * (size_t)job->iters, all));
  const double *per_rank[TP_MAX_WORLD];
  for (int r = 0; r < ctx->world; ++r) per_rank[r] = all + (size_t)r * (size_t)job->iters;
  TP_TRY(tp_stats_slowest_rank(per_rank, ctx->world, job->iters, mine));
  tp_stats st;
  TP_TRY(tp_stats_compute(mine, job->iters, &st));
  *out = (probe_point){st.median, st.p10, st.p90, st.mean,
                       st.min,    st.max, st.cv,  (double)bytes / (st.median * 1e-6) / 1e9};
  return TP_OK;
}

static tp_rc record_point(tp_store *store, int64_t run_id, int world, probe_id id, size_t bytes,
                          const probe_point *pt, const double *samples, int iters) {
  tp_config_axes axes = {0};
  axes.kind = "link";
  axes.op_or_layer = id.latency ? tp_latency_name((tp_latency_kind)id.kind) : PROBE_NAMES[id.kind];
  axes.backend = id.latency ? "stream" : PROBE_ENGINES[id.kind];
  axes.tp = world;
  axes.m = (int64_t)bytes;
  axes.dtype = "bf16";
  axes.pass = "fwd";
  tp_result res = {0};
  res.n_samples = iters;
  res.median_us = pt->median_us;
  res.p10_us = pt->p10_us;
  res.p90_us = pt->p90_us;
  res.mean_us = pt->mean_us;
  res.min_us = pt->min_us;
  res.max_us = pt->max_us;
  res.cv = pt->cv;
  res.tokens_per_s = NAN;
  res.tflops = NAN;
  res.flops = 0;
  /* bytes each rank sends per call (local_copy: copies within its GPU; a flag: 4) */
  res.bytes_moved = (double)bytes;
  res.max_abs_err = NAN;
  res.rel_err = NAN;
  tp_samples set = {0, iters, samples, NULL, NULL};
  tp_config_record rec = {0};
  rec.axes = &axes;
  rec.status = TP_STATUS_OK;
  rec.result = &res;
  rec.samples = &set;
  rec.n_sample_sets = 1;
  int64_t config_id = 0;
  return tp_store_put_config(store, run_id, &rec, &config_id);
}

/* Collective: every rank sends its host facts; rank 0 records the run. */
static tp_rc begin_run(tp_worker_ctx *ctx, const link_job *job, tp_store **store, int64_t *run_id) {
  tp_job_system system;
  TP_TRY(tp_job_gather_system(ctx, &system));
  tp_rc rc = ctx->rank == 0 ? tp_store_open(job->db, 1, store) : TP_OK;
  tp_job_run_desc d = {"link", job->command_line, job->warmup, job->iters, 0, NULL, 0, NULL};
  if (rc == TP_OK && ctx->rank == 0)
    rc = tp_job_begin_run(*store, ctx->group, ctx->world, &d, &system, run_id);
  tp_job_system_free(&system);
  return rc;
}

/* The sizes of the sweep in bytes: the small one (if any), then the MiB list. */
static int sweep_sizes(const link_job *job, size_t *sizes) {
  int n = 0;
  if (job->small_kib > 0) sizes[n++] = (size_t)job->small_kib << 10;
  for (int i = 0; i < job->sizes_mib.count; ++i) sizes[n++] = (size_t)job->sizes_mib.items[i] << 20;
  return n;
}

/* One row of the printed table: every transport at one size. */
static tp_rc probe_size(tp_worker_ctx *ctx, const link_job *job, tp_store *store, int64_t run_id,
                        size_t bytes, cudaEvent_t *marks, double *mine, double *all) {
  double gbps[N_TRANSPORTS];
  for (int k = 0; k < N_TRANSPORTS; ++k) {
    probe_point pt = {0};
    const probe_id id = {0, k};
    TP_TRY(time_probe(ctx, job, id, bytes, marks, mine, all, &pt));
    /* NCCL's bus bandwidth: (W-1)/W of the whole buffer per rank and time */
    gbps[k] = pt.gbps *
              (k == PROBE_ALL_GATHER || k == PROBE_REDUCE_SCATTER ? (double)(ctx->world - 1) : 1.0);
    if (store) TP_TRY(record_point(store, run_id, ctx->world, id, bytes, &pt, mine, job->iters));
  }
  if (ctx->rank == 0)
    printf("| %g | %.0f | %.0f | %.0f | %.0f | %.0f |\n", (double)bytes / 1048576.0, gbps[0],
           gbps[1], gbps[2], gbps[3], gbps[4]);
  return TP_OK;
}

/* The per-call latencies, one line of the printed output. */
static tp_rc probe_latencies(tp_worker_ctx *ctx, const link_job *job, tp_store *store,
                             int64_t run_id, cudaEvent_t *marks, double *mine, double *all) {
  double us[TP_LATENCY_KINDS];
  for (int k = 0; k < TP_LATENCY_KINDS; ++k) {
    probe_point pt = {0};
    const probe_id id = {1, k};
    const size_t bytes = tp_latency_bytes((tp_latency_kind)k);
    TP_TRY(time_probe(ctx, job, id, bytes, marks, mine, all, &pt));
    us[k] = pt.median_us;
    if (store) TP_TRY(record_point(store, run_id, ctx->world, id, bytes, &pt, mine, job->iters));
  }
  if (ctx->rank == 0)
    printf("\nPer call (µs, median of the slowest rank): barrier %.2f, flag round trip %.2f, "
           "flag wait %.2f\n",
           us[TP_LATENCY_BARRIER], us[TP_LATENCY_FLAG_ROUND_TRIP], us[TP_LATENCY_FLAG_WAIT]);
  return TP_OK;
}

/* Reserves the heap and the scratch for the largest size and fills them with random data. */
static tp_rc prepare_buffers(tp_worker_ctx *ctx, size_t max_bytes) {
  TP_TRY(tp_symm_reserve(ctx->group->symm, 2 * max_bytes));
  void *scratch = NULL;
  TP_TRY(tp_group_scratch(ctx->group, max_bytes * (size_t)ctx->world, &scratch));
  TP_CUDA(tp_launch_fill_random(TP_BF16, tp_symm_ptr(ctx->group->symm, ctx->rank), max_bytes / 2,
                                (uint64_t)ctx->rank + 7, 1.0f, ctx->group->main_stream));
  TP_CUDA(tp_launch_fill_random(TP_BF16, scratch, max_bytes * (size_t)ctx->world / 2,
                                (uint64_t)ctx->rank + 9, 1.0f, ctx->group->main_stream));
  TP_CUDA(cudaDeviceSynchronize());
  return TP_OK;
}

/* The transports and the latencies (2 ranks or more). */
static tp_rc probe_links(tp_worker_ctx *ctx, const link_job *job, tp_store *store, int64_t run_id) {
  size_t sizes[TP_LIST_MAX + 1], max_bytes = 0;
  const int n_sizes = sweep_sizes(job, sizes);
  for (int i = 0; i < n_sizes; ++i)
    if (sizes[i] > max_bytes) max_bytes = sizes[i];
  TP_TRY(prepare_buffers(ctx, max_bytes));
  cudaEvent_t *marks = calloc((size_t)job->iters + 1, sizeof(cudaEvent_t));
  double *mine = calloc((size_t)job->iters, sizeof(double));
  double *all = calloc((size_t)job->iters * (size_t)ctx->world, sizeof(double));
  tp_rc rc = marks && mine && all ? TP_OK : TP_FAIL(TP_EOOM, "no host memory for the probe");
  for (int i = 0; rc == TP_OK && i <= job->iters; ++i)
    if (cudaEventCreate(&marks[i]) != cudaSuccess) rc = TP_FAIL(TP_ECUDA, "cudaEventCreate failed");
  if (ctx->rank == 0 && rc == TP_OK)
    printf(
        "| MiB per rank | ce push GB/s | sm push (%d blocks) GB/s | NCCL all-gather busbw GB/s | "
        "NCCL reduce-scatter busbw GB/s | local copy GB/s |\n|---:|---:|---:|---:|---:|---:|\n",
        job->sm_blocks);
  for (int s = 0; rc == TP_OK && s < n_sizes; ++s)
    rc = probe_size(ctx, job, store, run_id, sizes[s], marks, mine, all);
  if (rc == TP_OK) rc = probe_latencies(ctx, job, store, run_id, marks, mine, all);
  for (int i = 0; marks && i <= job->iters; ++i)
    if (marks[i]) cudaEventDestroy(marks[i]);
  free(marks);
  free(mine);
  free(all);
  return rc;
}

/* Every probe: the links' on two ranks or more, then the GEMMs between gaps (one GPU: only
 * those). */
static tp_rc probe_all(tp_worker_ctx *ctx, const link_job *job) {
  tp_store *store = NULL;
  int64_t run_id = 0;
  TP_TRY(begin_run(ctx, job, &store, &run_id));
  tp_rc rc = ctx->world > 1 ? probe_links(ctx, job, store, run_id) : TP_OK;
  if (rc == TP_OK) rc = tp_pacing_probe(ctx, &job->pacing, store, run_id);
  if (store) {
    if (rc == TP_OK) rc = tp_store_finish_run(store, run_id);
    tp_store_close(store);
  }
  fflush(stdout);
  return rc;
}

/* The probes take no traced windows: the collector stays NULL. */
static tp_rc run_probes(tp_worker_ctx *ctx, tp_collector *collector, void *arg) {
  (void)collector;
  return probe_all(ctx, arg);
}

static int link_worker(const tp_launch_env *env, void *arg) {
  return tp_worker_run(env, "link", 0, run_probes, arg);
}

int tp_cmd_link(int argc, char **argv) {
  tp_link_args args;
  tp_link_args_defaults(&args);
  int help = 0;
  if (tp_link_args_parse(argc, argv, &args, &help) != TP_OK) return TP_EXIT_USAGE;
  if (help) return TP_EXIT_OK;
  link_job job = {.db = args.db,
                  .sizes_mib = args.sizes_mib,
                  .small_kib = args.small_kib,
                  .iters = args.iters,
                  .warmup = args.warmup,
                  .sm_blocks = args.sm_blocks,
                  .pacing = {.gaps_pct = args.gemm_gaps,
                             .iters = args.iters,
                             .warmup = args.warmup,
                             .settle_ms = args.settle_ms}};
  const int gpus = args.gpus;
  int precheck = tp_job_precheck_database("link", job.db);
  if (precheck != TP_EXIT_OK) return precheck;
  int world = 0, external = 0;
  const int counted = tp_job_world("link", gpus, &world, &external);
  if (counted != TP_EXIT_OK) return counted;
  job.command_line = tp_job_command_line(argc, argv);
  int status = tp_launch(world, link_worker, &job);
  free(job.command_line);
  return status;
}
