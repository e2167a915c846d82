/*
 * test_dashboard.c — the HTML dashboard, checked in headless Chromium.
 *
 * Generates the dashboard of a fixture database (the real H200 run, a run
 * synthesised from it at another commit, two synthesised traces:
 * fixture_db.h), loads it with `chromium --headless --dump-dom` from file://
 * (virtual time, so the trace file the page loads with a <script> and
 * inflates asynchronously is drawn before the dump) and checks the page as
 * the browser built it:
 *   - it finished drawing without an error: <html data-status="ok"> (the
 *     page's own JavaScript sets it once the first timeline is drawn;
 *     window.onerror would set "error" and write into #tp-errors), and
 *     Chromium logged no console error;
 *   - the table and the charts hold the database's figures: every row's
 *     speedup and dist_gemm time, every bar of the speedup and bound charts,
 *     the timeline's events (a dist_gemm configuration of the latest run,
 *     loaded from its trace file), the trend points, the compare view's
 *     changes, against values computed here with SQL from the same
 *     database;
 *   - every axis ticks at a round step (1, 2 or 5 times a power of ten);
 *   - the trends relative to the first commit draw one labelled line per
 *     model (legend and end label), and #trends=configs&filter=... the
 *     matching configurations only;
 * and takes a screenshot (1400x1000) into the build directory:
 * dashboard-screenshot.png (plus dashboard-full.png, the whole page).
 * Then the same page of examples/tpbench-h200-sample.db (real runs, traces
 * and a link probe) must be at most 3 MB, draw without an error, one rect
 * per complete event of the default trace, one point per link probe point
 * at its bus bandwidth; its screenshot is dashboard-sample.png.
 *
 * Skipped (exit 77) when /usr/bin/chromium is missing; scripts/setup.sh
 * installs it with TPBENCH_SETUP_CHROMIUM=1.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "dashboards/tp_dashboard.h"
#include "report/tp_trace_export.h"
#include "tests/cpu/fixture_db.h"
#include "tests/cpu/run_program.h"

#define CHROMIUM "/usr/bin/chromium"

typedef struct {
  fx_dir dir;
  char db[512];
  char page[700];
  char *dom;
  tp_store *store;
} fixture;

static fixture fx;

/* ---- the fixture ------------------------------------------------------------------ */

/* dist_gemm 4% faster, stock 1% slower, references unchanged: the trends
 * move and the speedups differ between the runs. */
static fx_change by_backend(const char *key, void *ctx) {
  (void)ctx;
  if (strstr(key, ";backend=dist_gemm;")) return (fx_change){0.96, 0.002};
  if (strstr(key, ";backend=stock;")) return (fx_change){1.01, 0.002};
  return (fx_change){1.0, 0.002};
}

static int64_t run2_config(tp_store *s, const char *schedule) {
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT min(id) FROM configs WHERE run_id = 2 AND backend = 'dist_gemm' AND "
           "schedule = '%s'",
           schedule);
  return fx_int(s, sql);
}

/* Chromium with the flags of a hermetic headless run, plus extra ones, on
 * the page at path. */
static rp_result chromium_on(const char *path, const char *a, const char *b, const char *c) {
  char profile[600], url[800];
  fx_path(&fx.dir, "profile.XXXXXX", profile, sizeof profile);
  if (!mkdtemp(profile)) fail_msg("mkdtemp failed");
  char user_data[700];
  snprintf(user_data, sizeof user_data, "--user-data-dir=%s", profile);
  snprintf(url, sizeof url, "file://%s", path);
  char *argv[] = {CHROMIUM,
                  "--headless",
                  "--no-sandbox",
                  "--disable-gpu",
                  "--disable-background-networking",
                  "--disable-component-update",
                  "--disable-sync",
                  "--no-first-run",
                  "--hide-scrollbars",
                  "--virtual-time-budget=15000",
                  "--enable-logging=stderr",
                  "--v=0",
                  user_data,
                  (char *)a,
                  (char *)b,
                  (char *)c,
                  url,
                  NULL};
  /* Drop the NULL gaps of unused extras. */
  char *compact[20];
  int n = 0;
  for (size_t i = 0; i < sizeof argv / sizeof *argv; i++)
    if (argv[i] || i == sizeof argv / sizeof *argv - 1) compact[n++] = argv[i];
  return rp_run(compact, 120);
}

