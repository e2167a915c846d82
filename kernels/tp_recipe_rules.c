/*
 * tp_recipe_rules.c — the validity rules of the numeric recipes (see
 * tp_recipe_rules.h): the placement of every quantized operand, then the
 * communication, dist_gemm, window and transport rules, for one op of `ops`
 * or the projections of a layer of `run`; the matrices and the plans both
 * ask these.
 */
#include "kernels/tp_recipe_rules.h"

#include <stdio.h>

/* The fp8 recipe's format of dtype; 0 for the identity recipe (bf16, fp32). */
static int fp8_format(tp_dtype dtype, tp_quant_format *f) {
  return tp_dtype_is_fp8(dtype) && tp_quant_format_of(dtype, f) == TP_OK;
}

/* Where the agreement of split i goes (X, W: none asked, dY, the transposed operand). */
static tp_amax_agreement *agreement_of(tp_recipe_agreements *a, int i) {
  if (!a) return NULL;
  return i == 0 ? &a->x : i == 2 ? &a->dy : i == 3 ? &a->t : NULL;
}

static int placement_rejection(const tp_recipe_case *c, tp_quant_format f,
                               tp_recipe_agreements *agree, char *reason, size_t cap) {
  tp_quant_split splits[TP_QUANT_MAX_SPLITS];
  const int n = tp_quant_op_splits(tp_op_gathers(c->op), c->tokens, c->n, c->k,
                                   tp_pass_has_backward(c->pass), splits);
  for (int i = 0; i < n; ++i) {
    char why[320];
    if (tp_quant_split_check(f, splits[i].layout, splits[i].rows, splits[i].cols, c->tp,
                             splits[i].dim, agreement_of(agree, i), why, sizeof why) == TP_OK)
      continue;
    if (i < 2) /* the forward's operands, named by their layout */
      snprintf(reason, cap, "fp8 placement rule %s at TP %d: %s",
               tp_shard_layout_name(splits[i].layout), c->tp, why);
    else
      snprintf(reason, cap, "fp8 placement rule for the backward's %s at TP %d: %s", splits[i].what,
               c->tp, why);
    return 1;
  }
  if (agree && n == TP_QUANT_MAX_SPLITS) agree->t_rows = splits[3].rows;
  return 0;
}

static int comm_rejection(const tp_recipe_case *c, char *reason, size_t cap) {
  if (c->tp <= 1) {
    if (c->comm == TP_COMM_NONE) return 0;
    snprintf(reason, cap, "%s at TP 1: comm_dtype %s does not apply (nothing travels)",
             tp_dtype_name(c->dtype), tp_comm_dtype_name(c->comm));
    return 1;
  }
  if (tp_op_gathers(c->op) && c->comm == TP_COMM_NONE) {
    snprintf(reason, cap, "%s %s at TP %d: the all-gather side needs comm_dtype bf16 or fp8",
             tp_dtype_name(c->dtype), tp_op_name(c->op), c->tp);
    return 1;
  }
  if (!tp_op_gathers(c->op) && c->comm != TP_COMM_NONE) {
    snprintf(reason, cap,
             "%s %s at TP %d: comm_dtype does not apply: the reduce-scatter side reduces the fp8 "
             "GEMM's bf16 partials (nothing quantized travels)",
             tp_dtype_name(c->dtype), tp_op_name(c->op), c->tp);
    return 1;
  }
  return 0;
}

int tp_recipe_rejection(const tp_recipe_case *c, tp_recipe_agreements *agree, char *reason,
                        size_t cap) {
  tp_quant_format f;
  if (agree) *agree = (tp_recipe_agreements){TP_AMAX_LOCAL, TP_AMAX_LOCAL, TP_AMAX_LOCAL, 0};
  if (!fp8_format(c->dtype, &f)) return 0;
  /* every pass at TP 1: the backward (dgrad and wgrad, E5M2 gradients) runs
   * where the forward does; cuBLASLt's answer for its GEMMs is the plan's on the GPU */
  if (placement_rejection(c, f, agree, reason, cap)) return 1;
  return comm_rejection(c, reason, cap);
}

