/*
 * ops_trace.c — the traced window of a configuration (see ops_trace.h).
 *
 * Each rank packs what it saw (events with their names, its overlap rows,
 * its evidence verdict per op and its traced iteration times) into one blob; the
 * blobs are exchanged over the rendezvous (padded to the largest, since an
 * all-gather moves equal sizes) and rank 0 unpacks them into the store's
 * trace record. Names point into the gathered buffer, which the trace owns.
 */
#include "bench/gpu/ops_trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/stats/stats.h"
#include "collectors/tp_nvtx.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device_alloc.h"

/* An odd size nothing else uses: NCCL and cuBLASLt issue small memsets of
 * their own (4 bytes, seen on the H200 pair), which must not be taken for
 * iteration markers. */
enum { MARKER_BYTES = 4099 };

typedef struct wire_event {
  uint64_t start, end, bytes;
  int32_t rank, device, peer;
  uint32_t stream, correlation, name_off;
  uint8_t kind, category, copy_kind, pad[5];
} wire_event;

typedef struct wire_head {
  uint32_t n_events, n_overlap, n_samples, names_bytes;
  int32_t n_ops;
  int32_t op_state[TP_TRACE_MAX_OPS]; /* tp_evidence_state */
  uint64_t dropped;
  char op_message[TP_TRACE_MAX_OPS][TP_TRACE_OP_MSG];
} wire_head;

/* What one rank measured in the window, before packing. */
typedef struct rank_view {
  tp_event *events;
  size_t n_events;
  tp_trace_overlap *overlap;
  size_t n_overlap;
  double *samples;
  int n_samples;
  tp_op_evidence ops[TP_TRACE_MAX_OPS];
  int n_ops;
  uint64_t dropped;
} rank_view;

static int by_start(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Iteration windows from the marker memsets: [marker_i, marker_i+1), the
 * last ending with this rank's last device event. Falls back to one window
 * when the markers are not all there, and says so in note: the evidence is
 * then not checked, with that reason. */
static tp_rc iteration_windows(const tp_event *ev, size_t n, int device, int iters,
                               uint64_t *bounds, int *n_windows, char *note, size_t cap) {
  size_t found = 0;
  uint64_t first = UINT64_MAX, last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (ev[i].device != device || ev[i].type == TP_EV_RANGE) continue;
    if (ev[i].start_ns < first) first = ev[i].start_ns;
    if (ev[i].end_ns > last) last = ev[i].end_ns;
    if (ev[i].type == TP_EV_MEMSET && ev[i].bytes == MARKER_BYTES && found < (size_t)iters)
      bounds[found++] = ev[i].start_ns;
  }
  if (first == UINT64_MAX)
    return TP_FAIL(TP_ECUPTI, "the traced window recorded no device activity");
  if (found != (size_t)iters) {
    snprintf(note, cap,
             "iteration markers: %zu of %d seen (overlap measured over one window), so the "
             "iterations cannot be told apart",
             found, iters);
    bounds[0] = first;
    bounds[1] = last;
    *n_windows = 1;
    return TP_OK;
  }
  qsort(bounds, found, sizeof *bounds, by_start);
  bounds[iters] = last > bounds[iters - 1] ? last : bounds[iters - 1];
  *n_windows = iters;
  return TP_OK;
}

static tp_rc compute_overlap(const tp_event *ev, size_t n, int rank, const uint64_t *bounds,
                             int n_windows, tp_trace_overlap *out) {
  for (int w = 0; w < n_windows; ++w) {
    tp_overlap ov;
    TP_TRY(tp_overlap_compute(ev, n, rank, bounds[w], bounds[w + 1], &ov));
    tp_trace_overlap *o = &out[w];
    memset(o, 0, sizeof *o);
    o->rank = rank;
    o->window = w;
    o->window_start_ns = bounds[w];
    o->window_end_ns = bounds[w + 1];
    o->comm_ns = ov.comm_ns;
    o->compute_ns = ov.compute_ns;
    o->overlap_ns = ov.overlap_ns;
    o->exposed_ns = ov.exposed_comm_ns;
    o->overlap_pct = ov.comm_ns ? ov.overlap_pct : NAN;
    o->sync_ns = ov.sync_ns;
  }
  return TP_OK;
}

