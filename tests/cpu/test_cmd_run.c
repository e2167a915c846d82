/*
 * test_cmd_run.c — `tpbench matrix` and `tpbench run` as a user runs them,
 * and the layers of `run` in the throughput table.
 *
 * matrix: the quick preset's plan, rejections with their reasons, usage
 * errors (exit 2) for a bad axis, value or matrix file, a matrix file that
 * works; the one matrix interface (a file with its own model read by
 * matrix, matrix --for ops and ops; flags as aliases of axes, in order) and
 * ops --shape. run: --help, usage errors before any GPU is looked for, and on
 * this machine (no GPU, or a build without CUDA) a failure that says why.
 * report: a run written through the store the way `run` writes it (kind
 * 'layer' for the stock and dist_gemm layers, 'gemm' and 'comm' for the
 * references) gives a table row per dist_gemm layer with speedup and bound,
 * and a row for a stock-only case (sequence parallelism off). matrix marks
 * configurations planned against a host of --gpus N, and README's
 * composition table is `matrix --composition`'s output, byte for byte. The
 * --axis line of run's, matrix's and ops' --help names every axis each takes.
 *
 * TPBENCH_EXE is the path of the binary under test (set by CMake).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/tp_store.h"
#include "tests/cpu/run_program.h"

#ifndef TPBENCH_EXE
#error "TPBENCH_EXE must name the tpbench binary"
#endif

/* Runs tpbench with a NULL-terminated argument list for at most 60 s. */
#define tpbench(...) rp_run_exe(TPBENCH_EXE, 60, NULL, __VA_ARGS__)

static void test_matrix_quick(void **state) {
  (void)state;
  rp_result r = tpbench("matrix", NULL);
  rp_expect(&r, 0, "48 cases, 288 configurations: 288 to run, 0 rejected", NULL);
  assert_non_null(strstr(r.out, "llama3-8b   block       2   1 1x4096"));
  assert_non_null(strstr(r.out, "dist_gemm auto chunks=0"));
  rp_free(&r);
}

static void test_matrix_rejections(void **state) {
  (void)state;
  rp_result r =
      tpbench("matrix", "--axis", "model=debug", "--axis=layer=ffn", "--axis", "sp=on,off",
              "--axis", "save_gathered=off,on", "--axis", "seqlen=2048", NULL);
  rp_expect(&r, 0, "rejected: dist_gemm needs sequence parallelism", NULL);
  assert_non_null(strstr(r.out, "rejected: save_gathered=on keeps the forward's gathered input"));
  assert_non_null(strstr(r.out, "rejected: save_gathered=on needs sequence parallelism"));
  rp_free(&r);
}

static void test_matrix_usage_errors(void **state) {
  (void)state;
  rp_result r = tpbench("matrix", "--axis", "nope=1", NULL);
  rp_expect(&r, 2, NULL, "tpbench matrix: unknown axis 'nope'");
  rp_free(&r);
  r = tpbench("matrix", "--axis", "layer=mlp", NULL);
  rp_expect(&r, 2, NULL, "unknown value 'mlp'");
  rp_free(&r);
  r = tpbench("matrix", "--axis", NULL);
  rp_expect(&r, 2, NULL, "--axis needs a value");
  rp_free(&r);
  r = tpbench("matrix", "--matrix", "/nonexistent/m.json", NULL);
  rp_expect(&r, 2, NULL, "cannot read the matrix file /nonexistent/m.json");
  rp_free(&r);
  r = tpbench("matrix", "--preset", "huge", NULL);
  rp_expect(&r, 2, NULL, "--preset");
  rp_free(&r);
  r = tpbench("matrix", "--db", "x.db", NULL); /* run's options are not matrix's */
  rp_expect(&r, 2, NULL, "unknown option '--db'");
  rp_free(&r);
}

