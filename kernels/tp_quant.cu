/*
 * tp_quant.cu — the device quantizer (tp_quant_device.h): fp32/bf16 in,
 * E4M3/E5M2 bytes and scales out, for the four formats of tp_quant.h, with
 * the bits of the reference (tp_quant_ref.c).
 *
 * Built to run at memory bandwidth: a thread handles a vector of 8
 * consecutive elements of a row (16-byte loads of bf16, 8-byte stores of
 * fp8) and index arithmetic stays out of the per-element work (the first
 * version spent most of its time in a 64-bit division and modulo per
 * element, and one CUDA block per 32-element scale block). Every scale
 * block that lies inside one row is reduced where its elements are held:
 *   1x32 (mxfp8), 1x64 and 1x128 blocks (fp8-block activations): 4, 8 or
 *     16 neighbouring lanes of a warp own one block; they reduce its amax
 *     with shuffles, the first stores the scale, each converts its own 8
 *     elements. An agreed amax never comes here (these lanes find their
 *     own): fp8-row with K split into 32 or 128 columns takes the row kernel.
 *   fp8-row: one CUDA block per row, its vectors held in registers across
 *     the block's amax reduction, then converted (one read of the row).
 *   fp8 (tensorwise): a first pass reduces the amax (a block reduction and
 *     one atomic max per CUDA block on the float's bits: non-negative floats
 *     order as their bits do), one thread turns it into the scale, then the
 *     conversion pass; with an agreed amax only the conversion pass runs.
 * Rows that are not 16-byte aligned, partial vectors at a row's end and
 * data rows whose length is not a multiple of 8 take a per-element path of
 * the same kernels. 128x128 weight blocks and rows longer than a register
 * held row (untimed: weights are quantized once) run a simple kernel with
 * one CUDA block per scale block. The amax is an exact max (fmaxf, NaNs do
 * not count, as in the reference), so the order of reduction cannot change
 * it; an element is one IEEE division by the scale and the hardware's
 * cvt.rn.satfinite, as in every path.
 *
 * tp_quant_transpose_quantize_enqueue (the wgrad operands dYᵀ and Xᵀ,
 * quantized along T in the timed step) reads the bf16 source once: 128 x 64
 * tiles through shared memory, stored transposed (16-byte chunks swizzled
 * against bank conflicts), converted a half-warp per transposed row with the
 * same scale rules, division and conversion as above, so its bits are the
 * quantizer's on the transposed tensor. 1x32, 1x64 and 1x128 blocks reduce
 * their amax inside the tile; fp8-row's scales come from a column amax pass (one
 * atomic per column per 64+ rows), fp8's from the tensor amax pass (or an
 * agreed amax: dY's, shared with its quantization along N).
 * tp_quant_transpose_enqueue, a plain tiled transpose of 16-bit elements,
 * is left for Wᵀ in prepare (untimed): fp8-block's 128x128 weight blocks
 * span rows of the transpose, so the quantizer runs on the transposed copy.
 */
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_quant_device.h"

namespace {

constexpr int kVec = 8;          /* elements per thread vector */
constexpr int kThreads = 256;    /* threads of the streaming kernels */
constexpr int kRowThreads = 512; /* most threads of the register-held row kernel */
constexpr int kMaxRowVecs = 8;   /* most vectors a thread of it holds */
constexpr int kColThreads = 128; /* threads of the column amax kernel */
constexpr int64_t kColRows = 64; /* fewest source rows a column amax thread walks */
constexpr int64_t kMaxGridX = int64_t{1} << 30;
constexpr int64_t kMaxGridY = 65535; /* kernels loop over the rest */

/* ---- vectors ----------------------------------------------------------------------------------
 */

struct vec8 {
  float v[kVec];
};

/* The bits of 8 consecutive elements as loaded: one 16-byte word of bf16,
 * two of fp32. The fp8-row kernel holds these across its reduction (half
 * the registers of the floats for bf16). */
template <typename T> struct raw8 { uint4 w[sizeof(T) / 2]; };

__device__ __forceinline__ uint32_t bits_of(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ uint32_t bits_of(float v) { return __float_as_uint(v); }

/* Elements [c, c + 8) of a row, zeros past `cols`. fast: the row is 16-byte
 * aligned (checked on the host), so a full vector is 16-byte loads. */
template <typename T>
__device__ __forceinline__ raw8<T> load_raw(const T *row, int64_t c, int64_t cols, bool fast) {
  raw8<T> out;
  if (fast && c + kVec <= cols) {
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(T) / 2); ++i)
      out.w[i] = reinterpret_cast<const uint4 *>(row + c)[i];
    return out;
  }
  uint32_t words[sizeof(T) * 2] = {}; /* 8 elements' bits, element k at byte k sizeof(T) */
#pragma unroll
  for (int k = 0; k < kVec; ++k)
    if (c + k < cols) words[k * sizeof(T) / 4] |= bits_of(row[c + k]) << (8 * (k * sizeof(T) % 4));
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T) / 2); ++i)
    out.w[i] = make_uint4(words[4 * i], words[4 * i + 1], words[4 * i + 2], words[4 * i + 3]);
  return out;
}

__device__ __forceinline__ vec8 decode(const raw8<__nv_bfloat16> &r) {
  const uint32_t w[4] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w};
  vec8 out;
#pragma unroll
  for (int k = 0; k < 4; ++k) { /* little-endian: the even element in the low half */
    out.v[2 * k] = __uint_as_float(w[k] << 16);
    out.v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
  return out;
}

__device__ __forceinline__ vec8 decode(const raw8<float> &r) {
  const uint4 a = r.w[0], b = r.w[1];
  return vec8{{__uint_as_float(a.x), __uint_as_float(a.y), __uint_as_float(a.z),
               __uint_as_float(a.w), __uint_as_float(b.x), __uint_as_float(b.y),
               __uint_as_float(b.z), __uint_as_float(b.w)}};
}

