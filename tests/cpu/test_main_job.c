/*
 * test_main_job.c — scripts/main-job.sh, what `bash scripts/run.sh` does once
 * the binary is built, by the GPUs the host has (nvidia-smi's list, cut to
 * CUDA_VISIBLE_DEVICES):
 *   - none: it says so, prints the sample database's report marked as the
 *     sample's (the real binary), and exits 1;
 *   - one: `tpbench ops` at TP 1 (the GEMM alone and stock), the short
 *     table, every GEMM shape `project --gemms` lists as estimated measured
 *     alone (per dtype, once each), then `tpbench project` for TP 2, 4, 8
 *     marked as predicted — never a TP 2 matrix of rejections;
 *   - several: `tpbench run` as before; arguments go to `tpbench run` as
 *     they are.
 * GPUs are faked by an nvidia-smi stub on PATH; for one and several, a stub
 * tpbench records the commands it was given. TPBENCH_EXE names the binary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <sys/stat.h>

#include "tests/cpu/fixture_db.h"
#include "tests/cpu/run_program.h"

#ifndef TPBENCH_EXE
#error "TPBENCH_EXE must name the tpbench binary"
#endif

#define MAIN_JOB TP_TEST_DATA_DIR "/../../scripts/main-job.sh"

typedef struct {
  fx_dir dir;
  char bin[600], smi[600], log[600], db[600], path_env[800];
} fixture;

static int write_script(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f) == 0 && chmod(path, 0755) == 0 ? 0 : -1;
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || fx_mkdir(&f->dir, "tp_main_job") != 0) return -1;
  char bin_dir[600], stub[2400];
  fx_path(&f->dir, "bin", bin_dir, sizeof bin_dir);
  if (mkdir(bin_dir, 0755) != 0) return -1;
  fx_path(&f->dir, "bin/nvidia-smi", f->smi, sizeof f->smi);
  fx_path(&f->dir, "tpbench-stub", f->bin, sizeof f->bin);
  fx_path(&f->dir, "calls.log", f->log, sizeof f->log);
  fx_path(&f->dir, "job.db", f->db, sizeof f->db);
  /* a tpbench that writes each command it is given on a line of the log; asked for project's
   * GEMM list, two shapes estimated in bf16 (one of them listed twice), one in fp8-row and one
   * exact (STUB_GEMMS_RC set: it fails, listing nothing) */
  snprintf(stub, sizeof stub,
           "#!/bin/sh\necho \"$*\" >> '%s'\n"
           "case \"$*\" in *--gemms*)\n"
           "[ -z \"$STUB_GEMMS_RC\" ] || exit \"$STUB_GEMMS_RC\"\n"
           "echo 'model,proj,tokens,tp,role,dtype,m,n,k,op,weights,gflop,exact,us,source'\n"
           "echo 'm,qkv,8192,2,shard,bf16,4096,3072,4096,ag_linear,1,1.0,0,9.0,\"a, b\"'\n"
           "echo 'm,qkv,8192,2,chunk,bf16,4096,3072,4096,ag_linear,1,1.0,0,9.0,\"a, b\"'\n"
           "echo 'm,w2,8192,8,stock,bf16,8192,4096,1792,linear_rs,1,1.0,0,9.0,x'\n"
           "echo 'm,w2,8192,8,stock,fp8-row,8192,4096,1792,linear_rs,1,1.0,0,9.0,x'\n"
           "echo 'm,wo,8192,2,stock,bf16,8192,4096,2048,linear_rs,1,1.0,1,9.0,config 3' ;;\n"
           /* the runs, oldest first as `runs` lists them: STUB_RUNS=BEFORE/AFTER ops has run
            * (default none before, run 7 after) */
           "runs*) runs=\"${STUB_RUNS:-/7,u\\n}\"\n"
           "  grep -q '^ops ' '%s' && runs=${runs#*/} || runs=${runs%%%%/*}\n"
           "  printf 'run_id,uuid\\n%%b' \"$runs\" ;;\n"
           "esac\n",
           f->log, f->log);
  if (write_script(f->bin, stub) != 0) return -1;
  snprintf(f->path_env, sizeof f->path_env, "PATH=%s:/usr/bin:/bin", bin_dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  fx_rmdir(&f->dir);
  free(f);
  return 0;
}

