/*
 * cmd_ops.c — `tpbench ops`: the op-level benchmark of the TP projections,
 * stock against dist_gemm, with the GEMM alone and the collective alone on
 * the same shapes, every sample kept in the database.
 *
 * The parent process parses and validates everything (options, matrix,
 * database path) and counts GPUs in a child, without touching CUDA itself;
 * then the launcher forks one worker per GPU (or this process joins an
 * external launcher's job) and each worker runs ops_worker.c. Workers that
 * die (a hung window aborts its communicator and ends its worker) are
 * followed by new ones that record what was running and go on (resume.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "bench/cli/ops_args.h"
#include "bench/gpu/job.h"
#include "bench/gpu/ops_worker.h"
#include "bench/gpu/worker_group.h"
#include "bench/launch/launcher.h"
#include "bench/matrix/ops_matrix.h"
#include "collectors/tp_collector.h"
#include "store/tp_store.h"

typedef struct ops_job {
  tp_ops_matrix matrix;
  tp_ops_options opts;
  tp_resume resume;
  tp_job_progress *progress; /* shared with the workers */
} ops_job;

static tp_rc run_ops_share(tp_worker_ctx *ctx, tp_collector *collector, void *arg) {
  ops_job *job = arg;
  return tp_ops_worker_main(ctx, &job->matrix, &job->opts, collector, job->progress);
}

static int ops_worker_entry(const tp_launch_env *env, void *arg) {
  const ops_job *job = arg;
  return tp_worker_run(env, "ops", job->opts.trace, run_ops_share, arg);
}

int tp_cmd_ops(int argc, char **argv) {
  tp_ops_args args;
  tp_ops_args_defaults(&args);
  ops_job job;
  memset(&job, 0, sizeof job);
  int help = 0;
  if (tp_ops_args_parse(argc, argv, NULL, 0, &args, &help) != TP_OK) return TP_EXIT_USAGE;
  if (help) return TP_EXIT_OK;
  if (args.list) {
    /* Listed as a job of --gpus N workers would run it, else of TP_OPS_LIST_DEFAULT_TP (as
     * `matrix`): N is the TP of a missing tp axis and the world of the job's own rule. */
    const int gpus = args.gpus > 0 ? args.gpus : TP_OPS_LIST_DEFAULT_TP;
    tp_ops_spec spec = tp_ops_args_spec(&args, gpus);
    if (tp_ops_check_tokens_divisible("ops", &spec) != TP_OK) return TP_EXIT_USAGE;
    if (tp_ops_expand(&spec, &job.matrix) != TP_OK) {
      fprintf(stderr, "tpbench ops: %s\n", tp_last_error());
      return TP_EXIT_USAGE;
    }
    tp_ops_reject_world(&job.matrix, gpus);
    tp_ops_matrix_print(&job.matrix, stdout);
    tp_ops_matrix_free(&job.matrix);
    return TP_EXIT_OK;
  }
  /* the tokens asked for must split over the TP degrees asked for: refused before any GPU time
   * (the job's workers, below, stand for a missing --tp) */
  if (args.spec.tp.count > 0 && tp_ops_check_tokens_divisible("ops", &args.spec) != TP_OK)
    return TP_EXIT_USAGE;
  int precheck = tp_job_precheck_database("ops", args.db);
  if (precheck != TP_EXIT_OK) return precheck;
  int world = 0, external = 0;
  const int counted = tp_job_world("ops", args.gpus, &world, &external);
  if (counted != TP_EXIT_OK) return counted;
  tp_ops_spec spec = tp_ops_args_spec(&args, world);
  if (tp_ops_check_tokens_divisible("ops", &spec) != TP_OK) return TP_EXIT_USAGE;
  if (tp_ops_expand(&spec, &job.matrix) != TP_OK) {
    fprintf(stderr, "tpbench ops: %s\n", tp_last_error());
    return TP_EXIT_USAGE;
  }
  (void)tp_ops_reject_world(&job.matrix, world);
  /* A TP degree above the job's workers is planned: listed, not stored, never run. */
  tp_ops_drop_planned(&job.matrix, stderr);
  if (job.matrix.n_configs == 0) {
    fprintf(stderr, "tpbench ops: every configuration is planned: nothing this job can run\n");
    tp_ops_matrix_free(&job.matrix);
    return TP_EXIT_USAGE;
  }
  int check = tp_job_check_database("ops", args.db);
  if (check != TP_EXIT_OK) {
    tp_ops_matrix_free(&job.matrix);
    return check;
  }
  job.opts.db_path = args.db;
  job.opts.warmup_iters = args.warmup;
  job.opts.measure_iters = args.iters;
  job.opts.window_timeout_s = args.timeout_s;
  job.opts.rounds = args.rounds.rounds;
  job.opts.shuffle = tp_rounds_shuffle(&args.rounds);
  job.opts.seed = (uint64_t)args.rounds.seed;
  job.opts.format = args.format;
  job.opts.quiet = args.quiet;
  job.opts.verbose = args.verbose;
  job.opts.trace = args.trace;
  job.opts.trace_iters = args.trace_iters;
  char *line = tp_job_command_line(argc, argv);
  job.opts.command_line = line ? line : "tpbench ops";
  job.progress = tp_job_progress_map("ops");
  int status = 1;
  if (job.progress) {
    job.resume.lost_index = -1;
    job.opts.resume = &job.resume;
    const tp_launch_job launch = {"ops",        world,       external,         job.matrix.n_configs,
                                  job.progress, &job.resume, ops_worker_entry, &job};
    status = tp_launch_until_done(&launch);
  }
  tp_job_progress_unmap(job.progress);
  free(line);
  tp_ops_matrix_free(&job.matrix);
  return status;
}
