/*
 * tp_trace_model.c — a configuration's trace in memory, laid out for the
 * exporters: tracks that nest, launch bounds, NVTX ranges projected onto
 * the GPU (tp_trace_model.h says how and why).
 *
 * The events of one configuration are a few thousand (a traced window is a
 * handful of iterations), so they are read whole, sorted, and then walked
 * per rank: launch bounds by correlation order, ranges as a forest by
 * containment, lanes by a stack of open ends per lane.
 */
#include "report/tp_trace_model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/tp_report_util.h"

/* Microseconds with nanosecond resolution print cleanly at 15 digits. */
#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "trace export: out of memory"); }

int tp_trace_is_device_work(const tp_trace_event *e) {
  return !strcmp(e->kind, "kernel") || !strcmp(e->kind, "memcpy") || !strcmp(e->kind, "memset");
}

static int is_range(const tp_trace_event *e) { return !strcmp(e->kind, "range"); }
static int is_sync(const tp_trace_event *e) { return !strcmp(e->kind, "sync"); }

/* ---- reading ---------------------------------------------------------------------- */

typedef struct {
  tp_trace_slice *v;
  size_t n, cap;
} slice_vec;

static tp_rc push_slice(slice_vec *sv, const tp_trace_slice *s) {
  if (sv->n == sv->cap) {
    size_t cap = sv->cap ? 2 * sv->cap : 1024;
    tp_trace_slice *grown = realloc(sv->v, cap * sizeof *grown);
    if (!grown) return out_of_memory();
    sv->v = grown;
    sv->cap = cap;
  }
  sv->v[sv->n++] = *s;
  return TP_OK;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static tp_rc keep_event(void *ctx, const tp_trace_event *e) {
  slice_vec *sv = ctx;
  tp_trace_slice s = {.ev = *e, .range = -1};
  s.ev.name = dup_or_null(e->name);
  s.ev.kind = dup_or_null(e->kind);
  s.ev.category = dup_or_null(e->category);
  s.ev.copy_kind = dup_or_null(e->copy_kind);
  if (!s.ev.name || !s.ev.kind || !s.ev.category || (e->copy_kind && !s.ev.copy_kind)) {
    free((char *)s.ev.name);
    free((char *)s.ev.kind);
    free((char *)s.ev.category);
    free((char *)s.ev.copy_kind);
    return out_of_memory();
  }
  tp_rc rc = push_slice(sv, &s);
  if (rc != TP_OK) {
    free((char *)s.ev.name);
    free((char *)s.ev.kind);
    free((char *)s.ev.category);
    free((char *)s.ev.copy_kind);
  }
  return rc;
}

/* Rank, then start, then the longer first, so a container precedes what it holds. */
static int by_rank_start(const void *pa, const void *pb) {
  const tp_trace_event *a = &((const tp_trace_slice *)pa)->ev;
  const tp_trace_event *b = &((const tp_trace_slice *)pb)->ev;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns ? -1 : 1;
  if (a->end_ns != b->end_ns) return a->end_ns > b->end_ns ? -1 : 1;
  return 0;
}

/* ---- launch bounds ------------------------------------------------------------------ */

typedef struct {
  uint32_t correlation;
  size_t slice;
} corr_ref;

static int by_correlation(const void *pa, const void *pb) {
  const corr_ref *a = pa, *b = pb;
  if (a->correlation != b->correlation) return a->correlation < b->correlation ? -1 : 1;
  return (a->slice > b->slice) - (a->slice < b->slice);
}

/* Bounds the launch of every device event of slices [lo, hi) (one rank) by
 * the host-timed synchronisation records and the GPU starts on the same
 * correlation counter (tp_trace_model.h). first_range: the rank's first
 * NVTX range start, the lower bound where no record precedes. */
static tp_rc bound_launches(tp_trace_slice *s, size_t lo, size_t hi, uint64_t first_range) {
  corr_ref *refs = malloc((hi - lo + 1) * sizeof *refs);
  if (!refs) return out_of_memory();
  size_t n = 0;
  for (size_t i = lo; i < hi; i++)
    if (s[i].ev.correlation > 0 && (tp_trace_is_device_work(&s[i].ev) || is_sync(&s[i].ev)))
      refs[n++] = (corr_ref){s[i].ev.correlation, i};
  qsort(refs, n, sizeof *refs, by_correlation);
  uint64_t later = UINT64_MAX; /* min start of what was launched at or after this one */
  for (size_t k = n; k-- > 0;) {
    tp_trace_slice *e = &s[refs[k].slice];
    if (e->ev.start_ns < later) later = e->ev.start_ns;
    if (tp_trace_is_device_work(&e->ev)) e->launch_hi = later;
  }
  uint64_t earlier = first_range; /* latest start of a host API call before this one */
  int any = 0;
  for (size_t k = 0; k < n; k++) {
    tp_trace_slice *e = &s[refs[k].slice];
    if (is_sync(&e->ev)) {
      if (!any || e->ev.start_ns > earlier) earlier = e->ev.start_ns;
      any = 1;
      continue;
    }
    e->launch_lo = earlier < e->launch_hi ? earlier : e->launch_hi;
  }
  free(refs);
  return TP_OK;
}

/* ---- ranges: forest, attribution, projection ----------------------------------------- */

typedef struct {
  long *parent, *first_child, *next_sibling, *last_child;
  long root_first, root_last;
} forest;

static void adopt(forest *f, long parent, long child) {
  long *first = parent < 0 ? &f->root_first : &f->first_child[parent];
  long *last = parent < 0 ? &f->root_last : &f->last_child[parent];
  f->parent[child] = parent;
  if (*last < 0) *first = child;
  else f->next_sibling[*last] = child;
  *last = child;
}

static int contains(const tp_trace_event *outer, const tp_trace_event *inner) {
  return outer->start_ns <= inner->start_ns && inner->end_ns <= outer->end_ns;
}

/* Ranges of slices [lo, hi) into a forest by containment (each range's
 * parent: the innermost earlier range that contains it). */
static void build_forest(const tp_trace_slice *s, size_t lo, size_t hi, forest *f, long *stack) {
  size_t depth = 0;
  f->root_first = f->root_last = -1;
  for (size_t i = lo; i < hi; i++) {
    if (!is_range(&s[i].ev)) continue;
    while (depth > 0 && !contains(&s[stack[depth - 1]].ev, &s[i].ev)) depth--;
    adopt(f, depth > 0 ? stack[depth - 1] : -1, (long)i);
    stack[depth++] = (long)i;
  }
}

/* How much of [lo, hi] lies in [start, end); a point counts 1 when inside. */
static int64_t share(uint64_t lo, uint64_t hi, uint64_t start, uint64_t end) {
  if (lo == hi) return start <= lo && lo < end ? 1 : 0;
  uint64_t a = lo > start ? lo : start, b = hi < end ? hi : end;
  return b > a ? (int64_t)(b - a) : 0;
}

/* The range given the launch interval [lo, hi]: level by level, the child
 * holding the largest share, while it holds more than the part outside
 * every child. -1: no range. */
static long home_range(const tp_trace_slice *s, const forest *f, uint64_t lo, uint64_t hi) {
  long home = -1;
  for (long child = f->root_first; child >= 0;) {
    int64_t len = lo == hi ? 1 : (int64_t)(hi - lo), inside = 0, best_share = 0;
    long best = -1;
    for (long c = child; c >= 0; c = f->next_sibling[c]) {
      int64_t part = share(lo, hi, s[c].ev.start_ns, s[c].ev.end_ns);
      inside += part;
      if (part > best_share) {
        best_share = part;
        best = c;
      }
    }
    if (best < 0 || best_share < len - inside) break;
    home = best;
    if (lo < s[best].ev.start_ns) lo = s[best].ev.start_ns;
    if (hi > s[best].ev.end_ns) hi = s[best].ev.end_ns;
    if (hi < lo) hi = lo;
    child = f->first_child[best];
  }
  return home;
}

/* Gives each device event of one rank its range and widens that range's and
 * its ancestors' projected span. */
static void attribute(tp_trace_slice *s, size_t lo, size_t hi, const forest *f, uint64_t *p_start,
                      uint64_t *p_end, size_t *n_launched) {
  for (size_t i = lo; i < hi; i++) {
    if (!tp_trace_is_device_work(&s[i].ev) || s[i].ev.correlation == 0) continue;
    long home = home_range(s, f, s[i].launch_lo, s[i].launch_hi);
    s[i].range = home;
    if (home >= 0) ++*n_launched;
    for (long r = home; r >= 0; r = f->parent[r]) {
      if (s[i].ev.start_ns < p_start[r]) p_start[r] = s[i].ev.start_ns;
      if (s[i].ev.end_ns > p_end[r]) p_end[r] = s[i].ev.end_ns;
    }
  }
}

/* ---- lanes ------------------------------------------------------------------------------- */

typedef struct {
  uint64_t *ends; /* the open slices' ends, outermost first */
  size_t depth, cap;
} lane_stack;

typedef struct {
  int rank;
  uint32_t stream;
  tp_track_class cls;
  lane_stack *lanes;
  int n_lanes;
} lane_group;

typedef struct {
  lane_group *g;
  size_t n, cap;
} group_set;

static tp_rc find_group(group_set *gs, int rank, uint32_t stream, tp_track_class cls,
                        lane_group **out) {
  for (size_t i = 0; i < gs->n; i++) {
    if (gs->g[i].rank == rank && gs->g[i].stream == stream && gs->g[i].cls == cls) {
      *out = &gs->g[i];
      return TP_OK;
    }
  }
  if (gs->n == gs->cap) {
    size_t cap = gs->cap ? 2 * gs->cap : 32;
    lane_group *grown = realloc(gs->g, cap * sizeof *grown);
    if (!grown) return out_of_memory();
    gs->g = grown;
    gs->cap = cap;
  }
  gs->g[gs->n] = (lane_group){.rank = rank, .stream = stream, .cls = cls};
  *out = &gs->g[gs->n++];
  return TP_OK;
}

/* Places [start, end) on the first lane where it nests in or follows what is
 * open; *lane_out its index. */
static tp_rc place(lane_group *g, uint64_t start, uint64_t end, int *lane_out) {
  for (int k = 0;; k++) {
    if (k == g->n_lanes) {
      lane_stack *grown = realloc(g->lanes, (size_t)(k + 1) * sizeof *grown);
      if (!grown) return out_of_memory();
      g->lanes = grown;
      g->lanes[k] = (lane_stack){0};
      g->n_lanes = k + 1;
    }
    lane_stack *l = &g->lanes[k];
    while (l->depth > 0 && l->ends[l->depth - 1] <= start) l->depth--;
    if (l->depth > 0 && l->ends[l->depth - 1] < end) continue;
    if (l->depth == l->cap) {
      size_t cap = l->cap ? 2 * l->cap : 8;
      uint64_t *grown = realloc(l->ends, cap * sizeof *grown);
      if (!grown) return out_of_memory();
      l->ends = grown;
      l->cap = cap;
    }
    l->ends[l->depth++] = end;
    *lane_out = k;
    return TP_OK;
  }
}

static tp_track_class class_of(const tp_trace_slice *s) {
  if (s->projected) return TP_TRACK_NVTX_GPU;
  if (is_range(&s->ev)) return TP_TRACK_NVTX_CPU;
  if (s->ev.stream == TP_TRACE_NO_STREAM) return TP_TRACK_NO_STREAM;
  if (is_sync(&s->ev)) return TP_TRACK_SYNC;
  if (!strcmp(s->ev.kind, "kernel")) return TP_TRACK_KERNEL;
  return TP_TRACK_COPY;
}

static uint32_t stream_of(const tp_trace_slice *s) {
  tp_track_class c = class_of(s);
  return c == TP_TRACK_NVTX_CPU || c == TP_TRACK_NVTX_GPU ? TP_TRACE_NO_STREAM : s->ev.stream;
}

/* Lane of every slice; then tracks[] holds one entry per (group, lane) and
 * each slice's track index. Groups are numbered in the order first seen. */
static tp_rc assign_lanes(tp_trace_model *m, group_set *gs, int *lanes, size_t *group_of) {
  for (size_t i = 0; i < m->n_slices; i++) {
    const tp_trace_slice *s = &m->slices[i];
    lane_group *g = NULL;
    TP_TRY(find_group(gs, s->ev.rank, stream_of(s), class_of(s), &g));
    TP_TRY(place(g, s->ev.start_ns, s->ev.end_ns, &lanes[i]));
    group_of[i] = (size_t)(g - gs->g);
    if (lanes[i] > 0) m->n_overflow++;
  }
  return TP_OK;
}

/* ---- tracks --------------------------------------------------------------------------- */

static int64_t class_order(tp_track_class c) {
  switch (c) {
  case TP_TRACK_NVTX_CPU: return 0;
  case TP_TRACK_NVTX_GPU: return 1;
  case TP_TRACK_KERNEL: return 2;
  case TP_TRACK_COPY: return 3;
  case TP_TRACK_SYNC: return 4;
  case TP_TRACK_NO_STREAM: return 5;
  }
  return 6;
}

static int by_track_order(const void *pa, const void *pb) {
  const tp_trace_track *a = pa, *b = pb;
  if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
  if (a->sort != b->sort) return a->sort < b->sort ? -1 : 1;
  return 0;
}

static void name_track(tp_trace_track *t) {
  static const char *const suffix[] = {"", " copies", " sync"};
  char base[48];
  switch (t->cls) {
  case TP_TRACK_NVTX_CPU: snprintf(base, sizeof base, "NVTX"); break;
  case TP_TRACK_NVTX_GPU: snprintf(base, sizeof base, "NVTX (GPU)"); break;
  case TP_TRACK_NO_STREAM: snprintf(base, sizeof base, "no stream"); break;
  default: snprintf(base, sizeof base, "stream %" PRIu32 "%s", t->stream, suffix[t->cls]); break;
  }
  if (t->lane == 0) snprintf(t->name, sizeof t->name, "%s", base);
  else snprintf(t->name, sizeof t->name, "%s (%d)", base, t->lane + 1);
}

/* The older layout's ids where they exist (tp_trace_model_load). */
static int64_t fixed_tid(const tp_trace_model *m, const tp_trace_track *t) {
  if (t->lane != 0) return -1;
  if (t->cls == TP_TRACK_KERNEL) return t->stream;
  if (t->cls == TP_TRACK_NVTX_CPU) return m->max_stream + 1;
  if (t->cls == TP_TRACK_NO_STREAM) return m->max_stream + 2;
  return -1;
}

/* Per rank, the largest device ordinal its events name; ranks in increasing
 * order. Ranks are whatever the events say (-1 for a profiled launcher's own
 * process, up to INT_MAX in a hand-made file), so they are looked up, never
 * used as indices. */
typedef struct rank_device {
  int rank, device;
} rank_device;

typedef struct rank_devices {
  rank_device *v;
  size_t n;
} rank_devices;

/* The rank's device ordinal; -1 for a rank without events. */
static int device_of_rank(const rank_devices *rd, int rank) {
  size_t lo = 0, hi = rd->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (rd->v[mid].rank == rank) return rd->v[mid].device;
    if (rd->v[mid].rank < rank) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

static tp_rc make_tracks(tp_trace_model *m, const group_set *gs, const rank_devices *rd) {
  size_t n = 0;
  for (size_t g = 0; g < gs->n; g++) n += (size_t)gs->g[g].n_lanes;
  m->tracks = calloc(n ? n : 1, sizeof *m->tracks);
  if (!m->tracks) return out_of_memory();
  for (size_t g = 0; g < gs->n; g++) {
    for (int k = 0; k < gs->g[g].n_lanes; k++) {
      tp_trace_track *t = &m->tracks[m->n_tracks++];
      t->rank = gs->g[g].rank;
      t->stream = gs->g[g].stream;
      t->cls = gs->g[g].cls;
      t->lane = k;
      t->device = device_of_rank(rd, t->rank);
      int64_t stream_rank = t->stream == TP_TRACE_NO_STREAM ? 0 : (int64_t)t->stream + 1;
      if (t->cls == TP_TRACK_NO_STREAM) stream_rank = (int64_t)UINT32_MAX + 2;
      int64_t lane_rank = k < 15 ? k : 15;
      t->sort = t->cls == TP_TRACK_NVTX_CPU || t->cls == TP_TRACK_NVTX_GPU
                    ? -64 + class_order(t->cls) * 16 + lane_rank
                    : stream_rank * 64 + class_order(t->cls) * 16 + lane_rank;
      name_track(t);
    }
  }
  return TP_OK;
}

/* tids: the fixed ones, then max_stream + 3 onwards per rank in track order. */
static void number_tracks(tp_trace_model *m) {
  qsort(m->tracks, m->n_tracks, sizeof *m->tracks, by_track_order);
  int64_t next = m->max_stream + 3;
  for (size_t i = 0; i < m->n_tracks; i++) {
    if (i > 0 && m->tracks[i].rank != m->tracks[i - 1].rank) next = m->max_stream + 3;
    int64_t fixed = fixed_tid(m, &m->tracks[i]);
    m->tracks[i].tid = fixed >= 0 ? fixed : next++;
  }
}

static size_t track_index(const tp_trace_model *m, int rank, uint32_t stream, tp_track_class cls,
                          int lane) {
  for (size_t i = 0; i < m->n_tracks; i++) {
    const tp_trace_track *t = &m->tracks[i];
    if (t->rank == rank && t->stream == stream && t->cls == cls && t->lane == lane) return i;
  }
  return 0; /* unreachable: every (group, lane) has its track */
}

/* ---- projections ------------------------------------------------------------------------ */

static tp_rc add_projections(tp_trace_model *m, slice_vec *sv, const uint64_t *p_start,
                             const uint64_t *p_end, const rank_devices *rd) {
  size_t n_stored = sv->n;
  for (size_t i = 0; i < n_stored; i++) {
    if (!is_range(&sv->v[i].ev) || p_start[i] == UINT64_MAX) continue;
    tp_trace_slice p = sv->v[i];
    p.projected = 1;
    p.range = (long)i;
    p.ev.start_ns = p_start[i];
    p.ev.end_ns = p_end[i];
    p.ev.device = device_of_rank(rd, p.ev.rank);
    TP_TRY(push_slice(sv, &p));
  }
  /* projections in (rank, start, longer first) order, after the stored events */
  qsort(sv->v + n_stored, sv->n - n_stored, sizeof *sv->v, by_rank_start);
  m->slices = sv->v;
  m->n_slices = sv->n;
  return TP_OK;
}

/* ---- loading ------------------------------------------------------------------------------ */

typedef struct {
  forest f;
  long *stack;
  uint64_t *p_start, *p_end;
  int *lanes;
  size_t *group_of;
  rank_devices ranks;
} scratch;

static void free_scratch(scratch *w) {
  free(w->f.parent);
  free(w->f.first_child);
  free(w->f.next_sibling);
  free(w->f.last_child);
  free(w->stack);
  free(w->p_start);
  free(w->p_end);
  free(w->lanes);
  free(w->group_of);
  free(w->ranks.v);
}

static tp_rc alloc_scratch(scratch *w, const slice_vec *sv) {
  size_t n = sv->n ? sv->n : 1;
  w->f.parent = malloc(n * sizeof(long));
  w->f.first_child = malloc(n * sizeof(long));
  w->f.next_sibling = malloc(n * sizeof(long));
  w->f.last_child = malloc(n * sizeof(long));
  w->stack = malloc(n * sizeof(long));
  w->p_start = malloc(n * sizeof(uint64_t));
  w->p_end = calloc(n, sizeof(uint64_t));
  w->ranks.v = malloc(n * sizeof *w->ranks.v); /* at most one rank per event */
  if (!w->f.parent || !w->f.first_child || !w->f.next_sibling || !w->f.last_child || !w->stack ||
      !w->p_start || !w->p_end || !w->ranks.v)
    return out_of_memory();
  for (size_t i = 0; i < n; i++) {
    w->f.parent[i] = w->f.first_child[i] = w->f.next_sibling[i] = w->f.last_child[i] = -1;
    w->p_start[i] = UINT64_MAX;
  }
  return TP_OK;
}

/* Launch bounds, forest and attribution for every rank of the stored events. */
static tp_rc project_ranks(tp_trace_model *m, slice_vec *sv, scratch *w) {
  for (size_t lo = 0, hi; lo < sv->n; lo = hi) {
    int rank = sv->v[lo].ev.rank;
    uint64_t first_range = UINT64_MAX;
    rank_device *rd = &w->ranks.v[w->ranks.n++]; /* events are sorted by rank */
    *rd = (rank_device){.rank = rank, .device = -1};
    for (hi = lo; hi < sv->n && sv->v[hi].ev.rank == rank; hi++) {
      if (is_range(&sv->v[hi].ev) && sv->v[hi].ev.start_ns < first_range)
        first_range = sv->v[hi].ev.start_ns;
      if (sv->v[hi].ev.device > rd->device) rd->device = sv->v[hi].ev.device;
    }
    m->n_ranks_seen++;
    if (first_range == UINT64_MAX) first_range = 0;
    TP_TRY(bound_launches(sv->v, lo, hi, first_range));
    build_forest(sv->v, lo, hi, &w->f, w->stack);
    attribute(sv->v, lo, hi, &w->f, w->p_start, w->p_end, &m->n_launched);
  }
  return TP_OK;
}

static tp_rc lay_out(tp_trace_model *m, scratch *w) {
  group_set gs = {0};
  w->lanes = malloc((m->n_slices ? m->n_slices : 1) * sizeof(int));
  w->group_of = malloc((m->n_slices ? m->n_slices : 1) * sizeof(size_t));
  tp_rc rc = w->lanes && w->group_of ? TP_OK : out_of_memory();
  if (rc == TP_OK) rc = assign_lanes(m, &gs, w->lanes, w->group_of);
  if (rc == TP_OK) rc = make_tracks(m, &gs, &w->ranks);
  if (rc == TP_OK) {
    number_tracks(m);
    for (size_t i = 0; i < m->n_slices; i++) {
      const lane_group *g = &gs.g[w->group_of[i]];
      m->slices[i].track = track_index(m, g->rank, g->stream, g->cls, w->lanes[i]);
    }
  }
  for (size_t g = 0; g < gs.n; g++) {
    for (int k = 0; k < gs.g[g].n_lanes; k++) free(gs.g[g].lanes[k].ends);
    free(gs.g[g].lanes);
  }
  free(gs.g);
  return rc;
}

tp_rc tp_trace_model_load(tp_store *store, int64_t config_id, tp_trace_model *m) {
  if (!store || !m) return TP_FAIL(TP_EINTERNAL, "tp_trace_model_load: NULL argument");
  memset(m, 0, sizeof *m);
  m->max_stream = -1;
  slice_vec sv = {0};
  scratch w = {0};
  tp_rc rc = tp_store_each_trace_event(store, config_id, keep_event, &sv);
  m->slices = sv.v; /* owned by m from here, so tp_trace_model_free frees them */
  m->n_slices = m->n_events = sv.n;
  if (rc == TP_OK) {
    qsort(sv.v, sv.n, sizeof *sv.v, by_rank_start);
    for (size_t i = 0; i < sv.n; i++) {
      const tp_trace_event *e = &sv.v[i].ev;
      if (i == 0 || e->start_ns < m->t0) m->t0 = e->start_ns;
      if (e->stream != TP_TRACE_NO_STREAM && (int64_t)e->stream > m->max_stream)
        m->max_stream = e->stream;
    }
    rc = alloc_scratch(&w, &sv);
  }
  if (rc == TP_OK) rc = project_ranks(m, &sv, &w);
  if (rc == TP_OK) rc = add_projections(m, &sv, w.p_start, w.p_end, &w.ranks);
  m->slices = sv.v;
  m->n_slices = sv.n;
  if (rc == TP_OK) rc = lay_out(m, &w);
  free_scratch(&w);
  if (rc != TP_OK) tp_trace_model_free(m);
  return rc;
}

void tp_trace_model_free(tp_trace_model *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n_events; i++) {
    free((char *)m->slices[i].ev.name);
    free((char *)m->slices[i].ev.kind);
    free((char *)m->slices[i].ev.category);
    free((char *)m->slices[i].ev.copy_kind);
  }
  free(m->slices);
  free(m->tracks);
  memset(m, 0, sizeof *m);
}

/* ---- writing ------------------------------------------------------------------------------ */

void tp_trace_emit(tp_trace_writer *w, json_t *value) {
  if (!value) {
    w->failed = 1;
    return;
  }
  if (!w->first) fputc(',', w->out);
  fputc('\n', w->out);
  w->first = 0;
  if (json_dumpf(value, w->out, DUMP_FLAGS) != 0) w->failed = 1;
  json_decref(value);
}

json_t *tp_trace_metadata(const char *what, int64_t pid, int64_t tid, const char *arg_key,
                          json_t *arg) {
  json_t *o = json_object(), *args = json_object();
  tp_json_builder jb = {0};
  if (!o || !args) jb.failed = 1;
  if (args) tp_json_set(&jb, args, arg_key, arg);
  else json_decref(arg);
  if (o) {
    tp_json_set(&jb, o, "name", json_string(what));
    tp_json_set(&jb, o, "ph", json_string("M"));
    tp_json_set(&jb, o, "pid", json_integer(pid));
    tp_json_set(&jb, o, "tid", json_integer(tid));
    tp_json_set(&jb, o, "args", args);
  } else {
    json_decref(args);
  }
  if (jb.failed) {
    json_decref(o);
    return NULL;
  }
  return o;
}

json_t *tp_trace_flow(char phase, int64_t id, int64_t pid, int64_t tid, double ts_us,
                      const char *cat) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_builder jb = {0};
  char ph[2] = {phase, 0};
  tp_json_set(&jb, o, "ph", json_string(ph));
  tp_json_set(&jb, o, "id", json_integer(id));
  tp_json_set(&jb, o, "pid", json_integer(pid));
  tp_json_set(&jb, o, "tid", json_integer(tid));
  tp_json_set(&jb, o, "ts", json_real(ts_us));
  tp_json_set(&jb, o, "cat", json_string(cat));
  tp_json_set(&jb, o, "name", json_string(cat));
  if (phase == 'f') tp_json_set(&jb, o, "bp", json_string("e"));
  if (jb.failed) {
    json_decref(o);
    return NULL;
  }
  return o;
}

double tp_trace_us(const tp_trace_model *m, uint64_t t) {
  return t >= m->t0 ? (double)(t - m->t0) / 1000.0 : -(double)(m->t0 - t) / 1000.0;
}
