/*
 * test_bench_rendezvous.c — bench/rendezvous with three ranks as forked
 * processes on loopback: allgather, broadcast and barrier deliver the right
 * bytes (rank 0 starting last, sizes from 0 bytes to 1 MiB); and every way a
 * job goes wrong ends in an error naming the rank at fault, well within the
 * deadline, never a hang: a rank that exits early, one killed mid-job, one
 * that never comes, one that is late, and ranks that call different
 * collectives.
 *
 * The attacks on the rendezvous, reproduced over 127.0.0.1 (issue 11, item
 * 7): a stray hello with a wrong world size, connections that send part of a
 * header and go silent, 80 silent connections, joiners without the secret or
 * with a wrong one, a duplicate rank, a fake server; none ends, stalls or
 * locks out the job, and none gets a byte of a rank's payload. Also the
 * secret file's permission checks and the sealed channel's tamper and
 * replay checks.
 *
 * Each rank writes what happened to shared memory; the test process only
 * forks, waits (with a deadline) and checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "bench/launch/rendezvous.h"
#include "bench/launch/rendezvous_auth.h"
#include "bench/launch/rendezvous_wire.h"
#include "tests/cpu/bench_testutil.h"

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

/* Records how a rank's script ended in res (rc, the time since start, the
 * error, or ok_msg where given on success), closes z and leaves the child. */
static _Noreturn void end_rank(rank_result *res, tp_rc rc, int64_t start, tp_rdzv *z,
                               const char *ok_msg) {
  res->rc = rc;
  res->ms = tu_now_ms() - start;
  if (rc != TP_OK) snprintf(res->msg, sizeof res->msg, "%s", tp_last_error());
  else if (ok_msg) snprintf(res->msg, sizeof res->msg, "%s", ok_msg);
  res->done = 1;
  tp_rdzv_close(z);
  _exit(0);
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
  end_rank(res, rc, start, z, NULL);
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

/* Runs the job of script what; ranks 0 and 1, the ones rank 2 lets down,
 * must fail with rc within max_ms, saying needle. */
static rank_result *expect_others_fail(script what, int timeout_ms, int max_ms, const char *needle,
                                       int rc) {
  rank_result *res = run_job(what, timeout_ms);
  for (int r = 0; r < 2; r++) {
    expect_failure(&res[r], r, max_ms, needle);
    assert_int_equal(res[r].rc, rc);
  }
  return res;
}

static void test_rank_exits_early(void **state) {
  (void)state;
  /* Prompt: the server sees the socket close, no need to wait for the timeout. */
  expect_others_fail(SCRIPT_EXIT_EARLY, 10000, 5000, "rank 2", TP_EIO);
}

static void test_rank_killed(void **state) {
  (void)state;
  expect_others_fail(SCRIPT_KILLED, 10000, 5000, "rank 2", TP_EIO);
}

static void test_rank_never_comes(void **state) {
  (void)state;
  rank_result *res = expect_others_fail(SCRIPT_NEVER, 1500, 1500 + 2000, "2", TP_ETIMEOUT);
  assert_non_null(strstr(res[0].msg, "rank(s) 2"));
}

static void test_rank_late(void **state) {
  (void)state;
  expect_others_fail(SCRIPT_LATE, 1000, 300 + 1000 + 2000, "waiting for rank(s) 2", TP_ETIMEOUT);
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

/* ---- attacks ------------------------------------------------------------ */

enum { PAYLOAD_BYTES = 64, ATTACK_TIMEOUT_MS = 10000, MAX_RANKS = 4 };
static const char PAYLOAD_MARK[] = "tpbench-payload";

/* Rank r's allgather bytes: the mark, then r. */
static void rank_payload(int rank, unsigned char *out) {
  memset(out, 0, PAYLOAD_BYTES);
  snprintf((char *)out, PAYLOAD_BYTES, "%s of rank %d", PAYLOAD_MARK, rank);
}

typedef struct real_job {
  int port, world, timeout_ms;
  rank_result *results;
} real_job;

/* A real rank: joins, allgathers its payload and checks everyone's. */
static _Noreturn void real_rank_main(const real_job *j, int rank) {
  rank_result *res = &j->results[rank];
  int64_t start = tu_now_ms();
  tp_rdzv *z = NULL;
  tp_rc rc = tp_rdzv_connect("127.0.0.1", j->port, rank, j->world, j->timeout_ms, &z);
  if (rc == TP_OK) {
    unsigned char mine[PAYLOAD_BYTES], all[PAYLOAD_BYTES * MAX_RANKS], want[PAYLOAD_BYTES];
    rank_payload(rank, mine);
    rc = tp_rdzv_allgather(z, mine, PAYLOAD_BYTES, all);
    for (int r = 0; rc == TP_OK && r < j->world; r++) {
      rank_payload(r, want);
      if (memcmp(all + (size_t)r * PAYLOAD_BYTES, want, PAYLOAD_BYTES) != 0) res->bad_data = 1;
    }
  }
  end_rank(res, rc, start, z, NULL);
}

static rank_result *attack_results(void) {
  static rank_result *results;
  if (!results) results = tu_shared(sizeof(rank_result) * (MAX_RANKS + 1));
  assert_non_null(results);
  memset(results, 0, sizeof(rank_result) * (MAX_RANKS + 1));
  return results;
}

static real_job new_job(int world) {
  real_job j = {.world = world, .timeout_ms = ATTACK_TIMEOUT_MS, .results = attack_results()};
  assert_int_equal(tp_find_free_port(&j.port), TP_OK);
  return j;
}

static pid_t start_rank(const real_job *j, int rank) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) real_rank_main(j, rank);
  return pid;
}

