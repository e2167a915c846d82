/*
 * tp_chunk_rule.h — how dist_gemm's `auto` schedule chooses its chunk count, and when it leaves
 * an op to the stock path; which schedules and chunk counts dist_gemm takes at all. One rule,
 * several readers: the plan runs it (kernels/tp_linear_plan.c), `tpbench project` predicts with
 * it (report/tp_project.c), so a prediction pipelines the chunks the op would really run, and the
 * matrices of `ops` and `run` ask it, so that they reject at config time what the plan would.
 * Pure arithmetic; no CUDA.
 */
#ifndef TP_CHUNK_RULE_H
#define TP_CHUNK_RULE_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_vocab.h"

enum {
  /* A chunk keeps at least this many rows, and an op takes at most this many chunks. */
  TP_AUTO_CHUNK_MIN_ROWS = 512,
  TP_AUTO_MAX_CHUNKS = 4,
  /* Below this many bytes per rank and transfer, auto takes the stock path: on the H200 pair
   * fused layers moving 0.5-1 MiB ran at 0.3-0.9x of stock (fixed costs: barrier, flags, copy
   * dispatch), ops moving 8 MiB and more at 1.0-1.5x (docs/dev/PERF.md). */
  TP_AUTO_FUSE_MIN_BYTES = 4 << 20,
  /* The most chunks a rank's shard may be asked in: the flag slots of one phase
   * (kernels/tp_linear_internal.h's LINEAR_PHASE_CHUNKS, which the plan asserts it equals); the
   * plan refuses more, so the matrices of `ops` and `run` reject them first. */
  TP_DIST_MAX_CHUNKS = 32,
  /* The sm schedule's copy kernel moves 16-byte vectors: every chunk it pushes must be a whole
   * number of them (the plan refuses sm otherwise). */
  TP_SM_CHUNK_ALIGN = 16
};

/* The chunk count auto picks and the model figures behind it. */
typedef struct tp_chunk_choice {
  int chunks;
  double push_us;       /* the model's time of the rank's pushes of its whole shard */
  double local_gemm_us; /* the model's time of the local shard's GEMM (gather side; else 0) */
} tp_chunk_choice;

/*
 * The chunks auto gives the side `gather` (1: all-gather, 0: reduce-scatter) of an op of
 * out_features × in_features (global, per weight; n_weights weights) in dtype at degree world
 * (>= 2), with rows rows per rank moving row_bytes each.
 *  - gather side: one chunk if the shard's pushes fit in 0.75 of the local shard's GEMM
 *    (hidden whole), else the most of 4, 2 that divide rows and keep 512 rows a chunk;
 *  - reduce-scatter side: two chunks when rows divide in two of at least 512 rows (measured on
 *    the H200 pair: docs/dev/PERF.md), else one.
 */
tp_chunk_choice tp_auto_chunks(int gather, int world, int64_t rows, size_t row_bytes,
                               int64_t out_features, int64_t in_features, int n_weights,
                               tp_dtype dtype);

/* Whether auto fuses a transfer of rows × row_bytes per rank (>= TP_AUTO_FUSE_MIN_BYTES), or
 * takes the stock path. */
int tp_auto_fuses(int64_t rows, size_t row_bytes);

/*
 * The bytes of a chunk the sm schedule cannot push (not a multiple of TP_SM_CHUNK_ALIGN), 0
 * when it can push them all: rows rows per rank of row_bytes each, in chunks > 0 as asked on
 * both sides, or (chunks 0) in auto's counts, tp_auto_chunks's for the side `gather` and, with
 * the backward, for the other side (whose pipeline the backward runs). The rule of the plan's
 * chunk counts (kernels/tp_linear_plan.c), asked by the matrices of `ops` and `run` so that
 * they reject what the plan would.
 */
size_t tp_sm_unaligned_chunk(int gather, int backward, int world, int64_t rows, size_t row_bytes,
                             int chunks, int64_t out_features, int64_t in_features, int n_weights,
                             tp_dtype dtype);

/*
 * 1 with the reason in reason[cap] when dist_gemm cannot run `schedule` (as asked; auto, ce, sm,
 * ring or multimem) at degree world with rows_per_rank rows per rank in `chunks` chunks (0:
 * auto's): TP 1 (nothing to gather or scatter), multimem (no multicast kernels in this build),
 * the ring beyond TP 2 (no forwarding), chunks outside 1..TP_DIST_MAX_CHUNKS or not dividing
 * the rows. 0 when none of these rules it out; the GPU may still (peer access, NCCL's answer).
 */
int tp_dist_rejection(tp_schedule schedule, int world, int64_t rows_per_rank, int chunks,
                      char *reason, size_t cap);

#endif /* TP_CHUNK_RULE_H */
