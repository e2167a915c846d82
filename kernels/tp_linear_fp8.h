/*
 * tp_linear_fp8.h — the fp8 recipe of the TP projection (issue 15; a recipe
 * of kernels/tp_linear.h since issue 29: callers plan and step it through
 * tp_linear.h, whose fp8 hooks, tp_linear_fp8_recipe.c, run the functions
 * below; the GPU tests call them directly too): the activation is stored in
 * bf16 like the identity recipe's, each step quantizes it
 * (kernels/tp_quant_device.h) and runs the scaled GEMM of each weight
 * (kernels/tp_gemm_scaled.h, on the group's cuBLASLt context) into a bf16
 * output.
 *
 *   step (timed)   quantize X [T, K] in the format (after the amax agreement
 *                  the shard rule asks for, an NCCL all-reduce max of the
 *                  local amax: nothing at TP 1), then Y_i = X · W_iᵀ per weight
 *   prepare        each weight quantized ONCE, outside the timed step (a
 *                  training step would quantize it once per step and reuse
 *                  it for every micro-batch; inference keeps it quantized)
 *   GEMMs alone    the scaled GEMMs on the X quantized by the last step
 *
 * Where it runs: TP 1 (stock and dist_gemm are the same there: no
 * communication), and the forward at TP > 1 with sequence parallelism:
 * the all-gather side moves the fp8 shard and its scales (comm fp8: NCCL
 * for stock, the fused pushes for dist_gemm) or the bf16 shard (comm bf16,
 * stock only), the reduce-scatter side reduces bf16 partials of fp8 GEMMs
 * (tp_linear_fp8_comm.h says how). The backward at TP > 1 (the same
 * recipe) is tp_linear_fp8_bwd.c's: amax agreements where a scale spans
 * ranks, dX's bf16 partials reduce-scattered on the all-gather side, dY's
 * fp8 shard and scales gathered on the reduce-scatter side, and the wgrad's
 * sequence-sharded operand transposed and quantized along T piece by piece,
 * gathered and re-placed (stock: NCCL; dist_gemm: the fused pushes).
 *
 * The backward (desc.backward), the recipe of tp_quant.h: forward operands
 * E4M3, gradients E5M2 with the same scale granularity as the operand they
 * stand beside, scales from the gradient's own amax. cuBLASLt's FP8 GEMMs
 * take both operands contiguous along the contraction (tp_gemm_scaled.h:
 * the "TN" form), so each operand is materialised K-major and quantized
 * along the contraction:
 *   dX = dY_i · W_i   (contraction N): dY_i [T, N] quantized E5M2 as it
 *                     lies (blocks along N: 1x128 for fp8-block, one scale
 *                     per token for fp8-row); W_iᵀ [K, N] transposed and
 *                     quantized E4M3 along N in PREPARE, untimed, like the
 *                     forward's copy (a training step quantizes a weight
 *                     once and reuses it): 128x128 blocks for fp8-block
 *                     (the same blocks as W's, transposed), one scale per
 *                     input feature for fp8-row, the tensor's amax for fp8;
 *                     with several weights each dX_i goes to its own bf16
 *                     buffer and one kernel sums them (fp32, one rounding);
 *   dW_i = dY_iᵀ · X  (contraction T): dY_iᵀ [N, T] (E5M2) and Xᵀ [K, T]
 *                     (E4M3) transposed and quantized along T in one pass
 *                     each in the timed step (so dY is quantized twice,
 *                     along N and along T; fp8 finds dY's tensor amax once
 *                     for both), 1x128 blocks on both for fp8-block
 *                     (DeepSeek-V3's 1x128 / 128x1 wgrad), a scale per
 *                     row of each for fp8-row.
 * The plan asks cuBLASLt's heuristic for each kind (forward, dgrad, wgrad)
 * and rejects in its words.
 *
 * tp_fp8_linear_check judges a step's output against a float64 product of
 * the DEQUANTIZED operands on sampled rows and columns, with tp_quant.h's
 * accumulation model for this device, and reports the error against the
 * float64 product of the unquantized bf16 operands (what quantization
 * costs) beside it.
 */
