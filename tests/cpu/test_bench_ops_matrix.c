/*
 * test_bench_ops_matrix.c — bench/ops_matrix: the default expansion (24
 * cases of 6 configurations: stock and the collective alone in both
 * variants, plain and nccl-window), the axes and shapes each configuration
 * carries, TP 4 and 8, every rejection rule with its reason, and usage
 * errors for names the tool does not know; the bare projections of --shape
 * (their per-rank M, N, K and keys), the axes by name, the matrix file with
 * defined models, a preset configuration's key as it always was, and the
 * symm axis (dist_gemm over the CUDA-IPC heap or NCCL windows).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/matrix/ops_matrix.h"
#include "tests/cpu/bench_testutil.h"

/* A spec with the defaults, then the given lists replaced ("" leaves one). */
static tp_ops_spec spec_with(const char *models, const char *projs, const char *tokens,
                             const char *tp, const char *schedules, const char *chunks) {
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  if (models[0]) assert_int_equal(tp_str_list_set(&s.models, models), TP_OK);
  if (projs[0]) assert_int_equal(tp_str_list_set(&s.projs, projs), TP_OK);
  if (tokens[0]) assert_int_equal(tp_int_list_set(&s.tokens, tokens, 0, 1LL << 40), TP_OK);
  if (tp[0]) assert_int_equal(tp_int_list_set(&s.tp, tp, 0, 100000), TP_OK);
  if (schedules[0]) assert_int_equal(tp_str_list_set(&s.schedules, schedules), TP_OK);
  if (chunks[0]) assert_int_equal(tp_int_list_set(&s.chunks, chunks, -5, 1000), TP_OK);
  return s;
}

static const tp_ops_config *find(const tp_ops_matrix *m, const char *model, const char *proj,
                                 int64_t tokens, int tp, tp_backend role) {
  for (int i = 0; i < m->n_configs; i++) {
    const tp_ops_config *c = &m->configs[i];
    if (strcmp(c->axes.model, model) == 0 && strcmp(c->axes.proj, proj) == 0 &&
        c->axes.tokens == tokens && c->axes.tp == tp && c->backend == role)
      return c;
  }
  fail_msg("no %s %s tokens=%lld tp=%d role %d", model, proj, (long long)tokens, tp, (int)role);
  return NULL;
}

static void test_default_expansion(void **state) {
  (void)state;
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.n_cases, 24); /* 2 models x 4 projs x 3 tokens */
  assert_int_equal(m.n_configs, 144);
  assert_int_equal(tp_ops_runnable(&m), 144);
  assert_int_equal(tp_ops_max_tp(&m), 2);
  /* both stock variants when stock is asked for, the collective alone in both */
  static const tp_backend order[] = {TP_BACKEND_STOCK,     TP_BACKEND_STOCK,
                                     TP_BACKEND_DIST,      TP_BACKEND_GEMM_ONLY,
                                     TP_BACKEND_COMM_ONLY, TP_BACKEND_COMM_ONLY};
  static const tp_schedule scheds[] = {TP_SCHED_AUTO, TP_SCHED_NCCL_WINDOW, TP_SCHED_AUTO,
                                       TP_SCHED_AUTO, TP_SCHED_AUTO,        TP_SCHED_NCCL_WINDOW};
  static const char *const kinds[] = {"op", "op", "op", "gemm", "comm", "comm"};
  static const char *const backends[] = {"stock", "stock", "dist_gemm", "cublaslt", "nccl", "nccl"};
  static const char *const stored[] = {NULL, "nccl-window", "auto", NULL, NULL, "nccl-window"};
  for (int ci = 0; ci < m.n_cases; ci++) {
    const tp_ops_case *c = &m.cases[ci];
    assert_int_equal(c->n_configs, 6);
    assert_int_equal(c->first_config, 6 * ci);
    for (int j = 0; j < 6; j++) {
      const tp_ops_config *cfg = &m.configs[c->first_config + j];
      assert_int_equal(cfg->backend, order[j]);
      assert_int_equal(cfg->schedule, scheds[j]);
      assert_int_equal(cfg->case_index, ci);
      assert_string_equal(cfg->axes.kind, kinds[j]);
      assert_string_equal(cfg->axes.backend, backends[j]);
      if (stored[j]) assert_string_equal(cfg->axes.schedule, stored[j]);
      else assert_null(cfg->axes.schedule);
    }
  }
  /* Outermost axis first: the first case is 8b qkv 4096, the last 70b w2 16384. */
  assert_string_equal(m.cases[0].model->name, "llama3-8b");
  assert_string_equal(m.cases[0].proj.name, "qkv");
  assert_int_equal(m.cases[0].tokens, 4096);
  assert_string_equal(m.cases[23].model->name, "llama3-70b");
  assert_string_equal(m.cases[23].proj.name, "w2");
  assert_int_equal(m.cases[23].tokens, 16384);
  tp_ops_matrix_free(&m);
  assert_null(m.configs);
}

