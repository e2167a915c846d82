/*
 * test_fsdp.c — GPU test of FSDP's collectives beside a block's step
 * (bench/gpu/fsdp.h: `run --axis dp=2` at TP 1, `--axis fsdp_traffic=on`).
 *
 * For each layer (attention, FFN, block) and pass (fwd, fwd+bwd), stock bf16
 * at the small GQA shape of test_blocks.c:
 *   1. a step without FSDP; its outputs kept on the host;
 *   2. tp_fsdp_prepare, the outputs poisoned, a step with the collectives
 *      beside it (tp_fsdp_step): every output must equal step 1's bit for
 *      bit; after the main stream drains, the side stream must be idle (the
 *      step joined it); the gathered weights must equal the weights exactly
 *      (the whole buffer in mesh mode, this rank's slice in traffic mode:
 *      the buffer was poisoned, so a gather that wrote nothing fails); with a
 *      backward the reduce-scattered shard must equal an NCCL all-reduce's
 *      slice (bit for bit at 2 ranks or fewer; beyond, the two may sum in
 *      other orders: within 1e-2 norm-wise, as `run` judges it); a second
 *      step likewise;
 *   3. planted faults: one element of a gradient shard overwritten after the
 *      step must fail the reduce-scatter check (2 ranks or fewer, where it
 *      is exact); the shard less this rank's own partial (a reduce-scatter
 *      that dropped one rank's contribution) must fail it at every rank
 *      count; shards cut one element late (a wrong gather offset,
 *      tp_fsdp.test_shard_shift) must fail the gathered check.
 *
 * The cases (gpu_harness.h: NAME/tpN, `--tp LIST`, a degree above the rank
 * slots reported skipped):
 *   dp1_mesh/tp1     the mesh mode with a dp group of one (the block on a TP
 *                    group split from the world group, tp_group_split; the
 *                    gather is a copy);
 *   traffic_tp1/tp1  fsdp_traffic=on at TP 1 (a second one-rank
 *                    communicator: copies beside the layer);
 *   mesh_dp/tpN      dp N x tp 1 on N = 2, 4, 8 ranks (ranks tp-innermost:
 *                    the TP group of each rank is itself, the dp group all),
 *                    each dp rank with its own data (checked to differ from
 *                    every other's), the weights alike (the gathered check
 *                    needs it);
 *   traffic/tpN      fsdp_traffic=on at TP N = 2, 4, 8 beside stock and
 *                    dist_gemm (ce).
 * Each check prints a line ending in ok or FAIL. Exit 77 (skipped) without a
 * GPU.
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

#include "bench/gpu/block.h"
#include "bench/gpu/fsdp.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "tests/gpu/gpu_harness.h"

enum { DIM = 128, HEADS = 16, KV_HEADS = 8, HD = 16, FFN = 384, SEQ = 64 };
enum { MAX_OUT = TP_BLOCK_MAX_OUTPUTS };

typedef struct scenario {
  const char *name;
  int dp;            /* > 1: the mesh dp x 1 */
  tp_fsdp_mode mode; /* mesh or traffic */
  int split_tp;      /* the block on a group split from the world group */
  tp_backend backends[2];
  int n_backends;
} scenario;

static int report(int rank, const char *what, int ok) {
  printf("rank %d: %s: %s\n", rank, what, ok ? "ok" : "FAIL");
  fflush(stdout);
  return !ok;
}

static tp_block_shape shape_of(tp_layer layer, int backward) {
  tp_block_shape s = {.layer = layer,
                      .dtype = TP_BF16,
                      .batch = 1,
                      .seq = SEQ,
                      .dim = DIM,
                      .n_heads = HEADS,
                      .n_kv_heads = KV_HEADS,
                      .head_dim = HD,
                      .ffn_hidden = FFN,
                      .sp = 1,
                      .backward = backward};
  return s;
}

/* The outputs on the host. */
typedef struct kept {
  int n;
  void *host[MAX_OUT];
  size_t bytes[MAX_OUT];
} kept;