int tp_recipe_dist_rejection(const tp_recipe_case *c, tp_schedule schedule, int chunks,
                             char *reason, size_t cap) {
  if (!tp_dtype_is_fp8(c->dtype) || c->tp <= 1) return 0;
  if (schedule != TP_SCHED_AUTO && schedule != TP_SCHED_CE && schedule != TP_SCHED_SM) {
    snprintf(reason, cap, "%s dist_gemm schedule %s: only ce and sm push fp8 chunks",
             tp_dtype_name(c->dtype), tp_schedule_name(schedule));
    return 1;
  }
  if (c->comm == TP_COMM_BF16) {
    snprintf(reason, cap,
             "%s dist_gemm with comm_dtype bf16: the fused pushes carry fp8 chunks and their "
             "scales (comm_dtype fp8); gathering bf16 and quantizing the whole is stock's",
             tp_dtype_name(c->dtype));
    return 1;
  }
  if (chunks > 1) {
    snprintf(reason, cap,
             "%s dist_gemm chunks=%d: an fp8 shard travels whole with its scales (a block of a "
             "shard's rows has no contiguous piece of a VEC128 or VEC32 scale layout); chunks 1 "
             "only",
             tp_dtype_name(c->dtype), chunks);
    return 1;
  }
  return 0;
}

int tp_recipe_window_rejection(tp_dtype dtype, tp_recipe_scope scope, char *reason, size_t cap) {
  if (!tp_dtype_is_fp8(dtype)) return 0;
  snprintf(reason, cap, "%s",
           scope == TP_RECIPE_FOR_OP
               ? "nccl-window: the fp8 formats' stock path (kernels/tp_linear_fp8.h) has no "
                 "variant on NCCL symmetric windows"
               : "nccl-window: the fp8 formats have no stock variant on NCCL symmetric windows");
  return 1;
}

int tp_recipe_save_gathered_rejection(tp_dtype dtype, char *reason, size_t cap) {
  if (!tp_dtype_is_fp8(dtype)) return 0;
  snprintf(reason, cap,
           "%s save_gathered=on: the fp8 recipe keeps no gathered copy for the backward (it "
           "gathers the quantized shard again), so it would run as save_gathered=off",
           tp_dtype_name(dtype));
  return 1;
}

int tp_recipe_symm_rejection(tp_dtype dtype, tp_symm_transport symm, tp_recipe_scope scope,
                             char *reason, size_t cap) {
  if (!tp_dtype_is_fp8(dtype) || symm != TP_SYMM_NCCL) return 0;
  snprintf(reason, cap, "%s",
           scope == TP_RECIPE_FOR_OP
               ? "symm=nccl: the fp8 projection's fused pushes (kernels/tp_linear_fp8_comm.c) run "
                 "over the CUDA-IPC heap only"
               : "symm=nccl: the fp8 projections' fused pushes (kernels/tp_linear_fp8_comm.c) run "
                 "over the CUDA-IPC heap only");
  return 1;
}

/* ---- a layer's projections ----------------------------------------------------------------- */

enum { LAYER_MAX_PARTS = 6 };

/* One quantized projection (or part of qkv's weight) of a layer, named. */
typedef struct layer_part {
  const char *name;
  tp_recipe_case c;
} layer_part;

static layer_part part_of(const tp_recipe_layer *l, const char *name, tp_op op, int64_t n,
                          int64_t k) {
  const layer_part p = {name, {l->dtype, op, l->tokens, n, k, l->tp, l->pass, TP_COMM_NONE}};
  return p;
}

/* The layer's quantized operands as ops cases, in layer order. qkv's local
 * weight is its query heads' rows, then its key heads', then its value
 * heads' (bench/gpu/block.h): each part splits along N on its own. */