/* nvidia-smi listing n GPUs (none: no nvidia-smi at all). */
static void fake_gpus(const fixture *f, int n) {
  unlink(f->smi);
  if (n == 0) return;
  char text[1024] = "#!/bin/sh\n";
  for (int i = 0; i < n; i++) {
    size_t used = strlen(text);
    snprintf(text + used, sizeof text - used,
             "echo 'GPU %d: NVIDIA H200 (UUID: GPU-0000000%d-fake)'\n", i, i);
  }
  assert_int_equal(write_script(f->smi, text), 0);
}

/* Runs main-job.sh with the binary given (NULL: the stub), extra VAR=value and arguments. */
static rp_result main_job(const fixture *f, const char *bin, const char *extra_env,
                          const char *arg) {
  char bin_env[700], db_env[700];
  snprintf(bin_env, sizeof bin_env, "TPBENCH_BIN=%s", bin ? bin : f->bin);
  snprintf(db_env, sizeof db_env, "TPBENCH_DB=%s", f->db);
  unlink(f->log);
  char *argv[12] = {"/usr/bin/env",      "-u",    "CUDA_VISIBLE_DEVICES",
                    (char *)f->path_env, bin_env, db_env};
  int n = 6;
  if (extra_env) argv[n++] = (char *)extra_env;
  argv[n++] = "bash";
  argv[n++] = MAIN_JOB;
  if (arg) argv[n++] = (char *)arg;
  argv[n] = NULL;
  return rp_run(argv, 300);
}

/* The commands the stub was given, one per line ("" when none). */
static char *calls(const fixture *f) {
  size_t len = 0;
  char *text = fx_read_text(f->log, &len);
  return text ? text : strdup("");
}

static void test_no_gpu_shows_the_sample(void **state) {
  fixture *f = *state;
  fake_gpus(f, 0);
  rp_result r = main_job(f, TPBENCH_EXE, NULL, NULL);
  rp_expect(&r, 1, "run.sh: no GPU here that CUDA can use", NULL);
  /* the sample's report, said to be the sample's */
  assert_non_null(strstr(r.out, "The figures are the sample's, not\nthis host's."));
  assert_non_null(strstr(r.out, "## tpbench throughput: run 5"));
  assert_non_null(strstr(r.out, "geometric-mean speedup 1.067"));
  assert_non_null(strstr(r.out, "run.sh: exit 1: nothing was measured."));
  rp_free(&r);
  /* CUDA_VISIBLE_DEVICES="" hides the GPUs nvidia-smi lists */
  fake_gpus(f, 2);
  r = main_job(f, TPBENCH_EXE, "CUDA_VISIBLE_DEVICES=", NULL);
  rp_expect(&r, 1, "no GPU here", NULL);
  rp_free(&r);
}