template <typename T>
__device__ __forceinline__ vec8 load_vec(const T *row, int64_t c, int64_t cols, bool fast) {
  return decode(load_raw(row, c, cols, fast));
}

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }

__device__ __forceinline__ float vec_amax(const vec8 &x) {
  float m = 0.0f;
#pragma unroll
  for (int k = 0; k < kVec; ++k) m = fmaxf(m, fabsf(x.v[k]));
  return m;
}

__device__ __forceinline__ __nv_fp8_interpretation_t interp(tp_fp8_type t) {
  return t == TP_FP8_E4M3 ? __NV_E4M3 : __NV_E5M2;
}

__device__ __forceinline__ uint8_t encode(float v, tp_fp8_type t) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, interp(t)));
}

/* fp8(x[k] / scale) for the 8 elements, element 0 in the lowest byte. The
 * pair conversion is the same cvt.rn.satfinite as the single one, per lane. */
__device__ __forceinline__ uint2 encode_vec(const vec8 &x, float scale, tp_fp8_type t) {
  uint32_t w[2] = {0u, 0u};
#pragma unroll
  for (int k = 0; k < kVec / 2; ++k) {
    const float2 pair = make_float2(__fdiv_rn(x.v[2 * k], scale), __fdiv_rn(x.v[2 * k + 1], scale));
    const uint32_t bytes = __nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, interp(t));
    w[k / 2] |= bytes << (16 * (k % 2));
  }
  return make_uint2(w[0], w[1]);
}

/* Stores the first min(8, cols - c) bytes of e at row[c]. fast: the row is
 * 8-byte aligned (checked on the host). */
__device__ __forceinline__ void store_vec(uint8_t *row, int64_t c, int64_t cols, bool fast,
                                          uint2 e) {
  if (fast && c + kVec <= cols) {
    *reinterpret_cast<uint2 *>(row + c) = e;
    return;
  }
#pragma unroll
  for (int k = 0; k < kVec && c + k < cols; ++k)
    row[c + k] = static_cast<uint8_t>((k < 4 ? e.x : e.y) >> (8 * (k % 4)));
}

/* ---- reductions -------------------------------------------------------------------------------
 */

/* Max over the CUDA block of every thread's v (>= 0); blockDim.x a multiple
 * of 32, at most 1024; every thread of the block calls it. */
__device__ float block_max(float v) {
  __shared__ float warp_max[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads(); /* the previous call's readers are done with warp_max */
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = 0.0f;
  for (unsigned w = 0; w < blockDim.x / 32; ++w) m = fmaxf(m, warp_max[w]);
  return m;
}

/* Max over aligned groups of G lanes (G a power of two <= 32); every lane of the warp calls it. */
template <int G> __device__ __forceinline__ float group_max(float v) {
  for (int o = G / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* The scale of a block from its amax: stored at offset `off` by the caller
 * that `writes`, returned as the float every element is divided by. */
__device__ __forceinline__ float block_scale(const tp_scale_shape &s, tp_fp8_type t, float amax,
                                             int64_t off, bool writes, void *scales) {
  if (s.encoding == TP_SCALE_E8M0) {
    const uint8_t byte = tp_quant_scale_e8m0(t, amax);
    if (writes) static_cast<uint8_t *>(scales)[off] = byte;
    return tp_e8m0_value(byte);
  }
  const float scale = tp_quant_scale_f32(t, amax);
  if (writes) static_cast<float *>(scales)[off] = scale;
  return scale;
}

/* ---- 1 x (8 G) scale blocks: mxfp8 (G = 4), 1 x 64 (G = 8), fp8-block activations (G = 16) ---
 */

/* Thread slot i of a row holds columns [8 i, 8 i + 8); the G slots of scale
 * block gc are gc G .. gc G + G - 1, neighbouring lanes of one warp. */
template <typename T, int G>
__global__ void __launch_bounds__(kThreads)
    quantize_segments_kernel(const T *x, int64_t ld, bool x_fast, uint8_t *q, bool q_fast,
                             void *scales, tp_scale_shape s, tp_fp8_type t) {
  const int64_t slot = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t gc = slot / G, c = slot * kVec;
  const bool in_row = c < s.cols, leader = slot % G == 0 && gc < s.grid_cols;
  for (int64_t r = blockIdx.y; r < s.rows; r += gridDim.y) {
    const vec8 v = in_row ? load_vec(x + r * ld, c, s.cols, x_fast) : vec8{};
    const float amax = group_max<G>(vec_amax(v));
    const int64_t off = leader ? tp_scale_offset(&s, r, gc) : 0;
    const float scale = block_scale(s, t, amax, off, leader, scales);
    if (in_row) store_vec(q + r * s.cols, c, s.cols, q_fast, encode_vec(v, scale, t));
  }
}

/* ---- fp8-row: one CUDA block per row, the row held in registers ------------------------------
 */

/* Thread j holds vectors j, j + blockDim.x, ... (VPT of them, coalesced);
 * blockDim.x VPT 8 >= cols. agreed: NULL, or one amax per row. */
template <typename T, int VPT>
__global__ void __launch_bounds__(kRowThreads)
    quantize_rows_kernel(const T *x, int64_t ld, bool x_fast, uint8_t *q, bool q_fast,
                         float *scales, int64_t rows, int64_t cols, tp_fp8_type t,
                         const float *agreed) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    raw8<T> v[VPT];
    float local = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t c = (int64_t{threadIdx.x} + int64_t{i} * blockDim.x) * kVec;
      v[i] = c < cols ? load_raw(x + r * ld, c, cols, x_fast) : raw8<T>{};
      local = fmaxf(local, vec_amax(decode(v[i])));
    }
    const float amax = agreed ? agreed[r] : block_max(local);
    const float scale = tp_quant_scale_f32(t, amax);
    if (threadIdx.x == 0) scales[r] = scale;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t c = (int64_t{threadIdx.x} + int64_t{i} * blockDim.x) * kVec;
      if (c < cols) store_vec(q + r * cols, c, cols, q_fast, encode_vec(decode(v[i]), scale, t));
    }
  }
}

