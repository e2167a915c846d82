/*
 * tp_trace_kineto.h — a configuration's trace as PyTorch Kineto writes its
 * JSON traces, one file per rank, so that tools built for Kineto traces
 * (Holistic Trace Analysis, TensorBoard's profiler view, Perfetto) read it.
 *
 * Each file is one rank's part of the trace (tp_trace_model.h lays it out):
 *   - "schemaVersion": 1, "distributedInfo" {"backend": "nccl", "rank",
 *     "world_size"} (written with a space after each colon: a reader may find
 *     the rank by a text match), "deviceProperties" [{"id", "name"}] for the
 *     rank's GPU, "baseTimeNanoseconds" (the time that ts 0 stands for),
 *     "displayTimeUnit", "traceName" and "tpbench" (which configuration);
 *   - "traceEvents": the GPU's process (pid = the device ordinal) with a
 *     track per stream (tid = the stream id) and the copy, synchronisation
 *     and overflow tracks beside it; the rank's host process (pid = 100000 +
 *     rank) with the NVTX ranges. Categories as Kineto names them: "kernel",
 *     "gpu_memcpy", "gpu_memset", "cuda_sync", "user_annotation" (NVTX ranges,
 *     host clock), "gpu_user_annotation" (their GPU projections), and flow
 *     events "ac2g" from each range to the work launched inside it. Kernel
 *     names are demangled as Kineto's are; copies read "Memcpy PtoP (Device
 *     -> Device)", memsets "Memset (Device)", synchronisation "Stream Sync",
 *     "Stream Wait Event", "Event Sync", "Context Sync". Device events carry
 *     args {device, stream, correlation} (copies and memsets also bytes), and
 *     tpbench's own category in "tpbench category".
 * The store keeps no runtime/driver API records, so there are no
 * "cuda_runtime" events; flows start at the NVTX range instead.
 */
#ifndef TP_TRACE_KINETO_H
#define TP_TRACE_KINETO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "store/tp_store.h"

/* The ranks that have events in config_id's trace, ascending, in a malloc'd
 * array (*ranks NULL when *n is 0; free() it). TP_EUSAGE when the
 * configuration has no trace; TP_ESQLITE on a database error. */
TP_MUST_CHECK tp_rc tp_report_trace_ranks(tp_store *store, int64_t config_id, int **ranks,
                                          size_t *n);

/* Writes rank `rank`'s Kineto trace of config_id to out. TP_EUSAGE when the
 * configuration does not exist or has no trace; TP_EIO when out cannot be
 * written. */
TP_MUST_CHECK tp_rc tp_report_kineto_trace(tp_store *store, int64_t config_id, int rank, FILE *out);

#endif /* TP_TRACE_KINETO_H */
