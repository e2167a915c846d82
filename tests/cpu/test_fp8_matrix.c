/*
 * test_fp8_matrix.c — the fp8 dtypes of `tpbench ops` before any GPU work
 * (issue 15): the vocabulary (names, the fp8 predicate, bf16 storage, every
 * name parsed back), the ops matrix parsing them and refusing a misspelt
 * one, the axes they are stored with, and the plan-time rules of
 * kernels/tp_recipe_rules.h: the backward planned (every format x op x pass
 * bwd and fwd+bwd at TP 1 passes the rules, the matrix runs stock and the
 * GEMM alone for it; at TP 2 it places too, but where a backward operand's
 * blocks would straddle ranks); what the rules give the plan (every
 * operand's amax agreement, the fp8-only window, transport and TP 1 rules);
 * for every fp8 format x op side (all-gather: activation rows and weight N;
 * reduce-scatter: activation and weight K) x TP in {2, 4, 8}, a shape whose
 * split would put a scale block across two ranks is rejected by the
 * placement rule naming the layout, and an aligned shape runs its forward
 * (the all-gather side with comm_dtype fp8 or bf16, refused without one;
 * the reduce-scatter side refusing one); TP 1 runs stock and the GEMM alone.
 * The comm_dtype axis: only an fp8 all-gather side at TP > 1 multiplies by
 * it, every other case records none; its collective bytes (fp8: the bytes
 * plus every rank's shard scales; bf16: two per element); dist_gemm
 * rejected with comm_dtype bf16 and with chunks > 1, run with fp8.
 *
 * The layers of `tpbench run` (issue 15's fp8 layers): every fp8 format x
 * layer x pass x sp at TP 1 runs the stock layer and its GEMMs alone, with
 * dist_gemm and the collectives alone rejected as for bf16; at TP 2 and 4
 * the forward with sp on runs stock, the GEMMs alone and the collectives
 * alone with comm_dtype bf16 and fp8 (stored, keyed), dist_gemm with fp8
 * over the IPC heap for auto, ce, sm and chunks 0, 1; everything else is
 * rejected with its own reason (sp off, the backward, ring and multimem,
 * chunks 2, comm_dtype bf16 for dist_gemm, symm=nccl, the nccl-window
 * stock), and dp > 1 or fsdp_traffic stay rejected; a layer whose projection would split a scale
 * block (qkv's key heads, wo's and w2's K, w13's N) is rejected naming the
 * projection and the rule, qkv's weight judged per part (query, key, value
 * heads), where ops' contiguous qkv shape passes; bf16 and fp32 layers meet
 * none of it; the listing says mxfp8 is decided on the GPU; the generated
 * composition table carries the fp8 dtypes for run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/matrix/composition.h"
#include "bench/matrix/layer_matrix.h"
#include "bench/matrix/ops_matrix.h"
#include "common/tp_vocab.h"
#include "kernels/tp_quant.h"
#include "kernels/tp_recipe_rules.h"

static const tp_dtype FP8_DTYPES[] = {TP_FP8, TP_FP8_ROW, TP_FP8_BLOCK, TP_MXFP8};
enum { N_FP8 = 4 };

static void test_vocab(void **state) {
  (void)state;
  const char *const names[] = {"bf16", "fp32", "fp8", "fp8-row", "fp8-block", "mxfp8"};
  for (int i = 0; i < 6; ++i) {
    assert_string_equal(tp_dtype_name((tp_dtype)i), names[i]);
    int parsed = -1;
    assert_int_equal(tp_vocab_parse(&tp_dtype_vocab, names[i], &parsed), TP_OK);
    assert_int_equal(parsed, i);
    const int fp8 = i >= 2;
    assert_int_equal(tp_dtype_is_fp8((tp_dtype)i), fp8);
    /* fp8 recipes store their activations in bf16, never as fp32 */
    assert_int_equal(tp_dtype_storage((tp_dtype)i), fp8 ? TP_BF16 : (tp_dtype)i);
    assert_int_equal(tp_dtype_bytes((tp_dtype)i), i == 1 ? 4 : 2);
  }
  assert_string_equal(tp_dtype_name((tp_dtype)17), "?");
  int parsed = -1;
  assert_int_equal(tp_vocab_parse(&tp_dtype_vocab, "fp8_row", &parsed), TP_EUSAGE);
  assert_non_null(strstr(tp_last_message(), "fp8-block"));
}

/* The value lists the options and the matrices print expand from each vocabulary's one list
 * (common/tp_vocab.h): the text they printed as literals, the asked schedules only. */
static void test_vocab_lists(void **state) {
  (void)state;
  assert_string_equal(TP_VOCAB_PIPED(TP_SCHEDULE_LIST), "auto|ce|sm|ring|multimem");
  assert_string_equal(TP_VOCAB_COMMAS(TP_SCHEDULE_LIST), "auto,ce,sm,ring,multimem");
  assert_string_equal(TP_VOCAB_PIPED(TP_DTYPE_LIST), "bf16|fp32|fp8|fp8-row|fp8-block|mxfp8");
  assert_string_equal(TP_VOCAB_COMMAS(TP_DTYPE_LIST), "bf16,fp32,fp8,fp8-row,fp8-block,mxfp8");
  assert_string_equal(TP_VOCAB_COMMA_SPACES(TP_DTYPE_LIST),
                      "bf16, fp32, fp8, fp8-row, fp8-block, mxfp8");
  const char *const asked[] = {TP_SCHEDULE_LIST(TP_VOCAB_ASKED_NAME)};
  assert_int_equal(sizeof asked / sizeof asked[0], TP_VOCAB_N_ASKED(TP_SCHEDULE_LIST));
  assert_int_equal(tp_schedule_vocab.n, 5);
  assert_int_equal(tp_dtype_vocab.n, TP_N_DTYPES);
  /* recorded, never asked: named, but not parsed */
  assert_string_equal(tp_schedule_name(TP_SCHED_NCCL), "nccl");
  assert_string_equal(tp_schedule_name(TP_SCHED_NCCL_WINDOW), "nccl-window");
  assert_string_equal(tp_schedule_name((tp_schedule)TP_N_SCHEDULES), "?");
  int parsed = -1;
  assert_int_equal(tp_vocab_parse(&tp_schedule_vocab, "multimem", &parsed), TP_OK);
  assert_int_equal(parsed, TP_SCHED_MULTIMEM);
  assert_int_equal(tp_vocab_parse(&tp_schedule_vocab, "nccl", &parsed), TP_EUSAGE);
  assert_int_equal(tp_dtype_is_fp8((tp_dtype)TP_N_DTYPES), 0);
  assert_int_equal(tp_dtype_is_fp8((tp_dtype)-1), 0);
}

