/*
 * test_bench_replay_order.c — bench/stats/replay_order: the round shuffle
 * pinned to the order stored runs were measured in, a mixed window's order
 * (each member exactly its count, interleaved, the same from the same state
 * and another from another), and the split of a window's per-replay times
 * back into each member's samples in replay order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <string.h>

#include "bench/stats/replay_order.h"

/* Seed 1 (the default), case 0, round 0: the harness's state 1 ^ 0x9e37. */
static void test_round_shuffle_pinned(void **state) {
  (void)state;
  int a[6] = {0, 1, 2, 3, 4, 5};
  tp_shuffle_ints(a, 6, 1ull ^ 0x9e37ull);
  const int want[6] = {3, 0, 1, 5, 2, 4};
  assert_memory_equal(a, want, sizeof want);
  int one[1] = {7};
  tp_shuffle_ints(one, 1, 99);
  assert_int_equal(one[0], 7);
}

static int count_of(const int *order, int n, int m) {
  int c = 0;
  for (int i = 0; i < n; ++i) c += order[i] == m;
  return c;
}

static int switches(const int *order, int n) {
  int s = 0;
  for (int i = 1; i < n; ++i) s += order[i] != order[i - 1];
  return s;
}

static void test_mixed_order(void **state) {
  (void)state;
  enum { K = 3, EACH = 4, N = K * EACH };
  int order[N], again[N], other[N];
  tp_mixed_order(K, EACH, 42, order);
  const int want[N] = {2, 1, 0, 2, 0, 1, 2, 0, 0, 2, 1, 1};
  assert_memory_equal(order, want, sizeof want);
  for (int m = 0; m < K; ++m) assert_int_equal(count_of(order, N, m), EACH);
  assert_true(switches(order, N) >= N / 2); /* interleaved, not size after size */
  tp_mixed_order(K, EACH, 42, again);
  assert_memory_equal(order, again, sizeof order);
  tp_mixed_order(K, EACH, 43, other);
  assert_memory_not_equal(order, other, sizeof order);
  for (int m = 0; m < K; ++m) assert_int_equal(count_of(other, N, m), EACH);
  /* Many replays: every member its count, whatever the state. */
  static int big[8 * 500];
  for (uint64_t s = 0; s < 20; ++s) {
    tp_mixed_order(8, 500, s * 7919u, big);
    for (int m = 0; m < 8; ++m) assert_int_equal(count_of(big, 8 * 500, m), 500);
    assert_true(switches(big, 8 * 500) > 8 * 500 / 2);
  }
}

static void test_mixed_samples(void **state) {
  (void)state;
  const int order[] = {1, 0, 1, 2, 0, 2};
  const double value[] = {10, 20, 30, 40, 50, 60};
  double out[6];
  memset(out, 0, sizeof out);
  assert_int_equal(tp_mixed_samples(order, 6, 0, value, out), 2);
  assert_true(out[0] == 20 && out[1] == 50);
  assert_int_equal(tp_mixed_samples(order, 6, 1, value, out), 2);
  assert_true(out[0] == 10 && out[1] == 30);
  assert_int_equal(tp_mixed_samples(order, 6, 2, value, out), 2);
  assert_true(out[0] == 40 && out[1] == 60);
  assert_int_equal(tp_mixed_samples(order, 6, 3, value, out), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_shuffle_pinned),
      cmocka_unit_test(test_mixed_order),
      cmocka_unit_test(test_mixed_samples),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