static void kept_free(kept *k) {
  for (int i = 0; i < k->n; ++i) free(k->host[i]);
  memset(k, 0, sizeof *k);
}

static int copy_out(tp_group *g, const tp_block_plan *p, const tp_block_tensors *t, kept *k) {
  tp_block_output out[MAX_OUT];
  k->n = tp_block_outputs(p, t, out);
  int bad = cudaStreamSynchronize(g->main_stream) != cudaSuccess;
  for (int i = 0; i < k->n && !bad; ++i) {
    k->bytes[i] = out[i].count * tp_dtype_bytes(TP_BF16);
    k->host[i] = malloc(k->bytes[i]);
    bad |= !k->host[i] ||
           cudaMemcpy(k->host[i], out[i].ptr, k->bytes[i], cudaMemcpyDeviceToHost) != cudaSuccess;
  }
  return bad;
}

static int poison(tp_group *g, const tp_block_plan *p, tp_block_tensors *t) {
  tp_block_output out[MAX_OUT];
  const int n = tp_block_outputs(p, t, out);
  int bad = 0;
  for (int i = 0; i < n; ++i)
    bad |= tp_launch_poison(TP_BF16, out[i].ptr, out[i].count, g->main_stream) != cudaSuccess;
  return bad;
}

static int same_bits(const kept *a, const kept *b) {
  if (a->n != b->n) return 0;
  for (int i = 0; i < a->n; ++i)
    if (!a->host[i] || !b->host[i] || a->bytes[i] != b->bytes[i] ||
        memcmp(a->host[i], b->host[i], a->bytes[i]) != 0)
      return 0;
  return 1;
}

/* Each dp rank's x must differ from every other's (its own data). */
static int data_differs(tp_group *world, tp_rdzv *rdzv, const tp_block_plan *p,
                        const tp_block_tensors *t) {
  const size_t n = (size_t)(p->local_rows * p->shape.dim);
  uint16_t *x = malloc(n * sizeof *x);
  uint64_t sum = 1469598103934665603ull, all[TP_MAX_WORLD];
  int bad = !x || cudaMemcpy(x, t->x, n * sizeof *x, cudaMemcpyDeviceToHost) != cudaSuccess;
  for (size_t i = 0; !bad && i < n; ++i) sum = (sum ^ x[i]) * 1099511628211ull;
  free(x);
  bad |= gpu_exchange(rdzv, &sum, sizeof sum, all) != TP_OK;
  for (int a = 0; !bad && a < world->world; ++a)
    for (int b = a + 1; b < world->world; ++b) bad |= all[a] == all[b];
  char what[64];
  snprintf(what, sizeof what, "the %d dp ranks hold different data", world->world);
  return report(world->rank, what, !bad);
}

typedef struct judged {
  double sums[5], elements;
} judged;

/* The reduce-scatter against the all-reduce's slice beyond two ranks: the two collectives may
 * sum in other orders, a few bf16 roundings apart (bench/gpu/layer_worker.c's rule). */
static const double REDUCE_TOL_BF16 = 1e-2;

static int gathered_ok(tp_group *g, const tp_fsdp *f, const char *what, int expect_equal) {
  judged j;
  tp_rc rc = tp_fsdp_check_gathered(g, f, j.sums, &j.elements);
  const int equal = rc == TP_OK && j.elements > 0 && j.sums[3] == 0 && j.sums[4] == 0;
  char line[160];
  snprintf(line, sizeof line, "%s (%.0f elements, %.0f differ)", what, j.elements, j.sums[3]);
  return report(g->rank, line, rc == TP_OK && equal == expect_equal);
}

/* The reduce-scatter check as `run` judges it: bit for bit at 2 ranks or fewer
 * (tp_fsdp_reduce_exact), within REDUCE_TOL_BF16 norm-wise beyond. expect_pass: whether it
 * must pass (0 for a planted fault). */
