/*
 * collector_kernels.cu — the one kernel the collector's GPU test traces.
 *
 * Its name contains "fill", so the collector must report it as an
 * elementwise kernel: the test checks classification end to end, on the name
 * CUPTI really reports. It runs at least 20 us (a spin on the global timer)
 * so its interval has a clearly positive length.
 */
#include <cuda_runtime.h>

#include <cstddef>

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void collector_test_fill_kernel(float *buf, size_t n, float value) {
  unsigned long long t0 = global_ns();
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    buf[i] = value;
  /* __nanosleep is only a hint (it may sleep for less); spin on the global timer instead */
  while (global_ns() - t0 < 20000) {}
}

extern "C" cudaError_t collector_test_launch_fill(float *buf, size_t n, float value,
                                                  cudaStream_t stream) {
  collector_test_fill_kernel<<<64, 256, 0, stream>>>(buf, n, value);
  return cudaGetLastError();
}
