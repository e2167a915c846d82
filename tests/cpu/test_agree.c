/*
 * test_agree.c — the allocation agreement of kernels/tp_agree.h on the CPU:
 * threads stand in for the ranks of a group and meet in a real all-gather
 * (a shared buffer between two barriers). Every rank succeeding agrees;
 * one rank failing makes every rank fail with that rank's code, a reason
 * naming it (and only the failing ranks), the size and its own message;
 * two ranks failing name both and take the first one's code; a failed
 * exchange is returned as it is; and the planted failure's knob
 * (TPBENCH_TEST_FAIL_ALLOC) parses RANK[:MIN_BYTES], refuses anything else
 * and fails only that rank's allocations from the threshold up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kernels/tp_agree.h"

enum { RANKS = 4, SLOT = 512 };

/* ---- an all-gather among threads ----------------------------------------------------- */

typedef struct meeting {
  pthread_barrier_t in, out;
  unsigned char slots[RANKS][SLOT];
  int world;
} meeting;

typedef struct rank_ctx {
  meeting *m;
  int rank;
  tp_rc local;  /* this rank's allocation outcome */
  tp_rc agreed; /* tp_agree_alloc's answer */
  char reason[1024];
  int break_exchange; /* the exchange fails on this rank */
} rank_ctx;

static tp_rc thread_exchange(void *ctx, const void *send, size_t bytes, void *recv) {
  rank_ctx *rc = ctx;
  meeting *m = rc->m;
  if (rc->break_exchange) return TP_FAIL(TP_EIO, "the exchange broke (test)");
  if (bytes > SLOT) return TP_FAIL(TP_EINTERNAL, "%zu bytes, slot %d", bytes, SLOT);
  memcpy(m->slots[rc->rank], send, bytes);
  pthread_barrier_wait(&m->in);
  for (int r = 0; r < m->world; ++r) memcpy((char *)recv + (size_t)r * bytes, m->slots[r], bytes);
  pthread_barrier_wait(&m->out);
  return TP_OK;
}

static void *rank_main(void *arg) {
  rank_ctx *c = arg;
  /* the local failure's message is this thread's last error, as in a worker */
  tp_rc local = c->local == TP_OK ? TP_OK
                                  : TP_FAIL(c->local,
                                            "cudaMalloc of 4096 bytes on rank %d: no "
                                            "memory (test)",
                                            c->rank);
  c->agreed = tp_agree_alloc(thread_exchange, c, c->rank, c->m->world, local, "test window", 4096);
  snprintf(c->reason, sizeof c->reason, "%s", c->agreed == TP_OK ? "" : tp_last_message());
  return NULL;
}

/* Runs world ranks with the outcomes given (TP_OK or a failure code). */
static void run_ranks(int world, const tp_rc *local, rank_ctx *ranks) {
  meeting m;
  memset(&m, 0, sizeof m);
  m.world = world;
  assert_int_equal(pthread_barrier_init(&m.in, NULL, (unsigned)world), 0);
  assert_int_equal(pthread_barrier_init(&m.out, NULL, (unsigned)world), 0);
  pthread_t threads[RANKS];
  for (int r = 0; r < world; ++r) {
    memset(&ranks[r], 0, sizeof ranks[r]);
    ranks[r] = (rank_ctx){.m = &m, .rank = r, .local = local[r]};
    assert_int_equal(pthread_create(&threads[r], NULL, rank_main, &ranks[r]), 0);
  }
  for (int r = 0; r < world; ++r) pthread_join(threads[r], NULL);
  pthread_barrier_destroy(&m.in);
  pthread_barrier_destroy(&m.out);
}

static void test_all_succeed(void **state) {
  (void)state;
  const tp_rc local[RANKS] = {TP_OK, TP_OK, TP_OK, TP_OK};
  rank_ctx ranks[RANKS];
  run_ranks(RANKS, local, ranks);
  for (int r = 0; r < RANKS; ++r) assert_int_equal(ranks[r].agreed, TP_OK);
}

static void test_one_rank_fails(void **state) {
  (void)state;
  const tp_rc local[2] = {TP_OK, TP_EOOM};
  rank_ctx ranks[RANKS];
  run_ranks(2, local, ranks);
  for (int r = 0; r < 2; ++r) {
    assert_int_equal(ranks[r].agreed, TP_EOOM);
    assert_non_null(strstr(ranks[r].reason, "test window of 4096 bytes failed on rank 1 of 2"));
    assert_non_null(strstr(ranks[r].reason, "rank 1: cudaMalloc of 4096 bytes on rank 1"));
    assert_non_null(strstr(ranks[r].reason, "every rank frees what it allocated"));
    assert_null(strstr(ranks[r].reason, "rank 0"));
  }
  /* the words are the same on every rank */
  assert_string_equal(ranks[0].reason, ranks[1].reason);
}

