/*
 * test_drift.c — `tpbench drift` without a GPU: its options (parsed into
 * the vocabulary's enums, every rejection with its reason, before any GPU
 * is looked for), the drift table and its verdict from stored steps (the
 * bit-identical judgement byte for byte, differences, non-finite and
 * missing steps, rejected and failed configurations, CSV that reads back
 * bit for bit), `--show`, and the other reading commands on a database
 * holding drift runs (report shows the drift table for a drift run and
 * leaves drift rows out of the throughput table; runs, compare, history and
 * dashboard do not choke on them).
 *
 * The databases are written here through the store, the way `tpbench
 * drift` writes them; their numbers are made up (host "synthetic").
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

#include <sqlite3.h>

#include "bench/cli/drift_args.h"
#include "report/tp_drift.h"
#include "store/tp_store.h"
#include "tests/cpu/run_program.h"

#ifndef TPBENCH_EXE
#error "TPBENCH_EXE must name the tpbench binary"
#endif

#define tpbench(...) rp_run_exe(TPBENCH_EXE, 60, NULL, __VA_ARGS__)

enum { N_STEPS = 10 };

/* ---- options --------------------------------------------------------------------------------- */

/* Parses argv (NULL-terminated, "drift" first) with stderr silenced. */
static tp_rc parse(tp_drift_args *a, const char *const *argv) {
  int argc = 0;
  while (argv[argc]) argc++;
  tp_drift_args_defaults(a);
  int help = 0;
  fflush(stderr);
  FILE *saved = stderr;
  stderr = fopen("/dev/null", "w");
  tp_rc rc = tp_drift_args_parse(argc, (char **)argv, a, &help);
  fclose(stderr);
  stderr = saved;
  return rc;
}

static void test_defaults_resolve(void **state) {
  (void)state;
  tp_drift_args a;
  const char *argv[] = {"drift", NULL};
  assert_int_equal(parse(&a, argv), TP_OK);
  assert_string_equal(a.model->name, "llama3-8b");
  assert_int_equal(a.layer, TP_LAYER_BLOCK);
  assert_int_equal(a.dtype, TP_BF16);
  assert_int_equal(a.optimizer, TP_DRIFT_ARG_ADAMW);
  assert_true(a.lr == TP_DRIFT_ADAMW_DEFAULT_LR);
  assert_int_equal(a.steps, 10);
  assert_int_equal(a.n_schedules, 1);
  assert_int_equal(a.schedules[0], TP_SCHED_CE);
  assert_int_equal(a.n_rs_sums, 2);
  assert_int_equal(a.rs_sums[0], TP_RS_SUM_EPILOGUE);
  assert_int_equal(a.rs_sums[1], TP_RS_SUM_NCCL);
  /* stock twice, then ce with each sum */
  assert_int_equal(tp_drift_args_variants(&a), 4);
  assert_int_equal(a.show, 0);
}

static void test_options_resolve(void **state) {
  (void)state;
  tp_drift_args a;
  const char *argv[] = {"drift", "--model",  "debug", "--layer",     "ffn",  "--layers",
                        "3",     "--steps",  "3",     "--optimizer", "sgd",  "--lr",
                        "2.5e1", "--seed",   "7",     "--rs-sum",    "nccl", "--schedules",
                        "sm,ce", "--repeat", "1",     "--dtype",     "fp32", "--same-batch",
                        NULL};
  assert_int_equal(parse(&a, argv), TP_OK);
  assert_string_equal(a.model->name, "debug");
  assert_int_equal(a.layer, TP_LAYER_FFN);
  assert_int_equal(a.depth, 3);
  assert_int_equal(a.optimizer, TP_DRIFT_ARG_SGD);
  assert_true(a.lr == 25.0);
  assert_int_equal(a.seed, 7);
  assert_int_equal(a.n_rs_sums, 1);
  assert_int_equal(a.rs_sums[0], TP_RS_SUM_NCCL);
  assert_int_equal(a.n_schedules, 2);
  assert_int_equal(a.schedules[0], TP_SCHED_SM);
  assert_int_equal(a.schedules[1], TP_SCHED_CE);
  assert_int_equal(a.dtype, TP_FP32);
  assert_int_equal(a.same_batch, 1);
  assert_int_equal(tp_drift_args_variants(&a), 3);
  const char *show[] = {"drift", "--show", "12", NULL};
  assert_int_equal(parse(&a, show), TP_OK);
  assert_int_equal(a.show, 1);
  assert_int_equal(a.show_run, 12);
  const char *latest[] = {"drift", "--show", "latest", NULL};
  assert_int_equal(parse(&a, latest), TP_OK);
  assert_int_equal(a.show, 1);
  assert_int_equal(a.show_run, 0);
}

