/*
 * test_bench_tpbench.c — the tpbench binary as a user runs it: exit statuses
 * (2 for usage errors, 1 for failures, 0 for success), the messages on
 * stderr, --help and --version (the build's commit), `ops --list` needing no
 * GPU, and `report` on a missing database and on one written through the
 * store. The exit status rule across commands: every path that is not a
 * usable tpbench database is 2 in every command that reads one, and so is
 * an output folder that is missing; `import` refuses an empty source before
 * the target exists; `ops --list` takes the tracing options in every build;
 * a write to stdout that fails (/dev/full) is 1, never a quiet 0.
 *
 * TPBENCH_EXE is the path of the binary under test (set by CMake).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <ctype.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "store/tp_store.h"
#include "tests/cpu/fixture_db.h"
#include "tests/cpu/run_program.h"

#ifndef TPBENCH_EXE
#error "TPBENCH_EXE must name the tpbench binary"
#endif

/* A run that did not finish (no start, or killed at the deadline) fails the
 * test, whatever status it expected. */
static rp_result finished(rp_result r) {
  if (r.status < 0) fail_msg("tpbench did not finish: %s", r.err ? r.err : "");
  return r;
}

/* Runs tpbench (60 s at most) with a NULL-terminated argument list, capturing
 * its output; _into sends stdout to a path instead (/dev/full). */
#define run_tpbench(...) finished(rp_run_exe(TPBENCH_EXE, 60, NULL, __VA_ARGS__))
#define RUN_EXPECT(status, in_out, in_err, ...)                                                    \
  rp_run_expect(TPBENCH_EXE, 60, (status), (in_out), (in_err), __VA_ARGS__, NULL)
#define run_tpbench_into(stdout_path, ...)                                                         \
  finished(rp_run_exe(TPBENCH_EXE, 60, (stdout_path), __VA_ARGS__))

static void expect_in(const char *text, const char *needle) {
  if (!strstr(text, needle)) fail_msg("'%s' not in:\n%s", needle, text);
}

static void test_unknown_command(void **state) {
  (void)state;
  rp_result r = run_tpbench("frobnicate", NULL);
  assert_int_equal(r.status, 2);
  expect_in(r.err, "unknown command 'frobnicate'");
  expect_in(r.err, "Usage: tpbench <command>");
  rp_free(&r);
  r = run_tpbench(NULL);
  assert_int_equal(r.status, 2);
  expect_in(r.err, "Usage:");
  rp_free(&r);
}

static void test_help(void **state) {
  (void)state;
  /* the command (NULL: tpbench itself), then two things its --help says */
  static const char *const cases[][3] = {
      {NULL, "ops", "report"},
      {"ops", "--iters N", "[default: 50]"},
      {"report", "--db PATH", "[default: tpbench.db]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *const *c = cases[i];
    rp_result r = c[0] ? run_tpbench(c[0], "--help", NULL) : run_tpbench("--help", NULL);
    rp_expect(&r, 0, c[1], NULL);
    expect_in(r.out, c[2]);
    rp_free(&r);
  }
}

static void test_version(void **state) {
  (void)state;
  rp_result r = run_tpbench("--version", NULL);
  assert_int_equal(r.status, 0);
  expect_in(r.out, "tpbench ");
  const char *commit = strstr(r.out, "commit ");
  assert_non_null(commit);
  commit += strlen("commit ");
  int hex = 0;
  while (isxdigit((unsigned char)commit[hex]) && !isupper((unsigned char)commit[hex])) hex++;
  if (hex != 40 && strncmp(commit, "unknown", 7) != 0) fail_msg("no commit in: %s", r.out);
  rp_free(&r);
}

static void test_ops_usage_errors(void **state) {
  (void)state;
  RUN_EXPECT(2, NULL, "--iters: 'abc' is not a whole number", "ops", "--iters", "abc");
  RUN_EXPECT(2, NULL, "unknown option '--no-such-option'", "ops", "--no-such-option");
  RUN_EXPECT(2, NULL, "7b", "ops", "--list", "--models", "7b");
}

/* Bad input to the GPU build's ops is refused before any GPU is looked for
 * (exit 2); the build without CUDA says so instead. */
static void test_ops_bad_input(void **state) {
  (void)state;
  rp_result r = run_tpbench("ops", "--tokens", "4095", "--tp", "2", NULL);
  if (strstr(r.err, "no CUDA support")) {
    rp_free(&r);
    skip();
    return; /* skip() does not return; this tells the analyser so */
  }
  assert_int_equal(r.status, 2);
  expect_in(r.err, "--tokens 4095 is not divisible by the TP degree 2");
  rp_free(&r);
  RUN_EXPECT(2, NULL, "cannot create database /nonexistent/dir/x.db", "ops", "--db",
             "/nonexistent/dir/x.db");
  char foreign[] = "/tmp/tpbench-foreign-XXXXXX";
  int fd = mkstemp(foreign);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "not sqlite\n", 11), 11);
  close(fd);
  RUN_EXPECT(2, NULL, "not a tpbench database", "ops", "--db", foreign);
  unlink(foreign);
  /* a tiny matrix, so a machine with GPUs runs it in seconds instead of failing; a path of
   * this process's own, since two build trees' tests may run at once (scripts/test.sh) */
  char nogpu_db[64];
  snprintf(nogpu_db, sizeof nogpu_db, "/tmp/tpbench-nogpu-check-%ld.db", (long)getpid());
  r = run_tpbench("ops", "--models", "debug", "--projs", "qkv", "--tokens", "64", "--iters", "1",
                  "--warmup", "0", "--db", nogpu_db, NULL);
  if (r.status != 0) {
    assert_int_equal(r.status, 1);
    expect_in(r.err, "no CUDA device found");
  }
  rp_free(&r);
  unlink(nogpu_db);
}

