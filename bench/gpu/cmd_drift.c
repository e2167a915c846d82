/*
 * cmd_drift.c — `tpbench drift`: a block (or a stack of blocks) trained N
 * steps stock, then with each dist_gemm schedule and reduce-scatter sum,
 * from the same initial weights and data (drift.h); every configuration is
 * one of kind "drift" in the database with its steps' loss and gradient
 * norm (drift_steps), and the table of them against stock is printed from
 * the database at the end (report/tp_drift.h), as `--show` prints it again.
 *
 * The parent parses and checks everything without touching CUDA, then the
 * launcher forks one worker per GPU (or this process joins an external
 * launcher's job), like `link`. A configuration the plan rejects (dist_gemm
 * at TP 1, rs_sum nccl for stock) is recorded with its reason and the run
 * goes on; one that fails while training is recorded (with the steps it
 * finished) and ends the run, since its ranks may no longer agree on where
 * they are. A watchdog (watchdog.h) is armed around every configuration's
 * set-up and every step for --timeout seconds: a hung step (a peer that
 * died mid-training, or the test-only TPBENCH_TEST_HANG_STEP) makes rank 0
 * record the configuration as timed out with its finished steps, then
 * aborts NCCL and ends the worker, so the run exits non-zero instead of
 * waiting for the launcher.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/commands.h"
#include "bench/cli/drift_args.h"
#include "bench/gpu/drift.h"
#include "bench/gpu/harness.h"
#include "bench/gpu/job.h"
#include "bench/gpu/plan_info.h"
#include "bench/gpu/worker_group.h"
#include "bench/launch/launcher.h"
#include "bench/stats/stats.h"
#include "report/tp_drift.h"

typedef struct drift_job {
  tp_drift_args args;
  char *command_line;
  tp_block_shape shape;
  tp_drift_recipe recipe;
  tp_drift_variant variants[TP_DRIFT_MAX_VARIANTS];
  int n_variants;
  tp_drift_hang hang; /* TPBENCH_TEST_HANG_STEP (test only) */
  char hang_knob[96]; /* as the run records it; "" when off */
} drift_job;

/* What the worker of rank 0 writes and prints; NULL store elsewhere. */
typedef struct drift_run {
  tp_worker_ctx *ctx;
  const drift_job *job;
  tp_store *store;
  int64_t run_id;
  tp_drift_step *steps;
  double *step_ms;
  tp_watchdog *watchdog;
  atomic_int done;                   /* steps of the configuration training now finished */
  int current;                       /* the configuration training now; -1: none */
  const tp_block_plan *current_plan; /* its plan while it trains */
} drift_run;

/* Ranks other than 0 wait this much longer before their watchdog fires, so
 * that rank 0, which records, is the first to see a hung step. */
enum { DRIFT_PEER_GRACE_S = 10 };

static tp_block_shape shape_of(const tp_drift_args *a) {
  const tp_model_preset *m = a->model;
  tp_block_shape s;
  memset(&s, 0, sizeof s);
  s.layer = a->layer;
  s.dtype = a->dtype;
  s.batch = a->batch;
  s.seq = a->seqlen;
  s.dim = m->dim;
  s.n_heads = m->n_heads;
  s.n_kv_heads = m->n_kv_heads;
  s.head_dim = m->head_dim;
  s.ffn_hidden = m->ffn_hidden;
  s.sp = 1;
  s.backward = 1;
  return s;
}

/* Stock `repeat` times, then each schedule with each rs_sum. */
static void fill_job(drift_job *job) {
  const tp_drift_args *a = &job->args;
  job->shape = shape_of(a);
  job->recipe = (tp_drift_recipe){.steps = a->steps,
                                  .depth = a->depth,
                                  .optimizer = a->optimizer == TP_DRIFT_ARG_SGD ? TP_DRIFT_SGD
                                                                                : TP_DRIFT_ADAMW,
                                  .lr = a->lr,
                                  .seed = (uint64_t)a->seed,
                                  .same_batch = a->same_batch};
  int n = 0;
  for (int i = 0; i < a->repeat; ++i)
    job->variants[n++] = (tp_drift_variant){TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, TP_RS_SUM_EPILOGUE};
  for (int s = 0; s < a->n_schedules; ++s)
    for (int r = 0; r < a->n_rs_sums; ++r)
      job->variants[n++] =
          (tp_drift_variant){TP_BACKEND_DIST, a->schedules[s], a->chunks, a->rs_sums[r]};
  job->n_variants = n;
}

/* ---- records ------------------------------------------------------------------------------ */

