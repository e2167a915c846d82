/*
 * tp_quant.cu — the device quantizer (tp_quant_device.h): fp32/bf16 in,
 * E4M3/E5M2 bytes and scales out, for the four formats of tp_quant.h, with
 * the bits of the reference (tp_quant_ref.c).
 *
 * One CUDA block per scale block (a row for fp8-row, 1x128 or 128x128 for
 * fp8-block, 1x32 for mxfp8): it reduces the block's amax (fmaxf, so NaNs do
 * not count, as in the reference; the max is exact, so the order of the
 * reduction cannot change it), derives the scale with tp_quant.h's shared
 * rule, stores it at the layout's offset and converts the block's elements
 * with the hardware's cvt.rn.satfinite. Tensorwise fp8 reduces the tensor's
 * amax with an atomic max on the float's bits (non-negative floats order as
 * their bits do) into the scale slot, turns it into the scale in place with
 * one thread, then converts every element.
 */
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_quant_device.h"

namespace {

constexpr int kMaxThreads = 256;
constexpr int64_t kMaxGrid = int64_t{1} << 20; /* blocks loop over the rest */

__device__ __forceinline__ float load(const float *x, int64_t i) { return x[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16 *x, int64_t i) {
  return __bfloat162float(x[i]);
}

__device__ __forceinline__ uint8_t encode(float v, tp_fp8_type t) {
  return static_cast<uint8_t>(
      __nv_cvt_float_to_fp8(v, __NV_SATFINITE, t == TP_FP8_E4M3 ? __NV_E4M3 : __NV_E5M2));
}

/* Max over the CUDA block of every thread's v (>= 0); blockDim.x a multiple of 32. */
__device__ float block_max(float v) {
  __shared__ float warp_max[kMaxThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads(); /* the previous call's readers are done with warp_max */
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = 0.0f;
  for (unsigned w = 0; w < blockDim.x / 32; ++w) m = fmaxf(m, warp_max[w]);
  return m;
}

/* One scale block's elements: rows [r0, r1), columns [c0, c1). */
struct region {
  int64_t r0, r1, c0, c1;
  __device__ int64_t count() const { return (r1 - r0) * (c1 - c0); }
  __device__ int64_t row(int64_t i) const { return r0 + i / (c1 - c0); }
  __device__ int64_t col(int64_t i) const { return c0 + i % (c1 - c0); }
};

__device__ region block_region(const tp_scale_shape &s, int64_t gr, int64_t gc) {
  region g{gr * s.block_rows, gr * s.block_rows + s.block_rows, gc * s.block_cols,
           gc * s.block_cols + s.block_cols};
  if (g.r1 > s.rows) g.r1 = s.rows;
  if (g.c1 > s.cols) g.c1 = s.cols;
  return g;
}

template <typename T> __device__ float region_amax(const T *x, int64_t ld, const region &g) {
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < g.count(); i += blockDim.x)
    amax = fmaxf(amax, fabsf(load(x, g.row(i) * ld + g.col(i))));
  return block_max(amax);
}

/* Every scale block of fp8-row, fp8-block and mxfp8. agreed: NULL, or one
 * amax per row (fp8-row). */
template <typename T>
__global__ void quantize_blocks_kernel(const T *x, int64_t ld, uint8_t *q, void *scales,
                                       tp_scale_shape s, tp_fp8_type t, const float *agreed) {
  const int64_t blocks = s.grid_rows * s.grid_cols;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t gr = b / s.grid_cols, gc = b % s.grid_cols;
    const region g = block_region(s, gr, gc);
    float amax = region_amax(x, ld, g);
    if (agreed) amax = agreed[gr];
    const int64_t off = tp_scale_offset(&s, gr, gc);
    float scale;
    if (s.layout == TP_SCALE_VEC32_E8M0) {
      const uint8_t byte = tp_quant_scale_e8m0(t, amax);
      if (threadIdx.x == 0) static_cast<uint8_t *>(scales)[off] = byte;
      scale = tp_e8m0_value(byte);
    } else {
      scale = tp_quant_scale_f32(t, amax);
      if (threadIdx.x == 0) static_cast<float *>(scales)[off] = scale;
    }
    for (int64_t i = threadIdx.x; i < g.count(); i += blockDim.x) {
      const int64_t r = g.row(i), c = g.col(i);
      q[r * s.cols + c] = encode(__fdiv_rn(load(x, r * ld + c), scale), t);
    }
  }
}

/* amax_bits = max over the tensor of |x| as float bits (zeroed beforehand). */
template <typename T>
__global__ void tensor_amax_kernel(const T *x, int64_t rows, int64_t cols, int64_t ld,
                                   unsigned int *amax_bits) {
  float amax = 0.0f;
  const int64_t total = rows * cols;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x)
    amax = fmaxf(amax, fabsf(load(x, (i / cols) * ld + i % cols)));
  amax = block_max(amax);
  if (threadIdx.x == 0) atomicMax(amax_bits, __float_as_uint(amax));
}

/* scale[0] = the scale of amax: agreed[0] when given, else the amax that
 * tensor_amax_kernel left in scale[0] (the bits of a float). */
__global__ void tensor_scale_kernel(float *scale, tp_fp8_type t, const float *agreed) {
  const float amax = agreed ? agreed[0] : scale[0];
  scale[0] = tp_quant_scale_f32(t, amax);
}

