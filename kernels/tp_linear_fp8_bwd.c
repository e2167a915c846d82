/*
 * tp_linear_fp8_bwd.c — the fp8 projection's backward at TP > 1 (sequence
 * parallelism on): the plan's placement rules and shapes, the buffers, the
 * stock path (NCCL: amax agreements, gathers of fp8 bytes and scales, the
 * bf16 reduce-scatter of dX's partials) and the fused dist_gemm pipelines of
 * both sides. tp_linear_fp8.h states the recipe; what travels:
 *
 *   all-gather side (column-parallel: x [S, K], dY_i [T, N/W], dX [S, K])
 *     dgrad  dY_i quantized along N/W (its amax agreed: a row of the whole
 *            dY spans every rank), dX's bf16 partial [T, K] = sum_i dY_i ·
 *            W_i, reduce-scattered in bf16 (stock: NCCL; dist_gemm: each
 *            destination's rows computed and pushed, summed in fp32)
 *     wgrad  Xᵀ [K, T]: every rank transposes and quantizes its piece [K, S]
 *            along T (the amax agreed where a scale spans ranks), the
 *            pieces and their scales gathered and re-placed; dY_iᵀ [N/W, T]
 *            is local
 *   reduce-scatter side (row-parallel: x [T, K/W], dY [S, N], dX [T, K/W])
 *     dgrad  dY's shard quantized along N and gathered with its scales
 *            (stock: NCCL, then the scales re-placed; dist_gemm: pushed
 *            whole, each rank's rows of dX computed as its shard lands)
 *     wgrad  dYᵀ [N, T] in pieces as Xᵀ above; Xᵀ [K/W, T] is local
 *
 * dist_gemm's dX reduce-scatter and dY all-gather run on the shared
 * pipelines (tp_linear_fused.c: payloads, LINEAR_SUM_SLOTS); its amax
 * agreements go over the schedule's own pushes (fp8_agree_max), so the pass
 * moves nothing through NCCL. The weights' transposes are quantized per
 * shard in prepare (untimed), as the forward's weights are: a rank's weight
 * shard never meets another's in one GEMM.
 */
#include "kernels/tp_linear_fp8_comm.h"

#include <string.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_linear_internal.h"
#include "kernels/tp_quant_device.h"
#include "kernels/tp_symm.h"

/* Regions of the symmetric workspace start 256 bytes apart. */
static size_t room(size_t bytes) { return (bytes + 255) / 256 * 256; }

static int gathers(const tp_fp8_linear *p) { return tp_op_gathers(p->desc.op); }

static size_t piece_scale_bytes(const tp_fp8_linear *p) {
  return tp_quant_scale_bytes(&p->bwd.tgather.shard);
}

/* Pieces and their scales sit 256 bytes apart from rank to rank (the copy
 * kernel's pushes move 16-byte multiples between aligned addresses; NCCL
 * moves the padding too, at most 255 bytes of each). */
static size_t piece_stride(const tp_fp8_linear *p) { return room(p->bwd.piece_bytes); }

static size_t piece_scale_stride(const tp_fp8_linear *p) { return room(piece_scale_bytes(p)); }

/* ---- plan ------------------------------------------------------------------------------------ */

/* cuBLASLt's answer for the dgrad and wgrad GEMMs this side runs (the fused
 * pipelines' dgrad takes one rank's rows at a time). */
static tp_rc plan_gemms(tp_fp8_linear *p) {
  const int64_t dgrad_m = p->fused ? p->shard_rows : p->m;
  TP_TRY(tp_gemm_scaled_supported_kind(p->gemm, TP_GEMM_SCALED_DGRAD, p->format, dgrad_m, p->k,
                                       p->n, p->reason, sizeof p->reason));
  return tp_gemm_scaled_supported_kind(p->gemm, TP_GEMM_SCALED_WGRAD, p->format, p->n, p->k, p->m,
                                       p->reason, sizeof p->reason);
}

