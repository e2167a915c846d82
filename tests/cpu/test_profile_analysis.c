/*
 * test_profile_analysis.c — CPU tests of tpbench profile's analysis (collectors/
 * tp_profile_analysis.h) on synthetic event arrays: the --steps/--range selector (good and bad
 * input, its messages), step names, windows of two ranks with ProfilerStep#N ranges, nested
 * record_function-like ranges and device work launched inside and outside them, a breakdown
 * computed by hand, idle time, an asynchronous step placed by launch time, schedule verdicts
 * per range name for every transport (a fused op that fell back to a local GEMM among them),
 * the kernel summary restricted to windows and the new classify rows.
 *
 * Kernel names: NCCL's and tpbench's as CUPTI stores them (mangled); cuBLAS's nvjet names as
 * seen on the H200 pair; PyTorch's symmetric-memory kernels mangled (g++, Itanium ABI) from
 * the kernel signatures in torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu
 * (one_shot_all_reduce_kernel, two_shot_all_reduce_kernel, multimem_all_gather_kernel) and
 * CUDASymmetricMemory.cu (barrier_kernel, put_signal_kernel).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/tp_profile_analysis.h"

#define GEMM_K "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"
#define NCCL_K "_Z31ncclDevKernel_AllGather_RING_LL24ncclDevKernelArgsStorageILm4096EE"
#define OWN_COPY_K                                                                                 \
  "_ZN43_GLOBAL__N__52d7e809_10_tp_copy_cu_fcb292b118copy_signal_kernelEP5uint4PKS0_mPjS4_"
#define ONE_SHOT_K                                                                                 \
  "_ZN12_GLOBAL__N_126one_shot_all_reduce_kernelIN3c108BFloat16ELi16ELi2EEEvPPT_S4_S4_mmPPjmm"
#define TWO_SHOT_K                                                                                 \
  "_ZN12_GLOBAL__N_126two_shot_all_reduce_kernelIN3c108BFloat16ELi16ELi2ELb1ELb0EEEvPPT_S4_"       \
  "mmPPjmmm"
#define MULTIMEM_AG_K "_ZN12_GLOBAL__N_126multimem_all_gather_kernelILi16EEEvPcS1_mPPjmm"
#define SYMM_BARRIER_K "_ZN4c10d16symmetric_memory14barrier_kernelEPPjiiim"
#define SYMM_PUT_SIGNAL_K "_ZN4c10d16symmetric_memory17put_signal_kernelEPPjiiiim"
#define ELTWISE_K                                                                                  \
  "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "             \
  "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"

/* ---- event builders --------------------------------------------------------------------- */

typedef struct trace {
  tp_event ev[256];
  size_t n;
} trace;

static tp_event *add(trace *t, int rank, tp_event_type type, const char *name, uint64_t s,
                     uint64_t e, uint64_t launch) {
  assert_true(t->n < sizeof t->ev / sizeof t->ev[0]);
  tp_event *ev = &t->ev[t->n++];
  memset(ev, 0, sizeof *ev);
  ev->name = name;
  ev->rank = rank;
  ev->device = type == TP_EV_RANGE ? -1 : rank;
  ev->stream = type == TP_EV_RANGE ? TP_STREAM_NONE : 7;
  ev->type = type;
  ev->start_ns = s;
  ev->end_ns = e;
  ev->launch_ns = launch;
  ev->peer_device = -1;
  ev->category = type == TP_EV_RANGE    ? TP_CAT_RANGE
                 : type == TP_EV_KERNEL ? tp_classify_kernel(name)
                 : type == TP_EV_SYNC   ? TP_CAT_SYNC
                                        : TP_CAT_OTHER;
  return ev;
}

static void range(trace *t, int rank, const char *name, uint64_t s, uint64_t e) {
  (void)add(t, rank, TP_EV_RANGE, name, s, e, 0);
}

static void kernel(trace *t, int rank, const char *name, uint64_t s, uint64_t e, uint64_t at) {
  (void)add(t, rank, TP_EV_KERNEL, name, s, e, at);
}

static void copy(trace *t, int rank, tp_copy_kind kind, int peer, uint64_t s, uint64_t e,
                 uint64_t at) {
  tp_event *c = add(t, rank, TP_EV_MEMCPY, "memcpy", s, e, at);
  c->copy_kind = kind;
  c->peer_device = peer;
  c->category = tp_classify_copy(kind);
  c->bytes = 1 << 20;
}

static tp_profile_selector selector(const char *steps, const char *re) {
  tp_profile_selector sel;
  assert_int_equal(tp_profile_selector_parse(steps, re, &sel), TP_OK);
  return sel;
}

/* The windows `steps`/`re` select in t, asserted to be `want` of them. */
static tp_profile_window *windows_of(const trace *t, const char *steps, const char *re,
                                     size_t want) {
  tp_profile_selector sel = selector(steps, re);
  tp_profile_window *w = NULL;
  size_t n = 99;
  tp_rc rc = tp_profile_windows(t->ev, t->n, &sel, &w, &n);
  tp_profile_selector_free(&sel);
  if (rc != TP_OK) fail_msg("tp_profile_windows: %s", tp_last_error());
  assert_int_equal(n, want);
  return w;
}

/* ---- selector ---------------------------------------------------------------------------- */

static void expect_steps(const char *text, int64_t lo, int64_t hi) {
  tp_profile_selector sel = selector(text, NULL);
  assert_int_equal(sel.mode, TP_SELECT_STEPS);
  assert_int_equal(sel.step_lo, lo);
  assert_int_equal(sel.step_hi, hi);
  tp_profile_selector_free(&sel);
}

static void test_selector_good(void **state) {
  (void)state;
  expect_steps("3:5", 3, 5);
  expect_steps("3:", 3, INT64_MAX);
  expect_steps(":5", 0, 5);
  expect_steps(":", 0, INT64_MAX);
  expect_steps("3", 3, 4);
  expect_steps("0", 0, 1);
  expect_steps("9223372036854775806", INT64_MAX - 1, INT64_MAX);
  tp_profile_selector sel = selector(NULL, NULL);
  assert_int_equal(sel.mode, TP_SELECT_PROCESS);
  tp_profile_selector_free(&sel);
  sel = selector(NULL, "^fused_(all_gather_matmul|matmul_reduce_scatter)$");
  assert_int_equal(sel.mode, TP_SELECT_RANGE);
  assert_int_equal(sel.range_re_compiled, 1);
  assert_int_equal(regexec(&sel.range_re, "fused_all_gather_matmul", 0, NULL, 0), 0);
  assert_int_not_equal(regexec(&sel.range_re, "fused_all_gather_matmul.bwd", 0, NULL, 0), 0);
  tp_profile_selector_free(&sel);
  tp_profile_selector_free(&sel); /* twice is safe */
  assert_int_equal(sel.range_re_compiled, 0);
}