#ifndef TP_LINEAR_FP8_H
#define TP_LINEAR_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"
#include "common/tp_judgement.h"
#include "common/tp_vocab.h"
#include "kernels/tp_gemm_scaled.h"
#include "kernels/tp_group.h"
#include "kernels/tp_linear.h"
#include "kernels/tp_quant.h"

typedef struct tp_fp8_linear_desc {
  tp_dtype dtype;       /* an fp8 dtype: fp8, fp8-row, fp8-block, mxfp8 */
  tp_op op;             /* any; at TP 1 each is one GEMM per weight */
  int64_t tokens;       /* T */
  int64_t in_features;  /* K */
  int64_t out_features; /* N of each weight */
  int n_weights;        /* 1..TP_MAX_WEIGHTS */
  int backward;         /* also plan the backward (dX and every dW) */
  /* TP > 1 (zero: stock, auto, chunks auto, nothing quantized travels) */
  tp_backend backend;   /* stock, dist_gemm, or a reference (GEMM alone, collective alone) */
  tp_schedule schedule; /* dist_gemm's requested schedule */
  int chunks;           /* dist_gemm's chunks per shard: 0 (auto) or 1 */
  tp_comm_dtype comm;   /* all-gather side at TP > 1: BF16 or FP8; else NONE */
} tp_fp8_linear_desc;

/* The backward at TP > 1 (tp_linear_fp8_bwd.c): what the ranks agree on
 * and what travels. The wgrad contracts over T, so the operand that is
 * sequence-sharded (X on the all-gather side, dY on the reduce-scatter side)
 * is transposed and quantized along T piece by piece ([C, S] on every rank),
 * gathered rank-major and re-placed into the whole [C, T] (tp_quant.h's
 * column shards). */
typedef struct tp_fp8_bwd_comm {
  tp_amax_agreement dy_agreement; /* dY_i [T, N] as the op splits it (along N, or along T) */
  tp_amax_agreement t_agreement;  /* the transposed operand [C, T] split along T */
  int64_t t_rows;                 /* C: K (all-gather side) or N (reduce-scatter side) */
  float *grad_amax;               /* dY_i's agreed amax: 1 float, or T for fp8-row along N */
  float *t_amax;                  /* the transposed operand's: 1 float, or C for fp8-row */
  float *x_amax;                  /* reduce-scatter side, fp8: X's agreed tensor amax (for Xᵀ) */
  tp_scale_gather tgather;        /* its pieces' scales [C, S] and the whole's [C, T] */
  size_t piece_bytes;             /* C · S */
  uint8_t *pieces;                /* stock: every rank's piece, rank-major (own one in place) */
  void *piece_scales;             /* stock: every rank's piece scales, rank-major */
  tp_scale_gather dy_gather;      /* reduce-scatter side: dY's row shards [S, N] */
  uint8_t *dy_packet;             /* ... this rank's shard quantized: [bytes | scales] */
  void *dy_shard_scales;          /* inside dy_packet */
  size_t dy_packet_bytes;
  void *dy_gathered_scales; /* ... stock: every rank's dY shard scales, rank-major */
  void *dx_partial; /* all-gather side: dX's bf16 partial [T, K] before the reduce-scatter */
  tp_scale_shape
      dy_block_shape;    /* all-gather side, dist_gemm: one destination's dY rows [S, N/W] */
  void *dy_block_scales; /* ... their scales: weight i, block b at (i·W + b)·room */
  size_t dy_block_room;
  size_t symm_bytes; /* dist_gemm: the backward's symmetric workspace */
  size_t comm_bytes; /* bytes one rank sends in the backward */
} tp_fp8_bwd_comm;

