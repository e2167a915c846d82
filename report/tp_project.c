/*
 * tp_project.c — the projection model's arithmetic (tp_project.h, points 1-5): a shard's GEMM
 * time from measured rates, a transfer's time from the link probe's curve, stock and
 * dist_gemm from the two. No database here: tp_project_load.c reads the inputs and
 * tp_project_write.c shows them.
 */
#include "report/tp_project.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const double MIB = 1048576.0;

const char *tp_link_kind_name(tp_link_kind kind) {
  static const char *const names[TP_LINK_KINDS] = {"nccl_all_gather", "nccl_reduce_scatter",
                                                   "ce_push"};
  return kind < TP_LINK_KINDS ? names[kind] : "?";
}

/* ---- GEMM time (point 2) ----------------------------------------------------- */

static double flops_of(int64_t m, int64_t n, int64_t k, int64_t n_weights) {
  return 2.0 * (double)m * (double)n * (double)k * (double)n_weights;
}

/* TFLOP/s of a row: FLOPs per µs is 10⁶ FLOP/s. */
static double rate_of(const tp_project_gemm *g) {
  return flops_of(g->m, g->n, g->k, g->n_weights) / g->median_us / 1e6;
}

static int usable(const tp_project_gemm *g, tp_dtype dtype) {
  return g->dtype == dtype && g->median_us > 0 && isfinite(g->median_us);
}

/* The latest measured row of this very shard, or NULL. */
static const tp_project_gemm *exact_row(const tp_project_gemm *gemms, size_t n_gemms, int64_t m,
                                        int64_t n, int64_t k, int64_t n_weights, tp_dtype dtype) {
  const tp_project_gemm *best = NULL;
  for (size_t i = 0; i < n_gemms; i++) {
    const tp_project_gemm *g = &gemms[i];
    if (usable(g, dtype) && g->m == m && g->n == n && g->k == k && g->n_weights == n_weights &&
        (!best || g->config_id > best->config_id))
      best = g;
  }
  return best;
}

/* One measured FLOP count: the mean rate of its rows and the latest row's id. */
typedef struct {
  double flops, tflops;
  int64_t id;
  int rows;
} rate_point;

/* The rate at exactly flops (a count some rows measured). */
static rate_point rate_at(const tp_project_gemm *gemms, size_t n_gemms, tp_dtype dtype,
                          double flops) {
  rate_point p = {.flops = flops, .tflops = 0, .id = 0, .rows = 0};
  for (size_t i = 0; i < n_gemms; i++) {
    const tp_project_gemm *g = &gemms[i];
    if (!usable(g, dtype) || flops_of(g->m, g->n, g->k, g->n_weights) != flops) continue;
    p.tflops += rate_of(g);
    p.rows++;
    if (g->config_id > p.id) p.id = g->config_id;
  }
  if (p.rows) p.tflops /= p.rows;
  return p;
}

/* The nearest measured FLOP counts at or below and at or above target (NAN when none). */
static void neighbours(const tp_project_gemm *gemms, size_t n_gemms, tp_dtype dtype, double target,
                       double *below, double *above) {
  *below = NAN;
  *above = NAN;
  for (size_t i = 0; i < n_gemms; i++) {
    if (!usable(&gemms[i], dtype)) continue;
    double f = flops_of(gemms[i].m, gemms[i].n, gemms[i].k, gemms[i].n_weights);
    if (f <= target && (isnan(*below) || f > *below)) *below = f;
    if (f >= target && (isnan(*above) || f < *above)) *above = f;
  }
}

static void describe_point(char *buf, size_t cap, const rate_point *p) {
  snprintf(buf, cap, "%.1f GFLOP at %.1f TFLOP/s (config %lld%s)", p->flops / 1e9, p->tflops,
           (long long)p->id, p->rows > 1 ? " and others" : "");
}

