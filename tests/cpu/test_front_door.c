/*
 * test_front_door.c — what the binary says about the sample databases
 * (the .db files of examples/) against what its documentation says it does, each a
 * statement a reader of the README found false once:
 * - `runs` lists runs oldest first by start time (it listed them by id, and
 *   the composition sample's run 2 started before its run 1), and every
 *   reader's "latest run" is the last of that order (report took the largest
 *   id, OpenMetrics and the dashboard the latest start);
 * - CSV and JSON carry every column by default (CSV had 82 of 100);
 * - `trace` on a configuration without a trace says why, truthfully (a run
 *   made with --trace read "it ran without tracing");
 * - `compare` given a commit the database does not have names the ones it has;
 * - the topology block prints no terminal escape codes;
 * - every command's --help gives its exit statuses and an example, and each
 *   example that reads a sample database runs as shown;
 * - a one-GPU run's rejections read as one line per reason, not a wall.
 * Each runs the binary (TPBENCH_EXE) on a scratch copy of a sample.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>

#include "tests/cpu/fixture_db.h"
#include "tests/cpu/raw_markup.h"
#include "tests/cpu/run_program.h"

#ifndef TPBENCH_EXE
#error "TPBENCH_EXE must name the tpbench binary"
#endif

#define EXAMPLES TP_TEST_DATA_DIR "/../../examples/"

#define tpbench(...) rp_run_exe(TPBENCH_EXE, 120, NULL, __VA_ARGS__, NULL)

typedef struct {
  fx_dir dir;
  char sample[600], composition[600], fp8[600];
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || fx_mkdir(&f->dir, "tp_front_door") != 0) return -1;
  fx_path(&f->dir, "sample.db", f->sample, sizeof f->sample);
  fx_path(&f->dir, "composition.db", f->composition, sizeof f->composition);
  fx_path(&f->dir, "fp8.db", f->fp8, sizeof f->fp8);
  if (fx_copy(FX_SAMPLE_DB, f->sample) != 0 ||
      fx_copy(EXAMPLES "tpbench-h200-tp1-composition.db", f->composition) != 0 ||
      fx_copy(EXAMPLES "tpbench-h200-fp8-tp1.db", f->fp8) != 0)
    return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  fx_rmdir(&f->dir);
  free(f);
  return 0;
}

/* Runs one statement on a database file; 0 on success. */
static int exec_sql(const char *path, const char *sql) {
  sqlite3 *db = NULL;
  int rc = sqlite3_open(path, &db);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
  sqlite3_close(db);
  return rc == SQLITE_OK ? 0 : -1;
}

/* The run ids of `runs --format csv`, in the order printed, into ids. */
static size_t listed_runs(const char *db, long long *ids, size_t cap) {
  rp_result r = tpbench("runs", "--db", db, "--format", "csv");
  rp_expect(&r, 0, "run_id,", NULL);
  size_t n = 0;
  for (const char *line = strstr(r.out, "\n"); line && line[1] && n < cap;
       line = strstr(line + 1, "\n"))
    ids[n++] = strtoll(line + 1, NULL, 10);
  rp_free(&r);
  return n;
}

/* The composition sample was merged with `tpbench import`: its run 2 started
 * (02:21:29) before its run 1 (02:22:16). */
static void test_runs_oldest_first(void **state) {
  fixture *f = *state;
  long long ids[16] = {0};
  size_t n = listed_runs(f->composition, ids, 16);
  assert_int_equal(n, 7);
  assert_int_equal(ids[0], 2);
  assert_int_equal(ids[1], 1);
  assert_int_equal(ids[6], 7);
}

/* "The latest run" is the one that started last, in report (markdown and
 * OpenMetrics) as in runs: with runs 6 and 7 moved before the others, the
 * latest is run 5, not the largest id. */
static void test_latest_run_by_start_time(void **state) {
  fixture *f = *state;
  char db[700];
  fx_path(&f->dir, "reordered.db", db, sizeof db);
  assert_int_equal(fx_copy(f->composition, db), 0);
  assert_int_equal(exec_sql(db, "UPDATE runs SET started_at = '2026-12-01T00:00:0' || id || 'Z' "
                                "WHERE id IN (6, 7)"),
                   0);
  long long ids[16] = {0};
  assert_int_equal(listed_runs(db, ids, 16), 7);
  assert_int_equal(ids[0], 6);
  assert_int_equal(ids[6], 5);
  rp_result r = tpbench("report", "--db", db);
  rp_expect(&r, 0, "## tpbench throughput: run 5\n", NULL);
  rp_free(&r);
  r = tpbench("report", "--db", db, "--format", "openmetrics");
  rp_expect(&r, 0, "tpbench_run_info{run=\"5\"", NULL);
  rp_free(&r);
}

