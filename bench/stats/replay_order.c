/*
 * replay_order.c — seeded orders of rounds and mixed windows (see
 * replay_order.h).
 */
#include "bench/stats/replay_order.h"

void tp_shuffle_ints(int *a, int n, uint64_t state) {
  for (int i = n - 1; i > 0; --i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    int j = (int)((state >> 33) % (uint64_t)(i + 1));
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

void tp_mixed_order(int k, int each, uint64_t state, int *order) {
  const int total = k * each;
  for (int i = 0; i < total; ++i) order[i] = i % k;
  tp_shuffle_ints(order, total, state);
}

int tp_mixed_samples(const int *order, int total, int m, const double *value, double *out) {
  int j = 0;
  for (int i = 0; i < total; ++i)
    if (order[i] == m) out[j++] = value[i];
  return j;
}