static int reduced_ok(tp_group *g, const tp_fsdp *f, const char *what, int expect_pass) {
  judged j;
  memset(&j, 0, sizeof j);
  tp_rc rc = tp_fsdp_check_reduced(g, f, j.sums, &j.elements);
  const int exact = tp_fsdp_reduce_exact(f->ranks);
  const double rel = j.sums[1] > 0 ? sqrt(j.sums[0] / j.sums[1]) : (j.sums[0] > 0 ? INFINITY : 0);
  const int passes = rc == TP_OK && j.elements > 0 && j.sums[4] == 0 &&
                     (exact ? j.sums[3] == 0 : rel <= REDUCE_TOL_BF16);
  char line[256];
  snprintf(line, sizeof line,
           "%s (%d ranks, %.0f elements, %.0f differ, ||diff||/||ref|| %.3g; rule: %s; the check "
           "%s)",
           what, f->ranks, j.elements, j.sums[3], rel, exact ? "bit for bit" : "within 1e-2",
           passes ? "passes" : "fails");
  return report(g->rank, line, rc == TP_OK && passes == expect_pass);
}

/* Every parameter's reduce-scattered shard less this rank's own partial (its slice of the
 * previous gradients): a reduce-scatter that dropped one rank's contribution. bf16. */
static int drop_own_partial(const tp_fsdp *f) {
  int bad = 0;
  for (int i = 0; !bad && i < f->n_params; ++i) {
    const size_t n = (size_t)(f->params[i].rows * f->params[i].cols) / (size_t)f->ranks;
    uint16_t *shard = malloc(n * sizeof *shard), *mine = malloc(n * sizeof *mine);
    bad = !shard || !mine;
    bad = bad || cudaMemcpy(shard, f->grad_shard[i], n * 2, cudaMemcpyDeviceToHost) != cudaSuccess;
    bad = bad || cudaMemcpy(mine, (const uint16_t *)f->prev_grad[i] + (size_t)f->index * n, n * 2,
                            cudaMemcpyDeviceToHost) != cudaSuccess;
    for (size_t e = 0; !bad && e < n; ++e)
      shard[e] = gpu_float_to_bf16(gpu_bf16_to_float(shard[e]) - gpu_bf16_to_float(mine[e]));
    bad = bad || cudaMemcpy(f->grad_shard[i], shard, n * 2, cudaMemcpyHostToDevice) != cudaSuccess;
    free(shard);
    free(mine);
  }
  return bad;
}

/* One FSDP step, outputs poisoned first, against the plain step's outputs. */
static int fsdp_step_matches(tp_group *g, const tp_block_plan *p, tp_block_tensors *t, tp_fsdp *f,
                             const kept *plain, const char *label) {
  int failures = poison(g, p, t);
  tp_rc rc = tp_fsdp_step(g, p, t, f);
  failures += report(g->rank, "the step with FSDP beside it runs", rc == TP_OK);
  if (rc != TP_OK) printf("  %s\n", tp_last_error());
  kept now;
  memset(&now, 0, sizeof now);
  failures += copy_out(g, p, t, &now);
  failures += report(g->rank, "the side stream is joined: idle once the main stream is",
                     cudaStreamQuery(f->side) == cudaSuccess);
  char what[160];
  snprintf(what, sizeof what, "%s: every output equals the step without FSDP bit for bit", label);
  failures += report(g->rank, what, same_bits(&now, plain));
  kept_free(&now);
  return failures;
}

/* The planted faults: a gradient shard with one element changed (where the reduce-scatter
 * must be exact) and one missing this rank's partial (at every rank count); shards cut one
 * element late. */
