/*
 * test_store_hostile.c — CPU tests of the store against files an attacker
 * (or a damaged disk) hands it, and of the read-only commands that must
 * never change a database:
 *
 * - a negative user_version (one byte at offset 60) is refused, not a crash;
 * - report, compare, history, trace and dashboard leave an empty file, a
 *   version 1 or 2 database, a rollback-journal and a WAL database
 *   byte-for-byte as they were, with no -wal/-shm/-journal beside them, and
 *   name `tpbench migrate` for an older schema; `tpbench migrate` does it;
 * - a database in a read-only folder is still readable;
 * - a WAL database whose last commits are still in its -wal is read as the
 *   -wal says (a migrated schema is not called older);
 * - a database whose "runs" is a recursive view is refused within seconds
 *   by report and import (the schema is checked first), and a query that
 *   runs away on a good database is stopped by the time limit;
 * - a table whose column is not the migrations' (the schema's text damaged)
 *   is refused (exit 2) by report and import before a query names it;
 * - import leaves nothing beside its source;
 * - store errors are sentences: no C file:line, no SQL.
 *
 * The databases are copies of the sample (examples/) and of the real H200
 * run (tests/data, schema 1; schema 2 made from it by migration 002 alone),
 * in a scratch directory per test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <fcntl.h>
#include <grp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "schemas/tp_schemas.h"
#include "store/tp_store.h"
#include "tests/cpu/fixture_db.h"
#include "tests/cpu/run_program.h"

/* ---- files ----------------------------------------------------------------- */

typedef struct {
  fx_dir dir;
  char current[512]; /* the sample migrated to this schema, WAL, no -wal */
} scratch;

static const char *in_dir(const scratch *s, const char *name, char *buf) {
  return fx_path(&s->dir, name, buf, 512);
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Fails when path has a -wal, -shm or -journal beside it. */
static void assert_nothing_beside(const char *path) {
  const char *suffixes[] = {"-wal", "-shm", "-journal"};
  char side[600];
  for (size_t i = 0; i < 3; i++) {
    snprintf(side, sizeof side, "%s%s", path, suffixes[i]);
    if (file_exists(side)) fail_msg("%s was left behind", side);
  }
}

typedef struct {
  unsigned char *bytes;
  size_t len;
} snapshot;

static snapshot take(const char *path) {
  snapshot snap = {0};
  snap.bytes = fx_read_all(path, &snap.len);
  if (!snap.bytes && snap.len == 0) snap.bytes = calloc(1, 1); /* an empty file */
  assert_non_null(snap.bytes);
  return snap;
}

/* The file is byte-for-byte what it was, with nothing beside it. */
static void assert_unchanged(const char *path, snapshot *before) {
  snapshot after = take(path);
  if (!after.bytes || !before->bytes || after.len != before->len ||
      memcmp(after.bytes, before->bytes, after.len) != 0)
    fail_msg("%s changed (%zu bytes, was %zu)", path, after.len, before->len);
  free(after.bytes);
  assert_nothing_beside(path);
}

static void put_byte(const char *path, long offset, unsigned char value) {
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  assert_int_equal(fseek(f, offset, SEEK_SET), 0);
  assert_int_equal(fputc(value, f), value);
  assert_int_equal(fclose(f), 0);
}

static void raw_exec(const char *path, const char *sql) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) fail_msg("%s: %s", sql, err);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

/* ---- the tpbench binary ------------------------------------------------------ */

/* Runs tpbench with args (NULL-terminated) for at most timeout_s seconds. */
static rp_result tpbench(int timeout_s, ...) {
  char *argv[16] = {TPBENCH_EXE};
  va_list ap;
  va_start(ap, timeout_s);
  int n = 1;
  while (n < 15 && (argv[n] = va_arg(ap, char *)) != NULL) n++;
  va_end(ap);
  argv[n] = NULL;
  return rp_run(argv, timeout_s);
}

static void expect_in(const char *text, const char *want, const char *what) {
  if (!text || !strstr(text, want)) fail_msg("%s lacks \"%s\": %s", what, want, text ? text : "");
}