typedef struct bad_input {
  const char *steps, *range, *says;
} bad_input;

static void test_selector_bad(void **state) {
  (void)state;
  static const bad_input bad[] = {
      {"5:3", NULL, "--steps '5:3' selects no step: A:B keeps the steps A <= N < B"},
      {"3:3", NULL, "B must be greater than A"},
      {":0", NULL, "--steps ':0' selects no step"},
      {"-1", NULL, "--steps '-1': '-1' is not a step number (a decimal integer >= 0"},
      {"2:-4", NULL, "'-4' is not a step number"},
      {"a:b", NULL, "--steps 'a:b': 'a' is not a step number"},
      {"+3", NULL, "'+3' is not a step number"},
      {" 3", NULL, "' 3' is not a step number"},
      {"1:2:3", NULL, "--steps '1:2:3': one colon at most"},
      {"99999999999999999999", NULL, "99999999999999999999 is too large for a step number"},
      {"1:99999999999999999999", NULL, "99999999999999999999 is too large"},
      {"9223372036854775807", NULL, "--steps '9223372036854775807' is too large"},
      {"", NULL, "--steps: empty value"},
      {NULL, "", "--range: empty regular expression"},
      {"1:2", "fwd", "--steps and --range both select the windows; give one of them"},
      {NULL, "(unclosed", "--range '(unclosed' is not a valid extended regular expression: "},
      {NULL, "a{2,1}", "--range 'a{2,1}' is not a valid extended regular expression: "},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    tp_profile_selector sel;
    tp_rc rc = tp_profile_selector_parse(bad[i].steps, bad[i].range, &sel);
    if (rc != TP_EUSAGE) fail_msg("'%s' / '%s' was accepted", bad[i].steps, bad[i].range);
    const char *msg = tp_last_message();
    if (!strstr(msg, bad[i].says)) fail_msg("message '%s' lacks '%s'", msg, bad[i].says);
    assert_int_equal(sel.range_re_compiled, 0); /* nothing left to free */
  }
  /* regerror's own text follows the colon */
  tp_profile_selector sel;
  assert_int_equal(tp_profile_selector_parse(NULL, "(", &sel), TP_EUSAGE);
  const char *why = strstr(tp_last_message(), "expression: ");
  assert_non_null(why);
  assert_true(strlen(why + strlen("expression: ")) > 3);
  assert_int_equal(tp_profile_selector_parse("1", NULL, NULL), TP_EUSAGE);
}

static void test_step_names(void **state) {
  (void)state;
  static const struct {
    const char *name;
    int is_step;
    int64_t step;
  } names[] = {
      {"ProfilerStep#0", 1, 0}, {"ProfilerStep#12", 1, 12},
      {"profilerstep#3", 1, 3}, {"step 4", 1, 4},
      {"Step#5", 1, 5},         {"STEP_6", 1, 6},
      {"step7", 1, 7},          {"pytorch:step 8", 1, 8},
      {"steps 3", 0, 0},        {"step", 0, 0},
      {"step 3a", 0, 0},        {"train step 3", 0, 0},
      {"ProfilerStep#", 0, 0},  {"step -1", 0, 0},
      {"step  3", 0, 0},        {"step 99999999999999999999", 0, 0},
      {"aten::linear", 0, 0},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    int64_t step = -99;
    int got = tp_profile_step_number(names[i].name, &step);
    if (got != names[i].is_step)
      fail_msg("'%s': %d, expected %d", names[i].name, got, names[i].is_step);
    if (got) assert_int_equal(step, names[i].step);
  }
  assert_int_equal(tp_profile_step_number(NULL, NULL), 0);
}

/* ---- windows ----------------------------------------------------------------------------- */

static const char *const step_names[] = {"ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2",
                                         "ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5",
                                         "ProfilerStep#6"};

/* Steps 0..5 on ranks 0 and 1, T = 10000 * (s + 1) + 100 * rank: the step range [T, T+400),
 * inside it "aten::linear" [T+10, T+200) launching a GEMM at T+20 that runs [T+100, T+300) and
 * "nccl:all_gather" [T+25, T+40) launching an NCCL kernel at T+30 that runs [T+250, T+400);
 * between steps, an elementwise kernel launched at T+500 that runs [T+600, T+650). Rank 0
 * also opens ProfilerStep#6 at [70000, 70400), which launches nothing. */
static void two_rank_steps(trace *t) {
  t->n = 0;
  for (int rank = 0; rank < 2; ++rank)
    for (int s = 0; s < 6; ++s) {
      uint64_t T = 10000u * (uint64_t)(s + 1) + 100u * (uint64_t)rank;
      range(t, rank, step_names[s], T, T + 400);
      range(t, rank, "aten::linear", T + 10, T + 200);
      range(t, rank, "nccl:all_gather", T + 25, T + 40);
      kernel(t, rank, GEMM_K, T + 100, T + 300, T + 20);
      kernel(t, rank, NCCL_K, T + 250, T + 400, T + 30);
      kernel(t, rank, ELTWISE_K, T + 600, T + 650, T + 500);
    }
  range(t, 0, step_names[6], 70000, 70400);
}

static void test_windows_steps(void **state) {
  (void)state;
  trace t;
  two_rank_steps(&t);
  tp_profile_window *w = windows_of(&t, "1:3", NULL, 4);
  static const struct {
    int rank;
    int64_t step;
    uint64_t T;
  } want[] = {{0, 1, 20000}, {0, 2, 30000}, {1, 1, 20100}, {1, 2, 30100}};
  for (size_t i = 0; i < 4; ++i) {
    assert_int_equal(w[i].rank, want[i].rank);
    assert_int_equal(w[i].step, want[i].step);
    assert_string_equal(w[i].name, step_names[want[i].step]);
    assert_int_equal(w[i].host_start_ns, want[i].T);
    assert_int_equal(w[i].host_end_ns, want[i].T + 400);
    /* the device window: the GEMM's start to the NCCL kernel's end, not the range */
    assert_int_equal(w[i].start_ns, want[i].T + 100);
    assert_int_equal(w[i].end_ns, want[i].T + 400);
    assert_false(w[i].empty);
    assert_false(w[i].whole_process);
  }
  free(w);
  /* "6" alone: rank 0's step 6 launched nothing, keeps its host bounds, flagged empty */
  w = windows_of(&t, "6", NULL, 1);
  assert_int_equal(w[0].rank, 0);
  assert_true(w[0].empty);
  assert_int_equal(w[0].start_ns, 70000);
  assert_int_equal(w[0].end_ns, 70400);
  free(w);
  /* open end: steps 4, 5 on both ranks and 6 on rank 0 */
  w = windows_of(&t, "4:", NULL, 5);
  assert_int_equal(w[2].step, 6);
  assert_int_equal(w[3].rank, 1);
  free(w);
}