/* The NVTX range prefix of an op: its tp_linear kind. The layers record
 * their projections by name (bench/gpu/block.c, tp_block_proj_desc: qkv is an
 * all-gather linear, w13 the two-weight one, wo and w2 reduce-scatter
 * ones); `ops` records the kind itself. */
static const char *range_kind(const char *op) {
  static const char *const by_proj[][2] = {
      {"qkv", "ag_linear"}, {"w13", "ag_linear_multi"}, {"wo", "linear_rs"}, {"w2", "linear_rs"}};
  for (size_t i = 0; i < sizeof by_proj / sizeof by_proj[0]; ++i)
    if (strcmp(op, by_proj[i][0]) == 0) return by_proj[i][1];
  return op;
}

/* What an op's trace must show: "none" for the GEMM alone, else its schedule. */
static const char *evidence_schedule(const tp_schedule_choice *c) {
  if (c->engine && strcmp(c->engine, "cublaslt") == 0) return "none";
  return c->schedule;
}

/* Range names of the ops, kept alive while they are judged. */
typedef struct op_names {
  char prefix[TP_TRACE_MAX_OPS][64], suffix[TP_TRACE_MAX_OPS][48];
} op_names;

/* Judges every op of the configuration on this rank (tp_ops_evidence). */
/* shared_push: where the ranks share one GPU, the stream their pushes run on
 * (tp_evidence_window.shared_device); NULL on a real host. */
static tp_rc judge_ops(const tp_ops_trace *t, void *shared_push, const tp_event *ev, size_t n,
                       uint64_t ws, uint64_t we, const char *not_checked, rank_view *v) {
  op_names names;
  tp_op_evidence ops[TP_TRACE_MAX_OPS];
  int judged[TP_TRACE_MAX_OPS], n_judged = 0;
  v->n_ops = t->n_ops < TP_TRACE_MAX_OPS ? t->n_ops : TP_TRACE_MAX_OPS;
  for (int i = 0; i < v->n_ops; ++i) {
    const tp_schedule_choice *c = &t->ops[i];
    tp_op_evidence *o = &v->ops[i];
    memset(o, 0, sizeof *o);
    o->op = c->op;
    o->schedule = evidence_schedule(c);
    o->state = TP_EVIDENCE_NOT_CHECKED;
    /* the schedules with a rule are the evidence table's (collectors/evidence.c), so a new
     * schedule's fingerprint there is all it takes to have its ops judged */
    if (!tp_ops_evidence_knows(o->schedule)) {
      snprintf(o->message, sizeof o->message, "%s: no rule for schedule %s", c->op, o->schedule);
      continue;
    }
    snprintf(names.prefix[i], sizeof names.prefix[i], "%s.", range_kind(c->op));
    snprintf(names.suffix[i], sizeof names.suffix[i], " %s x%d", c->schedule, c->chunks);
    ops[n_judged] = *o;
    ops[n_judged].range_prefix = names.prefix[i];
    ops[n_judged].range_suffix = names.suffix[i];
    judged[n_judged++] = i;
  }
  tp_evidence_window w = {ws, we, t->iters, t->transfers_per_iter, not_checked, 0, 0};
  if (shared_push) {
    w.shared_device = 1;
    TP_TRY(tp_collector_stream_id(shared_push, &w.push_stream));
  }
  tp_evidence_state overall;
  TP_TRY(tp_ops_evidence(ev, n, &w, ops, (size_t)n_judged, &overall));
  for (int k = 0; k < n_judged; ++k) v->ops[judged[k]] = ops[k];
  return TP_OK;
}

