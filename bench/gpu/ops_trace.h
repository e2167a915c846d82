/*
 * ops_trace.h — the traced window of one configuration of `tpbench ops`:
 * after the untraced measurement, a few more iterations run with the CUPTI
 * collector on, each starting with a 4099-byte memset on the main stream whose
 * GPU timestamp marks the iteration's start. Every rank turns its own
 * events into per-iteration overlap rows (with synchronisation beside them)
 * and a schedule-evidence verdict per op of the configuration, each judged
 * inside its own NVTX ranges (collectors/' tp_ops_evidence): ok, failed or
 * not checked with the reason. Rank 0 gathers everything into one trace
 * record for the store: an op failed on any rank fails, else one not
 * checked on any rank is not checked; the configuration's evidence is the
 * worst of its ops'.
 */
#ifndef TP_OPS_TRACE_H
#define TP_OPS_TRACE_H

#include "bench/gpu/worker_group.h"
#include "collectors/tp_collector.h"
#include "kernels/tp_linear.h"
#include "store/tp_store.h"

/* Runs one step of the configuration (forward, backward or both). */
typedef tp_rc (*tp_trace_step_fn)(void *ctx);

enum { TP_TRACE_MAX_OPS = 8, TP_TRACE_OP_MSG = 256 };

typedef struct tp_ops_trace {
  /* inputs */
  int iters; /* traced iterations */
  /* The configuration's ops as recorded (op, schedule, engine, chunks): each
   * is judged inside its NVTX ranges, "<kind>.fwd|bwd <backend> <schedule>
   * x<chunks>" (kernels/tp_linear.c); engine "cublaslt" (the GEMM alone)
   * must show no transfer at all. At most TP_TRACE_MAX_OPS. */
  const tp_schedule_choice *ops;
  int n_ops;
  int transfers_per_iter; /* all ops together, each counted by its own schedule */
  double untraced_median_us;
  /* outputs, gathered on rank 0 (owned here; freed by tp_ops_trace_free) */
  tp_trace_record record; /* record.evidence: "ok", "failed", "not checked" */
  tp_trace_event *events;
  tp_trace_overlap *overlap;
  char *names; /* every event's name, back to back */
  tp_trace_op_evidence op_evidence[TP_TRACE_MAX_OPS];
  char op_messages[TP_TRACE_MAX_OPS][TP_TRACE_OP_MSG + 16];
  char evidence[1024]; /* the verdicts that decide the configuration's, rank by rank */
} tp_ops_trace;

/* Runs the traced window on every rank (collective). On rank 0, trace->record
 * is ready for tp_store_put_trace. */
TP_MUST_CHECK tp_rc tp_ops_trace_window(tp_worker_ctx *ctx, tp_collector *collector,
                                        tp_trace_step_fn step, void *step_ctx, tp_ops_trace *trace);

void tp_ops_trace_free(tp_ops_trace *trace);

#endif
