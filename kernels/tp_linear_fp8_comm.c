/*
 * tp_linear_fp8_comm.c — the fp8 projection at TP > 1 (forward, sequence
 * parallelism on): the plan's rules and shapes, the buffers, the stock
 * paths (NCCL gathers of fp8 bytes and scales or of bf16, the bf16
 * reduce-scatter of fp8 GEMMs' partials), the references' halves and the
 * fused dist_gemm pipelines of both sides (tp_linear_fp8_comm.h says what
 * travels where).
 */
#include "kernels/tp_linear_fp8_comm.h"

#include <stdio.h>
#include <string.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_linear_internal.h"
#include "kernels/tp_quant_device.h"
#include "kernels/tp_recipe_rules.h"
#include "kernels/tp_symm.h"

/* Parts of a packet start 256 bytes apart (cuBLASLt's operand and scale alignment). */
static size_t room(size_t bytes) { return (bytes + 255) / 256 * 256; }

static int gathers(const tp_fp8_linear *p) { return tp_op_gathers(p->desc.op); }

static size_t shard_scale_bytes(const tp_fp8_linear *p) {
  return tp_quant_scale_bytes(&p->gather.shard);
}

/* ---- plan ------------------------------------------------------------------------------------ */

/* dist_gemm: the bf16 plan of the same op gives the schedule (auto's choice
 * and its reason, the copy kernel's blocks); auto may choose the stock path. */
static tp_rc plan_base(const tp_group *g, tp_fp8_linear *p) {
  tp_linear_desc d;
  memset(&d, 0, sizeof d);
  d.op = p->desc.op;
  d.dtype = TP_BF16;
  d.tokens = p->desc.tokens;
  d.in_features = p->desc.in_features;
  d.out_features = p->desc.out_features;
  d.n_weights = p->desc.n_weights;
  d.sp = 1;
  const tp_rc rc = tp_linear_plan_make(g, &d, TP_BACKEND_DIST, p->desc.schedule, 1, &p->base);
  if (rc == TP_EREJECT) return fp8_reject(p, "%s", tp_last_message());
  TP_TRY(rc);
  p->fused = linear_is_fused(&p->base);
  /* what auto resolved to, held to the recipe's rule as the requested schedule was */
  const tp_recipe_case c = {p->desc.dtype,       p->desc.op, p->desc.tokens, p->desc.out_features,
                            p->desc.in_features, p->world,   TP_PASS_FWD,    p->desc.comm};
  char why[sizeof p->reason];
  if (p->fused && tp_recipe_dist_rejection(&c, p->base.schedule, 1, why, sizeof why))
    return fp8_reject(p, "%s", why);
  return TP_OK;
}

/* This rank's GEMM shape and the buffers' sizes. */
static tp_rc plan_shapes(tp_fp8_linear *p) {
  const int64_t w = p->world, t = p->desc.tokens, s = t / w;
  p->shard_rows = s;
  p->m = t;
  p->n = gathers(p) ? p->desc.out_features / w : p->desc.out_features;
  p->k = gathers(p) ? p->desc.in_features : p->desc.in_features / w;
  TP_TRY(tp_quant_scale_shape(p->format, TP_QROLE_ACT, p->m, p->k, &p->x_scales_shape));
  TP_TRY(tp_quant_scale_shape(p->format, TP_QROLE_WEIGHT, p->n, p->k, &p->w_scales_shape));
  if (gathers(p)) {
    TP_TRY(tp_scale_gather_shape(p->format, s, p->k, p->world, &p->gather));
    p->packet_bytes = room((size_t)(s * p->k)) + room(shard_scale_bytes(p));
    p->comm_bytes =
        (size_t)(w - 1) * (p->desc.comm == TP_COMM_FP8 ? (size_t)(s * p->k) + shard_scale_bytes(p)
                                                       : (size_t)(s * p->k) * 2);
    p->symm_bytes = p->fused ? (size_t)w * p->packet_bytes : 0;
    return TP_OK;
  }
  TP_TRY(tp_quant_scale_shape(p->format, TP_QROLE_ACT, s, p->k, &p->block_scales_shape));
  p->block_scale_room = room(tp_quant_scale_bytes(&p->block_scales_shape));
  const size_t slot = (size_t)(s * p->n) * 2;
  p->comm_bytes = (size_t)(w - 1) * slot;
  p->symm_bytes = p->fused ? (size_t)(2 * w - 1) * slot : 0; /* W receive slots, W-1 staging */
  return TP_OK;
}