static void test_ops_list(void **state) {
  (void)state;
  rp_result r = run_tpbench("ops", "--list", "--models", "debug", "--projs", "qkv", "--tokens",
                            "128", "--tp", "1,2", NULL);
  assert_int_equal(r.status, 0);
  expect_in(r.out, "dist_gemm needs TP > 1");
  expect_in(r.out, "12 configurations"); /* 2 cases: stock and the collective alone x2 */
  expect_in(r.out, "op stock nccl-window");
  rp_free(&r);
}

/* ops refuses token counts that do not split over the TP degrees before any GPU time (exit 2:
 * test_ops_bad_input); its plan without a GPU, ops --list and matrix --for ops, says the same
 * for the same options (flags, --axis or the tp a missing --tp stands for), never a list of
 * rejected rows that ops would not store. A shape's M that does not divide stays a rejection. */
static void test_ops_plan_refuses_indivisible_tokens(void **state) {
  (void)state;
  const char *want = "--tokens 4095 is not divisible by the TP degree 2";
  RUN_EXPECT(2, NULL, want, "ops", "--list", "--models", "debug", "--projs", "qkv", "--tokens",
             "4095", "--tp", "2");
  RUN_EXPECT(2, NULL, want, "matrix", "--for", "ops", "--models", "debug", "--projs", "qkv",
             "--tokens", "4095", "--tp", "2");
  RUN_EXPECT(2, NULL, want, "matrix", "--for", "ops", "--models", "debug", "--projs", "qkv",
             "--axis", "tokens=4096,4095");
  RUN_EXPECT(2, NULL, "--tokens 4096 is not divisible by the TP degree 3", "ops", "--list",
             "--models", "debug", "--projs", "qkv", "--tokens", "4096", "--gpus", "3");
  RUN_EXPECT(0, "rejected: tokens 4095 not divisible by TP 2", NULL, "ops", "--list", "--shape",
             "4095,512,256", "--tp", "2");
}

static void test_report_missing_db(void **state) {
  (void)state;
  rp_result r = run_tpbench("report", "--db", "/nonexistent/tpbench.db", NULL);
  assert_int_not_equal(r.status, 0);
  expect_in(r.err, "/nonexistent/tpbench.db");
  rp_free(&r);
  /* ... and it was not created. */
  assert_int_equal(access("/nonexistent/tpbench.db", F_OK), -1);
  RUN_EXPECT(2, NULL, "--format", "report", "--format", "xml");
}

