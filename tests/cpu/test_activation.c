/*
 * test_activation.c — bench/matrix/activation (what a layer's forward
 * leaves for its backward under each activation-checkpointing mode): the
 * tensor lists and their bytes for Llama 3 8B's attention, FFN and block at
 * TP 1 and TP 2, worked out by hand below (MiB = 2^20 bytes), with and
 * without the gathered input saved, and the mode names.
 *
 * 8B: D 4096, 32 heads, 8 KV heads, d 128, F 14336, bf16. At TP 1 with
 * S 4096, B 1: x, h, o, x1, attention.y 32 MiB each, inv_rms 16 KiB, qkv
 * 4096 x 6144 = 48 MiB, P 32 x 4096² x 2 = 1 GiB, a, b, m 112 MiB each.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "bench/matrix/activation.h"

#define MIB (1024LL * 1024LL)
#define KIB 1024LL

/* This rank's 8B layer at TP w, S 4096, B 1, sequence parallelism on. */
static tp_activation_shape llama8b(tp_layer layer, int w, int save_gathered) {
  tp_activation_shape s;
  memset(&s, 0, sizeof s);
  s.layer = layer;
  s.elem_bytes = 2;
  s.batch = 1;
  s.seq = 4096;
  s.local_rows = 4096 / w;
  s.dim = 4096;
  s.hq = 32 / w;
  s.hkv = 8 / w;
  s.head_dim = 128;
  s.ffn_local = 14336 / w;
  s.save_gathered = save_gathered;
  return s;
}

static tp_activation_set saved(tp_layer layer, int w, int save, tp_ac ac) {
  tp_activation_shape s = llama8b(layer, w, save);
  tp_activation_set set;
  tp_activation_saved(&s, ac, &set);
  printf("  %s tp %d save_gathered %d ac %s: %lld bytes in", tp_layer_name(layer), w, save,
         tp_ac_name(ac), (long long)set.bytes);
  for (int i = 0; i < set.n; ++i) printf(" %s", set.tensors[i].name);
  printf("\n");
  return set;
}

/* The set holds exactly these names, in this order, and its bytes are their sum. */
static void expect_names(const tp_activation_set *set, const char *const *names) {
  int n = 0;
  int64_t sum = 0;
  for (; names[n]; ++n) {
    if (n >= set->n) fail_msg("'%s' missing (the set has %d tensors)", names[n], set->n);
    assert_string_equal(set->tensors[n].name, names[n]);
    assert_true(tp_activation_has(set, names[n]));
  }
  assert_int_equal(set->n, n);
  for (int i = 0; i < set->n; ++i) sum += set->tensors[i].bytes;
  assert_int_equal(set->bytes, sum);
}

static void test_attention(void **state) {
  (void)state;
  tp_activation_set none = saved(TP_LAYER_ATTENTION, 1, 0, TP_AC_NONE);
  const char *const none_names[] = {
      "x", "attention.inv_rms", "attention.h", "attention.qkv", "attention.probs", "attention.o",
      NULL};
  expect_names(&none, none_names);
  assert_int_equal(none.bytes, (32 + 32 + 48 + 1024 + 32) * MIB + 16 * KIB);
  tp_activation_set sel = saved(TP_LAYER_ATTENTION, 1, 0, TP_AC_SELECTIVE);
  const char *const sel_names[] = {"x", "attention.qkv", "attention.probs", "attention.o", NULL};
  expect_names(&sel, sel_names);
  assert_int_equal(sel.bytes, (32 + 48 + 1024 + 32) * MIB);
  assert_false(tp_activation_has(&sel, "attention.h"));
  assert_false(tp_activation_has(&sel, "attention.inv_rms"));
  tp_activation_set full = saved(TP_LAYER_ATTENTION, 1, 0, TP_AC_FULL);
  const char *const full_names[] = {"x", NULL};
  expect_names(&full, full_names);
  assert_int_equal(full.bytes, 32 * MIB);
}

static void test_ffn(void **state) {
  (void)state;
  tp_activation_set none = saved(TP_LAYER_FFN, 1, 0, TP_AC_NONE);
  const char *const none_names[] = {"x", "ffn.inv_rms", "ffn.h", "ffn.a", "ffn.b", "ffn.m", NULL};
  expect_names(&none, none_names);
  assert_int_equal(none.bytes, (32 + 32 + 3 * 112) * MIB + 16 * KIB);
  tp_activation_set sel = saved(TP_LAYER_FFN, 1, 0, TP_AC_SELECTIVE);
  const char *const sel_names[] = {"x", "ffn.a", "ffn.b", NULL};
  expect_names(&sel, sel_names);
  assert_int_equal(sel.bytes, (32 + 2 * 112) * MIB);
  assert_int_equal(saved(TP_LAYER_FFN, 1, 0, TP_AC_FULL).bytes, 32 * MIB);
}