static void test_matrix_file(void **state) {
  (void)state;
  char path[] = "/tmp/tpbench-cmd-matrix-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *text = "{\"preset\": \"quick\", \"axes\": {\"model\": \"debug\", \"layer\": "
                     "\"block\", \"graph\": false, \"pass\": \"fwd+bwd\"}}";
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  /* The file, then --axis on top of it. */
  rp_result r = tpbench("matrix", "--matrix", path, "--axis", "seqlen=1024", NULL);
  rp_expect(&r, 0, "1 cases, 6 configurations: 6 to run, 0 rejected", NULL);
  assert_non_null(strstr(r.out, "debug       block       2   1 1x1024"));
  rp_free(&r);
  unlink(path);
}

/* The one matrix interface: the same file, --axis and flags for ops, run and
 * matrix --for ops|run; flags are aliases of axes. */
static void test_one_matrix_interface(void **state) {
  (void)state;
  char path[] = "/tmp/tpbench-cmd-models-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *text = "{\"models\": {\"mymodel\": {\"dim\": 4096, \"n_heads\": 32, \"n_kv_heads\": "
                     "8, \"head_dim\": 128, \"ffn_hidden\": 14336, \"vocab\": 128256}},\n"
                     " \"axes\": {\"model\": [\"mymodel\", \"8b\"], \"pass\": \"fwd\"}}";
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  /* run's plan from the file, with run's axes on top. */
  rp_result r = tpbench("matrix", "--matrix", path, "--axis", "layer=ffn", "--axis", "graph=off",
                        "--axis", "seqlen=4096", NULL);
  rp_expect(&r, 0, "2 cases, 12 configurations: 12 to run, 0 rejected", NULL);
  assert_non_null(strstr(r.out, "mymodel     ffn         2   1 1x4096"));
  rp_free(&r);
  /* ops' plan from the same file, with ops' flags on top; and ops itself. */
  r = tpbench("matrix", "--for", "ops", "--matrix", path, "--tokens", "4096", "--projs", "w2",
              NULL);
  rp_expect(&r, 0, "12 configurations, 12 to run, 0 rejected", NULL);
  assert_non_null(strstr(r.out, "mymodel     w2   linear_rs"));
  rp_result same = tpbench("ops", "--list", "--matrix", path, "--axis", "tokens=4096", "--axis",
                           "proj=w2", NULL);
  rp_expect(&same, 0, NULL, NULL);
  assert_string_equal(r.out, same.out);
  rp_free(&same);
  rp_free(&r);
  /* A model's name in any case, the file's as a preset's ("8B"): listed as defined. */
  r = tpbench("matrix", "--for", "ops", "--matrix", path, "--tokens", "4096", "--projs", "w2",
              "--models", "MyModel,8B", NULL);
  rp_expect(&r, 0, "12 configurations, 12 to run, 0 rejected", NULL);
  assert_non_null(strstr(r.out, "mymodel     w2   linear_rs"));
  rp_free(&r);
  /* The file's axes of the other command are refused, naming the command's own. */
  r = tpbench("ops", "--list", "--matrix", path, "--axis", "layer=ffn", NULL);
  rp_expect(&r, 2, NULL, "tpbench ops: unknown axis 'layer' for ops (valid: model, proj, tokens");
  rp_free(&r);
  unlink(path);
  /* Flags are aliases of axes: the same plan either way, in both commands. */
  r = tpbench("matrix", "--models", "70b", "--tp", "4", "--pass", "fwd", NULL);
  same = tpbench("matrix", "--axis", "model=70b", "--axis", "tp=4", "--axis", "pass=fwd", NULL);
  rp_expect(&r, 0, "llama3-70b", NULL);
  assert_string_equal(r.out, same.out);
  rp_free(&r);
  rp_free(&same);
  r = tpbench("ops", "--list", "--models", "8b", "--tokens", "4096", NULL);
  same = tpbench("ops", "--list", "--axis", "model=8b", "--axis=tokens=4096", NULL);
  rp_expect(&r, 0, "24 configurations", NULL);
  assert_string_equal(r.out, same.out);
  rp_free(&r);
  rp_free(&same);
  /* In order: the later one wins. */
  r = tpbench("ops", "--list", "--axis", "tokens=8192", "--tokens", "4096", "--projs", "qkv",
              "--models", "8b", NULL);
  rp_expect(&r, 0, "6 configurations", NULL);
  assert_non_null(strstr(r.out, "   4096   2 bf16"));
  rp_free(&r);
  r = tpbench("run", "--tokens", "4096", NULL);
  rp_expect(&r, 2, NULL,
            "tpbench run: --tokens sets the axis 'tokens', which run does not have (its axes: "
            "model, layer,");
  rp_free(&r);
  r = tpbench("matrix", "--for", "ops", "--tokens", "x", NULL);
  rp_expect(&r, 2, NULL, "tpbench matrix: --tokens: 'x' is not a whole number");
  rp_free(&r);
  r = tpbench("matrix", "--for", "lint", NULL);
  rp_expect(&r, 2, NULL, "--for: 'lint' is not one of run|ops");
  rp_free(&r);
  r = tpbench("matrix", "--help", NULL);
  rp_expect(&r, 0, "--for CMD", NULL);
  rp_free(&r);
}

/* ops --shape: a bare projection, stored as model "shape" with its M, N, K. */
static void test_ops_shape(void **state) {
  (void)state;
  rp_result r = tpbench("ops", "--list", "--shape", "4096,8192,4096", "--shape",
                        "4096,4096,14336,linear_rs", NULL);
  rp_expect(&r, 0, "12 configurations, 12 to run, 0 rejected", NULL);
  assert_non_null(strstr(r.out, "shape       8192x4096 ag_linear"));
  assert_non_null(strstr(r.out, "4096   4096   7168  run")); /* linear_rs: K split over TP 2 */
  rp_free(&r);
  r = tpbench("ops", "--list", "--shape", "4096,8192", NULL);
  rp_expect(&r, 2, NULL, "--shape: '4096,8192' is not M,N,K or M,N,K,OP");
  rp_free(&r);
  r = tpbench("ops", "--list", "--shape", "64,64,64", "--models", "8b", NULL);
  rp_expect(&r, 2, NULL, "replaces the model, proj and tokens axes");
  rp_free(&r);
  r = tpbench("run", "--shape", "64,64,64", NULL);
  rp_expect(&r, 2, NULL, "--shape sets the axis 'shape', which run does not have");
  rp_free(&r);
}

static void test_run_options(void **state) {
  (void)state;
  rp_result r = tpbench("run", "--help", NULL);
  rp_expect(&r, 0, "--axis NAME=LIST", NULL);
  assert_non_null(strstr(r.out, "--trace"));
  rp_free(&r);
  r = tpbench("run", "--axis", "pass=bwd", NULL);
  rp_expect(&r, 2, NULL, "tpbench run: axis pass: unknown value 'bwd' (valid: fwd, fwd+bwd)");
  rp_free(&r);
  r = tpbench("run", "--iters", "0", NULL);
  rp_expect(&r, 2, NULL, "--iters");
  rp_free(&r);
  /* This machine has no GPU (or the build no CUDA): a failure that says so. */
  char db[] = "/tmp/tpbench-cmd-run-XXXXXX";
  int fd = mkstemp(db);
  assert_true(fd >= 0);
  close(fd);
  unlink(db);
  r = tpbench("run", "--db", db, "--axis", "model=debug", NULL);
  rp_expect(&r, 1, NULL, "tpbench run: ");
  assert_non_null(strstr(r.err, "CUDA"));
  rp_free(&r);
  unlink(db);
}

/* The --axis line of cmd's --help names every axis the command takes: the
 * list its "unknown axis" error prints, which comes from the axis table. */
static void expect_help_names_axes(const char *cmd, const char *for_cmd) {
  rp_result bad = for_cmd ? tpbench(cmd, "--for", for_cmd, "--axis", "no_such_axis=1", NULL)
                          : tpbench(cmd, "--axis", "no_such_axis=1", NULL);
  rp_expect(&bad, 2, NULL, "unknown axis 'no_such_axis'");
  const char *valid = strstr(bad.err, "(valid: ");
  assert_non_null(valid);
  valid += strlen("(valid: ");
  rp_result help = tpbench(cmd, "--help", NULL);
  rp_expect(&help, 0, "--axis NAME=LIST", NULL);
  const char *line = strstr(help.out, "\n  --axis NAME=LIST "); /* the option, not the usage */
  assert_non_null(line);
  const char *line_end = strstr(line + 1, "\n  --");
  assert_non_null(line_end);
  int n = 0;
  for (const char *p = valid; *p && *p != ')'; ++n) {
    size_t len = strcspn(p, ",)");
    char name[64], word[80];
    assert_true(len > 0 && len < sizeof name);
    memcpy(name, p, len);
    name[len] = '\0';
    snprintf(word, sizeof word, " %s,", name); /* whole words: "dp" is not in "dp_x" */
    const char *hit = strstr(line, word);
    if (!hit || hit > line_end) {
      snprintf(word, sizeof word, " %s)", name);
      hit = strstr(line, word);
    }
    if (!hit || hit > line_end)
      fail_msg("tpbench %s --help: the --axis line lacks '%s'", cmd, name);
    p += len;
    if (*p == ',') p += 2;
  }
  assert_true(n >= 10);
  rp_free(&help);
  rp_free(&bad);
}

static void test_help_names_every_axis(void **state) {
  (void)state;
  expect_help_names_axes("run", NULL);
  expect_help_names_axes("matrix", NULL);
  expect_help_names_axes("ops", NULL);
}

/* ---- layer rows in the throughput table ------------------------------------------------- */

static tp_config_axes layer_axes(const char *kind, const char *backend, int sp) {
  tp_config_axes a;
  memset(&a, 0, sizeof a);
  a.kind = kind;
  a.model = "llama3-8b";
  a.op_or_layer = "attention";
  a.backend = backend;
  a.tp = 2;
  a.batch = 1;
  a.seqlen = 4096;
  a.tokens = 4096;
  a.dtype = "bf16";
  a.sp = sp;
  a.pass = "fwd+bwd";
  if (!strcmp(backend, "dist_gemm")) a.schedule = "auto";
  return a;
}

static void put_ok(tp_store *store, int64_t run, tp_config_axes a, double median_us) {
  double samples[3] = {median_us, median_us, median_us};
  tp_samples set = {0, 3, samples, NULL, NULL};
  tp_result res;
  memset(&res, 0, sizeof res);
  res.n_samples = 3;
  res.median_us = res.p10_us = res.p90_us = res.mean_us = res.min_us = res.max_us = median_us;
  res.tokens_per_s = 4096.0 / (median_us * 1e-6);
  res.rel_err = !strcmp(a.backend, "dist_gemm") ? 1e-3 : NAN;
  res.numerics_ref = !strcmp(a.backend, "dist_gemm") ? "stock" : NULL;
  res.max_abs_err = 0;
  tp_schedule_choice ran[2] = {{"qkv", "ce", "copy-engine", 2, "auto"},
                               {"wo", "ce", "copy-engine", 2, "auto"}};
  tp_config_record rec;
  memset(&rec, 0, sizeof rec);
  rec.axes = &a;
  rec.status = TP_STATUS_OK;
  rec.result = &res;
  rec.samples = &set;
  rec.n_sample_sets = 1;
  if (!strcmp(a.backend, "dist_gemm")) {
    rec.schedules = ran;
    rec.n_schedules = 2;
  }
  assert_int_equal(tp_store_put_config(store, run, &rec, NULL), TP_OK);
}

static void put_rejected(tp_store *store, int64_t run, tp_config_axes a, const char *reason) {
  tp_config_record rec;
  memset(&rec, 0, sizeof rec);
  rec.axes = &a;
  rec.status = TP_STATUS_REJECTED;
  rec.reason = reason;
  assert_int_equal(tp_store_put_config(store, run, &rec, NULL), TP_OK);
}

static void test_report_layers(void **state) {
  (void)state;
  char db[] = "/tmp/tpbench-layers-XXXXXX";
  int fd = mkstemp(db);
  assert_true(fd >= 0);
  close(fd);
  unlink(db);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(db, 1, &store), TP_OK);
  tp_run_info info;
  memset(&info, 0, sizeof info);
  info.commit = "abc";
  info.host = "h200";
  info.command = "run";
  info.command_line = "tpbench run";
  int64_t run = 0;
  assert_int_equal(tp_store_begin_run(store, &info, &run), TP_OK);
  /* sp on: stock 4 ms, dist_gemm 2 ms, GEMMs alone 1.5 ms, collectives alone 1 ms */
  put_ok(store, run, layer_axes("layer", "stock", 1), 4000);
  put_ok(store, run, layer_axes("layer", "dist_gemm", 1), 2000);
  put_ok(store, run, layer_axes("gemm", "cublaslt", 1), 1500);
  put_ok(store, run, layer_axes("comm", "nccl", 1), 1000);
  /* sp off: stock only */
  put_ok(store, run, layer_axes("layer", "stock", 0), 5000);
  put_rejected(store, run, layer_axes("layer", "dist_gemm", 0),
               "dist_gemm needs sequence parallelism");
  assert_int_equal(tp_store_finish_run(store, run), TP_OK);
  tp_store_close(store);
  rp_result r = tpbench("report", "--db", db, NULL);
  rp_expect(&r, 0, "| llama3-8b | attention |", NULL);
  printf("%s\n", r.out);
  /* speedup and dist/bound with their intervals (constant samples: degenerate ones) */
  assert_non_null(strstr(r.out, "| 4.000 | 2.000 | 2.00 (2.00–2.00) | 1.33 (1.33–1.33) |"));
  assert_non_null(strstr(r.out, "ce x2+ce x2"));
  assert_non_null(strstr(r.out, "no-sp"));
  assert_non_null(strstr(r.out, "dist_gemm needs sequence parallelism"));
  assert_non_null(strstr(r.out, "over 1 row with stock and dist_gemm results"));
  rp_free(&r);
  /* the halves of the bound, by --columns */
  r = tpbench("report", "--db", db, "--columns", "gemm_ms,comm_ms,bound_ms", NULL);
  rp_expect(&r, 0, "| 1.500 | 1.000 | 1.500 |", NULL);
  rp_free(&r);
  r = tpbench("report", "--db", db, "--layer", "attention", "--format", "csv", NULL);
  rp_expect(&r, 0, "attention", NULL);
  rp_free(&r);
  unlink(db);
  char side[sizeof db + 8];
  snprintf(side, sizeof side, "%s-wal", db);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", db);
  unlink(side);
}

/* matrix marks each configuration run, rejected or planned as `run --gpus N`
 * does (default 2), by run's own rule and with its reasons: a mesh larger
 * than the job is planned with the GPUs it needs, a smaller one rejected
 * (run's job must be exactly the mesh); for run and for ops. */
static void test_matrix_planned(void **state) {
  (void)state;
  rp_result r =
      tpbench("matrix", "--axis", "model=debug", "--axis", "layer=ffn", "--axis", "seqlen=2048",
              "--axis", "pass=fwd", "--axis", "graph=off", "--tp", "2,4", NULL);
  rp_expect(&r, 0, "2 cases, 12 configurations: 6 to run, 0 rejected, 6 planned (host of 2 GPUs)",
            NULL);
  assert_non_null(strstr(r.out, "planned: needs 4 GPUs (dp 1 x tp 4); this job has 2"));
  assert_non_null(strstr(r.out, "  run\n"));
  rp_free(&r);
  r = tpbench("matrix", "--gpus", "4", "--axis", "model=debug", "--axis", "layer=ffn", "--axis",
              "seqlen=2048", "--axis", "pass=fwd", "--axis", "graph=off", "--tp", "2,4", NULL);
  rp_expect(&r, 0, "6 to run, 6 rejected, 0 planned (host of 4 GPUs)", NULL);
  assert_non_null(strstr(r.out, "rejected: dp 1 x tp 2 needs a job of 2 workers; this one has 4 "
                                "(--gpus 2)\n"));
  rp_free(&r);
  /* one GPU: "host of 1 GPU" (no plural for one) */
  r = tpbench("matrix", "--gpus", "1", "--axis", "model=debug", "--axis", "layer=ffn", "--axis",
              "seqlen=2048", "--axis", "pass=fwd", "--axis", "graph=off", "--tp", "1", NULL);
  rp_expect(&r, 0, "0 planned (host of 1 GPU)\n", NULL);
  rp_free(&r);
  r = tpbench("matrix", "--for", "ops", "--gpus", "1", "--models", "debug", "--projs", "qkv",
              "--tp", "1", NULL);
  rp_expect(&r, 0, "0 planned (host of 1 GPU)\n", NULL);
  rp_free(&r);
  /* dp 2 x tp 2: valid, planned for the GPUs on a host of 2; never "run" as dp 1. */
  r = tpbench("matrix", "--axis", "model=debug", "--axis", "layer=ffn", "--axis", "seqlen=2048",
              "--axis", "batch=2", "--axis", "pass=fwd", "--axis", "graph=off", "--axis", "dp=2",
              "--tp", "2", NULL);
  rp_expect(&r, 0, "0 to run, 0 rejected, 6 planned", NULL);
  assert_non_null(strstr(r.out, "planned: needs 4 GPUs (dp 2 x tp 2); this job has 2\n"));
  rp_free(&r);
  /* without a tp axis the job is the mesh: dp 2 on the default 2 GPUs is dp 2 x tp 1 */
  r = tpbench("matrix", "--axis", "model=debug", "--axis", "layer=ffn", "--axis", "seqlen=2048",
              "--axis", "batch=2", "--axis", "pass=fwd", "--axis", "graph=off", "--axis", "dp=2",
              NULL);
  rp_expect(&r, 0, "3 to run, 3 rejected, 0 planned (host of 2 GPUs)", NULL);
  assert_non_null(strstr(r.out, "rejected: dist_gemm needs TP > 1"));
  rp_free(&r);
  /* ... rejected on 8, with the reason `run --gpus 8` gives: never listed as "run" */
  r = tpbench("matrix", "--gpus", "8", "--axis", "model=debug", "--axis", "layer=ffn", "--axis",
              "seqlen=2048", "--axis", "batch=2", "--axis", "pass=fwd", "--axis", "graph=off",
              "--axis", "dp=2", "--tp", "2", NULL);
  rp_expect(&r, 0, "0 to run, 6 rejected, 0 planned (host of 8 GPUs)", NULL);
  assert_non_null(
      strstr(r.out, "rejected: dp 2 x tp 2 needs a job of 4 workers; this one has 8 (--gpus 4)\n"));
  assert_null(strstr(r.out, "  run\n"));
  rp_free(&r);
  /* ... and without a tp axis the job's workers are the mesh, as in run: dp 2 x tp 4 on 8
   * (not a mesh of 16 that no job of 8 can run); two dp values keep TP = the workers */
  r = tpbench("matrix", "--gpus", "8", "--axis", "model=debug", "--axis", "layer=ffn", "--axis",
              "seqlen=2048", "--axis", "batch=2", "--axis", "pass=fwd", "--axis", "graph=off",
              "--axis", "dp=2", NULL);
  rp_expect(&r, 0, "6 to run, 0 rejected, 0 planned (host of 8 GPUs)", NULL);
  assert_null(strstr(r.out, "planned: needs"));
  rp_free(&r);
  r = tpbench("matrix", "--gpus", "8", "--axis", "model=debug", "--axis", "layer=ffn", "--axis",
              "seqlen=2048", "--axis", "batch=2", "--axis", "pass=fwd", "--axis", "graph=off",
              "--axis", "dp=1,2", NULL);
  assert_non_null(strstr(r.out, "planned: needs 16 GPUs (dp 2 x tp 8); this job has 8\n"));
  rp_free(&r);
  /* ... and run on a host of 4 */
  r = tpbench("matrix", "--gpus", "4", "--axis", "model=debug", "--axis", "layer=ffn", "--axis",
              "seqlen=2048", "--axis", "batch=2", "--axis", "pass=fwd", "--axis", "graph=off",
              "--axis", "dp=2", "--tp", "2", NULL);
  rp_expect(&r, 0, "6 to run, 0 rejected, 0 planned (host of 4 GPUs)", NULL);
  rp_free(&r);
  r = tpbench("matrix", "--for", "ops", "--gpus=2", "--models", "8b", "--projs", "w2", "--tokens",
              "4096", "--tp", "2,4", NULL);
  rp_expect(&r, 0, "12 configurations, 6 to run, 0 rejected, 6 planned (host of 2 GPUs)", NULL);
  assert_non_null(strstr(r.out, "planned: needs 4 GPUs (tp 4); this job has 2"));
  rp_free(&r);
  /* ops' smaller TP is rejected as `ops --gpus 4` rejects it, in matrix and ops --list alike */
  r = tpbench("matrix", "--for", "ops", "--gpus=4", "--models", "8b", "--projs", "w2", "--tokens",
              "4096", "--tp", "2,4", NULL);
  rp_expect(&r, 0, "12 configurations, 6 to run, 6 rejected, 0 planned (host of 4 GPUs)", NULL);
  assert_non_null(
      strstr(r.out, "rejected: TP 2 needs a job of 2 workers; this one has 4 (--gpus 2)"));
  rp_result same = tpbench("ops", "--list", "--gpus", "4", "--models", "8b", "--projs", "w2",
                           "--tokens", "4096", "--tp", "2,4", NULL);
  rp_expect(&same, 0, NULL, NULL);
  assert_string_equal(r.out, same.out);
  rp_free(&same);
  rp_free(&r);
  /* --symm: both transports of each dist_gemm schedule, nccl left to the GPU's NCCL */
  r = tpbench("matrix", "--for", "ops", "--gpus=2", "--models", "8b", "--projs", "qkv", "--tokens",
              "8192", "--schedule", "ce", "--symm", "ipc,nccl", NULL);
  rp_expect(&r, 0, "7 configurations, 7 to run, 0 rejected, 0 planned (host of 2 GPUs)", NULL);
  assert_non_null(strstr(r.out, "dist_gemm ce chunks=0 symm=nccl"));
  assert_non_null(strstr(r.out, "decided on the GPU: whether NCCL offers symmetric memory"));
  rp_free(&r);
  rp_run_expect(TPBENCH_EXE, 60, 2, NULL, "--symm: 'nvshmem' is not one of ipc|nccl", "matrix",
                "--for", "ops", "--symm", "nvshmem", NULL);
  rp_run_expect(TPBENCH_EXE, 60, 2, NULL, "--gpus: '0' is not a whole number in [1, 4096]",
                "matrix", "--gpus", "0", NULL);
  rp_run_expect(TPBENCH_EXE, 60, 0, "--composition", NULL, "matrix", "--help", NULL);
}

/* Fails unless every row of matrix's table has its GFLOP figure end and its status start under
 * the header's: no text of a column pushes the ones after it out of line. */
static void expect_columns_in_line(const char *table) {
  const char *header_end = strchr(table, '\n');
  const char *status = strstr(table, "  status\n");
  assert_non_null(header_end);
  assert_true(status && status < header_end);
  const size_t at = (size_t)(status - table) + 2; /* where each row's status begins */
  int rows = 0;
  /* a row opens with its case number in 5 columns; the summary after them does not */
  for (const char *line = header_end + 1; *line >= '0' && *line <= '9' && line[5] == ' '; ++rows) {
    const char *end = strchr(line, '\n');
    assert_non_null(end);
    if ((size_t)(end - line) <= at || line[at - 3] < '0' || line[at - 3] > '9' ||
        strncmp(line + at - 2, "  ", 2) != 0 || line[at] == ' ')
      fail_msg("out of line with the header (status at %zu): %.*s", at, (int)(end - line), line);
    line = end + 1;
  }
  assert_true(rows > 0);
}

/* A configuration longer than the column's usual 32 characters (+fsdp_traffic after
 * dist_gemm's schedule) widens the column; the others stay 32 wide. */
static void test_matrix_columns_line_up(void **state) {
  (void)state;
  rp_result r =
      tpbench("matrix", "--axis", "model=debug", "--axis", "layer=ffn", "--axis", "seqlen=2048",
              "--axis", "pass=fwd", "--axis", "graph=off", "--axis", "fsdp_traffic=on", "--axis",
              "schedule=auto,multimem", "--axis", "symm=ipc,nccl", NULL);
  rp_expect(&r, 0, "dist_gemm multimem chunks=0 symm=nccl +fsdp_traffic ", NULL);
  expect_columns_in_line(r.out);
  rp_free(&r);
  r = tpbench("matrix", "--axis", "model=debug", "--axis", "layer=ffn", NULL);
  rp_expect(&r, 0, "configuration                         GFLOP  status\n", NULL);
  expect_columns_in_line(r.out);
  rp_free(&r);
}

/* docs/composition.md's table is `tpbench matrix --composition` verbatim, between its markers. */
#define COMPOSITION_BEGIN "<!-- composition table: `tpbench matrix --composition` writes it -->\n"
#define COMPOSITION_END "<!-- end of the composition table -->"

/* A text file, NUL-terminated; fails the test if unreadable. Not inlined:
 * GCC's -Wdangling-pointer misreads open_memstream's buffer once inlined
 * (a false positive at -O2). */
__attribute__((noinline)) static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  char *text = NULL;
  size_t len = 0;
  FILE *sink = open_memstream(&text, &len);
  assert_non_null(sink);
  for (int c; (c = fgetc(f)) != EOF;) fputc(c, sink);
  fclose(f);
  assert_int_equal(fclose(sink), 0); /* open_memstream NUL-terminates */
  assert_non_null(text);
  return text;
}

