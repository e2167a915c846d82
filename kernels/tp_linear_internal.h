/*
 * tp_linear_internal.h — what the files of the TP projections share, not
 * part of the API (tp_linear.h is):
 *   tp_linear_plan.c      descriptors, shapes, schedule and chunk choice,
 *                         workspace sizes, NVTX names, the identity recipe's
 *                         prepare, transfers and outputs; any recipe's plan,
 *                         twin and release
 *   tp_linear.c           the entry points of every recipe: checks, NVTX
 *                         ranges, the test delay, dispatch to the recipe
 *   tp_recipe.c           the recipes' tables (the fp8 recipe's hooks are in
 *                         tp_linear_fp8_recipe.c)
 *   tp_linear_gemms.c     the GEMMs and bias kernels of each op on a block
 *                         of rows, shared by the stock and fused paths
 *   tp_linear_stock.c     the stock path (plain, or on NCCL symmetric
 *                         windows), and the GEMM-alone and
 *                         collective-alone references
 *   tp_linear_fused.c     the fused schedules' transfers: flags, chunk
 *                         pushes, the gather and reduce-scatter pipelines
 *   tp_linear_fused_fwd.c / tp_linear_fused_bwd.c  dist_gemm's passes
 *
 * Symmetric workspace layout of the fused ops (each rank, offset 0):
 *   AG: gathered input G[T, K]; rank r's shard lands at rows r·S.
 *   RS: receive slots R[W][S, N] (slot r holds rank r's partial of this
 *       rank's rows), then staging P[W-1][S, N] for the partials this rank
 *       pushes out.
 *   AG backward: receive slots R[W][S, K] and staging P[W-1][S, K] of the
 *       dx reduce-scatter, then (unless the input was saved) G[T, K].
 *   RS backward: gathered gradient G[T, N].
 * Signal slots: a transfer has a phase (0 or 1; the AG backward runs two at
 * once) and a chunk; the flag of chunk j of phase f from rank r is
 * TP_SIG_FLAGS + r·64 + f·32 + j; its copy-kernel block counter
 * TP_SIG_COUNTERS + d·64 + f·32 + j (d: the peer pushed to).
 *
 * Bits: a GEMM over a block of rows gives the bits the whole GEMM gives for
 * those rows (tp_gemm.h), so every result that needs no cross-rank sum (the
 * gather-side outputs, dW from a gathered operand, the RS-side dx) is
 * bit-identical between stock and dist_gemm; only the reduce-scatter
 * outputs differ in the order ranks are summed.
 */
#ifndef TP_LINEAR_INTERNAL_H
#define TP_LINEAR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/tp_linear.h"

/* Chunks of one phase: a phase owns half of a rank's TP_MAX_CHUNKS flag slots. */
enum { LINEAR_PHASE_CHUNKS = TP_MAX_CHUNKS / 2 };

/* dist_gemm plans run fused, except where auto chose the stock path (its
 * schedule then says nccl, with the reason). */
static inline int linear_is_fused(const tp_linear_plan *p) {
  return p->backend == TP_BACKEND_DIST && p->schedule != TP_SCHED_NCCL;
}

/* The stock path (or the collective alone) on NCCL symmetric windows
 * (kernels/tp_window.h): every buffer its collectives touch is in a window. */
static inline int linear_is_window(const tp_linear_plan *p) {
  return p->backend != TP_BACKEND_DIST && p->schedule == TP_SCHED_NCCL_WINDOW;
}

/* The symmetric heap a fused plan runs over: the transport its descriptor
 * names (tp_linear_prepare made it; NULL before). */
static inline tp_symm *linear_heap(const tp_group *g, const tp_linear_plan *p) {
  return tp_group_symm_of(g, p->desc.symm);
}

/* The GEMM-alone reference runs no collective, the collective-alone one no GEMM. */
static inline int linear_runs_gemm(const tp_linear_plan *p) {
  return p->backend != TP_BACKEND_COMM_ONLY;
}
static inline int linear_runs_comm(const tp_linear_plan *p) {
  return p->backend != TP_BACKEND_GEMM_ONLY;
}