/* amax[r] = max |x| over row r: one CUDA block per row (fp8-row's local amax). */
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    rows_amax_kernel(const T *x, int64_t ld, bool x_fast, int64_t rows, int64_t cols, float *amax) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float local = 0.0f;
    for (int64_t c = int64_t{threadIdx.x} * kVec; c < cols; c += int64_t{blockDim.x} * kVec)
      local = fmaxf(local, vec_amax(load_vec(x + r * ld, c, cols, x_fast)));
    const float m = block_max(local);
    if (threadIdx.x == 0) amax[r] = m;
  }
}

/* ---- fp8 (tensorwise) --------------------------------------------------------------------------
 */

/* amax_bits = max(amax_bits, max over the tensor of |x| as float bits).
 * Rows from blockIdx.y, vectors from blockIdx.x, both looping; one atomic
 * per CUDA block. */
template <typename T>
__global__ void __launch_bounds__(kThreads)
    tensor_amax_kernel(const T *x, int64_t ld, bool x_fast, int64_t rows, int64_t cols,
                       unsigned int *amax_bits) {
  float local = 0.0f;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x * kVec;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    for (int64_t c = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * kVec; c < cols; c += stride)
      local = fmaxf(local, vec_amax(load_vec(x + r * ld, c, cols, x_fast)));
  const float m = block_max(local);
  if (threadIdx.x == 0 && m > 0.0f) atomicMax(amax_bits, __float_as_uint(m));
}

/* scale[0] = the scale of the amax that tensor_amax_kernel left in scale[0]
 * (the bits of a float). */
__global__ void tensor_scale_kernel(float *scale, tp_fp8_type t) {
  scale[0] = tp_quant_scale_f32(t, scale[0]);
}

/* Converts every element with one scale: agreed's (then also stored in
 * scale[0]) or, without agreed, the one already in scale[0]. */
template <typename T>
__global__ void __launch_bounds__(kThreads)
    quantize_tensor_kernel(const T *x, int64_t ld, bool x_fast, uint8_t *q, bool q_fast,
                           int64_t rows, int64_t cols, float *scale, tp_fp8_type t,
                           const float *agreed) {
  const float s = agreed ? tp_quant_scale_f32(t, agreed[0]) : scale[0];
  if (agreed && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) scale[0] = s;
  /* Blocks numbered from the end: blocks start roughly in order, so the data
   * the amax pass read last (the likeliest still in L2) is converted first. */
  const int64_t bx = gridDim.x - 1 - blockIdx.x, by = gridDim.y - 1 - blockIdx.y;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x * kVec;
  for (int64_t r = by; r < rows; r += gridDim.y)
    for (int64_t c = (bx * blockDim.x + threadIdx.x) * kVec; c < cols; c += stride)
      store_vec(q + r * cols, c, cols, q_fast,
                encode_vec(load_vec(x + r * ld, c, cols, x_fast), s, t));
}

/* ---- any scale block (128x128 weights, very long rows): one CUDA block each ------------------
 */

template <typename T>
__global__ void quantize_blocks_kernel(const T *x, int64_t ld, uint8_t *q, void *scales,
                                       tp_scale_shape s, tp_fp8_type t, const float *agreed) {
  const int64_t blocks = s.grid_rows * s.grid_cols;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t gr = b / s.grid_cols, gc = b % s.grid_cols;
    const int64_t r0 = gr * s.block_rows, c0 = gc * s.block_cols;
    const int64_t r1 = r0 + s.block_rows < s.rows ? r0 + s.block_rows : s.rows;
    const int64_t c1 = c0 + s.block_cols < s.cols ? c0 + s.block_cols : s.cols;
    float local = 0.0f;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x)
        local = fmaxf(local, fabsf(to_float(x[r * ld + c])));
    float amax = block_max(local);
    if (agreed) amax = agreed[gr];
    const float scale =
        block_scale(s, t, amax, tp_scale_offset(&s, gr, gc), threadIdx.x == 0, scales);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0 + threadIdx.x; c < c1; c += blockDim.x)
        q[r * s.cols + c] = encode(__fdiv_rn(to_float(x[r * ld + c]), scale), t);
  }
}

__global__ void encode_kernel(const float *x, size_t n, uint8_t *out, tp_fp8_type t) {
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    out[i] = encode(x[i], t);
}

/* ---- launch configuration ---------------------------------------------------------------------
 */

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t clamp_grid(int64_t n, int64_t most) { return n < 1 ? 1 : n > most ? most : n; }

/* Threads for `slots` per row: whole warps, at most `most`. */
int threads_for(int64_t slots, int most) {
  const int64_t n = ceil_div(slots, 32) * 32;
  return static_cast<int>(n > most ? most : n);
}

/* The operand as the kernels see it: rows of cols elements ld apart, and
 * whether whole vectors may be moved at once (x rows 16-byte aligned, q rows
 * 8-byte aligned). A contiguous tensor counts as one row, so tails occur
 * only at its end. */
template <typename T> struct view {
  const T *x;
  int64_t rows, cols, ld;
  bool x_fast, q_fast;
};