/* Rate linear in log FLOPs between lo and hi (point 2), or held at the one that exists. */
static void interpolate(const rate_point *lo, const rate_point *hi, tp_project_gemm_est *est) {
  char a[112], b[112];
  if (lo->rows && hi->rows && lo->flops != hi->flops) {
    double t = (log(est->flops) - log(lo->flops)) / (log(hi->flops) - log(lo->flops));
    est->tflops = lo->tflops + t * (hi->tflops - lo->tflops);
    describe_point(a, sizeof a, lo);
    describe_point(b, sizeof b, hi);
    snprintf(est->source, sizeof est->source, "interpolated by FLOPs: %s .. %s", a, b);
  } else {
    const rate_point *p = lo->rows ? lo : hi;
    est->tflops = p->tflops;
    est->extrapolated = p->flops != est->flops;
    describe_point(a, sizeof a, p);
    snprintf(est->source, sizeof est->source, "%s: rate of %s",
             p->flops == est->flops ? "same FLOPs" : "extrapolated (held flat)", a);
  }
  est->lo_id = lo->rows ? lo->id : hi->id;
  est->hi_id = hi->rows ? hi->id : lo->id;
}

void tp_project_gemm_time(const tp_project_gemm *gemms, size_t n_gemms, int64_t m, int64_t n,
                          int64_t k, int64_t n_weights, tp_dtype dtype, tp_project_gemm_est *est) {
  memset(est, 0, sizeof *est);
  est->flops = flops_of(m, n, k, n_weights);
  est->us = NAN;
  est->tflops = NAN;
  const tp_project_gemm *same = exact_row(gemms, n_gemms, m, n, k, n_weights, dtype);
  if (same) {
    est->exact = 1;
    est->us = same->median_us;
    est->tflops = rate_of(same);
    est->lo_id = est->hi_id = same->config_id;
    snprintf(est->source, sizeof est->source, "config %lld (run %lld)", (long long)same->config_id,
             (long long)same->run_id);
    return;
  }
  double below, above;
  neighbours(gemms, n_gemms, dtype, est->flops, &below, &above);
  if (isnan(below) && isnan(above)) {
    snprintf(est->source, sizeof est->source, "no GEMM rows of dtype %s", tp_dtype_name(dtype));
    return;
  }
  rate_point lo = {0}, hi = {0};
  if (!isnan(below)) lo = rate_at(gemms, n_gemms, dtype, below);
  if (!isnan(above)) hi = rate_at(gemms, n_gemms, dtype, above);
  interpolate(&lo, &hi, est);
  est->us = est->flops / (est->tflops * 1e6);
}

/* ---- transfer time (point 3) ------------------------------------------------- */

/* The index i of the pair (i, i + 1) whose line gives bytes: the bracketing pair, else the
 * pair at the nearer end. */
static size_t pair_for(const tp_project_link_curve *curve, double bytes) {
  size_t i = 0;
  while (i + 2 < curve->n && curve->points[i + 1].bytes < bytes) i++;
  return i;
}

static void where_on_curve(const tp_project_link_curve *curve, size_t i, double bytes, char *buf,
                           size_t cap) {
  const tp_project_link_point *a = &curve->points[i], *b = &curve->points[i + 1];
  const char *where = bytes < a->bytes   ? "below the probe: line of"
                      : bytes > b->bytes ? "above the probe: line of"
                                         : "between";
  snprintf(buf, cap, "%s %g..%g MiB (configs %lld, %lld)", where, a->bytes / MIB, b->bytes / MIB,
           (long long)a->config_id, (long long)b->config_id);
}

/* The line's latency (µs) and bandwidth (bytes per µs) at bytes. */
static void line_at(const tp_project_link_curve *curve, double bytes, double *latency_us,
                    double *bytes_per_us, char *buf, size_t cap) {
  if (curve->n == 1) {
    const tp_project_link_point *p = &curve->points[0];
    *latency_us = 0;
    *bytes_per_us = p->bytes / p->time_us;
    snprintf(buf, cap, "one point: %g MiB (config %lld), no latency", p->bytes / MIB,
             (long long)p->config_id);
    return;
  }
  size_t i = pair_for(curve, bytes);
  const tp_project_link_point *a = &curve->points[i], *b = &curve->points[i + 1];
  where_on_curve(curve, i, bytes, buf, cap);
  if (b->time_us <= a->time_us) { /* noise: a line that falls with size has no meaning */
    *latency_us = 0;
    *bytes_per_us = b->bytes / b->time_us;
    return;
  }
  *bytes_per_us = (b->bytes - a->bytes) / (b->time_us - a->time_us);
  *latency_us = a->time_us - a->bytes / *bytes_per_us;
  if (*latency_us < 0) *latency_us = 0;
}

