/*
 * test_stock_window.c — GPU test of the stock path's nccl-window variant
 * (kernels/tp_window.h): the same NCCL collectives on buffers from
 * ncclMemAlloc registered as NCCL symmetric windows.
 *
 * Per op (ag_linear, ag_linear_multi, linear_rs), dtype (bf16, fp32),
 * sequence parallelism on and off, with the gathered input saved or
 * gathered again: a training step (forward, backward) of plain stock and of
 * stock on windows, on the same random inputs (the window run's copies
 * carved from one window of its own), outputs poisoned first; every output
 * (y, dx, dw) of the window run must equal plain stock's bit for bit (the
 * same collectives; at TP 1 and 2 even a sum of ranks rounds the same: one
 * addition of two values); at TP 4 and 8 a sum over ranks (the gather
 * side's dx, the scatter side's y) may be added in another order on
 * windows, so those two are held within max(1e-2, 2·2^-8·sqrt(W)) (bf16) or
 * 1e-6 (fp32) norm-wise, the rest bit for bit. The collective alone on
 * windows must run too.
 *
 * Whether NCCL registers symmetric windows is its runtime's to say, and the
 * test holds it to what NCCL's sources say: up to 2.28.3 a communicator of
 * one rank has no symmetric support (its P2P check needs two local ranks),
 * from 2.28.7 on it has; two ranks on one NVLink host have it in both. So
 * at TP 1 under NCCL <= 2.28.3 the window plan must be rejected at prepare
 * time, TP_EREJECT, with NCCL's own reason ("does not support symmetric
 * memory"), and run nothing; otherwise it must run and match. A tensor
 * outside every window must fail the pass (no plain collective under the
 * window's name); the window scratch grows, never shrinks.
 *
 * TP 1 on one GPU; TP 2, 4 and 8 on as many GPUs (gpu_harness.h: cases
 * NAME/tpN, `--tp LIST`, a degree above the GPUs reported skipped; with
 * TPBENCH_TEST_SHARE_GPU skipped too, saying why: ranks that are NCCL hosts
 * of their own have no windows). Shapes divide by 8. Exit 77 (skipped)
 * without a GPU, or when every case was skipped.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/tp_device.h"
#include "kernels/tp_linear.h"
#include "kernels/tp_window.h"
#include "tests/gpu/gpu_harness.h"

enum { TOKENS = 768, D_IN = 256, D_OUT = 384, MAXW = TP_MAX_WEIGHTS };

/* NCCL's version code that first gives a one-rank communicator symmetric
 * memory (2.28.7: symmetricSupport from isAllCudaP2p, true without peers;
 * 2.28.3 and before: isAllDirectP2p, false with one local rank). */
enum { NCCL_ONE_RANK_WINDOWS = 22807 };

/* One run's device tensors. */
typedef struct tensors {
  void *x, *w[MAXW], *y[MAXW], *dy[MAXW], *dx, *dw[MAXW], *saved;
} tensors;

static tp_linear_desc desc_of(tp_op op, tp_dtype dt, int sp, int save) {
  const int gather = op != TP_OP_LINEAR_RS;
  return (tp_linear_desc){.op = op,
                          .dtype = dt,
                          .tokens = TOKENS,
                          .in_features = gather ? D_IN : D_OUT,
                          .out_features = gather ? D_OUT : D_IN,
                          .n_weights = op == TP_OP_AG_LINEAR_MULTI ? 2 : 1,
                          .backward = 1,
                          .sp = sp,
                          .save_gathered = save};
}

static size_t bytes_of(const tp_linear_plan *p, size_t elems) {
  return elems * tp_dtype_bytes(p->desc.dtype);
}

