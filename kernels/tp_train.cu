/*
 * tp_train.cu — the loss, gradient-norm and optimizer kernels of a training
 * step (see tp_train.h). Reductions: fixed slices, fixed trees, no atomics.
 */
#include <cuda_bf16.h>

#include "kernels/tp_device_math.cuh"
#include "kernels/tp_train.h"

namespace {

using tp_dev::grid_blocks;
using tp_dev::load_f32;
using tp_dev::store_f32;

constexpr int kThreads = 256;

/* The block's fp32 values summed by a fixed tree; the sum in thread 0. */
__device__ float block_tree_sum(float v, float *shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  return shared[0];
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sq_err_row_sums_kernel(const T *y, const T *target, int64_t cols, float *row_sums) {
  __shared__ float shared[kThreads];
  const size_t row0 = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(cols);
  float acc = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
    float d = load_f32(y, row0 + c) - load_f32(target, row0 + c);
    acc += d * d;
  }
  float sum = block_tree_sum(acc, shared);
  if (threadIdx.x == 0) row_sums[blockIdx.x] = sum;
}

template <typename T>
__global__ void sq_err_grad_kernel(const T *y, const T *target, size_t count, float scale, T *dy) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    store_f32(dy, i, scale * (load_f32(y, i) - load_f32(target, i)));
}

/* Block b sums x[b·slice, +slice) (the last slice shorter). */
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sum_squares_kernel(const T *x, size_t count, size_t slice, float *partials) {
  __shared__ float shared[kThreads];
  const size_t begin = static_cast<size_t>(blockIdx.x) * slice;
  const size_t end = begin + slice < count ? begin + slice : count;
  float acc = 0.0f;
  for (size_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float v = load_f32(x, i);
    acc += v * v;
  }
  float sum = block_tree_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void sum_partials_kernel(const float *partials, int n, double *out) {
  double acc = 0.0;
  for (int i = 0; i < n; ++i) acc += static_cast<double>(partials[i]);
  *out = acc;
}

template <typename T>
__global__ void sgd_kernel(T *w, float *master, const T *grad, size_t count, float lr) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    float p = master[i] - lr * load_f32(grad, i);
    master[i] = p;
    store_f32(w, i, p);
  }
}

template <typename T>
__global__ void adamw_kernel(T *w, float *master, float *m, float *v, const T *grad, size_t count,
                             tp_adamw_step s) {
  const float decay = 1.0f - s.lr * s.weight_decay;
  const float step_size = s.lr / s.bias_correction1;
  const float sqrt_bc2 = sqrtf(s.bias_correction2);
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const float g = load_f32(grad, i);
    const float mi = s.beta1 * m[i] + (1.0f - s.beta1) * g;
    const float vi = s.beta2 * v[i] + (1.0f - s.beta2) * g * g;
    float p = master[i] * decay;
    p -= step_size * mi / (sqrtf(vi) / sqrt_bc2 + s.eps);
    m[i] = mi;
    v[i] = vi;
    master[i] = p;
    store_f32(w, i, p);
  }
}

bool element_type(tp_dtype dt) { return dt == TP_BF16 || dt == TP_FP32; }

unsigned int elementwise_grid(size_t count) { return grid_blocks(count, kThreads, 8192); }

} // namespace

extern "C" cudaError_t tp_launch_sq_err_row_sums(tp_dtype dt, const void *y, const void *target,
                                                 int64_t rows, int64_t cols, float *row_sums,
                                                 cudaStream_t stream) {
  if (!element_type(dt) || rows < 0 || cols < 1 || rows > INT32_MAX) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const unsigned int grid = static_cast<unsigned int>(rows);
  if (dt == TP_BF16)
    sq_err_row_sums_kernel<<<grid, kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(y), static_cast<const __nv_bfloat16 *>(target), cols,
        row_sums);
  else
    sq_err_row_sums_kernel<<<grid, kThreads, 0, stream>>>(
        static_cast<const float *>(y), static_cast<const float *>(target), cols, row_sums);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_sq_err_grad(tp_dtype dt, const void *y, const void *target,
                                             size_t count, float scale, void *dy,
                                             cudaStream_t stream) {
  if (!element_type(dt)) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (dt == TP_BF16)
    sq_err_grad_kernel<<<elementwise_grid(count), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(y), static_cast<const __nv_bfloat16 *>(target), count,
        scale, static_cast<__nv_bfloat16 *>(dy));
  else
    sq_err_grad_kernel<<<elementwise_grid(count), kThreads, 0, stream>>>(
        static_cast<const float *>(y), static_cast<const float *>(target), count, scale,
        static_cast<float *>(dy));
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_sum_squares(tp_dtype dt, const void *x, size_t count,
                                             float *partials, double *out, cudaStream_t stream) {
  if (!element_type(dt)) return cudaErrorInvalidValue;
  const size_t slice = (count + TP_SUM_SQUARES_PARTIALS - 1) / TP_SUM_SQUARES_PARTIALS;
  if (dt == TP_BF16)
    sum_squares_kernel<<<TP_SUM_SQUARES_PARTIALS, kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16 *>(x), count, slice, partials);
  else
    sum_squares_kernel<<<TP_SUM_SQUARES_PARTIALS, kThreads, 0, stream>>>(
        static_cast<const float *>(x), count, slice, partials);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  sum_partials_kernel<<<1, 1, 0, stream>>>(partials, TP_SUM_SQUARES_PARTIALS, out);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_sgd_step(tp_dtype dt, void *w, float *master, const void *grad,
                                          size_t count, float lr, cudaStream_t stream) {
  if (!element_type(dt)) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (dt == TP_BF16)
    sgd_kernel<<<elementwise_grid(count), kThreads, 0, stream>>>(
        static_cast<__nv_bfloat16 *>(w), master, static_cast<const __nv_bfloat16 *>(grad), count,
        lr);
  else
    sgd_kernel<<<elementwise_grid(count), kThreads, 0, stream>>>(
        static_cast<float *>(w), master, static_cast<const float *>(grad), count, lr);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_adamw_step(tp_dtype dt, void *w, float *master, float *m, float *v,
                                            const void *grad, size_t count,
                                            const tp_adamw_step *step, cudaStream_t stream) {
  if (!element_type(dt) || !step) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (dt == TP_BF16)
    adamw_kernel<<<elementwise_grid(count), kThreads, 0, stream>>>(
        static_cast<__nv_bfloat16 *>(w), master, m, v, static_cast<const __nv_bfloat16 *>(grad),
        count, *step);
  else
    adamw_kernel<<<elementwise_grid(count), kThreads, 0, stream>>>(
        static_cast<float *>(w), master, m, v, static_cast<const float *>(grad), count, *step);
  return cudaGetLastError();
}