/* The real H200 run at schema version 2: migration 002 applied by hand. */
static void make_v2(const char *path) {
  assert_int_equal(fx_copy(FX_REAL_DB, path), 0);
  assert_true(tp_n_migrations >= 2);
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d", tp_migrations[1].version);
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, tp_migrations[1].sql, NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

/* The sample at this binary's schema, through `tpbench migrate`. */
static void make_current(scratch *s) {
  in_dir(s, "current.db", s->current);
  assert_int_equal(fx_copy(FX_SAMPLE_DB, s->current), 0);
  rp_result r = tpbench(120, "migrate", "--db", s->current, NULL);
  if (r.status != 0) fail_msg("migrate: %d %s", r.status, r.err);
  rp_free(&r);
  assert_nothing_beside(s->current);
}

static int setup(void **state) {
  scratch *s = calloc(1, sizeof *s);
  if (!s || fx_mkdir(&s->dir, "tp_store_hostile") != 0) return -1;
  *state = s;
  return 0;
}

static int teardown(void **state) {
  scratch *s = *state;
  char ro[512];
  chmod(in_dir(s, "ro", ro), 0755); /* read-only folders must be emptied */
  fx_rmdir(&s->dir);
  free(s);
  return 0;
}

static void assert_sentence(const char *what);

/* ---- 1: a negative schema version ---------------------------------------- */

static void test_negative_user_version_is_refused(void **state) {
  scratch *s = *state;
  char path[512];
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(in_dir(s, "neg.db", path), 1, &store), TP_OK);
  tp_store_close(store);
  /* user_version is the big-endian int at 60: 0xFF there makes it negative. */
  put_byte(path, 60, 0xFF);
  snapshot before = take(path);
  assert_int_equal(tp_store_open(path, 0, &store), TP_EFOREIGN);
  expect_in(tp_last_error(), "is not one tpbench ever wrote", "open");
  assert_int_equal(tp_store_open_readonly(path, &store), TP_EFOREIGN);
  assert_int_equal(tp_store_probe(path, NULL), TP_EFOREIGN);
  assert_null(store);
  assert_unchanged(path, &before);

  /* Every command that opens it: an error, not a crash. */
  char target[512];
  in_dir(s, "t.db", target);
  rp_result runs[] = {
      tpbench(30, "report", "--db", path, NULL),
      tpbench(30, "history", "--config", "1", "--db", path, NULL),
      tpbench(30, "migrate", "--db", path, NULL),
      tpbench(30, "import", path, "--db", target, NULL),
  };
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    if (runs[i].status <= 0 || runs[i].status >= 128)
      fail_msg("command %zu: status %d: %s", i, runs[i].status, runs[i].err);
    expect_in(runs[i].err, "is not one tpbench ever wrote", "command");
    rp_free(&runs[i]);
  }
  assert_unchanged(path, &before);
  assert_false(file_exists(target));
  free(before.bytes);
}

/* ---- 3: reading commands never write ---------------------------------------- */

/* Runs the five reading commands on db; each must leave it unchanged.
 * want_ok: they must succeed (report, history, trace, dashboard) or, for
 * compare, find nothing worse than a regression; otherwise each must fail
 * and, if expect is set, say it. */
static void read_everything(scratch *s, const char *db, int want_ok, const char *expect) {
  snapshot before = take(db);
  char out[512], dash[512];
  in_dir(s, "out.json", out);
  in_dir(s, "dash", dash);
  char *const cmds[][8] = {
      {"report", "--db", (char *)db, "--run", "2", NULL},
      {"compare", "run:1", "run:2", "--db", (char *)db, NULL}, /* runs in common */
      {"history", "--config", "5", "--db", (char *)db, NULL},
      {"trace", "--config", "241", "--out", out, "--db", (char *)db, NULL},
      {"dashboard", "--out", dash, "--db", (char *)db, NULL},
  };
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    char *argv[10] = {TPBENCH_EXE};
    for (int j = 0; cmds[i][j]; j++) argv[j + 1] = cmds[i][j];
    rp_result r = rp_run(argv, 120);
    int ok = r.status == 0 || (i == 1 && r.status == 1);
    if (want_ok && !ok) fail_msg("%s on %s: status %d: %s", cmds[i][0], db, r.status, r.err);
    if (!want_ok && (r.status <= 0 || r.status >= 128))
      fail_msg("%s on %s: status %d (wanted a clean failure): %s", cmds[i][0], db, r.status, r.err);
    if (expect) expect_in(r.err, expect, cmds[i][0]);
    rp_free(&r);
    assert_unchanged(db, &before);
  }
  free(before.bytes);
}

