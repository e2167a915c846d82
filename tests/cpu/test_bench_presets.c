/*
 * test_bench_presets.c — bench/presets: every preset found by its canonical
 * name and its alias, the published Llama 3 figures, every projection's
 * global N and K (written out, not recomputed by the formula under test),
 * FLOP counts, and usage errors for unknown names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <string.h>

#include "bench/matrix/presets.h"
#include "tests/cpu/bench_testutil.h"

typedef struct expected_model {
  const char *alias;
  const char *name;
  int dim, heads, kv_heads, head_dim, ffn, layers;
  int64_t qkv_n, wo_k; /* (heads + 2 kv) * head_dim, heads * head_dim */
} expected_model;

static const expected_model models[] = {
    {"debug", "debug", 256, 8, 4, 32, 768, 2, 512, 256},
    {"1b", "llama3-1b", 2048, 32, 8, 64, 8192, 16, 3072, 2048},
    {"8b", "llama3-8b", 4096, 32, 8, 128, 14336, 32, 6144, 4096},
    {"70b", "llama3-70b", 8192, 64, 8, 128, 28672, 80, 10240, 8192},
    {"405b", "llama3-405b", 16384, 128, 8, 128, 53248, 126, 18432, 16384},
};

static void test_find_by_name_and_alias(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    const tp_model_preset *by_alias = NULL, *by_name = NULL;
    assert_int_equal(tp_preset_find(models[i].alias, &by_alias), TP_OK);
    assert_int_equal(tp_preset_find(models[i].name, &by_name), TP_OK);
    assert_ptr_equal(by_alias, by_name);
    assert_string_equal(by_name->name, models[i].name);
  }
  const tp_model_preset *p = NULL;
  assert_int_equal(tp_preset_find("LLAMA3-70B", &p), TP_OK);
  assert_string_equal(p->name, "llama3-70b");
  int count = 0;
  tp_presets(&count);
  assert_int_equal(count, 5);
}

/* The preset named as e is, which must be found. */
static const tp_model_preset *preset_of(const expected_model *e) {
  const tp_model_preset *p = NULL;
  assert_int_equal(tp_preset_find(e->name, &p), TP_OK);
  assert_non_null(p);
  return p;
}

static void test_figures(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    const expected_model *e = &models[i];
    const tp_model_preset *p = preset_of(e);
    assert_int_equal(p->dim, e->dim);
    assert_int_equal(p->n_heads, e->heads);
    assert_int_equal(p->n_kv_heads, e->kv_heads);
    assert_int_equal(p->head_dim, e->head_dim);
    assert_int_equal(p->ffn_hidden, e->ffn);
    assert_int_equal(p->n_layers, e->layers);
    assert_int_equal(p->vocab, 128256);
  }
}

static void check_proj(const tp_model_preset *p, const char *name, tp_op op, int64_t n, int64_t k,
                       int weights) {
  tp_projection proj;
  assert_int_equal(tp_preset_projection(p, name, &proj), TP_OK);
  assert_string_equal(proj.name, name);
  assert_int_equal(proj.op, op);
  assert_int_equal(proj.n, n);
  assert_int_equal(proj.k, k);
  assert_int_equal(proj.n_weights, weights);
}

static void test_projections(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    const expected_model *e = &models[i];
    const tp_model_preset *p = preset_of(e);
    check_proj(p, "qkv", TP_OP_AG_LINEAR, e->qkv_n, e->dim, 1);
    check_proj(p, "wo", TP_OP_LINEAR_RS, e->dim, e->wo_k, 1);
    check_proj(p, "w13", TP_OP_AG_LINEAR_MULTI, e->ffn, e->dim, 2);
    check_proj(p, "w2", TP_OP_LINEAR_RS, e->dim, e->ffn, 1);
  }
  int n = 0;
  const char *const *names = tp_projection_names(&n);
  assert_int_equal(n, 4);
  assert_string_equal(names[0], "qkv");
  assert_string_equal(names[3], "w2");
  assert_string_equal(tp_op_name(TP_OP_AG_LINEAR_MULTI), "ag_linear_multi");
  assert_string_equal(tp_op_name(TP_OP_LINEAR_RS), "linear_rs");
}

static void test_flops(void **state) {
  (void)state;
  const tp_model_preset *p = NULL;
  assert_int_equal(tp_preset_find("8b", &p), TP_OK);
  tp_projection qkv, w13;
  assert_int_equal(tp_preset_projection(p, "qkv", &qkv), TP_OK);
  assert_int_equal(tp_preset_projection(p, "w13", &w13), TP_OK);
  /* 2 * 4096 * 6144 * 4096 */
  tu_assert_near(tp_projection_flops(&qkv, 4096), 206158430208.0, 0);
  /* 2 * 4096 * 14336 * 4096 * 2 weights */
  tu_assert_near(tp_projection_flops(&w13, 4096), 962072674304.0, 0);
  tu_assert_near(tp_projection_flops(&w13, 8192), 2 * 962072674304.0, 0);
}

static void test_unknown_names(void **state) {
  (void)state;
  const tp_model_preset *p = NULL;
  assert_int_equal(tp_preset_find("7b", &p), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "'7b'"));
  assert_non_null(strstr(tp_last_error(), "405b"));
  assert_int_equal(tp_preset_find("llama3-", &p), TP_EUSAGE);
  assert_int_equal(tp_preset_find("8", &p), TP_EUSAGE);
  assert_int_equal(tp_preset_find("debug", &p), TP_OK);
  tp_projection proj;
  assert_int_equal(tp_preset_projection(p, "w1", &proj), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "qkv, wo, w13, w2"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_find_by_name_and_alias),
      cmocka_unit_test(test_figures),
      cmocka_unit_test(test_projections),
      cmocka_unit_test(test_flops),
      cmocka_unit_test(test_unknown_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
