/*
 * tp_linear.h — the tensor-parallel projections, stock and fused.
 *
 * W ranks, T tokens in the step, S = T / W rows per rank. Activations keep
 * the sequence outermost ([S, B, D] flattened to rows), so an all-gather
 * concatenates whole per-rank row blocks and gathered row r·S + i is row i
 * of rank r.
 *
 *   AG_LINEAR        x[S, K] → y[T, N/W] = AG(x) · w[N/W, K]ᵀ       (QKV)
 *   AG_LINEAR_MULTI  the same for n_weights weights, one all-gather (w1/w3)
 *   LINEAR_RS        x[T, K/W] → y[S, N] = RS(x · w[N, K/W]ᵀ)         (wo, w2)
 *
 * Backends: STOCK runs the NCCL collective and the cuBLASLt GEMM on the
 * main stream, as a framework does; asked for schedule NCCL_WINDOW, it
 * runs the same collectives on NCCL symmetric windows (kernels/tp_window.h):
 * its scratch is the group's window scratch, and the caller's tensors that
 * a collective reads or writes must lie in windows too (NCCL's symmetric
 * kernels need both sides in one): x (gather side, sp), y[0] (scatter side),
 * dy[0] (scatter side's backward, sp), dx (gather side's backward), saved
 * and scratch when given; a tensor outside every window fails the pass
 * (TP_EINTERNAL) before anything is enqueued. DIST fuses them over
 * symmetric memory with a named schedule:
 *   ce  — the copy engine pushes each chunk into the peer's workspace on the
 *         comm stream, then raises the peer's flag. All-gather side: the GEMM
 *         consumes the local shard at once and each peer chunk as its flag
 *         arrives. Reduce-scatter side: each destination's partial chunk is
 *         computed and pushed while the next is computed; one chunk behind,
 *         the GEMM of the local rows adds the partials received for them in
 *         its epilogue (fp32, one rounding) and writes the output directly
 *         (rs_sum=nccl: the local partial rounded too, then the partials
 *         summed in NCCL's order, one rounding per add: stock's bits);
 *   sm  — the same pipeline with a copy kernel on a few SMs;
 *   ring, multimem — named; rejected with a reason where they cannot run.
 * GEMM_ONLY and COMM_ONLY run the two halves of the stock path alone, on
 * the same shapes, to give the bound max(GEMM, collective).
 *
 * Every numeric format runs through this one API: the format is a recipe
 * (kernels/tp_recipe.h) the plan consults — bf16 and fp32 the identity
 * recipe (the code above), fp8, fp8-row, fp8-block and mxfp8 the fp8 recipe
 * (kernels/tp_linear_fp8.h: the activation and gradients quantized in the
 * step, the weights once in tp_linear_prepare_weights, scaled GEMMs, bf16
 * outputs; at TP > 1 the fp8 shard and its scales gathered, bf16 partials
 * reduced). The checks a pass makes before it runs, its NVTX ranges, the
 * test knobs and the workspace claims live here, once, for every recipe.
 */
#ifndef TP_LINEAR_H
#define TP_LINEAR_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"
#include "common/tp_judgement.h"
#include "common/tp_vocab.h"
#include "kernels/tp_group.h"

enum { TP_MAX_WEIGHTS = 4 };

typedef struct tp_linear_desc {
  tp_op op;
  tp_dtype dtype;
  int64_t tokens;         /* T: rows of the whole step */
  int64_t in_features;    /* K of the unsharded weight */
  int64_t out_features;   /* N of the unsharded weight (each weight, for MULTI) */
  int n_weights;          /* 1, or the weights sharing one input (MULTI) */
  int backward;           /* the plan also runs the backward pass */
  int save_gathered;      /* all-gather side: keep AG(x) from the forward for dW (memory for
                             one all-gather less); 0: gather x again in the backward */
  int sp;                 /* sequence parallelism: activations sharded by rows between layers.
                             0 (stock only): replicated, x [T, K] on the gather side, y [T, N]
                             all-reduced on the scatter side */
  int bias;               /* each weight has a bias: column-parallel b[N/W] (sharded like the
                             weight), row-parallel b[N] (replicated, added after the sum) */
  tp_rs_sum rs_sum;       /* dist_gemm's fused reduce-scatter (the forward of LINEAR_RS, the
                             backward's dx of the gather side): EPILOGUE (0) or NCCL, partials
                             rounded and summed as NCCL sums them (tp_vocab.h); the other
                             backends refuse NCCL: they sum in NCCL itself */
  tp_symm_transport symm; /* dist_gemm's symmetric memory: IPC (0), tpbench's CUDA-IPC heap,
                             or NCCL, NCCL windows (tp_symm.h); the same schedules over
                             either. The other backends refuse NCCL: they use none */
  tp_comm_dtype comm;     /* an fp8 recipe's all-gather side at TP > 1: what travels, the fp8
                             shard and its scales (FP8) or the bf16 shard (BF16); NONE (0)
                             elsewhere */
} tp_linear_desc;

