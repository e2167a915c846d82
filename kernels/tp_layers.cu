/*
 * tp_layers.cu — device kernels of the non-TP layer pieces (tp_layers.h):
 * RMSNorm, RoPE, the attention core's layout copies and causal softmax, and
 * SwiGLU, each templated over float and __nv_bfloat16 behind a C launcher.
 *
 * Every kernel reads its dtype, computes in fp32 and rounds once on store.
 * Row reductions run one block of kRowThreads per row and combine the
 * warps' partial results in warp order, so a row's result never depends on
 * timing: repeated runs give the same bits. The attention GEMMs that sit
 * between these kernels are driven from tp_attention.c.
 */
#include <cuda_bf16.h>

#include "kernels/tp_device_math.cuh"
#include "kernels/tp_layers.h"

namespace {

using tp_dev::from_f32;
using tp_dev::load_f32;

constexpr int kRowThreads = 256; /* threads of the one-block-per-row kernels */
constexpr int kRowWarps = kRowThreads / 32;
constexpr int kEltThreads = 256; /* threads of the elementwise, grid-stride kernels */
constexpr int kDgChunksMax = 256;

/* Sum over the block (blockDim.x == kRowThreads); every thread gets the same
 * value. The warps' partials are added in warp order, so the result is
 * deterministic. `smem` holds kRowWarps floats and is free again on return. */
__device__ float block_sum(float v, float *smem) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kRowWarps; ++w) total += smem[w];
  __syncthreads();
  return total;
}

__device__ float block_max(float v, float *smem) {
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
  __syncthreads();
  float total = smem[0];
  for (int w = 1; w < kRowWarps; ++w) total = fmaxf(total, smem[w]);
  __syncthreads();
  return total;
}

unsigned int grid_for(size_t count) { return tp_dev::grid_blocks(count, kEltThreads, 8192); }

bool valid_dtype(tp_dtype dt) { return dt == TP_BF16 || dt == TP_FP32; }

/* Rows become blocks of a one-block-per-row kernel: gridDim.x's limit. */
bool valid_rows(int64_t rows) { return rows >= 1 && rows <= INT32_MAX; }

/* ---- RMSNorm -------------------------------------------------------------------------------- */

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_fwd_kernel(const T *__restrict__ x, const T *__restrict__ g, T *__restrict__ y,
                       float *__restrict__ inv_rms, int64_t dim, float eps) {
  __shared__ float smem[kRowWarps];
  const size_t base = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(dim);
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < dim; j += kRowThreads) {
    float v = load_f32(x, base + j);
    ss += v * v;
  }
  ss = block_sum(ss, smem);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  for (int64_t j = threadIdx.x; j < dim; j += kRowThreads)
    y[base + j] = from_f32<T>(load_f32(x, base + j) * inv * load_f32(g, j));
  if (threadIdx.x == 0) inv_rms[blockIdx.x] = inv;
}

/* dx of one row per block. dx may alias dy: every dy of the row is read
 * (into the block sum) before the first dx is stored. */
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    rmsnorm_bwd_dx_kernel(const T *dy, const T *__restrict__ x, const T *__restrict__ g,
                          const float *__restrict__ inv_rms, T *dx, int64_t dim) {
  __shared__ float smem[kRowWarps];
  const size_t base = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(dim);
  float dot = 0.0f;
  for (int64_t j = threadIdx.x; j < dim; j += kRowThreads)
    dot += load_f32(dy, base + j) * load_f32(g, j) * load_f32(x, base + j);
  dot = block_sum(dot, smem);
  const float inv = inv_rms[blockIdx.x];
  const float coef = inv * inv * dot / static_cast<float>(dim);
  for (int64_t j = threadIdx.x; j < dim; j += kRowThreads) {
    float v = load_f32(g, j) * load_f32(dy, base + j) - load_f32(x, base + j) * coef;
    dx[base + j] = from_f32<T>(inv * v);
  }
}

/* Pass 1 of dg: block (column tile, chunk) sums its chunk's rows in row order. */
template <typename T>
__global__ void __launch_bounds__(kEltThreads)
    rmsnorm_dg_partial_kernel(const T *__restrict__ dy, const T *__restrict__ x,
                              const float *__restrict__ inv_rms, float *__restrict__ partial,
                              int64_t rows, int64_t dim, int64_t rows_per_chunk) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kEltThreads + threadIdx.x;
  if (j >= dim) return;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float acc = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    const size_t i = static_cast<size_t>(r) * static_cast<size_t>(dim) + static_cast<size_t>(j);
    acc += load_f32(dy, i) * load_f32(x, i) * inv_rms[r];
  }
  partial[static_cast<size_t>(blockIdx.y) * static_cast<size_t>(dim) + j] = acc;
}

