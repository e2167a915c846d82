/*
 * test_layer_matrix.c — bench/matrix/layer_matrix (the matrix of `tpbench run`): the
 * quick and full presets, the order and axes of every configuration, the
 * FLOP counts of the layers, every validity rule with its reason, the host
 * rules `run` applies, usage errors for names and numbers the tool does not
 * take, --axis assignments, and matrix files (JSON) good and bad: strings
 * never cut, FIFOs and other non-files refused without blocking. The dp and
 * ac axes: the dp x tp mesh expanded, placement-checked and planned (no FSDP
 * runtime; more GPUs than the host), its rules, ac's rules (valid modes run),
 * and `run` leaving planned configurations out. The comm_dtype axis: only
 * an fp8 layer at TP > 1 with sp multiplies by it, keyed apart, the graph
 * mixes undisturbed by the values it leaves out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench/matrix/layer_matrix.h"
#include "tests/cpu/bench_testutil.h"

/* The quick preset, then "NAME=LIST" assignments (NULL-terminated). */
static tp_layer_spec spec_with(const char *first, ...) {
  tp_layer_spec s;
  assert_int_equal(tp_layer_spec_preset("quick", &s), TP_OK);
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a; a = va_arg(ap, const char *)) {
    if (tp_layer_spec_assign(&s, a) != TP_OK) fail_msg("%s: %s", a, tp_last_error());
  }
  va_end(ap);
  return s;
}

static void expand_ok(const tp_layer_spec *s, int tp_default, tp_layer_matrix *m) {
  if (tp_layer_expand(s, tp_default, m) != TP_OK) fail_msg("expand: %s", tp_last_error());
}

/* The first configuration of role in a matrix (all cases alike). */
static const tp_layer_config *first_of(const tp_layer_matrix *m, tp_backend role) {
  for (int i = 0; i < m->n_configs; ++i)
    if (m->configs[i].backend == role) return &m->configs[i];
  fail_msg("no configuration of role %d", (int)role);
  return NULL;
}

static void expect_reason(const tp_layer_config *cfg, const char *words) {
  if (!cfg->rejected) fail_msg("not rejected; expected '%s'", words);
  if (!strstr(cfg->reason, words)) fail_msg("'%s' missing from: %s", words, cfg->reason);
  printf("  %s %s: rejected: %s\n", cfg->axes.kind, cfg->axes.backend, cfg->reason);
}

static void test_quick_preset(void **state) {
  (void)state;
  tp_layer_spec s;
  assert_int_equal(tp_layer_spec_preset("quick", &s), TP_OK);
  tp_layer_matrix m;
  expand_ok(&s, 2, &m);
  /* 2 models x 3 layers x 2 seqlens x 2 passes x 2 graph modes */
  assert_int_equal(m.n_cases, 48);
  assert_int_equal(m.n_configs, 288);
  assert_int_equal(tp_layer_runnable(&m), 288);
  /* stock and the collectives alone in both variants: plain, and on NCCL windows */
  static const char *const kinds[] = {"layer", "layer", "layer", "gemm", "comm", "comm"};
  static const tp_backend roles[] = {TP_BACKEND_STOCK,     TP_BACKEND_STOCK,
                                     TP_BACKEND_DIST,      TP_BACKEND_GEMM_ONLY,
                                     TP_BACKEND_COMM_ONLY, TP_BACKEND_COMM_ONLY};
  static const char *const backends[] = {"stock", "stock", "dist_gemm", "cublaslt", "nccl", "nccl"};
  static const tp_schedule scheds[] = {TP_SCHED_AUTO, TP_SCHED_NCCL_WINDOW, TP_SCHED_AUTO,
                                       TP_SCHED_AUTO, TP_SCHED_AUTO,        TP_SCHED_NCCL_WINDOW};
  for (int ci = 0; ci < m.n_cases; ++ci) {
    const tp_layer_case *c = &m.cases[ci];
    assert_int_equal(c->n_configs, 6);
    assert_int_equal(c->first_config, 6 * ci);
    for (int j = 0; j < 6; ++j) {
      const tp_layer_config *cfg = &m.configs[c->first_config + j];
      assert_int_equal(cfg->backend, roles[j]);
      assert_int_equal(cfg->schedule, scheds[j]);
      assert_int_equal(cfg->case_index, ci);
      assert_string_equal(cfg->axes.backend, backends[j]);
      assert_string_equal(cfg->axes.kind, kinds[j]);
      assert_int_equal(cfg->axes.tp, 2);
      assert_int_equal(cfg->axes.batch, 1);
      assert_int_equal(cfg->axes.tokens, cfg->axes.seqlen);
      assert_int_equal(cfg->axes.sp, 1);
      assert_string_equal(cfg->axes.dtype, "bf16");
      assert_null(cfg->axes.proj);
      assert_int_equal(cfg->axes.save_gathered, 0);
    }
    assert_string_equal(m.configs[c->first_config + 2].axes.schedule, "auto");
    assert_null(m.configs[c->first_config].axes.schedule); /* plain stock's key as before */
    assert_string_equal(m.configs[c->first_config + 1].axes.schedule, "nccl-window");
    assert_null(m.configs[c->first_config + 4].axes.schedule);
    assert_string_equal(m.configs[c->first_config + 5].axes.schedule, "nccl-window");
  }
  /* Outermost first: model, layer, ...; graph innermost. */
  assert_string_equal(m.cases[0].model->name, "debug");
  assert_string_equal(tp_layer_name(m.cases[0].layer), "attention");
  assert_int_equal(m.cases[0].seqlen, 2048);
  assert_string_equal(tp_pass_name(m.cases[0].pass), "fwd");
  assert_int_equal(m.cases[0].graph, 0);
  assert_int_equal(m.cases[1].graph, 1);
  assert_string_equal(tp_pass_name(m.cases[2].pass), "fwd+bwd");
  assert_int_equal(m.cases[4].seqlen, 4096);
  assert_string_equal(tp_layer_name(m.cases[8].layer), "ffn");
  assert_string_equal(m.cases[47].model->name, "llama3-8b");
  assert_string_equal(tp_layer_name(m.cases[47].layer), "block");
  /* debug attention, 2048 tokens: QKV 2·2048·256·512 + core 4·2048²·8·32 + wo 2·2048·256·256 */
  assert_true(m.configs[0].flops == 536870912.0 + 4294967296.0 + 268435456.0);
  assert_true(m.configs[12].flops == 3.0 * m.configs[0].flops); /* case 2: fwd+bwd */
  assert_true(m.configs[4].flops == 0.0);                       /* the collectives alone */
  assert_true(m.configs[5].flops == 0.0);
  assert_true(m.configs[3].flops == m.configs[0].flops); /* the GEMMs alone */
  assert_true(m.configs[1].flops == m.configs[0].flops); /* stock on windows */
  tp_layer_matrix_free(&m);
  assert_null(m.configs);
}

static void test_full_preset(void **state) {
  (void)state;
  tp_layer_spec s;
  assert_int_equal(tp_layer_spec_preset("full", &s), TP_OK);
  tp_layer_matrix m;
  expand_ok(&s, 2, &m);
  /* 5 models x 3 layers x 2 dtypes x 2 batches x 2 seqlens x sp x pass x save x graph;
   * per case stock x2, dist_gemm auto/ce/sm, GEMMs alone, collectives alone x2 */
  assert_int_equal(m.n_cases, 1920);
  assert_int_equal(m.n_configs, 1920 * 8);
  int runnable = tp_layer_runnable(&m);
  printf("full: %d of %d configurations to run\n", runnable, m.n_configs);
  assert_true(runnable > 0 && runnable < m.n_configs);
  tp_layer_matrix_free(&m);
  assert_int_equal(tp_layer_spec_preset("huge", &s), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "valid: quick, full"));
}

static void test_layer_flops(void **state) {
  (void)state;
  const tp_model_preset *debug = NULL, *b8 = NULL;
  assert_int_equal(tp_preset_find("debug", &debug), TP_OK);
  assert_int_equal(tp_preset_find("8b", &b8), TP_OK);
  double f = 0;
  assert_int_equal(tp_layer_flops(debug, "ffn", 1, 2048, 0, &f), TP_OK);
  assert_true(f == 6.0 * 2048 * 256 * 768);
  assert_int_equal(tp_layer_flops(debug, "ffn", 2, 1024, 1, &f), TP_OK);
  assert_true(f == 3.0 * 6.0 * 2048 * 256 * 768);
  /* The core counts batch·seqlen², not tokens²: two sequences of 1024 cost half of one of 2048. */
  double one = 0, two = 0;
  assert_int_equal(tp_layer_flops(debug, "attention", 1, 2048, 0, &one), TP_OK);
  assert_int_equal(tp_layer_flops(debug, "attention", 2, 1024, 0, &two), TP_OK);
  assert_true(one - two == 4.0 * 2048.0 * 2048 * 8 * 32 - 4.0 * 2 * 1024.0 * 1024 * 8 * 32);
  /* 8B block, 4096 tokens: attention 618475290624 + FFN 1443109011456 */
  assert_int_equal(tp_layer_flops(b8, "block", 1, 4096, 0, &f), TP_OK);
  assert_true(f == 618475290624.0 + 1443109011456.0);
  assert_int_equal(tp_layer_flops(b8, "moe", 1, 4096, 0, &f), TP_EUSAGE);
  int n = 0;
  const char *const *names = tp_layer_names(&n);
  assert_int_equal(n, 3);
  assert_string_equal(names[2], "block");
}

