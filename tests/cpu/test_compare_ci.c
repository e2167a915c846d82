/*
 * test_compare_ci.c — CPU tests of the CI formats: XML, UTF-8 and
 * OpenMetrics escaping (report/tp_escape.h) by exact output; compare's
 * JUnit XML (structure, counts, failures with the measured change,
 * skipped rows with their reason, hostile labels escaped) and BMF
 * (parsed with jansson: values against compare's JSON, intervals around
 * them, units) on compare_ci_fixture.h's synthetic comparison;
 * --changed-only and --top in every format; the OpenMetrics export of a run
 * of examples/' sample database checked line by line against the
 * exposition grammar. test_compare_junit.c reads the JUnit file with a
 * real JUnit parser.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <ctype.h>
#include <jansson.h>

#include "report/tp_compare.h"
#include "report/tp_escape.h"
#include "report/tp_openmetrics.h"
#include "tests/cpu/compare_ci_fixture.h"

typedef struct {
  fx_dir dir;
  char db[600];
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || fx_mkdir(&f->dir, "tp_compare_ci") != 0) return -1;
  fx_path(&f->dir, "ci.db", f->db, sizeof f->db);
  if (ci_build_db(f->db) != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  fx_rmdir(&f->dir);
  free(f);
  return 0;
}

/* What writer(out, text) writes. */
static char *written(void (*writer)(FILE *, const char *), const char *text) {
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  writer(mem, text);
  fclose(mem);
  return buf;
}

static void assert_writes(void (*writer)(FILE *, const char *), const char *text,
                          const char *expected) {
  char *got = written(writer, text);
  assert_string_equal(got, expected);
  free(got);
}

/* ---- escaping --------------------------------------------------------------------- */

static void test_utf8_sequences(void **state) {
  (void)state;
  const struct {
    const char *bytes;
    size_t len;
  } cases[] = {{"a", 1},
               {"\xc3\xa9", 2},         /* é */
               {"\xe2\x82\xac", 3},     /* € */
               {"\xf0\x9f\x98\x80", 4}, /* U+1F600 */
               {"\xc0\x80", 0},         /* overlong NUL */
               {"\xe0\x80\xaf", 0},     /* overlong '/' */
               {"\xed\xa0\x80", 0},     /* a surrogate */
               {"\xf4\x90\x80\x80", 0}, /* above U+10FFFF */
               {"\xff", 0},             /* never in UTF-8 */
               {"\x80", 0},             /* a lone continuation byte */
               {"\xe2\x82", 0}};        /* cut short */
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const unsigned char *s = (const unsigned char *)cases[i].bytes;
    if (tp_utf8_sequence(s, strlen(cases[i].bytes)) != cases[i].len)
      fail_msg("case %zu: %zu, expected %zu", i, tp_utf8_sequence(s, strlen(cases[i].bytes)),
               cases[i].len);
  }
  assert_int_equal(tp_utf8_sequence((const unsigned char *)"a", 0), 0);
}

static void test_xml_escaping(void **state) {
  (void)state;
  const char *hostile = "a<b>&\"c\"'d'\te\nf\rg\001h\377i\xef\xbf\xbfj\xc3\xa9";
  assert_writes(
      tp_xml_text, hostile,
      "a&lt;b&gt;&amp;\"c\"'d'\te\nf&#13;g\xef\xbf\xbdh\xef\xbf\xbdi\xef\xbf\xbdj\xc3\xa9");
  assert_writes(tp_xml_attr, hostile,
                "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;&#9;e&#10;f&#13;g\xef\xbf\xbdh\xef\xbf"
                "\xbdi\xef\xbf\xbdj\xc3\xa9");
  assert_writes(tp_xml_text, "]]>", "]]&gt;");
  assert_writes(tp_xml_attr, NULL, "");
}

static void test_openmetrics_escaping(void **state) {
  (void)state;
  assert_writes(tp_openmetrics_label, "say \"hi\"\\ now\nnext\ttab\377",
                "say \\\"hi\\\"\\\\ now\\nnext\ttab\xef\xbf\xbd");
  assert_writes(tp_openmetrics_label, NULL, "");
  /* a terminal escape (ESC, the C1 CSI) and a carriage return reach no terminal */
  assert_writes(tp_openmetrics_label,
                "a\x1b[31mb\xc2\x9b"
                "c\rd",
                "a\xef\xbf\xbd[31mb\xef\xbf\xbd"
                "c\xef\xbf\xbd"
                "d");
}