/* The traced iterations themselves, with a marker memset opening each. */
static tp_rc run_traced(tp_worker_ctx *ctx, tp_collector *c, tp_trace_step_fn step, void *step_ctx,
                        int iters, void *marker, cudaEvent_t *marks, tp_event **events, size_t *n,
                        uint64_t *dropped) {
  tp_group *g = ctx->group;
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  TP_TRY(tp_rdzv_barrier(ctx->rdzv));
  TP_TRY(tp_collector_window_begin(c));
  TP_CUDA(cudaEventRecord(marks[0], g->main_stream));
  for (int i = 0; i < iters; ++i) {
    tp_nvtx_push("iteration");
    TP_CUDA(cudaMemsetAsync(marker, 0, MARKER_BYTES, g->main_stream));
    tp_rc rc = step(step_ctx);
    tp_nvtx_pop();
    TP_TRY(rc);
    TP_CUDA(cudaEventRecord(marks[i + 1], g->main_stream));
  }
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  tp_rc rc = tp_collector_window_end(c, events, n);
  tp_collector_stats stats;
  tp_collector_get_stats(c, &stats);
  *dropped = stats.dropped_window;
  /* Dropped records still hand the events over; the count is stored. */
  return rc == TP_ECUPTI && *events ? TP_OK : rc;
}

static tp_rc observe(tp_worker_ctx *ctx, tp_collector *c, tp_trace_step_fn step, void *step_ctx,
                     const tp_ops_trace *t, rank_view *v) {
  tp_group *g = ctx->group;
  void *marker = NULL;
  cudaEvent_t *marks = calloc((size_t)t->iters + 1, sizeof(cudaEvent_t));
  uint64_t *bounds = calloc((size_t)t->iters + 1, sizeof(uint64_t));
  v->samples = calloc((size_t)t->iters, sizeof(double));
  v->overlap = calloc((size_t)t->iters, sizeof(tp_trace_overlap));
  if (!marks || !bounds || !v->samples || !v->overlap) {
    free(marks);
    free(bounds);
    return TP_FAIL(TP_EOOM, "no host memory for the traced window");
  }
  tp_rc rc = tp_device_malloc_as(TP_ALLOC_OWNER(TP_ALLOC_HARNESS, 0), &marker, MARKER_BYTES);
  for (int i = 0; rc == TP_OK && i <= t->iters; ++i)
    if (cudaEventCreate(&marks[i]) != cudaSuccess) rc = TP_FAIL(TP_ECUDA, "cudaEventCreate");
  if (rc == TP_OK)
    rc = run_traced(ctx, c, step, step_ctx, t->iters, marker, marks, &v->events, &v->n_events,
                    &v->dropped);
  for (int i = 0; rc == TP_OK && i < t->iters; ++i) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, marks[i], marks[i + 1]) != cudaSuccess)
      rc = TP_FAIL(TP_ECUDA, "cudaEventElapsedTime");
    v->samples[i] = 1000.0 * (double)ms;
  }
  v->n_samples = t->iters;
  int n_windows = 0;
  char note[160] = "";
  if (rc == TP_OK)
    rc = iteration_windows(v->events, v->n_events, g->device, t->iters, bounds, &n_windows, note,
                           sizeof note);
  if (rc == TP_OK)
    rc = compute_overlap(v->events, v->n_events, g->rank, bounds, n_windows, v->overlap);
  v->n_overlap = rc == TP_OK ? (size_t)n_windows : 0;
  if (rc == TP_OK) {
    uint64_t ws = 0, we = 0;
    tp_collector_window_bounds(c, &ws, &we);
    char dropped[96];
    snprintf(dropped, sizeof dropped, "CUPTI dropped %llu records in the window",
             (unsigned long long)v->dropped);
    /* One rank has no peer: NCCL's one-rank collectives are local copies, so no
     * schedule has anything to show. */
    const char *single = "TP 1: a one-rank collective is a local copy; no schedule to confirm";
    const char *not_checked = ctx->world == 1 ? single
                              : v->dropped    ? dropped
                              : note[0]       ? note
                                              : NULL;
    /* every op pushes on the worker group's transfer stream (a split group shares it) */
    rc = judge_ops(t, tp_worker_share_one_gpu() ? (void *)g->comm_stream : NULL, v->events,
                   v->n_events, ws, we, not_checked, v);
  }
  for (int i = 0; i <= t->iters; ++i)
    if (marks[i]) cudaEventDestroy(marks[i]);
  free(marks);
  free(bounds);
  tp_device_release(marker);
  return rc;
}