typedef struct tp_fp8_linear {
  tp_fp8_linear_desc desc;
  tp_quant_format format;
  int world, rank;
  int64_t m, n, k;                 /* this rank's GEMM: m = T, n = N, k = K at TP 1 */
  tp_amax_agreement act_agreement; /* what the ranks agree on before quantizing X */
  tp_scale_shape x_scales_shape, w_scales_shape;
  uint8_t *xq;    /* X quantized, m x k */
  void *x_scales; /* its scales */
  float *amax;    /* the agreed amax (1 float, or m for rows); NULL when not needed */
  uint8_t *wq[TP_MAX_WEIGHTS];
  void *w_scales[TP_MAX_WEIGHTS];
  /* the backward (desc.backward): quantized operands along the contraction */
  tp_scale_shape dy_scales_shape;  /* dY_i [T, N], ACT, E5M2 */
  tp_scale_shape wt_scales_shape;  /* W_iᵀ [K, N], WEIGHT, E4M3 */
  tp_scale_shape dyt_scales_shape; /* dY_iᵀ [N, T], ACT, E5M2 */
  tp_scale_shape xt_scales_shape;  /* Xᵀ [K, T], ACT, E4M3 */
  uint8_t *wtq[TP_MAX_WEIGHTS];    /* from prepare */
  void *wt_scales[TP_MAX_WEIGHTS];
  uint8_t *dyq[TP_MAX_WEIGHTS];
  void *dy_scales[TP_MAX_WEIGHTS];
  uint8_t *dytq[TP_MAX_WEIGHTS];
  void *dyt_scales[TP_MAX_WEIGHTS];
  uint8_t *xtq;
  void *xt_scales;
  void *transposed;               /* bf16 scratch: W_iᵀ before quantizing (prepare) */
  float *dy_amax;                 /* fp8: dY_i's tensor amax, shared by dY_i and dY_iᵀ */
  void *dx_parts[TP_MAX_WEIGHTS]; /* n_weights > 1: dX_i (bf16), summed into dX */
  /* TP > 1 (tp_linear_fp8_comm.h) */
  tp_linear_plan base;    /* dist_gemm: the bf16 plan of the op (schedule, reason, sm blocks) */
  int fused;              /* dist_gemm runs the fused pipeline (not auto's stock path) */
  int64_t shard_rows;     /* S = T / W */
  tp_scale_gather gather; /* gather side: the shard's and the whole's X scale shapes */
  uint8_t *packet;        /* gather side: [shard fp8 rows | shard scales], 256-aligned parts */
  void *shard_scales;     /* inside packet */
  size_t packet_bytes;    /* one rank's slot of the fused gather */
  void *gathered_scales;  /* stock comm fp8: every rank's shard scales, rank-major */
  void *gathered_x;       /* comm bf16: AG(x) [T, K] bf16 */
  void *partial;          /* scatter side, stock: the bf16 partial [T, N] */
  tp_scale_shape block_scales_shape; /* scatter side, dist_gemm: one destination's [S, K/W] */
  void *block_scales;                /* ... W of them, block_scale_room bytes apart */
  size_t block_scale_room;
  tp_fp8_bwd_comm bwd; /* the backward at TP > 1 */
  /* a fused pass's amax agreements, over its schedule's own transport
   * (fp8_agree_max): every rank's local amax pushed into every peer's slot,
   * the max taken from the slots */
  size_t agree_offset[2]; /* the forward's and the backward's slots in the symmetric workspace */
  size_t agree_room;      /* one rank's slot: the most floats an agreement moves, 256-aligned */
  int agreeing;           /* 0: agreements through NCCL; 1 + pass: the fused pass's, pass 0 or 1 */
  int agree_next;         /* the running pass's next agreement */
  size_t symm_bytes;      /* dist_gemm: the symmetric workspace it needs */
  size_t comm_bytes;      /* bytes one rank sends per step */
  tp_gemm_scaled *gemm;   /* the group's (tp_group.gemm_scaled), borrowed */
  size_t quant_bytes;     /* the quantized copies, their scales and the amax */
  char reason[400];       /* a rejection's reason */
} tp_fp8_linear;