tp_rc fp8_bwd_plan(tp_fp8_linear *p) {
  tp_fp8_bwd_comm *b = &p->bwd;
  const tp_quant_format f = p->format;
  const int64_t w = p->world, s = p->shard_rows;
  /* the placement rules and agreements were the plan's first step (kernels/tp_recipe_rules.h) */
  TP_TRY(tp_quant_scale_shape(f, TP_QROLE_ACT, p->m, p->n, &p->dy_scales_shape));
  TP_TRY(tp_quant_scale_shape(f, TP_QROLE_WEIGHT, p->k, p->n, &p->wt_scales_shape));
  TP_TRY(tp_quant_scale_shape(f, TP_QROLE_ACT, p->n, p->m, &p->dyt_scales_shape));
  TP_TRY(tp_quant_scale_shape(f, TP_QROLE_ACT, p->k, p->m, &p->xt_scales_shape));
  TP_TRY(tp_scale_gather_cols_shape(f, b->t_rows, s, p->world, &b->tgather));
  b->piece_bytes = (size_t)(b->t_rows * s);
  b->tgather.rank_stride = (int64_t)(piece_scale_stride(p) / b->tgather.shard.elem_bytes);
  const size_t pieces = (size_t)w * piece_stride(p),
               piece_scales = tp_scale_gather_bytes(&b->tgather);
  const size_t moved_pieces = (size_t)(w - 1) * (b->piece_bytes + piece_scale_bytes(p));
  if (gathers(p)) {
    const size_t slot = (size_t)(s * p->k) * 2;
    TP_TRY(tp_quant_scale_shape(f, TP_QROLE_ACT, s, p->n, &b->dy_block_shape));
    b->dy_block_room = room(tp_quant_scale_bytes(&b->dy_block_shape));
    b->comm_bytes = moved_pieces + (size_t)(w - 1) * slot;
    /* W receive slots and W - 1 staging for dX's partials, then the pieces */
    b->symm_bytes = room((size_t)(2 * w - 1) * slot) + pieces + piece_scales;
  } else {
    TP_TRY(tp_scale_gather_shape(f, s, p->n, p->world, &b->dy_gather));
    const size_t dy_scales = tp_quant_scale_bytes(&b->dy_gather.shard);
    b->dy_packet_bytes = room((size_t)(s * p->n)) + room(dy_scales);
    b->comm_bytes = moved_pieces + (size_t)(w - 1) * ((size_t)(s * p->n) + dy_scales);
    b->symm_bytes = (size_t)w * b->dy_packet_bytes + pieces + piece_scales;
  }
  if (!p->fused) b->symm_bytes = 0;
  return plan_gemms(p);
}

/* Where the pieces and their scales sit in a rank's symmetric workspace. */
static size_t pieces_offset(const tp_fp8_linear *p) {
  const int64_t w = p->world, s = p->shard_rows;
  if (gathers(p)) return room((size_t)((2 * w - 1) * s * p->k) * 2);
  return (size_t)w * p->bwd.dy_packet_bytes;
}

static size_t piece_scales_offset(const tp_fp8_linear *p) {
  return pieces_offset(p) + (size_t)p->world * piece_stride(p);
}

/* ---- buffers --------------------------------------------------------------------------------- */

static size_t agreement_floats(tp_amax_agreement a, int64_t rows) {
  return a == TP_AMAX_LOCAL ? 0 : a == TP_AMAX_AGREE_ROWS ? (size_t)rows : 1;
}

static tp_rc alloc_floats(tp_fp8_linear *p, float **out, size_t n) {
  return n ? fp8_device_alloc(p, (void **)out, n * sizeof(float)) : TP_OK;
}

tp_rc fp8_bwd_prepare(tp_fp8_linear *p) {
  tp_fp8_bwd_comm *b = &p->bwd;
  TP_TRY(alloc_floats(p, &b->grad_amax, agreement_floats(b->dy_agreement, p->m)));
  /* the reduce-scatter side's tensorwise dYᵀ takes dY's agreed amax (grad_amax) */
  const int own_t_amax = b->t_agreement == TP_AMAX_AGREE_ROWS ||
                         (b->t_agreement == TP_AMAX_AGREE_TENSOR && gathers(p));
  if (own_t_amax) TP_TRY(alloc_floats(p, &b->t_amax, agreement_floats(b->t_agreement, b->t_rows)));
  if (p->format == TP_QFMT_FP8 && !gathers(p)) TP_TRY(alloc_floats(p, &b->x_amax, 1));
  if (!gathers(p)) {
    TP_TRY(fp8_device_alloc(p, (void **)&b->dy_packet, b->dy_packet_bytes));
    b->dy_shard_scales = b->dy_packet + room((size_t)(p->shard_rows * p->n));
  }
  if (p->fused) {
    if (gathers(p))
      TP_TRY(fp8_device_alloc(p, &b->dy_block_scales,
                              (size_t)(p->desc.n_weights * p->world) * b->dy_block_room));
    return TP_OK;
  }
  TP_TRY(fp8_device_alloc(p, (void **)&b->pieces, (size_t)p->world * piece_stride(p)));
  TP_TRY(fp8_device_alloc(p, &b->piece_scales, tp_scale_gather_bytes(&b->tgather)));
  if (gathers(p)) return fp8_device_alloc(p, &b->dx_partial, (size_t)(p->m * p->k) * 2);
  return fp8_device_alloc(p, &b->dy_gathered_scales, tp_scale_gather_bytes(&b->dy_gather));
}