static void test_readers_leave_an_empty_file_alone(void **state) {
  scratch *s = *state;
  char path[512];
  FILE *f = fopen(in_dir(s, "empty.db", path), "wb");
  assert_non_null(f);
  fclose(f);
  read_everything(s, path, 0, "an empty file");
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(path, &store), TP_EFOREIGN);
  /* Missing: an error, and still missing. */
  assert_int_equal(tp_store_open_readonly(in_dir(s, "missing.db", path), &store), TP_EUSAGE);
  assert_false(file_exists(path));
}

static void test_readers_refuse_older_schemas_and_name_migrate(void **state) {
  scratch *s = *state;
  char v1[512], v2[512];
  assert_int_equal(fx_copy(FX_REAL_DB, in_dir(s, "v1.db", v1)), 0);
  make_v2(in_dir(s, "v2.db", v2));
  read_everything(s, v1, 0, "tpbench migrate --db");
  read_everything(s, v2, 0, "tpbench migrate --db");
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(v1, &store), TP_EUSAGE);
  expect_in(tp_last_error(), "schema version 1 is older", "open");

  /* What the message says to do, done, makes it readable. */
  rp_result r = tpbench(120, "migrate", "--db", v1, NULL);
  assert_int_equal(r.status, 0);
  expect_in(r.out, "schema version 1 -> ", "migrate");
  rp_free(&r);
  r = tpbench(60, "migrate", "--db", v1, NULL);
  assert_int_equal(r.status, 0);
  expect_in(r.out, "nothing to do", "migrate again");
  rp_free(&r);
  assert_nothing_beside(v1);
  r = tpbench(60, "report", "--db", v1, NULL);
  if (r.status != 0) fail_msg("report after migrate: %s", r.err);
  rp_free(&r);
  assert_nothing_beside(v1);
}

static void test_migrate_refuses_what_it_cannot_migrate(void **state) {
  scratch *s = *state;
  char path[512];
  FILE *f = fopen(in_dir(s, "empty.db", path), "wb");
  assert_non_null(f);
  fclose(f);
  rp_result r = tpbench(30, "migrate", "--db", path, NULL);
  assert_int_equal(r.status, 2);
  rp_free(&r);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_size, 0);
  r = tpbench(30, "migrate", "--db", in_dir(s, "missing.db", path), NULL);
  assert_int_equal(r.status, 2); /* the path given is not a database */
  rp_free(&r);
  assert_false(file_exists(path));
}

static void test_readers_leave_wal_and_rollback_databases_alone(void **state) {
  scratch *s = *state;
  make_current(s);
  read_everything(s, s->current, 1, NULL);
  /* Still WAL (header bytes 18 and 19 are 2), as it was. */
  snapshot snap = take(s->current);
  assert_int_equal(snap.bytes[18], 2);
  free(snap.bytes);

  char rollback[512];
  assert_int_equal(fx_copy(s->current, in_dir(s, "rollback.db", rollback)), 0);
  raw_exec(rollback, "PRAGMA journal_mode = DELETE");
  read_everything(s, rollback, 1, NULL);
  snap = take(rollback);
  assert_int_equal(snap.bytes[18], 1); /* not switched to WAL */
  free(snap.bytes);
}

static void test_readonly_store_cannot_write(void **state) {
  scratch *s = *state;
  make_current(s);
  snapshot before = take(s->current);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(s->current, &store), TP_OK);
  assert_int_equal(tp_store_version(store), tp_store_schema_version());
  tp_run_info run = {.commit = "abc", .command = "ops"};
  int64_t id = 0;
  assert_int_not_equal(tp_store_begin_run(store, &run, &id), TP_OK);
  tp_store_close(store);
  assert_unchanged(s->current, &before);
  free(before.bytes);
}

/* Runs tpbench as a user who cannot write the folder (nobody, when the test
 * runs as root, which may write anywhere). Returns the exit status. */
