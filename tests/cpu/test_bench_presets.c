/*
 * test_bench_presets.c — bench/presets: every preset found by its canonical
 * name and its alias, the published Llama 3, Qwen2.5, Mixtral and DeepSeek-V3
 * figures (DeepSeek's attention refused, not approximated), the rules a
 * user-defined model must pass and where tp_model_find looks, every projection's
 * global N and K (written out, not recomputed by the formula under test),
 * FLOP counts, and usage errors for unknown names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
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

static void check_proj(const tp_model_preset *p, const char *name, tp_op op, int64_t n, int64_t k,
                       int weights);

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
  assert_int_equal(count, 8);
}

/* The presets beyond Llama 3, figures written out as read from each model's
 * published config (the source named in presets.c). */
static void test_other_families(void **state) {
  (void)state;
  static const struct {
    const char *name;
    int dim, heads, kv_heads, head_dim, ffn, layers, vocab;
  } other[] = {
      {"qwen2.5-72b", 8192, 64, 8, 128, 29568, 80, 152064},
      {"mixtral-8x7b", 4096, 32, 8, 128, 14336, 32, 32000},
      {"deepseek-v3-dense", 7168, 0, 0, 0, 18432, 61, 129280},
  };
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
    const tp_model_preset *p = NULL;
    assert_int_equal(tp_preset_find(other[i].name, &p), TP_OK);
    assert_string_equal(p->name, other[i].name);
    assert_int_equal(p->dim, other[i].dim);
    assert_int_equal(p->n_heads, other[i].heads);
    assert_int_equal(p->n_kv_heads, other[i].kv_heads);
    assert_int_equal(p->head_dim, other[i].head_dim);
    assert_int_equal(p->ffn_hidden, other[i].ffn);
    assert_int_equal(p->n_layers, other[i].layers);
    assert_int_equal(p->vocab, other[i].vocab);
  }
  const tp_model_preset *p = NULL;
  /* Qwen's qkv: (64 + 2*8) * 128 = 10240 out features; its FFN 29568 per weight. */
  assert_int_equal(tp_preset_find("QWEN2.5-72B", &p), TP_OK);
  assert_null(p->no_attention);
  check_proj(p, "qkv", TP_OP_AG_LINEAR, 10240, 8192, 1);
  check_proj(p, "w2", TP_OP_LINEAR_RS, 8192, 29568, 1);
  /* DeepSeek-V3's MLA cannot be expressed as GQA: said, not approximated. */
  assert_int_equal(tp_preset_find("deepseek-v3-dense", &p), TP_OK);
  assert_non_null(p->no_attention);
  assert_non_null(strstr(p->no_attention, "multi-head latent attention"));
  check_proj(p, "w13", TP_OP_AG_LINEAR_MULTI, 18432, 7168, 2);
  double flops = 0;
  assert_int_equal(tp_layer_flops(p, "ffn", 1, 4096, 0, &flops), TP_OK);
  tu_assert_near(flops, 6.0 * 4096 * 7168 * 18432, 0);
}

/* A model that is fine but for the fields named. */
static tp_model_preset good_model(const char *name) {
  tp_model_preset m = {
      .dim = 4096, .n_heads = 32, .n_kv_heads = 8, .head_dim = 128, .ffn_hidden = 14336};
  snprintf(m.name, sizeof m.name, "%s", name);
  return m;
}

static void expect_refused(tp_model_set *set, tp_model_preset m, const char *words) {
  int before = set->count;
  assert_int_equal(tp_model_set_add(set, &m), TP_EUSAGE);
  assert_int_equal(set->count, before);
  if (!strstr(tp_last_error(), words)) fail_msg("'%s' not in '%s'", words, tp_last_error());
}

