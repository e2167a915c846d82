/*
 * test_placement.c — bench/placement: the compositions tpbench runs hold
 * their placement contracts (attention, FFN and the transformer block;
 * stock and fused; with and without sequence parallelism), the fused ones
 * without sequence parallelism do not (and say which op and tensor), and
 * deliberately broken compositions are caught before anything runs: a
 * skipped all-gather, a residual add of a partial sum, a feature count that
 * does not match, a tensor used before it is produced, a block whose output
 * is placed unlike its input, residual inputs that disagree, and malformed
 * compositions. The dp × tp mesh: ranks tp-innermost, each tensor's
 * placement per mesh dimension and the shard a rank holds, and shards that
 * cannot be (not dividing, a missing dim, a partial parameter).
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

/* ---- the dp × tp mesh ------------------------------------------------------------------- */

/* Ranks are laid out tp-innermost: a TP group is consecutive ranks. */
static void test_mesh_rank_layout(void **state) {
  (void)state;
  const tp_mesh m = {3, 4};
  assert_int_equal(tp_mesh_rank(&m, 0, 0), 0);
  assert_int_equal(tp_mesh_rank(&m, 0, 3), 3);
  assert_int_equal(tp_mesh_rank(&m, 1, 0), 4);
  assert_int_equal(tp_mesh_rank(&m, 2, 1), 9);
  for (int r = 0; r < 12; ++r) {
    int d = -1, t = -1;
    tp_mesh_coords(&m, r, &d, &t);
    assert_int_equal(tp_mesh_rank(&m, d, t), r);
    assert_int_equal(d, r / 4);
  }
}

static const tp_mesh_tensor *find_tensor(const tp_mesh_tensor *t, int n, const char *name) {
  for (int i = 0; i < n; ++i)
    if (strcmp(t[i].name, name) == 0) return &t[i];
  fail_msg("no tensor %s", name);
  return NULL;
}

static void expect_local(const tp_mesh *m, const tp_mesh_tensor *t, int64_t d0, int64_t d1,
                         int64_t d2) {
  int64_t local[TP_MESH_MAX_RANK];
  if (tp_mesh_local_shape(m, t, local) != TP_OK) fail_msg("%s: %s", t->name, tp_last_error());
  printf("  %-28s on dp %d x tp %d: [%lld, %lld, %lld]\n", t->name, m->dp, m->tp,
         (long long)local[0], (long long)local[1], (long long)local[2]);
  assert_int_equal(local[0], d0);
  assert_int_equal(local[1], d1);
  assert_int_equal(local[2], d2);
}

/* 8B's block on dp 2 x tp 2: every tensor's placement per mesh dimension and the
 * shard one rank holds (tp splits first, dp the TP shard). */
static void test_mesh_block_placements(void **state) {
  (void)state;
  tp_mesh_tensor t[TP_MESH_MAX_TENSORS];
  int n = 0;
  assert_int_equal(tp_mesh_layer_tensors("block", 1, &DIMS, 2, 4096, t, &n), TP_OK);
  assert_int_equal(n, 1 + 2 * 7); /* x, seven parameters and their gradients */
  const tp_mesh m = {2, 2};
  assert_int_equal(tp_mesh_check(&m, t, n), TP_OK);
  expect_local(&m, find_tensor(t, n, "x"), 1, 2048, 4096);
  expect_local(&m, find_tensor(t, n, "attention.qkv.weight"), 6144 / 2 / 2, 4096, 1);
  expect_local(&m, find_tensor(t, n, "attention.wo.weight"), 4096 / 2, 4096 / 2, 1);
  expect_local(&m, find_tensor(t, n, "ffn.w2.weight"), 4096 / 2, 14336 / 2, 1);
  expect_local(&m, find_tensor(t, n, "ffn.norm.weight"), 4096 / 2, 1, 1);
  /* A gradient is partial over dp (whole until its reduce-scatter), sharded over tp as its
   * parameter; a norm weight's gradient is partial over tp with sequence parallelism. */
  const tp_mesh_tensor *g = find_tensor(t, n, "ffn.w1.weight.grad");
  assert_int_equal(g->on[TP_MESH_DP].kind, TP_MESH_PARTIAL);
  assert_int_equal(g->on[TP_MESH_TP].kind, TP_MESH_SHARD);
  expect_local(&m, g, 14336 / 2, 4096, 1);
  assert_int_equal(find_tensor(t, n, "ffn.norm.weight.grad")->on[TP_MESH_TP].kind, TP_MESH_PARTIAL);
  char name[32];
  assert_string_equal(tp_mesh_place_name(find_tensor(t, n, "x")->on[TP_MESH_TP], name, sizeof name),
                      "shard(1)");
  /* Without sequence parallelism x is replicated over tp, whole sequences per dp rank. */
  assert_int_equal(tp_mesh_layer_tensors("ffn", 0, &DIMS, 2, 4096, t, &n), TP_OK);
  expect_local(&m, find_tensor(t, n, "x"), 1, 4096, 4096);
  assert_int_equal(find_tensor(t, n, "ffn.norm.weight.grad")->on[TP_MESH_TP].kind,
                   TP_MESH_REPLICATE);
  assert_int_equal(tp_mesh_layer_tensors("mlp", 1, &DIMS, 2, 4096, t, &n), TP_EUSAGE);
}