static void test_windows_nothing_selected(void **state) {
  (void)state;
  trace t;
  two_rank_steps(&t);
  tp_profile_selector sel = selector("10:20", NULL);
  tp_profile_window *w = (tp_profile_window *)&t; /* must be reset */
  size_t n = 7;
  assert_int_equal(tp_profile_windows(t.ev, t.n, &sel, &w, &n), TP_EUSAGE);
  assert_null(w);
  assert_int_equal(n, 0);
  assert_string_equal(tp_last_message(),
                      "no step in 10:20; the program's steps are 0..6 on rank 0; 0..5 on rank 1");
  tp_profile_selector_free(&sel);
  /* gaps are listed as runs */
  t.ev[6].name = "ProfilerStep#9"; /* rank 0's step 1 renamed */
  sel = selector("20:", NULL);
  assert_int_equal(tp_profile_windows(t.ev, t.n, &sel, &w, &n), TP_EUSAGE);
  assert_non_null(strstr(tp_last_message(), "steps are 0, 2..6, 9 on rank 0; 0..5 on rank 1"));
  tp_profile_selector_free(&sel);
  /* no step range at all */
  trace plain = {.n = 0};
  range(&plain, 0, "forward", 0, 10);
  sel = selector("0:2", NULL);
  assert_int_equal(tp_profile_windows(plain.ev, plain.n, &sel, &w, &n), TP_EUSAGE);
  assert_non_null(strstr(tp_last_message(), "no step in 0:2; the program opened no step range"));
  tp_profile_selector_free(&sel);
  /* a regex that matches nothing lists the names there are */
  sel = selector(NULL, "^fused_");
  assert_int_equal(tp_profile_windows(t.ev, t.n, &sel, &w, &n), TP_EUSAGE);
  assert_non_null(strstr(tp_last_message(), "no NVTX range matches --range '^fused_'; the "
                                            "program's ranges include 'ProfilerStep#0', "
                                            "'aten::linear', 'nccl:all_gather'"));
  tp_profile_selector_free(&sel);
}

/* A program marking its steps twice (ProfilerStep#1 around "step 1", from
 * one start) has one step there, the outer range: two windows of one rank,
 * step and start would collide in the store's key. A step repeated later
 * (a new epoch) stays a window of its own. */
static void test_windows_nested_same_step(void **state) {
  (void)state;
  trace t = {.n = 0};
  range(&t, 0, "ProfilerStep#1", 100, 900);
  range(&t, 0, "step 1", 100, 800);
  range(&t, 0, "step_1", 200, 300);
  range(&t, 0, "step 1", 100, 900); /* the same bounds twice */
  range(&t, 1, "step 1", 100, 800); /* another rank's */
  range(&t, 0, "step 1", 2000, 2500);
  kernel(&t, 0, GEMM_K, 150, 400, 150);
  tp_profile_window *w = windows_of(&t, "1", NULL, 3);
  assert_int_equal(w[0].rank, 0);
  assert_int_equal(w[0].host_start_ns, 100);
  assert_int_equal(w[0].host_end_ns, 900);
  assert_int_equal(w[0].empty, 0);
  assert_int_equal(w[1].host_start_ns, 2000);
  assert_int_equal(w[2].rank, 1);
  free(w);
}

/* Step numbers at the top of int64_t, repeated on a rank: the message
 * listing the program's steps runs them without overflowing. */
static void test_windows_huge_step_numbers(void **state) {
  (void)state;
  trace t = {.n = 0};
  range(&t, 0, "step 9223372036854775807", 0, 10);
  range(&t, 0, "step 9223372036854775807", 20, 30);
  range(&t, 0, "step 9223372036854775806", 40, 50);
  tp_profile_selector sel = selector("0:5", NULL);
  tp_profile_window *w = NULL;
  size_t n = 0;
  assert_int_equal(tp_profile_windows(t.ev, t.n, &sel, &w, &n), TP_EUSAGE);
  assert_non_null(
      strstr(tp_last_message(), "steps are 9223372036854775806..9223372036854775807 on rank 0"));
  tp_profile_selector_free(&sel);
  free(windows_of(&t, "9223372036854775806:", NULL, 3));
}

static void test_windows_range_and_process(void **state) {
  (void)state;
  trace t;
  two_rank_steps(&t);
  tp_profile_window *w = windows_of(&t, NULL, "^aten::lin", 12);
  for (size_t i = 0; i < 12; ++i) {
    assert_int_equal(w[i].rank, (int)(i / 6));
    assert_int_equal(w[i].step, (int64_t)(i % 6)); /* order of start on its rank */
    assert_string_equal(w[i].name, "aten::linear");
    /* only the GEMM was launched inside aten::linear (T+20); the NCCL kernel (T+30) too:
     * "nccl:all_gather" is nested in it */
    assert_int_equal(w[i].end_ns - w[i].start_ns, 300);
  }
  free(w);
  w = windows_of(&t, NULL, NULL, 2);
  assert_true(w[0].whole_process && w[1].whole_process);
  assert_int_equal(w[0].step, -1);
  assert_string_equal(w[0].name, "process");
  assert_int_equal(w[0].host_start_ns, 10000);
  assert_int_equal(w[0].host_end_ns, 70400); /* ProfilerStep#6's end */
  assert_int_equal(w[0].start_ns, 10100);
  assert_int_equal(w[0].end_ns, 60650); /* the last elementwise kernel */
  assert_int_equal(w[1].rank, 1);
  assert_int_equal(w[1].host_end_ns, 60750);
  free(w);
  /* no events: no window, no error */
  tp_profile_selector sel = selector(NULL, NULL);
  size_t n = 5;
  assert_int_equal(tp_profile_windows(NULL, 0, &sel, &w, &n), TP_OK);
  assert_int_equal(n, 0);
  assert_null(w);
  assert_int_equal(tp_profile_windows(NULL, 3, &sel, &w, &n), TP_EUSAGE);
}

/* ---- breakdown ----------------------------------------------------------------------------- */

/* One step [1000, 1100) on rank 0 launching a GEMM [2000, 2600), an NCCL kernel [2400, 2800),
 * a memset [2900, 2950), a local DtoD copy [2950, 3000) and a barrier [3100, 3200); outside
 * it an NCCL kernel launched at 1200 [2800, 2850), and rank 1's kernel launched at 1010. */
static void hand_case(trace *t) {
  t->n = 0;
  range(t, 0, "step 0", 1000, 1100);
  kernel(t, 0, GEMM_K, 2000, 2600, 1010);
  kernel(t, 0, NCCL_K, 2400, 2800, 1020);
  (void)add(t, 0, TP_EV_MEMSET, "memset", 2900, 2950, 1030);
  copy(t, 0, TP_COPY_DTOD, -1, 2950, 3000, 1040);
  kernel(t, 0, SYMM_BARRIER_K, 3100, 3200, 1050);
  kernel(t, 0, NCCL_K, 2800, 2850, 1200);
  kernel(t, 1, GEMM_K, 2850, 2900, 1010);
}

