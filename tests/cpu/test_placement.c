/*
 * test_placement.c — bench/placement: the compositions tpbench runs hold
 * their placement contracts (attention, FFN and the transformer block;
 * stock and fused; with and without sequence parallelism), the fused ones
 * without sequence parallelism do not (and say which op and tensor), and
 * deliberately broken compositions are caught before anything runs: a
 * skipped all-gather, a residual add of a partial sum, a feature count that
 * does not match, a tensor used before it is produced, a block whose output
 * is placed unlike its input, residual inputs that disagree, and malformed
 * compositions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "bench/matrix/placement.h"

/* Llama 3 8B's shapes. */
static const tp_layer_dims DIMS = {4096, 6144 /* (32 + 2·8)·128 */, 4096 /* 32·128 */, 14336};

static const unsigned SEQ = TP_PLACE_BIT(TP_PLACE_SEQ_SHARDED);
static const unsigned REP = TP_PLACE_BIT(TP_PLACE_REPLICATED);
static const unsigned FEAT = TP_PLACE_BIT(TP_PLACE_FEATURE_SHARDED);
static const unsigned PART = TP_PLACE_BIT(TP_PLACE_PARTIAL);

static void expect_broken(const tp_composition *c, const char *const *words, int n_words) {
  tp_clear_error();
  assert_int_equal(tp_composition_check(c), TP_EREJECT);
  const char *msg = tp_last_error();
  printf("  rejected as expected: %s\n", msg);
  for (int i = 0; i < n_words; ++i)
    if (!strstr(msg, words[i])) fail_msg("'%s' missing from: %s", words[i], msg);
}

static void test_layers_compose(void **state) {
  (void)state;
  const char *layers[] = {"attention", "ffn", "block"};
  for (int l = 0; l < 3; ++l)
    for (int fused = 0; fused <= 1; ++fused)
      for (int sp = 0; sp <= 1; ++sp) {
        tp_composition c;
        assert_int_equal(tp_composition_layer(layers[l], fused, sp, &DIMS, &c), TP_OK);
        assert_string_equal(c.name, layers[l]);
        tp_rc rc = tp_composition_check(&c);
        printf("%-9s %-5s sp=%d: %d ops, %s\n", layers[l], fused ? "fused" : "stock", sp, c.n_ops,
               rc == TP_OK ? "composes" : tp_last_error());
        /* Only the fused ops without sequence parallelism break the contracts. */
        assert_int_equal(rc, fused && !sp ? TP_EREJECT : TP_OK);
      }
}

static int find_op(const tp_composition *c, const char *name) {
  for (int i = 0; i < c->n_ops; ++i)
    if (strcmp(c->ops[i].name, name) == 0) return i;
  fail_msg("no op %s in %s", name, c->name);
  return -1;
}

static void test_stock_ops_and_placements(void **state) {
  (void)state;
  tp_composition c;
  /* Stock with SP: all-gather then GEMM; GEMM to a partial sum, then reduce-scatter. */
  assert_int_equal(tp_composition_layer("attention", 0, 1, &DIMS, &c), TP_OK);
  const char *order[] = {"attention.rmsnorm",
                         "attention.qkv.all_gather",
                         "attention.qkv.gemm",
                         "attention.rope",
                         "attention.core",
                         "attention.wo.gemm",
                         "attention.wo.reduce_scatter"};
  assert_int_equal(c.n_ops, 7);
  for (int i = 0; i < 7; ++i) assert_string_equal(c.ops[i].name, order[i]);
  assert_int_equal(c.ops[find_op(&c, "attention.wo.gemm")].out.placement, TP_PLACE_PARTIAL);
  assert_int_equal(c.ops[find_op(&c, "attention.qkv.gemm")].out.features, DIMS.qkv_width);
  assert_int_equal(c.inputs[0].placement, TP_PLACE_SEQ_SHARDED);
  /* Without SP: no all-gather, an all-reduce to a replicated output. */
  assert_int_equal(tp_composition_layer("attention", 0, 0, &DIMS, &c), TP_OK);
  assert_int_equal(c.n_ops, 6);
  assert_int_equal(c.inputs[0].placement, TP_PLACE_REPLICATED);
  int ar = find_op(&c, "attention.wo.all_reduce");
  assert_int_equal(c.ops[ar].out.placement, TP_PLACE_REPLICATED);
  /* The block: two residual adds, FFN's w13 gives both of SwiGLU's inputs. */
  assert_int_equal(tp_composition_layer("block", 1, 1, &DIMS, &c), TP_OK);
  assert_int_equal(c.n_ops, 11); /* 5 + residual + 4 + residual */
  int r2 = find_op(&c, "block.residual2");
  assert_int_equal(c.ops[r2].n_in, 2);
  assert_int_equal(c.ops[find_op(&c, "ffn.w13 (fused all-gather + 2 GEMMs)")].out.features,
                   2 * DIMS.ffn_hidden);
  assert_string_equal(c.output.tensor, "out");
  assert_int_equal(tp_composition_layer("mlp", 0, 1, &DIMS, &c), TP_EUSAGE);
}

static void test_fused_without_sp_names_op_and_tensor(void **state) {
  (void)state;
  tp_composition c;
  assert_int_equal(tp_composition_layer("ffn", 1, 0, &DIMS, &c), TP_OK);
  const char *words[] = {"ffn.w13", "'ffn.h'", "sequence-sharded", "replicated", "ffn.rmsnorm"};
  expect_broken(&c, words, 5);
}

