/*
 * tp_trace_export.h — a configuration's trace as Chrome trace JSON (the
 * "JSON Array/Object Format" that Perfetto and chrome://tracing open).
 *
 * Layout of the document (tracks, projections and launches as
 * report/tp_trace_model.h lays them out):
 *   - one process per rank: pid = rank, named "rank N (GPU name)" by a
 *     process_name metadata event, ordered by rank (process_sort_index);
 *   - per CUDA stream, a track of its kernels (tid = the CUPTI stream id,
 *     "stream N"), one of its copies and memsets ("stream N copies") and one
 *     of its synchronisation records ("stream N sync"), and overflow tracks
 *     ("stream N (2)") for what would partially overlap: every track nests;
 *   - per rank, NVTX ranges on a track "NVTX" (tid = largest stream id + 1),
 *     their GPU projections on "NVTX (GPU)" (cat "range_gpu", args cpu_ts and
 *     cpu_dur), activity on no stream on "no stream" (tid + 2); other tracks
 *     take tids from largest stream id + 3;
 *   - every event a complete event ("ph": "X") with "cat" = its category
 *     (comm, gemm, attention, elementwise, other, sync, range), "ts" and
 *     "dur" in microseconds with sub-microsecond decimals, ts relative to the
 *     earliest event of the trace, and "args": {kind, bytes, copy_kind,
 *     correlation, device, peer_device, schedule, nvtx_range};
 *   - a flow ("s" at the range's start, "f" with "bp": "e" at the work's
 *     start, cat "launch") from each NVTX range to the device work whose
 *     launch was given to it;
 *   - "otherData": which configuration, run and commit, the schedule that
 *     ran, the trace summary (iterations, overhead, evidence, overlap), and
 *     how many slices went to overflow tracks and launches to ranges.
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
