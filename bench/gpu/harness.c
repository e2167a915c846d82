/*
 * harness.c — one configuration on every rank, measured and recorded (see
 * harness.h for the order of the item's functions).
 *
 * Every rank walks the same configurations in the same order; the ranks
 * meet over the rendezvous after each step that can fail (prepare, capture,
 * the timed window, numerics) so they agree on the outcome before anyone
 * enters the next collective. Rank 0 alone touches the database.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../kernels/tp_cuda_check.h"
#include "../../kernels/tp_device.h"
#include "../../report/tp_report.h"
#include "../stats.h"
#include "graph.h"
#include "job.h"
#include "ops_trace.h"

enum { OUTCOME_MSG = 400, ACC_DOUBLES = 5 };

struct tp_harness {
  tp_worker_ctx *ctx;
  tp_collector *collector; /* NULL: no traced windows */
  tp_harness_options opts;
  tp_store *store; /* rank 0 only */
  int64_t run_id;
  cudaEvent_t *events;
  double *samples_us;     /* measure_iters, this rank */
  double *all_samples_us; /* world * measure_iters, gathered */
  double *acc;            /* device: ACC_DOUBLES per compared output */
  int done, total;
  int recorded; /* configurations written (rank 0) */
  /* The case's reference outputs (a REFERENCE configuration's copies). */
  void *ref[TP_ITEM_MAX_OUTPUTS];
  size_t ref_cap[TP_ITEM_MAX_OUTPUTS]; /* bytes allocated */
  size_t ref_count[TP_ITEM_MAX_OUTPUTS];
  int n_ref, have_ref;
};

/* What one rank says about a step; all ranks exchange it. */
typedef struct rank_outcome {
  int32_t rc;
  char msg[OUTCOME_MSG];
} rank_outcome;

/* ---- agreement between ranks ------------------------------------------------------- */

static tp_config_status status_of(tp_rc rc) {
  switch (rc) {
  case TP_OK: return TP_STATUS_OK;
  case TP_EREJECT: return TP_STATUS_REJECTED;
  case TP_EOOM: return TP_STATUS_OOM;
  case TP_ETIMEOUT: return TP_STATUS_TIMEOUT;
  default: return TP_STATUS_FAILED;
  }
}

tp_rc tp_harness_agree(tp_harness *h, tp_rc local, tp_rc *agreed, char *reason, size_t cap) {
  rank_outcome mine, all[TP_MAX_WORLD];
  memset(&mine, 0, sizeof mine);
  mine.rc = (int32_t)local;
  if (local != TP_OK) snprintf(mine.msg, sizeof mine.msg, "%s", tp_last_error());
  TP_TRY(tp_rdzv_allgather(h->ctx->rdzv, &mine, sizeof mine, all));
  *agreed = TP_OK;
  for (int r = 0; r < h->ctx->world; ++r) {
    if (all[r].rc == TP_OK) continue;
    *agreed = (tp_rc)all[r].rc;
    if (h->ctx->world > 1 && all[r].rc != TP_EREJECT)
      snprintf(reason, cap, "rank %d: %s", r, all[r].msg);
    else snprintf(reason, cap, "%s", all[r].msg);
    break;
  }
  return TP_OK;
}

/* ---- the run ------------------------------------------------------------------------ */

static tp_rc begin_run(tp_harness *h) {
  TP_TRY(tp_store_open(h->opts.db_path, 1, &h->store));
  if (h->opts.resume_run > 0) {
    h->run_id = h->opts.resume_run;
    return TP_OK;
  }
  return tp_job_begin_run(h->store, h->ctx->group, h->ctx->world, h->opts.command,
                          h->opts.command_line, h->opts.warmup_iters, h->opts.measure_iters,
                          &h->run_id);
}