/* ---- compare ------------------------------------------------------------------------ */

static char *capture(const fixture *f, const tp_compare_options *opt, tp_compare_format fmt,
                     tp_compare_summary *sum) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open_readonly(f->db, &s), TP_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  tp_rc rc = tp_report_compare(s, CI_BASE, CI_HEAD, opt, fmt, mem, sum);
  fclose(mem);
  tp_store_close(s);
  if (rc != TP_OK) fail_msg("compare: %s", tp_last_error());
  return text;
}

static json_t *capture_json(const fixture *f, const tp_compare_options *opt, tp_compare_format fmt,
                            tp_compare_summary *sum) {
  char *text = capture(f, opt, fmt, sum);
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  if (!root) fail_msg("not JSON (%s, line %d): %.300s", err.text, err.line, text);
  free(text);
  return root;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *at = text; (at = strstr(at, needle)); at += strlen(needle)) n++;
  return n;
}

static int attr_int(const char *text, const char *element, const char *name) {
  const char *at = strstr(text, element);
  char needle[64];
  snprintf(needle, sizeof needle, " %s=\"", name);
  const char *attr = at ? strstr(at, needle) : NULL;
  if (!attr) {
    fail_msg("no %s in %s", name, element);
    return -1;
  }
  return (int)strtol(attr + strlen(needle), NULL, 10);
}

static tp_compare_options defaults(void) {
  return (tp_compare_options){.threshold = TP_COMPARE_DEFAULT_THRESHOLD,
                              .alpha = TP_COMPARE_DEFAULT_ALPHA};
}

/* Per row of compare's JSON: whether the JUnit file skips it. */
static int skipped_in_junit(json_t *row) {
  const char *v = json_string_value(json_object_get(row, "verdict"));
  const char *note = json_string_value(json_object_get(row, "note"));
  return !strcmp(v, "information") || !strcmp(v, "new") || !strcmp(v, "missing") ||
         (!strcmp(v, "unchanged") && note && !strncmp(note, "did not run", 11));
}

static void test_junit(void **state) {
  fixture *f = *state;
  tp_compare_options opt = defaults();
  tp_compare_summary sum = {0};
  json_t *json = capture_json(f, &opt, TP_COMPARE_JSON, &sum);
  json_t *rows = json_object_get(json, "rows");
  int skipped = 0;
  for (size_t i = 0; i < json_array_size(rows); i++)
    skipped += skipped_in_junit(json_array_get(rows, i));
  char *xml = capture(f, &opt, TP_COMPARE_JUNIT, &sum);
  /* the slower fused configurations and the failure regress */
  assert_true(sum.regressed >= 2);
  assert_int_equal(sum.failed, 1);
  const char *prolog = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites ";
  assert_int_equal(strncmp(xml, prolog, strlen(prolog)), 0);
  assert_int_equal(count(xml, "<testcase "), (int)json_array_size(rows));
  assert_int_equal(attr_int(xml, "<testsuite ", "tests"), (int)json_array_size(rows));
  assert_int_equal(attr_int(xml, "<testsuites ", "failures"), sum.regressed);
  assert_int_equal(count(xml, "<failure "), sum.regressed);
  assert_int_equal(attr_int(xml, "<testsuite ", "skipped"), skipped);
  assert_int_equal(count(xml, "<skipped "), skipped);
  assert_true(skipped > 0);
  /* a measured regression names the change, its interval and adjusted p */
  assert_non_null(strstr(xml, "<failure type=\"regression\" message=\"dist/stock +"));
  assert_non_null(strstr(xml, "% (95% interval +"));
  assert_non_null(strstr(xml, ", adjusted p "));
  /* the failure: its reason, escaped */
  assert_non_null(strstr(xml, "<failure type=\"failed in head\" message=\"ok in base, in head "
                              "failed: numerics: rel err 3e-1 &lt;vs&gt; stock\">"));
  assert_non_null(strstr(xml, "classname=\"op/llama3-70b/linear_rs\""));
  /* references are skipped with the reason */
  assert_non_null(strstr(xml, "<skipped message=\"not gated: a reference configuration"));
  /* properties: both commits, the hardware */
  assert_non_null(strstr(xml, "<property name=\"base.commit\" value=\"b000000000"));
  assert_non_null(strstr(xml, "<property name=\"head.commit\" value=\"e000000000"));
  assert_non_null(strstr(xml, "<property name=\"head.gpu\" value=\"NVIDIA H200\"/>"));
  /* the hostile model: escaped, no raw markup, control byte or bad UTF-8 */
  assert_non_null(strstr(xml,
                         "classname=\"op/8b &lt;a href=&quot;x&quot;&gt;&amp;amp;&apos;q&apos;"
                         "&lt;/a&gt; \\ &#10;line2\xef\xbf\xbdx\xef\xbf\xbd\xc3\xa9/ag_linear"));
  assert_null(strstr(xml, "<a href"));
  assert_null(strchr(xml, '\001'));
  assert_null(strchr(xml, '\377'));
  /* exit status: unchanged (the summary decides it) */
  assert_int_equal(sum.regressed, (int)json_integer_value(json_object_get(
                                      json_object_get(json, "summary"), "regressed")));
  free(xml);
  json_decref(json);
}