/* The first line of text (malloc'd). */
static char *first_line(const char *text) { return strndup(text, strcspn(text, "\r\n")); }

/* CSV's header by default is the header of --columns all; JSON's rows hold
 * the compact table's own columns too. */
static void test_csv_and_json_carry_every_column(void **state) {
  fixture *f = *state;
  rp_result plain = tpbench("report", "--db", f->sample, "--run", "5", "--format", "csv");
  rp_result all =
      tpbench("report", "--db", f->sample, "--run", "5", "--format", "csv", "--columns", "all");
  rp_expect(&plain, 0, "run_id,commit,", NULL);
  rp_expect(&all, 0, "run_id,commit,", NULL);
  char *a = first_line(plain.out), *b = first_line(all.out);
  assert_string_equal(a, b);
  size_t commas = 0;
  for (const char *p = a; *p; p++) commas += *p == ',';
  assert_true(commas + 1 >= 100);
  free(a);
  free(b);
  rp_free(&plain);
  rp_free(&all);
  rp_result json = tpbench("report", "--db", f->sample, "--run", "5", "--format", "json");
  rp_expect(&json, 0, NULL, NULL);
  json_t *root = json_loads(json.out, 0, NULL);
  assert_non_null(root);
  json_t *row = json_array_get(json_object_get(root, "rows"), 0);
  const char *keys[] = {"label", "shape", "stock_peak_mib", "dist_over_gemm", "dist_traffic_mib"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (!json_object_get(row, keys[i])) fail_msg("JSON rows lack %s", keys[i]);
  json_decref(root);
  rp_free(&json);
}

/* The sample's run 2 was made with --trace; its copy keeps only some traces.
 * The composition sample's run 1 was not traced. */
static void test_trace_says_why_there_is_none(void **state) {
  fixture *f = *state;
  rp_result r = tpbench("trace", "--db", f->sample, "--config", "300");
  rp_expect(&r, 1, NULL, "its run 2 was made with --trace, but this database holds traces of");
  assert_null(strstr(r.err, "ran without tracing"));
  rp_free(&r);
  r = tpbench("trace", "--db", f->composition, "--config", "1");
  rp_expect(&r, 1, NULL, "its run 1 ran without tracing");
  rp_free(&r);
}

/* examples/README.md once showed `compare e92c4c5 3a2b0c9`: no such commit. */
static void test_compare_names_the_commits_it_has(void **state) {
  fixture *f = *state;
  rp_result r = tpbench("compare", "e92c4c5", "3a2b0c9", "--db", f->sample);
  rp_expect(&r, 2, NULL, "its commits: e92c4c5378 (run 1), a06011ff18 (runs 2 to 5)");
  rp_free(&r);
}

/* nvidia-smi underlined the topology's header with escape codes; the block
 * shows the table without them (before: "\t [4mGPU0 ... [0m"). */
static void test_topology_without_escape_codes(void **state) {
  fixture *f = *state;
  rp_result r = tpbench("report", "--db", f->fp8);
  rp_expect(&r, 0, "  ~~~~text\n  \tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n", NULL);
  assert_null(raw_escape(r.out, strlen(r.out)));
  assert_null(strstr(r.out, "[4m"));
  assert_null(strstr(r.out, "[0m"));
  rp_free(&r);
}

/* The commands `tpbench --help` lists (first word of each indented line after "Commands:"). */
static size_t listed_commands(char names[32][32]) {
  rp_result r = tpbench("--help");
  rp_expect(&r, 0, "Commands:", NULL);
  size_t n = 0;
  for (const char *line = strstr(r.out, "Commands:\n") + 10; *line && *line == ' ' && n < 32;
       line = strchr(line, '\n') + 1) {
    if (sscanf(line, " %31s", names[n]) == 1 && strcmp(names[n], "tpbench") != 0) n++;
    if (!strchr(line, '\n')) break;
  }
  rp_free(&r);
  return n;
}

/* Runs an example line as shown, from the repository's root: sample paths made absolute,
 * the databases and outputs it would create in the scratch folder. */
static void run_example(const fixture *f, const char *example) {
  char line[512], paths[8][700], *argv[32] = {TPBENCH_EXE};
  int argc = 1, n_paths = 0;
  snprintf(line, sizeof line, "%s", example);
  char *save = NULL;
  const char *prev = "";
  for (char *tok = strtok_r(line, " ", &save); tok && argc < 31; tok = strtok_r(NULL, " ", &save)) {
    if (argc == 1 && !strcmp(tok, "tpbench")) continue; /* the binary itself */
    char *arg = tok;
    if (!strncmp(tok, "examples/", 9)) {
      snprintf(paths[n_paths], sizeof paths[0], "%s%s", EXAMPLES, tok + 9);
      arg = paths[n_paths++];
    } else if (!strcmp(prev, "--out") || (!strcmp(prev, "--db") && strchr(tok, '/') == NULL)) {
      fx_path(&f->dir, tok, paths[n_paths], sizeof paths[0]);
      arg = paths[n_paths++];
    }
    argv[argc++] = arg;
    prev = tok;
  }
  argv[argc] = NULL;
  rp_result r = rp_run(argv, 120);
  if (r.status != 0) fail_msg("the example '%s' exits %d:\n%.800s", example, r.status, r.err);
  rp_free(&r);
}

static void test_help_gives_exit_statuses_and_an_example(void **state) {
  fixture *f = *state;
  char names[32][32];
  const size_t n = listed_commands(names);
  assert_true(n >= 15);
  /* needing a GPU, a program or an older database: their examples are shown, not run here */
  static const char *const not_run[] = {"ops", "run", "link", "profile", "migrate"};
  for (size_t i = 0; i < n; i++) {
    rp_result r = tpbench(names[i], "--help");
    rp_expect(&r, 0, "\nExit status: ", NULL);
    char want[96];
    snprintf(want, sizeof want, "\nExample:\n  tpbench %.31s ", names[i]);
    const char *example = strstr(r.out, want);
    if (!example) fail_msg("tpbench %s --help gives no example:\n%s", names[i], r.out);
    if (!strstr(r.out, "2 the input is wrong")) fail_msg("%s --help: no status 2", names[i]);
    int runs = 1;
    for (size_t k = 0; k < sizeof not_run / sizeof *not_run; k++)
      runs &= strcmp(names[i], not_run[k]) != 0;
    if (runs) {
      char *shown = strndup(example + 12, strcspn(example + 12, "\n"));
      run_example(f, shown);
      free(shown);
    }
    rp_free(&r);
  }
}

/* A one-GPU run's 48 rejected configurations (dist_gemm and the collective alone need TP 2)
 * read as three lines of the report, one per reason, not 48. */
static void test_not_run_grouped_by_reason(void **state) {
  fixture *f = *state;
  char db[700];
  fx_path(&f->dir, "gemm.db", db, sizeof db);
  assert_int_equal(fx_copy(EXAMPLES "tpbench-h200-tp1-gemm.db", db), 0);
  rp_result r = tpbench("report", "--db", db);
  rp_expect(&r, 0, "- 24 configurations, rejected: TP 1 has no collective to time: configs 4, 8, ",
            NULL);
  const char *list = strstr(r.out, "**Not run** (48 configurations;");
  assert_non_null(list);
  int lines = 0;
  for (const char *p = strstr(list, "\n- "); p; p = strstr(p + 1, "\n- ")) lines++;
  assert_int_equal(lines, 3);
  rp_free(&r);
}

/* --columns picks columns in md, CSV and JSON; with OpenMetrics (fixed families) it was
 * ignored without a word, and is refused now. */
static void test_columns_refused_with_openmetrics(void **state) {
  fixture *f = *state;
  rp_result r = tpbench("report", "--db", f->sample, "--run", "5", "--format", "openmetrics",
                        "--columns", "model");
  rp_expect(&r, 2, NULL, "--columns applies to md, csv and json");
  rp_free(&r);
}

/* ops and run take --verbose (a line per configuration on a terminal too). */
static void test_verbose_is_an_option(void **state) {
  (void)state;
  const char *commands[] = {"ops", "run"};
  for (size_t i = 0; i < 2; i++) {
    rp_result r = tpbench(commands[i], "--help");
    rp_expect(&r, 0, "--verbose ", NULL);
    rp_free(&r);
  }
  rp_result r = tpbench("ops", "--list", "--verbose", "--models", "debug", "--projs", "qkv",
                        "--tokens", "1024");
  rp_expect(&r, 0, "debug", NULL);
  rp_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_verbose_is_an_option),
      cmocka_unit_test(test_columns_refused_with_openmetrics),
      cmocka_unit_test(test_not_run_grouped_by_reason),
      cmocka_unit_test(test_help_gives_exit_statuses_and_an_example),
      cmocka_unit_test(test_runs_oldest_first),
      cmocka_unit_test(test_latest_run_by_start_time),
      cmocka_unit_test(test_csv_and_json_carry_every_column),
      cmocka_unit_test(test_trace_says_why_there_is_none),
      cmocka_unit_test(test_compare_names_the_commits_it_has),
      cmocka_unit_test(test_topology_without_escape_codes),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
