/*
 * test_device_alloc.c — the device-memory ledger of kernels/tp_device_alloc.h
 * on the CPU, over a fake backend on host memory that counts its calls and
 * can fail or hand out a pointer twice: each owner's live bytes and
 * high-water mark (rising, staying after frees, restarting at a reset); a
 * free of a pointer the ledger does not hold (never allocated, freed
 * already) is TP_EINTERNAL and never reaches the backend; claims on a shared
 * buffer count their maximum, not their sum, and add up across buffers; the
 * current owner set by scopes; a watch's joint peak of two owners (lower
 * than the sum of their own peaks when one frees as the other allocates);
 * release refusing an owner that still holds allocations; memory another
 * allocator made (NCCL's windows) adopted — counted in its owner's live
 * bytes, peak and a watch, never freed by the ledger, refused as a free, a
 * second adoption or a disown of the ledger's own — and disowned; a claim on
 * the window scratch counted like the other shared buffers; 0 bytes, a
 * failing backend, a pointer handed out twice, and a thousand allocations
 * freed in a shuffled order (the table rebuilt under them).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/tp_device_alloc.h"

/* ---- a fake allocator on host memory ----------------------------------------------------- */

typedef struct fake {
  int allocs, frees; /* calls that reached the backend */
  int live;          /* allocations the backend has out */
  tp_rc fail_with;   /* TP_OK: allocate; else fail with this */
  void *hand_out;    /* non-NULL: return this instead of allocating */
  void *freed[4];    /* the last pointers freed */
  int n_freed;
} fake;

static tp_rc fake_alloc(void *ctx, void **out, size_t bytes) {
  fake *f = ctx;
  f->allocs++;
  if (f->fail_with != TP_OK) return TP_FAIL(f->fail_with, "fake allocation of %zu bytes", bytes);
  *out = f->hand_out ? f->hand_out : malloc(bytes);
  if (!*out) return TP_FAIL(TP_EOOM, "host malloc");
  f->live++;
  return TP_OK;
}

static tp_rc fake_free(void *ctx, void *ptr) {
  fake *f = ctx;
  f->frees++;
  f->live--;
  f->freed[f->n_freed++ % 4] = ptr;
  if (ptr != f->hand_out) free(ptr);
  return TP_OK;
}

typedef struct fixture {
  fake f;
  tp_alloc_ledger *l;
} fixture;

static int setup(void **state) {
  fixture *x = calloc(1, sizeof *x);
  if (!x) return -1;
  const tp_alloc_backend b = {fake_alloc, fake_free, &x->f};
  if (tp_alloc_ledger_create(&b, &x->l) != TP_OK) {
    free(x);
    return -1;
  }
  *state = x;
  return 0;
}

static int teardown(void **state) {
  fixture *x = *state;
  tp_alloc_ledger_destroy(x->l);
  free(x);
  return 0;
}

static const tp_alloc_owner CASE = {TP_ALLOC_CASE, 0};
static const tp_alloc_owner CONFIG3 = {TP_ALLOC_CONFIG, 3};
static const tp_alloc_owner CONFIG4 = {TP_ALLOC_CONFIG, 4};

static tp_alloc_stats stats(fixture *x, tp_alloc_owner o) {
  tp_alloc_stats s;
  tp_alloc_stats_of(x->l, o, &s);
  return s;
}

