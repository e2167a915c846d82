/*
 * cmd_run.c — `tpbench run`: the layers a model really runs (attention,
 * FFN, transformer block), stock against dist_gemm, with the GEMMs alone
 * and the collectives alone as the bound, over a matrix (run_matrix.h),
 * into the database; prints the throughput table.
 *
 * The parent parses and validates everything and counts GPUs in a child,
 * without touching CUDA itself; then the launcher forks one worker per GPU
 * (or this process joins an external launcher's job) and each runs
 * run_worker.c. A configuration that fails is recorded and the matrix goes
 * on; when one takes the workers down with it (a sticky CUDA error, a hung
 * collective), the parent starts new workers that record it as failed and
 * go on after it, in the same run. Where the job stands is shared with the
 * workers in an anonymous shared mapping (tp_run_progress).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../../collectors/tp_collector.h"
#include "../commands.h"
#include "../launcher.h"
#include "../run_args.h"
#include "job.h"
#include "run_worker.h"
#include "worker_group.h"

enum { RENDEZVOUS_TIMEOUT_MS = 120000, MAX_RESTARTS = 16, LOST_CAP = 256 };

typedef struct run_job {
  tp_run_matrix matrix;
  tp_run_worker_options opts;
  int trace;
  tp_run_progress *progress; /* shared with the workers */
} run_job;

static int run_worker_main(const tp_launch_env *env, void *arg) {
  run_job *job = arg;
  tp_worker_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  tp_collector *collector = NULL;
  tp_rc rc = TP_OK;
  /* The collector (and NVTX's injection) must be in place before any NVTX
   * call and before the GPU work it is to see. */
  if (job->trace) rc = tp_collector_start(env->rank, &collector);
  if (rc == TP_OK)
    rc = tp_worker_join(env->master_addr, env->master_port, env->rank, env->world, env->local_rank,
                        RENDEZVOUS_TIMEOUT_MS, &ctx);
  if (rc == TP_OK) rc = tp_run_worker_run(&ctx, &job->matrix, &job->opts, collector, job->progress);
  if (rc != TP_OK)
    fprintf(stderr, "tpbench run: rank %d: %s: %s\n", env->rank, tp_rc_name(rc), tp_last_error());
  tp_worker_leave(&ctx);
  if (collector) tp_collector_stop(collector);
  return rc == TP_OK ? 0 : 1;
}

static int interrupted(int status) {
  return status == 128 + SIGINT || status == 128 + SIGTERM || status == 128 + SIGHUP;
}

/* Starts workers until the matrix is through, new ones after workers that
 * died (each time at the first configuration not recorded), and stops when
 * an attempt records nothing, the user interrupts, or an external launcher
 * owns the processes. Returns the last attempt's exit status. */
static int launch_until_done(run_job *job, int world, int external) {
  tp_run_progress *pr = job->progress;
  char lost[LOST_CAP];
  int status = 0;
  for (int attempt = 0;; ++attempt) {
    const int start = job->opts.start;
    pr->next = start;
    pr->current = -1;
    pr->recorded = 0;
    status = tp_launch(world, run_worker_main, job);
    if (status == 0 || external || interrupted(status)) return status;
    if (pr->next >= job->matrix.n_configs) return status; /* all recorded: it failed at the end */
    const int recorded_any = pr->recorded > 0;
    if ((attempt > 0 && !recorded_any) || attempt == MAX_RESTARTS) {
      fprintf(stderr,
              "tpbench run: giving up at configuration %d of %d: new workers made no progress; "
              "the run keeps what was recorded\n",
              pr->next + 1, job->matrix.n_configs);
      return status;
    }
    job->opts.start = pr->next;
    job->opts.lost_reason = NULL;
    job->opts.lost_index = -1;
    if (pr->current >= pr->next) { /* died inside a case, running `current` */
      job->opts.lost_index = pr->current;
      snprintf(lost, sizeof lost,
               "the workers died while running this configuration (exit status %d); new workers "
               "went on after it",
               status);
      job->opts.lost_reason = lost;
    }
    fprintf(stderr,
            "tpbench run: the workers stopped at configuration %d of %d (exit status %d); "
            "starting new ones to go on\n",
            pr->next + 1, job->matrix.n_configs, status);
  }
}

static void fill_options(const tp_run_args *args, const char *line, tp_run_worker_options *o) {
  memset(o, 0, sizeof *o);
  tp_harness_options *h = &o->harness;
  h->command = "run";
  h->db_path = args->db;
  h->command_line = line;
  h->warmup_iters = args->warmup;
  h->measure_iters = args->iters;
  h->window_timeout_s = args->timeout_s;
  h->quiet = args->quiet;
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
  int external = 0;
  int world = tp_job_world("run", args.gpus, &external);
  if (world <= 0) return world == -TP_EXIT_USAGE ? TP_EXIT_USAGE : TP_EXIT_FAILURE;
  run_job job;
  memset(&job, 0, sizeof job);
  job.trace = args.trace;
  if (tp_run_expand(&args.spec, world, &job.matrix) != TP_OK) {
    fprintf(stderr, "tpbench run: %s\n", tp_last_error());
    return TP_EXIT_USAGE;
  }
  tp_run_reject_world(&job.matrix, world);
  int status = tp_job_check_database("run", args.db);
  char *line = status == 0 ? tp_job_command_line(argc, argv) : NULL;
  void *shared = MAP_FAILED;
  if (status == 0) {
    shared = mmap(NULL, sizeof(tp_run_progress), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                  -1, 0);
    if (shared == MAP_FAILED) {
      fprintf(stderr, "tpbench run: no shared memory for the job's progress\n");
      status = TP_EXIT_FAILURE;
    }
  }
  if (status == 0) {
    job.progress = shared;
    memset(job.progress, 0, sizeof *job.progress);
    fill_options(&args, line ? line : "tpbench run", &job.opts);
    status = launch_until_done(&job, world, external);
  }
  if (shared != MAP_FAILED) munmap(shared, sizeof(tp_run_progress));
  free(line);
  tp_run_matrix_free(&job.matrix);
  return status;
}