static tp_config_axes drift_axes(const drift_run *dr, const tp_drift_variant *v) {
  const tp_drift_args *a = &dr->job->args;
  const int dist = v->backend == TP_BACKEND_DIST;
  tp_config_axes x;
  memset(&x, 0, sizeof x);
  x.kind = "drift";
  x.model = a->model->name;
  x.op_or_layer = tp_layer_name(a->layer);
  x.backend = tp_backend_axis(v->backend);
  x.schedule = dist ? tp_schedule_name(v->schedule) : NULL;
  x.chunks = dist ? v->chunks : 0;
  x.tp = dr->ctx->world;
  x.batch = a->batch;
  x.seqlen = a->seqlen;
  x.tokens = (int64_t)a->batch * a->seqlen;
  x.dtype = tp_dtype_name(a->dtype);
  x.sp = 1;
  x.pass = tp_pass_name(TP_PASS_FWD_BWD);
  x.rs_sum = dist ? tp_rs_sum_name(v->rs_sum) : NULL;
  return x;
}

static tp_config_status status_for(tp_rc rc) {
  switch (rc) {
  case TP_OK: return TP_STATUS_OK;
  case TP_EREJECT: return TP_STATUS_REJECTED;
  case TP_EOOM: return TP_STATUS_OOM;
  case TP_ETIMEOUT: return TP_STATUS_TIMEOUT;
  default: return TP_STATUS_FAILED;
  }
}

/* The step times as the configuration's result (the throughput table leaves kind drift out). */
static tp_rc step_result(const drift_run *dr, const tp_block_plan *plan, tp_result *res) {
  const int n = dr->job->recipe.steps;
  double *us = malloc((size_t)n * sizeof *us);
  if (!us) return TP_FAIL(TP_EOOM, "no host memory for the step times");
  for (int i = 0; i < n; ++i) us[i] = 1000.0 * dr->step_ms[i];
  tp_stats st;
  tp_rc rc = tp_stats_compute(us, n, &st);
  free(us);
  TP_TRY(rc);
  memset(res, 0, sizeof *res);
  tp_result_set_stats(res, &st);
  res->tokens_per_s = (double)plan->tokens / (st.median * 1e-6);
  res->tflops = NAN;
  res->bytes_moved = (double)plan->comm_bytes * dr->job->recipe.depth;
  res->workspace_bytes = (int64_t)(plan->symm_bytes + plan->scratch_bytes + plan->saved_bytes);
  res->max_abs_err = NAN;
  res->rel_err = NAN;
  return TP_OK;
}

/* One configuration (rank 0): its axes, status, the n_steps steps it
 * finished (all of them when ok) and the schedules its projections ran. */
static tp_rc record(const drift_run *dr, const tp_drift_variant *v, const tp_block_plan *plan,
                    tp_rc outcome, const char *reason, int n_steps) {
  if (!dr->store) return TP_OK;
  const tp_config_axes axes = drift_axes(dr, v);
  tp_config_record rec;
  memset(&rec, 0, sizeof rec);
  rec.axes = &axes;
  rec.status = status_for(outcome);
  rec.reason = outcome == TP_OK ? NULL : reason;
  tp_result res;
  tp_schedule_choice schedules[TP_N_PROJ];
  if (outcome == TP_OK) {
    TP_TRY(step_result(dr, plan, &res));
    rec.result = &res;
  }
  rec.drift_steps = n_steps > 0 ? dr->steps : NULL;
  rec.n_drift_steps = n_steps > 0 ? n_steps : 0;
  for (int i = 0; plan && i < TP_N_PROJ; ++i) {
    if (!plan->has[i]) continue;
    const tp_linear_plan *lp = &plan->proj[i];
    schedules[rec.n_schedules++] =
        (tp_schedule_choice){tp_block_proj_name((tp_block_proj)i), tp_schedule_name(lp->schedule),
                             tp_plan_engine(lp), lp->chunks, lp->reason};
  }
  rec.schedules = schedules;
  return tp_store_put_config(dr->store, dr->run_id, &rec, NULL);
}

static void progress(const drift_run *dr, int index, const char *what) {
  if (dr->ctx->rank != 0 || dr->job->args.quiet) return;
  const tp_drift_variant *v = &dr->job->variants[index];
  fprintf(stderr, "tpbench drift: [%d/%d] %s%s%s%s%s: %s\n", index + 1, dr->job->n_variants,
          tp_backend_axis(v->backend), v->backend == TP_BACKEND_DIST ? " " : "",
          v->backend == TP_BACKEND_DIST ? tp_schedule_name(v->schedule) : "",
          v->backend == TP_BACKEND_DIST ? " rs_sum=" : "",
          v->backend == TP_BACKEND_DIST ? tp_rs_sum_name(v->rs_sum) : "", what);
}

