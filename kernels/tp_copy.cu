/*
 * tp_copy.cu — the SM-side data movers of the fused schedules: a 16-byte
 * vectorised copy into a peer's memory that raises the peer's flag when its
 * last block finishes, and the fixed-order cross-rank sum of the
 * reduce-scatter side (fp32 accumulation, one rounding).
 */
#include <cuda_bf16.h>

#include "kernels/tp_device.h"
#include "kernels/tp_device_math.cuh"

namespace {

using tp_dev::from_f32;
using tp_dev::to_f32;

constexpr int kCopyThreads = 1024;
constexpr int kReduceThreads = 256;

__device__ __forceinline__ void store_release_sys(uint32_t *p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__global__ void __launch_bounds__(kCopyThreads)
    copy_signal_kernel(uint4 *__restrict__ dst, const uint4 *__restrict__ src, size_t n_vec,
                       uint32_t *own_counter, uint32_t *dst_flag) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  /* Four independent 16-byte loads in flight per thread before the stores. */
  for (; i + 3 * stride < n_vec; i += 4 * stride) {
    uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n_vec; i += stride) dst[i] = src[i];
  if (dst_flag == nullptr) return; /* a plain copy (the link probe) */
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system(); /* this block's stores reach the peer before it is counted */
    unsigned int done = atomicAdd(reinterpret_cast<unsigned int *>(own_counter), 1u);
    if (done == gridDim.x - 1) {
      *own_counter = 0u; /* reset for the next use: every block has counted */
      __threadfence_system();
      store_release_sys(dst_flag, 1u);
    }
  }
}

struct src_list {
  const void *p[TP_MAX_WORLD];
};

/* 16 bytes per access: 8 bf16 or 4 fp32 values, summed in fp32 per lane. */
template <typename T> struct vec16 { static constexpr int n = 16 / static_cast<int>(sizeof(T)); };

template <typename T>
__global__ void reduce_sum_vec_kernel(uint4 *__restrict__ out, src_list srcs, int n_src,
                                      size_t n_vec) {
  constexpr int lanes = vec16<T>::n;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_vec;
       i += stride) {
    float acc[lanes];
#pragma unroll
    for (int l = 0; l < lanes; ++l) acc[l] = 0.0f;
    for (int r = 0; r < n_src; ++r) {
      uint4 raw = static_cast<const uint4 *>(srcs.p[r])[i];
      const T *v = reinterpret_cast<const T *>(&raw);
#pragma unroll
      for (int l = 0; l < lanes; ++l) acc[l] += to_f32(v[l]);
    }
    uint4 packed;
    T *o = reinterpret_cast<T *>(&packed);
#pragma unroll
    for (int l = 0; l < lanes; ++l) o[l] = from_f32<T>(acc[l]);
    out[i] = packed;
  }
}

template <typename T>
__global__ void reduce_sum_kernel(T *__restrict__ out, src_list srcs, int n_src, size_t count) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    float acc = 0.0f;
    for (int r = 0; r < n_src; ++r) acc += to_f32(static_cast<const T *>(srcs.p[r])[i]);
    out[i] = from_f32<T>(acc);
  }
}

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void fill_random_kernel(T *buf, size_t count, uint64_t seed, float scale) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    uint64_t h = mix64(seed * 0x100000001B3ull ^ i);
    float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f); /* [0, 1) */
    buf[i] = from_f32<T>((2.0f * u - 1.0f) * scale);
  }
}

template <typename T> __global__ void poison_kernel(T *buf, size_t count) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    buf[i] = from_f32<T>(__int_as_float(0x7fc00000));
}

template <typename T> __device__ __forceinline__ bool same_bits(T a, T b);
template <> __device__ __forceinline__ bool same_bits<float>(float a, float b) {
  return __float_as_uint(a) == __float_as_uint(b);
}
template <>
__device__ __forceinline__ bool same_bits<__nv_bfloat16>(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __bfloat16_as_ushort(a) == __bfloat16_as_ushort(b);
}

__device__ void atomic_max_double(double *addr, double v) {
  unsigned long long *p = reinterpret_cast<unsigned long long *>(addr);
  unsigned long long old = *p;
  while (__longlong_as_double(static_cast<long long>(old)) < v) {
    unsigned long long prev =
        atomicCAS(p, old, static_cast<unsigned long long>(__double_as_longlong(v)));
    if (prev == old) break;
    old = prev;
  }
}

template <typename T>
__global__ void compare_kernel(const T *a, const T *b, size_t count, double *acc) {
  double diff2 = 0.0, ref2 = 0.0, maxd = 0.0, differ = 0.0, bad = 0.0;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    double x = to_f32(a[i]), y = to_f32(b[i]);
    if (!isfinite(x)) {
      bad += 1.0;
      continue;
    }
    double d = x - y;
    diff2 += d * d;
    ref2 += y * y;
    maxd = fmax(maxd, fabs(d));
    differ += same_bits(a[i], b[i]) ? 0.0 : 1.0;
  }
  for (int off = 16; off > 0; off /= 2) {
    diff2 += __shfl_down_sync(0xffffffffu, diff2, off);
    ref2 += __shfl_down_sync(0xffffffffu, ref2, off);
    maxd = fmax(maxd, __shfl_down_sync(0xffffffffu, maxd, off));
    differ += __shfl_down_sync(0xffffffffu, differ, off);
    bad += __shfl_down_sync(0xffffffffu, bad, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(acc + 0, diff2);
    atomicAdd(acc + 1, ref2);
    atomic_max_double(acc + 2, maxd);
    atomicAdd(acc + 3, differ);
    atomicAdd(acc + 4, bad);
  }
}

