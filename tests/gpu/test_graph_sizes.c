/*
 * test_graph_sizes.c — GPU test of several CUDA graph sizes on one workspace
 * (`tpbench run --axis graph=mixed`, the inference situation): the
 * transformer block (bench/gpu/block.h), forward and backward, bf16, at three
 * token counts on one TP group, as the harness runs a mix
 * (bench/gpu/harness.c, phase 2 and the mixed windows):
 *
 *   1. each size's plan and tensors, only the smallest prepared; each size's
 *      eager step (outputs poisoned first, kept on the host) grows the
 *      symmetric workspace (dist_gemm) or the private scratch (stock) to what
 *      it asks, so after the three the buffers hold the largest size's need;
 *   2. the group frozen (tp_group_freeze) and one graph captured per size:
 *      no capture grows anything (sizes and growth count unchanged);
 *   3. the outputs poisoned, the graphs replayed in a seeded mixed order
 *      (every size several times, interleaved): each size's outputs must be
 *      bit-identical to its eager step's — a graph writing another size's
 *      tensors leaves poison, one reading a workspace another size left
 *      behind differs;
 *   4. an eager step within the frozen sizes still runs (the harness's
 *      numerics step does that with the graphs alive) and gives the same bits;
 *   5. a fourth, larger size never warmed: its capture must be refused with
 *      TP_EREJECT and the reason (the buffer, "while frozen"), leave no stream
 *      capturing, and leave the other graphs replaying the same bits; once
 *      the graphs are destroyed and the group thawed, its eager step runs.
 *
 * Two tests, each once per TP degree (gpu_harness.h: cases NAME/tpN, `--tp
 * LIST`, a degree above the rank slots reported skipped): stock at 1, 2, 4
 * and 8; dist_gemm (ce: at these small shapes auto would take the stock
 * path) at 2, 4 and 8. Each check prints a line ending in ok or FAIL. Exit
 * 77 (skipped) without a GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/gpu/block.h"
#include "bench/gpu/graph.h"
#include "kernels/tp_device.h"
#include "tests/gpu/gpu_harness.h"

/* Shapes of test_blocks.c's model (GQA, TP up to 8); the sizes are sequence lengths at batch 1. */
enum { DIM = 128, HEADS = 16, KV_HEADS = 8, HD = 16, FFN = 384 };
enum { N_SIZES = 3, REPLAYS_EACH = 4, MAX_OUT = TP_BLOCK_MAX_OUTPUTS };
static const int64_t SEQS[N_SIZES] = {64, 128, 256};
/* The first never-warmed size tried; doubled until its plan needs more of
 * the frozen buffer than the group holds (the symmetric heap grows in 2 MiB
 * granules, which the small sizes may not fill). */
static const int64_t UNWARMED_SEQ = 512, UNWARMED_SEQ_MOST = 65536;

/* One size: its plan, tensors, graph and the eager step's outputs on the host. */
typedef struct size_run {
  int64_t seq;
  tp_block_plan plan;
  tp_block_tensors t;
  int have_t;
  cudaGraphExec_t exec;
  int n_out;
  void *eager[MAX_OUT];
} size_run;

typedef struct step_ctx {
  tp_group *g;
  const tp_block_plan *p;
  tp_block_tensors *t;
} step_ctx;

static tp_rc step_fn(void *arg) {
  step_ctx *s = arg;
  return tp_block_step(s->g, s->p, s->t);
}

static tp_block_shape shape_of(int64_t seq) {
  tp_block_shape s = {.layer = TP_LAYER_BLOCK,
                      .dtype = TP_BF16,
                      .batch = 1,
                      .seq = seq,
                      .dim = DIM,
                      .n_heads = HEADS,
                      .n_kv_heads = KV_HEADS,
                      .head_dim = HD,
                      .ffn_hidden = FFN,
                      .sp = 1,
                      .backward = 1};
  return s;
}

static int report(int rank, const char *what, int ok) {
  printf("rank %d: %s: %s\n", rank, what, ok ? "ok" : "FAIL");
  fflush(stdout);
  return !ok;
}

/* The plan for backend and the tensors (allocated for the stock plan, as
 * `run` does for every configuration of a case). */