static void test_axes_and_shapes(void **state) {
  (void)state;
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);

  const tp_ops_config *qkv = find(&m, "llama3-8b", "qkv", 4096, 2, TP_BACKEND_DIST);
  assert_string_equal(qkv->axes.op_or_layer, "ag_linear");
  assert_string_equal(qkv->axes.schedule, "auto");
  assert_int_equal(qkv->axes.chunks, 0);
  assert_string_equal(qkv->axes.dtype, "bf16");
  assert_string_equal(qkv->axes.pass, "fwd");
  assert_int_equal(qkv->axes.sp, 1);
  assert_int_equal(qkv->axes.m, 4096);
  assert_int_equal(qkv->axes.n, 3072); /* 6144 / 2 */
  assert_int_equal(qkv->axes.k, 4096);
  assert_int_equal(qkv->axes.n_weights, 1);
  tu_assert_near(qkv->flops, 206158430208.0, 0);
  assert_null(find(&m, "llama3-8b", "qkv", 4096, 2, TP_BACKEND_STOCK)->axes.schedule);

  const tp_ops_config *wo = find(&m, "llama3-8b", "wo", 8192, 2, TP_BACKEND_STOCK);
  assert_string_equal(wo->axes.op_or_layer, "linear_rs");
  assert_int_equal(wo->axes.m, 8192);
  assert_int_equal(wo->axes.n, 4096);
  assert_int_equal(wo->axes.k, 2048); /* 4096 / 2 */

  const tp_ops_config *w13 = find(&m, "llama3-70b", "w13", 16384, 2, TP_BACKEND_GEMM_ONLY);
  assert_string_equal(w13->axes.op_or_layer, "ag_linear_multi");
  assert_int_equal(w13->axes.n, 14336); /* 28672 / 2, per weight */
  assert_int_equal(w13->axes.k, 8192);
  assert_int_equal(w13->axes.n_weights, 2);
  tu_assert_near(w13->flops, 2.0 * 16384 * 28672 * 8192 * 2, 0);

  const tp_ops_config *comm = find(&m, "llama3-8b", "qkv", 4096, 2, TP_BACKEND_COMM_ONLY);
  tu_assert_near(comm->flops, 0, 0);
  assert_int_equal(comm->comm_bytes, 4096LL * 4096 * 2); /* gathered T x K in bf16 */
  const tp_ops_config *rs = find(&m, "llama3-8b", "w2", 4096, 2, TP_BACKEND_COMM_ONLY);
  assert_int_equal(rs->comm_bytes, 4096LL * 4096 * 2); /* full T x N partial in bf16 */
  tp_ops_matrix_free(&m);
}

static void test_tp4_and_tp8(void **state) {
  (void)state;
  tp_ops_spec s = spec_with("", "", "", "4,8", "", "");
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.n_cases, 48);
  assert_int_equal(tp_ops_runnable(&m), 288);
  assert_int_equal(tp_ops_max_tp(&m), 8);
  const tp_ops_config *w2 = find(&m, "llama3-70b", "w2", 8192, 8, TP_BACKEND_DIST);
  assert_int_equal(w2->axes.m, 8192);
  assert_int_equal(w2->axes.n, 8192);
  assert_int_equal(w2->axes.k, 3584); /* 28672 / 8 */
  const tp_ops_config *qkv = find(&m, "llama3-8b", "qkv", 16384, 4, TP_BACKEND_STOCK);
  assert_int_equal(qkv->axes.n, 1536); /* 6144 / 4 */
  assert_int_equal(qkv->axes.k, 4096);
  tp_ops_matrix_free(&m);
}

static void test_schedules_times_chunks(void **state) {
  (void)state;
  tp_ops_spec s = spec_with("8b", "qkv", "4096", "", "ce,sm,multimem", "0,2,4");
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.n_cases, 1);
  assert_int_equal(m.n_configs, 5 + 9);
  /* multimem has no kernels in this build: rejected here, as the plan would, with the reason */
  assert_int_equal(tp_ops_runnable(&m), 11);
  assert_string_equal(m.configs[2].axes.schedule, "ce");
  assert_int_equal(m.configs[3].axes.chunks, 2);
  assert_string_equal(m.configs[10].axes.schedule, "multimem");
  assert_int_equal(m.configs[10].axes.chunks, 4);
  for (int i = 8; i <= 10; i++) {
    assert_true(m.configs[i].rejected);
    assert_non_null(strstr(m.configs[i].reason, "multimem: not implemented in this build"));
  }
  tp_ops_matrix_free(&m);
}

