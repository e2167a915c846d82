/*
 * tp_attention.c — host side of the causal GQA attention core: carves the
 * workspace and sequences the layout copies, the cuBLASLt strided-batched
 * GEMMs and the softmax kernels of tp_layers.cu (the contract and the
 * memory formulas are in tp_layers.h).
 *
 * The trick that keeps this to one GEMM call per product: after copying Q,
 * K and V out of the seq-major QKV rows into head-major [B, H, S, d]
 * buffers, the g = hq/hkv query heads sharing KV head kv of batch element b
 * are heads kv·g .. kv·g + g − 1, adjacent in memory: one [g·S, d] matrix
 * ("a group"). Group j = b·hkv + kv starts at j·g·S·d in Q and its KV head
 * at j·S·d in K and V, so the batch index of every GEMM is the group, with
 * constant strides. The query heads of a group are summed for dK and dV by
 * the GEMM's inner dimension (g·S), in a fixed order.
 *
 * Workspace regions, in order, each starting on a 256-byte boundary:
 *   q    [B, hq, S, d]    Q; in the forward, O overwrites it after Q·Kᵀ
 *   k    [B, hkv, S, d]   K
 *   v    [B, hkv, S, d]   V; in the backward, dK overwrites it after dO·Vᵀ
 *   f32  [B, hq, S, S]    fp32 scores (forward) or dP (backward)
 *   --- the forward ends here ---
 *   dout [B, hq, S, d]    dO; dQ overwrites it after dV and dP are done
 *   dv   [B, hkv, S, d]   dV
 *   ds   [B, hq, S, S]    dS in the dtype
 */
#include <stdint.h>
#include <string.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_layers.h"

enum { ATTN_ALIGN = 256 };

typedef struct attn_regions {
  void *q, *k, *v;
  float *f32;
  void *dout, *dv, *ds;
} attn_regions;

/* Sizes of one shape, in elements unless named bytes. */
typedef struct attn_dims {
  int64_t S, B, hq, hkv, d, g;
  int64_t width;   /* QKV columns */
  size_t e;        /* dtype bytes */
  size_t q_bytes;  /* B·hq·S·d·e */
  size_t kv_bytes; /* B·hkv·S·d·e */
  size_t squares;  /* B·hq·S·S elements of scores, P, dP, dS */
} attn_dims;

static size_t align_up(size_t bytes) {
  return (bytes + (size_t)ATTN_ALIGN - 1) / ATTN_ALIGN * ATTN_ALIGN;
}

static attn_dims dims_of(const tp_attention_shape *s) {
  attn_dims d;
  d.S = s->seq;
  d.B = s->batch;
  d.hq = s->hq;
  d.hkv = s->hkv;
  d.d = s->head_dim;
  d.g = s->hkv > 0 ? s->hq / s->hkv : 0;
  d.width = (s->hq + 2 * s->hkv) * s->head_dim;
  d.e = tp_dtype_bytes(s->dtype);
  d.q_bytes = (size_t)(d.B * d.hq * d.S * d.d) * d.e;
  d.kv_bytes = (size_t)(d.B * d.hkv * d.S * d.d) * d.e;
  d.squares = (size_t)(d.B * d.hq) * (size_t)d.S * (size_t)d.S;
  return d;
}

/* 1/sqrt(d) without libm (this library links none): Heron's iteration in
 * float64 converges to the square root within a unit in the last place. */
static float inv_sqrt_dim(int64_t d) {
  const double x = (double)d;
  double s = x;
  for (int i = 0; i < 64; ++i) s = 0.5 * (s + x / s);
  return (float)(1.0 / s);
}