static int run_as_reader(char *const argv[], char *out, size_t cap) {
  int pipe_fd[2];
  assert_int_equal(pipe(pipe_fd), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(pipe_fd[0]);
    dup2(pipe_fd[1], STDOUT_FILENO);
    dup2(pipe_fd[1], STDERR_FILENO);
    if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
      _exit(126);
    execv(argv[0], argv);
    _exit(127);
  }
  close(pipe_fd[1]);
  size_t used = 0;
  ssize_t got;
  while ((got = read(pipe_fd[0], out + used, cap - 1 - used)) > 0) used += (size_t)got;
  out[used] = '\0';
  close(pipe_fd[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_database_in_a_read_only_folder_is_readable(void **state) {
  scratch *s = *state;
  make_current(s);
  char ro[512], wal[600], rollback[600];
  assert_int_equal(mkdir(in_dir(s, "ro", ro), 0755), 0);
  snprintf(wal, sizeof wal, "%s/wal.db", ro);
  snprintf(rollback, sizeof rollback, "%s/rollback.db", ro);
  assert_int_equal(fx_copy(s->current, wal), 0);
  assert_int_equal(fx_copy(s->current, rollback), 0);
  raw_exec(rollback, "PRAGMA journal_mode = DELETE");
  assert_int_equal(chmod(wal, 0444), 0);
  assert_int_equal(chmod(rollback, 0444), 0);
  assert_int_equal(chmod(ro, 0555), 0);
  assert_int_equal(chmod(s->dir.path, 0755), 0);
  /* a copy the reader can execute: the build folder may sit in a folder only
   * its owner can enter (a fresh clone under mktemp -d) */
  char exe[600];
  assert_int_equal(fx_copy(TPBENCH_EXE, in_dir(s, "tpbench", exe)), 0);
  assert_int_equal(chmod(exe, 0755), 0);
  const char *dbs[] = {wal, rollback};
  for (size_t i = 0; i < 2; i++) {
    snapshot before = take(dbs[i]);
    char *argv[] = {exe, "report", "--run", "2", "--db", (char *)dbs[i], NULL};
    static char out[1 << 16];
    int status = run_as_reader(argv, out, sizeof out);
    if (status != 0) fail_msg("report of %s in a read-only folder: %d: %s", dbs[i], status, out);
    expect_in(out, "tpbench throughput", "report");
    assert_unchanged(dbs[i], &before);
    free(before.bytes);
  }
}

/* A new database in a folder the user cannot write: the message says why (permission), not
 * "No such file or directory" (SQLite's read-only retry leaves ENOENT as the last errno), and
 * nothing is made. */
static void test_new_database_in_a_read_only_folder_says_why(void **state) {
  scratch *s = *state;
  make_current(s);
  char ro[512], target[600], exe[600];
  assert_int_equal(mkdir(in_dir(s, "ro", ro), 0755), 0);
  snprintf(target, sizeof target, "%s/new.db", ro);
  assert_int_equal(chmod(s->current, 0644), 0);
  assert_int_equal(chmod(ro, 0555), 0);
  assert_int_equal(chmod(s->dir.path, 0755), 0);
  assert_int_equal(fx_copy(TPBENCH_EXE, in_dir(s, "tpbench", exe)), 0);
  assert_int_equal(chmod(exe, 0755), 0);
  char *argv[] = {exe, "import", s->current, "--db", target, NULL};
  static char out[1 << 14];
  int status = run_as_reader(argv, out, sizeof out);
  chmod(ro, 0755);
  if (status != 2) fail_msg("import into a read-only folder: exit %d: %s", status, out);
  expect_in(out, "Permission denied", "import into a read-only folder");
  if (strstr(out, "No such file")) fail_msg("misleading: %s", out);
  assert_false(file_exists(target));
}

/* ---- 4: hostile databases -------------------------------------------------- */

/* A tpbench database whose runs table is a view that never ends. */
static void make_recursive_runs(scratch *s, char *path) {
  make_current(s);
  assert_int_equal(fx_copy(s->current, in_dir(s, "hostile.db", path)), 0);
  raw_exec(path, "PRAGMA journal_mode = DELETE; DROP TABLE runs; "
                 "CREATE VIEW runs AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
                 "FROM c) SELECT x AS id, 'c' || x AS commit_sha, 0 AS dirty, 'h' AS host, "
                 "NULL AS gpu_name, 0 AS gpu_count, NULL AS driver_version, NULL AS cuda_version, "
                 "NULL AS nccl_version, NULL AS cublas_version, NULL AS cupti_version, "
                 "NULL AS command_line, 'ops' AS command, 0 AS warmup_iters, 0 AS measure_iters, "
                 "'2026' AS started_at, NULL AS finished_at, 'u' || x AS uuid, NULL AS rounds, "
                 "NULL AS order_policy, NULL AS order_seed, NULL AS test_knobs FROM c");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_recursive_view_is_refused_quickly(void **state) {
  scratch *s = *state;
  char path[512], target[512];
  make_recursive_runs(s, path);
  snapshot before = take(path);
  in_dir(s, "target.db", target);

  double t0 = now_s();
  rp_result r = tpbench(10, "report", "--db", path, NULL);
  if (r.status <= 0 || r.status >= 128) fail_msg("report: status %d: %s", r.status, r.err);
  expect_in(r.err, "runs is a view", "report");
  rp_free(&r);
  r = tpbench(10, "import", path, "--db", target, NULL);
  if (r.status <= 0 || r.status >= 128) fail_msg("import: status %d: %s", r.status, r.err);
  expect_in(r.err, "runs is a view", "import");
  rp_free(&r);
  assert_true(now_s() - t0 < 10.0);
  assert_false(file_exists(target)); /* vetted before the target is opened */
  assert_unchanged(path, &before);

  /* The store itself: every way in refuses it. */
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(path, &store), TP_EFOREIGN);
  assert_int_equal(tp_store_open(path, 0, &store), TP_EFOREIGN);
  assert_int_equal(tp_store_open(target, 1, &store), TP_OK);
  assert_int_equal(tp_store_import(store, path, NULL), TP_EFOREIGN);
  assert_int_equal(fx_int(store, "SELECT count(*) FROM runs"), 0);
  tp_store_close(store);
  assert_unchanged(path, &before);
  free(before.bytes);
}

static void test_changed_view_or_extra_trigger_is_refused(void **state) {
  scratch *s = *state;
  make_current(s);
  char view[512], trigger[512];
  assert_int_equal(fx_copy(s->current, in_dir(s, "view.db", view)), 0);
  assert_int_equal(fx_copy(s->current, in_dir(s, "trigger.db", trigger)), 0);
  raw_exec(view, "PRAGMA journal_mode = DELETE; DROP VIEW config_results; "
                 "CREATE VIEW config_results AS SELECT * FROM configs");
  raw_exec(trigger, "PRAGMA journal_mode = DELETE; CREATE TRIGGER slow AFTER INSERT ON configs "
                    "BEGIN SELECT count(*) FROM configs a, configs b, configs c; END");
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(view, &store), TP_EFOREIGN);
  expect_in(tp_last_error(), "config_results", "changed view");
  assert_int_equal(tp_store_open(trigger, 0, &store), TP_EFOREIGN);
  expect_in(tp_last_error(), "triggers", "extra trigger");
  assert_null(store);
}

/* A table's column that is not the migrations' (one byte of the schema's text damaged, or edited
 * by hand): refused like a changed view, with exit 2, before any query names the column. The
 * check compared a table's name and kind alone, so report and the dashboard failed (exit 1) on
 * "no such column: launcher" and import on preparing its copy. */
static void test_changed_column_is_refused(void **state) {
  scratch *s = *state;
  make_current(s);
  char path[512], target[512];
  assert_int_equal(fx_copy(s->current, in_dir(s, "column.db", path)), 0);
  raw_exec(path, "PRAGMA journal_mode = DELETE; PRAGMA writable_schema = ON; "
                 "UPDATE sqlite_schema SET sql = replace(sql, 'launcher TEXT', 'launchxr TEXT') "
                 "WHERE name = 'runs'");
  snapshot before = take(path);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(path, &store), TP_EFOREIGN);
  expect_in(tp_last_error(), "launcher", "a renamed column");
  assert_null(store);
  in_dir(s, "column-target.db", target);
  const char *commands[][5] = {{"report", "--db", path, NULL, NULL},
                               {"import", path, "--db", target, NULL}};
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    rp_result r = tpbench(30, commands[i][0], commands[i][1], commands[i][2], commands[i][3], NULL);
    if (r.status != 2) fail_msg("%s: status %d, expected 2: %s", commands[i][0], r.status, r.err);
    expect_in(r.err, "launcher", commands[i][0]);
    rp_free(&r);
  }
  assert_false(file_exists(target));
  assert_unchanged(path, &before);
  free(before.bytes);
}

