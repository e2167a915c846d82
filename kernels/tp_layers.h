/*
 * tp_layers.h — the non-TP pieces of a Llama block: RMSNorm, RoPE, the
 * causal GQA attention core and SwiGLU, forward and backward.
 *
 * They run identically under both backends (stock and dist_gemm), so the
 * difference a benchmark measures is the TP projections alone
 * (tp_linear.h). Everything here runs on one rank, on that rank's tensors.
 *
 * Layouts. Activations are row-major [rows, features]; rows are tokens in
 * (seq, batch) order, sequence outermost as in Megatron: row r is sequence
 * position s = r / B of batch element b = r % B. The QKV projection's output
 * (gathered over the sequence) is [T = S·B rows, (hq + 2·hkv)·head_dim]: all
 * hq local query heads, then the hkv local KV heads of K, then those of V,
 * each head's head_dim values contiguous. Attention's output O is
 * [T, hq·head_dim] in the same row order, the input of the wo projection.
 *
 * Numerics: every kernel reads its dtype, computes in fp32 and rounds once
 * when it stores. Reductions (RMSNorm's row sums, softmax's max and sums,
 * the gradient of the norm's gain over rows) run in a fixed order with no
 * floating-point atomics, so repeated runs give the same bits.
 *
 * Errors: the tp_launch_* functions return the launch's cudaError_t
 * (cudaErrorInvalidValue for arguments they refuse, without launching);
 * the attention functions, which also run cuBLASLt, return a tp_rc with the
 * reason in tp_last_error(). Everything is enqueued on `stream`; nothing
 * synchronises with the host.
 */
#ifndef TP_LAYERS_H
#define TP_LAYERS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"
#include "common/tp_vocab.h"
#include "kernels/tp_gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- RMSNorm (Llama) ------------------------------------------------------------------------
 * y[r, j] = x[r, j] · inv_rms[r] · g[j],  inv_rms[r] = 1 / sqrt(mean_j x[r, j]² + eps)
 * (Llama uses eps = 1e-5). x, y: [rows, dim] of dt; g: [dim] of dt. */

#define TP_RMSNORM_EPS 1e-5f

/* Forward. Saves inv_rms ([rows] fp32) for the backward. y may not alias x. */
TP_MUST_CHECK cudaError_t tp_launch_rmsnorm_fwd(tp_dtype dt, const void *x, const void *g, void *y,
                                                float *inv_rms, int64_t rows, int64_t dim,
                                                float eps, cudaStream_t stream);

/* Bytes of fp32 scratch the backward needs: one partial sum of dg per chunk
 * of rows, min(rows, 256) · dim · 4. */
size_t tp_rmsnorm_bwd_workspace_bytes(int64_t rows, int64_t dim);

/* Backward from dy [rows, dim] with the forward's x, g and inv_rms:
 *   dx[r, j] = inv[r] · (g[j]·dy[r, j] − x[r, j] · inv[r]² · (Σ_k dy[r, k]·g[k]·x[r, k]) / dim)
 *   dg[j]    = Σ_r dy[r, j] · x[r, j] · inv[r]
 * dx: [rows, dim] of dt (overwritten; may alias dy); dg: [dim] of dt
 * (overwritten, not accumulated). dg is reduced in two fixed-order passes:
 * per chunk of rows into `workspace` (fp32, tp_rmsnorm_bwd_workspace_bytes),
 * then over the chunks in order. */
TP_MUST_CHECK cudaError_t tp_launch_rmsnorm_bwd(tp_dtype dt, const void *dy, const void *x,
                                                const void *g, const float *inv_rms, void *dx,
                                                void *dg, float *workspace, int64_t rows,
                                                int64_t dim, cudaStream_t stream);

/* One rank's attention heads over the full sequence, and their dtype:
 * what RoPE and the attention core work on. */
typedef struct tp_attention_shape {
  tp_dtype dtype;
  int64_t seq;      /* S: the full sequence */
  int64_t batch;    /* B */
  int64_t hq, hkv;  /* local query and KV heads; hq a multiple of hkv */
  int64_t head_dim; /* d */
} tp_attention_shape;

/* ---- RoPE (Llama 3 rotary embedding, HF "rotate_half" convention) --------------------------
 * For head_dim d, half = d/2, pair i in [0, half): inv_freq_i = theta^(−2i/d),
 * angle = s · inv_freq_i at sequence position s, and the pair (x_i, x_{i+half})
 * of every Q and K head turns by that angle:
 *   x_i' = x_i·cos − x_{i+half}·sin,   x_{i+half}' = x_{i+half}·cos + x_i·sin.
 * Llama 3 uses theta = 500000. (Llama 3.1's long-context frequency scaling
 * is not applied.) */