/* ---- packing ------------------------------------------------------------------- */

static size_t blob_size(const wire_head *h) {
  return sizeof *h + h->n_events * sizeof(wire_event) + h->n_overlap * sizeof(tp_trace_overlap) +
         h->n_samples * sizeof(double) + h->names_bytes;
}

static unsigned char *pack(const rank_view *v, size_t *size) {
  wire_head h;
  memset(&h, 0, sizeof h);
  h.n_events = (uint32_t)v->n_events;
  h.n_overlap = (uint32_t)v->n_overlap;
  h.n_samples = (uint32_t)v->n_samples;
  h.n_ops = v->n_ops;
  for (int i = 0; i < v->n_ops; ++i) {
    h.op_state[i] = (int32_t)v->ops[i].state;
    snprintf(h.op_message[i], sizeof h.op_message[i], "%s", v->ops[i].message);
  }
  h.dropped = v->dropped;
  for (size_t i = 0; i < v->n_events; ++i) h.names_bytes += (uint32_t)strlen(v->events[i].name) + 1;
  *size = blob_size(&h);
  unsigned char *blob = calloc(1, *size);
  if (!blob) return NULL;
  unsigned char *p = blob;
  memcpy(p, &h, sizeof h);
  p += sizeof h;
  wire_event *we = (wire_event *)p;
  char *names = (char *)(p + h.n_events * sizeof(wire_event) +
                         h.n_overlap * sizeof(tp_trace_overlap) + h.n_samples * sizeof(double));
  uint32_t off = 0;
  for (size_t i = 0; i < v->n_events; ++i) {
    const tp_event *e = &v->events[i];
    wire_event w = {e->start_ns,
                    e->end_ns,
                    e->bytes,
                    e->rank,
                    e->device,
                    e->peer_device,
                    e->stream,
                    e->correlation,
                    off,
                    (uint8_t)e->type,
                    (uint8_t)e->category,
                    (uint8_t)e->copy_kind,
                    {0}};
    memcpy(&we[i], &w, sizeof w);
    size_t len = strlen(e->name) + 1;
    memcpy(names + off, e->name, len);
    off += (uint32_t)len;
  }
  p += h.n_events * sizeof(wire_event);
  memcpy(p, v->overlap, h.n_overlap * sizeof(tp_trace_overlap));
  p += h.n_overlap * sizeof(tp_trace_overlap);
  memcpy(p, v->samples, h.n_samples * sizeof(double));
  return blob;
}

/* ---- evidence over ranks ------------------------------------------------------------ */

/* The state a merged verdict holds ("ok", "failed", "not checked"). */
static tp_evidence_state state_of(const char *word) {
  if (word && strcmp(word, "ok") == 0) return TP_EVIDENCE_OK;
  if (word && strcmp(word, "failed") == 0) return TP_EVIDENCE_FAILED;
  return TP_EVIDENCE_NOT_CHECKED;
}

static int n_ops_of(const tp_ops_trace *t) {
  return t->n_ops < TP_TRACE_MAX_OPS ? t->n_ops : TP_TRACE_MAX_OPS;
}

static void merge_ops_begin(tp_ops_trace *t) {
  for (int i = 0; i < n_ops_of(t); ++i) {
    t->op_evidence[i] = (tp_trace_op_evidence){i, NULL, t->op_messages[i]};
    t->op_messages[i][0] = '\0';
  }
}

/* Rank r's verdicts: an op takes the worst state over the ranks, and the
 * message of the first rank that reported it. A rank that judged fewer ops
 * than recorded leaves the rest not checked. */
