/*
 * tp_bootstrap.h — confidence intervals for medians and ratios of medians
 * measured in rounds.
 *
 * A configuration is measured in R rounds of back-to-back iterations.
 * Iterations of one round share that round's conditions (clocks, another
 * rank's host stalls), so they are not independent samples: the interval is a
 * two-stage bootstrap — draw R rounds with replacement, then within each
 * drawn round draw its iterations with replacement — and the percentile
 * interval of the statistic over the resamples. With one round it reduces
 * to the ordinary bootstrap over iterations (and says so: rounds_used = 1).
 *
 * A ratio of two configurations of one case (dist_gemm / stock) pairs the
 * rounds: a drawn round index applies to both, so what drifted between
 * rounds cancels in the ratio as it did in the measurement.
 *
 * Deterministic: the same inputs and seed give the same interval. Pure C.
 */
#ifndef TP_BOOTSTRAP_H
#define TP_BOOTSTRAP_H

#include <stdint.h>

#include "common/tp_error.h"

enum { TP_BOOT_RESAMPLES = 2000 };

/* A series of samples tagged with their round (0 .. n_rounds-1). */
typedef struct tp_round_series {
  const double *x;
  const int *round; /* NULL: every sample is of round 0 */
  int n;
} tp_round_series;

typedef struct tp_interval {
  double point; /* the statistic on the data itself */
  double lo, hi;
  int rounds_used; /* rounds that held samples */
} tp_interval;

/* Median of s with its two-sided `level` (e.g. 0.95) interval.
 * TP_EINTERNAL for no samples, a non-finite sample, a round out of range or
 * level outside (0, 1); TP_EOOM. */
TP_MUST_CHECK tp_rc tp_boot_median(const tp_round_series *s, int n_rounds, double level,
                                   uint64_t seed, tp_interval *out);

/* median(a) / median(b) with its interval, rounds paired (a round that has
 * samples in only one of the two is left out of the resampling; none in
 * common: TP_EINTERNAL). */
TP_MUST_CHECK tp_rc tp_boot_ratio(const tp_round_series *a, const tp_round_series *b, int n_rounds,
                                  double level, uint64_t seed, tp_interval *out);

#endif /* TP_BOOTSTRAP_H */