static int faults_caught(tp_group *g, const tp_block_plan *p, tp_block_tensors *t, tp_fsdp *f,
                         tp_fsdp_mode mode, ncclComm_t comm) {
  int failures = 0;
  if (p->shape.backward && tp_fsdp_reduce_exact(f->ranks)) {
    const uint16_t wrong = 0x3f80; /* 1.0 in bf16: not what a sum of random gradients gives */
    const int bad =
        cudaMemcpy(f->grad_shard[1], &wrong, sizeof wrong, cudaMemcpyHostToDevice) != cudaSuccess;
    failures += bad;
    failures +=
        reduced_ok(g, f, "fault: a changed gradient shard fails the reduce-scatter check", 0);
  }
  if (p->shape.backward) {
    failures += drop_own_partial(f);
    failures +=
        reduced_ok(g, f, "fault: a reduce-scatter missing this rank's partial fails the check", 0);
  }
  tp_fsdp_release(f);
  f->test_shard_shift = 1;
  tp_rc rc = tp_fsdp_prepare(g, p, t, mode, comm, f);
  if (rc == TP_OK) rc = tp_fsdp_step(g, p, t, f);
  failures += report(g->rank, "fault: the step with shards cut one element late runs", rc == TP_OK);
  failures += gathered_ok(g, f, "fault: a wrong gather offset fails the gathered check", 0);
  tp_fsdp_release(f);
  f->test_shard_shift = 0;
  return failures;
}

/* One layer and pass on the block group tg, FSDP over comm. */
static int run_layer(tp_group *world, tp_rdzv *rdzv, tp_group *tg, ncclComm_t comm,
                     const scenario *sc, tp_backend backend, tp_layer layer, int backward) {
  char label[96];
  snprintf(label, sizeof label, "%s %s %s %s", sc->name, tp_backend_name(backend),
           tp_layer_name(layer), backward ? "fwd+bwd" : "fwd");
  printf("rank %d: -- %s\n", world->rank, label);
  const tp_block_shape shape = shape_of(layer, backward);
  tp_block_plan plan, sizes;
  tp_block_tensors t;
  memset(&t, 0, sizeof t);
  tp_rc rc = tp_block_plan_make(tg, &shape, backend,
                                backend == TP_BACKEND_DIST ? TP_SCHED_CE : TP_SCHED_AUTO, 0, &plan);
  if (rc == TP_OK) rc = tp_block_plan_make(tg, &shape, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &sizes);
  if (rc == TP_OK) rc = tp_block_alloc(tg, &sizes, 91, &t);
  const int dp_index = sc->dp > 1 ? world->rank : 0; /* tp 1: rank = dp_index */
  if (rc == TP_OK && sc->dp > 1)
    rc = tp_block_reseed_data(tg, &sizes, &t, 91 + 7 * (uint64_t)dp_index);
  if (rc == TP_OK) rc = tp_block_prepare(tg, &plan);
  int failures = report(world->rank, "plan, tensors, prepare", rc == TP_OK);
  if (rc != TP_OK) {
    printf("  %s\n", tp_last_error());
    tp_block_free(&t);
    return failures;
  }
  if (sc->dp > 1) failures += data_differs(world, rdzv, &plan, &t);
  kept plain;
  memset(&plain, 0, sizeof plain);
  rc = tp_block_step(tg, &plan, &t);
  failures += report(world->rank, "the step without FSDP runs", rc == TP_OK);
  failures += copy_out(tg, &plan, &t, &plain);
  tp_fsdp f;
  memset(&f, 0, sizeof f);
  rc = tp_fsdp_prepare(tg, &plan, &t, sc->mode, comm, &f);
  failures += report(world->rank, "FSDP's buffers cut", rc == TP_OK);
  if (rc == TP_OK) {
    for (int step = 0; step < 2; ++step)
      failures += fsdp_step_matches(tg, &plan, &t, &f, &plain, label);
    failures += gathered_ok(tg, &f, "the gathered weights equal the weights bit for bit", 1);
    if (backward)
      failures +=
          reduced_ok(tg, &f, "the reduce-scattered shard against the all-reduce's slice", 1);
    failures += faults_caught(tg, &plan, &t, &f, sc->mode, comm);
  } else {
    printf("  %s\n", tp_last_error());
  }
  tp_fsdp_release(&f);
  kept_free(&plain);
  tp_block_free(&t);
  tp_block_release(&plan);
  return failures;
}

