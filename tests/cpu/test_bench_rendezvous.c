/*
 * test_bench_rendezvous.c — bench/rendezvous with three ranks as forked
 * processes on loopback: allgather, broadcast and barrier deliver the right
 * bytes (rank 0 starting last, sizes from 0 bytes to 1 MiB); and every way a
 * job goes wrong ends in an error naming the rank at fault, well within the
 * deadline, never a hang: a rank that exits early, one killed mid-job, one
 * that never comes, one that is late, and ranks that call different
 * collectives.
 *
 * Each rank writes what happened to shared memory; the test process only
 * forks, waits (with a deadline) and checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "bench/rendezvous.h"
#include "bench_testutil.h"

enum { WORLD = 3, MAX_BYTES = 1 << 20 };

typedef struct rank_result {
  int done;     /* the rank reached the end of its script */
  int rc;       /* tp_rc of the first failing call, TP_OK if none */
  int bad_data; /* a collective delivered wrong bytes */
  int64_t ms;   /* from start to the failure (or the end) */
  char msg[512];
} rank_result;

typedef enum {
  SCRIPT_GOOD,       /* many collectives, all checked */
  SCRIPT_EXIT_EARLY, /* rank 2 exits after joining */
  SCRIPT_KILLED,     /* rank 2 is killed after the first collective */
  SCRIPT_NEVER,      /* rank 2 never starts */
  SCRIPT_LATE,       /* rank 2 joins a collective after the timeout */
  SCRIPT_DISAGREE    /* rank 1 calls barrier where the others allgather */
} script;

typedef struct job {
  int port;
  int timeout_ms;
  script what;
  rank_result *results;
} job;

static unsigned char pattern(int rank, int round, size_t i) {
  return (unsigned char)(rank * 31 + round * 7 + (int)(i % 251));
}

static int check_allgather(tp_rdzv *z, int rank, int round, size_t bytes, unsigned char *send,
                           unsigned char *recv, rank_result *res) {
  for (size_t i = 0; i < bytes; i++) send[i] = pattern(rank, round, i);
  tp_rc rc = tp_rdzv_allgather(z, send, bytes, recv);
  if (rc != TP_OK) return rc;
  for (int r = 0; r < WORLD; r++)
    for (size_t i = 0; i < bytes; i++)
      if (recv[(size_t)r * bytes + i] != pattern(r, round, i)) res->bad_data = 1;
  return TP_OK;
}

static int check_broadcast(tp_rdzv *z, int rank, int root, int round, size_t bytes,
                           unsigned char *buf, rank_result *res) {
  for (size_t i = 0; i < bytes; i++) buf[i] = rank == root ? pattern(root, round, i) : 0xEE;
  tp_rc rc = tp_rdzv_broadcast(z, root, buf, bytes);
  if (rc != TP_OK) return rc;
  for (size_t i = 0; i < bytes; i++)
    if (buf[i] != pattern(root, round, i)) res->bad_data = 1;
  return TP_OK;
}

/* The good script: sizes that cross socket buffer sizes, every root. */
static tp_rc run_good(tp_rdzv *z, int rank, rank_result *res) {
  static const size_t sizes[] = {0, 1, 16, 4096, 65536 + 3, MAX_BYTES};
  unsigned char *send = malloc(MAX_BYTES), *recv = malloc((size_t)WORLD * MAX_BYTES);
  tp_rc rc = send && recv ? TP_OK : TP_EOOM;
  for (int i = 0; rc == TP_OK && i < (int)(sizeof sizes / sizeof sizes[0]); i++) {
    rc = check_allgather(z, rank, i, sizes[i], send, recv, res);
    if (rc == TP_OK) rc = check_broadcast(z, rank, i % WORLD, i, sizes[i], send, res);
    if (rc == TP_OK) rc = tp_rdzv_barrier(z);
  }
  free(send);
  free(recv);
  return rc;
}

