/*
 * layer_matrix.h — the configurations of `tpbench run` (and `tpbench matrix`):
 * the layers a model really runs, stock against dist_gemm, over every
 * composition asked for, each invalid one kept with the reason it cannot run.
 *
 * Axes (a list of values each; the matrix is their product):
 *   model          a preset (debug, 1b, 8b, 70b, 405b, qwen2.5-72b, mixtral-8x7b,
 *                  deepseek-v3-dense: bench/matrix/presets.h) or a model the
 *                  matrix file defines (matrix_file.h)
 *   layer          attention, ffn, block
 *   backend        stock, dist_gemm
 *   schedule       dist_gemm's: auto, ce, sm, ring, multimem
 *   chunks         dist_gemm's chunks per rank's shard, 0 = the plan decides
 *   tp             TP degree; not given: the job's worker count
 *   batch, seqlen  B and S; tokens per step T = B·S
 *   dtype          bf16, fp32, or an fp8 recipe (fp8, fp8-row, fp8-block,
 *                  mxfp8): the four TP projections quantize their operands
 *                  and run scaled FP8 GEMMs, everything else stays bf16
 *   sp             on, off (sequence parallelism)
 *   pass           fwd, fwd+bwd
 *   graph          off, on (time CUDA graph replays of a captured step),
 *                  mixed (the inference situation: the case's sizes — the
 *                  seqlen axis's values, the other axes alike — captured as
 *                  one graph each on one workspace and replayed interleaved;
 *                  each size is its own configuration, graph 1 and
 *                  graph_sizes the token counts of the mix, ascending)
 *   save_gathered  off, on (the all-gather side's backward reuses the
 *                  forward's gathered input instead of gathering again)
 *   dp             data-parallel degree (FSDP), default 1: a dp × tp mesh,
 *                  ranks tp-innermost (rank = dp_index · tp + tp_index,
 *                  placement.h); batch is the global batch, split over dp
 *   ac             activation checkpointing: none, selective (the
 *                  projections' outputs and the attention core's output are
 *                  saved; RMSNorm, RoPE, SwiGLU and the residual adds are
 *                  recomputed in the backward), full (the block's whole
 *                  forward, its all-gathers included, is recomputed in the
 *                  backward); bench/matrix/activation.h has the op lists and
 *                  what each keeps
 *   stock          plain, window: the stock layer's variants (and the
 *                  collectives alone's): NCCL on plain buffers, or the same
 *                  collectives on NCCL symmetric windows (stored schedule
 *                  "nccl-window"); default both, the report takes the faster
 *   symm           ipc, nccl: dist_gemm's symmetric memory, tpbench's CUDA-IPC
 *                  heap or NCCL symmetric windows (kernels/tp_symm.h), the
 *                  same fused schedules over either; default ipc. Whether
 *                  NCCL offers symmetric memory is the runtime's to say: the
 *                  worker's plan rejects symm=nccl with NCCL's text
 *   fsdp_traffic   off, on: at dp 1, FSDP's collectives of the block's
 *                  weight-sized buffers (the next block's all-gather during
 *                  the forward, the previous block's reduce-scatter during
 *                  the backward) run on a side stream over a second NCCL
 *                  communicator of the same GPUs, beside the TP layer
 *                  (bench/gpu/fsdp.h); dp > 1 runs FSDP's own collectives
 *   comm_dtype     bf16, fp8 (default fp8): what an fp8 layer's gathering
 *                  projections (qkv, w13) move at TP > 1 with sp on — the
 *                  quantized shard and its scales, or the bf16 shard,
 *                  quantized whole after the gather (stock only). Only
 *                  those cases multiply by it; every other case has none
 *                  (stored NULL), as ops' comm_dtype
 * They come from a preset ("quick", the default: debug and 8b, every layer,
 * seqlen 2048 and 4096, batch 1, bf16, fwd and fwd+bwd, graph off and on,
 * a few minutes on two GPUs; "full": everything), then a matrix file (JSON,
 * tp_layer_spec_load), then `--axis NAME=V1,V2` assignments, each replacing
 * one axis's list.
 *
 * A case is one point of every axis but backend, schedule and chunks. Each
 * yields, in this order: the stock layer (kind "layer", backend "stock") per
 * stock variant if stock is asked for; one dist_gemm layer per schedule ×
 * chunks × symm if dist_gemm is; the layer with its TP ops as GEMMs alone (kind
 * "gemm", backend "cublaslt") and as collectives alone (kind "comm",
 * backend "nccl") per stock variant, whose maximum (with the faster
 * collectives) bounds it. Rules that make a configuration meaningless are checked
 * here, without a GPU, and kept as rejections with their reason (the list is
 * tp_layer_expand's); rules only the machine can decide are applied by `run`
 * (tp_layer_reject_world, tp_layer_reject_no_peer_access) or by the kernels at
 * plan time (NCCL's answer for nccl-window and symm=nccl), whose rejection is recorded.
 * Pure C, no CUDA.
 */