/* Rows of the bias's output and of the row-parallel side's dy: all T, or
 * this rank's S on the scatter side with sequence parallelism. */
static inline size_t linear_bias_rows(const tp_linear_plan *p) {
  return (size_t)(tp_op_gathers(p->desc.op) || !p->desc.sp ? p->desc.tokens : p->shard_rows);
}

/* base + bytes, for device pointers. */
static inline char *ptr_at(void *base, size_t bytes) { return (char *)base + bytes; }
static inline const char *cptr_at(const void *base, size_t bytes) {
  return (const char *)base + bytes;
}

/* fp32 floats of bias-gradient partial sums a backward needs on this rank
 * (tp_linear_plan.c). */
size_t linear_bias_partial_floats(const tp_linear_plan *p);

/* ---- tp_linear_plan.c: what every recipe's plan uses -------------------------------------- */

/* Names the plan's NVTX ranges after its op, backend, schedule and chunks
 * ("ag_linear.fwd dist_gemm ce x4"), so a timeline reads like the code and
 * the trace's evidence finds each op's ranges. */
void linear_name_ranges(tp_linear_plan *p);

/* The engine of a plan's backend and schedule (tp_linear_plan.engine). */
const char *linear_engine(const tp_linear_plan *p);

/* The outputs' names: "y", "y1", ...; "dw", "dw1", ... */
const char *linear_y_name(int weight);
const char *linear_dw_name(int weight);

/* ---- the identity recipe's hooks (tp_recipe.h; tp_recipe.c holds the table) --------------- */

TP_MUST_CHECK tp_rc linear_identity_plan(const tp_group *g, tp_linear_plan *p,
                                         tp_schedule requested, int chunks);
TP_MUST_CHECK tp_rc linear_identity_prepare(tp_group *g, const tp_linear_plan *p);
TP_MUST_CHECK tp_rc linear_identity_forward(tp_group *g, const tp_linear_plan *p,
                                            const tp_linear_tensors *t);
TP_MUST_CHECK tp_rc linear_identity_backward(tp_group *g, const tp_linear_plan *p,
                                             const tp_linear_tensors *t);
int linear_identity_transfers(const tp_linear_plan *p, int fwd, int bwd);
int linear_identity_outputs(const tp_linear_plan *p, const tp_linear_tensors *t,
                            tp_linear_output *out, int max);
TP_MUST_CHECK tp_rc linear_identity_twin(const tp_group *g, const tp_linear_plan *p,
                                         tp_backend backend, tp_schedule requested,
                                         tp_linear_plan *out);

/* ---- tp_linear_gemms.c: the GEMMs of each op on a block of rows, main stream ---------- */

/* The forward GEMM of a block of rows, y[rows, N/W or N] = x_rows · wᵀ, with
 * b (the weight) and c (the output) left to the caller. */
tp_gemm_desc linear_fwd_desc(const tp_linear_plan *p, int64_t rows, const void *x_rows);

/* Forward: y_i[out_row0 + rows] = x[rows] · w_iᵀ. x_rows points at the block's first row. */
TP_MUST_CHECK tp_rc linear_fwd_rows(tp_group *g, const tp_linear_plan *p,
                                    const tp_linear_tensors *t, int64_t rows, const void *x_rows,
                                    void *const *out, size_t out_row0);

/* A partial product of rows [row0, +rows) of the full [T, width] result into
 * out, plus acc_in when not NULL (added in the GEMM's epilogue); ctx: the
 * pipeline's (linear_scatter.ctx: a recipe's state). */
typedef tp_rc (*linear_partial_fn)(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                                   void *ctx, int64_t row0, int64_t rows, const void *acc_in,
                                   void *out);

/* Gather-side backward partial: Σ_i dy_i[rows] · w_i → out[rows, K]. */
TP_MUST_CHECK tp_rc linear_dgrad_partial_rows(tp_group *g, const tp_linear_plan *p,
                                              const tp_linear_tensors *t, int64_t row0,
                                              int64_t rows, const void *acc_in, void *out);

/* Weight gradient from a whole gathered operand: dw_i = dy_iᵀ · gathered
 * (gather side), dw = gatheredᵀ · x (RS side). One GEMM over all T rows. */
