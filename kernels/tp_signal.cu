/*
 * tp_signal.cu — cross-rank barrier and per-chunk flags over signal pads
 * (see tp_device.h for the protocol). Loads and stores use system-scope
 * acquire/release so data written over NVLink before a flag is visible to
 * whoever sees the flag.
 */
#include <cstdio>

#include "kernels/tp_device.h"

namespace {

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store_release_sys(uint32_t *p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t cas_sys(uint32_t *p, uint32_t expect, uint32_t value) {
  return atomicCAS_system(reinterpret_cast<unsigned int *>(p), expect, value);
}

/* Raises a slot that the consumer has lowered since its last use. */
__device__ void raise_slot(uint32_t *slot, int rank, int peer, uint64_t deadline) {
  while (cas_sys(slot, 0u, 1u) != 0u) {
    if (global_timer_ns() > deadline) {
      printf("tpbench: rank %d timed out raising a barrier slot of rank %d\n", rank, peer);
      __trap();
    }
  }
}

__device__ void lower_slot(uint32_t *slot, int rank, int peer, uint64_t deadline) {
  while (cas_sys(slot, 1u, 0u) != 1u) {
    if (global_timer_ns() > deadline) {
      printf("tpbench: rank %d timed out waiting at the barrier for rank %d\n", rank, peer);
      __trap();
    }
  }
}

/* Spins for ns on the global timer: the test knob's fixed slowdown. */
__global__ void delay_kernel(uint64_t ns) {
  const uint64_t until = global_timer_ns() + ns;
  while (global_timer_ns() < until) {}
}

__global__ void barrier_kernel(tp_pad_set pads, int rank, int world, uint64_t timeout_ns) {
  int peer = static_cast<int>(threadIdx.x);
  if (peer >= world || peer == rank) return;
  uint64_t deadline = global_timer_ns() + timeout_ns;
  __threadfence_system();
  raise_slot(pads.pad[peer] + TP_SIG_BARRIER + rank, rank, peer, deadline);
  lower_slot(pads.pad[rank] + TP_SIG_BARRIER + peer, rank, peer, deadline);
  __threadfence_system();
}

__global__ void signal_kernel(uint32_t *dst_pad, int slot) {
  __threadfence_system();
  store_release_sys(dst_pad + slot, 1u);
}

__global__ void wait_kernel(uint32_t *own_pad, int slot, int waited_rank, uint64_t timeout_ns) {
  uint64_t deadline = global_timer_ns() + timeout_ns;
  uint32_t *flag = own_pad + slot;
  while (load_acquire_sys(flag) == 0u) {
    if (global_timer_ns() > deadline) {
      printf("tpbench: timed out waiting for rank %d (signal slot %d)\n", waited_rank, slot);
      __trap();
    }
  }
  store_release_sys(flag, 0u);
}

} // namespace

extern "C" cudaError_t tp_launch_delay(uint64_t ns, cudaStream_t stream) {
  delay_kernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_barrier(tp_pad_set pads, int rank, int world, uint64_t timeout_ns,
                                         cudaStream_t stream) {
  barrier_kernel<<<1, 32, 0, stream>>>(pads, rank, world, timeout_ns);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_signal(uint32_t *dst_pad, int slot, cudaStream_t stream) {
  signal_kernel<<<1, 1, 0, stream>>>(dst_pad, slot);
  return cudaGetLastError();
}

extern "C" cudaError_t tp_launch_wait(uint32_t *own_pad, int slot, int waited_rank,
                                      uint64_t timeout_ns, cudaStream_t stream) {
  wait_kernel<<<1, 1, 0, stream>>>(own_pad, slot, waited_rank, timeout_ns);
  return cudaGetLastError();
}
