/*
 * block_fp8.h — a block's four TP projections (qkv, wo, w1/w3, w2) in an
 * fp8 format (issue 15), through the fp8 projection `tpbench ops` times
 * (kernels/tp_linear_fp8.h), with the rest of the block (RMSNorm, RoPE, the
 * attention core, SwiGLU, the residual adds) in bf16, as fp8 training
 * recipes keep them:
 *
 *   plan      one tp_fp8_linear per projection (the projection's op, global
 *             shape and pass, the layer's backend, schedule and chunks): a
 *             shard that would split a scale block, at TP > 1 the backward,
 *             a dist_gemm schedule or chunks the fp8 pushes refuse, and
 *             cuBLASLt's refusal of the format (mxfp8 below sm_100) are its
 *             rejections, in its words, prefixed by the projection ("qkv:
 *             ..."); the layer's own rules (sp off at TP > 1, symm=nccl for
 *             dist_gemm) come first. TP 1: stock and the GEMMs alone (nothing
 *             travels). TP > 1 (forward, sp on; tp_linear_fp8_comm.h): stock,
 *             dist_gemm (ce, sm pushes of fp8 chunks with their scales), the
 *             GEMMs alone and the collectives alone; qkv and w13 gather with
 *             the layer's comm_dtype (shape.comm), wo and w2 reduce-scatter
 *             the fp8 GEMMs' bf16 partials.
 *   prepare   each weight quantized once, untimed (and its transpose with
 *             the backward), from the case's tensors; at TP > 1 the
 *             communication's buffers and the fused pipelines' symmetric
 *             workspace (the IPC heap).
 *   step      each projection quantizes its bf16 input (and in the backward
 *             dY, dYᵀ, Xᵀ) in the timed step and runs its scaled GEMMs into
 *             bf16 outputs. The GEMMs alone (backend GEMM_ONLY) run the
 *             projections' scaled GEMMs only, the collectives alone
 *             (COMM_ONLY) what travels only, on operands a full step
 *             quantized before the window (tp_block_fp8_quantize_step), and
 *             everything else of the block as the stock layer does: the
 *             bound of an fp8 layer is the max of the two, as in ops.
 *
 * Checks (the numerics of `run`'s fp8 layers): tp_block_fp8_check judges a
 * projection's outputs of the last step against float64 products of its
 * dequantized operands, as ops judges an fp8 op, on the outputs a step
 * leaves as the projection wrote them (not qkv's y, which RoPE rotates in
 * place, nor w1/w3's when the backward has overwritten them with their
 * gradients; at TP > 1 wo's and w2's local partial before the bf16
 * reduce-scatter, and with comm_dtype fp8 no bf16 product for qkv and w13:
 * no rank holds their gathered bf16 input); tp_block_fp8_against runs a
 * bf16 plan of the same block on the same tensors and measures each
 * output's distance from it.
 */
#ifndef TP_BENCH_BLOCK_FP8_H
#define TP_BENCH_BLOCK_FP8_H

#include <stddef.h>

#include "bench/gpu/block.h"
#include "kernels/tp_linear_fp8.h"

/* The fp8 projections of a plan (tp_block_plan.fp8). */
typedef struct tp_block_fp8 {
  tp_fp8_linear lin[TP_N_PROJ];
  int quantize; /* GEMM_ONLY: 1 while tp_block_fp8_quantize_step runs the full projections */
} tp_block_fp8;

/* tp_block_plan_make's fp8 part, on a plan whose shape and layout it has set:
 * allocates plan->fp8 and plans each projection the block has (see above)
 * with the layer's backend, requested schedule and chunks (dist_gemm's).
 * TP_EREJECT with the reason; TP_EINTERNAL when the shape's dtype is not
 * bf16; TP_EOOM. */
TP_MUST_CHECK tp_rc tp_block_fp8_plan(const tp_group *group, tp_backend backend,
                                      tp_schedule requested, int chunks, tp_block_plan *plan);

/* Quantizes each projection's weights (and, with the backward, their
 * transposes) from t, once, waited for; at TP > 1 also the communication's
 * buffers and a fused pipeline's symmetric workspace (collective). Nothing
 * for a plan without fp8. */
