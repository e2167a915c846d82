/*
 * drift.h — training steps of a layer, for `tpbench drift`: N steps of
 * forward, a loss, backward, the global gradient norm and an optimizer
 * update, on a block or a stack of blocks (block.h), stock or dist_gemm,
 * from seeded initial weights and seeded data, so that every configuration
 * of a drift run starts from the same weights and sees the same batches.
 *
 * One step, on every rank of the TP group:
 *   data     layer 0's input x and the target, fresh from (seed, step) each
 *            step (same_batch: step 0's every step), sharded like x [T/W, D];
 *   forward  through the stack (block i's output is block i+1's input);
 *   loss     mean squared error of the last output against the target over
 *            all T·D elements: each row's sum of squares in fp32 on the
 *            device (fixed order, tp_train.h), the rows all-gathered in rank
 *            order (which is global row order) and added in fp64 on the host
 *            row by row, so the sum has the same shape at every TP degree;
 *   backward from dy = 2 (y − target) / (T·D);
 *   gains    the RMSNorm gains' gradients are partial sums per rank with
 *            sequence parallelism: all-gathered and summed in rank order in
 *            fp32 (one rounding), the same complete gradient on every rank;
 *   norm     sqrt of Σ over ranks (in order) and parameters (in order) of
 *            each gradient's sum of squares (fp32 slices, fp64 total,
 *            tp_train.h); a gain's complete gradient counted once;
 *   update   every weight and gain from its gradient: bf16 (or fp32) weights
 *            with an fp32 master copy; SGD (no momentum, no decay) or AdamW
 *            (betas 0.9 and 0.95, eps 1e-8, weight decay 0.1 on every
 *            parameter, as torchtitan's defaults; no gradient clipping).
 * The step records the loss and the norm of its backward, before its update.
 *
 * All cross-rank values move through NCCL all-gathers (copies, not sums),
 * so nothing in the step's own arithmetic depends on NCCL's choices; only
 * the block's projections do (their backend's collectives and sums).
 */
#ifndef TP_BENCH_DRIFT_H
#define TP_BENCH_DRIFT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/gpu/block.h"
#include "bench/gpu/watchdog.h"
#include "store/tp_store.h"

typedef enum { TP_DRIFT_SGD = 0, TP_DRIFT_ADAMW } tp_drift_optimizer;

/* "sgd", "adamw"; "?" for another value. */
const char *tp_drift_optimizer_name(tp_drift_optimizer optimizer);

/* AdamW's fixed hyper-parameters (torchtitan's defaults). */
#define TP_DRIFT_ADAMW_BETA1 0.9
#define TP_DRIFT_ADAMW_BETA2 0.95
#define TP_DRIFT_ADAMW_EPS 1e-8
#define TP_DRIFT_ADAMW_WEIGHT_DECAY 0.1

/* How a configuration trains: the same for every configuration of a run. */
typedef struct tp_drift_recipe {
  int steps; /* >= 1 */
  int depth; /* blocks stacked, >= 1 */
  tp_drift_optimizer optimizer;
  double lr;      /* > 0 */
  uint64_t seed;  /* initial weights and data */
  int same_batch; /* every step trains on step 0's input and target */
} tp_drift_recipe;

/* What one configuration runs. */
typedef struct tp_drift_variant {
  tp_backend backend;   /* TP_BACKEND_STOCK or TP_BACKEND_DIST */
  tp_schedule schedule; /* dist_gemm's request */
  int chunks;           /* dist_gemm's request, 0: auto */
  tp_rs_sum rs_sum;     /* dist_gemm's reduce-scatter sum */
} tp_drift_variant;

/* Plans the variant's block on this rank (not collective): the shape with
 * the variant's rs_sum, its backward on. TP_EREJECT with the reason when
 * it cannot run here (dist_gemm at TP 1, rs_sum nccl for stock, ...). */
TP_MUST_CHECK tp_rc tp_drift_plan(const tp_group *group, const tp_block_shape *shape,
                                  const tp_drift_variant *variant, tp_block_plan *plan);

/* Each rank's outcome of a phase, exchanged (exchange: an all-gather over
 * the ranks, tp_symm.h's tp_exchange_fn): TP_OK when every rank's local is
 * TP_OK; else the first failing rank's code, with its message in reason
 * ("rank R: ..." unless a rejection, whose words are the same everywhere). */
TP_MUST_CHECK tp_rc tp_drift_agree(tp_exchange_fn exchange, void *ctx, int world, tp_rc local,
                                   char *reason, size_t cap);

/* Collective: prepares plan's workspace, allocates recipe->depth blocks
 * with seeded weights, trains recipe->steps steps (above) and frees
 * everything. steps[i] gets step i's loss and gradient norm, step_ms[i] its
 * wall time (host clock, with the step's read-backs); both hold
 * recipe->steps entries. A set-up failure on any rank (out of memory, say)
 * fails every rank before the first collective of the training; after that
 * a failure ends this rank's part (the launcher stops the others). A
 * non-finite loss or norm is recorded, not an error. */
TP_MUST_CHECK tp_rc tp_drift_train(tp_group *group, tp_exchange_fn exchange, void *ctx,
                                   const tp_block_plan *plan, const tp_drift_recipe *recipe,
                                   tp_drift_step *steps, double *step_ms);

/* How tp_drift_train_guarded watches its training: the watchdog armed
 * around the set-up and around each step, for timeout_s each (a hung step
 * ends the worker: watchdog.h), *done (may be NULL) the count of steps
 * finished, stored before the next step is armed, so the watchdog's last
 * words can record them; and the test-only hang (TPBENCH_TEST_HANG_STEP,
 * bench/cli/drift_args.h): rank hang_rank stops before step hang_step's
 * collectives (hang_step -1: never). */
typedef struct tp_drift_guard {
  tp_watchdog *watchdog; /* NULL: none */
  double timeout_s;
  atomic_int *done;
  int hang_step, hang_rank;
} tp_drift_guard;

/* tp_drift_train under guard (NULL: no watchdog, no hang, as tp_drift_train). */
TP_MUST_CHECK tp_rc tp_drift_train_guarded(tp_group *group, tp_exchange_fn exchange, void *ctx,
                                           const tp_block_plan *plan, const tp_drift_recipe *recipe,
                                           const tp_drift_guard *guard, tp_drift_step *steps,
                                           double *step_ms);

#endif