/* The JSON row of a label. */
static json_t *row_by_label(json_t *rows, const char *label) {
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    if (!strcmp(json_string_value(json_object_get(row, "label")), label)) return row;
  }
  return NULL;
}

static double measure_head(json_t *row, const char *measure) {
  return json_real_value(
      json_object_get(json_object_get(json_object_get(row, "measures"), measure), "head"));
}

static void assert_bounds(json_t *metric) {
  double v = json_number_value(json_object_get(metric, "value"));
  json_t *lo = json_object_get(metric, "lower_value"), *hi = json_object_get(metric, "upper_value");
  assert_non_null(lo);
  assert_non_null(hi);
  assert_true(json_number_value(lo) <= v && v <= json_number_value(hi));
  assert_true(json_number_value(lo) < json_number_value(hi));
}

static void test_bmf(void **state) {
  fixture *f = *state;
  tp_compare_options opt = defaults();
  tp_compare_summary sum = {0};
  json_t *json = capture_json(f, &opt, TP_COMPARE_JSON, &sum);
  json_t *bmf = capture_json(f, &opt, TP_COMPARE_BMF, &sum);
  json_t *rows = json_object_get(json, "rows");
  size_t both = 0, subjects = 0;
  const char *name;
  json_t *measures;
  json_object_foreach(bmf, name, measures) {
    json_t *row = row_by_label(rows, name);
    if (!row) fail_msg("BMF benchmark '%s' is no row of compare's JSON", name);
    both++;
    json_t *latency = json_object_get(measures, "latency");
    assert_non_null(latency);
    /* latency in nanoseconds: compare's head time is in microseconds */
    double ns = json_number_value(json_object_get(latency, "value"));
    assert_true(fabs(ns - measure_head(row, "time") * 1e3) <= 1e-6 * ns);
    assert_bounds(latency); /* three rounds: the range of the round medians */
    int subject = !strcmp(json_string_value(json_object_get(row, "role")), "dist_gemm");
    json_t *speedup = json_object_get(measures, "speedup");
    json_t *bound = json_object_get(measures, "dist_over_bound");
    if (!subject) {
      assert_null(speedup);
      assert_null(bound);
      assert_int_equal(json_object_size(measures), 1);
      continue;
    }
    subjects++;
    double s = json_number_value(json_object_get(speedup, "value"));
    assert_true(fabs(s - 1.0 / measure_head(row, "vs_stock")) <= 1e-9 * s);
    double d = json_number_value(json_object_get(bound, "value"));
    assert_true(fabs(d - measure_head(row, "vs_bound")) <= 1e-9 * d);
    assert_bounds(speedup);
    assert_bounds(bound);
  }
  /* every row ok on both sides, each under its own name */
  size_t expected = 0;
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    expected += json_is_number(
        json_object_get(json_object_get(json_object_get(row, "measures"), "time"), "head"));
  }
  assert_int_equal(both, expected);
  assert_true(subjects > 4);
  /* the hostile label is a key, as compare's JSON writes it (the byte that is not UTF-8 as
   * U+FFFD, the é kept) */
  int hostile = 0;
  json_object_foreach(bmf, name, measures) hostile +=
      strstr(name, "\001x\xef\xbf\xbd\xc3\xa9") != NULL;
  assert_true(hostile > 0);
  json_decref(bmf);
  json_decref(json);
}