/* The expanded matrix of one shape at the given dtypes, TP degrees and passes. */
static tp_rc expand(const char *shape, const char *dtypes, const char *tp, const char *passes,
                    tp_ops_matrix *m) {
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  assert_int_equal(tp_ops_spec_set_axis(&s, "shape", shape), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "dtype", dtypes), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "tp", tp), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "pass", passes), TP_OK);
  return tp_ops_expand(&s, m);
}

static void test_matrix_parses_fp8(void **state) {
  (void)state;
  tp_ops_matrix m;
  assert_int_equal(expand("4096x8192x8192", "fp8,fp8-row,fp8-block,mxfp8,bf16", "1", "fwd", &m),
                   TP_OK);
  assert_int_equal(m.n_cases, 5);
  for (int c = 0; c < m.n_cases; ++c) {
    const tp_ops_case *k = &m.cases[c];
    assert_int_equal(k->dtype, c < 4 ? FP8_DTYPES[c] : TP_BF16);
    for (int i = k->first_config; i < k->first_config + k->n_configs; ++i) {
      const tp_ops_config *cfg = &m.configs[i];
      assert_string_equal(cfg->axes.dtype, tp_dtype_name(k->dtype));
      /* TP 1: stock and the GEMM alone run, dist_gemm and the collective alone do not; the
       * fp8 formats have no stock on NCCL windows (bf16 has) */
      const int window = cfg->schedule == TP_SCHED_NCCL_WINDOW;
      const int runs = (cfg->backend == TP_BACKEND_STOCK && !(window && c < 4)) ||
                       cfg->backend == TP_BACKEND_GEMM_ONLY;
      assert_int_equal(cfg->rejected, !runs);
      if (cfg->backend == TP_BACKEND_STOCK && window && c < 4)
        assert_non_null(strstr(cfg->reason, "nccl-window"));
    }
  }
  tp_ops_matrix_free(&m);
  assert_int_equal(expand("4096x8192x8192", "fp8,fp9", "1", "fwd", &m), TP_EUSAGE);
  assert_non_null(strstr(tp_last_message(), "unknown dtype 'fp9'"));
  assert_non_null(strstr(tp_last_message(), "mxfp8"));
}

/* The gathered bytes of an fp8 dtype are 1 per element plus the scales. */
static void test_comm_bytes(void **state) {
  (void)state;
  tp_ops_matrix m;
  assert_int_equal(expand("4096x8192x8192", "bf16,fp8,fp8-row", "1", "fwd", &m), TP_OK);
  const int64_t elems = 4096LL * 8192;
  assert_int_equal(m.configs[m.cases[0].first_config].comm_bytes, 2 * elems);
  assert_int_equal(m.configs[m.cases[1].first_config].comm_bytes, elems + 4);
  assert_int_equal(m.configs[m.cases[2].first_config].comm_bytes, elems + 4LL * 4096);
  tp_ops_matrix_free(&m);
}

static void test_backward_planned(void **state) {
  (void)state;
  const tp_op ops[] = {TP_OP_AG_LINEAR, TP_OP_AG_LINEAR_MULTI, TP_OP_LINEAR_RS};
  const tp_pass passes[] = {TP_PASS_BWD, TP_PASS_FWD_BWD};
  for (int f = 0; f < N_FP8; ++f)
    for (int o = 0; o < 3; ++o)
      for (int p = 0; p < 2; ++p) {
        tp_recipe_case c = {FP8_DTYPES[f], ops[o], 4096, 6144, 4096, 1, passes[p], TP_COMM_NONE};
        char reason[400] = "";
        if (tp_recipe_rejection(&c, NULL, reason, sizeof reason) != 0)
          fail_msg("%s %s TP 1 rejected: %s", tp_dtype_name(c.dtype), tp_op_name(c.op), reason);
        /* TP 2, 2048 tokens a rank: every backward operand places */
        c.tp = 2;
        c.comm = tp_op_gathers(c.op) ? TP_COMM_FP8 : TP_COMM_NONE;
        if (tp_recipe_rejection(&c, NULL, reason, sizeof reason) != 0)
          fail_msg("%s %s TP 2 rejected: %s", tp_dtype_name(c.dtype), tp_op_name(c.op), reason);
        /* 1056 tokens a rank: the wgrad's transposed operand (Xᵀ, or dYᵀ) has 1x128
         * blocks along T that straddle two ranks for fp8-block; the forward alone runs */
        c.tokens = 2112;
        const int refused = tp_recipe_rejection(&c, NULL, reason, sizeof reason);
        assert_int_equal(refused, FP8_DTYPES[f] == TP_FP8_BLOCK);
        if (refused) {
          assert_non_null(strstr(reason, tp_op_gathers(c.op)
                                             ? "backward's X transposed, along T"
                                             : "backward's dY transposed, along T"));
          assert_non_null(strstr(reason, tp_op_gathers(c.op) ? "T of Xᵀ / TP 2 = 1056 per rank"
                                                             : "T of dYᵀ / TP 2 = 1056 per rank"));
          assert_non_null(strstr(reason, "not a multiple of the 128-element scale block"));
          c.pass = TP_PASS_FWD;
          assert_int_equal(tp_recipe_rejection(&c, NULL, reason, sizeof reason), 0);
        }
      }
  /* dY along N on the all-gather side: N / TP a multiple of 128 for fp8-block's 1x128 blocks
   * (the forward's weight rule asks the same of W's 128-row blocks: it speaks first) */
  const tp_quant_format fmts[] = {TP_QFMT_FP8, TP_QFMT_FP8_ROW, TP_QFMT_FP8_BLOCK};
  const tp_amax_agreement want_dy[] = {TP_AMAX_AGREE_TENSOR, TP_AMAX_AGREE_ROWS, TP_AMAX_LOCAL};
  for (int i = 0; i < 3; ++i) {
    tp_quant_split sp[TP_QUANT_MAX_SPLITS];
    assert_int_equal(tp_quant_op_splits(1, 4096, 6144, 4096, 1, sp), 4);
    tp_amax_agreement a = TP_AMAX_LOCAL;
    assert_int_equal(
        tp_quant_shard_check(fmts[i], sp[2].layout, sp[2].rows, sp[2].cols, 2, &a, NULL, 0), TP_OK);
    assert_int_equal(a, want_dy[i]);
  }
  const tp_recipe_case bf16 = {TP_BF16, TP_OP_AG_LINEAR, 4096,        8192, 8192,
                               2,       TP_PASS_FWD_BWD, TP_COMM_NONE};
  char reason[400] = "";
  assert_int_equal(tp_recipe_rejection(&bf16, NULL, reason, sizeof reason), 0);
  /* the matrix: llama3-8b qkv's shape at TP 1, both backward passes, every fp8 format */
  tp_ops_matrix m;
  assert_int_equal(expand("4096x6144x4096", "fp8,fp8-row,fp8-block,mxfp8", "1", "bwd,fwd+bwd", &m),
                   TP_OK);
  int runnable = 0;
  for (int i = 0; i < m.n_configs; ++i) {
    const tp_ops_config *cfg = &m.configs[i];
    const int runs = (cfg->backend == TP_BACKEND_STOCK && cfg->schedule != TP_SCHED_NCCL_WINDOW) ||
                     cfg->backend == TP_BACKEND_GEMM_ONLY;
    if (cfg->rejected == runs)
      fail_msg("%s %s: rejected %d (%s)", cfg->axes.dtype, cfg->axes.backend, cfg->rejected,
               cfg->reason);
    runnable += runs;
  }
  assert_int_equal(runnable, tp_ops_runnable(&m));
  assert_true(runnable >= 4 * 2 * 2); /* formats x passes x (stock, GEMM alone) */
  tp_ops_matrix_free(&m);
}

