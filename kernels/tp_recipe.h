/*
 * tp_recipe.h — the numeric recipes of the one TP projection (issue 29): a
 * format is a small table of hooks the projection (kernels/tp_linear.h)
 * consults, never a second projection stack. tp_linear.c keeps what every
 * recipe shares once — the checks before a pass, the NVTX ranges, the test
 * knobs (the fused-op delay), the backend a pass runs — and calls the
 * recipe's hooks for what differs:
 *
 *   plan             shapes, scale layouts and the validity rules
 *                    (kernels/tp_recipe_rules.h: the one place the matrix
 *                    and the plan both ask); the plan's schedule, chunks,
 *                    reason, engine, workspace, bytes and NVTX names
 *   prepare          the group's buffers a plan asks for (workspace,
 *                    scratch, the cuBLASLt workspace's claim)
 *   prepare_weights  a recipe's own copy of the weights (fp8: quantized
 *                    once, untimed) and its communication's buffers
 *   forward,         one pass on a tensor set, for the plan's backend:
 *   backward         stock, dist_gemm (fused) or a reference's half
 *   transfers        what a trace of the pass must show
 *   outputs          the tensors configurations are compared on, and how
 *   judge            the recipe's own numerics checks (fp8: float64
 *                    products of the dequantized operands; the gathered
 *                    operands against quantizing the whole)
 *   twin             the stock plan whose step fills what a reference reads
 *   own_bytes        the recipe's own buffers, for the memory records
 *   release          what plan made
 *
 * The identity recipe (bf16, fp32: tp_recipe.c over tp_linear_*.c) moves
 * and multiplies the activations as they are; the fp8 recipe (fp8, fp8-row,
 * fp8-block, mxfp8: tp_linear_fp8_recipe.c over tp_linear_fp8*.c) encodes
 * them (amax agreed where a scale spans ranks, then quantized), moves the
 * fp8 payload with its scales, places the scales (and the wgrad's column
 * pieces) in the whole's layout and runs cuBLASLt's scaled GEMMs; the
 * formats are rows of it (tp_quant.h's formats).
 */
#ifndef TP_RECIPE_H
#define TP_RECIPE_H

#include "kernels/tp_linear.h"

typedef struct tp_recipe {
  const char *name; /* "identity", "fp8" */
  tp_rc (*plan)(const tp_group *g, tp_linear_plan *p, tp_schedule requested, int chunks);
  tp_rc (*prepare)(tp_group *g, const tp_linear_plan *p);
  tp_rc (*prepare_weights)(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t);
  tp_rc (*forward)(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t);
  tp_rc (*backward)(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t);
  int (*transfers)(const tp_linear_plan *p, int fwd, int bwd);
  int (*outputs)(const tp_linear_plan *p, const tp_linear_tensors *t, tp_linear_output *out,
                 int max);
  tp_rc (*judge)(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t, int forward,
                 tp_judgement *out, int max, int *n);
  tp_rc (*twin)(const tp_group *g, const tp_linear_plan *p, tp_backend backend,
                tp_schedule requested, tp_linear_plan *out);
  size_t (*own_bytes)(const tp_linear_plan *p);
  void (*release)(tp_linear_plan *p);
} tp_recipe;

/* bf16 and fp32: the activations as they are (tp_recipe.c). */
extern const tp_recipe tp_recipe_identity;
/* fp8, fp8-row, fp8-block, mxfp8 (tp_linear_fp8_recipe.c). */
extern const tp_recipe tp_recipe_fp8;

/* The recipe of an element type: fp8 for tp_dtype_is_fp8, else identity. */
const tp_recipe *tp_recipe_of(tp_dtype dtype);

#endif /* TP_RECIPE_H */
