/*
 * test_bench_tpbench.c — the tpbench binary as a user runs it: exit statuses
 * (2 for usage errors, 1 for failures, 0 for success), the messages on
 * stderr, --help and --version (the build's commit), `ops --list` needing no
 * GPU, and `report` on a missing database and on one written through the
 * store.
 *
 * TPBENCH_EXE is the path of the binary under test (set by CMake).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <ctype.h>

#include "bench_testutil.h"
#include "store/tp_store.h"

#ifndef TPBENCH_EXE
#error "TPBENCH_EXE must name the tpbench binary"
#endif

typedef struct run_result {
  int status; /* exit status, or 128 + signal */
  char *out;
  char *err;
} run_result;

static char *slurp(FILE *f) {
  fflush(f);
  long size = ftell(f);
  char *text = calloc((size_t)(size > 0 ? size : 0) + 1, 1);
  rewind(f);
  if (text && size > 0 && fread(text, 1, (size_t)size, f) != (size_t)size) text[0] = '\0';
  fclose(f);
  return text;
}

/* Runs tpbench with a NULL-terminated argument list; stdout and stderr are
 * captured. The binary gets 60 s. */
static run_result run_tpbench(const char *first, ...) {
  char *argv[32] = {TPBENCH_EXE};
  int argc = 1;
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
  va_end(ap);
  argv[argc] = NULL;
  FILE *out = tmpfile(), *err = tmpfile();
  assert_non_null(out);
  assert_non_null(err);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fileno(out), STDOUT_FILENO);
    dup2(fileno(err), STDERR_FILENO);
    execv(TPBENCH_EXE, argv);
    _exit(127);
  }
  int wstatus = tu_wait_child(pid, 60000);
  assert_int_not_equal(wstatus, -1);
  run_result r = {WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus), NULL, NULL};
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

static void release(run_result *r) {
  free(r->out);
  free(r->err);
}

static void expect_in(const char *text, const char *needle) {
  if (!strstr(text, needle)) fail_msg("'%s' not in:\n%s", needle, text);
}

static void test_unknown_command(void **state) {
  (void)state;
  run_result r = run_tpbench("frobnicate", NULL);
  assert_int_equal(r.status, 2);
  expect_in(r.err, "unknown command 'frobnicate'");
  expect_in(r.err, "Usage: tpbench <command>");
  release(&r);
  r = run_tpbench(NULL);
  assert_int_equal(r.status, 2);
  expect_in(r.err, "Usage:");
  release(&r);
}

static void test_help(void **state) {
  (void)state;
  run_result r = run_tpbench("--help", NULL);
  assert_int_equal(r.status, 0);
  expect_in(r.out, "ops");
  expect_in(r.out, "report");
  release(&r);
  r = run_tpbench("ops", "--help", NULL);
  assert_int_equal(r.status, 0);
  expect_in(r.out, "--iters N");
  expect_in(r.out, "[default: 50]");
  release(&r);
  r = run_tpbench("report", "--help", NULL);
  assert_int_equal(r.status, 0);
  expect_in(r.out, "--db PATH");
  expect_in(r.out, "[default: tpbench.db]");
  release(&r);
}

static void test_version(void **state) {
  (void)state;
  run_result r = run_tpbench("--version", NULL);
  assert_int_equal(r.status, 0);
  expect_in(r.out, "tpbench ");
  const char *commit = strstr(r.out, "commit ");
  assert_non_null(commit);
  commit += strlen("commit ");
  int hex = 0;
  while (isxdigit((unsigned char)commit[hex]) && !isupper((unsigned char)commit[hex])) hex++;
  if (hex != 40 && strncmp(commit, "unknown", 7) != 0) fail_msg("no commit in: %s", r.out);
  release(&r);
}

static void test_ops_usage_errors(void **state) {
  (void)state;
  run_result r = run_tpbench("ops", "--iters", "abc", NULL);
  assert_int_equal(r.status, 2);
  expect_in(r.err, "--iters: 'abc' is not a whole number");
  release(&r);
  r = run_tpbench("ops", "--no-such-option", NULL);
  assert_int_equal(r.status, 2);
  expect_in(r.err, "unknown option '--no-such-option'");
  release(&r);
  r = run_tpbench("ops", "--list", "--models", "7b", NULL);
  assert_int_equal(r.status, 2);
  expect_in(r.err, "7b");
  release(&r);
}