static tp_profile_breakdown breakdown(const trace *t, const tp_profile_window *w) {
  tp_profile_breakdown b;
  memset(&b, 0xAB, sizeof b);
  assert_int_equal(tp_profile_breakdown_of(t->ev, t->n, w, &b), TP_OK);
  return b;
}

static void test_breakdown_by_hand(void **state) {
  (void)state;
  trace t;
  hand_case(&t);
  tp_profile_window *w = windows_of(&t, "0", NULL, 1);
  assert_int_equal(w[0].start_ns, 2000);
  assert_int_equal(w[0].end_ns, 3200);
  tp_profile_breakdown b = breakdown(&t, &w[0]);
  assert_int_equal(b.step_ns, 1200);
  assert_int_equal(b.host_ns, 100);
  assert_int_equal(b.comm_ns, 400); /* not the NCCL kernel launched after the step */
  assert_int_equal(b.compute_ns, 600);
  assert_int_equal(b.overlap_ns, 200);
  assert_int_equal(b.exposed_comm_ns, 200);
  assert_true(fabs(b.overlap_pct - 50.0) < 1e-9);
  assert_int_equal(b.sync_ns, 100);  /* c10d's barrier_kernel waits */
  assert_int_equal(b.other_ns, 100); /* memset and local copy, touching */
  assert_int_equal(b.busy_ns, 1000); /* [2000, 2800) + [2900, 3000) + [3100, 3200) */
  assert_int_equal(b.idle_ns, 200);  /* [2800, 2900) and [3000, 3100); rank 1 not counted */
  assert_int_equal(b.kernels, 3);
  free(w);
  /* the whole process uses every event of the rank, the late NCCL kernel too */
  w = windows_of(&t, NULL, NULL, 2);
  b = breakdown(&t, &w[0]);
  assert_int_equal(w[0].host_start_ns, 1000);
  assert_int_equal(b.step_ns, 1200);
  assert_int_equal(b.comm_ns, 450);
  assert_int_equal(b.overlap_ns, 200);
  assert_int_equal(b.exposed_comm_ns, 250);
  assert_int_equal(b.kernels, 4);
  free(w);
  assert_int_equal(tp_profile_breakdown_of(t.ev, t.n, NULL, &b), TP_EUSAGE);
}

static void test_breakdown_peer_dtod_is_comm_and_empty_is_idle(void **state) {
  (void)state;
  trace t = {.n = 0};
  range(&t, 0, "step 0", 0, 100);
  copy(&t, 0, TP_COPY_DTOD, 1, 1000, 1400, 10); /* to device 1: copy-engine communication */
  kernel(&t, 0, GEMM_K, 1200, 1600, 20);
  range(&t, 0, "step 1", 200, 300); /* launches nothing */
  tp_profile_window *w = windows_of(&t, ":", NULL, 2);
  tp_profile_breakdown b = breakdown(&t, &w[0]);
  assert_int_equal(b.comm_ns, 400);
  assert_int_equal(b.other_ns, 0);
  assert_int_equal(b.overlap_ns, 200);
  assert_int_equal(b.idle_ns, 0);
  assert_true(w[1].empty);
  b = breakdown(&t, &w[1]);
  assert_int_equal(b.step_ns, 100);
  assert_int_equal(b.idle_ns, 100);
  assert_int_equal(b.busy_ns, 0);
  assert_int_equal(b.kernels, 0);
  free(w);
}

/* A step that ends with cudaDeviceSynchronize: CUPTI times the host's wait
 * as a sync record, which is neither the step's device work nor device-side
 * waiting; a stream waiting on an event is. (Seen on an H200: a PyTorch step
 * of 5.3 ms reported 3.6 ms of "sync" from its torch.cuda.synchronize.) */
static void test_host_waits_are_not_device_work(void **state) {
  (void)state;
  trace t = {.n = 0};
  range(&t, 0, "step 0", 0, 3000);
  kernel(&t, 0, GEMM_K, 100, 1100, 10);
  (void)add(&t, 0, TP_EV_SYNC, "sync context", 20, 2900, 20);
  (void)add(&t, 0, TP_EV_SYNC, "sync stream wait event", 1100, 1200, 30);
  tp_profile_window *w = windows_of(&t, ":", NULL, 1);
  assert_int_equal(w[0].start_ns, 100);
  assert_int_equal(w[0].end_ns, 1200); /* not 2900: the host's wait is no device work */
  tp_profile_breakdown b = breakdown(&t, &w[0]);
  assert_int_equal(b.sync_ns, 100);
  assert_int_equal(b.compute_ns, 1000);
  assert_int_equal(b.idle_ns, 0);
  free(w);
}

/* Step 0's range closes at 1100 and its kernel runs at [5000, 6000); step 1's range [1200,
 * 1300) launches a kernel that runs [5500, 6500): each step keeps its own work. */
static void test_async_step_by_launch_time(void **state) {
  (void)state;
  trace t = {.n = 0};
  range(&t, 0, "ProfilerStep#0", 1000, 1100);
  range(&t, 0, "ProfilerStep#1", 1200, 1300);
  kernel(&t, 0, GEMM_K, 5000, 6000, 1050);
  kernel(&t, 0, NCCL_K, 5500, 6500, 1250);
  tp_profile_window *w = windows_of(&t, ":", NULL, 2);
  assert_int_equal(w[0].start_ns, 5000);
  assert_int_equal(w[0].end_ns, 6000);
  assert_int_equal(w[1].start_ns, 5500);
  assert_int_equal(w[1].end_ns, 6500);
  tp_profile_breakdown b = breakdown(&t, &w[0]);
  assert_int_equal(b.compute_ns, 1000);
  assert_int_equal(b.comm_ns, 0); /* step 1's NCCL kernel runs inside, but is not step 0's */
  assert_int_equal(b.kernels, 1);
  b = breakdown(&t, &w[1]);
  assert_int_equal(b.comm_ns, 1000);
  assert_int_equal(b.compute_ns, 0);
  assert_int_equal(b.idle_ns, 0);
  free(w);
}

/* ---- schedules ----------------------------------------------------------------------------- */

