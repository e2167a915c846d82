/*
 * evidence.c — does the trace show the schedule that was recorded as run?
 *
 * A fused op names its schedule and the reason it was chosen; the trace must
 * confirm it, because a silent fallback (an "sm" schedule that quietly used
 * the copy engine, a dist_gemm op that ended up in NCCL) would make every
 * number beside it a lie. The rules and the three verdicts are defined in
 * collectors/README.md ("Definitions"). Each schedule leaves a fingerprint, and
 * must leave no other:
 *   ce    peer-to-peer memcpy records; no SM copy kernel, no NCCL kernel
 *   sm    launches of tpbench's copy_signal_kernel; no peer memcpy, no NCCL kernel
 *   nccl  (stock path) NCCL kernels; no peer memcpy, no SM copy kernel
 *   none  (the GEMM alone) no transfer at all
 * tp_schedule_evidence counts fingerprints over a whole window (one schedule
 * for everything in it). tp_ops_evidence judges each op of a configuration
 * inside its own NVTX ranges, so a layer whose projections run different
 * schedules is checked op by op; device work is placed in a range by the
 * host time of the API call that issued it (NVTX ranges are host times,
 * kernels run later). Its verdicts are ok, failed or not checked — a check
 * that could not look says so, it never passes. Kernels are recognised by
 * classify.c's origins, so kernel names live in one table only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/tp_collector.h"

typedef enum { SCHED_CE, SCHED_SM, SCHED_NCCL, SCHED_NONE } sched;

typedef struct sched_name {
  const char *name;
  sched id;
  int per_op;       /* tp_ops_evidence has a rule for it (tp_ops_evidence_knows) */
  const char *what; /* what is counted for it, in messages */
} sched_name;

/* The one table of the schedules a trace can confirm: a new schedule's fingerprint is its row
 * here, and the ops' traces (bench/gpu/ops_trace.c) judge what has per_op set. */
static const sched_name sched_names[] = {
    {"ce", SCHED_CE, 1, "peer-to-peer copies"},
    /* the ring moves its chunks with the copy engine too (neighbour pushes) */
    {"ring", SCHED_CE, 1, "peer-to-peer copies (ring)"},
    {"sm", SCHED_SM, 1, "copy_signal_kernel launches"},
    {"nccl", SCHED_NCCL, 1, "NCCL kernels"},
    /* the stock variant on NCCL symmetric windows: NCCL's (symmetric) kernels, over a whole
     * window only; an op's trace under it is not checked */
    {"nccl-window", SCHED_NCCL, 0, "NCCL kernels (symmetric windows)"},
    {"none", SCHED_NONE, 1, "no transfer"},
};
enum { N_SCHEDS = (int)(sizeof sched_names / sizeof sched_names[0]) };

static const sched_name *find_sched(const char *name) {
  for (int i = 0; i < N_SCHEDS; ++i)
    if (strcmp(name, sched_names[i].name) == 0) return &sched_names[i];
  return NULL;
}

int tp_ops_evidence_knows(const char *schedule) {
  const sched_name *s = schedule ? find_sched(schedule) : NULL;
  return s && s->per_op;
}

/* "ce, ring, sm, nccl, none": the schedules tp_ops_evidence judges, for its usage message. */
static void per_op_names(char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < N_SCHEDS && used < cap; ++i) {
    if (!sched_names[i].per_op) continue;
    int w = snprintf(buf + used, cap - used, "%s%s", used ? ", " : "", sched_names[i].name);
    if (w > 0) used += (size_t)w;
  }
}

static void count_event(const tp_event *e, tp_evidence *out) {
  if (e->type == TP_EV_MEMCPY) {
    if (e->copy_kind == TP_COPY_PTOP) ++out->peer_copies;
    else if (e->copy_kind == TP_COPY_DTOD) ++out->dtod_copies;
  } else if (e->type == TP_EV_KERNEL) {
    tp_kernel_origin origin = tp_classify_kernel_ex(e->name).origin;
    if (origin == TP_KERNEL_OWN_COPY) ++out->copy_kernels;
    else if (origin == TP_KERNEL_NCCL) ++out->nccl_kernels;
  }
}

