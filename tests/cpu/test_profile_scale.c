/*
 * test_profile_scale.c — `tpbench profile`'s import (report/tp_profile.h) of a synthetic
 * profile the size of a real training job's: 8 ranks' event files, about a million events,
 * 20,000 step windows (--steps ":"), each step with nested operation ranges and device work
 * launched inside it that runs after the step closed. The analysis was once windows x events
 * (an import of this size took hours); the test asserts the import completes and stores every
 * event and window. How long it takes is measured by hand, not asserted here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors/tp_profile_analysis.h"
#include "collectors/tp_profile_file.h"
#include "report/tp_profile.h"
#include "store/tp_store.h"

enum {
  RANKS = 8,
  STEPS = 2500,        /* per rank: 20,000 windows */
  RANGES_PER_STEP = 4, /* the step's own range and three operations */
  WORK_PER_STEP = 46,  /* kernels, copies, memsets, stream waits */
  EVENTS_PER_STEP = RANGES_PER_STEP + WORK_PER_STEP,
  EVENTS_PER_RANK = STEPS * EVENTS_PER_STEP /* 125,000: a million in all */
};

static const uint64_t US = 1000;                   /* ns */
static const uint64_t T0 = 1700000000000000000ull; /* CLOCK_REALTIME-like */
static const uint64_t STEP_NS = 1000000;           /* 1 ms per step on the host */

#define GEMM_K "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT"
#define NCCL_K "_Z31ncclDevKernel_AllGather_RING_LL24ncclDevKernelArgsStorageILm4096EE"
#define SYMM_BARRIER_K "_ZN4c10d16symmetric_memory14barrier_kernelEPPjiiim"

static char step_names[STEPS][32]; /* "ProfilerStep#N": the events borrow them */

static tp_event range_event(int rank, const char *name, uint64_t start, uint64_t end) {
  return (tp_event){.name = name,
                    .start_ns = start,
                    .end_ns = end,
                    .rank = rank,
                    .device = -1,
                    .stream = TP_STREAM_NONE,
                    .type = TP_EV_RANGE,
                    .category = TP_CAT_RANGE,
                    .peer_device = -1};
}

/* Device work number k of a step starting at `step_start`: launched 15 µs apart, run 60 µs
 * later, so the last of a step runs after its range closed (an asynchronous step). */
static tp_event work_event(int rank, uint64_t step_start, int k) {
  uint64_t launch = step_start + 10 * US + (uint64_t)k * 15 * US;
  tp_event e = {.start_ns = launch + 60 * US,
                .end_ns = launch + 60 * US + (uint64_t)(8 + k % 7) * US,
                .launch_ns = launch,
                .rank = rank,
                .device = rank,
                .stream = 7 + k % 2,
                .correlation = (uint32_t)k,
                .type = TP_EV_KERNEL,
                .peer_device = -1};
  switch (k % 6) {
  case 0:
  case 3: e.name = GEMM_K; break;
  case 1: e.name = NCCL_K; break;
  case 2: e.name = SYMM_BARRIER_K; break;
  case 4:
    e.type = TP_EV_MEMCPY;
    e.name = "memcpy";
    e.copy_kind = TP_COPY_PTOP;
    e.peer_device = (rank + 1) % RANKS;
    e.bytes = 1 << 20;
    break;
  default:
    e.type = k % 12 == 5 ? TP_EV_MEMSET : TP_EV_SYNC;
    e.name = e.type == TP_EV_SYNC ? "sync stream wait event" : "memset";
    break;
  }
  e.category = e.type == TP_EV_KERNEL   ? tp_classify_kernel(e.name)
               : e.type == TP_EV_MEMCPY ? tp_classify_copy(e.copy_kind)
               : e.type == TP_EV_SYNC   ? TP_CAT_SYNC
                                        : TP_CAT_OTHER;
  return e;
}

/* One rank's events: per step its range, two nested operations and a fused op, and the
 * device work they launched. */
static size_t rank_events(int rank, tp_event *ev) {
  size_t n = 0;
  for (int s = 0; s < STEPS; ++s) {
    uint64_t start = T0 + (uint64_t)s * STEP_NS + (uint64_t)rank * 3 * US;
    ev[n++] = range_event(rank, step_names[s], start, start + 800 * US);
    ev[n++] = range_event(rank, "aten::linear", start + 5 * US, start + 400 * US);
    ev[n++] = range_event(rank, "aten::mm", start + 8 * US, start + 200 * US);
    ev[n++] = range_event(rank, "fused_all_gather_matmul", start + 400 * US, start + 790 * US);
    for (int k = 0; k < WORK_PER_STEP; ++k) ev[n++] = work_event(rank, start, k);
  }
  return n;
}

/* Writes every rank's file into `dir` (names: RANKS paths of 128 bytes). */
static void write_ranks(const char *dir, char (*paths)[128]) {
  for (int s = 0; s < STEPS; ++s)
    snprintf(step_names[s], sizeof step_names[s], "ProfilerStep#%d", s);
  tp_event *ev = malloc(EVENTS_PER_RANK * sizeof *ev);
  assert_non_null(ev);
  for (int r = 0; r < RANKS; ++r) {
    size_t n = rank_events(r, ev);
    assert_int_equal(n, EVENTS_PER_RANK);
    snprintf(paths[r], 128, "%s/process-%d.tpprof", dir, 1000 + r);
    FILE *f = fopen(paths[r], "w");
    assert_non_null(f);
    tp_profile_meta meta = {.pid = 1000 + r,
                            .rank = r,
                            .start_ns = T0,
                            .end_ns = T0 + (uint64_t)(STEPS + 1) * STEP_NS,
                            .complete = 1};
    assert_int_equal(tp_profile_file_write(f, &meta, ev, n), TP_OK);
    assert_int_equal(fclose(f), 0);
  }
  free(ev);
}

static void remove_db(const char *db) {
  char side[160];
  unlink(db);
  snprintf(side, sizeof side, "%s-wal", db);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", db);
  unlink(side);
}

static void test_import_a_million_events(void **state) {
  (void)state;
  char dir[64] = "/tmp/test_profile_scale_XXXXXX", db[128], paths[RANKS][128];
  assert_non_null(mkdtemp(dir));
  write_ranks(dir, paths);
  snprintf(db, sizeof db, "%s/profile.db", dir);
  tp_store *store = NULL;
  if (tp_store_open(db, 1, &store) != TP_OK) fail_msg("%s", tp_last_error());
  tp_profile_selector sel;
  assert_int_equal(tp_profile_selector_parse(":", NULL, &sel), TP_OK);
  tp_profile_import_args a = {.profile_dir = dir,
                              .command_line = "torchrun --nproc-per-node 8 train.py",
                              .commit = "abc123",
                              .host = "testhost",
                              .selector = &sel};
  tp_profile_import_result r;
  if (tp_profile_import(store, &a, &r) != TP_OK) fail_msg("%s", tp_last_error());
  assert_int_equal(r.n_events, (size_t)RANKS * EVENTS_PER_RANK);
  assert_int_equal(r.n_processes, RANKS);
  assert_int_equal(r.n_ranks, RANKS);
  assert_int_equal(r.n_windows, (size_t)RANKS * STEPS);
  assert_int_equal(r.incomplete, 0);
  assert_int_equal(r.no_windows, 0);
  tp_profile_selector_free(&sel);
  tp_store_close(store);
  remove_db(db);
  for (int i = 0; i < RANKS; ++i) assert_int_equal(unlink(paths[i]), 0);
  assert_int_equal(rmdir(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_import_a_million_events),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