/* Waits for the ranks and checks that each delivered every payload. */
static void expect_job_ok(const real_job *j, const pid_t *pids) {
  for (int r = 0; r < j->world; r++) assert_int_not_equal(tu_wait_child(pids[r], 30000), -1);
  for (int r = 0; r < j->world; r++) {
    if (j->results[r].rc != TP_OK) fail_msg("rank %d: %s", r, j->results[r].msg);
    assert_true(j->results[r].done);
    assert_false(j->results[r].bad_data);
  }
}

/* A plain blocking connection to 127.0.0.1:port, retried while rank 0 is
 * not listening yet (5 s at most). */
static int raw_connect(int port) {
  int64_t deadline = tu_now_ms() + 5000;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  while (tu_now_ms() < deadline) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
    close(fd);
    tu_sleep_ms(20);
  }
  fail_msg("nothing listens on port %d", port);
  return -1;
}

/* Reads what fd receives until it closes or ms pass; returns the count
 * (*closed: it closed). */
static size_t read_for(int fd, unsigned char *buf, size_t cap, int ms, int *closed) {
  size_t got = 0;
  int64_t deadline = tu_now_ms() + ms;
  *closed = 0;
  for (;;) {
    int64_t left = deadline - tu_now_ms();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&p, 1, (int)left) <= 0) return got;
    unsigned char discard[256];
    int room = got < cap;
    ssize_t n = recv(fd, room ? buf + got : discard, room ? cap - got : sizeof discard, 0);
    if (n <= 0) {
      *closed = 1;
      return got;
    }
    if (room) got += (size_t)n;
  }
}

static int holds_payload(const unsigned char *buf, size_t n) {
  size_t mark = strlen(PAYLOAD_MARK);
  for (size_t i = 0; i + mark <= n; i++)
    if (memcmp(buf + i, PAYLOAD_MARK, mark) == 0) return 1;
  return 0;
}

/* One 40-byte message, as a stranger sent it to the unauthenticated
 * rendezvous: a hello (old magic) claiming rank 1 of world size 99. */
static void send_old_hello(int fd) {
  unsigned char raw[RDZV_HEADER_BYTES] = {'T', 'P', 'R', 'D', 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 99};
  assert_int_equal(send(fd, raw, sizeof raw, MSG_NOSIGNAL), (ssize_t)sizeof raw);
}

/* Reads the server's challenge and answers it as rank `rank` of `world`,
 * its MAC made with key (NULL: an all-zero MAC, no secret at all). */
static void answer_as(int fd, int rank, int world, const tp_rdzv_secret *key) {
  unsigned char raw[RDZV_HELLO_BYTES];
  int closed = 0;
  assert_int_equal(read_for(fd, raw, RDZV_CHALLENGE_BYTES, 3000, &closed), RDZV_CHALLENGE_BYTES);
  rdzv_challenge c;
  assert_int_equal(rdzv_parse_challenge(raw, RDZV_CHALLENGE_BYTES, &c), TP_OK);
  rdzv_hello hello = {.rank = (uint32_t)rank, .world = (uint32_t)world};
  memset(hello.nonce, 7, sizeof hello.nonce);
  if (key) rdzv_hello_mac(key, c.nonce, &hello, hello.mac);
  rdzv_build_hello(&hello, raw);
  assert_int_equal(send(fd, raw, sizeof raw, MSG_NOSIGNAL), (ssize_t)sizeof raw);
}