static int size_make(tp_group *g, tp_backend backend, int64_t seq, uint64_t seed, size_run *s) {
  memset(s, 0, sizeof *s);
  s->seq = seq;
  tp_block_shape shape = shape_of(seq);
  tp_block_plan sizes;
  tp_rc rc = tp_block_plan_make(
      g, &shape, backend, backend == TP_BACKEND_DIST ? TP_SCHED_CE : TP_SCHED_AUTO, 0, &s->plan);
  if (rc == TP_OK) rc = tp_block_plan_make(g, &shape, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &sizes);
  if (rc == TP_OK) rc = tp_block_alloc(g, &sizes, seed, &s->t);
  s->have_t = rc == TP_OK;
  if (rc != TP_OK)
    printf("rank %d: seq %lld: %s: FAIL\n", g->rank, (long long)seq, tp_last_error());
  return rc != TP_OK;
}

static void size_free(size_run *s) {
  for (int i = 0; i < s->n_out; ++i) free(s->eager[i]);
  tp_graph_destroy(s->exec);
  if (s->have_t) tp_block_free(&s->t);
  memset(s, 0, sizeof *s);
}

static int poison(tp_group *g, size_run *s) {
  tp_block_output out[MAX_OUT];
  int n = tp_block_outputs(&s->plan, &s->t, out), bad = 0;
  for (int i = 0; i < n; ++i)
    bad |= tp_launch_poison(TP_BF16, out[i].ptr, out[i].count, g->main_stream) != cudaSuccess;
  return bad;
}