static tp_rc setup_state(tp_harness *h) {
  const int iters = h->opts.measure_iters;
  h->events = calloc((size_t)iters + 1, sizeof(cudaEvent_t));
  h->samples_us = calloc((size_t)iters, sizeof(double));
  h->all_samples_us = calloc((size_t)iters * (size_t)h->ctx->world, sizeof(double));
  if (!h->events || !h->samples_us || !h->all_samples_us)
    return TP_FAIL(TP_EOOM, "no host memory for %d iterations", iters);
  for (int i = 0; i <= iters; ++i) TP_CUDA(cudaEventCreate(&h->events[i]));
  TP_CUDA(cudaMalloc((void **)&h->acc, sizeof(double) * ACC_DOUBLES * TP_ITEM_MAX_OUTPUTS));
  return TP_OK;
}

tp_rc tp_harness_open(tp_worker_ctx *ctx, tp_collector *collector, const tp_harness_options *opts,
                      int total, tp_harness **out) {
  *out = NULL;
  tp_harness *h = calloc(1, sizeof *h);
  if (!h) return TP_FAIL(TP_EOOM, "no host memory for the harness");
  h->ctx = ctx;
  h->collector = collector;
  h->opts = *opts;
  h->total = total;
  tp_rc rc = setup_state(h);
  if (rc == TP_OK && ctx->rank == 0) rc = begin_run(h);
  /* Every rank learns whether the others could start. */
  tp_rc agreed = TP_OK;
  char reason[OUTCOME_MSG + 16];
  tp_rc exch = tp_harness_agree(h, rc, &agreed, reason, sizeof reason);
  if (exch != TP_OK) rc = exch;
  else if (agreed != TP_OK) rc = TP_FAIL(agreed, "%s", reason);
  if (rc != TP_OK) {
    (void)tp_harness_close(h, rc, 0);
    return rc;
  }
  *out = h;
  return TP_OK;
}

int64_t tp_harness_run_id(const tp_harness *h) { return h->run_id; }

void tp_harness_set_done(tp_harness *h, int done) { h->done = done; }

int tp_harness_recorded(const tp_harness *h) { return h->recorded; }

void tp_harness_case_end(tp_harness *h) {
  for (int i = 0; i < TP_ITEM_MAX_OUTPUTS; ++i) {
    cudaFree(h->ref[i]);
    h->ref[i] = NULL;
    h->ref_cap[i] = 0;
    h->ref_count[i] = 0;
  }
  h->n_ref = 0;
  h->have_ref = 0;
}

static tp_rc print_table(tp_harness *h) {
  tp_report_format fmt = TP_FMT_MARKDOWN;
  TP_TRY(tp_report_format_parse(h->opts.format ? h->opts.format : "md", &fmt));
  tp_report_filter filter = {0};
  filter.run_id = h->run_id;
  fflush(stderr);
  TP_TRY(tp_report_throughput(h->store, &filter, fmt, stdout));
  fflush(stdout);
  return TP_OK;
}

tp_rc tp_harness_close(tp_harness *h, tp_rc rc, int finish) {
  if (!h) return rc;
  if (h->ctx->rank == 0 && h->store && h->run_id && finish) {
    tp_rc fin = rc == TP_OK ? tp_store_finish_run(h->store, h->run_id) : TP_OK;
    if (rc == TP_OK) rc = fin;
    if (rc == TP_OK) rc = print_table(h);
  }
  tp_harness_case_end(h);
  if (h->events)
    for (int i = 0; i <= h->opts.measure_iters; ++i)
      if (h->events[i]) cudaEventDestroy(h->events[i]);
  free(h->events);
  free(h->samples_us);
  free(h->all_samples_us);
  cudaFree(h->acc);
  if (h->store) tp_store_close(h->store);
  free(h);
  return rc;
}

/* ---- timing ------------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for an event without blocking forever: a hung peer or collective
 * becomes TP_ETIMEOUT after timeout_s. */
