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
 */
#ifndef TP_SYMM_H
#define TP_SYMM_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"
#include "kernels/tp_device.h"

/* All-gather of `bytes` from every rank into recv (world * bytes, rank order). */
typedef tp_rc (*tp_exchange_fn)(void *ctx, const void *send, size_t bytes, void *recv);

typedef struct tp_symm tp_symm;

/* Collective. Allocates and maps the signal pads; the workspace starts empty. */
TP_MUST_CHECK tp_rc tp_symm_create(int rank, int world, tp_exchange_fn exchange, void *ctx,
                                   tp_symm **out);

/* Collective. Makes the workspace at least `bytes` on every rank. The request
 * is claimed for the device ledger's current owner (tp_device_alloc.h): its
 * share of the workspace, whoever grew it; the heap itself is the group's.
 * A growth that fails on any rank (its cudaMalloc, or the planted failure of
 * TPBENCH_TEST_FAIL_ALLOC, kernels/tp_agree.h) fails on every rank with the
 * failing ranks and the size named, leaving every rank's workspace empty. */
TP_MUST_CHECK tp_rc tp_symm_reserve(tp_symm *symm, size_t bytes);

/* Workspace base address of `rank` as this process sees it (own or mapped). */
void *tp_symm_ptr(const tp_symm *symm, int rank);

/* Every rank's signal pad as this process sees it. */
tp_pad_set tp_symm_pads(const tp_symm *symm);

size_t tp_symm_size(const tp_symm *symm);
int tp_symm_grow_count(const tp_symm *symm);
void tp_symm_freeze(tp_symm *symm, int frozen);

void tp_symm_destroy(tp_symm *symm);

#endif /* TP_SYMM_H */