/* The size's outputs now, on the host (into s->eager when keep, else compared with it). */
static int outputs_now(tp_group *g, size_run *s, const char *what, int keep) {
  tp_block_output out[MAX_OUT];
  const int n = tp_block_outputs(&s->plan, &s->t, out);
  if (cudaStreamSynchronize(g->main_stream) != cudaSuccess)
    return report(g->rank, "synchronize", 0);
  int failures = 0;
  size_t differ = 0, total = 0;
  for (int i = 0; i < n; ++i) {
    const size_t bytes = out[i].count * 2;
    void *host = malloc(bytes);
    if (!host || cudaMemcpy(host, out[i].ptr, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
      free(host);
      return report(g->rank, "download", 0);
    }
    if (keep) {
      s->eager[i] = host;
      continue;
    }
    const uint16_t *a = host, *b = s->eager[i];
    size_t nonfinite = 0, here = 0;
    for (size_t k = 0; k < out[i].count; ++k) {
      here += a[k] != b[k];
      nonfinite += (a[k] & 0x7f80u) == 0x7f80u; /* bf16 exponent all ones: inf or NaN */
    }
    if (here || nonfinite) {
      printf("rank %d: seq %lld %s: %s: %zu of %zu elements differ from the eager step, %zu "
             "non-finite\n",
             g->rank, (long long)s->seq, what, out[i].name, here, out[i].count, nonfinite);
      failures++;
    }
    differ += here;
    total += out[i].count;
    free(host);
  }
  if (keep) {
    s->n_out = n;
    return 0;
  }
  char line[160];
  snprintf(line, sizeof line, "seq %lld %s: %d outputs, %zu elements, %zu differ from eager",
           (long long)s->seq, what, n, total, differ);
  return report(g->rank, line, failures == 0 && n == s->n_out);
}

/* The group's buffers that graphs point into. */
typedef struct buffers {
  size_t symm, scratch;
  int grown;
} buffers;

static buffers buffers_now(const tp_group *g) {
  buffers b = {tp_symm_size(g->symm), g->scratch_bytes, tp_symm_grow_count(g->symm)};
  return b;
}

/* 1. Only the smallest size prepared: the eager steps grow the rest. */
static int warm_eagerly(tp_group *g, size_run *s) {
  int failures =
      report(g->rank, "prepare the smallest size", tp_block_prepare(g, &s[0].plan) == TP_OK);
  const buffers before = buffers_now(g);
  size_t need_symm = 0, need_scratch = 0;
  for (int k = 0; !failures && k < N_SIZES; ++k) {
    if (s[k].plan.symm_bytes > need_symm) need_symm = s[k].plan.symm_bytes;
    if (s[k].plan.scratch_bytes > need_scratch) need_scratch = s[k].plan.scratch_bytes;
    failures += poison(g, &s[k]);
    tp_rc rc = tp_block_step(g, &s[k].plan, &s[k].t);
    if (rc != TP_OK) printf("rank %d: eager step: %s\n", g->rank, tp_last_error());
    failures += rc != TP_OK || outputs_now(g, &s[k], "eager", 1);
  }
  const buffers after = buffers_now(g);
  const int dist = s[0].plan.backend == TP_BACKEND_DIST;
  char line[200];
  /* the workspace grows in granules (the symmetric heap's are 2 MiB): where
   * the smallest size's already covers the largest, nothing needs to grow */
  const size_t need = dist ? need_symm : need_scratch, was = dist ? before.symm : before.scratch,
               now = dist ? after.symm : after.scratch;
  snprintf(line, sizeof line,
           "eager warm-up %s the %s to the largest size's %zu bytes (from %zu, now %zu)",
           was >= need ? "found" : "grew", dist ? "symmetric workspace" : "private scratch", need,
           was, now);
  const int covered = now >= need && (was >= need || now > was);
  return failures + report(g->rank, line, !failures && covered);
}

/* 2. Frozen, one graph per size, nothing grown. */
static int capture_sizes(tp_group *g, size_run *s) {
  tp_group_freeze(g, 1);
  const buffers before = buffers_now(g);
  int failures = 0;
  for (int k = 0; k < N_SIZES; ++k) {
    step_ctx sc = {g, &s[k].plan, &s[k].t};
    tp_rc rc = tp_graph_capture(g, step_fn, &sc, &s[k].exec);
    char line[200];
    snprintf(line, sizeof line, "seq %lld captured on the frozen workspace%s%s",
             (long long)s[k].seq, rc == TP_OK ? "" : ": ", rc == TP_OK ? "" : tp_last_error());
    failures += report(g->rank, line, rc == TP_OK);
  }
  const buffers after = buffers_now(g);
  failures += report(g->rank, "captures grew nothing, the group stays frozen",
                     after.symm == before.symm && after.scratch == before.scratch &&
                         after.grown == before.grown && g->frozen);
  return failures;
}

/* 3. Every size REPLAYS_EACH times in a seeded shuffle: interleaved. */
static int replay_mixed(tp_group *g, size_run *s) {
  int order[N_SIZES * REPLAYS_EACH];
  const int total = N_SIZES * REPLAYS_EACH;
  for (int i = 0; i < total; ++i) order[i] = i % N_SIZES;
  uint64_t st = 0x6d69786564ull; /* the same on every rank */
  for (int i = total - 1; i > 0; --i) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    const int j = (int)((st >> 33) % (uint64_t)(i + 1)), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  int failures = 0, switches = 0;
  for (int k = 0; k < N_SIZES; ++k) failures += poison(g, &s[k]);
  printf("rank %d: replay order (seq):", g->rank);
  for (int i = 0; i < total; ++i) {
    printf(" %lld", (long long)s[order[i]].seq);
    switches += i > 0 && order[i] != order[i - 1];
    failures += tp_graph_launch(g, s[order[i]].exec) != TP_OK;
  }
  printf("\n");
  failures += report(g->rank, "the replays interleave the sizes", switches >= total / 2);
  for (int k = 0; k < N_SIZES; ++k) failures += outputs_now(g, &s[k], "mixed replay", 0);
  return failures;
}

/* 4. An eager step within the frozen sizes, as the harness's numerics step runs one. */
static int eager_while_frozen(tp_group *g, size_run *s) {
  size_run *largest = &s[N_SIZES - 1];
  int failures = poison(g, largest);
  tp_rc rc = tp_block_step(g, &largest->plan, &largest->t);
  failures += report(g->rank, "an eager step within the frozen sizes runs", rc == TP_OK);
  return failures + (rc == TP_OK ? outputs_now(g, largest, "eager while frozen", 0) : 0);
}

/* The smallest size from UNWARMED_SEQ on (doubling) whose plan needs more
 * of the backend's frozen buffer than the group holds; 0 when none does. */
static int64_t unwarmed_seq(tp_group *g, tp_backend backend) {
  const buffers held = buffers_now(g);
  for (int64_t seq = UNWARMED_SEQ; seq <= UNWARMED_SEQ_MOST; seq *= 2) {
    tp_block_shape shape = shape_of(seq);
    tp_block_plan p;
    if (tp_block_plan_make(g, &shape, backend,
                           backend == TP_BACKEND_DIST ? TP_SCHED_CE : TP_SCHED_AUTO, 0,
                           &p) != TP_OK)
      return 0;
    const int more =
        backend == TP_BACKEND_DIST ? p.symm_bytes > held.symm : p.scratch_bytes > held.scratch;
    tp_block_release(&p);
    if (more) return seq;
  }
  return 0;
}

/* 5. A size larger than any warmed: its capture is refused with the reason. */
static int unwarmed_refused(tp_group *g, tp_backend backend, size_run *s) {
  size_run big;
  const int64_t seq = unwarmed_seq(g, backend);
  if (!seq) return report(g->rank, "a size that outgrows the frozen workspace", 0);
  if (size_make(g, backend, seq, 99, &big)) return 1;
  const buffers before = buffers_now(g);
  step_ctx sc = {g, &big.plan, &big.t};
  tp_rc rc = tp_graph_capture(g, step_fn, &sc, &big.exec);
  const char *msg = tp_last_error();
  const char *buffer = backend == TP_BACKEND_DIST ? "symmetric workspace" : "private scratch";
  char line[512];
  snprintf(line, sizeof line, "seq %lld (never warmed) capture refused: %s (%s)", (long long)seq,
           tp_rc_name(rc), msg);
  int failures = report(g->rank, line,
                        rc == TP_EREJECT && !big.exec && strstr(msg, "CUDA graph capture") &&
                            strstr(msg, buffer) && strstr(msg, "while frozen"));
  enum cudaStreamCaptureStatus a = cudaStreamCaptureStatusActive, b = a;
  const int clean = cudaStreamIsCapturing(g->main_stream, &a) == cudaSuccess &&
                    cudaStreamIsCapturing(g->comm_stream, &b) == cudaSuccess &&
                    a == cudaStreamCaptureStatusNone && b == cudaStreamCaptureStatusNone;
  failures += report(g->rank, "after the refusal no stream is capturing", clean);
  const buffers after = buffers_now(g);
  failures += report(g->rank, "the refusal grew nothing, the group stays frozen",
                     after.symm == before.symm && after.scratch == before.scratch &&
                         after.grown == before.grown && g->frozen);
  failures += poison(g, &s[0]);
  failures += tp_graph_launch(g, s[0].exec) != TP_OK;
  failures += outputs_now(g, &s[0], "replay after the refusal", 0);
  /* The graphs gone, the group may grow again. */
  for (int k = 0; k < N_SIZES; ++k) {
    tp_graph_destroy(s[k].exec);
    s[k].exec = NULL;
  }
  tp_group_freeze(g, 0);
  rc = tp_block_step(g, &big.plan, &big.t);
  if (rc == TP_OK) rc = cudaStreamSynchronize(g->main_stream) == cudaSuccess ? TP_OK : TP_ECUDA;
  failures += report(g->rank, "thawed, the larger size's eager step grows and runs", rc == TP_OK);
  size_free(&big);
  return failures;
}

static int body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  const tp_backend backend = *(const tp_backend *)ctx;
  printf("rank %d: %s at TP %d, sizes %lld, %lld, %lld tokens\n", g->rank, tp_backend_name(backend),
         g->world, (long long)SEQS[0], (long long)SEQS[1], (long long)SEQS[2]);
  size_run s[N_SIZES];
  memset(s, 0, sizeof s);
  int failures = 0;
  for (int k = 0; k < N_SIZES; ++k)
    failures += size_make(g, backend, SEQS[k], 70 + (uint64_t)k, &s[k]);
  if (!failures) failures += warm_eagerly(g, s);
  if (!failures) failures += capture_sizes(g, s);
  if (!failures) failures += replay_mixed(g, s);
  if (!failures) failures += eager_while_frozen(g, s);
  if (!failures) failures += unwarmed_refused(g, backend, s);
  for (int k = 0; k < N_SIZES; ++k) size_free(&s[k]);
  tp_group_freeze(g, 0);
  printf("rank %d: %d failure(s)\n", g->rank, failures);
  fflush(stdout);
  return failures ? 1 : 0;
}