/* Pass 2 of dg: the chunks' partial sums, in chunk order. */
template <typename T>
__global__ void __launch_bounds__(kEltThreads)
    rmsnorm_dg_final_kernel(const float *__restrict__ partial, T *__restrict__ dg, int64_t n_chunks,
                            int64_t dim) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kEltThreads + threadIdx.x;
  if (j >= dim) return;
  float acc = 0.0f;
  for (int64_t c = 0; c < n_chunks; ++c) acc += partial[c * dim + j];
  dg[j] = from_f32<T>(acc);
}

/* The chunking of dg's rows: a function of rows alone, so a shape always
 * reduces in the same order. */
int64_t dg_rows_per_chunk(int64_t rows) {
  int64_t chunks = rows < kDgChunksMax ? rows : kDgChunksMax;
  return (rows + chunks - 1) / chunks;
}

template <typename T>
cudaError_t rmsnorm_fwd(const void *x, const void *g, void *y, float *inv_rms, int64_t rows,
                        int64_t dim, float eps, cudaStream_t stream) {
  rmsnorm_fwd_kernel<<<static_cast<unsigned int>(rows), kRowThreads, 0, stream>>>(
      static_cast<const T *>(x), static_cast<const T *>(g), static_cast<T *>(y), inv_rms, dim, eps);
  return cudaGetLastError();
}

template <typename T>
cudaError_t rmsnorm_bwd(const void *dy, const void *x, const void *g, const float *inv_rms,
                        void *dx, void *dg, float *workspace, int64_t rows, int64_t dim,
                        cudaStream_t stream) {
  const int64_t per_chunk = dg_rows_per_chunk(rows);
  const int64_t n_chunks = (rows + per_chunk - 1) / per_chunk;
  const unsigned int col_tiles = static_cast<unsigned int>((dim + kEltThreads - 1) / kEltThreads);
  /* dg first: it reads dy, which dx may overwrite. */
  rmsnorm_dg_partial_kernel<<<dim3(col_tiles, static_cast<unsigned int>(n_chunks)), kEltThreads, 0,
                              stream>>>(static_cast<const T *>(dy), static_cast<const T *>(x),
                                        inv_rms, workspace, rows, dim, per_chunk);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  rmsnorm_dg_final_kernel<<<col_tiles, kEltThreads, 0, stream>>>(workspace, static_cast<T *>(dg),
                                                                 n_chunks, dim);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  rmsnorm_bwd_dx_kernel<<<static_cast<unsigned int>(rows), kRowThreads, 0, stream>>>(
      static_cast<const T *>(dy), static_cast<const T *>(x), static_cast<const T *>(g), inv_rms,
      static_cast<T *>(dx), dim);
  return cudaGetLastError();
}

/* ---- RoPE ----------------------------------------------------------------------------------- */

__global__ void rope_table_kernel(float *table, int64_t seq, int64_t half, double theta) {
  const size_t count = static_cast<size_t>(seq) * static_cast<size_t>(half);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t idx = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < count;
       idx += stride) {
    const int64_t i = static_cast<int64_t>(idx % static_cast<size_t>(half));
    const int64_t s = static_cast<int64_t>(idx / static_cast<size_t>(half));
    const double inv_freq = pow(theta, -2.0 * static_cast<double>(i) / (2.0 * half));
    double sn, cs;
    sincos(static_cast<double>(s) * inv_freq, &sn, &cs);
    table[idx] = static_cast<float>(cs);
    table[count + idx] = static_cast<float>(sn);
  }
}

/* One thread per (row, head, pair) over the first `heads` heads of each row:
 * the rot_heads Q and K heads turn (kInverse: by −angle), the heads after them
 * (V, when `heads` covers them) are copied. In place (in == out) `heads` is
 * rot_heads; into another buffer it covers V too. Both are this one kernel, so
 * a rotated element has the same bits either way. */