static void test_rejections(void **state) {
  (void)state;
  tp_ops_matrix m;
  /* tokens not divisible by TP: every configuration of the case */
  tp_ops_spec s = spec_with("8b", "qkv", "4100", "8", "", "");
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(tp_ops_runnable(&m), 0);
  for (int i = 0; i < m.n_configs; i++)
    assert_string_equal(m.configs[i].reason, "tokens 4100 not divisible by TP 8");
  assert_int_equal(tp_ops_max_tp(&m), 0);
  tp_ops_matrix_free(&m);

  /* tokens per rank not divisible by chunks: dist_gemm only */
  s = spec_with("8b", "wo", "4096", "2", "", "3");
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.n_configs, 6);
  for (int i = 0; i < m.n_configs; i++) assert_int_equal(m.configs[i].rejected, i == 2);
  assert_string_equal(m.configs[2].reason, "tokens per rank 2048 not divisible by chunks 3");
  tp_ops_matrix_free(&m);

  /* the fp8 formats have no window variant: its stock is rejected with the reason, plain runs */
  s = spec_with("8b", "qkv", "4096", "1", "", "");
  assert_int_equal(tp_str_list_set(&s.dtypes, "fp8"), TP_OK);
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_false(m.configs[0].rejected);
  assert_true(m.configs[1].rejected);
  assert_string_equal(m.configs[1].axes.schedule, "nccl-window");
  assert_non_null(strstr(m.configs[1].reason, "nccl-window: the fp8 formats"));
  tp_ops_matrix_free(&m);

  /* TP 1: dist_gemm and the collective alone have nothing to do */
  s = spec_with("8b", "qkv,w2", "4096", "1", "", "");
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_false(find(&m, "llama3-8b", "qkv", 4096, 1, TP_BACKEND_STOCK)->rejected);
  assert_false(find(&m, "llama3-8b", "qkv", 4096, 1, TP_BACKEND_GEMM_ONLY)->rejected);
  assert_string_equal(find(&m, "llama3-8b", "qkv", 4096, 1, TP_BACKEND_DIST)->reason,
                      "dist_gemm needs TP > 1: nothing to gather or scatter");
  assert_string_equal(find(&m, "llama3-8b", "w2", 4096, 1, TP_BACKEND_DIST)->reason,
                      "dist_gemm needs TP > 1: nothing to gather or scatter");
  assert_true(find(&m, "llama3-8b", "qkv", 4096, 1, TP_BACKEND_COMM_ONLY)->rejected);
  /* the window stock at TP 1 is NCCL's to judge (its runtime's symmetric support): run */
  for (int i = 0; i < m.n_configs; i++)
    if (m.configs[i].backend == TP_BACKEND_STOCK) assert_false(m.configs[i].rejected);
  tp_ops_matrix_free(&m);

  /* features not divisible by TP: out features on the gather side, in on the scatter side */
  s = spec_with("debug", "qkv,wo", "3072", "3", "", "");
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_string_equal(find(&m, "debug", "qkv", 3072, 3, TP_BACKEND_STOCK)->reason,
                      "out features 512 not divisible by TP 3");
  assert_string_equal(find(&m, "debug", "wo", 3072, 3, TP_BACKEND_GEMM_ONLY)->reason,
                      "in features 256 not divisible by TP 3");
  tp_ops_matrix_free(&m);
}

/* chunks past the 32 of one phase (kernels/tp_linear_plan.c refuses them at plan time) are
 * rejected here as `run`'s matrix rejects them, never listed as run: 64 divides the rows, so
 * only the range says no. */
static void test_dist_chunks_range(void **state) {
  (void)state;
  tp_ops_matrix m;
  tp_ops_spec s = spec_with("8b", "qkv", "4096", "2", "ce", "32,33,48,64");
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.n_configs, 5 + 4);
  assert_false(m.configs[2].rejected);
  assert_int_equal(m.configs[2].axes.chunks, 32);
  const int chunks[] = {33, 48, 64};
  for (int i = 0; i < 3; i++) {
    const tp_ops_config *c = &m.configs[3 + i];
    assert_int_equal(c->axes.chunks, chunks[i]);
    assert_true(c->rejected);
    assert_false(c->planned);
    char want[64];
    snprintf(want, sizeof want, "chunks %d outside 1..32", chunks[i]);
    assert_string_equal(c->reason, want);
  }
  tp_ops_matrix_free(&m);
}

/* The ring forwards nothing yet: the plan refuses it beyond TP 2 (common/tp_chunk_rule.h's
 * tp_dist_rejection, which both ask), so the matrix rejects it there with the plan's words and
 * lists it as run at TP 2 only. */
