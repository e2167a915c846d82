/*
 * block_fp8.h — the checks of a block whose four TP projections (qkv, wo,
 * w1/w3, w2) run the fp8 recipe (issue 15; shape.proj_dtype an fp8 format:
 * block.h plans, prepares and runs them as tp_linear plans, as `ops` does),
 * with the rest of the block (RMSNorm, RoPE, the attention core, SwiGLU,
 * the residual adds) in bf16, as fp8 training recipes keep them.
 *
 * Checks (the numerics of `run`'s fp8 layers): tp_block_fp8_check judges a
 * projection's outputs of the last step against float64 products of its
 * dequantized operands, as ops judges an fp8 op, on the outputs a step
 * leaves as the projection wrote them (not qkv's y, which RoPE rotates in
 * place, nor w1/w3's when the backward has overwritten them with their
 * gradients; at TP > 1 wo's and w2's local partial before the bf16
 * reduce-scatter, and with comm_dtype fp8 no bf16 product for qkv and w13:
 * no rank holds their gathered bf16 input); tp_block_fp8_check_wholes holds
 * the operands a stock step gathered in fp8 against quantizing the whole;
 * tp_block_fp8_against runs a bf16 plan of the same block on the same
 * tensors and measures each output's distance from it.
 */
#ifndef TP_BENCH_BLOCK_FP8_H
#define TP_BENCH_BLOCK_FP8_H

#include <stddef.h>

#include "bench/gpu/block.h"
#include "kernels/tp_linear_fp8.h"

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
