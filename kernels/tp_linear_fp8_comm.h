/*
 * tp_linear_fp8_comm.h — the TP > 1 forward of the fp8 projection
 * (tp_linear_fp8.h), internal to tp_linear_fp8*.c: what travels and how;
 * and the internal entry points of the backward (tp_linear_fp8_bwd.c).
 *
 * All-gather side (ag_linear, ag_linear_multi; x [S, K] per rank):
 *   comm fp8, stock   quantize the local shard (tensorwise: the ranks first
 *                     agree on the amax, an NCCL all-reduce max, inside the
 *                     timed step), one NCCL group of two all-gathers (the
 *                     shard's fp8 bytes into the whole X, the shard's scale
 *                     buffer into a rank-major gathered buffer), the
 *                     scales re-placed into the whole's layout
 *                     (tp_quant_replace_gathered_enqueue), scaled GEMMs m = T;
 *   comm bf16, stock  NCCL all-gather of the bf16 shard, then the gathered
 *                     whole quantized (every rank quantizes the same whole:
 *                     nothing to agree on); the same bits as comm fp8;
 *   dist_gemm (ce, sm; comm fp8 only) the local shard quantized into a
 *                     private packet [fp8 rows | scales] (tensorwise: the
 *                     amax agreed over the schedule's own pushes first,
 *                     fp8_agree_max), the payload of the shared all-gather
 *                     (tp_linear_fused.c): pushed whole into every peer's
 *                     symmetric workspace (slot rank), one flag;
 *                     the local chunk's scaled GEMM at once, each peer's as
 *                     its flag lands, each reading its own chunk's scales —
 *                     the source rank's shard scales as that rank quantized
 *                     them, so nothing is re-placed. One chunk per shard
 *                     (chunks > 1 would need a chunk's piece of the shard's
 *                     scale layout, which VEC128 and VEC32 do not have).
 * Reduce-scatter side (linear_rs; x [T, K/W]): the fp8 GEMM of the local
 *   partial (bf16), reduced in bf16 — comm_dtype does not apply:
 *   stock             quantize x (tensorwise and fp8-row: amax agreed
 *                     first), GEMM into a [T, N] bf16 partial, NCCL
 *                     reduce-scatter (bf16 sum);
 *   dist_gemm         the amax agreed (over the schedule's own pushes), each
 *                     destination's row block quantized on its own (the
 *                     same bits as the whole's rows); on the shared
 *                     reduce-scatter its partial GEMM'd into staging and
 *                     pushed while the next is computed, the local block's
 *                     partial into the own receive slot, every rank's
 *                     partial summed in rank order (fp32, one rounding)
 *                     into y (LINEAR_SUM_SLOTS).
 * A fused pass moves nothing but by its schedule: where a scale spans ranks
 * its amax agreement pushes each rank's local amax into every peer's slot
 * and takes the max of the slots (the same bits as NCCL's max), after the
 * pass's fork (fp8_begin_encoding, fp8_end_encoding); stock and the
 * collective alone agree through NCCL.
 * The GEMM alone runs the scaled GEMMs on operands its `before` prepared;
 * the collective alone times exactly what travels: the fp8 gather (bytes +
 * scales, with the tensorwise agreement), the bf16 gather, or the bf16
 * reduce-scatter. The backward at TP > 1 is tp_linear_fp8_bwd.c's (its
 * header comment says what travels there); its plan and buffers hang off
 * this file's (fp8_comm_plan, fp8_comm_prepare, fp8_comm_release), and the
 * symmetric workspace is the larger of the two passes' needs.
 */
#ifndef TP_LINEAR_FP8_COMM_H
#define TP_LINEAR_FP8_COMM_H

#include "kernels/tp_linear_fp8.h"

/* The TP > 1 part of the plan (p->world > 1): rules, shapes, cuBLASLt's
 * answer for the GEMM shapes this backend runs. TP_EREJECT with p->reason. */
TP_MUST_CHECK tp_rc fp8_comm_plan(const tp_group *g, tp_fp8_linear *p);

/* Buffers of the TP > 1 paths (and the symmetric workspace, collective). */
TP_MUST_CHECK tp_rc fp8_comm_prepare(tp_group *g, tp_fp8_linear *p);

/* X quantized as the GEMM over all this rank's rows reads it: gather side
 * the whole [T, K] (through the communication of desc.comm), scatter side
 * the local [T, K/W] (with the agreement). */
TP_MUST_CHECK tp_rc fp8_comm_quantize_input(tp_group *g, tp_fp8_linear *p, const void *x,
                                            cudaStream_t stream);

/* The scaled GEMMs over all this rank's rows: y[i] (gather side) or the
 * partial (scatter side). */
TP_MUST_CHECK tp_rc fp8_comm_gemms(tp_fp8_linear *p, void *const *y, cudaStream_t stream);

