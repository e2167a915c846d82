/*
 * test_commands.c — the regression-tracking and trace commands of the
 * tpbench binary as a user (or a CI job) runs them: compare's exit status
 * (0 / 1 regression / 2 bad input), history, trace (2 for a configuration
 * that does not exist, 1 for one without a trace), import (twice is a no-op;
 * a foreign file is refused and the target stays byte-identical) and
 * dashboard's usage. --help of each.
 *
 * The database is a copy of the real H200 run plus two runs synthesised
 * from it (fixture_db.h): an exact copy (commit feed0001) and one 10% slower
 * (feed0002), and a synthesised trace. TPBENCH_EXE names the binary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>
#include <sys/stat.h>

#include "fixture_db.h"
#include "run_program.h"

#ifndef TPBENCH_EXE
#error "TPBENCH_EXE must name the tpbench binary"
#endif

typedef struct {
  fx_dir dir;
  char db[512];
  int64_t traced;
  char traced_key[1024];
} fixture;

static fx_change scaled(const char *key, void *ctx) {
  (void)key;
  return *(fx_change *)ctx;
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || fx_mkdir(&f->dir, "tp_commands") != 0) return -1;
  fx_path(&f->dir, "bench.db", f->db, sizeof f->db);
  if (fx_copy(FX_REAL_DB, f->db) != 0) return -1;
  tp_store *s = NULL;
  if (tp_store_open(f->db, 0, &s) != TP_OK) return -1;
  fx_change same = {1.0, 0.0}, slower = {1.10, 0.002};
  if (fx_synthesise_run(s, 1, "feed0001", scaled, &same, 5) < 0 ||
      fx_synthesise_run(s, 1, "feed0002", scaled, &slower, 6) < 0)
    return -1;
  f->traced = fx_int(s, "SELECT min(c.id) FROM configs c JOIN runs r ON r.id = c.run_id WHERE "
                        "r.commit_sha = 'feed0002' AND c.backend = 'dist_gemm'");
  if (fx_put_trace(s, f->traced, 3, 1) != TP_OK) return -1;
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(tp_store_db(s), "SELECT config_key FROM configs WHERE id = ?", -1, &st, NULL);
  sqlite3_bind_int64(st, 1, f->traced);
  if (sqlite3_step(st) == SQLITE_ROW)
    snprintf(f->traced_key, sizeof f->traced_key, "%s", sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  tp_store_close(s);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  fx_rmdir(&f->dir);
  free(f);
  return 0;
}

/* Runs tpbench with a NULL-terminated argument list. */
static rp_result tpbench(const char *first, ...) {
  char *argv[32] = {TPBENCH_EXE};
  int argc = 1;
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *))
    argv[argc++] = (char *)a;
  va_end(ap);
  argv[argc] = NULL;
  return rp_run(argv, 120);
}

static void expect(const rp_result *r, int status, const char *in_out, const char *in_err) {
  if (r->status != status)
    fail_msg("exit %d, expected %d\nstdout:\n%.2000s\nstderr:\n%s", r->status, status, r->out,
             r->err);
  if (in_out && !strstr(r->out, in_out)) fail_msg("'%s' not in stdout:\n%.3000s", in_out, r->out);
  if (in_err && !strstr(r->err, in_err)) fail_msg("'%s' not in stderr:\n%s", in_err, r->err);
}

#define RUN_EXPECT(status, in_out, in_err, ...)                                                    \
  do {                                                                                             \
    rp_result r_ = tpbench(__VA_ARGS__, NULL);                                                     \
    expect(&r_, (status), (in_out), (in_err));                                                     \
    rp_free(&r_);                                                                                  \
  } while (0)

/* ---- compare -------------------------------------------------------------------- */

static void test_compare_exit_status(void **state) {
  fixture *f = *state;
  RUN_EXPECT(0, "**No regression**: 0 regressed, 0 improved, 144 unchanged", NULL, "compare",
             "run:1", "feed0001", "--db", f->db);
  RUN_EXPECT(1, "**Regression**: 144 regressed", NULL, "compare", "feed0001", "feed0002", "--db",
             f->db);
  /* A threshold beyond the change makes it pass. */
  RUN_EXPECT(0, "0 regressed", NULL, "compare", "feed0001", "feed0002", "--db", f->db,
             "--threshold", "12.5");
  RUN_EXPECT(1, "\"regressed\": 144", NULL, "compare", "feed0001", "feed0002", "--db", f->db,
             "--format", "json");
  /* Everything that is not a verdict is 2, never 1. */
  RUN_EXPECT(2, NULL, "no run of a commit starting with 'beef'", "compare", "beef", "feed0002",
             "--db", f->db);
  RUN_EXPECT(2, NULL, "needs BASE and HEAD", "compare", "feed0001", "--db", f->db);
  RUN_EXPECT(2, NULL, "--threshold: 'x'", "compare", "feed0001", "feed0002", "--db", f->db,
             "--threshold", "x");
  RUN_EXPECT(2, NULL, "--alpha", "compare", "feed0001", "feed0002", "--db", f->db, "--alpha", "1");
  RUN_EXPECT(2, NULL, "no database at", "compare", "a", "b", "--db", "/nonexistent/x.db");
  RUN_EXPECT(2, NULL, "unexpected argument", "compare", "a", "b", "c", "--db", f->db);
  RUN_EXPECT(0, "Mann-Whitney", NULL, "compare", "--help");
}

/* ---- history ------------------------------------------------------------------------ */

