/*
 * tp_window.h — NCCL symmetric windows of a TP group: the buffers of the
 * stock path's second variant (schedule "nccl-window"), which runs the same
 * NCCL collectives as the plain stock path on memory from ncclMemAlloc
 * registered with ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC).
 *
 * NCCL takes its symmetric kernels only when both the send and the receive
 * buffer of a collective lie in such windows (v2.28's
 * src/scheduler/symmetric_sched.cc), so a window plan needs every buffer its
 * collectives touch in one: the group's window scratch (the gathered input,
 * the partials, the backward's), grown monotonically at prepare time like
 * the private scratch, and the caller's tensors that a collective reads or
 * writes (tp_linear.h says which), carved from windows of the caller's own
 * (tp_window_alloc). A plan checks that before it enqueues anything: a
 * buffer outside every window is an error, never a plain collective in
 * disguise.
 *
 * Whether the communicator supports symmetric memory is asked once, with
 * the one public call that refuses a communicator without it
 * (ncclDevCommCreate, nccl_device/core.h): ncclCommWindowRegister on such a
 * communicator succeeds and hands back a local registration instead of a
 * window (v2.27-v2.28 src/dev_runtime.cc), which would run the plain
 * collectives under the window's name. NCCL up to 2.28.3 has no symmetric
 * support in a communicator of one rank (its P2P check needs two local
 * ranks); 2.28.7 on has. A refusal is TP_EREJECT with NCCL's own text.
 *
 * Every call here but tp_window_covers is collective: each rank of the
 * group calls it, in the same order, with the same sizes (registration is;
 * the offsets of a buffer in its window must match on every rank for the
 * symmetric kernels). NVLink multicast is never asked for (no multimem
 * team, no cuMulticastCreate).
 */
#ifndef TP_WINDOW_H
#define TP_WINDOW_H

#include <stddef.h>

#include "common/tp_error.h"
#include "kernels/tp_group.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TP_OK when the group's communicator supports NCCL symmetric memory;
 * TP_EREJECT with NCCL's reason otherwise. Asks NCCL once (collective),
 * then answers from the group. */
TP_MUST_CHECK tp_rc tp_window_check_support(tp_group *group);

/* A new window of at least bytes (rounded up to NCCL's window alignment),
 * zero-filled; *out its base; its bytes adopted by the device ledger for
 * its current owner until tp_window_free. TP_EREJECT with NCCL's text when
 * NCCL refuses to register it, TP_EOOM when ncclMemAlloc finds no memory.
 * The ranks agree on their allocations before the registration and on the
 * registration after it (kernels/tp_agree.h): a failure on any rank fails
 * every rank alike, naming the failing ranks and the size, and no rank
 * keeps a window. */
TP_MUST_CHECK tp_rc tp_window_alloc(tp_group *group, size_t bytes, void **out);

/* Deregisters and frees the window based at ptr (NULL: nothing). The device
 * is synchronised first. On an aborted group only the bookkeeping goes. */
void tp_window_free(tp_group *group, void *ptr);

/* Grows the group's window scratch to at least bytes (nothing when it is
 * that large already); *out its base. The window is the group's in the
 * ledger; the request is claimed for the current owner (TP_SHARED_WINDOW). */
TP_MUST_CHECK tp_rc tp_window_scratch(tp_group *group, size_t bytes, void **out);

/* Whether [ptr, ptr + bytes) lies inside one of the group's windows (not
 * collective). */
int tp_window_covers(const tp_group *group, const void *ptr, size_t bytes);

/* Deregisters and frees every window of the group (tp_group_destroy's). */
void tp_window_release_all(tp_group *group);

#ifdef __cplusplus
}
#endif

#endif /* TP_WINDOW_H */