static tp_rc wait_event(cudaEvent_t ev, int timeout_s, const char *what) {
  double deadline = now_s() + timeout_s;
  for (;;) {
    cudaError_t st = cudaEventQuery(ev);
    if (st == cudaSuccess) return TP_OK;
    if (st != cudaErrorNotReady) TP_CUDA(st);
    if (now_s() > deadline)
      return TP_FAIL(TP_ETIMEOUT, "%s did not finish within %d s", what, timeout_s);
    usleep(200);
  }
}

/* A step as the loops run it: the item's own, or a replay of its graph. */
typedef struct stepper {
  tp_group *g;
  const tp_item *item;
  cudaGraphExec_t graph; /* NULL: eager */
} stepper;

static tp_rc one_step(void *arg) {
  stepper *s = arg;
  if (s->graph) return tp_graph_launch(s->g, s->graph);
  return s->item->ops->step(s->item->self, s->g);
}

static tp_rc run_steps(stepper *s, int n, cudaEvent_t *marks) {
  for (int i = 0; i < n; ++i) {
    TP_TRY(one_step(s));
    if (marks) TP_CUDA(cudaEventRecord(marks[i + 1], s->g->main_stream));
  }
  return TP_OK;
}

/* Warm-up, a host barrier so every rank starts the window together, then the
 * timed window: one event before the first step and one after each. */
static tp_rc time_window(tp_harness *h, stepper *s) {
  tp_group *g = h->ctx->group;
  const int iters = h->opts.measure_iters;
  TP_TRY(run_steps(s, h->opts.warmup_iters, NULL));
  TP_CUDA(cudaEventRecord(h->events[0], g->main_stream));
  TP_TRY(wait_event(h->events[0], h->opts.window_timeout_s, "the warm-up window"));
  TP_TRY(tp_rdzv_barrier(h->ctx->rdzv));
  TP_CUDA(cudaEventRecord(h->events[0], g->main_stream));
  TP_TRY(run_steps(s, iters, h->events));
  TP_TRY(wait_event(h->events[iters], h->opts.window_timeout_s, "the measurement window"));
  for (int i = 0; i < iters; ++i) {
    float ms = 0.0f;
    TP_CUDA(cudaEventElapsedTime(&ms, h->events[i], h->events[i + 1]));
    h->samples_us[i] = 1000.0 * (double)ms;
  }
  return TP_OK;
}

/* Graph mode, first part: eager warm-up steps, which plan algorithms and
 * fill caches (capture must not), waited for. */
static tp_rc eager_warmup(tp_harness *h, stepper *s) {
  stepper eager = {s->g, s->item, NULL};
  TP_TRY(run_steps(&eager, h->opts.warmup_iters, NULL));
  TP_CUDA(cudaEventRecord(h->events[0], s->g->main_stream));
  return wait_event(h->events[0], h->opts.window_timeout_s, "the eager warm-up before capture");
}

/* Graph mode, second part: one step captured. The graph's own warm-up
 * replays happen in time_window. */
static tp_rc capture_step(stepper *s) {
  stepper eager = {s->g, s->item, NULL};
  return tp_graph_capture(s->g, one_step, &eager, &s->graph);
}

/* ---- numerics ------------------------------------------------------------------------ */

typedef struct numerics {
  double diff2, ref2, max_abs, differ, nonfinite;
} numerics;

/* Copies the item's outputs aside: the CHECK configurations of the case are
 * compared against them. */
static tp_rc keep_reference(tp_harness *h, const tp_item *item, tp_dtype dt) {
  tp_item_output out[TP_ITEM_MAX_OUTPUTS];
  int n = item->ops->outputs(item->self, out, TP_ITEM_MAX_OUTPUTS);
  cudaStream_t s = h->ctx->group->main_stream;
  h->have_ref = 0;
  for (int i = 0; i < n; ++i) {
    size_t bytes = out[i].count * tp_dtype_bytes(dt);
    if (h->ref_cap[i] < bytes) {
      cudaFree(h->ref[i]);
      h->ref[i] = NULL;
      h->ref_cap[i] = 0;
      TP_CUDA(cudaMalloc(&h->ref[i], bytes));
      h->ref_cap[i] = bytes;
    }
    TP_CUDA(cudaMemcpyAsync(h->ref[i], out[i].ptr, bytes, cudaMemcpyDeviceToDevice, s));
    h->ref_count[i] = out[i].count;
  }
  TP_CUDA(cudaStreamSynchronize(s));
  h->n_ref = n;
  h->have_ref = 1;
  return TP_OK;
}