/* One case's configurations of a spec, expanded at tp_default. */
/* The listing `matrix` prints for m on a host of gpus, into *text (the caller frees it). */
static void listing(const tp_layer_matrix *m, int gpus, char **text) {
  size_t len = 0;
  FILE *f = open_memstream(text, &len);
  assert_non_null(f);
  tp_layer_matrix_print(m, gpus, f);
  fclose(f);
}

static void one_case(tp_layer_spec s, int tp_default, tp_layer_matrix *m) {
  expand_ok(&s, tp_default, m);
  assert_int_equal(m->n_cases, 1);
}

static void test_case_rules(void **state) {
  (void)state;
  tp_layer_matrix m;
  one_case(
      spec_with("model=8b", "layer=block", "seqlen=4096", "pass=fwd", "graph=off", "tp=3", NULL), 2,
      &m);
  for (int i = 0; i < m.n_configs; ++i)
    expect_reason(&m.configs[i], "seqlen 4096 not divisible by TP 3");
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=8b", "layer=ffn", "seqlen=4096", "pass=fwd", "graph=off", "tp=3",
                     "sp=off", NULL),
           2, &m);
  expect_reason(first_of(&m, TP_BACKEND_STOCK), "tokens 4096 not divisible by TP 3");
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=8b", "layer=attention", "seqlen=4096", "pass=fwd", "graph=off", "tp=16",
                     NULL),
           2, &m);
  expect_reason(first_of(&m, TP_BACKEND_STOCK), "n_kv_heads 8 not divisible by TP 16");
  tp_layer_matrix_free(&m);
  /* The FFN has no heads: the same TP is fine there. */
  one_case(
      spec_with("model=8b", "layer=ffn", "seqlen=4096", "pass=fwd", "graph=off", "tp=16", NULL), 2,
      &m);
  assert_int_equal(tp_layer_runnable(&m), 6);
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=debug", "layer=block", "seqlen=2048", "pass=fwd", "graph=off", "tp=16",
                     NULL),
           2, &m);
  expect_reason(first_of(&m, TP_BACKEND_DIST), "n_heads 8 not divisible by TP 16");
  tp_layer_matrix_free(&m);
  one_case(
      spec_with("model=debug", "layer=ffn", "seqlen=2304", "pass=fwd", "graph=off", "tp=9", NULL),
      2, &m);
  expect_reason(first_of(&m, TP_BACKEND_GEMM_ONLY), "ffn_hidden 768 not divisible by TP 9");
  tp_layer_matrix_free(&m);
}

static void test_save_gathered_rules(void **state) {
  (void)state;
  tp_layer_matrix m;
  one_case(spec_with("model=debug", "layer=ffn", "seqlen=2048", "pass=fwd", "graph=off",
                     "save_gathered=on", NULL),
           2, &m);
  expect_reason(first_of(&m, TP_BACKEND_STOCK),
                "save_gathered=on keeps the forward's gathered input");
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=debug", "layer=ffn", "seqlen=2048", "pass=fwd+bwd", "graph=off",
                     "save_gathered=on", "sp=off", NULL),
           2, &m);
  expect_reason(first_of(&m, TP_BACKEND_STOCK), "save_gathered=on needs sequence parallelism");
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=debug", "layer=block", "seqlen=2048", "pass=fwd+bwd", "graph=on",
                     "save_gathered=on", NULL),
           2, &m);
  assert_int_equal(tp_layer_runnable(&m), 6);
  assert_int_equal(m.configs[0].axes.save_gathered, 1);
  assert_int_equal(m.configs[0].axes.graph, 1);
  tp_layer_matrix_free(&m);
}

static void test_dist_gemm_rules(void **state) {
  (void)state;
  tp_layer_matrix m;
  one_case(spec_with("model=debug", "layer=attention", "seqlen=2048", "pass=fwd", "graph=off",
                     "sp=off", NULL),
           2, &m);
  expect_reason(first_of(&m, TP_BACKEND_DIST), "dist_gemm needs sequence parallelism");
  assert_false(first_of(&m, TP_BACKEND_STOCK)->rejected);
  assert_false(first_of(&m, TP_BACKEND_GEMM_ONLY)->rejected);
  assert_false(first_of(&m, TP_BACKEND_COMM_ONLY)->rejected);
  assert_int_equal(first_of(&m, TP_BACKEND_STOCK)->axes.sp, 0);
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=debug", "layer=attention", "seqlen=2048", "pass=fwd", "graph=off",
                     "tp=1", NULL),
           2, &m);
  expect_reason(first_of(&m, TP_BACKEND_DIST), "dist_gemm needs TP > 1");
  expect_reason(first_of(&m, TP_BACKEND_COMM_ONLY), "TP 1 has no collective to time");
  assert_false(first_of(&m, TP_BACKEND_STOCK)->rejected);
  assert_false(first_of(&m, TP_BACKEND_GEMM_ONLY)->rejected);
  tp_layer_matrix_free(&m);
}

static void test_empty_spec_is_usage(void **state) {
  (void)state;
  tp_layer_spec empty;
  memset(&empty, 0, sizeof empty);
  tp_layer_matrix m;
  assert_int_equal(tp_layer_expand(&empty, 2, &m), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "axis model: no value given"));
  assert_null(m.configs);
}

static void test_chunks_and_schedules(void **state) {
  (void)state;
  tp_layer_matrix m;
  one_case(spec_with("model=debug", "layer=ffn", "seqlen=2048", "pass=fwd", "graph=off",
                     "chunks=0,3,4,33", "schedule=auto,ce,sm,ring,multimem", NULL),
           2, &m);
  /* stock x2, 5 schedules x 4 chunk counts, GEMMs, collectives x2 */
  assert_int_equal(m.n_configs, 2 + 20 + 3);
  for (int i = 2; i <= 21; ++i) {
    const tp_layer_config *cfg = &m.configs[i];
    assert_int_equal(cfg->backend, TP_BACKEND_DIST);
    /* multimem has no kernels in this build, whatever the chunks; the ring runs at TP 2 */
    if (strcmp(cfg->axes.schedule, "multimem") == 0)
      expect_reason(cfg, "multimem: not implemented in this build");
    else if (cfg->axes.chunks == 3)
      expect_reason(cfg, "tokens per rank 1024 not divisible by chunks 3");
    else if (cfg->axes.chunks == 33) expect_reason(cfg, "chunks 33 outside 1..32");
    else assert_false(cfg->rejected);
  }
  assert_string_equal(m.configs[2].axes.schedule, "auto");
  assert_int_equal(m.configs[3].axes.chunks, 3);
  char *text = NULL;
  listing(&m, 2, &text);
  assert_true(strlen(text) > 0);
  assert_non_null(strstr(text, "dist_gemm multimem chunks=4"));
  assert_non_null(strstr(text, "NCCL's runtime decides at prepare time"));
  assert_non_null(strstr(text, "1 cases, 25 configurations: 13 to run, 12 rejected"));
  assert_non_null(strstr(text, "layer stock nccl-window"));
  assert_non_null(strstr(text, "comm nccl nccl-window"));
  free(text);
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=debug", "layer=ffn", "seqlen=2048", "pass=fwd", "graph=off",
                     "backend=dist_gemm", NULL),
           2, &m);
  assert_int_equal(m.n_configs, 4); /* no stock: dist_gemm, the GEMMs, both collectives alone */
  assert_int_equal(m.configs[0].backend, TP_BACKEND_DIST);
  tp_layer_matrix_free(&m);
}

static void test_tp_default_and_list(void **state) {
  (void)state;
  tp_layer_matrix m;
  tp_layer_spec s =
      spec_with("model=debug", "layer=ffn", "seqlen=2048", "pass=fwd", "graph=off", NULL);
  expand_ok(&s, 4, &m);
  assert_int_equal(m.configs[0].axes.tp, 4);
  tp_layer_matrix_free(&m);
  /* plain stock only: four configurations a case, as the positions below say */
  s = spec_with("model=debug", "layer=ffn", "seqlen=2048", "pass=fwd", "graph=off", "tp=1,2,4",
                "stock=plain", NULL);
  expand_ok(&s, 8, &m);
  assert_int_equal(m.n_cases, 3);
  /* `run` on 2 GPUs rejects a smaller mesh and plans a larger one, with the reason. */
  int n = tp_layer_reject_world(&m, 2);
  assert_int_equal(n, 2 + 4); /* TP 1's dist_gemm and comm were rejected already */
  expect_reason(&m.configs[0], "dp 1 x tp 1 needs a job of 1 workers; this one has 2 (--gpus 1)");
  assert_false(m.configs[0].planned);
  assert_false(m.configs[4].rejected);
  expect_reason(&m.configs[8], "needs 4 GPUs (dp 1 x tp 4); this job has 2");
  assert_true(m.configs[8].planned);
  assert_int_equal(tp_layer_planned(&m), 4);
  n = tp_layer_reject_no_peer_access(&m);
  assert_int_equal(n, 1); /* the one dist_gemm left */
  expect_reason(&m.configs[5], "dist_gemm needs peer access");
  assert_false(m.configs[4].rejected);
  tp_layer_matrix_free(&m);
}

static void expect_usage(const char *assignment, const char *words) {
  tp_layer_spec s;
  assert_int_equal(tp_layer_spec_preset("quick", &s), TP_OK);
  tp_rc rc = tp_layer_spec_assign(&s, assignment);
  tp_layer_matrix m;
  if (rc == TP_OK) rc = tp_layer_expand(&s, 2, &m);
  if (rc != TP_EUSAGE) fail_msg("%s: expected a usage error, got %s", assignment, tp_rc_name(rc));
  if (!strstr(tp_last_error(), words))
    fail_msg("%s: '%s' missing from: %s", assignment, words, tp_last_error());
  printf("  %s: %s\n", assignment, tp_last_error());
}

