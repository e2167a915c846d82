/*
 * profile_target.cu — a CUDA program for the GPU test of `tpbench profile`
 * (test_profile.c), standing in for a user's program: N steps, each an NVTX
 * range "step N" holding a kernel that spins for a set time, a device copy
 * and a memset, then a stream synchronisation. It times each step's GPU
 * work itself with CUDA events and writes the times (ms, one per line) to
 * --times FILE, so the test can hold tpbench's step times against the
 * program's own. --claim-cupti subscribes to CUPTI before CUDA starts, as
 * another profiler would: one of the two subscribers is then refused, and
 * this program exits 3 when it is the one.
 *
 * usage: profile_target [--steps N] [--step-us U] [--times FILE] [--claim-cupti]
 */
#include <cuda_runtime.h>
#include <cupti.h>
#include <nvtx3/nvToolsExt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "profile_target: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__,       \
              cudaGetErrorString(err_));                                                           \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* Spins for about `cycles` clock ticks: a step of a known length. */
__global__ void spin_kernel(long long cycles, int *sink) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
  if (threadIdx.x == 0 && blockIdx.x == 0) *sink = 1;
}

static void CUPTIAPI ignore(void *u, CUpti_CallbackDomain d, CUpti_CallbackId c, const void *p) {
  (void)u;
  (void)d;
  (void)c;
  (void)p;
}

/* 0 when this program got CUPTI's subscriber slot, 3 when it was refused. */
static int claim_cupti(void) {
  CUpti_SubscriberHandle sub;
  CUptiResult st = cuptiSubscribe(&sub, ignore, NULL);
  if (st == CUPTI_SUCCESS) return 0;
  const char *text = NULL;
  cuptiGetResultString(st, &text);
  fprintf(stderr, "profile_target: cuptiSubscribe refused: %s\n", text ? text : "?");
  return 3;
}

int main(int argc, char **argv) {
  int steps = 6, step_us = 2000, claim = 0;
  const char *times_path = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--step-us") && i + 1 < argc) step_us = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--times") && i + 1 < argc) times_path = argv[++i];
    else if (!strcmp(argv[i], "--claim-cupti")) claim = 1;
    else {
      fprintf(stderr, "profile_target: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (claim && claim_cupti() != 0) return 3;
  int clock_khz = 0, *sink = NULL;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const size_t bytes = 8u << 20;
  void *a = NULL, *b = NULL;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMalloc(&sink, sizeof *sink));
  cudaStream_t stream;
  cudaEvent_t begin, end;
  CHECK(cudaStreamCreate(&stream));
  CHECK(cudaEventCreate(&begin));
  CHECK(cudaEventCreate(&end));
  FILE *times = times_path ? fopen(times_path, "w") : NULL;
  if (times_path && !times) {
    fprintf(stderr, "profile_target: cannot write %s\n", times_path);
    return 1;
  }
  for (int s = 0; s < steps; ++s) {
    char name[32];
    snprintf(name, sizeof name, "step %d", s);
    nvtxRangePushA(name);
    CHECK(cudaEventRecord(begin, stream));
    spin_kernel<<<1, 32, 0, stream>>>((long long)step_us * clock_khz / 1000, sink);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream));
    CHECK(cudaMemsetAsync(a, 0, bytes, stream));
    CHECK(cudaEventRecord(end, stream));
    CHECK(cudaStreamSynchronize(stream));
    nvtxRangePop();
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, begin, end));
    if (times) fprintf(times, "%.6f\n", ms);
  }
  if (times && fclose(times) != 0) return 1;
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(sink));
  return 0;
}