/* Each mistake exits 2 before any GPU is looked for, saying what is wrong. */
static void test_rejections(void **state) {
  (void)state;
  static const struct {
    const char *args[6];
    const char *says;
  } cases[] = {
      {{"--optimizer", "sgd"}, "--optimizer sgd needs --lr"},
      {{"--lr", "0"}, "--lr: '0' is not a learning rate"},
      {{"--lr", "-1e-3"}, "is not a learning rate"},
      {{"--lr", "nan"}, "is not a learning rate"},
      {{"--lr", "1e7"}, "is not a learning rate"},
      {{"--lr", "1e-3x"}, "is not a learning rate"},
      {{"--lr", "0x1p-10"}, "is not a learning rate"}, /* strtod alone: 2^-10 */
      {{"--steps", "0"}, "--steps: 0 is out of range"},
      {{"--layers", "0"}, "--layers: 0 is out of range"},
      {{"--layer", "mlp"}, "'mlp' is not one of attention|ffn|block"},
      {{"--schedules", "ce,warp"}, "'warp' is not one of"},
      {{"--rs-sum", "fp64"}, "'fp64' is not one of epilogue|nccl"},
      {{"--dtype", "fp8"}, "'fp8' is not one of bf16|fp32"},
      {{"--model", "gpt5"}, "--model"},
      {{"--model", "deepseek-v3-dense"}, "train --layer ffn"},
      {{"--repeat", "8", "--schedules", "auto,ce,sm,ring,multimem"}, "at most 16"},
      /* a name twice would train one configuration twice under one key */
      {{"--schedules", "ce,sm,ce"}, "--schedules: 'ce' is listed twice"},
      {{"--rs-sum", "nccl,nccl"}, "--rs-sum: 'nccl' is listed twice"},
      {{"--show", "0"}, "--show: '0' is not a run id"},
      {{"--show", "last"}, "is not a run id"},
      {{"--gpus", "-1"}, "--gpus"},
      {{"--bogus"}, "unknown option '--bogus'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const char *const *a = cases[i].args;
    rp_result r = tpbench("drift", a[0], a[1], a[2], a[3], a[4], a[5], NULL);
    rp_expect(&r, 2, NULL, cases[i].says);
    rp_free(&r);
  }
  /* the model without attention trains its FFN */
  tp_drift_args args;
  const char *ffn[] = {"drift", "--model", "deepseek-v3-dense", "--layer", "ffn", NULL};
  assert_int_equal(parse(&args, ffn), TP_OK);
}

/* Training needs a GPU: with none visible (CUDA_VISIBLE_DEVICES empty, so a GPU host counts as
 * none too), or in a build without CUDA, it says so, exit 1, and writes no database. */
static void test_training_needs_a_gpu(void **state) {
  (void)state;
  const char *visible = getenv("CUDA_VISIBLE_DEVICES");
  char *saved = visible ? strdup(visible) : NULL;
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  rp_result r = tpbench("drift", "--model", "debug", "--db", "/tmp/tpbench-drift-none.db", NULL);
  if (saved) setenv("CUDA_VISIBLE_DEVICES", saved, 1);
  else unsetenv("CUDA_VISIBLE_DEVICES");
  free(saved);
  rp_expect(&r, 1, NULL, "tpbench drift: ");
  assert_true(strstr(r.err, "GPU") != NULL || strstr(r.err, "CUDA") != NULL);
  rp_free(&r);
  assert_int_equal(access("/tmp/tpbench-drift-none.db", F_OK), -1);
  r = tpbench("drift", "--help", NULL);
  rp_expect(&r, 0, "--rs-sum LIST", NULL);
  assert_non_null(strstr(r.out, "--show RUN"));
  rp_free(&r);
}

/* ---- stored runs -------------------------------------------------------------------------------
 */

typedef struct fixture {
  char db[64];
  int64_t drift_run, layer_run, drift_run2;
} fixture;

static double stock_loss(int k) { return 0.7 - 0.0125 * k + 1.0 / 3e5; }
static double stock_norm(int k) { return 0.052 + 0.00075 * k; }

static int64_t begin_run(tp_store *s, const char *command, const char *line) {
  tp_run_info info;
  memset(&info, 0, sizeof info);
  info.commit = "d1f7";
  info.host = "synthetic";
  info.gpu_name = "NVIDIA H200";
  info.gpu_count = 2;
  info.command = command;
  info.command_line = line;
  int64_t run = 0;
  assert_int_equal(tp_store_begin_run(s, &info, &run), TP_OK);
  return run;
}

static tp_config_axes drift_axes(const char *backend, const char *schedule, const char *rs_sum) {
  tp_config_axes a;
  memset(&a, 0, sizeof a);
  a.kind = "drift";
  a.model = "debug";
  a.op_or_layer = "block";
  a.backend = backend;
  a.schedule = schedule;
  a.tp = 2;
  a.batch = 1;
  a.seqlen = 256;
  a.tokens = 256;
  a.dtype = "bf16";
  a.sp = 1;
  a.pass = "fwd+bwd";
  a.rs_sum = rs_sum;
  return a;
}

/* A trained configuration: step k's loss and norm are stock's times (1 + rel) from step `from`. */
static void put_trained(tp_store *s, int64_t run, tp_config_axes a, int n, int loss_from,
                        double loss_rel, int norm_from, double norm_rel) {
  tp_drift_step steps[N_STEPS];
  for (int k = 0; k < n; ++k) {
    steps[k].step = k;
    steps[k].loss = stock_loss(k) * (k >= loss_from ? 1.0 + loss_rel : 1.0);
    steps[k].grad_norm = stock_norm(k) * (k >= norm_from ? 1.0 + norm_rel : 1.0);
  }
  tp_result res;
  memset(&res, 0, sizeof res);
  res.n_samples = n;
  res.median_us = res.p10_us = res.p90_us = res.mean_us = res.min_us = res.max_us = 1500;
  res.tokens_per_s = 256 / 1.5e-3;
  res.tflops = res.max_abs_err = res.rel_err = NAN;
  tp_config_record rec;
  memset(&rec, 0, sizeof rec);
  rec.axes = &a;
  rec.status = TP_STATUS_OK;
  rec.result = &res;
  rec.drift_steps = steps;
  rec.n_drift_steps = n;
  assert_int_equal(tp_store_put_config(s, run, &rec, NULL), TP_OK);
}

static void put_not_trained(tp_store *s, int64_t run, tp_config_axes a, tp_config_status status,
                            const char *reason) {
  tp_config_record rec;
  memset(&rec, 0, sizeof rec);
  rec.axes = &a;
  rec.status = status;
  rec.reason = reason;
  assert_int_equal(tp_store_put_config(s, run, &rec, NULL), TP_OK);
}

/* A drift run as `tpbench drift --gpus 2` writes one: stock twice, ce epilogue (the loss
 * bit-identical for two steps, the norm apart by 1.19e-7 from step 2: the torchtitan report),
 * ce nccl (identical), sm epilogue rejected. */
static void put_drift_run(tp_store *s, int64_t run) {
  put_trained(s, run, drift_axes("stock", NULL, NULL), N_STEPS, N_STEPS, 0, N_STEPS, 0);
  put_trained(s, run, drift_axes("stock", NULL, NULL), N_STEPS, N_STEPS, 0, N_STEPS, 0);
  put_trained(s, run, drift_axes("dist_gemm", "ce", "epilogue"), N_STEPS, 2, 3e-7, 2, 1.19e-7);
  put_trained(s, run, drift_axes("dist_gemm", "ce", "nccl"), N_STEPS, N_STEPS, 0, N_STEPS, 0);
  put_not_trained(s, run, drift_axes("dist_gemm", "sm", "epilogue"), TP_STATUS_REJECTED,
                  "qkv: sm: chunk size not a multiple of 16 bytes (8 bytes)");
}

/* A `run` of layers beside the drift runs: its table must hold no drift row. */
static void put_layer_run(tp_store *s, int64_t run) {
  static const char *const backends[] = {"stock", "dist_gemm"};
  for (int b = 0; b < 2; ++b) {
    tp_config_axes a = drift_axes(backends[b], b ? "ce" : NULL, NULL);
    a.kind = "layer";
    tp_result res;
    memset(&res, 0, sizeof res);
    res.n_samples = 1;
    res.median_us = res.p10_us = res.p90_us = res.mean_us = res.min_us = res.max_us =
        b ? 900 : 1000;
    res.tokens_per_s = 256 / (res.median_us * 1e-6);
    res.tflops = res.max_abs_err = res.rel_err = NAN;
    double sample = res.median_us;
    tp_samples set = {0, 1, &sample, NULL, NULL};
    tp_config_record rec;
    memset(&rec, 0, sizeof rec);
    rec.axes = &a;
    rec.status = TP_STATUS_OK;
    rec.result = &res;
    rec.samples = &set;
    rec.n_sample_sets = 1;
    assert_int_equal(tp_store_put_config(s, run, &rec, NULL), TP_OK);
  }
}

static int setup_fixture(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f) return -1;
  snprintf(f->db, sizeof f->db, "/tmp/tpbench-drift-XXXXXX");
  int fd = mkstemp(f->db);
  if (fd < 0) return -1;
  close(fd);
  unlink(f->db);
  tp_store *s = NULL;
  if (tp_store_open(f->db, 1, &s) != TP_OK) return -1;
  f->layer_run = begin_run(s, "run", "tpbench run --model debug");
  put_layer_run(s, f->layer_run);
  assert_int_equal(tp_store_finish_run(s, f->layer_run), TP_OK);
  f->drift_run = begin_run(s, "drift", "tpbench drift --model debug --gpus 2");
  put_drift_run(s, f->drift_run);
  assert_int_equal(tp_store_finish_run(s, f->drift_run), TP_OK);
  f->drift_run2 = begin_run(s, "drift", "tpbench drift --model debug --gpus 2 (again)");
  put_drift_run(s, f->drift_run2);
  assert_int_equal(tp_store_finish_run(s, f->drift_run2), TP_OK);
  tp_store_close(s);
  *state = f;
  return 0;
}