static rp_result chromium(const char *a, const char *b, const char *c) {
  return chromium_on(fx.page, a, b, c);
}

static int setup(void **state) {
  (void)state;
  if (fx_mkdir(&fx.dir, "tp_dashboard") != 0) return -1;
  fx_path(&fx.dir, "dash.db", fx.db, sizeof fx.db);
  if (fx_copy(FX_REAL_DB, fx.db) != 0) return -1;
  if (tp_store_open(fx.db, 0, &fx.store) != TP_OK) return -1;
  if (fx_synthesise_run(fx.store, 1, "feed0002", by_backend, NULL, 9) != 2) return -1;
  if (fx_put_trace(fx.store, run2_config(fx.store, "ce"), 4, 1) != TP_OK ||
      fx_put_trace(fx.store, run2_config(fx.store, "sm"), 2, 0) != TP_OK)
    return -1;
  char site[600];
  fx_path(&fx.dir, "site", site, sizeof site);
  tp_dashboard_stats st;
  if (tp_dashboard_write(fx.store, site, NULL, &st) != TP_OK) {
    fprintf(stderr, "%s\n", tp_last_error());
    return -1;
  }
  snprintf(fx.page, sizeof fx.page, "%s/index.html", site);
  rp_result r = chromium("--dump-dom", NULL, NULL);
  if (r.status != 0) {
    fprintf(stderr, "chromium exited %d:\n%s\n", r.status, r.err);
    rp_free(&r);
    return -1;
  }
  /* Console messages come as "CONSOLE(line)] message"; an error is fatal. */
  if (strstr(r.err, "Uncaught") || strstr(r.err, "SyntaxError")) {
    fprintf(stderr, "console errors:\n%s\n", r.err);
    rp_free(&r);
    return -1;
  }
  fx.dom = r.out;
  free(r.err);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  free(fx.dom);
  tp_store_close(fx.store);
  fx_rmdir(&fx.dir);
  return 0;
}

/* ---- reading the DOM ------------------------------------------------------------------- */

/* The next start tag <name ...> at or after p; *end points at its '>'. */
static const char *next_tag(const char *p, const char *name, const char **end) {
  size_t n = strlen(name);
  for (const char *t = p; (t = strchr(t, '<')); t++) {
    if (strncmp(t + 1, name, n) == 0 && (t[1 + n] == ' ' || t[1 + n] == '>')) {
      *end = strchr(t, '>');
      return *end ? t : NULL;
    }
  }
  return NULL;
}

/* The value of attribute name in the tag [tag, end), or NULL; copied to buf. */
static const char *attr(const char *tag, const char *end, const char *name, char *buf, size_t cap) {
  if (!tag || !end) return NULL;
  char needle[64];
  snprintf(needle, sizeof needle, " %s=\"", name);
  const char *at = strstr(tag, needle);
  if (!at || at > end) return NULL;
  at += strlen(needle);
  const char *close = strchr(at, '"');
  if (!close || close > end) return NULL;
  snprintf(buf, cap, "%.*s", (int)(close - at), at);
  return buf;
}

static double attr_num(const char *tag, const char *end, const char *name) {
  char buf[64];
  if (!attr(tag, end, name, buf, sizeof buf)) fail_msg("no %s in %.200s", name, tag);
  return strtod(buf, NULL);
}