/* Rank 0, step 0 [0, 10000) with one op range per transport inside an outer "layer". */
static void schedule_case(trace *t) {
  t->n = 0;
  range(t, 0, "ProfilerStep#0", 0, 10000);
  range(t, 0, "layer", 50, 1250);
  range(t, 0, "nccl_op", 100, 200);
  kernel(t, 0, NCCL_K, 1000, 1500, 150);
  kernel(t, 0, GEMM_K, 1200, 1800, 160);
  range(t, 0, "ce_op", 300, 400);
  copy(t, 0, TP_COPY_PTOP, 1, 2000, 2100, 310);
  copy(t, 0, TP_COPY_DTOD, 1, 2100, 2200, 320); /* IPC peer copy reported as DtoD */
  copy(t, 0, TP_COPY_DTOD, 0, 2200, 2300, 330); /* local: no transport */
  range(t, 0, "sm_op", 500, 600);
  kernel(t, 0, OWN_COPY_K, 2400, 2500, 510);
  kernel(t, 0, ONE_SHOT_K, 2500, 2600, 520);
  range(t, 0, "mc_op", 700, 800);
  kernel(t, 0, MULTIMEM_AG_K, 2700, 2800, 710);
  range(t, 0, "mixed_op", 900, 1000);
  kernel(t, 0, NCCL_K, 2900, 3000, 910);
  copy(t, 0, TP_COPY_PTOP, 1, 3000, 3100, 920);
  range(t, 0, "fused_all_gather_matmul", 1100, 1200);
  kernel(t, 0, GEMM_K, 3200, 3700, 1110); /* fell back: a local GEMM, no transfer */
  range(t, 0, "idle_op", 1300, 1400);     /* launches nothing: no row */
  range(t, 0, "attn", 2000, 2100);        /* nested twice: an event counts once */
  range(t, 0, "attn", 2010, 2050);
  kernel(t, 0, NCCL_K, 4000, 4100, 2020);
  range(t, 1, "ProfilerStep#0", 0, 10000);
  range(t, 1, "nccl_op", 100, 200);
  range(t, 1, "nccl_op", 300, 400);
  kernel(t, 1, TWO_SHOT_K, 1000, 1100, 150);
}

static const tp_profile_schedule *row(const tp_profile_schedule *s, size_t n, int rank,
                                      const char *name) {
  for (size_t i = 0; i < n; ++i)
    if (s[i].rank == rank && strcmp(s[i].name, name) == 0) return &s[i];
  fail_msg("no schedule row for rank %d, '%s'", rank, name);
  return NULL;
}

static tp_profile_schedule *schedules(const trace *t, const char *steps, size_t *n) {
  tp_profile_window *w = windows_of(t, steps, NULL, 2);
  tp_profile_schedule *s = NULL;
  tp_rc rc = tp_profile_schedules(t->ev, t->n, w, 2, &s, n);
  free(w);
  if (rc != TP_OK) fail_msg("tp_profile_schedules: %s", tp_last_error());
  return s;
}

static void test_schedule_verdicts(void **state) {
  (void)state;
  trace t;
  schedule_case(&t);
  size_t n = 0;
  tp_profile_schedule *s = schedules(&t, "0", &n);
  /* rank 0: attn ce_op fused layer mc_op mixed_op nccl_op sm_op; rank 1: nccl_op */
  assert_int_equal(n, 9);
  assert_string_equal(s[0].name, "attn");
  assert_string_equal(s[7].name, "sm_op");
  assert_int_equal(s[8].rank, 1);
  const tp_profile_schedule *r = row(s, n, 0, "nccl_op");
  assert_string_equal(r->verdict, "nccl");
  assert_int_equal(r->nccl_kernels, 1);
  assert_int_equal(r->ranges, 1);
  assert_int_equal(r->device_events, 2);
  assert_int_equal(r->comm_ns, 500);
  assert_int_equal(r->gemm_ns, 600);
  assert_int_equal(r->overlap_ns, 300);
  r = row(s, n, 0, "ce_op");
  assert_string_equal(r->verdict, "copy-engine");
  assert_int_equal(r->peer_copies, 2); /* PtoP and DtoD to device 1; not the local DtoD */
  assert_int_equal(r->device_events, 3);
  assert_int_equal(r->comm_ns, 200);
  r = row(s, n, 0, "sm_op");
  assert_string_equal(r->verdict, "sm-copy");
  assert_int_equal(r->sm_copy_kernels, 2); /* tpbench's copy kernel and PyTorch's one-shot */
  r = row(s, n, 0, "mc_op");
  assert_string_equal(r->verdict, "multicast");
  assert_int_equal(r->multicast_kernels, 1);
  r = row(s, n, 0, "mixed_op");
  assert_string_equal(r->verdict, "mixed");
  r = row(s, n, 0, "layer"); /* encloses the ops: everything they launched */
  assert_string_equal(r->verdict, "mixed");
  assert_int_equal(r->nccl_kernels, 2);
  assert_int_equal(r->device_events, 11);
  r = row(s, n, 0, "attn");
  assert_int_equal(r->ranges, 2);
  assert_int_equal(r->nccl_kernels, 1); /* once, though inside two "attn" ranges */
  r = row(s, n, 1, "nccl_op");
  assert_int_equal(r->ranges, 2);
  assert_string_equal(r->verdict, "sm-copy"); /* PyTorch's two-shot kernel, not NCCL */
  for (size_t i = 0; i < n; ++i) {
    assert_string_not_equal(s[i].name, "idle_op");
    assert_string_not_equal(s[i].name, "ProfilerStep#0");
  }
  free(s);
}

/* The fallback a reader must see: a fused op's range that launched a GEMM and no transfer. */
static void test_schedule_fused_fallback_is_none(void **state) {
  (void)state;
  trace t;
  schedule_case(&t);
  size_t n = 0;
  tp_profile_schedule *s = schedules(&t, "0", &n);
  const tp_profile_schedule *r = row(s, n, 0, "fused_all_gather_matmul");
  assert_string_equal(r->verdict, "none");
  assert_int_equal(r->nccl_kernels + r->peer_copies + r->sm_copy_kernels + r->multicast_kernels, 0);
  assert_int_equal(r->comm_ns, 0);
  assert_int_equal(r->gemm_ns, 500);
  assert_int_equal(r->device_events, 1);
  free(s);
  /* outside the selected windows nothing counts: step 1 does not exist on either rank here,
   * so select by regex the op ranges themselves, which are rows too */
  tp_profile_window *w = windows_of(&t, NULL, "^fused_", 1);
  tp_profile_schedule *only = NULL;
  assert_int_equal(tp_profile_schedules(t.ev, t.n, w, 1, &only, &n), TP_OK);
  assert_int_equal(n, 1);
  assert_string_equal(only[0].name, "fused_all_gather_matmul");
  assert_string_equal(only[0].verdict, "none");
  free(only);
  free(w);
  assert_int_equal(tp_profile_schedules(t.ev, t.n, NULL, 1, &only, &n), TP_EUSAGE);
}