void fp8_bwd_release(tp_fp8_linear *p) {
  tp_fp8_bwd_comm *b = &p->bwd;
  void *bufs[] = {b->grad_amax,          b->t_amax,     b->x_amax,
                  b->dy_packet,          b->pieces,     b->piece_scales,
                  b->dy_gathered_scales, b->dx_partial, b->dy_block_scales};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) tp_device_release(bufs[i]);
}

/* ---- agreements and quantizations ------------------------------------------------------------ */

/* The ranks' max of a's local amax into amax (agreement a's floats), when the rule asks. */
static tp_rc agree(tp_group *g, tp_fp8_linear *p, tp_amax_agreement agreement,
                   const tp_quant_args *a, float *amax, cudaStream_t stream) {
  if (agreement == TP_AMAX_LOCAL) return TP_OK;
  TP_TRY(tp_quant_local_amax_enqueue(a, amax, stream));
  return fp8_agree_max(g, p, amax, agreement_floats(agreement, a->rows), stream);
}

/* This rank's piece [C, S] of the transposed operand from src [S, C] (bf16),
 * quantized along T into q and scales; tensor_amax: fp8's agreed amax. */
static tp_rc quantize_piece(tp_group *g, tp_fp8_linear *p, tp_fp8_type elem, const void *src,
                            const float *tensor_amax, uint8_t *q, void *scales,
                            cudaStream_t stream) {
  tp_fp8_bwd_comm *b = &p->bwd;
  tp_quant_args a = fp8_quant_of(p, TP_QROLE_ACT, elem, src, p->shard_rows, b->t_rows);
  a.q = q;
  a.scales = scales;
  if (b->t_agreement == TP_AMAX_AGREE_ROWS) {
    TP_TRY(tp_quant_transpose_local_amax_enqueue(&a, b->t_amax, stream));
    TP_TRY(fp8_agree_max(g, p, b->t_amax, (size_t)b->t_rows, stream));
    a.agreed_amax = b->t_amax;
  } else if (b->t_agreement == TP_AMAX_AGREE_TENSOR) {
    a.agreed_amax = tensor_amax;
  }
  return tp_quant_transpose_quantize_enqueue(&a, stream);
}

/* The whole transposed operand [C, T] and its scales from every rank's piece. */
static tp_rc place_pieces(const tp_fp8_linear *p, const uint8_t *pieces, const void *scales,
                          uint8_t *whole, void *whole_scales, cudaStream_t stream) {
  const tp_fp8_bwd_comm *b = &p->bwd;
  TP_TRY(tp_quant_replace_columns_enqueue(pieces, piece_stride(p), p->world, b->t_rows,
                                          p->shard_rows, whole, stream));
  return tp_quant_replace_gathered_enqueue(&b->tgather, scales, whole_scales, stream);
}

/* X's tensor amax agreed over the ranks (fp8), from this rank's x (rows x
 * cols; q and scales: the quantization that follows, which the arguments'
 * check asks for though the amax reads x alone). */
static tp_rc agree_x_tensor(tp_group *g, tp_fp8_linear *p, const void *x, int64_t rows,
                            int64_t cols, uint8_t *q, void *scales, float *amax,
                            cudaStream_t stream) {
  tp_quant_args a = fp8_quant_of(p, TP_QROLE_ACT, TP_FP8_E4M3, x, rows, cols);
  a.q = q;
  a.scales = scales;
  return agree(g, p, TP_AMAX_AGREE_TENSOR, &a, amax, stream);
}

/* dY_i [T, N/W] along N, its amax agreed (all-gather side, both paths use the agreed amax). */
static tp_rc agree_dy(tp_group *g, tp_fp8_linear *p, int i, const void *dy, cudaStream_t stream) {
  tp_quant_args a = fp8_quant_of(p, TP_QROLE_ACT, TP_FP8_E5M2, dy, p->m, p->n);
  a.q = p->dyq[i];
  a.scales = p->dy_scales[i];
  return agree(g, p, p->bwd.dy_agreement, &a, p->bwd.grad_amax, stream);
}

/* dY_iᵀ [N/W, T] along T (all-gather side: dY holds every token here; fp8
 * takes dY's agreed tensor amax, the rest is local). */
