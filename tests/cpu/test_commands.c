/*
 * test_commands.c — the regression-tracking and trace commands of the
 * tpbench binary as a user (or a CI job) runs them: compare's exit status
 * (0 / 1 regression / 2 bad input), history, trace (2 for a configuration
 * that does not exist, 1 for one without a trace), import (twice is a no-op;
 * a foreign file is refused and the target stays byte-identical) and
 * dashboard's usage. --help of each. Output paths: trace --out and the
 * dashboard refuse a FIFO, a link to a device, a folder and the database
 * (exit 2, nothing changed), the database's -wal named through a symbolic
 * or hard link to it too; never write through a planted link; keep a
 * replaced file's mode; the dashboard refuses --out before reading the
 * database; racing dashboards leave one whole page. Empty paths and link's
 * options are usage errors in every build.
 *
 * The database is a copy of the real H200 run plus two runs synthesised
 * from it (fixture_db.h): an exact copy (commit feed0001) and one 10% slower
 * (feed0002), and a synthesised trace. TPBENCH_EXE names the binary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/cpu/fixture_db.h"
#include "tests/cpu/run_program.h"

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

/* Runs tpbench (120 s at most) with a NULL-terminated argument list. */
#define tpbench(...) rp_run_exe(TPBENCH_EXE, 120, NULL, __VA_ARGS__)

/* Runs tpbench with the arguments that follow; it must exit with status and
 * say in_out on stdout and in_err on stderr (NULL: anything). */
#define RUN_EXPECT(status, in_out, in_err, ...)                                                    \
  rp_run_expect(TPBENCH_EXE, 120, (status), (in_out), (in_err), __VA_ARGS__, NULL)

/* ---- compare -------------------------------------------------------------------- */

static double fused_slower(const fx_synth_config *c, void *ctx) {
  return !strcmp(c->axes.backend, "dist_gemm") && c->fused == 1 ? *(const double *)ctx : 1.0;
}

/* compare's exit status on runs measured in rounds (fixture_db.h's
 * synthetic machine): identical code on a machine drifted 8 %, fused
 * dist_gemm 5 % slower, another GPU model. */
static void test_compare_exit_status(void **state) {
  fixture *f = *state;
  char db[600];
  fx_path(&f->dir, "rounds.db", db, sizeof db);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 1, &s), TP_OK);
  fx_synth_config configs[FX_SYNTH_MAX_CONFIGS];
  size_t n = fx_synth_standard_cases(configs);
  static const double slower = 1.05;
  fx_synth_run runs[] = {
      {.commit = "cafe0001", .started_at = "2026-12-01T10:00:00Z", .seed = 1},
      {.commit = "cafe0002", .started_at = "2026-12-01T10:20:00Z", .drift = 1.08, .seed = 2},
      {.commit = "cafe0003",
       .started_at = "2026-12-01T10:40:00Z",
       .seed = 3,
       .factor = fused_slower,
       .ctx = (void *)&slower,
       .test_knobs = "TPBENCH_TEST_DIST_DELAY_US=25 (synthetic)"},
      {.commit = "cafe0004", .gpu_name = "NVIDIA H100 80GB HBM3", .seed = 4},
  };
  for (size_t i = 0; i < sizeof runs / sizeof *runs; i++)
    assert_true(fx_put_synth_run(s, &runs[i], configs, n) > 0);
  tp_store_close(s);
  RUN_EXPECT(0, "**No regression**: 0 regressed (0 failed in head)", NULL, "compare", "cafe0001",
             "cafe0002", "--db", db);
  RUN_EXPECT(1, "**Regression**: 14 regressed", NULL, "compare", "cafe0001", "cafe0003", "--db",
             db);
  RUN_EXPECT(1, "\"regressed\": 14", NULL, "compare", "cafe0001", "cafe0003", "--db", db,
             "--format", "json");
  /* A threshold beyond the change makes it pass; so do filters that leave
   * only references or another model's rows out. */
  RUN_EXPECT(0, "0 regressed", NULL, "compare", "cafe0001", "cafe0003", "--db", db, "--threshold",
             "12.5");
  RUN_EXPECT(0, "**No regression (nothing gated: no dist_gemm configuration ran on both sides",
             "nothing gated: 8 configurations compared", "compare", "cafe0001", "cafe0003", "--db",
             db, "--kind", "gemm");
  RUN_EXPECT(1, "7 regressed", NULL, "compare", "cafe0001", "cafe0003", "--db", db, "--model",
             "llama3-70b", "--backend", "dist_gemm");
  RUN_EXPECT(1, "1 regressed", NULL, "compare", "cafe0001", "cafe0003", "--db", db, "--model",
             "llama3-8b", "--layer", "ffn", "--pass", "fwd+bwd", "--dtype", "bf16");
  RUN_EXPECT(0, "0 regressed", NULL, "compare", "cafe0001", "cafe0002", "--db", db,
             "--gate-references");
  /* Another GPU: refused (2) unless asked for. */
  RUN_EXPECT(2, NULL, "different hardware", "compare", "cafe0001", "cafe0004", "--db", db);
  RUN_EXPECT(0, "**Warning**", NULL, "compare", "cafe0001", "cafe0004", "--db", db,
             "--allow-mixed-hardware");
  /* Nothing compared is no pass: 2 (a filter matching nothing exited 0). */
  RUN_EXPECT(2, NULL, "nothing compared: the filters match no configuration", "compare", "cafe0001",
             "cafe0003", "--db", db, "--model", "bogus");
  RUN_EXPECT(2, NULL, "nothing compared: the filters match no configuration", "compare", "cafe0001",
             "cafe0003", "--db", db, "--kind", "link", "--format", "json");
  /* Everything that is not a verdict is 2, never 1. */
  RUN_EXPECT(2, NULL, "no run of a commit starting with 'beef'", "compare", "beef", "cafe0002",
             "--db", db);
  RUN_EXPECT(2, NULL, "needs BASE and HEAD", "compare", "cafe0001", "--db", db);
  RUN_EXPECT(2, NULL, "--threshold: 'x'", "compare", "cafe0001", "cafe0002", "--db", db,
             "--threshold", "x");
  RUN_EXPECT(2, NULL, "--alpha", "compare", "cafe0001", "cafe0002", "--db", db, "--alpha", "1");
  /* decimal only: strtod alone reads 0x10 as 16 and 0x1p-4 as 0.0625 */
  RUN_EXPECT(2, NULL, "--threshold: '0x10'", "compare", "cafe0001", "cafe0002", "--db", db,
             "--threshold", "0x10");
  RUN_EXPECT(2, NULL, "--alpha: '0x1p-4'", "compare", "cafe0001", "cafe0002", "--db", db, "--alpha",
             "0x1p-4");
  RUN_EXPECT(2, NULL, "--pass", "compare", "cafe0001", "cafe0002", "--db", db, "--pass", "up");
  RUN_EXPECT(2, NULL, "no database at", "compare", "a", "b", "--db", "/nonexistent/x.db");
  RUN_EXPECT(2, NULL, "unexpected argument", "compare", "a", "b", "c", "--db", db);
  RUN_EXPECT(0, "Welch", NULL, "compare", "--help");
}