static void test_transport_of(void **state) {
  (void)state;
  trace t = {.n = 0};
  kernel(&t, 0, NCCL_K, 0, 1, 1);
  kernel(&t, 0, OWN_COPY_K, 0, 1, 1);
  kernel(&t, 0, TWO_SHOT_K, 0, 1, 1);
  kernel(&t, 0, MULTIMEM_AG_K, 0, 1, 1);
  kernel(&t, 0, GEMM_K, 0, 1, 1);
  kernel(&t, 0, SYMM_PUT_SIGNAL_K, 0, 1, 1);
  copy(&t, 0, TP_COPY_PTOP, 1, 0, 1, 1);
  copy(&t, 0, TP_COPY_DTOD, 1, 0, 1, 1);
  copy(&t, 0, TP_COPY_DTOD, 0, 0, 1, 1);
  copy(&t, 0, TP_COPY_HTOD, -1, 0, 1, 1);
  static const tp_transport want[] = {
      TP_TRANSPORT_NCCL, TP_TRANSPORT_SM_COPY, TP_TRANSPORT_SM_COPY,     TP_TRANSPORT_MULTICAST,
      TP_TRANSPORT_NONE, TP_TRANSPORT_NONE,    TP_TRANSPORT_COPY_ENGINE, TP_TRANSPORT_COPY_ENGINE,
      TP_TRANSPORT_NONE, TP_TRANSPORT_NONE};
  for (size_t i = 0; i < t.n; ++i)
    if (tp_profile_transport_of(&t.ev[i]) != want[i])
      fail_msg("event %zu (%s): transport %d, expected %d", i, t.ev[i].name,
               (int)tp_profile_transport_of(&t.ev[i]), (int)want[i]);
  assert_int_equal(tp_profile_transport_of(NULL), TP_TRANSPORT_NONE);
}

/* The classify rows added for PyTorch's symmetric memory and multicast. */
static void test_classify_symmetric_memory(void **state) {
  (void)state;
  static const struct {
    const char *name;
    tp_event_category category;
    tp_kernel_origin origin;
  } names[] = {
      {ONE_SHOT_K, TP_CAT_COMM, TP_KERNEL_SYMM_MEM},
      {TWO_SHOT_K, TP_CAT_COMM, TP_KERNEL_SYMM_MEM},
      {"(anonymous namespace)::one_shot_all_reduce_kernel<c10::BFloat16, 16, 2>(...)", TP_CAT_COMM,
       TP_KERNEL_SYMM_MEM},
      {MULTIMEM_AG_K, TP_CAT_COMM, TP_KERNEL_MULTICAST},
      {"_ZN12_GLOBAL__N_135multimem_one_shot_all_reduce_kernelIN3c108BFloat16ELi16EEEvPT_S4_mPPjmm",
       TP_CAT_COMM, TP_KERNEL_MULTICAST},
      {SYMM_BARRIER_K, TP_CAT_SYNC, TP_KERNEL_OWN_SIGNAL},
      {SYMM_PUT_SIGNAL_K, TP_CAT_SYNC, TP_KERNEL_OTHER},
      {"c10d::symmetric_memory::wait_signal_kernel(unsigned int**, int, int, int, int, unsigned "
       "long)",
       TP_CAT_SYNC, TP_KERNEL_OTHER},
      {NCCL_K, TP_CAT_COMM, TP_KERNEL_NCCL},
      {GEMM_K, TP_CAT_GEMM, TP_KERNEL_OTHER},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    tp_kernel_class k = tp_classify_kernel_ex(names[i].name);
    if (k.category != names[i].category || k.origin != names[i].origin)
      fail_msg("'%s': %s origin %d (rule '%s'), expected %s origin %d", names[i].name,
               tp_category_name(k.category), (int)k.origin, k.rule,
               tp_category_name(names[i].category), (int)names[i].origin);
  }
}

/* ---- kernel summary ------------------------------------------------------------------------- */

static void test_kernel_summary_restricted_to_windows(void **state) {
  (void)state;
  trace t;
  two_rank_steps(&t);
  tp_profile_window *w = windows_of(&t, "1:3", NULL, 4);
  tp_profile_kernel *k = NULL;
  size_t n = 0;
  assert_int_equal(tp_profile_kernel_summary_of(t.ev, t.n, w, 4, &k, &n), TP_OK);
  assert_int_equal(n, 2); /* the elementwise kernels between steps are in no window */
  assert_string_equal(k[0].name, GEMM_K);
  assert_int_equal(k[0].category, TP_CAT_GEMM);
  assert_int_equal(k[0].count, 4);
  assert_int_equal(k[0].total_ns, 800);
  assert_true(fabs(k[0].mean_ns - 200.0) < 1e-9);
  assert_true(fabs(k[0].share_pct - 100.0 * 800 / 1400) < 1e-9);
  assert_string_equal(k[1].name, NCCL_K);
  assert_int_equal(k[1].count, 4);
  assert_int_equal(k[1].total_ns, 600);
  free(k);
  free(w);
  /* the whole process: every kernel, 12 of each, the elementwise ones last */
  w = windows_of(&t, NULL, NULL, 2);
  assert_int_equal(tp_profile_kernel_summary_of(t.ev, t.n, w, 2, &k, &n), TP_OK);
  assert_int_equal(n, 3);
  assert_int_equal(k[0].count, 12);
  assert_string_equal(k[2].name, ELTWISE_K);
  assert_int_equal(k[2].total_ns, 12 * 50);
  free(k);
  /* overlapping windows count a kernel once */
  tp_profile_window twice[2] = {w[0], w[0]};
  assert_int_equal(tp_profile_kernel_summary_of(t.ev, t.n, twice, 2, &k, &n), TP_OK);
  assert_int_equal(k[0].count, 6);
  free(k);
  free(w);
  assert_int_equal(tp_profile_kernel_summary_of(t.ev, t.n, NULL, 0, &k, &n), TP_OK);
  assert_int_equal(n, 0);
  assert_null(k);
}

/* ---- the indexed analysis against the scan per window ------------------------------------- */

/* A random event set: three ranks' step ranges (some marked twice, some repeated), nested and
 * overlapping operation ranges, and device work of every kind launched anywhere (before,
 * inside, at the edges of and after the ranges; some without a launch time), running later. */
typedef struct random_trace {
  tp_event *ev;
  size_t n, cap;
  uint64_t state;
} random_trace;

static uint64_t next_random(random_trace *t, uint64_t bound) {
  t->state = t->state * 6364136223846793005ull + 1442695040888963407ull;
  return (t->state >> 33) % bound;
}

static tp_event *random_add(random_trace *t, int rank, tp_event_type type, const char *name,
                            uint64_t s, uint64_t e, uint64_t launch) {
  assert_true(t->n < t->cap);
  tp_event *ev = &t->ev[t->n++];
  memset(ev, 0, sizeof *ev);
  ev->name = name;
  ev->rank = rank;
  ev->device = type == TP_EV_RANGE ? -1 : rank;
  ev->stream = type == TP_EV_RANGE ? TP_STREAM_NONE : (uint32_t)(7 + next_random(t, 3));
  ev->type = type;
  ev->start_ns = s;
  ev->end_ns = e;
  ev->launch_ns = launch;
  ev->peer_device = -1;
  ev->category = type == TP_EV_RANGE    ? TP_CAT_RANGE
                 : type == TP_EV_KERNEL ? tp_classify_kernel(name)
                 : type == TP_EV_SYNC   ? TP_CAT_SYNC
                                        : TP_CAT_OTHER;
  return ev;
}