static tp_rc quantize_dyt_local(tp_fp8_linear *p, int i, const void *dy, cudaStream_t stream) {
  tp_quant_args a = fp8_quant_of(p, TP_QROLE_ACT, TP_FP8_E5M2, dy, p->m, p->n);
  a.q = p->dytq[i];
  a.scales = p->dyt_scales[i];
  if (p->format == TP_QFMT_FP8) a.agreed_amax = p->bwd.grad_amax;
  return tp_quant_transpose_quantize_enqueue(&a, stream);
}

/* Xᵀ [K/W, T] along T (reduce-scatter side: x holds every token; fp8 takes
 * X's tensor amax agreed over the K shards). */
static tp_rc quantize_xt_local(tp_group *g, tp_fp8_linear *p, const void *x, cudaStream_t stream) {
  tp_quant_args a = fp8_quant_of(p, TP_QROLE_ACT, TP_FP8_E4M3, x, p->m, p->k);
  a.q = p->xtq;
  a.scales = p->xt_scales;
  if (p->format == TP_QFMT_FP8) {
    TP_TRY(agree_x_tensor(g, p, x, p->m, p->k, p->xtq, p->xt_scales, p->bwd.x_amax, stream));
    a.agreed_amax = p->bwd.x_amax;
  }
  return tp_quant_transpose_quantize_enqueue(&a, stream);
}

/* The reduce-scatter side's dY shard [S, N] along N into the packet (fp8: its tensor amax agreed).
 */
static tp_rc quantize_dy_shard(tp_group *g, tp_fp8_linear *p, const void *dy, cudaStream_t stream) {
  tp_fp8_bwd_comm *b = &p->bwd;
  tp_quant_args a = fp8_quant_of(p, TP_QROLE_ACT, TP_FP8_E5M2, dy, p->shard_rows, p->n);
  a.q = b->dy_packet;
  a.scales = b->dy_shard_scales;
  TP_TRY(agree(g, p, b->dy_agreement, &a, b->grad_amax, stream));
  if (b->dy_agreement != TP_AMAX_LOCAL) a.agreed_amax = b->grad_amax;
  return tp_quant_enqueue(&a, stream);
}

/* ---- stock ----------------------------------------------------------------------------------- */

static uint8_t *own_piece(const tp_fp8_linear *p, uint8_t *pieces) {
  return pieces + (size_t)p->rank * piece_stride(p);
}

static void *own_piece_scales(const tp_fp8_linear *p, void *scales) {
  return ptr_at(scales, (size_t)p->rank * piece_scale_stride(p));
}

/* Every rank's piece and its scales, gathered in place (the own one sits at its rank's offset). */
static tp_rc gather_pieces(tp_group *g, tp_fp8_linear *p, cudaStream_t stream) {
  tp_fp8_bwd_comm *b = &p->bwd;
  TP_NCCL(ncclAllGather(own_piece(p, b->pieces), b->pieces, piece_stride(p), ncclUint8, g->nccl,
                        stream),
          g->nccl);
  TP_NCCL(ncclAllGather(own_piece_scales(p, b->piece_scales), b->piece_scales,
                        piece_scale_stride(p), ncclUint8, g->nccl, stream),
          g->nccl);
  return TP_OK;
}

/* The reduce-scatter side's dY shard and its scales, gathered. */
static tp_rc gather_dy(tp_group *g, tp_fp8_linear *p, cudaStream_t stream) {
  tp_fp8_bwd_comm *b = &p->bwd;
  TP_NCCL(ncclAllGather(b->dy_packet, p->dyq[0], (size_t)(p->shard_rows * p->n), ncclUint8, g->nccl,
                        stream),
          g->nccl);
  TP_NCCL(ncclAllGather(b->dy_shard_scales, b->dy_gathered_scales,
                        tp_quant_scale_bytes(&b->dy_gather.shard), ncclUint8, g->nccl, stream),
          g->nccl);
  return TP_OK;
}

/* What the stock backward's gathers move, in one NCCL group. */
static tp_rc stock_gathers(tp_group *g, tp_fp8_linear *p, cudaStream_t stream) {
  TP_NCCL(ncclGroupStart(), g->nccl);
  tp_rc rc = gathers(p) ? TP_OK : gather_dy(g, p, stream);
  if (rc == TP_OK) rc = gather_pieces(g, p, stream);
  const ncclResult_t end = ncclGroupEnd();
  TP_TRY(rc);
  TP_NCCL(end, g->nccl);
  return TP_OK;
}

