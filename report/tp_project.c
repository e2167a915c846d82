/*
 * tp_project.c — the projection model's arithmetic (tp_project.h, points 1-6): a GEMM's time
 * from measured rates, a transfer's time from the link probe's curve, the fused pipeline's
 * fixed costs from the probe's own points (or the stated fallbacks), stock, the dist_gemm
 * pipeline simulated stream by stream, and the error summary. No database here:
 * tp_project_load.c reads the inputs and tp_project_write.c shows them.
 */
#include "report/tp_project.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tp_chunk_rule.h"
#include "report/tp_report_util.h"

static const double MIB = 1048576.0;

const char *tp_link_kind_name(tp_link_kind kind) {
  static const char *const names[TP_LINK_KINDS] = {
      "nccl_all_gather", "nccl_reduce_scatter", "ce_push",  "sm_push", "local_copy",
      "barrier",         "flag_round_trip",     "flag_wait"};
  return kind < TP_LINK_KINDS ? names[kind] : "?";
}

const char *tp_cost_kind_name(tp_cost_kind kind) {
  static const char *const names[TP_COST_KINDS] = {"L push latency",   "k kernel cost",
                                                   "b barrier",        "h handoff",
                                                   "w met dependency", "local memory rate"};
  return kind < TP_COST_KINDS ? names[kind] : "?";
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

/* Below every measured count (point 2): the time linear in FLOPs from the kernel cost k at
 * zero FLOPs to the smallest count's time. 0 (est untouched) when k is unknown or not below
 * that time: the smallest count's rate is held then. */
static int toward_kernel_cost(const rate_point *smallest, double kernel_us,
                              tp_project_gemm_est *est) {
  const double smallest_us = smallest->flops / (smallest->tflops * 1e6);
  if (!isfinite(kernel_us) || kernel_us < 0 || kernel_us >= smallest_us) return 0;
  char a[112];
  est->us = kernel_us + (smallest_us - kernel_us) * est->flops / smallest->flops;
  est->tflops = est->flops / est->us / 1e6;
  est->extrapolated = 1;
  est->lo_id = est->hi_id = smallest->id;
  describe_point(a, sizeof a, smallest);
  snprintf(est->source, sizeof est->source,
           "below the measured FLOPs: line from k = %.1f us at 0 FLOPs to %s", kernel_us, a);
  return 1;
}

void tp_project_gemm_time(const tp_project_gemm *gemms, size_t n_gemms, int64_t m, int64_t n,
                          int64_t k, int64_t n_weights, tp_dtype dtype, double kernel_us,
                          tp_project_gemm_est *est) {
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
  if (!lo.rows && toward_kernel_cost(&hi, kernel_us, est)) return;
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

/* ---- the fixed costs (point 6) ---------------------------------------------------- */

static const double SMALL_POINT_BYTES = 1048576.0; /* a point this small is a per-call latency */

static void set_cost(tp_project_cost *c, double value, int measured, int64_t id) {
  c->value = value;
  c->measured = measured;
  c->config_id = id;
}

/* A per-call latency of a transport: its smallest point when small, else the latency of the
 * line through its two smallest points (a fallback). */
static void call_latency(const tp_project_link_curve *curve, tp_link_kind kind,
                         tp_project_cost *c) {
  const char *name = tp_link_kind_name(kind);
  set_cost(c, NAN, 0, 0);
  if (curve->n == 0) {
    snprintf(c->source, sizeof c->source, "no %s points", name);
    return;
  }
  const tp_project_link_point *p = &curve->points[0];
  if (p->bytes <= SMALL_POINT_BYTES) {
    set_cost(c, p->time_us, 1, p->config_id);
    snprintf(c->source, sizeof c->source, "%s of %g KiB, per call (config %lld)", name,
             p->bytes / 1024.0, (long long)p->config_id);
    return;
  }
  tp_project_link_est e;
  tp_project_link_time(curve, p->bytes, 0, &e);
  set_cost(c, e.latency_us, 0, 0);
  snprintf(c->source, sizeof c->source, "fallback: latency of the %s line, %.100s", name, e.source);
}

/* A cost read from one point (scaled: a round trip's half), or NAN when the probe has none. */
static int from_point(const tp_project_link_curve *curve, tp_link_kind kind, double scale,
                      const char *what, tp_project_cost *c) {
  if (curve->n == 0) return 0;
  const tp_project_link_point *p = &curve->points[0];
  set_cost(c, p->time_us * scale, 1, p->config_id);
  snprintf(c->source, sizeof c->source, "%s%s, per call (config %lld)", what,
           tp_link_kind_name(kind), (long long)p->config_id);
  return 1;
}

/* A fallback equal to another cost, said so. */
static void fallback_to(tp_project_cost *c, double value, const char *why) {
  set_cost(c, value, 0, 0);
  snprintf(c->source, sizeof c->source, "fallback: %s", why);
}

/* Datasheet HBM bandwidths (peak, GB/s) of the GPUs tpbench is lent, matched by a part of the
 * device name, most specific first. */
static const struct {
  const char *part, *also, *label;
  double gbps;
} DATASHEET_HBM[] = {{"H200", NULL, "H200: 4.8 TB/s", 4800.0},
                     {"H100", "PCIe", "H100 PCIe: 2.0 TB/s", 2000.0},
                     {"H100", NULL, "H100 SXM: 3.35 TB/s", 3350.0}};

/* The datasheet entry of a GPU named name, or NULL. */
static int datasheet_hbm(const char *name) {
  for (int i = 0; name && i < (int)(sizeof DATASHEET_HBM / sizeof DATASHEET_HBM[0]); i++)
    if (strstr(name, DATASHEET_HBM[i].part) &&
        (!DATASHEET_HBM[i].also || strstr(name, DATASHEET_HBM[i].also)))
      return i;
  return -1;
}

static void local_rate(const tp_project_link_curve *curve, const char *gpu_name,
                       tp_project_cost *c) {
  if (curve->n > 0) {
    const tp_project_link_point *p = &curve->points[curve->n - 1]; /* the largest: no latency */
    set_cost(c, 2.0 * p->bytes / p->time_us / 1e3, 1, p->config_id);
    snprintf(c->source, sizeof c->source,
             "local_copy of %g MiB: read + written bytes per time (config %lld)",
             p->bytes / 1048576.0, (long long)p->config_id);
    return;
  }
  const int sheet = datasheet_hbm(gpu_name);
  if (sheet >= 0) {
    set_cost(c, DATASHEET_HBM[sheet].gbps, 0, 0);
    snprintf(c->source, sizeof c->source, "fallback: datasheet HBM bandwidth, %s",
             DATASHEET_HBM[sheet].label);
    return;
  }
  set_cost(c, NAN, 0, 0);
  snprintf(c->source, sizeof c->source,
           "unknown: no local_copy point, no datasheet figure for %.60s (reduce pass and C read "
           "left out)",
           gpu_name ? gpu_name : "this GPU");
}

void tp_project_resolve_costs(const tp_project_link_curve *links, const char *gpu_name,
                              tp_project_cost *costs) {
  memset(costs, 0, sizeof *costs * TP_COST_KINDS);
  tp_project_cost *L = &costs[TP_COST_PUSH_LATENCY], *h = &costs[TP_COST_HANDOFF];
  call_latency(&links[TP_LINK_CE_PUSH], TP_LINK_CE_PUSH, L);
  call_latency(&links[TP_LINK_SM_PUSH], TP_LINK_SM_PUSH, &costs[TP_COST_KERNEL]);
  if (!from_point(&links[TP_LINK_FLAG_ROUND_TRIP], TP_LINK_FLAG_ROUND_TRIP, 0.5, "half of ", h))
    fallback_to(h, L->value, "h = L (a flag is a small write to the peer behind the push)");
  if (!from_point(&links[TP_LINK_FLAG_WAIT], TP_LINK_FLAG_WAIT, 1.0, "", &costs[TP_COST_WAIT]))
    fallback_to(&costs[TP_COST_WAIT], L->value,
                "w = L (a stream command that finds its condition met)");
  if (!from_point(&links[TP_LINK_BARRIER], TP_LINK_BARRIER, 1.0, "", &costs[TP_COST_BARRIER]))
    fallback_to(&costs[TP_COST_BARRIER], 2.0 * h->value, "b = 2·h (one flag round trip)");
  local_rate(&links[TP_LINK_LOCAL_COPY], gpu_name, &costs[TP_COST_LOCAL_GBPS]);
}

/* ---- stock (point 4) ----------------------------------------------------------- */

double tp_project_stock_us(double gemm_us, double pace_factor, double coll_us) {
  return gemm_us * pace_factor + coll_us;
}

/* A pace ratio outside these bounds is no clock effect but a broken point (a GPU's clock
 * moves GEMM time by some percent, never by half). */
#define TP_PACE_RATIO_MIN 0.5
#define TP_PACE_RATIO_MAX 1.5

typedef enum { SHAPE_NO_BASE, SHAPE_OK, SHAPE_IMPLAUSIBLE } shape_read;

/* The points one shape's ratio was read from: "config 754" at a probed gap, "configs 754+755"
 * between two. */
typedef struct shape_points {
  int64_t id;    /* the point of the larger gap read (the JSON's config) */
  char text[64]; /* every point read, for the source */
} shape_points;

/* One probed shape (points [begin, end) of one FLOP count): its time after a gap of gap_pct
 * over its back-to-back time, linear between the probed gaps, the largest held above. A ratio
 * outside [TP_PACE_RATIO_MIN, TP_PACE_RATIO_MAX] is not read. */
static shape_read shape_ratio(const tp_project_pace_point *pts, size_t begin, size_t end,
                              double gap_pct, double *ratio, shape_points *read) {
  const tp_project_pace_point *base = NULL, *lo = NULL, *hi = NULL;
  for (size_t i = begin; i < end; i++) {
    if (pts[i].gap_pct == 0 && pts[i].time_us > 0) base = &pts[i];
    if (pts[i].gap_pct <= gap_pct) lo = &pts[i];
    else if (!hi) hi = &pts[i];
  }
  if (!base || !lo) return SHAPE_NO_BASE;
  double t = lo->time_us;
  const int between = hi && gap_pct > lo->gap_pct;
  if (between)
    t += (hi->time_us - lo->time_us) * (gap_pct - lo->gap_pct) / (hi->gap_pct - lo->gap_pct);
  *ratio = t / base->time_us;
  read->id = between ? hi->config_id : lo->config_id;
  if (between)
    snprintf(read->text, sizeof read->text, "configs %lld+%lld", (long long)lo->config_id,
             (long long)hi->config_id);
  else snprintf(read->text, sizeof read->text, "config %lld", (long long)lo->config_id);
  if (!(*ratio >= TP_PACE_RATIO_MIN && *ratio <= TP_PACE_RATIO_MAX)) return SHAPE_IMPLAUSIBLE;
  return SHAPE_OK;
}

void tp_project_pace(const tp_project_pacing *pacing, double flops, double gemm_us, double coll_us,
                     tp_project_pace_est *est) {
  memset(est, 0, sizeof *est);
  est->factor = 1.0;
  est->gap_pct = 100.0 * coll_us / gemm_us;
  snprintf(est->source, sizeof est->source, "no GEMMs-between-gaps probe: back to back");
  if (!pacing || pacing->n == 0) return;
  /* a probe there is: say why it is not read rather than that there is none */
  if (!isfinite(est->gap_pct) || !(flops > 0)) {
    snprintf(est->source, sizeof est->source,
             "no gap: the GEMM's or the collective's time is unknown: back to back");
    return;
  }
  snprintf(est->source, sizeof est->source,
           "no probed shape timed back to back (gap 0): back to back");
  /* the usable shapes just below and above flops (by FLOP count) */
  double r[2] = {NAN, NAN}, f[2] = {NAN, NAN}, implausible_ratio = NAN;
  shape_points used[2] = {{0}, {0}}, implausible = {0}; /* implausible: the first refused */
  for (size_t begin = 0; begin < pacing->n;) {
    size_t end = begin;
    while (end < pacing->n && pacing->points[end].flops == pacing->points[begin].flops) end++;
    const double shape_flops = pacing->points[begin].flops;
    const int side = shape_flops > flops;
    double ratio = NAN;
    shape_points points = {0};
    /* above: the first, the nearest; a shape of no FLOPs (an axis 0 or negative) has no place
     * on the log-FLOPs line: skipped */
    const int wanted = (side == 0 || isnan(f[1])) && shape_flops > 0 && isfinite(shape_flops);
    const shape_read got =
        wanted ? shape_ratio(pacing->points, begin, end, est->gap_pct, &ratio, &points)
               : SHAPE_NO_BASE;
    if (got == SHAPE_OK) {
      r[side] = ratio;
      f[side] = shape_flops;
      used[side] = points;
    } else if (got == SHAPE_IMPLAUSIBLE && !implausible.id) {
      implausible = points;
      implausible_ratio = ratio;
    }
    begin = end;
  }
  if (isnan(r[0]) && isnan(r[1])) {
    if (implausible.id)
      snprintf(est->source, sizeof est->source,
               "probed ratio %.3g (%s) outside %.1f..%.1f, not read: back to back",
               implausible_ratio, implausible.text, TP_PACE_RATIO_MIN, TP_PACE_RATIO_MAX);
    return;
  }
  /* a gap under 10 % keeps a decimal: "gap 0 %" would read as back to back */
  char gap[32];
  tp_fmt_num(gap, sizeof gap, est->gap_pct, est->gap_pct < 10 ? 1 : 0);
  if (isnan(r[0]) || isnan(r[1])) {
    const int side = isnan(r[0]);
    est->factor = r[side];
    est->lo_id = est->hi_id = used[side].id;
    snprintf(est->source, sizeof est->source, "gap %s %%: %s (%.0f GFLOP, held)", gap,
             used[side].text, f[side] / 1e9);
    return;
  }
  const double t = (log(flops) - log(f[0])) / (log(f[1]) - log(f[0]));
  est->factor = r[0] + (r[1] - r[0]) * t;
  est->lo_id = used[0].id;
  est->hi_id = used[1].id;
  snprintf(est->source, sizeof est->source, "gap %s %%: %s; %s (%.0f..%.0f GFLOP)", gap,
           used[0].text, used[1].text, f[0] / 1e9, f[1] / 1e9);
}

/* Bytes an element takes on the links: an fp8 recipe gathers its quantized input (one byte,
 * comm_dtype=fp8, the default; the scales, under 1 % of the bytes, are left out) and
 * reduce-scatters bf16 partials; every other dtype moves itself. */
static double wire_bytes(const tp_project_shape *shape) {
  if (tp_dtype_is_fp8(shape->dtype)) return tp_op_gathers(shape->op) ? 1.0 : 2.0;
  return (double)tp_dtype_bytes(shape->dtype);
}

double tp_project_volume_bytes(const tp_project_shape *shape, int tp) {
  double width = tp_op_gathers(shape->op) ? (double)shape->k : (double)shape->n;
  double gathered = (double)shape->tokens * width * wire_bytes(shape);
  return gathered * (double)(tp - 1) / (double)tp;
}

/* ---- dist_gemm's pipeline (point 5) ------------------------------------------------ */

enum { MAX_SIM_CHUNKS = 64 };

/* A cost's value, 0 when unknown (its term left out). */
static double cost_or_0(const tp_project_inputs *in, tp_cost_kind kind) {
  double v = in->costs[kind].value;
  return isfinite(v) ? v : 0.0;
}

/* What the simulation reads: the shard's sides and the costs. */
typedef struct {
  int tp, chunks;
  double shard_gemm_us, chunk_gemm_us, push_us, local_us;
  double b, h, w;
} sim_in;

/* All-gather side: the copy stream pushes chunk j to every peer in turn; the main stream
 * runs the local shard's GEMM, then each peer chunk's GEMM as it lands (by symmetry a peer's
 * push to this rank lands when this rank's push of the same step does). */
static void simulate_gather(const sim_in *s, tp_project_pipeline *pipe) {
  double copy = s->b, main_t = s->shard_gemm_us, gemms = s->shard_gemm_us;
  for (int j = 0; j < s->chunks; j++)
    for (int step = 1; step < s->tp; step++) {
      copy += s->push_us;
      main_t = fmax(main_t + s->w, copy + s->h) + s->chunk_gemm_us;
      gemms += s->chunk_gemm_us;
    }
  pipe->total_us = fmax(main_t, copy);
  pipe->gemm_sum_us = gemms;
  pipe->stall_us = pipe->total_us - gemms;
  pipe->drain_us = pipe->total_us - copy;
}

/* Reduce-scatter side, in the code's order: chunk j's partials for every peer (each pushed
 * once written), then chunk j − 1's local GEMM after its waits; the last local GEMM drains. */
static void simulate_scatter(const sim_in *s, tp_project_pipeline *pipe) {
  double copy = s->b, main_t = 0, gemms = 0, last_partial = 0, landed[MAX_SIM_CHUNKS];
  for (int j = 0; j <= s->chunks; j++) {
    if (j < s->chunks) {
      for (int step = 1; step < s->tp; step++) {
        main_t += s->chunk_gemm_us;
        gemms += s->chunk_gemm_us;
        copy = fmax(copy, main_t + s->w) + s->push_us;
      }
      landed[j] = copy;
      last_partial = main_t;
    }
    if (j > 0) {
      main_t = fmax(main_t + (s->tp - 1) * s->w, landed[j - 1] + s->h);
      main_t += s->local_us + s->chunk_gemm_us;
      gemms += s->chunk_gemm_us;
    }
  }
  pipe->total_us = fmax(main_t, copy);
  pipe->gemm_sum_us = gemms;
  pipe->stall_us = pipe->total_us - gemms - s->chunks * s->local_us;
  pipe->drain_us = pipe->total_us - last_partial;
}

/* The reduce-scatter side's local traffic of one chunk of rows × width: the reduce pass over
 * the W − 1 partials (W > 2: W·chunk bytes read and written) and the C read of one. */
static double local_traffic_us(const tp_project_inputs *in, int tp, double chunk_bytes) {
  double gbps = in->costs[TP_COST_LOCAL_GBPS].value;
  if (!isfinite(gbps) || gbps <= 0) return 0;
  double bytes = chunk_bytes * (tp > 2 ? (double)tp + 1.0 : 1.0);
  return bytes / (gbps * 1e3);
}

/* The chunks: the request's, else auto's; 0 when auto takes the stock path. */
static int pipeline_chunks(const tp_project_shape *shape, int tp, int chunks, int64_t rows,
                           size_t row_bytes) {
  if (chunks > 0) return chunks;
  if (!tp_auto_fuses(rows, row_bytes)) return 0;
  return tp_auto_chunks(tp_op_gathers(shape->op), tp, rows, row_bytes, shape->n, shape->k,
                        (int)shape->n_weights, shape->dtype)
      .chunks;
}

void tp_project_dist_pipeline(const tp_project_inputs *in, const tp_project_shape *shape, int tp,
                              int chunks, tp_project_pipeline *pipe) {
  memset(pipe, 0, sizeof *pipe);
  pipe->total_us = pipe->gemm_sum_us = pipe->stall_us = pipe->drain_us = NAN;
  pipe->shard_gemm.us = pipe->chunk_gemm.us = pipe->push.us = NAN;
  const int gathers = tp_op_gathers(shape->op);
  const size_t e = tp_dtype_bytes(shape->dtype);
  const int64_t rows = shape->tokens / tp, width = gathers ? shape->k : shape->n;
  const int64_t n = gathers ? shape->n / tp : shape->n, k = gathers ? shape->k : shape->k / tp;
  pipe->chunks = pipeline_chunks(shape, tp, chunks, rows, (size_t)width * e);
  if (pipe->chunks == 0) {
    pipe->stock_path = 1;
    return;
  }
  if (pipe->chunks > MAX_SIM_CHUNKS || rows % pipe->chunks != 0) {
    pipe->chunks = 0;
    return;
  }
  const int64_t r = rows / pipe->chunks;
  const double kernel = in->costs[TP_COST_KERNEL].value;
  if (gathers) /* the reduce-scatter side runs only chunk GEMMs */
    tp_project_gemm_time(in->gemms, in->n_gemms, rows, n, k, shape->n_weights, shape->dtype, kernel,
                         &pipe->shard_gemm);
  tp_project_gemm_time(in->gemms, in->n_gemms, r, n, k, shape->n_weights, shape->dtype, kernel,
                       &pipe->chunk_gemm);
  tp_project_link_time(&in->links[TP_LINK_CE_PUSH], (double)(r * width) * (double)e, in->link_gbps,
                       &pipe->push);
  pipe->shard_rows = rows;
  pipe->chunk_rows = r;
  pipe->pushes = pipe->waits = (tp - 1) * pipe->chunks;
  pipe->gemms = gathers ? 1 + (tp - 1) * pipe->chunks : tp * pipe->chunks;
  pipe->local_us = gathers ? 0 : local_traffic_us(in, tp, (double)(r * shape->n) * (double)e);
  const sim_in s = {.tp = tp,
                    .chunks = pipe->chunks,
                    .shard_gemm_us = pipe->shard_gemm.us,
                    .chunk_gemm_us = pipe->chunk_gemm.us,
                    .push_us = pipe->push.us,
                    .local_us = pipe->local_us,
                    .b = cost_or_0(in, TP_COST_BARRIER),
                    .h = cost_or_0(in, TP_COST_HANDOFF),
                    .w = cost_or_0(in, TP_COST_WAIT)};
  if (gathers) simulate_gather(&s, pipe);
  else simulate_scatter(&s, pipe);
}

/* ---- a prediction --------------------------------------------------------------------- */

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

/* The row's note: what is missing, else how the GEMM times were read. */
static void note_row(tp_project_row *row, tp_link_kind coll) {
  const tp_project_pipeline *p = &row->pipe;
  if (isnan(row->gemm.us)) snprintf(row->note, sizeof row->note, "%.100s", row->gemm.source);
  else if (isnan(row->coll.us) || (!p->stock_path && isnan(p->push.us)))
    snprintf(row->note, sizeof row->note, "no link probe points of %s",
             tp_link_kind_name(isnan(row->coll.us) ? coll : TP_LINK_CE_PUSH));
  else if (p->stock_path)
    snprintf(row->note, sizeof row->note,
             "auto takes the stock path (under %d MiB per rank and transfer): dist_gemm = stock",
             TP_AUTO_FUSE_MIN_BYTES >> 20);
  else if (!row->gemm.exact)
    snprintf(row->note, sizeof row->note, "GEMM rate %s",
             row->gemm.extrapolated ? "extrapolated beyond the measured FLOPs" : "interpolated");
}

void tp_project_predict(const tp_project_inputs *in, const tp_project_shape *shape, int tp,
                        tp_project_row *row) {
  memset(row, 0, sizeof *row);
  row->shape = *shape;
  row->tp = tp;
  row->stock_us = row->dist_us = row->speedup = NAN;
  row->pipe.total_us = NAN;
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
                       shape->dtype, in->costs[TP_COST_KERNEL].value, &row->gemm);
  tp_link_kind coll = gathers ? TP_LINK_NCCL_ALL_GATHER : TP_LINK_NCCL_REDUCE_SCATTER;
  tp_project_link_time(&in->links[coll], tp_project_volume_bytes(shape, tp), in->link_gbps,
                       &row->coll);
  tp_project_pace(&in->pacing, row->gemm.flops, row->gemm.us, row->coll.us, &row->pace);
  row->stock_us = tp_project_stock_us(row->gemm.us, row->pace.factor, row->coll.us);
  tp_project_dist_pipeline(in, shape, tp, 0, &row->pipe);
  row->dist_us = row->pipe.stock_path ? row->stock_us : row->pipe.total_us;
  row->speedup = row->stock_us / row->dist_us;
  note_row(row, coll);
}

/* ---- the error summary ------------------------------------------------------------------ */

tp_rc tp_project_summarise_errors(const double *errors, const double *measured_us, size_t n,
                                  tp_project_error_summary *out) {
  memset(out, 0, sizeof *out);
  out->median_pct = out->worst_abs_pct = out->worst_pct = out->median_abs_pct = NAN;
  double *signed_errs = calloc(n + 1, sizeof *signed_errs);
  double *abs_errs = calloc(n + 1, sizeof *abs_errs);
  if (!signed_errs || !abs_errs) {
    free(signed_errs);
    free(abs_errs);
    return TP_FAIL(TP_EOOM, "project: out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(errors[i]) || !(measured_us[i] >= TP_PROJECT_MIN_JUDGED_US)) continue;
    if (out->rows == 0 || fabs(errors[i]) > out->worst_abs_pct) {
      out->worst_abs_pct = fabs(errors[i]);
      out->worst_pct = errors[i];
      out->worst_index = i;
    }
    signed_errs[out->rows] = errors[i];
    abs_errs[out->rows++] = fabs(errors[i]);
  }
  out->median_pct = tp_median(signed_errs, (size_t)out->rows);
  out->median_abs_pct = tp_median(abs_errs, (size_t)out->rows);
  free(signed_errs);
  free(abs_errs);
  return TP_OK;
}