static tp_rc run_script(const job *j, int rank, tp_rdzv *z, rank_result *res) {
  unsigned char send[8] = {0}, recv[8 * WORLD];
  switch (j->what) {
  case SCRIPT_GOOD: return run_good(z, rank, res);
  case SCRIPT_EXIT_EARLY:
    if (rank == 2) _exit(0); /* leaves without a word */
    return tp_rdzv_allgather(z, send, sizeof send, recv);
  case SCRIPT_KILLED:
    TP_TRY(tp_rdzv_allgather(z, send, sizeof send, recv));
    if (rank == 2) kill(getpid(), SIGKILL);
    return tp_rdzv_allgather(z, send, sizeof send, recv);
  case SCRIPT_LATE:
    if (rank == 2) tu_sleep_ms(j->timeout_ms * 4);
    return tp_rdzv_allgather(z, send, sizeof send, recv);
  case SCRIPT_DISAGREE:
    if (rank == 1) return tp_rdzv_barrier(z);
    return tp_rdzv_allgather(z, send, sizeof send, recv);
  case SCRIPT_NEVER: return tp_rdzv_barrier(z);
  }
  return TP_EINTERNAL;
}

static _Noreturn void rank_main(const job *j, int rank) {
  rank_result *res = &j->results[rank];
  int64_t start = tu_now_ms();
  /* Rank 0 comes last: the others must keep trying to connect. */
  if (rank == 0) tu_sleep_ms(300);
  tp_rdzv *z = NULL;
  tp_rc rc = tp_rdzv_connect("127.0.0.1", j->port, rank, WORLD, j->timeout_ms, &z);
  if (rc == TP_OK) {
    if (tp_rdzv_rank(z) != rank || tp_rdzv_world(z) != WORLD) res->bad_data = 1;
    rc = run_script(j, rank, z, res);
  }
  res->rc = rc;
  res->ms = tu_now_ms() - start;
  if (rc != TP_OK) snprintf(res->msg, sizeof res->msg, "%s", tp_last_error());
  res->done = 1;
  tp_rdzv_close(z);
  _exit(0);
}

/* Runs the script on WORLD ranks (skipping rank 2 for SCRIPT_NEVER) and
 * returns their results (shared memory, reused across tests). */
static rank_result *run_job(script what, int timeout_ms) {
  static rank_result *results;
  if (!results) results = tu_shared(sizeof(rank_result) * WORLD);
  assert_non_null(results);
  memset(results, 0, sizeof(rank_result) * WORLD);
  job j = {.timeout_ms = timeout_ms, .what = what, .results = results};
  assert_int_equal(tp_find_free_port(&j.port), TP_OK);
  pid_t pids[WORLD] = {0};
  int ranks = what == SCRIPT_NEVER ? WORLD - 1 : WORLD;
  for (int r = 0; r < ranks; r++) {
    pids[r] = fork();
    assert_true(pids[r] >= 0);
    if (pids[r] == 0) rank_main(&j, r);
  }
  /* Every rank must be done long before this: a hang fails the test. */
  for (int r = 0; r < ranks; r++) assert_int_not_equal(tu_wait_child(pids[r], 30000), -1);
  return results;
}

static void expect_failure(const rank_result *res, int rank, int max_ms, const char *needle) {
  if (!res->done) fail_msg("rank %d did not finish its script", rank);
  if (res->rc == TP_OK) fail_msg("rank %d succeeded where it should fail", rank);
  if (!strstr(res->msg, needle)) fail_msg("rank %d: '%s' not in '%s'", rank, needle, res->msg);
  if (res->ms > max_ms) fail_msg("rank %d failed only after %lld ms", rank, (long long)res->ms);
}

static void test_collectives_deliver(void **state) {
  (void)state;
  rank_result *res = run_job(SCRIPT_GOOD, 10000);
  for (int r = 0; r < WORLD; r++) {
    if (res[r].rc != TP_OK) fail_msg("rank %d: %s", r, res[r].msg);
    assert_true(res[r].done);
    assert_false(res[r].bad_data);
  }
}