/* All-gather side: Xᵀ's pieces, then per weight dY_i (agreed) and dY_iᵀ. */
static tp_rc stock_grads_gather_side(tp_group *g, tp_fp8_linear *p, const void *x,
                                     const void *const *dy, cudaStream_t stream) {
  tp_fp8_bwd_comm *b = &p->bwd;
  uint8_t *piece = own_piece(p, b->pieces);
  void *piece_scales = own_piece_scales(p, b->piece_scales);
  if (p->format == TP_QFMT_FP8)
    TP_TRY(agree_x_tensor(g, p, x, p->shard_rows, p->k, piece, piece_scales, b->t_amax, stream));
  TP_TRY(quantize_piece(g, p, TP_FP8_E4M3, x, b->t_amax, piece, piece_scales, stream));
  TP_TRY(stock_gathers(g, p, stream));
  TP_TRY(place_pieces(p, b->pieces, b->piece_scales, p->xtq, p->xt_scales, stream));
  for (int i = 0; i < p->desc.n_weights; ++i) {
    tp_quant_args a = fp8_quant_of(p, TP_QROLE_ACT, TP_FP8_E5M2, dy[i], p->m, p->n);
    a.q = p->dyq[i];
    a.scales = p->dy_scales[i];
    TP_TRY(agree_dy(g, p, i, dy[i], stream));
    if (b->dy_agreement != TP_AMAX_LOCAL) a.agreed_amax = b->grad_amax;
    TP_TRY(tp_quant_enqueue(&a, stream));
    TP_TRY(quantize_dyt_local(p, i, dy[i], stream));
  }
  return TP_OK;
}

/* Reduce-scatter side: dY's shard and dYᵀ's piece gathered in one group, then Xᵀ. */
static tp_rc stock_grads_scatter_side(tp_group *g, tp_fp8_linear *p, const void *x, const void *dy,
                                      cudaStream_t stream) {
  tp_fp8_bwd_comm *b = &p->bwd;
  TP_TRY(quantize_dy_shard(g, p, dy, stream));
  TP_TRY(quantize_piece(g, p, TP_FP8_E5M2, dy, b->grad_amax, own_piece(p, b->pieces),
                        own_piece_scales(p, b->piece_scales), stream));
  TP_TRY(stock_gathers(g, p, stream));
  TP_TRY(tp_quant_replace_gathered_enqueue(&b->dy_gather, b->dy_gathered_scales, p->dy_scales[0],
                                           stream));
  TP_TRY(place_pieces(p, b->pieces, b->piece_scales, p->dytq[0], p->dyt_scales[0], stream));
  return quantize_xt_local(g, p, x, stream);
}

tp_rc fp8_bwd_quantize_grads(tp_group *g, tp_fp8_linear *p, const void *x, const void *const *dy,
                             cudaStream_t stream) {
  if (p->fused)
    return TP_FAIL(TP_EINTERNAL, "fp8 dist_gemm backward: its quantizations are its pipeline's");
  if (gathers(p)) return stock_grads_gather_side(g, p, x, dy, stream);
  return stock_grads_scatter_side(g, p, x, dy[0], stream);
}

/* dX rows [row0, row0 + rows) of the all-gather side's partial: sum_i dY_i · W_i. */
static tp_rc dgrad_rows(tp_fp8_linear *p, int64_t row0, int64_t rows, const void *const *dy_scales,
                        void *out, cudaStream_t stream) {
  const int nw = p->desc.n_weights;
  for (int i = 0; i < nw; ++i) {
    void *d = nw > 1 ? ptr_at(p->dx_parts[i], (size_t)(row0 * p->k) * 2) : out;
    const tp_gemm_scaled_desc desc = {p->format,
                                      rows,
                                      p->k,
                                      p->n,
                                      p->dyq[i] + row0 * p->n,
                                      dy_scales[i],
                                      p->wtq[i],
                                      p->wt_scales[i],
                                      d,
                                      TP_GEMM_SCALED_DGRAD};
    TP_TRY(tp_gemm_scaled_enqueue(p->gemm, &desc, stream));
  }
  if (nw == 1) return TP_OK;
  const void *parts[TP_MAX_WEIGHTS];
  for (int i = 0; i < nw; ++i) parts[i] = cptr_at(p->dx_parts[i], (size_t)(row0 * p->k) * 2);
  TP_CUDA(tp_launch_reduce_sum(TP_BF16, out, parts, nw, (size_t)(rows * p->k), stream));
  return TP_OK;
}

