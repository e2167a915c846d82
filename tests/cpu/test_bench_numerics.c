/*
 * test_bench_numerics.c — the benchmark's numerics verdicts (bench/stats/numerics.h)
 * fail on every planted fault: an output nothing wrote (poisoned NaN), a NaN
 * in the reference, one zeroed gradient among large ones, a single flipped
 * bit where outputs must be bit-identical; and pass on rounding-size
 * differences.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "bench/stats/numerics.h"

static tp_output_measure measure(double diff2, double ref2, double differ, double nonfinite) {
  return (tp_output_measure){diff2, ref2, sqrt(diff2), differ, nonfinite, 1000.0};
}

/* Judges m as output name under rule and tolerance: the verdict must have
 * status; it is returned for further checks. */
static tp_output_verdict expect_judged(const char *name, tp_output_rule rule, double tolerance,
                                       tp_output_measure m, const char *status) {
  tp_output_verdict v;
  tp_numerics_judge(name, rule, tolerance, &m, &v);
  assert_string_equal(v.status, status);
  return v;
}

static void test_tolerance_rule(void **state) {
  (void)state;
  /* bf16, two ranks summed, K = 4096: 2 * 2^-8 * sqrt(2) + 4 * 2^-24 * 64 */
  double tol = tp_numerics_tolerance(TP_BF16, 4096, 2, 1);
  assert_true(fabs(tol - (2.0 * ldexp(1, -8) * sqrt(2.0) + 4.0 * ldexp(1, -24) * 64.0)) < 1e-12);
  assert_true(tp_numerics_tolerance(TP_FP32, 4096, 2, 1) < 1e-4);
  assert_true(tp_numerics_tolerance(TP_BF16, 4096, 2, 5) > 4.9 * tol);
}

static void test_unwritten_output_fails(void **state) {
  (void)state;
  /* poisoned elements stay NaN: counted as non-finite, diff2 of the rest small */
  tp_output_measure m = measure(0.0, 100.0, 0.0, 17.0);
  tp_output_verdict v = expect_judged("y", TP_RULE_TOLERANCE, 1e-2, m, "failed");
  assert_non_null(strstr(v.reason, "not finite"));
  expect_judged("y", TP_RULE_EXACT, NAN, m, "failed");
}

static void test_nan_in_reference(void **state) {
  (void)state;
  tp_output_verdict v;
  tp_output_measure ref = measure(0.0, 100.0, 0.0, 1.0);
  tp_numerics_judge_reference("dx", &ref, &v);
  assert_string_equal(v.status, "failed");
  assert_string_equal(v.rule, "finite");
  /* a check that nonetheless met a NaN norm never passes */
  expect_judged("dx", TP_RULE_TOLERANCE, 1e-2, measure(NAN, NAN, 0.0, 0.0), "failed");
  /* without a usable reference the check says so */
  tp_numerics_not_checked(TP_RULE_TOLERANCE, "the reference failed", &v);
  assert_string_equal(v.status, "not checked");
  assert_string_equal(v.reason, "the reference failed");
}

static void test_zeroed_gradient_among_large_ones(void **state) {
  (void)state;
  /* dw's norm is 1e6 times dx's: pooled, a zeroed dx would vanish; judged on its own it fails */
  tp_output_measure dw = measure(1e-2, 1e6, 10.0, 0.0);
  tp_output_measure dx = measure(1.0, 1.0, 1000.0, 0.0); /* out = 0: diff = ref */
  double tol = tp_numerics_tolerance(TP_BF16, 8192, 2, 1);
  expect_judged("dw", TP_RULE_TOLERANCE, tol, dw, "ok");
  tp_output_verdict v = expect_judged("dx", TP_RULE_TOLERANCE, tol, dx, "failed");
  assert_true(fabs(v.rel_err - 1.0) < 1e-12);
}

static void test_exact_rule_catches_one_bit(void **state) {
  (void)state;
  expect_judged("y", TP_RULE_EXACT, NAN, measure(1e-12, 100.0, 1.0, 0.0), "failed");
  expect_judged("y", TP_RULE_EXACT, NAN, measure(0.0, 100.0, 0.0, 0.0), "ok");
}

static void test_zero_reference(void **state) {
  (void)state;
  expect_judged("db", TP_RULE_TOLERANCE, 1e-2, measure(1.0, 0.0, 5.0, 0.0), "failed");
  expect_judged("db", TP_RULE_TOLERANCE, 1e-2, measure(0.0, 0.0, 0.0, 0.0), "ok");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tolerance_rule),
      cmocka_unit_test(test_unwritten_output_fails),
      cmocka_unit_test(test_nan_in_reference),
      cmocka_unit_test(test_zeroed_gradient_among_large_ones),
      cmocka_unit_test(test_exact_rule_catches_one_bit),
      cmocka_unit_test(test_zero_reference),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