struct tp_recipe;       /* the numeric format's hooks (kernels/tp_recipe.h) */
struct tp_recipe_state; /* a recipe's own buffers (the fp8 recipe's quantized operands) */

typedef struct tp_linear_plan {
  tp_linear_desc desc;
  tp_backend backend;
  tp_schedule schedule; /* what runs: resolved from AUTO */
  int chunks;           /* chunks per rank's shard, forward collective */
  int bwd_chunks;       /* ... the backward's collectives (the other side's pipeline) */
  int sm_blocks;        /* blocks of the copy kernel (sm schedule) */
  char reason[512];     /* why this schedule and chunk count */
  int world, rank;
  int64_t shard_rows;             /* S = T / W */
  int64_t gemm_m, gemm_n, gemm_k; /* the whole GEMM one rank runs */
  size_t workspace_bytes; /* symmetric (DIST) or private scratch (the rest), max over passes */
  size_t saved_bytes;     /* the caller's buffer for AG(x) when save_gathered, else 0 */
  size_t comm_bytes;      /* bytes one rank sends per step (forward, plus backward if planned) */
  double flops;           /* FLOP of one step over the whole group */
  char nvtx_fwd[96], nvtx_bwd[96]; /* NVTX range names: "ag_linear.fwd dist_gemm ce x4" */
  const char *engine;              /* what moves the data: "copy-engine", "sm-kernel", "nccl",
                                      "cublaslt" (the GEMM alone), "none" (nothing travels) */
  const struct tp_recipe *recipe;  /* the numeric format's hooks (tp_recipe.h) */
  struct tp_recipe_state *state;   /* the recipe's own, NULL for the identity recipe: made by
                                      plan_make, freed by tp_linear_release */
  int twin;                        /* a view of another plan's state (tp_linear_twin) */
} tp_linear_plan;

/* Elements of each per-rank tensor of a plan. */
size_t tp_linear_x_elems(const tp_linear_plan *plan);
size_t tp_linear_w_elems(const tp_linear_plan *plan); /* each weight */
size_t tp_linear_y_elems(const tp_linear_plan *plan); /* each output */
size_t tp_linear_b_elems(const tp_linear_plan *plan); /* each bias */

/* Resolves the schedule (AUTO → a heuristic's choice, recorded with its
 * reason) and checks the shape, for the recipe of desc->dtype. TP_EREJECT
 * with the reason in tp_last_error() when the combination cannot run here.
 * chunks = 0: auto. A plan of a recipe with its own buffers (fp8) holds
 * host memory: tp_linear_release it (a failed plan_make frees it itself);
 * releasing an identity plan is a no-op. */
TP_MUST_CHECK tp_rc tp_linear_plan_make(const tp_group *group, const tp_linear_desc *desc,
                                        tp_backend backend, tp_schedule requested, int chunks,
                                        tp_linear_plan *out);

/* The plan a reference's `before` steps to leave what its own half reads
 * (a stock plan of the same projection, schedule AUTO or NCCL_WINDOW):
 * for the identity recipe a plan of its own, run on the reference's private
 * scratch (workspace_bytes, the caller's); for the fp8 recipe a view of p's
 * state, so its stock step quantizes and gathers into the very buffers p's
 * GEMMs or collectives read (no scratch: workspace_bytes 0). Release it with
 * tp_linear_release (a view frees nothing) before p. */
TP_MUST_CHECK tp_rc tp_linear_twin(const tp_group *group, const tp_linear_plan *p,
                                   tp_backend backend, tp_schedule requested, tp_linear_plan *out);

/* Frees what plan_make made for the recipe (nothing for the identity recipe
 * or a twin); the plan is zeroed but for its descriptor. */
void tp_linear_release(tp_linear_plan *plan);

/* Makes sure the workspace/scratch the plan needs exists (collective for
 * DIST and for the nccl-window stock variant: every rank must call it). Each
 * request, and the group's cuBLASLt workspace when the plan runs GEMMs, is
 * claimed for the device ledger's current owner (tp_device_alloc.h). A
 * window plan on a communicator without NCCL symmetric memory is
 * TP_EREJECT here, with NCCL's reason (kernels/tp_window.h); so is a DIST
 * plan with symm NCCL, whose first prepare makes the group's heap on NCCL
 * windows (tp_group_symm). */