/* The block keeps x1 (none) or wo's output (selective, x1 recomputed from it). */
static void test_block(void **state) {
  (void)state;
  tp_activation_set none = saved(TP_LAYER_BLOCK, 1, 0, TP_AC_NONE);
  const char *const none_names[] = {
      "x",  "attention.inv_rms", "attention.h", "attention.qkv", "attention.probs", "attention.o",
      "x1", "ffn.inv_rms",       "ffn.h",       "ffn.a",         "ffn.b",           "ffn.m",
      NULL};
  expect_names(&none, none_names);
  assert_int_equal(none.bytes, (32 + 32 + 48 + 1024 + 32 + 32 + 32 + 336) * MIB + 32 * KIB);
  tp_activation_set sel = saved(TP_LAYER_BLOCK, 1, 0, TP_AC_SELECTIVE);
  const char *const sel_names[] = {"x",           "attention.qkv", "attention.probs", "attention.o",
                                   "attention.y", "ffn.a",         "ffn.b",           NULL};
  expect_names(&sel, sel_names);
  assert_int_equal(sel.bytes, (32 + 48 + 1024 + 32 + 32 + 224) * MIB);
  tp_activation_set full = saved(TP_LAYER_BLOCK, 1, 0, TP_AC_FULL);
  assert_int_equal(full.n, 1);
  assert_int_equal(full.bytes, 32 * MIB);
  /* Each mode keeps less than the one before. */
  assert_true(full.bytes < sel.bytes && sel.bytes < none.bytes);
}

/* TP 2 with the gathered inputs saved: [T, D] instead of h under none and
 * beside the projections' outputs under selective; x and h are the rank's
 * 2048 rows, the rest the local heads and FFN columns over all 4096 tokens. */
static void test_save_gathered_tp2(void **state) {
  (void)state;
  tp_activation_set none = saved(TP_LAYER_FFN, 2, 1, TP_AC_NONE);
  const char *const none_names[] = {"x",     "ffn.inv_rms", "ffn.saved", "ffn.a",
                                    "ffn.b", "ffn.m",       NULL};
  expect_names(&none, none_names);
  assert_int_equal(none.bytes, (16 + 32 + 3 * 56) * MIB + 8 * KIB);
  tp_activation_set sel = saved(TP_LAYER_FFN, 2, 1, TP_AC_SELECTIVE);
  const char *const sel_names[] = {"x", "ffn.saved", "ffn.a", "ffn.b", NULL};
  expect_names(&sel, sel_names);
  assert_int_equal(sel.bytes, (16 + 32 + 2 * 56) * MIB);
  /* attention at TP 2: qkv 4096 x 3072, P 16 x 4096² x 2 = 512 MiB, o 4096 x 2048 */
  tp_activation_set attn = saved(TP_LAYER_ATTENTION, 2, 1, TP_AC_SELECTIVE);
  const char *const attn_names[] = {
      "x", "attention.saved", "attention.qkv", "attention.probs", "attention.o", NULL};
  expect_names(&attn, attn_names);
  assert_int_equal(attn.bytes, (16 + 32 + 24 + 512 + 16) * MIB);
  tp_activation_set plain = saved(TP_LAYER_ATTENTION, 2, 0, TP_AC_NONE);
  assert_true(tp_activation_has(&plain, "attention.h"));
  assert_false(tp_activation_has(&plain, "attention.saved"));
  assert_int_equal(plain.bytes, (16 + 16 + 24 + 512 + 16) * MIB + 8 * KIB);
}

static void test_names(void **state) {
  (void)state;
  assert_string_equal(tp_ac_name(TP_AC_NONE), "none");
  assert_string_equal(tp_ac_name(TP_AC_SELECTIVE), "selective");
  assert_string_equal(tp_ac_name(TP_AC_FULL), "full");
  assert_string_equal(tp_ac_name((tp_ac)7), "?");
  /* an unknown mode keeps what none keeps: never less than it needs */
  tp_activation_shape s = llama8b(TP_LAYER_FFN, 1, 0);
  tp_activation_set odd, none;
  tp_activation_saved(&s, (tp_ac)7, &odd);
  tp_activation_saved(&s, TP_AC_NONE, &none);
  assert_int_equal(odd.bytes, none.bytes);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attention), cmocka_unit_test(test_ffn),
      cmocka_unit_test(test_block),     cmocka_unit_test(test_save_gathered_tp2),
      cmocka_unit_test(test_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