/* Removes a database and its side files, unless TP_TEST_KEEP is set (then it says where). */
static void remove_db(const char *db) {
  if (getenv("TP_TEST_KEEP")) {
    fprintf(stderr, "kept %s\n", db);
    return;
  }
  char side[96];
  unlink(db);
  snprintf(side, sizeof side, "%s-wal", db);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", db);
  unlink(side);
}

static int teardown_fixture(void **state) {
  fixture *f = *state;
  remove_db(f->db);
  free(f);
  return 0;
}

/* ---- the judgement --------------------------------------------------------------------------- */

static void test_compare_bits(void **state) {
  (void)state;
  const double x = stock_norm(2);
  assert_int_equal(tp_drift_compare(x, x), TP_DRIFT_IDENTICAL);
  assert_int_equal(tp_drift_compare(x, nextafter(x, 1.0)), TP_DRIFT_DIFFERS);
  assert_int_equal(tp_drift_compare(x, x * (1 + 1.19e-7)), TP_DRIFT_DIFFERS);
  assert_int_equal(tp_drift_compare(0.0, -0.0), TP_DRIFT_DIFFERS); /* equal, not the same bits */
  assert_int_equal(tp_drift_compare(x, NAN), TP_DRIFT_NONFINITE);
  assert_int_equal(tp_drift_compare(INFINITY, INFINITY), TP_DRIFT_NONFINITE);
  assert_string_equal(tp_drift_match_name(TP_DRIFT_IDENTICAL), "bit-identical");
}