/* A shape whose split dimension puts a scale block across ranks, per format
 * and layout: tokens, n, k of the op, for an all-gather or reduce-scatter op. */
typedef struct straddle {
  tp_dtype dtype;
  tp_op op;
  const char *layout; /* the rule's name in the reason */
  int64_t tokens, n, k;
} straddle;

static int straddles_for(int tp, straddle *out) {
  const int64_t t = 4096, aligned = 1024LL * tp; /* a multiple of 128 per rank */
  int n = 0;
  for (int f = 0; f < N_FP8; ++f) {
    const tp_dtype d = FP8_DTYPES[f];
    /* weight N with 64 rows per rank: fp8-block's 128-row weight blocks straddle */
    if (d == TP_FP8_BLOCK)
      out[n++] = (straddle){d, TP_OP_AG_LINEAR, "weight N", t, 64LL * tp, aligned};
    /* K per rank of 80 (x16, not x32 or x128): the 1x32 and 1x128 blocks straddle */
    if (d == TP_FP8_BLOCK || d == TP_MXFP8) {
      out[n++] = (straddle){d, TP_OP_LINEAR_RS, "activation K", t, aligned, 80LL * tp};
      out[n++] = (straddle){d, TP_OP_AG_LINEAR_MULTI, "weight N", t, 100LL * tp + 1, aligned};
    }
    /* every format: a split dimension that TP does not divide */
    out[n++] = (straddle){d, TP_OP_AG_LINEAR, "activation rows", t + 1, aligned, aligned};
  }
  return n;
}

/* What the rules give the plan (kernels/tp_recipe_rules.h): every operand's
 * agreement, as the shard rule finds it for that operand's split, and the
 * transposed operand's rows; and the rules only the fp8 recipe has (no
 * window variant, the IPC heap only, nothing to move at TP 1), silent for
 * the identity recipe. */
static void test_rules_for_the_plan(void **state) {
  (void)state;
  const tp_op ops[] = {TP_OP_AG_LINEAR, TP_OP_LINEAR_RS};
  for (int f = 0; f < N_FP8; ++f)
    for (int o = 0; o < 2; ++o) {
      const int gathers = tp_op_gathers(ops[o]);
      const tp_recipe_case c = {FP8_DTYPES[f],
                                ops[o],
                                4096,
                                6144,
                                4096,
                                2,
                                TP_PASS_FWD_BWD,
                                gathers ? TP_COMM_FP8 : TP_COMM_NONE};
      tp_recipe_agreements got;
      memset(&got, 0x7f, sizeof got);
      char reason[400] = "";
      if (tp_recipe_rejection(&c, &got, reason, sizeof reason) != 0)
        fail_msg("%s %s TP 2 rejected: %s", tp_dtype_name(c.dtype), tp_op_name(c.op), reason);
      tp_quant_format fmt;
      assert_int_equal(tp_quant_format_of(c.dtype, &fmt), TP_OK);
      tp_quant_split sp[TP_QUANT_MAX_SPLITS];
      assert_int_equal(tp_quant_op_splits(gathers, c.tokens, c.n, c.k, 1, sp), 4);
      const tp_amax_agreement *want_of[TP_QUANT_MAX_SPLITS] = {&got.x, NULL, &got.dy, &got.t};
      for (int i = 0; i < TP_QUANT_MAX_SPLITS; ++i) {
        if (!want_of[i]) continue;
        tp_amax_agreement want = TP_AMAX_LOCAL;
        assert_int_equal(
            tp_quant_shard_check(fmt, sp[i].layout, sp[i].rows, sp[i].cols, 2, &want, NULL, 0),
            TP_OK);
        assert_int_equal(*want_of[i], want);
      }
      assert_int_equal(got.t_rows, sp[3].rows);
      /* tensorwise fp8 on the all-gather side agrees on X's amax: its rows span every rank */
      if (FP8_DTYPES[f] == TP_FP8 && gathers) assert_int_equal(got.x, TP_AMAX_AGREE_TENSOR);
    }
  char reason[400] = "";
  assert_int_equal(tp_recipe_window_rejection(TP_FP8, TP_RECIPE_FOR_OP, reason, sizeof reason), 1);
  assert_non_null(strstr(reason, "nccl-window"));
  assert_int_equal(tp_recipe_window_rejection(TP_BF16, TP_RECIPE_FOR_LAYER, reason, sizeof reason),
                   0);
  assert_int_equal(
      tp_recipe_symm_rejection(TP_MXFP8, TP_SYMM_NCCL, TP_RECIPE_FOR_LAYER, reason, sizeof reason),
      1);
  assert_non_null(strstr(reason, "the CUDA-IPC heap only"));
  assert_int_equal(
      tp_recipe_symm_rejection(TP_FP8, TP_SYMM_IPC, TP_RECIPE_FOR_OP, reason, sizeof reason), 0);
  tp_recipe_layer l = {TP_FP8_ROW, TP_LAYER_FFN, 4096, 4096,        32, 8,
                       128,        14336,        1,    TP_PASS_FWD, 1,  TP_COMM_NONE};
  assert_int_equal(tp_recipe_layer_backend_rejection(&l, TP_BACKEND_DIST, reason, sizeof reason),
                   1);
  assert_non_null(strstr(reason, "at TP 1: dist_gemm has nothing to gather"));
  assert_int_equal(
      tp_recipe_layer_backend_rejection(&l, TP_BACKEND_GEMM_ONLY, reason, sizeof reason), 0);
  l.tp = 2;
  assert_int_equal(
      tp_recipe_layer_backend_rejection(&l, TP_BACKEND_COMM_ONLY, reason, sizeof reason), 0);
}

