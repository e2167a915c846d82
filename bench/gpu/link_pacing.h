/*
 * link_pacing.h — GEMMs between gaps, the last probe of `tpbench link`: how much faster a
 * GEMM runs when an idle gap precedes each call than back to back. A stock op alternates
 * its GEMM with a collective that keeps few SMs busy, and the GPU's clock, held down by the
 * power a GEMM draws back to back, recovers during the collective: the GEMMs of a stock op
 * run faster than the GEMM-alone rows that `tpbench project` prices them with. This probe
 * measures that factor on one GPU, per shape and gap, so the model reads it instead of
 * guessing it.
 *
 * For each shape of a fixed table (spanning the FLOPs of the projections' shards), the GEMM
 * runs back to back first (gap 0: its time t0), then with a one-thread spin kernel of
 * gap% · t0 before every call. Only the GEMM is timed (an event on each side). Warm-up and
 * timed calls each cover at least the settle time, so the clock has reached the pattern's
 * level. Every point is stored as a configuration of kind "link", layer "gemm_gap_<gap%>",
 * backend "cublaslt", the GEMM's M, N and K, its FLOPs and TFLOP/s.
 */
#ifndef TP_LINK_PACING_H
#define TP_LINK_PACING_H

#include "bench/cli/cli.h"
#include "bench/gpu/worker_group.h"
#include "common/tp_error.h"
#include "store/tp_store.h"

/* The shapes of the probe (M, N, K of one bf16 GEMM, Y = X·Wᵀ). */
enum { TP_PACING_SHAPES = 3 };
extern const int64_t TP_PACING_SHAPE[TP_PACING_SHAPES][3];

/* What the probe runs: the gaps (percent of t0; 0 is always measured first, whether listed or
 * not), the least timed and warm-up calls per point, and the time each of the two phases
 * covers at least. */
typedef struct tp_pacing_plan {
  tp_int_list gaps_pct;
  int iters, warmup;
  double settle_ms;
} tp_pacing_plan;

/* Runs the probe on every rank of ctx (each on its own GPU; every rank calls it), stores each
 * point in store (rank 0's; NULL elsewhere) under run_id and prints a table on rank 0. */
TP_MUST_CHECK tp_rc tp_pacing_probe(tp_worker_ctx *ctx, const tp_pacing_plan *plan, tp_store *store,
                                    int64_t run_id);

#endif /* TP_LINK_PACING_H */
