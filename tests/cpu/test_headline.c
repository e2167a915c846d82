/*
 * test_headline.c — one headline rule (report/tp_report.h, tp_report_headline)
 * and every reader of it agreeing, on every run of every sample database
 * (the .db files of examples/): `report` in JSON (summary) and markdown
 * (its Summary line), `report --format openmetrics` (tpbench_headline_*),
 * `compare` (each run's "headline") and the dashboard's embedded tables
 * (the numbers its summary cards show). Before the rule was one function,
 * the dashboard counted the toy `debug` model into its headline: the
 * sample's run 5 read 0.814x and dist/bound 1.30 there, 1.067x and 1.18 in
 * the report. TPBENCH_EXE names the binary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>
#include <math.h>

#include "report/tp_report.h"
#include "tests/cpu/fixture_db.h"
#include "tests/cpu/run_program.h"

#ifndef TPBENCH_EXE
#error "TPBENCH_EXE must name the tpbench binary"
#endif

#define EXAMPLES TP_TEST_DATA_DIR "/../../examples/"

#define tpbench(...) rp_run_exe(TPBENCH_EXE, 300, NULL, __VA_ARGS__, NULL)

static const char *const samples[] = {
    "tpbench-h200-sample.db",
    "tpbench-h200-fp8-tp1.db",
    "tpbench-h200-tp1-composition.db",
    "tpbench-h200-tp1-gemm.db",
};

typedef struct {
  fx_dir dir;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || fx_mkdir(&f->dir, "tp_headline") != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  fx_rmdir(&f->dir);
  free(f);
  return 0;
}

/* Equal as numbers, or both missing (NaN, JSON null). */
static void expect_same(double want, double got, double tolerance, const char *what) {
  if (isnan(want) && isnan(got)) return;
  if (!(fabs(want - got) <= tolerance * fmax(1.0, fabs(want))))
    fail_msg("%s: %.12g, the headline says %.12g", what, got, want);
}