/* A fused plan's agreement slots, after each pass's own regions (the
 * forward's: plan_shapes'; the backward's: fp8_bwd_plan's), and the
 * symmetric workspace as the larger of the two passes'. */
static void plan_agreements(tp_fp8_linear *p, size_t fwd, size_t bwd) {
  size_t need[2] = {fwd, bwd};
  if (p->fused) {
    const int64_t most = p->m > p->bwd.t_rows ? p->m : p->bwd.t_rows; /* a row amax's floats */
    p->agree_room = room((size_t)most * sizeof(float));
    const size_t slots = (size_t)FP8_MAX_AGREEMENTS * (size_t)p->world * p->agree_room;
    for (int pass = 0; pass < 2; ++pass) {
      p->agree_offset[pass] = room(need[pass]);
      if (fp8_pass_agreements(p, pass)) need[pass] = p->agree_offset[pass] + slots;
    }
  }
  p->symm_bytes = need[0] > need[1] ? need[0] : need[1];
}

tp_rc fp8_comm_plan(const tp_group *g, tp_fp8_linear *p) {
  if (p->desc.backend == TP_BACKEND_DIST) TP_TRY(plan_base(g, p));
  TP_TRY(plan_shapes(p));
  /* the fused pipelines run one GEMM per rank's rows, the rest one over all T */
  const int64_t gemm_m = p->fused ? p->shard_rows : p->m;
  TP_TRY(tp_gemm_scaled_supported(p->gemm, p->format, gemm_m, p->n, p->k, p->reason,
                                  sizeof p->reason));
  if (p->desc.backward) {
    TP_TRY(fp8_bwd_plan(p));
    p->comm_bytes += p->bwd.comm_bytes;
  }
  plan_agreements(p, p->symm_bytes, p->desc.backward ? p->bwd.symm_bytes : 0);
  return TP_OK;
}

/* ---- buffers --------------------------------------------------------------------------------- */

tp_rc fp8_comm_prepare(tp_group *g, tp_fp8_linear *p) {
  const int64_t s = p->shard_rows;
  if (gathers(p)) {
    TP_TRY(fp8_device_alloc(p, (void **)&p->packet, p->packet_bytes));
    p->shard_scales = p->packet + room((size_t)(s * p->k));
    if (p->desc.comm == TP_COMM_FP8 && !p->fused)
      TP_TRY(fp8_device_alloc(p, &p->gathered_scales, tp_scale_gather_bytes(&p->gather)));
    if (p->desc.comm == TP_COMM_BF16)
      TP_TRY(fp8_device_alloc(p, &p->gathered_x, (size_t)(p->m * p->k) * 2));
  } else if (p->fused) {
    TP_TRY(fp8_device_alloc(p, &p->block_scales, (size_t)p->world * p->block_scale_room));
  } else {
    TP_TRY(fp8_device_alloc(p, &p->partial, (size_t)(p->m * p->n) * 2));
  }
  if (p->desc.backward) TP_TRY(fp8_bwd_prepare(p));
  /* collective: every rank reserves the same size in the same order */
  if (p->fused) TP_TRY(tp_symm_reserve(linear_heap(g, &p->base), p->symm_bytes));
  return TP_OK;
}

void fp8_comm_release(tp_fp8_linear *p) {
  void *bufs[] = {p->packet, p->gathered_scales, p->gathered_x, p->partial, p->block_scales};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) tp_device_release(bufs[i]);
  fp8_bwd_release(p);
}

/* ---- amax agreements ------------------------------------------------------------------------- */

int fp8_pass_agreements(const tp_fp8_linear *p, int backward) {
  if (p->world < 2) return 0;
  if (!backward) return p->act_agreement != TP_AMAX_LOCAL;
  if (!p->desc.backward) return 0;
  const tp_fp8_bwd_comm *b = &p->bwd;
  /* X's tensor amax (fp8), the transposed operand's row amax, dY's (per weight where dY is
   * each weight's own: the all-gather side) */
  const int dy = b->dy_agreement != TP_AMAX_LOCAL;
  return (p->format == TP_QFMT_FP8) + (b->t_agreement == TP_AMAX_AGREE_ROWS) +
         (gathers(p) ? p->desc.n_weights * dy : dy);
}