void tp_project_link_time(const tp_project_link_curve *curve, double bytes, double gbps_override,
                          tp_project_link_est *est) {
  memset(est, 0, sizeof *est);
  est->bytes = bytes;
  est->us = est->gbps = est->latency_us = NAN;
  double latency = 0, bytes_per_us = NAN;
  if (curve->n > 0) line_at(curve, bytes, &latency, &bytes_per_us, est->source, sizeof est->source);
  else if (!(gbps_override > 0)) {
    snprintf(est->source, sizeof est->source, "no probe points");
    return;
  } else snprintf(est->source, sizeof est->source, "no probe: no latency");
  if (gbps_override > 0) {
    bytes_per_us = gbps_override * 1e3; /* GB/s = 10³ bytes per µs */
    size_t used = strlen(est->source);
    snprintf(est->source + used, sizeof est->source - used, "; --link-gbps %g", gbps_override);
  }
  est->latency_us = latency;
  est->gbps = bytes_per_us / 1e3;
  est->us = latency + bytes / bytes_per_us;
}

/* ---- the two paths (points 4, 5) --------------------------------------------- */

double tp_project_stock_us(double gemm_us, double coll_us) { return gemm_us + coll_us; }

double tp_project_dist_us(int tp, double gemm_us, double chunk_us) {
  if (tp < 2) return NAN;
  double g = gemm_us / tp;
  return g + (double)(tp - 1) * fmax(g, chunk_us);
}

double tp_project_volume_bytes(const tp_project_shape *shape, int tp) {
  double width = tp_op_gathers(shape->op) ? (double)shape->k : (double)shape->n;
  double gathered = (double)shape->tokens * width * (double)tp_dtype_bytes(shape->dtype);
  return gathered * (double)(tp - 1) / (double)tp;
}

/* Whether tp divides the shape (point 1); note says why not. */
static int divides(const tp_project_shape *shape, int tp, char *note, size_t cap) {
  int gathers = tp_op_gathers(shape->op);
  int64_t split = gathers ? shape->n : shape->k;
  if (split % tp != 0) {
    snprintf(note, cap, "TP %d does not divide %s = %lld", tp, gathers ? "N" : "K",
             (long long)split);
    return 0;
  }
  if (shape->tokens % tp != 0) {
    snprintf(note, cap, "TP %d does not divide the tokens (%lld)", tp, (long long)shape->tokens);
    return 0;
  }
  return 1;
}

void tp_project_predict(const tp_project_inputs *in, const tp_project_shape *shape, int tp,
                        tp_project_row *row) {
  memset(row, 0, sizeof *row);
  row->shape = *shape;
  row->tp = tp;
  row->stock_us = row->dist_us = row->speedup = NAN;
  if (tp < 2) {
    snprintf(row->note, sizeof row->note, "TP %d: nothing to communicate", tp);
    return;
  }
  if (!divides(shape, tp, row->note, sizeof row->note)) return;
  int gathers = tp_op_gathers(shape->op);
  row->m = shape->tokens;
  row->n = gathers ? shape->n / tp : shape->n;
  row->k = gathers ? shape->k : shape->k / tp;
  tp_project_gemm_time(in->gemms, in->n_gemms, row->m, row->n, row->k, shape->n_weights,
                       shape->dtype, &row->gemm);
  double volume = tp_project_volume_bytes(shape, tp);
  tp_link_kind coll = gathers ? TP_LINK_NCCL_ALL_GATHER : TP_LINK_NCCL_REDUCE_SCATTER;
  tp_project_link_time(&in->links[coll], volume, in->link_gbps, &row->coll);
  tp_project_link_time(&in->links[TP_LINK_CE_PUSH], volume / (tp - 1), in->link_gbps, &row->chunk);
  row->stock_us = tp_project_stock_us(row->gemm.us, row->coll.us);
  row->dist_us = tp_project_dist_us(tp, row->gemm.us, row->chunk.us);
  row->speedup = row->stock_us / row->dist_us;
  if (isnan(row->gemm.us)) snprintf(row->note, sizeof row->note, "%.100s", row->gemm.source);
  else if (isnan(row->coll.us) || isnan(row->chunk.us))
    snprintf(row->note, sizeof row->note, "no link probe points of %s",
             tp_link_kind_name(isnan(row->coll.us) ? coll : TP_LINK_CE_PUSH));
  else if (!row->gemm.exact)
    snprintf(row->note, sizeof row->note, "GEMM rate %s",
             row->gemm.extrapolated ? "extrapolated beyond the measured FLOPs" : "interpolated");
}
