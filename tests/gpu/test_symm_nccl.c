/*
 * test_symm_nccl.c — GPU test of dist_gemm's second transport (symm=nccl,
 * kernels/tp_symm.h): the symmetric heap on NCCL windows beside the CUDA-IPC
 * one.
 *
 * TP 1 holds the heap to what the NCCL runtime in use says of one rank, by
 * its version (ncclGetVersion, not the headers: the lead may run this under
 * a newer libnccl through LD_LIBRARY_PATH). NCCL before 2.28.7 has no
 * symmetric memory on a communicator of one rank: the group must refuse the
 * heap with TP_EREJECT and NCCL's own text ("does not support symmetric
 * memory"), make none and hand back none (never the IPC heap instead). From
 * 2.28.7 on the heap must work at one rank: its own pointer through NCCL's
 * mapping (ncclGetPeerPointer) aliases the buffer ncclMemAlloc gave — a
 * kernel's write through either reads back through the other — across a
 * growth too; the signal pads take tpbench's barrier; a growth while frozen
 * is refused.
 *
 * TP 2, 4 and 8 (cases symm_nccl/tpN, gpu_harness.h; a degree above the
 * GPUs reported skipped, and every one on a shared GPU, where ranks that are
 * NCCL hosts of their own have no windows) run each
 * fused op — ag_linear, ag_linear_multi, linear_rs; bf16 and fp32; ce and
 * sm; the gathered input saved or gathered again — one training step
 * (forward, backward) over symm=ipc and over symm=nccl on the same inputs,
 * outputs poisoned first, and holds every output (y, dx, dw) of the NCCL
 * run to the IPC run's bit for bit: the same schedules over other mappings
 * of the same kind of memory (the same fused kernels, so the same sum
 * order at every degree); afterwards the NCCL heap maps every peer. Exit
 * 77 (skipped) without a GPU, or when every case was skipped.
 */
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
#include "tests/gpu/gpu_harness.h"

enum { TOKENS = 768, D_IN = 256, D_OUT = 384, MAXW = TP_MAX_WEIGHTS };

/* NCCL's version code that first gives a one-rank communicator symmetric
 * memory (as test_stock_window.c reads NCCL's sources). */
enum { NCCL_ONE_RANK_WINDOWS = 22807 };

static int nccl_version(void) {
  int version = 0;
  return ncclGetVersion(&version) == ncclSuccess ? version : -1;
}

/* ---- TP 1: the heap itself ------------------------------------------------------------ */

/* count bf16 values through `write_to`, read back through `read_from`, equal
 * to the same fill of a plain buffer. */
