/*
 * fp8_rules.c — the plan-time rules of the fp8 dtypes (see fp8_rules.h).
 */
#include "bench/matrix/fp8_rules.h"

#include <stdio.h>

#include "kernels/tp_quant.h"

/* One quantized operand and how the op splits it. */
typedef struct operand_split {
  tp_shard_layout layout;
  int64_t rows, cols;
} operand_split;

/* The operands of the op, split as it splits them (fp8_rules.h). */
static int operand_splits(const tp_fp8_case *c, operand_split *out) {
  if (tp_op_gathers(c->op)) {
    out[0] = (operand_split){TP_SHARD_ACT_ROWS, c->tokens, c->k};
    out[1] = (operand_split){TP_SHARD_WEIGHT_ROWS, c->n, c->k};
  } else {
    out[0] = (operand_split){TP_SHARD_ACT_COLS, c->tokens, c->k};
    out[1] = (operand_split){TP_SHARD_WEIGHT_COLS, c->n, c->k};
  }
  return 2;
}

static int placement_rejection(const tp_fp8_case *c, tp_quant_format f, char *reason, size_t cap) {
  operand_split splits[2];
  const int n = operand_splits(c, splits);
  for (int i = 0; i < n; ++i) {
    char why[320];
    if (tp_quant_shard_check(f, splits[i].layout, splits[i].rows, splits[i].cols, c->tp, NULL, why,
                             sizeof why) == TP_OK)
      continue;
    snprintf(reason, cap, "fp8 placement rule %s at TP %d: %s",
             tp_shard_layout_name(splits[i].layout), c->tp, why);
    return 1;
  }
  return 0;
}

int tp_fp8_case_rejection(const tp_fp8_case *c, char *reason, size_t cap) {
  tp_quant_format f;
  if (!tp_dtype_is_fp8(c->dtype) || tp_quant_format_of(c->dtype, &f) != TP_OK) return 0;
  /* every pass: the backward (dgrad and wgrad, E5M2 gradients) runs where
   * the forward does; cuBLASLt's answer for its GEMMs is the worker's */
  if (placement_rejection(c, f, reason, cap)) return 1;
  if (c->tp > 1) {
    snprintf(reason, cap,
             "%s at TP %d: fp8 communication not implemented yet (the fp8 shard and its scales "
             "would travel; never run as bf16)",
             tp_dtype_name(c->dtype), c->tp);
    return 1;
  }
  return 0;
}