/* Copies of one run on both sides, two against ten (the same run imported under new ids):
 * identical measurements, so nothing changed even at --threshold 0. Without rounds each copy is
 * one sample of each ratio and of the time; ten copies summed as they come averaged to a
 * neighbouring value, and compare flagged most dist_gemm rows (p 0.015 on a spread of 1e-33). */
static void test_compare_copies_of_one_run(void **state) {
  fixture *f = *state;
  char db[600];
  fx_path(&f->dir, "copies.db", db, sizeof db);
  assert_int_equal(fx_copy(FX_REAL_DB, db), 0);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 0, &s), TP_OK);
  fx_change same = {1.0, 0.0};
  for (int i = 0; i < 12; i++)
    assert_true(fx_synthesise_run(s, 1, i < 2 ? "c0de0002" : "c0de0010", scaled, &same, 1) > 0);
  tp_store_close(s);
  RUN_EXPECT(0, "0 regressed (0 failed in head), 0 improved, 72 unchanged", NULL, "compare",
             "c0de0002", "c0de0010", "--db", db, "--threshold", "0");
  RUN_EXPECT(0, "0 regressed (0 failed in head), 0 improved, 72 unchanged", NULL, "compare",
             "c0de0010", "c0de0002", "--db", db, "--threshold", "0");
}

/* --model names a model as everywhere else: a preset by its name or short alias, a user's model
 * (a matrix file's) by its name, in any case (presets.h). compare took only the stored name,
 * exactly ("8b" matched nothing: exit 2), and report a user's model only in its stored case. */
static void test_model_filters_any_case(void **state) {
  fixture *f = *state;
  char db[600];
  fx_path(&f->dir, "named.db", db, sizeof db);
  assert_int_equal(fx_copy(f->db, db), 0);
  RUN_EXPECT(0, "information only", NULL, "compare", "feed0001", "feed0002", "--db", db, "--model",
             "llama3-8b");
  RUN_EXPECT(0, "information only", NULL, "compare", "feed0001", "feed0002", "--db", db, "--model",
             "8b");
  RUN_EXPECT(0, "information only", NULL, "compare", "feed0001", "feed0002", "--db", db, "--model",
             "LLAMA3-8B");
  sqlite3 *h = NULL;
  assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, "UPDATE configs SET model = 'MyModel' WHERE model = 'llama3-8b'",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_close(h), SQLITE_OK);
  RUN_EXPECT(0, "| MyModel |", NULL, "report", "--db", db, "--model", "MyModel", "--run", "2");
  RUN_EXPECT(0, "| MyModel |", NULL, "report", "--db", db, "--model", "mymodel", "--run", "2");
  RUN_EXPECT(0, "model=\"MyModel\"", NULL, "report", "--db", db, "--model", "MYMODEL", "--run", "2",
             "--format", "openmetrics");
  RUN_EXPECT(0, "information only", NULL, "compare", "feed0001", "feed0002", "--db", db, "--model",
             "MYMODEL");
  RUN_EXPECT(2, NULL, "nothing compared", "compare", "feed0001", "feed0002", "--db", db, "--model",
             "llama3-8b");
}

/* ---- history ------------------------------------------------------------------------ */

static void test_history_command(void **state) {
  fixture *f = *state;
  char id[32];
  snprintf(id, sizeof id, "%lld", (long long)f->traced);
  RUN_EXPECT(0, "| 1 | unknown |", NULL, "history", "--db", f->db, "--config", id);
  RUN_EXPECT(0, "| feed0002 |", NULL, "history", "--db", f->db, "--key", f->traced_key);
  RUN_EXPECT(0, "\"vs_first_pct\"", NULL, "history", "--db", f->db, "--config", id, "--format",
             "json");
  RUN_EXPECT(2, NULL, "exactly one of --key and --config", "history", "--db", f->db);
  RUN_EXPECT(2, NULL, "exactly one", "history", "--db", f->db, "--config", id, "--key", "k");
  RUN_EXPECT(2, NULL, "no configuration has the key \"nope\"", "history", "--db", f->db, "--key",
             "nope");
  RUN_EXPECT(2, NULL, "no database", "history", "--db", "/nonexistent/x.db", "--config", "1");
}

