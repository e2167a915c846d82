/*
 * fp8_rules.h — the plan-time rules of the fp8 dtypes of `tpbench ops` and
 * `tpbench run` (issue 15), decided on the CPU before any GPU work; the ops
 * matrix applies them to every configuration of an fp8 case, the layer
 * matrix to every projection of an fp8 layer (tp_fp8_layer_rejection).
 *
 * Every pass is planned (fwd, bwd, fwd+bwd: the backward's dgrad and wgrad
 * GEMMs take E5M2 gradients, kernels/tp_linear_fp8.h). In order, the first
 * rule that fails names the rejection:
 *   placement  each quantized operand, split as the op splits it at this TP
 *              degree, must quantize shard by shard exactly as the whole
 *              (tp_quant_shard_check):
 *                all-gather side (ag_linear, ag_linear_multi): the activation
 *                X[T, K] by rows (sequence-sharded, what each rank quantizes
 *                before the gather) and the column-parallel weight W[N, K]
 *                along N;
 *                reduce-scatter side (linear_rs): X[T, K] and W[N, K] along
 *                K (the partial outputs stay bf16 and are reduced in bf16);
 *                with the backward also dY[T, N] (along N on the all-gather
 *                side, by rows on the other) and the wgrad's sequence-sharded
 *                operand transposed, [C, T] split along T (Xᵀ, or dYᵀ):
 *                tp_quant_op_splits lists them, kernels/tp_linear_fp8_bwd.c
 *                plans the same.
 *              The reason names the rule ("fp8 placement rule <layout>", the
 *              backward's with the tensor named).
 *   comm       TP > 1 (kernels/tp_linear_fp8_comm.h): every pass runs; the
 *              all-gather side needs comm_dtype bf16 or fp8, the
 *              reduce-scatter side takes none (it reduces bf16 partials).
 *   dist_gemm  (tp_fp8_dist_gemm_rejection) at TP > 1 the fused pushes
 *              carry fp8 (schedules auto, ce, sm): comm_dtype bf16 is
 *              stock's alone, and a shard travels whole with its scales
 *              (chunks 0 or 1).
 * Layers (`run`, tp_fp8_layer_rejection) at TP > 1 run the forward with
 * sequence parallelism, each of the four projections through the same fp8
 * communication (qkv and w13 gather with the layer's comm_dtype, wo and w2
 * reduce-scatter bf16 partials); dist_gemm's layer takes the same schedules
 * and chunks as the op (tp_fp8_layer_dist_gemm_rejection).
 * What only the GPU can decide (whether cuBLASLt runs the format's scale
 * modes here: mxfp8 needs sm_100; with the backward, also its dgrad and
 * wgrad GEMMs' operand types and scale modes) is asked by the worker's plan
 * step.
 * Pure C, no CUDA.
 */
#ifndef TP_FP8_RULES_H
#define TP_FP8_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_vocab.h"

/* One op of an fp8 case: global shapes (T tokens, N out features of each
 * weight, K in features), the TP degree and the pass. */
typedef struct tp_fp8_case {
  tp_dtype dtype; /* an fp8 dtype (tp_dtype_is_fp8) */
  tp_op op;
  int64_t tokens, n, k;
  int tp;
  tp_pass pass;
  tp_comm_dtype comm; /* what travels on the all-gather side at TP > 1 */
} tp_fp8_case;

/* 1 with the reason in reason (cap bytes) when the case cannot run, 0 when
 * the CPU finds nothing against it (also for a dtype that is not fp8). */
int tp_fp8_case_rejection(const tp_fp8_case *c, char *reason, size_t cap);

/* 1 with the reason when dist_gemm with this schedule and `chunks` (0:
 * auto) cannot run the fp8 case c (above: ring and multimem push no fp8
 * chunks); 0 otherwise (also for a dtype that is not fp8). */
int tp_fp8_dist_gemm_rejection(const tp_fp8_case *c, tp_schedule schedule, int chunks, char *reason,
                               size_t cap);

/* A layer of `tpbench run` whose four TP projections run in an fp8 format
 * (everything else in the layer stays bf16): the model's global shapes. */
typedef struct tp_fp8_layer {
  tp_dtype dtype; /* an fp8 dtype (tp_dtype_is_fp8) */
  tp_layer layer;
  int64_t tokens; /* T = batch x seqlen */
  int64_t dim, n_heads, n_kv_heads, head_dim, ffn_hidden;
  int tp;
  tp_pass pass;
  int sp;             /* sequence parallelism (TP > 1 needs it) */
  tp_comm_dtype comm; /* what the gathering projections move at TP > 1; NONE at TP 1 */
} tp_fp8_layer;

/* The same rules over the layer's projections, in layer order: first the
 * placement of every quantized operand of every projection (qkv's weight
 * as its three parts, query, key and value heads, each split along N on
 * its own: a rank's shard of each must hold whole scale blocks; then wo,
 * w1/w3, w2), the reason prefixed by the projection ("qkv (key heads): fp8
 * placement rule ..."); then the communication rule: at TP 1 comm NONE;
 * at TP > 1 sp on, pass fwd (the fp8 backward at TP > 1 does not exist)
 * and comm bf16 or fp8. 1 with the reason, 0 when nothing is against it
 * (also for a dtype that is not fp8). */
int tp_fp8_layer_rejection(const tp_fp8_layer *l, char *reason, size_t cap);

/* 1 with the reason when dist_gemm with this schedule and `chunks` cannot
 * run the fp8 layer l at TP > 1: its projections' fused pushes carry fp8
 * chunks (tp_fp8_dist_gemm_rejection on the gathering side with l's comm:
 * schedules auto, ce, sm; chunks 0 or 1; comm_dtype fp8). 0 otherwise. */
int tp_fp8_layer_dist_gemm_rejection(const tp_fp8_layer *l, tp_schedule schedule, int chunks,
                                     char *reason, size_t cap);

#endif /* TP_FP8_RULES_H */