/* The count the schedule is judged by, and whether the others are clean. */
static size_t primary_count(sched id, const tp_evidence *ev) {
  switch (id) {
  case SCHED_CE: return ev->peer_copies;
  case SCHED_SM: return ev->copy_kernels;
  case SCHED_NCCL: return ev->nccl_kernels;
  case SCHED_NONE: break;
  }
  return 0;
}

static int foreign_fingerprints(sched id, const tp_evidence *ev) {
  switch (id) {
  case SCHED_CE: return ev->copy_kernels > 0 || ev->nccl_kernels > 0;
  case SCHED_SM: return ev->peer_copies > 0 || ev->nccl_kernels > 0;
  case SCHED_NCCL: return ev->copy_kernels > 0 || ev->peer_copies > 0;
  case SCHED_NONE: break;
  }
  return 1;
}

static void write_message(const sched_name *s, int iterations, int per_iter, tp_evidence *out) {
  size_t got = primary_count(s->id, out);
  const char *hint = "";
  if (s->id == SCHED_CE && out->peer_copies == 0 && out->dtod_copies >= out->expected)
    hint =
        "; no PtoP record but enough DtoD copies: does this driver report IPC peer copies as DtoD?";
  snprintf(out->message, sizeof out->message,
           "schedule %s %s: expected %zu %s (%d iterations x %d), found %zu; window holds %zu PtoP "
           "copies, %zu DtoD copies, %zu copy_signal_kernel launches, %zu NCCL kernels%s",
           s->name, out->verdict == TP_VERDICT_CONFIRMED ? "confirmed" : "NOT confirmed",
           out->expected, s->what, iterations, per_iter, got, out->peer_copies, out->dtod_copies,
           out->copy_kernels, out->nccl_kernels, hint);
}

static tp_rc check_args(const tp_event *ev, size_t n, const char *schedule, int iterations,
                        int per_iter, const tp_evidence *out) {
  if (!out || !schedule || (n > 0 && !ev))
    return TP_FAIL(TP_EUSAGE, "tp_schedule_evidence: NULL argument");
  if (iterations < 1 || per_iter < 1)
    return TP_FAIL(
        TP_EUSAGE,
        "tp_schedule_evidence: iterations (%d) and transfers per iteration (%d) must be >= 1",
        iterations, per_iter);
  const sched_name *s = find_sched(schedule);
  if (!s || s->id == SCHED_NONE)
    return TP_FAIL(
        TP_EUSAGE,
        "tp_schedule_evidence: unknown schedule '%s' (valid: ce, ring, sm, nccl, nccl-window)",
        schedule);
  for (size_t i = 1; i < n; ++i)
    if (ev[i].rank != ev[0].rank)
      return TP_FAIL(
          TP_EUSAGE,
          "tp_schedule_evidence: events of ranks %d and %d mixed; pass one rank's events",
          ev[0].rank, ev[i].rank);
  return TP_OK;
}

tp_rc tp_schedule_evidence(const tp_event *ev, size_t n, uint64_t win_start, uint64_t win_end,
                           const char *schedule, int iterations, int transfers_per_iteration,
                           tp_evidence *out) {
  TP_TRY(check_args(ev, n, schedule, iterations, transfers_per_iteration, out));
  const sched_name *s = find_sched(schedule);
  memset(out, 0, sizeof *out);
  out->expected = (size_t)iterations * (size_t)transfers_per_iteration;
  for (size_t i = 0; i < n; ++i)
    if (ev[i].start_ns >= win_start && ev[i].start_ns < win_end) count_event(&ev[i], out);
  int ok = primary_count(s->id, out) == out->expected && !foreign_fingerprints(s->id, out);
  out->verdict = ok ? TP_VERDICT_CONFIRMED : TP_VERDICT_MISMATCH;
  write_message(s, iterations, transfers_per_iteration, out);
  if (!ok) return TP_FAIL(TP_EINTERNAL, "%s", out->message);
  return TP_OK;
}

/* ---- per op, inside its NVTX ranges ------------------------------------------------ */

const char *tp_evidence_state_name(tp_evidence_state state) {
  switch (state) {
  case TP_EVIDENCE_OK: return "ok";
  case TP_EVIDENCE_FAILED: return "failed";
  case TP_EVIDENCE_NOT_CHECKED: return "not checked";
  }
  return "invalid";
}