/* history and trace take a unique prefix of the short key the reports print. */
static void test_history_by_short_key(void **state) {
  fixture *f = *state;
  char id[32];
  snprintf(id, sizeof id, "%lld", (long long)f->traced);
  rp_result r = tpbench("report", "--db", f->db, "--format", "json", "--columns",
                        "dist_config_id,short_key", NULL);
  rp_expect(&r, 0, "\"short_key\"", NULL);
  json_error_t err;
  json_t *root = json_loads(r.out, 0, &err);
  if (!root) fail_msg("not JSON: %s", err.text);
  char prefix[16] = "";
  json_t *rows = json_object_get(root, "rows");
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    if (json_integer_value(json_object_get(row, "dist_config_id")) == f->traced)
      snprintf(prefix, sizeof prefix, "%.7s", json_string_value(json_object_get(row, "short_key")));
  }
  json_decref(root);
  rp_free(&r);
  assert_true(prefix[0] != '\0');
  RUN_EXPECT(0, "| feed0002 |", NULL, "history", "--db", f->db, "--key", prefix);
  /* trace too: the traced configuration's trace by the same prefix */
  RUN_EXPECT(0, "\"traceEvents\":[", NULL, "trace", "--db", f->db, "--key", prefix);
  RUN_EXPECT(2, NULL, "no configuration's short key starts with", "trace", "--db", f->db, "--key",
             "ffffffffffffffffffff");
  RUN_EXPECT(2, NULL, "no configuration's short key starts with", "history", "--db", f->db, "--key",
             "ffffffffffffffffffff");
}

/* ---- runs and report ---------------------------------------------------------------- */

static void test_runs_command(void **state) {
  fixture *f = *state;
  RUN_EXPECT(0, "| run | commit | started (UTC) | host |", NULL, "runs", "--db", f->db);
  RUN_EXPECT(0, "| feed0002 |", NULL, "runs", "--db", f->db);
  RUN_EXPECT(0, "run_id,uuid,commit,", NULL, "runs", "--db", f->db, "--format", "csv");
  RUN_EXPECT(0, "\"runs\": [", NULL, "runs", "--db", f->db, "--format", "json");
  RUN_EXPECT(2, NULL, "no database", "runs", "--db", "/nonexistent/x.db");
  RUN_EXPECT(2, NULL, "xml", "runs", "--db", f->db, "--format", "xml");
  RUN_EXPECT(0, "runs", NULL, "--help");
}

static void test_report_columns_command(void **state) {
  fixture *f = *state;
  RUN_EXPECT(0, "| id | key | model | op | shape |", NULL, "report", "--db", f->db);
  RUN_EXPECT(0, "config_id,short_key\r\n", NULL, "report", "--db", f->db, "--format", "csv",
             "--columns", "config_id,short_key");
  RUN_EXPECT(2, NULL, "unknown column \"bogus\"; the columns are: all, run_id", "report", "--db",
             f->db, "--columns", "bogus");
}

/* Help says a default only where there is one, and once. */
static void test_help_defaults(void **state) {
  (void)state;
  const char *commands[] = {"report", "history", "trace", "compare",   "runs",   "run",
                            "ops",    "matrix",  "link",  "dashboard", "import", "migrate"};
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    rp_result r = tpbench(commands[i], "--help", NULL);
    rp_expect(&r, 0, "Usage: ", NULL);
    if (strstr(r.out, "[default: ]"))
      fail_msg("%s --help: an empty default:\n%s", commands[i], r.out);
    if (strstr(r.out, "[default: none]"))
      fail_msg("%s --help: default none:\n%s", commands[i], r.out);
    for (const char *line = r.out; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
      const char *end = strchr(line, '\n');
      size_t len = end ? (size_t)(end - line) : strlen(line);
      const char *said = memmem(line, len, "default", 7);
      if (said && memmem(said + 7, len - (size_t)(said + 7 - line), "[default:", 9))
        fail_msg("%s --help: the default twice: %.*s", commands[i], (int)len, line);
    }
    rp_free(&r);
  }
}

/* ---- trace --------------------------------------------------------------------------- */