/* Labels that differ only in bytes that are not UTF-8 read alike as BMF
 * keys (tp_json_str): each must still get a benchmark of its own (before,
 * the second overwrote the first and BMF lost rows without a word). */
static void test_bmf_names_unique(void **state) {
  const fixture *f = *state;
  fixture twin = *f;
  fx_path(&f->dir, "bmf-twins.db", twin.db, sizeof twin.db);
  assert_int_equal(fx_copy(f->db, twin.db), 0);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(twin.db, 1, &s), TP_OK);
  /* the 70b qkv case renamed as the hostile 8b one, but \376 for its \377 */
  assert_int_equal(fx_exec(s, "UPDATE configs SET model = replace(" CI_HOSTILE_MODEL_SQL
                              ", cast(x'ff' as text), cast(x'fe' as text)) "
                              "WHERE model = 'llama3-70b' AND proj = 'qkv'"),
                   0);
  tp_store_close(s);
  tp_compare_options opt = defaults();
  tp_compare_summary sum = {0};
  json_t *json = capture_json(&twin, &opt, TP_COMPARE_JSON, &sum);
  json_t *bmf = capture_json(&twin, &opt, TP_COMPARE_BMF, &sum);
  json_t *rows = json_object_get(json, "rows");
  size_t expected = 0, twins = 0;
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    expected += json_is_number(
        json_object_get(json_object_get(json_object_get(row, "measures"), "time"), "head"));
  }
  const char *name;
  json_t *measures;
  json_object_foreach(bmf, name, measures) twins += strstr(name, "\001x\xef\xbf\xbd") != NULL;
  assert_int_equal(json_object_size(bmf), expected);
  assert_true(twins >= 4); /* both cases' rows, each under its own name */
  json_decref(bmf);
  json_decref(json);
}

/* --changed-only and --top choose what is shown in every format; the
 * summary (and so the exit status) still counts every row. */
static void test_changed_only_and_top(void **state) {
  fixture *f = *state;
  tp_compare_options opt = defaults();
  tp_compare_summary all = {0}, sum = {0};
  json_t *full = capture_json(f, &opt, TP_COMPARE_JSON, &all);
  size_t n_all = json_array_size(json_object_get(full, "rows"));
  opt.changed_only = 1;
  json_t *changed = capture_json(f, &opt, TP_COMPARE_JSON, &sum);
  json_t *rows = json_object_get(changed, "rows");
  assert_int_equal(json_array_size(rows), (size_t)(all.regressed + all.improved));
  assert_true(json_array_size(rows) < n_all);
  for (size_t i = 0; i < json_array_size(rows); i++) {
    const char *v = json_string_value(json_object_get(json_array_get(rows, i), "verdict"));
    assert_true(!strcmp(v, "regressed") || !strcmp(v, "improved"));
  }
  assert_memory_equal(&sum, &all, sizeof sum);
  assert_true(json_is_true(json_object_get(json_object_get(changed, "options"), "changed_only")));
  /* the 2 largest changes: the failure first, then the largest |change| */
  opt = defaults();
  opt.top = 2;
  json_t *top = capture_json(f, &opt, TP_COMPARE_JSON, &sum);
  rows = json_object_get(top, "rows");
  assert_int_equal(json_array_size(rows), 2);
  assert_true(json_is_true(json_object_get(json_array_get(rows, 0), "failed_in_head")));
  double largest = 0; /* the largest |change| of any row but the failure */
  for (size_t i = 0; i < n_all; i++) {
    json_t *row = json_array_get(json_object_get(full, "rows"), i), *m;
    const char *key;
    json_object_foreach(json_object_get(row, "measures"), key, m) {
      double c = fabs(json_number_value(json_object_get(m, "change")));
      if (!json_is_true(json_object_get(row, "failed_in_head")) && c > largest) largest = c;
    }
  }
  json_t *second = json_array_get(rows, 1), *m;
  const char *key;
  double shown = 0;
  json_object_foreach(json_object_get(second, "measures"), key, m) shown =
      fmax(shown, fabs(json_number_value(json_object_get(m, "change"))));
  assert_true(fabs(shown - largest) < 1e-12);
  assert_memory_equal(&sum, &all, sizeof sum);
  /* markdown says what it left out; JUnit and CSV hold the two rows */
  char *md = capture(f, &opt, TP_COMPARE_MD, &sum);
  char says[96];
  snprintf(says, sizeof says, "_Shown: 2 of %zu configurations, the 2 largest changes._", n_all);
  assert_non_null(strstr(md, says));
  assert_non_null(strstr(md, "**Regression**"));
  char *xml = capture(f, &opt, TP_COMPARE_JUNIT, &sum);
  assert_int_equal(count(xml, "<testcase "), 2);
  char *csv = capture(f, &opt, TP_COMPARE_CSV, &sum);
  assert_int_equal(count(csv, "\r\n"), 3);
  opt.changed_only = 1;
  opt.top = 1;
  json_decref(capture_json(f, &opt, TP_COMPARE_BMF, &sum)); /* the failure: no BMF row */
  free(md);
  free(xml);
  free(csv);
  json_decref(top);
  json_decref(changed);
  json_decref(full);
  opt.top = -1;
  tp_store *s = NULL;
  assert_int_equal(tp_store_open_readonly(f->db, &s), TP_OK);
  FILE *null = fopen("/dev/null", "w");
  assert_int_equal(tp_report_compare(s, CI_BASE, CI_HEAD, &opt, TP_COMPARE_MD, null, &sum),
                   TP_EUSAGE);
  fclose(null);
  tp_store_close(s);
}