tp_evidence_state tp_evidence_combine(tp_evidence_state a, tp_evidence_state b) {
  if (a == TP_EVIDENCE_FAILED || b == TP_EVIDENCE_FAILED) return TP_EVIDENCE_FAILED;
  if (a == TP_EVIDENCE_NOT_CHECKED || b == TP_EVIDENCE_NOT_CHECKED) return TP_EVIDENCE_NOT_CHECKED;
  return TP_EVIDENCE_OK;
}

/* What a transfer is, by the fingerprint it leaves. */
typedef enum { FP_NONE, FP_PEER_COPY, FP_COPY_KERNEL, FP_NCCL } fingerprint;

/* A copy into a peer's memory: peer-to-peer, or, with the ranks sharing one
 * GPU, device-to-device on the window's push stream (tp_evidence_window). */
static int is_push(const tp_event *e, const tp_evidence_window *w) {
  if (e->copy_kind == TP_COPY_PTOP) return 1;
  return w->shared_device && e->copy_kind == TP_COPY_DTOD && e->stream == w->push_stream;
}

static fingerprint fingerprint_of(const tp_event *e, const tp_evidence_window *w) {
  if (e->type == TP_EV_MEMCPY) return is_push(e, w) ? FP_PEER_COPY : FP_NONE;
  if (e->type != TP_EV_KERNEL) return FP_NONE;
  tp_kernel_origin origin = tp_classify_kernel_ex(e->name).origin;
  if (origin == TP_KERNEL_OWN_COPY) return FP_COPY_KERNEL;
  if (origin == TP_KERNEL_NCCL) return FP_NCCL;
  return FP_NONE;
}

static fingerprint required_of(sched id) {
  switch (id) {
  case SCHED_CE: return FP_PEER_COPY;
  case SCHED_SM: return FP_COPY_KERNEL;
  case SCHED_NCCL: return FP_NCCL;
  case SCHED_NONE: break;
  }
  return FP_NONE;
}

static const char *forbidden_text(sched id) {
  switch (id) {
  case SCHED_CE: return "no NCCL kernel nor SM copy kernel";
  case SCHED_SM: return "no NCCL kernel nor peer copy";
  case SCHED_NCCL: return "no peer copy nor SM copy kernel";
  case SCHED_NONE: break;
  }
  return "no transfer at all";
}

/* The op's ranges: [start, end) host intervals. */
typedef struct op_ranges {
  uint64_t *start, *end;
  size_t n;
} op_ranges;

static int has_suffix(const char *name, const char *suffix) {
  size_t ln = strlen(name), ls = suffix ? strlen(suffix) : 0;
  return ls <= ln && strcmp(name + ln - ls, suffix ? suffix : "") == 0;
}

static int is_op_range(const tp_event *e, const tp_op_evidence *op, const tp_evidence_window *w) {
  return e->type == TP_EV_RANGE && e->start_ns >= w->start_ns && e->start_ns < w->end_ns &&
         strncmp(e->name, op->range_prefix, strlen(op->range_prefix)) == 0 &&
         has_suffix(e->name, op->range_suffix);
}

static tp_rc collect_ranges(const tp_event *ev, size_t n, const tp_evidence_window *w,
                            const tp_op_evidence *op, op_ranges *out) {
  out->start = malloc((n ? n : 1) * sizeof *out->start);
  out->end = malloc((n ? n : 1) * sizeof *out->end);
  if (!out->start || !out->end) return TP_FAIL(TP_EOOM, "tp_ops_evidence: no memory for ranges");
  for (size_t i = 0; i < n; ++i) {
    if (!is_op_range(&ev[i], op, w)) continue;
    out->start[out->n] = ev[i].start_ns;
    out->end[out->n++] = ev[i].end_ns;
  }
  return TP_OK;
}

static int launched_inside(const op_ranges *r, uint64_t t) {
  for (size_t i = 0; i < r->n; ++i)
    if (t >= r->start[i] && t < r->end[i]) return 1;
  return 0;
}