static void test_ring_beyond_tp2(void **state) {
  (void)state;
  tp_ops_matrix m;
  tp_ops_spec s = spec_with("8b", "qkv,wo", "4096", "2,4,8", "ring", "");
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  const int tps[] = {2, 4, 8};
  for (int i = 0; i < 3; i++)
    for (int p = 0; p < 2; p++) {
      const tp_ops_config *c =
          find(&m, "llama3-8b", p ? "wo" : "qkv", 4096, tps[i], TP_BACKEND_DIST);
      assert_non_null(c);
      assert_int_equal(c->rejected, tps[i] > 2);
      assert_false(c->planned);
      if (tps[i] > 2) assert_non_null(strstr(c->reason, "ring: beyond TP 2 the ring must forward"));
    }
  tp_ops_matrix_free(&m);
}

/* sm's copy kernel moves 16-byte vectors: the plan refuses sm where a chunk is not a whole number
 * of them (kernels/tp_linear_plan.c), so the matrix rejects it first, never lists it as run. K
 * 4100 makes 8200-byte bf16 rows: 2049 rows per rank (one chunk: auto's too) are not 16-byte
 * whole; 2048 rows in auto's 4 chunks or in 32 are. ce has no such rule. */
static void test_sm_chunk_alignment(void **state) {
  (void)state;
  tp_ops_matrix m;
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  assert_int_equal(tp_ops_spec_set_axis(&s, "shape", "4098x4096x4100,4096x4096x4100"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "schedule", "sm,ce"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "chunks", "0,1,32"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "stock", "plain"), TP_OK);
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.n_cases, 2);
  for (int i = 0; i < m.n_configs; i++) {
    const tp_ops_config *c = &m.configs[i];
    const int sm = c->backend == TP_BACKEND_DIST && c->schedule == TP_SCHED_SM;
    if (sm && c->axes.tokens == 4098 && c->axes.chunks < 32) {
      assert_true(c->rejected);
      assert_false(c->planned);
      assert_string_equal(c->reason, "sm: chunk size not a multiple of 16 bytes (16801800 bytes)");
    } else if (c->backend == TP_BACKEND_DIST && c->axes.tokens == 4098 && c->axes.chunks == 32) {
      assert_string_equal(c->reason, "tokens per rank 2049 not divisible by chunks 32");
    } else if (c->rejected) {
      fail_msg("%s tokens %lld chunks %d rejected: %s", c->axes.backend, (long long)c->axes.tokens,
               c->axes.chunks, c->reason);
    }
  }
  tp_ops_matrix_free(&m);
}

/* A TP group holds at most 16 ranks (kernels/tp_device.h: its symmetric heap maps every peer),
 * yet tp takes up to TP_MAX_DEGREE: past 16 every configuration is rejected with that reason, never
 * listed as run (or planned) for a job that could not even form its group. */
static void test_tp_beyond_group_ranks(void **state) {
  (void)state;
  tp_ops_matrix m;
  tp_ops_spec s = spec_with("8b", "qkv", "4096", "16,32,64", "", "");
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(tp_ops_reject_world(&m, 32), 6); /* tp 16; 32 and 64 by the rule */
  for (int i = 0; i < m.n_configs; i++) {
    const tp_ops_config *c = &m.configs[i];
    assert_true(c->rejected);
    assert_false(c->planned);
    if (c->axes.tp == 16) assert_non_null(strstr(c->reason, "needs a job of 16 workers"));
    else assert_non_null(strstr(c->reason, "a tpbench group holds at most 16 ranks"));
  }
  tp_ops_matrix_free(&m);
}

static void expect_usage(tp_ops_spec s, const char *needle) {
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_EUSAGE);
  assert_null(m.configs);
  if (!strstr(tp_last_error(), needle)) fail_msg("'%s' not in '%s'", needle, tp_last_error());
}

static void test_usage_errors(void **state) {
  (void)state;
  expect_usage(spec_with("8b,7b", "", "", "", "", ""), "unknown model '7b'");
  expect_usage(spec_with("", "", "", "", "fast", ""),
               "unknown schedule 'fast' (valid: auto, ce, sm, ring, multimem)");
  expect_usage(spec_with("", "w1", "", "", "", ""), "unknown proj 'w1' (valid: qkv, wo, w13, w2)");
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  assert_int_equal(tp_str_list_set(&s.dtypes, "fp9"), TP_OK);
  expect_usage(s, "unknown dtype 'fp9' (valid: bf16, fp32, fp8, fp8-row, fp8-block, mxfp8)");
  tp_ops_spec_defaults(&s);
  assert_int_equal(tp_str_list_set(&s.passes, "back"), TP_OK);
  expect_usage(s, "unknown pass 'back'");
  expect_usage(spec_with("8b,llama3-8b", "", "", "", "", ""), "listed twice");
  expect_usage(spec_with("", "", "0", "", "", ""), "tokens: 0 is out of range");
  expect_usage(spec_with("", "", "", "0", "", ""), "tp: 0 is out of range");
  expect_usage(spec_with("", "", "", "", "", "-1"), "chunks: -1 is out of range");
}