static void test_composition_table_in_readme(void **state) {
  (void)state;
  rp_result r = tpbench("matrix", "--composition", NULL);
  rp_expect(&r, 0, "| verdict | layer | backend | schedule | tp | dp |", NULL);
  assert_null(strstr(r.out, "not run yet"));
  assert_null(strstr(r.out, "activation checkpointing runtime not implemented yet"));
  /* every ac mode runs where its rules let it (fwd+bwd; full without save_gathered), and dp 2
   * at TP 1, with fsdp_traffic off and on: the run row's last two columns (ac, fsdp_traffic)
   * are every value */
  const char *run_row = strstr(r.out, "\n| run | * | * | -, auto, ce, sm, ring | 1, 2 | * |");
  assert_non_null(run_row);
  const char *row_end = strchr(run_row + 1, '\n');
  assert_non_null(row_end);
  assert_true(row_end - run_row > 10 && strncmp(row_end - 10, " | * | * |", 10) == 0);
  assert_non_null(strstr(r.out, "| rejected: fsdp_traffic=on puts FSDP's collectives beside a dp 1 "
                                "layer; dp 2 runs its own"));
  assert_non_null(strstr(r.out, "| run |"));
  char *readme = read_text(TP_TEST_DATA_DIR "/../../docs/composition.md");
  const char *begin = strstr(readme, COMPOSITION_BEGIN);
  const char *end = begin ? strstr(begin, COMPOSITION_END) : NULL;
  if (!begin || !end) {
    free(readme);
    rp_free(&r);
    fail_msg("docs/composition.md has no composition table between its markers");
    return;
  }
  begin += strlen(COMPOSITION_BEGIN);
  const char *out = r.out ? r.out : "";
  const size_t copy = (size_t)(end - begin), want = strlen(out);
  if (copy != want || memcmp(begin, out, want) != 0)
    fail_msg("docs/composition.md's table differs from `tpbench matrix --composition`: "
             "paste its output between the markers");
  free(readme);
  rp_free(&r);
  /* Another host changes the plan: on 4 GPUs TP 4 and dp 2 x tp 2 need no more GPUs. */
  r = tpbench("matrix", "--composition", "--gpus", "4", NULL);
  rp_expect(&r, 0, "a host of 4 GPUs", NULL);
  assert_null(strstr(r.out, "needs 4 GPUs"));
  assert_non_null(strstr(r.out, "needs 8 GPUs (dp 2 x tp 4)"));
  rp_free(&r);
  rp_run_expect(TPBENCH_EXE, 60, 2, NULL, "--composition: '--tp' is not taken", "matrix",
                "--composition", "--tp", "2", NULL);
}