static tp_rdzv_secret other_secret(void) {
  tp_rdzv_secret s;
  assert_int_equal(tp_rdzv_secret_generate(&s), TP_OK);
  return s;
}

/* A joiner with its own script, in a child; its result in results[slot]. */
static pid_t start_joiner(const real_job *j, int slot, int rank, int world, int timeout_ms,
                          const tp_rdzv_secret *secret) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid != 0) return pid;
  rank_result *res = &j->results[slot];
  int64_t start = tu_now_ms();
  tp_rdzv *z = NULL;
  tp_rc rc = tp_rdzv_connect_secret("127.0.0.1", j->port, rank, world, timeout_ms, secret, &z);
  end_rank(res, rc, start, z, "joined");
}

/* A joiner as rank of world, holding the job's secret, must be refused as a
 * usage error saying needle (its result in the spare slot MAX_RANKS). */
static void expect_joiner_refused(const real_job *j, int rank, int world, const char *needle) {
  pid_t joiner = start_joiner(j, MAX_RANKS, rank, world, 5000, tp_rdzv_job_secret());
  assert_int_not_equal(tu_wait_child(joiner, 10000), -1);
  assert_int_equal(j->results[MAX_RANKS].rc, TP_EUSAGE);
  if (!strstr(j->results[MAX_RANKS].msg, needle))
    fail_msg("'%s' not in '%s'", needle, j->results[MAX_RANKS].msg);
}

static void test_wrong_world_does_not_kill_the_job(void **state) {
  (void)state;
  real_job j = new_job(2);
  pid_t pids[2] = {0};
  pids[0] = start_rank(&j, 0);
  int stray = raw_connect(j.port);
  send_old_hello(stray);
  int forged = raw_connect(j.port);
  answer_as(forged, 1, 99, NULL);
  /* A rank with the secret but another world size is told why and refused. */
  expect_joiner_refused(&j, 1, 3, "world size 3");
  pids[1] = start_rank(&j, 1);
  expect_job_ok(&j, pids);
  close(stray);
  close(forged);
}

static void test_partial_headers_do_not_stall(void **state) {
  (void)state;
  real_job j = new_job(2);
  pid_t pids[2] = {0};
  pids[0] = start_rank(&j, 0);
  static const size_t parts[] = {1, 20, 39};
  int fds[3];
  unsigned char junk[39];
  memset(junk, 'T', sizeof junk);
  for (int i = 0; i < 3; i++) {
    fds[i] = raw_connect(j.port);
    assert_int_equal(send(fds[i], junk, parts[i], MSG_NOSIGNAL), (ssize_t)parts[i]);
  }
  /* The silent ones do not hold up rank 1, which joins at once. */
  pids[1] = start_rank(&j, 1);
  expect_job_ok(&j, pids);
  assert_true(j.results[1].ms < 1500);
  for (int i = 0; i < 3; i++) close(fds[i]);

  /* And the server drops such a connection after its own short deadline,
   * long before the job's. */
  j = new_job(2);
  pids[0] = start_rank(&j, 0);
  int fd = raw_connect(j.port);
  assert_int_equal(send(fd, junk, 39, MSG_NOSIGNAL), 39);
  int64_t start = tu_now_ms();
  unsigned char got[256];
  int closed = 0;
  size_t n = read_for(fd, got, sizeof got, 6000, &closed);
  int64_t waited = tu_now_ms() - start;
  assert_true(closed);
  assert_int_equal(n, RDZV_CHALLENGE_BYTES); /* the challenge, nothing more */
  if (waited > 4000) fail_msg("a silent connection was kept %lld ms", (long long)waited);
  close(fd);
  pids[1] = start_rank(&j, 1);
  expect_job_ok(&j, pids);
}

static void test_silent_connections_do_not_lock_out(void **state) {
  (void)state;
  enum { SILENT = 80 };
  real_job j = new_job(2);
  pid_t pids[2] = {0};
  pids[0] = start_rank(&j, 0);
  close(raw_connect(j.port)); /* rank 0 listens */
  int fds[SILENT];
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)j.port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < SILENT; i++) {
    fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(fds[i] >= 0);
    int rc = connect(fds[i], (struct sockaddr *)&sa, sizeof sa);
    assert_true(rc == 0 || errno == EINPROGRESS);
  }
  tu_sleep_ms(200);
  pids[1] = start_rank(&j, 1);
  expect_job_ok(&j, pids);
  assert_true(j.results[1].ms < 5000);
  for (int i = 0; i < SILENT; i++) close(fds[i]);
}