/* The plain run's tensors: each its own cudaMalloc, inputs random (seeded per rank). */
static int alloc_plain(tp_group *g, const tp_linear_plan *p, tensors *t) {
  memset(t, 0, sizeof *t);
  const size_t nx = tp_linear_x_elems(p), ny = tp_linear_y_elems(p), nw = tp_linear_w_elems(p);
  const tp_dtype dt = p->desc.dtype;
  const uint64_t seed = 1000u * (uint64_t)(g->rank + 1);
  int bad = cudaMalloc(&t->x, bytes_of(p, nx)) != cudaSuccess;
  bad |= cudaMalloc(&t->dx, bytes_of(p, nx)) != cudaSuccess;
  if (p->saved_bytes) bad |= cudaMalloc(&t->saved, p->saved_bytes) != cudaSuccess;
  if (!bad) bad |= tp_launch_fill_random(dt, t->x, nx, seed + 1, 1.0f, g->main_stream) != 0;
  for (int i = 0; i < p->desc.n_weights && !bad; ++i) {
    bad |= cudaMalloc(&t->w[i], bytes_of(p, nw)) != cudaSuccess;
    bad |= cudaMalloc(&t->y[i], bytes_of(p, ny)) != cudaSuccess;
    bad |= cudaMalloc(&t->dy[i], bytes_of(p, ny)) != cudaSuccess;
    bad |= cudaMalloc(&t->dw[i], bytes_of(p, nw)) != cudaSuccess;
    if (bad) break;
    bad |= tp_launch_fill_random(dt, t->w[i], nw, seed + 10 + (uint64_t)i, 0.0625f,
                                 g->main_stream) != 0;
    bad |=
        tp_launch_fill_random(dt, t->dy[i], ny, seed + 20 + (uint64_t)i, 1.0f, g->main_stream) != 0;
  }
  return bad || cudaStreamSynchronize(g->main_stream) != cudaSuccess;
}

static void free_plain(tensors *t) {
  void *all[] = {t->x, t->dx, t->saved};
  for (size_t i = 0; i < 3; ++i) cudaFree(all[i]);
  for (int i = 0; i < MAXW; ++i) {
    cudaFree(t->w[i]);
    cudaFree(t->y[i]);
    cudaFree(t->dy[i]);
    cudaFree(t->dw[i]);
  }
  memset(t, 0, sizeof *t);
}

/* The window run's tensors: the collectives' ones carved from one window
 * (whole pages each), inputs copied from the plain run's; the weights and
 * their gradients the plain run's own buffers (no collective touches them)
 * and copies of them. */
static size_t page(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

static int alloc_window(tp_group *g, const tp_linear_plan *p, const tensors *plain, tensors *t,
                        void **window) {
  memset(t, 0, sizeof *t);
  const size_t x = bytes_of(p, tp_linear_x_elems(p)), y = bytes_of(p, tp_linear_y_elems(p));
  const int n = p->desc.n_weights;
  size_t total = 2 * page(x) + (size_t)n * 2 * page(y) + page(p->saved_bytes ? p->saved_bytes : 1);
  if (tp_window_alloc(g, total, window) != TP_OK) {
    fprintf(stderr, "rank %d: tp_window_alloc: %s\n", g->rank, tp_last_error());
    return 1;
  }
  char *at = *window;
  t->x = at;
  t->dx = at + page(x);
  at += 2 * page(x);
  for (int i = 0; i < n; ++i) {
    t->y[i] = at;
    t->dy[i] = at + page(y);
    at += 2 * page(y);
  }
  t->saved = p->saved_bytes ? at : NULL;
  int bad = cudaMemcpy(t->x, plain->x, x, cudaMemcpyDeviceToDevice) != cudaSuccess;
  for (int i = 0; i < n; ++i) {
    bad |= cudaMemcpy(t->dy[i], plain->dy[i], y, cudaMemcpyDeviceToDevice) != cudaSuccess;
    t->w[i] = plain->w[i];
    const size_t w = bytes_of(p, tp_linear_w_elems(p));
    bad |= cudaMalloc(&t->dw[i], w) != cudaSuccess;
  }
  return bad;
}

static tp_linear_tensors linear_tensors(const tp_linear_plan *p, const tensors *d) {
  tp_linear_tensors t;
  memset(&t, 0, sizeof t);
  t.x = d->x;
  t.dx = d->dx;
  t.saved = p->desc.save_gathered ? d->saved : NULL;
  for (int i = 0; i < p->desc.n_weights; ++i) {
    t.w[i] = d->w[i];
    t.y[i] = d->y[i];
    t.dy[i] = d->dy[i];
    t.dw[i] = d->dw[i];
  }
  return t;
}

/* Poisons the outputs, then runs two training steps. */
static int step(tp_group *g, const tp_linear_plan *p, const tensors *d) {
  const tp_dtype dt = p->desc.dtype;
  int bad = tp_launch_poison(dt, d->dx, tp_linear_x_elems(p), g->main_stream) != 0;
  for (int i = 0; i < p->desc.n_weights; ++i) {
    bad |= tp_launch_poison(dt, d->y[i], tp_linear_y_elems(p), g->main_stream) != 0;
    bad |= tp_launch_poison(dt, d->dw[i], tp_linear_w_elems(p), g->main_stream) != 0;
  }
  tp_linear_tensors t = linear_tensors(p, d);
  for (int it = 0; it < 2 && !bad; ++it)
    if (tp_linear_step(g, p, &t) != TP_OK) {
      fprintf(stderr, "rank %d: step: %s\n", g->rank, tp_last_error());
      return 1;
    }
  return bad || cudaStreamSynchronize(g->main_stream) != cudaSuccess;
}

/* ||a - b|| / ||b|| over n host elements of dt. */
static double rel_distance(tp_dtype dt, const void *a, const void *b, size_t n) {
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = gpu_host_value(dt, a, i), y = gpu_host_value(dt, b, i);
    d2 += (x - y) * (x - y);
    r2 += y * y;
  }
  return r2 > 0 ? sqrt(d2 / r2) : (d2 > 0 ? INFINITY : 0.0);
}

