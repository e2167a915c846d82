/*
 * tp_symm_nccl.cu — NCCL's device API as the symmetric heap's NCCL
 * transport needs it (tp_symm_nccl.h): each rank's window address, which
 * NCCL only hands out in device code (the window handle points at a
 * device-side descriptor). Read once per window and copied back, so the
 * fused schedules take plain peer pointers, as from the CUDA-IPC heap.
 */
#include "kernels/tp_symm_nccl.h"

#include <nccl_device.h>

enum { PEERS_MAX = 32 }; /* one warp: lane p asks for rank p (TP_MAX_WORLD is 16) */

__device__ void *peer_ptrs[PEERS_MAX];
__device__ unsigned long long peer_words[PEERS_MAX];

__global__ void peers_kernel(ncclWindow_t window, int world) {
  const int p = (int)threadIdx.x;
  if (p >= world) return;
  void *ptr = ncclGetPeerPointer(window, 0, p);
  peer_ptrs[p] = ptr;
  peer_words[p] = *(volatile unsigned long long *)ptr;
}

extern "C" cudaError_t tp_symm_nccl_peers(ncclWindow_t window, int world, void **ptrs,
                                          uint64_t *first_words) {
  if (world < 1 || world > PEERS_MAX) return cudaErrorInvalidValue;
  peers_kernel<<<1, PEERS_MAX>>>(window, world);
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err == cudaSuccess)
    err = cudaMemcpyFromSymbol(ptrs, peer_ptrs, (size_t)world * sizeof(void *));
  if (err == cudaSuccess)
    err = cudaMemcpyFromSymbol(first_words, peer_words, (size_t)world * sizeof(uint64_t));
  return err;
}