static void test_joiner_without_secret_gets_nothing(void **state) {
  (void)state;
  real_job j = new_job(2);
  pid_t pids[2] = {0};
  pids[0] = start_rank(&j, 0);
  tp_rdzv_secret wrong = other_secret();
  int no_secret = raw_connect(j.port), wrong_secret = raw_connect(j.port);
  answer_as(no_secret, 1, 2, NULL);
  answer_as(wrong_secret, 1, 2, &wrong);
  /* The library's own client with a wrong secret keeps trying, in vain. */
  pid_t impostor = start_joiner(&j, MAX_RANKS, 1, 2, 1500, &wrong);
  assert_int_not_equal(tu_wait_child(impostor, 10000), -1);
  assert_int_equal(j.results[MAX_RANKS].rc, TP_ETIMEOUT);
  /* Then the real rank 1 joins, and the job runs. */
  pids[1] = start_rank(&j, 1);
  expect_job_ok(&j, pids);
  int fds[2] = {no_secret, wrong_secret};
  for (int i = 0; i < 2; i++) {
    unsigned char got[4096];
    int closed = 0;
    size_t n = read_for(fds[i], got, sizeof got, 3000, &closed);
    assert_true(closed);
    assert_int_equal(n, 0); /* the challenge was read already: nothing after it */
    assert_false(holds_payload(got, n));
    close(fds[i]);
  }
}

static void test_duplicate_rank_refused(void **state) {
  (void)state;
  real_job j = new_job(3);
  pid_t pids[3] = {0};
  pids[0] = start_rank(&j, 0);
  pids[1] = start_rank(&j, 1);
  tu_sleep_ms(500); /* rank 1 has joined; the job waits for rank 2 */
  expect_joiner_refused(&j, 1, 3, "rank 1 has already joined");
  pids[2] = start_rank(&j, 2);
  expect_job_ok(&j, pids);
}

/* Plays a server that does not hold the secret: challenges every joiner,
 * then answers "accepted" and "welcome" with made-up tags; returns every
 * byte the joiners sent in *total and the most in one connection. */
static void fake_server(int listen_fd, int ms, unsigned char *all, size_t cap, size_t *total,
                        size_t *most) {
  int64_t deadline = tu_now_ms() + ms;
  *total = *most = 0;
  while (tu_now_ms() < deadline) {
    struct pollfd p = {.fd = listen_fd, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0) continue;
    int fd = accept(listen_fd, NULL, NULL);
    if (fd < 0) continue;
    rdzv_challenge c;
    memset(c.nonce, 3, sizeof c.nonce);
    unsigned char raw[RDZV_CHALLENGE_BYTES];
    rdzv_build_challenge(&c, raw);
    (void)send(fd, raw, sizeof raw, MSG_NOSIGNAL);
    unsigned char fake[2 * (RDZV_HEADER_BYTES + RDZV_MAC_BYTES)];
    memset(fake, 0x5A, sizeof fake);
    rdzv_header accept_h = {.type = RDZV_ACCEPT, .arg = 1}, welcome = {.type = RDZV_WELCOME};
    rdzv_header_encode(&accept_h, fake);
    rdzv_header_encode(&welcome, fake + RDZV_HEADER_BYTES + RDZV_MAC_BYTES);
    int closed = 0;
    size_t n = read_for(fd, all + *total, cap - *total, 300, &closed);
    (void)send(fd, fake, sizeof fake, MSG_NOSIGNAL);
    n += read_for(fd, all + *total + n, cap - *total - n, 300, &closed);
    *total += n;
    if (n > *most) *most = n;
    close(fd);
  }
}

static void test_fake_server_gets_no_payload(void **state) {
  (void)state;
  real_job j = new_job(2);
  int listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)j.port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(listen_fd, 16), 0);
  j.timeout_ms = 2000;
  pid_t rank1 = start_rank(&j, 1);
  static unsigned char all[1 << 16];
  size_t total = 0, most = 0;
  fake_server(listen_fd, 3500, all, sizeof all, &total, &most);
  close(listen_fd);
  assert_int_not_equal(tu_wait_child(rank1, 10000), -1);
  assert_true(j.results[1].done);
  assert_int_not_equal(j.results[1].rc, TP_OK);
  if (!strstr(j.results[1].msg, "prove"))
    fail_msg("the joiner did not say why: %s", j.results[1].msg);
  assert_true(total > 0);                   /* it did try */
  assert_int_equal(most, RDZV_HELLO_BYTES); /* its hello, nothing more */
  assert_false(holds_payload(all, total));
}