static tp_rc shape_check(const tp_attention_shape *s) {
  if (!s || (s->dtype != TP_BF16 && s->dtype != TP_FP32))
    return TP_FAIL(TP_EINTERNAL, "attention: no shape or an unknown dtype");
  if (s->seq < 1 || s->batch < 1 || s->hq < 1 || s->hkv < 1 || s->head_dim < 1)
    return TP_FAIL(TP_EREJECT, "attention: empty shape seq=%lld batch=%lld hq=%lld hkv=%lld d=%lld",
                   (long long)s->seq, (long long)s->batch, (long long)s->hq, (long long)s->hkv,
                   (long long)s->head_dim);
  if (s->hq % s->hkv != 0)
    return TP_FAIL(TP_EREJECT, "attention: %lld local query heads do not group over %lld KV heads",
                   (long long)s->hq, (long long)s->hkv);
  /* The softmax runs one block per row of B·hq·S rows; a GEMM batch counts in int32. */
  if (s->batch * s->hq * s->seq > INT32_MAX)
    return TP_FAIL(TP_EREJECT, "attention: %lld softmax rows exceed the grid limit",
                   (long long)(s->batch * s->hq * s->seq));
  return TP_OK;
}

int64_t tp_attention_qkv_width(const tp_attention_shape *shape) {
  return (shape->hq + 2 * shape->hkv) * shape->head_dim;
}

size_t tp_attention_saved_bytes(const tp_attention_shape *shape) {
  attn_dims d = dims_of(shape);
  return d.squares * d.e;
}

size_t tp_attention_workspace_bytes(const tp_attention_shape *shape, int backward) {
  attn_dims d = dims_of(shape);
  size_t bytes = align_up(d.q_bytes) + 2 * align_up(d.kv_bytes) + align_up(d.squares * 4);
  if (backward) bytes += align_up(d.q_bytes) + align_up(d.kv_bytes) + align_up(d.squares * d.e);
  return bytes;
}

static attn_regions carve(const attn_dims *d, void *workspace) {
  attn_regions r;
  char *p = workspace;
  r.q = p;
  p += align_up(d->q_bytes);
  r.k = p;
  p += align_up(d->kv_bytes);
  r.v = p;
  p += align_up(d->kv_bytes);
  r.f32 = (float *)(void *)p;
  p += align_up(d->squares * 4);
  r.dout = p;
  p += align_up(d->q_bytes);
  r.dv = p;
  p += align_up(d->kv_bytes);
  r.ds = p;
  return r;
}

static tp_rc workspace_check(const void *workspace) {
  if (!workspace || (uintptr_t)workspace % ATTN_ALIGN != 0)
    return TP_FAIL(TP_EINTERNAL, "attention: workspace %p is not %d-byte aligned", workspace,
                   ATTN_ALIGN);
  return TP_OK;
}

/* Q, K and V out of the QKV rows into the head-major regions. */
static tp_rc gather_qkv(const tp_attention_shape *s, const attn_dims *d, const void *qkv,
                        const attn_regions *r, cudaStream_t stream) {
  TP_CUDA(tp_launch_attention_gather_heads(s->dtype, qkv, d->width, 0, r->q, d->S, d->B, d->hq,
                                           d->d, stream));
  TP_CUDA(tp_launch_attention_gather_heads(s->dtype, qkv, d->width, d->hq * d->d, r->k, d->S, d->B,
                                           d->hkv, d->d, stream));
  TP_CUDA(tp_launch_attention_gather_heads(s->dtype, qkv, d->width, (d->hq + d->hkv) * d->d, r->v,
                                           d->S, d->B, d->hkv, d->d, stream));
  return TP_OK;
}

/* A batch over the B·hkv groups. Strides in elements: gs_d = one group of
 * Q/O/dO ([g·S, d]), s_d = one KV head ([S, d]), gs_s = one group of
 * scores/P/dS ([g·S, S]). */
static tp_gemm_batch group_batch(const attn_dims *d, int64_t stride_a, int64_t stride_b,
                                 int64_t stride_c, tp_dtype c_dtype, float alpha) {
  tp_gemm_batch b;
  memset(&b, 0, sizeof b);
  b.count = d->B * d->hkv;
  b.stride_a = stride_a;
  b.stride_b = stride_b;
  b.stride_c = stride_c;
  b.c_dtype = c_dtype;
  b.alpha = alpha;
  return b;
}