/* ---- OpenMetrics --------------------------------------------------------------------- */

static int is_name_start(int c) { return isalpha(c) || c == '_' || c == ':'; }

/* Skips a metric or label name; NULL when there is none. */
static const char *skip_name(const char *p, int colon) {
  if (!is_name_start((unsigned char)*p) || (!colon && *p == ':')) return NULL;
  while (isalnum((unsigned char)*p) || *p == '_' || (colon && *p == ':')) p++;
  return p;
}

/* A quoted label value: only \\, \" and \n escapes, no raw quote or line
 * break; returns the character after the closing quote. */
static const char *skip_label_value(const char *p) {
  if (*p++ != '"') return NULL;
  for (; *p != '"'; p++) {
    if (!*p || *p == '\n') return NULL;
    if (*p == '\\' && (p[1] == '\\' || p[1] == '"' || p[1] == 'n')) p++;
    else if (*p == '\\') return NULL;
  }
  return p + 1;
}

/* One sample line against the exposition grammar: name{labels} value. */
static void check_sample(const char *line, const char *family, const char *type) {
  const char *p = skip_name(line, 1);
  if (!p) {
    fail_msg("no metric name: %s", line);
    return;
  }
  char expected[128];
  snprintf(expected, sizeof expected, "%s%s", family, !strcmp(type, "info") ? "_info" : "");
  if ((size_t)(p - line) != strlen(expected) || strncmp(line, expected, strlen(expected)) != 0)
    fail_msg("sample outside its family %s: %s", family, line);
  if (*p == '{') {
    p++;
    while (*p != '}') {
      const char *end = skip_name(p, 0);
      if (!end || *end != '=') {
        fail_msg("bad label name: %s", line);
        return;
      }
      p = skip_label_value(end + 1);
      if (!p) {
        fail_msg("bad label value: %s", line);
        return;
      }
      if (*p == ',') p++;
      else if (*p != '}') fail_msg("bad label list: %s", line);
    }
    p++;
  }
  if (*p++ != ' ') fail_msg("no value: %s", line);
  char *end = NULL;
  double v = strtod(p, &end);
  if (end == p || *end || !isfinite(v)) fail_msg("bad value: %s", line);
}

