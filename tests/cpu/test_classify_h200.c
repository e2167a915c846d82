/*
 * test_classify_h200.c — the classification rules against kernel and copy
 * names captured by tpbench's own collector on the H200 pair
 * (tests/data/h200_kernel_names.tsv: NCCL 2.28, cuBLAS 13.1 "nvjet" GEMMs,
 * tpbench's copy, signal and reduce kernels, peer and local copies). Each
 * line gives the category a reviewer assigned; a rule change that files a
 * real kernel elsewhere fails here. Every captured kernel must be matched by
 * a rule (none may land in "other" by default), and every kernel tpbench
 * defines in kernels/ (its __global__ functions, read from the sources) must
 * have a rule of its own: a new kernel without one fails here.
 */
#include <ctype.h>
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
    const int is_kernel = strcmp(kind, "kernel") == 0;
    tp_event_category got =
        is_kernel ? tp_classify_kernel(name) : tp_classify_copy(copy_kind_of(name));
    if (strcmp(tp_category_name(got), want) != 0)
      fail_msg("'%s' (%s) classified %s, expected %s", name, kind, tp_category_name(got), want);
    if (is_kernel && !tp_classify_kernel_ex(name).rule[0])
      fail_msg("'%s' matched no rule: its category is a default, not a decision", name);
    per_category[got]++;
    checked++;
  }
  fclose(f);
  /* The capture holds communication (NCCL, tpbench kernels, peer copies) and GEMMs. */
  assert_true(checked >= 20);
  assert_true(per_category[TP_CAT_COMM] >= 5);
  assert_true(per_category[TP_CAT_SYNC] >= 3);
  assert_true(per_category[TP_CAT_GEMM] >= 10);
}

/* The name of the __global__ function declared at or after p (skipping
 * templates, return type and __launch_bounds__), or 0 when none. */
static int kernel_name_after(const char *p, char *out, size_t cap) {
  const char *paren = strchr(p, '(');
  while (paren && strncmp(paren - strlen("__launch_bounds__"), "__launch_bounds__",
                          strlen("__launch_bounds__")) == 0)
    paren = strchr(strchr(paren, ')') + 1, '(');
  if (!paren) return 0;
  const char *end = paren;
  while (end > p && (end[-1] == ' ' || end[-1] == '\n')) --end;
  const char *start = end;
  while (start > p && (isalnum((unsigned char)start[-1]) || start[-1] == '_')) --start;
  size_t len = (size_t)(end - start);
  if (len == 0 || len >= cap) return 0;
  memcpy(out, start, len);
  out[len] = '\0';
  return 1;
}

static int check_source(const char *path) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char text[1 << 20];
  size_t len = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[len] = '\0';
  int found = 0;
  for (const char *p = text; (p = strstr(p, "__global__")) != NULL; ++p) {
    char name[128];
    if (!kernel_name_after(p + strlen("__global__"), name, sizeof name)) continue;
    tp_kernel_class k = tp_classify_kernel_ex(name);
    if (!k.rule[0] || strcmp(k.rule, name) != 0)
      fail_msg("%s: kernel %s has no rule of its own (rule '%s', category %s)", path, name, k.rule,
               tp_category_name(k.category));
    ++found;
  }
  return found;
}

static void test_every_tpbench_kernel_has_a_rule(void **state) {
  (void)state;
  static const char *const sources[] = {"tp_copy.cu", "tp_signal.cu", "tp_bias.cu", "tp_layers.cu"};
  int kernels = 0;
  char path[1024];
  for (size_t i = 0; i < sizeof sources / sizeof sources[0]; ++i) {
    snprintf(path, sizeof path, "%s/kernels/%s", TP_SOURCE_DIR, sources[i]);
    kernels += check_source(path);
  }
  /* 24 kernels at the time of writing; the scan must find them, not nothing */
  assert_true(kernels >= 24);
  /* the reduction actually launched moves peers' data; barriers wait */
  assert_int_equal(tp_classify_kernel("reduce_sum_vec_kernel"), TP_CAT_COMM);
  assert_int_equal(tp_classify_kernel("barrier_kernel"), TP_CAT_SYNC);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_captured_names),
                                     cmocka_unit_test(test_every_tpbench_kernel_has_a_rule)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