/* What travels, alone (the collective-alone reference). */
TP_MUST_CHECK tp_rc fp8_comm_collective(tp_group *g, tp_fp8_linear *p, const void *x,
                                        void *const *y, cudaStream_t stream);

/* The timed forward of p's backend. */
TP_MUST_CHECK tp_rc fp8_comm_forward(tp_group *g, tp_fp8_linear *p, const void *x, void *const *y,
                                     cudaStream_t stream);

/* The stock forward (whatever p's backend: a reference's twin steps it on
 * the reference's buffers) and dist_gemm's fused one (p->fused). */
TP_MUST_CHECK tp_rc fp8_comm_stock_forward(tp_group *g, tp_fp8_linear *p, const void *x,
                                           void *const *y, cudaStream_t stream);
TP_MUST_CHECK tp_rc fp8_comm_fused_forward(tp_group *g, tp_fp8_linear *p, const void *x,
                                           void *const *y, cudaStream_t stream);

/* Frees the TP > 1 buffers. */
void fp8_comm_release(tp_fp8_linear *p);

/* The most amax agreements one fused pass makes (the backward's all-gather
 * side: X's tensor amax, Xᵀ's row amax, dY's per weight). */
enum { FP8_MAX_AGREEMENTS = 2 + TP_MAX_WEIGHTS };

/* The agreements a pass of p makes before it quantizes (0: the forward, 1:
 * the backward): where a scale spans ranks, their amax. */
int fp8_pass_agreements(const tp_fp8_linear *p, int backward);

/* The ranks' max of amax[0..n), each rank's local amax already there (on
 * stream): through an NCCL all-reduce, or, between fp8_begin_encoding and
 * fp8_end_encoding of a fused pass that agrees, over the pass's schedule
 * (its pushes and flags), so the pass moves nothing but by its schedule. */
TP_MUST_CHECK tp_rc fp8_agree_max(tp_group *g, tp_fp8_linear *p, float *amax, size_t n,
                                  cudaStream_t stream);

/* Around a fused pass's encoding (its amax agreements and quantizations):
 * a pass that agrees forks to the comm stream first (the ranks meet before
 * anyone pushes into a peer's workspace) and ends with the comm stream
 * waiting for the encoding; one that does not forks after it, as before. */
TP_MUST_CHECK tp_rc fp8_begin_encoding(tp_group *g, tp_fp8_linear *p, int backward);
TP_MUST_CHECK tp_rc fp8_end_encoding(tp_group *g, tp_fp8_linear *p, int backward);

/* tp_linear_fp8_bwd.c: the backward at TP > 1 (plan after the forward's
 * shapes and the GEMM handle; prepare after tp_fp8_linear_prepare). */
TP_MUST_CHECK tp_rc fp8_bwd_plan(tp_fp8_linear *p);
TP_MUST_CHECK tp_rc fp8_bwd_prepare(tp_fp8_linear *p);
TP_MUST_CHECK tp_rc fp8_bwd_quantize_grads(tp_group *g, tp_fp8_linear *p, const void *x,
                                           const void *const *dy, cudaStream_t stream);
TP_MUST_CHECK tp_rc fp8_bwd_gemms(tp_fp8_linear *p, void *dx, void *const *dw, cudaStream_t stream);
TP_MUST_CHECK tp_rc fp8_bwd_collective(tp_group *g, tp_fp8_linear *p, void *dx,
                                       cudaStream_t stream);
TP_MUST_CHECK tp_rc fp8_bwd_backward(tp_group *g, tp_fp8_linear *p, const void *x,
                                     const void *const *dy, void *dx, void *const *dw,
                                     cudaStream_t stream);
void fp8_bwd_release(tp_fp8_linear *p);

/* ---- tp_linear_fp8.c's helpers, shared with tp_linear_fp8_comm.c ---- */

/* Writes the rejection into p->reason; TP_EREJECT with it as the last error. */
TP_MUST_CHECK tp_rc fp8_reject(tp_fp8_linear *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A device buffer counted in p->quant_bytes. */
TP_MUST_CHECK tp_rc fp8_device_alloc(tp_fp8_linear *p, void **out, size_t bytes);
/* Floats of the agreed amax (0, 1, or m for rows). */
size_t fp8_amax_floats(const tp_fp8_linear *p);
/* The E4M3 quantization of [rows, p->k] bf16 src in role (q and scales for the caller). */
tp_quant_args fp8_quant_of(const tp_fp8_linear *p, tp_quant_role role, tp_fp8_type elem,
                           const void *src, int64_t rows, int64_t cols);
tp_quant_args fp8_quant_args(const tp_fp8_linear *p, tp_quant_role role, const void *src,
                             int64_t rows);
/* x [m, k] quantized into xq and x_scales with the agreement act_agreement asks for. */
TP_MUST_CHECK tp_rc fp8_quantize_local(tp_group *g, tp_fp8_linear *p, const void *x,
                                       cudaStream_t stream);

#endif /* TP_LINEAR_FP8_COMM_H */
