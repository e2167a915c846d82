/*
 * test_demo_db.c — examples/tpbench-demo.db, made on one GPU by
 * scripts/device-demo-db.sh: three `tpbench ops` runs at TP 1 in rounds,
 * runs 1 and 2 of the code as it is, run 3 with TPBENCH_TEST_DIST_DELAY_US
 * (at TP 1 every stock op slowed), recorded as a test knob. compare, with
 * --gate-references (stock over its bound, the GEMM alone at TP 1, round by
 * round), must be quiet on the identical pair (exit 0, nothing regressed)
 * and gate the planted slowdown (exit 1, the stock rows regressed on
 * stock/bound, nothing else). Skipped (77) until the file exists.
 * TPBENCH_EXE names the binary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>

#include "tests/cpu/fixture_db.h"
#include "tests/cpu/run_program.h"

#ifndef TPBENCH_EXE
#error "TPBENCH_EXE must name the tpbench binary"
#endif

#define DEMO_DB TP_TEST_DATA_DIR "/../../examples/tpbench-demo.db"

#define tpbench(...) rp_run_exe(TPBENCH_EXE, 120, NULL, __VA_ARGS__, NULL)

typedef struct {
  fx_dir dir;
  char db[600];
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || fx_mkdir(&f->dir, "tp_demo_db") != 0) return -1;
  fx_path(&f->dir, "demo.db", f->db, sizeof f->db);
  if (fx_copy(DEMO_DB, f->db) != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  fx_rmdir(&f->dir);
  free(f);
  return 0;
}

static json_t *compare_json(const fixture *f, const char *base, const char *head, int status) {
  rp_result r =
      tpbench("compare", base, head, "--gate-references", "--format", "json", "--db", f->db);
  rp_expect(&r, status, NULL, NULL);
  json_t *doc = json_loads(r.out, 0, NULL);
  rp_free(&r);
  assert_non_null(doc);
  return doc;
}

static json_int_t summary_count(json_t *doc, const char *key) {
  return json_integer_value(json_object_get(json_object_get(doc, "summary"), key));
}

/* The runs: three of `ops` at TP 1 with rounds, the third under the delay knob only. */
static void test_demo_runs(void **state) {
  fixture *f = *state;
  rp_result r = tpbench("runs", "--db", f->db, "--format", "json");
  rp_expect(&r, 0, NULL, NULL);
  json_t *doc = json_loads(r.out, 0, NULL);
  rp_free(&r);
  json_t *runs = json_object_get(doc, "runs");
  assert_int_equal(json_array_size(runs), 3);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open_readonly(f->db, &s), TP_OK);
  assert_int_equal(fx_int(s, "SELECT count(*) FROM runs WHERE rounds >= 3 AND command = 'ops'"), 3);
  assert_int_equal(fx_int(s, "SELECT count(*) FROM runs WHERE test_knobs IS NOT NULL"), 1);
  assert_int_equal(fx_int(s, "SELECT count(*) FROM runs WHERE id = 3 AND test_knobs LIKE "
                             "'%TPBENCH_TEST_DIST_DELAY_US=%'"),
                   1);
  assert_true(fx_int(s, "SELECT count(*) FROM configs WHERE status = 'ok' AND backend = 'stock' "
                        "AND tp = 1 AND run_id = 1") > 0);
  tp_store_close(s);
  json_decref(doc);
}

static void test_identical_pair_is_quiet(void **state) {
  fixture *f = *state;
  json_t *doc = compare_json(f, "run:1", "run:2", 0);
  assert_true(summary_count(doc, "tests") > 0); /* something was gated: quiet, not vacuous */
  assert_int_equal(summary_count(doc, "regressed"), 0);
  json_decref(doc);
}

static void test_planted_slowdown_is_gated(void **state) {
  fixture *f = *state;
  json_t *doc = compare_json(f, "run:1", "run:3", 1);
  assert_true(summary_count(doc, "regressed") > 0);
  size_t i;
  json_t *row;
  json_array_foreach(json_object_get(doc, "rows"), i, row) {
    const char *verdict = json_string_value(json_object_get(row, "verdict"));
    if (!verdict || strcmp(verdict, "regressed") != 0) continue;
    /* the stock op regressed against its own GEMM alone, nothing else */
    const char *key = json_string_value(json_object_get(row, "config_key"));
    if (!key || !strstr(key, "backend=stock;"))
      fail_msg("a row other than stock regressed: %s", key ? key : "?");
    json_t *m = json_object_get(json_object_get(row, "measures"), "vs_bound");
    assert_string_equal(json_string_value(json_object_get(m, "verdict")), "regressed");
  }
  json_decref(doc);
  /* the markdown says the run had the knob on */
  rp_result r = tpbench("compare", "run:1", "run:3", "--gate-references", "--db", f->db);
  rp_expect(&r, 1, "ran with test knobs on (TPBENCH_TEST_DIST_DELAY_US=", NULL);
  rp_free(&r);
}

int main(void) {
  if (access(DEMO_DB, R_OK) != 0) {
    printf("examples/tpbench-demo.db is not there yet (scripts/device-demo-db.sh makes it on a "
           "GPU): skipped\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_demo_runs),
      cmocka_unit_test(test_identical_pair_is_quiet),
      cmocka_unit_test(test_planted_slowdown_is_gated),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