static int step_counting(sqlite3_stmt *st) {
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {}
  return rc;
}

static void test_runaway_query_is_stopped(void **state) {
  scratch *s = *state;
  make_current(s);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(s->current, &store), TP_OK);
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(tp_store_db(store),
                                      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
                                      "FROM c) SELECT x FROM c",
                                      -1, &st, NULL),
                   SQLITE_OK);
  double t0 = now_s();
  assert_int_equal(step_counting(st), SQLITE_INTERRUPT);
  double took = now_s() - t0;
  sqlite3_finalize(st);
  /* 5 s plus a second per 4 MiB of the file; well under 10 s here. */
  if (took < 4.0 || took > 10.0) fail_msg("stopped after %.1f s", took);
  /* The next statement gets its own time. */
  assert_int_equal(fx_int(store, "SELECT count(*) FROM runs"), 5);
  tp_store_close(store);
  assert_nothing_beside(s->current);
}

/* An immutable reader does not see a writer's changes: the guard stops it
 * as soon as a writer shows up instead of letting it read torn pages. */
static void test_reader_stops_when_a_writer_shows_up(void **state) {
  scratch *s = *state;
  make_current(s);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(s->current, &store), TP_OK);
  int64_t run = 0;
  assert_int_equal(tp_store_find_run(store, 0, NULL, &run), TP_OK);
  assert_int_equal(run, 5);
  sqlite3 *writer = NULL;
  assert_int_equal(sqlite3_open_v2(s->current, &writer, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  assert_int_equal(
      sqlite3_exec(writer, "UPDATE runs SET host = 'moved' WHERE id = 1", NULL, NULL, NULL),
      SQLITE_OK);
  assert_int_equal(tp_store_find_run(store, 0, NULL, &run), TP_ETIMEOUT);
  expect_in(tp_last_error(), "the file changed while it was read", "find_run");
  assert_sentence("reader stopped");
  tp_store_close(store);
  assert_int_equal(sqlite3_close(writer), SQLITE_OK);
  assert_nothing_beside(s->current);
}

/* The schema version the main file alone says (an immutable look, the -wal unread). */
static int64_t main_file_version(const char *path) {
  char uri[700];
  snprintf(uri, sizeof uri, "file:%s?immutable=1", path);
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t version = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);
  return version;
}