/* The watchdog's last words on rank 0 (watchdog.h): the configuration
 * training now, recorded as timed out with the steps it finished. */
static void record_hung(void *arg, const char *what) {
  drift_run *dr = arg;
  if (dr->current < 0 || !dr->store) return;
  const int done = atomic_load(&dr->done);
  char reason[320];
  snprintf(reason, sizeof reason,
           "%s did not finish within %d s (--timeout) after %d of %d steps: the run ended "
           "(NCCL aborted)",
           what, dr->job->args.timeout_s, done, dr->job->recipe.steps);
  const tp_rc rc =
      record(dr, &dr->job->variants[dr->current], dr->current_plan, TP_ETIMEOUT, reason, done);
  if (rc == TP_OK)
    fprintf(stderr,
            "tpbench drift: configuration %d of %d recorded as timed out with its %d finished "
            "step(s) in run %lld ('tpbench drift --show %lld')\n",
            dr->current + 1, dr->job->n_variants, done, (long long)dr->run_id,
            (long long)dr->run_id);
  else fprintf(stderr, "tpbench drift: the hung configuration: %s\n", tp_last_error());
}

/* Trains plan under the watchdog, the configuration's finished steps counted. */
static tp_rc train_watched(drift_run *dr, int index, const tp_block_plan *plan) {
  tp_worker_ctx *ctx = dr->ctx;
  const double timeout =
      (double)dr->job->args.timeout_s + (ctx->rank == 0 ? 0.0 : (double)DRIFT_PEER_GRACE_S);
  const tp_drift_guard guard = {dr->watchdog, timeout, &dr->done, dr->job->hang.step,
                                dr->job->hang.rank};
  dr->current_plan = plan;
  dr->current = index;
  tp_rc rc = tp_drift_train_guarded(ctx->group, tp_worker_exchange, ctx->rdzv, plan,
                                    &dr->job->recipe, &guard, dr->steps, dr->step_ms);
  dr->current = -1;
  dr->current_plan = NULL;
  return rc;
}

/* Plans, agrees, trains and records configuration index. TP_OK unless the
 * run cannot go on (a training failure, the database). */
static tp_rc drift_variant(drift_run *dr, int index) {
  tp_worker_ctx *ctx = dr->ctx;
  const tp_drift_variant *v = &dr->job->variants[index];
  tp_block_plan plan;
  char reason[416];
  tp_rc local = tp_drift_plan(ctx->group, &dr->job->shape, v, &plan);
  tp_rc agreed =
      tp_drift_agree(tp_worker_exchange, ctx->rdzv, ctx->world, local, reason, sizeof reason);
  if (agreed != TP_OK) {
    progress(dr, index, reason);
    return record(dr, v, local == TP_OK ? &plan : NULL, agreed, reason, 0);
  }
  agreed = train_watched(dr, index, &plan);
  char what[160];
  if (agreed == TP_OK) {
    const tp_drift_step *last = &dr->steps[dr->job->recipe.steps - 1];
    snprintf(what, sizeof what, "%d steps, loss %.6g -> %.6g, grad norm %.6g -> %.6g",
             dr->job->recipe.steps, dr->steps[0].loss, last->loss, dr->steps[0].grad_norm,
             last->grad_norm);
    progress(dr, index, what);
    return record(dr, v, &plan, TP_OK, NULL, dr->job->recipe.steps);
  }
  snprintf(reason, sizeof reason, "%s", tp_last_message());
  progress(dr, index, reason);
  TP_TRY(record(dr, v, &plan, agreed, reason, atomic_load(&dr->done)));
  return TP_FAIL(agreed, "%s", reason);
}

/* Collective: every rank sends its host facts; rank 0 records the run. */
static tp_rc begin_run(drift_run *dr) {
  tp_job_system system;
  TP_TRY(tp_job_gather_system(dr->ctx, &system));
  tp_rc rc = TP_OK;
  if (dr->ctx->rank == 0) {
    const tp_drift_args *a = &dr->job->args;
    tp_job_run_desc d = {"drift", dr->job->command_line,
                         0,       a->steps,
                         0,       NULL,
                         0,       dr->job->hang_knob[0] ? dr->job->hang_knob : NULL};
    rc = tp_store_open(a->db, 1, &dr->store);
    if (rc == TP_OK)
      rc = tp_job_begin_run(dr->store, dr->ctx->group, dr->ctx->world, &d, &system, &dr->run_id);
  }
  tp_job_system_free(&system);
  return rc;
}

