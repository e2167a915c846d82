/*
 * test_bench_progress_line.c — bench/launch/progress_line: clocks in mm:ss
 * and h:mm:ss, the estimate of the time left from the time per
 * configuration so far (a resumed job counting from its own start), and the
 * line cut to the terminal's width without breaking its numbers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "bench/launch/progress_line.h"

static void test_clock(void **state) {
  (void)state;
  char c[16];
  tp_progress_clock(0, c, sizeof c);
  assert_string_equal(c, "00:00");
  tp_progress_clock(65.4, c, sizeof c);
  assert_string_equal(c, "01:05");
  tp_progress_clock(3599.6, c, sizeof c);
  assert_string_equal(c, "1:00:00");
  tp_progress_clock(3 * 3600 + 2 * 60 + 1, c, sizeof c);
  assert_string_equal(c, "3:02:01");
  tp_progress_clock(-1, c, sizeof c);
  assert_string_equal(c, "--:--");
  tp_progress_clock(NAN, c, sizeof c);
  assert_string_equal(c, "--:--");
}

static void test_estimate(void **state) {
  (void)state;
  assert_true(tp_progress_left(10.0, 0, 5) < 0); /* nothing done yet: unknown */
  assert_float_equal(tp_progress_left(60.0, 4, 12), 180.0, 1e-9);
  assert_float_equal(tp_progress_left(60.0, 4, 0), 0.0, 1e-9);
}

static void test_line(void **state) {
  (void)state;
  char line[160];
  /* 12 of 448 done, 3 of them by this process in 90 s: 30 s each, 436 left. */
  tp_progress_line(line, sizeof line, 12, 448, 3, 90.0, "8b qkv fwd bf16 tp2 dist_gemm ce", 0);
  assert_string_equal(line,
                      "[12/448] elapsed 01:30, left ~3:38:00 (8b qkv fwd bf16 tp2 dist_gemm ce)");
  tp_progress_line(line, sizeof line, 0, 10, 0, 2.0, "first", 0);
  assert_string_equal(line, "[0/10] elapsed 00:02, left ~--:-- (first)");
  tp_progress_line(line, sizeof line, 10, 10, 10, 50.0, NULL, 0);
  assert_string_equal(line, "[10/10] elapsed 00:50, left ~00:00");
  /* 40 columns: the label is cut, the numbers never. */
  tp_progress_line(line, sizeof line, 1, 2, 1, 5.0, "abcdefghijklmnopqrstuvwxyz", 40);
  assert_string_equal(line, "[1/2] elapsed 00:05, left ~00:05 (ab...)");
  assert_true(strlen(line) <= 40);
  tp_progress_line(line, sizeof line, 1, 2, 1, 5.0, "a long label", 38);
  assert_string_equal(line, "[1/2] elapsed 00:05, left ~00:05");
  /* A small buffer is never overrun. */
  char tiny[12];
  tp_progress_line(tiny, sizeof tiny, 1, 2, 1, 5.0, "x", 0);
  assert_int_equal(strlen(tiny), sizeof tiny - 1);
}

/* Which lines a run prints: on a terminal the updating line and failures (every configuration
 * with --verbose); off one a line per configuration; nothing on other ranks or with --quiet. */
static void test_style(void **state) {
  (void)state;
  static const struct {
    int rank, quiet, verbose, tty;
    tp_progress_style want;
  } cases[] = {
      {0, 0, 0, 1, {1, 0, 1}}, /* a terminal: one updating line, failures above it */
      {0, 0, 1, 1, {1, 1, 0}}, /* --verbose: every configuration too */
      {0, 0, 0, 0, {0, 1, 0}}, /* a log or a pipe: a line per configuration */
      {0, 0, 1, 0, {0, 1, 0}}, {0, 1, 1, 1, {0, 0, 0}}, /* --quiet wins */
      {1, 0, 1, 1, {0, 0, 0}},                          /* other ranks print nothing */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    tp_progress_style got =
        tp_progress_style_for(cases[i].rank, cases[i].quiet, cases[i].verbose, cases[i].tty);
    if (got.line != cases[i].want.line || got.every_config != cases[i].want.every_config ||
        got.failures_only != cases[i].want.failures_only)
      fail_msg("case %zu: line %d every %d failures %d", i, got.line, got.every_config,
               got.failures_only);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_style),
      cmocka_unit_test(test_clock),
      cmocka_unit_test(test_estimate),
      cmocka_unit_test(test_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