static void merge_ops_rank(tp_ops_trace *t, const wire_head *h, int r) {
  for (int i = 0; i < n_ops_of(t); ++i) {
    tp_evidence_state mine =
        i < h->n_ops ? (tp_evidence_state)h->op_state[i] : TP_EVIDENCE_NOT_CHECKED;
    const char *why = i < h->n_ops ? h->op_message[i] : "not judged on this rank";
    tp_evidence_state was = r == 0 ? TP_EVIDENCE_OK : state_of(t->op_evidence[i].evidence);
    tp_evidence_state now = tp_evidence_combine(was, mine);
    if (r == 0 || now != was)
      snprintf(t->op_messages[i], sizeof t->op_messages[i], "rank %d: %s", r, why);
    t->op_evidence[i].evidence = tp_evidence_state_name(now);
  }
}

/* The configuration's evidence: the worst of its ops', with the messages of
 * the ops that decide it (all of them when it is ok). */
static void merge_ops_end(tp_ops_trace *t, tp_trace_record *rec) {
  tp_evidence_state all = n_ops_of(t) ? TP_EVIDENCE_OK : TP_EVIDENCE_NOT_CHECKED;
  for (int i = 0; i < n_ops_of(t); ++i)
    all = tp_evidence_combine(all, state_of(t->op_evidence[i].evidence));
  size_t used = 0;
  t->evidence[0] = '\0';
  for (int i = 0; i < n_ops_of(t); ++i) {
    if (state_of(t->op_evidence[i].evidence) != all) continue;
    int n = snprintf(t->evidence + used, sizeof t->evidence - used, "%s%s", used ? " | " : "",
                     t->op_messages[i]);
    if (n > 0 && used + (size_t)n < sizeof t->evidence) used += (size_t)n;
  }
  if (n_ops_of(t) == 0)
    snprintf(t->evidence, sizeof t->evidence, "no op of this configuration was recorded");
  rec->evidence = tp_evidence_state_name(all);
  rec->evidence_ok = all == TP_EVIDENCE_OK;
  rec->evidence_message = t->evidence;
  rec->op_evidence = t->op_evidence;
  rec->n_op_evidence = (size_t)n_ops_of(t);
}

/* Unpacks every rank's blob into the trace record (rank 0). */
static tp_rc unpack_all(tp_ops_trace *t, const unsigned char *all, size_t stride, int world) {
  size_t n_events = 0, n_overlap = 0;
  for (int r = 0; r < world; ++r) {
    const wire_head *h = (const wire_head *)(all + (size_t)r * stride);
    n_events += h->n_events;
    n_overlap += h->n_overlap;
  }
  t->events = calloc(n_events ? n_events : 1, sizeof *t->events);
  t->overlap = calloc(n_overlap ? n_overlap : 1, sizeof *t->overlap);
  double *slowest = calloc((size_t)t->iters, sizeof(double));
  if (!t->events || !t->overlap || !slowest) {
    free(slowest);
    return TP_FAIL(TP_EOOM, "no host memory for the gathered trace");
  }
  size_t ei = 0, oi = 0;
  uint64_t dropped = 0;
  merge_ops_begin(t);
  for (int r = 0; r < world; ++r) {
    const unsigned char *p = all + (size_t)r * stride;
    wire_head h;
    memcpy(&h, p, sizeof h);
    const wire_event *we = (const wire_event *)(p + sizeof h);
    const unsigned char *ov = p + sizeof h + h.n_events * sizeof(wire_event);
    const double *samples = (const double *)(ov + h.n_overlap * sizeof(tp_trace_overlap));
    const char *names = (const char *)(samples + h.n_samples);
    for (uint32_t i = 0; i < h.n_events; ++i) {
      wire_event w;
      memcpy(&w, &we[i], sizeof w);
      tp_trace_event *e = &t->events[ei++];
      e->name = names + w.name_off;
      e->kind = tp_event_type_name((tp_event_type)w.kind);
      e->category = tp_category_name((tp_event_category)w.category);
      e->copy_kind = tp_copy_kind_name((tp_copy_kind)w.copy_kind);
      e->start_ns = w.start;
      e->end_ns = w.end;
      e->bytes = w.bytes;
      e->rank = w.rank;
      e->device = w.device;
      e->stream = w.stream;
      e->correlation = w.correlation;
      e->peer_device = w.peer;
    }
    memcpy(&t->overlap[oi], ov, h.n_overlap * sizeof(tp_trace_overlap));
    oi += h.n_overlap;
    for (uint32_t i = 0; i < h.n_samples && i < (uint32_t)t->iters; ++i)
      slowest[i] = fmax(slowest[i], samples[i]);
    dropped += h.dropped;
    merge_ops_rank(t, &h, r);
  }
  tp_stats st;
  tp_rc rc = tp_stats_compute(slowest, t->iters, &st);
  free(slowest);
  TP_TRY(rc);
  tp_trace_record *rec = &t->record;
  memset(rec, 0, sizeof *rec);
  rec->events = t->events;
  rec->n_events = ei;
  rec->overlap = t->overlap;
  rec->n_overlap = oi;
  rec->traced_iters = t->iters;
  rec->traced_median_us = st.median;
  rec->untraced_median_us = t->untraced_median_us;
  rec->dropped_records = dropped;
  merge_ops_end(t, rec);
  return TP_OK;
}

