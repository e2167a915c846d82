/*
 * tp_symm_nccl.cu — NCCL's device API as the symmetric heap's NCCL
 * transport needs it (tp_symm_nccl.h): the LSA team's size, read from a
 * device communicator on the host, and each rank's window address, which
 * NCCL only hands out in device code (the window handle points at a
 * device-side descriptor). Read once per window and copied back, so the
 * fused schedules take plain peer pointers, as from the CUDA-IPC heap.
 */
#include "kernels/tp_symm_nccl.h"

#include <stdio.h>
#include <string.h>

#include <nccl_device.h>

enum { PEERS_MAX = 32 }; /* one warp: lane p asks for rank p (TP_MAX_WORLD is 16) */

/* NCCL fills the whole struct of its own version; a newer runtime's may be
 * larger than this header's, so it is written into room to spare (as
 * tp_window_probe.cu does). Only the leading rank fields are read. */
typedef union dev_comm_room {
  ncclDevComm_t comm;
  unsigned char bytes[16384];
} dev_comm_room;

typedef union requirements_room {
  ncclDevCommRequirements_t reqs;
  unsigned char bytes[4096];
} requirements_room;

__device__ void *peer_ptrs[PEERS_MAX];
__device__ unsigned long long peer_words[PEERS_MAX];

static void last_error(ncclComm_t comm, char *why, size_t cap) {
  const char *text = ncclGetLastError(comm);
  snprintf(why, cap, "%s", text ? text : "");
}

extern "C" ncclResult_t tp_symm_nccl_lsa_size(ncclComm_t comm, int *lsa_size, char *why,
                                              size_t cap) {
  requirements_room reqs;
  dev_comm_room room;
  memset(&reqs, 0, sizeof reqs);
  memset(&room, 0, sizeof room);
  if (cap) why[0] = '\0';
  *lsa_size = 0;
  ncclResult_t r = ncclDevCommCreate(comm, &reqs.reqs, &room.comm);
  if (r != ncclSuccess) {
    last_error(comm, why, cap);
    return r;
  }
  *lsa_size = room.comm.lsaSize;
  r = ncclDevCommDestroy(comm, &room.comm);
  if (r != ncclSuccess) last_error(comm, why, cap);
  return r;
}

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