static void random_work(random_trace *t, int rank, uint64_t horizon) {
  static const char *const kernels[] = {GEMM_K,
                                        NCCL_K,
                                        OWN_COPY_K,
                                        ONE_SHOT_K,
                                        MULTIMEM_AG_K,
                                        SYMM_BARRIER_K,
                                        "vectorized_elementwise_kernel"};
  uint64_t launch = next_random(t, 5) == 0 ? 0 : next_random(t, horizon);
  uint64_t start = launch + next_random(t, 200), end = start + next_random(t, 60); /* 0: none */
  switch (next_random(t, 6)) {
  case 0: {
    tp_event *c = random_add(t, rank, TP_EV_MEMCPY, "memcpy", start, end, launch);
    static const tp_copy_kind kinds[] = {TP_COPY_PTOP, TP_COPY_DTOD, TP_COPY_HTOD};
    c->copy_kind = kinds[next_random(t, 3)];
    c->peer_device = c->copy_kind == TP_COPY_HTOD ? -1 : (int)next_random(t, 3);
    c->category = tp_classify_copy(c->copy_kind);
    break;
  }
  case 1: (void)random_add(t, rank, TP_EV_MEMSET, "memset", start, end, launch); break;
  case 2:
    (void)random_add(t, rank, TP_EV_SYNC,
                     next_random(t, 2) ? "sync stream wait event" : "sync device", start, end,
                     launch);
    break;
  default: (void)random_add(t, rank, TP_EV_KERNEL, kernels[next_random(t, 7)], start, end, launch);
  }
}

static void random_ranges(random_trace *t, int rank, uint64_t horizon) {
  static const char *const ops[] = {"aten::linear", "aten::mm", "fused_all_gather_matmul",
                                    "nccl:all_reduce"};
  static const char *const steps[] = {"ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2",
                                      "ProfilerStep#3", "ProfilerStep#4"};
  uint64_t at = next_random(t, 50), two_at = 0, two_len = 0;
  for (size_t s = 0; s < 5; ++s) {
    uint64_t len = 80 + next_random(t, 200);
    (void)random_add(t, rank, TP_EV_RANGE, steps[s], at, at + len, 0);
    if (s == 2) two_at = at, two_len = len;
    at += len + next_random(t, 3) * 20;
  }
  /* step 2 marked twice: "step 2" inside ProfilerStep#2, or reaching past it */
  uint64_t inner = two_at + next_random(t, 2) * 10;
  (void)random_add(t, rank, TP_EV_RANGE, "step 2", inner, inner + next_random(t, two_len + 40), 0);
  for (int k = 0; k < 12; ++k) {
    uint64_t start = next_random(t, horizon), len = next_random(t, 300);
    (void)random_add(t, rank, TP_EV_RANGE, ops[next_random(t, 4)], start, start + len, 0);
  }
}

static random_trace random_events(uint64_t seed) {
  random_trace t = {.cap = 400, .state = seed};
  t.ev = calloc(t.cap, sizeof *t.ev);
  assert_non_null(t.ev);
  for (int rank = 0; rank < 3; ++rank) {
    random_ranges(&t, rank, 1500);
    for (int k = 0; k < 90; ++k) random_work(&t, rank, 1600);
  }
  for (size_t i = t.n; i > 1; --i) { /* the ranks' events interleaved */
    size_t j = (size_t)next_random(&t, i);
    tp_event x = t.ev[i - 1];
    t.ev[i - 1] = t.ev[j];
    t.ev[j] = x;
  }
  return t;
}

/* The device bounds a scan over every event gives each window. */
static void expect_bounds_by_scan(const random_trace *t, const tp_profile_window *w, size_t n_w) {
  for (size_t k = 0; k < n_w; ++k) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < t->n; ++i) {
      if (!tp_profile_in_window(&t->ev[i], &w[k])) continue;
      if (t->ev[i].start_ns < lo) lo = t->ev[i].start_ns;
      if (t->ev[i].end_ns > hi) hi = t->ev[i].end_ns;
    }
    assert_int_equal(w[k].empty, lo == UINT64_MAX);
    assert_int_equal(w[k].start_ns, w[k].empty ? w[k].host_start_ns : lo);
    assert_int_equal(w[k].end_ns, w[k].empty ? w[k].host_end_ns : (hi > lo ? hi : lo));
  }
}

/* tp_profile_breakdowns against tp_profile_breakdown_of, window by window, field by field. */
static void expect_breakdowns_by_scan(const random_trace *t, const tp_profile_window *w,
                                      size_t n_w) {
  tp_profile_breakdown *all = calloc(n_w ? n_w : 1, sizeof *all);
  assert_non_null(all);
  assert_int_equal(tp_profile_breakdowns(t->ev, t->n, w, n_w, all), TP_OK);
  for (size_t k = 0; k < n_w; ++k) {
    tp_profile_breakdown one;
    assert_int_equal(tp_profile_breakdown_of(t->ev, t->n, &w[k], &one), TP_OK);
    assert_int_equal(all[k].step_ns, one.step_ns);
    assert_int_equal(all[k].host_ns, one.host_ns);
    assert_int_equal(all[k].comm_ns, one.comm_ns);
    assert_int_equal(all[k].compute_ns, one.compute_ns);
    assert_int_equal(all[k].sync_ns, one.sync_ns);
    assert_int_equal(all[k].other_ns, one.other_ns);
    assert_int_equal(all[k].busy_ns, one.busy_ns);
    assert_int_equal(all[k].idle_ns, one.idle_ns);
    assert_int_equal(all[k].overlap_ns, one.overlap_ns);
    assert_int_equal(all[k].exposed_comm_ns, one.exposed_comm_ns);
    assert_true(all[k].overlap_pct == one.overlap_pct);
    assert_int_equal(all[k].kernels, one.kernels);
  }
  free(all);
}

static int in_any_window(const tp_event *e, const tp_profile_window *w, size_t n_w) {
  for (size_t k = 0; k < n_w; ++k)
    if (tp_profile_in_window(e, &w[k])) return 1;
  return 0;
}