/* Events of the agreements' handoffs to the comm stream: past those of the
 * shared reduce-scatter's partials (step · TP_MAX_CHUNKS + chunk). */
static cudaEvent_t agree_event(tp_group *g, int k) {
  return g->events[TP_MAX_WORLD * TP_MAX_CHUNKS + k];
}

/* The flag chunk of agreement k: from the top of phase 0 (the payloads use its bottom). */
static int agree_chunk(int k) { return TP_MAX_CHUNKS / 2 - 1 - k; }

/* Agreement k of the running fused pass over its schedule: this rank's
 * local amax into its own slot, pushed to every peer's, then the max of
 * every rank's slot (the same floats in any order: NCCL's bits). */
static tp_rc transport_agree(tp_group *g, tp_fp8_linear *p, float *amax, size_t n) {
  const int rank = g->rank, world = g->world, k = p->agree_next++;
  const size_t bytes = n * sizeof(float), slot = p->agree_room;
  if (k >= FP8_MAX_AGREEMENTS || bytes > slot)
    return TP_FAIL(TP_EINTERNAL, "fp8 agreement %d of %zu bytes: %d slots of %zu planned", k, bytes,
                   (int)FP8_MAX_AGREEMENTS, slot);
  const size_t at = p->agree_offset[p->agreeing - 1] + (size_t)k * (size_t)world * slot;
  cudaStream_t main = g->main_stream;
  char *own = tp_symm_ptr(linear_heap(g, &p->base), rank);
  TP_CUDA(
      cudaMemcpyAsync(own + at + (size_t)rank * slot, amax, bytes, cudaMemcpyDeviceToDevice, main));
  TP_CUDA(cudaEventRecord(agree_event(g, k), main));
  TP_CUDA(cudaStreamWaitEvent(g->comm_stream, agree_event(g, k), 0));
  for (int step = 1; step < world; ++step) {
    const int dst = (rank + step) % world;
    char *to = tp_symm_ptr(linear_heap(g, &p->base), dst);
    TP_TRY(linear_push_chunk(g, &p->base, dst, to + at + (size_t)rank * slot,
                             own + at + (size_t)rank * slot, slot, 0, agree_chunk(k)));
  }
  const float *slots[TP_MAX_WORLD];
  for (int r = 0; r < world; ++r) {
    if (r != rank) TP_TRY(linear_wait_chunk(g, &p->base, r, 0, agree_chunk(k)));
    slots[r] = (const float *)(const void *)(own + at + (size_t)r * slot);
  }
  TP_CUDA(tp_launch_max_f32(amax, slots, world, n, main));
  return TP_OK;
}

tp_rc fp8_agree_max(tp_group *g, tp_fp8_linear *p, float *amax, size_t n, cudaStream_t stream) {
  if (p->agreeing) {
    if (stream != g->main_stream)
      return TP_FAIL(TP_EINTERNAL, "a fused fp8 pass agrees on the group's main stream");
    return transport_agree(g, p, amax, n);
  }
  TP_NCCL(ncclAllReduce(amax, amax, n, ncclFloat32, ncclMax, g->nccl, stream), g->nccl);
  return TP_OK;
}

tp_rc fp8_begin_encoding(tp_group *g, tp_fp8_linear *p, int backward) {
  if (!fp8_pass_agreements(p, backward)) return TP_OK;
  TP_TRY(linear_fork_to_comm(g, &p->base));
  p->agreeing = 1 + backward;
  p->agree_next = 0;
  return TP_OK;
}

tp_rc fp8_end_encoding(tp_group *g, tp_fp8_linear *p, int backward) {
  if (!fp8_pass_agreements(p, backward)) return linear_fork_to_comm(g, &p->base);
  p->agreeing = 0;
  cudaEvent_t encoded = agree_event(g, FP8_MAX_AGREEMENTS);
  TP_CUDA(cudaEventRecord(encoded, g->main_stream));
  TP_CUDA(cudaStreamWaitEvent(g->comm_stream, encoded, 0));
  return TP_OK;
}

/* ---- the all-gather side --------------------------------------------------------------------- */