static void *must_alloc(fixture *x, tp_alloc_owner o, size_t bytes) {
  void *p = NULL;
  assert_int_equal(tp_alloc_malloc(x->l, o, &p, bytes), TP_OK);
  assert_non_null(p);
  return p;
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_peak_rises_stays_and_resets(void **state) {
  fixture *x = *state;
  void *a = must_alloc(x, CONFIG3, 100);
  void *b = must_alloc(x, CONFIG3, 200);
  tp_alloc_stats s = stats(x, CONFIG3);
  assert_int_equal(s.live_bytes, 300);
  assert_int_equal(s.live_count, 2);
  assert_int_equal(s.peak_bytes, 300);
  assert_int_equal(tp_alloc_free(x->l, b), TP_OK);
  s = stats(x, CONFIG3);
  assert_int_equal(s.live_bytes, 100);
  assert_int_equal(s.peak_bytes, 300); /* the high-water mark stays after a free */
  void *c = must_alloc(x, CONFIG3, 50);
  assert_int_equal(stats(x, CONFIG3).peak_bytes, 300);
  tp_alloc_reset_peak(x->l, CONFIG3);
  assert_int_equal(stats(x, CONFIG3).peak_bytes, 150); /* restarts at what it holds */
  void *d = must_alloc(x, CONFIG3, 400);
  assert_int_equal(stats(x, CONFIG3).peak_bytes, 550);
  /* another owner's allocations are its own */
  void *e = must_alloc(x, CONFIG4, 1000);
  assert_int_equal(stats(x, CONFIG3).peak_bytes, 550);
  assert_int_equal(stats(x, CONFIG4).live_bytes, 1000);
  int64_t live = 0, count = 0;
  tp_alloc_totals(x->l, &live, &count);
  assert_int_equal(live, 1550);
  assert_int_equal(count, 4);
  void *all[] = {a, c, d, e};
  for (int i = 0; i < 4; ++i) assert_int_equal(tp_alloc_free(x->l, all[i]), TP_OK);
  assert_int_equal(x->f.live, 0);
  assert_int_equal(stats(x, CONFIG3).live_bytes, 0);
}

static void test_free_of_unknown_pointer_is_an_error(void **state) {
  fixture *x = *state;
  int not_from_the_ledger = 0;
  assert_int_equal(tp_alloc_free(x->l, &not_from_the_ledger), TP_EINTERNAL);
  assert_non_null(strstr(tp_last_message(), "holds no such allocation"));
  assert_int_equal(x->f.frees, 0); /* never handed to the backend */
  void *p = must_alloc(x, CASE, 64);
  assert_int_equal(tp_alloc_free(x->l, p), TP_OK);
  assert_int_equal(x->f.frees, 1);
  assert_int_equal(tp_alloc_free(x->l, p), TP_EINTERNAL); /* freed already */
  assert_int_equal(x->f.frees, 1);
  assert_int_equal(tp_alloc_free(x->l, NULL), TP_OK);
  assert_int_equal(x->f.frees, 1);
  assert_int_equal(stats(x, CASE).live_bytes, 0);
}

static void test_claims_take_the_maximum_per_buffer(void **state) {
  fixture *x = *state;
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_SYMM, 100), TP_OK);
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_SYMM, 50), TP_OK);
  assert_int_equal(stats(x, CONFIG3).claimed_bytes, 100); /* regions alias: not 150 */
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_SYMM, 300), TP_OK);
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_SCRATCH, 10), TP_OK);
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_GEMM, 7), TP_OK);
  void *p = must_alloc(x, CONFIG3, 1000);
  tp_alloc_stats s = stats(x, CONFIG3);
  assert_int_equal(s.claimed_bytes, 317);
  assert_int_equal(s.held_bytes, 1317);
  assert_int_equal(s.peak_bytes, 1317);
  assert_int_equal(x->f.allocs, 1); /* a claim allocates nothing */
  /* another owner's claim on the same buffer is its own share */
  assert_int_equal(tp_alloc_claim(x->l, CONFIG4, TP_SHARED_SYMM, 20), TP_OK);
  assert_int_equal(stats(x, CONFIG4).claimed_bytes, 20);
  assert_int_equal(stats(x, CONFIG3).claimed_bytes, 317);
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_COUNT, 1), TP_EINTERNAL);
  assert_int_equal(tp_alloc_free(x->l, p), TP_OK);
}