tp_rc tp_attention_forward(tp_gemm *gemm, const tp_attention_shape *shape, const void *qkv,
                           void *out, void *saved_p, void *workspace, cudaStream_t stream) {
  TP_TRY(shape_check(shape));
  TP_TRY(workspace_check(workspace));
  const attn_dims d = dims_of(shape);
  const attn_regions r = carve(&d, workspace);
  const tp_dtype dt = shape->dtype;
  const int64_t gs = d.g * d.S, gs_d = gs * d.d, s_d = d.S * d.d, gs_s = gs * d.S;
  TP_TRY(gather_qkv(shape, &d, qkv, &r, stream));

  /* scores[g·S, S] = Q_grp · Kᵀ / sqrt(d), in fp32 whatever the dtype. */
  tp_gemm_batch scores = group_batch(&d, gs_d, s_d, gs_s, TP_FP32, inv_sqrt_dim(d.d));
  const tp_gemm_desc qk = {.dtype = dt,
                           .trans_b = 1,
                           .m = gs,
                           .n = d.S,
                           .k = d.d,
                           .a = r.q,
                           .lda = d.d,
                           .b = r.k,
                           .ldb = d.d,
                           .c = r.f32,
                           .ldc = d.S};
  TP_TRY(tp_gemm_enqueue_batched(gemm, &qk, &scores, stream));
  TP_CUDA(tp_launch_attention_softmax_fwd(dt, r.f32, saved_p, d.B * d.hq * d.S, d.S, stream));

  /* O_grp[g·S, d] = P_grp · V, into the Q region (Q is no longer read). */
  tp_gemm_batch pv = group_batch(&d, gs_s, s_d, gs_d, dt, 1.0f);
  const tp_gemm_desc o = {.dtype = dt,
                          .m = gs,
                          .n = d.d,
                          .k = d.S,
                          .a = saved_p,
                          .lda = d.S,
                          .b = r.v,
                          .ldb = d.d,
                          .c = r.q,
                          .ldc = d.d};
  TP_TRY(tp_gemm_enqueue_batched(gemm, &o, &pv, stream));
  TP_CUDA(
      tp_launch_attention_scatter_heads(dt, r.q, out, d.hq * d.d, 0, d.S, d.B, d.hq, d.d, stream));
  return TP_OK;
}

/* dV and dP from dO (head-major in r->dout). */
static tp_rc backward_from_dout(tp_gemm *gemm, tp_dtype dt, const attn_dims *d, const void *saved_p,
                                const attn_regions *r, cudaStream_t stream) {
  const int64_t gs = d->g * d->S, gs_d = gs * d->d, s_d = d->S * d->d, gs_s = gs * d->S;
  /* dV[S, d] = P_grpᵀ · dO_grp: P_grp is stored [g·S, S] = [k, m]. */
  tp_gemm_batch dv = group_batch(d, gs_s, gs_d, s_d, dt, 1.0f);
  const tp_gemm_desc dv_gemm = {.dtype = dt,
                                .trans_a = 1,
                                .m = d->S,
                                .n = d->d,
                                .k = gs,
                                .a = saved_p,
                                .lda = d->S,
                                .b = r->dout,
                                .ldb = d->d,
                                .c = r->dv,
                                .ldc = d->d};
  TP_TRY(tp_gemm_enqueue_batched(gemm, &dv_gemm, &dv, stream));
  /* dP[g·S, S] = dO_grp · Vᵀ, fp32. */
  tp_gemm_batch dp = group_batch(d, gs_d, s_d, gs_s, TP_FP32, 1.0f);
  const tp_gemm_desc dp_gemm = {.dtype = dt,
                                .trans_b = 1,
                                .m = gs,
                                .n = d->S,
                                .k = d->d,
                                .a = r->dout,
                                .lda = d->d,
                                .b = r->v,
                                .ldb = d->d,
                                .c = r->f32,
                                .ldc = d->S};
  TP_TRY(tp_gemm_enqueue_batched(gemm, &dp_gemm, &dp, stream));
  return TP_OK;
}

