/*
 * replay_order.h — the seeded orders the harness measures in: the order of a
 * round's configurations (shuffled by seed, case and round), and the order of
 * a mixed window's replays (graphs of several sizes on one workspace: each
 * size's graph a number of times, interleaved), with the split of a mixed
 * window's per-replay times back into each size's samples.
 *
 * A linear congruential generator drives a Fisher-Yates shuffle, so every
 * rank computes the same order from the same state. Pure C, no state.
 */
#ifndef TP_REPLAY_ORDER_H
#define TP_REPLAY_ORDER_H

#include <stdint.h>

/* Shuffles a[0..n) (Fisher-Yates) from the generator's state. */
void tp_shuffle_ints(int *a, int n, uint64_t state);

/* A mixed window of k members, each `each` times: order[0..k*each) holds
 * member indices, every one `each` times, shuffled from state. */
void tp_mixed_order(int k, int each, uint64_t state, int *order);

/* Member m's samples of a mixed window, in replay order: out[j] = value[i]
 * for the j-th i with order[i] == m. Returns how many (each, for an order
 * of tp_mixed_order). */
int tp_mixed_samples(const int *order, int total, int m, const double *value, double *out);

#endif /* TP_REPLAY_ORDER_H */
