/*
 * test_collector_guard.c — the CUPTI collector's refusals, checked on the CPU.
 *
 * These paths return before any CUPTI call, so they run without a GPU: a
 * collector started after NVTX was already used would lose every range
 * silently, so it must refuse with a usage error that says why; NULL
 * arguments are usage errors; stop(NULL) and stats of NULL are harmless; a
 * refused start leaves tpbench's NVTX ranges open to external profilers.
 * Built only with TPBENCH_WITH_CUDA (it links libcupti).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "collectors/tp_collector.h"
#include "collectors/tp_nvtx.h"

static void test_null_arguments(void **state) {
  (void)state;
  assert_int_equal(tp_collector_start(0, NULL), TP_EUSAGE);
  assert_int_equal(tp_collector_window_begin(NULL), TP_EUSAGE);
  tp_event *ev = (tp_event *)1;
  size_t n = 7;
  assert_int_equal(tp_collector_window_end(NULL, &ev, &n), TP_EUSAGE);
  tp_collector_stats st;
  memset(&st, 0xff, sizeof st);
  tp_collector_get_stats(NULL, &st);
  assert_int_equal(st.records, 0);
  uint64_t s = 1, e = 1;
  tp_collector_window_bounds(NULL, &s, &e);
  assert_int_equal(s, 0);
  assert_int_equal(e, 0);
  tp_collector_stop(NULL);
}

static void test_refuses_after_nvtx_use(void **state) {
  (void)state;
  unsetenv("NVTX_INJECTION64_PATH");
  tp_nvtx_push("too-early");
  tp_nvtx_pop();
  tp_collector *c = (tp_collector *)1;
  assert_int_equal(tp_collector_start(0, &c), TP_EUSAGE);
  assert_null(c);
  assert_non_null(strstr(tp_last_error(), "before the collector started"));
  /* and it did not set the injection variable behind the caller's back */
  assert_null(getenv("NVTX_INJECTION64_PATH"));
  /* nor close the NVTX gate: without a running collector every range still
   * goes to whatever tool is attached (an external profiler) */
  assert_int_equal(tp_nvtx_recording(), 1);
  tp_nvtx_push("external-profiler");
  assert_int_equal(tp_nvtx_open_ranges(), 1);
  tp_nvtx_pop();
  assert_int_equal(tp_nvtx_open_ranges(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_refuses_after_nvtx_use),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