/* Checks text line by line; returns the samples of family `count_family`. */
static int check_exposition(const char *text, const char *count_family) {
  char family[128] = "", type[64] = "";
  int samples = 0, eof = 0;
  char *copy = strdup(text), *rest = copy;
  assert_true(strlen(text) > 0 && text[strlen(text) - 1] == '\n');
  for (char *line = strsep(&rest, "\n"); line; line = strsep(&rest, "\n")) {
    if (!rest) {
      assert_string_equal(line, ""); /* after the last line break: nothing */
      break;
    }
    if (eof) fail_msg("a line after # EOF: %s", line);
    if (!strcmp(line, "# EOF")) {
      eof = 1;
      continue;
    }
    char name[128], what[64];
    if (sscanf(line, "# TYPE %127s %63s", name, what) == 2) {
      assert_true(!strcmp(what, "gauge") || !strcmp(what, "info"));
      snprintf(family, sizeof family, "%s", name);
      snprintf(type, sizeof type, "%s", what);
      continue;
    }
    if (!strncmp(line, "# UNIT ", 7) || !strncmp(line, "# HELP ", 7)) {
      assert_int_equal(sscanf(line + 7, "%127s", name), 1);
      assert_string_equal(name, family);
      if (!strncmp(line, "# UNIT ", 7))
        assert_non_null(strstr(family, line + 7 + strlen(name) + 1)); /* the unit is a suffix */
      continue;
    }
    if (line[0] == '#') fail_msg("unknown comment: %s", line);
    check_sample(line, family, type);
    samples += !strcmp(family, count_family);
  }
  assert_true(eof);
  free(copy);
  return samples;
}

static void test_openmetrics(void **state) {
  (void)state;
  if (access(FX_SAMPLE_DB, R_OK) != 0) skip();
  fx_dir d;
  char db[600];
  assert_int_equal(fx_mkdir(&d, "tp_openmetrics"), 0);
  fx_path(&d, "sample.db", db, sizeof db);
  assert_int_equal(fx_copy(FX_SAMPLE_DB, db), 0);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 0, &s), TP_OK); /* migrates the copy */
  assert_int_equal(fx_exec(s, "UPDATE configs SET model = 'we\"ird\\mo' || char(10) || 'del' "
                              "WHERE id = (SELECT min(id) FROM configs WHERE run_id = 2)"),
                   0);
  int64_t expected = fx_int(s, "SELECT count(*) FROM configs c JOIN results r ON r.config_id = "
                               "c.id WHERE c.run_id = 2 AND c.status = 'ok' AND r.median_us "
                               "IS NOT NULL");
  assert_true(expected > 50);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  tp_report_filter filter = {.run_id = 2};
  assert_int_equal(tp_report_openmetrics(s, &filter, mem), TP_OK);
  fclose(mem);
  assert_int_equal(check_exposition(text, "tpbench_median_seconds"), expected);
  assert_int_equal(strncmp(text, "# TYPE tpbench_run info\n", 24), 0);
  assert_non_null(strstr(text, "\ntpbench_run_info{run=\"2\",commit=\"a06011ff"));
  assert_non_null(strstr(text, "# TYPE tpbench_median_seconds gauge\n# UNIT "
                               "tpbench_median_seconds seconds\n"));
  assert_non_null(strstr(text, "model=\"we\\\"ird\\\\mo\\ndel\""));
  assert_int_equal(strcmp(text + len - 6, "# EOF\n"), 0);
  /* the value: the median in seconds */
  double median = fx_real(s, "SELECT r.median_us FROM results r JOIN configs c ON c.id = "
                             "r.config_id WHERE c.run_id = 2 ORDER BY c.id LIMIT 1");
  char sample[64];
  snprintf(sample, sizeof sample, "} %.12g\n", median / 1e6);
  assert_non_null(strstr(text, sample));
  free(text);
  /* the latest run by default; a run that is not there is refused */
  mem = open_memstream(&text, &len);
  filter.run_id = 0;
  assert_int_equal(tp_report_openmetrics(s, &filter, mem), TP_OK);
  fclose(mem);
  assert_non_null(strstr(text, "tpbench_run_info{run=\"5\""));
  check_exposition(text, "tpbench_median_seconds");
  free(text);
  filter.run_id = 99;
  FILE *null = fopen("/dev/null", "w");
  assert_int_equal(tp_report_openmetrics(s, &filter, null), TP_EUSAGE);
  fclose(null);
  tp_store_close(s);
  fx_rmdir(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_utf8_sequences),
      cmocka_unit_test(test_xml_escaping),
      cmocka_unit_test(test_openmetrics_escaping),
      cmocka_unit_test(test_junit),
      cmocka_unit_test(test_bmf),
      cmocka_unit_test(test_bmf_names_unique),
      cmocka_unit_test(test_changed_only_and_top),
      cmocka_unit_test(test_openmetrics),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
