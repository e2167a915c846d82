/*
 * block.h — the layers `tpbench run` times, composed from kernels/ APIs:
 * the attention block (RMSNorm, fused QKV with grouped-query heads, RoPE,
 * causal attention core, wo), the FFN block (RMSNorm, w1/w3 through one
 * all-gather, SwiGLU, w2) and the transformer block of the two, each with
 * its residual add. Forward and backward; stock or dist_gemm.
 *
 * Only the four TP projections (kernels/tp_linear.h) depend on the backend;
 * everything else is the same code in every backend, so the difference
 * measured is the TP path alone. The projections are tp_linear plans of one
 * recipe (kernels/tp_recipe.h): the tensors' dtype, or an fp8 format
 * (shape.proj_dtype, issue 15), whose four projections quantize their
 * operands and run scaled GEMMs as `ops` does, everything else staying bf16
 * (block_fp8.h holds that layer's own checks). GEMM_ONLY runs the block with
 * its projections' GEMMs alone (everything but the collectives), COMM_ONLY
 * runs the projections' collectives alone and nothing else: the two halves
 * whose maximum bounds the block.
 *
 * Placement (bench/matrix/placement.h, checked when the plan is made). W ranks,
 * B batch, S sequence, T = S·B tokens, rows in (seq, batch) order (row =
 * s·B + b). With sequence parallelism (sp) the block's input, output and
 * gradients are sequence-sharded: this rank holds rows [rank·T/W, +T/W) of
 * [T, D]; RMSNorm runs on those rows; QKV's all-gather gives all T rows, and
 * attention runs over the full sequence with the local heads (n_heads/W
 * query heads, n_kv_heads/W KV heads); wo reduce-scatters back to the
 * sequence shard (FFN likewise with F/W columns). With sp off (stock only)
 * activations are replicated [T, D] on every rank and the row-parallel ops
 * all-reduce.
 *
 * Activation checkpointing (shape.ac; bench/matrix/activation.h says what
 * each mode keeps and counts its bytes). The forward is the same in every
 * mode but one op: under selective RoPE writes the rotated Q and K into
 * attn.qkv_rot and leaves qkv as the projection wrote it. The backward
 * starts with the recomputation, inside the timed step, then runs as under
 * none:
 *   none       nothing recomputed.
 *   selective  attention: RMSNorm forward (h, inv_rms from the part's input),
 *              RoPE (qkv -> qkv_rot); block: the residual add x1 = x +
 *              attention's y; FFN: RMSNorm forward (from x1 in the block),
 *              SwiGLU forward (m from a and b). Not recomputed: the
 *              projections (their outputs are kept), the attention core (o and
 *              P are kept), the last residual add (its sum y is not read).
 *   full       the whole forward again, every op of tp_block_forward: RMSNorm,
 *              qkv with its all-gather, RoPE, the core, wo with its
 *              reduce-scatter, the residual adds, RMSNorm, w1/w3 with their
 *              all-gather, SwiGLU, w2 with its reduce-scatter (through the same
 *              tp_linear calls and tensors as the forward; y is written again,
 *              with the same values).
 * Every mode gives the same outputs (y, dx, every weight and gain gradient)
 * bit for bit on the same tensors: the recomputed ops are the forward's own
 * kernels on the same inputs. COMM_ONLY recomputes only collectives (full:
 * the forward's again); GEMM_ONLY every op but them.
 *
 * Local weight layouts (this rank's shard of the global weight):
 *   w_qkv [(hq + 2·hkv)·d, D]  rows: its hq query heads of Wq, then its hkv
 *                              heads of Wk, then of Wv (global rows
 *                              r·hq·d.., H·d + r·hkv·d.., H·d + Hkv·d + r·hkv·d..)
 *   w_o   [D, hq·d]            columns r·hq·d .. of the global [D, H·d]
 *   w1,w3 [F/W, D]             rows r·F/W ..
 *   w2    [D, F/W]             columns r·F/W ..
 *   RMSNorm gains [D]          replicated; their gradients dg are this
 *                              rank's partial sums with sp on (a framework
 *                              all-reduces them with the data-parallel
 *                              gradients), complete with sp off.
 */
#ifndef TP_BENCH_BLOCK_H
#define TP_BENCH_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "bench/matrix/activation.h"
#include "kernels/tp_layers.h"
#include "kernels/tp_linear.h"