template <typename T, bool kInverse>
__global__ void __launch_bounds__(kEltThreads)
    rope_kernel(const T *in, T *out, const float *__restrict__ table, int64_t seq, int64_t batch,
                int64_t heads, int64_t rot_heads, int64_t width, int64_t half) {
  const size_t count = static_cast<size_t>(seq * batch * heads * half);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t sin_off = static_cast<size_t>(seq * half);
  for (size_t idx = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < count;
       idx += stride) {
    const size_t i = idx % static_cast<size_t>(half);
    const size_t rest = idx / static_cast<size_t>(half);
    const size_t head = rest % static_cast<size_t>(heads);
    const size_t row = rest / static_cast<size_t>(heads);
    const size_t s = row / static_cast<size_t>(batch); /* rows are (seq, batch) */
    const size_t lo = row * static_cast<size_t>(width) + head * 2 * static_cast<size_t>(half) + i;
    const size_t hi = lo + static_cast<size_t>(half);
    if (head >= static_cast<size_t>(rot_heads)) {
      out[lo] = in[lo];
      out[hi] = in[hi];
      continue;
    }
    const float c = table[s * static_cast<size_t>(half) + i];
    const float sn = kInverse ? -table[sin_off + s * static_cast<size_t>(half) + i]
                              : table[sin_off + s * static_cast<size_t>(half) + i];
    const float x1 = load_f32(in, lo), x2 = load_f32(in, hi);
    out[lo] = from_f32<T>(x1 * c - x2 * sn);
    out[hi] = from_f32<T>(x2 * c + x1 * sn);
  }
}

/* in == out: the Q and K heads in place; else every head into out (V copied). */
template <typename T, bool kInverse>
cudaError_t rope(const tp_attention_shape *s, const void *in, void *out, const float *table,
                 cudaStream_t stream) {
  const int64_t half = s->head_dim / 2, rot_heads = s->hq + s->hkv;
  const int64_t heads = in == out ? rot_heads : rot_heads + s->hkv;
  const size_t count = static_cast<size_t>(s->seq * s->batch * heads * half);
  rope_kernel<T, kInverse><<<grid_for(count), kEltThreads, 0, stream>>>(
      static_cast<const T *>(in), static_cast<T *>(out), table, s->seq, s->batch, heads, rot_heads,
      (s->hq + 2 * s->hkv) * s->head_dim, half);
  return cudaGetLastError();
}

bool valid_rope(const tp_attention_shape *s, const void *qkv, const float *table) {
  return s && valid_dtype(s->dtype) && qkv && table && s->seq >= 1 && s->batch >= 1 && s->hq >= 1 &&
         s->hkv >= 0 && s->head_dim >= 2 && s->head_dim % 2 == 0;
}

/* The rotation (kInverse: its inverse) of a shape's Q and K heads, checked. */
template <bool kInverse>
cudaError_t rope_checked(const tp_attention_shape *s, const void *in, void *out, const float *table,
                         cudaStream_t stream) {
  if (!valid_rope(s, in, table) || !out) return cudaErrorInvalidValue;
  return s->dtype == TP_BF16 ? rope<__nv_bfloat16, kInverse>(s, in, out, table, stream)
                             : rope<float, kInverse>(s, in, out, table, stream);
}

/* Whether two byte ranges share a byte. */
bool overlaps(const void *a, const void *b, size_t bytes) {
  const char *pa = static_cast<const char *>(a), *pb = static_cast<const char *>(b);
  return pa < pb + bytes && pb < pa + bytes;
}

/* ---- attention: layout copies and causal softmax -------------------------------------------- */

/* One thread per element of the head-major side; head_dim is innermost on
 * both sides, so consecutive threads touch consecutive addresses. */
template <typename T, bool kToHeads>
__global__ void __launch_bounds__(kEltThreads)
    attention_heads_copy_kernel(const T *__restrict__ src, T *__restrict__ dst, int64_t ld,
                                int64_t col0, int64_t seq, int64_t batch, int64_t heads,
                                int64_t head_dim) {
  const size_t count = static_cast<size_t>(batch * heads * seq * head_dim);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t idx = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < count;
       idx += stride) {
    const size_t j = idx % static_cast<size_t>(head_dim);
    size_t rest = idx / static_cast<size_t>(head_dim);
    const size_t s = rest % static_cast<size_t>(seq);
    rest /= static_cast<size_t>(seq);
    const size_t h = rest % static_cast<size_t>(heads);
    const size_t b = rest / static_cast<size_t>(heads);
    const size_t row = s * static_cast<size_t>(batch) + b; /* (seq, batch) row order */
    const size_t at_rows = row * static_cast<size_t>(ld) + static_cast<size_t>(col0) +
                           h * static_cast<size_t>(head_dim) + j;
    if (kToHeads) dst[idx] = src[at_rows];
    else dst[at_rows] = src[idx];
  }
}

