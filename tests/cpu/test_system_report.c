/*
 * test_system_report.c — report/tp_system_report: a run's system record as
 * markdown header lines (launcher with the Slurm job and array task, one
 * item per rank with what is known of it, the environment as code spans,
 * the topology in a fence no stored line can close, stored text unable to
 * add lines or markup), and nothing for a run without a record.
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

#include "report/tp_system_report.h"
#include "store/tp_store.h"

typedef struct fixture {
  char dir[64];
  char path[96];
  tp_store *store;
  int64_t run;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/tp_sysrep.XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->path, sizeof f->path, "%s/s.db", f->dir);
  if (tp_store_open(f->path, 1, &f->store) != TP_OK) return -1;
  tp_run_info info = {0};
  info.commit = "abc";
  info.host = "node01";
  if (tp_store_begin_run(f->store, &info, &f->run) != TP_OK) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  tp_store_close(f->store);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
  if (system(cmd) != 0) return -1;
  free(f);
  return 0;
}

static void expect_in(const char *text, const char *needle) {
  if (!strstr(text, needle)) fail_msg("'%s' not in:\n%s", needle, text);
}

static void test_no_record_prints_nothing(void **state) {
  fixture *f = *state;
  char *md = (char *)"unchanged";
  assert_int_equal(tp_system_report_markdown(f->store, f->run, &md), TP_OK);
  assert_null(md);
}

static void test_full_record(void **state) {
  fixture *f = *state;
  const tp_rank_host ranks[] = {
      {0, 0, "node01", "GPU-aaaa", "0000:19:00.0", 1980, 1980, 700.0},
      {1, 0, "node02|x\n- **injected**", NULL, NULL, 0, 0, NAN},
  };
  tp_run_system sys = {"Slurm",
                       "4242",
                       "4240",
                       "2",
                       "        GPU0  GPU1\nGPU0     X   NV18\n~~~~ closes?\nGPU1  NV18     X\n",
                       "nvidia-smi topo -m",
                       "CUDA_VISIBLE_DEVICES=0,1\nNCCL_DEBUG=INFO\n",
                       ranks,
                       2};
  assert_int_equal(tp_store_put_system(f->store, f->run, &sys), TP_OK);
  char *md = NULL;
  assert_int_equal(tp_system_report_markdown(f->store, f->run, &md), TP_OK);
  assert_non_null(md);
  expect_in(md, "- **launcher** Slurm, Slurm job 4242 (array 4240, task 2)\n");
  expect_in(md, "- **ranks**\n  - rank 0 (local 0): node01, GPU-aaaa, PCI 0000:19:00.0, SM clock "
                "1980 of 1980 MHz, power limit 700 W\n");
  /* a hostile host name stays on its line, its table pipe escaped (tp_md_text) */
  expect_in(md, "  - rank 1 (local 0): node02\\|x - **injected**, GPU ?, PCI ?\n");
  expect_in(md, "- **environment** `CUDA_VISIBLE_DEVICES=0,1`, `NCCL_DEBUG=INFO`\n");
  expect_in(md, "- **topology** (nvidia-smi topo -m)\n\n  ~~~~text\n          GPU0  GPU1\n");
  expect_in(md, "\n   ~~~~ closes?\n"); /* indented past the fence: cannot close it */
  expect_in(md, "  GPU1  NV18     X\n  ~~~~\n");
  /* every line is a list item or inside the item's fence */
  for (const char *line = md; *line; line = strchr(line, '\n') + 1)
    if (line[0] != '-' && line[0] != ' ' && line[0] != '\n') fail_msg("stray line: %s", line);
  free(md);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_no_record_prints_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_full_record, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