TP_MUST_CHECK tp_rc tp_block_prepare_fp8(tp_group *group, const tp_block_plan *plan,
                                         const tp_block_tensors *t);

/* One projection's forward or backward as the plan runs it: the bf16 op
 * (tp_linear_forward / _backward), or the fp8 one (quantize and GEMMs; the
 * GEMMs alone for GEMM_ONLY). What block_run.c calls for every projection. */
TP_MUST_CHECK tp_rc tp_block_proj_forward(tp_group *group, const tp_block_plan *plan,
                                          tp_block_proj proj, const tp_linear_tensors *t);
TP_MUST_CHECK tp_rc tp_block_proj_backward(tp_group *group, const tp_block_plan *plan,
                                           tp_block_proj proj, const tp_linear_tensors *t);

/* A full step of an fp8 reference plan (GEMM_ONLY, or COMM_ONLY at TP > 1):
 * its projections quantize their operands (through the gathers of the
 * layer's comm_dtype) and run their GEMMs as the stock layer's do, for the
 * GEMMs alone or the collectives alone to read (a window's `before`,
 * untimed). TP_EINTERNAL for a plan without fp8. */
TP_MUST_CHECK tp_rc tp_block_fp8_quantize_step(tp_group *group, const tp_block_plan *plan,
                                               tp_block_tensors *t);

/* Bytes the fp8 projections hold (quantized copies, scales, cuBLASLt's
 * workspaces); 0 without fp8. */
size_t tp_block_fp8_bytes(const tp_block_plan *plan);

/* Elements sampled per output by tp_block_fp8_check: rows x columns (ops' figures). */
enum { TP_BLOCK_FP8_CHECK_ROWS = 16, TP_BLOCK_FP8_CHECK_COLS = 128 };

/* The judgement of one projection's outputs after a step. */
typedef struct tp_block_fp8_verdict {
  int n_judged;     /* outputs judged (0: none the step left intact) */
  char judged[24];  /* their names: "y, dx, dw" */
  tp_fp8_check sum; /* elements, nonfinite and outside summed; the errors' maxima */
} tp_block_fp8_verdict;

/* Judges projection proj's outputs of the last step on t (forward y where
 * the step left it, dx and each dw with the backward) against float64
 * products of the operands that step quantized (tp_fp8_linear_check*),
 * with the accumulation model of the device. Waits for the device. */
TP_MUST_CHECK tp_rc tp_block_fp8_check(const tp_block_plan *plan, const tp_block_tensors *t,
                                       tp_block_proj proj, const tp_fp8_accum_model *model,
                                       tp_block_fp8_verdict *out);

/* One output of a block against the same output of a reference plan. */
typedef struct tp_block_diff {
  const char *name;
  double elements;
  double diff2, ref2;   /* sum (out - ref)^2, sum ref^2 */
  double max_abs;       /* max |out - ref| */
  double nonfinite;     /* in out */
  double ref_nonfinite; /* in the reference's */
} tp_block_diff;

/* Runs one step of ref (the same block and shape, another recipe: bf16
 * projections) on t after plan's step and compares every output of plan
 * (tp_block_outputs) with ref's, elementwise over the whole tensor; then
 * puts plan's outputs back, so t holds what plan's step left. out:
 * TP_BLOCK_MAX_OUTPUTS entries, *n of them filled. Waits for the device;
 * the block's other tensors (activations) hold ref's values afterwards. */
TP_MUST_CHECK tp_rc tp_block_fp8_against(tp_group *group, const tp_block_plan *plan,
                                         const tp_block_plan *ref, tp_block_tensors *t,
                                         tp_block_diff *out, int *n);

/* At TP > 1, after a stock step: projection proj's gathered fp8 operands
 * against quantizing the whole (tp_fp8_linear_check_wholes: collective,
 * every rank in the same order), up to max into out. */
TP_MUST_CHECK tp_rc tp_block_fp8_check_wholes(tp_group *g, const tp_block_plan *p,
                                              const tp_block_tensors *t, tp_block_proj proj,
                                              tp_fp8_whole_check *out, int max, int *n);

#endif /* TP_BENCH_BLOCK_FP8_H */