static tp_rc wgrads(tp_fp8_linear *p, void *const *dw, cudaStream_t stream) {
  for (int i = 0; i < p->desc.n_weights; ++i) {
    const tp_gemm_scaled_desc d = {
        p->format,        p->n,   p->k,         p->m,  p->dytq[i],
        p->dyt_scales[i], p->xtq, p->xt_scales, dw[i], TP_GEMM_SCALED_WGRAD};
    TP_TRY(tp_gemm_scaled_enqueue(p->gemm, &d, stream));
  }
  return TP_OK;
}

tp_rc fp8_bwd_gemms(tp_fp8_linear *p, void *dx, void *const *dw, cudaStream_t stream) {
  if (gathers(p))
    TP_TRY(dgrad_rows(p, 0, p->m, (const void *const *)p->dy_scales, p->bwd.dx_partial, stream));
  else TP_TRY(dgrad_rows(p, 0, p->m, (const void *const *)p->dy_scales, dx, stream));
  return wgrads(p, dw, stream);
}

static tp_rc reduce_scatter_dx(tp_group *g, tp_fp8_linear *p, void *dx, cudaStream_t stream) {
  TP_NCCL(ncclReduceScatter(p->bwd.dx_partial, dx, (size_t)(p->shard_rows * p->k), ncclBfloat16,
                            ncclSum, g->nccl, stream),
          g->nccl);
  return TP_OK;
}

tp_rc fp8_bwd_collective(tp_group *g, tp_fp8_linear *p, void *dx, cudaStream_t stream) {
  tp_fp8_bwd_comm *b = &p->bwd;
  if (p->fused || !b->pieces)
    return TP_FAIL(TP_EINTERNAL, "fp8 backward collective alone: a stock plan, prepared");
  /* the agreements travel too (idempotent: maxima; dY's once per weight as in
   * the step), then the gathers */
  const size_t dy_floats = agreement_floats(b->dy_agreement, p->m);
  const int dy_agreements = gathers(p) ? p->desc.n_weights : 1;
  for (int i = 0; dy_floats && i < dy_agreements; ++i)
    TP_TRY(fp8_agree_max(g, p, b->grad_amax, dy_floats, stream));
  if (b->t_amax)
    TP_TRY(fp8_agree_max(g, p, b->t_amax, agreement_floats(b->t_agreement, b->t_rows), stream));
  if (b->x_amax) TP_TRY(fp8_agree_max(g, p, b->x_amax, 1, stream));
  TP_TRY(stock_gathers(g, p, stream));
  return gathers(p) ? reduce_scatter_dx(g, p, dx, stream) : TP_OK;
}

/* ---- dist_gemm ------------------------------------------------------------------------------- */

static char *heap_of(tp_group *g, tp_fp8_linear *p, int rank) {
  return tp_symm_ptr(linear_heap(g, &p->base), rank);
}

/* This rank's piece (already in its own workspace) pushed to every peer:
 * bytes as chunk 0, scales as chunk 1 of `phase`. */
static tp_rc push_piece(tp_group *g, tp_fp8_linear *p, int phase) {
  const int rank = g->rank, world = g->world;
  const size_t bytes = piece_stride(p), sbytes = piece_scale_stride(p);
  const size_t at = pieces_offset(p) + (size_t)rank * bytes;
  const size_t sat = piece_scales_offset(p) + (size_t)rank * sbytes;
  char *own = heap_of(g, p, rank);
  for (int step = 1; step < world; ++step) {
    const int dst = (rank + step) % world;
    char *to = heap_of(g, p, dst);
    TP_TRY(linear_push_chunk(g, &p->base, dst, to + at, own + at, bytes, phase, 0));
    TP_TRY(linear_push_chunk(g, &p->base, dst, to + sat, own + sat, sbytes, phase, 1));
  }
  return TP_OK;
}

/* Every peer's piece landed here; the whole placed into whole and whole_scales. */
static tp_rc wait_and_place_pieces(tp_group *g, tp_fp8_linear *p, int phase, uint8_t *whole,
                                   void *whole_scales) {
  for (int step = 1; step < g->world; ++step) {
    const int src = (g->rank - step + g->world) % g->world;
    TP_TRY(linear_wait_chunk(g, &p->base, src, phase, 0));
    TP_TRY(linear_wait_chunk(g, &p->base, src, phase, 1));
  }
  const char *own = heap_of(g, p, g->rank);
  return place_pieces(p, (const uint8_t *)own + pieces_offset(p), own + piece_scales_offset(p),
                      whole, whole_scales, g->main_stream);
}