static void test_two_ranks_fail(void **state) {
  (void)state;
  const tp_rc local[RANKS] = {TP_OK, TP_ENCCL, TP_OK, TP_EOOM};
  rank_ctx ranks[RANKS];
  run_ranks(RANKS, local, ranks);
  for (int r = 0; r < RANKS; ++r) {
    assert_int_equal(ranks[r].agreed, TP_ENCCL); /* the first failing rank's code */
    assert_non_null(strstr(ranks[r].reason, "failed on ranks 1, 3 of 4: rank 1: "));
    assert_string_equal(ranks[r].reason, ranks[0].reason);
  }
}

static void test_exchange_failure_passes(void **state) {
  (void)state;
  meeting m;
  memset(&m, 0, sizeof m);
  m.world = 1;
  rank_ctx c = {.m = &m, .rank = 0, .local = TP_OK, .break_exchange = 1};
  assert_int_equal(tp_agree_alloc(thread_exchange, &c, 0, 1, TP_OK, "w", 1), TP_EIO);
  assert_non_null(strstr(tp_last_message(), "the exchange broke"));
  assert_int_equal(tp_agree_alloc(thread_exchange, &c, 2, 2, TP_OK, "w", 1), TP_EINTERNAL);
  assert_int_equal(tp_agree_alloc(thread_exchange, &c, 0, TP_AGREE_MAX_WORLD + 1, TP_OK, "w", 1),
                   TP_EINTERNAL);
}

static void test_one_rank_group(void **state) {
  (void)state;
  const tp_rc local[1] = {TP_EOOM};
  rank_ctx ranks[RANKS];
  run_ranks(1, local, ranks);
  assert_int_equal(ranks[0].agreed, TP_EOOM);
  assert_non_null(strstr(ranks[0].reason, "failed on rank 0 of 1: rank 0: "));
}

/* ---- the knob ---------------------------------------------------------------------------- */

static void test_knob_parse(void **state) {
  (void)state;
  tp_fail_alloc k;
  assert_int_equal(tp_fail_alloc_parse(NULL, 2, &k), TP_OK);
  assert_int_equal(k.rank, -1);
  assert_false(tp_fail_alloc_hits(&k, 0, 1u << 30));
  assert_int_equal(tp_fail_alloc_parse("", 2, &k), TP_OK);
  assert_int_equal(k.rank, -1);
  assert_int_equal(tp_fail_alloc_parse("1", 2, &k), TP_OK);
  assert_int_equal(k.rank, 1);
  assert_int_equal(k.min_bytes, 0);
  assert_int_equal(tp_fail_alloc_parse("0:1048576", 2, &k), TP_OK);
  assert_int_equal(k.rank, 0);
  assert_int_equal(k.min_bytes, 1048576);
  const char *bad[] = {"2", "-1", "x", "1:", "1:x", "1:5x", ":5", "1:-5", "1 ", "1:2:3",
                       /* only digits: no sign, no blank, no number past uint64_t (strtoull
                        * would make it UINT64_MAX, a planted failure that never fires) */
                       " 1", "+1", "-0", "0:18446744073709551616", "0:99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    assert_int_equal(tp_fail_alloc_parse(bad[i], 2, &k), TP_EUSAGE);
    assert_non_null(strstr(tp_last_message(), "TPBENCH_TEST_FAIL_ALLOC="));
    assert_non_null(strstr(tp_last_message(), "RANK[:MIN_BYTES]"));
  }
}

static void test_knob_hits(void **state) {
  (void)state;
  tp_fail_alloc k;
  assert_int_equal(tp_fail_alloc_parse("1:1000", 2, &k), TP_OK);
  assert_false(tp_fail_alloc_hits(&k, 0, 5000)); /* another rank */
  assert_false(tp_fail_alloc_hits(&k, 1, 999));  /* below the threshold */
  assert_true(tp_fail_alloc_hits(&k, 1, 1000));
  assert_int_equal(tp_fail_alloc_check(&k, 1, "ncclMemAlloc", 999), TP_OK);
  assert_int_equal(tp_fail_alloc_check(&k, 1, "ncclMemAlloc", 4096), TP_EOOM);
  assert_non_null(strstr(tp_last_message(), "ncclMemAlloc of 4096 bytes on rank 1"));
  assert_non_null(strstr(tp_last_message(), "planted failure of TPBENCH_TEST_FAIL_ALLOC=1:1000"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_succeed),    cmocka_unit_test(test_one_rank_fails),
      cmocka_unit_test(test_two_ranks_fail), cmocka_unit_test(test_exchange_failure_passes),
      cmocka_unit_test(test_one_rank_group), cmocka_unit_test(test_knob_parse),
      cmocka_unit_test(test_knob_hits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