static void test_scopes_set_the_current_owner(void **state) {
  fixture *x = *state;
  assert_int_equal(tp_alloc_current(x->l).kind, TP_ALLOC_UNOWNED);
  tp_alloc_owner outer = tp_alloc_enter(x->l, CASE);
  assert_int_equal(outer.kind, TP_ALLOC_UNOWNED);
  tp_alloc_owner inner = tp_alloc_enter(x->l, CONFIG4);
  assert_int_equal(inner.kind, TP_ALLOC_CASE);
  assert_int_equal(tp_alloc_current(x->l).kind, TP_ALLOC_CONFIG);
  assert_int_equal(tp_alloc_current(x->l).index, 4);
  tp_alloc_leave(x->l, inner);
  assert_int_equal(tp_alloc_current(x->l).kind, TP_ALLOC_CASE);
  tp_alloc_leave(x->l, outer);
  assert_int_equal(tp_alloc_current(x->l).kind, TP_ALLOC_UNOWNED);
}

static void test_watch_follows_the_joint_peak(void **state) {
  fixture *x = *state;
  void *tensors = must_alloc(x, CASE, 1000);
  void *other = must_alloc(x, CONFIG4, 5000); /* not watched */
  const tp_alloc_owner owners[] = {CASE, CONFIG3};
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_SCRATCH, 10), TP_OK);
  assert_int_equal(tp_alloc_watch_begin(x->l, owners, 2), TP_OK);
  assert_int_equal(tp_alloc_watch_begin(x->l, owners, 2), TP_EINTERNAL); /* one at a time */
  tp_alloc_reset_peak(x->l, CASE);
  void *part = must_alloc(x, CASE, 400);
  assert_int_equal(tp_alloc_free(x->l, tensors), TP_OK); /* the case drops to 400 */
  void *own = must_alloc(x, CONFIG3, 500);               /* joint 910 */
  void *more = must_alloc(x, CONFIG4, 7000);             /* an unwatched owner moves nothing */
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_SCRATCH, 5), TP_OK); /* below 10 */
  int64_t peak = 0;
  assert_int_equal(tp_alloc_watch_end(x->l, &peak), TP_OK);
  /* the case's own peak is 1400 and the configuration's 510: the joint is 1410 */
  assert_int_equal(stats(x, CASE).peak_bytes, 1400);
  assert_int_equal(stats(x, CONFIG3).peak_bytes, 510);
  assert_int_equal(peak, 1410);
  assert_int_equal(tp_alloc_watch_end(x->l, &peak), TP_EINTERNAL); /* ended already */
  const tp_alloc_owner twice[] = {CASE, CASE};
  assert_int_equal(tp_alloc_watch_begin(x->l, twice, 2), TP_EINTERNAL);
  assert_int_equal(tp_alloc_watch_begin(x->l, owners, 0), TP_EINTERNAL);
  void *all[] = {other, part, own, more};
  for (int i = 0; i < 4; ++i) assert_int_equal(tp_alloc_free(x->l, all[i]), TP_OK);
}

static void test_watch_sees_frees_and_claims_of_its_owners(void **state) {
  fixture *x = *state;
  const tp_alloc_owner owners[] = {CASE, CONFIG3};
  void *t = must_alloc(x, CASE, 100);
  assert_int_equal(tp_alloc_watch_begin(x->l, owners, 2), TP_OK);
  assert_int_equal(tp_alloc_free(x->l, t), TP_OK); /* joint 0 */
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_SYMM, 60), TP_OK);
  void *p = must_alloc(x, CONFIG3, 30); /* joint 90: below the 100 it began at */
  int64_t peak = 0;
  assert_int_equal(tp_alloc_watch_end(x->l, &peak), TP_OK);
  assert_int_equal(peak, 100);
  assert_int_equal(tp_alloc_watch_begin(x->l, owners, 2), TP_OK); /* starts at 90 */
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_SYMM, 80), TP_OK);
  assert_int_equal(tp_alloc_watch_end(x->l, &peak), TP_OK);
  assert_int_equal(peak, 110);
  assert_int_equal(tp_alloc_free(x->l, p), TP_OK);
}

