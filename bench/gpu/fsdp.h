/*
 * fsdp.h — FSDP's collectives beside a block's step (issue 16 items 1, 2):
 * the weights sharded over a data-parallel communicator, all-gathered on a
 * side stream during the forward, the gradients reduce-scattered during the
 * backward, joined at the step's end.
 *
 * The timed step is one block in the steady state of a stack of identical
 * blocks. At its start the block's gathered weights are present (the
 * block's own weight tensors: the previous block's step prefetched them).
 * Then, on a side stream of its own:
 *   forward   the next block's weights are all-gathered from this rank's
 *             shards (dim 0 of each parameter's TP shard split over the n
 *             ranks of the communicator: placement.h's mesh) into a second
 *             buffer (the double buffer FSDP2 keeps);
 *   backward  (fwd+bwd) the previous block's gradients are reduce-scattered
 *             into this rank's gradient shards while this block's backward
 *             computes (in a stack, block i+1's reduce-scatter overlaps block
 *             i's backward: the same traffic, one block later). They are a
 *             buffer of their own, filled at prepare with this block's
 *             gradients from one untimed step, so the step never reads what
 *             its backward is writing;
 *   end       the main stream waits for the side stream: communication that
 *             does not fit under the compute is exposed in the step's time.
 * The weights stay gathered from forward to backward (FSDP2's
 * reshard_after_forward=False, ZeRO-2-like): no second all-gather in the
 * backward.
 *
 * Two modes:
 *   mesh     dp > 1: the communicator is the dp group of the mesh (ranks
 *            tp apart, one TP index); the shards are this rank's slices of
 *            its TP shard of the weights, which every dp rank of that TP
 *            index holds alike, so the gathered buffer must equal the
 *            weights bit for bit, at TP 1 and with TP inside alike.
 *   traffic  dp = 1 (fsdp_traffic=on): a second communicator on the TP
 *            group's own GPUs carries the same collectives of the block's
 *            weight-sized buffers, so the TP layer runs while another
 *            collective competes for the links and SMs. At TP 1 that is a
 *            one-rank communicator: an all-gather and a reduce-scatter that
 *            are copies, competing for memory bandwidth only.
 * traffic_bytes: the weight-sized buffers the competing collectives fill or
 * read per step (the gathered weights, and with a backward the gradients),
 * per rank.
 */
#ifndef TP_BENCH_FSDP_H
#define TP_BENCH_FSDP_H

#include <nccl.h>

#include "bench/gpu/block.h"

typedef enum { TP_FSDP_MESH = 0, TP_FSDP_TRAFFIC } tp_fsdp_mode;

typedef struct tp_fsdp {
  tp_fsdp_mode mode;
  ncclComm_t comm; /* borrowed: the dp communicator, or the traffic one */
  int ranks, index;
  tp_dtype dtype;
  int backward;
  cudaStream_t side; /* owned */
  cudaEvent_t forward_begins, backward_begins, side_done;
  tp_block_param params[TP_BLOCK_MAX_PARAMS];
  int n_params;
  void *shard[TP_BLOCK_MAX_PARAMS];      /* rows/ranks rows each */
  void *gathered[TP_BLOCK_MAX_PARAMS];   /* the next block's weights */
  void *prev_grad[TP_BLOCK_MAX_PARAMS];  /* the previous block's gradients */
  void *grad_shard[TP_BLOCK_MAX_PARAMS]; /* their reduce-scattered shard */
  int64_t traffic_bytes;
  /* Test only (set before tp_fsdp_prepare; kept by it and by release): the
   * shards are cut this many elements late, their tails left poisoned, as a
   * wrong gather offset would be (the checks must fail). */
  int64_t test_shard_shift;
} tp_fsdp;

/* Checks that every parameter's rows divide by the communicator's ranks
 * (TP_EREJECT naming the parameter otherwise), allocates the buffers
 * (through the device ledger, its current owner), cuts the shards from the
 * block's weights and fills the previous block's gradients with t's
 * gradients as they are (run one step first for real ones). comm: n ranks,
 * this one `index`. Synchronous. Free with tp_fsdp_release, also on error. */
TP_MUST_CHECK tp_rc tp_fsdp_prepare(tp_group *group, const tp_block_plan *plan,
                                    const tp_block_tensors *t, tp_fsdp_mode mode, ncclComm_t comm,
                                    tp_fsdp *out);
void tp_fsdp_release(tp_fsdp *f);

/* The hooks that put the collectives into tp_block_step_hooked (ctx: f). */
tp_step_hooks tp_fsdp_hooks(tp_fsdp *f);

/* One step of the block with the collectives beside it. */
TP_MUST_CHECK tp_rc tp_fsdp_step(tp_group *group, const tp_block_plan *plan, tp_block_tensors *t,
                                 tp_fsdp *f);

/* Judgements after a step, each one check of the harness (5 doubles of
 * tp_launch_compare's sums: diff², ref², max |diff|, differing, non-finite):
 *   gathered  the gathered buffer against the weights: every element in
 *             mesh mode; this rank's own slice in traffic mode (the other
 *             slices are the peers' different TP shards).
 *   reduced   the reduce-scattered shard against the same slice of an NCCL
 *             all-reduce of the previous block's gradients. */
TP_MUST_CHECK tp_rc tp_fsdp_check_gathered(tp_group *group, const tp_fsdp *f, double sums[5],
                                           double *elements);
TP_MUST_CHECK tp_rc tp_fsdp_check_reduced(tp_group *group, const tp_fsdp *f, double sums[5],
                                          double *elements);

/* Whether a reduce-scatter over n ranks must equal the all-reduce bit for
 * bit: a sum of two terms is the same in either order; beyond two, NCCL's
 * orders may differ. */
int tp_fsdp_reduce_exact(int ranks);

#endif