static void load(const fixture *f, int64_t run, tp_drift_run *out) {
  tp_store *s = NULL;
  assert_int_equal(tp_store_open_readonly(f->db, &s), TP_OK);
  assert_int_equal(tp_drift_load(s, run, out), TP_OK);
  tp_store_close(s);
}

static void test_load_and_judge(void **state) {
  const fixture *f = *state;
  tp_drift_run run;
  load(f, f->drift_run, &run);
  assert_int_equal(run.n_series, 5);
  assert_int_equal(run.reference, 0);
  assert_string_equal(run.series[0].label, "stock");
  assert_string_equal(run.series[1].label, "stock #2");
  assert_string_equal(run.series[2].label, "dist_gemm ce rs_sum=epilogue");
  assert_string_equal(run.series[3].label, "dist_gemm ce rs_sum=nccl");
  assert_int_equal(run.series[2].n_steps, N_STEPS);
  assert_true(run.series[0].loss[3] == stock_loss(3)); /* stored and read back exactly */
  tp_drift_verdict v;
  tp_drift_judge(&run, &v);
  assert_int_equal(v.trained, 4);
  assert_int_equal(v.rejected, 1);
  assert_int_equal(v.failed, 0);
  assert_int_equal(v.nonfinite_steps, 0);
  assert_int_equal(v.differing, 1); /* the epilogue only */
  assert_int_equal(tp_drift_exit_status(&v), TP_EXIT_OK);
  tp_drift_run_free(&run);
  /* 0: the latest run with drift configurations */
  load(f, 0, &run);
  assert_int_equal(run.run_id, f->drift_run2);
  tp_drift_run_free(&run);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open_readonly(f->db, &s), TP_OK);
  assert_int_equal(tp_drift_load(s, f->layer_run, &run), TP_EUSAGE);
  assert_non_null(strstr(tp_last_message(), "has no drift configurations"));
  tp_drift_run_free(&run);
  assert_int_equal(tp_drift_load(s, 999, &run), TP_EUSAGE);
  assert_non_null(strstr(tp_last_message(), "has no run 999"));
  tp_drift_run_free(&run);
  tp_store_close(s);
}