/* Writes one run with a stock and a dist_gemm configuration of one case. */
static void write_small_db(const char *path) {
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(path, 1, &store), TP_OK);
  tp_run_info info = {.commit = "0123456789abcdef0123456789abcdef01234567",
                      .host = "test",
                      .gpu_name = "none",
                      .gpu_count = 2,
                      .command_line = "tpbench ops",
                      .command = "ops",
                      .warmup_iters = 1,
                      .measure_iters = 3};
  int64_t run = 0;
  assert_int_equal(tp_store_begin_run(store, &info, &run), TP_OK);
  const char *backends[] = {"stock", "dist_gemm"};
  const double times[][3] = {{100, 110, 120}, {80, 90, 100}};
  for (int b = 0; b < 2; b++) {
    tp_config_axes axes = {.kind = "op",
                           .model = "llama3-8b",
                           .op_or_layer = "ag_linear",
                           .proj = "qkv",
                           .backend = backends[b],
                           .tp = 2,
                           .tokens = 4096,
                           .m = 4096,
                           .n = 3072,
                           .k = 4096,
                           .n_weights = 1,
                           .dtype = "bf16",
                           .sp = 1,
                           .pass = "fwd"};
    if (b == 1) axes.schedule = "auto";
    tp_result res = {.n_samples = 3,
                     .median_us = times[b][1],
                     .p10_us = times[b][0],
                     .p90_us = times[b][2],
                     .mean_us = times[b][1],
                     .min_us = times[b][0],
                     .max_us = times[b][2],
                     .cv = 0.1,
                     .tokens_per_s = 4096 / times[b][1] * 1e6,
                     .max_abs_err = 0,
                     .rel_err = 0,
                     .numerics_ref = "stock"};
    tp_samples samples = {.rank = 0, .count = 3, .time_us = times[b]};
    tp_config_record rec = {.axes = &axes,
                            .status = TP_STATUS_OK,
                            .result = &res,
                            .samples = &samples,
                            .n_sample_sets = 1};
    int64_t id = 0;
    assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_OK);
  }
  assert_int_equal(tp_store_finish_run(store, run), TP_OK);
  tp_store_close(store);
}

static void test_report_table(void **state) {
  (void)state;
  char dir[] = "/tmp/tpbench_cli_test.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/t.db", dir);
  write_small_db(path);
  rp_result r = run_tpbench("report", "--db", path, "--format", "csv", NULL);
  if (r.status != 0) fail_msg("status %d: %s", r.status, r.err);
  expect_in(r.out, "llama3-8b");
  rp_free(&r);
  /* "8b" is taken for the model's canonical name. */
  r = run_tpbench("report", "--db", path, "--model", "8b", NULL);
  if (r.status != 0) fail_msg("status %d: %s", r.status, r.err);
  expect_in(r.out, "qkv");
  rp_free(&r);
  static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
  for (int i = 0; i < 4; i++) {
    char file[160];
    snprintf(file, sizeof file, "%s%s", path, suffixes[i]);
    unlink(file);
  }
  assert_int_equal(rmdir(dir), 0);
}

/* ---- the exit status rule (README, Commands) ------------------------------------- */

static void make_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
  assert_int_equal(fclose(f), 0);
}

/* A SQLite file with a header and no tables (a table made and dropped). */
static void make_tableless_sqlite(const char *path) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, "CREATE TABLE t (x); DROP TABLE t", NULL, NULL, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

static int path_exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

static void expect_status(rp_result *r, int status, const char *what, const char *path) {
  if (r->status != status)
    fail_msg("%s on %s: exit %d, expected %d; stderr: %s", what, path, r->status, status, r->err);
  rp_free(r);
}

/* A --db that is not a usable tpbench database (missing, text, 0 bytes, a
 * FIFO, a folder, a device, an older schema that needs `tpbench migrate`) is
 * the user's input: exit 2 in every command that reads one. report,
 * history, trace and dashboard said 1, import 1 for a missing or FIFO
 * source, migrate 1 for a missing file; compare said 2. Nothing is made. */