#ifndef TP_LAYER_MATRIX_H
#define TP_LAYER_MATRIX_H

#include <stdint.h>
#include <stdio.h>

#include "bench/cli/cli.h"
#include "bench/matrix/activation.h"
#include "bench/matrix/presets.h"
#include "store/tp_store.h"

typedef struct tp_layer_spec {
  tp_str_list model, layer, backend, schedule, dtype, sp, pass, graph, save_gathered, ac, stock,
      symm, fsdp_traffic, comm_dtype;
  tp_int_list chunks, tp, batch, seqlen, dp; /* tp.count == 0: the workers (over one dp) */
  tp_model_set defined;                      /* models the matrix file defined */
} tp_layer_spec;

/* The axis names, in the order above. */
const char *const *tp_layer_axis_names(int *count);

/* The presets' names: "quick", "full". */
const char *const *tp_layer_preset_names(int *count);

/* Fills spec with preset name. TP_EUSAGE naming the valid presets otherwise. */
TP_MUST_CHECK tp_rc tp_layer_spec_preset(const char *name, tp_layer_spec *spec);

/* Replaces one axis's list with the comma-separated values (checked when the
 * matrix is expanded). TP_EUSAGE for an unknown axis (listing the valid
 * ones), an empty or malformed list; spec is unchanged then. */
TP_MUST_CHECK tp_rc tp_layer_spec_set_axis(tp_layer_spec *spec, const char *axis,
                                           const char *values);

/* The same from "NAME=V1,V2" (a --axis argument). */
TP_MUST_CHECK tp_rc tp_layer_spec_assign(tp_layer_spec *spec, const char *assignment);

/*
 * Reads a matrix file (format and errors in matrix_file.h) and fills spec:
 * the preset it starts from (preset if not NULL, else the file's "preset",
 * else "quick"), then the file's models, then its axes. spec is unchanged on
 * an error.
 */
TP_MUST_CHECK tp_rc tp_layer_spec_load(const char *path, const char *preset, tp_layer_spec *spec);

typedef struct tp_layer_case {
  const tp_model_preset *model;
  tp_layer layer;
  tp_dtype dtype;
  tp_pass pass;
  int tp, batch, seqlen;
  int64_t tokens;
  int sp, graph, save_gathered;
  int dp;             /* data-parallel degree: the mesh is dp × tp */
  tp_ac ac;           /* activation checkpointing */
  int graph_mixed;    /* graph=mixed (graph is 1 too) */
  int fsdp_traffic;   /* fsdp_traffic=on: FSDP's collectives beside a dp 1 layer */
  tp_comm_dtype comm; /* what an fp8 layer's gathering projections move at TP > 1 with sp;
                         NONE everywhere else */
  int mix_group;      /* graph=mixed: its mix, an index into tp_layer_matrix.mix_sizes; the
                         cases of one mix are adjacent, ascending in tokens. -1: none */
  int first_config, n_configs;
} tp_layer_case;

/* The case's graph axis: "off", "on", "mixed". */
const char *tp_layer_graph_name(const tp_layer_case *c);