/* A step number no `tpbench drift` writes (beyond an int, or negative past the CHECK) is
 * refused with the configuration named: read as an int, 2^32 was step 0 again, and the table
 * showed the real step 3 missing and step 0 twice. */
static void test_hostile_step_numbers(void **state) {
  (void)state;
  static const char *const tamper[] = {
      "UPDATE drift_steps SET step = 4294967296 WHERE step = 3 AND config_id = (SELECT max(id) "
      "FROM configs WHERE status = 'ok')",
      "PRAGMA ignore_check_constraints = 1; UPDATE drift_steps SET step = -5 WHERE step = 3 AND "
      "config_id = (SELECT max(id) FROM configs WHERE status = 'ok')"};
  for (size_t i = 0; i < sizeof tamper / sizeof tamper[0]; ++i) {
    char db[] = "/tmp/tpbench-drift-hostile-XXXXXX";
    int fd = mkstemp(db);
    assert_true(fd >= 0);
    close(fd);
    unlink(db);
    tp_store *s = NULL;
    assert_int_equal(tp_store_open(db, 1, &s), TP_OK);
    int64_t run = begin_run(s, "drift", "tpbench drift --model debug --gpus 2");
    put_drift_run(s, run);
    assert_int_equal(tp_store_finish_run(s, run), TP_OK);
    assert_int_equal(sqlite3_exec(tp_store_db(s), tamper[i], NULL, NULL, NULL), SQLITE_OK);
    tp_store_close(s);
    assert_int_equal(tp_store_open_readonly(db, &s), TP_OK);
    tp_drift_run loaded;
    assert_int_equal(tp_drift_load(s, run, &loaded), TP_EFOREIGN);
    assert_non_null(strstr(tp_last_message(), i ? "drift step -5" : "drift step 4294967296"));
    assert_non_null(strstr(tp_last_message(), "not a step tpbench writes"));
    tp_drift_run_free(&loaded);
    tp_store_close(s);
    remove_db(db);
  }
}

static void test_show_markdown(void **state) {
  const fixture *f = *state;
  char run[24];
  snprintf(run, sizeof run, "%lld", (long long)f->drift_run);
  rp_result r = tpbench("drift", "--show", run, "--db", f->db, NULL);
  rp_expect(&r, 0, "## Drift of run", NULL);
  const char *out = r.out;
  assert_non_null(strstr(out, "Reference: stock (config"));
  assert_non_null(strstr(out, "`tpbench drift --model debug --gpus 2`"));
  /* stock #2 at step 0: every value the same bits */
  assert_non_null(strstr(out, "| 0 | 0.7000033333 | stock #2 | 0.7000033333 | 0 | bit-identical "
                              "| 0.052 | 0.052 | 0 | bit-identical |"));
  /* the epilogue: identical loss for steps 0 and 1, the norm apart from step 2 */
  assert_non_null(strstr(out, "| 1 | 0.6875033333 | dist_gemm ce rs_sum=epilogue | 0.6875033333 "
                              "| 0 | bit-identical | 0.05275 | 0.05275 | 0 | bit-identical |"));
  assert_non_null(strstr(out, "| 2 | 0.6750033333 | dist_gemm ce rs_sum=epilogue | 0.6750035358 "
                              "| +2.025e-07 | differs | 0.0535 | 0.05350000637 | +6.367e-09 | "
                              "differs |"));
  assert_non_null(strstr(out, "- dist_gemm ce rs_sum=epilogue (config"));
  assert_non_null(
      strstr(out, "loss bit-identical at 2 of 10 steps, grad norm at 2 of 10; largest"));
  assert_non_null(strstr(out, "rs_sum=nccl (config"));
  assert_non_null(strstr(out, "): loss bit-identical at 10 of 10 steps, grad norm at 10 of 10."));
  assert_non_null(strstr(out, "dist_gemm sm rs_sum=epilogue (config"));
  assert_non_null(strstr(out, "rejected — qkv: sm: chunk size not a multiple of 16 bytes"));
  assert_non_null(strstr(out, "): the reference, 10 steps, loss 0.700003 → 0.587503."));
  /* the rejected configuration has no rows */
  assert_null(strstr(out, "| dist_gemm sm"));
  rp_free(&r);
  /* latest: the second run */
  r = tpbench("drift", "--show", "latest", "--db", f->db, NULL);
  rp_expect(&r, 0, "(again)", NULL);
  rp_free(&r);
}