template <typename T> __global__ void to_fp32_kernel(const T *src, float *dst, size_t count) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    dst[i] = to_f32(src[i]);
}

unsigned int grid_for(size_t count, int threads) {
  return tp_dev::grid_blocks(count, threads, 4096);
}

} // namespace

extern "C" cudaError_t tp_launch_copy_signal(void *dst, const void *src, size_t bytes, int blocks,
                                             uint32_t *own_pad, int counter_slot, uint32_t *dst_pad,
                                             int slot, cudaStream_t stream) {
  if (bytes % 16 != 0 || reinterpret_cast<uintptr_t>(dst) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(src) % 16 != 0 || blocks < 1)
    return cudaErrorInvalidValue;
  copy_signal_kernel<<<blocks, kCopyThreads, 0, stream>>>(
      static_cast<uint4 *>(dst), static_cast<const uint4 *>(src), bytes / 16,
      own_pad ? own_pad + counter_slot : nullptr, dst_pad ? dst_pad + slot : nullptr);
  return cudaGetLastError();
}

/* The launchers below take element types only: an fp8 dtype is a GEMM recipe
 * whose tensors are bf16 (tp_dtype_storage), never an element type here. */
static bool is_element_type(tp_dtype dt) { return dt == TP_BF16 || dt == TP_FP32; }

extern "C" cudaError_t tp_launch_reduce_sum(tp_dtype dt, void *out, const void *const *srcs,
                                            int n_src, size_t count, cudaStream_t stream) {
  if (!is_element_type(dt)) return cudaErrorInvalidValue;
  if (n_src < 1 || n_src > TP_MAX_WORLD) return cudaErrorInvalidValue;
  src_list list{};
  bool aligned = reinterpret_cast<uintptr_t>(out) % 16 == 0;
  for (int r = 0; r < n_src; ++r) {
    list.p[r] = srcs[r];
    aligned = aligned && reinterpret_cast<uintptr_t>(srcs[r]) % 16 == 0;
  }
  const size_t lanes = dt == TP_BF16 ? 8 : 4;
  if (aligned && count % lanes == 0) {
    size_t n_vec = count / lanes;
    unsigned int vgrid = grid_for(n_vec, kReduceThreads);
    if (dt == TP_BF16)
      reduce_sum_vec_kernel<__nv_bfloat16>
          <<<vgrid, kReduceThreads, 0, stream>>>(static_cast<uint4 *>(out), list, n_src, n_vec);
    else
      reduce_sum_vec_kernel<float>
          <<<vgrid, kReduceThreads, 0, stream>>>(static_cast<uint4 *>(out), list, n_src, n_vec);
    return cudaGetLastError();
  }
  unsigned int grid = grid_for(count, kReduceThreads);
  if (dt == TP_BF16)
    reduce_sum_kernel<<<grid, kReduceThreads, 0, stream>>>(static_cast<__nv_bfloat16 *>(out), list,
                                                           n_src, count);
  else
    reduce_sum_kernel<<<grid, kReduceThreads, 0, stream>>>(static_cast<float *>(out), list, n_src,
                                                           count);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_fill_random(tp_dtype dt, void *buf, size_t count, uint64_t seed,
                                             float scale, cudaStream_t stream) {
  if (!is_element_type(dt)) return cudaErrorInvalidValue;
  unsigned int grid = grid_for(count, 256);
  if (dt == TP_BF16)
    fill_random_kernel<<<grid, 256, 0, stream>>>(static_cast<__nv_bfloat16 *>(buf), count, seed,
                                                 scale);
  else fill_random_kernel<<<grid, 256, 0, stream>>>(static_cast<float *>(buf), count, seed, scale);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_poison(tp_dtype dt, void *buf, size_t count, cudaStream_t stream) {
  if (!is_element_type(dt)) return cudaErrorInvalidValue;
  unsigned int grid = grid_for(count, 256);
  if (dt == TP_BF16)
    poison_kernel<<<grid, 256, 0, stream>>>(static_cast<__nv_bfloat16 *>(buf), count);
  else poison_kernel<<<grid, 256, 0, stream>>>(static_cast<float *>(buf), count);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_compare(tp_dtype dt, const void *a, const void *b, size_t count,
                                         double *acc, cudaStream_t stream) {
  if (!is_element_type(dt)) return cudaErrorInvalidValue;
  unsigned int grid = grid_for(count, 256);
  if (dt == TP_BF16)
    compare_kernel<<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16 *>(a),
                                             static_cast<const __nv_bfloat16 *>(b), count, acc);
  else
    compare_kernel<<<grid, 256, 0, stream>>>(static_cast<const float *>(a),
                                             static_cast<const float *>(b), count, acc);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_to_fp32(tp_dtype dt, const void *src, float *dst, size_t count,
                                         cudaStream_t stream) {
  if (!is_element_type(dt)) return cudaErrorInvalidValue;
  unsigned int grid = grid_for(count, 256);
  if (dt == TP_BF16)
    to_fp32_kernel<<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16 *>(src), dst, count);
  else to_fp32_kernel<<<grid, 256, 0, stream>>>(static_cast<const float *>(src), dst, count);
  return cudaGetLastError();
}