/* Compares this rank's outputs with the kept reference and sums each
 * output's comparison over all ranks into per[] (n entries). */
static tp_rc compare_reference(tp_harness *h, const tp_item *item, tp_dtype dt, numerics *per,
                               tp_item_output *out, int *n_out) {
  tp_group *g = h->ctx->group;
  int n = item->ops->outputs(item->self, out, TP_ITEM_MAX_OUTPUTS);
  if (n != h->n_ref)
    return TP_FAIL(TP_EINTERNAL, "%d outputs to compare, the reference kept %d", n, h->n_ref);
  double host[ACC_DOUBLES * TP_ITEM_MAX_OUTPUTS];
  TP_CUDA(cudaMemsetAsync(h->acc, 0, sizeof host, g->main_stream));
  for (int i = 0; i < n; ++i) {
    if (out[i].count != h->ref_count[i])
      return TP_FAIL(TP_EINTERNAL, "output %s has %zu elements, its reference %zu", out[i].name,
                     out[i].count, h->ref_count[i]);
    TP_CUDA(tp_launch_compare(dt, out[i].ptr, h->ref[i], out[i].count,
                              h->acc + (size_t)ACC_DOUBLES * (size_t)i, g->main_stream));
  }
  TP_CUDA(cudaMemcpyAsync(host, h->acc, sizeof host, cudaMemcpyDeviceToHost, g->main_stream));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  numerics mine[TP_ITEM_MAX_OUTPUTS], all[TP_MAX_WORLD][TP_ITEM_MAX_OUTPUTS];
  memset(mine, 0, sizeof mine);
  for (int i = 0; i < n; ++i) {
    const double *a = host + (size_t)ACC_DOUBLES * (size_t)i;
    mine[i] = (numerics){a[0], a[1], a[2], a[3], a[4]};
  }
  TP_TRY(tp_rdzv_allgather(h->ctx->rdzv, mine, sizeof mine, all));
  memset(per, 0, sizeof(numerics) * (size_t)n);
  for (int r = 0; r < h->ctx->world; ++r)
    for (int i = 0; i < n; ++i) {
      per[i].diff2 += all[r][i].diff2;
      per[i].ref2 += all[r][i].ref2;
      per[i].max_abs = fmax(per[i].max_abs, all[r][i].max_abs);
      per[i].differ += all[r][i].differ;
      per[i].nonfinite += all[r][i].nonfinite;
    }
  *n_out = n;
  return TP_OK;
}

static double rel_of(const numerics *nm) {
  return sqrt(nm->diff2 / (nm->ref2 > 0 ? nm->ref2 : 1.0));
}

typedef struct outcome {
  tp_ops_trace trace;
  int have_trace;
  tp_config_status status;
  char reason[OUTCOME_MSG + 64];
  tp_result result;
  int have_result;
  tp_item_info info;
} outcome;