static void *dy_block_scales_of(const tp_fp8_linear *p, int i, int blk) {
  return ptr_at(p->bwd.dy_block_scales, (size_t)(i * p->world + blk) * p->bwd.dy_block_room);
}

/* dY_i's rows of destination blk [S, N/W] quantized on their own (the
 * whole's rows bit for bit: blocks never cross a row; the amax agreed first). */
static tp_rc quantize_dy_block(tp_fp8_linear *p, int i, const void *dy, int blk,
                               cudaStream_t stream) {
  const int64_t s = p->shard_rows, row0 = (int64_t)blk * s;
  tp_quant_args a =
      fp8_quant_of(p, TP_QROLE_ACT, TP_FP8_E5M2, cptr_at(dy, (size_t)(row0 * p->n) * 2), s, p->n);
  a.q = p->dyq[i] + row0 * p->n;
  a.scales = dy_block_scales_of(p, i, blk);
  if (p->bwd.dy_agreement == TP_AMAX_AGREE_TENSOR) a.agreed_amax = p->bwd.grad_amax;
  if (p->bwd.dy_agreement == TP_AMAX_AGREE_ROWS) a.agreed_amax = p->bwd.grad_amax + row0;
  return tp_quant_enqueue(&a, stream);
}

/* The all-gather side's operands before the pipeline: Xᵀ's piece into this
 * rank's workspace, every dY_i's destination blocks and dY_iᵀ. */
static tp_rc fused_gather_side_operands(tp_group *g, tp_fp8_linear *p, const void *x,
                                        const void *const *dy) {
  cudaStream_t main = g->main_stream;
  tp_fp8_bwd_comm *b = &p->bwd;
  char *own = heap_of(g, p, g->rank);
  uint8_t *piece = (uint8_t *)own + pieces_offset(p) + (size_t)g->rank * piece_stride(p);
  void *piece_scales = own + piece_scales_offset(p) + (size_t)g->rank * piece_scale_stride(p);
  if (p->format == TP_QFMT_FP8)
    TP_TRY(agree_x_tensor(g, p, x, p->shard_rows, p->k, piece, piece_scales, b->t_amax, main));
  TP_TRY(quantize_piece(g, p, TP_FP8_E4M3, x, b->t_amax, piece, piece_scales, main));
  for (int i = 0; i < p->desc.n_weights; ++i) {
    TP_TRY(agree_dy(g, p, i, dy[i], main));
    for (int blk = 0; blk < g->world; ++blk) TP_TRY(quantize_dy_block(p, i, dy[i], blk, main));
    TP_TRY(quantize_dyt_local(p, i, dy[i], main));
  }
  return TP_OK;
}

/* Destination blk's rows of dX's partial into out [S, K]. */
static tp_rc dgrad_block(tp_fp8_linear *p, int blk, void *out, cudaStream_t stream) {
  const void *scales[TP_MAX_WEIGHTS];
  for (int i = 0; i < p->desc.n_weights; ++i) scales[i] = dy_block_scales_of(p, i, blk);
  return dgrad_rows(p, (int64_t)blk * p->shard_rows, p->shard_rows, scales, out, stream);
}

/* The shared reduce-scatter's partial: destination block b's rows of dX (row0 / S). */
static tp_rc dgrad_partial(tp_group *g, const tp_linear_plan *base, const tp_linear_tensors *t,
                           void *ctx, int64_t row0, int64_t rows, const void *acc_in, void *out) {
  (void)t;
  (void)rows;
  if (acc_in) return TP_FAIL(TP_EINTERNAL, "an fp8 partial is summed in slots, not in its GEMM");
  return dgrad_block(ctx, (int)(row0 / base->shard_rows), out, g->main_stream);
}

/* All-gather side: Xᵀ's piece travels (phase 0) while dX is reduce-scattered
 * on the shared pipeline (phase 1: each destination's rows of dX's partial
 * computed into staging and pushed, the own rows into the own receive slot,
 * every rank's partial summed in rank order, fp32, one rounding); then the
 * wgrad on the placed Xᵀ. */
static tp_rc fused_gather_side(tp_group *g, tp_fp8_linear *p, const void *x, const void *const *dy,
                               void *dx, void *const *dw) {
  cudaStream_t main = g->main_stream;
  TP_TRY(fp8_begin_encoding(g, p, 1));
  TP_TRY(fused_gather_side_operands(g, p, x, dy));
  TP_TRY(fp8_end_encoding(g, p, 1));
  TP_TRY(push_piece(g, p, 0));
  const linear_scatter sc = {.partial = dgrad_partial,
                             .width = p->k,
                             .out = dx,
                             .phase = 1,
                             .chunks = 1,
                             .sum = LINEAR_SUM_SLOTS,
                             .ctx = p};
  tp_linear_tensors none;
  memset(&none, 0, sizeof none);
  TP_TRY(linear_fused_reduce_scatter(g, &p->base, &none, &sc));
  TP_TRY(wait_and_place_pieces(g, p, 0, p->xtq, p->xt_scales));
  TP_TRY(wgrads(p, dw, main));
  return linear_join_from_comm(g);
}

