/*
 * tp_symm_nccl.h — the two questions the NCCL transport of the symmetric
 * heap (tp_symm.h) asks NCCL's device API, which is C++ (nccl_device.h), so
 * the asking lives in tp_symm_nccl.cu: how many ranks of the communicator
 * share one load/store-accessible (LSA, NVLink) domain, and where each
 * rank's part of a registered window lies in this process's address space.
 * Not part of the API.
 */
#ifndef TP_SYMM_NCCL_H
#define TP_SYMM_NCCL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* For every rank p < world: ptrs[p], the address of byte 0 of rank p's part
 * of window as this process maps it (ncclGetPeerPointer, world ranks), and
 * first_words[p], the 8 bytes found there (a load through that mapping). One
 * kernel of one warp on the legacy stream, then synchronous copies back.
 * window must be a symmetric window (NCCL_WIN_COLL_SYMMETRIC) of a
 * communicator whose LSA team is the whole world (tp_window_probe_nccl's lsa_size). */
cudaError_t tp_symm_nccl_peers(ncclWindow_t window, int world, void **ptrs, uint64_t *first_words);

#ifdef __cplusplus
}
#endif

#endif /* TP_SYMM_NCCL_H */