/* Plans the projection on this group (zeroes *out first; release it in every
 * case). TP_EREJECT with the reason in out->reason (and as the last error):
 * not an fp8 dtype, at TP > 1 a backward operand the placement rules turn
 * down (tp_linear_fp8_bwd.c), a comm dtype that does not apply
 * (NONE on the all-gather side, any on the reduce-scatter side, bf16 for
 * dist_gemm), dist_gemm chunks > 1 or a schedule that cannot carry fp8, a
 * shard the format cannot quantize locally (tp_quant_shard_check), or cuBLASLt's
 * heuristic turning the format down on this GPU (mxfp8 below sm_100), in
 * cuBLASLt's words. TP_ECUBLAS / TP_ECUDA for a library failure. */
TP_MUST_CHECK tp_rc tp_fp8_linear_plan(const tp_group *g, const tp_fp8_linear_desc *desc,
                                       tp_fp8_linear *out);

/* Allocates the quantized buffers and quantizes each bf16 weight w[i]
 * (device, this rank's shard: n x k) once, waited for; with the backward
 * also W_iᵀ. TP > 1 needs tp_fp8_linear_prepare_group instead. */
TP_MUST_CHECK tp_rc tp_fp8_linear_prepare(tp_fp8_linear *p, const void *const *w,
                                          cudaStream_t stream);

/* tp_fp8_linear_prepare, then at TP > 1 the communication's buffers and,
 * for a fused dist_gemm, the symmetric workspace (collective: every rank
 * calls it, in the same order). */
TP_MUST_CHECK tp_rc tp_fp8_linear_prepare_group(tp_group *g, tp_fp8_linear *p, const void *const *w,
                                                cudaStream_t stream);

/* Quantizes x (bf16, device, this rank's: T x K at TP 1) into p's buffers
 * (xq, x_scales: the m x k operand of the GEMM over all this rank's rows),
 * with the amax agreement p->act_agreement asks for (an all-reduce max over
 * the group's NCCL communicator); on the all-gather side at TP > 1 through
 * the gather of desc.comm (tp_linear_fp8_comm.h). Enqueued on stream. */
TP_MUST_CHECK tp_rc tp_fp8_linear_quantize_input(tp_group *g, tp_fp8_linear *p, const void *x,
                                                 cudaStream_t stream);

/* The scaled GEMM of every weight: y[i] (bf16, device, m x n) = X · W_iᵀ
 * from the quantized X and W_i (the scatter side at TP > 1: into p->partial,
 * y untouched). Enqueued on stream. */
TP_MUST_CHECK tp_rc tp_fp8_linear_gemms(tp_fp8_linear *p, void *const *y, cudaStream_t stream);

/* TP > 1: what travels in the step, alone (the collective-alone reference):
 * gather side comm fp8 the tensorwise agreement and the all-gather of the
 * shard's bytes and scales (from buffers a stock step filled), comm bf16
 * the all-gather of x; scatter side the bf16 reduce-scatter of p->partial
 * into y[0]. TP_EINTERNAL at TP 1. */
TP_MUST_CHECK tp_rc tp_fp8_linear_collective(tp_group *g, tp_fp8_linear *p, const void *x,
                                             void *const *y, cudaStream_t stream);

/* The timed step of desc.backend: TP 1 and stock's gather side
 * quantize_input, then gemms (stock's scatter side then the reduce-scatter);
 * dist_gemm the fused pipeline. */
TP_MUST_CHECK tp_rc tp_fp8_linear_forward(tp_group *g, tp_fp8_linear *p, const void *x,
                                          void *const *y, cudaStream_t stream);

/* The backward's quantizations (a plan with desc.backward): Xᵀ from x (bf16,
 * T x K), then per weight dY_i and dY_iᵀ from dy[i] (bf16, T x N), each
 * with its own amax (TP 1: nothing to agree on). At TP > 1 (stock plans
 * only) x and dy are this rank's tensors and the operands are made whole:
 * the agreements, the gathers and the re-placements (tp_linear_fp8_bwd.c).
 * Enqueued on stream. */