static void test_placement_rejections(void **state) {
  (void)state;
  const int degrees[] = {2, 4, 8};
  int rejected = 0, reached_comm = 0;
  for (int i = 0; i < 3; ++i) {
    straddle cases[16];
    const int n = straddles_for(degrees[i], cases);
    for (int j = 0; j < n; ++j) {
      const straddle *s = &cases[j];
      const tp_recipe_case c = {s->dtype, s->op,      s->tokens,   s->n,
                                s->k,     degrees[i], TP_PASS_FWD, TP_COMM_FP8};
      char reason[400] = "";
      assert_int_equal(tp_recipe_rejection(&c, NULL, reason, sizeof reason), 1);
      char rule[64];
      snprintf(rule, sizeof rule, "fp8 placement rule %s at TP %d", s->layout, degrees[i]);
      if (!strstr(reason, rule)) fail_msg("expected '%s' in '%s'", rule, reason);
      assert_non_null(strstr(reason, tp_dtype_name(s->dtype)));
      rejected++;
    }
    /* aligned shapes pass every placement rule; the forward runs where comm_dtype fits */
    const tp_op ops[] = {TP_OP_AG_LINEAR, TP_OP_AG_LINEAR_MULTI, TP_OP_LINEAR_RS};
    for (int f = 0; f < N_FP8; ++f)
      for (int o = 0; o < 3; ++o) {
        const int64_t dim = 1024LL * degrees[i];
        tp_recipe_case c = {FP8_DTYPES[f], ops[o],     4096,        dim,
                            dim,           degrees[i], TP_PASS_FWD, TP_COMM_NONE};
        char reason[400] = "";
        const int gathers = tp_op_gathers(c.op);
        /* the all-gather side needs a comm_dtype, the reduce-scatter side refuses one */
        assert_int_equal(tp_recipe_rejection(&c, NULL, reason, sizeof reason), gathers);
        if (gathers) assert_non_null(strstr(reason, "needs comm_dtype bf16 or fp8"));
        c.comm = TP_COMM_BF16;
        assert_int_equal(tp_recipe_rejection(&c, NULL, reason, sizeof reason), !gathers);
        if (!gathers) assert_non_null(strstr(reason, "comm_dtype does not apply"));
        c.comm = gathers ? TP_COMM_FP8 : TP_COMM_NONE;
        if (tp_recipe_rejection(&c, NULL, reason, sizeof reason) != 0)
          fail_msg("aligned %s %s: '%s'", tp_dtype_name(c.dtype), tp_op_name(c.op), reason);
        reached_comm++;
      }
  }
  printf("  placement: %d straddling shapes rejected by their rule, %d aligned ones "
         "(4 formats x 3 ops x TP 2/4/8) run their forward\n",
         rejected, reached_comm);
  assert_int_equal(reached_comm, 36);
}

/* The matrix shows the placement rule's reason on every configuration of the case. */
static void test_matrix_shows_rule(void **state) {
  (void)state;
  tp_ops_matrix m;
  assert_int_equal(expand("4096x4096x4000:linear_rs", "fp8-block", "4", "fwd", &m), TP_OK);
  assert_int_equal(tp_ops_runnable(&m), 0);
  for (int i = 0; i < m.n_configs; ++i)
    assert_non_null(strstr(m.configs[i].reason, "fp8 placement rule activation K at TP 4"));
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  tp_ops_matrix_print(&m, out);
  fclose(out);
  assert_non_null(strstr(text, "rejected: fp8 placement rule activation K at TP 4"));
  assert_non_null(strstr(text, "decided on the GPU"));
  free(text);
  tp_ops_matrix_free(&m);
}