static void test_history_command(void **state) {
  fixture *f = *state;
  char id[32];
  snprintf(id, sizeof id, "%lld", (long long)f->traced);
  RUN_EXPECT(0, "| 1 | unknown |", NULL, "history", "--db", f->db, "--config", id);
  RUN_EXPECT(0, "| feed0002 |", NULL, "history", "--db", f->db, "--key", f->traced_key);
  RUN_EXPECT(0, "\"vs_first\"", NULL, "history", "--db", f->db, "--config", id, "--format", "json");
  RUN_EXPECT(2, NULL, "exactly one of --key and --config", "history", "--db", f->db);
  RUN_EXPECT(2, NULL, "exactly one", "history", "--db", f->db, "--config", id, "--key", "k");
  RUN_EXPECT(2, NULL, "no configuration has key", "history", "--db", f->db, "--key", "nope");
  RUN_EXPECT(1, NULL, "no database", "history", "--db", "/nonexistent/x.db", "--config", "1");
}

/* ---- trace --------------------------------------------------------------------------- */

static void test_trace_command(void **state) {
  fixture *f = *state;
  char id[32], out[600];
  snprintf(id, sizeof id, "%lld", (long long)f->traced);
  rp_result r = tpbench("trace", "--db", f->db, "--config", id, NULL);
  expect(&r, 0, "\"traceEvents\":[", NULL);
  json_error_t err;
  json_t *root = json_loads(r.out, 0, &err);
  if (!root) fail_msg("not JSON: %s", err.text);
  assert_int_equal(json_array_size(json_object_get(root, "traceEvents")),
                   2 * 3 * 3 + 2 * 2 + 2 * 3 * 2); /* events, processes, threads */
  json_decref(root);
  rp_free(&r);

  fx_path(&f->dir, "trace.json", out, sizeof out);
  RUN_EXPECT(0, NULL, NULL, "trace", "--db", f->db, "--key", f->traced_key, "--out", out);
  size_t len = 0;
  unsigned char *written = fx_read_all(out, &len);
  assert_non_null(written);
  assert_true(len > 1000);
  free(written);

  RUN_EXPECT(1, NULL, "configuration 3 has no trace", "trace", "--db", f->db, "--config", "3");
  RUN_EXPECT(2, NULL, "there is no configuration 123456", "trace", "--db", f->db, "--config",
             "123456");
  RUN_EXPECT(2, NULL, "no configuration has key", "trace", "--db", f->db, "--key", "kind=op;x");
  RUN_EXPECT(2, NULL, "exactly one of --config and --key", "trace", "--db", f->db);
  RUN_EXPECT(0, "--out FILE", NULL, "trace", "--help");
}

/* ---- import ---------------------------------------------------------------------------- */

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static void test_import_command(void **state) {
  fixture *f = *state;
  char target[600], foreign[600], wal[700], shm[700];
  fx_path(&f->dir, "merged.db", target, sizeof target);
  fx_path(&f->dir, "notes.db", foreign, sizeof foreign);
  FILE *txt = fopen(foreign, "w");
  assert_non_null(txt);
  fputs("not a database at all\n", txt);
  fclose(txt);

  /* A refused source does not even create the target. */
  RUN_EXPECT(2, NULL, "not a tpbench database", "import", foreign, "--db", target);
  assert_false(exists(target));

  RUN_EXPECT(0, "3 runs imported (432 configurations, 25920 samples, 18 trace events), 0 already",
             NULL, "import", f->db, "--db", target);
  size_t len_before = 0, len_after = 0;
  unsigned char *before = fx_read_all(target, &len_before);
  RUN_EXPECT(0, "0 runs imported (0 configurations, 0 samples, 0 trace events), 3 already present",
             NULL, "import", f->db, "--db", target);
  unsigned char *after = fx_read_all(target, &len_after);
  assert_int_equal(len_before, len_after);
  assert_memory_equal(before, after, len_before);
  free(after);

  /* Refused after it exists: byte-identical, no -wal or -shm left. */
  RUN_EXPECT(2, NULL, "not a tpbench database", "import", foreign, "--db", target);
  after = fx_read_all(target, &len_after);
  assert_int_equal(len_before, len_after);
  assert_memory_equal(before, after, len_before);
  free(after);
  free(before);
  snprintf(wal, sizeof wal, "%s-wal", target);
  snprintf(shm, sizeof shm, "%s-shm", target);
  assert_false(exists(wal));
  assert_false(exists(shm));

  /* What was imported reads back the same: the same comparison verdicts. */
  RUN_EXPECT(1, "**Regression**: 144 regressed", NULL, "compare", "feed0001", "feed0002", "--db",
             target);
  RUN_EXPECT(2, NULL, "name at least one database", "import", "--db", target);
  RUN_EXPECT(1, NULL, "no such database", "import", "/nonexistent/x.db", "--db", target);
}

/* ---- dashboard ------------------------------------------------------------------------------ */

static void test_dashboard_command(void **state) {
  fixture *f = *state;
  char dir[600], page[700];
  fx_path(&f->dir, "site", dir, sizeof dir);
  snprintf(page, sizeof page, "%s/index.html", dir);
  RUN_EXPECT(0, "3 runs, 1 trace, 144 configurations in the trends", NULL, "dashboard", "--db",
             f->db, "--out", dir);
  assert_true(exists(page));
  RUN_EXPECT(2, NULL, "--out DIR is required", "dashboard", "--db", f->db);
  RUN_EXPECT(1, NULL, "not a directory", "dashboard", "--db", f->db, "--out", f->db);
  RUN_EXPECT(0, "offline", NULL, "dashboard", "--help");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compare_exit_status), cmocka_unit_test(test_history_command),
      cmocka_unit_test(test_trace_command),       cmocka_unit_test(test_import_command),
      cmocka_unit_test(test_dashboard_command),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