/* The region of the element with id="id" up to the next element id="until". */
static const char *region(const char *id, const char **stop, const char *until) {
  char needle[64];
  snprintf(needle, sizeof needle, "id=\"%s\"", id);
  const char *at = strstr(fx.dom, needle);
  if (!at) {
    fail_msg("no element %s in the DOM", id);
    *stop = "";
    return ""; /* not reached: fail_msg does not return */
  }
  snprintf(needle, sizeof needle, "id=\"%s\"", until);
  *stop = strstr(at, needle);
  if (!*stop) *stop = at + strlen(at);
  return at;
}

static void assert_rel(double actual, double expected, double rel) {
  if (!(fabs(actual - expected) <= rel * fabs(expected)))
    fail_msg("%.17g, expected %.17g", actual, expected);
}

static double median_us(int64_t config_id) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT median_us FROM results WHERE config_id = %lld",
           (long long)config_id);
  return fx_real(fx.store, sql);
}

/* The case reference of kind/backend for dist_gemm configuration id. */
static int64_t reference(int64_t dist_id, const char *kind, const char *backend) {
  char sql[400];
  snprintf(sql, sizeof sql,
           "SELECT r.id FROM configs r JOIN configs d ON d.run_id = r.run_id AND "
           "d.case_key = r.case_key WHERE d.id = %lld AND r.kind = '%s' AND r.backend = '%s'",
           (long long)dist_id, kind, backend);
  return fx_int(fx.store, sql);
}

/* ---- the checks ---------------------------------------------------------------------- */

static void test_page_loaded_without_errors(void **state) {
  (void)state;
  assert_non_null(strstr(fx.dom, "<html lang=\"en\" data-status=\"ok\">"));
  assert_non_null(strstr(fx.dom, "<pre id=\"tp-errors\" hidden=\"\"></pre>"));
  /* Offline: nothing on the page points off the machine. */
  assert_null(strstr(fx.dom, "src=\"http"));
  assert_null(strstr(fx.dom, "href=\"http"));
}

/* The latest run (2) is shown: 72 dist_gemm rows, each with the database's
 * speedup and time. */
static void test_table_holds_the_database_figures(void **state) {
  (void)state;
  const char *stop = NULL, *p = region("tp-table", &stop, "tp-not-run"), *end = NULL;
  int rows = 0;
  while ((p = next_tag(p, "tr", &end)) && p < stop) {
    char buf[64];
    if (!attr(p, end, "data-dist-id", buf, sizeof buf)) {
      p = end;
      continue;
    }
    int64_t dist = strtoll(buf, NULL, 10);
    int64_t stock = (int64_t)attr_num(p, end, "data-stock-id");
    assert_int_equal(stock, reference(dist, "op", "stock"));
    const char *row_end = strstr(end, "</tr>");
    double expect_speedup = (median_us(stock) / 1000.0) / (median_us(dist) / 1000.0);
    const char *cell = end, *cell_end = NULL;
    int checked = 0;
    while ((cell = next_tag(cell, "td", &cell_end)) && cell < row_end) {
      char col[32];
      if (attr(cell, cell_end, "data-col", col, sizeof col)) {
        double v = attr_num(cell, cell_end, "data-value");
        if (!strcmp(col, "speedup")) {
          assert_rel(v, expect_speedup, 1e-12);
          char text[32];
          snprintf(text, sizeof text, ">%.2f<", expect_speedup);
          assert_memory_equal(cell_end, text, strlen(text));
          checked++;
        } else if (!strcmp(col, "dist_ms")) {
          assert_rel(v, median_us(dist) / 1000.0, 1e-12);
          checked++;
        }
      }
      cell = cell_end;
    }
    assert_int_equal(checked, 2);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT run_id FROM configs WHERE id = %lld", (long long)dist);
    assert_int_equal(fx_int(fx.store, sql), 2);
    rows++;
    p = row_end;
  }
  assert_int_equal(rows, fx_int(fx.store, "SELECT count(*) FROM configs WHERE run_id = 2 AND "
                                          "kind = 'op' AND backend = 'dist_gemm'"));
}

