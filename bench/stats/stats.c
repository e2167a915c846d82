/*
 * stats.c — median, quantiles, spread and geometric means of samples
 * (definitions in stats.h).
 */
#include "bench/stats/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double tp_stats_quantile_sorted(const double *sorted, int n, double q) {
  if (n == 1 || q <= 0.0) return sorted[0];
  if (q >= 1.0) return sorted[n - 1];
  double h = (double)(n - 1) * q;
  int j = (int)floor(h);
  if (j >= n - 1) return sorted[n - 1];
  return sorted[j] + (h - (double)j) * (sorted[j + 1] - sorted[j]);
}

static tp_rc check_samples(const double *x, int n) {
  if (!x || n < 1) return TP_FAIL(TP_EINTERNAL, "statistics of %d samples", n);
  for (int i = 0; i < n; i++)
    if (!isfinite(x[i])) return TP_FAIL(TP_EINTERNAL, "sample %d is not finite (%g)", i, x[i]);
  return TP_OK;
}

/* Mean and sample standard deviation, two-pass for accuracy. */
static void mean_and_stddev(const double *x, int n, double *mean, double *stddev) {
  double sum = 0.0;
  for (int i = 0; i < n; i++) sum += x[i];
  *mean = sum / n;
  if (n < 2) {
    *stddev = 0.0;
    return;
  }
  double squares = 0.0;
  for (int i = 0; i < n; i++) squares += (x[i] - *mean) * (x[i] - *mean);
  *stddev = sqrt(squares / (n - 1));
}

tp_rc tp_stats_compute(const double *x, int n, tp_stats *out) {
  TP_TRY(check_samples(x, n));
  double *sorted = malloc((size_t)n * sizeof *sorted);
  if (!sorted) return TP_FAIL(TP_EOOM, "no memory to sort %d samples", n);
  memcpy(sorted, x, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, compare_doubles);

  tp_stats s = {.n = n, .min = sorted[0], .max = sorted[n - 1]};
  s.median = tp_stats_quantile_sorted(sorted, n, 0.5);
  s.p10 = tp_stats_quantile_sorted(sorted, n, 0.1);
  s.p90 = tp_stats_quantile_sorted(sorted, n, 0.9);
  free(sorted);
  mean_and_stddev(x, n, &s.mean, &s.stddev);
  /* Equal samples have no spread whatever their mean; otherwise a zero mean
   * leaves the ratio undefined. */
  if (s.stddev == 0.0) s.cv = 0.0;
  else s.cv = s.mean != 0.0 ? s.stddev / fabs(s.mean) : NAN;
  *out = s;
  return TP_OK;
}

tp_rc tp_stats_geomean(const double *ratios, int n, double *out) {
  TP_TRY(check_samples(ratios, n));
  double log_sum = 0.0;
  for (int i = 0; i < n; i++) {
    if (ratios[i] <= 0.0)
      return TP_FAIL(TP_EINTERNAL, "geometric mean of a ratio <= 0 (item %d: %g)", i, ratios[i]);
    log_sum += log(ratios[i]);
  }
  *out = exp(log_sum / n);
  return TP_OK;
}

tp_rc tp_stats_slowest_rank(const double *const *per_rank, int ranks, int iters, double *out) {
  if (!per_rank || ranks < 1 || iters < 1)
    return TP_FAIL(TP_EINTERNAL, "slowest rank of %d ranks x %d iterations", ranks, iters);
  for (int i = 0; i < iters; i++) {
    double slowest = per_rank[0][i];
    for (int r = 1; r < ranks; r++)
      if (per_rank[r][i] > slowest) slowest = per_rank[r][i];
    out[i] = slowest;
  }
  return TP_OK;
}