static void count_fingerprint(tp_op_evidence *op, fingerprint fp) {
  if (fp == FP_PEER_COPY) ++op->peer_copies;
  else if (fp == FP_COPY_KERNEL) ++op->copy_kernels;
  else if (fp == FP_NCCL) ++op->nccl_kernels;
}

static size_t count_of(const tp_op_evidence *op, fingerprint fp) {
  return fp == FP_PEER_COPY     ? op->peer_copies
         : fp == FP_COPY_KERNEL ? op->copy_kernels
         : fp == FP_NCCL        ? op->nccl_kernels
                                : 0;
}

/* What the window holds beyond the ops' own counts. */
typedef struct tally {
  size_t required; /* transfers some op's schedule requires, each counted once */
  size_t outside;  /* transfers launched in the window outside every op's range */
  size_t unplaced; /* transfers without a launch time */
} tally;

/* Places every transfer of the window in the ops whose ranges hold its launch. */
static void place_transfers(const tp_event *ev, size_t n, const tp_evidence_window *w,
                            tp_op_evidence *ops, const op_ranges *rg, size_t n_ops, tally *t) {
  for (size_t i = 0; i < n; ++i) {
    fingerprint fp = fingerprint_of(&ev[i], w);
    if (fp == FP_NONE) continue;
    uint64_t at = ev[i].launch_ns;
    if (at == 0) {
      if (ev[i].start_ns >= w->start_ns && ev[i].start_ns < w->end_ns) ++t->unplaced;
      continue;
    }
    if (at < w->start_ns || at >= w->end_ns) continue;
    int in_any = 0, required = 0;
    for (size_t k = 0; k < n_ops; ++k) {
      if (!launched_inside(&rg[k], at)) continue;
      in_any = 1;
      count_fingerprint(&ops[k], fp);
      required = required || fp == required_of(find_sched(ops[k].schedule)->id);
    }
    t->outside += !in_any;
    t->required += (size_t)required;
  }
}

/* How a copy-engine schedule's pushes were counted where the ranks share one GPU. */
static const char *shared_note(const tp_evidence_window *w, sched id) {
  return w->shared_device && id == SCHED_CE
             ? " (ranks share one GPU: a push is a DtoD copy on the transfer stream)"
             : "";
}

/* Sets an op's state and its message (printf-style). */
#define SET_VERDICT(op, st, ...)                                                                   \
  ((op)->state = (st), (void)snprintf((op)->message, sizeof(op)->message, __VA_ARGS__))

/* The verdict of one op, from its counts and the window's tally. */
static void judge_op(tp_op_evidence *op, const op_ranges *rg, const tally *t, size_t expected,
                     const tp_evidence_window *w) {
  const sched_name *s = find_sched(op->schedule);
  const fingerprint need = required_of(s->id);
  const size_t seen = op->peer_copies + op->copy_kernels + op->nccl_kernels;
  const char *suffix = op->range_suffix ? op->range_suffix : "";
  if (rg->n == 0)
    SET_VERDICT(op, TP_EVIDENCE_NOT_CHECKED,
                "%s: no NVTX range \"%s...%s\" in the traced window (a CUDA graph replay opens "
                "none)",
                op->op, op->range_prefix, suffix);
  else if (seen > count_of(op, need))
    SET_VERDICT(op, TP_EVIDENCE_FAILED,
                "%s (%s): expected %s and %s inside its %zu ranges; seen %zu peer copies, %zu SM "
                "copy kernels, %zu NCCL kernels",
                op->op, s->name, s->what, forbidden_text(s->id), rg->n, op->peer_copies,
                op->copy_kernels, op->nccl_kernels);
  else if (t->unplaced > 0)
    SET_VERDICT(op, TP_EVIDENCE_NOT_CHECKED,
                "%s: %zu transfers have no launch record, so they cannot be placed in an op's "
                "range",
                op->op, t->unplaced);
  else if (need != FP_NONE && t->required != expected)
    SET_VERDICT(op, TP_EVIDENCE_FAILED,
                "%s (%s): the configuration's ops must launch %zu transfers in their ranges (%d "
                "iterations x %d), found %zu; this op: %zu %s%s",
                op->op, s->name, expected, w->iterations, w->transfers_per_iteration, t->required,
                count_of(op, need), s->what, shared_note(w, s->id));
  else if (t->outside > 0)
    SET_VERDICT(op, TP_EVIDENCE_FAILED,
                "%s (%s): %zu transfers were launched outside every op's range", op->op, s->name,
                t->outside);
  else
    SET_VERDICT(op, TP_EVIDENCE_OK, "%s (%s): %zu ranges, %zu %s, %s%s", op->op, s->name, rg->n,
                count_of(op, need), s->what, forbidden_text(s->id), shared_note(w, s->id));
}