/* A hand-built attention block: x → norm → gather → qkv → core → wo → y. */
static tp_composition by_hand(void) {
  tp_composition c;
  memset(&c, 0, sizeof c);
  c.name = "hand";
  c.inputs[0] = (tp_place_out){"x", TP_PLACE_SEQ_SHARDED, 64};
  c.n_inputs = 1;
  c.ops[0] = (tp_place_op){"norm", {{"x", TP_PLACE_ROWS, 64}}, 1, {"h", TP_PLACE_AS_INPUT, 64}};
  c.ops[1] = (tp_place_op){"gather", {{"h", SEQ, 64}}, 1, {"hg", TP_PLACE_REPLICATED, 64}};
  c.ops[2] = (tp_place_op){"qkv", {{"hg", REP, 64}}, 1, {"qkv", TP_PLACE_FEATURE_SHARDED, 96}};
  c.ops[3] = (tp_place_op){"core", {{"qkv", FEAT, 96}}, 1, {"o", TP_PLACE_FEATURE_SHARDED, 64}};
  c.ops[4] = (tp_place_op){"wo", {{"o", FEAT, 64}}, 1, {"p", TP_PLACE_PARTIAL, 64}};
  c.ops[5] = (tp_place_op){"rs", {{"p", PART, 64}}, 1, {"y", TP_PLACE_SEQ_SHARDED, 64}};
  c.ops[6] = (tp_place_op){"add",
                           {{"x", TP_PLACE_ROWS, 64}, {"y", TP_PLACE_ROWS, 64}},
                           2,
                           {"out", TP_PLACE_AS_INPUT, 64}};
  c.n_ops = 7;
  c.output = (tp_place_in){"out", SEQ, 64};
  return c;
}

static void test_by_hand_composes(void **state) {
  (void)state;
  tp_composition c = by_hand();
  assert_int_equal(tp_composition_check(&c), TP_OK);
}

static void test_skipped_all_gather(void **state) {
  (void)state;
  tp_composition c = by_hand();
  c.ops[2].in[0].tensor = "h"; /* the GEMM reads the shard, not the gathered rows */
  const char *words[] = {"hand: qkv takes 'h' replicated", "norm gives it sequence-sharded"};
  expect_broken(&c, words, 2);
}

static void test_residual_of_partial_sum(void **state) {
  (void)state;
  tp_composition c = by_hand();
  c.ops[6].in[1].tensor = "p"; /* the reduce-scatter forgotten */
  const char *words[] = {"add takes 'p'", "sequence-sharded or replicated", "partial"};
  expect_broken(&c, words, 3);
}

static void test_feature_mismatch(void **state) {
  (void)state;
  tp_composition c = by_hand();
  c.ops[4].in[0].features = 96; /* wo declared for another width */
  const char *words[] = {"wo takes 'o'", "[96 features]", "[64]"};
  expect_broken(&c, words, 3);
}

static void test_used_before_produced(void **state) {
  (void)state;
  tp_composition c = by_hand();
  c.ops[0].in[0].tensor = "x1";
  const char *words[] = {"norm consumes 'x1', which nothing before it produces"};
  expect_broken(&c, words, 1);
}

static void test_output_unlike_input(void **state) {
  (void)state;
  tp_composition c = by_hand();
  c.ops[5].out.placement = TP_PLACE_REPLICATED; /* an all-reduce where a reduce-scatter belongs */
  /* the residual's inputs now disagree */
  const char *words[] = {"add adds 'y' (replicated) to 'x' (sequence-sharded)"};
  expect_broken(&c, words, 1);
  c.ops[6].in[1].tensor = "x"; /* residual fine, but the block still must stack */
  c.output.accepts = REP;
  const char *out_words[] = {"the block's output takes 'out' replicated",
                             "add gives it sequence-sharded"};
  expect_broken(&c, out_words, 2);
}

static void test_malformed(void **state) {
  (void)state;
  tp_composition c = by_hand();
  c.n_inputs = 0;
  assert_int_equal(tp_composition_check(&c), TP_EINTERNAL);
  c = by_hand();
  c.ops[3].n_in = 0;
  assert_int_equal(tp_composition_check(&c), TP_EINTERNAL);
  c = by_hand();
  c.inputs[0].placement = TP_PLACE_AS_INPUT;
  assert_int_equal(tp_composition_check(&c), TP_EINTERNAL);
  assert_string_equal(tp_placement_name(TP_PLACE_FEATURE_SHARDED), "feature-sharded");
  assert_string_equal(tp_placement_name(TP_PLACE_PARTIAL), "partial");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layers_compose),
      cmocka_unit_test(test_stock_ops_and_placements),
      cmocka_unit_test(test_fused_without_sp_names_op_and_tensor),
      cmocka_unit_test(test_by_hand_composes),
      cmocka_unit_test(test_skipped_all_gather),
      cmocka_unit_test(test_residual_of_partial_sum),
      cmocka_unit_test(test_feature_mismatch),
      cmocka_unit_test(test_used_before_produced),
      cmocka_unit_test(test_output_unlike_input),
      cmocka_unit_test(test_malformed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