static void test_usage_errors(void **state) {
  (void)state;
  expect_usage("colour=red", "unknown axis 'colour' (valid: model, layer, backend");
  expect_usage("layer=mlp", "axis layer: unknown value 'mlp' (valid: attention, ffn, block)");
  expect_usage("pass=bwd", "valid: fwd, fwd+bwd");
  expect_usage("model=9b", "unknown model '9b'");
  expect_usage("model=8b,llama3-8b", "axis model: 'llama3-8b' is listed twice");
  expect_usage("seqlen=2048,2048", "axis seqlen: 2048 is listed twice");
  expect_usage("tp=0", "axis tp:");
  expect_usage("batch=0", "axis batch:");
  expect_usage("chunks=65", "axis chunks:");
  expect_usage("seqlen=abc", "axis seqlen:");
  expect_usage("seqlen", "is not NAME=V1,V2");
  expect_usage("=2048", "is not NAME=V1,V2");
  expect_usage("seqlen=", "is not NAME=V1,V2");
  expect_usage("dtype=bf16,,fp32", "axis dtype:");
  expect_usage("batch=1048576", "is more than 1073741824 tokens");
  tp_layer_spec s;
  assert_int_equal(tp_layer_spec_preset("full", &s), TP_OK);
  assert_int_equal(tp_layer_spec_assign(&s, "seqlen=1,2,3"), TP_OK);
  assert_int_equal(tp_layer_spec_assign(&s, "batch=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,"
                                            "20,21,22,23,24,25,26,27,28,29,30,31,32"),
                   TP_OK);
  tp_layer_matrix m;
  assert_int_equal(tp_layer_expand(&s, 2, &m), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "more than the 200000 accepted"));
}

/* ---- matrix files ---------------------------------------------------------------------- */

static char *write_file(const char *text) {
  char *path = strdup("/tmp/tpbench-matrix-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static tp_rc load_text(const char *text, const char *preset, tp_layer_spec *s) {
  char *path = write_file(text);
  tp_rc rc = tp_layer_spec_load(path, preset, s);
  unlink(path);
  free(path);
  return rc;
}

static void test_matrix_file(void **state) {
  (void)state;
  tp_layer_spec s;
  const char *text =
      "{\"preset\": \"full\", \"description\": \"FFN only, two lengths\",\n"
      " \"axes\": {\"model\": \"debug\", \"layer\": [\"ffn\"], \"seqlen\": [128, 256],"
      " \"sp\": true, \"graph\": [false, true], \"dtype\": \"bf16\"}}\n";
  assert_int_equal(load_text(text, NULL, &s), TP_OK);
  tp_layer_matrix m;
  expand_ok(&s, 2, &m);
  /* full's batch 1,2, pass x2, save x2 remain; model, layer, seqlen, sp, graph, dtype from the file
   */
  assert_int_equal(m.n_cases, 2 * 2 * 2 * 2 * 2);
  assert_int_equal(m.cases[0].seqlen, 128);
  assert_string_equal(tp_layer_name(m.cases[0].layer), "ffn");
  assert_int_equal(m.cases[0].sp, 1);
  assert_int_equal(m.cases[1].graph, 1);
  assert_int_equal(m.cases[0].n_configs, 8); /* full's three schedules, both stock variants */
  tp_layer_matrix_free(&m);
  /* --preset wins over the file's preset. */
  assert_int_equal(load_text(text, "quick", &s), TP_OK);
  expand_ok(&s, 2, &m);
  assert_int_equal(m.cases[0].n_configs, 6);
  tp_layer_matrix_free(&m);
  /* No preset at all: quick. */
  assert_int_equal(load_text("{\"axes\": {\"seqlen\": 512}}", NULL, &s), TP_OK);
  expand_ok(&s, 2, &m);
  assert_int_equal(m.n_cases, 24);
  tp_layer_matrix_free(&m);
}

/* Models defined in the file: expanded like presets, the matrix holding its
 * own copies (the spec may go away), FLOPs from the file's figures. */
static void test_matrix_file_models(void **state) {
  (void)state;
  tp_layer_spec *s = calloc(1, sizeof *s);
  assert_non_null(s);
  const char *text =
      "{\"models\": {\"mymodel\": {\"dim\": 4096, \"n_heads\": 32, \"n_kv_heads\": 8,"
      " \"head_dim\": 128, \"ffn_hidden\": 14336, \"vocab\": 128256},\n"
      "            \"wide\": {\"dim\": 5120, \"n_heads\": 64, \"n_kv_heads\": 8,"
      " \"head_dim\": 128, \"ffn_hidden\": 1000}},\n"
      " \"axes\": {\"model\": [\"mymodel\", \"8b\", \"wide\"], \"layer\": [\"ffn\", \"attention\"],"
      " \"seqlen\": 4096, \"graph\": false, \"pass\": \"fwd\"}}";
  assert_int_equal(load_text(text, NULL, s), TP_OK);
  assert_int_equal(s->defined.count, 2);
  tp_layer_matrix m;
  expand_ok(s, 4, &m);
  memset(s, 0xa5, sizeof *s); /* the matrix must not point into the spec */
  free(s);
  assert_int_equal(m.n_cases, 6);
  assert_string_equal(m.cases[0].model->name, "mymodel");
  assert_string_equal(m.configs[m.cases[0].first_config].axes.model, "mymodel");
  assert_string_equal(m.cases[2].model->name, "llama3-8b");
  /* mymodel has llama3-8b's figures, so the same FLOPs. */
  tu_assert_near(m.configs[m.cases[0].first_config].flops, m.configs[m.cases[2].first_config].flops,
                 0);
  const tp_layer_case *wide_ffn = &m.cases[4];
  assert_string_equal(wide_ffn->model->name, "wide");
  tu_assert_near(m.configs[wide_ffn->first_config].flops, 6.0 * 4096 * 5120 * 1000, 0);
  assert_int_equal(m.cases[5].model->head_dim, 128);
  assert_int_equal(tp_layer_runnable(&m), m.n_configs);
  tp_layer_matrix_free(&m);
  /* head_dim left out: dim / n_heads. */
  tp_layer_spec t;
  assert_int_equal(load_text("{\"models\": {\"m\": {\"dim\": 2048, \"n_heads\": 16,"
                             " \"n_kv_heads\": 4, \"ffn_hidden\": 8192}}}",
                             NULL, &t),
                   TP_OK);
  assert_int_equal(t.defined.models[0].head_dim, 128);
  assert_int_equal(t.defined.models[0].vocab, 0);
}

/* sm's copy kernel moves 16-byte vectors: the plan (kernels/tp_linear_plan.c) refuses sm where a
 * chunk is not a whole number of them, so the matrix rejects it first, naming the projection,
 * never lists it as run. A model 100 wide moves 200-byte bf16 rows: 1 row per rank (seqlen 2)
 * is not 16-byte whole, 2048 rows are; ce has no such rule. */
static void test_sm_chunk_alignment(void **state) {
  (void)state;
  tp_layer_spec s;
  const char *text = "{\"models\": {\"narrow\": {\"dim\": 100, \"n_heads\": 2, \"n_kv_heads\": 2,"
                     " \"head_dim\": 50, \"ffn_hidden\": 200}},\n"
                     " \"axes\": {\"model\": \"narrow\", \"layer\": \"ffn\", \"seqlen\": [2, 4096],"
                     " \"pass\": [\"fwd\", \"fwd+bwd\"], \"graph\": false, \"stock\": \"plain\","
                     " \"schedule\": [\"sm\", \"ce\"], \"chunks\": [0, 1]}}";
  assert_int_equal(load_text(text, NULL, &s), TP_OK);
  tp_layer_matrix m;
  expand_ok(&s, 2, &m);
  assert_int_equal(m.n_cases, 4);
  for (int ci = 0; ci < m.n_cases; ++ci) {
    const tp_layer_case *c = &m.cases[ci];
    assert_int_equal(c->n_configs, 7);
    for (int i = c->first_config; i < c->first_config + c->n_configs; ++i) {
      const tp_layer_config *cfg = &m.configs[i];
      const int sm = cfg->backend == TP_BACKEND_DIST && cfg->schedule == TP_SCHED_SM;
      if (sm && c->seqlen == 2) {
        assert_false(cfg->planned);
        expect_reason(cfg, "w13: sm: chunk size not a multiple of 16 bytes (200 bytes)");
      } else if (cfg->rejected) {
        fail_msg("%s %s seqlen %d rejected: %s", cfg->axes.backend,
                 cfg->axes.schedule ? cfg->axes.schedule : "-", c->seqlen, cfg->reason);
      }
    }
  }
  tp_layer_matrix_free(&m);
}

/* DeepSeek-V3's MLA is refused for attention and block with the reason; its
 * dense FFN runs. */
static void test_no_attention_model(void **state) {
  (void)state;
  tp_layer_spec s;
  assert_int_equal(tp_layer_spec_preset("quick", &s), TP_OK);
  assert_int_equal(tp_layer_spec_assign(&s, "model=deepseek-v3-dense"), TP_OK);
  assert_int_equal(tp_layer_spec_assign(&s, "graph=off"), TP_OK);
  assert_int_equal(tp_layer_spec_assign(&s, "pass=fwd"), TP_OK);
  assert_int_equal(tp_layer_spec_assign(&s, "seqlen=4096"), TP_OK);
  tp_layer_matrix m;
  expand_ok(&s, 2, &m);
  assert_int_equal(m.n_cases, 3); /* attention, ffn, block */
  for (int c = 0; c < m.n_cases; c++)
    for (int i = 0; i < m.cases[c].n_configs; i++) {
      const tp_layer_config *cfg = &m.configs[m.cases[c].first_config + i];
      if (m.cases[c].layer == TP_LAYER_FFN) {
        assert_false(cfg->rejected);
      } else {
        assert_true(cfg->rejected);
        assert_non_null(strstr(cfg->reason, "deepseek-v3-dense: DeepSeek-V3 attention is multi-head"
                                            " latent attention"));
      }
    }
  tp_layer_matrix_free(&m);
}

static void expect_file_error(const char *text, tp_rc code, const char *words) {
  tp_layer_spec s;
  tp_rc rc = load_text(text, NULL, &s);
  if (rc != code) fail_msg("%s: expected %s, got %s", text, tp_rc_name(code), tp_rc_name(rc));
  if (!strstr(tp_last_error(), words)) fail_msg("'%s' missing from: %s", words, tp_last_error());
  printf("  %s\n", tp_last_error());
}

static void test_matrix_file_errors(void **state) {
  (void)state;
  expect_file_error("[1, 2]", TP_EUSAGE, "must hold one JSON object");
  expect_file_error("{\"axis\": {}}", TP_EUSAGE, "unknown key \"axis\" (valid: preset, axes");
  expect_file_error("{\"axes\": [1]}", TP_EUSAGE, "\"axes\" must be an object");
  expect_file_error("{\"preset\": 3}", TP_EUSAGE, "\"preset\" must be a string");
  expect_file_error("{\"preset\": \"huge\"}", TP_EUSAGE, "unknown preset 'huge'");
  expect_file_error("{\"axes\": {\"seqlen\": {\"a\": 1}}}", TP_EUSAGE,
                    "axes.seqlen: expected a string, a whole number, a boolean");
  expect_file_error("{\"axes\": {\"seqlen\": [1.5]}}", TP_EUSAGE, "axes.seqlen: expected");
  expect_file_error("{\"axes\": {\"seqlen\": []}}", TP_EUSAGE, "axes.seqlen: an empty list");
  expect_file_error("{\"axes\": {\"colour\": \"red\"}}", TP_EUSAGE, "unknown axis 'colour'");
  expect_file_error("{\"axes\": {\"seqlen\": [0]}}", TP_EUSAGE, "axis seqlen:");
  expect_file_error("{\"axes\": {\"model\": \"8b\",}}", TP_EUSAGE, ":1:");
  expect_file_error("{\"preset\": \"quick\", \"preset\": \"full\"}", TP_EUSAGE, "duplicate");
  /* Model definitions: every field checked, named by its path. */
  expect_file_error("{\"models\": [1]}", TP_EUSAGE, "\"models\" must be an object");
  expect_file_error("{\"models\": {\"m\": 3}}", TP_EUSAGE, "models.m: expected an object");
  expect_file_error("{\"models\": {\"m\": {\"dim\": 64, \"n_heads\": 2, \"n_kv_heads\": 1,"
                    " \"ffn_hidden\": 8, \"hidden\": 1}}}",
                    TP_EUSAGE, "models.m: unknown field \"hidden\" (valid: dim, n_heads");
  expect_file_error("{\"models\": {\"m\": {\"dim\": 64, \"n_heads\": 2, \"ffn_hidden\": 8}}}",
                    TP_EUSAGE, "models.m: \"n_kv_heads\" is missing");
  expect_file_error("{\"models\": {\"m\": {\"dim\": \"64\", \"n_heads\": 2, \"n_kv_heads\": 1,"
                    " \"ffn_hidden\": 8}}}",
                    TP_EUSAGE, "models.m.dim: expected a whole number");
  expect_file_error("{\"models\": {\"m\": {\"dim\": 64, \"n_heads\": 2, \"n_kv_heads\": 1,"
                    " \"ffn_hidden\": 0}}}",
                    TP_EUSAGE, "models.m.ffn_hidden: 0 is not a positive whole number");
  expect_file_error("{\"models\": {\"m\": {\"dim\": 64, \"n_heads\": 3, \"n_kv_heads\": 1,"
                    " \"ffn_hidden\": 8}}}",
                    TP_EUSAGE, "head_dim is not given and dim 64 is not a multiple of n_heads 3");
  expect_file_error("{\"models\": {\"8b\": {\"dim\": 64, \"n_heads\": 2, \"n_kv_heads\": 1,"
                    " \"ffn_hidden\": 8}}}",
                    TP_EUSAGE, "models.8b: model name '8b' is a preset's (llama3-8b)");
  expect_file_error("{\"models\": {\"m\": {\"dim\": 64, \"n_heads\": 4, \"n_kv_heads\": 3,"
                    " \"ffn_hidden\": 8}}}",
                    TP_EUSAGE, "not a multiple of n_kv_heads 3");
  /* A model the axes name must exist: the expansion says which ones do. */
  tp_layer_spec bad;
  assert_int_equal(load_text("{\"models\": {\"m\": {\"dim\": 64, \"n_heads\": 2, \"n_kv_heads\":"
                             " 1, \"ffn_hidden\": 8}}, \"axes\": {\"model\": \"n\"}}",
                             NULL, &bad),
                   TP_OK);
  tp_layer_matrix none;
  assert_int_equal(tp_layer_expand(&bad, 2, &none), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "unknown model 'n'"));
  assert_non_null(strstr(tp_last_error(), "deepseek-v3-dense, m, or llama3-1b"));
  tp_layer_spec s;
  assert_int_equal(tp_layer_spec_load("/nonexistent/matrix.json", NULL, &s), TP_EIO);
}

