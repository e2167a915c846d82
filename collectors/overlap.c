/*
 * overlap.c — how much communication hid under compute, per rank and window.
 *
 * For one rank and one window (collectors/README.md, "Definitions"):
 *   comm         = |U comm intervals|
 *   compute      = |U compute intervals|
 *   overlap      = |U comm  n  U compute|
 *   exposed_comm = comm - overlap,   overlap% = overlap / comm.
 *   sync         = |U sync intervals|   (reported beside overlap)
 * Communication is bytes moving (classify.c); barrier, signal and wait
 * kernels and CUPTI's synchronisation records are sync: spinning on a flag
 * hides nothing and exposes nothing, so it is neither comm nor compute.
 * Unions, not sums: two NCCL kernels on two streams at once are one stretch
 * of busy link, and a GEMM split over two streams is one stretch of busy SMs.
 * Intervals are half-open [start, end), so touching intervals merge without a
 * gap and overlap nothing. The computation is: clip each event to the window,
 * sort each class by start, merge into disjoint runs, then sweep the two run
 * lists together for the intersection. Pure C, no CUDA: tested on the CPU.
 */
#include <stdlib.h>

#include "collectors/tp_collector.h"

typedef struct span {
  uint64_t start, end;
} span;

static int is_comm(const tp_event *e) {
  return e->category == TP_CAT_COMM && e->type != TP_EV_RANGE;
}

static int is_compute(const tp_event *e) {
  return e->type == TP_EV_KERNEL && e->category != TP_CAT_COMM && e->category != TP_CAT_SYNC &&
         e->category != TP_CAT_RANGE;
}

static int is_sync(const tp_event *e) {
  return e->category == TP_CAT_SYNC && e->type != TP_EV_RANGE;
}

/* Clips [s, e) to [lo, hi); returns 0 when nothing of it is left. */
static int clip(uint64_t s, uint64_t e, uint64_t lo, uint64_t hi, span *out) {
  if (s < lo) s = lo;
  if (e > hi) e = hi;
  if (e <= s) return 0;
  out->start = s;
  out->end = e;
  return 1;
}

static int span_cmp(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return (x->end > y->end) - (x->end < y->end);
}

/* Sorts spans and merges them in place into disjoint, ordered runs; returns
 * the number of runs and adds their total length to *total. */
static size_t merge_runs(span *s, size_t n, uint64_t *total) {
  if (n == 0) return 0;
  qsort(s, n, sizeof *s, span_cmp);
  size_t w = 0;
  for (size_t i = 1; i < n; ++i) {
    if (s[i].start <= s[w].end) { /* overlapping or touching: extend */
      if (s[i].end > s[w].end) s[w].end = s[i].end;
    } else {
      s[++w] = s[i];
    }
  }
  size_t runs = w + 1;
  for (size_t i = 0; i < runs; ++i) *total += s[i].end - s[i].start;
  return runs;
}

/* Length of the intersection of two lists of disjoint ordered runs. */
static uint64_t intersect_len(const span *a, size_t na, const span *b, size_t nb) {
  uint64_t sum = 0;
  size_t i = 0, j = 0;
  while (i < na && j < nb) {
    uint64_t lo = a[i].start > b[j].start ? a[i].start : b[j].start;
    uint64_t hi = a[i].end < b[j].end ? a[i].end : b[j].end;
    if (hi > lo) sum += hi - lo;
    if (a[i].end < b[j].end) ++i;
    else ++j;
  }
  return sum;
}

tp_rc tp_overlap_compute(const tp_event *ev, size_t n, int rank, uint64_t win_start,
                         uint64_t win_end, tp_overlap *out) {
  if (!out || (n > 0 && !ev))
    return TP_FAIL(TP_EUSAGE, "tp_overlap_compute: NULL %s", out ? "events" : "output");
  if (win_end < win_start)
    return TP_FAIL(TP_EUSAGE, "tp_overlap_compute: window end %llu before start %llu",
                   (unsigned long long)win_end, (unsigned long long)win_start);
  span *comm = NULL, *comp = NULL, *sync = NULL;
  if (n > 0) {
    comm = malloc(n * sizeof *comm);
    comp = malloc(n * sizeof *comp);
    sync = malloc(n * sizeof *sync);
    if (!comm || !comp || !sync) {
      free(comm);
      free(comp);
      free(sync);
      return TP_FAIL(TP_EOOM, "tp_overlap_compute: no memory for %zu intervals", n);
    }
  }
  size_t nc = 0, nk = 0, ns = 0;
  for (size_t i = 0; i < n; ++i) {
    const tp_event *e = &ev[i];
    if (e->rank != rank) continue;
    if (is_comm(e)) nc += (size_t)clip(e->start_ns, e->end_ns, win_start, win_end, &comm[nc]);
    else if (is_compute(e))
      nk += (size_t)clip(e->start_ns, e->end_ns, win_start, win_end, &comp[nk]);
    else if (is_sync(e)) ns += (size_t)clip(e->start_ns, e->end_ns, win_start, win_end, &sync[ns]);
  }
  tp_overlap r = {0};
  r.window_ns = win_end - win_start;
  r.n_comm = nc;
  r.n_compute = nk;
  r.n_sync = ns;
  size_t rc = merge_runs(comm, nc, &r.comm_ns);
  size_t rk = merge_runs(comp, nk, &r.compute_ns);
  (void)merge_runs(sync, ns, &r.sync_ns);
  r.overlap_ns = intersect_len(comm, rc, comp, rk);
  r.exposed_comm_ns = r.comm_ns - r.overlap_ns;
  r.overlap_pct = r.comm_ns ? 100.0 * (double)r.overlap_ns / (double)r.comm_ns : 0.0;
  free(comm);
  free(comp);
  free(sync);
  *out = r;
  return TP_OK;
}
