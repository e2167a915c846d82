/*
 * run_worker.h — `tpbench run` as one rank runs it: every configuration of
 * the run matrix (bench/run_matrix.h) as a layer item of the shared
 * harness (harness.h) on the block code (block.h), from a given start, so a
 * job whose workers died can go on with new ones (bench/gpu/cmd_run.c).
 */
#ifndef TP_RUN_WORKER_H
#define TP_RUN_WORKER_H

#include <stdint.h>

#include "../../collectors/tp_collector.h"
#include "../run_matrix.h"
#include "harness.h"
#include "worker_group.h"

/* Where the job stands, in memory the parent shares with the workers; rank
 * 0 writes it. */
typedef struct tp_run_progress {
  int64_t run_id; /* 0 until the run began */
  int next;       /* the first configuration not recorded yet (a case's first) */
  int current;    /* the configuration being run; -1 between cases */
  int recorded;   /* configurations these workers recorded so far */
} tp_run_progress;

typedef struct tp_run_worker_options {
  tp_harness_options harness; /* command "run"; resume_run is set from progress */
  int start;                  /* the first configuration to run (a case's first, or later) */
  const char *lost_reason;    /* non-NULL: configuration lost_index killed the last workers;
                                 record it failed with this reason and leave it out */
  int lost_index;
} tp_run_worker_options;

/* Runs configurations start.. of the matrix on this rank (collective).
 * Applies the host rule only the workers can decide (peer access) first.
 * TP_OK when every configuration ended and was recorded; an error when this
 * worker cannot go on (progress says how far it got). collector: NULL for
 * no traced windows. */
tp_rc tp_run_worker_run(tp_worker_ctx *ctx, tp_run_matrix *matrix,
                        const tp_run_worker_options *opts, tp_collector *collector,
                        volatile tp_run_progress *progress);

#endif