static void test_plan_print(void **state) {
  (void)state;
  tp_ops_spec s = spec_with("8b", "qkv", "4100", "1,2", "", "");
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  FILE *f = tmpfile();
  assert_non_null(f);
  tp_ops_matrix_print(&m, f);
  char text[8192] = {0};
  rewind(f);
  size_t got = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  assert_true(got > 0);
  assert_non_null(strstr(text, "dist_gemm needs TP > 1"));
  assert_non_null(strstr(text, "12 configurations, 9 to run, 3 rejected"));
  assert_non_null(strstr(text, "op stock nccl-window"));
  tp_ops_matrix_free(&m);
}

/* ---- shapes, axes, files ---------------------------------------------------------------- */

/* The canonical key of a preset configuration is what it was before shapes and
 * defined models existed: stored databases keep matching. */
static void test_preset_keys_unchanged(void **state) {
  (void)state;
  tp_ops_spec s = spec_with("8b", "w2", "4096", "2", "", "");
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  char key[512];
  tp_config_key(&m.configs[2].axes, key, sizeof key);
  assert_string_equal(key, "kind=op;model=llama3-8b;layer=linear_rs;proj=w2;backend=dist_gemm;"
                           "schedule=auto;chunks=0;tp=2;batch=0;seqlen=0;tokens=4096;m=4096;"
                           "n=4096;k=7168;n_weights=1;dtype=bf16;sp=1;pass=fwd;graph=0;"
                           "save_gathered=0");
  /* plain stock and the collective alone keep an empty schedule, as before the window variant */
  tp_config_key(&m.configs[0].axes, key, sizeof key);
  assert_string_equal(key, "kind=op;model=llama3-8b;layer=linear_rs;proj=w2;backend=stock;"
                           "schedule=;chunks=0;tp=2;batch=0;seqlen=0;tokens=4096;m=4096;"
                           "n=4096;k=7168;n_weights=1;dtype=bf16;sp=1;pass=fwd;graph=0;"
                           "save_gathered=0");
  tp_config_key(&m.configs[4].axes, key, sizeof key);
  assert_non_null(strstr(key, "kind=comm;model=llama3-8b;layer=linear_rs;proj=w2;backend=nccl;"
                              "schedule=;chunks=0;"));
  tp_config_key(&m.configs[1].axes, key, sizeof key);
  assert_non_null(strstr(key, ";backend=stock;schedule=nccl-window;chunks=0;"));
  tp_config_key(&m.configs[5].axes, key, sizeof key);
  assert_non_null(strstr(key, "kind=comm;") && strstr(key, ";schedule=nccl-window;"));
  tp_ops_matrix_free(&m);
}

static void test_shapes(void **state) {
  (void)state;
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  assert_int_equal(tp_ops_spec_set_axis(&s, "shape",
                                        "4096x8192x4096,4096x4096x14336:linear_rs,"
                                        "8192x14336x4096:ag_linear_multi"),
                   TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&s, "tp", "2,4"), TP_OK);
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  memset(&s, 0x5a, sizeof s);     /* the matrix holds its own names */
  assert_int_equal(m.n_cases, 6); /* 3 shapes x 2 TP */
  const tp_ops_case *ag = &m.cases[0], *rs = &m.cases[3], *multi = &m.cases[5];
  assert_string_equal(ag->model->name, "shape");
  assert_string_equal(ag->proj.name, "8192x4096");
  assert_int_equal(ag->tokens, 4096);
  /* Per rank as a model's projection: the gather side splits N, the scatter side K. */
  const tp_config_axes *a = &m.configs[ag->first_config].axes;
  assert_string_equal(a->model, "shape");
  assert_string_equal(a->proj, "8192x4096");
  assert_string_equal(a->op_or_layer, "ag_linear");
  assert_int_equal(a->m, 4096);
  assert_int_equal(a->n, 4096);
  assert_int_equal(a->k, 4096);
  a = &m.configs[rs->first_config].axes;
  assert_string_equal(a->op_or_layer, "linear_rs");
  assert_int_equal(rs->tp, 4);
  assert_int_equal(a->n, 4096);
  assert_int_equal(a->k, 14336 / 4);
  assert_int_equal(multi->proj.n_weights, 2);
  assert_int_equal(m.configs[multi->first_config].axes.n_weights, 2);
  tu_assert_near(m.configs[multi->first_config].flops, 2.0 * 8192 * 14336 * 4096 * 2, 0);
  /* Two shapes of one op and M differ in their keys. */
  char k0[512], k1[512];
  tp_config_key(&m.configs[m.cases[0].first_config].axes, k0, sizeof k0);
  tp_config_key(&m.configs[m.cases[2].first_config].axes, k1, sizeof k1);
  assert_string_not_equal(k0, k1);
  assert_non_null(strstr(k0, "model=shape;layer=ag_linear;proj=8192x4096;"));
  assert_int_equal(tp_ops_runnable(&m), m.n_configs);
  tp_ops_matrix_free(&m);
  /* An M that TP does not divide is rejected with the reason, not refused. */
  tp_ops_spec_defaults(&s);
  assert_int_equal(tp_ops_spec_set_axis(&s, "shape", "4095x64x64"), TP_OK);
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_string_equal(m.configs[0].reason, "tokens 4095 not divisible by TP 2");
  tp_ops_matrix_free(&m);
}