static int alias_holds(tp_group *g, void *write_to, const void *read_from, size_t count,
                       uint64_t seed, const char *how) {
  const size_t bytes = count * 2;
  void *ref = NULL;
  char *want = malloc(bytes), *got = malloc(bytes);
  int ok = want && got && cudaMalloc(&ref, bytes) == cudaSuccess;
  ok = ok && tp_launch_fill_random(TP_BF16, ref, count, seed, 1.0f, g->main_stream) == 0;
  ok = ok && tp_launch_fill_random(TP_BF16, write_to, count, seed, 1.0f, g->main_stream) == 0;
  ok = ok && cudaStreamSynchronize(g->main_stream) == cudaSuccess;
  ok = ok && cudaMemcpy(want, ref, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
  ok = ok && cudaMemcpy(got, read_from, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
  const int same = ok && memcmp(want, got, bytes) == 0;
  printf("rank %d: %zu values written %s: %s\n", g->rank, count, how,
         same ? "read back the same" : "DIFFER or failed");
  cudaFree(ref);
  free(want);
  free(got);
  return !same;
}

/* Both directions over the whole current workspace. */
static int check_aliases(tp_group *g, const tp_symm *h, uint64_t seed) {
  void *own = tp_symm_ptr(h, g->rank), *mapped = tp_symm_mapped_ptr(h, g->rank);
  if (!own || !mapped) {
    fprintf(stderr, "rank %d: no own pointer (%p) or mapped pointer (%p)\n", g->rank, own, mapped);
    return 1;
  }
  const size_t count = tp_symm_size(h) / 2;
  int failures = alias_holds(g, mapped, own, count, seed,
                             "by a kernel through NCCL's pointer, read through ncclMemAlloc's");
  failures += alias_holds(g, own, mapped, count, seed + 1,
                          "by a kernel through ncclMemAlloc's pointer, read through NCCL's");
  return failures;
}

static int check_refused(tp_group *g, tp_rc rc, const char *why, tp_symm *h) {
  const int ok = rc == TP_EREJECT && h == NULL && !tp_group_symm_of(g, TP_SYMM_NCCL) &&
                 strstr(why, "symm=nccl") && strstr(why, "does not support symmetric memory");
  printf("rank %d: NCCL %d at one rank: the heap on NCCL windows refused (%s): %s\n", g->rank,
         nccl_version(), why, ok ? "as NCCL before 2.28.7 refuses one rank: ok" : "FAIL");
  return !ok;
}

static int heap_works(tp_group *g, tp_symm *h) {
  int failures = tp_symm_transport_of(h) != TP_SYMM_NCCL;
  failures += h == g->symm; /* never the IPC heap under the NCCL name */
  if (tp_symm_reserve(h, 1u << 20) != TP_OK) {
    fprintf(stderr, "rank %d: reserve: %s\n", g->rank, tp_last_error());
    return failures + 1;
  }
  failures += tp_symm_size(h) < (1u << 20);
  failures += check_aliases(g, h, 7);
  const int grown = tp_symm_grow_count(h);
  if (tp_symm_reserve(h, 5u << 20) != TP_OK) {
    fprintf(stderr, "rank %d: growth: %s\n", g->rank, tp_last_error());
    return failures + 1;
  }
  failures += tp_symm_grow_count(h) != grown + 1 || tp_symm_size(h) < (5u << 20);
  failures += check_aliases(g, h, 11);
  /* tpbench's barrier over the pads in the window */
  if (tp_launch_barrier(tp_symm_pads(h), g->rank, g->world, g->wait_timeout_ns, g->main_stream) !=
          cudaSuccess ||
      cudaStreamSynchronize(g->main_stream) != cudaSuccess) {
    fprintf(stderr, "rank %d: barrier on the NCCL pads failed\n", g->rank);
    failures++;
  }
  tp_group_freeze(g, 1);
  const tp_rc frozen = tp_symm_reserve(h, 16u << 20);
  tp_group_freeze(g, 0);
  failures += frozen != TP_EREJECT;
  return failures;
}

static int body_tp1(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  tp_symm *h = NULL;
  const tp_rc rc = tp_group_symm(g, TP_SYMM_NCCL, &h);
  char why[512];
  snprintf(why, sizeof why, "%s", rc == TP_OK ? "" : tp_last_message());
  int failures = 0;
  if (nccl_version() < NCCL_ONE_RANK_WINDOWS) {
    failures += rc == TP_OK ? (fprintf(stderr,
                                       "rank %d: NCCL %d made windows at one rank, older than "
                                       "2.28.7: the test's reading of NCCL is wrong\n",
                                       g->rank, nccl_version()),
                               1)
                            : check_refused(g, rc, why, h);
  } else if (rc != TP_OK) {
    fprintf(stderr, "rank %d: NCCL %d refused the heap at one rank: %s\n", g->rank, nccl_version(),
            why);
    failures++;
  } else {
    failures += heap_works(g, h);
  }
  printf("rank %d: TP 1, NCCL %d: %d failure(s)\n", g->rank, nccl_version(), failures);
  fflush(stdout);
  return failures ? 1 : 0;
}

/* ---- TP 2, 4, 8: every fused op over both transports ---------------------------------- */

typedef struct tensors {
  void *x, *w[MAXW], *y[MAXW], *dy[MAXW], *dx, *dw[MAXW], *saved;
} tensors;

static size_t bytes_of(const tp_linear_plan *p, size_t elems) {
  return elems * tp_dtype_bytes(p->desc.dtype);
}

static int alloc_random(void **buf, const tp_linear_plan *p, size_t n, uint64_t seed, float scale,
                        cudaStream_t s) {
  return cudaMalloc(buf, bytes_of(p, n)) != cudaSuccess ||
         tp_launch_fill_random(p->desc.dtype, *buf, n, seed, scale, s) != 0;
}

/* Inputs seeded per rank: two calls give the same inputs, outputs of their own. */
static int alloc_tensors(tp_group *g, const tp_linear_plan *p, tensors *t) {
  memset(t, 0, sizeof *t);
  const size_t nx = tp_linear_x_elems(p), ny = tp_linear_y_elems(p), nw = tp_linear_w_elems(p);
  const uint64_t seed = 1000u * (uint64_t)(g->rank + 1);
  cudaStream_t s = g->main_stream;
  int bad = alloc_random(&t->x, p, nx, seed + 1, 1.0f, s);
  bad |= cudaMalloc(&t->dx, bytes_of(p, nx)) != cudaSuccess;
  if (p->saved_bytes) bad |= cudaMalloc(&t->saved, p->saved_bytes) != cudaSuccess;
  for (int i = 0; i < p->desc.n_weights && !bad; ++i) {
    bad |= alloc_random(&t->w[i], p, nw, seed + 10 + (uint64_t)i, 0.0625f, s);
    bad |= alloc_random(&t->dy[i], p, ny, seed + 20 + (uint64_t)i, 1.0f, s);
    bad |= cudaMalloc(&t->y[i], bytes_of(p, ny)) != cudaSuccess;
    bad |= cudaMalloc(&t->dw[i], bytes_of(p, nw)) != cudaSuccess;
  }
  return bad || cudaStreamSynchronize(s) != cudaSuccess;
}

static void free_tensors(tensors *t) {
  cudaFree(t->x);
  cudaFree(t->dx);
  cudaFree(t->saved);
  for (int i = 0; i < MAXW; ++i) {
    cudaFree(t->w[i]);
    cudaFree(t->y[i]);
    cudaFree(t->dy[i]);
    cudaFree(t->dw[i]);
  }
  memset(t, 0, sizeof *t);
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

/* Prepares the plan, poisons the outputs, runs one training step. */
static int step(tp_group *g, const tp_linear_plan *p, const tensors *d) {
  if (tp_linear_prepare(g, p) != TP_OK) {
    fprintf(stderr, "rank %d: prepare symm=%s: %s\n", g->rank, tp_symm_transport_name(p->desc.symm),
            tp_last_error());
    return 1;
  }
  const tp_dtype dt = p->desc.dtype;
  int bad = tp_launch_poison(dt, d->dx, tp_linear_x_elems(p), g->main_stream) != 0;
  for (int i = 0; i < p->desc.n_weights; ++i) {
    bad |= tp_launch_poison(dt, d->y[i], tp_linear_y_elems(p), g->main_stream) != 0;
    bad |= tp_launch_poison(dt, d->dw[i], tp_linear_w_elems(p), g->main_stream) != 0;
  }
  tp_linear_tensors t = linear_tensors(p, d);
  if (!bad && tp_linear_step(g, p, &t) != TP_OK) {
    fprintf(stderr, "rank %d: step symm=%s: %s\n", g->rank, tp_symm_transport_name(p->desc.symm),
            tp_last_error());
    return 1;
  }
  return bad || cudaStreamSynchronize(g->main_stream) != cudaSuccess;
}

static int same_bytes(const tp_group *g, const char *what, const void *a, const void *b,
                      size_t bytes) {
  char *ha = malloc(bytes), *hb = malloc(bytes);
  const int copied = ha && hb && cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost) == cudaSuccess &&
                     cudaMemcpy(hb, b, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
  const int same = copied && memcmp(ha, hb, bytes) == 0;
  size_t first = 0;
  while (!same && copied && first < bytes && ha[first] == hb[first]) first++;
  if (!same)
    fprintf(stderr, "rank %d: %s: symm=nccl and symm=ipc differ (first at byte %zu of %zu)\n",
            g->rank, what, first, bytes);
  free(ha);
  free(hb);
  return same;
}

static int compare_outputs(const tp_group *g, const tp_linear_plan *p, const tensors *ipc,
                           const tensors *nccl) {
  int failures = !same_bytes(g, "dx", ipc->dx, nccl->dx, bytes_of(p, tp_linear_x_elems(p)));
  for (int i = 0; i < p->desc.n_weights; ++i) {
    failures += !same_bytes(g, "y", ipc->y[i], nccl->y[i], bytes_of(p, tp_linear_y_elems(p)));
    failures += !same_bytes(g, "dw", ipc->dw[i], nccl->dw[i], bytes_of(p, tp_linear_w_elems(p)));
  }
  return failures;
}

static tp_linear_desc desc_of(tp_op op, tp_dtype dt, int save, tp_symm_transport symm) {
  const int gather = op != TP_OP_LINEAR_RS;
  return (tp_linear_desc){.op = op,
                          .dtype = dt,
                          .tokens = TOKENS,
                          .in_features = gather ? D_IN : D_OUT,
                          .out_features = gather ? D_OUT : D_IN,
                          .n_weights = op == TP_OP_AG_LINEAR_MULTI ? 2 : 1,
                          .backward = 1,
                          .sp = 1,
                          .save_gathered = save,
                          .symm = symm};
}

/* Both plans fused as asked, the NCCL one naming its transport. */
static int plans(tp_group *g, tp_op op, tp_dtype dt, int save, tp_schedule s, tp_linear_plan *ipc,
                 tp_linear_plan *nccl) {
  const tp_linear_desc di = desc_of(op, dt, save, TP_SYMM_IPC);
  const tp_linear_desc dn = desc_of(op, dt, save, TP_SYMM_NCCL);
  if (tp_linear_plan_make(g, &di, TP_BACKEND_DIST, s, 0, ipc) != TP_OK ||
      tp_linear_plan_make(g, &dn, TP_BACKEND_DIST, s, 0, nccl) != TP_OK) {
    fprintf(stderr, "rank %d: plan: %s\n", g->rank, tp_last_error());
    return 1;
  }
  const int ok = ipc->schedule == s && nccl->schedule == s && strstr(nccl->reason, "symm=nccl") &&
                 strstr(ipc->reason, "symm=ipc");
  if (!ok)
    fprintf(stderr, "rank %d: plans %s / %s: %s | %s\n", g->rank, tp_schedule_name(ipc->schedule),
            tp_schedule_name(nccl->schedule), ipc->reason, nccl->reason);
  return !ok;
}

static int run_case(tp_group *g, tp_op op, tp_dtype dt, int save, tp_schedule s, int *ran) {
  tp_linear_plan ipc_plan, nccl_plan;
  if (plans(g, op, dt, save, s, &ipc_plan, &nccl_plan)) return 1;
  tensors ipc, nccl;
  int failures = alloc_tensors(g, &ipc_plan, &ipc);
  failures += alloc_tensors(g, &nccl_plan, &nccl);
  if (!failures) failures += step(g, &ipc_plan, &ipc);
  if (!failures) failures += step(g, &nccl_plan, &nccl);
  if (!failures) failures += compare_outputs(g, &nccl_plan, &ipc, &nccl);
  printf("rank %d: TP %d %s %s %s save=%d: symm=nccl %s symm=ipc\n", g->rank, g->world,
         tp_op_name(op), tp_dtype_name(dt), tp_schedule_name(s), save,
         failures ? "DIFFERS FROM" : "bit for bit equal to");
  *ran += !failures;
  free_tensors(&ipc);
  free_tensors(&nccl);
  return failures;
}

static int body_tp(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  static const tp_op ops[] = {TP_OP_AG_LINEAR, TP_OP_AG_LINEAR_MULTI, TP_OP_LINEAR_RS};
  static const tp_dtype dts[] = {TP_BF16, TP_FP32};
  static const tp_schedule scheds[] = {TP_SCHED_CE, TP_SCHED_SM};
  int failures = 0, ran = 0, cases = 0;
  for (int o = 0; o < 3; ++o)
    for (int d = 0; d < 2; ++d)
      for (int s = 0; s < 2; ++s)
        for (int save = 0; save <= (ops[o] != TP_OP_LINEAR_RS); ++save) {
          failures += run_case(g, ops[o], dts[d], save, scheds[s], &ran);
          cases++;
        }
  const tp_symm *h = tp_group_symm_of(g, TP_SYMM_NCCL);
  for (int peer = 0; peer < g->world; ++peer)
    if (!h || tp_symm_transport_of(h) != TP_SYMM_NCCL || !tp_symm_ptr(h, peer)) {
      fprintf(stderr, "rank %d: no NCCL heap with a mapping of rank %d after the runs\n", g->rank,
              peer);
      failures++;
    }
  printf("rank %d: TP %d, NCCL %d: %d of %d cases matched symm=ipc; %d failure(s)\n", g->rank,
         g->world, nccl_version(), ran, cases, failures);
  fflush(stdout);
  return failures ? 1 : 0;
}

static void test_tp1(void **state) {
  assert_int_equal(gpu_run_group(gpu_case_degree(state), body_tp1, NULL), 0);
}

/* TP 2, 4, 8 on real GPUs: ranks sharing one (each an NCCL host of its own) have no windows. */
static void test_tp(void **state) {
  const int world = gpu_case_degree(state);
  char what[64];
  snprintf(what, sizeof what, "dist_gemm over symm=nccl at TP %d", world);
  if (gpu_shared_lacks_windows(what)) gpu_skip_case(state, "no NCCL windows on a shared GPU");
  printf("TP %d: tokens %d (%d rows per rank), K %d, N %d (%d per rank)\n", world, TOKENS,
         TOKENS / world, D_IN, D_OUT, D_OUT / world);
  assert_int_equal(gpu_run_group(world, body_tp, NULL), 0);
}

int main(int argc, char **argv) {
  const gpu_tp_test tests[] = {
      {"symm_nccl_tp1", test_tp1, 1, 1},
      {"symm_nccl", test_tp, 2, GPU_MAX_DEGREE},
  };
  return gpu_run_tp_tests("gpu_symm_nccl", tests, sizeof tests / sizeof tests[0], argc, argv);
}