static void test_release_refuses_an_owner_with_allocations(void **state) {
  fixture *x = *state;
  void *p = must_alloc(x, CONFIG3, 128);
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_SYMM, 4096), TP_OK);
  assert_int_equal(tp_alloc_release(x->l, CONFIG3), TP_EINTERNAL);
  assert_non_null(strstr(tp_last_message(), "configuration 3 still holds 1 device allocations"));
  assert_int_equal(stats(x, CONFIG3).held_bytes, 4224); /* kept */
  assert_int_equal(tp_alloc_free(x->l, p), TP_OK);
  assert_int_equal(tp_alloc_release(x->l, CONFIG3), TP_OK);
  tp_alloc_stats s = stats(x, CONFIG3);
  assert_int_equal(s.held_bytes, 0); /* its claims went with it */
  assert_int_equal(s.peak_bytes, 0);
  assert_int_equal(tp_alloc_release(x->l, CONFIG3), TP_OK); /* unknown: nothing to do */
}

static void test_zero_bytes_allocate_nothing(void **state) {
  fixture *x = *state;
  void *p = &p;
  assert_int_equal(tp_alloc_malloc(x->l, CASE, &p, 0), TP_OK);
  assert_null(p);
  assert_int_equal(x->f.allocs, 0);
  assert_int_equal(stats(x, CASE).live_count, 0);
}

static void test_backend_failure_records_nothing(void **state) {
  fixture *x = *state;
  x->f.fail_with = TP_EOOM;
  void *p = &p;
  assert_int_equal(tp_alloc_malloc(x->l, CASE, &p, 1 << 20), TP_EOOM);
  assert_null(p);
  assert_int_equal(stats(x, CASE).live_bytes, 0);
  assert_int_equal(stats(x, CASE).peak_bytes, 0);
  x->f.fail_with = TP_OK;
}

static void test_pointer_handed_out_twice(void **state) {
  fixture *x = *state;
  static char block[64];
  x->f.hand_out = block;
  void *p = must_alloc(x, CASE, 64);
  assert_ptr_equal(p, block);
  /* the device gave the same address again: it was freed behind the ledger's back */
  void *q = NULL;
  assert_int_equal(tp_alloc_malloc(x->l, CONFIG3, &q, 64), TP_EINTERNAL);
  assert_null(q);
  assert_non_null(strstr(tp_last_message(), "freed outside the ledger"));
  assert_int_equal(x->f.frees, 1); /* the second one went back */
  assert_int_equal(stats(x, CONFIG3).live_bytes, 0);
  assert_int_equal(stats(x, CASE).live_bytes, 64);
  assert_int_equal(tp_alloc_free(x->l, p), TP_OK);
  x->f.hand_out = NULL;
}

static void test_many_allocations_shuffled_frees(void **state) {
  fixture *x = *state;
  enum { N = 1000 };
  void **ptrs = calloc(N, sizeof *ptrs);
  assert_non_null(ptrs);
  int64_t want = 0;
  for (int i = 0; i < N; ++i) {
    ptrs[i] = must_alloc(x, i % 2 ? CASE : CONFIG3, (size_t)i + 1);
    want += i + 1;
  }
  int64_t live = 0, count = 0;
  tp_alloc_totals(x->l, &live, &count);
  assert_int_equal(live, want);
  assert_int_equal(count, N);
  uint64_t st = 12345;
  for (int i = N - 1; i > 0; --i) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    const int j = (int)((st >> 33) % (uint64_t)(i + 1));
    void *t = ptrs[i];
    ptrs[i] = ptrs[j];
    ptrs[j] = t;
  }
  for (int i = 0; i < N; ++i) {
    assert_int_equal(tp_alloc_free(x->l, ptrs[i]), TP_OK);
    /* interleave fresh allocations so removed slots are reused */
    if (i % 3 == 0) assert_int_equal(tp_alloc_free(x->l, must_alloc(x, CONFIG4, 8)), TP_OK);
  }
  tp_alloc_totals(x->l, &live, &count);
  assert_int_equal(live, 0);
  assert_int_equal(count, 0);
  assert_int_equal(x->f.live, 0);
  /* the case had the sizes of the odd i: 2 + 4 + ... + 1000 */
  assert_int_equal(stats(x, CASE).peak_bytes, want / 2 + N / 4);
  free(ptrs);
}