/* Judges a CHECK configuration against the case's reference. */
static tp_rc check_numerics(tp_harness *h, const tp_harness_config *cfg, const tp_item *item,
                            outcome *oc) {
  numerics per[TP_ITEM_MAX_OUTPUTS], pooled = {0};
  tp_item_output out[TP_ITEM_MAX_OUTPUTS];
  int n = 0;
  TP_TRY(compare_reference(h, item, oc->info.dtype, per, out, &n));
  int worst = 0;
  for (int i = 0; i < n; ++i) {
    pooled.diff2 += per[i].diff2;
    pooled.ref2 += per[i].ref2;
    pooled.max_abs = fmax(pooled.max_abs, per[i].max_abs);
    pooled.differ += per[i].differ;
    pooled.nonfinite += per[i].nonfinite;
    if (rel_of(&per[i]) > rel_of(&per[worst])) worst = i;
  }
  const int by_worst = cfg->worst_output && n > 0;
  oc->result.rel_err = by_worst ? rel_of(&per[worst]) : rel_of(&pooled);
  oc->result.max_abs_err = pooled.max_abs;
  oc->result.numerics_ref = "stock";
  if (pooled.nonfinite > 0 || oc->result.rel_err > cfg->tolerance) {
    oc->status = TP_STATUS_FAILED;
    if (by_worst)
      snprintf(oc->reason, sizeof oc->reason,
               "numerics: %.0f non-finite outputs, rel err %.3e in %s against stock (tolerance "
               "%.0e)",
               pooled.nonfinite, oc->result.rel_err, out[worst].name, cfg->tolerance);
    else
      snprintf(oc->reason, sizeof oc->reason,
               "numerics: %.0f non-finite outputs, rel err %.3e against stock (tolerance %.0e)",
               pooled.nonfinite, oc->result.rel_err, cfg->tolerance);
  }
  return TP_OK;
}

/* ---- one configuration ---------------------------------------------------------------- */

static tp_rc fill_result(tp_harness *h, const tp_harness_config *cfg, outcome *oc) {
  double *slowest = malloc(sizeof(double) * (size_t)h->opts.measure_iters);
  if (!slowest) return TP_FAIL(TP_EOOM, "no host memory for samples");
  const double *per_rank[TP_MAX_WORLD];
  for (int r = 0; r < h->ctx->world; ++r)
    per_rank[r] = h->all_samples_us + (size_t)r * (size_t)h->opts.measure_iters;
  tp_rc rc = tp_stats_slowest_rank(per_rank, h->ctx->world, h->opts.measure_iters, slowest);
  tp_stats st;
  if (rc == TP_OK) rc = tp_stats_compute(slowest, h->opts.measure_iters, &st);
  free(slowest);
  TP_TRY(rc);
  tp_result *res = &oc->result;
  res->n_samples = st.n;
  res->median_us = st.median;
  res->p10_us = st.p10;
  res->p90_us = st.p90;
  res->mean_us = st.mean;
  res->min_us = st.min;
  res->max_us = st.max;
  res->cv = st.cv;
  res->tokens_per_s = (double)cfg->axes->tokens / (st.median * 1e-6);
  res->flops = cfg->flops;
  res->tflops =
      cfg->flops > 0 ? cfg->flops / (double)h->ctx->world / (st.median * 1e-6) / 1e12 : NAN;
  res->bytes_moved = oc->info.bytes_moved;
  res->workspace_bytes = oc->info.workspace_bytes;
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
    res->peak_mem_bytes = (int64_t)(total_b - free_b);
  res->max_abs_err = NAN;
  res->rel_err = NAN;
  oc->have_result = 1;
  return TP_OK;
}

static void set_failure(outcome *oc, tp_rc rc, const char *reason) {
  oc->status = status_of(rc);
  snprintf(oc->reason, sizeof oc->reason, "%s", reason);
  oc->have_result = 0;
}

/* The traced window after the measured one; a schedule the trace does not
 * confirm turns the configuration into a failure, its timing kept. */
static tp_rc trace_config(tp_harness *h, stepper *s, outcome *oc) {
  tp_ops_trace *t = &oc->trace;
  memset(t, 0, sizeof *t);
  t->iters = h->opts.trace_iters;
  t->schedule = oc->info.evidence_schedule;
  t->transfers_per_iter = oc->info.transfers_per_step;
  if (t->transfers_per_iter == 0) t->schedule = NULL;
  t->untraced_median_us = oc->result.median_us;
  TP_TRY(tp_ops_trace_window(h->ctx, h->collector, one_step, s, t));
  oc->have_trace = h->ctx->rank == 0;
  if (oc->have_trace && !t->record.evidence_ok) {
    oc->status = TP_STATUS_FAILED;
    snprintf(oc->reason, sizeof oc->reason, "schedule evidence: %s", t->record.evidence_message);
  }
  return TP_OK;
}

