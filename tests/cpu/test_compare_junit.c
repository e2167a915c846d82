/*
 * test_compare_junit.c — `tpbench compare --format junit` read back by a
 * real JUnit parser (junitparser, Debian's python3-junitparser, through
 * tests/cpu/check_junit.py) and checked by xmllint where it is installed:
 * on examples/' sample database (with one configuration failed in head and
 * a hostile model name) and on compare_ci_fixture.h's synthetic comparison
 * (measured regressions). The expected counts come from compare's JSON of
 * the same comparison. Without python3 or junitparser the whole test
 * reports ctest's skip code (77), never a pass.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>

#include "report/tp_compare.h"
#include "tests/cpu/compare_ci_fixture.h"
#include "tests/cpu/run_program.h"

#define CHECK_JUNIT TP_TEST_DATA_DIR "/../cpu/check_junit.py"
#define XMLLINT "/usr/bin/xmllint"

/* Expected counts from compare's JSON: test cases, failures, skipped. */
static void expected_counts(const char *db, const char *base, const char *head, int *tests,
                            int *failures, int *skipped) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open_readonly(db, &s), TP_OK);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  tp_compare_summary sum = {0};
  assert_int_equal(tp_report_compare(s, base, head, NULL, TP_COMPARE_JSON, mem, &sum), TP_OK);
  fclose(mem);
  tp_store_close(s);
  json_t *root = json_loads(text, 0, NULL), *rows = json_object_get(root, "rows");
  assert_non_null(rows);
  *tests = (int)json_array_size(rows);
  *failures = sum.regressed;
  *skipped = 0;
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    const char *v = json_string_value(json_object_get(row, "verdict"));
    const char *note = json_string_value(json_object_get(row, "note"));
    *skipped += !strcmp(v, "information") || !strcmp(v, "new") || !strcmp(v, "missing") ||
                (!strcmp(v, "unchanged") && note && !strncmp(note, "did not run", 11));
  }
  json_decref(root);
  free(text);
}

/* Runs tpbench compare --format junit into xml_path (exit 1: a
 * regression), then xmllint and the JUnit parser on the file. */
static void check_file(const char *db, const char *base, const char *head, const char *xml_path,
                       const char *name, const char *classname) {
  int tests = 0, failures = 0, skipped = 0;
  expected_counts(db, base, head, &tests, &failures, &skipped);
  assert_true(failures > 0);
  FILE *touch = fopen(xml_path, "w");
  assert_non_null(touch);
  fclose(touch);
  char *compare[] = {TPBENCH_EXE, "compare",    "--db",       (char *)db, "--format",
                     "junit",     (char *)base, (char *)head, NULL};
  rp_result r = rp_run_to(compare, 120, xml_path);
  if (r.status != 1) fail_msg("compare exited %d (expected 1): %s", r.status, r.err);
  rp_free(&r);
  if (access(XMLLINT, X_OK) == 0) {
    char *lint[] = {XMLLINT, "--noout", (char *)xml_path, NULL};
    r = rp_run(lint, 60);
    if (r.status != 0) fail_msg("xmllint: %s", r.err);
    rp_free(&r);
  } else {
    printf("note: %s missing (Debian libxml2-utils): the file was not linted\n", XMLLINT);
  }
  char counts[3][16];
  snprintf(counts[0], sizeof counts[0], "%d", tests);
  snprintf(counts[1], sizeof counts[1], "%d", failures);
  snprintf(counts[2], sizeof counts[2], "%d", skipped);
  static const char script[] = CHECK_JUNIT; /* one literal made of two */
  char *check[] = {"/usr/bin/python3", (char *)script, (char *)xml_path,  counts[0], counts[1],
                   counts[2],          (char *)name,   (char *)classname, NULL};
  r = rp_run(check, 120);
  fputs(r.out ? r.out : "", stdout);
  if (r.status != 0)
    fail_msg("check_junit.py exited %d:\n%s%s", r.status, r.out ? r.out : "", r.err ? r.err : "");
  rp_free(&r);
}

static void test_sample_database(void **state) {
  (void)state;
  if (access(FX_SAMPLE_DB, R_OK) != 0) skip();
  fx_dir d;
  char db[600], xml[600];
  assert_int_equal(fx_mkdir(&d, "tp_junit_sample"), 0);
  fx_path(&d, "sample.db", db, sizeof db);
  fx_path(&d, "compare.xml", xml, sizeof xml);
  assert_int_equal(fx_copy(FX_SAMPLE_DB, db), 0);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 0, &s), TP_OK); /* migrates the copy */
  /* a configuration of head failed; one model name full of markup */
  assert_int_equal(fx_exec(s, "UPDATE configs SET status = 'failed', reason = 'numerics: "
                              "rel err 2e-1 <x>' WHERE id = (SELECT c.id FROM configs c WHERE "
                              "c.run_id = 2 AND c.backend = 'dist_gemm' AND c.status = 'ok' AND "
                              "c.config_key IN (SELECT config_key FROM configs WHERE run_id = 1 "
                              "AND status = 'ok') ORDER BY c.id LIMIT 1)"),
                   0);
  assert_int_equal(
      fx_exec(s, "UPDATE configs SET model = " CI_HOSTILE_MODEL_SQL " WHERE model = 'llama3-8b'"),
      0);
  tp_store_close(s);
  check_file(db, "e92c4c5", "a06011f", xml, "line2", "op/" CI_HOSTILE_MODEL_XML "/ag_linear");
  fx_rmdir(&d);
}

static void test_synthetic_regression(void **state) {
  (void)state;
  fx_dir d;
  char db[600], xml[600];
  assert_int_equal(fx_mkdir(&d, "tp_junit_synth"), 0);
  fx_path(&d, "ci.db", db, sizeof db);
  fx_path(&d, "compare.xml", xml, sizeof xml);
  assert_int_equal(ci_build_db(db), 0);
  check_file(db, CI_BASE, CI_HEAD, xml, "llama3-70b", "op/llama3-70b/linear_rs");
  fx_rmdir(&d);
}

int main(void) {
  char *probe[] = {"/usr/bin/python3", "-c", "import junitparser", NULL};
  rp_result r = rp_run(probe, 60);
  int missing = r.status != 0;
  rp_free(&r);
  if (missing) {
    printf("skipped: python3-junitparser is missing (bash scripts/setup.sh installs it)\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sample_database),
      cmocka_unit_test(test_synthetic_regression),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