/* A string value was once cut at 127 characters: 124 zeros and "2048junk"
 * planned seqlen 204. Over-long, empty and comma-holding strings are
 * refused now; a value of exactly 127 characters is still judged as one. */
static void test_matrix_file_strings(void **state) {
  (void)state;
  char text[512], value[200];
  memset(value, '0', 124);
  snprintf(value + 124, sizeof value - 124, "2048junk");
  snprintf(text, sizeof text, "{\"axes\": {\"seqlen\": [\"%s\"]}}", value);
  expect_file_error(text, TP_EUSAGE,
                    "axes.seqlen: the value \"00000000000000000000...\" is 132 "
                    "characters long, at most 127");
  memset(value, '0', 123);
  snprintf(value + 123, sizeof value - 123, "2048");
  snprintf(text, sizeof text, "{\"axes\": {\"seqlen\": \"%s\"}}", value);
  tp_layer_spec s;
  assert_int_equal(load_text(text, NULL, &s), TP_OK); /* 127 characters: 2048 */
  tp_layer_matrix m;
  expand_ok(&s, 2, &m);
  assert_int_equal(m.cases[0].seqlen, 2048);
  tp_layer_matrix_free(&m);
  expect_file_error("{\"axes\": {\"model\": \"8b,70b\"}}", TP_EUSAGE,
                    "axes.model: \"8b,70b\" holds a comma");
  expect_file_error("{\"axes\": {\"model\": [\"\"]}}", TP_EUSAGE, "axes.model: an empty string");
}

/* --matrix naming a FIFO blocked forever in open(); a FIFO, a folder or a
 * device is refused at once, and a file over 1 MiB is refused. */