/* dQ and dK from dS. dQ overwrites dO (read by then), dK overwrites V. */
static tp_rc backward_from_ds(tp_gemm *gemm, tp_dtype dt, const attn_dims *d, const attn_regions *r,
                              cudaStream_t stream) {
  const int64_t gs = d->g * d->S, gs_d = gs * d->d, s_d = d->S * d->d, gs_s = gs * d->S;
  const float scale = inv_sqrt_dim(d->d);
  /* dQ_grp[g·S, d] = dS_grp · K / sqrt(d). */
  tp_gemm_batch dq = group_batch(d, gs_s, s_d, gs_d, dt, scale);
  const tp_gemm_desc dq_gemm = {.dtype = dt,
                                .m = gs,
                                .n = d->d,
                                .k = d->S,
                                .a = r->ds,
                                .lda = d->S,
                                .b = r->k,
                                .ldb = d->d,
                                .c = r->dout,
                                .ldc = d->d};
  TP_TRY(tp_gemm_enqueue_batched(gemm, &dq_gemm, &dq, stream));
  /* dK[S, d] = dS_grpᵀ · Q_grp / sqrt(d): dS_grp is stored [g·S, S] = [k, m]. */
  tp_gemm_batch dk = group_batch(d, gs_s, gs_d, s_d, dt, scale);
  const tp_gemm_desc dk_gemm = {.dtype = dt,
                                .trans_a = 1,
                                .m = d->S,
                                .n = d->d,
                                .k = gs,
                                .a = r->ds,
                                .lda = d->S,
                                .b = r->q,
                                .ldb = d->d,
                                .c = r->v,
                                .ldc = d->d};
  TP_TRY(tp_gemm_enqueue_batched(gemm, &dk_gemm, &dk, stream));
  return TP_OK;
}

tp_rc tp_attention_backward(tp_gemm *gemm, const tp_attention_shape *shape, const void *qkv,
                            const void *saved_p, const void *dout, void *dqkv, void *workspace,
                            cudaStream_t stream) {
  TP_TRY(shape_check(shape));
  TP_TRY(workspace_check(workspace));
  const attn_dims d = dims_of(shape);
  const attn_regions r = carve(&d, workspace);
  const tp_dtype dt = shape->dtype;
  TP_TRY(gather_qkv(shape, &d, qkv, &r, stream));
  TP_CUDA(tp_launch_attention_gather_heads(dt, dout, d.hq * d.d, 0, r.dout, d.S, d.B, d.hq, d.d,
                                           stream));
  TP_TRY(backward_from_dout(gemm, dt, &d, saved_p, &r, stream));
  TP_CUDA(tp_launch_attention_softmax_bwd(dt, saved_p, r.f32, r.ds, d.B * d.hq * d.S, d.S, stream));
  TP_TRY(backward_from_ds(gemm, dt, &d, &r, stream));
  /* dQ (in dout), dK (in v), dV into the dQKV columns. */
  TP_CUDA(
      tp_launch_attention_scatter_heads(dt, r.dout, dqkv, d.width, 0, d.S, d.B, d.hq, d.d, stream));
  TP_CUDA(tp_launch_attention_scatter_heads(dt, r.v, dqkv, d.width, d.hq * d.d, d.S, d.B, d.hkv,
                                            d.d, stream));
  TP_CUDA(tp_launch_attention_scatter_heads(dt, r.dv, dqkv, d.width, (d.hq + d.hkv) * d.d, d.S, d.B,
                                            d.hkv, d.d, stream));
  return TP_OK;
}