static void test_unusable_databases_exit_2(void **state) {
  (void)state;
  char dir[] = "/tmp/tpbench_exit_test.XXXXXX";
  assert_non_null(mkdtemp(dir));
  enum { N_PATHS = 7 };
  char paths[N_PATHS][160];
  const char *names[N_PATHS] = {"missing.db", "text.db", "empty.db", "fifo.db",
                                "folder.db",  NULL,      "older.db"};
  for (int i = 0; i < N_PATHS; i++)
    snprintf(paths[i], sizeof paths[i], "%s/%s", dir, names[i] ? names[i] : "");
  snprintf(paths[5], sizeof paths[5], "/dev/zero");
  make_file(paths[1], "not a database\n");
  make_file(paths[2], "");
  assert_int_equal(mkfifo(paths[3], 0600), 0);
  assert_int_equal(mkdir(paths[4], 0700), 0);
  assert_int_equal(fx_copy(FX_REAL_DB, paths[6]), 0); /* schema 1 */
  char site[160], target[160];
  snprintf(site, sizeof site, "%s/site", dir);
  snprintf(target, sizeof target, "%s/target.db", dir);
  for (int i = 0; i < N_PATHS; i++) {
    const char *db = paths[i];
    rp_result r = run_tpbench("report", "--db", db, NULL);
    if (i == 6) expect_in(r.err, "tpbench migrate");
    expect_status(&r, 2, "report", db);
    r = run_tpbench("history", "--config", "1", "--db", db, NULL);
    expect_status(&r, 2, "history", db);
    r = run_tpbench("trace", "--config", "1", "--db", db, NULL);
    expect_status(&r, 2, "trace", db);
    r = run_tpbench("dashboard", "--out", site, "--db", db, NULL);
    expect_status(&r, 2, "dashboard", db);
    r = run_tpbench("compare", "run:1", "run:1", "--db", db, NULL);
    expect_status(&r, 2, "compare", db);
    if (i == 6) continue; /* an older schema imports and migrates */
    r = run_tpbench("import", db, "--db", target, NULL);
    expect_status(&r, 2, "import", db);
    r = run_tpbench("migrate", "--db", db, NULL);
    expect_status(&r, 2, "migrate", db);
  }
  assert_false(path_exists(site));
  assert_false(path_exists(target));
  assert_false(path_exists(paths[0]));

  /* On a usable database: an unknown run is the input (2); a configuration
   * without a trace is not (1); an output folder that is missing is (2,
   * said before anything is read, nothing made). */
  char db[160], out[200];
  snprintf(db, sizeof db, "%s/small.db", dir);
  write_small_db(db);
  rp_result r = run_tpbench("report", "--run", "6", "--db", db, NULL);
  expect_in(r.err, "there is no run 6");
  expect_status(&r, 2, "report --run 6", db);
  r = run_tpbench("trace", "--config", "1", "--db", db, NULL);
  expect_in(r.err, "has no trace");
  expect_status(&r, 1, "trace of an untraced configuration", db);
  snprintf(out, sizeof out, "%s/nodir/x.json", dir);
  r = run_tpbench("trace", "--config", "1", "--db", db, "--out", out, NULL);
  expect_in(r.err, "cannot write here");
  expect_status(&r, 2, "trace --out nodir/x.json", db);
  snprintf(out, sizeof out, "%s/nodir", dir);
  assert_false(path_exists(out));

  const char *leftovers[] = {"text.db",      "empty.db",         "fifo.db",
                             "older.db",     "small.db",         "small.db-wal",
                             "small.db-shm", "small.db-journal", "older.db-wal"};
  for (size_t i = 0; i < sizeof leftovers / sizeof leftovers[0]; i++) {
    char file[200];
    snprintf(file, sizeof file, "%s/%s", dir, leftovers[i]);
    unlink(file);
  }
  assert_int_equal(rmdir(paths[4]), 0);
  assert_int_equal(rmdir(dir), 0);
}

/* import of a 0-byte source or a SQLite file without tables said "0 runs
 * imported", exited 0 and created the target: refused now (2) before the
 * target is opened, so a missing target is not made and an existing one
 * stays byte-identical. migrate refuses both as well. */