static void expect_shape_usage(const char *shapes, const char *also_axis, const char *needle) {
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  assert_int_equal(tp_ops_spec_set_axis(&s, "shape", shapes), TP_OK);
  if (also_axis) assert_int_equal(tp_ops_spec_set_axis(&s, also_axis, "8b"), TP_OK);
  expect_usage(s, needle);
}

static void test_shape_errors(void **state) {
  (void)state;
  expect_shape_usage("4096x8192", NULL, "expected MxNxK or MxNxK:OP");
  expect_shape_usage("4096x8192x4096:rs", NULL, "unknown op 'rs'");
  expect_shape_usage("0x8192x4096", NULL, "out of range [1, 1073741824]");
  /* the message names the number that is out of range, not the item's rest */
  expect_shape_usage("0x8192x4096", NULL, "': 0 is out of range");
  expect_shape_usage("4096x0x4096", NULL, "': 0 is out of range [1, 16777216]");
  expect_shape_usage("99999999999x1x1", NULL, "': 99999999999 is out of range");
  expect_shape_usage("4096x8192x4096y", NULL, "expected MxNxK");
  expect_shape_usage("4096x8192x4096,4096x8192x4096", NULL, "listed twice");
  expect_shape_usage("4096x8192x4096", "model", "replaces the model, proj and tokens axes");
  /* The defaults of model, proj and tokens are not "given": a shape replaces them. */
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  assert_int_equal(tp_ops_spec_set_axis(&s, "shape", "64x64x64"), TP_OK);
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.n_cases, 1);
  tp_ops_matrix_free(&m);
}

static void test_axes(void **state) {
  (void)state;
  int n = 0;
  const char *const *names = tp_ops_axis_names(&n);
  assert_int_equal(n, 13);
  assert_string_equal(names[0], "model");
  assert_string_equal(names[9], "shape");
  assert_string_equal(names[10], "stock");
  assert_string_equal(names[11], "symm");
  assert_string_equal(names[12], "comm_dtype");
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  assert_int_equal(tp_ops_spec_set_axis(&s, "layer", "ffn"), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "unknown axis 'layer' for ops (valid: model, proj, "
                                          "tokens, dtype, tp, schedule, chunks, pass, "
                                          "save_gathered, shape, stock, symm, comm_dtype)"));
  /* tp's one bound, TP_MAX_DEGREE (4096), as for the --tp flag and run's axis */
  assert_int_equal(tp_ops_spec_set_axis(&s, "tp", "4097"), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "axis tp:"));
  assert_int_equal(tp_ops_spec_set_axis(&s, "tp", "4096"), TP_OK);
  tp_ops_spec_defaults(&s);
  assert_int_equal(tp_ops_spec_set_axis(&s, "tokens", "4096"), TP_OK);
  assert_int_equal(s.tokens.count, 1);
  assert_int_equal(s.given, 1u << 2);
  /* qkv and wo of a model whose attention cannot be expressed: rejected with why. */
  tp_ops_spec d = spec_with("deepseek-v3-dense", "qkv,w13", "4096", "2", "", "");
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&d, &m), TP_OK);
  assert_true(m.configs[0].rejected);
  assert_non_null(strstr(m.configs[0].reason, "multi-head latent attention"));
  assert_false(m.configs[m.cases[1].first_config].rejected);
  tp_ops_matrix_free(&m);
}