bool aligned(const void *p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <typename T> view<T> view_of(const tp_quant_args *a, bool flatten) {
  view<T> v{static_cast<const T *>(a->x), a->rows, a->cols, a->ld, false, false};
  if (flatten && a->ld == a->cols) {
    v.cols = a->rows * a->cols;
    v.rows = 1;
    v.ld = v.cols;
  }
  /* one row: only its start must be aligned */
  v.x_fast =
      aligned(v.x, 16) && (v.rows == 1 || (v.ld * static_cast<int64_t>(sizeof(T))) % 16 == 0);
  v.q_fast = aligned(a->q, 8) && (v.rows == 1 || v.cols % kVec == 0);
  return v;
}

/* SMs of the current device: the tensorwise amax pass runs a few blocks per
 * SM so its atomics stay few. */
tp_rc sm_count(int *out) {
  int dev = 0;
  TP_CUDA(cudaGetDevice(&dev));
  TP_CUDA(cudaDeviceGetAttribute(out, cudaDevAttrMultiProcessorCount, dev));
  return TP_OK;
}

/* The streaming grid of a view: x over a row's vectors, y over rows; with
 * `ctas` > 0 at most about that many CUDA blocks (the kernels loop). */
template <typename T> dim3 stream_grid(const view<T> &v, int64_t ctas) {
  int64_t gx = ceil_div(ceil_div(v.cols, kVec), kThreads);
  if (ctas > 0) gx = clamp_grid(gx, ctas);
  gx = clamp_grid(gx, kMaxGridX);
  int64_t gy = ctas > 0 ? clamp_grid(ctas / gx, v.rows) : v.rows;
  gy = clamp_grid(gy, kMaxGridY);
  return dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
}

template <typename T> tp_rc enqueue_tensor_amax(const view<T> &v, float *amax, cudaStream_t st) {
  int sms = 0;
  TP_TRY(sm_count(&sms));
  TP_CUDA(cudaMemsetAsync(amax, 0, sizeof(float), st));
  TP_CHECK_LAUNCH((tensor_amax_kernel<T><<<stream_grid(v, int64_t{sms} * 8), kThreads, 0, st>>>(
      v.x, v.ld, v.x_fast, v.rows, v.cols, reinterpret_cast<unsigned int *>(amax))));
  return TP_OK;
}

template <typename T> tp_rc enqueue_tensorwise(const tp_quant_args *a, cudaStream_t st) {
  const view<T> v = view_of<T>(a, true);
  float *scale = static_cast<float *>(a->scales);
  if (!a->agreed_amax) {
    TP_TRY(enqueue_tensor_amax(v, scale, st));
    TP_CHECK_LAUNCH((tensor_scale_kernel<<<1, 1, 0, st>>>(scale, a->elem)));
  }
  TP_CHECK_LAUNCH((quantize_tensor_kernel<T><<<stream_grid(v, 0), kThreads, 0, st>>>(
      v.x, v.ld, v.x_fast, a->q, v.q_fast, v.rows, v.cols, scale, a->elem, a->agreed_amax)));
  return TP_OK;
}

template <typename T, int G>
tp_rc enqueue_segments(const tp_quant_args *a, const tp_scale_shape &s, cudaStream_t st) {
  const view<T> v = view_of<T>(a, false);
  const int64_t slots = s.grid_cols * G;
  const int threads = threads_for(slots, kThreads);
  const dim3 grid(static_cast<unsigned>(ceil_div(slots, threads)),
                  static_cast<unsigned>(clamp_grid(s.rows, kMaxGridY)));
  TP_CHECK_LAUNCH((quantize_segments_kernel<T, G><<<grid, threads, 0, st>>>(
      v.x, v.ld, v.x_fast, a->q, v.q_fast, a->scales, s, a->elem)));
  return TP_OK;
}

template <typename T, int VPT>
tp_rc launch_rows(const tp_quant_args *a, const view<T> &v, int threads, cudaStream_t st) {
  TP_CHECK_LAUNCH((quantize_rows_kernel<T, VPT>
                   <<<static_cast<unsigned>(clamp_grid(v.rows, kMaxGridX)), threads, 0, st>>>(
                       v.x, v.ld, v.x_fast, a->q, v.q_fast, static_cast<float *>(a->scales), v.rows,
                       v.cols, a->elem, a->agreed_amax)));
  return TP_OK;
}

/* fp8-row with the row in registers: the fewest vectors per thread that fit
 * kRowThreads threads. false (nothing enqueued) when a row is too long. */
template <typename T> tp_rc enqueue_rows(const tp_quant_args *a, cudaStream_t st, bool *done) {
  const view<T> v = view_of<T>(a, false);
  const int64_t vecs = ceil_div(v.cols, kVec);
  *done = true;
  for (int vpt = 1; vpt <= kMaxRowVecs; vpt *= 2) {
    if (vecs > int64_t{kRowThreads} * vpt) continue;
    const int threads = threads_for(ceil_div(vecs, vpt), kRowThreads);
    switch (vpt) {
    case 1: return launch_rows<T, 1>(a, v, threads, st);
    case 2: return launch_rows<T, 2>(a, v, threads, st);
    case 4: return launch_rows<T, 4>(a, v, threads, st);
    default: return launch_rows<T, kMaxRowVecs>(a, v, threads, st);
    }
  }
  *done = false;
  return TP_OK;
}

template <typename T>
tp_rc enqueue_any_blocks(const tp_quant_args *a, const tp_scale_shape &s, cudaStream_t st) {
  const int threads = threads_for(s.block_cols, kThreads);
  TP_CHECK_LAUNCH((
      quantize_blocks_kernel<T>
      <<<static_cast<unsigned>(clamp_grid(s.grid_rows * s.grid_cols, kMaxGridX)), threads, 0, st>>>(
          static_cast<const T *>(a->x), a->ld, a->q, a->scales, s, a->elem, a->agreed_amax)));
  return TP_OK;
}

/* The kernels follow the format's row: its scale layout and block shape. */
template <typename T> tp_rc enqueue_typed(const tp_quant_args *a, cudaStream_t st) {
  tp_scale_shape s;
  TP_TRY(tp_quant_scale_shape(a->format, a->role, a->rows, a->cols, &s));
  if (s.layout == TP_SCALE_SCALAR) return enqueue_tensorwise<T>(a, st);
  /* Only padded layouts (TILED's tiles, BLK's K-block count) have entries no block writes. */
  if (s.stored != s.grid_rows * s.grid_cols)
    TP_CUDA(cudaMemsetAsync(a->scales, 0, tp_quant_scale_bytes(&s), st));
  /* The warp-segment kernels find each block's amax themselves: an agreed
   * amax (fp8-row's row scales, K split: a rank's K of 32 or 128 columns is
   * one such block) takes the row kernel or the any-block one, which read it. */
  const bool segments = s.block_rows == 1 && !a->agreed_amax;
  if (segments && s.block_cols == 4 * kVec) return enqueue_segments<T, 4>(a, s, st);
  if (segments && s.block_cols == 16 * kVec) return enqueue_segments<T, 16>(a, s, st);
  if (s.layout == TP_SCALE_OUTER_VEC) {
    bool done = false;
    TP_TRY(enqueue_rows<T>(a, st, &done));
    if (done) return TP_OK;
  }
  /* 1 x 64 blocks after the row kernel: a row-scaled operand of 64 columns
   * keeps that kernel (one of 32 or 128 columns takes the segments above). */
  if (segments && s.block_cols == 8 * kVec) return enqueue_segments<T, 8>(a, s, st);
  return enqueue_any_blocks<T>(a, s, st);
}

template <typename T> tp_rc local_amax_typed(const tp_quant_args *a, float *amax, cudaStream_t st) {
  if (tp_quant_format_agreement(a->format) == TP_AMAX_AGREE_TENSOR)
    return enqueue_tensor_amax(view_of<T>(a, true), amax, st);
  const view<T> v = view_of<T>(a, false);
  TP_CHECK_LAUNCH((rows_amax_kernel<T><<<static_cast<unsigned>(clamp_grid(v.rows, kMaxGridX)),
                                         threads_for(ceil_div(v.cols, kVec), kRowThreads), 0, st>>>(
      v.x, v.ld, v.x_fast, v.rows, v.cols, amax)));
  return TP_OK;
}

/* ---- the wgrad operands: xᵀ transposed and quantized in one pass -----------------------------
 *
 * A CUDA block takes a tile of kTileT source rows (the operand's contraction)
 * by kTileC source columns (the operand's rows): 16-byte loads of the source
 * rows into shared memory, stored transposed, then each half-warp converts
 * one operand row's kTileT elements (8 a thread, 8-byte stores, 128 bytes a
 * row). A 1x128 block (fp8-block) is one half-warp, a 1x32 block (mxfp8)
 * four lanes: their amax is reduced with shuffles where it is held, as in
 * quantize_segments_kernel. fp8-row and fp8 take scales computed before the
 * tile pass (a column amax of the source, or the tensor amax). */

constexpr int kTileT = 128, kTileC = 64;
constexpr int kTileSlots = kTileT * kTileC / kVec; /* 8-element vectors of a tile */

enum class tscale { blocks, given_rows, given_tensor };

/* Element (c, t) of the transposed tile: row c holds kTileT elements in
 * 16-byte chunks, chunk t / 8 stored at t / 8 ^ (c / 8 % 8). The swizzle
 * puts the load phase's scalar stores (8 columns of 4 source rows a warp)
 * and the convert phase's 16-byte reads (one row a half-warp) on distinct
 * banks. */
__device__ __forceinline__ int tile_at(int c, int t) {
  return c * kTileT + (((t / kVec) ^ ((c / kVec) & 7)) * kVec) + t % kVec;
}

/* q (rows x cols) and scales = the quantization of the transpose of src
 * (cols x rows, ld apart). MODE blocks: 1 x (8 G) scale blocks of shape s;
 * given_rows: scales[r] already holds row r's scale; given_tensor: scales[0]. */
template <tscale MODE, int G>
__global__ void __launch_bounds__(kThreads)
    transpose_quantize_kernel(const __nv_bfloat16 *__restrict__ src, int64_t ld, bool x_fast,
                              uint8_t *__restrict__ q, bool q_fast, void *scales, tp_scale_shape s,
                              tp_fp8_type t) {
  __shared__ uint4 tile_words[kTileT * kTileC * 2 / sizeof(uint4)];
  uint16_t *tile = reinterpret_cast<uint16_t *>(tile_words);
  const int64_t rows = s.rows, cols = s.cols; /* of the operand: src is cols x rows */
  const int64_t t0 = int64_t{blockIdx.y} * kTileT, c0 = int64_t{blockIdx.x} * kTileC;
#pragma unroll
  for (int j = 0; j < kTileSlots / kThreads; ++j) {
    const int slot = static_cast<int>(threadIdx.x) + j * kThreads;
    const int tr = slot / (kTileC / kVec), cv = slot % (kTileC / kVec);
    const raw8<__nv_bfloat16> r = t0 + tr < cols
                                      ? load_raw(src + (t0 + tr) * ld, c0 + cv * kVec, rows, x_fast)
                                      : raw8<__nv_bfloat16>{};
    const uint32_t w[4] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w};
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      tile[tile_at(cv * kVec + k, tr)] = static_cast<uint16_t>(w[k / 2] >> (16 * (k % 2)));
  }
  __syncthreads();
  constexpr int kLanesPerRow = kTileT / kVec; /* 16: a half-warp */
#pragma unroll
  for (int pass = 0; pass < kTileC * kLanesPerRow / kThreads; ++pass) {
    const int cl = pass * (kThreads / kLanesPerRow) + static_cast<int>(threadIdx.x) / kLanesPerRow;
    const int g = static_cast<int>(threadIdx.x) % kLanesPerRow;
    const int64_t c = c0 + cl, tc = t0 + int64_t{g} * kVec;
    const bool inside = c < rows && tc < cols;
    raw8<__nv_bfloat16> raw;
    raw.w[0] = *reinterpret_cast<const uint4 *>(tile + tile_at(cl, g * kVec));
    const vec8 v = decode(raw);
    float scale;
    if constexpr (MODE == tscale::blocks) {
      const float amax = group_max<G>(vec_amax(v)); /* every lane takes part */
      const bool leader = inside && g % G == 0;
      scale = block_scale(s, t, amax, leader ? tp_scale_offset(&s, c, tc / (G * kVec)) : 0, leader,
                          scales);
    } else if constexpr (MODE == tscale::given_rows) {
      scale = c < rows ? static_cast<const float *>(scales)[c] : 1.0f;
    } else {
      scale = static_cast<const float *>(scales)[0];
    }
    if (inside) store_vec(q + c * cols, tc, cols, q_fast, encode_vec(v, scale, t));
  }
}

