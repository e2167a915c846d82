/*
 * tp_window_probe.h — the one question tp_window.c asks NCCL's device API
 * (nccl_device.h is C++, so the asking lives in tp_window_probe.cu): does
 * this communicator support symmetric memory? Not part of the API.
 */
#ifndef TP_WINDOW_PROBE_H
#define TP_WINDOW_PROBE_H

#include <stddef.h>

#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Creates and destroys a device communicator with no requirements
 * (collective: NCCL ends it with a barrier of the ranks). ncclSuccess when
 * the communicator supports symmetric memory, with the size of its LSA
 * (NVLink load/store) team in *lsa_size (may be NULL); otherwise NCCL's
 * result, with ncclGetLastError's text in why[cap] (empty when NCCL left
 * none). */
ncclResult_t tp_window_probe_nccl(ncclComm_t comm, int *lsa_size, char *why, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* TP_WINDOW_PROBE_H */