/* Every bar of a chart: data-series, data-dist-id, data-value against want(). */
static int check_bars(const char *chart, const char *until, const char *series,
                      double (*want)(int64_t)) {
  const char *stop = NULL, *p = region(chart, &stop, until), *end = NULL;
  int bars = 0;
  while ((p = next_tag(p, "rect", &end)) && p < stop) {
    char s[64];
    if (attr(p, end, "data-series", s, sizeof s) && !strcmp(s, series)) {
      int64_t dist = (int64_t)attr_num(p, end, "data-dist-id");
      assert_rel(attr_num(p, end, "data-value"), want(dist), 1e-12);
      bars++;
    }
    p = end;
  }
  return bars;
}

static double want_speedup(int64_t dist) {
  return (median_us(reference(dist, "op", "stock")) / 1000.0) / (median_us(dist) / 1000.0);
}

static double want_dist_over_bound(int64_t dist) {
  double gemm = median_us(reference(dist, "gemm", "cublaslt")) / 1000.0;
  double comm = median_us(reference(dist, "comm", "nccl")) / 1000.0;
  return (median_us(dist) / 1000.0) / fmax(gemm, comm);
}

static void test_charts_hold_the_database_figures(void **state) {
  (void)state;
  assert_int_equal(check_bars("tp-speedup", "tp-bound", "speedup", want_speedup), 72);
  assert_int_equal(check_bars("tp-bound", "tp-table", "dist_gemm / bound", want_dist_over_bound),
                   72);
  /* The summary card: the geometric mean of the same speedups. */
  double log_sum = 0;
  int n = 0;
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(tp_store_db(fx.store),
                     "SELECT id FROM configs WHERE run_id = 2 AND backend = 'dist_gemm'", -1, &st,
                     NULL);
  while (sqlite3_step(st) == SQLITE_ROW) {
    log_sum += log(want_speedup(sqlite3_column_int64(st, 0)));
    n++;
  }
  sqlite3_finalize(st);
  char text[64];
  snprintf(text, sizeof text, "<div class=\"value\">%.3f×</div>", exp(log_sum / n));
  const char *stop = NULL;
  const char *card = region("tp-card-geomean", &stop, "tp-card-bound");
  const char *found = strstr(card, text);
  assert_true(found && found < stop);
}

/* The traced dist_gemm configuration of the latest traced run with the
 * most FLOPs per iteration (the lower id on a tie). */
static int64_t expected_default_trace(tp_store *s) {
  return fx_int(s, "SELECT t.config_id FROM traces t JOIN configs c ON c.id = t.config_id "
                   "JOIN results x ON x.config_id = c.id WHERE c.backend = 'dist_gemm' AND "
                   "c.run_id = (SELECT c2.run_id FROM traces t2 JOIN configs c2 ON c2.id = "
                   "t2.config_id JOIN runs r ON r.id = c2.run_id ORDER BY r.started_at DESC, "
                   "r.id DESC LIMIT 1) ORDER BY x.flops DESC, t.config_id LIMIT 1");
}

/* The complete ("X") events of the configuration's Chrome trace export:
 * what the timeline draws. */
static int complete_events(tp_store *s, int64_t config_id) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_chrome_trace(s, config_id, mem), TP_OK);
  fclose(mem);
  int n = 0;
  for (const char *q = text; (q = strstr(q, "\"ph\":\"X\"")); q++) n++;
  free(text);
  return n;
}

/* The first timeline: a dist_gemm configuration of the latest run, loaded
 * from its trace file, every complete event a rect. */