static void test_matrix_file_not_regular(void **state) {
  (void)state;
  char dir[] = "/tmp/tpbench-matrix-fifo-XXXXXX", fifo[64];
  assert_non_null(mkdtemp(dir));
  snprintf(fifo, sizeof fifo, "%s/matrix.json", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  tp_layer_spec s;
  alarm(10); /* a blocking open ends the test instead of hanging it */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(tp_layer_spec_load(fifo, NULL, &s), TP_EUSAGE);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  alarm(0);
  assert_true(t1.tv_sec - t0.tv_sec < 1 || (t1.tv_sec - t0.tv_sec == 1 && t1.tv_nsec < t0.tv_nsec));
  assert_non_null(strstr(tp_last_error(), "is not a regular file"));
  unlink(fifo);
  rmdir(dir);
  assert_int_equal(tp_layer_spec_load("/tmp", NULL, &s), TP_EUSAGE);
  assert_int_equal(tp_layer_spec_load("/dev/zero", NULL, &s), TP_EUSAGE);

  /* 1 MiB of spaces and then the object: too large to read. */
  char *path = strdup("/tmp/tpbench-matrix-big-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  assert_non_null(f);
  for (int i = 0; i < (1 << 20); i++) fputc(' ', f);
  fputs("{}", f);
  fclose(f);
  assert_int_equal(tp_layer_spec_load(path, NULL, &s), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "larger than 1048576 bytes"));
  unlink(path);
  free(path);
}

/* ---- dp and ac --------------------------------------------------------------------------- */

#define HOST_PLAN "needs 4 GPUs (dp 2 x tp 2); the host has 2"

static void expect_planned(const tp_layer_config *cfg, const char *words) {
  if (!cfg->planned || !cfg->rejected) fail_msg("not planned; expected '%s'", words);
  if (!strstr(cfg->reason, words)) fail_msg("'%s' missing from: %s", words, cfg->reason);
  printf("  %s %s: planned: %s\n", cfg->axes.kind, cfg->axes.backend, cfg->reason);
}

/* dp x tp with both > 1 expands, passes every rule and the mesh's placement
 * check, and runs where the host has the GPUs (FSDP over each TP index's dp
 * group, the TP layer inside each TP group); on a host of 2 it is planned
 * for the GPUs alone, never run as dp 1. */
static void test_dp_mesh_expansion(void **state) {
  (void)state;
  tp_layer_matrix m;
  tp_layer_spec s = spec_with("model=8b", "layer=block", "seqlen=4096", "batch=2", "pass=fwd+bwd",
                              "graph=off", "tp=1,2", "dp=1,2", NULL);
  expand_ok(&s, 2, &m);
  assert_int_equal(m.n_cases, 4); /* tp 1, 2 x dp 1, 2: dp is the innermost case axis */
  assert_int_equal(m.cases[1].dp, 2);
  assert_int_equal(m.cases[1].tp, 1);
  assert_int_equal(m.cases[3].dp, 2);
  assert_int_equal(m.cases[3].tp, 2);
  /* No rule rejects the 2 x 2 mesh's stock, dist_gemm, GEMMs and collectives: all run. */
  const tp_layer_case *c = &m.cases[3];
  for (int i = c->first_config; i < c->first_config + c->n_configs; ++i)
    assert_false(m.configs[i].rejected);
  /* dp 2 x tp 1 runs as dp 1 x tp 1 does (stock x2, gemm). */
  for (int i = 0; i < m.n_configs; ++i) {
    const tp_layer_case *ci = &m.cases[m.configs[i].case_index];
    if (ci->tp == 1)
      assert_int_equal(m.configs[i].rejected,
                       m.configs[i - (ci->dp == 2 ? m.cases[0].n_configs : 0)].rejected);
  }
  assert_int_equal(tp_layer_runnable(&m), 3 + 3 + 6 + 6); /* tp 1 (dp 1, 2): 3 each; tp 2: 6 */
  assert_int_equal(tp_layer_plan_host(&m, 2), 6);         /* the 2 x 2 mesh's six */
  expect_planned(&m.configs[c->first_config], HOST_PLAN);
  tp_layer_matrix_free(&m);
  /* On a host of 4 nothing is planned: the mesh runs. */
  expand_ok(&s, 2, &m);
  assert_int_equal(tp_layer_plan_host(&m, 4), 0);
  assert_false(m.configs[m.cases[3].first_config].rejected);
  assert_int_equal(tp_layer_planned(&m), 0);
  assert_int_equal(tp_layer_rejected(&m), 6); /* tp 1 (dp 1 and 2): dist_gemm and comm x2 */
  tp_layer_matrix_free(&m);
}

/* The mesh's rules: batch split over dp, FSDP's shard of each parameter. */
/* A job's world is one group (its symmetric heap maps every peer: at most 16 ranks,
 * kernels/tp_device.h), so a mesh of more than 16 ranks is rejected with that reason whatever
 * the host, never listed as run or as planned for a larger host. */
static void test_mesh_beyond_group_ranks(void **state) {
  (void)state;
  tp_layer_matrix m;
  tp_layer_spec s = spec_with("model=8b", "layer=ffn", "seqlen=4096", "batch=32", "pass=fwd",
                              "graph=off", "tp=1,16,32", "dp=1,32", NULL);
  expand_ok(&s, 32, &m);
  tp_layer_reject_world(&m, 32);
  int beyond = 0;
  for (int i = 0; i < m.n_configs; ++i) {
    const tp_layer_config *cfg = &m.configs[i];
    const int ranks = m.cases[cfg->case_index].dp * cfg->axes.tp;
    if (ranks <= 16) continue;
    ++beyond;
    assert_false(cfg->planned);
    expect_reason(cfg, "a tpbench group holds at most 16 ranks");
  }
  assert_true(beyond > 0);
  tp_layer_matrix_free(&m);
}

static void test_dp_rules(void **state) {
  (void)state;
  tp_layer_matrix m;
  one_case(spec_with("model=8b", "layer=ffn", "seqlen=4096", "batch=1", "pass=fwd", "graph=off",
                     "tp=2", "dp=2", NULL),
           2, &m);
  expect_reason(first_of(&m, TP_BACKEND_STOCK), "batch 1 not divisible by dp 2");
  assert_false(first_of(&m, TP_BACKEND_STOCK)->planned);
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=8b", "layer=attention", "seqlen=4096", "batch=3", "pass=fwd",
                     "graph=off", "tp=2", "dp=3", NULL),
           2, &m);
  expect_reason(first_of(&m, TP_BACKEND_DIST),
                "placement on the dp 3 x tp 2 mesh: attention.norm.weight: dp=3 shards dim 0 of "
                "4096");
  tp_layer_matrix_free(&m);
  /* dist_gemm's chunks divide the rows of one rank of the mesh: 2 x 4096 / (2 x 2) = 2048. */
  one_case(spec_with("model=8b", "layer=ffn", "seqlen=4096", "batch=2", "pass=fwd", "graph=off",
                     "tp=2", "dp=2", "chunks=3", NULL),
           2, &m);
  expect_reason(first_of(&m, TP_BACKEND_DIST), "tokens per rank 2048 not divisible by chunks 3");
  assert_false(first_of(&m, TP_BACKEND_DIST)->planned);
  tp_layer_matrix_free(&m);
}

/* ac: needs a backward; full cannot keep the gathered input; valid ones run
 * (block_run.c recomputes) and keep their ac in the stored axes. */
static void test_ac_rules(void **state) {
  (void)state;
  tp_layer_matrix m;
  tp_layer_spec s = spec_with("model=8b", "layer=block", "seqlen=4096", "pass=fwd", "graph=off",
                              "ac=selective", NULL);
  one_case(s, 2, &m);
  expect_reason(first_of(&m, TP_BACKEND_STOCK),
                "ac=selective recomputes activations in the backward; pass fwd has none");
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=8b", "layer=block", "seqlen=4096", "pass=fwd+bwd", "graph=off",
                     "ac=full", "save_gathered=on", NULL),
           2, &m);
  expect_reason(first_of(&m, TP_BACKEND_DIST), "ac=full recomputes the forward, its all-gathers");
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=8b", "layer=ffn", "seqlen=4096", "pass=fwd+bwd", "graph=on",
                     "ac=selective", "save_gathered=on", NULL),
           2, &m);
  assert_int_equal(tp_layer_runnable(&m), m.n_configs); /* stock, dist_gemm, both halves */
  assert_int_equal(tp_layer_planned(&m), 0);
  assert_int_equal(m.cases[0].ac, TP_AC_SELECTIVE);
  for (int i = 0; i < m.n_configs; ++i) assert_string_equal(m.configs[i].axes.ac, "selective");
  tp_layer_matrix_free(&m);
  /* full without save_gathered runs at TP 1 (stock and the GEMMs alone); none is stored as none */
  tp_layer_spec s2 = spec_with("model=8b", "layer=block", "seqlen=4096", "pass=fwd+bwd",
                               "graph=off", "tp=1", "ac=none,full", "stock=plain", NULL);
  expand_ok(&s2, 1, &m);
  assert_int_equal(m.n_cases, 2); /* ac is the innermost case axis */
  assert_int_equal(m.cases[0].ac, TP_AC_NONE);
  assert_int_equal(m.cases[1].ac, TP_AC_FULL);
  assert_int_equal(tp_layer_runnable(&m), 2 + 2);
  assert_int_equal(tp_layer_drop_planned(&m, NULL), 0);
  assert_string_equal(m.configs[m.cases[1].first_config].axes.ac, "full");
  assert_string_equal(m.configs[0].axes.ac, "none");
  tp_layer_matrix_free(&m);
  assert_string_equal(tp_ac_name(TP_AC_FULL), "full");
  tp_layer_spec bad;
  assert_int_equal(tp_layer_spec_preset("quick", &bad), TP_OK);
  assert_int_equal(tp_layer_spec_assign(&bad, "ac=some"), TP_OK);
  assert_int_equal(tp_layer_expand(&bad, 2, &m), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "(valid: none, selective, full)"));
}

/* The stock axis of run: plain only is the matrix before the window variant;
 * window only has no plain stock; the collectives alone follow it even
 * without stock in the backends; an unknown variant is a usage error. */
static void test_stock_axis(void **state) {
  (void)state;
  tp_layer_matrix m;
  one_case(spec_with("model=debug", "layer=ffn", "seqlen=2048", "pass=fwd", "graph=off",
                     "stock=plain", NULL),
           2, &m);
  assert_int_equal(m.n_configs, 4);
  for (int i = 0; i < m.n_configs; ++i)
    assert_int_not_equal(m.configs[i].schedule, TP_SCHED_NCCL_WINDOW);
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=debug", "layer=ffn", "seqlen=2048", "pass=fwd", "graph=off",
                     "stock=window", NULL),
           2, &m);
  assert_int_equal(m.n_configs, 4);
  assert_int_equal(m.configs[0].backend, TP_BACKEND_STOCK);
  assert_string_equal(m.configs[0].axes.schedule, "nccl-window");
  assert_int_equal(m.configs[3].backend, TP_BACKEND_COMM_ONLY);
  assert_string_equal(m.configs[3].axes.schedule, "nccl-window");
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=debug", "layer=ffn", "seqlen=2048", "pass=fwd", "graph=off",
                     "backend=dist_gemm", "stock=window", NULL),
           2, &m);
  assert_int_equal(m.n_configs, 3); /* dist_gemm, the GEMMs, the collectives on windows */
  assert_string_equal(m.configs[2].axes.schedule, "nccl-window");
  tp_layer_matrix_free(&m);
  expect_usage("stock=symmetric", "axis stock: unknown value 'symmetric' (valid: plain, window)");
  expect_usage("stock=window,window", "axis stock: 'window' is listed twice");
}

/* The symm axis of run: ipc by default (dist_gemm keyed as before it
 * existed); ipc,nccl doubles the dist_gemm layers only, innermost, keyed
 * apart, one case; nccl is left for the GPU to decide (the plan says so);
 * the quick preset keeps ipc alone; names are checked. */