/* Beyond TP 2 a sum of ranks may be added in another order on windows (NCCL's symmetric
 * kernels): bf16 within max(1e-2, 2·2^-8·sqrt(W)) (bench/stats/numerics.h at depth 1), fp32
 * within 1e-6, norm-wise. At TP 1 and 2 a sum rounds one addition either way: bit for bit. */
static double summed_tolerance(tp_dtype dt, int world) {
  if (dt != TP_BF16) return 1e-6;
  return fmax(1e-2, 2.0 * 0x1p-8 * sqrt((double)world));
}

/* One output of the window run against plain stock's: bit for bit, or (a sum over more than
 * two ranks) within summed_tolerance. The verdict printed per rank. */
static int output_matches(const tp_group *g, const tp_linear_plan *p, const char *what, int summed,
                          const void *plain, const void *win, size_t elems) {
  const size_t bytes = bytes_of(p, elems);
  char *ha = malloc(bytes), *hb = malloc(bytes);
  const int copied = ha && hb &&
                     cudaMemcpy(ha, plain, bytes, cudaMemcpyDeviceToHost) == cudaSuccess &&
                     cudaMemcpy(hb, win, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
  const int same = copied && memcmp(ha, hb, bytes) == 0;
  const int tolerant = summed && g->world > 2;
  const double rel = copied ? rel_distance(p->desc.dtype, hb, ha, elems) : INFINITY;
  const double tol = summed_tolerance(p->desc.dtype, g->world);
  const int ok = same || (tolerant && copied && rel <= tol);
  size_t first = 0;
  while (!same && copied && first < bytes && ha[first] == hb[first]) first++;
  if (!same)
    fprintf(stderr,
            "rank %d: TP %d %s: window and plain differ (first at byte %zu of %zu), ||diff||/||y|| "
            "%.3g; %s: %s\n",
            g->rank, g->world, what, first, bytes, rel,
            tolerant ? "a sum over ranks, tolerance" : "bit for bit required",
            ok ? "within it" : "FAIL");
  free(ha);
  free(hb);
  return ok;
}

/* y, dx and dw of the window run against plain stock's. Summed over ranks: the gather
 * side's dx and the scatter side's y (reduce-scattered, or all-reduced with sp off). */
static int compare_outputs(const tp_group *g, const tp_linear_plan *p, const tensors *plain,
                           const tensors *win) {
  const int gather = p->desc.op != TP_OP_LINEAR_RS;
  int failures = !output_matches(g, p, "dx", gather, plain->dx, win->dx, tp_linear_x_elems(p));
  for (int i = 0; i < p->desc.n_weights; ++i) {
    failures += !output_matches(g, p, "y", !gather, plain->y[i], win->y[i], tp_linear_y_elems(p));
    failures += !output_matches(g, p, "dw", 0, plain->dw[i], win->dw[i], tp_linear_w_elems(p));
  }
  return failures;
}

/* Whether NCCL's runtime should give this communicator symmetric windows. */
static int windows_expected(const tp_group *g) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return -1;
  return g->world > 1 || version >= NCCL_ONE_RANK_WINDOWS;
}

