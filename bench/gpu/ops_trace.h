/*
 * ops_trace.h — the traced window of one configuration of `tpbench ops`:
 * after the untraced measurement, a few more iterations run with the CUPTI
 * collector on, each starting with a 4099-byte memset on the main stream whose
 * GPU timestamp marks the iteration's start. Every rank turns its own
 * events into per-iteration overlap rows and a schedule-evidence verdict;
 * rank 0 gathers everything into one trace record for the store.
 */
#ifndef TP_OPS_TRACE_H
#define TP_OPS_TRACE_H

#include "../../collectors/tp_collector.h"
#include "../../kernels/tp_linear.h"
#include "../../store/tp_store.h"
#include "worker_group.h"

/* Runs one step of the configuration (forward, backward or both). */
typedef tp_rc (*tp_trace_step_fn)(void *ctx);

typedef struct tp_ops_trace {
  /* inputs */
  int iters;              /* traced iterations */
  const char *schedule;   /* "ce", "sm", "nccl"; NULL: no evidence (GEMM alone) */
  int transfers_per_iter; /* what the evidence must find */
  double untraced_median_us;
  /* outputs, gathered on rank 0 (owned here; freed by tp_ops_trace_free) */
  tp_trace_record record;
  tp_trace_event *events;
  tp_trace_overlap *overlap;
  char *names;         /* every event's name, back to back */
  char evidence[1024]; /* every rank's verdict message */
} tp_ops_trace;

/* Runs the traced window on every rank (collective). On rank 0, trace->record
 * is ready for tp_store_put_trace. */
tp_rc tp_ops_trace_window(tp_worker_ctx *ctx, tp_collector *collector, tp_trace_step_fn step,
                          void *step_ctx, tp_ops_trace *trace);

void tp_ops_trace_free(tp_ops_trace *trace);

#endif