/* amax_bits[c] = max(amax_bits[c], max over rows of |src[r, c]| as float
 * bits): a thread holds 8 columns and walks rows blockIdx.y, + gridDim.y, ...
 * (one atomic per column per CUDA block row; coalesced along the rows). */
__global__ void __launch_bounds__(kColThreads)
    cols_amax_kernel(const __nv_bfloat16 *src, int64_t ld, bool x_fast, int64_t rows, int64_t cols,
                     unsigned int *amax_bits) {
  const int64_t c = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * kVec;
  if (c >= cols) return;
  float m[kVec] = {};
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const vec8 v = load_vec(src + r * ld, c, cols, x_fast);
#pragma unroll
    for (int k = 0; k < kVec; ++k) m[k] = fmaxf(m[k], fabsf(v.v[k]));
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k)
    if (c + k < cols && m[k] > 0.0f) atomicMax(amax_bits + c + k, __float_as_uint(m[k]));
}

/* scales[i] = the fp32 scale of amax[i] (i < n); amax may be scales (in place). */
__global__ void scales_of_amax_kernel(const float *amax, float *scales, int64_t n, tp_fp8_type t) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    scales[i] = tp_quant_scale_f32(t, amax[i]);
}

/* ---- launches of the fused transpose-quantize ----------------------------------------------- */