TP_MUST_CHECK tp_rc linear_wgrad(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                                 const void *gathered);

/* RS-side backward: dx[dx_row0 + rows] = gathered_dy[rows] · w. */
TP_MUST_CHECK tp_rc linear_rs_dgrad_rows(tp_group *g, const tp_linear_plan *p,
                                         const tp_linear_tensors *t, int64_t rows,
                                         const void *dy_rows, size_t dx_row0);

/* ---- tp_linear_gemms.c: biases -------------------------------------------------------- */

/* Forward: adds each weight's bias to its finished output (after the
 * reduce-scatter on the row-parallel side), the same kernel in both
 * backends so their bits stay comparable. */
TP_MUST_CHECK tp_rc linear_add_biases(tp_group *g, const tp_linear_plan *p,
                                      const tp_linear_tensors *t);

/* fp32 column sums of dy [rows, cols] into out (cols floats), via the
 * group's partial-sum scratch: fixed row blocks, summed in order. */
TP_MUST_CHECK tp_rc linear_column_sums_f32(tp_group *g, const tp_linear_plan *p, const void *dy,
                                           size_t rows, float *out);

/* The summed row of the bias scratch, after the partials of `rows` rows. */
float *linear_bias_vector(tp_group *g, const tp_linear_plan *p, size_t rows);

/* Column-parallel: db_i = column sums of dy_i over all T rows: local, no communication. */
TP_MUST_CHECK tp_rc linear_bias_grads_local(tp_group *g, const tp_linear_plan *p,
                                            const tp_linear_tensors *t);

/* ---- the two paths' passes ------------------------------------------------------------ */

TP_MUST_CHECK tp_rc linear_stock_forward(tp_group *g, const tp_linear_plan *p,
                                         const tp_linear_tensors *t);
TP_MUST_CHECK tp_rc linear_stock_backward(tp_group *g, const tp_linear_plan *p,
                                          const tp_linear_tensors *t);
TP_MUST_CHECK tp_rc linear_fused_forward(tp_group *g, const tp_linear_plan *p,
                                         const tp_linear_tensors *t);
TP_MUST_CHECK tp_rc linear_fused_backward(tp_group *g, const tp_linear_plan *p,
                                          const tp_linear_tensors *t);

/* ---- tp_linear_fused.c: transfers between ranks --------------------------------------- */

/* The flag slot of (src, phase, chunk) in a pad. */
int linear_flag_slot(int src, int phase, int chunk);

/* Raises slot `slot` in peer dst's pad once everything before it on `stream` is done. */
TP_MUST_CHECK tp_rc linear_raise_flag(tp_group *g, const tp_linear_plan *p, cudaStream_t stream,
                                      int dst, int slot);

/* Pushes bytes from a local buffer into peer dst's memory on the comm
 * stream (the copy engine, or the copy kernel for p's sm schedule), then
 * raises the flag of (this rank, phase, chunk) in dst's pad. */
TP_MUST_CHECK tp_rc linear_push_chunk(tp_group *g, const tp_linear_plan *p, int dst, void *dst_ptr,
                                      const void *src_ptr, size_t bytes, int phase, int chunk);

/* The main stream waits for (src, phase, chunk) to land here, then lowers
 * the flag for its next use. */
TP_MUST_CHECK tp_rc linear_wait_chunk(tp_group *g, const tp_linear_plan *p, int src, int phase,
                                      int chunk);

/* The comm stream starts after everything already on the main stream and
 * meets every rank; the join makes the main stream wait for the comm stream. */
TP_MUST_CHECK tp_rc linear_fork_to_comm(tp_group *g, const tp_linear_plan *p);
TP_MUST_CHECK tp_rc linear_join_from_comm(tp_group *g);

/* One rank's payload on its way to every peer: what it moves, where it
 * lands in each peer's workspace, and the flags it raises. The payload is
 * the recipe's encoding of the rank's S rows: the rows as they are
 * (row_bytes each: the identity recipe; rank r's land at rows r·S of a
 * gathered [T, row_bytes] buffer, in `chunks` chunks), or an encoding that
 * is not rows (payload_bytes: the fp8 recipe's [fp8 rows | scales], moved
 * whole, one chunk; rank r's at r·payload_bytes). */