/* The comm_dtype axis of ops: which cases multiply by it, what each stores and moves. */
static void test_comm_dtype_axis(void **state) {
  (void)state;
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  assert_int_equal(tp_ops_spec_set_axis(&s, "shape", "4096x6144x4096,4096x4096x4096:linear_rs"),
                   TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "dtype", "fp8-block,bf16"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "tp", "1,2"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "comm_dtype", "bf16,fp8"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "chunks", "0,2"), TP_OK);
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  /* 2 shapes x 2 dtypes x 2 TP, and the fp8 all-gather case at TP 2 twice */
  assert_int_equal(m.n_cases, 9);
  int with_comm = 0, dist_runs = 0;
  for (int c = 0; c < m.n_cases; ++c) {
    const tp_ops_case *k = &m.cases[c];
    const int applies = tp_dtype_is_fp8(k->dtype) && k->tp == 2 && tp_op_gathers(k->proj.op);
    assert_int_equal(k->comm != TP_COMM_NONE, applies);
    with_comm += applies;
    const int64_t elems = 4096LL * 4096;
    for (int i = k->first_config; i < k->first_config + k->n_configs; ++i) {
      const tp_ops_config *cfg = &m.configs[i];
      if (applies) assert_string_equal(cfg->axes.comm_dtype, tp_comm_dtype_name(k->comm));
      else assert_null(cfg->axes.comm_dtype);
      if (applies && k->comm == TP_COMM_BF16) assert_int_equal(cfg->comm_bytes, 2 * elems);
      /* fp8: the bytes and two ranks' [2048, 4096] VEC128 scales (2048 x 32 floats each) */
      if (applies && k->comm == TP_COMM_FP8)
        assert_int_equal(cfg->comm_bytes, elems + 2LL * 2048 * 32 * 4);
      if (!applies || cfg->backend != TP_BACKEND_DIST) continue;
      if (k->comm == TP_COMM_BF16) assert_non_null(strstr(cfg->reason, "comm_dtype bf16"));
      else if (cfg->axes.chunks == 2) assert_non_null(strstr(cfg->reason, "chunks 1 only"));
      else if (cfg->rejected) fail_msg("fp8 dist_gemm rejected: %s", cfg->reason);
      dist_runs += !cfg->rejected;
    }
    /* the fp8 reduce-scatter side runs stock at TP 2 with no comm_dtype */
    if (tp_dtype_is_fp8(k->dtype) && k->tp == 2 && !tp_op_gathers(k->proj.op))
      assert_int_equal(m.configs[k->first_config].rejected, 0);
  }
  assert_int_equal(with_comm, 2);
  assert_int_equal(dist_runs, 1);
  /* only ce and sm (and auto, which chooses among them or stock) push fp8 chunks */
  const tp_recipe_case fc = {TP_FP8_ROW, TP_OP_AG_LINEAR, 4096,       6144, 4096,
                             2,          TP_PASS_FWD,     TP_COMM_FP8};
  char why[400] = "";
  const tp_schedule schedules[] = {TP_SCHED_AUTO, TP_SCHED_CE, TP_SCHED_SM, TP_SCHED_RING,
                                   TP_SCHED_MULTIMEM};
  for (int i = 0; i < 5; ++i) {
    const int refused = tp_recipe_dist_rejection(&fc, schedules[i], 0, why, sizeof why);
    assert_int_equal(refused, i >= 3);
    if (refused) assert_non_null(strstr(why, "only ce and sm push fp8 chunks"));
  }
  assert_int_equal(tp_recipe_dist_rejection(&fc, TP_SCHED_CE, 1, why, sizeof why), 0);
  tp_ops_matrix_free(&m);
  /* a backward pass at TP 2 is planned for fp8: only dist_gemm's own rules reject */
  assert_int_equal(tp_ops_spec_set_axis(&s, "pass", "fwd+bwd"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "dtype", "fp8"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "tp", "2"), TP_OK);
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  int planned = 0;
  for (int i = 0; i < m.n_configs; ++i) {
    const tp_ops_config *cfg = &m.configs[i];
    if (cfg->rejected && cfg->backend != TP_BACKEND_DIST && cfg->schedule != TP_SCHED_NCCL_WINDOW)
      fail_msg("fp8 fwd+bwd at TP 2 rejected: %s", cfg->reason);
    planned += !cfg->rejected;
  }
  assert_true(planned > 0);
  tp_ops_matrix_free(&m);
  assert_int_equal(tp_ops_spec_set_axis(&s, "comm_dtype", "fp16"), TP_OK);
  assert_int_equal(tp_ops_expand(&s, &m), TP_EUSAGE);
  assert_non_null(strstr(tp_last_message(), "comm_dtype"));
}

/* ---- the layers of `run` ------------------------------------------------------------------- */

/* The run matrix of the quick preset with "NAME=LIST" assignments (NULL-terminated). */
static void expand_layers(tp_layer_matrix *m, const char *first, ...) {
  tp_layer_spec s;
  assert_int_equal(tp_layer_spec_preset("quick", &s), TP_OK);
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a; a = va_arg(ap, const char *))
    if (tp_layer_spec_assign(&s, a) != TP_OK) fail_msg("%s: %s", a, tp_last_message());
  va_end(ap);
  if (tp_layer_expand(&s, 1, m) != TP_OK) fail_msg("expand: %s", tp_last_message());
}

/* save_gathered=on asks the all-gather side's backward to reuse the forward's gathered input;
 * the fp8 recipe keeps no gathered copy (it gathers the quantized shard again:
 * kernels/tp_linear_fp8_recipe.c clears the flag), so an fp8 configuration with it would run
 * exactly as save_gathered=off under another key. It is rejected with that reason, in ops
 * (qkv, w13) and in run's layers alike, at every TP; bf16 keeps it. */
static void test_fp8_save_gathered_rejected(void **state) {
  (void)state;
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  assert_int_equal(tp_ops_spec_set_axis(&s, "model", "8b"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "proj", "qkv,w13"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "tokens", "4096"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "tp", "1,2"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "dtype", "bf16,fp8,fp8-row,fp8-block,mxfp8"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "pass", "bwd,fwd+bwd"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "save_gathered", "on"), TP_OK);
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  int fp8 = 0;
  for (int i = 0; i < m.n_configs; ++i) {
    const tp_ops_config *cfg = &m.configs[i];
    const tp_ops_case *c = &m.cases[cfg->case_index];
    assert_int_equal(cfg->axes.save_gathered, 1);
    if (!tp_dtype_is_fp8(c->dtype)) {
      if (cfg->rejected) assert_null(strstr(cfg->reason, "save_gathered"));
      continue;
    }
    ++fp8;
    assert_true(cfg->rejected);
    assert_false(cfg->planned);
    if (!strstr(cfg->reason, "save_gathered=on: the fp8 recipe keeps no gathered copy"))
      fail_msg("%s %s tp %d: %s", cfg->axes.dtype, cfg->axes.backend, c->tp, cfg->reason);
  }
  assert_true(fp8 > 0);
  tp_ops_matrix_free(&m);

  tp_layer_matrix l;
  expand_layers(&l, "model=8b", "layer=attention,ffn,block", "dtype=bf16,fp8,fp8-block", "tp=1,2",
                "pass=fwd+bwd", "sp=on", "graph=off", "seqlen=4096", "save_gathered=on", NULL);
  fp8 = 0;
  for (int i = 0; i < l.n_configs; ++i) {
    const tp_layer_config *cfg = &l.configs[i];
    const tp_layer_case *c = &l.cases[cfg->case_index];
    if (!tp_dtype_is_fp8(c->dtype)) {
      if (cfg->rejected) assert_null(strstr(cfg->reason, "save_gathered"));
      continue;
    }
    ++fp8;
    assert_true(cfg->rejected);
    if (!strstr(cfg->reason, "save_gathered=on: the fp8 recipe keeps no gathered copy"))
      fail_msg("%s %s %s tp %d: %s", cfg->axes.op_or_layer, cfg->axes.dtype, cfg->axes.backend,
               c->tp, cfg->reason);
  }
  assert_true(fp8 > 0);
  tp_layer_matrix_free(&l);
}

