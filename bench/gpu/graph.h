/*
 * graph.h — CUDA graph mode of a configuration: one step captured on the
 * TP group's main stream and replayed back to back like the eager loop.
 *
 * Capture runs in thread-local mode; the fused ops fork to the comm stream
 * and join back with events, which capture follows. The symmetric workspace
 * and the private scratch are frozen while capturing (tp_group_freeze):
 * growing them would free the buffer the graph points into (and, for the
 * workspace, re-rendezvous), so a step that asks for more than was reserved
 * fails with TP_EREJECT instead. A caller that keeps several graphs of one
 * workspace (graphs of several sizes) freezes the group itself from the
 * first capture until the graphs are destroyed; a capture leaves the group
 * as frozen as it found it. Any failure inside the capture ends it cleanly:
 * no stream is left capturing and the group keeps working eagerly.
 */
#ifndef TP_BENCH_GRAPH_H
#define TP_BENCH_GRAPH_H

#include <cuda_runtime_api.h>

#include "kernels/tp_group.h"

/* One step of a configuration, enqueued on the group's main stream. */
typedef tp_rc (*tp_graph_step_fn)(void *ctx);

/* Captures one call of step and instantiates it into *out. On failure *out
 * is NULL and the code is the step's own (TP_EREJECT for workspace growth)
 * or TP_ECUDA for capture or instantiation, with "CUDA graph capture: "
 * before the reason. Not collective itself; the ranks agree afterwards. */
TP_MUST_CHECK tp_rc tp_graph_capture(tp_group *group, tp_graph_step_fn step, void *ctx,
                                     cudaGraphExec_t *out);

/* Enqueues one replay on the group's main stream. */
TP_MUST_CHECK tp_rc tp_graph_launch(tp_group *group, cudaGraphExec_t exec);

/* NULL is fine. */
void tp_graph_destroy(cudaGraphExec_t exec);

#endif