static void test_timeline_holds_the_trace(void **state) {
  (void)state;
  const char *stop = NULL, *p = region("tp-timeline", &stop, "tp-trend"), *end = NULL;
  p = next_tag(p, "svg", &end);
  assert_non_null(p);
  int64_t config = (int64_t)attr_num(p, end, "data-config-id");
  assert_int_equal(config, expected_default_trace(fx.store));
  assert_true(config == run2_config(fx.store, "ce") || config == run2_config(fx.store, "sm"));
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM events WHERE config_id = %lld",
           (long long)config);
  int64_t events = fx_int(fx.store, sql);
  assert_true(events >= 12);
  assert_int_equal((int64_t)attr_num(p, end, "data-events"), complete_events(fx.store, config));
  events = complete_events(fx.store, config);
  int rects = 0, comm = 0;
  while ((p = next_tag(p, "rect", &end)) && p < stop) {
    char cls[32], cat[32];
    if (attr(p, end, "class", cls, sizeof cls) && !strcmp(cls, "ev")) {
      rects++;
      if (attr(p, end, "data-cat", cat, sizeof cat) && !strcmp(cat, "comm")) comm++;
    }
    p = end;
  }
  assert_int_equal(rects, events);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM events WHERE config_id = %lld AND category = 'comm'",
           (long long)config);
  assert_int_equal(comm, fx_int(fx.store, sql));
  assert_true(comm > 0);
  /* Lanes are named per rank and stream. */
  const char *lanes = region("tp-timeline", &stop, "tp-trend");
  const char *lane = strstr(lanes, "rank 1 (NVIDIA H200) · stream 13");
  assert_true(lane && lane < stop);
  lane = strstr(lanes, "rank 0 (NVIDIA H200) · NVTX");
  assert_true(lane && lane < stop);
}

/* The first op series across both commits: a point per commit at the
 * database's median. */
static void test_trends_hold_the_medians(void **state) {
  (void)state;
  const char *stop = NULL, *p = region("tp-trend", &stop, "tp-trend-all"), *end = NULL;
  int points = 0;
  while ((p = next_tag(p, "circle", &end)) && p < stop) {
    int64_t config = (int64_t)attr_num(p, end, "data-config-id");
    assert_rel(attr_num(p, end, "data-value"), median_us(config), 1e-12);
    points++;
    p = end;
  }
  assert_int_equal(points, 2);
}

/* The lines relative to the first commit in dom: each labelled in the
 * legend and at its end; every line's data-key holds want_in_key. */
static int labelled_trend_lines(const char *dom, const char *want_in_key) {
  const char *all = strstr(dom, "id=\"tp-trend-all\"");
  assert_non_null(all);
  const char *stop = strstr(all, "id=\"tp-link-run\""), *p = all, *end = NULL;
  assert_non_null(stop);
  int lines = 0;
  while ((p = next_tag(p, "polyline", &end)) && p < stop) {
    char cls[32], label[256], key[600];
    if (attr(p, end, "class", cls, sizeof cls) && !strcmp(cls, "trend-line")) {
      assert_non_null(attr(p, end, "data-label", label, sizeof label));
      assert_non_null(attr(p, end, "data-key", key, sizeof key));
      if (want_in_key) assert_non_null(strstr(key, want_in_key));
      char legend[300], end_label[300];
      snprintf(legend, sizeof legend, ">%s</span>", label);
      snprintf(end_label, sizeof end_label, "class=\"end-label\"");
      const char *in_legend = strstr(all, legend);
      assert_true(in_legend && in_legend < stop);
      const char *text = strstr(all, end_label);
      int found = 0;
      for (; text && text < stop; text = strstr(text + 1, end_label)) {
        const char *close = strchr(text, '>');
        if (close && !strncmp(close + 1, label, strlen(label))) found = 1;
      }
      assert_true(found);
      lines++;
    }
    p = end;
  }
  return lines;
}

/* By default one line per model (its dist_gemm ops' geometric mean), not
 * one per configuration; #trends=configs&filter=qkv: the qkv ones only. */