static void test_layers_tp1(void **state) {
  (void)state;
  tp_layer_matrix m;
  expand_layers(&m, "model=8b", "layer=attention,ffn,block", "dtype=fp8,fp8-row,fp8-block,mxfp8",
                "tp=1", "pass=fwd,fwd+bwd", "sp=on,off", "graph=off", "seqlen=4096", "stock=plain",
                NULL);
  assert_int_equal(m.n_cases, 3 * 4 * 2 * 2);
  int stock = 0, gemm = 0;
  for (int i = 0; i < m.n_configs; ++i) {
    const tp_layer_config *cfg = &m.configs[i];
    const tp_layer_case *c = &m.cases[cfg->case_index];
    assert_true(tp_dtype_is_fp8(c->dtype));
    assert_string_equal(cfg->axes.dtype, tp_dtype_name(c->dtype));
    const int runs = cfg->backend == TP_BACKEND_STOCK || cfg->backend == TP_BACKEND_GEMM_ONLY;
    if (cfg->rejected == runs)
      fail_msg("%s %s %s: rejected %d (%s)", cfg->axes.op_or_layer, cfg->axes.dtype,
               cfg->axes.backend, cfg->rejected, cfg->reason);
    stock += cfg->backend == TP_BACKEND_STOCK;
    gemm += cfg->backend == TP_BACKEND_GEMM_ONLY;
    if (cfg->backend == TP_BACKEND_DIST)
      assert_non_null(strstr(cfg->reason, c->sp ? "dist_gemm needs TP > 1"
                                                : "dist_gemm needs sequence parallelism"));
    if (cfg->backend == TP_BACKEND_COMM_ONLY)
      assert_string_equal(cfg->reason, "TP 1 has no collective to time");
    /* the FLOP count is the layer's, whatever the format of its GEMMs */
    if (runs) assert_true(cfg->flops > 0);
  }
  assert_int_equal(stock, m.n_cases);
  assert_int_equal(gemm, m.n_cases);
  tp_layer_matrix_free(&m);
}

/* Whether a configuration of an fp8 layer at TP > 1 (sp on, pass fwd) runs,
 * and if not the words of its rejection. */
static const char *tp_over_1_rejection(const tp_layer_config *cfg, const tp_layer_case *c) {
  if (cfg->schedule == TP_SCHED_NCCL_WINDOW) return "nccl-window: the fp8 formats have no stock";
  if (cfg->backend != TP_BACKEND_DIST) return NULL;
  /* dist_gemm's own rules before the fp8 recipe's */
  if (cfg->schedule == TP_SCHED_MULTIMEM) return "multimem: not implemented in this build";
  if (cfg->schedule == TP_SCHED_RING && c->tp > 2) return "ring: beyond TP 2";
  if (cfg->schedule == TP_SCHED_RING) return "only ce and sm push fp8 chunks";
  if (c->comm == TP_COMM_BF16) return "dist_gemm with comm_dtype bf16: the fused pushes carry fp8";
  if (cfg->axes.chunks > 1) return "an fp8 shard travels whole with its scales";
  if (cfg->symm == TP_SYMM_NCCL) return "symm=nccl: the fp8 projections' fused pushes";
  return NULL;
}