/* The source of a transpose-quantize: rows x cols bf16, ld apart; x_fast:
 * every row 16-byte aligned. */
struct tsource {
  const __nv_bfloat16 *x;
  int64_t rows, cols, ld;
  bool x_fast;
};

/* amax[c] = max over the source's rows of |x[r, c]| (fp8-row of the transpose). */
tp_rc enqueue_cols_amax(const tsource &src, float *amax, cudaStream_t st) {
  int sms = 0;
  TP_TRY(sm_count(&sms));
  TP_CUDA(cudaMemsetAsync(amax, 0, static_cast<size_t>(src.cols) * sizeof(float), st));
  const int64_t gx = ceil_div(ceil_div(src.cols, kVec), kColThreads);
  /* a few CUDA blocks per SM, each walking at least kColRows rows (the atomics stay rare) */
  int64_t gy = ceil_div(int64_t{sms} * 8, gx);
  const int64_t most = ceil_div(src.rows, kColRows);
  gy = clamp_grid(gy < most ? gy : most, kMaxGridY);
  TP_CHECK_LAUNCH((cols_amax_kernel<<<dim3(static_cast<unsigned>(clamp_grid(gx, kMaxGridX)),
                                           static_cast<unsigned>(gy)),
                                      kColThreads, 0, st>>>(
      src.x, src.ld, src.x_fast, src.rows, src.cols, reinterpret_cast<unsigned int *>(amax))));
  return TP_OK;
}

/* scales[0, n) = the scales of amax[0, n) (in place when amax == scales). */
tp_rc enqueue_scales_of_amax(const float *amax, float *scales, int64_t n, tp_fp8_type t,
                             cudaStream_t st) {
  const unsigned grid = static_cast<unsigned>(clamp_grid(ceil_div(n, kThreads), 4096));
  TP_CHECK_LAUNCH((scales_of_amax_kernel<<<grid, kThreads, 0, st>>>(amax, scales, n, t)));
  return TP_OK;
}

template <tscale MODE, int G>
tp_rc launch_transpose_quantize(const tp_quant_args *a, const tsource &src, const tp_scale_shape &s,
                                cudaStream_t st) {
  const bool q_fast = aligned(a->q, 8) && (s.rows == 1 || s.cols % kVec == 0);
  const dim3 grid(static_cast<unsigned>(ceil_div(s.rows, kTileC)),
                  static_cast<unsigned>(ceil_div(s.cols, kTileT)));
  TP_CHECK_LAUNCH((transpose_quantize_kernel<MODE, G><<<grid, kThreads, 0, st>>>(
      src.x, src.ld, src.x_fast, a->q, q_fast, a->scales, s, a->elem)));
  return TP_OK;
}

/* The transpose of src quantized into a->q and a->scales (shape s). The
 * scales of fp8 and fp8-row are computed first, from agreed_amax or from the
 * source itself (into the scale buffer, then turned into scales in place);
 * block formats reduce their amax inside the tile. */