static tp_rc exchange(tp_worker_ctx *ctx, const unsigned char *blob, size_t size,
                      unsigned char **all, size_t *stride) {
  uint64_t mine = size, sizes[TP_MAX_WORLD];
  TP_TRY(tp_rdzv_allgather(ctx->rdzv, &mine, sizeof mine, sizes));
  uint64_t max = sizeof(wire_head); /* every blob holds at least its header */
  for (int r = 0; r < ctx->world; ++r) max = sizes[r] > max ? sizes[r] : max;
  unsigned char *padded = calloc(1, (size_t)max);
  *all = calloc((size_t)ctx->world, (size_t)max);
  if (!padded || !*all) {
    free(padded);
    return TP_FAIL(TP_EOOM, "no host memory to exchange traces (%llu bytes per rank)",
                   (unsigned long long)max);
  }
  if (blob && size) memcpy(padded, blob, size);
  tp_rc rc = tp_rdzv_allgather(ctx->rdzv, padded, (size_t)max, *all);
  free(padded);
  *stride = (size_t)max;
  return rc;
}

tp_rc tp_ops_trace_window(tp_worker_ctx *ctx, tp_collector *collector, tp_trace_step_fn step,
                          void *step_ctx, tp_ops_trace *t) {
  rank_view v;
  memset(&v, 0, sizeof v);
  tp_rc local = observe(ctx, collector, step, step_ctx, t, &v);
  size_t size = 0;
  unsigned char *blob = local == TP_OK ? pack(&v, &size) : NULL;
  if (local == TP_OK && !blob) local = TP_FAIL(TP_EOOM, "no host memory to pack the trace");
  free(v.samples);
  free(v.overlap);
  /* Ranks agree on success before exchanging: a failed rank sends nothing. */
  int32_t ok = local == TP_OK, oks[TP_MAX_WORLD];
  tp_rc rc = tp_rdzv_allgather(ctx->rdzv, &ok, sizeof ok, oks);
  for (int r = 0; rc == TP_OK && r < ctx->world; ++r)
    if (!oks[r]) rc = r == ctx->rank ? local : TP_FAIL(TP_ECUPTI, "rank %d could not trace", r);
  unsigned char *all = NULL;
  size_t stride = 0;
  if (rc == TP_OK) rc = exchange(ctx, blob, size, &all, &stride);
  free(blob);
  if (rc == TP_OK && ctx->rank == 0) rc = unpack_all(t, all, stride, ctx->world);
  if (ctx->rank == 0 && rc == TP_OK) t->names = (char *)all; /* the events' names point into it */
  else free(all);
  return rc;
}

void tp_ops_trace_free(tp_ops_trace *t) {
  free(t->events);
  free(t->overlap);
  free(t->names);
  t->events = NULL;
  t->overlap = NULL;
  t->names = NULL;
}