template <typename T>
__global__ void quantize_tensor_kernel(const T *x, int64_t rows, int64_t cols, int64_t ld,
                                       uint8_t *q, const float *scale, tp_fp8_type t) {
  const float s = scale[0];
  const int64_t total = rows * cols;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x)
    q[i] = encode(__fdiv_rn(load(x, (i / cols) * ld + i % cols), s), t);
}

__global__ void encode_kernel(const float *x, size_t n, uint8_t *out, tp_fp8_type t) {
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    out[i] = encode(x[i], t);
}

unsigned int grid_for(int64_t work, int threads) {
  int64_t blocks = (work + threads - 1) / threads;
  if (blocks > kMaxGrid) blocks = kMaxGrid;
  return blocks < 1 ? 1u : static_cast<unsigned int>(blocks);
}

/* Threads for one scale block: its element count rounded up to whole warps, at most 256. */
int threads_for(const tp_scale_shape &s) {
  int64_t n = s.block_rows * s.block_cols;
  if (n > kMaxThreads) return kMaxThreads;
  return static_cast<int>((n + 31) / 32 * 32);
}

template <typename T> tp_rc enqueue_tensorwise(const tp_quant_args *a, cudaStream_t stream) {
  const T *x = static_cast<const T *>(a->x);
  float *scale = static_cast<float *>(a->scales);
  if (!a->agreed_amax) {
    TP_CUDA(cudaMemsetAsync(scale, 0, sizeof(float), stream));
    TP_CHECK_LAUNCH((tensor_amax_kernel<T>
                     <<<grid_for(a->rows * a->cols, kMaxThreads), kMaxThreads, 0, stream>>>(
                         x, a->rows, a->cols, a->ld, reinterpret_cast<unsigned int *>(scale))));
  }
  TP_CHECK_LAUNCH((tensor_scale_kernel<<<1, 1, 0, stream>>>(scale, a->elem, a->agreed_amax)));
  TP_CHECK_LAUNCH((quantize_tensor_kernel<T>
                   <<<grid_for(a->rows * a->cols, kMaxThreads), kMaxThreads, 0, stream>>>(
                       x, a->rows, a->cols, a->ld, a->q, scale, a->elem)));
  return TP_OK;
}

template <typename T>
tp_rc enqueue_blocks(const tp_quant_args *a, const tp_scale_shape &s, cudaStream_t stream) {
  TP_CUDA(cudaMemsetAsync(a->scales, 0, tp_quant_scale_bytes(&s), stream));
  const int64_t blocks = s.grid_rows * s.grid_cols;
  const unsigned int grid = static_cast<unsigned int>(blocks < kMaxGrid ? blocks : kMaxGrid);
  TP_CHECK_LAUNCH((quantize_blocks_kernel<T><<<grid, threads_for(s), 0, stream>>>(
      static_cast<const T *>(a->x), a->ld, a->q, a->scales, s, a->elem, a->agreed_amax)));
  return TP_OK;
}

template <typename T> tp_rc enqueue_typed(const tp_quant_args *a, cudaStream_t stream) {
  if (a->format == TP_QFMT_FP8) return enqueue_tensorwise<T>(a, stream);
  tp_scale_shape s;
  TP_TRY(tp_quant_scale_shape(a->format, a->role, a->rows, a->cols, &s));
  return enqueue_blocks<T>(a, s, stream);
}

/* Row amax of fp8-row: one CUDA block per row. */
template <typename T>
__global__ void row_amax_kernel(const T *x, int64_t rows, int64_t cols, int64_t ld, float *amax) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float m = region_amax(x, ld, region{r, r + 1, 0, cols});
    if (threadIdx.x == 0) amax[r] = m;
  }
}

template <typename T>
tp_rc local_amax_typed(const tp_quant_args *a, float *amax, cudaStream_t stream) {
  const T *x = static_cast<const T *>(a->x);
  if (a->format == TP_QFMT_FP8) {
    TP_CUDA(cudaMemsetAsync(amax, 0, sizeof(float), stream));
    TP_CHECK_LAUNCH((tensor_amax_kernel<T>
                     <<<grid_for(a->rows * a->cols, kMaxThreads), kMaxThreads, 0, stream>>>(
                         x, a->rows, a->cols, a->ld, reinterpret_cast<unsigned int *>(amax))));
    return TP_OK;
  }
  const unsigned int grid = static_cast<unsigned int>(a->rows < kMaxGrid ? a->rows : kMaxGrid);
  TP_CHECK_LAUNCH(
      (row_amax_kernel<T><<<grid, kMaxThreads, 0, stream>>>(x, a->rows, a->cols, a->ld, amax)));
  return TP_OK;
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
  if (a->format != TP_QFMT_FP8 && a->format != TP_QFMT_FP8_ROW)
    return TP_FAIL(TP_EINTERNAL, "%s has no amax to agree on (its blocks are local)",
                   tp_quant_format_name(a->format));
  if (a->in_dtype == TP_BF16) return local_amax_typed<__nv_bfloat16>(a, amax, stream);
  return local_amax_typed<float>(a, amax, stream);
}

extern "C" tp_rc tp_quant_encode_enqueue(tp_fp8_type t, const float *x, size_t n, uint8_t *out,
                                         cudaStream_t stream) {
  if (!x || !out || n == 0) return TP_FAIL(TP_EINTERNAL, "fp8 encode: empty or missing buffers");
  TP_CHECK_LAUNCH(
      (encode_kernel<<<grid_for(static_cast<int64_t>(n), kMaxThreads), kMaxThreads, 0, stream>>>(
          x, n, out, t)));
  return TP_OK;
}