/* Plans and prepares on this rank; the caller agrees. */
static tp_rc plan_and_prepare(tp_group *g, const tp_item *item) {
  TP_TRY(item->ops->plan(item->self, g));
  return item->ops->prepare(item->self, g);
}

/* A device that timed out or raised a CUDA error may be wedged. */
static int is_fatal(tp_rc rc) { return rc == TP_ETIMEOUT || rc == TP_ECUDA; }

/* Graph mode: warm-up and capture, then the ranks agree. A capture that
 * failed on any rank (workspace growth while frozen, an uncapturable call)
 * is recorded as a failed configuration, never a crash or a hang: nothing
 * of it ran. *skip is set when the configuration ends here. */
static tp_rc graph_phase(tp_harness *h, stepper *s, outcome *oc, int *skip) {
  char reason[OUTCOME_MSG + 16];
  tp_rc agreed = TP_OK;
  tp_rc rc = eager_warmup(h, s);
  if (is_fatal(rc)) {
    set_failure(oc, rc, tp_last_error());
    return rc;
  }
  if (rc == TP_OK) rc = capture_step(s);
  TP_TRY(tp_harness_agree(h, rc, &agreed, reason, sizeof reason));
  if (agreed != TP_OK) {
    set_failure(oc, agreed == TP_EOOM ? TP_EOOM : TP_EINTERNAL, reason);
    *skip = 1;
  }
  return TP_OK;
}

/* Measures a prepared configuration: [capture,] window, samples, result,
 * numerics, trace. Returns an error only when the worker must stop. */
static tp_rc measure(tp_harness *h, const tp_harness_config *cfg, stepper *s, outcome *oc) {
  char reason[OUTCOME_MSG + 16];
  tp_rc agreed = TP_OK, rc = TP_OK;
  if (s->item->ops->before) rc = s->item->ops->before(s->item->self, s->g);
  if (rc == TP_OK && cfg->axes->graph) {
    int skip = 0;
    TP_TRY(graph_phase(h, s, oc, &skip));
    if (skip) return TP_OK;
  }
  if (rc == TP_OK) rc = time_window(h, s);
  if (is_fatal(rc)) {
    /* The device may be wedged: record and stop this worker. */
    set_failure(oc, rc, tp_last_error());
    return rc;
  }
  TP_TRY(tp_harness_agree(h, rc, &agreed, reason, sizeof reason));
  if (agreed != TP_OK) {
    set_failure(oc, agreed, reason);
    return TP_OK;
  }
  TP_TRY(tp_rdzv_allgather(h->ctx->rdzv, h->samples_us,
                           sizeof(double) * (size_t)h->opts.measure_iters, h->all_samples_us));
  TP_TRY(fill_result(h, cfg, oc));
  oc->status = TP_STATUS_OK;
  if (cfg->numerics == TP_NUMERICS_REFERENCE) TP_TRY(keep_reference(h, s->item, oc->info.dtype));
  else if (cfg->numerics == TP_NUMERICS_CHECK && h->have_ref)
    TP_TRY(check_numerics(h, cfg, s->item, oc));
  if (h->collector) {
    rc = trace_config(h, s, oc);
    if (rc != TP_OK) {
      set_failure(oc, rc, tp_last_error());
      return rc; /* a tracer that fails mid-run leaves the ranks out of step */
    }
  }
  return TP_OK;
}

/* ---- recording ------------------------------------------------------------------------ */