static double number(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The figures of a JSON object with report's summary keys against f. */
static void expect_figures(json_t *o, const tp_headline_figures *f, const char *who) {
  char what[160];
  if (!o) fail_msg("%s: no headline", who);
  snprintf(what, sizeof what, "%s: geomean_speedup", who);
  expect_same(f->geomean_speedup, number(o, "geomean_speedup"), 1e-12, what);
  snprintf(what, sizeof what, "%s: median_dist_over_bound", who);
  expect_same(f->median_dist_over_bound, number(o, "median_dist_over_bound"), 1e-12, what);
  snprintf(what, sizeof what, "%s: rows", who);
  expect_same(f->rows, number(o, "rows"), 0, what);
}

/* The toy models' figures in a list of {model, figures...} objects (report's summary.models
 * with toy set, or compare's headline.toys). */
static void expect_toys(json_t *list, const tp_headline *h, int only_toy_flagged, const char *who) {
  int seen = 0;
  size_t i;
  json_t *m;
  json_array_foreach(list, i, m) {
    if (only_toy_flagged && !json_is_true(json_object_get(m, "toy"))) continue;
    const char *model = json_string_value(json_object_get(m, "model"));
    for (int t = 0; t < h->n_toys; t++)
      if (model && !strcmp(model, h->toys[t].model)) {
        char what[200];
        snprintf(what, sizeof what, "%s: toy %s", who, model);
        expect_figures(m, &h->toys[t].figures, what);
        seen++;
      }
  }
  if (seen != h->n_toys) fail_msg("%s: %d of %d toy models shown apart", who, seen, h->n_toys);
}

static json_t *parse_out(const rp_result *r, const char *who) {
  json_error_t err;
  json_t *doc = json_loads(r->out, 0, &err);
  if (!doc) fail_msg("%s: not JSON: %s", who, err.text);
  return doc;
}

/* report --format json: its summary is the headline, toys in summary.models. */
static void check_report_json(const char *db, const char *run, const tp_headline *h) {
  rp_result r = tpbench("report", "--db", db, "--run", run, "--format", "json");
  rp_expect(&r, 0, NULL, NULL);
  json_t *doc = parse_out(&r, "report json");
  json_t *sum = json_object_get(doc, "summary");
  expect_figures(sum, &h->figures, "report json");
  assert_int_equal(json_is_true(json_object_get(sum, "toy_only")), h->toy_only);
  if (!h->toy_only) expect_toys(json_object_get(sum, "models"), h, 1, "report json");
  json_decref(doc);
  rp_free(&r);
}

/* report (markdown): the Summary line holds the same figures as printed. */
static void check_report_markdown(const char *db, const char *run, const tp_headline *h) {
  rp_result r = tpbench("report", "--db", db, "--run", run);
  rp_expect(&r, 0, "**Summary**", NULL);
  const char *line = strstr(r.out, "**Summary**");
  char want[64];
  if (h->figures.rows > 0) {
    snprintf(want, sizeof want, "geometric-mean speedup %.3f", h->figures.geomean_speedup);
    if (!strstr(line, want)) fail_msg("report md: '%s' not in its summary", want);
  }
  if (h->figures.bound_rows > 0) {
    snprintf(want, sizeof want, "dist/bound median %.2f", h->figures.median_dist_over_bound);
    if (!strstr(line, want)) fail_msg("report md: '%s' not in its summary", want);
  }
  rp_free(&r);
}

/* The value of the sample "NAME{run="R",scope="SCOPE"...} V" (NaN when there is none). */
static double om_value(const char *text, const char *name, const char *run, const char *scope,
                       const char *model) {
  char head[300];
  if (model)
    snprintf(head, sizeof head, "%s{run=\"%s\",scope=\"%s\",model=\"%s\"} ", name, run, scope,
             model);
  else snprintf(head, sizeof head, "%s{run=\"%s\",scope=\"%s\"} ", name, run, scope);
  const char *at = strstr(text, head);
  return at ? strtod(at + strlen(head), NULL) : NAN;
}

/* report --format openmetrics: the headline gauges (12 significant digits). */
static void check_openmetrics(const char *db, const char *run, const tp_headline *h) {
  rp_result r = tpbench("report", "--db", db, "--run", run, "--format", "openmetrics");
  rp_expect(&r, 0, "# EOF", NULL);
  const char *scope = h->toy_only ? "toys only" : "headline";
  expect_same(h->figures.geomean_speedup,
              om_value(r.out, "tpbench_headline_speedup", run, scope, NULL), 1e-10,
              "openmetrics speedup");
  expect_same(h->figures.median_dist_over_bound,
              om_value(r.out, "tpbench_headline_dist_over_bound", run, scope, NULL), 1e-10,
              "openmetrics dist/bound");
  for (int t = 0; !h->toy_only && t < h->n_toys; t++)
    expect_same(h->toys[t].figures.geomean_speedup,
                om_value(r.out, "tpbench_headline_speedup", run, "toy", h->toys[t].model), 1e-10,
                "openmetrics toy speedup");
  rp_free(&r);
}

/* compare run:R run:R --format json: each used run's headline. */
static void check_compare(const char *db, const char *run, const tp_headline *h) {
  char side[40];
  snprintf(side, sizeof side, "run:%s", run);
  rp_result r = tpbench("compare", side, side, "--db", db, "--format", "json");
  rp_expect(&r, 0, NULL, NULL);
  json_t *doc = parse_out(&r, "compare json");
  json_t *head = json_object_get(
      json_array_get(json_object_get(json_object_get(doc, "base"), "runs"), 0), "headline");
  expect_figures(head, &h->figures, "compare json");
  expect_toys(json_object_get(head, "toys"), h, 0, "compare json");
  json_decref(doc);
  rp_free(&r);
}

/* The JSON inside <script id="tp-data"> of the dashboard's index.html. */
static json_t *page_document(const char *site) {
  char path[760];
  snprintf(path, sizeof path, "%s/index.html", site);
  size_t len = 0;
  char *page = (char *)fx_read_all(path, &len);
  const char *open = "id=\"tp-data\">";
  char *at = page ? memmem(page, len, open, strlen(open)) : NULL;
  char *close = at ? strstr(at, "</script>") : NULL;
  json_t *doc = NULL;
  if (close) {
    at += strlen(open);
    doc = json_loadb(at, (size_t)(close - at), 0, NULL);
  }
  free(page);
  return doc;
}

/* The dashboard's table of the run: its summary is what the cards show. */
static void check_dashboard(json_t *doc, int64_t run_id, const tp_headline *h) {
  json_t *table = NULL, *t;
  size_t i;
  json_array_foreach(json_object_get(doc, "runs"), i, t) {
    if (json_integer_value(json_object_get(json_object_get(t, "run"), "id")) == run_id) table = t;
  }
  if (!table) fail_msg("the dashboard has no table of run %lld", (long long)run_id);
  json_t *sum = json_object_get(table, "summary");
  expect_figures(sum, &h->figures, "dashboard");
  if (!h->toy_only) expect_toys(json_object_get(sum, "models"), h, 1, "dashboard");
}

static void check_database(const fixture *f, const char *name, int *runs_checked) {
  char db[700], site[720];
  fx_path(&f->dir, name, db, sizeof db);
  snprintf(site, sizeof site, "%s.site", db);
  char from[700];
  snprintf(from, sizeof from, "%s%s", EXAMPLES, name);
  assert_int_equal(fx_copy(from, db), 0);
  rp_result r = tpbench("dashboard", "--db", db, "--out", site);
  rp_expect(&r, 0, NULL, NULL);
  rp_free(&r);
  json_t *doc = page_document(site);
  assert_non_null(doc);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(db, &store), TP_OK);
  sqlite3_stmt *st = NULL;
  assert_int_equal(
      sqlite3_prepare_v2(tp_store_db(store), "SELECT id FROM runs ORDER BY id", -1, &st, NULL),
      SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const int64_t id = sqlite3_column_int64(st, 0);
    tp_headline h;
    tp_rc rc = tp_report_headline(store, id, &h);
    if (rc == TP_EUSAGE) { /* no op or layer table: a link probe, a drift run */
      tp_clear_error();
      continue;
    }
    assert_int_equal(rc, TP_OK);
    char run[32];
    snprintf(run, sizeof run, "%lld", (long long)id);
    check_report_json(db, run, &h);
    check_report_markdown(db, run, &h);
    check_openmetrics(db, run, &h);
    check_compare(db, run, &h);
    check_dashboard(doc, id, &h);
    (*runs_checked)++;
  }
  sqlite3_finalize(st);
  tp_store_close(store);
  json_decref(doc);
}

