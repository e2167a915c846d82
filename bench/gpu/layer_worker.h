/*
 * layer_worker.h — `tpbench run` as one rank runs it: every configuration of
 * the run matrix (bench/matrix/layer_matrix.h) as a layer item of the shared
 * harness (harness.h) on the block code (block.h), from a given start, so a
 * job whose workers died can go on with new ones (bench/gpu/cmd_run.c).
 */
#ifndef TP_LAYER_WORKER_H
#define TP_LAYER_WORKER_H

#include <stdint.h>

#include "bench/gpu/harness.h"
#include "bench/gpu/worker_group.h"
#include "bench/launch/resume.h"
#include "bench/matrix/layer_matrix.h"
#include "collectors/tp_collector.h"

typedef struct tp_layer_worker_options {
  tp_harness_options harness; /* command "run"; resume_run is set from progress */
  const tp_resume *resume;    /* where these workers start, and the configuration lost */
} tp_layer_worker_options;

/* Runs configurations start.. of the matrix on this rank (collective).
 * Applies the host rule only the workers can decide (peer access) first.
 * TP_OK when every configuration ended and was recorded; an error when this
 * worker cannot go on (progress says how far it got). collector: NULL for
 * no traced windows. */
TP_MUST_CHECK tp_rc tp_layer_worker_main(tp_worker_ctx *ctx, tp_layer_matrix *matrix,
                                         const tp_layer_worker_options *opts,
                                         tp_collector *collector,
                                         volatile tp_job_progress *progress);

#endif