static void test_owner_names(void **state) {
  (void)state;
  char buf[48];
  tp_alloc_owner_name(CONFIG3, buf, sizeof buf);
  assert_string_equal(buf, "configuration 3");
  tp_alloc_owner_name(TP_ALLOC_OWNER(TP_ALLOC_GROUP, 0), buf, sizeof buf);
  assert_string_equal(buf, "group");
}

static void test_create_needs_both_functions(void **state) {
  (void)state;
  const tp_alloc_backend half = {fake_alloc, NULL, NULL};
  tp_alloc_ledger *l = (tp_alloc_ledger *)&half;
  assert_int_equal(tp_alloc_ledger_create(&half, &l), TP_EINTERNAL);
  assert_null(l);
}

static void test_adopted_memory_counts_and_is_never_freed_here(void **state) {
  fixture *x = *state;
  char window[4096]; /* stands in for NCCL's ncclMemAlloc */
  const tp_alloc_owner owners[2] = {CASE, CONFIG3};
  void *own = must_alloc(x, CONFIG3, 100);
  assert_int_equal(tp_alloc_watch_begin(x->l, owners, 2), TP_OK);
  assert_int_equal(tp_alloc_adopt(x->l, CONFIG3, window, sizeof window), TP_OK);
  assert_int_equal(x->f.allocs, 1); /* the backend made only the ledger's own */
  tp_alloc_stats s = stats(x, CONFIG3);
  assert_int_equal(s.live_bytes, 100 + (int64_t)sizeof window);
  assert_int_equal(s.live_count, 2);
  assert_int_equal(s.peak_bytes, 100 + (int64_t)sizeof window);
  /* strict: the ledger never frees it, nor adopts it twice */
  assert_int_equal(tp_alloc_free(x->l, window), TP_EINTERNAL);
  assert_non_null(strstr(tp_last_message(), "another allocator made it"));
  assert_int_equal(x->f.frees, 0);
  assert_int_equal(tp_alloc_adopt(x->l, CASE, window, 16), TP_EINTERNAL);
  assert_non_null(strstr(tp_last_message(), "holds it already"));
  assert_int_equal(tp_alloc_adopt(x->l, CASE, own, 16), TP_EINTERNAL);
  assert_int_equal(tp_alloc_adopt(x->l, CASE, NULL, 16), TP_EINTERNAL);
  assert_int_equal(tp_alloc_adopt(x->l, CASE, window + 1, 0), TP_EINTERNAL);
  /* its owner cannot be released while it is live */
  assert_int_equal(tp_alloc_release(x->l, CONFIG3), TP_EINTERNAL);
  /* a disown of the ledger's own allocation, or of something never adopted, changes nothing */
  assert_int_equal(tp_alloc_disown(x->l, own), TP_EINTERNAL);
  assert_non_null(strstr(tp_last_message(), "allocated it itself"));
  assert_int_equal(tp_alloc_disown(x->l, window + 8), TP_EINTERNAL);
  assert_int_equal(stats(x, CONFIG3).live_count, 2);
  assert_int_equal(tp_alloc_disown(x->l, window), TP_OK);
  assert_int_equal(x->f.frees, 0);
  s = stats(x, CONFIG3);
  assert_int_equal(s.live_bytes, 100);
  assert_int_equal(s.live_count, 1);
  assert_int_equal(s.peak_bytes, 100 + (int64_t)sizeof window);  /* the window's bytes stay */
  assert_int_equal(tp_alloc_disown(x->l, window), TP_EINTERNAL); /* disowned already */
  int64_t peak = 0;
  assert_int_equal(tp_alloc_watch_end(x->l, &peak), TP_OK);
  assert_int_equal(peak, 100 + (int64_t)sizeof window);
  assert_int_equal(tp_alloc_free(x->l, own), TP_OK);
  assert_int_equal(tp_alloc_release(x->l, CONFIG3), TP_OK);
}

