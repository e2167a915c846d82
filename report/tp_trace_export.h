/*
 * tp_trace_export.h — a configuration's trace as Chrome trace JSON (the
 * "JSON Array/Object Format" that Perfetto and chrome://tracing open).
 *
 * Layout of the document:
 *   - one process per rank: pid = rank, named "rank N (GPU name)" by a
 *     process_name metadata event, ordered by rank (process_sort_index);
 *   - one thread per CUDA stream: tid = the CUPTI stream id, named
 *     "stream N" (thread_name);
 *   - per rank, NVTX ranges on their own track named "NVTX", tid = (largest
 *     stream id of the trace) + 1, sorted above the streams; activity on no
 *     stream (some synchronisation records) on a track "no stream", tid + 2;
 *   - every event a complete event ("ph": "X") with "cat" = its category
 *     (comm, gemm, attention, elementwise, other, range), "ts" and "dur" in
 *     microseconds with sub-microsecond decimals, ts relative to the
 *     earliest event of the trace, and "args": {kind, bytes, copy_kind,
 *     correlation, device, peer_device, schedule};
 *   - "otherData": which configuration, run and commit, the schedule that
 *     ran, and the trace summary (iterations, overhead, evidence, overlap).
 * Events are written as they are read, so a large trace costs little memory.
 */
#ifndef TP_TRACE_EXPORT_H
#define TP_TRACE_EXPORT_H

#include <stdint.h>
#include <stdio.h>

#include "store/tp_store.h"

/* Writes the trace of configuration config_id to out. TP_EUSAGE when there
 * is no such configuration or it has no trace (tp_store_trace_info tells the
 * two apart beforehand); TP_EIO when out cannot be written. */
TP_MUST_CHECK tp_rc tp_report_chrome_trace(tp_store *store, int64_t config_id, FILE *out);

#endif /* TP_TRACE_EXPORT_H */