template <typename T, bool kToHeads>
cudaError_t heads_copy(const void *src, void *dst, int64_t ld, int64_t col0, int64_t seq,
                       int64_t batch, int64_t heads, int64_t head_dim, cudaStream_t stream) {
  const size_t count = static_cast<size_t>(batch * heads * seq * head_dim);
  attention_heads_copy_kernel<T, kToHeads><<<grid_for(count), kEltThreads, 0, stream>>>(
      static_cast<const T *>(src), static_cast<T *>(dst), ld, col0, seq, batch, heads, head_dim);
  return cudaGetLastError();
}

bool valid_heads_copy(const void *src, const void *dst, int64_t ld, int64_t col0, int64_t seq,
                      int64_t batch, int64_t heads, int64_t head_dim) {
  return src && dst && seq >= 1 && batch >= 1 && heads >= 1 && head_dim >= 1 && col0 >= 0 &&
         col0 + heads * head_dim <= ld;
}

/* One block per row; the row's query position is row mod seq, and keys
 * 0..q are visible. Reads the visible scores three times (max, sum, write):
 * a row is at most seq·4 bytes and stays in cache between the passes. */
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    attention_softmax_fwd_kernel(const float *__restrict__ scores, T *__restrict__ p, int64_t seq) {
  __shared__ float smem[kRowWarps];
  const size_t base = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(seq);
  const int64_t visible = static_cast<int64_t>(blockIdx.x) % seq + 1;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < visible; j += kRowThreads) m = fmaxf(m, scores[base + j]);
  m = block_max(m, smem); /* finite: key 0 is always visible */
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < visible; j += kRowThreads) sum += expf(scores[base + j] - m);
  sum = block_sum(sum, smem);
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < seq; j += kRowThreads)
    p[base + j] = from_f32<T>(j < visible ? expf(scores[base + j] - m) * inv : 0.0f);
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    attention_softmax_bwd_kernel(const T *__restrict__ p, const float *__restrict__ dp,
                                 T *__restrict__ ds, int64_t seq) {
  __shared__ float smem[kRowWarps];
  const size_t base = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(seq);
  const int64_t visible = static_cast<int64_t>(blockIdx.x) % seq + 1;
  float dot = 0.0f;
  for (int64_t j = threadIdx.x; j < visible; j += kRowThreads)
    dot += load_f32(p, base + j) * dp[base + j];
  dot = block_sum(dot, smem);
  for (int64_t j = threadIdx.x; j < seq; j += kRowThreads)
    ds[base + j] = from_f32<T>(j < visible ? load_f32(p, base + j) * (dp[base + j] - dot) : 0.0f);
}

template <typename T>
cudaError_t softmax_fwd(const float *scores, void *p, int64_t rows, int64_t seq,
                        cudaStream_t stream) {
  attention_softmax_fwd_kernel<<<static_cast<unsigned int>(rows), kRowThreads, 0, stream>>>(
      scores, static_cast<T *>(p), seq);
  return cudaGetLastError();
}

template <typename T>
cudaError_t softmax_bwd(const void *p, const float *dp, void *ds, int64_t rows, int64_t seq,
                        cudaStream_t stream) {
  attention_softmax_bwd_kernel<<<static_cast<unsigned int>(rows), kRowThreads, 0, stream>>>(
      static_cast<const T *>(p), dp, static_cast<T *>(ds), seq);
  return cudaGetLastError();
}

/* ---- SwiGLU --------------------------------------------------------------------------------- */

__device__ __forceinline__ float sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

template <typename T>
__global__ void __launch_bounds__(kEltThreads)
    swiglu_fwd_kernel(const T *__restrict__ a, const T *__restrict__ b, T *__restrict__ h,
                      size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const float av = load_f32(a, i);
    h[i] = from_f32<T>(av * sigmoid(av) * load_f32(b, i));
  }
}