static void test_model_set_rules(void **state) {
  (void)state;
  tp_model_set set;
  memset(&set, 0, sizeof set);
  tp_model_preset m = good_model("mymodel");
  assert_int_equal(tp_model_set_add(&set, &m), TP_OK);
  assert_int_equal(set.count, 1);
  /* dim need not be n_heads * head_dim (Qwen3-like: 64 heads of 128 over 5120). */
  m = good_model("wide-heads");
  m.dim = 5120;
  m.n_heads = 64;
  assert_int_equal(tp_model_set_add(&set, &m), TP_OK);
  expect_refused(&set, good_model("mymodel"), "defined twice");
  /* names match in any case, a user's as a preset's: "MyModel" is mymodel */
  expect_refused(&set, good_model("MyModel"), "model 'MyModel' is defined twice (as 'mymodel')");
  expect_refused(&set, good_model("8b"), "is a preset's (llama3-8b)");
  expect_refused(&set, good_model("LLAMA3-70B"), "is a preset's (llama3-70b)");
  expect_refused(&set, good_model("Qwen2.5-72B"), "is a preset's");
  expect_refused(&set, good_model("shape"), "reserved for `ops --shape`");
  expect_refused(&set, good_model("my model"), "only letters, digits");
  expect_refused(&set, good_model(""), "1 to 47 characters");
  m = good_model("a");
  m.dim = 0;
  expect_refused(&set, m, "dim 0 is out of range");
  m = good_model("a");
  m.ffn_hidden = -4;
  expect_refused(&set, m, "ffn_hidden -4 is out of range");
  m = good_model("a");
  m.n_kv_heads = (1 << 20) + 1;
  expect_refused(&set, m, "n_kv_heads 1048577 is out of range");
  m = good_model("a");
  m.head_dim = 127;
  expect_refused(&set, m, "head_dim 127 is odd");
  m = good_model("a");
  m.n_kv_heads = 5;
  expect_refused(&set, m, "n_heads 32 is not a multiple of n_kv_heads 5");
  m = good_model("a");
  m.vocab = -1;
  expect_refused(&set, m, "vocab -1 is out of range");
  /* Full. */
  for (int i = set.count; i < TP_MODEL_SET_MAX; i++) {
    char name[16];
    snprintf(name, sizeof name, "m%d", i);
    m = good_model(name);
    assert_int_equal(tp_model_set_add(&set, &m), TP_OK);
  }
  expect_refused(&set, good_model("one-more"), "at most 16 models");
}

static void test_model_find(void **state) {
  (void)state;
  tp_model_set set;
  memset(&set, 0, sizeof set);
  tp_model_preset m = good_model("mymodel");
  m.ffn_hidden = 1000;
  assert_int_equal(tp_model_set_add(&set, &m), TP_OK);
  const tp_model_preset *found = NULL;
  assert_int_equal(tp_model_find(&set, "mymodel", &found), TP_OK);
  assert_ptr_equal(found, &set.models[0]);
  assert_int_equal(found->ffn_hidden, 1000);
  /* any case, as presets are found ("8B", "LLAMA3-70B"); the name stays as defined */
  found = NULL;
  assert_int_equal(tp_model_find(&set, "MyModel", &found), TP_OK);
  assert_ptr_equal(found, &set.models[0]);
  assert_string_equal(found->name, "mymodel");
  assert_int_equal(tp_model_find(&set, "8b", &found), TP_OK);
  assert_string_equal(found->name, "llama3-8b");
  assert_int_equal(tp_model_find(&set, "8B", &found), TP_OK);
  assert_string_equal(found->name, "llama3-8b");
  assert_int_equal(tp_model_find(NULL, "mixtral-8x7b", &found), TP_OK);
  assert_int_equal(tp_model_find(NULL, "mymodel", &found), TP_EUSAGE);
  assert_int_equal(tp_model_find(&set, "other", &found), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "deepseek-v3-dense, mymodel"));
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
      cmocka_unit_test(test_other_families),
      cmocka_unit_test(test_model_set_rules),
      cmocka_unit_test(test_model_find),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
