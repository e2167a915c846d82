/*
 * harness.c — the configurations of one case on every rank, measured in
 * rounds and recorded (see harness.h for the phases).
 *
 * Every rank walks the same configurations in the same order (the round
 * orders come from the same seed everywhere); the ranks meet over the
 * rendezvous after each step that can fail (prepare, capture, each window,
 * numerics) so they agree on the outcome before anyone enters the next
 * collective. Rank 0 alone touches the database: every other rank's
 * measurements reach it over the rendezvous (each window's per-iteration
 * times and host times, the numerics' sums, the traces, the host facts of
 * the system record), and those ranks never open the file (job.h).
 */
#include "bench/gpu/harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "bench/gpu/graph.h"
#include "bench/gpu/job.h"
#include "bench/gpu/ops_trace.h"
#include "bench/gpu/watchdog.h"
#include "bench/launch/progress_line.h"
#include "bench/stats/replay_order.h"
#include "bench/stats/stats.h"
#include "common/tp_bootstrap.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "kernels/tp_device_alloc.h"
#include "report/tp_report.h"

enum { OUTCOME_MSG = 400, ACC_DOUBLES = 5, REASON_CAP = OUTCOME_MSG + 64 };

/* A configuration's checks: one per compared output, the item's own, and a
 * graph configuration's replay against its eager step. */
enum { TP_HARNESS_MAX_CHECKS = TP_ITEM_MAX_OUTPUTS + TP_ITEM_MAX_OWN_CHECKS + 1 };

/* The watchdog fires this long after a phase's own deadlines: those report a
 * timeout themselves when the host can still look (harness waits). */
static const double WATCHDOG_GRACE_S = 10.0;

/* The device ledger's owners (tp_device_alloc.h): the harness's own buffers,
 * the case's tensors (the worker's), and each configuration's. */
#define HARNESS_OWNER TP_ALLOC_OWNER(TP_ALLOC_HARNESS, 0)
#define CASE_OWNER TP_ALLOC_OWNER(TP_ALLOC_CASE, 0)
#define CONFIG_OWNER(cfg) TP_ALLOC_OWNER(TP_ALLOC_CONFIG, (cfg)->index)

struct tp_harness {
  tp_worker_ctx *ctx;
  tp_collector *collector; /* NULL: no traced windows */
  tp_watchdog *watchdog;   /* ends this worker when a phase hangs where no wait can see */
  tp_harness_options opts;
  tp_store *store; /* rank 0 only */
  int64_t run_id;
  cudaEvent_t *events;
  double *window_us; /* measure_iters: this rank's last window */
  double *host_us;   /* measure_iters: host time issuing each step of it */
  double *acc;       /* device: ACC_DOUBLES per compared output */
  int done, total;
  int done_at_open;        /* done when this process began (a resumed job) */
  double opened_at;        /* now_s() at open: the progress line's elapsed time */
  int tty;                 /* rank 0 draws one updating progress line on stderr */
  tp_progress_style style; /* which progress lines rank 0 prints (progress_line.h) */
  int line_drawn;          /* the progress line is on screen (a newline ends it) */
  int recorded;            /* configurations written (rank 0) */
  int cases;               /* cases run so far: seeds each case's shuffles */
  /* The case's reference outputs (the REFERENCE configuration's copies). */
  void *ref[TP_ITEM_MAX_OUTPUTS];
  size_t ref_cap[TP_ITEM_MAX_OUTPUTS]; /* bytes allocated */
  size_t ref_count[TP_ITEM_MAX_OUTPUTS];
  int n_ref, have_ref;
  char no_ref_why[REASON_CAP]; /* why the checks of the case cannot run */
  /* A graph configuration's eager outputs, beside its replay's (numerics). */
  void *eager[TP_ITEM_MAX_OUTPUTS];
  size_t eager_cap[TP_ITEM_MAX_OUTPUTS];
  cudaEvent_t *mixed_events; /* a mixed window's: one per replay and one before (grown) */
  int n_mixed_events;
};

static double now_s(void);
static void draw_progress(tp_harness *h, const char *label);

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
  if (local != TP_OK) snprintf(mine.msg, sizeof mine.msg, "%s", tp_last_message());
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

static tp_rc begin_run(tp_harness *h, const tp_job_system *system) {
  TP_TRY(tp_store_open(h->opts.db_path, 1, &h->store));
  if (h->opts.resume_run > 0) {
    h->run_id = h->opts.resume_run;
    return TP_OK;
  }
  tp_job_run_desc d;
  memset(&d, 0, sizeof d);
  d.command = h->opts.command;
  d.command_line = h->opts.command_line;
  d.warmup_iters = h->opts.warmup_iters;
  d.measure_iters = h->opts.measure_iters;
  d.rounds = h->opts.rounds;
  d.order_policy = h->opts.shuffle ? "shuffle" : "rotate";
  d.order_seed = (int64_t)h->opts.seed;
  return tp_job_begin_run(h->store, h->ctx->group, h->ctx->world, &d, system, &h->run_id);
}

static tp_rc setup_state(tp_harness *h) {
  const int iters = h->opts.measure_iters;
  h->events = calloc((size_t)iters + 1, sizeof(cudaEvent_t));
  h->window_us = calloc((size_t)iters, sizeof(double));
  h->host_us = calloc((size_t)iters, sizeof(double));
  if (!h->events || !h->window_us || !h->host_us)
    return TP_FAIL(TP_EOOM, "no host memory for %d iterations", iters);
  for (int i = 0; i <= iters; ++i) TP_CUDA(cudaEventCreate(&h->events[i]));
  TP_TRY(tp_device_malloc_as(HARNESS_OWNER, (void **)&h->acc,
                             sizeof(double) * ACC_DOUBLES * TP_ITEM_MAX_OUTPUTS));
  return TP_OK;
}

tp_rc tp_harness_open(tp_worker_ctx *ctx, tp_collector *collector, const tp_harness_options *opts,
                      int total, tp_harness **out) {
  *out = NULL;
  if (opts->rounds < 1 || opts->rounds > TP_HARNESS_MAX_ROUNDS)
    return TP_FAIL(TP_EUSAGE, "rounds must be 1..%d, not %d", TP_HARNESS_MAX_ROUNDS, opts->rounds);
  tp_harness *h = calloc(1, sizeof *h);
  if (!h) return TP_FAIL(TP_EOOM, "no host memory for the harness");
  h->ctx = ctx;
  h->collector = collector;
  h->opts = *opts;
  h->total = total;
  h->opened_at = now_s();
  h->style = tp_progress_style_for(ctx->rank, opts->quiet, opts->verbose, isatty(STDERR_FILENO));
  h->tty = h->style.line;
  tp_rc rc = setup_state(h);
  if (rc == TP_OK) rc = tp_watchdog_start(ctx->group, ctx->rank, &h->watchdog);
  /* Every rank sends rank 0 its host facts, whatever its own state, so the
   * collective stays in step; a resumed run has its record already. */
  tp_job_system system = {0};
  if (opts->resume_run <= 0) {
    tp_rc gathered = tp_job_gather_system(ctx, &system);
    if (rc == TP_OK) rc = gathered;
  }
  if (rc == TP_OK && ctx->rank == 0) rc = begin_run(h, opts->resume_run > 0 ? NULL : &system);
  tp_job_system_free(&system);
  /* Every rank learns whether the others could start. */
  tp_rc agreed = TP_OK;
  char reason[OUTCOME_MSG + 16];
  tp_rc exch = tp_harness_agree(h, rc, &agreed, reason, sizeof reason);
  if (exch != TP_OK) rc = exch;
  else if (agreed != TP_OK) rc = TP_FAIL(agreed, "%s", reason);
  /* a failed open frees what it made; close passes rc back */
  if (rc != TP_OK) return tp_harness_close(h, rc, 0);
  *out = h;
  return TP_OK;
}

int64_t tp_harness_run_id(const tp_harness *h) { return h->run_id; }

void tp_harness_set_done(tp_harness *h, int done) {
  h->done = done;
  h->done_at_open = done;
}

