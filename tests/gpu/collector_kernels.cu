/*
 * collector_kernels.cu — the one kernel the collector's GPU test traces.
 *
 * Its name contains "fill", so the collector must report it as an
 * elementwise kernel: the test checks classification end to end, on the name
 * CUPTI really reports. It sleeps a few microseconds so its interval has a
 * clearly positive length.
 */
#include <cuda_runtime.h>

#include <cstddef>

__global__ void collector_test_fill_kernel(float *buf, size_t n, float value) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    buf[i] = value;
  __nanosleep(20000);
}

extern "C" cudaError_t collector_test_launch_fill(float *buf, size_t n, float value, cudaStream_t stream) {
  collector_test_fill_kernel<<<64, 256, 0, stream>>>(buf, n, value);
  return cudaGetLastError();
}