/* No __restrict__: da and db may alias a and b (each element is read, then written). */
template <typename T>
__global__ void __launch_bounds__(kEltThreads)
    swiglu_bwd_kernel(const T *dh, const T *a, const T *b, T *da, T *db, size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const float av = load_f32(a, i), bv = load_f32(b, i), g = load_f32(dh, i);
    const float sg = sigmoid(av);
    da[i] = from_f32<T>(g * bv * sg * (1.0f + av * (1.0f - sg)));
    db[i] = from_f32<T>(g * av * sg);
  }
}

template <typename T>
cudaError_t swiglu_fwd(const void *a, const void *b, void *h, size_t count, cudaStream_t stream) {
  swiglu_fwd_kernel<<<grid_for(count), kEltThreads, 0, stream>>>(
      static_cast<const T *>(a), static_cast<const T *>(b), static_cast<T *>(h), count);
  return cudaGetLastError();
}

template <typename T>
cudaError_t swiglu_bwd(const void *dh, const void *a, const void *b, void *da, void *db,
                       size_t count, cudaStream_t stream) {
  swiglu_bwd_kernel<<<grid_for(count), kEltThreads, 0, stream>>>(
      static_cast<const T *>(dh), static_cast<const T *>(a), static_cast<const T *>(b),
      static_cast<T *>(da), static_cast<T *>(db), count);
  return cudaGetLastError();
}

} // namespace

/* ---- C launchers ---------------------------------------------------------------------------- */

extern "C" cudaError_t tp_launch_rmsnorm_fwd(tp_dtype dt, const void *x, const void *g, void *y,
                                             float *inv_rms, int64_t rows, int64_t dim, float eps,
                                             cudaStream_t stream) {
  if (!valid_dtype(dt) || !valid_rows(rows) || dim < 1 || !x || !g || !y || !inv_rms)
    return cudaErrorInvalidValue;
  return dt == TP_BF16 ? rmsnorm_fwd<__nv_bfloat16>(x, g, y, inv_rms, rows, dim, eps, stream)
                       : rmsnorm_fwd<float>(x, g, y, inv_rms, rows, dim, eps, stream);
}

extern "C" size_t tp_rmsnorm_bwd_workspace_bytes(int64_t rows, int64_t dim) {
  if (rows < 1 || dim < 1) return 0;
  const int64_t chunks = rows < kDgChunksMax ? rows : kDgChunksMax;
  return static_cast<size_t>(chunks) * static_cast<size_t>(dim) * sizeof(float);
}

extern "C" cudaError_t tp_launch_rmsnorm_bwd(tp_dtype dt, const void *dy, const void *x,
                                             const void *g, const float *inv_rms, void *dx,
                                             void *dg, float *workspace, int64_t rows, int64_t dim,
                                             cudaStream_t stream) {
  if (!valid_dtype(dt) || !valid_rows(rows) || dim < 1 || !dy || !x || !g || !inv_rms || !dx ||
      !dg || !workspace)
    return cudaErrorInvalidValue;
  return dt == TP_BF16
             ? rmsnorm_bwd<__nv_bfloat16>(dy, x, g, inv_rms, dx, dg, workspace, rows, dim, stream)
             : rmsnorm_bwd<float>(dy, x, g, inv_rms, dx, dg, workspace, rows, dim, stream);
}

extern "C" size_t tp_rope_table_bytes(int64_t seq, int64_t head_dim) {
  if (seq < 1 || head_dim < 2) return 0;
  return 2u * static_cast<size_t>(seq) * static_cast<size_t>(head_dim / 2) * sizeof(float);
}