static void test_symm_axis(void **state) {
  (void)state;
  tp_layer_matrix m;
  one_case(spec_with("model=debug", "layer=ffn", "seqlen=2048", "pass=fwd", "graph=off",
                     "stock=plain", "schedule=ce,sm", NULL),
           2, &m);
  assert_int_equal(m.n_configs, 5); /* stock, ce, sm, the GEMMs alone, the collectives alone */
  assert_int_equal(m.configs[1].symm, TP_SYMM_IPC);
  char key[512], other[512];
  tp_config_key(&m.configs[1].axes, key, sizeof key);
  assert_null(strstr(key, "symm"));
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=debug", "layer=ffn", "seqlen=2048", "pass=fwd", "graph=off",
                     "stock=plain", "schedule=ce,sm", "symm=ipc,nccl", NULL),
           2, &m);
  assert_int_equal(m.n_configs, 7);
  static const tp_symm_transport symm[] = {TP_SYMM_IPC, TP_SYMM_NCCL, TP_SYMM_IPC, TP_SYMM_NCCL};
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(m.configs[1 + i].backend, TP_BACKEND_DIST);
    assert_int_equal(m.configs[1 + i].schedule, i < 2 ? TP_SCHED_CE : TP_SCHED_SM);
    assert_int_equal(m.configs[1 + i].symm, symm[i]);
    assert_string_equal(m.configs[1 + i].axes.symm, tp_symm_transport_name(symm[i]));
  }
  assert_null(m.configs[0].axes.symm);
  assert_null(m.configs[6].axes.symm);
  tp_config_key(&m.configs[1].axes, key, sizeof key);
  tp_config_key(&m.configs[2].axes, other, sizeof other);
  assert_string_not_equal(key, other);
  assert_non_null(strstr(other, "symm=nccl"));
  tp_case_key(&m.configs[1].axes, key, sizeof key);
  tp_case_key(&m.configs[2].axes, other, sizeof other);
  assert_string_equal(key, other);
  char *text = NULL;
  listing(&m, 2, &text);
  const char *row = strstr(text, "dist_gemm ce chunks=0 symm=nccl");
  assert_non_null(row);
  const char *eol = strchr(row, '\n');
  const char *note = strstr(row, "NCCL's runtime decides at prepare time");
  assert_true(note && eol && note < eol);
  free(text);
  tp_layer_matrix_free(&m);
  tp_layer_spec quick;
  assert_int_equal(tp_layer_spec_preset("quick", &quick), TP_OK);
  assert_int_equal(quick.symm.count, 1);
  assert_string_equal(tp_str_list_at(&quick.symm, 0), "ipc");
  expect_usage("symm=nvshmem", "axis symm: unknown value 'nvshmem' (valid: ipc, nccl)");
  expect_usage("symm=nccl,nccl", "axis symm: 'nccl' is listed twice");
}

/* A tp past 999 (or a long model name) widens its column, header and rows alike: the columns
 * after it stay in line (a fixed width of 3 pushed every row of `--gpus 4096` one out). */
static void test_wide_values_keep_columns_in_line(void **state) {
  (void)state;
  tp_layer_matrix m;
  one_case(spec_with("model=debug", "layer=ffn", "seqlen=2048", "pass=fwd", "graph=off", "tp=4096",
                     NULL),
           4096, &m);
  char *text = NULL;
  listing(&m, 4096, &text);
  /* the header's "BxS" starts where each row's "1x2048" does */
  const char *eol = strchr(text, '\n');
  assert_non_null(eol);
  const long header_bxs = (long)(strstr(text, "BxS") - text);
  const char *row = eol + 1;
  for (int i = 0; i < m.n_configs; ++i) {
    const char *bxs = strstr(row, " 1x2048 ");
    const char *row_end = strchr(row, '\n');
    assert_true(bxs && row_end && bxs < row_end);
    assert_int_equal((long)(bxs + 1 - row), header_bxs);
    assert_non_null(strstr(row, " 4096 "));
    row = row_end + 1;
  }
  free(text);
  tp_layer_matrix_free(&m);
}

/* `run` drops the planned configurations (listing each) and keeps the rest
 * with their cases renumbered: the 2 x 2 mesh goes on a host of 2, every ac
 * mode stays. */
static void test_drop_planned(void **state) {
  (void)state;
  tp_layer_matrix m;
  tp_layer_spec s = spec_with("model=8b", "layer=ffn", "seqlen=4096", "batch=2", "pass=fwd+bwd",
                              "graph=off", "tp=2", "dp=2,1", "ac=none,full", "stock=plain", NULL);
  expand_ok(&s, 2, &m);
  assert_int_equal(m.n_configs, 16);
  assert_int_equal(tp_layer_plan_host(&m, 2), 8); /* dp 2 x tp 2 needs 4 GPUs */
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  assert_int_equal(tp_layer_drop_planned(&m, f), 8);
  fclose(f);
  printf("%s", text);
  assert_non_null(
      strstr(text, "planned, not run: llama3-8b ffn tp 2 dp 2 ac none layer stock: " HOST_PLAN));
  assert_non_null(strstr(
      text, "planned, not run: llama3-8b ffn tp 2 dp 2 ac full layer stock: " HOST_PLAN "\n"));
  free(text);
  assert_int_equal(m.n_cases, 2);
  assert_int_equal(m.n_configs, 8);
  for (int ci = 0; ci < 2; ++ci) {
    assert_int_equal(m.cases[ci].dp, 1);
    assert_int_equal(m.cases[ci].first_config, 4 * ci);
    assert_int_equal(m.cases[ci].ac, ci == 0 ? TP_AC_NONE : TP_AC_FULL);
  }
  for (int i = 0; i < m.n_configs; ++i) {
    assert_int_equal(m.configs[i].case_index, i / 4);
    assert_false(m.configs[i].planned);
  }
  assert_int_equal(tp_layer_runnable(&m), 8);
  tp_layer_matrix_free(&m);
}

/* comm_dtype (an fp8 layer's gathering projections at TP > 1 with sp): only
 * those cases multiply by it, every other case is one with none stored; the
 * values it leaves out do not disturb the graph mixes (each mix's sizes
 * adjacent, ascending, one mix per comm_dtype value), and configurations
 * that differ in it alone are keyed apart. */
static void test_comm_dtype_axis(void **state) {
  (void)state;
  tp_layer_matrix m;
  tp_layer_spec s = spec_with("model=8b", "layer=ffn", "dtype=bf16,fp8", "tp=2", "sp=off,on",
                              "comm_dtype=bf16,fp8", "seqlen=4096,2048", "graph=mixed", "pass=fwd",
                              "stock=plain", "backend=stock", NULL);
  expand_ok(&s, 2, &m);
  assert_int_equal(m.n_cases, 10);
  assert_int_equal(m.n_mixes, 5);
  const struct {
    tp_dtype dtype;
    int sp;
    tp_comm_dtype comm;
    int seqlen;
  } want[] = {{TP_BF16, 0, TP_COMM_NONE, 2048}, {TP_BF16, 0, TP_COMM_NONE, 4096},
              {TP_BF16, 1, TP_COMM_NONE, 2048}, {TP_BF16, 1, TP_COMM_NONE, 4096},
              {TP_FP8, 0, TP_COMM_NONE, 2048},  {TP_FP8, 0, TP_COMM_NONE, 4096},
              {TP_FP8, 1, TP_COMM_BF16, 2048},  {TP_FP8, 1, TP_COMM_BF16, 4096},
              {TP_FP8, 1, TP_COMM_FP8, 2048},   {TP_FP8, 1, TP_COMM_FP8, 4096}};
  for (int ci = 0; ci < 10; ++ci) {
    const tp_layer_case *c = &m.cases[ci];
    assert_int_equal(c->dtype, want[ci].dtype);
    assert_int_equal(c->sp, want[ci].sp);
    assert_int_equal(c->comm, want[ci].comm);
    assert_int_equal(c->seqlen, want[ci].seqlen);
    assert_int_equal(c->mix_group, ci / 2);
    for (int i = c->first_config; i < c->first_config + c->n_configs; ++i) {
      const tp_config_axes *a = &m.configs[i].axes;
      assert_int_equal(m.configs[i].case_index, ci);
      if (want[ci].comm == TP_COMM_NONE) assert_null(a->comm_dtype);
      else assert_string_equal(a->comm_dtype, tp_comm_dtype_name(want[ci].comm));
    }
  }
  /* the same stock layer, comm_dtype bf16 and fp8: two keys */
  char with_bf16[512], with_fp8[512];
  tp_config_key(&m.configs[m.cases[6].first_config].axes, with_bf16, sizeof with_bf16);
  tp_config_key(&m.configs[m.cases[8].first_config].axes, with_fp8, sizeof with_fp8);
  assert_string_not_equal(with_bf16, with_fp8);
  tp_layer_matrix_free(&m);
  /* the default is fp8; a misspelt value is refused naming the valid ones */
  s = spec_with("model=8b", "layer=ffn", "dtype=fp8", "tp=2", "seqlen=4096", "graph=off",
                "pass=fwd", NULL);
  expand_ok(&s, 2, &m);
  assert_int_equal(m.n_cases, 1);
  assert_int_equal(m.cases[0].comm, TP_COMM_FP8);
  tp_layer_matrix_free(&m);
  s = spec_with("comm_dtype=fp16", NULL);
  assert_int_equal(tp_layer_expand(&s, 2, &m), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "(valid: bf16, fp8)"));
}

/* ---- graph=mixed ----------------------------------------------------------------------------- */

/* The mix's sizes are adjacent cases, ascending in tokens, each configuration
 * graph 1 with the whole list; one mix per point of the other axes. */