static void test_trace_command(void **state) {
  fixture *f = *state;
  char id[32], out[600];
  snprintf(id, sizeof id, "%lld", (long long)f->traced);
  rp_result r = tpbench("trace", "--db", f->db, "--config", id, NULL);
  rp_expect(&r, 0, "\"traceEvents\":[", NULL);
  json_error_t err;
  json_t *root = json_loads(r.out, 0, &err);
  if (!root) fail_msg("not JSON: %s", err.text);
  /* the fixture's events (2 ranks x 3 x 3) each once as a slice, beside the tracks' metadata,
   * the ranges projected onto the GPU and the flow arrows (report/tp_trace_model.h) */
  json_t *events = json_object_get(root, "traceEvents");
  size_t slices = 0, flow_starts = 0, flow_ends = 0, i = 0;
  json_t *ev = NULL;
  json_array_foreach(events, i, ev) {
    const char *ph = json_string_value(json_object_get(ev, "ph"));
    const char *cat = json_string_value(json_object_get(ev, "cat"));
    if (ph && !strcmp(ph, "X") && !(cat && !strcmp(cat, "range_gpu"))) slices++;
    if (ph && !strcmp(ph, "s")) flow_starts++;
    if (ph && !strcmp(ph, "f")) flow_ends++;
  }
  assert_int_equal(slices, 2 * 3 * 3);
  assert_int_equal(flow_starts, flow_ends);
  json_decref(root);
  rp_free(&r);

  fx_path(&f->dir, "trace.json", out, sizeof out);
  RUN_EXPECT(0, NULL, NULL, "trace", "--db", f->db, "--key", f->traced_key, "--out", out);
  size_t len = 0;
  unsigned char *written = fx_read_all(out, &len);
  assert_non_null(written);
  assert_true(len > 1000);
  free(written);
  /* replacing a private file keeps it private */
  assert_int_equal(chmod(out, 0600), 0);
  RUN_EXPECT(0, NULL, NULL, "trace", "--db", f->db, "--key", f->traced_key, "--out", out);
  struct stat st;
  assert_int_equal(stat(out, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600);

  RUN_EXPECT(1, NULL, "configuration 3 has no trace", "trace", "--db", f->db, "--config", "3");
  RUN_EXPECT(2, NULL, "there is no configuration 123456", "trace", "--db", f->db, "--config",
             "123456");
  RUN_EXPECT(2, NULL, "no configuration has the key", "trace", "--db", f->db, "--key", "kind=op;x");
  RUN_EXPECT(2, NULL, "exactly one of --config and --key", "trace", "--db", f->db);
  RUN_EXPECT(0, "--out FILE", NULL, "trace", "--help");
}

/* ---- import ---------------------------------------------------------------------------- */

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* --format kineto writes every rank's file or none: with rank 1's name taken
 * by a folder, rank 0's earlier file stays as it was (before, rank 0's new
 * file was put in place and the command then failed on rank 1). */
