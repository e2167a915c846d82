/*
 * test_classify_h200.c — the classification rules against kernel and copy
 * names captured by tpbench's own collector on the H200 pair
 * (tests/data/h200_kernel_names.tsv: NCCL 2.28, cuBLAS 13.1 "nvjet" GEMMs,
 * tpbench's copy, signal and reduce kernels, peer and local copies). Each
 * line gives the category a reviewer assigned; a rule change that files a
 * real kernel elsewhere fails here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "collectors/tp_collector.h"

static tp_copy_kind copy_kind_of(const char *label) {
  for (int k = 0; k <= (int)TP_COPY_PTOP; ++k) {
    const char *name = tp_copy_kind_name((tp_copy_kind)k);
    if (name && strstr(label, name) && strcmp(name, "none") != 0) return (tp_copy_kind)k;
  }
  return TP_COPY_NONE;
}

static void test_captured_names(void **state) {
  (void)state;
  FILE *f = fopen(TP_TEST_DATA_DIR "/h200_kernel_names.tsv", "r");
  assert_non_null(f);
  char line[1024];
  int checked = 0, per_category[TP_CAT_COUNT] = {0};
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char *name = strtok(line, "\t"), *kind = strtok(NULL, "\t"), *want = strtok(NULL, "\t\n");
    assert_non_null(want);
    tp_event_category got = strcmp(kind, "kernel") == 0 ? tp_classify_kernel(name)
                                                        : tp_classify_copy(copy_kind_of(name));
    if (strcmp(tp_category_name(got), want) != 0)
      fail_msg("'%s' (%s) classified %s, expected %s", name, kind, tp_category_name(got), want);
    per_category[got]++;
    checked++;
  }
  fclose(f);
  /* The capture holds communication (NCCL, tpbench kernels, peer copies) and GEMMs. */
  assert_true(checked >= 20);
  assert_true(per_category[TP_CAT_COMM] >= 8);
  assert_true(per_category[TP_CAT_GEMM] >= 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_captured_names)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