/* The stock axis: which stock variants (and collectives alone) each case has. */
static void test_stock_axis(void **state) {
  (void)state;
  tp_ops_spec s = spec_with("8b", "qkv", "4096", "2", "", "");
  assert_int_equal(tp_ops_spec_set_axis(&s, "stock", "plain"), TP_OK);
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.n_configs, 4); /* as before the window variant existed */
  for (int i = 0; i < m.n_configs; i++)
    assert_int_not_equal(m.configs[i].schedule, TP_SCHED_NCCL_WINDOW);
  tp_ops_matrix_free(&m);
  assert_int_equal(tp_ops_spec_set_axis(&s, "stock", "window"), TP_OK);
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.n_configs, 4);
  assert_int_equal(m.configs[0].backend, TP_BACKEND_STOCK);
  assert_int_equal(m.configs[0].schedule, TP_SCHED_NCCL_WINDOW);
  assert_int_equal(m.configs[3].backend, TP_BACKEND_COMM_ONLY);
  assert_string_equal(m.configs[3].axes.schedule, "nccl-window");
  tp_ops_matrix_free(&m);
  assert_int_equal(tp_ops_spec_set_axis(&s, "stock", "window,plain"), TP_OK);
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.configs[0].schedule, TP_SCHED_NCCL_WINDOW); /* in the order listed */
  assert_int_equal(m.configs[1].schedule, TP_SCHED_AUTO);
  tp_ops_matrix_free(&m);
  assert_int_equal(tp_ops_spec_set_axis(&s, "stock", "symmetric"), TP_OK);
  expect_usage(s, "unknown stock 'symmetric' (valid: plain, window)");
  assert_int_equal(tp_ops_spec_set_axis(&s, "stock", "plain,plain"), TP_OK);
  expect_usage(s, "listed twice");
}

/* The symm axis: ipc alone by default (dist_gemm's keys as before it
 * existed); ipc,nccl gives each schedule x chunks both transports, innermost,
 * keyed apart but one case; the stock rows and the references store none; the
 * plan names the transport and says the GPU decides; names are checked. */
static void test_symm_axis(void **state) {
  (void)state;
  tp_ops_spec s = spec_with("8b", "qkv", "4096", "2", "ce,sm", "");
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.n_configs, 7); /* stock x2, ce, sm, the GEMM alone, the collective x2 */
  assert_int_equal(m.configs[2].symm, TP_SYMM_IPC);
  assert_string_equal(m.configs[2].axes.symm, "ipc");
  char key[512], other[512];
  tp_config_key(&m.configs[2].axes, key, sizeof key);
  assert_null(strstr(key, "symm")); /* ipc is the default: not in the key */
  tp_ops_matrix_free(&m);

  assert_int_equal(tp_ops_spec_set_axis(&s, "symm", "ipc,nccl"), TP_OK);
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.n_configs, 9);
  static const tp_schedule sched[] = {TP_SCHED_CE, TP_SCHED_CE, TP_SCHED_SM, TP_SCHED_SM};
  static const tp_symm_transport symm[] = {TP_SYMM_IPC, TP_SYMM_NCCL, TP_SYMM_IPC, TP_SYMM_NCCL};
  for (int i = 0; i < 4; i++) {
    const tp_ops_config *c = &m.configs[2 + i];
    assert_int_equal(c->backend, TP_BACKEND_DIST);
    assert_int_equal(c->schedule, sched[i]);
    assert_int_equal(c->symm, symm[i]);
    assert_string_equal(c->axes.symm, tp_symm_transport_name(symm[i]));
    assert_false(c->rejected);
  }
  for (int i = 0; i < m.n_configs; i++)
    if (m.configs[i].backend != TP_BACKEND_DIST) assert_null(m.configs[i].axes.symm);
  tp_config_key(&m.configs[2].axes, key, sizeof key);
  tp_config_key(&m.configs[3].axes, other, sizeof other);
  assert_string_not_equal(key, other);
  assert_non_null(strstr(other, "symm=nccl"));
  tp_case_key(&m.configs[2].axes, key, sizeof key);
  tp_case_key(&m.configs[3].axes, other, sizeof other);
  assert_string_equal(key, other); /* paired with the case's stock and each other */
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  tp_ops_matrix_print(&m, f);
  fclose(f);
  assert_non_null(strstr(text, "dist_gemm ce chunks=0 symm=nccl"));
  assert_non_null(strstr(text, "decided on the GPU: whether NCCL offers symmetric memory"));
  free(text);
  tp_ops_matrix_free(&m);

  /* TP 1 has no dist_gemm over either transport; the plan needs no GPU note then */
  tp_ops_spec one = spec_with("8b", "qkv", "4096", "1", "ce", "");
  assert_int_equal(tp_ops_spec_set_axis(&one, "symm", "nccl"), TP_OK);
  assert_int_equal(tp_ops_expand(&one, &m), TP_OK);
  assert_true(m.configs[2].rejected);
  assert_non_null(strstr(m.configs[2].reason, "dist_gemm needs TP > 1"));
  f = open_memstream(&text, &len);
  assert_non_null(f);
  tp_ops_matrix_print(&m, f);
  fclose(f);
  assert_null(strstr(text, "whether NCCL offers symmetric memory"));
  free(text);
  tp_ops_matrix_free(&m);

  /* fp8's fused pushes run on the CUDA-IPC heap only: symm=nccl rejected with why, ipc runs */
  tp_ops_spec fp8 = spec_with("8b", "qkv", "4096", "2", "ce", "");
  assert_int_equal(tp_ops_spec_set_axis(&fp8, "dtype", "fp8-row"), TP_OK);
  assert_int_equal(tp_ops_spec_set_axis(&fp8, "symm", "ipc,nccl"), TP_OK);
  assert_int_equal(tp_ops_expand(&fp8, &m), TP_OK);
  int fp8_ipc = 0, fp8_nccl = 0;
  for (int i = 0; i < m.n_configs; i++) {
    const tp_ops_config *c = &m.configs[i];
    if (c->backend != TP_BACKEND_DIST) continue;
    if (c->symm == TP_SYMM_IPC && !c->rejected) fp8_ipc++;
    if (c->symm == TP_SYMM_NCCL) {
      assert_true(c->rejected);
      assert_non_null(strstr(c->reason, "CUDA-IPC heap only"));
      fp8_nccl++;
    }
  }
  assert_true(fp8_ipc > 0);
  assert_int_equal(fp8_nccl, fp8_ipc);
  tp_ops_matrix_free(&m);

  assert_int_equal(tp_ops_spec_set_axis(&s, "symm", "nvshmem"), TP_OK);
  expect_usage(s, "unknown symm 'nvshmem' (valid: ipc, nccl)");
  assert_int_equal(tp_ops_spec_set_axis(&s, "symm", "nccl,nccl"), TP_OK);
  expect_usage(s, "listed twice");
}