/* Rank 0: the table from the database, and the exit status it calls for. */
static int print_table(const drift_run *dr) {
  tp_report_format fmt = TP_FMT_MARKDOWN;
  int status = TP_EXIT_FAILURE;
  tp_rc rc = tp_report_format_parse(dr->job->args.format, &fmt);
  if (rc == TP_OK) rc = tp_drift_show_table(dr->store, dr->run_id, fmt, stdout, stderr, &status);
  if (rc != TP_OK) fprintf(stderr, "tpbench drift: the table: %s\n", tp_last_message());
  fflush(stdout);
  return status;
}

static tp_rc drift_all(tp_worker_ctx *ctx, const drift_job *job, int *status) {
  drift_run dr;
  memset(&dr, 0, sizeof dr);
  dr.ctx = ctx;
  dr.job = job;
  dr.current = -1;
  atomic_init(&dr.done, 0);
  dr.steps = calloc((size_t)job->recipe.steps, sizeof *dr.steps);
  dr.step_ms = calloc((size_t)job->recipe.steps, sizeof *dr.step_ms);
  tp_rc rc = dr.steps && dr.step_ms ? TP_OK : TP_FAIL(TP_EOOM, "no host memory for the steps");
  if (rc == TP_OK) rc = begin_run(&dr);
  if (rc == TP_OK) rc = tp_watchdog_start(ctx->group, ctx->rank, &dr.watchdog);
  if (rc == TP_OK && ctx->rank == 0) tp_watchdog_set_last_words(dr.watchdog, record_hung, &dr);
  for (int i = 0; rc == TP_OK && i < job->n_variants; ++i) rc = drift_variant(&dr, i);
  if (dr.store) {
    if (rc == TP_OK) rc = tp_store_finish_run(dr.store, dr.run_id);
    *status = dr.run_id > 0 ? print_table(&dr) : TP_EXIT_FAILURE;
  }
  tp_watchdog_stop(dr.watchdog); /* before the store its last words write to */
  if (dr.store) tp_store_close(dr.store);
  free(dr.steps);
  free(dr.step_ms);
  return rc;
}

static int drift_worker(const tp_launch_env *env, void *arg) {
  const drift_job *job = arg;
  tp_worker_ctx ctx;
  int status = TP_EXIT_OK;
  tp_rc rc = tp_worker_join(env, TP_WORKER_RENDEZVOUS_TIMEOUT_MS, &ctx);
  if (rc == TP_OK) rc = drift_all(&ctx, job, &status);
  if (rc != TP_OK)
    fprintf(stderr, "tpbench drift: rank %d: %s: %s\n", env->rank, tp_rc_name(rc), tp_last_error());
  tp_worker_leave(&ctx);
  return rc == TP_OK ? status : TP_EXIT_FAILURE;
}

/* The parent's side of a training run: the database and the GPUs checked, the workers started. */
static int launch_training(drift_job *job, int argc, char **argv) {
  int status = tp_job_precheck_database("drift", job->args.db);
  if (status != TP_EXIT_OK) return status;
  int world = 0, external = 0;
  status = tp_job_world("drift", job->args.gpus, &world, &external);
  if (status != TP_EXIT_OK) return status;
  fill_job(job);
  const char *hang = getenv(TP_DRIFT_HANG_ENV);
  if (tp_drift_hang_parse(hang, world, job->args.steps, &job->hang) != TP_OK) {
    fprintf(stderr, "tpbench drift: %s\n", tp_last_message());
    return TP_EXIT_USAGE;
  }
  if (job->hang.step >= 0)
    snprintf(job->hang_knob, sizeof job->hang_knob,
             TP_DRIFT_HANG_ENV "=%d:%d (a rank stops before a training step)", job->hang.step,
             job->hang.rank);
  job->command_line = tp_job_command_line(argc, argv);
  return tp_launch(world, drift_worker, job);
}

int tp_cmd_drift(int argc, char **argv) {
  drift_job *job = calloc(1, sizeof *job);
  if (!job) {
    fprintf(stderr, "tpbench drift: out of memory\n");
    return TP_EXIT_FAILURE;
  }
  tp_drift_args_defaults(&job->args);
  int help = 0, status;
  tp_rc rc = tp_drift_args_parse(argc, argv, &job->args, &help);
  if (rc != TP_OK || help) status = tp_exit_for(rc);
  else if (job->args.show) status = tp_drift_show(&job->args);
  else status = launch_training(job, argc, argv);
  free(job->command_line);
  free(job);
  return status;
}
