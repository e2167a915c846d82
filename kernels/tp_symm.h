/*
 * tp_symm.h — the symmetric memory of one TP group: on every rank a
 * workspace of the same size and a signal pad, each mapped into every other
 * rank through CUDA IPC handles, so any rank can read, write and signal any
 * peer's memory with plain pointers.
 *
 * One workspace serves every op. It grows monotonically to the largest
 * request ever made (a max over ops, not a sum); growing is collective —
 * every rank must call tp_symm_reserve with the same size, in the same order
 * — because it frees the old buffer and re-exchanges handles. Ops carve from
 * offset 0, so their regions alias; safety comes from serialising ops with a
 * barrier per op. While frozen (CUDA graph capture), a request larger than the
 * current size fails with TP_EREJECT instead of growing.
 *
 * The bytes are exchanged through a caller-supplied all-gather (the bench's
 * TCP rendezvous), so this module needs no knowledge of how ranks meet.
 *
 * Two transports (tp_symm_transport, the `symm` axis) give the same heap:
 *   IPC  — cudaMalloc'd, each peer's buffer opened with cudaIpcOpenMemHandle
 *          (tp_symm_create);
 *   NCCL — NCCL symmetric windows (tp_symm_create_nccl): workspace and pads
 *          each from ncclMemAlloc, registered with ncclCommWindowRegister
 *          (NCCL_WIN_COLL_SYMMETRIC, collective, the same order on every
 *          rank), each peer's part reached through the pointer NCCL's device
 *          API gives (ncclGetPeerPointer, read once per window by a kernel).
 *          Before a rank registers, every rank says whether its ncclMemAlloc
 *          succeeded (the all-gather): a growth that fails on one rank fails
 *          on all, and no rank is left inside the collective registration.
 *          Each new window is checked once: every rank writes a word of its
 *          own into its buffer and reads every rank's through the pointers
 *          NCCL gave — a header whose window descriptor differs from the
 *          runtime's fails here, not in a schedule. The workspace and pads
 *          are outside the device ledger (NCCL allocates them); the claims
 *          are made as for IPC.
 * Own memory is the buffer this rank allocated; the schedules, flags and
 * barriers (tp_device.h) run unchanged over either.
 */
#ifndef TP_SYMM_H
#define TP_SYMM_H

#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

#include "common/tp_error.h"
#include "common/tp_vocab.h"
#include "kernels/tp_device.h"

/* All-gather of `bytes` from every rank into recv (world * bytes, rank order). */
typedef tp_rc (*tp_exchange_fn)(void *ctx, const void *send, size_t bytes, void *recv);

typedef struct tp_symm tp_symm;

/* Collective. Allocates and maps the signal pads; the workspace starts empty. */
TP_MUST_CHECK tp_rc tp_symm_create(int rank, int world, tp_exchange_fn exchange, void *ctx,
                                   tp_symm **out);

/* The same over NCCL symmetric windows of comm (collective: every rank of
 * comm, in the same order). The caller has checked that comm supports
 * symmetric memory (tp_window_check_support): on a communicator without it
 * NCCL registers no window. TP_EREJECT when the communicator's ranks span
 * more than one LSA (NVLink) domain, with NCCL's sizes. */
TP_MUST_CHECK tp_rc tp_symm_create_nccl(int rank, int world, ncclComm_t comm,
                                        tp_exchange_fn exchange, void *ctx, tp_symm **out);

/* Collective. Makes the workspace at least `bytes` on every rank. The request
 * is claimed for the device ledger's current owner (tp_device_alloc.h): its
 * share of the workspace, whoever grew it; the heap itself is the group's.
 * A growth that fails on any rank (its cudaMalloc, or the planted failure of
 * TPBENCH_TEST_FAIL_ALLOC, kernels/tp_agree.h) fails on every rank with the
 * failing ranks and the size named, leaving every rank's workspace empty. */
TP_MUST_CHECK tp_rc tp_symm_reserve(tp_symm *symm, size_t bytes);

/* Workspace base address of `rank` as this process sees it (own or mapped). */
void *tp_symm_ptr(const tp_symm *symm, int rank);

/* The workspace of `rank` through the transport's mapping, own rank too:
 * IPC, tp_symm_ptr; NCCL, the window's pointer NCCL's device API gives (for
 * this rank an alias of its own buffer). NULL while the workspace is empty. */
void *tp_symm_mapped_ptr(const tp_symm *symm, int rank);

tp_symm_transport tp_symm_transport_of(const tp_symm *symm);

/* Every rank's signal pad as this process sees it. */
tp_pad_set tp_symm_pads(const tp_symm *symm);

size_t tp_symm_size(const tp_symm *symm);
int tp_symm_grow_count(const tp_symm *symm);
void tp_symm_freeze(tp_symm *symm, int frozen);

void tp_symm_destroy(tp_symm *symm);

#endif /* TP_SYMM_H */