static void test_trend_lines_are_few_and_labelled(void **state) {
  (void)state;
  int models = (int)fx_int(fx.store, "SELECT count(DISTINCT model) FROM configs WHERE kind = "
                                     "'op' AND backend = 'dist_gemm' AND run_id = 2");
  assert_true(models >= 2);
  assert_int_equal(labelled_trend_lines(fx.dom, "geomean:"), models);
  char page[800];
  snprintf(page, sizeof page, "%s#trends=configs&filter=qkv", fx.page);
  rp_result r = chromium_on(page, "--dump-dom", NULL, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "data-status=\"ok\""));
  int lines = labelled_trend_lines(r.out, "proj=qkv");
  assert_true(lines > 0 && lines <= 12);
  rp_free(&r);
}

/* Every tick label of every chart (data-tick, in drawing order per chart):
 * equally spaced at 1, 2 or 5 times a power of ten. */
static void check_round_ticks(const char *dom, int min_charts) {
  int charts = 0;
  const char *end = NULL;
  for (const char *p = dom; next_tag(p, "svg", &end); p = strstr(end, "</svg>")) {
    const char *close = strstr(end, "</svg>");
    assert_non_null(close);
    double ticks[64];
    int n = 0;
    const char *t = end, *t_end = NULL;
    while ((t = next_tag(t, "text", &t_end)) && t < close) {
      char v[64];
      if (attr(t, t_end, "data-tick", v, sizeof v) && n < 64) ticks[n++] = strtod(v, NULL);
      t = t_end;
    }
    if (n >= 2) {
      double step = ticks[1] - ticks[0];
      assert_true(step > 0);
      double power = pow(10, floor(log10(step) + 1e-9)), mantissa = step / power;
      if (!(fabs(mantissa - 1) < 1e-6 || fabs(mantissa - 2) < 1e-6 || fabs(mantissa - 5) < 1e-6))
        fail_msg("tick step %.17g is not 1, 2 or 5 times a power of ten", step);
      for (int i = 1; i < n; i++) {
        assert_rel(ticks[i] - ticks[i - 1], step, 1e-6);
        double k = ticks[i] / step;
        if (fabs(k - round(k)) > 1e-6)
          fail_msg("tick %.17g is not a multiple of %.17g", ticks[i], step);
      }
      charts++;
    }
  }
  assert_true(charts >= min_charts);
}

/* Speedup, bound, timeline, trend, trends relative: five charts ticked. */
static void test_axis_ticks_are_round(void **state) {
  (void)state;
  check_round_ticks(fx.dom, 5);
}

/* dist_gemm / stock of a dist_gemm configuration, from the medians. */
static double dist_over_stock(int64_t dist) {
  return median_us(dist) / median_us(reference(dist, "op", "stock"));
}

/* Runs 1 (base) and 2 (head) by default: every shared configuration's
 * dist/stock change from the medians, worst first. */
static void test_compare_view(void **state) {
  (void)state;
  const char *stop = NULL, *p = region("tp-compare-table", &stop, "tp-trace"), *end = NULL;
  int rows = 0;
  double previous = INFINITY;
  while ((p = next_tag(p, "tr", &end)) && p < stop) {
    char buf[64];
    if (!attr(p, end, "data-head-id", buf, sizeof buf)) {
      p = end;
      continue;
    }
    int64_t head = strtoll(buf, NULL, 10);
    int64_t base = (int64_t)attr_num(p, end, "data-base-id");
    char sql[300];
    snprintf(sql, sizeof sql,
             "SELECT (SELECT run_id FROM configs WHERE id = %lld) * 10 + (SELECT run_id FROM "
             "configs WHERE id = %lld)",
             (long long)base, (long long)head);
    assert_int_equal(fx_int(fx.store, sql), 12);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM configs a JOIN configs b ON a.config_key = b.config_key "
             "WHERE a.id = %lld AND b.id = %lld",
             (long long)base, (long long)head);
    assert_int_equal(fx_int(fx.store, sql), 1);
    const char *cell = strstr(end, "data-col=\"stock_change\"");
    assert_non_null(cell);
    const char *tag = cell;
    while (*tag != '<') tag--;
    double change = attr_num(tag, strchr(cell, '>'), "data-value");
    assert_rel(change, dist_over_stock(head) / dist_over_stock(base) - 1, 1e-9);
    assert_true(change <= previous);
    previous = change;
    rows++;
    p = end;
  }
  assert_int_equal(rows, fx_int(fx.store, "SELECT count(*) FROM configs WHERE run_id = 2 AND "
                                          "kind = 'op' AND backend = 'dist_gemm'"));
}

