/*
 * tp_bias.cu — bias of the TP projections: the forward adds a bias row to
 * every output row; the backward sums the output gradient over rows. The
 * sums are deterministic (a fixed split of the rows, partial sums added in
 * order, fp32 throughout), so stock and dist_gemm get the same bits from
 * the same gradient. Also the max of the ranks' fp32 vectors that a fused
 * fp8 pass agrees on (its amax), read from the peers' memory.
 */
#include <cuda_bf16.h>

#include "kernels/tp_device.h"
#include "kernels/tp_device_math.cuh"

namespace {

using tp_dev::grid_blocks;
using tp_dev::load_f32;
using tp_dev::store_f32;

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = 256;

template <typename T>
__global__ void add_bias_kernel(T *y, const T *bias, size_t rows, size_t cols) {
  size_t total = rows * cols;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride)
    store_f32(y, i, load_f32(y, i) + load_f32(bias, i % cols));
}

/* partial[blockIdx.y][col] = sum of rows [y·kRowsPerBlock, +kRowsPerBlock) of column col. */
template <typename T>
__global__ void column_partial_kernel(const T *dy, size_t rows, size_t cols, size_t ld,
                                      float *partial) {
  size_t col = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  size_t row0 = static_cast<size_t>(blockIdx.y) * kRowsPerBlock;
  size_t row1 = row0 + kRowsPerBlock < rows ? row0 + kRowsPerBlock : rows;
  float acc = 0.0f;
  for (size_t r = row0; r < row1; ++r) acc += load_f32(dy, r * ld + col);
  partial[static_cast<size_t>(blockIdx.y) * cols + col] = acc;
}

struct f32_sources {
  const float *p[TP_MAX_WORLD];
};

/* out[col] = sum over s of src[s][col·stride_rows...]: sources in order, fp32, one rounding. */
template <typename T>
__global__ void sum_sources_kernel(T *out, f32_sources srcs, int n_src, size_t n_rows_each,
                                   size_t cols) {
  size_t col = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  float acc = 0.0f;
  for (int s = 0; s < n_src; ++s)
    for (size_t r = 0; r < n_rows_each; ++r) acc += srcs.p[s][r * cols + col];
  store_f32(out, col, acc);
}

/* out[i] = max over s of srcs[s][i]. */
__global__ void max_sources_kernel(float *out, f32_sources srcs, int n_src, size_t count) {
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  float m = srcs.p[0][i];
  for (int s = 1; s < n_src; ++s) m = fmaxf(m, srcs.p[s][i]);
  out[i] = m;
}

} // namespace

extern "C" cudaError_t tp_launch_max_f32(float *out, const float *const *srcs, int n_src,
                                         size_t count, cudaStream_t stream) {
  if (n_src < 1 || n_src > TP_MAX_WORLD || count == 0) return cudaErrorInvalidValue;
  f32_sources list{};
  for (int s = 0; s < n_src; ++s) list.p[s] = srcs[s];
  unsigned int grid = static_cast<unsigned int>((count + kThreads - 1) / kThreads);
  max_sources_kernel<<<grid, kThreads, 0, stream>>>(out, list, n_src, count);
  return cudaGetLastError();
}

extern "C" size_t tp_bias_partial_floats(size_t rows, size_t cols) {
  return ((rows + kRowsPerBlock - 1) / kRowsPerBlock) * cols;
}

extern "C" cudaError_t tp_launch_add_bias(tp_dtype dt, void *y, const void *bias, size_t rows,
                                          size_t cols, cudaStream_t stream) {
  if (dt != TP_BF16 && dt != TP_FP32) return cudaErrorInvalidValue; /* no fp8 dtype */
  unsigned int grid = grid_blocks(rows * cols, kThreads, 8192);
  if (dt == TP_BF16)
    add_bias_kernel<<<grid, kThreads, 0, stream>>>(
        static_cast<__nv_bfloat16 *>(y), static_cast<const __nv_bfloat16 *>(bias), rows, cols);
  else
    add_bias_kernel<<<grid, kThreads, 0, stream>>>(static_cast<float *>(y),
                                                   static_cast<const float *>(bias), rows, cols);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_column_partials(tp_dtype dt, const void *dy, size_t rows,
                                                 size_t cols, float *partial, cudaStream_t stream) {
  if (dt != TP_BF16 && dt != TP_FP32) return cudaErrorInvalidValue; /* no fp8 dtype */
  dim3 grid(static_cast<unsigned int>((cols + kThreads - 1) / kThreads),
            static_cast<unsigned int>((rows + kRowsPerBlock - 1) / kRowsPerBlock));
  if (dt == TP_BF16)
    column_partial_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16 *>(dy),
                                                         rows, cols, cols, partial);
  else
    column_partial_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const float *>(dy), rows, cols,
                                                         cols, partial);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_sum_f32_rows(tp_dtype dt, void *out, const float *const *srcs,
                                              int n_src, size_t rows_each, size_t cols,
                                              cudaStream_t stream) {
  if (dt != TP_BF16 && dt != TP_FP32) return cudaErrorInvalidValue; /* no fp8 dtype */
  if (n_src < 1 || n_src > TP_MAX_WORLD) return cudaErrorInvalidValue;
  f32_sources list{};
  for (int s = 0; s < n_src; ++s) list.p[s] = srcs[s];
  unsigned int grid = static_cast<unsigned int>((cols + kThreads - 1) / kThreads);
  if (dt == TP_BF16)
    sum_sources_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__nv_bfloat16 *>(out), list,
                                                      n_src, rows_each, cols);
  else
    sum_sources_kernel<<<grid, kThreads, 0, stream>>>(static_cast<float *>(out), list, n_src,
                                                      rows_each, cols);
  return cudaGetLastError();
}