static void test_graph_mixed_expansion(void **state) {
  (void)state;
  tp_layer_matrix m;
  tp_layer_spec s = spec_with("model=8b", "layer=ffn", "seqlen=4096,2048,8192", "pass=fwd",
                              "graph=mixed", "tp=2", "stock=plain", NULL);
  expand_ok(&s, 2, &m);
  assert_int_equal(m.n_cases, 3);
  assert_int_equal(m.n_mixes, 1);
  assert_int_equal(tp_layer_runnable(&m), 12);
  const int64_t tokens[] = {2048, 4096, 8192};
  for (int ci = 0; ci < 3; ++ci) {
    const tp_layer_case *c = &m.cases[ci];
    assert_int_equal(c->tokens, tokens[ci]);
    assert_int_equal(c->graph, 1);
    assert_int_equal(c->graph_mixed, 1);
    assert_int_equal(c->mix_group, 0);
    assert_string_equal(tp_layer_graph_name(c), "mixed");
    for (int i = c->first_config; i < c->first_config + c->n_configs; ++i) {
      assert_int_equal(m.configs[i].case_index, ci);
      assert_int_equal(m.configs[i].axes.graph, 1);
      assert_string_equal(m.configs[i].axes.graph_sizes, "2048,4096,8192");
      assert_int_equal(m.configs[i].axes.seqlen, tokens[ci]);
    }
  }
  /* Its key says it was measured among those sizes, and differs from graph=on's. */
  char mixed[512], on[512];
  tp_config_key(&m.configs[0].axes, mixed, sizeof mixed);
  tp_config_axes plain = m.configs[0].axes;
  plain.graph_sizes = NULL;
  tp_config_key(&plain, on, sizeof on);
  assert_non_null(strstr(mixed, ";graph=1;"));
  assert_non_null(strstr(mixed, "graph_sizes=2048,4096,8192"));
  assert_null(strstr(on, "graph_sizes"));
  assert_string_not_equal(mixed, on);
  tp_layer_matrix_free(&m);
  assert_null(m.mix_sizes);
  /* Beside eager cases: those keep their order; each mix stands where its first size stood. */
  s = spec_with("model=8b", "layer=ffn", "seqlen=2048,4096", "pass=fwd,fwd+bwd", "graph=off,mixed",
                "tp=2", "stock=plain", NULL);
  expand_ok(&s, 2, &m);
  assert_int_equal(m.n_cases, 8);
  assert_int_equal(m.n_mixes, 2);
  /* odometer: (2048 fwd off) (2048 fwd mixed) (2048 bwd off) (2048 bwd mixed) (4096 ...) */
  const struct {
    int seqlen, bwd, mixed, mix;
  } want[] = {{2048, 0, 0, -1}, {2048, 0, 1, 0}, {4096, 0, 1, 0},  {2048, 1, 0, -1},
              {2048, 1, 1, 1},  {4096, 1, 1, 1}, {4096, 0, 0, -1}, {4096, 1, 0, -1}};
  for (int ci = 0; ci < 8; ++ci) {
    const tp_layer_case *c = &m.cases[ci];
    assert_int_equal(c->seqlen, want[ci].seqlen);
    assert_int_equal(tp_pass_has_backward(c->pass), want[ci].bwd);
    assert_int_equal(c->graph_mixed, want[ci].mixed);
    assert_int_equal(c->graph, want[ci].mixed);
    assert_int_equal(c->mix_group, want[ci].mix);
    assert_int_equal(c->first_config, 4 * ci);
    const tp_layer_config *cfg = &m.configs[c->first_config];
    assert_int_equal(cfg->case_index, ci);
    if (c->graph_mixed) assert_string_equal(cfg->axes.graph_sizes, "2048,4096");
    else assert_null(cfg->axes.graph_sizes);
  }
  /* The listing says which sizes a configuration is replayed among. */
  char *text = NULL;
  listing(&m, 2, &text);
  assert_non_null(strstr(text, "mixed"));
  assert_non_null(strstr(text, "run (replayed among 2048,4096 tokens)"));
  free(text);
  tp_layer_matrix_free(&m);
  /* a mix's window stock: the kernels may still refuse it, and it is replayed among the sizes */
  s = spec_with("model=8b", "layer=ffn", "seqlen=2048,4096", "pass=fwd", "graph=mixed", "tp=2",
                "stock=window", NULL);
  expand_ok(&s, 2, &m);
  listing(&m, 2, &text);
  assert_non_null(strstr(text, "stock nccl-window"));
  assert_non_null(strstr(text,
                         "run (NCCL's runtime decides at prepare time whether this host runs it; "
                         "replayed among 2048,4096 tokens)"));
  free(text);
  tp_layer_matrix_free(&m);
}

/* Its rules: 2 to 8 sizes, at most 32 configurations a mix, and a size a rule
 * rejects takes its counterparts at the other sizes with it. */
static void test_graph_mixed_rules(void **state) {
  (void)state;
  tp_layer_matrix m;
  one_case(spec_with("model=8b", "layer=ffn", "seqlen=4096", "pass=fwd", "graph=mixed",
                     "stock=plain", NULL),
           2, &m);
  for (int i = 0; i < m.n_configs; ++i)
    expect_reason(&m.configs[i], "graph=mixed captures one graph per size on one workspace: it "
                                 "needs 2 or more sizes (seqlen values), this mix has 1 (4096");
  tp_layer_matrix_free(&m);
  /* a rule over a plan: dp 2 x tp 2 alone would be planned; FSDP is never captured */
  one_case(spec_with("model=8b", "layer=ffn", "seqlen=4096", "batch=2", "pass=fwd", "graph=mixed",
                     "dp=2", "tp=2", "stock=plain", NULL),
           2, &m);
  expect_reason(first_of(&m, TP_BACKEND_STOCK),
                "dp > 1 with graph=mixed: FSDP's side-stream collectives are not captured");
  assert_false(first_of(&m, TP_BACKEND_STOCK)->planned);
  assert_int_equal(tp_layer_planned(&m), 0);
  tp_layer_matrix_free(&m);
  tp_layer_spec s =
      spec_with("model=debug", "layer=ffn", "pass=fwd", "graph=mixed",
                "seqlen=256,512,768,1024,1280,1536,1792,2048,2304", "stock=plain", NULL);
  expand_ok(&s, 2, &m);
  for (int i = 0; i < m.n_configs; ++i)
    expect_reason(&m.configs[i], "graph=mixed takes at most 8 sizes; this mix has 9");
  tp_layer_matrix_free(&m);
  /* 3 sizes x (stock, 4 schedules x 3 chunks, GEMMs, collectives) = 45 > 32 */
  s = spec_with("model=8b", "layer=ffn", "pass=fwd", "graph=mixed", "seqlen=2048,4096,8192",
                "schedule=auto,ce,sm,ring", "chunks=0,2,4", "stock=plain", NULL);
  expand_ok(&s, 2, &m);
  assert_int_equal(m.n_configs, 45);
  for (int i = 0; i < m.n_configs; ++i)
    expect_reason(&m.configs[i], "3 sizes x 15 configurations is more than 32");
  tp_layer_matrix_free(&m);
  /* Fewer schedules fit: 3 x 6 = 18 run, dist_gemm's sizes needing different workspaces. */
  s = spec_with("model=8b", "layer=ffn", "pass=fwd", "graph=mixed", "seqlen=2048,4096,8192",
                "schedule=auto,ce,sm", "stock=plain", NULL);
  expand_ok(&s, 2, &m);
  assert_int_equal(tp_layer_runnable(&m), 18);
  tp_layer_matrix_free(&m);
  /* chunks 3 divides 3072 / 2 rows per rank, not 2048 / 2: dist_gemm chunks=3 is out at both
   * sizes, the rest of the mix runs. */
  s = spec_with("model=8b", "layer=ffn", "pass=fwd", "graph=mixed", "seqlen=3072,2048", "tp=2",
                "chunks=3,0", "stock=plain", NULL);
  expand_ok(&s, 2, &m);
  assert_int_equal(m.n_cases, 2);
  const tp_layer_config *small = &m.configs[m.cases[0].first_config + 1];
  const tp_layer_config *large = &m.configs[m.cases[1].first_config + 1];
  assert_int_equal(small->axes.chunks, 3);
  assert_int_equal(large->axes.chunks, 3);
  expect_reason(small, "tokens per rank 1024 not divisible by chunks 3");
  expect_reason(large, "graph=mixed among 2048,3072: its 2048-token size is rejected: tokens per "
                       "rank 1024 not divisible by chunks 3");
  assert_int_equal(tp_layer_runnable(&m), 2 * 4);
  tp_layer_matrix_free(&m);
  /* A case rule at one size (seqlen 3000 not divisible by TP 16) takes the whole mix. */
  s = spec_with("model=8b", "layer=ffn", "pass=fwd", "graph=mixed", "seqlen=4096,3000", "tp=16",
                NULL);
  expand_ok(&s, 2, &m);
  assert_int_equal(tp_layer_runnable(&m), 0);
  expect_reason(&m.configs[m.cases[1].first_config],
                "its 3000-token size is rejected: seqlen 3000 not divisible by TP 16");
  tp_layer_matrix_free(&m);
  /* The nccl-window configurations of a block mix at TP 2: 6 sizes x (the stock layer's tensors'
   * window, the collectives' and their 4 scratches') + the group's window scratch = 37 windows
   * at once, more than a group's 32: those are rejected, the plain ones run; 5 sizes fit (31). */
  s = spec_with("model=debug", "layer=block", "pass=fwd", "graph=mixed", "tp=2", "backend=stock",
                "seqlen=256,512,768,1024,1280,1536", "stock=plain,window", NULL);
  expand_ok(&s, 2, &m);
  assert_int_equal(m.n_configs, 30);
  int windows = 0;
  for (int i = 0; i < m.n_configs; ++i) {
    if (m.configs[i].schedule != TP_SCHED_NCCL_WINDOW) {
      assert_false(m.configs[i].rejected);
      continue;
    }
    windows++;
    expect_reason(&m.configs[i], "graph=mixed among 256,512,768,1024,1280,1536: the mix's "
                                 "nccl-window configurations need 37 NCCL symmetric windows");
  }
  assert_int_equal(windows, 12);
  assert_int_equal(tp_layer_runnable(&m), 18);
  tp_layer_matrix_free(&m);
  s = spec_with("model=debug", "layer=block", "pass=fwd", "graph=mixed", "tp=2", "backend=stock",
                "seqlen=256,512,768,1024,1280", "stock=plain,window", NULL);
  expand_ok(&s, 2, &m);
  assert_int_equal(tp_layer_runnable(&m), 25);
  tp_layer_matrix_free(&m);
  tp_layer_spec bad;
  assert_int_equal(tp_layer_spec_preset("quick", &bad), TP_OK);
  assert_int_equal(tp_layer_spec_assign(&bad, "graph=several"), TP_OK);
  assert_int_equal(tp_layer_expand(&bad, 2, &m), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "(valid: off, on, mixed)"));
}