TP_MUST_CHECK tp_rc tp_fp8_linear_quantize_grads(tp_group *g, tp_fp8_linear *p, const void *x,
                                                 const void *const *dy, cudaStream_t stream);

/* The backward's scaled GEMMs on the quantized operands: dx (bf16, T x K) =
 * sum_i dY_i · W_i (the dgrad GEMMs, then the sum when n_weights > 1) and
 * dw[i] (bf16, N x K) = dY_iᵀ · X (the wgrad GEMMs). At TP > 1 on the
 * all-gather side the dgrad writes dX's local partial (p->bwd.dx_partial,
 * dx untouched). Enqueued on stream. */
TP_MUST_CHECK tp_rc tp_fp8_linear_backward_gemms(tp_fp8_linear *p, void *dx, void *const *dw,
                                                 cudaStream_t stream);

/* The timed backward: quantize_grads, then backward_gemms (at TP > 1 stock
 * then reduce-scatters dX's partial on the all-gather side; dist_gemm runs
 * its fused pipeline on the group's main stream). */
TP_MUST_CHECK tp_rc tp_fp8_linear_backward(tp_group *g, tp_fp8_linear *p, const void *x,
                                           const void *const *dy, void *dx, void *const *dw,
                                           cudaStream_t stream);

/* TP > 1, a stock plan: what the backward moves, alone, from buffers a stock
 * backward filled: the amax agreements, the gathers of the fp8 pieces and
 * shards with their scales, and on the all-gather side the bf16
 * reduce-scatter of dX's partial into dx. TP_EINTERNAL at TP 1. */
TP_MUST_CHECK tp_rc tp_fp8_linear_backward_collective(tp_group *g, tp_fp8_linear *p, void *dx,
                                                      cudaStream_t stream);

/* Frees what plan and prepare made (a zeroed or partly made p is fine). */
void tp_fp8_linear_release(tp_fp8_linear *p);

/* Bytes the projection holds besides the layer's bf16 tensors: its quantized
 * copies and scales, the communication's buffers and the symmetric workspace
 * it asks for. The cuBLASLt workspace is the group's, shared with every other
 * GEMM of the group and claimed for the plan's owner (TP_SHARED_GEMM), as a
 * bf16 projection's is. */
size_t tp_fp8_linear_workspace_bytes(const tp_fp8_linear *p);

/* The judgement of one output of a step against the float64 products. */
typedef struct tp_fp8_check {
  int64_t elements;    /* sampled elements */
  int64_t nonfinite;   /* of them not finite */
  int64_t outside;     /* of the finite ones outside tp_fp8_gemm_tolerance */
  double worst_ratio;  /* max |y - ref| / tolerance */
  double rel_err;      /* ||y - ref|| / ||ref||, ref the dequantized operands' product */
  double rel_tol;      /* ||tolerances|| / ||ref||: the bound as a relative norm */
  double max_abs_err;  /* max |y - ref| */
  double rel_err_bf16; /* ||y - ref16|| / ||ref16||, ref16 the unquantized bf16 operands' */
} tp_fp8_check;

/* Checks y (bf16, device, m x n, the output of weight `weight` after a
 * step on x) on up to `rows` rows and `cols` columns spread evenly over the
 * output (first and last included), against float64 products of the
 * operands downloaded from the device: quantized X and W with their scales,
 * and the bf16 x and w. model: tp_fp8_accum_model_of the device. Waits for
 * the device. At TP > 1 (stock): the scatter side checks the local partial
 * (p->partial, what its GEMM wrote; the reduction is NCCL's) in place of y;
 * the gather side's bf16 X is the gathered bf16 whole with comm bf16, and
 * absent with comm fp8 (no rank ever holds it: rel_err_bf16 is NaN). */