TP_MUST_CHECK tp_rc tp_linear_prepare(tp_group *group, const tp_linear_plan *plan);

/* This rank's tensors of one op. Gradients have their tensor's shape:
 * dy[i] like y[i], dx like x, dw[i] like w[i]. saved: T x K elements when
 * the plan saves the gathered input, else NULL. */
typedef struct tp_linear_tensors {
  const void *x;
  const void *w[TP_MAX_WEIGHTS];
  void *y[TP_MAX_WEIGHTS];
  const void *dy[TP_MAX_WEIGHTS];
  void *dx;
  void *dw[TP_MAX_WEIGHTS];
  const void *b[TP_MAX_WEIGHTS]; /* biases, when the plan has them */
  void *db[TP_MAX_WEIGHTS];      /* their gradients */
  void *saved;
  /* Stock-path scratch of the caller's own (workspace_bytes), NULL: the
   * group's. The GEMM-alone and collective-alone references give each op its
   * own, filled by a stock step before their windows, so each half reads
   * exactly what the other half delivers in the stock op. */
  void *scratch;
} tp_linear_tensors;

/* tp_linear_prepare for a recipe that keeps its own copy of the weights:
 * the fp8 recipe quantizes each weight of t (and, with the backward, its
 * transpose) once, untimed, and at TP > 1 makes the communication's buffers
 * and a fused plan's symmetric workspace (collective: every rank calls it,
 * in the same order). Nothing for the identity recipe or a twin. */
TP_MUST_CHECK tp_rc tp_linear_prepare_weights(tp_group *group, const tp_linear_plan *plan,
                                              const tp_linear_tensors *t);

/* Enqueues the forward on the group's main stream (the fused schedules fork
 * to the comm stream and join back before returning). Host-asynchronous.
 * GEMM_ONLY / COMM_ONLY run only the GEMMs / only the collectives. */
TP_MUST_CHECK tp_rc tp_linear_forward(tp_group *group, const tp_linear_plan *plan,
                                      const tp_linear_tensors *t);

/* Enqueues the backward: dx from dy (the reduction over the sharded
 * dimension goes through the op's collective) and dw[i] from dy[i] and the
 * gathered input. Needs a plan made with desc.backward. */
TP_MUST_CHECK tp_rc tp_linear_backward(tp_group *group, const tp_linear_plan *plan,
                                       const tp_linear_tensors *t);

/* Transfers one rank issues per call of the passes asked for (fwd, bwd):
 * dist_gemm — chunk pushes to peers (copy-engine copies or copy-kernel
 * launches); stock and COMM_ONLY — NCCL collective calls; GEMM_ONLY — 0.
 * What a trace of the schedule must show (collectors' schedule evidence). */
int tp_linear_transfers(const tp_linear_plan *plan, int fwd, int bwd);

/* forward, then backward if the plan has one: one training step of the op. */
TP_MUST_CHECK tp_rc tp_linear_step(tp_group *group, const tp_linear_plan *plan,
                                   const tp_linear_tensors *t);

/* One output of an op that configurations of a case are compared on: y_i
 * and (with the backward) dw_i per weight, then dx. summed: ranks' partials
 * meet in it (the reduce-scatter side's y, the all-gather side's dx), so it
 * is judged within a tolerance for that many ranks; else bit for bit. */
typedef struct tp_linear_output {
  const char *name; /* "y", "y1", ..., "dw", "dw1", ..., "dx" */
  const void *ptr;  /* t's tensor */
  size_t count;     /* elements */
  int summed;
  int64_t reduction_len; /* longest dot product behind an element */
} tp_linear_output;

/* Fills out[0..max) with the plan's outputs on t and returns how many. */
int tp_linear_outputs(const tp_linear_plan *plan, const tp_linear_tensors *t, tp_linear_output *out,
                      int max);

/* The recipe's own checks of the outputs a stock step just wrote on t (the
 * fp8 recipe: each output against a float64 product of the dequantized
 * operands, and at TP > 1 each operand it gathered in fp8 against quantizing
 * the whole — collective, every rank calls it); forward: whether that step
 * ran the forward (pass bwd times the backward alone). out[0..*n), *n <=
 * max; *n = 0 for the identity recipe and for plans other than stock. */
TP_MUST_CHECK tp_rc tp_linear_judge(tp_group *group, const tp_linear_plan *plan,
                                    const tp_linear_tensors *t, int forward, tp_judgement *out,
                                    int max, int *n);

/* Bytes the recipe's own buffers hold (the fp8 recipe's quantized copies,
 * their scales and its communication's buffers; 0 for the identity recipe). */
size_t tp_linear_own_bytes(const tp_linear_plan *plan);

#endif /* TP_LINEAR_H */