/* Bad input to the GPU build's ops is refused before any GPU is looked for
 * (exit 2); the build without CUDA says so instead. */
static void test_ops_bad_input(void **state) {
  (void)state;
  run_result r = run_tpbench("ops", "--tokens", "4095", "--tp", "2", NULL);
  if (strstr(r.err, "no CUDA support")) {
    release(&r);
    skip();
    return; /* skip() does not return; this tells the analyser so */
  }
  assert_int_equal(r.status, 2);
  expect_in(r.err, "--tokens 4095 is not divisible by the TP degree 2");
  release(&r);
  r = run_tpbench("ops", "--db", "/nonexistent/dir/x.db", NULL);
  assert_int_equal(r.status, 2);
  expect_in(r.err, "cannot create database /nonexistent/dir/x.db");
  release(&r);
  char foreign[] = "/tmp/tpbench-foreign-XXXXXX";
  int fd = mkstemp(foreign);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "not sqlite\n", 11), 11);
  close(fd);
  r = run_tpbench("ops", "--db", foreign, NULL);
  assert_int_equal(r.status, 2);
  expect_in(r.err, "not a tpbench database");
  release(&r);
  unlink(foreign);
  /* a tiny matrix, so a machine with GPUs runs it in seconds instead of failing */
  r = run_tpbench("ops", "--models", "debug", "--projs", "qkv", "--tokens", "64", "--iters", "1",
                  "--warmup", "0", "--db", "/tmp/tpbench-nogpu-check.db", NULL);
  if (r.status != 0) {
    assert_int_equal(r.status, 1);
    expect_in(r.err, "no CUDA device found");
  }
  release(&r);
  unlink("/tmp/tpbench-nogpu-check.db");
}

static void test_ops_list(void **state) {
  (void)state;
  run_result r = run_tpbench("ops", "--list", "--models", "debug", "--projs", "qkv", "--tokens",
                             "128", "--tp", "1,2", NULL);
  assert_int_equal(r.status, 0);
  expect_in(r.out, "dist_gemm needs TP > 1");
  expect_in(r.out, "8 configurations");
  release(&r);
}

static void test_report_missing_db(void **state) {
  (void)state;
  run_result r = run_tpbench("report", "--db", "/nonexistent/tpbench.db", NULL);
  assert_int_not_equal(r.status, 0);
  expect_in(r.err, "/nonexistent/tpbench.db");
  release(&r);
  /* ... and it was not created. */
  assert_int_equal(access("/nonexistent/tpbench.db", F_OK), -1);
  r = run_tpbench("report", "--format", "xml", NULL);
  assert_int_equal(r.status, 2);
  expect_in(r.err, "--format");
  release(&r);
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
                           .layer = "ag_linear",
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
  run_result r = run_tpbench("report", "--db", path, "--format", "csv", NULL);
  if (r.status != 0) fail_msg("status %d: %s", r.status, r.err);
  expect_in(r.out, "llama3-8b");
  release(&r);
  /* "8b" is taken for the model's canonical name. */
  r = run_tpbench("report", "--db", path, "--model", "8b", NULL);
  if (r.status != 0) fail_msg("status %d: %s", r.status, r.err);
  expect_in(r.out, "qkv");
  release(&r);
  static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
  for (int i = 0; i < 4; i++) {
    char file[160];
    snprintf(file, sizeof file, "%s%s", path, suffixes[i]);
    unlink(file);
  }
  assert_int_equal(rmdir(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unknown_command),   cmocka_unit_test(test_help),
      cmocka_unit_test(test_version),           cmocka_unit_test(test_ops_usage_errors),
      cmocka_unit_test(test_ops_bad_input),     cmocka_unit_test(test_ops_list),
      cmocka_unit_test(test_report_missing_db), cmocka_unit_test(test_report_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