tp_rc enqueue_transpose_quantize(const tp_quant_args *a, const tsource &src,
                                 const tp_scale_shape &s, cudaStream_t st) {
  float *scales = static_cast<float *>(a->scales);
  if (s.layout == TP_SCALE_SCALAR) {
    if (!a->agreed_amax) {
      view<__nv_bfloat16> v{src.x, src.rows, src.cols, src.ld, src.x_fast, false};
      if (src.ld == src.cols)
        v = {src.x, 1, src.rows * src.cols, src.rows * src.cols, aligned(src.x, 16), false};
      TP_TRY(enqueue_tensor_amax(v, scales, st));
    }
    TP_TRY(
        enqueue_scales_of_amax(a->agreed_amax ? a->agreed_amax : scales, scales, 1, a->elem, st));
    return launch_transpose_quantize<tscale::given_tensor, 1>(a, src, s, st);
  }
  if (s.layout == TP_SCALE_OUTER_VEC) {
    if (!a->agreed_amax) TP_TRY(enqueue_cols_amax(src, scales, st));
    TP_TRY(enqueue_scales_of_amax(a->agreed_amax ? a->agreed_amax : scales, scales, s.rows, a->elem,
                                  st));
    return launch_transpose_quantize<tscale::given_rows, 1>(a, src, s, st);
  }
  if (s.stored != s.grid_rows * s.grid_cols)
    TP_CUDA(cudaMemsetAsync(a->scales, 0, tp_quant_scale_bytes(&s), st));
  if (s.block_cols == 4 * kVec) return launch_transpose_quantize<tscale::blocks, 4>(a, src, s, st);
  if (s.block_cols == 8 * kVec) return launch_transpose_quantize<tscale::blocks, 8>(a, src, s, st);
  if (s.block_cols == 16 * kVec)
    return launch_transpose_quantize<tscale::blocks, 16>(a, src, s, st);
  return TP_FAIL(TP_EINTERNAL, "transpose-quantize: no fused kernel for %s blocks of %lld",
                 tp_quant_format_name(a->format), (long long)s.block_cols);
}

/* dst[c, r] = src[r, c] for 16-bit elements: a 32 x 32 tile through shared
 * memory (one padding column against bank conflicts), so both the reads of
 * src's rows and the writes of dst's rows are coalesced. */
constexpr int kTile = 32, kTileRows = 8;

__global__ void __launch_bounds__(kTile *kTileRows)
    transpose16_kernel(const uint16_t *__restrict__ src, int64_t rows, int64_t cols,
                       uint16_t *__restrict__ dst) {
  __shared__ uint16_t tile[kTile][kTile + 1];
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = src[r * cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) dst[c * rows + r] = tile[threadIdx.x][i];
  }
}

} // namespace

extern "C" tp_rc tp_quant_enqueue(const tp_quant_args *a, cudaStream_t stream) {
  TP_TRY(tp_quant_args_check(a));
  if (a->in_dtype == TP_BF16) return enqueue_typed<__nv_bfloat16>(a, stream);
  return enqueue_typed<float>(a, stream);
}

extern "C" tp_rc tp_quant_local_amax_enqueue(const tp_quant_args *a, float *amax,
                                             cudaStream_t stream) {
  TP_TRY(tp_quant_args_check(a));
  if (!amax) return TP_FAIL(TP_EINTERNAL, "local amax: no output buffer");
  if (tp_quant_format_agreement(a->format) == TP_AMAX_LOCAL)
    return TP_FAIL(TP_EINTERNAL, "%s has no amax to agree on (its blocks are local)",
                   tp_quant_format_name(a->format));
  if (a->in_dtype == TP_BF16) return local_amax_typed<__nv_bfloat16>(a, amax, stream);
  return local_amax_typed<float>(a, amax, stream);
}

extern "C" tp_rc tp_quant_encode_enqueue(tp_fp8_type t, const float *x, size_t n, uint8_t *out,
                                         cudaStream_t stream) {
  if (!x || !out || n == 0) return TP_FAIL(TP_EINTERNAL, "fp8 encode: empty or missing buffers");
  const unsigned grid =
      static_cast<unsigned>(clamp_grid(ceil_div(static_cast<int64_t>(n), kThreads), 1 << 20));
  TP_CHECK_LAUNCH((encode_kernel<<<grid, kThreads, 0, stream>>>(x, n, out, t)));
  return TP_OK;
}

extern "C" tp_rc tp_quant_transpose_enqueue(tp_dtype dt, const void *src, int64_t rows,
                                            int64_t cols, void *dst, cudaStream_t stream) {
  if (dt != TP_BF16)
    return TP_FAIL(TP_EINTERNAL, "transpose: only bf16 (got %s)", tp_dtype_name(dt));
  if (!src || !dst || rows < 1 || cols < 1)
    return TP_FAIL(TP_EINTERNAL, "transpose: empty or missing buffers");
  const int64_t grid_y = ceil_div(rows, kTile);
  if (grid_y > 65535)
    return TP_FAIL(TP_EINTERNAL, "transpose: %lld rows (at most %d)", (long long)rows,
                   65535 * kTile);
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, kTile)), static_cast<unsigned>(grid_y));
  TP_CHECK_LAUNCH((transpose16_kernel<<<grid, dim3(kTile, kTileRows), 0, stream>>>(
      static_cast<const uint16_t *>(src), rows, cols, static_cast<uint16_t *>(dst))));
  return TP_OK;
}

extern "C" tp_rc tp_quant_transpose_quantize_enqueue(const tp_quant_args *a, cudaStream_t stream) {
  TP_TRY(tp_quant_args_check(a));
  if (a->in_dtype != TP_BF16)
    return TP_FAIL(TP_EINTERNAL, "transpose-quantize: only bf16 in (got %s)",
                   tp_dtype_name(a->in_dtype));
  tp_scale_shape s;
  TP_TRY(tp_quant_scale_shape(a->format, a->role, a->cols, a->rows, &s));
  /* tensorwise has one "block", the whole tensor: its scale comes first (below) */
  if (s.block_rows != 1 && s.layout != TP_SCALE_SCALAR)
    return TP_FAIL(TP_EINTERNAL,
                   "transpose-quantize: %s %s blocks span %lld rows of the transpose (transpose, "
                   "then tp_quant_enqueue)",
                   tp_quant_format_name(a->format), tp_quant_role_name(a->role),
                   (long long)s.block_rows);
  if (ceil_div(a->rows, kTileT) > kMaxGridY)
    return TP_FAIL(TP_EINTERNAL, "transpose-quantize: %lld source rows (at most %lld)",
                   (long long)a->rows, (long long)(kMaxGridY * kTileT));
  const tsource src{static_cast<const __nv_bfloat16 *>(a->x), a->rows, a->cols, a->ld,
                    aligned(a->x, 16) && (a->rows == 1 || (a->ld * 2) % 16 == 0)};
  return enqueue_transpose_quantize(a, src, s, stream);
}