int tp_harness_recorded(const tp_harness *h) { return h->recorded; }

static void free_references(tp_harness *h) {
  for (int i = 0; i < TP_ITEM_MAX_OUTPUTS; ++i) {
    tp_device_release(h->ref[i]);
    h->ref[i] = NULL;
    h->ref_cap[i] = 0;
    h->ref_count[i] = 0;
  }
  h->n_ref = 0;
  h->have_ref = 0;
}

static void free_eager_copies(tp_harness *h) {
  for (int i = 0; i < TP_ITEM_MAX_OUTPUTS; ++i) {
    tp_device_release(h->eager[i]);
    h->eager[i] = NULL;
    h->eager_cap[i] = 0;
  }
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
  if (h->line_drawn) {
    fputc('\n', stderr); /* the last progress line stays, the table starts below */
    h->line_drawn = 0;
  }
  if (h->ctx->rank == 0 && h->store && h->run_id && finish) {
    tp_rc fin = rc == TP_OK ? tp_store_finish_run(h->store, h->run_id) : TP_OK;
    if (rc == TP_OK) rc = fin;
    if (rc == TP_OK) rc = print_table(h);
  }
  tp_watchdog_stop(h->watchdog);
  free_references(h);
  free_eager_copies(h);
  for (int i = 0; i < h->n_mixed_events; ++i) cudaEventDestroy(h->mixed_events[i]);
  free(h->mixed_events);
  if (h->events)
    for (int i = 0; i <= h->opts.measure_iters; ++i)
      if (h->events[i]) cudaEventDestroy(h->events[i]);
  free(h->events);
  free(h->window_us);
  free(h->host_us);
  tp_device_release(h->acc);
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
 * becomes TP_ETIMEOUT at deadline (now_s() clock), timeout_s after the work
 * began. */
static tp_rc wait_event(cudaEvent_t ev, double deadline, int timeout_s, const char *what) {
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

/* n steps; with marks, an event after each and the host time each took to issue. */
static tp_rc run_steps(stepper *s, int n, cudaEvent_t *marks, double *host_us) {
  for (int i = 0; i < n; ++i) {
    const double t0 = now_s();
    TP_TRY(one_step(s));
    if (marks) TP_CUDA(cudaEventRecord(marks[i + 1], s->g->main_stream));
    if (host_us) host_us[i] = 1e6 * (now_s() - t0);
  }
  return TP_OK;
}

static tp_rc run_before(stepper *s) {
  if (!s->item->ops->before) return TP_OK;
  return s->item->ops->before(s->item->self, s->g);
}

/* Records events[0] on the main stream and waits for it until `since` plus
 * the timeout (since: when the work waited for began). */
static tp_rc record_and_wait_for(tp_harness *h, tp_group *g, double since, int timeout_s,
                                 const char *what) {
  TP_CUDA(cudaEventRecord(h->events[0], g->main_stream));
  return wait_event(h->events[0], since + timeout_s, timeout_s, what);
}

static tp_rc record_and_wait(tp_harness *h, tp_group *g, double since, const char *what) {
  return record_and_wait_for(h, g, since, h->opts.window_timeout_s, what);
}

/* Arms the watchdog for a phase of `waits` timed waits of GPU work. */
static void guard(tp_harness *h, int waits, const char *what) {
  tp_watchdog_arm(h->watchdog, waits * h->opts.window_timeout_s + WATCHDOG_GRACE_S, what);
}

/* `before`, warm-up, a host barrier so every rank starts the window
 * together, then the timed window: one event before the first step and one
 * after each. */
static tp_rc time_window(tp_harness *h, stepper *s, int withhold) {
  tp_group *g = h->ctx->group;
  const int iters = h->opts.measure_iters;
  /* the test knob's withheld rank issues nothing: its peers' collectives hang */
  const int n_steps = withhold ? 0 : iters;
  const double warmup_start = now_s();
  if (!withhold) TP_TRY(run_before(s));
  TP_TRY(run_steps(s, withhold ? 0 : h->opts.warmup_iters, NULL, NULL));
  TP_TRY(record_and_wait(h, g, warmup_start, "the warm-up window"));
  TP_TRY(tp_rdzv_barrier(h->ctx->rdzv));
  /* the deadline counts from the window's start: issuing the steps can block
   * (a full launch queue) for most of the window */
  const double window_start = now_s();
  TP_CUDA(cudaEventRecord(h->events[0], g->main_stream));
  TP_TRY(run_steps(s, n_steps, h->events, h->host_us));
  if (withhold)
    return TP_FAIL(TP_EINTERNAL, "rank %d withheld its work (TPBENCH_TEST_WITHHOLD)", g->rank);
  TP_TRY(wait_event(h->events[iters], window_start + h->opts.window_timeout_s,
                    h->opts.window_timeout_s, "the measurement window"));
  for (int i = 0; i < iters; ++i) {
    float ms = 0.0f;
    TP_CUDA(cudaEventElapsedTime(&ms, h->events[i], h->events[i + 1]));
    h->window_us[i] = 1000.0 * (double)ms;
  }
  return TP_OK;
}

/* ---- one configuration's state through the phases ------------------------------------- */

typedef struct outcome {
  tp_ops_trace trace;
  int have_trace;
  tp_config_status status;
  char reason[REASON_CAP];
  tp_result result;
  int have_result;
  tp_item_info info;
} outcome;

typedef struct entry_state {
  tp_harness_entry *e;
  stepper s;
  outcome oc;
  int active; /* prepared and still being measured */
  /* samples of every rank: [rank][round * iters + i] */
  double *times, *host;
  int *round_of; /* rounds * iters */
  int n_rounds;  /* rounds measured */
  tp_window windows[TP_HARNESS_MAX_ROUNDS];
  tp_check checks[TP_HARNESS_MAX_CHECKS];
  char check_reasons[TP_HARNESS_MAX_CHECKS][192];
  char check_names[TP_HARNESS_MAX_CHECKS][32];
  int n_checks;
  int64_t peak_in_use;
  int64_t alloc_peak; /* the ledger's joint peak of the case and the configuration (harness.h) */
} entry_state;

static void set_failure(outcome *oc, tp_rc rc, const char *reason) {
  oc->status = status_of(rc);
  snprintf(oc->reason, sizeof oc->reason, "%s", reason);
  oc->have_result = 0;
}

/* Device memory in use now; the configuration's high-water mark keeps the largest. */
static void note_memory(entry_state *es) {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  int64_t used = (int64_t)(total_b - free_b);
  if (used > es->peak_in_use) es->peak_in_use = used;
}

static tp_rc alloc_samples(tp_harness *h, entry_state *es) {
  const size_t per_rank = (size_t)h->opts.rounds * (size_t)h->opts.measure_iters;
  const size_t all = per_rank * (size_t)h->ctx->world;
  es->times = calloc(all, sizeof(double));
  es->host = calloc(all, sizeof(double));
  es->round_of = calloc(per_rank, sizeof(int));
  if (!es->times || !es->host || !es->round_of)
    return TP_FAIL(TP_EOOM, "no host memory for %zu samples", all);
  return TP_OK;
}

static void free_entry(entry_state *es) {
  free(es->times);
  free(es->host);
  free(es->round_of);
  tp_graph_destroy(es->s.graph);
  tp_ops_trace_free(&es->oc.trace);
}

/* fn on es with its configuration the device ledger's current owner: what
 * its item allocates or claims there is charged to it. */
static tp_rc charged(tp_harness *h, entry_state *es, tp_rc (*fn)(tp_harness *, entry_state *)) {
  const tp_alloc_owner outer = tp_device_enter(CONFIG_OWNER(&es->e->cfg));
  const tp_rc rc = fn(h, es);
  tp_device_leave(outer);
  return rc;
}

/* A device that timed out or raised a CUDA error may be wedged. */
static int is_fatal(tp_rc rc) { return rc == TP_ETIMEOUT || rc == TP_ECUDA; }

/* ---- phase 1: plan and prepare every configuration --------------------------------------- */

static tp_rc plan_and_prepare(tp_group *g, const tp_item *item) {
  TP_TRY(item->ops->plan(item->self, g));
  return item->ops->prepare(item->self, g);
}

static tp_rc prepare_all(tp_harness *h, entry_state *es, int n) {
  char reason[REASON_CAP];
  for (int i = 0; i < n; ++i) {
    if (es[i].e->cfg.rejected) {
      set_failure(&es[i].oc, TP_EREJECT, es[i].e->cfg.reason ? es[i].e->cfg.reason : "rejected");
      continue;
    }
    if (h->opts.current_config && h->ctx->rank == 0) *h->opts.current_config = es[i].e->cfg.index;
    const tp_alloc_owner outer = tp_device_enter(CONFIG_OWNER(&es[i].e->cfg));
    tp_rc rc = plan_and_prepare(h->ctx->group, &es[i].e->item);
    tp_device_leave(outer);
    es[i].e->item.ops->info(es[i].e->item.self, &es[i].oc.info);
    if (rc == TP_OK) rc = alloc_samples(h, &es[i]);
    tp_rc agreed = TP_OK;
    TP_TRY(tp_harness_agree(h, rc, &agreed, reason, sizeof reason));
    if (agreed != TP_OK) {
      set_failure(&es[i].oc, agreed, reason);
      continue;
    }
    es[i].active = 1;
    note_memory(&es[i]);
  }
  return TP_OK;
}

/* ---- phase 2: graphs ------------------------------------------------------------------ */

/* A configuration's graph failed (warm-up or capture): recorded as failed
 * (out of memory where it was), never a crash or a hang. */
static void graph_failure(entry_state *es, tp_rc agreed, const char *reason) {
  set_failure(&es->oc, agreed == TP_EOOM ? TP_EOOM : TP_EINTERNAL, reason);
  es->active = 0;
}

/* Eager warm-up steps, at least one (they plan algorithms, fill caches and
 * grow the workspace and scratch to what the step asks: capture must not),
 * waited for; the ranks agree. */
static tp_rc warm_eagerly(tp_harness *h, entry_state *es) {
  stepper eager = {es->s.g, es->s.item, NULL};
  const double start = now_s();
  guard(h, 1, "the eager warm-up before capture");
  tp_rc rc = run_before(&eager);
  if (rc == TP_OK)
    rc = run_steps(&eager, h->opts.warmup_iters > 0 ? h->opts.warmup_iters : 1, NULL, NULL);
  if (rc == TP_OK) rc = record_and_wait(h, es->s.g, start, "the eager warm-up before capture");
  tp_watchdog_disarm(h->watchdog);
  if (is_fatal(rc)) {
    set_failure(&es->oc, rc, tp_last_message());
    return rc;
  }
  char reason[REASON_CAP];
  tp_rc agreed = TP_OK;
  TP_TRY(tp_harness_agree(h, rc, &agreed, reason, sizeof reason));
  if (agreed != TP_OK) graph_failure(es, agreed, reason);
  return TP_OK;
}

/* One step captured (the group frozen: a step that would grow the workspace
 * or scratch fails with the reason); the ranks agree. */
static tp_rc capture(tp_harness *h, entry_state *es) {
  stepper eager = {es->s.g, es->s.item, NULL};
  tp_rc rc = tp_graph_capture(es->s.g, one_step, &eager, &es->s.graph);
  char reason[REASON_CAP];
  tp_rc agreed = TP_OK;
  TP_TRY(tp_harness_agree(h, rc, &agreed, reason, sizeof reason));
  if (agreed != TP_OK) graph_failure(es, agreed, reason);
  return TP_OK;
}

/* Every configuration warmed eagerly before any is captured, so the one
 * workspace and scratch have grown to the largest any of them asks (several
 * graph sizes share them); then the group is frozen and stays frozen until
 * the case's graphs are destroyed (tp_harness_measure_case), since growing
 * would free what they point into. */
static tp_rc capture_all(tp_harness *h, entry_state *es, int n) {
  for (int i = 0; i < n; ++i)
    if (es[i].active) TP_TRY(charged(h, &es[i], warm_eagerly));
  tp_group_freeze(h->ctx->group, 1);
  for (int i = 0; i < n; ++i)
    if (es[i].active) TP_TRY(charged(h, &es[i], capture));
  return TP_OK;
}

/* ---- phase 3: rounds -------------------------------------------------------------------- */

/* The state a round's shuffles start from: (seed, case, round). */
static uint64_t round_seed(const tp_harness *h, int round) {
  return h->opts.seed ^ ((uint64_t)h->cases << 32) ^ (uint64_t)(round + 1) * 0x9e37ull;
}

/* The order of round r over the n active positions: rotated by r, or a
 * shuffle seeded by (seed, case, round) — the same on every rank. */
static void round_order(const tp_harness *h, int round, int n, int *order) {
  for (int i = 0; i < n; ++i) order[i] = h->opts.shuffle ? i : (i + round) % n;
  if (h->opts.shuffle) tp_shuffle_ints(order, n, round_seed(h, round));
}

static double median_of(const double *x, int n) {
  tp_stats st;
  return tp_stats_compute(x, n, &st) == TP_OK ? st.median : NAN;
}

/* Gathers this window's samples from every rank into the entry. */
static tp_rc keep_window(tp_harness *h, entry_state *es, int round, int position) {
  const int iters = h->opts.measure_iters, world = h->ctx->world;
  const size_t per_rank = (size_t)h->opts.rounds * (size_t)iters;
  const size_t bytes = sizeof(double) * (size_t)iters;
  double *all = malloc(bytes * (size_t)world * 2);
  if (!all) return TP_FAIL(TP_EOOM, "no host memory for a window's samples");
  double *mine = malloc(bytes * 2);
  if (!mine) {
    free(all);
    return TP_FAIL(TP_EOOM, "no host memory for a window's samples");
  }
  memcpy(mine, h->window_us, bytes);
  memcpy(mine + iters, h->host_us, bytes);
  tp_rc rc = tp_rdzv_allgather(h->ctx->rdzv, mine, bytes * 2, all);
  const size_t at = (size_t)es->n_rounds * (size_t)iters;
  for (int r = 0; rc == TP_OK && r < world; ++r) {
    memcpy(es->times + (size_t)r * per_rank + at, all + (size_t)r * 2 * (size_t)iters, bytes);
    memcpy(es->host + (size_t)r * per_rank + at, all + ((size_t)r * 2 + 1) * (size_t)iters, bytes);
  }
  free(mine);
  free(all);
  TP_TRY(rc);
  double *slowest = malloc(bytes);
  if (!slowest) return TP_FAIL(TP_EOOM, "no host memory");
  const double *window[TP_MAX_WORLD];
  for (int r = 0; r < world; ++r) window[r] = es->times + (size_t)r * per_rank + at;
  rc = tp_stats_slowest_rank(window, world, iters, slowest);
  for (int i = 0; i < iters; ++i) es->round_of[at + (size_t)i] = round;
  es->windows[es->n_rounds] = (tp_window){round, position, median_of(slowest, iters)};
  free(slowest);
  TP_TRY(rc);
  es->n_rounds++;
  return TP_OK;
}

void tp_result_set_stats(tp_result *res, const tp_stats *st) {
  res->n_samples = st->n;
  res->median_us = st->median;
  res->p10_us = st->p10;
  res->p90_us = st->p90;
  res->mean_us = st->mean;
  res->min_us = st->min;
  res->max_us = st->max;
  res->cv = st->cv;
}

/* What runs under the ledger's watch: a timed window, or a mixed window's `before`. */
typedef enum { WATCH_WINDOW, WATCH_BEFORE } watched_part;

/* part of es charged to its configuration, the ledger watching what it and
 * the case hold together; the configuration keeps the largest peak of its
 * windows (alloc_peak_bytes, harness.h). One watch at a time. */
static tp_rc watched(tp_harness *h, entry_state *es, watched_part part, int withhold) {
  const tp_alloc_owner owners[2] = {CASE_OWNER, CONFIG_OWNER(&es->e->cfg)};
  const tp_alloc_owner outer = tp_device_enter(owners[1]);
  tp_rc rc = tp_device_watch_begin(owners, 2);
  if (rc == TP_OK) {
    rc = part == WATCH_WINDOW ? time_window(h, &es->s, withhold) : run_before(&es->s);
    int64_t peak = 0;
    const tp_rc watched_rc = tp_device_watch_end(&peak);
    if (rc == TP_OK) rc = watched_rc;
    if (peak > es->alloc_peak) es->alloc_peak = peak;
  }
  tp_device_leave(outer);
  return rc;
}

/* One window of one configuration in round `round`. Fatal errors stop the
 * worker; others end the configuration. */
static tp_rc measure_window(tp_harness *h, entry_state *es, int round, int position) {
  if (h->opts.current_config && h->ctx->rank == 0) *h->opts.current_config = es->e->cfg.index;
  draw_progress(h, es->e->cfg.label);
  guard(h, 2, es->e->cfg.label); /* the warm-up's wait and the window's */
  const tp_group *g = h->ctx->group;
  const int withhold =
      g->rank == g->test_withhold_rank && es->e->cfg.index == g->test_withhold_config;
  tp_rc rc = watched(h, es, WATCH_WINDOW, withhold);
  tp_watchdog_disarm(h->watchdog);
  note_memory(es);
  if (is_fatal(rc)) {
    set_failure(&es->oc, rc, tp_last_message());
    return rc;
  }
  char reason[REASON_CAP];
  tp_rc agreed = TP_OK;
  TP_TRY(tp_harness_agree(h, rc, &agreed, reason, sizeof reason));
  if (agreed != TP_OK) {
    set_failure(&es->oc, agreed, reason);
    es->active = 0;
    return TP_OK;
  }
  return keep_window(h, es, round, position);
}

/* ---- phase 3 for graphs of several sizes: mixed windows ------------------------------------ */

static int replay_group(const entry_state *es) { return es->e->cfg.replay_group; }

/* The active entries of replay group `group`, in case order; returns how many. */
static int replay_members(entry_state *es, int n, int group, entry_state **members) {
  int k = 0;
  for (int i = 0; i < n; ++i)
    if (es[i].active && replay_group(&es[i]) == group) members[k++] = &es[i];
  return k;
}

/* A replay group stands or falls whole: its windows replay every size its
 * configurations are recorded among. One that dropped out before the
 * windows (prepare, warm-up, capture) takes the others with it. */
static void drop_incomplete_groups(entry_state *es, int n) {
  for (int i = 0; i < n; ++i) {
    const entry_state *out = &es[i];
    if (out->active || replay_group(out) == 0) continue;
    for (int j = 0; j < n; ++j) {
      entry_state *e = &es[j];
      if (!e->active || replay_group(e) != replay_group(out)) continue;
      e->oc.status = out->oc.status;
      snprintf(e->oc.reason, sizeof e->oc.reason,
               "graph=mixed: its %lld-token configuration of the mix did not run: %.380s",
               (long long)out->e->cfg.axes->tokens, out->oc.reason);
      e->oc.have_result = 0;
      e->active = 0;
    }
  }
}

/* The grown pool of a mixed window's events (count at least). */
static tp_rc mixed_events(tp_harness *h, int count) {
  if (count <= h->n_mixed_events) return TP_OK;
  cudaEvent_t *grown = realloc(h->mixed_events, sizeof(cudaEvent_t) * (size_t)count);
  if (!grown) return TP_FAIL(TP_EOOM, "no host memory for %d events", count);
  h->mixed_events = grown;
  for (; h->n_mixed_events < count; ++h->n_mixed_events)
    TP_CUDA(cudaEventCreate(&h->mixed_events[h->n_mixed_events]));
  return TP_OK;
}

/* The replays of a mixed window: each of the k members measure_iters times,
 * in a shuffle seeded by (seed, case, round) apart from the round's own
 * order — the same on every rank, recorded through the run's order_seed. */
static void replay_order(const tp_harness *h, int round, int k, int *order) {
  tp_mixed_order(k, h->opts.measure_iters,
                 round_seed(h, round) * 0xff51afd7ed558ccdull + 0x6d69786564ull, order);
}

/* `before` of every member, warm-up replays of each in turn, a host
 * barrier, then the members' replays in `order` back to back: one event
 * before the first and one after each, so dur[i] is replay i's time. A
 * window of k members gets k times the window timeout. */
static tp_rc time_mixed_window(tp_harness *h, entry_state **members, int k, const int *order,
                               double *dur, double *host) {
  tp_group *g = h->ctx->group;
  const int total = k * h->opts.measure_iters, timeout_s = k * h->opts.window_timeout_s;
  int withhold = 0; /* the test knob, as in time_window */
  for (int m = 0; m < k; ++m)
    withhold |=
        g->rank == g->test_withhold_rank && members[m]->e->cfg.index == g->test_withhold_config;
  cudaEvent_t *ev = h->mixed_events;
  const double warmup_start = now_s();
  /* each member's `before` under its own watch (one at a time): the replays after it allocate
   * nothing through the ledger, so a member's peak in the window is its before's */
  for (int m = 0; m < k && !withhold; ++m) TP_TRY(watched(h, members[m], WATCH_BEFORE, 0));
  for (int w = 0; w < (withhold ? 0 : h->opts.warmup_iters); ++w)
    for (int m = 0; m < k; ++m) TP_TRY(one_step(&members[m]->s));
  TP_TRY(record_and_wait_for(h, g, warmup_start, timeout_s, "the warm-up window"));
  TP_TRY(tp_rdzv_barrier(h->ctx->rdzv));
  const double window_start = now_s();
  TP_CUDA(cudaEventRecord(ev[0], g->main_stream));
  for (int i = 0; i < (withhold ? 0 : total); ++i) {
    const double t0 = now_s();
    TP_TRY(one_step(&members[order[i]]->s));
    TP_CUDA(cudaEventRecord(ev[i + 1], g->main_stream));
    host[i] = 1e6 * (now_s() - t0);
  }
  if (withhold)
    return TP_FAIL(TP_EINTERNAL, "rank %d withheld its work (TPBENCH_TEST_WITHHOLD)", g->rank);
  TP_TRY(wait_event(ev[total], window_start + timeout_s, timeout_s, "the measurement window"));
  for (int i = 0; i < total; ++i) {
    float ms = 0.0f;
    TP_CUDA(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
    dur[i] = 1000.0 * (double)ms;
  }
  return TP_OK;
}

/* Each member's samples of the window, in replay order, kept as its window. */
static tp_rc keep_mixed_window(tp_harness *h, entry_state **members, int k, const int *order,
                               const double *dur, const double *host, int round, int position) {
  const int total = k * h->opts.measure_iters;
  for (int m = 0; m < k; ++m) {
    tp_mixed_samples(order, total, m, dur, h->window_us);
    tp_mixed_samples(order, total, m, host, h->host_us);
    TP_TRY(keep_window(h, members[m], round, position));
  }
  return TP_OK;
}

/* One mixed window of a replay group in round `round`: its graphs replayed
 * interleaved. Fatal errors stop the worker; others end every member. */
static tp_rc measure_mixed_window(tp_harness *h, entry_state *es, int n, int group, int round,
                                  int position) {
  entry_state *members[TP_HARNESS_MAX_CASE];
  const int k = replay_members(es, n, group, members), total = k * h->opts.measure_iters;
  if (k == 0) return TP_FAIL(TP_EINTERNAL, "replay group %d has no active member", group);
  TP_TRY(mixed_events(h, total + 1));
  const size_t slots = total > 0 ? (size_t)total : 1; /* a group has members: never 0 */
  int *order = malloc(sizeof(int) * slots);
  double *dur = malloc(sizeof(double) * slots * 2);
  if (!order || !dur) {
    free(order);
    free(dur);
    return TP_FAIL(TP_EOOM, "no host memory for a mixed window of %d replays", total);
  }
  replay_order(h, round, k, order);
  const char *label = members[0]->e->cfg.label;
  if (h->opts.current_config && h->ctx->rank == 0)
    *h->opts.current_config = members[0]->e->cfg.index;
  draw_progress(h, label);
  guard(h, 2 * k, label);
  tp_rc rc = time_mixed_window(h, members, k, order, dur, dur + total);
  tp_watchdog_disarm(h->watchdog);
  char reason[REASON_CAP];
  tp_rc agreed = TP_OK;
  for (int m = 0; m < k; ++m) note_memory(members[m]);
  if (is_fatal(rc)) {
    for (int m = 0; m < k; ++m) set_failure(&members[m]->oc, rc, tp_last_message());
  } else {
    rc = tp_harness_agree(h, rc, &agreed, reason, sizeof reason);
  }
  if (rc == TP_OK && agreed != TP_OK)
    for (int m = 0; m < k; ++m) {
      set_failure(&members[m]->oc, agreed, reason);
      members[m]->active = 0;
    }
  if (rc == TP_OK && agreed == TP_OK)
    rc = keep_mixed_window(h, members, k, order, dur, dur + total, round, position);
  free(order);
  free(dur);
  return rc;
}

/* The round's units: each active configuration outside a replay group, and
 * each replay group once (at its first active member). */
static int round_units(const entry_state *es, int n, int *first) {
  int k = 0;
  for (int i = 0; i < n; ++i) {
    if (!es[i].active) continue;
    int seen = 0;
    for (int j = 0; j < i && replay_group(&es[i]) && !seen; ++j)
      seen = es[j].active && replay_group(&es[j]) == replay_group(&es[i]);
    if (!seen) first[k++] = i;
  }
  return k;
}

static tp_rc run_rounds(tp_harness *h, entry_state *es, int n) {
  int order[TP_HARNESS_MAX_CASE];
  for (int round = 0; round < h->opts.rounds; ++round) {
    int live[TP_HARNESS_MAX_CASE];
    const int n_live = round_units(es, n, live);
    round_order(h, round, n_live, order);
    for (int k = 0; k < n_live; ++k) {
      entry_state *e = &es[live[order[k]]];
      if (!e->active) continue;
      if (replay_group(e)) TP_TRY(measure_mixed_window(h, es, n, replay_group(e), round, k));
      else TP_TRY(measure_window(h, e, round, k));
    }
  }
  return TP_OK;
}

/* ---- statistics --------------------------------------------------------------------- */

/* Share of iterations in which some rank took longer to issue the step than
 * the GPU took to run it: the GPU waited on that rank's host. */
static double host_stall_frac(const tp_harness *h, const entry_state *es, int n) {
  const size_t per_rank = (size_t)h->opts.rounds * (size_t)h->opts.measure_iters;
  int stalls = 0;
  for (int i = 0; i < n; ++i)
    for (int r = 0; r < h->ctx->world; ++r) {
      size_t k = (size_t)r * per_rank + (size_t)i;
      if (es->host[k] > es->times[k]) {
        stalls++;
        break;
      }
    }
  return n > 0 ? (double)stalls / n : NAN;
}

static double rank_skew(const tp_harness *h, const entry_state *es, int n) {
  const size_t per_rank = (size_t)h->opts.rounds * (size_t)h->opts.measure_iters;
  double lo = INFINITY, hi = 0.0;
  for (int r = 0; r < h->ctx->world; ++r) {
    double m = median_of(es->times + (size_t)r * per_rank, n);
    if (m < lo) lo = m;
    if (m > hi) hi = m;
  }
  return lo > 0 && isfinite(lo) ? hi / lo - 1.0 : NAN;
}

static tp_rc fill_result(tp_harness *h, entry_state *es) {
  const int n = es->n_rounds * h->opts.measure_iters;
  const size_t per_rank = (size_t)h->opts.rounds * (size_t)h->opts.measure_iters;
  double *slowest = malloc(sizeof(double) * (size_t)n);
  if (!slowest) return TP_FAIL(TP_EOOM, "no host memory for samples");
  const double *per_rank_ptr[TP_MAX_WORLD];
  for (int r = 0; r < h->ctx->world; ++r) per_rank_ptr[r] = es->times + (size_t)r * per_rank;
  tp_rc rc = tp_stats_slowest_rank(per_rank_ptr, h->ctx->world, n, slowest);
  tp_stats st;
  if (rc == TP_OK) rc = tp_stats_compute(slowest, n, &st);
  tp_interval iv = {NAN, NAN, NAN, 0};
  tp_round_series series = {slowest, es->round_of, n};
  if (rc == TP_OK) rc = tp_boot_median(&series, h->opts.rounds, 0.95, h->opts.seed + 1, &iv);
  free(slowest);
  TP_TRY(rc);
  const tp_harness_config *cfg = &es->e->cfg;
  tp_result *res = &es->oc.result;
  tp_result_set_stats(res, &st);
  res->tokens_per_s = (double)cfg->axes->tokens / (st.median * 1e-6);
  res->flops = cfg->flops;
  res->tflops =
      cfg->flops > 0 ? cfg->flops / (double)h->ctx->world / (st.median * 1e-6) / 1e12 : NAN;
  res->bytes_moved = es->oc.info.bytes_moved;
  res->workspace_bytes = es->oc.info.workspace_bytes;
  res->activation_bytes = es->oc.info.activation_bytes;
  res->traffic_bytes = es->oc.info.traffic_bytes;
  res->peak_mem_bytes = es->peak_in_use;
  res->alloc_peak_bytes = es->alloc_peak;
  res->max_abs_err = NAN;
  res->rel_err = NAN;
  res->n_rounds = es->n_rounds;
  res->ci_lo_us = iv.lo;
  res->ci_hi_us = iv.hi;
  res->rank_skew = rank_skew(h, es, n);
  res->host_stall_frac = host_stall_frac(h, es, n);
  res->fused = es->oc.info.fused;
  es->oc.have_result = 1;
  es->oc.status = TP_STATUS_OK;
  return TP_OK;
}

/* ---- phase 4: numerics ------------------------------------------------------------------ */

/* Device copies of outputs into bufs (grown to fit: caps), waited for. */
static tp_rc copy_outputs(tp_harness *h, const tp_item_output *out, int n, tp_dtype dt,
                          void *const *src, void **bufs, size_t *caps) {
  cudaStream_t s = h->ctx->group->main_stream;
  for (int i = 0; i < n; ++i) {
    size_t bytes = out[i].count * tp_dtype_bytes(dt);
    if (caps[i] < bytes) {
      TP_TRY(tp_device_free(bufs[i]));
      bufs[i] = NULL;
      caps[i] = 0;
      TP_TRY(tp_device_malloc_as(HARNESS_OWNER, &bufs[i], bytes));
      caps[i] = bytes;
    }
    TP_CUDA(
        cudaMemcpyAsync(bufs[i], src ? src[i] : out[i].ptr, bytes, cudaMemcpyDeviceToDevice, s));
  }
  TP_CUDA(cudaStreamSynchronize(s));
  return TP_OK;
}

static tp_rc keep_eager(tp_harness *h, const tp_item_output *out, int n, tp_dtype dt) {
  return copy_outputs(h, out, n, dt, NULL, h->eager, h->eager_cap);
}

/* Poison, `before`, one step (or graph replay), waited for. A graph
 * configuration runs its eager step first and keeps its outputs aside
 * (h->eager), so its replay can be held against it (replay_check). */
static tp_rc numerics_step(tp_harness *h, entry_state *es, tp_item_output *out, int *n_out) {
  tp_group *g = h->ctx->group;
  const tp_item *item = es->s.item;
  int n = item->ops->outputs(item->self, out, TP_ITEM_MAX_OUTPUTS);
  stepper eager = {es->s.g, es->s.item, NULL};
  for (int pass = es->s.graph ? 0 : 1; pass < 2; ++pass) {
    for (int i = 0; i < n; ++i)
      TP_CUDA(
          tp_launch_poison(es->oc.info.dtype, (void *)out[i].ptr, out[i].count, g->main_stream));
    const double start = now_s();
    TP_TRY(run_before(&es->s));
    TP_TRY(one_step(pass == 0 ? &eager : &es->s));
    TP_TRY(record_and_wait(h, g, start, "the numerics step"));
    if (pass == 0) TP_TRY(keep_eager(h, out, n, es->oc.info.dtype));
  }
  *n_out = n;
  return TP_OK;
}

/* Measures out[i] against against[i] (NULL: against itself, to count
 * non-finite elements) on every rank, summed over ranks into m[]. */
static tp_rc measure_outputs(tp_harness *h, tp_dtype dt, const tp_item_output *out,
                             void *const *against, int n, tp_output_measure *m) {
  tp_group *g = h->ctx->group;
  double host[ACC_DOUBLES * TP_ITEM_MAX_OUTPUTS];
  TP_CUDA(cudaMemsetAsync(h->acc, 0, sizeof host, g->main_stream));
  for (int i = 0; i < n; ++i) {
    if (out[i].rule == TP_RULE_SKIP) continue;
    const void *b = against ? against[i] : out[i].ptr;
    TP_CUDA(tp_launch_compare(dt, out[i].ptr, b, out[i].count,
                              h->acc + (size_t)ACC_DOUBLES * (size_t)i, g->main_stream));
  }
  TP_CUDA(cudaMemcpyAsync(host, h->acc, sizeof host, cudaMemcpyDeviceToHost, g->main_stream));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  tp_output_measure mine[TP_ITEM_MAX_OUTPUTS], all[TP_MAX_WORLD][TP_ITEM_MAX_OUTPUTS];
  memset(mine, 0, sizeof mine);
  for (int i = 0; i < n; ++i) {
    const double *a = host + (size_t)ACC_DOUBLES * (size_t)i;
    mine[i] = (tp_output_measure){a[0], a[1], a[2], a[3], a[4], (double)out[i].count};
  }
  TP_TRY(tp_rdzv_allgather(h->ctx->rdzv, mine, sizeof mine, all));
  memset(m, 0, sizeof(tp_output_measure) * (size_t)n);
  for (int r = 0; r < h->ctx->world; ++r)
    for (int i = 0; i < n; ++i) {
      m[i].diff2 += all[r][i].diff2;
      m[i].ref2 += all[r][i].ref2;
      m[i].max_abs = fmax(m[i].max_abs, all[r][i].max_abs);
      m[i].differ += all[r][i].differ;
      m[i].nonfinite += all[r][i].nonfinite;
      m[i].elements += all[r][i].elements;
    }
  return TP_OK;
}

static void add_check(entry_state *es, const tp_item_output *o, const tp_output_measure *m,
                      const tp_output_verdict *v) {
  if (es->n_checks == TP_HARNESS_MAX_CHECKS) return;
  const int k = es->n_checks++;
  snprintf(es->check_names[k], sizeof es->check_names[k], "%s", o->name);
  snprintf(es->check_reasons[k], sizeof es->check_reasons[k], "%s", v->reason);
  /* m is NULL for an output that could not be measured (no reference) */
  es->checks[k] = (tp_check){es->check_names[k],
                             v->rule,
                             v->status,
                             m ? (int64_t)m->elements : (int64_t)o->count,
                             m ? (int64_t)m->nonfinite : 0,
                             m ? (int64_t)m->differ : 0,
                             v->rel_err,
                             m ? m->max_abs : NAN,
                             v->tolerance,
                             v->reason[0] ? es->check_reasons[k] : NULL};
}

/* How bad one rank's judgement is: failed, then not checked, then ok. */
static int own_severity(const tp_item_check *c) { return c->failed ? 2 : c->not_checked ? 1 : 0; }

/* The worst of the ranks' judgements of one own check: a failure first, then
 * one that could not run, else the largest error. */
static const tp_item_check *worst_own(tp_item_check (*all)[TP_ITEM_MAX_OWN_CHECKS], int world,
                                      int i) {
  const tp_item_check *worst = &all[0][i];
  for (int r = 1; r < world; ++r) {
    const tp_item_check *c = &all[r][i];
    const int sc = own_severity(c), sw = own_severity(worst);
    if (sc > sw || (sc == sw && c->rel_err > worst->rel_err)) worst = c;
  }
  return worst;
}

static const char *own_status(const tp_item_check *c) {
  return c->failed ? "failed" : c->not_checked ? "not checked" : "ok";
}

/* The item's own checks (tp_item_ops.judge), after its numerics step. */
static tp_rc own_checks(tp_harness *h, entry_state *es) {
  const tp_item *item = es->s.item;
  if (!item->ops->judge) return TP_OK;
  tp_item_check mine[TP_ITEM_MAX_OWN_CHECKS], all[TP_MAX_WORLD][TP_ITEM_MAX_OWN_CHECKS];
  memset(mine, 0, sizeof mine);
  int n = 0;
  TP_TRY(item->ops->judge(item->self, h->ctx->group, mine, TP_ITEM_MAX_OWN_CHECKS, &n));
  TP_TRY(tp_rdzv_allgather(h->ctx->rdzv, mine, sizeof mine, all));
  for (int i = 0; i < n && es->n_checks < TP_HARNESS_MAX_CHECKS; ++i) {
    const tp_item_check *c = worst_own(all, h->ctx->world, i);
    const tp_output_rule rule = c->exact ? TP_RULE_EXACT : TP_RULE_TOLERANCE;
    const tp_item_output o = {c->name, NULL, (size_t)c->elements, rule, 0, 1, 1, NULL};
    const tp_output_measure m = {NAN, NAN, c->max_abs_err, c->differ, c->nonfinite, c->elements};
    tp_output_verdict v = {own_status(c), c->exact ? "exact" : "tolerance", c->rel_err,
                           c->tolerance, ""};
    snprintf(v.reason, sizeof v.reason, "%s", c->reason);
    add_check(es, &o, &m, &v);
  }
  return TP_OK;
}

/* The configuration's numerics from its checks: failed, else not checked, else ok. */
static void settle_numerics(entry_state *es, const char *fallback) {
  const char *verdict = "ok";
  const char *why = NULL;
  double worst = NAN, worst_abs = 0.0;
  for (int k = 0; k < es->n_checks; ++k) {
    const tp_check *c = &es->checks[k];
    if (strcmp(c->status, "failed") == 0 && strcmp(verdict, "failed") != 0) {
      verdict = "failed";
      why = c->reason;
    } else if (strcmp(c->status, "not checked") == 0 && strcmp(verdict, "ok") == 0) {
      verdict = "not checked";
      why = c->reason;
    }
    if (isfinite(c->rel_err) && !(worst >= c->rel_err)) worst = c->rel_err;
    if (isfinite(c->max_abs_err) && c->max_abs_err > worst_abs) worst_abs = c->max_abs_err;
  }
  if (es->n_checks == 0) {
    verdict = "not checked";
    why = fallback;
  }
  tp_result *res = &es->oc.result;
  res->numerics = verdict;
  res->numerics_reason = why;
  res->rel_err = worst;
  res->max_abs_err = worst_abs;
  if (strcmp(verdict, "failed") == 0) {
    es->oc.status = TP_STATUS_FAILED;
    snprintf(es->oc.reason, sizeof es->oc.reason, "numerics: %s", why ? why : "failed");
  }
}

/* Copies the reference's outputs aside once they are known to be finite: a
 * graph configuration's eager step's (src), else the outputs themselves. */
static tp_rc keep_reference(tp_harness *h, const tp_item_output *out, int n, tp_dtype dt,
                            void *const *src) {
  TP_TRY(copy_outputs(h, out, n, dt, src, h->ref, h->ref_cap));
  for (int i = 0; i < n; ++i) h->ref_count[i] = out[i].count;
  h->n_ref = n;
  h->have_ref = 1;
  return TP_OK;
}

/* A graph configuration's replay against its own eager step, one check over
 * every output ("graph:eager"): bit for bit up to TP 2, where both run the
 * same kernels on the same operands; beyond, NCCL may take another algorithm
 * for a captured collective (another summation order), so each output's own
 * rule and tolerance apply there. */
static tp_rc replay_check(tp_harness *h, entry_state *es, const tp_item_output *out, int n) {
  if (!es->s.graph) return TP_OK;
  tp_output_measure m[TP_ITEM_MAX_OUTPUTS], all;
  TP_TRY(measure_outputs(h, es->oc.info.dtype, out, h->eager, n, m));
  const int bitwise = h->ctx->world <= 2;
  memset(&all, 0, sizeof all);
  tp_output_verdict v = {"ok", bitwise ? "exact" : "tolerance", NAN, NAN, ""};
  double worst = 0.0;
  for (int i = 0; i < n; ++i) {
    if (out[i].rule == TP_RULE_SKIP) continue;
    tp_output_verdict one;
    const tp_output_rule rule = bitwise ? TP_RULE_EXACT : out[i].rule;
    const double tol = tp_numerics_tolerance(es->oc.info.dtype, out[i].reduction_len,
                                             out[i].summed_ranks, out[i].depth);
    tp_numerics_judge(out[i].name, rule, tol, &m[i], &one);
    if (strcmp(one.status, "ok") != 0 && strcmp(v.status, "ok") == 0) {
      v.status = one.status;
      snprintf(v.reason, sizeof v.reason, "replay against its eager step: %.150s", one.reason);
    }
    if (!bitwise && isfinite(one.rel_err) && one.rel_err > worst) worst = one.rel_err;
    all.diff2 += m[i].diff2;
    all.ref2 += m[i].ref2;
    all.max_abs = fmax(all.max_abs, m[i].max_abs);
    all.differ += m[i].differ;
    all.nonfinite += m[i].nonfinite;
    all.elements += m[i].elements;
  }
  if (!bitwise) v.rel_err = worst; /* an exact check has no error to report: differ says it */
  const tp_item_output o = {"graph:eager", NULL, (size_t)all.elements, TP_RULE_EXACT, 0, 1, 1,
                            NULL};
  add_check(es, &o, &all, &v);
  return TP_OK;
}

static tp_rc reference_numerics(tp_harness *h, entry_state *es) {
  tp_item_output out[TP_ITEM_MAX_OUTPUTS];
  tp_output_measure m[TP_ITEM_MAX_OUTPUTS];
  int n = 0;
  TP_TRY(numerics_step(h, es, out, &n));
  TP_TRY(measure_outputs(h, es->oc.info.dtype, out, NULL, n, m));
  int finite = 1;
  for (int i = 0; i < n; ++i) {
    tp_output_verdict v;
    tp_numerics_judge_reference(out[i].name, &m[i], &v);
    add_check(es, &out[i], &m[i], &v);
    if (strcmp(v.status, "ok") != 0) {
      finite = 0;
      snprintf(h->no_ref_why, sizeof h->no_ref_why, "the case's reference (stock) failed: %s",
               v.reason);
    }
  }
  TP_TRY(own_checks(h, es));
  TP_TRY(replay_check(h, es, out, n));
  settle_numerics(es, "the reference has no outputs to keep");
  es->oc.result.numerics = strcmp(es->oc.result.numerics, "ok") == 0 ? "reference" : "failed";
  if (finite) TP_TRY(keep_reference(h, out, n, es->oc.info.dtype, es->s.graph ? h->eager : NULL));
  return TP_OK;
}

static tp_rc check_numerics(tp_harness *h, entry_state *es) {
  tp_item_output out[TP_ITEM_MAX_OUTPUTS];
  tp_output_measure m[TP_ITEM_MAX_OUTPUTS];
  int n = 0;
  TP_TRY(numerics_step(h, es, out, &n));
  const int usable = h->have_ref && n == h->n_ref;
  if (usable) TP_TRY(measure_outputs(h, es->oc.info.dtype, out, h->ref, n, m));
  for (int i = 0; i < n; ++i) {
    tp_output_verdict v;
    /* an output this configuration does not compute is no check: not recorded */
    if (out[i].rule == TP_RULE_SKIP) continue;
    if (!usable || out[i].count != h->ref_count[i]) {
      tp_numerics_not_checked(out[i].rule,
                              h->no_ref_why[0] ? h->no_ref_why : "the case has no reference", &v);
      add_check(es, &out[i], NULL, &v);
      continue;
    }
    double tol = tp_numerics_tolerance(es->oc.info.dtype, out[i].reduction_len, out[i].summed_ranks,
                                       out[i].depth);
    tp_numerics_judge(out[i].name, out[i].rule, tol, &m[i], &v);
    add_check(es, &out[i], &m[i], &v);
  }
  TP_TRY(own_checks(h, es));
  TP_TRY(replay_check(h, es, out, n));
  settle_numerics(es, !usable && h->no_ref_why[0] ? h->no_ref_why
                                                  : "it computes none of the compared outputs");
  es->oc.result.numerics_ref = "stock";
  return TP_OK;
}

/* Numerics group `group`: its reference first (whatever its place in the
 * case), then every CHECK of the group against it. */
static tp_rc group_numerics(tp_harness *h, entry_state *es, int n, int group) {
  free_references(h);
  snprintf(h->no_ref_why, sizeof h->no_ref_why, "%s", "the case's stock configuration did not run");
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < n; ++i) {
      entry_state *e = &es[i];
      const tp_numerics_use want = pass == 0 ? TP_NUMERICS_REFERENCE : TP_NUMERICS_CHECK;
      if (e->e->cfg.numerics_group != group) continue;
      if (e->e->cfg.numerics != want || !e->oc.have_result) continue;
      if (h->opts.current_config && h->ctx->rank == 0) *h->opts.current_config = e->e->cfg.index;
      guard(h, 2, e->e->cfg.label); /* a graph's eager step and its replay */
      tp_rc rc = charged(h, e, want == TP_NUMERICS_REFERENCE ? reference_numerics : check_numerics);
      tp_watchdog_disarm(h->watchdog);
      if (is_fatal(rc)) {
        set_failure(&e->oc, rc, tp_last_message());
        return rc;
      }
      TP_TRY(rc);
    }
  return TP_OK;
}

/* Every numerics group in the order it first appears (a plain case: one). */
static tp_rc run_numerics(tp_harness *h, entry_state *es, int n) {
  for (int i = 0; i < n; ++i) {
    int seen = 0;
    for (int j = 0; j < i && !seen; ++j)
      seen = es[j].e->cfg.numerics_group == es[i].e->cfg.numerics_group;
    if (!seen) TP_TRY(group_numerics(h, es, n, es[i].e->cfg.numerics_group));
  }
  return TP_OK;
}

/* ---- phase 5: traces -------------------------------------------------------------------- */

/* The traced window after the measured one. Each recorded op is judged in
 * its own NVTX ranges; evidence "failed" turns the configuration into a
 * failure, its timing kept; "not checked" does not, and is recorded with
 * its reason beside the trace. */
static tp_rc trace_config(tp_harness *h, stepper *s, outcome *oc) {
  tp_ops_trace *t = &oc->trace;
  memset(t, 0, sizeof *t);
  t->iters = h->opts.trace_iters;
  t->ops = oc->info.planned ? oc->info.schedules : NULL;
  t->n_ops = oc->info.planned ? oc->info.n_schedules : 0;
  t->transfers_per_iter = oc->info.transfers_per_step;
  t->untraced_median_us = oc->result.median_us;
  TP_TRY(tp_ops_trace_window(h->ctx, h->collector, one_step, s, t));
  oc->have_trace = h->ctx->rank == 0;
  if (oc->have_trace && strcmp(t->record.evidence, "failed") == 0) {
    oc->status = TP_STATUS_FAILED;
    snprintf(oc->reason, sizeof oc->reason, "schedule evidence: %s", t->record.evidence_message);
  }
  return TP_OK;
}

static tp_rc run_traces(tp_harness *h, entry_state *es, int n) {
  for (int i = 0; i < n; ++i) {
    outcome *oc = &es[i].oc;
    if (!oc->have_result) continue;
    if (h->opts.current_config && h->ctx->rank == 0) *h->opts.current_config = es[i].e->cfg.index;
    guard(h, 2, es[i].e->cfg.label);
    const tp_alloc_owner outer = tp_device_enter(CONFIG_OWNER(&es[i].e->cfg));
    tp_rc rc = run_before(&es[i].s);
    if (rc == TP_OK) rc = trace_config(h, &es[i].s, oc);
    tp_device_leave(outer);
    tp_watchdog_disarm(h->watchdog);
    if (rc != TP_OK) {
      set_failure(oc, rc, tp_last_message());
      return rc; /* a tracer that fails mid-run leaves the ranks out of step */
    }
  }
  return TP_OK;
}

/* ---- recording ------------------------------------------------------------------------ */

static tp_rc record(tp_harness *h, entry_state *es) {
  if (h->ctx->rank != 0) return TP_OK;
  const outcome *oc = &es->oc;
  const int n = es->n_rounds * h->opts.measure_iters;
  const size_t per_rank = (size_t)h->opts.rounds * (size_t)h->opts.measure_iters;
  tp_samples sets[TP_MAX_WORLD];
  for (int r = 0; r < h->ctx->world; ++r)
    sets[r] = (tp_samples){r, n, es->times + (size_t)r * per_rank, es->round_of,
                           es->host + (size_t)r * per_rank};
  const int planned = oc->info.planned && oc->info.n_schedules > 0;
  tp_config_record rec = {0};
  rec.axes = es->e->cfg.axes;
  rec.status = oc->status;
  rec.reason = oc->status == TP_STATUS_OK && !oc->reason[0] ? NULL : oc->reason;
  rec.result = oc->have_result ? &oc->result : NULL;
  rec.samples = oc->have_result ? sets : NULL;
  rec.n_sample_sets = oc->have_result ? h->ctx->world : 0;
  rec.schedules = planned ? oc->info.schedules : NULL;
  rec.n_schedules = planned ? oc->info.n_schedules : 0;
  rec.windows = oc->have_result ? es->windows : NULL;
  rec.n_windows = oc->have_result ? es->n_rounds : 0;
  rec.checks = es->n_checks ? es->checks : NULL;
  rec.n_checks = es->n_checks;
  int64_t id = 0;
  TP_TRY(tp_store_put_config(h->store, h->run_id, &rec, &id));
  h->recorded++;
  if (oc->have_trace) TP_TRY(tp_store_put_trace(h->store, id, &oc->trace.record));
  return TP_OK;
}

/* Redraws the terminal's progress line (rank 0 on a terminal only). */
static void draw_progress(tp_harness *h, const char *label) {
  if (!h->tty) return;
  struct winsize ws;
  const int width = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col - 1 : 0;
  char line[512];
  tp_progress_line(line, sizeof line, h->done, h->total, h->done - h->done_at_open,
                   now_s() - h->opened_at, label, width);
  fprintf(stderr, "\r%s\033[K", line);
  fflush(stderr);
  h->line_drawn = 1;
}

/* Ends the progress line so that what follows starts on a line of its own. */
static void end_progress_line(tp_harness *h) {
  if (!h->line_drawn) return;
  fputs("\r\033[K", stderr);
  h->line_drawn = 0;
}

/* One finished configuration's line: its time and interval, or its status and reason. */
static void print_config_line(const tp_harness *h, const outcome *oc, const char *what) {
  if (oc->status == TP_STATUS_OK)
    fprintf(stderr, "[%3d/%d] %-52s %-9s %10.1f us [%.1f, %.1f] %d rounds%s%s\n", h->done, h->total,
            what, oc->info.schedule_label ? oc->info.schedule_label : "", oc->result.median_us,
            oc->result.ci_lo_us, oc->result.ci_hi_us, oc->result.n_rounds,
            oc->result.numerics ? "  numerics " : "",
            oc->result.numerics ? oc->result.numerics : "");
  else
    fprintf(stderr, "[%3d/%d] %-52s %s: %s\n", h->done, h->total, what, tp_status_name(oc->status),
            oc->reason);
}

/* A configuration has ended: the progress line moves on, and its own line is
 * printed (above the updating line on a terminal) as tp_progress_style_for
 * says: always off a terminal, with --verbose on one, a failure always. */
static void progress(tp_harness *h, const entry_state *es) {
  h->done++;
  const outcome *oc = &es->oc;
  const char *what = es->e->cfg.label ? es->e->cfg.label : "";
  const int failed = oc->status != TP_STATUS_OK && oc->status != TP_STATUS_REJECTED;
  if (h->style.every_config || (h->style.failures_only && failed)) {
    end_progress_line(h);
    print_config_line(h, oc, what);
  }
  draw_progress(h, what);
}

/* Results, progress and records of the whole case; the first error wins. */
static tp_rc finish_case(tp_harness *h, entry_state *es, int n, tp_rc stop) {
  for (int i = 0; i < n; ++i) {
    entry_state *e = &es[i];
    if (e->oc.status == TP_STATUS_OK && !e->oc.have_result)
      set_failure(&e->oc, stop != TP_OK ? stop : TP_EINTERNAL,
                  stop != TP_OK ? "not measured: the case stopped before this configuration ran"
                                : "not measured");
    progress(h, e);
    tp_rc stored = record(h, e);
    if (stop == TP_OK) stop = stored;
  }
  return stop;
}

/* Phases 1-5 (harness.h); returns an error only when the worker must stop. */
static tp_rc run_phases(tp_harness *h, entry_state *es, int n) {
  TP_TRY(prepare_all(h, es, n));
  drop_incomplete_groups(es, n);
  if (es[0].e->cfg.axes->graph) TP_TRY(capture_all(h, es, n));
  drop_incomplete_groups(es, n);
  TP_TRY(run_rounds(h, es, n));
  for (int i = 0; i < n; ++i)
    if (es[i].active && es[i].n_rounds > 0) TP_TRY(fill_result(h, &es[i]));
  TP_TRY(run_numerics(h, es, n));
  if (h->collector) TP_TRY(run_traces(h, es, n));
  return TP_OK;
}

tp_rc tp_harness_measure_case(tp_harness *h, tp_harness_entry *entries, int n) {
  if (n < 1 || n > TP_HARNESS_MAX_CASE)
    return TP_FAIL(TP_EINTERNAL, "a case of %d configurations (at most %d)", n,
                   TP_HARNESS_MAX_CASE);
  entry_state *es = calloc((size_t)n, sizeof *es);
  if (!es) return TP_FAIL(TP_EOOM, "no host memory for a case");
  for (int i = 0; i < n; ++i) {
    es[i].e = &entries[i];
    es[i].s = (stepper){h->ctx->group, &entries[i].item, NULL};
    es[i].oc.status = TP_STATUS_OK;
  }
  /* A hung window aborts the communicator before anything else can block on
   * it; the worker then records every configuration of the case and stops. */
  tp_rc phases = run_phases(h, es, n);
  if (phases == TP_ETIMEOUT) tp_group_abort(h->ctx->group);
  tp_rc stop = finish_case(h, es, n, phases);
  for (int i = 0; i < n; ++i) free_entry(&es[i]);
  tp_group_freeze(h->ctx->group, 0); /* its graphs are gone (capture_all froze it) */
  free(es);
  free_references(h);
  free_eager_copies(h);
  h->cases++;
  if (h->opts.current_config && h->ctx->rank == 0) *h->opts.current_config = -1;
  return stop;
}

tp_rc tp_harness_release_case(const tp_harness_entry *entries, int n) {
  tp_rc rc = TP_OK;
  for (int i = 0; i < n; ++i) {
    const tp_rc released = tp_device_owner_release(CONFIG_OWNER(&entries[i].cfg));
    if (rc == TP_OK) rc = released;
  }
  const tp_rc released = tp_device_owner_release(CASE_OWNER);
  return rc != TP_OK ? rc : released;
}

tp_rc tp_harness_skip(tp_harness *h, const tp_harness_config *cfg, tp_rc rc, const char *reason) {
  tp_harness_entry entry;
  memset(&entry, 0, sizeof entry);
  entry.cfg = *cfg;
  entry_state es;
  memset(&es, 0, sizeof es);
  es.e = &entry;
  set_failure(&es.oc, rc, reason);
  progress(h, &es);
  return record(h, &es);
}
