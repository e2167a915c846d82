/*
 * cmd_link.c — `tpbench link`: the link probe. Measures, over a sweep of
 * sizes per rank, what the lent GPUs' links deliver to each transport
 * tpbench uses: a copy-engine push into a peer's symmetric buffer (the ce
 * schedule), a copy kernel's push on a few SMs (the sm schedule), and NCCL's
 * all-gather and reduce-scatter (the stock path), every rank sending at
 * once as in the ops. Each point is a configuration of kind "link" in the
 * database (median, p10, p90 of back-to-back timed transfers, bytes moved),
 * so reports can bound the fused ops by measured ceilings, not datasheets.
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
#include "bench/gpu/worker_group.h"
#include "bench/launch/launcher.h"
#include "bench/stats/stats.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "store/tp_store.h"

enum { N_PROBES = 4 };

typedef enum { PROBE_CE = 0, PROBE_SM, PROBE_ALL_GATHER, PROBE_REDUCE_SCATTER } probe_kind;
static const char *const PROBE_NAMES[N_PROBES] = {"ce_push", "sm_push", "nccl_all_gather",
                                                  "nccl_reduce_scatter"};
static const char *const PROBE_ENGINES[N_PROBES] = {"copy-engine", "sm-kernel", "nccl", "nccl"};

typedef struct link_job {
  const char *db;
  tp_int_list sizes_mib;
  int iters, warmup, sm_blocks;
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
  }
  return TP_FAIL(TP_EINTERNAL, "unknown probe %d", (int)kind);
}

/* Times iters back-to-back transfers (one event between consecutive ones),
 * every rank together; the point is the slowest rank of each iteration. */
