/*
 * ops_matrix.h — the configurations of the op benchmark (`tpbench ops`),
 * expanded from the user's lists and checked before any GPU work.
 *
 * A case is one point of models × projs × tokens × dtypes × tp × passes ×
 * save_gathered, or, with shapes given (`ops --shape`), of shapes × dtypes ×
 * tp × passes × save_gathered: a bare projection of no model (model
 * TP_SHAPE_MODEL, proj "NxK"), whose M is the tokens of the step. Each
 * case yields, in this order: the stock op (NCCL + cuBLASLt), one dist_gemm op
 * per requested schedule × chunks × symm (the transport of its symmetric
 * memory: tpbench's CUDA-IPC heap or NCCL windows; whether NCCL offers
 * symmetric memory is the runtime's to say, so the worker's plan rejects a
 * symm=nccl configuration with NCCL's text, never here), the GEMM alone and the collective alone
 * (the two references that bound a fused op). A configuration that cannot
 * run on these shapes is kept, marked rejected with its reason, so the
 * database records why it was not measured; names the tool does not know are
 * usage errors instead. A TP degree past TP_MAX_GROUP_RANKS (common/tp_vocab.h)
 * is rejected: no group holds it. dist_gemm is rejected at TP 1, with chunks past 32 or
 * not dividing the rows per rank, and with schedule sm where a chunk is not a
 * whole number of 16-byte vectors (common/tp_chunk_rule.h), as the plan would.
 * The fp8 dtypes (fp8, fp8-row, fp8-block, mxfp8) are
 * held to their recipe's rules, kernels/tp_recipe_rules.h, which the plan asks
 * too (the shard rule of each quantized operand, every pass; at TP > 1
 * comm_dtype on the all-gather side, dist_gemm with comm_dtype fp8 and one
 * chunk over the CUDA-IPC heap; no nccl-window variant).
 *
 * Shapes in the axes are those one rank's GEMM runs (T tokens, TP degree W):
 *   ag_linear, ag_linear_multi: M = T, N = N / W (per weight), K = K
 *   linear_rs:                  M = T, N = N,                  K = K / W
 * Pure C, no CUDA.
 */
#ifndef TP_OPS_MATRIX_H
#define TP_OPS_MATRIX_H

#include <stdint.h>
#include <stdio.h>

#include "bench/cli/cli.h"
#include "bench/matrix/presets.h"
#include "store/tp_store.h"

/* What the user asked for. Strings are names as typed (aliases allowed). */
typedef struct tp_ops_spec {
  tp_str_list models;        /* default 8b,70b */
  tp_str_list projs;         /* default qkv,wo,w13,w2 */
  tp_int_list tokens;        /* tokens per step, global; default 4096,8192,16384 */
  tp_str_list dtypes;        /* default bf16 */
  tp_int_list tp;            /* TP degrees; default 2 */
  tp_str_list schedules;     /* dist_gemm schedules; default auto */
  tp_int_list chunks;        /* chunks per shard, 0 = the schedule decides; default 0 */
  tp_str_list passes;        /* fwd, bwd, fwd+bwd; default fwd */
  tp_str_list save_gathered; /* off, on: keep the forward's gathered input for dW; default off */
  tp_str_list stocks;        /* stock variants: plain, window (tp_stock_variant); default both */
  tp_str_list symms;         /* dist_gemm's symmetric memory: ipc, nccl (tp_symm_transport);
                                default ipc */
  tp_str_list comm_dtypes;   /* bf16, fp8: what travels on an fp8 dtype's all-gather side at
                                TP > 1 (tp_comm_dtype); default fp8. Only those cases multiply
                                by it; every other case records none (nothing quantized
                                travels: bf16 and fp32, TP 1, the reduce-scatter side) */
  /* Bare projections "MxNxK" or "MxNxK:op" (op ag_linear, the default, ag_linear_multi
   * or linear_rs; global shapes as a model's projection: M tokens, N out features per
   * weight, K in features; ag_linear_multi has two weights). Given: they replace
   * models, projs and tokens. Default none. */
  tp_str_list shapes;
  tp_model_set defined; /* models the matrix file defined */
  unsigned given;       /* bit i: axis i of tp_ops_axis_names was set by tp_ops_spec_set_axis */
} tp_ops_spec;

/* Fills spec with the defaults above. */
void tp_ops_spec_defaults(tp_ops_spec *spec);

/* The axes of `ops` (the names --axis and the matrix file use): model, proj,
 * tokens, dtype, tp, schedule, chunks, pass, save_gathered, shape, stock, symm,
 * comm_dtype. */
const char *const *tp_ops_axis_names(int *count);

/* Replaces one axis's list with the comma-separated values (checked when the
 * matrix is expanded; numbers against the ranges of the matching flags:
 * tokens 1..16777216, tp 1..TP_MAX_DEGREE, chunks 0..64) and marks it given. TP_EUSAGE
 * for an axis ops does not have (naming ops' axes), an empty or malformed
 * list; spec is unchanged then. */
