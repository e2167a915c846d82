/*
 * ops_worker.h — the op benchmark as one rank runs it: for every case of the
 * expanded matrix, build the tensors, then for every configuration plan it,
 * warm up, time a window of back-to-back iterations with one CUDA event
 * between consecutive iterations (no host synchronisation inside the
 * window), agree with the other ranks on the outcome, check numerics
 * against stock, and (rank 0) write the configuration in one transaction.
 */
#ifndef TP_OPS_WORKER_H
#define TP_OPS_WORKER_H

#include <stdint.h>

#include "bench/gpu/worker_group.h"
#include "bench/launch/resume.h"
#include "bench/matrix/ops_matrix.h"
#include "collectors/tp_collector.h"

typedef struct tp_ops_options {
  const char *db_path;
  const char *command_line;
  int warmup_iters;
  int measure_iters;
  int window_timeout_s; /* a window that does not finish in this time is a timeout */
  int quiet;            /* no per-configuration progress lines */
  int verbose;          /* a line per configuration on a terminal too */
  const char *format;   /* table printed at the end: md, csv, json */
  int trace;            /* after each window, a traced window with the CUPTI collector */
  int trace_iters;      /* iterations of the traced window */
  int rounds;           /* rounds per case */
  int shuffle;          /* 1: shuffled order per round, else rotated */
  uint64_t seed;
  const tp_resume *resume; /* where these workers start, and the configuration lost */
} tp_ops_options;

/* Runs the matrix from opts->resume->start on this rank (collective), the
 * lost configuration recorded first and left out. Returns TP_OK when every
 * configuration ended (ok, rejected or failed, recorded); an error only when
 * the worker cannot go on (a sticky CUDA error, a timeout, a lost peer):
 * progress then says how far it got, and the parent starts new workers. */
TP_MUST_CHECK tp_rc tp_ops_worker_main(tp_worker_ctx *ctx, const tp_ops_matrix *matrix,
                                       const tp_ops_options *opts, tp_collector *collector,
                                       volatile tp_job_progress *progress);

#endif