/* Each kernel summary row against a scan of every kernel in every window. */
static void expect_kernels_by_scan(const random_trace *t, const tp_profile_window *w, size_t n_w) {
  tp_profile_kernel *k = NULL;
  size_t n_k = 0, counted = 0;
  uint64_t grand = 0;
  assert_int_equal(tp_profile_kernel_summary_of(t->ev, t->n, w, n_w, &k, &n_k), TP_OK);
  for (size_t i = 0; i < t->n; ++i)
    if (t->ev[i].type == TP_EV_KERNEL && in_any_window(&t->ev[i], w, n_w)) {
      ++counted;
      grand += t->ev[i].end_ns - t->ev[i].start_ns;
    }
  size_t rows_count = 0;
  for (size_t r = 0; r < n_k; ++r) {
    size_t count = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < t->n; ++i)
      if (t->ev[i].type == TP_EV_KERNEL && strcmp(t->ev[i].name, k[r].name) == 0 &&
          in_any_window(&t->ev[i], w, n_w)) {
        ++count;
        total += t->ev[i].end_ns - t->ev[i].start_ns;
      }
    assert_int_equal(k[r].count, count);
    assert_int_equal(k[r].total_ns, total);
    assert_int_equal(k[r].category, tp_classify_kernel(k[r].name));
    assert_true(k[r].mean_ns == (double)total / (double)count);
    assert_true(k[r].share_pct == (grand ? 100.0 * (double)total / (double)grand : 0.0));
    if (r > 0) assert_true(k[r - 1].total_ns >= k[r].total_ns);
    rows_count += count;
  }
  assert_int_equal(rows_count, counted);
  free(k);
}

/* The schedules of the windows against those of the events a scan finds inside them (ranges
 * starting in a window of their rank, work launched in one), all in whole-process windows. */
static void expect_schedules_by_scan(const random_trace *t, const tp_profile_window *w,
                                     size_t n_w) {
  tp_event *inside = calloc(t->n, sizeof *inside);
  assert_non_null(inside);
  size_t n_in = 0;
  for (size_t i = 0; i < t->n; ++i) {
    const tp_event *e = &t->ev[i];
    int keep = 0;
    for (size_t k = 0; k < n_w && !keep; ++k)
      keep = e->type == TP_EV_RANGE
                 ? e->rank == w[k].rank &&
                       (w[k].whole_process ||
                        (e->start_ns >= w[k].host_start_ns && e->start_ns < w[k].host_end_ns))
                 : tp_profile_in_window(e, &w[k]);
    if (keep) inside[n_in++] = *e;
  }
  tp_profile_window whole[3];
  for (int r = 0; r < 3; ++r)
    whole[r] = (tp_profile_window){.name = "process", .rank = r, .whole_process = 1, .step = -1};
  tp_profile_schedule *got = NULL, *want = NULL;
  size_t n_got = 0, n_want = 0;
  assert_int_equal(tp_profile_schedules(t->ev, t->n, w, n_w, &got, &n_got), TP_OK);
  assert_int_equal(tp_profile_schedules(inside, n_in, whole, 3, &want, &n_want), TP_OK);
  assert_int_equal(n_got, n_want);
  for (size_t i = 0; i < n_got; ++i) {
    assert_string_equal(got[i].name, want[i].name);
    assert_int_equal(got[i].rank, want[i].rank);
    assert_int_equal(got[i].ranges, want[i].ranges);
    assert_int_equal(got[i].device_events, want[i].device_events);
    assert_int_equal(got[i].nccl_kernels, want[i].nccl_kernels);
    assert_int_equal(got[i].peer_copies, want[i].peer_copies);
    assert_int_equal(got[i].sm_copy_kernels, want[i].sm_copy_kernels);
    assert_int_equal(got[i].multicast_kernels, want[i].multicast_kernels);
    assert_int_equal(got[i].comm_ns, want[i].comm_ns);
    assert_int_equal(got[i].gemm_ns, want[i].gemm_ns);
    assert_int_equal(got[i].overlap_ns, want[i].overlap_ns);
    assert_string_equal(got[i].verdict, want[i].verdict);
  }
  free(got);
  free(want);
  free(inside);
}

static void expect_analysis_by_scan(const random_trace *t, const tp_profile_window *w, size_t n_w) {
  expect_breakdowns_by_scan(t, w, n_w);
  expect_kernels_by_scan(t, w, n_w);
  expect_schedules_by_scan(t, w, n_w);
}

/* Windows, breakdowns, kernel summaries and schedules found through the index of device work
 * by launch time are those a scan of every event per window finds, on random event sets, for
 * every kind of selection: the whole process, steps (some marked twice), ranges that nest and
 * overlap, and a mixed, unsorted set of windows. */
static void test_indexed_analysis_matches_scan(void **state) {
  (void)state;
  static const struct {
    const char *steps, *re;
  } selections[] = {{NULL, NULL}, {":", NULL}, {"1:3", NULL}, {NULL, "aten|fused"}, {NULL, "."}};
  size_t nonempty = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    random_trace t = random_events(seed);
    tp_profile_window *mixed = NULL;
    size_t n_mixed = 0;
    for (size_t s = 0; s < sizeof selections / sizeof selections[0]; ++s) {
      tp_profile_selector sel = selector(selections[s].steps, selections[s].re);
      tp_profile_window *w = NULL;
      size_t n_w = 0;
      assert_int_equal(tp_profile_windows(t.ev, t.n, &sel, &w, &n_w), TP_OK);
      tp_profile_selector_free(&sel);
      expect_bounds_by_scan(&t, w, n_w);
      expect_analysis_by_scan(&t, w, n_w);
      for (size_t k = 0; k < n_w; ++k) nonempty += !w[k].empty;
      /* mixed: rank 1's whole process with everyone's --range windows, in reverse */
      tp_profile_window *grown = realloc(mixed, (n_mixed + n_w + 1) * sizeof *mixed);
      assert_non_null(grown);
      mixed = grown;
      for (size_t k = n_w; k > 0; --k)
        if (s == 0 ? w[k - 1].rank == 1 : s == 3) mixed[n_mixed++] = w[k - 1];
      free(w);
    }
    expect_analysis_by_scan(&t, mixed, n_mixed);
    free(mixed);
    free(t.ev);
  }
  assert_true(nonempty > 1000); /* the windows held work: the comparison compared something */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_selector_good),
      cmocka_unit_test(test_selector_bad),
      cmocka_unit_test(test_step_names),
      cmocka_unit_test(test_windows_steps),
      cmocka_unit_test(test_windows_nothing_selected),
      cmocka_unit_test(test_windows_range_and_process),
      cmocka_unit_test(test_windows_nested_same_step),
      cmocka_unit_test(test_windows_huge_step_numbers),
      cmocka_unit_test(test_breakdown_by_hand),
      cmocka_unit_test(test_breakdown_peer_dtod_is_comm_and_empty_is_idle),
      cmocka_unit_test(test_async_step_by_launch_time),
      cmocka_unit_test(test_host_waits_are_not_device_work),
      cmocka_unit_test(test_schedule_verdicts),
      cmocka_unit_test(test_schedule_fused_fallback_is_none),
      cmocka_unit_test(test_transport_of),
      cmocka_unit_test(test_classify_symmetric_memory),
      cmocka_unit_test(test_kernel_summary_restricted_to_windows),
      cmocka_unit_test(test_indexed_analysis_matches_scan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