/* CSV carries 17 significant digits: every value reads back with its own bits. */
static void test_show_csv_round_trips(void **state) {
  const fixture *f = *state;
  char run[24];
  snprintf(run, sizeof run, "%lld", (long long)f->drift_run);
  rp_result r = tpbench("drift", "--show", run, "--db", f->db, "--format", "csv", NULL);
  rp_expect(&r, 0,
            "run_id,step,configuration,config_id,reference_config_id,reference_loss,loss,"
            "loss_diff,loss_bits,reference_grad_norm,grad_norm,grad_norm_diff,grad_norm_bits\r\n",
            NULL);
  int rows = 0, checked = 0;
  for (char *line = strstr(r.out, "\r\n") + 2; *line; line = strstr(line, "\r\n") + 2) {
    rows++;
    int step = 0;
    char label[64];
    if (sscanf(line, "%*d,%d,%63[^,]", &step, label) != 2) fail_msg("row: %.120s", line);
    if (!strcmp(label, "stock")) {
      /* the reference's own row: its loss is the 7th field */
      const char *p = line;
      for (int field = 0; field < 6; ++field) p = strchr(p, ',') + 1;
      assert_true(strtod(p, NULL) == stock_loss(step));
      assert_non_null(strstr(line, ",bit-identical,"));
      checked++;
    }
    if (!strstr(line, "\r\n")) break;
  }
  assert_int_equal(rows, 4 * N_STEPS); /* four trained configurations, the reference included */
  assert_int_equal(checked, N_STEPS);
  rp_free(&r);
}

/* Non-finite values, failures and a missing reference make the exit status 1. */
static void test_verdicts(void **state) {
  (void)state;
  char db[] = "/tmp/tpbench-drift-verdict-XXXXXX";
  int fd = mkstemp(db);
  assert_true(fd >= 0);
  close(fd);
  unlink(db);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 1, &s), TP_OK);
  /* run 1: a dist_gemm configuration diverged at step 3 (stored NULL) and misses its last step */
  int64_t run = begin_run(s, "drift", "tpbench drift (diverged)");
  put_trained(s, run, drift_axes("stock", NULL, NULL), N_STEPS, N_STEPS, 0, N_STEPS, 0);
  put_trained(s, run, drift_axes("dist_gemm", "ce", "nccl"), N_STEPS - 1, 3, NAN, N_STEPS, 0);
  /* run 2: stock failed: nothing to compare against */
  int64_t failed = begin_run(s, "drift", "tpbench drift (failed)");
  put_not_trained(s, failed, drift_axes("stock", NULL, NULL), TP_STATUS_OOM,
                  "cudaMalloc failed: out of memory");
  put_trained(s, failed, drift_axes("dist_gemm", "ce", "nccl"), 2, 2, 0, 2, 0);
  tp_store_close(s);
  rp_result r = tpbench("drift", "--show", "1", "--db", db, NULL);
  rp_expect(&r, 1, "| 3 | 0.6625033333 | dist_gemm ce rs_sum=nccl | non-finite | - | non-finite",
            "run 1: 6 steps with a non-finite loss or gradient norm");
  assert_non_null(strstr(r.out, "| 9 | 0.5875033333 | dist_gemm ce rs_sum=nccl | - | - | missing"));
  assert_non_null(strstr(r.out, "9 steps stored against stock's 10; **6 steps not finite**"));
  rp_free(&r);
  r = tpbench("drift", "--show", "2", "--db", db, NULL);
  rp_expect(&r, 1, "No stock configuration trained: nothing to compare against.",
            "run 2: no stock configuration trained; 1 configuration failed");
  assert_non_null(strstr(r.out, "oom — cudaMalloc failed: out of memory"));
  assert_non_null(strstr(r.out, "2 steps, no reference to compare with."));
  rp_free(&r);
  r = tpbench("drift", "--show", "3", "--db", db, NULL);
  rp_expect(&r, 2, NULL, "has no run 3");
  rp_free(&r);
  r = tpbench("drift", "--show", "1", "--db", "/tmp/tpbench-drift-missing.db", NULL);
  rp_expect(&r, 2, NULL, "no database at");
  rp_free(&r);
  remove_db(db);
}

/* ---- the other readers -------------------------------------------------------------------------
 */