/* The window plan refused: exactly as NCCL's sources say, with NCCL's reason. */
static int check_refusal(const tp_group *g, tp_rc rc, const char *why) {
  int version = 0;
  (void)ncclGetVersion(&version);
  const int ok = rc == TP_EREJECT && strstr(why, "nccl-window") &&
                 strstr(why, "does not support symmetric memory") && g->world == 1 &&
                 version < NCCL_ONE_RANK_WINDOWS;
  printf("rank %d: TP %d, NCCL %d: the window plan was refused (%s): %s\n", g->rank, g->world,
         version, why, ok ? "as NCCL <= 2.28.3 refuses one rank: ok" : "FAIL");
  return !ok;
}

/* A window plan fed tensors outside every window fails its first pass that
 * has a collective (the forward, or without sequence parallelism on the
 * gather side the backward), before that pass enqueues anything. */
static int check_outside_window(tp_group *g, const tp_linear_plan *p, const tensors *plain) {
  tp_linear_tensors t = linear_tensors(p, plain);
  tp_rc rc = tp_linear_step(g, p, &t);
  if (cudaStreamSynchronize(g->main_stream) != cudaSuccess) return 1;
  const int ok = rc == TP_EINTERNAL && strstr(tp_last_error(), "not in an NCCL symmetric window");
  if (!ok)
    fprintf(stderr, "rank %d: plain buffers on a window plan: %s (%s)\n", g->rank,
            rc == TP_OK ? "accepted" : tp_rc_name(rc), tp_last_error());
  return !ok;
}

/* Plain stock, then stock on windows, and the collective alone on windows. */
static int run_case(tp_group *g, tp_op op, tp_dtype dt, int sp, int save, int *ran) {
  const tp_linear_desc desc = desc_of(op, dt, sp, save);
  tp_linear_plan plain_plan, win_plan, comm_plan;
  if (tp_linear_plan_make(g, &desc, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &plain_plan) != TP_OK ||
      tp_linear_plan_make(g, &desc, TP_BACKEND_STOCK, TP_SCHED_NCCL_WINDOW, 0, &win_plan) !=
          TP_OK ||
      tp_linear_plan_make(g, &desc, TP_BACKEND_COMM_ONLY, TP_SCHED_NCCL_WINDOW, 0, &comm_plan) !=
          TP_OK) {
    fprintf(stderr, "rank %d: plan: %s\n", g->rank, tp_last_error());
    return 1;
  }
  if (win_plan.schedule != TP_SCHED_NCCL_WINDOW || plain_plan.schedule != TP_SCHED_NCCL) {
    fprintf(stderr, "rank %d: schedules %s / %s\n", g->rank, tp_schedule_name(win_plan.schedule),
            tp_schedule_name(plain_plan.schedule));
    return 1;
  }
  tensors plain, win;
  memset(&win, 0, sizeof win);
  void *window = NULL;
  int failures = alloc_plain(g, &plain_plan, &plain);
  if (!failures && tp_linear_prepare(g, &plain_plan) != TP_OK) failures++;
  if (!failures) failures += step(g, &plain_plan, &plain);
  tp_rc rc = failures ? TP_OK : tp_linear_prepare(g, &win_plan);
  if (!failures && rc != TP_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", tp_last_message());
    failures += windows_expected(g) == 1 ? (fprintf(stderr, "rank %d: %s\n", g->rank, why), 1)
                                         : check_refusal(g, rc, why);
    free_plain(&plain);
    return failures;
  }
  if (!failures && windows_expected(g) != 1) {
    fprintf(stderr,
            "rank %d: NCCL registered windows on one rank, older than 2.28.7: the test's "
            "reading of NCCL is wrong\n",
            g->rank);
    failures++;
  }
  if (!failures) failures += alloc_window(g, &win_plan, &plain, &win, &window);
  if (!failures) failures += step(g, &win_plan, &win);
  if (!failures) failures += compare_outputs(g, &win_plan, &plain, &win);
  if (!failures) failures += check_outside_window(g, &win_plan, &plain);
  /* the collective alone on windows, on the window run's tensors */
  if (!failures && tp_linear_prepare(g, &comm_plan) != TP_OK) failures++;
  if (!failures) {
    tp_linear_tensors t = linear_tensors(&comm_plan, &win);
    if (tp_linear_step(g, &comm_plan, &t) != TP_OK ||
        cudaStreamSynchronize(g->main_stream) != cudaSuccess) {
      fprintf(stderr, "rank %d: collective alone on windows: %s\n", g->rank, tp_last_error());
      failures++;
    }
  }
  printf("rank %d: TP %d %s %s sp=%d save=%d: stock on NCCL windows %s plain stock\n", g->rank,
         g->world, tp_op_name(op), tp_dtype_name(dt), sp, save,
         failures       ? "DIFFERS FROM"
         : g->world > 2 ? "matches (sums over ranks within the tolerance, the rest bit for bit)"
                        : "bit for bit equal to");
  *ran += !failures;
  for (int i = 0; i < MAXW; ++i) cudaFree(win.dw[i]);
  tp_window_free(g, window);
  free_plain(&plain);
  return failures;
}