extern "C" cudaError_t tp_launch_rope_table(float *table, int64_t seq, int64_t head_dim,
                                            double theta, cudaStream_t stream) {
  if (!table || seq < 1 || head_dim < 2 || head_dim % 2 != 0 || !(theta > 1.0))
    return cudaErrorInvalidValue;
  const int64_t half = head_dim / 2;
  rope_table_kernel<<<grid_for(static_cast<size_t>(seq * half)), kEltThreads, 0, stream>>>(
      table, seq, half, theta);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_rope_fwd(const tp_attention_shape *shape, void *qkv,
                                          const float *table, cudaStream_t stream) {
  return rope_checked<false>(shape, qkv, qkv, table, stream);
}

extern "C" cudaError_t tp_launch_rope_fwd_into(const tp_attention_shape *shape, const void *qkv,
                                               void *out, const float *table, cudaStream_t stream) {
  if (!valid_rope(shape, qkv, table) || !out) return cudaErrorInvalidValue;
  const size_t bytes =
      static_cast<size_t>(shape->seq * shape->batch * tp_attention_qkv_width(shape)) *
      tp_dtype_bytes(shape->dtype);
  if (overlaps(qkv, out, bytes)) return cudaErrorInvalidValue;
  return rope_checked<false>(shape, qkv, out, table, stream);
}

extern "C" cudaError_t tp_launch_rope_bwd(const tp_attention_shape *shape, void *dqkv,
                                          const float *table, cudaStream_t stream) {
  return rope_checked<true>(shape, dqkv, dqkv, table, stream);
}

extern "C" cudaError_t tp_launch_attention_gather_heads(tp_dtype dt, const void *src, int64_t ld,
                                                        int64_t col0, void *dst, int64_t seq,
                                                        int64_t batch, int64_t heads,
                                                        int64_t head_dim, cudaStream_t stream) {
  if (!valid_dtype(dt) || !valid_heads_copy(src, dst, ld, col0, seq, batch, heads, head_dim))
    return cudaErrorInvalidValue;
  return dt == TP_BF16
             ? heads_copy<__nv_bfloat16, true>(src, dst, ld, col0, seq, batch, heads, head_dim,
                                               stream)
             : heads_copy<float, true>(src, dst, ld, col0, seq, batch, heads, head_dim, stream);
}

extern "C" cudaError_t tp_launch_attention_scatter_heads(tp_dtype dt, const void *src, void *dst,
                                                         int64_t ld, int64_t col0, int64_t seq,
                                                         int64_t batch, int64_t heads,
                                                         int64_t head_dim, cudaStream_t stream) {
  if (!valid_dtype(dt) || !valid_heads_copy(src, dst, ld, col0, seq, batch, heads, head_dim))
    return cudaErrorInvalidValue;
  return dt == TP_BF16
             ? heads_copy<__nv_bfloat16, false>(src, dst, ld, col0, seq, batch, heads, head_dim,
                                                stream)
             : heads_copy<float, false>(src, dst, ld, col0, seq, batch, heads, head_dim, stream);
}

extern "C" cudaError_t tp_launch_attention_softmax_fwd(tp_dtype dt, const float *scores, void *p,
                                                       int64_t rows, int64_t seq,
                                                       cudaStream_t stream) {
  if (!valid_dtype(dt) || !valid_rows(rows) || seq < 1 || !scores || !p)
    return cudaErrorInvalidValue;
  return dt == TP_BF16 ? softmax_fwd<__nv_bfloat16>(scores, p, rows, seq, stream)
                       : softmax_fwd<float>(scores, p, rows, seq, stream);
}

extern "C" cudaError_t tp_launch_attention_softmax_bwd(tp_dtype dt, const void *p, const float *dp,
                                                       void *ds, int64_t rows, int64_t seq,
                                                       cudaStream_t stream) {
  if (!valid_dtype(dt) || !valid_rows(rows) || seq < 1 || !p || !dp || !ds)
    return cudaErrorInvalidValue;
  return dt == TP_BF16 ? softmax_bwd<__nv_bfloat16>(p, dp, ds, rows, seq, stream)
                       : softmax_bwd<float>(p, dp, ds, rows, seq, stream);
}

extern "C" cudaError_t tp_launch_swiglu_fwd(tp_dtype dt, const void *a, const void *b, void *h,
                                            size_t count, cudaStream_t stream) {
  if (!valid_dtype(dt) || !a || !b || !h) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  return dt == TP_BF16 ? swiglu_fwd<__nv_bfloat16>(a, b, h, count, stream)
                       : swiglu_fwd<float>(a, b, h, count, stream);
}

extern "C" cudaError_t tp_launch_swiglu_bwd(tp_dtype dt, const void *dh, const void *a,
                                            const void *b, void *da, void *db, size_t count,
                                            cudaStream_t stream) {
  if (!valid_dtype(dt) || !dh || !a || !b || !da || !db) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  return dt == TP_BF16 ? swiglu_bwd<__nv_bfloat16>(dh, a, b, da, db, count, stream)
                       : swiglu_bwd<float>(dh, a, b, da, db, count, stream);
}