static void test_report_on_drift_runs(void **state) {
  const fixture *f = *state;
  char run[24];
  /* a drift run's report is its drift table */
  snprintf(run, sizeof run, "%lld", (long long)f->drift_run);
  rp_result r = tpbench("report", "--db", f->db, "--run", run, NULL);
  rp_expect(&r, 0, "## Drift of run", NULL);
  assert_non_null(strstr(r.out, "| stock #2 |"));
  rp_free(&r);
  r = tpbench("report", "--db", f->db, NULL); /* the latest run: the second drift run */
  rp_expect(&r, 0, "(again)", NULL);
  /* --columns all is every column of the run's table: the drift table's fixed ones, in both of
   * its formats (it exited 2 on a database whose latest run is a drift run) */
  rp_result all = tpbench("report", "--db", f->db, "--columns", "all", NULL);
  rp_expect(&all, 0, "(again)", NULL);
  assert_string_equal(all.out, r.out);
  rp_free(&all);
  rp_free(&r);
  r = tpbench("report", "--db", f->db, "--format", "csv", NULL);
  all = tpbench("report", "--db", f->db, "--format", "csv", "--columns", "all", NULL);
  rp_expect(&all, 0, NULL, NULL);
  assert_string_equal(all.out, r.out);
  rp_free(&all);
  rp_free(&r);
  /* what the drift table cannot honour is refused with the reason (JSON read "run N has no op
   * configurations"; a filter or --columns was ignored, the whole table printed) */
  r = tpbench("report", "--db", f->db, "--run", run, "--format", "json", NULL);
  rp_expect(&r, 2, NULL, "is a drift run: its table is markdown or CSV");
  assert_string_equal(r.out, "");
  rp_free(&r);
  static const char *const table_options[][2] = {{"--model", "70b"},
                                                 {"--layer", "ffn"},
                                                 {"--pass", "fwd"},
                                                 {"--dtype", "fp32"},
                                                 {"--columns", "speedup"}};
  for (size_t i = 0; i < sizeof table_options / sizeof table_options[0]; i++) {
    r = tpbench("report", "--db", f->db, "--run", run, table_options[i][0], table_options[i][1],
                NULL);
    rp_expect(&r, 2, NULL, table_options[i][0]);
    assert_non_null(strstr(r.err, "applies to op and layer runs"));
    assert_string_equal(r.out, "");
    rp_free(&r);
  }
  /* the layer run's throughput table: its own two rows and no drift row */
  snprintf(run, sizeof run, "%lld", (long long)f->layer_run);
  r = tpbench("report", "--db", f->db, "--run", run, NULL);
  rp_expect(&r, 0, "| debug | block |", NULL);
  assert_null(strstr(r.out, "drift"));
  assert_null(strstr(r.out, "rs_sum"));
  assert_null(strstr(r.out, "chunk size not a multiple"));
  rp_free(&r);
  r = tpbench("report", "--db", f->db, "--run", run, "--format", "csv", NULL);
  rp_expect(&r, 0, NULL, NULL);
  assert_null(strstr(r.out, "drift"));
  rp_free(&r);
  r = tpbench("report", "--db", f->db, "--run", run, "--format", "openmetrics", NULL);
  rp_expect(&r, 0, NULL, NULL);
  assert_null(strstr(r.out, "drift"));
  rp_free(&r);
  r = tpbench("runs", "--db", f->db, NULL);
  rp_expect(&r, 0, "| drift |", NULL);
  rp_free(&r);
}