static void run_backend(void **state, tp_backend backend) {
  const int world = gpu_case_degree(state);
  printf("TP %d: block dim %d, %d heads and %d KV heads of %d, FFN %d; sequences %lld, %lld, "
         "%lld at batch 1 (%lld, %lld, %lld rows per rank)\n",
         world, DIM, HEADS, KV_HEADS, HD, FFN, (long long)SEQS[0], (long long)SEQS[1],
         (long long)SEQS[2], (long long)SEQS[0] / world, (long long)SEQS[1] / world,
         (long long)SEQS[2] / world);
  assert_int_equal(gpu_run_group(world, body, &backend), 0);
}

static void test_graph_sizes_stock(void **state) { run_backend(state, TP_BACKEND_STOCK); }

/* dist_gemm (ce) needs a peer: TP 2 up. */
static void test_graph_sizes_dist_gemm(void **state) { run_backend(state, TP_BACKEND_DIST); }

int main(int argc, char **argv) {
  /* heads, KV heads, FFN and every size divide by 8 */
  const gpu_tp_test tests[] = {
      {"graph_sizes_stock", test_graph_sizes_stock, 1, GPU_MAX_DEGREE},
      {"graph_sizes_dist_gemm", test_graph_sizes_dist_gemm, 2, GPU_MAX_DEGREE},
  };
  return gpu_run_tp_tests("gpu_graph_sizes", tests, sizeof tests / sizeof tests[0], argc, argv);
}