/* The ranks' max of the local amax of a (tensorwise: 1 float; rows: one per row), into p->amax. */
static tp_rc agree_amax(tp_group *g, tp_fp8_linear *p, const tp_quant_args *a,
                        cudaStream_t stream) {
  TP_TRY(tp_quant_local_amax_enqueue(a, p->amax, stream));
  return fp8_agree_max(g, p, p->amax, fp8_amax_floats(p), stream);
}

/* The local shard x [S, K] into the packet, after the agreement the format needs. */
static tp_rc quantize_shard(tp_group *g, tp_fp8_linear *p, const void *x, cudaStream_t stream) {
  tp_quant_args a = fp8_quant_args(p, TP_QROLE_ACT, x, p->shard_rows);
  a.q = p->packet;
  a.scales = p->shard_scales;
  if (p->act_agreement != TP_AMAX_LOCAL) {
    TP_TRY(agree_amax(g, p, &a, stream));
    a.agreed_amax = p->amax;
  }
  return tp_quant_enqueue(&a, stream);
}

/* The fp8 all-gather: the shard's bytes into the whole X, its scales into
 * the rank-major gathered buffer, one NCCL group. */
static tp_rc gather_fp8(tp_group *g, tp_fp8_linear *p, cudaStream_t stream) {
  TP_NCCL(ncclGroupStart(), g->nccl);
  TP_NCCL(
      ncclAllGather(p->packet, p->xq, (size_t)(p->shard_rows * p->k), ncclUint8, g->nccl, stream),
      g->nccl);
  TP_NCCL(ncclAllGather(p->shard_scales, p->gathered_scales, shard_scale_bytes(p), ncclUint8,
                        g->nccl, stream),
          g->nccl);
  TP_NCCL(ncclGroupEnd(), g->nccl);
  return TP_OK;
}

static tp_rc gather_bf16(tp_group *g, tp_fp8_linear *p, const void *x, cudaStream_t stream) {
  TP_NCCL(ncclAllGather(x, p->gathered_x, (size_t)(p->shard_rows * p->k), ncclBfloat16, g->nccl,
                        stream),
          g->nccl);
  return TP_OK;
}

/* Stock: the whole X [T, K] quantized, through the gather of desc.comm. */
static tp_rc gather_side_input(tp_group *g, tp_fp8_linear *p, const void *x, cudaStream_t stream) {
  if (p->desc.comm == TP_COMM_BF16) {
    TP_TRY(gather_bf16(g, p, x, stream));
    /* every rank quantizes the same whole: its own amax is the agreed one */
    tp_quant_args a = fp8_quant_args(p, TP_QROLE_ACT, p->gathered_x, p->m);
    a.q = p->xq;
    a.scales = p->x_scales;
    return tp_quant_enqueue(&a, stream);
  }
  TP_TRY(quantize_shard(g, p, x, stream));
  TP_TRY(gather_fp8(g, p, stream));
  return tp_quant_replace_gathered_enqueue(&p->gather, p->gathered_scales, p->x_scales, stream);
}

/* The scaled GEMMs of the rows of rank src's chunk, read from a packet. */
static tp_rc chunk_gemms(tp_fp8_linear *p, const uint8_t *packet, int src, void *const *y,
                         cudaStream_t stream) {
  const int64_t s = p->shard_rows;
  const void *scales = packet + room((size_t)(s * p->k));
  for (int i = 0; i < p->desc.n_weights; ++i) {
    void *rows = ptr_at(y[i], (size_t)((int64_t)src * s * p->n) * 2);
    const tp_gemm_scaled_desc d = {p->format, s,        p->n,           p->k, packet,
                                   scales,    p->wq[i], p->w_scales[i], rows, TP_GEMM_SCALED_FWD};
    TP_TRY(tp_gemm_scaled_enqueue(p->gemm, &d, stream));
  }
  return TP_OK;
}

/* The shared all-gather's consumer: the scaled GEMMs of one rank's shard,
 * read from its payload. */
static tp_rc consume_packet(tp_group *g, const tp_linear_plan *base, const tp_linear_tensors *t,
                            void *ctx, int64_t rows, const void *packet, size_t row0) {
  (void)rows;
  tp_fp8_linear *p = ctx;
  return chunk_gemms(p, packet, (int)((int64_t)row0 / base->shard_rows), t->y, g->main_stream);
}