/* A matrix file names the mode as a string; run's host rules and dropping
 * the planned configurations keep each mix whole, adjacent and named. */
static void test_graph_mixed_file_and_host(void **state) {
  (void)state;
  tp_layer_spec s;
  assert_int_equal(load_text("{\"axes\": {\"model\": \"8b\", \"layer\": \"block\", \"seqlen\": "
                             "[2048, 4096], \"pass\": \"fwd\", \"graph\": \"mixed\", \"tp\": 1, "
                             "\"dp\": [2, 1], \"batch\": 2, \"stock\": \"plain\"}}",
                             NULL, &s),
                   TP_OK);
  tp_layer_matrix m;
  expand_ok(&s, 1, &m);
  assert_int_equal(m.n_cases, 4);
  assert_int_equal(m.n_mixes, 2);
  /* dp 2: FSDP is not captured, a rule rejects every configuration (nothing planned) */
  assert_int_equal(tp_layer_reject_world(&m, 1), 0);
  assert_int_equal(tp_layer_drop_planned(&m, NULL), 0);
  assert_int_equal(m.n_cases, 4);
  for (int ci = 0; ci < 4; ++ci) {
    const tp_layer_case *c = &m.cases[ci];
    assert_int_equal(c->dp, ci < 2 ? 2 : 1);
    assert_int_equal(c->mix_group, m.cases[ci & ~1].mix_group); /* cases 0, 1 and 2, 3 */
    assert_int_equal(c->tokens, 4096 * (1 + (ci & 1)));
    assert_int_equal(c->n_configs, 4);
    for (int i = 0; i < c->n_configs; ++i) {
      const tp_layer_config *cfg = &m.configs[c->first_config + i];
      assert_int_equal(cfg->case_index, ci);
      if (ci < 2) expect_reason(cfg, "dp > 1 with graph=mixed");
      else assert_string_equal(cfg->axes.graph_sizes, "4096,8192");
    }
  }
  assert_int_not_equal(m.cases[0].mix_group, m.cases[2].mix_group);
  /* TP 1: stock and the GEMMs alone run at both sizes */
  assert_int_equal(tp_layer_runnable(&m), 4);
  tp_layer_matrix_free(&m);
}

/* The fsdp_traffic axis beside dp: dp 2 x tp 1 runs (stock, its GEMMs alone), fsdp_traffic=on
 * runs at dp 1 and keys apart from off, and is rejected beside dp 2, graphs and fp8; the job's
 * size decides which mesh runs. */
static void test_fsdp_axis(void **state) {
  (void)state;
  tp_layer_matrix m;
  tp_layer_spec s =
      spec_with("model=8b", "layer=block", "seqlen=4096", "batch=2", "pass=fwd+bwd", "graph=off",
                "tp=1", "dp=1,2", "fsdp_traffic=off,on", "stock=plain", NULL);
  expand_ok(&s, 1, &m);
  assert_int_equal(m.n_cases, 4); /* dp 1, 2 x fsdp_traffic off, on: fsdp_traffic innermost */
  for (int ci = 0; ci < 4; ++ci) {
    const tp_layer_case *c = &m.cases[ci];
    assert_int_equal(c->dp, 1 + ci / 2);
    assert_int_equal(c->fsdp_traffic, ci % 2);
    for (int i = c->first_config; i < c->first_config + c->n_configs; ++i)
      assert_int_equal(m.configs[i].axes.fsdp_traffic, c->fsdp_traffic);
  }
  /* stock and the GEMMs alone run in cases 0..2; dist_gemm and the collectives: TP 1 */
  for (int ci = 0; ci < 3; ++ci) {
    const tp_layer_case *c = &m.cases[ci];
    assert_false(m.configs[c->first_config].rejected);                    /* stock */
    assert_false(m.configs[c->first_config + c->n_configs - 2].rejected); /* GEMMs alone */
  }
  for (int i = m.cases[3].first_config; i < m.cases[3].first_config + m.cases[3].n_configs; ++i)
    expect_reason(&m.configs[i], "fsdp_traffic=on puts FSDP's collectives beside a dp 1 layer");
  /* the case keys: off and on apart, dp 1 and 2 apart */
  char keys[3][1024];
  for (int ci = 0; ci < 3; ++ci)
    tp_case_key(&m.configs[m.cases[ci].first_config].axes, keys[ci], sizeof keys[ci]);
  assert_string_not_equal(keys[0], keys[1]);
  assert_string_not_equal(keys[0], keys[2]);
  assert_non_null(strstr(keys[1], "fsdp_traffic"));
  assert_null(strstr(keys[0], "fsdp_traffic")); /* off: the key of runs before schema 007 */
  assert_int_equal(tp_layer_runnable(&m), 6);
  /* a job of 1: dp 2 needs 2 GPUs (planned); a job of 2: dp 1 x tp 1 is a smaller mesh */
  assert_int_equal(tp_layer_reject_world(&m, 1), 2);
  expect_planned(&m.configs[m.cases[2].first_config], "needs 2 GPUs (dp 2 x tp 1); this job has 1");
  tp_layer_matrix_free(&m);
  expand_ok(&s, 1, &m);
  assert_int_equal(tp_layer_reject_world(&m, 2), 4);
  expect_reason(&m.configs[m.cases[1].first_config], "dp 1 x tp 1 needs a job of 1 workers");
  assert_false(m.configs[m.cases[2].first_config].rejected);
  assert_int_equal(tp_layer_runnable(&m), 2);
  tp_layer_matrix_free(&m);
  /* FSDP beside graphs and fp8 */
  one_case(spec_with("model=8b", "layer=ffn", "seqlen=4096", "batch=2", "pass=fwd", "graph=on",
                     "tp=1", "dp=2", "stock=plain", NULL),
           1, &m);
  expect_reason(first_of(&m, TP_BACKEND_STOCK), "dp > 1 with graph=on: FSDP's side-stream");
  tp_layer_matrix_free(&m);
  one_case(spec_with("model=8b", "layer=ffn", "seqlen=4096", "batch=2", "pass=fwd", "graph=off",
                     "tp=1", "dtype=fp8", "fsdp_traffic=on", "stock=plain", NULL),
           1, &m);
  expect_reason(first_of(&m, TP_BACKEND_STOCK), "fsdp_traffic=on with fp8: the fp8 weights");
  tp_layer_matrix_free(&m);
  /* at TP 2 fsdp_traffic=on runs stock, dist_gemm and both references */
  one_case(spec_with("model=8b", "layer=ffn", "seqlen=4096", "batch=2", "pass=fwd", "graph=off",
                     "tp=2", "fsdp_traffic=on", "stock=plain", NULL),
           2, &m);
  assert_int_equal(tp_layer_runnable(&m), m.n_configs);
  tp_layer_matrix_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quick_preset),
      cmocka_unit_test(test_full_preset),
      cmocka_unit_test(test_layer_flops),
      cmocka_unit_test(test_case_rules),
      cmocka_unit_test(test_save_gathered_rules),
      cmocka_unit_test(test_dist_gemm_rules),
      cmocka_unit_test(test_empty_spec_is_usage),
      cmocka_unit_test(test_chunks_and_schedules),
      cmocka_unit_test(test_sm_chunk_alignment),
      cmocka_unit_test(test_wide_values_keep_columns_in_line),
      cmocka_unit_test(test_stock_axis),
      cmocka_unit_test(test_symm_axis),
      cmocka_unit_test(test_tp_default_and_list),
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_matrix_file),
      cmocka_unit_test(test_matrix_file_errors),
      cmocka_unit_test(test_matrix_file_models),
      cmocka_unit_test(test_no_attention_model),
      cmocka_unit_test(test_matrix_file_strings),
      cmocka_unit_test(test_matrix_file_not_regular),
      cmocka_unit_test(test_dp_mesh_expansion),
      cmocka_unit_test(test_dp_rules),
      cmocka_unit_test(test_mesh_beyond_group_ranks),
      cmocka_unit_test(test_fsdp_axis),
      cmocka_unit_test(test_ac_rules),
      cmocka_unit_test(test_drop_planned),
      cmocka_unit_test(test_comm_dtype_axis),
      cmocka_unit_test(test_graph_mixed_expansion),
      cmocka_unit_test(test_graph_mixed_rules),
      cmocka_unit_test(test_graph_mixed_file_and_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