/* The share cap of ranks sharing one GPU: refused past the limit with the
 * reason (TP_EREJECT, nothing allocated), allowed again after a free,
 * adoptions counted but never refused, off at 0. */
static void test_limit_rejects_past_the_share(void **state) {
  fixture *x = *state;
  tp_alloc_set_limit(x->l, 1000, "ranks sharing one GPU");
  assert_int_equal(tp_alloc_limit(x->l), 1000);
  void *a = must_alloc(x, CASE, 600);
  void *b = NULL;
  assert_int_equal(tp_alloc_malloc(x->l, CONFIG3, &b, 500), TP_EREJECT);
  assert_null(b);
  assert_int_equal(x->f.allocs, 1); /* the backend was never asked */
  assert_non_null(strstr(tp_last_message(), "ranks sharing one GPU: 500 more bytes"));
  assert_non_null(strstr(tp_last_message(), "over its share of"));
  assert_int_equal(stats(x, CONFIG3).live_bytes, 0);
  void *c = must_alloc(x, CONFIG3, 400); /* exactly at the cap */
  char window[800];
  assert_int_equal(tp_alloc_adopt(x->l, CONFIG3, window, sizeof window), TP_OK);
  assert_int_equal(tp_alloc_disown(x->l, window), TP_OK);
  assert_int_equal(tp_alloc_free(x->l, a), TP_OK);
  b = must_alloc(x, CONFIG3, 500); /* room again */
  tp_alloc_set_limit(x->l, 0, NULL);
  assert_int_equal(tp_alloc_limit(x->l), 0);
  void *d = must_alloc(x, CASE, 1 << 20);
  assert_int_equal(tp_alloc_free(x->l, b), TP_OK);
  assert_int_equal(tp_alloc_free(x->l, c), TP_OK);
  assert_int_equal(tp_alloc_free(x->l, d), TP_OK);
}

static void test_window_scratch_claim(void **state) {
  fixture *x = *state;
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_WINDOW, 300), TP_OK);
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_WINDOW, 200), TP_OK);
  assert_int_equal(tp_alloc_claim(x->l, CONFIG3, TP_SHARED_SCRATCH, 50), TP_OK);
  tp_alloc_stats s = stats(x, CONFIG3);
  assert_int_equal(s.claimed_bytes, 350);
  assert_int_equal(s.held_bytes, 350);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_peak_rises_stays_and_resets, setup, teardown),
      cmocka_unit_test_setup_teardown(test_free_of_unknown_pointer_is_an_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_claims_take_the_maximum_per_buffer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scopes_set_the_current_owner, setup, teardown),
      cmocka_unit_test_setup_teardown(test_watch_follows_the_joint_peak, setup, teardown),
      cmocka_unit_test_setup_teardown(test_watch_sees_frees_and_claims_of_its_owners, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_release_refuses_an_owner_with_allocations, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_zero_bytes_allocate_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_backend_failure_records_nothing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pointer_handed_out_twice, setup, teardown),
      cmocka_unit_test_setup_teardown(test_many_allocations_shuffled_frees, setup, teardown),
      cmocka_unit_test_setup_teardown(test_adopted_memory_counts_and_is_never_freed_here, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_window_scratch_claim, setup, teardown),
      cmocka_unit_test_setup_teardown(test_limit_rejects_past_the_share, setup, teardown),
      cmocka_unit_test(test_owner_names),
      cmocka_unit_test(test_create_needs_both_functions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