static void test_screenshot(void **state) {
  (void)state;
  const char *shots[][2] = {{TP_BUILD_DIR "/dashboard-screenshot.png", "1400,1000"},
                            {TP_BUILD_DIR "/dashboard-full.png", "1400,6400"}};
  for (size_t i = 0; i < 2; i++) {
    remove(shots[i][0]);
    char shot[600], size[64];
    snprintf(shot, sizeof shot, "--screenshot=%s", shots[i][0]);
    snprintf(size, sizeof size, "--window-size=%s", shots[i][1]);
    rp_result r = chromium(shot, size, NULL);
    if (r.status != 0) fail_msg("chromium exited %d:\n%s", r.status, r.err);
    rp_free(&r);
    size_t len = 0;
    unsigned char *png = fx_read_all(shots[i][0], &len);
    assert_non_null(png);
    assert_true(len > 10000);
    assert_memory_equal(png, "\x89PNG", 4);
    free(png);
  }
}

/* The sample database of real runs (examples/): real traces (two ranks,
 * several streams, NVTX) draw without an error, as many rects as events. */
static void test_sample_database_page(void **state) {
  (void)state;
  if (access(FX_SAMPLE_DB, R_OK) != 0) skip();
  char db[600], site[600], page[700];
  fx_path(&fx.dir, "sample.db", db, sizeof db);
  fx_path(&fx.dir, "sample-site", site, sizeof site);
  snprintf(page, sizeof page, "%s/index.html", site);
  assert_int_equal(fx_copy(FX_SAMPLE_DB, db), 0);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 0, &s), TP_OK);
  tp_dashboard_stats st;
  assert_int_equal(tp_dashboard_write(s, site, NULL, &st), TP_OK);
  assert_true(st.traces > 0);
  assert_true(st.bytes <= (size_t)3 * 1024 * 1024);
  rp_result r = chromium_on(page, "--dump-dom", NULL, NULL);
  assert_int_equal(r.status, 0);
  assert_null(strstr(r.err, "Uncaught"));
  assert_non_null(strstr(r.out, "<html lang=\"en\" data-status=\"ok\">"));
  /* The timeline's <svg>: the first one whose class is "timeline". */
  const char *end = NULL, *svg = r.out;
  char cls[32] = "", id[32] = "";
  while ((svg = next_tag(svg, "svg", &end)) &&
         !(attr(svg, end, "class", cls, sizeof cls) && !strcmp(cls, "timeline")))
    svg = end;
  assert_non_null(svg);
  assert_non_null(attr(svg, end, "data-config-id", id, sizeof id));
  int64_t config = strtoll(id, NULL, 10);
  assert_int_equal(config, expected_default_trace(s));
  int events = complete_events(s, config);
  int rects = 0;
  for (const char *q = r.out; (q = strstr(q, "class=\"ev\"")); q++) rects++;
  assert_int_equal(rects, events);
  assert_true(events > 10);
  check_round_ticks(r.out, 6); /* the link chart's too */
  /* The link probe: a point per stored point at its bus bandwidth. */
  int points = 0;
  const char *p = r.out, *end_tag = NULL;
  while ((p = next_tag(p, "circle", &end_tag))) {
    char kind[32], buf[64];
    if (attr(p, end_tag, "class", kind, sizeof kind) && !strcmp(kind, "link-point")) {
      assert_non_null(attr(p, end_tag, "data-config-id", buf, sizeof buf));
      char sql[400];
      snprintf(sql, sizeof sql,
               "SELECT CASE c.backend WHEN 'nccl' THEN (c.tp - 1) ELSE 1 END * c.m / "
               "(x.median_us * 1e-6) / 1e9 FROM configs c JOIN results x ON x.config_id = c.id "
               "WHERE c.id = %s",
               buf);
      assert_rel(attr_num(p, end_tag, "data-value"), fx_real(s, sql), 1e-9);
      points++;
    }
    p = end_tag;
  }
  assert_int_equal(points, fx_int(s, "SELECT count(*) FROM configs WHERE kind = 'link'"));
  assert_true(points > 0);
  rp_free(&r);
  /* The top of the page and the whole page (for the eye; not compared). */
  const char *shots[][3] = {
      {TP_BUILD_DIR "/dashboard-sample.png", "--screenshot=" TP_BUILD_DIR "/dashboard-sample.png",
       "--window-size=1400,1000"},
      {TP_BUILD_DIR "/dashboard-sample-full.png",
       "--screenshot=" TP_BUILD_DIR "/dashboard-sample-full.png", "--window-size=1400,6000"}};
  for (size_t i = 0; i < 2; i++) {
    remove(shots[i][0]);
    r = chromium_on(page, shots[i][1], shots[i][2], NULL);
    assert_int_equal(r.status, 0);
    rp_free(&r);
    size_t len = 0;
    unsigned char *png = fx_read_all(shots[i][0], &len);
    assert_non_null(png);
    assert_memory_equal(png, "\x89PNG", 4);
    free(png);
  }
  printf("sample dashboard: index.html %zu bytes, traces/ %zu bytes (%d files)\n", st.bytes,
         st.trace_bytes, st.traces);
  tp_store_close(s);
}

