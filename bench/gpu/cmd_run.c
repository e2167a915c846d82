/*
 * cmd_run.c — `tpbench run`: the layers a model really runs (attention,
 * FFN, transformer block), stock against dist_gemm, with the GEMMs alone
 * and the collectives alone as the bound, over a matrix (layer_matrix.h),
 * into the database; prints the throughput table.
 *
 * The parent parses and validates everything and counts GPUs in a child,
 * without touching CUDA itself; then the launcher forks one worker per GPU
 * (or this process joins an external launcher's job) and each runs
 * layer_worker.c. A configuration that fails is recorded and the matrix goes
 * on; when one takes the workers down with it (a sticky CUDA error, a hung
 * collective), the parent starts new workers that record it as failed and
 * go on after it, in the same run (resume.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/commands.h"
#include "bench/cli/run_args.h"
#include "bench/gpu/job.h"
#include "bench/gpu/layer_worker.h"
#include "bench/gpu/worker_group.h"
#include "bench/launch/launcher.h"
#include "collectors/tp_collector.h"

typedef struct run_job {
  tp_layer_matrix matrix;
  tp_layer_worker_options opts;
  tp_resume resume;
  int trace;
  tp_job_progress *progress; /* shared with the workers */
} run_job;

static tp_rc run_layer_share(tp_worker_ctx *ctx, tp_collector *collector, void *arg) {
  run_job *job = arg;
  return tp_layer_worker_main(ctx, &job->matrix, &job->opts, collector, job->progress);
}

static int layer_worker_entry(const tp_launch_env *env, void *arg) {
  const run_job *job = arg;
  return tp_worker_run(env, "run", job->trace, run_layer_share, arg);
}

static void fill_options(const tp_run_args *args, const char *line, tp_layer_worker_options *o) {
  memset(o, 0, sizeof *o);
  tp_harness_options *h = &o->harness;
  h->command = "run";
  h->db_path = args->db;
  h->command_line = line;
  h->warmup_iters = args->warmup;
  h->measure_iters = args->iters;
  h->window_timeout_s = args->timeout_s;
  h->quiet = args->quiet;
  h->verbose = args->verbose;
  h->format = args->format;
  h->trace_iters = args->trace_iters;
  h->rounds = args->rounds.rounds;
  h->shuffle = tp_rounds_shuffle(&args->rounds);
  h->seed = (uint64_t)args->rounds.seed;
}

int tp_cmd_run(int argc, char **argv) {
  tp_run_args args;
  tp_run_args_defaults(&args);
  int help = 0;
  if (tp_run_args_parse("run", argc, argv, &args, &help) != TP_OK) return TP_EXIT_USAGE;
  if (help) return TP_EXIT_OK;
  int world = 0, external = 0;
  const int counted = tp_job_world("run", args.gpus, &world, &external);
  if (counted != TP_EXIT_OK) return counted;
  run_job job;
  memset(&job, 0, sizeof job);
  job.trace = args.trace;
  if (tp_layer_expand(&args.spec, world, &job.matrix) != TP_OK) {
    fprintf(stderr, "tpbench run: %s\n", tp_last_error());
    return TP_EXIT_USAGE;
  }
  tp_layer_reject_world(&job.matrix, world);
  /* Planned configurations (dp > 1: no FSDP runtime yet; more GPUs than the job) are listed,
   * never run as something else, and not stored: a stored row would read as a measurement. */
  tp_layer_drop_planned(&job.matrix, stderr);
  if (job.matrix.n_configs == 0) {
    fprintf(stderr, "tpbench run: every configuration is planned: nothing this job can run\n");
    tp_layer_matrix_free(&job.matrix);
    return TP_EXIT_USAGE;
  }
  int status = tp_job_check_database("run", args.db);
  char *line = status == 0 ? tp_job_command_line(argc, argv) : NULL;
  if (status == 0) {
    job.progress = tp_job_progress_map("run");
    if (!job.progress) status = TP_EXIT_FAILURE;
  }
  if (status == 0) {
    fill_options(&args, line ? line : "tpbench run", &job.opts);
    job.resume.lost_index = -1;
    job.opts.resume = &job.resume;
    const tp_launch_job launch = {
        "run",        world,       external,           job.matrix.n_configs,
        job.progress, &job.resume, layer_worker_entry, &job};
    status = tp_launch_until_done(&launch);
  }
  tp_job_progress_unmap(job.progress);
  free(line);
  tp_layer_matrix_free(&job.matrix);
  return status;
}
