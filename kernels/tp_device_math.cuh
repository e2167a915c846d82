/*
 * tp_device_math.cuh — the element helpers every kernel file of tpbench
 * shares (device code, C++): conversion between the two element types
 * (fp32 and bf16) and fp32, loads and stores through fp32, and the host-side
 * grid size of a grid-stride kernel. Kernels read their dtype, compute in
 * fp32 and round once, to nearest even, when they store.
 */
#ifndef TP_DEVICE_MATH_CUH
#define TP_DEVICE_MATH_CUH

#include <cuda_bf16.h>
#include <stddef.h>

namespace tp_dev {

/* v as fp32 (exact for both types). */
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

/* fp32 v as T, rounded to nearest even. */
template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/* p[i] as fp32; fp32 v into p[i]. */
template <typename T> __device__ __forceinline__ float load_f32(const T *p, size_t i) {
  return to_f32(p[i]);
}
template <typename T> __device__ __forceinline__ void store_f32(T *p, size_t i, float v) {
  p[i] = from_f32<T>(v);
}

/* Blocks of `threads` threads covering n elements, at least 1 and at most
 * max_blocks (a grid-stride kernel covers the rest). */
inline unsigned int grid_blocks(size_t n, int threads, size_t max_blocks) {
  size_t blocks = (n + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  if (blocks > max_blocks) blocks = max_blocks;
  return blocks == 0 ? 1u : static_cast<unsigned int>(blocks);
}

} // namespace tp_dev

#endif /* TP_DEVICE_MATH_CUH */
