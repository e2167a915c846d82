/*
 * evidence.c — does the trace show the schedule that was recorded as run?
 *
 * A fused op names its schedule and the reason it was chosen; DESIGN.md asks
 * that the trace confirm it, because a silent fallback (an "sm" schedule that
 * quietly used the copy engine, a dist_gemm op that ended up in NCCL) would
 * make every number beside it a lie. Each schedule leaves a fingerprint:
 *   ce    peer-to-peer memcpy records, one per transfer, and no SM copy kernel
 *   sm    launches of tpbench's copy_signal_kernel, and no peer memcpy
 *   nccl  (stock) NCCL kernels, and neither of the above
 * This file counts fingerprints inside a window and compares them with what
 * the caller expects. Kernels are recognised by classify.c's roles, so the
 * kernel names live in one table only. A mismatch is returned as an error
 * (TP_EINTERNAL with the message), never as a quiet flag.
 */
#include <stdio.h>
#include <string.h>

#include "collectors/tp_collector.h"

typedef enum { SCHED_CE, SCHED_SM, SCHED_NCCL } sched;

typedef struct sched_name {
  const char *name;
  sched id;
  const char *what; /* what is counted for it, in messages */
} sched_name;

static const sched_name sched_names[] = {
    {"ce", SCHED_CE, "peer-to-peer copies"},
    /* the ring moves its chunks with the copy engine too (neighbour pushes) */
    {"ring", SCHED_CE, "peer-to-peer copies (ring)"},
    {"sm", SCHED_SM, "copy_signal_kernel launches"},
    {"nccl", SCHED_NCCL, "NCCL kernels"},
};

static const sched_name *find_sched(const char *name) {
  for (size_t i = 0; i < sizeof sched_names / sizeof sched_names[0]; ++i)
    if (strcmp(name, sched_names[i].name) == 0) return &sched_names[i];
  return NULL;
}

static void count_event(const tp_event *e, tp_evidence *out) {
  if (e->kind == TP_EV_MEMCPY) {
    if (e->copy_kind == TP_COPY_PTOP) ++out->peer_copies;
    else if (e->copy_kind == TP_COPY_DTOD) ++out->dtod_copies;
  } else if (e->kind == TP_EV_KERNEL) {
    tp_kernel_role role = tp_classify_kernel_ex(e->name).role;
    if (role == TP_ROLE_TP_COPY) ++out->copy_kernels;
    else if (role == TP_ROLE_NCCL) ++out->nccl_kernels;
  }
}

/* The count the schedule is judged by, and whether the others are clean. */
static size_t primary_count(sched id, const tp_evidence *ev) {
  switch (id) {
  case SCHED_CE: return ev->peer_copies;
  case SCHED_SM: return ev->copy_kernels;
  case SCHED_NCCL: return ev->nccl_kernels;
  }
  return 0;
}

static int foreign_fingerprints(sched id, const tp_evidence *ev) {
  switch (id) {
  case SCHED_CE: return ev->copy_kernels > 0;
  case SCHED_SM: return ev->peer_copies > 0;
  case SCHED_NCCL: return ev->copy_kernels > 0 || ev->peer_copies > 0;
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
  if (!find_sched(schedule))
    return TP_FAIL(TP_EUSAGE, "tp_schedule_evidence: unknown schedule '%s' (valid: ce, sm, nccl)",
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