static void test_every_reader_shows_the_one_headline(void **state) {
  fixture *f = *state;
  int runs = 0;
  for (size_t i = 0; i < sizeof samples / sizeof *samples; i++)
    check_database(f, samples[i], &runs);
  printf("headline: report (JSON, markdown), OpenMetrics, compare and the dashboard agree on %d "
         "runs of %zu sample databases\n",
         runs, sizeof samples / sizeof *samples);
  assert_true(runs >= 10);
}

/* The sample's run 5 (layers of debug and llama3-8b): the headline is 8b's, debug apart. */
static void test_sample_run5_keeps_the_toy_apart(void **state) {
  fixture *f = *state;
  char db[700];
  fx_path(&f->dir, "run5.db", db, sizeof db);
  assert_int_equal(fx_copy(FX_SAMPLE_DB, db), 0);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open_readonly(db, &store), TP_OK);
  tp_headline h;
  assert_int_equal(tp_report_headline(store, 5, &h), TP_OK);
  tp_store_close(store);
  assert_int_equal(h.figures.rows, 24);
  assert_false(h.toy_only);
  assert_int_equal(h.n_toys, 1);
  assert_string_equal(h.toys[0].model, "debug");
  assert_int_equal(h.toys[0].figures.rows, 24);
  char line[512];
  tp_headline_line(&h, line, sizeof line);
  assert_non_null(strstr(line, "1.067x geometric-mean speedup over 24 rows, median dist/bound "
                               "1.18 over 24; toy models apart: debug 0.622x"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sample_run5_keeps_the_toy_apart),
      cmocka_unit_test(test_every_reader_shows_the_one_headline),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