static tp_rc time_probe(tp_worker_ctx *ctx, const link_job *job, probe_kind kind, size_t bytes,
                        cudaEvent_t *marks, double *mine, double *all, probe_point *out) {
  tp_group *g = ctx->group;
  for (int i = 0; i < job->warmup; ++i) TP_TRY(transfer(g, kind, bytes, job->sm_blocks));
  TP_CUDA(cudaStreamSynchronize(g->comm_stream));
  TP_TRY(tp_rdzv_barrier(ctx->rdzv));
  TP_CUDA(cudaEventRecord(marks[0], g->comm_stream));
  for (int i = 0; i < job->iters; ++i) {
    TP_TRY(transfer(g, kind, bytes, job->sm_blocks));
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

static tp_rc record_point(tp_store *store, int64_t run_id, int world, probe_kind kind, size_t bytes,
                          const probe_point *pt, const double *samples, int iters) {
  tp_config_axes axes = {0};
  axes.kind = "link";
  axes.op_or_layer = PROBE_NAMES[kind];
  axes.backend = PROBE_ENGINES[kind];
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
  /* bytes each rank sends over its links per transfer */
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
  int64_t id = 0;
  return tp_store_put_config(store, run_id, &rec, &id);
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

static tp_rc probe_all(tp_worker_ctx *ctx, const link_job *job) {
  size_t max_bytes = 0;
  for (int i = 0; i < job->sizes_mib.count; ++i)
    if ((size_t)job->sizes_mib.items[i] << 20 > max_bytes)
      max_bytes = (size_t)job->sizes_mib.items[i] << 20;
  TP_TRY(tp_symm_reserve(ctx->group->symm, 2 * max_bytes));
  void *scratch = NULL;
  TP_TRY(tp_group_scratch(ctx->group, max_bytes * (size_t)ctx->world, &scratch));
  TP_CUDA(tp_launch_fill_random(TP_BF16, tp_symm_ptr(ctx->group->symm, ctx->rank), max_bytes / 2,
                                (uint64_t)ctx->rank + 7, 1.0f, ctx->group->main_stream));
  TP_CUDA(tp_launch_fill_random(TP_BF16, scratch, max_bytes * (size_t)ctx->world / 2,
                                (uint64_t)ctx->rank + 9, 1.0f, ctx->group->main_stream));
  TP_CUDA(cudaDeviceSynchronize());
  tp_store *store = NULL;
  int64_t run_id = 0;
  TP_TRY(begin_run(ctx, job, &store, &run_id));
  cudaEvent_t *marks = calloc((size_t)job->iters + 1, sizeof(cudaEvent_t));
  double *mine = calloc((size_t)job->iters, sizeof(double));
  double *all = calloc((size_t)job->iters * (size_t)ctx->world, sizeof(double));
  tp_rc rc = marks && mine && all ? TP_OK : TP_FAIL(TP_EOOM, "no host memory for the probe");
  for (int i = 0; rc == TP_OK && i <= job->iters; ++i)
    if (cudaEventCreate(&marks[i]) != cudaSuccess) rc = TP_FAIL(TP_ECUDA, "cudaEventCreate failed");
  if (ctx->rank == 0 && rc == TP_OK)
    printf(
        "| MiB per rank | ce push GB/s | sm push (%d blocks) GB/s | NCCL all-gather busbw GB/s | "
        "NCCL reduce-scatter busbw GB/s |\n|---:|---:|---:|---:|---:|\n",
        job->sm_blocks);
  for (int s = 0; rc == TP_OK && s < job->sizes_mib.count; ++s) {
    size_t bytes = (size_t)job->sizes_mib.items[s] << 20;
    double gbps[N_PROBES];
    for (int k = 0; rc == TP_OK && k < N_PROBES; ++k) {
      probe_point pt = {0};
      rc = time_probe(ctx, job, (probe_kind)k, bytes, marks, mine, all, &pt);
      /* NCCL's bus bandwidth: (W-1)/W of the whole buffer per rank and time */
      gbps[k] = pt.gbps * (k >= PROBE_ALL_GATHER ? (double)(ctx->world - 1) : 1.0);
      if (rc == TP_OK && store)
        rc = record_point(store, run_id, ctx->world, (probe_kind)k, bytes, &pt, mine, job->iters);
    }
    if (rc == TP_OK && ctx->rank == 0)
      printf("| %lld | %.0f | %.0f | %.0f | %.0f |\n", job->sizes_mib.items[s], gbps[0], gbps[1],
             gbps[2], gbps[3]);
  }
  if (store) {
    if (rc == TP_OK) rc = tp_store_finish_run(store, run_id);
    tp_store_close(store);
  }
  for (int i = 0; marks && i <= job->iters; ++i)
    if (marks[i]) cudaEventDestroy(marks[i]);
  free(marks);
  free(mine);
  free(all);
  fflush(stdout);
  return rc;
}

static int link_worker(const tp_launch_env *env, void *arg) {
  const link_job *job = arg;
  tp_worker_ctx ctx;
  tp_rc rc = tp_worker_join(env, TP_WORKER_RENDEZVOUS_TIMEOUT_MS, &ctx);
  if (rc == TP_OK && env->world < 2)
    rc = TP_FAIL(TP_EREJECT, "the link probe needs at least 2 GPUs (%d here)", env->world);
  if (rc == TP_OK) rc = probe_all(&ctx, job);
  if (rc != TP_OK)
    fprintf(stderr, "tpbench link: rank %d: %s: %s\n", env->rank, tp_rc_name(rc), tp_last_error());
  tp_worker_leave(&ctx);
  return rc == TP_OK ? 0 : 1;
}

int tp_cmd_link(int argc, char **argv) {
  tp_link_args args;
  tp_link_args_defaults(&args);
  int help = 0;
  if (tp_link_args_parse(argc, argv, &args, &help) != TP_OK) return TP_EXIT_USAGE;
  if (help) return TP_EXIT_OK;
  link_job job = {.db = args.db,
                  .sizes_mib = args.sizes_mib,
                  .iters = args.iters,
                  .warmup = args.warmup,
                  .sm_blocks = args.sm_blocks};
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
