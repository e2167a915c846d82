/*
 * tp_recipe_rules.h — the validity rules of the numeric recipes (issue 29),
 * stated once: the matrices of `tpbench ops` and `tpbench run`
 * (bench/matrix/) ask them for every configuration before any GPU work, and
 * the projection's plan asks the same functions where it is made
 * (kernels/tp_linear_fp8.c for an op, bench/gpu/block.c for a layer's
 * projections), so a configuration is never turned down in two wordings.
 *
 * A recipe is the numeric format a TP projection runs in (kernels/tp_linear.h):
 * bf16 and fp32 are the identity recipe, which these rules leave alone (every
 * function returns 0 for them); the fp8 formats (fp8, fp8-row, fp8-block,
 * mxfp8) are rows of the fp8 recipe. In order, the first rule that fails
 * names the rejection:
 *   placement  each quantized operand, split as the op splits it at this TP
 *              degree, must quantize shard by shard exactly as the whole
 *              (tp_quant_split_check on tp_quant_op_splits' operands: X and W,
 *              and with the backward dY and the wgrad's sequence-sharded
 *              operand transposed). The reason names the rule ("fp8 placement
 *              rule <layout>", the backward's with the tensor named). What the
 *              ranks must agree on before each operand is quantized (an amax
 *              all-reduce where a scale spans ranks) comes back to the plan.
 *   comm       at TP 1 nothing travels (comm_dtype none); at TP > 1 the
 *              all-gather side needs comm_dtype bf16 or fp8, the
 *              reduce-scatter side takes none (it reduces bf16 partials).
 *   dist_gemm  at TP > 1 the fused pushes carry fp8 (schedules auto, ce, sm):
 *              comm_dtype bf16 is stock's alone, a shard travels whole with
 *              its scales (chunks 0 or 1), over the CUDA-IPC heap only.
 *   window     the stock path has no variant on NCCL symmetric windows.
 * Layers (`run`) at TP > 1 run with sequence parallelism, each of the four
 * projections through the same rules (qkv's weight as its three parts,
 * query, key and value heads, each split along N on its own).
 * What only the GPU can decide (whether cuBLASLt runs the format's scale
 * modes there: mxfp8 needs sm_100; with the backward also its dgrad and wgrad
 * GEMMs) is asked by the plan on the GPU.
 * Pure C, no CUDA.
 */
#ifndef TP_RECIPE_RULES_H
#define TP_RECIPE_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_vocab.h"
#include "kernels/tp_quant.h"

/* One projection of a case: global shapes (T tokens, N out features of each
 * weight, K in features), the TP degree, the pass and what its all-gather
 * side moves at TP > 1. */
typedef struct tp_recipe_case {
  tp_dtype dtype;
  tp_op op;
  int64_t tokens, n, k;
  int tp;
  tp_pass pass;
  tp_comm_dtype comm;
} tp_recipe_case;

/* What the ranks agree on before they quantize each operand of a case that
 * passed the placement rule: X as the op splits it, and with the backward dY
 * and the wgrad's transposed operand ([t_rows, T] split along T). */
typedef struct tp_recipe_agreements {
  tp_amax_agreement x, dy, t;
  int64_t t_rows;
} tp_recipe_agreements;

/* 1 with the reason in reason (cap bytes) when the case cannot run (the
 * placement, then the comm rule), 0 otherwise (also for the identity
 * recipe). agree (may be NULL) receives the agreements when it can run. */
int tp_recipe_rejection(const tp_recipe_case *c, tp_recipe_agreements *agree, char *reason,
                        size_t cap);

/* 1 with the reason when dist_gemm with this schedule (requested, or what
 * auto resolved to) and `chunks` (0: auto) cannot run c: its pushes carry
 * fp8 chunks (schedules auto, ce, sm; comm_dtype fp8; chunks 0 or 1). */
int tp_recipe_dist_rejection(const tp_recipe_case *c, tp_schedule schedule, int chunks,
                             char *reason, size_t cap);

/* Whom a reason speaks to: `ops` names the op's projection, `run` the layer's. */
typedef enum { TP_RECIPE_FOR_OP = 0, TP_RECIPE_FOR_LAYER } tp_recipe_scope;

/* 1 with the reason when the stock variant on NCCL symmetric windows
 * (nccl-window) cannot run the dtype (the fp8 formats have none). */
int tp_recipe_window_rejection(tp_dtype dtype, tp_recipe_scope scope, char *reason, size_t cap);

/* 1 with the reason when the dtype cannot keep the forward's gathered input
 * for the backward (save_gathered=on): the fp8 formats keep no gathered copy,
 * they gather the quantized shard again, so the configuration would run as
 * save_gathered=off. 0 for bf16 and fp32. */
int tp_recipe_save_gathered_rejection(tp_dtype dtype, char *reason, size_t cap);

/* 1 with the reason when dist_gemm's symmetric memory `symm` cannot carry the
 * dtype's pushes (the fp8 ones run over the CUDA-IPC heap only). */
int tp_recipe_symm_rejection(tp_dtype dtype, tp_symm_transport symm, tp_recipe_scope scope,
                             char *reason, size_t cap);

/* A layer of `tpbench run` whose four TP projections run in the recipe
 * (everything else in the layer stays bf16): the model's global shapes. */
typedef struct tp_recipe_layer {
  tp_dtype dtype;
  tp_layer layer;
  int64_t tokens; /* T = batch x seqlen */
  int64_t dim, n_heads, n_kv_heads, head_dim, ffn_hidden;
  int tp;
  tp_pass pass;
  int sp;             /* sequence parallelism (TP > 1 needs it) */
  tp_comm_dtype comm; /* what the gathering projections move at TP > 1; NONE at TP 1 */
} tp_recipe_layer;

/* The rules over the layer's projections, in layer order: first the
 * placement of every quantized operand of every projection (the reason
 * prefixed by the projection, "qkv (key heads): fp8 placement rule ..."),
 * then the communication rule: at TP 1 comm NONE; at TP > 1 sp on and comm
 * bf16 or fp8. 1 with the reason, 0 otherwise. */
int tp_recipe_layer_rejection(const tp_recipe_layer *l, char *reason, size_t cap);

/* 1 with the reason when dist_gemm with this schedule, `chunks` and `symm`
 * cannot run the layer l at TP > 1 (tp_recipe_dist_rejection on its
 * gathering side with l's comm, then tp_recipe_symm_rejection). */
int tp_recipe_layer_dist_rejection(const tp_recipe_layer *l, tp_schedule schedule, int chunks,
                                   tp_symm_transport symm, char *reason, size_t cap);

/* 1 with the reason when the layer cannot run with `backend` at all: at TP
 * 1 a recipe layer runs its stock layer and its GEMMs alone (nothing
 * travels). What a plan asks that the matrix settles by its own TP 1 rules. */
int tp_recipe_layer_backend_rejection(const tp_recipe_layer *l, tp_backend backend, char *reason,
                                      size_t cap);

#endif /* TP_RECIPE_RULES_H */