static tp_rc record(tp_harness *h, const tp_harness_config *cfg, const outcome *oc) {
  if (h->ctx->rank != 0) return TP_OK;
  tp_samples sets[TP_MAX_WORLD];
  for (int r = 0; r < h->ctx->world; ++r) {
    sets[r].rank = r;
    sets[r].count = h->opts.measure_iters;
    sets[r].time_us = h->all_samples_us + (size_t)r * (size_t)h->opts.measure_iters;
  }
  const int planned = oc->info.planned && oc->info.n_schedules > 0;
  tp_config_record rec = {0};
  rec.axes = cfg->axes;
  rec.status = oc->status;
  rec.reason = oc->status == TP_STATUS_OK && !oc->reason[0] ? NULL : oc->reason;
  rec.result = oc->have_result ? &oc->result : NULL;
  rec.samples = oc->have_result ? sets : NULL;
  rec.n_sample_sets = oc->have_result ? h->ctx->world : 0;
  rec.schedules = planned ? oc->info.schedules : NULL;
  rec.n_schedules = planned ? oc->info.n_schedules : 0;
  int64_t id = 0;
  TP_TRY(tp_store_put_config(h->store, h->run_id, &rec, &id));
  h->recorded++;
  if (oc->have_trace) TP_TRY(tp_store_put_trace(h->store, id, &oc->trace.record));
  return TP_OK;
}

static void progress(tp_harness *h, const tp_harness_config *cfg, const outcome *oc) {
  h->done++;
  if (h->ctx->rank != 0 || h->opts.quiet) return;
  const char *what = cfg->label ? cfg->label : "";
  if (oc->status == TP_STATUS_OK)
    fprintf(stderr, "[%3d/%d] %-52s %-9s %10.1f us  cv %.3f\n", h->done, h->total, what,
            oc->info.schedule_label ? oc->info.schedule_label : "", oc->result.median_us,
            oc->result.cv);
  else
    fprintf(stderr, "[%3d/%d] %-52s %s: %s\n", h->done, h->total, what, tp_status_name(oc->status),
            oc->reason);
}

/* Progress, record, and the trace's memory; the first error wins. */
static tp_rc finish_config(tp_harness *h, const tp_harness_config *cfg, outcome *oc, tp_rc stop) {
  progress(h, cfg, oc);
  tp_rc stored = record(h, cfg, oc);
  tp_ops_trace_free(&oc->trace);
  return stop != TP_OK ? stop : stored;
}

tp_rc tp_harness_run(tp_harness *h, const tp_harness_config *cfg, const tp_item *item) {
  outcome oc;
  memset(&oc, 0, sizeof oc);
  if (cfg->rejected) {
    set_failure(&oc, TP_EREJECT, cfg->reason ? cfg->reason : "rejected");
    return finish_config(h, cfg, &oc, TP_OK);
  }
  stepper s = {h->ctx->group, item, NULL};
  tp_rc rc = plan_and_prepare(s.g, item);
  item->ops->info(item->self, &oc.info);
  char reason[OUTCOME_MSG + 16];
  tp_rc agreed = TP_OK;
  tp_rc stop = tp_harness_agree(h, rc, &agreed, reason, sizeof reason);
  if (stop == TP_OK && agreed != TP_OK) set_failure(&oc, agreed, reason);
  else if (stop == TP_OK) stop = measure(h, cfg, &s, &oc);
  /* A worker that stops before its configuration had an outcome records why. */
  if (stop != TP_OK && oc.status == TP_STATUS_OK && !oc.have_result)
    set_failure(&oc, stop, tp_last_error());
  tp_graph_destroy(s.graph);
  return finish_config(h, cfg, &oc, stop);
}

tp_rc tp_harness_skip(tp_harness *h, const tp_harness_config *cfg, tp_rc rc, const char *reason) {
  outcome oc;
  memset(&oc, 0, sizeof oc);
  set_failure(&oc, rc, reason);
  return finish_config(h, cfg, &oc, TP_OK);
}