static void test_trace_kineto_all_or_nothing(void **state) {
  fixture *f = *state;
  char id[32], dir[600], rank0[700], rank1[700];
  snprintf(id, sizeof id, "%lld", (long long)f->traced);
  fx_path(&f->dir, "kineto-partial", dir, sizeof dir);
  snprintf(rank0, sizeof rank0, "%s/rank0.json", dir);
  snprintf(rank1, sizeof rank1, "%s/rank1.json", dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  assert_int_equal(mkdir(rank1, 0700), 0);
  FILE *old = fopen(rank0, "w");
  assert_non_null(old);
  fputs("old", old);
  assert_int_equal(fclose(old), 0);
  RUN_EXPECT(2, NULL, "rank1.json: is a folder", "trace", "--db", f->db, "--config", id, "--format",
             "kineto", "--out", dir);
  size_t len = 0;
  unsigned char *kept = fx_read_all(rank0, &len);
  assert_non_null(kept);
  assert_int_equal(len, 3);
  assert_memory_equal(kept, "old", 3);
  free(kept);
  assert_int_equal(rmdir(rank1), 0);
  /* a rank file of an earlier trace of more ranks goes once the new set is in place; other
   * files stay */
  char stale[700], notes[700];
  snprintf(stale, sizeof stale, "%s/rank7.json", dir);
  snprintf(notes, sizeof notes, "%s/rank7.json.notes", dir);
  FILE *s = fopen(stale, "w"), *n = fopen(notes, "w");
  assert_non_null(s);
  assert_non_null(n);
  assert_int_equal(fclose(s), 0);
  assert_int_equal(fclose(n), 0);
  RUN_EXPECT(0, NULL, NULL, "trace", "--db", f->db, "--config", id, "--format", "kineto", "--out",
             dir);
  assert_true(exists(rank1));
  assert_false(exists(stale));
  assert_true(exists(notes));
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

  /* What was imported reads back the same: the same comparison verdicts
   * (runs from before rounds: one sample a side, information only). */
  RUN_EXPECT(0, "0 regressed (0 failed in head), 0 improved, 0 unchanged, 144 information only",
             NULL, "compare", "feed0001", "feed0002", "--db", target);
  RUN_EXPECT(2, NULL, "name at least one database", "import", "--db", target);
  RUN_EXPECT(2, NULL, "no such database", "import", "/nonexistent/x.db", "--db", target);
}

/* A copy of the fixture with eight pages in its middle overwritten: its header, schema and
 * identity read as tpbench's (the probe passes), and the copy fails where it reaches the damage. */
static void damaged_copy(const fixture *f, const char *path) {
  assert_int_equal(fx_copy(f->db, path), 0);
  FILE *db = fopen(path, "r+b");
  assert_non_null(db);
  assert_int_equal(fseek(db, 0, SEEK_END), 0);
  long middle = ftell(db) / 2 / 4096 * 4096;
  assert_true(middle > 16L * 4096);
  assert_int_equal(fseek(db, middle, SEEK_SET), 0);
  static unsigned char junk[8 * 4096];
  memset(junk, 0xff, sizeof junk);
  assert_int_equal(fwrite(junk, 1, sizeof junk, db), sizeof junk);
  assert_int_equal(fclose(db), 0);
}

/* A source damaged mid-file is bad input like the other refusals (2, not 1), and an import that
 * fails before anything went in takes back the target it made (it left an empty database); a
 * target that was there before stays, byte for byte, and so does one an earlier file went into. */
static void test_import_damaged_source(void **state) {
  fixture *f = *state;
  char damaged[600], fresh[600], kept[600], side[700];
  fx_path(&f->dir, "damaged.db", damaged, sizeof damaged);
  fx_path(&f->dir, "fresh.db", fresh, sizeof fresh);
  fx_path(&f->dir, "kept.db", kept, sizeof kept);
  damaged_copy(f, damaged);

  RUN_EXPECT(2, NULL, "damaged.db is damaged", "import", damaged, "--db", fresh);
  assert_false(exists(fresh));
  for (int i = 0; i < TP_STORE_N_SIDE_FILES; i++) {
    snprintf(side, sizeof side, "%s%s", fresh, tp_store_side_suffixes[i]);
    assert_false(exists(side));
  }

  tp_store *store = NULL; /* a database of no runs, there before the import */
  assert_int_equal(tp_store_open(kept, 1, &store), TP_OK);
  tp_store_close(store);
  size_t len_before = 0, len_after = 0;
  unsigned char *before = fx_read_all(kept, &len_before);
  RUN_EXPECT(2, NULL, "damaged.db is damaged", "import", damaged, "--db", kept);
  assert_true(exists(kept));
  unsigned char *after = fx_read_all(kept, &len_after);
  assert_int_equal(len_before, len_after);
  assert_memory_equal(before, after, len_before);
  free(before);
  free(after);

  /* An empty file that was there is the user's: made a database, not removed. */
  FILE *empty = fopen(fresh, "w");
  assert_non_null(empty);
  assert_int_equal(fclose(empty), 0);
  RUN_EXPECT(2, NULL, "damaged.db is damaged", "import", damaged, "--db", fresh);
  assert_true(exists(fresh));
  assert_int_equal(unlink(fresh), 0);

  /* The first file went in (and was said to): the target keeps it. */
  char other[600];
  fx_path(&f->dir, "other.db", other, sizeof other);
  assert_int_equal(tp_store_open(other, 1, &store), TP_OK);
  fx_synth_config configs[FX_SYNTH_MAX_CONFIGS];
  size_t n = fx_synth_standard_cases(configs);
  fx_synth_run run = {.commit = "cafe0009", .started_at = "2026-12-01T10:00:00Z", .seed = 9};
  assert_true(fx_put_synth_run(store, &run, configs, n) > 0);
  tp_store_close(store);
  RUN_EXPECT(2, "1 run imported", "damaged.db is damaged", "import", other, damaged, "--db", fresh);
  RUN_EXPECT(0, "cafe0009", NULL, "runs", "--db", fresh);
}

/* Damage that leaves the pages whole can still break a row: a status its schema's CHECK
 * refuses. SQLite's check of a read-only file says "ok" (it leaves CHECK constraints out), so
 * only the copy's insert sees it: bad input all the same (2, not 1), the target not made. */
static void test_import_row_its_schema_refuses(void **state) {
  fixture *f = *state;
  char refused[600], fresh[600];
  fx_path(&f->dir, "refused.db", refused, sizeof refused);
  fx_path(&f->dir, "fresh-refused.db", fresh, sizeof fresh);
  assert_int_equal(fx_copy(f->db, refused), 0);
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(refused, &db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db,
                                "PRAGMA ignore_check_constraints = 1;"
                                "UPDATE configs SET status = 'bogus' "
                                "WHERE id = (SELECT min(id) FROM configs)",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);

  RUN_EXPECT(2, NULL, "refused.db is damaged", "import", refused, "--db", fresh);
  assert_false(exists(fresh));
}

/* --db a symbolic link to a file not there yet (a relative one, through a second link): the
 * store creates the file where the links lead, so a failed import removes that file and its
 * side files (it made them) and keeps the links (they were there). It removed the path it was
 * given only, and left an empty database where the links lead. */
static void test_import_through_a_dangling_link(void **state) {
  fixture *f = *state;
  char damaged[600], link[600], hop[600], dest[600], side[700];
  fx_path(&f->dir, "damaged-for-link.db", damaged, sizeof damaged);
  fx_path(&f->dir, "import-link.db", link, sizeof link);
  fx_path(&f->dir, "import-hop.db", hop, sizeof hop);
  fx_path(&f->dir, "import-landing.db", dest, sizeof dest);
  damaged_copy(f, damaged);
  assert_int_equal(symlink("import-hop.db", link), 0);
  assert_int_equal(symlink("import-landing.db", hop), 0);

  RUN_EXPECT(2, NULL, "damaged-for-link.db is damaged", "import", damaged, "--db", link);
  assert_false(exists(dest));
  for (int i = 0; i < TP_STORE_N_SIDE_FILES; i++) {
    snprintf(side, sizeof side, "%s%s", dest, tp_store_side_suffixes[i]);
    assert_false(exists(side));
  }
  struct stat st;
  assert_int_equal(lstat(link, &st), 0);
  assert_true(S_ISLNK(st.st_mode));
  assert_int_equal(lstat(hop, &st), 0);
  assert_true(S_ISLNK(st.st_mode));

  /* A good file goes in through the links as before. */
  RUN_EXPECT(0, "3 runs imported", NULL, "import", f->db, "--db", link);
  assert_true(exists(dest));
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
  RUN_EXPECT(2, NULL, "not a directory", "dashboard", "--db", f->db, "--out", f->db);
  RUN_EXPECT(0, "offline", NULL, "dashboard", "--help");
}

/* ---- output paths -------------------------------------------------------------------------------
 */

/* The database's bytes and inode, to show a refused command left it alone. */
typedef struct {
  unsigned char *bytes;
  size_t len;
  ino_t ino;
} snapshot;

static snapshot take_snapshot(const char *path) {
  snapshot s = {0};
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  s.ino = st.st_ino;
  s.bytes = fx_read_all(path, &s.len);
  assert_non_null(s.bytes);
  return s;
}

static void expect_unchanged(const char *path, snapshot *before) {
  snapshot after = take_snapshot(path);
  assert_int_equal(after.ino, before->ino);
  assert_int_equal(after.len, before->len);
  assert_memory_equal(after.bytes, before->bytes, before->len);
  free(after.bytes);
  free(before->bytes);
  before->bytes = NULL;
}

static int is_fifo(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0 && S_ISFIFO(st.st_mode);
}

/* trace --out once replaced whatever was at the path: a FIFO (or blocked
 * on it), a device through a link, the database itself; and wrote through
 * a link planted at its predictable temporary name. Each is refused now
 * (exit 2), nothing changed, and quickly. */
static void test_trace_out_refuses(void **state) {
  fixture *f = *state;
  char id[32], fifo[600], devlink[600], wal[700], planted[600], victim[600], out[600];
  snprintf(id, sizeof id, "%lld", (long long)f->traced);
  snapshot db = take_snapshot(f->db);

  fx_path(&f->dir, "trace.fifo", fifo, sizeof fifo);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  time_t start = time(NULL);
  RUN_EXPECT(2, NULL, "is a FIFO", "trace", "--db", f->db, "--config", id, "--out", fifo);
  assert_true(time(NULL) - start < 10);
  assert_true(is_fifo(fifo));

  fx_path(&f->dir, "null.json", devlink, sizeof devlink);
  assert_int_equal(symlink("/dev/null", devlink), 0);
  RUN_EXPECT(2, NULL, "is a device (through a symbolic link)", "trace", "--db", f->db, "--config",
             id, "--out", devlink);
  char target[64] = "";
  assert_true(readlink(devlink, target, sizeof target - 1) > 0);
  assert_string_equal(target, "/dev/null");

  RUN_EXPECT(2, NULL, "this is the database", "trace", "--db", f->db, "--config", id, "--out",
             f->db);
  snprintf(wal, sizeof wal, "%s-wal", f->db);
  RUN_EXPECT(2, NULL, "side file", "trace", "--db", f->db, "--config", id, "--out", wal);
  RUN_EXPECT(2, NULL, "is a folder", "trace", "--db", f->db, "--config", id, "--out", f->dir.path);
  expect_unchanged(f->db, &db);

  /* A link at the name the old code wrote through is left alone. */
  fx_path(&f->dir, "victim", victim, sizeof victim);
  FILE *v = fopen(victim, "w");
  assert_non_null(v);
  fputs("not yours", v);
  fclose(v);
  fx_path(&f->dir, "planted.json", out, sizeof out);
  fx_path(&f->dir, "planted.json.tmp", planted, sizeof planted);
  assert_int_equal(symlink(victim, planted), 0);
  RUN_EXPECT(0, NULL, NULL, "trace", "--db", f->db, "--config", id, "--out", out);
  size_t len = 0;
  unsigned char *text = fx_read_all(victim, &len);
  assert_int_equal(len, 9);
  assert_memory_equal(text, "not yours", 9);
  free(text);
  text = fx_read_all(out, &len);
  assert_true(len > 1000 && text[0] == '{');
  free(text);
}

/* A WAL database whose last committed transaction lives only in its -wal,
 * as a writer that has not checkpointed leaves it: the child commits and
 * exits without closing. */
static void make_wal_database(const char *from, const char *path) {
  assert_int_equal(fx_copy(from, path), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    sqlite3 *db = NULL;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK)
      rc = sqlite3_exec(db,
                        "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; "
                        "UPDATE runs SET host = 'committed-in-wal' WHERE id = 1",
                        NULL, NULL, NULL);
    _exit(rc == SQLITE_OK ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static char *host_of_run_1(const char *path) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  char *host = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, "SELECT host FROM runs WHERE id = 1", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    host = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return host;
}

/* trace --db link.db --out s2.db-wal, link.db a symbolic or hard link to
 * s2.db, once replaced the real -wal and lost the transaction in it (the
 * side-file check compared spellings built from --db). Refused now (2),
 * the -wal byte-identical, the transaction readable. */
static void test_trace_out_refuses_wal_through_links(void **state) {
  fixture *f = *state;
  char id[32], db[600], symlinked[600], hard[600], wal[700], shm[700], journal[700];
  snprintf(id, sizeof id, "%lld", (long long)f->traced);
  fx_path(&f->dir, "s2.db", db, sizeof db);
  make_wal_database(f->db, db);
  snprintf(wal, sizeof wal, "%s-wal", db);
  snprintf(shm, sizeof shm, "%s-shm", db);
  snprintf(journal, sizeof journal, "%s-journal", db);
  snapshot before = take_snapshot(wal);
  assert_true(before.len > 0);

  fx_path(&f->dir, "link.db", symlinked, sizeof symlinked);
  assert_int_equal(symlink("s2.db", symlinked), 0);
  RUN_EXPECT(2, NULL, "side file", "trace", "--db", symlinked, "--config", id, "--out", wal);
  RUN_EXPECT(2, NULL, "side file", "trace", "--db", symlinked, "--config", id, "--out", shm);
  RUN_EXPECT(2, NULL, "side file", "trace", "--db", symlinked, "--config", id, "--out", journal);
  fx_path(&f->dir, "hard.json", hard, sizeof hard);
  if (link(db, hard) == 0) {
    RUN_EXPECT(2, NULL, "side file", "trace", "--db", hard, "--config", id, "--out", wal);
    RUN_EXPECT(2, NULL, "side file", "trace", "--db", hard, "--config", id, "--out", journal);
  }
  assert_false(exists(journal));
  expect_unchanged(wal, &before);
  char *host = host_of_run_1(db);
  assert_non_null(host);
  assert_string_equal(host, "committed-in-wal");
  free(host);
}

/* dashboard once built the whole page (seconds) before it looked at
 * --out. On a database that holds no runs, building fails with "no runs":
 * a refusal of --out that comes first shows the check runs before the
 * database is read. Nothing is created when refused. */
static void test_dashboard_out_checked_first(void **state) {
  fixture *f = *state;
  char empty[600], plain[600], dir[600], page[700], deep[600], fresh[600];
  fx_path(&f->dir, "empty.db", empty, sizeof empty);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(empty, 1, &s), TP_OK);
  tp_store_close(s);
  fx_path(&f->dir, "no-runs-site", dir, sizeof dir);
  RUN_EXPECT(2, NULL, "holds no runs", "dashboard", "--db", empty, "--out", dir);
  assert_false(exists(dir));
  /* a folder with other files in it is refused before the database is read */
  RUN_EXPECT(2, NULL, "which a dashboard did not write", "dashboard", "--db", empty, "--out",
             f->dir.path);

  fx_path(&f->dir, "afile", plain, sizeof plain);
  FILE *fp = fopen(plain, "w");
  assert_non_null(fp);
  fputs("x\n", fp);
  fclose(fp);
  RUN_EXPECT(2, NULL, "not a directory", "dashboard", "--db", empty, "--out", plain);
  fx_path(&f->dir, "fifo-site", dir, sizeof dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(page, sizeof page, "%s/index.html", dir);
  assert_int_equal(mkfifo(page, 0600), 0);
  RUN_EXPECT(2, NULL, "is a FIFO", "dashboard", "--db", empty, "--out", dir);
  assert_true(is_fifo(page));
  unlink(page);
  assert_int_equal(symlink(empty, page), 0);
  RUN_EXPECT(2, NULL, "this is the database", "dashboard", "--db", empty, "--out", dir);
  fx_path(&f->dir, "a/b/c", deep, sizeof deep);
  RUN_EXPECT(2, NULL, "cannot create the directory", "dashboard", "--db", empty, "--out", deep);
  fx_path(&f->dir, "a", deep, sizeof deep);
  assert_false(exists(deep));
  fx_path(&f->dir, "fresh", fresh, sizeof fresh);
  RUN_EXPECT(2, NULL, "holds no runs", "dashboard", "--db", empty, "--out", fresh);
  assert_false(exists(fresh));
}

/* The same for the dashboard's index.html, and dashboards racing on one
 * folder leave one whole page (not one glued to another). */
static void test_dashboard_out_refuses(void **state) {
  fixture *f = *state;
  char dir[600], page[700], solo[600], solo_page[700];
  fx_path(&f->dir, "raced", dir, sizeof dir);
  snprintf(page, sizeof page, "%s/index.html", dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  snapshot db = take_snapshot(f->db);

  assert_int_equal(mkfifo(page, 0600), 0);
  RUN_EXPECT(2, NULL, "is a FIFO", "dashboard", "--db", f->db, "--out", dir);
  assert_true(is_fifo(page));
  unlink(page);
  assert_int_equal(symlink(f->db, page), 0);
  RUN_EXPECT(2, NULL, "this is the database", "dashboard", "--db", f->db, "--out", dir);
  unlink(page);
  expect_unchanged(f->db, &db);

  fx_path(&f->dir, "solo", solo, sizeof solo);
  snprintf(solo_page, sizeof solo_page, "%s/index.html", solo);
  RUN_EXPECT(0, NULL, NULL, "dashboard", "--db", f->db, "--out", solo);
  struct stat want, got;
  assert_int_equal(stat(solo_page, &want), 0);

  enum { RACERS = 3 };
  pid_t pids[RACERS];
  for (int i = 0; i < RACERS; i++) {
    pids[i] = fork();
    assert_true(pids[i] >= 0);
    if (pids[i] == 0) {
      rp_result r = tpbench("dashboard", "--db", f->db, "--out", dir, NULL);
      _exit(r.status);
    }
  }
  for (int i = 0; i < RACERS; i++) {
    int status = 0;
    assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  assert_int_equal(stat(page, &got), 0);
  assert_int_equal(got.st_size, want.st_size);
  /* nothing but the page and its traces/ folder is left in the folder, and
   * no temporary (a name starting with '.') in either */
  char traces[700];
  snprintf(traces, sizeof traces, "%s/traces", dir);
  const char *folders[] = {dir, traces};
  int n = 0;
  for (int k = 0; k < 2; k++) {
    DIR *d = opendir(folders[k]);
    assert_non_null(d);
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      assert_true(e->d_name[0] != '.');
      n += k == 0;
    }
    closedir(d);
  }
  assert_int_equal(n, 2);
}

/* The sample database's verdicts that docs/compare.md describes (its commands
 * themselves run in test_doc_commands): runs with no configuration in common
 * are 2, and a commit against itself is compared with nothing gated (its
 * link-probe run, which stored a wrong driver, is no part of the hardware
 * check). On a copy brought to the current schema where the sample is older. */
static void test_sample_compare_verdicts(void **state) {
  fixture *f = *state;
  char sample[600];
  fx_path(&f->dir, "sample.db", sample, sizeof sample);
  if (access(FX_SAMPLE_DB, R_OK) != 0) skip();
  assert_int_equal(fx_copy(FX_SAMPLE_DB, sample), 0);
  char *argv[] = {TPBENCH_EXE, "compare", "e92c4c5", "a06011f", "--db", sample, NULL};
  rp_result r = rp_run(argv, 120);
  if (r.status == 2 && r.err && strstr(r.err, "tpbench migrate")) {
    /* a sample of an older schema: bring the copy up to date, then again */
    rp_free(&r);
    RUN_EXPECT(0, NULL, NULL, "migrate", "--db", sample);
    r = rp_run(argv, 120);
  }
  if (r.status != 0 && r.status != 1)
    fail_msg("compare e92c4c5 a06011f on the sample exits %d: %s", r.status, r.err);
  rp_free(&r);
  RUN_EXPECT(2, NULL, "nothing compared: run:2 and run:3 have no configuration in common",
             "compare", "run:2", "run:3", "--db", sample);
  RUN_EXPECT(0, "**No regression (nothing gated:", "nothing gated", "compare", "a06011f", "a06011f",
             "--db", sample);
}

/* ---- usage errors: empty paths, link without CUDA
 * ------------------------------------------------ */

static void test_empty_paths_are_usage_errors(void **state) {
  fixture *f = *state;
  RUN_EXPECT(2, NULL, "--out: the value is empty", "trace", "--db", f->db, "--config", "1", "--out",
             "");
  RUN_EXPECT(2, NULL, "--out: the value is empty", "dashboard", "--db", f->db, "--out", "");
  RUN_EXPECT(2, NULL, "--db: the value is empty", "dashboard", "--db", "", "--out", "x");
  RUN_EXPECT(2, NULL, "--db: the value is empty", "report", "--db", "");
  RUN_EXPECT(2, NULL, "--db: the value is empty", "history", "--db", "", "--config", "1");
  RUN_EXPECT(2, NULL, "--db: the value is empty", "compare", "a", "b", "--db", "");
  RUN_EXPECT(2, NULL, "--db: the value is empty", "trace", "--db", "", "--config", "1");
  RUN_EXPECT(2, NULL, "--db: the value is empty", "import", "x.db", "--db", "");
}

/* link parses its options first in every build: --help is 0, a mistake 2
 * (a build without CUDA answered 1 to both), a size listed twice included. */
static void test_link_parses_first(void **state) {
  (void)state;
  RUN_EXPECT(0, "--sizes LIST", NULL, "link", "--help");
  /* --small-kib's range is said where it is set, and held to */
  RUN_EXPECT(0, "the per-call latency; 0 to 1023 (0: none", NULL, "link", "--help");
  RUN_EXPECT(2, NULL, "--small-kib", "link", "--small-kib", "1024");
  RUN_EXPECT(2, NULL, "unknown option '--bogus'", "link", "--bogus");
  RUN_EXPECT(2, NULL, "--iters", "link", "--iters", "0");
  RUN_EXPECT(2, NULL, "--db: the value is empty", "link", "--db", "");
  /* a repeated size is the argument's mistake, said before CUDA is looked for (this machine
   * has no GPU: a complaint about it here would mean the check came after) */
  RUN_EXPECT(2, NULL, "tpbench link: --sizes: 8 is listed twice", "link", "--sizes", "8,8");
  RUN_EXPECT(2, NULL, "--sizes: 32 is listed twice", "link", "--sizes", "32,8,32", "--gpus", "2");
  /* the GEMMs between gaps: a gap is a share of the GEMM's time, 0 to 1000 %, each once */
  RUN_EXPECT(0, "--gemm-gaps LIST", NULL, "link", "--help");
  RUN_EXPECT(2, NULL, "tpbench link: --gemm-gaps: 50 is listed twice", "link", "--gemm-gaps",
             "50,100,50");
  RUN_EXPECT(2, NULL, "--gemm-gaps", "link", "--gemm-gaps", "1001");
  RUN_EXPECT(2, NULL, "--gemm-gaps", "link", "--gemm-gaps", "-5");
  RUN_EXPECT(2, NULL, "--settle-ms", "link", "--settle-ms", "0");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compare_exit_status),
      cmocka_unit_test(test_compare_copies_of_one_run),
      cmocka_unit_test(test_model_filters_any_case),
      cmocka_unit_test(test_history_command),
      cmocka_unit_test(test_history_by_short_key),
      cmocka_unit_test(test_runs_command),
      cmocka_unit_test(test_report_columns_command),
      cmocka_unit_test(test_help_defaults),
      cmocka_unit_test(test_trace_command),
      cmocka_unit_test(test_trace_kineto_all_or_nothing),
      cmocka_unit_test(test_import_command),
      cmocka_unit_test(test_import_damaged_source),
      cmocka_unit_test(test_import_row_its_schema_refuses),
      cmocka_unit_test(test_import_through_a_dangling_link),
      cmocka_unit_test(test_dashboard_command),
      cmocka_unit_test(test_trace_out_refuses),
      cmocka_unit_test(test_dashboard_out_refuses),
      cmocka_unit_test(test_trace_out_refuses_wal_through_links),
      cmocka_unit_test(test_dashboard_out_checked_first),
      cmocka_unit_test(test_empty_paths_are_usage_errors),
      cmocka_unit_test(test_link_parses_first),
      cmocka_unit_test(test_sample_compare_verdicts),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