/* The output tensors of a pass, as the shared pipelines pass them on. */
static tp_linear_tensors outputs_of(const tp_fp8_linear *p, void *const *y) {
  tp_linear_tensors t;
  memset(&t, 0, sizeof t);
  for (int i = 0; i < p->desc.n_weights; ++i) t.y[i] = y[i];
  return t;
}

/* dist_gemm's gather side, on the shared all-gather (tp_linear_fused.c): the
 * payload is the quantized shard with its scales, pushed whole to every
 * peer; the local shard's GEMMs at once, each peer's as it lands. */
static tp_rc fused_gather_forward(tp_group *g, tp_fp8_linear *p, const void *x, void *const *y) {
  TP_TRY(fp8_begin_encoding(g, p, 0));
  TP_TRY(quantize_shard(g, p, x, g->main_stream)); /* the encoding: the payload */
  TP_TRY(fp8_end_encoding(g, p, 0));
  const linear_gather gather = {.rows_local = p->packet,
                                .payload_bytes = p->packet_bytes,
                                .offset = 0,
                                .phase = 0,
                                .chunks = 1,
                                .ctx = p};
  const tp_linear_tensors t = outputs_of(p, y);
  TP_TRY(linear_fused_all_gather(g, &p->base, &t, &gather, consume_packet));
  return linear_join_from_comm(g);
}

/* ---- the reduce-scatter side ----------------------------------------------------------------- */

static tp_rc reduce_scatter(tp_group *g, tp_fp8_linear *p, void *y, cudaStream_t stream) {
  TP_NCCL(ncclReduceScatter(p->partial, y, (size_t)(p->shard_rows * p->n), ncclBfloat16, ncclSum,
                            g->nccl, stream),
          g->nccl);
  return TP_OK;
}

/* The row block of destination b [S, K/W] quantized on its own: the
 * whole's rows bit for bit (blocks never cross a row; the amax agreed over
 * the whole first). */
static tp_rc quantize_block(tp_fp8_linear *p, const void *x, int b, cudaStream_t stream) {
  const int64_t s = p->shard_rows, row0 = (int64_t)b * s;
  tp_quant_args a = fp8_quant_args(p, TP_QROLE_ACT, cptr_at(x, (size_t)(row0 * p->k) * 2), s);
  a.q = p->xq + row0 * p->k;
  a.scales = ptr_at(p->block_scales, (size_t)b * p->block_scale_room);
  if (p->act_agreement == TP_AMAX_AGREE_TENSOR) a.agreed_amax = p->amax;
  if (p->act_agreement == TP_AMAX_AGREE_ROWS) a.agreed_amax = p->amax + row0;
  return tp_quant_enqueue(&a, stream);
}

/* The partial of destination b's rows into out [S, N]. */
static tp_rc block_gemm(tp_fp8_linear *p, int b, void *out, cudaStream_t stream) {
  const int64_t s = p->shard_rows;
  const tp_gemm_scaled_desc d = {p->format,
                                 s,
                                 p->n,
                                 p->k,
                                 p->xq + (int64_t)b * s * p->k,
                                 cptr_at(p->block_scales, (size_t)b * p->block_scale_room),
                                 p->wq[0],
                                 p->w_scales[0],
                                 out,
                                 TP_GEMM_SCALED_FWD};
  return tp_gemm_scaled_enqueue(p->gemm, &d, stream);
}

/* The shared reduce-scatter's partial: destination block b's rows (row0 / S). */
static tp_rc block_partial(tp_group *g, const tp_linear_plan *base, const tp_linear_tensors *t,
                           void *ctx, int64_t row0, int64_t rows, const void *acc_in, void *out) {
  (void)t;
  (void)rows;
  if (acc_in) return TP_FAIL(TP_EINTERNAL, "an fp8 partial is summed in slots, not in its GEMM");
  return block_gemm(ctx, (int)(row0 / base->shard_rows), out, g->main_stream);
}

/* dist_gemm's scatter side, on the shared reduce-scatter (tp_linear_fused.c):
 * each peer's partial computed into staging and pushed while the next is
 * computed, the local rows' partial into the own receive slot, then every
 * rank's partial summed in rank order (fp32, one rounding) into y. */