#define TP_ROPE_THETA 500000.0

/* Bytes of the cos/sin table for positions [0, seq): 2 · seq · (d/2) · 4. */
size_t tp_rope_table_bytes(int64_t seq, int64_t head_dim);

/* Fills the table: cos at table[s·half + i], sin at table[seq·half + s·half + i];
 * angles and trigonometry in float64, stored as fp32. Built once per shape;
 * head_dim must be even. */
TP_MUST_CHECK cudaError_t tp_launch_rope_table(float *table, int64_t seq, int64_t head_dim,
                                               double theta, cudaStream_t stream);

/* Rotates, in place, the Q and K heads of a QKV buffer [seq·batch, (hq + 2·hkv)·d]
 * of the shape's dtype (layout above; row r is at position r / batch); V is
 * not touched. table from tp_launch_rope_table with the same seq and d.
 * head_dim must be even; hkv may be 0. */
TP_MUST_CHECK cudaError_t tp_launch_rope_fwd(const tp_attention_shape *shape, void *qkv,
                                             const float *table, cudaStream_t stream);

/* The same rotation into another buffer of the layout: out holds qkv with its
 * Q and K heads rotated and its V heads copied, each rotated element the bits
 * tp_launch_rope_fwd gives in place; qkv is only read (selective activation
 * checkpointing keeps the projection's output and recomputes this).
 * cudaErrorInvalidValue when the two buffers overlap. */
TP_MUST_CHECK cudaError_t tp_launch_rope_fwd_into(const tp_attention_shape *shape, const void *qkv,
                                                  void *out, const float *table,
                                                  cudaStream_t stream);

/* Backward: the inverse (transposed) rotation applied in place to the dQ and
 * dK heads of a dQKV buffer of the same layout; dV is not touched. */
TP_MUST_CHECK cudaError_t tp_launch_rope_bwd(const tp_attention_shape *shape, void *dqkv,
                                             const float *table, cudaStream_t stream);

/* ---- causal GQA attention core ---------------------------------------------------------------
 * For batch element b and local query head h, whose KV head is h / (hq/hkv):
 *   P = softmax(Q Kᵀ / sqrt(d) + causal mask),  O = P V
 * over the full sequence (query position s sees keys 0..s).
 *
 * How it runs. Q, K and V are first copied out of the QKV rows into
 * head-major [B, H, S, d] buffers (one gather kernel per tensor). In that
 * layout the g = hq/hkv query heads that share a KV head are one contiguous
 * [g·S, d] matrix, so every product is ONE cuBLASLt strided-batched GEMM over
 * the B·hkv (batch element, KV head) pairs:
 *   scores[g·S, S] = Q_grp · Kᵀ / sqrt(d)   (fp32 output, also for bf16)
 *   O_grp[g·S, d]  = P_grp · V
 *   dV[S, d]       = P_grpᵀ · dO_grp          (sums the g query heads)
 *   dP[g·S, S]     = dO_grp · Vᵀ              (fp32 output)
 *   dQ_grp[g·S, d] = dS_grp · K / sqrt(d)
 *   dK[S, d]       = dS_grpᵀ · Q_grp / sqrt(d) (sums the g query heads)
 * so the sum over the query heads of a group happens inside the GEMM's inner
 * dimension: deterministic, no atomics. The softmax kernels handle the mask
 * (query position = row mod S) and write zeros above the diagonal; the full
 * S×S products are computed (an unfused attention's cost).
 * Scores and P are [B, hq, S, S] (row (b·hq + h)·S + s).
 *
 * Memory, with q = B·hq·S·d and kv = B·hkv·S·d elements, e = dtype bytes,
 * A(x) = x rounded up to 256 bytes:
 *   saved (P, kept from forward to backward):  B·hq·S²·e
 *   workspace, forward only: A(q·e) + 2·A(kv·e) + A(B·hq·S²·4)
 *   workspace, with backward: that + A(q·e) + A(kv·e) + A(B·hq·S²·e)
 * Llama 3 8B at TP 2 (hq 16, hkv 4, d 128), S = 8192, B = 1, bf16:
 * P 2 GiB; workspace 4.05 GiB forward only, 6.09 GiB with backward. */