/* The window scratch only grows: a smaller request keeps it, a larger one replaces it. */
static int check_scratch_growth(tp_group *g) {
  if (g->window_support < 0) return 0; /* refused: nothing was allocated */
  void *a = NULL, *b = NULL;
  const size_t have = g->window_scratch_bytes;
  if (tp_window_scratch(g, 4096, &a) != TP_OK) return 1;
  int failures = g->window_scratch_bytes < have || a != g->window_scratch;
  if (tp_window_scratch(g, have + (8u << 20), &b) != TP_OK) return failures + 1;
  failures += g->window_scratch_bytes < have + (8u << 20);
  failures += !tp_window_covers(g, b, have + (8u << 20));
  if (failures) fprintf(stderr, "rank %d: window scratch growth wrong\n", g->rank);
  return failures;
}

static int body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  static const tp_op ops[] = {TP_OP_AG_LINEAR, TP_OP_AG_LINEAR_MULTI, TP_OP_LINEAR_RS};
  static const tp_dtype dts[] = {TP_BF16, TP_FP32};
  int failures = 0, ran = 0, cases = 0;
  for (int o = 0; o < 3; ++o)
    for (int d = 0; d < 2; ++d)
      for (int sp = 1; sp >= 0; --sp)
        for (int save = 0; save <= (sp && ops[o] != TP_OP_LINEAR_RS); ++save) {
          failures += run_case(g, ops[o], dts[d], sp, save, &ran);
          cases++;
        }
  failures += check_scratch_growth(g);
  printf("rank %d: TP %d: %d of %d cases ran on windows and matched; %d failure(s)\n", g->rank,
         g->world, ran, cases, failures);
  fflush(stdout);
  return failures ? 1 : 0;
}

static void test_tp1(void **state) {
  assert_int_equal(gpu_run_group(gpu_case_degree(state), body, NULL), 0);
}

/* TP 2, 4, 8 on real GPUs: ranks sharing one (each an NCCL host of its own) have no windows. */
static void test_tp(void **state) {
  const int world = gpu_case_degree(state);
  char what[64];
  snprintf(what, sizeof what, "stock on NCCL windows at TP %d", world);
  if (gpu_shared_lacks_windows(what)) gpu_skip_case(state, "no NCCL windows on a shared GPU");
  printf("TP %d: tokens %d (%d rows per rank), K %d, N %d (%d per rank)\n", world, TOKENS,
         TOKENS / world, D_IN, D_OUT, D_OUT / world);
  assert_int_equal(gpu_run_group(world, body, NULL), 0);
}

int main(int argc, char **argv) {
  const gpu_tp_test tests[] = {
      {"stock_window_tp1", test_tp1, 1, 1},
      {"stock_window", test_tp, 2, GPU_MAX_DEGREE},
  };
  return gpu_run_tp_tests("gpu_stock_window", tests, sizeof tests / sizeof tests[0], argc, argv);
}