TP_MUST_CHECK tp_rc tp_ops_spec_set_axis(tp_ops_spec *spec, const char *axis, const char *values);

/* Reads a matrix file (matrix_file.h; ops has no presets, so a "preset" key
 * is refused) on top of spec: its models, then its axes. spec is unchanged
 * on an error. */
TP_MUST_CHECK tp_rc tp_ops_spec_load(const char *path, tp_ops_spec *spec);

typedef struct tp_ops_case {
  const tp_model_preset *model;
  tp_projection proj; /* global shapes */
  int64_t tokens;
  int tp;
  tp_dtype dtype;
  tp_pass pass;
  int save_gathered;  /* 1: the backward reuses the forward's gathered input */
  tp_comm_dtype comm; /* an fp8 all-gather side at TP > 1: BF16 or FP8; else NONE */
  int first_config;   /* index of its first configuration in the matrix */
  int n_configs;
} tp_ops_case;

typedef struct tp_ops_config {
  tp_config_axes axes;    /* the stored names of all of it; strings are static */
  tp_backend backend;     /* stock, dist_gemm, or a reference: GEMM alone (kind gemm, stored
                             backend cublaslt), collective alone (kind comm, backend nccl) */
  tp_schedule schedule;   /* dist_gemm's requested schedule; for stock and the collective alone
                             tp_stock_schedule(their variant); AUTO for the GEMM alone */
  tp_symm_transport symm; /* dist_gemm's symmetric memory; IPC for the other backends */
  int case_index;
  int rejected; /* 1: not to be run; reason says why */
  int planned;  /* 1 (with rejected 1): valid, but needs more GPUs than the host or job holds
                   (reason without a "planned: " prefix); 0 with rejected 1: a rule rejects it */
  char reason[400];
  double flops;       /* per iteration, all ranks and weights, this pass; 0 for comm */
  int64_t comm_bytes; /* the whole collective buffer: gathered input (T x K) for the
                         all-gather ops (fp8 dtypes: 1 byte each plus the scales),
                         full-size partial output (T x N) for linear_rs (bf16 for fp8) */
} tp_ops_config;

typedef struct tp_ops_matrix {
  tp_model_preset *models; /* the models the cases point to, owned (and the shape model) */
  int n_models;
  char (*shape_names)[32]; /* proj names of the shape cases ("NxK"), owned */
  tp_ops_case *cases;
  int n_cases;
  tp_ops_config *configs;
  int n_configs;
  int host_gpus; /* the host tp_ops_plan_host listed against; 0: none */
} tp_ops_matrix;

/* Expands spec into *out (free with tp_ops_matrix_free; it holds copies of its
 * models and names, not pointers into spec). TP_EUSAGE with the valid values
 * for an unknown model, proj, dtype, schedule, pass or stock variant, a value listed twice,
 * a number out of range (tokens, tp >= 1; chunks >= 0), a malformed shape, or
 * shapes given together with a given model, proj or tokens axis; *out is
 * empty then. TP_EOOM if no memory. The qkv and wo projections of a model
 * whose attention cannot be expressed (no_attention) are rejected with that
 * reason. */
TP_MUST_CHECK tp_rc tp_ops_expand(const tp_ops_spec *spec, tp_ops_matrix *out);

void tp_ops_matrix_free(tp_ops_matrix *matrix);

/* Configurations not rejected. */
int tp_ops_runnable(const tp_ops_matrix *matrix);

/* Marks every configuration whose TP degree differs from the job's worker
 * count (if it was not rejected): a larger one planned (needs that many
 * GPUs), a smaller one rejected (a job of that many workers runs it:
 * --gpus), and records world as the host listed against; returns how many.
 * `ops` applies it to its job, `ops --list` and `matrix --for ops` to --gpus N. */
int tp_ops_reject_world(tp_ops_matrix *matrix, int world);

/* Marks planned every configuration no rule rejects whose TP degree needs
 * more than gpus GPUs, and records gpus as the host listed against; returns
 * how many. */
int tp_ops_plan_host(tp_ops_matrix *matrix, int gpus);

/* Planned configurations. */
int tp_ops_planned(const tp_ops_matrix *matrix);

/* Removes the planned configurations (and cases left empty), printing each
 * on out (if not NULL) as "planned, not run: ..."; returns how many. `ops`
 * stores no planned configuration. */
int tp_ops_drop_planned(tp_ops_matrix *matrix, FILE *out);

/* The largest TP degree of any runnable configuration (the GPUs a run
 * needs), 0 if none can run. */
int tp_ops_max_tp(const tp_ops_matrix *matrix);

/* Prints one line per configuration: case, role, schedule, shapes, and
 * "run", "rejected: <rule>" or "planned: <why>" (the plan of `tpbench ops
 * --list` and `tpbench matrix --for ops`). */
void tp_ops_matrix_print(const tp_ops_matrix *matrix, FILE *out);

#endif /* TP_OPS_MATRIX_H */
