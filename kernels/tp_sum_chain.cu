/*
 * tp_sum_chain.cu — NCCL's ring arithmetic for the rs_sum=nccl mode of the
 * fused reduce-scatter (see tp_sum_chain.h): a left-to-right chain of adds,
 * each rounded to the element type, 16 bytes per access where the pointers
 * allow it.
 */
#include <cuda_bf16.h>

#include "kernels/tp_device.h"
#include "kernels/tp_device_math.cuh"
#include "kernels/tp_sum_chain.h"

namespace {

using tp_dev::from_f32;
using tp_dev::to_f32;

constexpr int kThreads = 256;

struct chain_sources {
  const void *p[TP_MAX_WORLD];
};

/* One add of the chain: fp32, then rounded to T (the rounding NCCL does per hop). */
template <typename T> __device__ __forceinline__ T add_rounded(T acc, T v) {
  return from_f32<T>(to_f32(acc) + to_f32(v));
}

template <typename T>
__global__ void sum_chain_vec_kernel(uint4 *out, chain_sources srcs, int n_src, size_t n_vec) {
  constexpr int lanes = 16 / static_cast<int>(sizeof(T));
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_vec;
       i += stride) {
    uint4 acc_raw = static_cast<const uint4 *>(srcs.p[0])[i];
    T *acc = reinterpret_cast<T *>(&acc_raw);
    for (int r = 1; r < n_src; ++r) {
      uint4 raw = static_cast<const uint4 *>(srcs.p[r])[i];
      const T *v = reinterpret_cast<const T *>(&raw);
#pragma unroll
      for (int l = 0; l < lanes; ++l) acc[l] = add_rounded(acc[l], v[l]);
    }
    out[i] = acc_raw;
  }
}

template <typename T>
__global__ void sum_chain_kernel(T *out, chain_sources srcs, int n_src, size_t count) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    T acc = static_cast<const T *>(srcs.p[0])[i];
    for (int r = 1; r < n_src; ++r) acc = add_rounded(acc, static_cast<const T *>(srcs.p[r])[i]);
    out[i] = acc;
  }
}

template <typename T>
cudaError_t launch(void *out, const chain_sources &list, int n_src, size_t count, bool aligned,
                   cudaStream_t stream) {
  constexpr size_t lanes = 16 / sizeof(T);
  if (aligned && count % lanes == 0) {
    const size_t n_vec = count / lanes;
    sum_chain_vec_kernel<T><<<tp_dev::grid_blocks(n_vec, kThreads, 4096), kThreads, 0, stream>>>(
        static_cast<uint4 *>(out), list, n_src, n_vec);
  } else {
    sum_chain_kernel<T><<<tp_dev::grid_blocks(count, kThreads, 4096), kThreads, 0, stream>>>(
        static_cast<T *>(out), list, n_src, count);
  }
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t tp_launch_sum_chain(tp_dtype dt, void *out, const void *const *srcs,
                                           int n_src, size_t count, cudaStream_t stream) {
  if ((dt != TP_BF16 && dt != TP_FP32) || n_src < 1 || n_src > TP_MAX_WORLD)
    return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  chain_sources list{};
  bool aligned = reinterpret_cast<uintptr_t>(out) % 16 == 0;
  for (int r = 0; r < n_src; ++r) {
    list.p[r] = srcs[r];
    aligned = aligned && reinterpret_cast<uintptr_t>(srcs[r]) % 16 == 0;
  }
  return dt == TP_BF16 ? launch<__nv_bfloat16>(out, list, n_src, count, aligned, stream)
                       : launch<float>(out, list, n_src, count, aligned, stream);
}