static tp_rc fused_scatter_forward(tp_group *g, tp_fp8_linear *p, const void *x, void *y) {
  const int world = g->world;
  cudaStream_t main = g->main_stream;
  TP_TRY(fp8_begin_encoding(g, p, 0));
  if (p->act_agreement != TP_AMAX_LOCAL) {
    /* the amax reads x alone; the arguments' check asks for the buffers the blocks fill */
    tp_quant_args whole = fp8_quant_args(p, TP_QROLE_ACT, x, p->m);
    whole.q = p->xq;
    whole.scales = p->block_scales;
    TP_TRY(agree_amax(g, p, &whole, main));
  }
  for (int b = 0; b < world; ++b) TP_TRY(quantize_block(p, x, b, main)); /* the encoding */
  TP_TRY(fp8_end_encoding(g, p, 0));
  const linear_scatter sc = {.partial = block_partial,
                             .width = p->n,
                             .out = y,
                             .phase = 0,
                             .chunks = 1,
                             .sum = LINEAR_SUM_SLOTS,
                             .ctx = p};
  const tp_linear_tensors none = outputs_of(p, &y);
  TP_TRY(linear_fused_reduce_scatter(g, &p->base, &none, &sc));
  return linear_join_from_comm(g);
}

/* ---- entry points ---------------------------------------------------------------------------- */

tp_rc fp8_comm_quantize_input(tp_group *g, tp_fp8_linear *p, const void *x, cudaStream_t stream) {
  if (gathers(p)) return gather_side_input(g, p, x, stream);
  return fp8_quantize_local(g, p, x, stream);
}

tp_rc fp8_comm_gemms(tp_fp8_linear *p, void *const *y, cudaStream_t stream) {
  for (int i = 0; i < p->desc.n_weights; ++i) {
    void *out = gathers(p) ? y[i] : p->partial;
    const tp_gemm_scaled_desc d = {p->format,   p->m,     p->n,           p->k, p->xq,
                                   p->x_scales, p->wq[i], p->w_scales[i], out,  TP_GEMM_SCALED_FWD};
    TP_TRY(tp_gemm_scaled_enqueue(p->gemm, &d, stream));
  }
  return TP_OK;
}

tp_rc fp8_comm_collective(tp_group *g, tp_fp8_linear *p, const void *x, void *const *y,
                          cudaStream_t stream) {
  if (!gathers(p)) return reduce_scatter(g, p, y[0], stream);
  if (p->desc.comm == TP_COMM_BF16) return gather_bf16(g, p, x, stream);
  if (p->act_agreement != TP_AMAX_LOCAL) /* the agreement travels too (idempotent: a max) */
    TP_TRY(fp8_agree_max(g, p, p->amax, fp8_amax_floats(p), stream));
  return gather_fp8(g, p, stream);
}

tp_rc fp8_comm_stock_forward(tp_group *g, tp_fp8_linear *p, const void *x, void *const *y,
                             cudaStream_t stream) {
  TP_TRY(fp8_comm_quantize_input(g, p, x, stream));
  TP_TRY(fp8_comm_gemms(p, y, stream));
  return gathers(p) ? TP_OK : reduce_scatter(g, p, y[0], stream);
}

tp_rc fp8_comm_fused_forward(tp_group *g, tp_fp8_linear *p, const void *x, void *const *y,
                             cudaStream_t stream) {
  if (!p->fused) return TP_FAIL(TP_EINTERNAL, "fp8 fused forward of a plan that does not fuse");
  if (stream != g->main_stream)
    return TP_FAIL(TP_EINTERNAL, "fp8 dist_gemm runs on the group's main stream");
  return gathers(p) ? fused_gather_forward(g, p, x, y) : fused_scatter_forward(g, p, x, y[0]);
}

tp_rc fp8_comm_forward(tp_group *g, tp_fp8_linear *p, const void *x, void *const *y,
                       cudaStream_t stream) {
  if (p->fused) return fp8_comm_fused_forward(g, p, x, y, stream);
  if (p->desc.backend == TP_BACKEND_GEMM_ONLY) return fp8_comm_gemms(p, y, stream);
  if (p->desc.backend == TP_BACKEND_COMM_ONLY) return fp8_comm_collective(g, p, x, y, stream);
  return fp8_comm_stock_forward(g, p, x, y, stream);
}