/* A block's global shape and options. */
typedef struct tp_block_shape {
  tp_layer layer;
  tp_dtype dtype;
  int64_t batch, seq;
  int64_t dim, n_heads, n_kv_heads, head_dim, ffn_hidden;
  int sp;            /* sequence parallelism */
  int backward;      /* the plan runs the backward too */
  int save_gathered; /* the all-gather side keeps AG(x) for its backward */
  /* An fp8 dtype (tp_dtype_is_fp8): the four TP projections run the fp8
   * recipe (quantized operands, scaled FP8 GEMMs), dtype must be bf16; any
   * other value (zero-initialised: bf16) runs them in dtype. */
  tp_dtype proj_dtype;
  tp_ac ac;               /* activation checkpointing: none unless backward; full refuses
                             save_gathered (the plan rejects both) */
  tp_rs_sum rs_sum;       /* dist_gemm's reduce-scatter sum in every projection (tp_linear_desc) */
  tp_symm_transport symm; /* dist_gemm's symmetric memory in every projection (tp_linear_desc);
                             IPC for the other backends */
  tp_comm_dtype comm;     /* an fp8 layer at TP > 1: what qkv and w13 gather (bf16 or fp8;
                             block_fp8.h); NONE otherwise */
} tp_block_shape;

/* The block's TP projections, in layer order. */
typedef enum { TP_PROJ_QKV = 0, TP_PROJ_WO, TP_PROJ_W13, TP_PROJ_W2, TP_N_PROJ } tp_block_proj;
const char *tp_block_proj_name(tp_block_proj proj); /* "qkv", "wo", "w13", "w2" */

/* The op, global shape, pass and recipe (the dtype: an fp8 format or the
 * tensors' own; what the gathering ones move) of one projection of a block. */
tp_linear_desc tp_block_proj_desc(const tp_block_shape *shape, tp_block_proj proj);

typedef struct tp_block_plan {
  tp_block_shape shape;
  tp_backend backend;
  int world, rank;
  int64_t tokens;                 /* T */
  int64_t local_rows;             /* rows of x, y, dy, dx on this rank: T/W with sp, T without */
  int64_t hq, hkv;                /* local heads */
  int64_t ffn_local;              /* F/W */
  int has[TP_N_PROJ];             /* which projections the block has */
  tp_linear_plan proj[TP_N_PROJ]; /* each in the shape's recipe (tp_block_proj_desc) */
  tp_attention_shape attn;        /* the local heads over the whole sequence */
  size_t symm_bytes;              /* symmetric workspace: max over the projections (dist_gemm) */
  size_t scratch_bytes;           /* private scratch: max over the projections (the others) */
  size_t window_bytes;            /* the group's window scratch: max over the projections (the
                                     stock variant on NCCL symmetric windows, kernels/tp_window.h) */
  size_t saved_bytes;             /* gathered inputs kept for the backward: a sum */
  size_t comm_bytes;              /* per rank per step: a sum over the projections (ac=full: with
                                     the recomputed forward's again) */
  int64_t activation_bytes;       /* per rank: what the forward leaves for the backward under
                                     shape.ac (tp_activation_saved); 0 without a backward */
} tp_block_plan;

/* Plans every projection for backend (schedule and chunks: dist_gemm's
 * request) and checks the block's placement contracts and its recipe's
 * rules (kernels/tp_recipe_rules.h). TP_EREJECT with the reason ("qkv:
 * ...", "placement: ...", "ac=...") when it cannot run here. A plan of a
 * recipe with buffers of its own (fp8) holds memory: tp_block_release it in
 * every case. */
TP_MUST_CHECK tp_rc tp_block_plan_make(const tp_group *group, const tp_block_shape *shape,
                                       tp_backend backend, tp_schedule requested, int chunks,
                                       tp_block_plan *out);

/* The stock block (schedule AUTO or NCCL_WINDOW) whose step fills what a
 * reference plan p's projections read (tp_linear_twin of each): bf16
 * projections of its own, run on the reference's private scratches
 * (tp_block_tensors.proj_scratch, proj[k].workspace_bytes each); fp8 views of
 * p's quantized buffers (no scratch). Release it before p. */
TP_MUST_CHECK tp_rc tp_block_plan_twin(const tp_group *group, const tp_block_plan *p,
                                       tp_backend backend, tp_schedule requested,
                                       tp_block_plan *out);

/* Frees what the projections' plans hold (an fp8 recipe's buffers; nothing
 * otherwise); a zeroed plan is fine. */
void tp_block_release(tp_block_plan *plan);

/* The tensors this rank's forward leaves for the backward under the plan's
 * ac (tp_activation_saved of its shape; their sum is activation_bytes). */
void tp_block_kept(const tp_block_plan *plan, tp_activation_set *out);

/* Collective (dist_gemm grows the symmetric workspace on every rank):
 * workspaces and scratch of every projection (an fp8 recipe's are made with
 * its weights: tp_block_prepare_weights). */