typedef struct tp_layer_config {
  tp_config_axes axes;    /* the stored names of all of it; strings are static */
  tp_backend backend;     /* stock, dist_gemm, or a reference: the layer with its TP ops' GEMMs
                             alone (kind gemm, stored backend cublaslt) or collectives alone
                             (kind comm, backend nccl) */
  tp_schedule schedule;   /* dist_gemm's requested schedule; for stock and the collectives alone
                             tp_stock_schedule(their variant); AUTO for the GEMMs alone */
  tp_symm_transport symm; /* dist_gemm's symmetric memory; IPC for the other backends */
  int case_index;
  int rejected; /* 1: not to be run; reason says why */
  int planned;  /* 1 (with rejected 1): valid but not runnable here, reason says why (no
                   "planned: " prefix); 0 with rejected 1: a rule rejects it */
  char reason[320];
  double flops; /* per iteration, the whole group (tp_layer_flops); 0 for comm */
} tp_layer_config;

/* graph=mixed: at most this many sizes in a mix, and this many
 * configurations of a mix together (the harness measures them as one case:
 * bench/gpu/harness.h, TP_HARNESS_MAX_CASE). */
enum { TP_LAYER_MAX_GRAPH_SIZES = 8, TP_LAYER_MAX_MIX_CONFIGS = 32, TP_LAYER_SIZES_TEXT = 128 };

/* The NCCL symmetric windows a TP group holds at once (kernels/tp_group.h's
 * TP_MAX_WINDOWS; layer_worker.c asserts they agree). */
enum { TP_LAYER_MAX_WINDOWS = 32 };

typedef struct tp_layer_matrix {
  tp_model_preset *models; /* the models the cases point to, owned */
  int n_models;
  tp_layer_case *cases;
  int n_cases;
  tp_layer_config *configs;
  int n_configs;
  /* graph=mixed: per mix its token counts ("2048,4096,8192"), which the
   * configurations' axes.graph_sizes point to; owned, never moved */
  char (*mix_sizes)[TP_LAYER_SIZES_TEXT];
  int n_mixes;
} tp_layer_matrix;

/*
 * Expands spec (tp.count == 0: TP tp_default, over dp when one dp value is given) into *out, free
 * with tp_layer_matrix_free. The matrix holds copies of its models: it does not point into spec.
 * Rejections, each with its reason:
 *   - a mesh (dp · tp) of more than TP_MAX_GROUP_RANKS ranks: a job's world
 *     is one group, which holds no more (common/tp_vocab.h);
 *   - attention or block of a model whose attention is not expressible here
 *     (tp_model_preset.no_attention);
 *   - seqlen not divisible by TP with SP on (the sequence is sharded in whole
 *     positions), tokens not divisible by TP;
 *   - n_heads or n_kv_heads (layers with attention), ffn_hidden (with FFN)
 *     not divisible by TP;
 *   - save_gathered=on with pass fwd (no backward to reuse it) or SP off
 *     (nothing is gathered);
 *   - dist_gemm with SP off, at TP 1, with chunks that do not divide the
 *     tokens per rank or outside 1..32; schedule sm where a projection's
 *     chunk (as asked, or auto's count) is not a whole number of 16-byte
 *     vectors (common/tp_chunk_rule.h);
 *   - the collective alone at TP 1;
 *   - a composition whose placement contracts do not hold (placement.h),
 *     on the TP group and on the dp × tp mesh (batch not divisible by dp,
 *     a parameter's TP shard whose dim 0 does not divide by dp);
 *   - ac other than none with pass fwd (nothing to recompute), ac=full with
 *     save_gathered=on (full recomputes the gathers: nothing is kept);
 *   - an fp8 dtype where a projection's quantized operand, split at this TP
 *     degree, would put a scale block across two ranks, or at TP > 1 with
 *     sp off: its recipe's rules (kernels/tp_recipe_rules.h, the rules of
 *     ops, applied to every projection; the block's plan asks them too);
 *     dist_gemm's fp8 layer with a schedule or chunks its fp8 pushes refuse
 *     (ring, multimem; chunks > 1), with comm_dtype bf16 (stock's) or
 *     symm=nccl (the pushes use the IPC heap only). mxfp8 is rejected by the
 *     worker's plan below sm_100, in cuBLASLt's words;
 *   - graph=mixed with fewer than 2 or more than TP_LAYER_MAX_GRAPH_SIZES
 *     sizes (seqlen values), or whose mix holds more than
 *     TP_LAYER_MAX_MIX_CONFIGS configurations; a configuration of a mix
 *     whose counterpart at another size (same backend, schedule, chunks) a
 *     rule rejects (the mix its graph_sizes names could not run whole);
 *     the nccl-window configurations of a mix whose windows, all held at
 *     once, would be more than TP_LAYER_MAX_WINDOWS.
 *     dist_gemm schedules whose sizes need different workspaces are fine:
 *     the warm-up grows the one workspace to the largest.
 *   - FSDP (dp > 1, or fsdp_traffic=on) with graph on or mixed (its side
 *     stream's collectives are not captured), with an fp8 dtype (the fp8
 *     weights are quantized once at prepare, not gathered per step), and
 *     fsdp_traffic=on at dp > 1 (dp > 1 runs FSDP's collectives already);
 * A mesh of dp > 1 beside tp > 1 runs FSDP over the dp group of each TP
 * index with the TP layer inside each TP group (bench/gpu/fsdp.h). Every ac
 * mode runs (bench/gpu/block.h).
 * TP_EUSAGE for an unknown name, a value listed twice, a number out of range
 * or more than 200000 configurations (*out empty then); TP_EOOM.
 */