/* A WAL database whose last commits are still in its -wal (a writer still connected, or a
 * checkpoint that a full disk stopped) is what the -wal says: here a writer migrated it from
 * version 2 and is still connected, the main file alone still says 2. Readers, the probe and
 * migrate must see 7, not refuse an "older schema" or migrate it again. */
static void test_wal_holds_what_the_main_file_lacks(void **state) {
  scratch *s = *state;
  char path[512], wal[600];
  make_v2(in_dir(s, "walonly.db", path));
  raw_exec(path, "PRAGMA journal_mode = WAL");
  tp_store *writer = NULL;
  assert_int_equal(tp_store_open(path, 0, &writer), TP_OK);
  snprintf(wal, sizeof wal, "%s-wal", path);
  assert_true(file_exists(wal));
  assert_int_equal(main_file_version(path), 2); /* the scenario: the main file lags */
  const int newest = tp_store_schema_version();

  int version = 0;
  if (tp_store_probe(path, &version) != TP_OK) fail_msg("probe: %s", tp_last_error());
  assert_int_equal(version, newest);
  tp_store *reader = NULL;
  if (tp_store_open_readonly(path, &reader) != TP_OK) fail_msg("reader: %s", tp_last_error());
  assert_int_equal(tp_store_version(reader), newest);
  tp_store_close(reader);
  rp_result r = tpbench(60, "runs", "--db", path, NULL);
  if (r.status != 0) fail_msg("runs: %d %s", r.status, r.err);
  rp_free(&r);
  r = tpbench(60, "migrate", "--db", path, NULL);
  assert_int_equal(r.status, 0);
  expect_in(r.out, "nothing to do", "migrate of a database the -wal brought up to date");
  rp_free(&r);
  tp_store_close(writer);
}