static void test_layers_tp_over_1(void **state) {
  (void)state;
  tp_layer_matrix m;
  expand_layers(&m, "model=8b", "layer=attention,ffn,block", "dtype=fp8,fp8-row,fp8-block,mxfp8",
                "tp=2,4", "pass=fwd,fwd+bwd", "backend=stock,dist_gemm", "graph=off", "seqlen=4096",
                "comm_dtype=bf16,fp8", "sp=on,off", "schedule=auto,ce,sm,ring,multimem",
                "chunks=0,1,2", "symm=ipc,nccl", NULL);
  /* 3 layers x 4 formats x 2 TP x 2 passes: sp on twice (comm_dtype bf16, fp8), sp off once */
  assert_int_equal(m.n_cases, 3 * 4 * 2 * 2 * 3);
  int runs[TP_BACKEND_COMM_ONLY + 1] = {0}, comm_keyed = 0;
  for (int i = 0; i < m.n_configs; ++i) {
    const tp_layer_config *cfg = &m.configs[i];
    const tp_layer_case *c = &m.cases[cfg->case_index];
    assert_int_equal(cfg->planned, 0);
    const char *words = !c->sp ? "with sp off: the fp8 projections'" : tp_over_1_rejection(cfg, c);
    if (!words) {
      if (cfg->rejected)
        fail_msg("%s %s rejected: %s", cfg->axes.dtype, cfg->axes.backend, cfg->reason);
      runs[cfg->backend]++;
    } else {
      assert_int_equal(cfg->rejected, 1);
      if (!strstr(cfg->reason, words)) fail_msg("'%s' missing from: %s", words, cfg->reason);
      /* the layers' and dist_gemm's fp8 rules name the format (symm's and the window's name
       the fp8 formats as a whole; multimem's and the ring's are every dtype's) */
      if (strncmp(cfg->reason, "symm=", 5) != 0 && strncmp(cfg->reason, "nccl-window", 11) != 0 &&
          strncmp(cfg->reason, "multimem:", 9) != 0 && strncmp(cfg->reason, "ring:", 5) != 0)
        assert_non_null(strstr(cfg->reason, tp_dtype_name(c->dtype)));
    }
    /* stored with comm_dtype where it applies (sp on), none elsewhere */
    if (c->sp) assert_string_equal(cfg->axes.comm_dtype, tp_comm_dtype_name(c->comm));
    else assert_null(cfg->axes.comm_dtype);
    comm_keyed += cfg->axes.comm_dtype != NULL;
  }
  /* both passes, sp on: 3 x 4 x 2 x 2 cases x 2 comm_dtype; dist_gemm ran only with fp8 over
   * ipc, schedules auto, ce, sm and chunks 0, 1 */
  assert_int_equal(runs[TP_BACKEND_STOCK], 3 * 4 * 2 * 2 * 2);
  assert_int_equal(runs[TP_BACKEND_GEMM_ONLY], 3 * 4 * 2 * 2 * 2);
  assert_int_equal(runs[TP_BACKEND_COMM_ONLY], 3 * 4 * 2 * 2 * 2);
  assert_int_equal(runs[TP_BACKEND_DIST], 3 * 4 * 2 * 2 * 3 * 2);
  assert_true(comm_keyed > 0);
  printf("  %d configurations at TP 2 and 4: stock %d, dist_gemm %d run\n", m.n_configs,
         runs[TP_BACKEND_STOCK], runs[TP_BACKEND_DIST]);
  tp_layer_matrix_free(&m);
  /* the rule functions alone: dist_gemm's layer at TP 1 meets nothing of fp8's (the matrix
   * rejects it for TP 1); bf16 never */
  char reason[400] = "";
  const tp_recipe_layer one = {TP_FP8, TP_LAYER_BLOCK, 4096, 4096,        32, 8,
                               128,    14336,          1,    TP_PASS_FWD, 1,  TP_COMM_NONE};
  assert_int_equal(
      tp_recipe_layer_dist_rejection(&one, TP_SCHED_RING, 4, TP_SYMM_IPC, reason, sizeof reason),
      0);
  const tp_recipe_layer bf16 = {TP_BF16, TP_LAYER_BLOCK, 4096, 4096,        32, 8,
                                128,     14336,          2,    TP_PASS_FWD, 1,  TP_COMM_BF16};
  assert_int_equal(
      tp_recipe_layer_dist_rejection(&bf16, TP_SCHED_RING, 4, TP_SYMM_IPC, reason, sizeof reason),
      0);
  /* a comm_dtype at TP 1, none at TP 2: each named */
  tp_recipe_layer l = one;
  l.comm = TP_COMM_FP8;
  assert_int_equal(tp_recipe_layer_rejection(&l, reason, sizeof reason), 1);
  assert_non_null(strstr(reason, "at TP 1: comm_dtype fp8 does not apply"));
  l.tp = 2;
  l.comm = TP_COMM_NONE;
  assert_int_equal(tp_recipe_layer_rejection(&l, reason, sizeof reason), 1);
  assert_non_null(strstr(reason, "qkv and w13 gather their input: comm_dtype bf16 or fp8"));
  l.comm = TP_COMM_BF16;
  assert_int_equal(tp_recipe_layer_rejection(&l, reason, sizeof reason), 0);
}

/* dp > 1 and fsdp_traffic stay rejected for fp8 at TP > 1 too. */
static void test_layers_fsdp_rejected(void **state) {
  (void)state;
  tp_layer_matrix m;
  expand_layers(&m, "model=8b", "layer=block", "dtype=fp8", "tp=2", "pass=fwd", "graph=off",
                "seqlen=4096", "batch=2", "dp=1,2", "fsdp_traffic=off,on", NULL);
  int fsdp = 0;
  for (int i = 0; i < m.n_configs; ++i) {
    const tp_layer_config *cfg = &m.configs[i];
    const tp_layer_case *c = &m.cases[cfg->case_index];
    if (c->dp == 1 && !c->fsdp_traffic) continue;
    assert_int_equal(cfg->rejected, 1);
    fsdp++;
    if (c->dp > 1 && c->fsdp_traffic) continue; /* fsdp_traffic's own rule */
    assert_non_null(strstr(cfg->reason, "the fp8 weights are quantized once at prepare"));
  }
  assert_true(fsdp > 0);
  tp_layer_matrix_free(&m);
}

/* A model of its own: dim, heads, KV heads, head dim, FFN. */
static tp_recipe_layer fp8_layer(tp_dtype dtype, tp_layer layer, int tp, int64_t dim, int64_t heads,
                                 int64_t kv, int64_t hd, int64_t ffn) {
  const tp_recipe_layer l = {dtype, layer,       4096, dim,
                             heads, kv,          hd,   ffn,
                             tp,    TP_PASS_FWD, 1,    tp > 1 ? TP_COMM_FP8 : TP_COMM_NONE};
  return l;
}

static void expect_layer_rule(const tp_recipe_layer *l, const char *words) {
  char reason[400] = "";
  assert_int_equal(tp_recipe_layer_rejection(l, reason, sizeof reason), 1);
  if (!strstr(reason, words)) fail_msg("expected '%s' in '%s'", words, reason);
  assert_non_null(strstr(reason, "a block would straddle two ranks' shards"));
  printf("  %s %s TP %d: %s\n", tp_dtype_name(l->dtype), tp_layer_name(l->layer), l->tp, reason);
}