/* The block's group and FSDP's communicator of the scenario, from the world group. */
static int make_groups(tp_group *world, const scenario *sc, tp_group **tg, ncclComm_t *comm) {
  *tg = world;
  *comm = NULL;
  tp_rc rc = TP_OK;
  /* mesh dp x 1: the TP group is this rank alone (color: its dp index), the dp group all */
  if (sc->split_tp) rc = tp_group_split(world, world->rank, 0, tg);
  if (rc == TP_OK && ncclCommSplit(world->nccl, 0, world->rank, comm, NULL) != ncclSuccess)
    rc = TP_ENCCL;
  if (rc != TP_OK) printf("rank %d: groups: %s\n", world->rank, tp_last_error());
  return report(world->rank, "the block's group and FSDP's communicator", rc == TP_OK && *comm);
}

static int body(tp_group *world, tp_rdzv *rdzv, void *ctx) {
  const scenario *sc = ctx;
  tp_group *tg = NULL;
  ncclComm_t comm = NULL;
  int failures = make_groups(world, sc, &tg, &comm);
  static const tp_layer layers[] = {TP_LAYER_ATTENTION, TP_LAYER_FFN, TP_LAYER_BLOCK};
  for (int b = 0; !failures && b < sc->n_backends; ++b)
    for (int l = 0; l < 3; ++l)
      for (int backward = 0; backward < 2; ++backward)
        failures += run_layer(world, rdzv, tg, comm, sc, sc->backends[b], layers[l], backward);
  if (comm) (void)ncclCommDestroy(comm);
  if (tg && tg != world) tp_group_destroy(tg);
  printf("rank %d: %s: %d failure(s)\n", world->rank, sc->name, failures);
  fflush(stdout);
  return failures ? 1 : 0;
}

static void print_shape(int ranks) {
  printf("%d rank(s): block dim %d, %d heads and %d KV heads of %d, FFN %d, seq %d at batch 1\n",
         ranks, DIM, HEADS, KV_HEADS, HD, FFN, SEQ);
}

static void run_scenario(const scenario *sc, int world) {
  print_shape(world);
  assert_int_equal(gpu_run_group(world, body, (void *)sc), 0);
}

static void test_fsdp_dp1_mesh(void **state) {
  const scenario sc = {"mesh dp 1 (gather = copy)", 1, TP_FSDP_MESH, 1, {TP_BACKEND_STOCK}, 1};
  run_scenario(&sc, gpu_case_degree(state));
}

static void test_fsdp_traffic_tp1(void **state) {
  const scenario sc = {"fsdp_traffic=on at TP 1", 1, TP_FSDP_TRAFFIC, 0, {TP_BACKEND_STOCK}, 1};
  run_scenario(&sc, gpu_case_degree(state));
}

/* The mesh dp N x tp 1 on the case's N ranks. */
static void test_fsdp_mesh_dp(void **state) {
  const int ranks = gpu_case_degree(state);
  char name[48];
  snprintf(name, sizeof name, "mesh dp %d x tp 1", ranks);
  const scenario sc = {name, ranks, TP_FSDP_MESH, 1, {TP_BACKEND_STOCK}, 1};
  run_scenario(&sc, ranks);
}

/* fsdp_traffic=on beside the TP N block, stock and dist_gemm (ce). */
static void test_fsdp_traffic(void **state) {
  const int ranks = gpu_case_degree(state);
  char name[48];
  snprintf(name, sizeof name, "fsdp_traffic=on at TP %d", ranks);
  const scenario sc = {name, 1, TP_FSDP_TRAFFIC, 0, {TP_BACKEND_STOCK, TP_BACKEND_DIST}, 2};
  run_scenario(&sc, ranks);
}

int main(int argc, char **argv) {
  /* heads, KV heads, FFN, the sequence and every parameter's rows divide by 8 */
  const gpu_tp_test tests[] = {
      {"dp1_mesh", test_fsdp_dp1_mesh, 1, 1},
      {"traffic_tp1", test_fsdp_traffic_tp1, 1, 1},
      {"mesh_dp", test_fsdp_mesh_dp, 2, GPU_MAX_DEGREE},
      {"traffic", test_fsdp_traffic, 2, GPU_MAX_DEGREE},
  };
  return gpu_run_tp_tests("gpu_fsdp", tests, sizeof tests / sizeof tests[0], argc, argv);
}