static tp_rc load_ops_text(const char *text, tp_ops_spec *s) {
  char path[] = "/tmp/tpbench-ops-matrix-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  tp_rc rc = tp_ops_spec_load(path, s);
  unlink(path);
  return rc;
}

static void test_matrix_file(void **state) {
  (void)state;
  tp_ops_spec s;
  tp_ops_spec_defaults(&s);
  const char *text = "{\"models\": {\"mymodel\": {\"dim\": 4096, \"n_heads\": 32, \"n_kv_heads\": "
                     "8, \"head_dim\": 128, \"ffn_hidden\": 14336, \"vocab\": 128256}},\n"
                     " \"axes\": {\"model\": [\"mymodel\", \"8b\"], \"tokens\": 4096, "
                     "\"proj\": \"w13\"}}";
  assert_int_equal(load_ops_text(text, &s), TP_OK);
  tp_ops_matrix m;
  assert_int_equal(tp_ops_expand(&s, &m), TP_OK);
  assert_int_equal(m.n_cases, 2);
  assert_string_equal(m.cases[0].model->name, "mymodel");
  /* mymodel is llama3-8b's shape: the same per-rank GEMM. */
  assert_int_equal(m.configs[0].axes.n, m.configs[m.cases[1].first_config].axes.n);
  assert_int_equal(m.configs[0].axes.k, m.configs[m.cases[1].first_config].axes.k);
  tp_ops_matrix_free(&m);
  /* ops has no presets; an axis of run's is refused naming ops' axes; s unchanged. */
  tp_ops_spec_defaults(&s);
  assert_int_equal(load_ops_text("{\"preset\": \"quick\"}", &s), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "tpbench ops has no presets"));
  assert_int_equal(load_ops_text("{\"axes\": {\"seqlen\": 4096}}", &s), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "unknown axis 'seqlen' for ops"));
  assert_int_equal(load_ops_text("{\"axes\": {\"tokens\": 64, \"seqlen\": 4096}}", &s), TP_EUSAGE);
  assert_int_equal(s.tokens.count, 3);
  assert_int_equal(s.given, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_expansion),
      cmocka_unit_test(test_axes_and_shapes),
      cmocka_unit_test(test_tp4_and_tp8),
      cmocka_unit_test(test_schedules_times_chunks),
      cmocka_unit_test(test_rejections),
      cmocka_unit_test(test_dist_chunks_range),
      cmocka_unit_test(test_ring_beyond_tp2),
      cmocka_unit_test(test_sm_chunk_alignment),
      cmocka_unit_test(test_tp_beyond_group_ranks),
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_plan_print),
      cmocka_unit_test(test_preset_keys_unchanged),
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_shape_errors),
      cmocka_unit_test(test_axes),
      cmocka_unit_test(test_stock_axis),
      cmocka_unit_test(test_symm_axis),
      cmocka_unit_test(test_matrix_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