static void expect_mesh_reject(const tp_mesh *m, const tp_mesh_tensor *t, int n,
                               const char *words) {
  tp_clear_error();
  assert_int_equal(tp_mesh_check(m, t, n), TP_EREJECT);
  printf("  rejected as expected: %s\n", tp_last_error());
  if (!strstr(tp_last_error(), words)) fail_msg("'%s' missing from: %s", words, tp_last_error());
}

/* Shards that do not divide, a shard of a dim the tensor lacks and a partial
 * parameter are refused, naming the tensor, the mesh dimension and the dim. */
static void test_mesh_rejections(void **state) {
  (void)state;
  tp_mesh_tensor t[TP_MESH_MAX_TENSORS];
  int n = 0;
  /* batch 1 cannot give two dp ranks whole sequences */
  assert_int_equal(tp_mesh_layer_tensors("ffn", 1, &DIMS, 1, 4096, t, &n), TP_OK);
  expect_mesh_reject(&(tp_mesh){2, 2}, t, n, "x: dp=2 shards dim 0 of 1");
  /* 4096 / 3 does not divide: the first parameter that fails is named */
  assert_int_equal(tp_mesh_layer_tensors("attention", 1, &DIMS, 3, 4096, t, &n), TP_OK);
  expect_mesh_reject(&(tp_mesh){3, 1}, t, n, "attention.norm.weight: dp=3 shards dim 0 of 4096");
  /* dp splits the TP shard: qkv's 6144 rows over tp 4 leave 1536, not divisible by dp 5 */
  const tp_mesh_tensor qkv = {
      "qkv", 2, {6144, 4096, 1}, {{TP_MESH_SHARD, 0}, {TP_MESH_SHARD, 0}}, 1};
  expect_mesh_reject(&(tp_mesh){5, 4}, &qkv, 1, "qkv: dp=5 shards dim 0 of 1536 (its TP shard)");
  const tp_mesh_tensor bad_dim = {
      "v", 1, {4096, 1, 1}, {{TP_MESH_SHARD, 1}, {TP_MESH_REPLICATE, 0}}, 0};
  expect_mesh_reject(&(tp_mesh){2, 1}, &bad_dim, 1, "v: dp shards dim 1 of a 1-dim tensor");
  const tp_mesh_tensor partial = {"w", 2, {8, 8, 1}, {{TP_MESH_PARTIAL, 0}, {TP_MESH_SHARD, 0}}, 1};
  expect_mesh_reject(&(tp_mesh){2, 2}, &partial, 1, "w: a parameter cannot be partial over dp");
  /* The same tensor as a gradient may be partial. */
  tp_mesh_tensor grad = partial;
  grad.is_param = 0;
  assert_int_equal(tp_mesh_check(&(tp_mesh){2, 2}, &grad, 1), TP_OK);
  const tp_mesh_tensor unnamed = {NULL, 1, {8, 1, 1}, {{TP_MESH_REPLICATE, 0}}, 0};
  assert_int_equal(tp_mesh_check(&(tp_mesh){1, 1}, &unnamed, 1), TP_EINTERNAL);
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
      cmocka_unit_test(test_mesh_rank_layout),
      cmocka_unit_test(test_mesh_block_placements),
      cmocka_unit_test(test_mesh_rejections),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
