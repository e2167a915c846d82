/*
 * test_bench_stats.c — bench/stats: quantiles by linear interpolation
 * (definition 7) on odd and even counts, a single sample, spread and the
 * coefficient of variation, geometric means, the slowest rank per iteration,
 * and the refusal of empty or non-finite input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "bench/stats/stats.h"
#include "tests/cpu/bench_testutil.h"

#define EPS 1e-9

static void test_odd_count(void **state) {
  (void)state;
  const double x[] = {5, 1, 3, 2, 4};
  tp_stats s;
  assert_int_equal(tp_stats_compute(x, 5, &s), TP_OK);
  assert_int_equal(s.n, 5);
  tu_assert_near(s.median, 3.0, EPS);
  tu_assert_near(s.p10, 1.4, EPS); /* h = 0.4: 1 + 0.4 * (2 - 1) */
  tu_assert_near(s.p90, 4.6, EPS); /* h = 3.6: 4 + 0.6 * (5 - 4) */
  tu_assert_near(s.mean, 3.0, EPS);
  tu_assert_near(s.min, 1.0, EPS);
  tu_assert_near(s.max, 5.0, EPS);
  tu_assert_near(s.stddev, sqrt(2.5), EPS);
  tu_assert_near(s.cv, sqrt(2.5) / 3.0, EPS);
  /* The input is left in its order. */
  tu_assert_near(x[0], 5.0, 0);
}

static void test_even_count(void **state) {
  (void)state;
  const double x[] = {4, 1, 3, 2};
  tp_stats s;
  assert_int_equal(tp_stats_compute(x, 4, &s), TP_OK);
  tu_assert_near(s.median, 2.5, EPS); /* mean of the two middle samples */
  tu_assert_near(s.p10, 1.3, EPS);
  tu_assert_near(s.p90, 3.7, EPS);
  tu_assert_near(s.mean, 2.5, EPS);
  tu_assert_near(s.stddev, sqrt(5.0 / 3.0), EPS);
}

static void test_single_sample(void **state) {
  (void)state;
  const double x[] = {7.25};
  tp_stats s;
  assert_int_equal(tp_stats_compute(x, 1, &s), TP_OK);
  tu_assert_near(s.median, 7.25, 0);
  tu_assert_near(s.p10, 7.25, 0);
  tu_assert_near(s.p90, 7.25, 0);
  tu_assert_near(s.min, 7.25, 0);
  tu_assert_near(s.max, 7.25, 0);
  tu_assert_near(s.stddev, 0.0, 0);
  tu_assert_near(s.cv, 0.0, 0);
}

static void test_cv(void **state) {
  (void)state;
  const double equal[] = {10, 10, 10};
  const double spread[] = {90, 100, 110};
  tp_stats s;
  assert_int_equal(tp_stats_compute(equal, 3, &s), TP_OK);
  tu_assert_near(s.cv, 0.0, 0);
  assert_int_equal(tp_stats_compute(spread, 3, &s), TP_OK);
  tu_assert_near(s.stddev, 10.0, EPS);
  tu_assert_near(s.cv, 0.1, EPS);
}

static void test_quantile_endpoints(void **state) {
  (void)state;
  const double sorted[] = {1, 2, 4, 8};
  tu_assert_near(tp_stats_quantile_sorted(sorted, 4, 0.0), 1.0, 0);
  tu_assert_near(tp_stats_quantile_sorted(sorted, 4, 1.0), 8.0, 0);
  tu_assert_near(tp_stats_quantile_sorted(sorted, 4, 0.5), 3.0, EPS);
  tu_assert_near(tp_stats_quantile_sorted(sorted, 4, 0.25), 1.75, EPS);
}

static void test_bad_input(void **state) {
  (void)state;
  const double x[] = {1, NAN, 3};
  tp_stats s;
  assert_int_equal(tp_stats_compute(x, 0, &s), TP_EINTERNAL);
  assert_int_equal(tp_stats_compute(x, 3, &s), TP_EINTERNAL);
  assert_non_null(strstr(tp_last_error(), "sample 1"));
}

static void test_geomean(void **state) {
  (void)state;
  const double a[] = {2, 8};
  const double b[] = {0.5, 2, 1};
  const double bad[] = {1, 0};
  double g = 0;
  assert_int_equal(tp_stats_geomean(a, 2, &g), TP_OK);
  tu_assert_near(g, 4.0, EPS);
  assert_int_equal(tp_stats_geomean(b, 3, &g), TP_OK);
  tu_assert_near(g, 1.0, EPS);
  assert_int_equal(tp_stats_geomean(bad, 2, &g), TP_EINTERNAL);
}

static void test_slowest_rank(void **state) {
  (void)state;
  const double r0[] = {1, 5, 3};
  const double r1[] = {2, 4, 6};
  const double r2[] = {0, 4.5, 6.5};
  const double *ranks[] = {r0, r1, r2};
  double out[3];
  assert_int_equal(tp_stats_slowest_rank(ranks, 3, 3, out), TP_OK);
  tu_assert_near(out[0], 2.0, 0);
  tu_assert_near(out[1], 5.0, 0);
  tu_assert_near(out[2], 6.5, 0);
  assert_int_equal(tp_stats_slowest_rank(ranks, 1, 3, out), TP_OK);
  tu_assert_near(out[1], 5.0, 0);
  assert_int_equal(tp_stats_slowest_rank(ranks, 0, 3, out), TP_EINTERNAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_odd_count),
      cmocka_unit_test(test_even_count),
      cmocka_unit_test(test_single_sample),
      cmocka_unit_test(test_cv),
      cmocka_unit_test(test_quantile_endpoints),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_geomean),
      cmocka_unit_test(test_slowest_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