TP_MUST_CHECK tp_rc tp_layer_expand(const tp_layer_spec *spec, int tp_default,
                                    tp_layer_matrix *out);

void tp_layer_matrix_free(tp_layer_matrix *matrix);

/* Configurations to run (neither rejected nor planned), rejected by a rule,
 * planned. */
int tp_layer_runnable(const tp_layer_matrix *matrix);
int tp_layer_rejected(const tp_layer_matrix *matrix);
int tp_layer_planned(const tp_layer_matrix *matrix);

/* Marks planned every configuration not yet rejected or planned whose mesh
 * (dp · tp) needs more than gpus GPUs, with that count; returns how many.
 * The composition table (composition.h) applies it: what a host of gpus GPUs
 * supports at all. `run` and `matrix` go through tp_layer_reject_world. */
int tp_layer_plan_host(tp_layer_matrix *matrix, int gpus);

/* Removes the planned configurations (and cases left empty) from the
 * matrix, printing each on out (if not NULL) as "planned, not run: ...";
 * returns how many. `run` stores no planned configuration: nothing planned
 * runs (dp > 1 beside tp > 1 has no runtime; a mesh larger than the job
 * needs more GPUs), and a planned row would read as a measurement that never was. */
int tp_layer_drop_planned(tp_layer_matrix *matrix, FILE *out);

/* Host rules `run` applies before the first configuration (and `matrix --gpus N`
 * with N as the world, so that it lists what `run --gpus N` does). Each marks the
 * configurations it concerns (if they were not) and returns how many: a
 * mesh (dp · tp) larger than the job's worker count planned (needs that
 * many GPUs), a smaller one rejected (a job of that many workers runs it:
 * --gpus); dist_gemm where the job's GPUs cannot all reach each other's
 * memory (peer access) rejected. */
int tp_layer_reject_world(tp_layer_matrix *matrix, int world);
int tp_layer_reject_no_peer_access(tp_layer_matrix *matrix);

/* Prints one line per configuration (case, axes, role, and "run",
 * "rejected: <rule>" or "planned: <why>") and a summary naming the host of
 * gpus GPUs it was listed against: `tpbench matrix`. */
void tp_layer_matrix_print(const tp_layer_matrix *matrix, int gpus, FILE *out);

#endif /* TP_LAYER_MATRIX_H */
