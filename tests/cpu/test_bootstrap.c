/*
 * test_bootstrap.c — the two-stage bootstrap (common/tp_bootstrap.h): the
 * interval holds the point, narrows with agreeing rounds and widens when
 * rounds disagree, pairing by round cancels drift shared by both series,
 * the median is the one sorting gives, and bad input is refused.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "common/tp_bootstrap.h"

enum { ROUNDS = 3, ITERS = 40, N = ROUNDS * ITERS };

/* Deterministic noise in [-1, 1). */
static double noise(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*s >> 11) / (double)(1ull << 52) - 1.0;
}

/* base * (1 + round_shift[r]) * (1 + jitter * noise) per sample. */
static void make_series(double *x, int *round, double base, const double *shift, double jitter,
                        uint64_t seed) {
  uint64_t s = seed;
  for (int r = 0; r < ROUNDS; ++r)
    for (int i = 0; i < ITERS; ++i) {
      x[r * ITERS + i] = base * (1.0 + shift[r]) * (1.0 + jitter * noise(&s));
      round[r * ITERS + i] = r;
    }
}

/* The 95 % interval of the median of a series make_series makes (base,
 * shift, jitter, seed), resampled with boot_seed. */
static tp_interval median_interval(double base, const double *shift, double jitter, uint64_t seed,
                                   uint64_t boot_seed) {
  double x[N];
  int round[N];
  make_series(x, round, base, shift, jitter, seed);
  tp_round_series s = {x, round, N};
  tp_interval iv;
  assert_int_equal(tp_boot_median(&s, ROUNDS, 0.95, boot_seed, &iv), TP_OK);
  return iv;
}

static void test_median_interval_holds_point_and_is_narrow(void **state) {
  (void)state;
  const double flat[ROUNDS] = {0, 0, 0};
  tp_interval iv = median_interval(1000.0, flat, 0.01, 1, 7);
  assert_true(iv.lo <= iv.point && iv.point <= iv.hi);
  assert_true((iv.hi - iv.lo) / iv.point < 0.01);
  assert_int_equal(iv.rounds_used, ROUNDS);
}

static void test_disagreeing_rounds_widen_the_interval(void **state) {
  (void)state;
  const double shifted[ROUNDS] = {0, 0.05, -0.05};
  tp_interval iv = median_interval(1000.0, shifted, 0.01, 1, 7);
  /* an iteration bootstrap alone would give under 1 %: rounds are not independent samples */
  assert_true((iv.hi - iv.lo) / iv.point > 0.04);
}

static void test_paired_ratio_cancels_shared_drift(void **state) {
  (void)state;
  double a[N], b[N];
  int ra[N], rb[N];
  const double drift[ROUNDS] = {0, 0.08, -0.06};
  make_series(a, ra, 1100.0, drift, 0.005, 1);
  make_series(b, rb, 1000.0, drift, 0.005, 2);
  tp_round_series sa = {a, ra, N}, sb = {b, rb, N};
  tp_interval iv;
  assert_int_equal(tp_boot_ratio(&sa, &sb, ROUNDS, 0.95, 7, &iv), TP_OK);
  assert_true(fabs(iv.point - 1.1) < 0.01);
  assert_true(iv.lo < 1.1 && 1.1 < iv.hi);
  assert_true(iv.hi - iv.lo < 0.02); /* the 14 % drift between rounds cancels */
  /* identical series: the interval holds 1 */
  assert_int_equal(tp_boot_ratio(&sb, &sb, ROUNDS, 0.95, 7, &iv), TP_OK);
  assert_true(iv.lo <= 1.0 && 1.0 <= iv.hi);
}

static void test_deterministic(void **state) {
  (void)state;
  const double flat[ROUNDS] = {0, 0.01, 0};
  tp_interval a = median_interval(500.0, flat, 0.02, 3, 11);
  tp_interval b = median_interval(500.0, flat, 0.02, 3, 11);
  assert_true(a.lo == b.lo && a.hi == b.hi && a.point == b.point);
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median comes from selection, not sorting: it must be the value sorting
 * gives, bit for bit, at every size (odd, even, one) and with ties. */
static void test_median_is_the_sorted_median(void **state) {
  (void)state;
  uint64_t s = 7;
  for (int n = 1; n <= 97; n++) {
    for (int ties = 0; ties <= 1; ties++) {
      double x[97], sorted[97];
      int round[97] = {0};
      for (int i = 0; i < n; i++)
        x[i] = sorted[i] = ties ? (double)(int)(4 * noise(&s)) : 100.0 + noise(&s);
      qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
      const double expected = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
      tp_round_series series = {x, round, n};
      tp_interval iv;
      assert_int_equal(tp_boot_median(&series, 1, 0.95, 3, &iv), TP_OK);
      if (iv.point != expected)
        fail_msg("n %d ties %d: %.17g, sorted %.17g", n, ties, iv.point, expected);
    }
  }
}

static void test_bad_input_refused(void **state) {
  (void)state;
  double x[2] = {1.0, NAN};
  int round[2] = {0, 0};
  tp_round_series s = {x, round, 2};
  tp_interval iv;
  assert_int_equal(tp_boot_median(&s, 1, 0.95, 1, &iv), TP_EINTERNAL); /* NaN sample */
  x[1] = 2.0;
  round[1] = 3;
  assert_int_equal(tp_boot_median(&s, 2, 0.95, 1, &iv), TP_EINTERNAL); /* round out of range */
  round[1] = 0;
  assert_int_equal(tp_boot_median(&s, 1, 1.5, 1, &iv), TP_EINTERNAL); /* level */
  tp_round_series empty = {x, round, 0};
  assert_int_equal(tp_boot_median(&empty, 1, 0.95, 1, &iv), TP_EINTERNAL);
  /* no round in common */
  int r0[2] = {0, 0}, r1[2] = {1, 1};
  tp_round_series a = {x, r0, 2}, b = {x, r1, 2};
  assert_int_equal(tp_boot_ratio(&a, &b, 2, 0.95, 1, &iv), TP_EINTERNAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_median_interval_holds_point_and_is_narrow),
      cmocka_unit_test(test_disagreeing_rounds_widen_the_interval),
      cmocka_unit_test(test_paired_ratio_cancels_shared_drift),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_median_is_the_sorted_median),
      cmocka_unit_test(test_bad_input_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