static void test_one_gpu_measures_tp1_and_predicts(void **state) {
  fixture *f = *state;
  fake_gpus(f, 1);
  rp_result r = main_job(f, NULL, NULL, NULL);
  rp_expect(&r, 0, "run.sh: one GPU.", NULL);
  assert_non_null(strstr(r.out, "== PREDICTED, not measured: TP 2, 4 and 8"));
  char *log = calls(f);
  const char *ops = strstr(log, "ops --gpus 1 --tp 1 ");
  const char *report = strstr(log, "report --db ");
  const char *project = strstr(log, "project --db ");
  if (!ops || !report || !project || !(ops < report && report < project)) {
    fail_msg("expected ops at TP 1, the report, then project; the stub was given:\n%s", log);
    free(log);
    return;
  }
  assert_non_null(strstr(ops, "--dtype bf16,fp8,fp8-row,fp8-block --stock plain"));
  assert_non_null(
      strstr(project, "--tp 2,4,8 --gemm-tp 1 --link-gbps 389 --shapes-run 7 --gemms\n"));
  /* the estimated shapes measured alone, per dtype, once each, the exact one not; then the
   * prediction reads them */
  const char *bf16 = strstr(project, "--dtype bf16 --shape 4096,3072,4096,ag_linear --shape "
                                     "8192,4096,1792,linear_rs --db ");
  const char *fp8 = strstr(project, "--dtype fp8-row --shape 8192,4096,1792,linear_rs --db ");
  const char *predict = strstr(project, "project --db ");
  if (predict) predict = strstr(predict + 1, "project --db ");
  if (!bf16 || !fp8 || !predict || bf16 > predict || fp8 > predict) {
    fail_msg("expected the estimated shapes measured per dtype, then the prediction:\n%s", log);
    free(log);
    return;
  }
  assert_null(strstr(log, "8192,4096,2048"));
  /* the prediction of this job's ops run's shapes only, not of the bare GEMM shapes */
  assert_non_null(strstr(predict, "--tp 2,4,8 --gemm-tp 1 --link-gbps 389 --shapes-run 7\n"));
  assert_non_null(strstr(r.out, "== Measured on this GPU: the 3 GEMM shapes"));
  /* project's compact table (its default), and the way to every input said */
  assert_null(strstr(project, "--columns"));
  assert_non_null(strstr(r.out, "--link-gbps 389 --shapes-run 7 --columns all\n"));
  assert_null(strstr(log, "run --db")); /* no TP 2 matrix of rejections */
  free(log);
  rp_free(&r);
  /* two GPUs listed, one visible: the same */
  fake_gpus(f, 2);
  r = main_job(f, NULL, "CUDA_VISIBLE_DEVICES=1", NULL);
  rp_expect(&r, 0, "run.sh: one GPU.", NULL);
  rp_free(&r);
}

/* `runs` lists them by start time, which a run imported from a host whose clock ran ahead
 * breaks: the ops run is the largest id, not the last line. */
static void test_one_gpu_finds_its_ops_run_by_id(void **state) {
  fixture *f = *state;
  fake_gpus(f, 1);
  rp_result r = main_job(f, NULL, "STUB_RUNS=1,u\\n2,u\\n/1,u\\n3,u\\n2,u\\n", NULL);
  rp_expect(&r, 0, "run.sh: one GPU.", NULL);
  char *log = calls(f);
  assert_non_null(strstr(log, "--shapes-run 3 --gemms\n"));
  assert_non_null(strstr(log, "--link-gbps 389 --shapes-run 3\n"));
  free(log);
  rp_free(&r);
}

/* project --gemms failing: nothing measured alone, said so; the prediction still runs (it
 * estimates those GEMMs) and the job exits 1 (ops passed). */
static void test_one_gpu_gemm_list_fails(void **state) {
  fixture *f = *state;
  fake_gpus(f, 1);
  rp_result r = main_job(f, NULL, "STUB_GEMMS_RC=2", NULL);
  rp_expect(&r, 1, "== PREDICTED, not measured: TP 2, 4 and 8", NULL);
  assert_non_null(strstr(r.out, "project --gemms failed"));
  assert_null(strstr(r.err, "No such file"));
  char *log = calls(f);
  assert_null(strstr(log, "--shape "));
  assert_non_null(strstr(log, "--link-gbps 389 --shapes-run 7\n"));
  free(log);
  rp_free(&r);
}

static void test_several_gpus_run_the_layers(void **state) {
  fixture *f = *state;
  fake_gpus(f, 2);
  rp_result r = main_job(f, NULL, NULL, NULL);
  rp_expect(&r, 0, NULL, NULL);
  char *log = calls(f);
  char want[800];
  snprintf(want, sizeof want, "run --db %s\n", f->db);
  assert_string_equal(log, want);
  free(log);
  rp_free(&r);
  /* arguments go to tpbench run, whatever the host */
  fake_gpus(f, 1);
  r = main_job(f, NULL, NULL, "--preset=full");
  rp_expect(&r, 0, NULL, NULL);
  log = calls(f);
  snprintf(want, sizeof want, "run --db %s --preset=full\n", f->db);
  assert_string_equal(log, want);
  free(log);
  rp_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_gpu_shows_the_sample),
      cmocka_unit_test(test_one_gpu_measures_tp1_and_predicts),
      cmocka_unit_test(test_one_gpu_finds_its_ops_run_by_id),
      cmocka_unit_test(test_one_gpu_gemm_list_fails),
      cmocka_unit_test(test_several_gpus_run_the_layers),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