/* A run of one GPU (the main job's: TP 1, nothing fuses) has no speedup: the summary card says
 * so in words, never a bare "-x". */
static void test_one_gpu_run_says_no_speedup(void **state) {
  (void)state;
  const char *main_job = TP_TEST_DATA_DIR "/../../examples/tpbench-h100-main-job.db";
  if (access(main_job, R_OK) != 0) skip();
  char db[600], site[600], page[700];
  fx_path(&fx.dir, "main-job.db", db, sizeof db);
  fx_path(&fx.dir, "main-job-site", site, sizeof site);
  snprintf(page, sizeof page, "%s/index.html", site);
  assert_int_equal(fx_copy(main_job, db), 0);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 0, &s), TP_OK);
  assert_int_equal(tp_dashboard_write(s, site, NULL, NULL), TP_OK);
  tp_store_close(s);
  rp_result r = chromium_on(page, "--dump-dom", NULL, NULL);
  assert_int_equal(r.status, 0);
  assert_non_null(strstr(r.out, "no row with stock and dist_gemm results"));
  assert_null(strstr(r.out, "-\u00d7"));
  assert_null(strstr(r.out, "-×"));
  rp_free(&r);
}

int main(void) {
  if (access(CHROMIUM, X_OK) != 0) {
    printf("skipped: %s is missing (TPBENCH_SETUP_CHROMIUM=1 bash scripts/setup.sh)\n", CHROMIUM);
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_page_loaded_without_errors),
      cmocka_unit_test(test_table_holds_the_database_figures),
      cmocka_unit_test(test_charts_hold_the_database_figures),
      cmocka_unit_test(test_timeline_holds_the_trace),
      cmocka_unit_test(test_trends_hold_the_medians),
      cmocka_unit_test(test_trend_lines_are_few_and_labelled),
      cmocka_unit_test(test_axis_ticks_are_round),
      cmocka_unit_test(test_compare_view),
      cmocka_unit_test(test_screenshot),
      cmocka_unit_test(test_sample_database_page),
      cmocka_unit_test(test_one_gpu_run_says_no_speedup),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
