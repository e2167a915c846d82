/*
 * tp_trace_model.h — one configuration's trace laid out for the exporters
 * (tp_trace_export.c writes it as Chrome trace JSON, tp_trace_kineto.c as
 * Kineto's per-rank files): every stored event placed on a track where it
 * nests, the NVTX ranges projected onto the GPU work launched inside them,
 * and the launch each device event came from.
 *
 * Tracks, per rank (a track is one (pid, tid) of the written file):
 *   - per CUDA stream, one track class each for kernels, for copies and
 *     memsets, and for CUPTI synchronisation records (host-timed API calls
 *     such as cudaStreamSynchronize, which span the stream's kernels);
 *   - NVTX ranges on the CPU clock ("NVTX"), their GPU projections ("NVTX
 *     (GPU)"), and synchronisation records on no stream ("no stream").
 * Within a class, events go to lane 0 when they nest in or follow what is
 * there; an event that would partially overlap it (CUPTI's timestamps of two
 * kernels on one stream can overlap by a few ns) goes to the next lane, an
 * overflow track, with its times unchanged. So no two complete events of
 * one track partially overlap.
 *
 * Launches: the store keeps neither the runtime/driver API records nor the
 * host time of each launch, only the CUPTI correlation id, which CUPTI
 * assigns in the order of the API calls of the process. The host time of a
 * device event's launch is therefore bounded, per rank, by the records that
 * carry host times on the same counter: it is at or after the start of the
 * last synchronisation record (a host API call) with a smaller correlation
 * id, and at or before both the start of the next such record and the GPU
 * start of every device event with a correlation id at or above its own
 * (nothing starts on the GPU before it is launched). Without a lower record
 * the bound is the rank's first NVTX range. The event is given to the NVTX
 * range that holds the largest part of that interval, level by level from
 * the outermost ranges down (it stays with the parent when the part outside
 * every child is larger): the launch is equally likely anywhere in the
 * interval, so that range is the likeliest. A range's GPU projection spans
 * the device events given to it and to the ranges inside it.
 */
#ifndef TP_TRACE_MODEL_H
#define TP_TRACE_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "store/tp_store.h"

/* What a track holds. */
typedef enum {
  TP_TRACK_KERNEL = 0, /* kernels of one stream */
  TP_TRACK_COPY,       /* memcpys and memsets of one stream */
  TP_TRACK_SYNC,       /* synchronisation records of one stream */
  TP_TRACK_NVTX_CPU,   /* NVTX ranges, host clock */
  TP_TRACK_NVTX_GPU,   /* NVTX ranges projected onto their GPU work */
  TP_TRACK_NO_STREAM   /* synchronisation records on no stream */
} tp_track_class;

typedef struct tp_trace_track {
  int rank;
  int device;      /* the rank's device (largest seen), -1 when unknown */
  uint32_t stream; /* TP_TRACE_NO_STREAM for the rank-level tracks */
  tp_track_class cls;
  int lane;      /* 0, then the overflow tracks 1, 2, ... */
  int64_t tid;   /* unique within the rank; see tp_trace_model_load */
  int64_t sort;  /* thread_sort_index: NVTX first, then stream by stream */
  char name[64]; /* "stream 7", "stream 7 copies", "stream 7 (2)", "NVTX", ... */
} tp_trace_track;

/* One stored event (strings owned by the model) or one GPU projection. */
typedef struct tp_trace_slice {
  tp_trace_event ev; /* for a projection: the range's name, kind "range", its GPU span */
  int projected;     /* 1: the GPU projection of range `range` */
  size_t track;      /* index into tracks */
  long range;        /* device events: the slice index of the NVTX range the launch was given
                        to (its CPU slice), -1 when none; projections: their CPU range */
  uint64_t launch_lo, launch_hi; /* device events: the launch's host-time bounds */
} tp_trace_slice;

typedef struct tp_trace_model {
  tp_trace_slice *slices;    /* stored events in (rank, start, longer first) order, then the
                                projections */
  size_t n_slices, n_events; /* n_events: the stored ones, slices[0 .. n_events) */
  tp_trace_track *tracks;
  size_t n_tracks;
  uint64_t t0;        /* the earliest start of any stored event */
  int64_t max_stream; /* -1 when no event has a stream */
  int n_ranks_seen;
  size_t n_overflow; /* events placed on an overflow lane */
  size_t n_launched; /* device events given to an NVTX range (each gets a flow arrow) */
} tp_trace_model;

/* Loads every event of config_id and lays it out as described above.
 * Track ids (tid) keep the older layout where they can: a stream's kernel
 * track is the stream id, "NVTX" max_stream + 1, "no stream" max_stream + 2,
 * every other track max_stream + 3 onwards. TP_ESQLITE on a database error,
 * TP_EOOM when memory runs out. Free with tp_trace_model_free. */
TP_MUST_CHECK tp_rc tp_trace_model_load(tp_store *store, int64_t config_id, tp_trace_model *m);

void tp_trace_model_free(tp_trace_model *m);

/* Whether the event is device work (kernel, memcpy, memset). */
int tp_trace_is_device_work(const tp_trace_event *e);

/* ---- writing trace events (both exporters) ---------------------------------- */

/* The "traceEvents" array being written: a comma before all but the first. */
typedef struct tp_trace_writer {
  FILE *out;
  int first;  /* 1 until the first value is written */
  int failed; /* a value could not be made or written */
} tp_trace_writer;

/* Dumps value as one line of the array and releases it; a NULL value (a
 * failed allocation) only marks the writer failed. */
void tp_trace_emit(tp_trace_writer *w, json_t *value);

/* A metadata event {"name": what, "ph": "M", "pid", "tid", "args": {arg_key: arg}}
 * (takes arg's reference); NULL when memory runs out. */
json_t *tp_trace_metadata(const char *what, int64_t pid, int64_t tid, const char *arg_key,
                          json_t *arg);

/* A flow event of the Trace Event format: phase 's' (start, bound to the
 * slice enclosing ts on its track) or 'f' (finish, "bp": "e": bound to the
 * slice enclosing ts); NULL when memory runs out. */
json_t *tp_trace_flow(char phase, int64_t id, int64_t pid, int64_t tid, double ts_us,
                      const char *cat);

/* Microseconds of t from the model's time origin. */
double tp_trace_us(const tp_trace_model *m, uint64_t t);

#endif /* TP_TRACE_MODEL_H */