static int layer_parts(const tp_recipe_layer *l, layer_part *out) {
  int n = 0;
  const int64_t q = l->n_heads * l->head_dim, kv = l->n_kv_heads * l->head_dim;
  if (l->layer != TP_LAYER_FFN) {
    out[n++] = part_of(l, "qkv (query heads)", TP_OP_AG_LINEAR, q, l->dim);
    out[n++] = part_of(l, "qkv (key heads)", TP_OP_AG_LINEAR, kv, l->dim);
    out[n++] = part_of(l, "qkv (value heads)", TP_OP_AG_LINEAR, kv, l->dim);
    out[n++] = part_of(l, "wo", TP_OP_LINEAR_RS, l->dim, q);
  }
  if (l->layer != TP_LAYER_ATTENTION) {
    out[n++] = part_of(l, "w13", TP_OP_AG_LINEAR_MULTI, l->ffn_hidden, l->dim);
    out[n++] = part_of(l, "w2", TP_OP_LINEAR_RS, l->dim, l->ffn_hidden);
  }
  return n;
}

/* The layer's communication: none at TP 1; at TP > 1 the forward with
 * sequence parallelism, the gathering projections moving l->comm. */
static int layer_comm_rejection(const tp_recipe_layer *l, char *reason, size_t cap) {
  const char *dt = tp_dtype_name(l->dtype);
  if (l->tp <= 1) {
    if (l->comm == TP_COMM_NONE) return 0;
    snprintf(reason, cap, "%s layers at TP 1: comm_dtype %s does not apply (nothing travels)", dt,
             tp_comm_dtype_name(l->comm));
    return 1;
  }
  if (!l->sp) {
    snprintf(reason, cap,
             "%s layers at TP %d with sp off: the fp8 projections' communication gathers and "
             "reduce-scatters sequence-sharded rows (sp on only; never run as bf16)",
             dt, l->tp);
    return 1;
  }
  if (l->comm == TP_COMM_NONE) {
    snprintf(reason, cap,
             "%s layers at TP %d: qkv and w13 gather their input: comm_dtype bf16 or fp8", dt,
             l->tp);
    return 1;
  }
  return 0;
}

int tp_recipe_layer_rejection(const tp_recipe_layer *l, char *reason, size_t cap) {
  tp_quant_format f;
  if (!fp8_format(l->dtype, &f)) return 0;
  layer_part parts[LAYER_MAX_PARTS];
  const int n = layer_parts(l, parts);
  for (int i = 0; i < n; ++i) {
    char why[360];
    if (!placement_rejection(&parts[i].c, f, NULL, why, sizeof why)) continue;
    snprintf(reason, cap, "%s: %s", parts[i].name, why);
    return 1;
  }
  return layer_comm_rejection(l, reason, cap);
}

int tp_recipe_layer_dist_rejection(const tp_recipe_layer *l, tp_schedule schedule, int chunks,
                                   tp_symm_transport symm, char *reason, size_t cap) {
  const tp_recipe_case c = {l->dtype, TP_OP_AG_LINEAR, l->tokens, l->dim,
                            l->dim,   l->tp,           l->pass,   l->comm};
  /* the op's reason as it stands: it names the dtype, the schedule or chunks, and why */
  if (tp_recipe_dist_rejection(&c, schedule, chunks, reason, cap)) return 1;
  return tp_recipe_symm_rejection(l->dtype, symm, TP_RECIPE_FOR_LAYER, reason, cap);
}

int tp_recipe_layer_backend_rejection(const tp_recipe_layer *l, tp_backend backend, char *reason,
                                      size_t cap) {
  if (!tp_dtype_is_fp8(l->dtype) || l->tp > 1) return 0;
  if (backend == TP_BACKEND_STOCK || backend == TP_BACKEND_GEMM_ONLY) return 0;
  snprintf(reason, cap, "%s at TP 1: %s has nothing to gather or scatter", tp_dtype_name(l->dtype),
           tp_backend_axis(backend));
  return 1;
}