static void test_compare_history_dashboard(void **state) {
  const fixture *f = *state;
  char base[32], head[32];
  snprintf(base, sizeof base, "run:%lld", (long long)f->drift_run);
  snprintf(head, sizeof head, "run:%lld", (long long)f->drift_run2);
  /* compare gates no drift row: two drift runs have nothing in common to compare (2, never a
   * regression's 1), a drift run against itself neither */
  rp_result r = tpbench("compare", base, head, "--db", f->db, NULL);
  rp_expect(&r, 2, NULL, "nothing compared");
  rp_free(&r);
  r = tpbench("compare", base, base, "--db", f->db, "--format", "json", NULL);
  rp_expect(&r, 2, NULL, "nothing compared");
  assert_null(strstr(r.out, "rs-nccl"));
  rp_free(&r);
  /* history of a drift configuration: its step times across the runs of its key */
  r = tpbench("history", "--db", f->db, "--config", "3", NULL);
  rp_expect(&r, 0, "debug block T=256 bf16 fwd+bwd tp=2 stock", NULL);
  rp_free(&r);
  char dir[] = "/tmp/tpbench-drift-dash-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[64];
  snprintf(out, sizeof out, "%s/site", dir);
  r = tpbench("dashboard", "--db", f->db, "--out", out, NULL);
  rp_expect(&r, 0, NULL, NULL);
  rp_free(&r);
  char index[96];
  snprintf(index, sizeof index, "%s/index.html", out);
  assert_int_equal(access(index, F_OK), 0);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* --timeout, and the test-only hang knob's form (TPBENCH_TEST_HANG_STEP=STEP[:RANK]). */
static void test_timeout_and_hang_knob(void **state) {
  (void)state;
  tp_drift_args a;
  const char *argv[] = {"drift", NULL};
  assert_int_equal(parse(&a, argv), TP_OK);
  assert_int_equal(a.timeout_s, 120);
  const char *t[] = {"drift", "--timeout", "7", NULL};
  assert_int_equal(parse(&a, t), TP_OK);
  assert_int_equal(a.timeout_s, 7);
  const char *zero[] = {"drift", "--timeout", "0", NULL};
  assert_int_equal(parse(&a, zero), TP_EUSAGE);
  tp_drift_hang h;
  assert_int_equal(tp_drift_hang_parse(NULL, 2, 10, &h), TP_OK);
  assert_int_equal(h.step, -1);
  assert_int_equal(tp_drift_hang_parse("", 2, 10, &h), TP_OK);
  assert_int_equal(h.step, -1);
  assert_int_equal(tp_drift_hang_parse("3", 2, 10, &h), TP_OK);
  assert_int_equal(h.step, 3);
  assert_int_equal(h.rank, 0);
  assert_int_equal(tp_drift_hang_parse("9:1", 2, 10, &h), TP_OK);
  assert_int_equal(h.step, 9);
  assert_int_equal(h.rank, 1);
  const char *bad[] = {"10", "-1", "x", "3:", "3:2", "3:-1", "3:1x", ":1", "3 ",
                       /* only digits, as --timeout takes them: no sign, no blank */
                       " 3", "+3", "-0", "3: 1", "3:+1", "3:-0"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    assert_int_equal(tp_drift_hang_parse(bad[i], 2, 10, &h), TP_EUSAGE);
    assert_non_null(strstr(tp_last_message(), "TPBENCH_TEST_HANG_STEP="));
    assert_non_null(strstr(tp_last_message(), "STEP[:RANK]"));
  }
}

/* A configuration the watchdog ended mid-training keeps the steps it finished:
 * --show names them beside its status and reason, compares none, exits 1. */
static void test_hung_configuration_keeps_its_steps(void **state) {
  (void)state;
  char db[64];
  snprintf(db, sizeof db, "/tmp/tpbench-drift-hung-XXXXXX");
  int fd = mkstemp(db);
  assert_true(fd >= 0);
  close(fd);
  unlink(db);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 1, &s), TP_OK);
  const int64_t run = begin_run(s, "drift", "tpbench drift --model debug --timeout 5");
  put_trained(s, run, drift_axes("stock", NULL, NULL), N_STEPS, N_STEPS, 0, N_STEPS, 0);
  tp_drift_step steps[3];
  for (int k = 0; k < 3; ++k) steps[k] = (tp_drift_step){k, stock_loss(k), stock_norm(k)};
  tp_config_axes a = drift_axes("stock", NULL, NULL);
  tp_config_record rec;
  memset(&rec, 0, sizeof rec);
  rec.axes = &a;
  rec.status = TP_STATUS_TIMEOUT;
  rec.reason = "a drift training step did not finish within 5 s (--timeout) after 3 of 10 steps";
  rec.drift_steps = steps;
  rec.n_drift_steps = 3;
  assert_int_equal(tp_store_put_config(s, run, &rec, NULL), TP_OK);
  tp_store_close(s); /* not finished: the worker ended */
  char id[24];
  snprintf(id, sizeof id, "%lld", (long long)run);
  rp_result r = tpbench("drift", "--show", id, "--db", db, NULL);
  rp_expect(&r, 1, "stock #2 (config", NULL);
  assert_non_null(strstr(r.out, "timeout — a drift training step did not finish within 5 s"));
  assert_non_null(strstr(r.out, "; 3 steps stored before it stopped (not compared)."));
  assert_null(strstr(r.out, "| stock #2 |")); /* no rows of a configuration that did not finish */
  rp_free(&r);
  remove_db(db);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_timeout_and_hang_knob),
      cmocka_unit_test(test_hung_configuration_keeps_its_steps),
      cmocka_unit_test(test_defaults_resolve),
      cmocka_unit_test(test_options_resolve),
      cmocka_unit_test(test_rejections),
      cmocka_unit_test(test_training_needs_a_gpu),
      cmocka_unit_test(test_compare_bits),
      cmocka_unit_test(test_load_and_judge),
      cmocka_unit_test(test_hostile_step_numbers),
      cmocka_unit_test(test_show_markdown),
      cmocka_unit_test(test_show_csv_round_trips),
      cmocka_unit_test(test_verdicts),
      cmocka_unit_test(test_report_on_drift_runs),
      cmocka_unit_test(test_compare_history_dashboard),
  };
  return cmocka_run_group_tests(tests, setup_fixture, teardown_fixture);
}