/* A rendezvous for "127.0.0.1" cannot be reached on another address of
 * this host. */
static void test_binds_the_given_address(void **state) {
  (void)state;
  struct ifaddrs *list = NULL;
  assert_int_equal(getifaddrs(&list), 0);
  struct sockaddr_in other = {0};
  for (struct ifaddrs *i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    struct sockaddr_in *in = (struct sockaddr_in *)i->ifa_addr;
    if ((ntohl(in->sin_addr.s_addr) >> 24) != 127) other = *in;
  }
  freeifaddrs(list);
  if (other.sin_family != AF_INET) skip(); /* loopback only here */
  real_job j = new_job(2);
  j.timeout_ms = 1500;
  pid_t rank0 = start_rank(&j, 0);
  close(raw_connect(j.port)); /* listening on loopback */
  other.sin_port = htons((uint16_t)j.port);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_int_not_equal(connect(fd, (struct sockaddr *)&other, sizeof other), 0);
  close(fd);
  assert_int_not_equal(tu_wait_child(rank0, 10000), -1);
}

/* ---- the secret and the sealed channel ----------------------------------- */

static void write_file(const char *path, const char *text, mode_t mode) {
  unlink(path);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  assert_int_equal(chmod(path, mode), 0);
}

static void test_secret_file_permissions(void **state) {
  (void)state;
  char dir[] = "/tmp/tp_secret_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128], link[128];
  snprintf(path, sizeof path, "%s/secret", dir);
  snprintf(link, sizeof link, "%s/link", dir);
  const char *hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
  tp_rdzv_secret s;
  write_file(path, hex, 0644);
  assert_int_equal(tp_rdzv_secret_from_file(path, &s), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "chmod 600"));
  assert_int_equal(chmod(path, 0640), 0);
  assert_int_equal(tp_rdzv_secret_from_file(path, &s), TP_EUSAGE);
  assert_int_equal(chmod(path, 0600), 0);
  assert_int_equal(tp_rdzv_secret_from_file(path, &s), TP_OK);
  assert_int_equal(s.len, 32);
  assert_int_equal(s.bytes[1], 0x11);
  assert_int_equal(s.bytes[31], 0xff);
  assert_int_equal(symlink(path, link), 0);
  assert_int_equal(tp_rdzv_secret_from_file(link, &s), TP_EUSAGE); /* not followed */
  write_file(path, "0011zz", 0600);
  assert_int_equal(tp_rdzv_secret_from_file(path, &s), TP_EUSAGE);
  assert_null(strstr(tp_last_error(), "0011zz"));                   /* never echoed */
  assert_int_equal(tp_rdzv_secret_from_hex("abcd", &s), TP_EUSAGE); /* too short */
  setenv("TPBENCH_JOB_SECRET", hex, 1);
  setenv("TPBENCH_JOB_SECRET_FILE", path, 1);
  int present = 0;
  assert_int_equal(tp_rdzv_secret_from_environment(&s, &present), TP_EUSAGE);
  unsetenv("TPBENCH_JOB_SECRET_FILE");
  assert_int_equal(tp_rdzv_secret_from_environment(&s, &present), TP_OK);
  assert_int_equal(present, 1);
  unsetenv("TPBENCH_JOB_SECRET");
  assert_int_equal(tp_rdzv_secret_from_environment(&s, &present), TP_OK);
  assert_int_equal(present, 0);
  unlink(link);
  unlink(path);
  rmdir(dir);
}

/* A message sealed on one end passes on the other; changed, replayed or
 * sealed with another secret, it does not. */