/* The dX rows of rank src's dY shard, read from a packet [bytes | scales]. */
static tp_rc dgrad_chunk(tp_fp8_linear *p, const uint8_t *packet, int src, void *dx,
                         cudaStream_t stream) {
  const int64_t s = p->shard_rows;
  const tp_gemm_scaled_desc d = {p->format,
                                 s,
                                 p->k,
                                 p->n,
                                 packet,
                                 packet + room((size_t)(s * p->n)),
                                 p->wtq[0],
                                 p->wt_scales[0],
                                 ptr_at(dx, (size_t)((int64_t)src * s * p->k) * 2),
                                 TP_GEMM_SCALED_DGRAD};
  return tp_gemm_scaled_enqueue(p->gemm, &d, stream);
}

/* The shared all-gather's consumer: the dX rows of one rank's dY shard,
 * read from its payload. */
static tp_rc consume_dy_packet(tp_group *g, const tp_linear_plan *base, const tp_linear_tensors *t,
                               void *ctx, int64_t rows, const void *packet, size_t row0) {
  (void)rows;
  return dgrad_chunk(ctx, packet, (int)((int64_t)row0 / base->shard_rows), t->dx, g->main_stream);
}

/* Reduce-scatter side: dY's quantized shard, the payload of the shared
 * all-gather, pushed whole to every peer (phase 0), then dYᵀ's piece
 * (phase 1); dX's rows of each rank as its shard lands; the wgrad on the
 * placed dYᵀ and the local Xᵀ. */
static tp_rc fused_scatter_side(tp_group *g, tp_fp8_linear *p, const void *x, const void *dy,
                                void *dx, void *const *dw) {
  const int rank = g->rank;
  cudaStream_t main = g->main_stream;
  tp_fp8_bwd_comm *b = &p->bwd;
  char *own = heap_of(g, p, rank);
  TP_TRY(fp8_begin_encoding(g, p, 1));
  TP_TRY(quantize_dy_shard(g, p, dy, main));
  TP_TRY(quantize_piece(g, p, TP_FP8_E5M2, dy, b->grad_amax,
                        (uint8_t *)own + pieces_offset(p) + (size_t)rank * piece_stride(p),
                        own + piece_scales_offset(p) + (size_t)rank * piece_scale_stride(p), main));
  TP_TRY(quantize_xt_local(g, p, x, main));
  TP_TRY(fp8_end_encoding(g, p, 1));
  const linear_gather gather = {.rows_local = b->dy_packet,
                                .payload_bytes = b->dy_packet_bytes,
                                .offset = 0,
                                .phase = 0,
                                .chunks = 1,
                                .ctx = p};
  tp_linear_tensors t;
  memset(&t, 0, sizeof t);
  t.dx = dx;
  TP_TRY(linear_push_gather(g, &p->base, &gather));
  TP_TRY(push_piece(g, p, 1)); /* behind dY's shard: its GEMMs wait for that first */
  TP_TRY(linear_consume_gather(g, &p->base, &t, &gather, consume_dy_packet));
  TP_TRY(wait_and_place_pieces(g, p, 1, p->dytq[0], p->dyt_scales[0]));
  TP_TRY(wgrads(p, dw, main));
  return linear_join_from_comm(g);
}

tp_rc fp8_bwd_backward(tp_group *g, tp_fp8_linear *p, const void *x, const void *const *dy,
                       void *dx, void *const *dw, cudaStream_t stream) {
  if (p->fused) {
    if (stream != g->main_stream)
      return TP_FAIL(TP_EINTERNAL, "fp8 dist_gemm runs on the group's main stream");
    return gathers(p) ? fused_gather_side(g, p, x, dy, dx, dw)
                      : fused_scatter_side(g, p, x, dy[0], dx, dw);
  }
  TP_TRY(fp8_bwd_quantize_grads(g, p, x, dy, stream));
  TP_TRY(fp8_bwd_gemms(p, dx, dw, stream));
  return gathers(p) ? reduce_scatter_dx(g, p, dx, stream) : TP_OK;
}