static void test_import_refuses_empty_sources(void **state) {
  (void)state;
  char dir[] = "/tmp/tpbench_import_empty.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char empty[160], tableless[160], target[160];
  snprintf(empty, sizeof empty, "%s/empty.db", dir);
  snprintf(tableless, sizeof tableless, "%s/tableless.db", dir);
  snprintf(target, sizeof target, "%s/target.db", dir);
  make_file(empty, "");
  make_tableless_sqlite(tableless);
  const char *sources[] = {empty, tableless};
  for (int i = 0; i < 2; i++) {
    rp_result r = run_tpbench("import", sources[i], "--db", target, NULL);
    expect_in(r.err, "not a tpbench database");
    if (strstr(r.out, "imported")) fail_msg("import reported success: %s", r.out);
    expect_status(&r, 2, "import", sources[i]);
    assert_false(path_exists(target));
    r = run_tpbench("migrate", "--db", sources[i], NULL);
    expect_in(r.err, "not a tpbench database");
    expect_status(&r, 2, "migrate", sources[i]);
  }
  struct stat st;
  assert_int_equal(stat(empty, &st), 0);
  assert_int_equal(st.st_size, 0);

  write_small_db(target);
  size_t before_len = 0, after_len = 0;
  FILE *f = fopen(target, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  before_len = (size_t)ftell(f);
  rewind(f);
  unsigned char *before = malloc(before_len);
  assert_non_null(before);
  assert_int_equal(fread(before, 1, before_len, f), before_len);
  fclose(f);
  rp_result r = run_tpbench("import", tableless, "--db", target, NULL);
  expect_status(&r, 2, "import into an existing target", tableless);
  f = fopen(target, "rb");
  assert_non_null(f);
  unsigned char *after = malloc(before_len + 1);
  assert_non_null(after);
  after_len = fread(after, 1, before_len + 1, f);
  fclose(f);
  assert_int_equal(after_len, before_len);
  assert_memory_equal(after, before, before_len);
  free(before);
  free(after);

  const char *files[] = {"empty.db", "tableless.db", "target.db", "target.db-wal", "target.db-shm"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char file[200];
    snprintf(file, sizeof file, "%s/%s", dir, files[i]);
    unlink(file);
  }
  assert_int_equal(rmdir(dir), 0);
}

/* `ops --list --trace` and `--trace-iters` were unknown options (exit 2) in
 * a build without CUDA: every build takes the same options, from one table
 * shared with run. */
static void test_ops_takes_tracing_options_in_every_build(void **state) {
  (void)state;
  rp_result r = run_tpbench("ops", "--list", "--models", "debug", "--projs", "qkv", "--tokens",
                            "128", "--tp", "2", "--trace", "--trace-iters", "3", NULL);
  if (r.status != 0) fail_msg("status %d: %s", r.status, r.err);
  expect_in(r.out, "configurations");
  rp_free(&r);
  r = run_tpbench("ops", "--list", "--models", "debug", "--trace-iters", "0", NULL);
  expect_in(r.err, "--trace-iters: 0 is out of range [1, 1000]");
  expect_status(&r, 2, "ops --trace-iters 0", "-");
  const char *commands[] = {"ops", "run"};
  for (int i = 0; i < 2; i++) {
    r = run_tpbench(commands[i], "--help", NULL);
    assert_int_equal(r.status, 0);
    expect_in(r.out, "--trace-iters N");
    expect_in(r.out, "iterations of the traced window [default: 5]");
    rp_free(&r);
  }
}

/* Output that never arrived (stdout on a full disk) once exited 0: matrix,
 * ops --list, --help and --version now say so and exit 1. */
static void test_stdout_write_errors_exit_1(void **state) {
  (void)state;
  if (access("/dev/full", W_OK) != 0) skip();
  const char *const cases[][6] = {
      {"matrix", "--preset", "full", NULL}, {"ops", "--list", NULL}, {"run", "--help", NULL},
      {"report", "--help", NULL},           {"--help", NULL},        {"--version", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *const *c = cases[i];
    rp_result r = run_tpbench_into("/dev/full", c[0], c[1], c[2], c[3], NULL);
    expect_in(r.err, "writing the output failed: No space left on device");
    expect_status(&r, 1, c[0], "/dev/full");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unknown_command),
      cmocka_unit_test(test_help),
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_ops_usage_errors),
      cmocka_unit_test(test_ops_bad_input),
      cmocka_unit_test(test_ops_list),
      cmocka_unit_test(test_ops_plan_refuses_indivisible_tokens),
      cmocka_unit_test(test_report_missing_db),
      cmocka_unit_test(test_report_table),
      cmocka_unit_test(test_unusable_databases_exit_2),
      cmocka_unit_test(test_import_refuses_empty_sources),
      cmocka_unit_test(test_ops_takes_tracing_options_in_every_build),
      cmocka_unit_test(test_stdout_write_errors_exit_1),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