TP_MUST_CHECK tp_rc tp_block_prepare(tp_group *group, const tp_block_plan *plan);

/* Bytes the projections' recipes hold of their own (fp8: quantized copies,
 * scales, the communication's buffers); 0 for bf16 and fp32. */
size_t tp_block_own_bytes(const tp_block_plan *plan);

/* One projection's forward or backward as the plan runs it (tp_linear_forward
 * / _backward of its plan): what block_run.c calls for every projection. */
TP_MUST_CHECK tp_rc tp_block_proj_forward(tp_group *group, const tp_block_plan *plan,
                                          tp_block_proj proj, const tp_linear_tensors *t);
TP_MUST_CHECK tp_rc tp_block_proj_backward(tp_group *group, const tp_block_plan *plan,
                                           tp_block_proj proj, const tp_linear_tensors *t);

/* Transfers one rank issues per step (tp_linear_transfers summed; ac=full
 * adds the recomputed forward's). */
int tp_block_transfers(const tp_block_plan *plan);

/* This rank's tensors of a block (NULL where the block or pass has none).
 * Shapes with L = local_rows, T tokens, D dim, q = hq·d, k = (hq + 2·hkv)·d
 * (the local QKV width), f = F/W. Every tensor is allocated for the shape,
 * whatever the backend; inputs, weights and gains are random, and so is the
 * rest at first, so a GEMM-alone run never reads uninitialised memory. */
typedef struct tp_block_attn {
  void *g, *h;    /* [D] gain; [L, D] normed input */
  float *inv_rms; /* [L] */
  void *w_qkv;    /* [k, D] */
  void *qkv;      /* [T, k] (rotated in place by RoPE but under ac=selective) */
  void *qkv_rot;  /* [T, k] ac=selective: RoPE's output, recomputed in the backward */
  void *probs;    /* softmax P, tp_attention_saved_bytes */
  void *ws;       /* the core's workspace (backward-sized when the plan has one) */
  void *o;        /* [T, q] attention output */
  void *w_o;      /* [D, q] */
  void *y;        /* [L, D] wo's output */
  void *saved;    /* [T, D] gathered h, when saved */
  void *dg, *dh, *dw_qkv, *dqkv, *d_o, *dw_o; /* backward: like their tensors */
} tp_block_attn;

typedef struct tp_block_ffn {
  void *g, *h;
  float *inv_rms;
  void *w1, *w3; /* [f, D] each */
  void *a, *b;   /* [T, f]: w1's and w3's outputs; in the backward their gradients */
  void *m;       /* [T, f] silu(a)·b */
  void *w2;      /* [D, f] */
  void *y;       /* [L, D] */
  void *saved;   /* [T, D] */
  void *dg, *dh, *dw1, *dw3, *dm, *dw2;
} tp_block_ffn;

typedef struct tp_block_tensors {
  void *x, *y, *dy, *dx; /* [L, D]: the block's input, output and their gradients */
  void *x1, *dx1;        /* the full block: x + attention(x), and its gradient */
  void *dx_part;         /* the full block: a part's input gradient before the residual's */
  float *rope_table;     /* cos/sin for positions [0, S) */
  float *norm_ws;        /* RMSNorm backward's workspace */
  tp_block_attn attn;
  tp_block_ffn ffn;
  /* Each projection's own stock-path scratch (NULL: the group's, shared by
   * all): set by a reference configuration while it runs, so its GEMMs read
   * what its projection's collective delivered, not another op's data. */
  void *proj_scratch[TP_N_PROJ];
  /* tp_block_alloc_window: the NCCL symmetric window every tensor is carved
   * from, and its group (NULL: each tensor its own cudaMalloc) */
  void *window;
  tp_group *window_group;
} tp_block_tensors;

/* Allocates and fills the tensors for plan's shape (seed: per case; rank
 * mixed in for sharded tensors, left out for replicated ones, so replicated
 * activations without sp hold the same numbers on every rank). The tensors
 * only an ac mode has come last, so every ac mode of one shape and seed gets
 * the same inputs and weights. On failure everything allocated is freed
 * (TP_EOOM when the device is full). */
TP_MUST_CHECK tp_rc tp_block_alloc(tp_group *group, const tp_block_plan *plan, uint64_t seed,
                                   tp_block_tensors *t);

/* The same tensors with the same numbers (the same seed gives what
 * tp_block_alloc gives), all carved from one NCCL symmetric window of the
 * group (collective: kernels/tp_window.h): the tensors of the stock
 * variant on windows, whose collectives need both of their buffers in
 * one. TP_EREJECT with NCCL's reason where the communicator has none. */