/* A TP degree is one rule however it is typed: --tp V and --axis tp=V list the same for run and
 * for ops. Past a group's 16 ranks both reach the matrix's rejection with its reason (run's --tp
 * stopped at 64 with a usage error where --axis tp= took up to 4096, ops' both at 64); past the
 * one bound, TP_MAX_DEGREE, both are refused (2). */
static void test_tp_typed_either_way(void **state) {
  (void)state;
  static const char *const run_axes[] = {"--axis", "model=debug", "--axis", "layer=ffn",
                                         "--axis", "seqlen=2048", "--axis", "pass=fwd",
                                         "--axis", "graph=off"};
  static const char *const ops_axes[] = {"--for",   "ops", "--models", "debug",
                                         "--projs", "qkv", "--tokens", "409600"};
  static const char *const values[] = {"100", "4096", "4097"};
  for (int owner = 0; owner < 2; owner++) {
    const char *const *axes = owner ? ops_axes : run_axes;
    const int n_axes = owner ? 8 : 10;
    for (size_t v = 0; v < sizeof values / sizeof *values; v++) {
      rp_result forms[2];
      for (int form = 0; form < 2; form++) {
        char axis[32];
        snprintf(axis, sizeof axis, "tp=%s", values[v]);
        char *argv[16] = {TPBENCH_EXE, "matrix"};
        int n = 2;
        for (int i = 0; i < n_axes; i++) argv[n++] = (char *)axes[i];
        argv[n++] = form ? "--axis" : "--tp";
        argv[n++] = form ? axis : (char *)values[v];
        argv[n] = NULL;
        forms[form] = rp_run(argv, 60);
      }
      const int past_bound = v == 2;
      for (int form = 0; form < 2; form++) {
        if (forms[form].status != (past_bound ? 2 : 0))
          fail_msg("%s tp %s (%s): exit %d: %s", owner ? "ops" : "run", values[v],
                   form ? "--axis" : "--tp", forms[form].status, forms[form].err);
        if (past_bound) assert_non_null(strstr(forms[form].err, "4097 is out of range [1, 4096]"));
        else assert_non_null(strstr(forms[form].out, "a tpbench group holds at most 16 ranks"));
      }
      assert_string_equal(forms[0].out, forms[1].out);
      rp_free(&forms[0]);
      rp_free(&forms[1]);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matrix_quick),
      cmocka_unit_test(test_matrix_rejections),
      cmocka_unit_test(test_matrix_usage_errors),
      cmocka_unit_test(test_matrix_file),
      cmocka_unit_test(test_run_options),
      cmocka_unit_test(test_help_names_every_axis),
      cmocka_unit_test(test_report_layers),
      cmocka_unit_test(test_one_matrix_interface),
      cmocka_unit_test(test_ops_shape),
      cmocka_unit_test(test_matrix_planned),
      cmocka_unit_test(test_tp_typed_either_way),
      cmocka_unit_test(test_matrix_columns_line_up),
      cmocka_unit_test(test_composition_table_in_readme),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