static tp_rc check_ops_args(const tp_event *ev, size_t n, const tp_evidence_window *w,
                            const tp_op_evidence *ops, size_t n_ops,
                            const tp_evidence_state *overall) {
  if (!w || !overall || (n > 0 && !ev) || (n_ops > 0 && !ops))
    return TP_FAIL(TP_EUSAGE, "tp_ops_evidence: NULL argument");
  if (w->iterations < 1 || w->transfers_per_iteration < 0)
    return TP_FAIL(TP_EUSAGE,
                   "tp_ops_evidence: %d iterations (>= 1) and %d transfers per iteration (>= 0)",
                   w->iterations, w->transfers_per_iteration);
  for (size_t k = 0; k < n_ops; ++k) {
    if (!ops[k].op || !ops[k].range_prefix || !ops[k].schedule)
      return TP_FAIL(TP_EUSAGE, "tp_ops_evidence: op %zu lacks its name, schedule or ranges", k);
    if (!find_sched(ops[k].schedule)) {
      char valid[128];
      per_op_names(valid, sizeof valid);
      return TP_FAIL(TP_EUSAGE, "tp_ops_evidence: op %s: unknown schedule '%s' (valid: %s)",
                     ops[k].op, ops[k].schedule, valid);
    }
  }
  for (size_t i = 1; i < n; ++i)
    if (ev[i].rank != ev[0].rank)
      return TP_FAIL(TP_EUSAGE,
                     "tp_ops_evidence: events of ranks %d and %d mixed; pass one rank's events",
                     ev[0].rank, ev[i].rank);
  return TP_OK;
}

static void reset_op(tp_op_evidence *op) {
  op->state = TP_EVIDENCE_NOT_CHECKED;
  op->ranges = op->peer_copies = op->copy_kernels = op->nccl_kernels = 0;
  op->message[0] = '\0';
}

tp_rc tp_ops_evidence(const tp_event *ev, size_t n, const tp_evidence_window *w,
                      tp_op_evidence *ops, size_t n_ops, tp_evidence_state *overall) {
  TP_TRY(check_ops_args(ev, n, w, ops, n_ops, overall));
  *overall = n_ops ? TP_EVIDENCE_OK : TP_EVIDENCE_NOT_CHECKED;
  for (size_t k = 0; k < n_ops; ++k) reset_op(&ops[k]);
  if (w->not_checked) {
    for (size_t k = 0; k < n_ops; ++k)
      SET_VERDICT(&ops[k], TP_EVIDENCE_NOT_CHECKED, "%s: %s", ops[k].op, w->not_checked);
    if (n_ops) *overall = TP_EVIDENCE_NOT_CHECKED;
    return TP_OK;
  }
  op_ranges *rg = calloc(n_ops ? n_ops : 1, sizeof *rg);
  tp_rc rc = rg ? TP_OK : TP_FAIL(TP_EOOM, "tp_ops_evidence: no memory for %zu ops", n_ops);
  for (size_t k = 0; rc == TP_OK && k < n_ops; ++k) rc = collect_ranges(ev, n, w, &ops[k], &rg[k]);
  if (rc == TP_OK) {
    tally t = {0};
    place_transfers(ev, n, w, ops, rg, n_ops, &t);
    const size_t expected = (size_t)w->iterations * (size_t)w->transfers_per_iteration;
    for (size_t k = 0; k < n_ops; ++k) {
      ops[k].ranges = rg[k].n;
      judge_op(&ops[k], &rg[k], &t, expected, w);
      *overall = tp_evidence_combine(*overall, ops[k].state);
    }
  }
  for (size_t k = 0; rg && k < n_ops; ++k) {
    free(rg[k].start);
    free(rg[k].end);
  }
  free(rg);
  return rc;
}