/* ---- import and its source ------------------------------------------------- */

static void test_import_leaves_nothing_beside_its_source(void **state) {
  scratch *s = *state;
  make_current(s);
  char wal_src[512], v1_src[512], rollback_src[512], target[512];
  assert_int_equal(fx_copy(s->current, in_dir(s, "wal_src.db", wal_src)), 0);
  assert_int_equal(fx_copy(FX_REAL_DB, in_dir(s, "v1_src.db", v1_src)), 0);
  assert_int_equal(fx_copy(s->current, in_dir(s, "rollback_src.db", rollback_src)), 0);
  raw_exec(rollback_src, "PRAGMA journal_mode = DELETE");
  const char *sources[] = {wal_src, v1_src, rollback_src};
  for (size_t i = 0; i < 3; i++) {
    snapshot before = take(sources[i]);
    rp_result r = tpbench(120, "import", sources[i], "--db", in_dir(s, "target.db", target), NULL);
    if (r.status != 0) fail_msg("import %s: %d: %s", sources[i], r.status, r.err);
    rp_free(&r);
    assert_unchanged(sources[i], &before);
    free(before.bytes);
  }
}

/* ---- 9: messages are sentences ------------------------------------------------ */

/* What a command prints: the last error without tp_fail's own "file:line: ". */
static void assert_sentence(const char *what) {
  const char *msg = tp_last_error();
  const char *sep = strstr(msg, ": ");
  const char *shown = sep ? sep + 2 : msg;
  const char *banned[] = {".c:", "SELECT ", "INSERT ", "BEGIN", "COMMIT", "PRAGMA", "ATTACH"};
  for (size_t i = 0; i < sizeof banned / sizeof banned[0]; i++)
    if (strstr(shown, banned[i])) fail_msg("%s: \"%s\" in: %s", what, banned[i], shown);
}

static void test_store_errors_are_sentences(void **state) {
  scratch *s = *state;
  make_current(s);
  char src[512];
  assert_int_equal(fx_copy(FX_REAL_DB, in_dir(s, "src.db", src)), 0);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(s->current, &store), TP_OK);
  /* Writing through a read-only store fails inside SQLite. */
  assert_int_not_equal(tp_store_import(store, src, NULL), TP_OK);
  expect_in(tp_last_error(), "nothing imported from", "import");
  assert_sentence("import into a read-only store");
  tp_config_axes axes = {.kind = "op", .tp = 2};
  tp_config_record rec = {.axes = &axes, .status = TP_STATUS_REJECTED, .reason = "r"};
  assert_int_not_equal(tp_store_put_config(store, 1, &rec, NULL), TP_OK);
  assert_sentence("configuration into a read-only store");
  tp_store_close(store);

  /* A constraint the schema enforces, on a store that can write. */
  assert_int_equal(tp_store_open(s->current, 0, &store), TP_OK);
  assert_int_not_equal(tp_store_put_config(store, 999999, &rec, NULL), TP_OK);
  expect_in(tp_last_error(), "not written", "put_config");
  assert_sentence("configuration of a missing run");
  tp_store_close(store);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_negative_user_version_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_readers_leave_an_empty_file_alone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_readers_refuse_older_schemas_and_name_migrate, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_migrate_refuses_what_it_cannot_migrate, setup, teardown),
      cmocka_unit_test_setup_teardown(test_readers_leave_wal_and_rollback_databases_alone, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_readonly_store_cannot_write, setup, teardown),
      cmocka_unit_test_setup_teardown(test_new_database_in_a_read_only_folder_says_why, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_database_in_a_read_only_folder_is_readable, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_recursive_view_is_refused_quickly, setup, teardown),
      cmocka_unit_test_setup_teardown(test_changed_view_or_extra_trigger_is_refused, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_changed_column_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_runaway_query_is_stopped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reader_stops_when_a_writer_shows_up, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wal_holds_what_the_main_file_lacks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_import_leaves_nothing_beside_its_source, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_store_errors_are_sentences, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