typedef struct linear_gather {
  const void *rows_local; /* this rank's payload */
  size_t row_bytes;       /* rows as they are; 0 with payload_bytes */
  size_t payload_bytes;   /* an encoding moved whole; 0: rows */
  size_t offset;          /* of the gathered buffer in every workspace */
  int phase;
  int chunks;
  void *ctx; /* the consumer's (a recipe's state) */
} linear_gather;

/* Pushes this rank's rows into every peer's buffer at offset + rank·S rows,
 * chunk by chunk; all chunks for every peer are queued at once (chunk-major,
 * so every peer gets chunk 0 first). */
TP_MUST_CHECK tp_rc linear_push_gather(tp_group *g, const tp_linear_plan *p,
                                       const linear_gather *gather);

/* Waits for every peer chunk of a gather, chunk-major (the order pushed). */
TP_MUST_CHECK tp_rc linear_wait_gather(tp_group *g, const tp_linear_plan *p, int phase, int chunks);

/* Bytes of one rank's whole payload, and of one chunk of it. */
size_t linear_gather_shard_bytes(const tp_linear_plan *p, const linear_gather *gather);
size_t linear_gather_chunk_bytes(const tp_linear_plan *p, const linear_gather *gather);

/* Copies the local rows into the own slot of a gathered buffer, so a GEMM
 * over the whole gathered operand can run as one call. */
TP_MUST_CHECK tp_rc linear_place_own_rows(tp_group *g, const tp_linear_plan *p, void *gathered,
                                          const void *rows_local, size_t row_bytes);

/* A GEMM over a block of gathered rows: in_rows holds the payload of rows
 * [row0, +rows) of the gathered operand; ctx: the gather's. */
typedef tp_rc (*linear_rows_fn)(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                                void *ctx, int64_t rows, const void *in_rows, size_t row0);

/* An all-gather fused with the GEMM that consumes it, on the main stream:
 * pushes this rank's rows, runs `consume` on the local shard at once (it
 * needs no transfer: its GEMM overlaps the first pushes), then on each peer
 * chunk as its flag arrives. */
TP_MUST_CHECK tp_rc linear_fused_all_gather(tp_group *g, const tp_linear_plan *p,
                                            const tp_linear_tensors *t, const linear_gather *gather,
                                            linear_rows_fn consume);

/* The consuming half of linear_fused_all_gather, for a pass that pushes
 * more between its payload's pushes and their consumption (the fp8
 * backward's transposed pieces). */
TP_MUST_CHECK tp_rc linear_consume_gather(tp_group *g, const tp_linear_plan *p,
                                          const tp_linear_tensors *t, const linear_gather *gather,
                                          linear_rows_fn consume);

/* How the local rows' sum is made once the peers' partials landed. */
typedef enum {
  /* the local rows' GEMM adds them in its epilogue (rs_sum=nccl: NCCL's chain instead) */
  LINEAR_SUM_EPILOGUE = 0,
  /* the local partial into the own receive slot, then every rank's summed in
   * rank order (fp32, one rounding): a GEMM that adds nothing in its
   * epilogue (the fp8 recipe's scaled GEMMs write bf16 partials) */
  LINEAR_SUM_SLOTS
} linear_sum;

/* A reduce-scatter fused with the GEMM that produces its partials. */
typedef struct linear_scatter {
  linear_partial_fn partial; /* writes the partial of a block of rows */
  int64_t width;             /* columns of the full [T, width] result */
  void *out;                 /* this rank's [S, width] rows of the sum */
  int phase;
  int chunks;
  linear_sum sum;
  void *ctx; /* the partial's (a recipe's state) */
} linear_scatter;

/* Computes and pushes the partial of every peer's rows chunk by chunk, and
 * one chunk behind, the local rows: a peer's chunk j has had a whole chunk
 * GEMM's time to arrive before it is needed. */
TP_MUST_CHECK tp_rc linear_fused_reduce_scatter(tp_group *g, const tp_linear_plan *p,
                                                const tp_linear_tensors *t,
                                                const linear_scatter *scatter);

#endif /* TP_LINEAR_INTERNAL_H */