TP_MUST_CHECK tp_rc tp_block_alloc_window(tp_group *group, const tp_block_plan *plan, uint64_t seed,
                                          tp_block_tensors *t);
void tp_block_free(tp_block_tensors *t);

/* The projections whose recipe keeps its own copy of the weights (fp8):
 * each weight of t quantized once (and its transpose with the backward),
 * waited for; at TP > 1 their communication's buffers and a fused
 * pipeline's symmetric workspace (collective). Nothing for bf16 or fp32. */
TP_MUST_CHECK tp_rc tp_block_prepare_weights(tp_group *group, const tp_block_plan *plan,
                                             const tp_block_tensors *t);

/* One step of p's stock twin on t (planned, stepped, released): what a
 * reference's window reads, as its `before` leaves it. */
TP_MUST_CHECK tp_rc tp_block_twin_step(tp_group *group, const tp_block_plan *p,
                                       tp_block_tensors *t);

/* Refills the block's data, its input x and (with a backward) the output
 * gradient dy, from seed: data-parallel ranks each get their own batch
 * (bench/gpu/fsdp.h), while the weights stay the TP group's. */
TP_MUST_CHECK tp_rc tp_block_reseed_data(tp_group *group, const tp_block_plan *plan,
                                         tp_block_tensors *t, uint64_t seed);

/* A parameter of the block (this rank's TP shard of it) and its gradient
 * (NULL without a backward), row-major with `rows` rows: what FSDP shards
 * along dim 0 (bench/matrix/placement.h's mesh: dp shard(0) of the TP shard). */
typedef struct tp_block_param {
  const char *name;
  void *weight, *grad;
  int64_t rows, cols;
} tp_block_param;

enum { TP_BLOCK_MAX_PARAMS = 8 };

/* The block's parameters in layer order (attention's gain, w_qkv, w_o, then
 * the FFN's gain, w1, w3, w2); returns the count. */
int tp_block_params(const tp_block_plan *plan, const tp_block_tensors *t, tp_block_param *out);

/* Enqueued on the group's main stream; host-asynchronous. */
TP_MUST_CHECK tp_rc tp_block_forward(tp_group *group, const tp_block_plan *plan,
                                     tp_block_tensors *t);
TP_MUST_CHECK tp_rc tp_block_backward(tp_group *group, const tp_block_plan *plan,
                                      tp_block_tensors *t);

/* One step: makes sure the workspace is there (as a framework's op grows
 * it lazily; while frozen for graph capture a growth fails with
 * TP_EREJECT), the forward, and the backward if planned. */
TP_MUST_CHECK tp_rc tp_block_step(tp_group *group, const tp_block_plan *plan, tp_block_tensors *t);

/* Where a step lets other work in (FSDP's side-stream collectives,
 * bench/gpu/fsdp.h): before the forward, before the backward (with one), at
 * the end. Each call enqueues; the step stops at the first failure. */
typedef enum { TP_STEP_FORWARD = 0, TP_STEP_BACKWARD, TP_STEP_END } tp_step_point;
typedef struct tp_step_hooks {
  tp_rc (*at)(void *ctx, tp_group *group, tp_step_point point);
  void *ctx;
} tp_step_hooks;

/* tp_block_step with hooks (NULL: tp_block_step). */
TP_MUST_CHECK tp_rc tp_block_step_hooked(tp_group *group, const tp_block_plan *plan,
                                         tp_block_tensors *t, const tp_step_hooks *hooks);

/* The tensors a block's configurations are compared on: y; with backward
 * also dx, every weight gradient and the RMSNorm gain gradients. */
typedef struct tp_block_output {
  const char *name;
  void *ptr;
  size_t count;
} tp_block_output;

enum { TP_BLOCK_MAX_OUTPUTS = 12 };

/* Fills out (TP_BLOCK_MAX_OUTPUTS at most) and returns the count. */
int tp_block_outputs(const tp_block_plan *plan, const tp_block_tensors *t, tp_block_output *out);

/* A tensor the forward writes (other than the block's output y), named as
 * tp_activation_saved names what it keeps: the candidates for keeping. */
typedef struct tp_block_tensor {
  const char *name;
  void *ptr;
  size_t bytes;
  tp_dtype dtype; /* inv_rms: fp32; the rest the block's */
} tp_block_tensor;

enum { TP_BLOCK_MAX_FORWARD_TENSORS = 20 };

/* Fills out (TP_BLOCK_MAX_FORWARD_TENSORS at most) with every such tensor the
 * plan's block has, x included; returns the count. */
int tp_block_forward_tensors(const tp_block_plan *plan, const tp_block_tensors *t,
                             tp_block_tensor *out);

#endif