static void test_rank_exits_early(void **state) {
  (void)state;
  rank_result *res = run_job(SCRIPT_EXIT_EARLY, 10000);
  /* Prompt: the server sees the socket close, no need to wait for the timeout. */
  for (int r = 0; r < 2; r++) {
    expect_failure(&res[r], r, 5000, "rank 2");
    assert_int_equal(res[r].rc, TP_EIO);
  }
}

static void test_rank_killed(void **state) {
  (void)state;
  rank_result *res = run_job(SCRIPT_KILLED, 10000);
  for (int r = 0; r < 2; r++) {
    expect_failure(&res[r], r, 5000, "rank 2");
    assert_int_equal(res[r].rc, TP_EIO);
  }
}

static void test_rank_never_comes(void **state) {
  (void)state;
  rank_result *res = run_job(SCRIPT_NEVER, 1500);
  for (int r = 0; r < 2; r++) {
    expect_failure(&res[r], r, 1500 + 2000, "2");
    assert_int_equal(res[r].rc, TP_ETIMEOUT);
  }
  assert_non_null(strstr(res[0].msg, "rank(s) 2"));
}

static void test_rank_late(void **state) {
  (void)state;
  rank_result *res = run_job(SCRIPT_LATE, 1000);
  for (int r = 0; r < 2; r++) {
    expect_failure(&res[r], r, 300 + 1000 + 2000, "waiting for rank(s) 2");
    assert_int_equal(res[r].rc, TP_ETIMEOUT);
  }
}

static void test_ranks_disagree(void **state) {
  (void)state;
  rank_result *res = run_job(SCRIPT_DISAGREE, 10000);
  for (int r = 0; r < WORLD; r++) expect_failure(&res[r], r, 5000, "disagree");
  assert_non_null(strstr(res[0].msg, "rank 1 barrier"));
}

static void test_bad_arguments(void **state) {
  (void)state;
  tp_rdzv *z = (tp_rdzv *)&z;
  assert_int_equal(tp_rdzv_connect("127.0.0.1", 1234, 3, 3, 1000, &z), TP_EUSAGE);
  assert_null(z);
  assert_int_equal(tp_rdzv_connect("127.0.0.1", 0, 0, 1, 1000, &z), TP_EUSAGE);
  assert_int_equal(tp_rdzv_connect("127.0.0.1", 1234, 0, 1, 0, &z), TP_EUSAGE);
  assert_int_equal(tp_rdzv_connect("", 1234, 0, 1, 1000, &z), TP_EUSAGE);
  /* An unknown host fails at once; a resolver that cannot be reached retries till the deadline. */
  tp_rc rc = tp_rdzv_connect("no-such-host.invalid", 1234, 1, 2, 1000, &z);
  assert_true(rc == TP_EIO || rc == TP_ETIMEOUT);
  tp_rdzv_close(NULL);
}

static void test_world_of_one(void **state) {
  (void)state;
  int port = 0;
  assert_int_equal(tp_find_free_port(&port), TP_OK);
  assert_true(port > 0 && port < 65536);
  tp_rdzv *z = NULL;
  assert_int_equal(tp_rdzv_connect("localhost", port, 0, 1, 5000, &z), TP_OK);
  int mine = 42, all = 0;
  assert_int_equal(tp_rdzv_allgather(z, &mine, sizeof mine, &all), TP_OK);
  assert_int_equal(all, 42);
  assert_int_equal(tp_rdzv_broadcast(z, 1, &mine, sizeof mine), TP_EUSAGE);
  assert_int_equal(tp_rdzv_barrier(z), TP_OK);
  tp_rdzv_close(z);
  /* The port is free again for the next job (SO_REUSEADDR). */
  assert_int_equal(tp_rdzv_connect("127.0.0.1", port, 0, 1, 5000, &z), TP_OK);
  tp_rdzv_close(z);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_collectives_deliver), cmocka_unit_test(test_rank_exits_early),
      cmocka_unit_test(test_rank_killed),         cmocka_unit_test(test_rank_never_comes),
      cmocka_unit_test(test_rank_late),           cmocka_unit_test(test_ranks_disagree),
      cmocka_unit_test(test_bad_arguments),       cmocka_unit_test(test_world_of_one),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