static void test_channel_rejects_forged_bytes(void **state) {
  (void)state;
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  tp_rdzv_secret key = other_secret(), wrong = other_secret();
  unsigned char server_nonce[RDZV_NONCE_BYTES] = {1};
  rdzv_hello hello = {.rank = 1, .world = 2};
  rdzv_channel server, client, forger;
  rdzv_channel_init(&server, sv[0], &key, server_nonce, &hello, 1, "client");
  rdzv_channel_init(&client, sv[1], &key, server_nonce, &hello, 0, "server");
  rdzv_channel_init(&forger, sv[0], &wrong, server_nonce, &hello, 1, "client");
  int64_t deadline = tu_now_ms() + 2000;
  rdzv_header h = {.type = RDZV_REPLY, .len = 4}, got;
  unsigned char body[4];
  /* Sealed right: accepted. */
  assert_int_equal(rdzv_channel_send(&server, &h, "abcd", deadline), TP_OK);
  assert_int_equal(rdzv_channel_recv_header(&client, &got, deadline), TP_OK);
  assert_int_equal(rdzv_channel_recv_body(&client, body, 4, deadline), TP_OK);
  assert_int_equal(rdzv_channel_recv_end(&client, deadline), TP_OK);
  /* Replayed (the same counter again): refused. */
  server.sent--;
  assert_int_equal(rdzv_channel_send(&server, &h, "abcd", deadline), TP_OK);
  assert_int_equal(rdzv_channel_recv_header(&client, &got, deadline), TP_OK);
  assert_int_equal(rdzv_channel_recv_body(&client, body, 4, deadline), TP_OK);
  assert_int_equal(rdzv_channel_recv_end(&client, deadline), TP_EFOREIGN);
  /* Sealed with another secret: refused. */
  forger.sent = server.sent;
  client.received = forger.sent;
  assert_int_equal(rdzv_channel_send(&forger, &h, "abcd", deadline), TP_OK);
  assert_int_equal(rdzv_channel_recv_header(&client, &got, deadline), TP_OK);
  assert_int_equal(rdzv_channel_recv_body(&client, body, 4, deadline), TP_OK);
  assert_int_equal(rdzv_channel_recv_end(&client, deadline), TP_EFOREIGN);
  /* One payload byte changed on the way: refused. */
  client.received = server.sent;
  unsigned char raw[RDZV_HEADER_BYTES + 4 + RDZV_MAC_BYTES];
  assert_int_equal(rdzv_channel_send(&server, &h, "abcd", deadline), TP_OK);
  assert_int_equal(rdzv_recv_all(sv[1], raw, sizeof raw, deadline, "server"), TP_OK);
  raw[RDZV_HEADER_BYTES] ^= 1;
  assert_int_equal(rdzv_send_all(sv[0], raw, sizeof raw, deadline, "client"), TP_OK);
  assert_int_equal(rdzv_channel_recv_header(&client, &got, deadline), TP_OK);
  assert_int_equal(rdzv_channel_recv_body(&client, body, 4, deadline), TP_OK);
  assert_int_equal(rdzv_channel_recv_end(&client, deadline), TP_EFOREIGN);
  close(sv[0]);
  close(sv[1]);
}

/* Without a secret installed, joining is refused with how to set one. */
static void test_no_secret_refused(void **state) {
  (void)state;
  tp_rdzv_secret saved = *tp_rdzv_job_secret();
  tp_rdzv_set_job_secret(NULL);
  tp_rdzv *z = NULL;
  assert_int_equal(tp_rdzv_connect("127.0.0.1", 1234, 0, 1, 1000, &z), TP_EUSAGE);
  assert_null(z);
  assert_non_null(strstr(tp_last_error(), "TPBENCH_JOB_SECRET"));
  tp_rdzv_set_job_secret(&saved);
}

/* Every rank forked by a test shares one secret, as a launcher's would. */
static int install_secret(void **state) {
  (void)state;
  tp_rdzv_secret s;
  if (tp_rdzv_secret_generate(&s) != TP_OK) return -1;
  tp_rdzv_set_job_secret(&s);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wrong_world_does_not_kill_the_job),
      cmocka_unit_test(test_partial_headers_do_not_stall),
      cmocka_unit_test(test_silent_connections_do_not_lock_out),
      cmocka_unit_test(test_joiner_without_secret_gets_nothing),
      cmocka_unit_test(test_duplicate_rank_refused),
      cmocka_unit_test(test_fake_server_gets_no_payload),
      cmocka_unit_test(test_binds_the_given_address),
      cmocka_unit_test(test_secret_file_permissions),
      cmocka_unit_test(test_channel_rejects_forged_bytes),
      cmocka_unit_test(test_no_secret_refused),
      cmocka_unit_test(test_collectives_deliver),
      cmocka_unit_test(test_rank_exits_early),
      cmocka_unit_test(test_rank_killed),
      cmocka_unit_test(test_rank_never_comes),
      cmocka_unit_test(test_rank_late),
      cmocka_unit_test(test_ranks_disagree),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_world_of_one),
  };
  return cmocka_run_group_tests(tests, install_secret, NULL);
}
