/*
 * tp_recipe.c — the table of the identity recipe (bf16, fp32: the
 * activations moved and multiplied as they are, tp_linear_*.c) and which
 * recipe an element type runs (see tp_recipe.h; the fp8 recipe's table is
 * in tp_linear_fp8_recipe.c).
 */
#include "kernels/tp_recipe.h"

#include "kernels/tp_linear_internal.h"

const tp_recipe tp_recipe_identity = {
    .name = "identity",
    .plan = linear_identity_plan,
    .prepare = linear_identity_prepare,
    .prepare_weights = NULL, /* the tensors' own weights are the GEMMs' */
    .forward = linear_identity_forward,
    .backward = linear_identity_backward,
    .transfers = linear_identity_transfers,
    .outputs = linear_identity_outputs,
    .judge = NULL, /* held to stock's outputs alone */
    .twin = linear_identity_twin,
    .own_bytes = NULL,
    .release = NULL,
};

const tp_recipe *tp_recipe_of(tp_dtype dtype) {
  return tp_dtype_is_fp8(dtype) ? &tp_recipe_fp8 : &tp_recipe_identity;
}