TP_MUST_CHECK tp_rc tp_fp8_linear_check(const tp_fp8_linear *p, int weight, const void *x,
                                        const void *w, const void *y, int rows, int cols,
                                        const tp_fp8_accum_model *model, tp_fp8_check *out);

/* The backward's outputs after a backward on x and dy, judged like
 * tp_fp8_linear_check (rows x cols sampled of the output): dx (T x K)
 * against sum_i of the float64 products of the dequantized dY_i and W_iᵀ
 * (the bound the sum of the products' bounds, plus the sum's bf16 rounding
 * when n_weights > 1), and against the unquantized bf16 dY_i · W_i. */
TP_MUST_CHECK tp_rc tp_fp8_linear_check_dx(const tp_fp8_linear *p, const void *const *dy,
                                           const void *const *w, const void *dx, int rows, int cols,
                                           const tp_fp8_accum_model *model, tp_fp8_check *out);

/* dw of weight `weight` (N x K) against the float64 product of the
 * dequantized dY_iᵀ and Xᵀ, and against the bf16 dY_iᵀ · X. */
TP_MUST_CHECK tp_rc tp_fp8_linear_check_dw(const tp_fp8_linear *p, int weight, const void *x,
                                           const void *dy, const void *dw, int rows, int cols,
                                           const tp_fp8_accum_model *model, tp_fp8_check *out);

/* One gathered operand against the whole's quantization (tp_fp8_linear_check_wholes). */
typedef struct tp_fp8_whole_check {
  char name[24];       /* "x:whole", "xt:whole", "dy:whole", "dyt:whole" */
  int64_t bytes;       /* fp8 bytes compared */
  int64_t differ;      /* of them: not the whole's */
  int64_t scale_bytes; /* stored scale bytes compared (padding included) */
  int64_t scale_differ;
} tp_fp8_whole_check;

/* At TP > 1, after a stock step (a stock plan; other backends and TP 1: *n
 * = 0): each operand the step gathered in fp8 — X with comm_dtype fp8, and
 * with the backward Xᵀ (all-gather side) or dY and dYᵀ (reduce-scatter
 * side), from this rank's x or dy0 (bf16 shards as the step read them) —
 * against quantizing the whole, which the check gathers in bf16 (an NCCL
 * all-gather: collective, every rank calls it in the same order), byte for
 * byte, data and scales. The float64 checks judge a GEMM against the
 * operands it read; this one catches a misplaced piece, a wrong re-placement
 * or a missed amax agreement. Up to max entries into out. */
TP_MUST_CHECK tp_rc tp_fp8_linear_check_wholes(tp_group *g, const tp_fp8_linear *p, const void *x,
                                               const void *dy0, tp_fp8_whole_check *out, int max,
                                               int *n);

/* ---- the recipe's face (tp_linear_fp8_recipe.c) ---------------------------------------- */

/* The fp8 projection behind a tp_linear plan of the fp8 recipe (its state;
 * a twin's is its source's); NULL for another recipe. What the layers'
 * checks read (bench/gpu/block_fp8.c). */
tp_fp8_linear *tp_linear_fp8_of(const tp_linear_plan *plan);

/* out, zeroed, holds k's judgement against float64 products of the
 * dequantized operands under the name "NAME:fp64": failed where an element
 * is not finite or outside its bound; the caller writes the reason. */
void tp_fp8_check_record(const tp_fp8_check *k, const char *name, tp_judgement *out);

/* out, zeroed, holds w (a gathered fp8 operand against quantizing the
 * whole, tp_fp8_linear_check_wholes) as an exact check: named PREFIX + w's
 * name (prefix "" or a projection's "qkv "), failed where a byte differs,
 * the reason written (what dtype names the format). */
void tp_fp8_whole_check_record(const tp_fp8_whole_check *w, const char *prefix, tp_dtype dtype,
                               tp_judgement *out);

#endif /* TP_LINEAR_FP8_H */