/* ---- gathered shards' scales ------------------------------------------------------------------
 */

namespace {

/* One thread per logical scale of the whole: copy it from its rank's shard buffer. */
template <typename S>
__global__ void __launch_bounds__(kThreads)
    replace_gathered_kernel(const tp_scale_gather g, const S *gathered, S *whole) {
  const int64_t n = g.whole.grid_rows * g.whole.grid_cols;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t gr = i / g.whole.grid_cols, gc = i % g.whole.grid_cols;
    whole[tp_scale_offset(&g.whole, gr, gc)] = gathered[tp_scale_gathered_offset(&g, gr, gc)];
  }
}

template <typename S>
tp_rc enqueue_replace(const tp_scale_gather *g, const void *gathered, void *whole,
                      cudaStream_t st) {
  const int64_t n = g->whole.grid_rows * g->whole.grid_cols;
  /* padding (VEC32's 128-row tiles, its column tiles) is written as zero bytes */
  if (g->whole.stored > n) TP_CUDA(cudaMemsetAsync(whole, 0, tp_quant_scale_bytes(&g->whole), st));
  const int64_t blocks = clamp_grid(ceil_div(n, kThreads), kMaxGridX);
  TP_CHECK_LAUNCH((replace_gathered_kernel<S><<<static_cast<unsigned>(blocks), kThreads, 0, st>>>(
      *g, static_cast<const S *>(gathered), static_cast<S *>(whole))));
  return TP_OK;
}

} // namespace

extern "C" tp_rc tp_quant_replace_gathered_enqueue(const tp_scale_gather *g, const void *gathered,
                                                   void *whole, cudaStream_t stream) {
  const int consistent =
      g && (g->by_cols ? g->whole.cols == g->shard.cols * g->tp && g->whole.rows == g->shard.rows
                       : g->whole.rows == g->shard.rows * g->tp);
  if (!consistent || g->tp < 1 || !gathered || !whole || g->whole.layout != g->shard.layout)
    return TP_FAIL(TP_EINTERNAL, "replace gathered scales: inconsistent gather (tp %d)",
                   g ? g->tp : 0);
  if (g->whole.elem_bytes == 1) return enqueue_replace<uint8_t>(g, gathered, whole, stream);
  return enqueue_replace<float>(g, gathered, whole, stream);
}

/* ---- gathered column pieces ------------------------------------------------------------------
 */

namespace {

/* One thread per 16 bytes (or per byte when the pieces' rows are not 16-byte
 * multiples): whole[i, r·w + j] = piece_r[i, j]. */
template <typename V>
__global__ void __launch_bounds__(kThreads)
    replace_columns_kernel(const V *gathered, int64_t stride, int tp, int64_t rows, int64_t width,
                           V *whole) {
  const int64_t per_piece = rows * width, n = per_piece * tp;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / per_piece, at = i % per_piece, row = at / width, j = at % width;
    whole[row * width * tp + r * width + j] = gathered[r * stride + at];
  }
}

} // namespace

extern "C" tp_rc tp_quant_replace_columns_enqueue(const uint8_t *gathered, size_t piece_stride,
                                                  int tp, int64_t rows, int64_t shard_cols,
                                                  uint8_t *whole, cudaStream_t stream) {
  if (!gathered || !whole || tp < 1 || rows < 1 || shard_cols < 1 ||
      piece_stride < static_cast<size_t>(rows * shard_cols))
    return TP_FAIL(TP_EINTERNAL, "replace gathered columns: empty or missing buffers (tp %d)", tp);
  const bool vec =
      shard_cols % 16 == 0 && piece_stride % 16 == 0 && aligned(gathered, 16) && aligned(whole, 16);
  const int64_t width = vec ? shard_cols / 16 : shard_cols;
  const int64_t stride = static_cast<int64_t>(vec ? piece_stride / 16 : piece_stride);
  const int64_t blocks = clamp_grid(ceil_div(rows * width * tp, kThreads), kMaxGridX);
  if (vec)
    TP_CHECK_LAUNCH(
        (replace_columns_kernel<uint4><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            reinterpret_cast<const uint4 *>(gathered), stride, tp, rows, width,
            reinterpret_cast<uint4 *>(whole))));
  else
    TP_CHECK_LAUNCH((replace_columns_kernel<uint8_t>
                     <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(gathered, stride, tp,
                                                                              rows, width, whole)));
  return TP_OK;
}

extern "C" tp_rc tp_quant_transpose_local_amax_enqueue(const tp_quant_args *a, float *amax,
                                                       cudaStream_t stream) {
  TP_TRY(tp_quant_args_check(a));
  if (!amax || a->in_dtype != TP_BF16)
    return TP_FAIL(TP_EINTERNAL, "transposed local amax: bf16 in and an output buffer needed");
  const tsource src{static_cast<const __nv_bfloat16 *>(a->x), a->rows, a->cols, a->ld,
                    aligned(a->x, 16) && (a->rows == 1 || (a->ld * 2) % 16 == 0)};
  const tp_amax_agreement agreement = tp_quant_format_agreement(a->format);
  if (agreement == TP_AMAX_AGREE_ROWS) return enqueue_cols_amax(src, amax, stream);
  if (agreement != TP_AMAX_AGREE_TENSOR)
    return TP_FAIL(TP_EINTERNAL, "%s has no amax to agree on (its blocks are local)",
                   tp_quant_format_name(a->format));
  return tp_quant_local_amax_enqueue(a, amax, stream); /* the tensor's amax is its transpose's */
}