static void test_layer_placement(void **state) {
  (void)state;
  /* debug (dim 256, 8 heads, 4 KV heads of 32): qkv's key heads are 128 rows, 64 per rank at
   * TP 2: fp8-block's 128-row weight blocks straddle; ops' qkv of the same model (512 rows
   * contiguous, 256 per rank) passes its placement rule */
  const tp_recipe_layer debug = fp8_layer(TP_FP8_BLOCK, TP_LAYER_BLOCK, 2, 256, 8, 4, 32, 768);
  expect_layer_rule(&debug, "qkv (key heads): fp8 placement rule weight N at TP 2");
  char reason[400] = "";
  const tp_recipe_case ops_qkv = {TP_FP8_BLOCK, TP_OP_AG_LINEAR, 4096, 512, 256, 2,
                                  TP_PASS_FWD,  TP_COMM_FP8};
  assert_int_equal(tp_recipe_rejection(&ops_qkv, NULL, reason, sizeof reason), 0);
  /* query heads: 6 heads of 32 = 192 rows, 96 per rank */
  const tp_recipe_layer q = fp8_layer(TP_FP8_BLOCK, TP_LAYER_ATTENTION, 2, 256, 6, 8, 32, 768);
  expect_layer_rule(&q, "qkv (query heads): fp8 placement rule weight N at TP 2");
  /* wo's K = heads x head dim = 256, 16 per rank at TP 16: mxfp8's 1x32 blocks along K
   * straddle (its weight blocks span one row, so qkv's rows split freely) */
  const tp_recipe_layer wo = fp8_layer(TP_MXFP8, TP_LAYER_ATTENTION, 16, 512, 16, 16, 16, 1024);
  expect_layer_rule(&wo, "wo: fp8 placement rule activation K at TP 16");
  /* the FFN: w1/w3's N = 768, 192 per rank at TP 4; mxfp8's 1x32 blocks along w2's K */
  const tp_recipe_layer w13 = fp8_layer(TP_FP8_BLOCK, TP_LAYER_FFN, 4, 256, 8, 4, 32, 768);
  expect_layer_rule(&w13, "w13: fp8 placement rule weight N at TP 4");
  const tp_recipe_layer w2 = fp8_layer(TP_MXFP8, TP_LAYER_FFN, 16, 256, 8, 4, 32, 768);
  expect_layer_rule(&w2, "w2: fp8 placement rule activation K at TP 16");
  /* the FFN layer has no qkv: debug's FFN at TP 2 places every operand, both passes; with
   * 2112 tokens (1056 a rank) the backward's transposed operand straddles, the forward runs */
  tp_recipe_layer ffn = fp8_layer(TP_FP8_BLOCK, TP_LAYER_FFN, 2, 256, 8, 4, 32, 768);
  ffn.pass = TP_PASS_FWD_BWD;
  assert_int_equal(tp_recipe_layer_rejection(&ffn, reason, sizeof reason), 0);
  ffn.tokens = 2112;
  expect_layer_rule(
      &ffn,
      "w13: fp8 placement rule for the backward's X transposed, along T for the wgrad at TP 2");
  ffn.pass = TP_PASS_FWD;
  assert_int_equal(tp_recipe_layer_rejection(&ffn, reason, sizeof reason), 0);
  ffn.tokens = 4096;
  ffn.sp = 0;
  assert_int_equal(tp_recipe_layer_rejection(&ffn, reason, sizeof reason), 1);
  assert_non_null(strstr(reason, "fp8-block layers at TP 2 with sp off"));
  /* TP 1 and the element types: nothing against them */
  const tp_recipe_layer one = fp8_layer(TP_FP8_BLOCK, TP_LAYER_BLOCK, 1, 256, 6, 4, 32, 768);
  assert_int_equal(tp_recipe_layer_rejection(&one, reason, sizeof reason), 0);
  const tp_recipe_layer bf16 = fp8_layer(TP_BF16, TP_LAYER_BLOCK, 2, 256, 8, 4, 32, 768);
  assert_int_equal(tp_recipe_layer_rejection(&bf16, reason, sizeof reason), 0);
  /* and the matrix applies the rule to every configuration of the case */
  tp_layer_matrix m;
  expand_layers(&m, "model=debug", "layer=attention,block", "dtype=fp8-block,bf16", "tp=2",
                "graph=off", "seqlen=128", "pass=fwd", NULL);
  for (int i = 0; i < m.n_configs; ++i) {
    const tp_layer_config *cfg = &m.configs[i];
    const int fp8 = m.cases[cfg->case_index].dtype == TP_FP8_BLOCK;
    if (fp8) assert_non_null(strstr(cfg->reason, "qkv (key heads): fp8 placement rule"));
    else assert_null(strstr(cfg->reason, "fp8"));
  }
  tp_layer_matrix_free(&m);
}

static void test_layer_listing_and_table(void **state) {
  (void)state;
  tp_layer_matrix m;
  expand_layers(&m, "model=debug", "layer=block", "dtype=bf16,mxfp8", "tp=1", "graph=off",
                "seqlen=128", NULL);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  tp_layer_matrix_print(&m, 1, out);
  fclose(out);
  assert_non_null(strstr(text, " mxfp8 "));
  assert_non_null(strstr(text, "decided on the GPU: whether cuBLASLt runs an fp8 format"));
  free(text);
  tp_layer_matrix_free(&m);
  /* the generated table (README's copy is compared with it elsewhere): run's rows hold the
   * fp8 dtypes, mxfp8 with the GPU's decision */
  out = open_memstream(&text, &len);
  assert_non_null(out);
  assert_int_equal(tp_composition_table_print(2, out), TP_OK);
  fclose(out);
  char *ops_part = strstr(text, "`ops` (projections");
  assert_non_null(ops_part);
  *ops_part = '\0';
  assert_non_null(strstr(text,
                         "| run | * | * | -, auto, ce, sm, ring | 1, 2 | * | bf16, fp32, fp8, "
                         "fp8-row, fp8-block |"));
  assert_non_null(strstr(text, "| run on sm_100 only: the plan asks cuBLASLt for the MX scales"));
  assert_null(strstr(text, "the fp8 backward is not implemented"));
  assert_non_null(strstr(text, "| rejected: fp8-block dist_gemm schedule ring: only ce and sm "
                               "push fp8 chunks | * | dist_gemm | ring | 2 | 1 | fp8-block | "
                               "bf16, fp8 | on | * |"));
  assert_non_null(strstr(text, "| rejected: fp8-block dist_gemm with comm_dtype bf16"));
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vocab),
      cmocka_unit_test(test_vocab_lists),
      cmocka_unit_test(test_matrix_parses_fp8),
      cmocka_unit_test(test_comm_bytes),
      cmocka_unit_test(test_backward_planned),
      cmocka_unit_test(test_rules_for_the_plan),
      cmocka_unit_test(test_placement_rejections),
      cmocka_unit_test(test_matrix_shows_rule),
      cmocka_unit_test(test_comm_dtype_axis),
      cmocka_unit_test(test_fp8_save_gathered_rejected),
      cmocka_unit_test(test_layers_tp1),
      cmocka_unit_test(test_layers_tp_over_1),
      cmocka_unit_test(test_layers_fsdp_rejected),
      cmocka_unit_test(test_layer_placement),
      cmocka_unit_test(test_layer_listing_and_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
