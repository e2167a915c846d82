/*
 * stats.h — summary statistics of per-iteration times, as every tpbench
 * table reports them.
 *
 * Quantiles use linear interpolation between order statistics (Hyndman and
 * Fan's definition 7, the default of R and of numpy.percentile): with the n
 * samples sorted as x[0] <= ... <= x[n-1], the q-quantile is
 * x[j] + (h - j) * (x[j+1] - x[j]) where h = (n - 1) * q and j = floor(h).
 * So the median of an even count is the mean of the two middle samples, and
 * a single sample is every quantile. The standard deviation is the sample
 * one (divides by n - 1; 0 for one sample).
 *
 * Pure C, no state: callable from any thread.
 */
#ifndef TP_STATS_H
#define TP_STATS_H

#include "common/tp_error.h"

typedef struct tp_stats {
  int n;
  double median, p10, p90;
  double mean, min, max;
  double stddev; /* sample standard deviation (n - 1) */
  double cv;     /* stddev / mean: 0 when all samples are equal */
} tp_stats;

/* Summarises n >= 1 finite samples (any order; x is not modified).
 * TP_EINTERNAL for n < 1 or a non-finite sample, TP_EOOM if no memory. */
TP_MUST_CHECK tp_rc tp_stats_compute(const double *x, int n, tp_stats *out);

/* The q-quantile (0 <= q <= 1) of n >= 1 samples already sorted ascending,
 * by the interpolation rule above. */
double tp_stats_quantile_sorted(const double *sorted, int n, double q);

/* Geometric mean of n >= 1 ratios, each finite and > 0 (TP_EINTERNAL
 * otherwise): exp(mean(log r)), the right average of speedups. */
TP_MUST_CHECK tp_rc tp_stats_geomean(const double *ratios, int n, double *out);

/* For each of iters iterations, the time of the slowest of ranks ranks:
 * out[i] = max over r of per_rank[r][i]. A TP step is as slow as its slowest
 * rank, so this is the series a configuration's statistics come from.
 * TP_EINTERNAL for ranks < 1 or iters < 1. */
TP_MUST_CHECK tp_rc tp_stats_slowest_rank(const double *const *per_rank, int ranks, int iters,
                                          double *out);

#endif /* TP_STATS_H */