/* Columns of the QKV buffer: (hq + 2·hkv)·d. */
int64_t tp_attention_qkv_width(const tp_attention_shape *shape);
/* Bytes of the saved P: B·hq·S²·e. */
size_t tp_attention_saved_bytes(const tp_attention_shape *shape);
/* Bytes of workspace (formula above); backward = 0 for a forward-only run.
 * The forward uses a prefix of the backward's workspace, so one buffer of
 * the backward's size serves both. */
size_t tp_attention_workspace_bytes(const tp_attention_shape *shape, int backward);

/* Forward: qkv [S·B, (hq + 2·hkv)·d] (after RoPE) → out [S·B, hq·d], both of
 * the shape's dtype, rows in (seq, batch) order. Saves P into saved_p
 * (tp_attention_saved_bytes), which the backward reads. workspace:
 * tp_attention_workspace_bytes(shape, 0) bytes or more, 256-byte aligned.
 * TP_EREJECT for a shape it cannot run (hq not a multiple of hkv, ...). */
TP_MUST_CHECK tp_rc tp_attention_forward(tp_gemm *gemm, const tp_attention_shape *shape,
                                         const void *qkv, void *out, void *saved_p, void *workspace,
                                         cudaStream_t stream);

/* Backward: from dout [S·B, hq·d], the forward's qkv and saved P, writes
 * every column of dqkv [S·B, (hq + 2·hkv)·d] (dQ, then dK and dV summed
 * over the query heads that share each KV head), the gradient with respect
 * to the rotated Q and K (tp_launch_rope_bwd turns it back). workspace:
 * tp_attention_workspace_bytes(shape, 1) bytes, 256-byte aligned. */
TP_MUST_CHECK tp_rc tp_attention_backward(tp_gemm *gemm, const tp_attention_shape *shape,
                                          const void *qkv, const void *saved_p, const void *dout,
                                          void *dqkv, void *workspace, cudaStream_t stream);

/* Building blocks of the attention core, exposed for tests and for a fused
 * replacement to reuse.
 *
 * Copies `heads` heads starting at column col0 of the rows [S·B, ld] into
 * head-major dst [B, heads, S, d]: dst[((b·heads + h)·S + s)·d + j] =
 * src[(s·B + b)·ld + col0 + h·d + j]. */
TP_MUST_CHECK cudaError_t tp_launch_attention_gather_heads(tp_dtype dt, const void *src, int64_t ld,
                                                           int64_t col0, void *dst, int64_t seq,
                                                           int64_t batch, int64_t heads,
                                                           int64_t head_dim, cudaStream_t stream);
/* The inverse: head-major src [B, heads, S, d] into columns col0.. of rows [S·B, ld]. */
TP_MUST_CHECK cudaError_t tp_launch_attention_scatter_heads(tp_dtype dt, const void *src, void *dst,
                                                            int64_t ld, int64_t col0, int64_t seq,
                                                            int64_t batch, int64_t heads,
                                                            int64_t head_dim, cudaStream_t stream);

/* Causal softmax over rows of fp32 scores [rows, seq] whose query position
 * is row mod seq: p[r, j] = exp(x_j − max) / Σ exp(x_k − max) over
 * k <= row mod seq, and exactly 0 for j > row mod seq. p: [rows, seq] of dt. */
TP_MUST_CHECK cudaError_t tp_launch_attention_softmax_fwd(tp_dtype dt, const float *scores, void *p,
                                                          int64_t rows, int64_t seq,
                                                          cudaStream_t stream);

/* Its backward: ds = p ∘ (dp − Σ_k dp_k·p_k) over the same causal rows, 0 above
 * the diagonal. p, ds: [rows, seq] of dt; dp: fp32. */
TP_MUST_CHECK cudaError_t tp_launch_attention_softmax_bwd(tp_dtype dt, const void *p,
                                                          const float *dp, void *ds, int64_t rows,
                                                          int64_t seq, cudaStream_t stream);

/* ---- SwiGLU ----------------------------------------------------------------------------------
 * h = silu(a) · b = a · σ(a) · b with a the w1 output, b the w3 output, all
 * [rows, cols] of dt (count = rows·cols elements, contiguous). */

TP_MUST_CHECK cudaError_t tp_launch_swiglu_fwd(tp_dtype dt, const void *a, const void *b, void *h,
                                               size_t count, cudaStream_t stream);

/* Backward: da = dh · b · σ(a)·(1 + a·(1 − σ(a))), db = dh · a·σ(a). da and db
 * may alias a and b respectively (each element is read before it is written). */
TP_MUST_CHECK cudaError_t tp_launch_swiglu_bwd(tp_dtype dt, const void *dh, const void *a,
                                               const void *b, void *da, void *db, size_t count,
                                               cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TP_LAYERS_H */
