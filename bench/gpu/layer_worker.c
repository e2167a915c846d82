/*
 * layer_worker.c — one rank's side of `tpbench run` (see layer_worker.h).
 *
 * Each configuration is a layer item of the harness: a block (block.h)
 * planned for the configuration's backend, stepped on the case's tensors.
 * The case owns the tensors, so the stock layer, each dist_gemm variant and
 * the GEMM-alone and collectives-alone references of a case run on the same
 * numbers; the harness keeps the stock outputs and gradients and judges
 * every dist_gemm configuration of the case against them, one by one. The
 * references step their stock twin (tp_block_plan_twin) before each window:
 * a bf16 twin fills each projection's private scratch, so the GEMMs alone
 * read the gathered inputs the stock layer's collectives deliver (not
 * another op's leftovers), and the collectives alone move the partials its
 * GEMMs make; an fp8 twin fills the references' own quantized buffers.
 *
 * The stock variant on NCCL symmetric windows (and its collectives alone)
 * runs the same collectives on windows: NCCL's symmetric kernels need both
 * buffers of a collective in one, so such an item allocates the case's
 * tensors again (the same seed, the same numbers) in one window of its own
 * at prepare time, its references' scratches windows too; it is judged
 * against plain stock like dist_gemm.
 *
 * A case is measured whole (rounds interleave its configurations), so a
 * job whose workers died goes on with new ones from the first configuration
 * of the case that was not recorded, leaving out the one that was running.
 *
 * An fp8 layer (issue 15) keeps bf16 tensors and runs its four projections
 * in the fp8 recipe (the same item and block code: the block's projections
 * are tp_linear plans of the case's recipe): the stock layer quantizes in
 * its timed step (at TP > 1 through the fp8 communication of its
 * projections, qkv and w13 gathering the case's comm_dtype, dist_gemm
 * pushing fp8 chunks), the GEMMs alone and the collectives alone read
 * operands their stock twin's full step quantized in `before`. dist_gemm's
 * fp8 layer is held to the stock fp8 layer's outputs with the layers' usual
 * tolerance (docs/dev/NOTES.md says why it holds). Besides the harness's finite
 * check of every output, the stock fp8 layer judges itself: each
 * projection's outputs against float64 products of its dequantized operands
 * ("qkv:fp64", judged as ops judges an fp8 op), then every output against a
 * bf16 block run once on the same tensors ("y:bf16", ||fp8 - bf16|| /
 * ||bf16||, reported, not judged; a non-finite element on either side fails
 * it).
 *
 * Activation checkpointing: a case's tensors are seeded from its axes but
 * ac, so every ac mode of one shape runs on the same numbers. A stock or
 * dist_gemm configuration with ac other than none also judges itself (the
 * item's judge, after an fp8 layer's own checks): after its numerics step it
 * plans the same block with ac=none, runs one untimed step of it on the same
 * tensors and records, per output, a check "<output>:ac_none" that the two
 * are equal bit for bit (rule exact); then its own outputs are put back and
 * the ac=none plan released. A check that cannot run (the plan or the copies
 * failing on some rank) is recorded "not checked" with why.
 */
#include "bench/gpu/layer_worker.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/gpu/block.h"
#include "bench/gpu/block_fp8.h"
#include "bench/gpu/fsdp.h"
#include "bench/gpu/plan_info.h"
#include "bench/matrix/placement.h"
#include "common/tp_log.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_window.h"

enum { REASON_CAP = 416 };

/* Outputs through a layer: the tolerance's depth factor (bench/stats/numerics.h). */
enum { LAYER_DEPTH = 5 };

/* ---- the mesh of a case ---------------------------------------------------------------- */

/* The groups a case's mesh runs on: made once per mesh, on first use (every
 * rank walks the same cases, so the collective creations match). */
typedef struct mesh_groups {
  int dp, tp;
  int dp_index;       /* this rank's */
  tp_group *tp_group; /* the world group at dp 1, else split from it (owned) */
  ncclComm_t fsdp;    /* dp > 1: the dp group; dp 1: the traffic communicator; owned, lazily */
} mesh_groups;

enum { MAX_MESHES = 8 };

/* ---- the layer as a harness item ------------------------------------------------------ */

typedef struct layer_item {
  const tp_layer_case *c;
  const tp_layer_config *cfg;
  tp_block_tensors *t;
  tp_block_shape shape;
  tp_block_plan plan;
  int have_plan;
  char ran[64];        /* the schedules that ran: "ce", or "ce+sm" when the projections differ */
  tp_block_plan stock; /* references: the stock layer that fills their scratch */
  void *scratch[TP_N_PROJ]; /* references: each projection's own (nccl-window: windows) */
  tp_block_plan bf16;       /* the stock fp8 layer: the same block in bf16, its comparison */
  tp_harness *h;            /* ac: the ranks agree whether the check against ac=none runs */
  uint64_t seed;            /* the case's tensors' */
  tp_block_tensors own;     /* nccl-window: the case's tensors again, in a window */
  mesh_groups *mesh;        /* the case's: its TP group, FSDP's communicator */
  tp_fsdp fsdp;             /* FSDP's collectives beside the step (uses_fsdp) */
  int have_fsdp;
} layer_item;

/* The group the item's block runs on: its mesh's TP group (the harness
 * passes the world group; a split group shares its streams). */
static tp_group *tp_of(const layer_item *it) { return it->mesh->tp_group; }

/* dp > 1 or fsdp_traffic=on: the step has FSDP's collectives beside it. */
static int uses_fsdp(const layer_item *it) { return it->c->dp > 1 || it->c->fsdp_traffic; }

static int is_reference(const layer_item *it) { return tp_backend_is_reference(it->cfg->backend); }

static int is_fp8(const layer_item *it) { return tp_dtype_is_fp8(it->shape.proj_dtype); }

/* ac other than none on a configuration whose outputs are compared (stock, dist_gemm). */
static int checks_ac(const layer_item *it) {
  return it->shape.ac != TP_AC_NONE && !is_reference(it);
}

/* The stock variant on NCCL symmetric windows (its layer or its collectives alone). */
static int is_window(const layer_item *it) { return it->cfg->schedule == TP_SCHED_NCCL_WINDOW; }

static tp_block_shape shape_of(const tp_layer_case *c) {
  const tp_model_preset *m = c->model;
  tp_block_shape s;
  memset(&s, 0, sizeof s);
  s.layer = c->layer;
  s.dtype = tp_dtype_storage(c->dtype); /* an fp8 recipe keeps bf16 tensors */
  s.proj_dtype = c->dtype;
  s.batch = c->batch / c->dp; /* the global batch, split over dp */
  s.seq = c->seqlen;
  s.dim = m->dim;
  s.n_heads = m->n_heads;
  s.n_kv_heads = m->n_kv_heads;
  s.head_dim = m->head_dim;
  s.ffn_hidden = m->ffn_hidden;
  s.sp = c->sp;
  s.backward = tp_pass_has_backward(c->pass);
  s.save_gathered = c->save_gathered;
  s.ac = c->ac;
  s.comm = c->comm;
  return s;
}

/* The same block with its projections in the tensors' own dtype. */
static tp_block_shape bf16_shape(const layer_item *it) {
  tp_block_shape s = it->shape;
  s.proj_dtype = s.dtype;
  return s;
}

static tp_rc layer_plan(void *self, tp_group *world) {
  layer_item *it = self;
  (void)world;
  tp_group *g = tp_of(it);
  it->shape.symm = it->cfg->backend == TP_BACKEND_DIST ? it->cfg->symm : TP_SYMM_IPC;
  tp_rc rc = tp_block_plan_make(g, &it->shape, it->cfg->backend, it->cfg->schedule,
                                it->cfg->axes.chunks, &it->plan);
  /* symm=nccl: NCCL says here whether it has symmetric memory (collective; its refusal
   * rejects the configuration), never the IPC heap instead */
  tp_symm *heap = NULL;
  if (rc == TP_OK && it->shape.symm == TP_SYMM_NCCL) rc = tp_group_symm(g, TP_SYMM_NCCL, &heap);
  /* a reference reads what its stock twin's step leaves (bf16: in its private
   * scratches; fp8: in its own quantized buffers); a window reference's twin is the
   * window stock layer */
  if (rc == TP_OK && is_reference(it))
    rc = tp_block_plan_twin(g, &it->plan, TP_BACKEND_STOCK,
                            is_window(it) ? TP_SCHED_NCCL_WINDOW : TP_SCHED_AUTO, &it->stock);
  if (rc == TP_OK && is_fp8(it) && it->cfg->backend == TP_BACKEND_STOCK) {
    const tp_block_shape s = bf16_shape(it);
    rc = tp_block_plan_make(g, &s, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &it->bf16);
  }
  it->have_plan = rc == TP_OK;
  return rc;
}

/* A step of plan with this item's private scratches in place (hooks: FSDP's, or NULL). */
static tp_rc step_with_scratch_hooked(layer_item *it, tp_group *g, const tp_block_plan *plan,
                                      const tp_step_hooks *hooks) {
  memcpy(it->t->proj_scratch, it->scratch, sizeof it->scratch);
  tp_rc rc = tp_block_step_hooked(g, plan, it->t, hooks);
  memset(it->t->proj_scratch, 0, sizeof it->t->proj_scratch);
  return rc;
}

static tp_rc step_with_scratch(layer_item *it, tp_group *g, const tp_block_plan *plan) {
  return step_with_scratch_hooked(it, g, plan, NULL);
}

/* FSDP's buffers, cut after one untimed step so the previous block's
 * gradients are real ones. */
static tp_rc prepare_fsdp(layer_item *it, tp_group *g) {
  if (!uses_fsdp(it)) return TP_OK;
  if (!it->mesh->fsdp) return TP_FAIL(TP_EINTERNAL, "FSDP without its communicator");
  TP_TRY(step_with_scratch(it, g, &it->plan));
  it->have_fsdp = 1;
  return tp_fsdp_prepare(g, &it->plan, it->t, it->c->dp > 1 ? TP_FSDP_MESH : TP_FSDP_TRAFFIC,
                         it->mesh->fsdp, &it->fsdp);
}

static tp_rc layer_prepare(void *self, tp_group *world) {
  layer_item *it = self;
  (void)world;
  tp_group *g = tp_of(it);
  /* first: a window plan on a communicator without symmetric memory is rejected here */
  TP_TRY(tp_block_prepare(g, &it->plan));
  if (is_window(it)) {
    TP_TRY(tp_block_alloc_window(g, &it->plan, it->seed, &it->own));
    it->t = &it->own;
  }
  /* a recipe that keeps its own weights (fp8) quantizes the case's, untimed */
  TP_TRY(tp_block_prepare_weights(g, &it->plan, it->t));
  if (is_fp8(it) && it->cfg->backend == TP_BACKEND_STOCK) TP_TRY(tp_block_prepare(g, &it->bf16));
  if (!is_reference(it)) return prepare_fsdp(it, g);
  TP_TRY(tp_block_prepare(g, &it->stock));
  for (int k = 0; k < TP_N_PROJ; ++k) {
    const size_t bytes = it->stock.proj[k].workspace_bytes;
    if (!it->stock.has[k] || bytes == 0) continue; /* an fp8 twin reads the plan's own buffers */
    if (is_window(it)) TP_TRY(tp_window_alloc(g, bytes, &it->scratch[k]));
    else TP_TRY(tp_device_malloc(&it->scratch[k], bytes));
  }
  return prepare_fsdp(it, g);
}

/* Windows go in the same order on every rank (the items' order); g: the
 * item's group (its mesh's), the one its windows were registered on. */
static void free_item(tp_group *g, layer_item *it) {
  for (int k = 0; k < TP_N_PROJ; ++k) {
    if (is_window(it)) tp_window_free(g, it->scratch[k]);
    else tp_device_release(it->scratch[k]);
    it->scratch[k] = NULL;
  }
  if (it->have_fsdp) tp_fsdp_release(&it->fsdp);
  it->have_fsdp = 0;
  tp_block_free(&it->own);
  tp_block_release(&it->stock); /* an fp8 twin: views of the plan's buffers, first */
  tp_block_release(&it->plan);
  tp_block_release(&it->bf16);
}

/* A reference's window reads what its stock twin's step leaves: its
 * scratches filled as the stock layer fills them (bf16), its projections'
 * operands quantized and gathered (fp8). */
static tp_rc layer_before(void *self, tp_group *world) {
  layer_item *it = self;
  (void)world;
  return is_reference(it) ? step_with_scratch(it, tp_of(it), &it->stock) : TP_OK;
}

static tp_rc layer_step(void *self, tp_group *world) {
  layer_item *it = self;
  (void)world;
  if (!it->have_fsdp) return step_with_scratch(it, tp_of(it), &it->plan);
  const tp_step_hooks hooks = tp_fsdp_hooks(&it->fsdp);
  return step_with_scratch_hooked(it, tp_of(it), &it->plan, &hooks);
}

/* Every output through a layer is judged within the tolerance for W ranks
 * summed and the layer's depth; the longest reduction is the FFN's hidden
 * width or the model width. */
static int layer_outputs(void *self, tp_item_output *out, int max) {
  layer_item *it = self;
  tp_block_output blk[TP_BLOCK_MAX_OUTPUTS];
  int n = tp_block_outputs(&it->plan, it->t, blk);
  if (n > max) n = max;
  const int64_t k = it->shape.ffn_hidden > it->shape.dim ? it->shape.ffn_hidden : it->shape.dim;
  for (int i = 0; i < n; ++i)
    out[i] = (tp_item_output){blk[i].name, blk[i].ptr,     blk[i].count, TP_RULE_TOLERANCE,
                              k,           it->plan.world, LAYER_DEPTH,  NULL};
  return n;
}

/* ---- activation checkpointing: the outputs against ac=none's ----------------------------- */

/* What the check against ac=none holds while it runs: that block's plan
 * (its fp8 weights quantized from the tensors), device copies of this
 * configuration's outputs and the comparison's sums (5 doubles each). */
typedef struct ac_none_run {
  tp_block_plan none;
  void *kept[TP_BLOCK_MAX_OUTPUTS];
  double *acc;
} ac_none_run;

static void release_run(ac_none_run *r) {
  for (int i = 0; i < TP_BLOCK_MAX_OUTPUTS; ++i) tp_device_release(r->kept[i]);
  tp_device_release(r->acc);
  tp_block_release(&r->none);
  memset(r, 0, sizeof *r);
}

/* Device copies of the outputs and room for their comparison's sums. */
static tp_rc keep_outputs(layer_item *it, tp_group *g, const tp_block_output *out, int n,
                          ac_none_run *r) {
  cudaStream_t st = g->main_stream;
  TP_TRY(tp_device_malloc((void **)&r->acc, sizeof(double) * 5 * (size_t)n));
  TP_CUDA(cudaMemsetAsync(r->acc, 0, sizeof(double) * 5 * (size_t)n, st));
  for (int i = 0; i < n; ++i) {
    const size_t bytes = out[i].count * tp_dtype_bytes(it->shape.dtype);
    TP_TRY(tp_device_malloc(&r->kept[i], bytes));
    TP_CUDA(cudaMemcpyAsync(r->kept[i], out[i].ptr, bytes, cudaMemcpyDeviceToDevice, st));
  }
  TP_CUDA(cudaStreamSynchronize(st));
  return TP_OK;
}

/* The ac=none block planned and prepared, the outputs copied aside. */
static tp_rc set_up_run(layer_item *it, tp_group *g, const tp_block_output *out, int n,
                        ac_none_run *r) {
  tp_block_shape s = it->shape;
  s.ac = TP_AC_NONE;
  TP_TRY(tp_block_plan_make(g, &s, it->cfg->backend, it->cfg->schedule, it->cfg->axes.chunks,
                            &r->none));
  TP_TRY(tp_block_prepare(g, &r->none));
  TP_TRY(tp_block_prepare_weights(g, &r->none, it->t));
  return keep_outputs(it, g, out, n, r);
}

/* An untimed step of plan on the same tensors (no FSDP beside it), its
 * outputs poisoned first; then each kept output (this configuration's)
 * against it, and the kept ones put back. host: 5 doubles per output
 * (tp_launch_compare's sums). */
static tp_rc step_against(layer_item *it, tp_group *g, const tp_block_plan *plan,
                          const tp_block_output *out, int n, const ac_none_run *r, double *host) {
  const tp_dtype dt = it->shape.dtype;
  cudaStream_t s = g->main_stream;
  for (int i = 0; i < n; ++i) TP_CUDA(tp_launch_poison(dt, out[i].ptr, out[i].count, s));
  TP_TRY(step_with_scratch(it, g, plan));
  for (int i = 0; i < n; ++i)
    TP_CUDA(
        tp_launch_compare(dt, r->kept[i], out[i].ptr, out[i].count, r->acc + (ptrdiff_t)5 * i, s));
  for (int i = 0; i < n; ++i)
    TP_CUDA(cudaMemcpyAsync(out[i].ptr, r->kept[i], out[i].count * tp_dtype_bytes(dt),
                            cudaMemcpyDeviceToDevice, s));
  TP_CUDA(cudaMemcpyAsync(host, r->acc, sizeof(double) * 5 * (size_t)n, cudaMemcpyDeviceToHost, s));
  TP_CUDA(cudaStreamSynchronize(s));
  return TP_OK;
}

static void ac_check(const layer_item *it, const tp_block_output *o, const double *acc,
                     tp_item_check *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s:ac_none", o->name);
  c->exact = 1;
  c->elements = (double)o->count;
  c->differ = acc[3];
  c->nonfinite = acc[4];
  c->max_abs_err = acc[2];
  c->tolerance = 0.0;
  c->failed = c->differ > 0 || c->nonfinite > 0;
  /* equal bits have no error to report; a difference says how large it is */
  c->rel_err = !c->failed ? NAN : acc[1] > 0 ? sqrt(acc[0] / acc[1]) : INFINITY;
  const char *ac = tp_ac_name(it->shape.ac);
  if (c->failed)
    snprintf(c->reason, sizeof c->reason,
             "ac=%s's %s differs from an untimed ac=none step's on the same tensors: %.0f of %zu "
             "elements' bits differ, %.0f not finite",
             ac, o->name, c->differ, o->count, c->nonfinite);
  else
    snprintf(c->reason, sizeof c->reason,
             "ac=%s's %s equals an untimed ac=none step's on the same tensors bit for bit", ac,
             o->name);
}

static void ac_not_checked(const tp_block_output *o, const char *why, tp_item_check *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s:ac_none", o->name);
  c->exact = 1;
  c->not_checked = 1;
  c->elements = (double)o->count;
  c->rel_err = c->max_abs_err = c->tolerance = NAN;
  snprintf(c->reason, sizeof c->reason, "the ac=none step could not run: %.150s", why);
}

/* After the numerics step (and an fp8 layer's own checks): this
 * configuration's outputs against ac=none's, appended to out[*n..max). */
static tp_rc ac_checks(layer_item *it, tp_group *world, tp_item_check *out, int max, int *n) {
  (void)world;
  tp_group *g = tp_of(it);
  if (!checks_ac(it)) return TP_OK;
  tp_block_output blk[TP_BLOCK_MAX_OUTPUTS];
  const int count = tp_block_outputs(&it->plan, it->t, blk);
  if (*n + count > max)
    return TP_FAIL(TP_EINTERNAL, "no room for %d ac=none checks after %d (at most %d)", count, *n,
                   max);
  ac_none_run run;
  memset(&run, 0, sizeof run);
  /* The ac=none step is collective: every rank runs it or none does. */
  const tp_rc local = set_up_run(it, g, blk, count, &run);
  tp_rc agreed = TP_OK;
  char why[REASON_CAP];
  tp_rc rc = tp_harness_agree(it->h, local, &agreed, why, sizeof why);
  double host[5 * TP_BLOCK_MAX_OUTPUTS];
  if (rc == TP_OK && agreed == TP_OK) rc = step_against(it, g, &run.none, blk, count, &run, host);
  release_run(&run);
  TP_TRY(rc);
  for (int i = 0; i < count; ++i) {
    if (agreed == TP_OK) ac_check(it, &blk[i], host + (ptrdiff_t)5 * i, &out[*n + i]);
    else ac_not_checked(&blk[i], why, &out[*n + i]);
  }
  *n += count;
  return TP_OK;
}

/* ---- FSDP: the gathered weights, the reduce-scatter, the outputs without it -------------- */

/* A check from tp_launch_compare's sums: exact (bit for bit), or within
 * tolerance of the reference's norm; `what` says what was compared. */
static void sums_check(const char *name, const double *acc, double elements, int exact,
                       double tolerance, const char *what, tp_item_check *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", name);
  c->exact = exact;
  c->elements = elements;
  c->differ = acc[3];
  c->nonfinite = acc[4];
  c->max_abs_err = acc[2];
  c->tolerance = exact ? 0.0 : tolerance;
  const double rel = acc[1] > 0 ? sqrt(acc[0] / acc[1]) : acc[0] > 0 ? INFINITY : 0.0;
  c->failed = c->nonfinite > 0 || (exact ? c->differ > 0 : !(rel <= tolerance));
  c->rel_err = exact && !c->failed ? NAN : rel;
  if (c->failed)
    snprintf(c->reason, sizeof c->reason, "%s: %.0f of %.0f elements differ, %.0f not finite", what,
             c->differ, elements, c->nonfinite);
  else if (exact) snprintf(c->reason, sizeof c->reason, "%s: bit for bit", what);
  else
    snprintf(c->reason, sizeof c->reason, "%s: ||diff||/||ref|| %.3g within %.3g", what, rel,
             tolerance);
}

static void fsdp_output_check(const tp_block_output *o, const double *acc, tp_item_check *c) {
  char name[32];
  snprintf(name, sizeof name, "%s:no_fsdp", o->name);
  char what[128];
  snprintf(what, sizeof what, "%s against an untimed step without FSDP's collectives", o->name);
  sums_check(name, acc, (double)o->count, 1, 0.0, what, c);
}

static void fsdp_not_checked(const char *name, double elements, const char *why, tp_item_check *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", name);
  c->exact = 1;
  c->not_checked = 1;
  c->elements = elements;
  c->rel_err = c->max_abs_err = c->tolerance = NAN;
  snprintf(c->reason, sizeof c->reason, "could not run: %.170s", why);
}

/* The gathered weights and (with a backward) the reduce-scatter. */
static tp_rc fsdp_collective_checks(layer_item *it, tp_group *g, tp_item_check *out, int *n) {
  double sums[5], elements = 0;
  TP_TRY(tp_fsdp_check_gathered(g, &it->fsdp, sums, &elements));
  sums_check("weights:gathered", sums, elements, 1, 0.0,
             it->fsdp.mode == TP_FSDP_MESH
                 ? "the all-gathered weights against the unsharded weights"
                 : "this rank's slice of the all-gathered buffer against its weights",
             &out[(*n)++]);
  if (!it->fsdp.backward) return TP_OK;
  TP_TRY(tp_fsdp_check_reduced(g, &it->fsdp, sums, &elements));
  const int exact = tp_fsdp_reduce_exact(it->fsdp.ranks);
  /* beyond two ranks the two collectives may sum in other orders: a few roundings */
  const double tolerance = it->shape.dtype == TP_BF16 ? 1e-2 : 1e-5;
  sums_check("grads:reduce_scatter", sums, elements, exact, tolerance,
             "the reduce-scattered gradient shard against an NCCL all-reduce's slice",
             &out[(*n)++]);
  return TP_OK;
}

/* After the numerics step (a step with FSDP beside it): the collectives'
 * results, then every output against an untimed step without them. */
static tp_rc fsdp_checks(layer_item *it, tp_item_check *out, int max, int *n) {
  if (!it->have_fsdp || is_reference(it)) return TP_OK;
  tp_group *g = tp_of(it);
  tp_block_output blk[TP_BLOCK_MAX_OUTPUTS];
  const int count = tp_block_outputs(&it->plan, it->t, blk);
  if (*n + count + 2 > max)
    return TP_FAIL(TP_EINTERNAL, "no room for %d FSDP checks after %d (at most %d)", count + 2, *n,
                   max);
  TP_TRY(fsdp_collective_checks(it, g, out, n));
  ac_none_run run;
  memset(&run, 0, sizeof run);
  const tp_rc local = keep_outputs(it, g, blk, count, &run);
  tp_rc agreed = TP_OK;
  char why[REASON_CAP];
  tp_rc rc = tp_harness_agree(it->h, local, &agreed, why, sizeof why);
  double host[5 * TP_BLOCK_MAX_OUTPUTS];
  if (rc == TP_OK && agreed == TP_OK) rc = step_against(it, g, &it->plan, blk, count, &run, host);
  release_run(&run);
  TP_TRY(rc);
  for (int i = 0; i < count; ++i) {
    char name[32];
    snprintf(name, sizeof name, "%s:no_fsdp", blk[i].name);
    if (agreed == TP_OK) fsdp_output_check(&blk[i], host + (ptrdiff_t)5 * i, &out[*n + i]);
    else fsdp_not_checked(name, (double)blk[i].count, why, &out[*n + i]);
  }
  *n += count;
  return TP_OK;
}

/* dist_gemm: did every projection fuse? */
static tp_fused fused_of(const layer_item *it) {
  if (it->cfg->backend != TP_BACKEND_DIST) return TP_FUSED_NA;
  for (int i = 0; i < TP_N_PROJ; ++i)
    if (it->plan.has[i] && it->plan.proj[i].schedule == TP_SCHED_NCCL) return TP_FUSED_STOCK_PATH;
  return TP_FUSED_ALL;
}

/* The schedule every projection ran, or NULL when they differ. */
static const char *common_schedule(const tp_block_plan *p) {
  const char *name = NULL;
  for (int i = 0; i < TP_N_PROJ; ++i) {
    if (!p->has[i]) continue;
    const char *s = tp_schedule_name(p->proj[i].schedule);
    if (name && strcmp(name, s) != 0) return NULL;
    name = s;
  }
  return name;
}

/* "ce", or each projection's schedule joined by '+' when they differ. */
static void describe_ran(layer_item *it) {
  const tp_block_plan *p = &it->plan;
  const char *common = common_schedule(p);
  if (common) {
    snprintf(it->ran, sizeof it->ran, "%s", common);
    return;
  }
  size_t used = 0;
  it->ran[0] = '\0';
  for (int i = 0; i < TP_N_PROJ && used < sizeof it->ran; ++i) {
    if (!p->has[i]) continue;
    int n = snprintf(it->ran + used, sizeof it->ran - used, "%s%s", used ? "+" : "",
                     tp_schedule_name(p->proj[i].schedule));
    if (n > 0) used += (size_t)n;
  }
}

static void layer_info(void *self, tp_item_info *info) {
  layer_item *it = self;
  const tp_block_plan *p = &it->plan;
  memset(info, 0, sizeof *info);
  info->dtype = it->shape.dtype;
  if (!it->have_plan) return;
  info->planned = 1;
  /* the collectives alone keep no activations */
  info->activation_bytes = it->cfg->backend == TP_BACKEND_COMM_ONLY ? 0 : p->activation_bytes;
  info->traffic_bytes = it->have_fsdp ? it->fsdp.traffic_bytes : 0;
  for (int i = 0; i < TP_N_PROJ; ++i) {
    if (!p->has[i] || info->n_schedules == TP_ITEM_MAX_SCHEDULES) continue;
    const tp_linear_plan *lp = &p->proj[i];
    info->schedules[info->n_schedules++] =
        (tp_schedule_choice){tp_block_proj_name((tp_block_proj)i), tp_schedule_name(lp->schedule),
                             tp_plan_engine(lp), lp->chunks, lp->reason};
  }
  describe_ran(it);
  info->schedule_label = it->ran;
  info->bytes_moved = (double)p->comm_bytes;
  /* plus the recipe's own buffers (fp8: quantized copies, scales, the communication's) */
  info->workspace_bytes = (int64_t)(p->symm_bytes + p->scratch_bytes + p->window_bytes +
                                    p->saved_bytes + tp_block_own_bytes(p));
  info->fused = fused_of(it);
  info->transfers_per_step = tp_block_transfers(p);
}

/* ---- an fp8 layer's own checks ---------------------------------------------------------- */

/* One projection against float64 products of its dequantized operands. */
static void fp8_proj_check(const layer_item *it, tp_block_proj proj, const tp_block_fp8_verdict *v,
                           tp_item_check *out) {
  const tp_fp8_check *k = &v->sum;
  tp_fp8_check_record(k, tp_block_proj_name(proj), out);
  /* at TP > 1 an output whose ranks' partials NCCL sums in bf16 is judged as
   * the GEMM's local partial: y on the reduce-scatter side (wo, w2), dx on the
   * all-gather side's backward (qkv, w13) */
  const int scatters = proj == TP_PROJ_WO || proj == TP_PROJ_W2;
  const char *partial = it->plan.world < 2   ? ""
                        : scatters           ? ": y as the local partial"
                        : it->shape.backward ? ": dx as the local partial"
                                             : "";
  snprintf(out->reason, sizeof out->reason,
           "%s%s %s (%s%s) vs float64 products of the dequantized operands, %lld sampled: %lld "
           "outside the bound, %lld not finite, worst |err|/bound %.3g",
           out->failed ? "failed: " : "", tp_block_proj_name(proj),
           tp_dtype_name(it->shape.proj_dtype), v->judged, partial, (long long)k->elements,
           (long long)k->outside, (long long)k->nonfinite, k->worst_ratio);
}

/* One output of the fp8 layer against the bf16 layer's. */
static void fp8_bf16_check(const layer_item *it, const tp_block_diff *d, tp_item_check *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s:bf16", d->name);
  out->failed = d->nonfinite > 0 || d->ref_nonfinite > 0;
  out->elements = d->elements;
  out->nonfinite = d->nonfinite;
  out->rel_err = d->ref2 > 0 ? sqrt(d->diff2 / d->ref2) : d->diff2 > 0 ? INFINITY : 0.0;
  if (out->failed) out->rel_err = NAN;
  out->max_abs_err = d->max_abs;
  out->tolerance = NAN;
  snprintf(out->reason, sizeof out->reason,
           "%sreported, not judged: the %s layer's %s against the bf16 layer's on the same "
           "inputs (what quantizing the projections costs); %.0f not finite, %.0f in bf16's",
           out->failed ? "failed: " : "", tp_dtype_name(it->shape.proj_dtype), d->name,
           d->nonfinite, d->ref_nonfinite);
}

/* The stock fp8 layer: each projection's fp64 check, then every output
 * against the bf16 layer (which overwrites the activations, so last). */
static tp_rc fp8_judge(void *self, tp_group *world, tp_item_check *out, int max, int *n) {
  layer_item *it = self;
  tp_group *g = tp_of(it); /* dp 1: the world group (fp8 has no FSDP) */
  (void)world;
  *n = 0;
  if (it->cfg->backend != TP_BACKEND_STOCK) return TP_OK;
  int major = 0, minor = 0;
  TP_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g->device));
  TP_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, g->device));
  const tp_fp8_accum_model model = tp_fp8_accum_model_of(major, minor);
  for (int i = 0; i < TP_N_PROJ && *n < max; ++i) {
    if (!it->plan.has[i]) continue;
    tp_block_fp8_verdict v;
    TP_TRY(tp_block_fp8_check(&it->plan, it->t, (tp_block_proj)i, &model, &v));
    if (v.n_judged) fp8_proj_check(it, (tp_block_proj)i, &v, &out[(*n)++]);
    /* at TP > 1 the operands it gathered in fp8, against quantizing the whole */
    tp_fp8_whole_check w[4];
    int nw = 0;
    TP_TRY(tp_block_fp8_check_wholes(g, &it->plan, it->t, (tp_block_proj)i, w, 4, &nw));
    char prefix[8];
    snprintf(prefix, sizeof prefix, "%.5s ", tp_block_proj_name((tp_block_proj)i));
    for (int k = 0; k < nw && *n < max; ++k)
      tp_fp8_whole_check_record(&w[k], prefix, it->shape.proj_dtype, &out[(*n)++]);
  }
  tp_block_diff d[TP_BLOCK_MAX_OUTPUTS];
  int nd = 0;
  TP_TRY(tp_block_fp8_against(g, &it->plan, &it->bf16, it->t, d, &nd));
  for (int i = 0; i < nd && *n < max; ++i) fp8_bf16_check(it, &d[i], &out[(*n)++]);
  return ac_checks(it, g, out, max, n);
}

/* The layer's own checks after its numerics step: an fp8 layer's (its
 * stock layer's; the other backends are held to it), else the checks
 * against ac=none and without FSDP's collectives. */
static tp_rc layer_judge(void *self, tp_group *g, tp_item_check *out, int max, int *n) {
  layer_item *it = self;
  *n = 0;
  if (is_fp8(it)) return fp8_judge(self, g, out, max, n);
  TP_TRY(ac_checks(self, g, out, max, n));
  return fsdp_checks(self, out, max, n);
}

static const tp_item_ops layer_item_ops = {"layer",    layer_plan,    layer_prepare, layer_before,
                                           layer_step, layer_outputs, layer_info,    layer_judge};

/* ---- the matrix ------------------------------------------------------------------------- */

typedef struct run_state {
  tp_harness *h;
  tp_group *g;
  const tp_layer_matrix *m;
  volatile tp_job_progress *progress;
  mesh_groups meshes[MAX_MESHES];
  int n_meshes;
} run_state;

/* The mesh's groups: the TP group of this rank's dp index (rank = dp_index ·
 * tp + tp_index: tp_mesh_coords) and the dp group of its tp index, both
 * split from the world group. */
static tp_rc make_mesh(run_state *st, int dp, int tp, mesh_groups *out) {
  const tp_mesh mesh = {dp, tp};
  int tp_index = 0;
  tp_mesh_coords(&mesh, st->g->rank, &out->dp_index, &tp_index);
  if (dp == 1) {
    out->tp_group = st->g;
    return TP_OK;
  }
  TP_TRY(tp_group_split(st->g, out->dp_index, tp_index, &out->tp_group));
  TP_NCCL(ncclCommSplit(st->g->nccl, tp_index, out->dp_index, &out->fsdp, NULL), st->g->nccl);
  return TP_OK;
}

/* dp 1 with fsdp_traffic=on: a second communicator over the same GPUs. */
static tp_rc make_traffic_comm(run_state *st, mesh_groups *mg) {
  if (mg->fsdp) return TP_OK;
  TP_NCCL(ncclCommSplit(st->g->nccl, 0, st->g->rank, &mg->fsdp, NULL), st->g->nccl);
  return TP_OK;
}

/* The groups of case c's mesh, made on first use. A mesh other than the
 * job's whole world has no configuration to run (tp_layer_reject_world). */
static tp_rc mesh_of(run_state *st, const tp_layer_case *c, mesh_groups **out) {
  if (c->dp * c->tp != st->g->world)
    return TP_FAIL(TP_EINTERNAL, "dp %d x tp %d is not the job's %d workers", c->dp, c->tp,
                   st->g->world);
  mesh_groups *mg = NULL;
  for (int i = 0; i < st->n_meshes && !mg; ++i)
    if (st->meshes[i].dp == c->dp && st->meshes[i].tp == c->tp) mg = &st->meshes[i];
  if (!mg) {
    if (st->n_meshes == MAX_MESHES) return TP_FAIL(TP_EINTERNAL, "more than %d meshes", MAX_MESHES);
    mg = &st->meshes[st->n_meshes++];
    memset(mg, 0, sizeof *mg);
    mg->dp = c->dp;
    mg->tp = c->tp;
    TP_TRY(make_mesh(st, c->dp, c->tp, mg));
  }
  if (c->dp == 1 && c->fsdp_traffic) TP_TRY(make_traffic_comm(st, mg));
  *out = mg;
  return TP_OK;
}

/* The world's own mesh (dp 1 x tp world): cases with nothing to run get it. */
static tp_rc mesh_of_world(run_state *st, mesh_groups **out) {
  for (int i = 0; i < st->n_meshes; ++i)
    if (st->meshes[i].dp == 1) {
      *out = &st->meshes[i];
      return TP_OK;
    }
  if (st->n_meshes == MAX_MESHES) return TP_FAIL(TP_EINTERNAL, "more than %d meshes", MAX_MESHES);
  mesh_groups *mg = &st->meshes[st->n_meshes++];
  memset(mg, 0, sizeof *mg);
  mg->dp = 1;
  mg->tp = st->g->world;
  mg->tp_group = st->g;
  *out = mg;
  return TP_OK;
}

/* Split groups before the world group they borrow from. */
static void free_meshes(run_state *st) {
  for (int i = st->n_meshes - 1; i >= 0; --i) {
    mesh_groups *mg = &st->meshes[i];
    if (mg->fsdp) {
      ncclResult_t r = ncclCommDestroy(mg->fsdp);
      if (r != ncclSuccess) TP_LOGW("layers", "ncclCommDestroy: %s", ncclGetErrorString(r));
    }
    if (mg->tp_group != st->g) tp_group_destroy(mg->tp_group);
    memset(mg, 0, sizeof *mg);
  }
  st->n_meshes = 0;
}

/* Plain stock is the reference; its window variant is judged against it, like dist_gemm. */
static tp_numerics_use numerics_use(const tp_layer_config *cfg) {
  if (cfg->backend == TP_BACKEND_STOCK)
    return cfg->schedule == TP_SCHED_NCCL_WINDOW ? TP_NUMERICS_CHECK : TP_NUMERICS_REFERENCE;
  return cfg->backend == TP_BACKEND_DIST ? TP_NUMERICS_CHECK : TP_NUMERICS_NONE;
}

static tp_harness_config harness_config(const tp_layer_case *c, const tp_layer_config *cfg,
                                        int index, char *label, size_t cap) {
  char mesh[48] = "";
  if (c->dp > 1) snprintf(mesh, sizeof mesh, " dp=%d", c->dp);
  else if (c->fsdp_traffic) snprintf(mesh, sizeof mesh, " fsdp_traffic");
  snprintf(label, cap, "%s %s %s T=%lld %s %s%s%s%s%s%s%s", c->model->name, tp_layer_name(c->layer),
           tp_pass_name(c->pass), (long long)c->tokens, tp_dtype_name(c->dtype), cfg->axes.backend,
           cfg->schedule == TP_SCHED_NCCL_WINDOW ? " nccl-window" : "",
           cfg->symm == TP_SYMM_NCCL ? " symm=nccl" : "",
           c->graph_mixed ? " graph mixed"
           : c->graph     ? " graph"
                          : "",
           c->ac != TP_AC_NONE ? " ac=" : "", c->ac != TP_AC_NONE ? tp_ac_name(c->ac) : "", mesh);
  tp_harness_config hc;
  memset(&hc, 0, sizeof hc);
  hc.axes = &cfg->axes;
  hc.rejected = cfg->rejected;
  hc.reason = cfg->reason;
  hc.flops = cfg->flops;
  hc.numerics = numerics_use(cfg);
  hc.label = label;
  hc.index = index;
  return hc;
}

/* Rank 0 tells the parent that every configuration before next is recorded
 * (the harness says which one runs itself). */
static void mark_next(run_state *st, int next) {
  if (st->g->rank == 0) tp_job_progress_case_done(st->progress, next, tp_harness_recorded(st->h));
}

enum { LABEL_CAP = 128 };

/* The seed of a case's tensors: from its axes but ac and fsdp_traffic
 * (FNV-1a of the case key), so every ac mode of one shape, with or without
 * the competing traffic, runs on the same inputs and weights. */
static uint64_t case_seed(const tp_layer_matrix *m, const tp_layer_case *c) {
  /* a case always has configurations; said for the static analyser, which cannot know it */
  if (!m->configs || c->n_configs < 1) return 0;
  tp_config_axes axes = m->configs[c->first_config].axes;
  axes.ac = NULL;
  axes.fsdp_traffic = 0;
  char key[1024];
  tp_case_key(&axes, key, sizeof key);
  uint64_t h = 1469598103934665603ull;
  for (const char *k = key; *k; ++k) h = (h ^ (unsigned char)*k) * 1099511628211ull;
  return h;
}

_Static_assert((int)TP_LAYER_MAX_MIX_CONFIGS <= (int)TP_HARNESS_MAX_CASE,
               "a graph mix is measured as one harness case");
_Static_assert((int)TP_LAYER_MAX_WINDOWS == (int)TP_MAX_WINDOWS,
               "the matrix's window rule counts the group's table");

/* The cases measured together from ci (*n of them, *together 1): one, or the
 * sizes of its graph mix (graph=mixed) when the mix is within the matrix's
 * limits; a mix beyond them (every configuration rejected) is *n cases each
 * on its own. */
static void measured_together(const tp_layer_matrix *m, int ci, int *n, int *together) {
  const int mix = m->cases[ci].mix_group;
  int k = 1, configs = m->cases[ci].n_configs;
  while (mix >= 0 && ci + k < m->n_cases && m->cases[ci + k].mix_group == mix)
    configs += m->cases[ci + k++].n_configs;
  *n = k;
  *together = k == 1 || (k <= TP_LAYER_MAX_GRAPH_SIZES && configs <= TP_HARNESS_MAX_CASE);
}

/* A mix's replay group of cfg: 1 + the place of its counterpart (the same
 * backend, schedule and chunks) in the mix's first case. */
static int replay_group_of(const tp_layer_matrix *m, int first_case, const tp_layer_config *cfg) {
  const tp_layer_case *c = &m->cases[first_case];
  for (int j = 0; j < c->n_configs; ++j) {
    const tp_layer_config *o = &m->configs[c->first_config + j];
    if (o->backend == cfg->backend && o->schedule == cfg->schedule &&
        o->axes.chunks == cfg->axes.chunks)
      return j + 1;
  }
  return 0; /* none: the layouts of a mix's cases are alike, so this does not happen */
}

/* What one call of the harness measures: cases first..first+n_cases-1. */
typedef struct case_span {
  int first, n_cases, mixed;
  tp_harness_entry entries[TP_HARNESS_MAX_CASE];
  layer_item items[TP_HARNESS_MAX_CASE];
  char labels[TP_HARNESS_MAX_CASE][LABEL_CAP];
  int n;
  tp_block_tensors t[TP_LAYER_MAX_GRAPH_SIZES]; /* one case's each */
  mesh_groups *mesh[TP_LAYER_MAX_GRAPH_SIZES];  /* one case's each */
} case_span;

/* Whether case ci has a configuration to run. */
static int case_runs(const tp_layer_matrix *m, int ci) {
  const tp_layer_case *c = &m->cases[ci];
  for (int i = c->first_config; i < c->first_config + c->n_configs; ++i)
    if (!m->configs[i].rejected) return 1;
  return 0;
}

/* Each case's mesh groups (the world's for a case with nothing to run). */
static tp_rc meshes_of(run_state *st, case_span *sp) {
  for (int k = 0; k < sp->n_cases; ++k) {
    if (!case_runs(st->m, sp->first + k)) {
      TP_TRY(mesh_of_world(st, &sp->mesh[k]));
      continue;
    }
    TP_TRY(mesh_of(st, &st->m->cases[sp->first + k], &sp->mesh[k]));
  }
  return TP_OK;
}

/* Whether a configuration of cfg's replay group (another size of its mix)
 * took the workers down: then cfg cannot be measured among the mix either. */
static const tp_layer_config *lost_counterpart(const run_state *st, const case_span *sp,
                                               const tp_layer_config *cfg, int group,
                                               const tp_resume *resume) {
  for (int k = 0; sp->mixed && k < sp->n_cases; ++k) {
    const tp_layer_case *c = &st->m->cases[sp->first + k];
    for (int i = c->first_config; i < c->first_config + c->n_configs; ++i)
      if (&st->m->configs[i] != cfg && tp_resume_is_lost(resume, i) &&
          replay_group_of(st->m, sp->first, &st->m->configs[i]) == group)
        return &st->m->configs[i];
  }
  return NULL;
}

/* The span's configurations from `from` on but the lost ones (recorded
 * already) as harness entries on their case's tensors; the counterparts of
 * a lost one are recorded as failed here. */
static tp_rc collect_entries(run_state *st, case_span *sp, int from, const tp_resume *resume) {
  for (int k = 0; k < sp->n_cases; ++k) {
    const int ci = sp->first + k;
    const tp_layer_case *c = &st->m->cases[ci];
    for (int i = c->first_config; i < c->first_config + c->n_configs; ++i) {
      if (i < from || tp_resume_is_lost(resume, i)) continue;
      const tp_layer_config *cfg = &st->m->configs[i];
      tp_harness_config hc = harness_config(c, cfg, i, sp->labels[sp->n], LABEL_CAP);
      if (sp->mixed) {
        hc.replay_group = replay_group_of(st->m, sp->first, cfg);
        hc.numerics_group = k + 1;
        const tp_layer_config *lost = lost_counterpart(st, sp, cfg, hc.replay_group, resume);
        if (lost) {
          char why[160];
          snprintf(why, sizeof why,
                   "graph=mixed: its %lld-token configuration of the mix took the workers down",
                   (long long)lost->axes.tokens);
          TP_TRY(tp_harness_skip(st->h, &hc, TP_EINTERNAL, why));
          continue;
        }
      }
      const int n = sp->n++;
      sp->entries[n].cfg = hc;
      sp->items[n].c = c;
      sp->items[n].cfg = cfg;
      sp->items[n].t = &sp->t[k];
      sp->items[n].shape = shape_of(c);
      sp->items[n].h = st->h;
      sp->items[n].seed = case_seed(st->m, c);
      sp->items[n].mesh = sp->mesh[k];
      sp->entries[n].item = (tp_item){&layer_item_ops, &sp->items[n]};
    }
  }
  return TP_OK;
}

/* Each case's tensors, for the cases with a configuration to run: a mix's
 * sizes all live at once (their graphs replay interleaved). */
static tp_rc alloc_tensors(run_state *st, case_span *sp) {
  for (int k = 0; k < sp->n_cases; ++k) {
    int runnable = 0;
    for (int i = 0; i < sp->n; ++i)
      runnable += sp->items[i].t == &sp->t[k] && !sp->items[i].cfg->rejected;
    if (!runnable) continue;
    const int ci = sp->first + k;
    const tp_layer_case *c = &st->m->cases[ci];
    tp_group *g = sp->mesh[k]->tp_group;
    tp_block_shape shape = shape_of(c);
    shape.proj_dtype = shape.dtype; /* the tensors are the same whatever the projections' format */
    tp_block_plan sizes;
    TP_TRY(tp_block_plan_make(g, &shape, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &sizes));
    const uint64_t seed = case_seed(st->m, c);
    const tp_alloc_owner outer = tp_device_enter(TP_ALLOC_OWNER(TP_ALLOC_CASE, 0));
    tp_rc rc = tp_block_alloc(g, &sizes, seed, &sp->t[k]);
    tp_device_leave(outer);
    TP_TRY(rc);
    /* data parallel ranks: each its own batch, the TP group's weights */
    if (c->dp > 1)
      TP_TRY(tp_block_reseed_data(g, &sizes, &sp->t[k],
                                  seed ^ ((uint64_t)sp->mesh[k]->dp_index + 1) *
                                             0xD1B54A32D192ED03ull));
  }
  return TP_OK;
}

/* The configurations from `from` on of cases first..first+n_cases-1 (one
 * case, or the sizes of a graph mix, mixed 1) but the lost ones (those that
 * took workers down), measured together. */
static tp_rc run_cases(run_state *st, int first, int n_cases, int mixed, int from,
                       const tp_resume *resume) {
  const tp_layer_case *last = &st->m->cases[first + n_cases - 1];
  const int end = last->first_config + last->n_configs;
  if (from < st->m->cases[first].first_config) from = st->m->cases[first].first_config;
  if (end - from > TP_HARNESS_MAX_CASE || n_cases > TP_LAYER_MAX_GRAPH_SIZES)
    return TP_FAIL(TP_EINTERNAL, "cases %d.. have %d configurations (at most %d)", first,
                   end - from, TP_HARNESS_MAX_CASE);
  case_span *sp = calloc(1, sizeof *sp);
  if (!sp) return TP_FAIL(TP_EOOM, "no host memory for a case");
  sp->first = first;
  sp->n_cases = n_cases;
  sp->mixed = mixed;
  tp_rc rc = meshes_of(st, sp);
  if (rc == TP_OK) rc = collect_entries(st, sp, from, resume);
  if (rc == TP_OK && sp->n > 0) {
    tp_rc agreed = TP_OK;
    char reason[REASON_CAP];
    rc = tp_harness_agree(st->h, alloc_tensors(st, sp), &agreed, reason, sizeof reason);
    for (int i = 0; rc == TP_OK && agreed != TP_OK && i < sp->n; ++i) {
      const tp_harness_config *hc = &sp->entries[i].cfg;
      rc = hc->rejected ? tp_harness_skip(st->h, hc, TP_EREJECT, hc->reason)
                        : tp_harness_skip(st->h, hc, agreed, reason);
    }
    if (rc == TP_OK && agreed == TP_OK) rc = tp_harness_measure_case(st->h, sp->entries, sp->n);
  }
  /* every configuration of the cases is recorded once run_cases returns, even on error */
  mark_next(st, end);
  for (int i = 0; i < sp->n; ++i) free_item(sp->items[i].mesh->tp_group, &sp->items[i]);
  for (int k = 0; k < n_cases; ++k) tp_block_free(&sp->t[k]);
  const tp_rc released = tp_harness_release_case(sp->entries, sp->n);
  free(sp);
  return rc != TP_OK ? rc : released;
}

/* dist_gemm maps every peer's memory: all GPUs of the job must reach each other. */
static tp_rc peer_access(tp_worker_ctx *ctx, int *all_ok) {
  int32_t dev = ctx->group->device, devs[TP_MAX_WORLD], mine = 1, oks[TP_MAX_WORLD];
  TP_TRY(tp_rdzv_allgather(ctx->rdzv, &dev, sizeof dev, devs));
  for (int r = 0; r < ctx->world; ++r) {
    if (r == ctx->rank || devs[r] == dev) continue;
    int can = 0;
    TP_CUDA(cudaDeviceCanAccessPeer(&can, dev, devs[r]));
    mine = mine && can;
  }
  TP_TRY(tp_rdzv_allgather(ctx->rdzv, &mine, sizeof mine, oks));
  *all_ok = 1;
  for (int r = 0; r < ctx->world; ++r) *all_ok = *all_ok && oks[r];
  return TP_OK;
}

/* A configuration that took the last workers down is recorded, not retried. */
static tp_rc record_lost(run_state *st, int i, tp_rc rc, const char *why) {
  const tp_layer_config *cfg = &st->m->configs[i];
  const tp_layer_case *c = &st->m->cases[cfg->case_index];
  char label[LABEL_CAP];
  tp_harness_config hc = harness_config(c, cfg, i, label, sizeof label);
  return tp_harness_skip(st->h, &hc, rc, why);
}

tp_rc tp_layer_worker_main(tp_worker_ctx *ctx, tp_layer_matrix *matrix,
                           const tp_layer_worker_options *opts, tp_collector *collector,
                           volatile tp_job_progress *progress) {
  int peers_ok = 1;
  TP_TRY(peer_access(ctx, &peers_ok));
  if (!peers_ok) tp_layer_reject_no_peer_access(matrix);
  tp_harness_options ho = opts->harness;
  ho.resume_run = progress->run_id;
  ho.current_config = &progress->current;
  tp_harness *h = NULL;
  TP_TRY(tp_harness_open(ctx, collector, &ho, matrix->n_configs, &h));
  if (ctx->rank == 0) progress->run_id = tp_harness_run_id(h);
  tp_harness_set_done(h, opts->resume->start);
  run_state st;
  memset(&st, 0, sizeof st);
  st.h = h;
  st.g = ctx->group;
  st.m = matrix;
  st.progress = progress;
  const int start = opts->resume->start;
  const int lost = opts->resume->lost_reason ? opts->resume->lost_index : -1;
  tp_rc rc = TP_OK;
  if (lost >= 0 && lost < matrix->n_configs) {
    rc = record_lost(&st, lost, opts->resume->lost_rc, opts->resume->lost_reason);
    if (ctx->rank == 0) progress->recorded = tp_harness_recorded(h);
  }
  for (int ci = 0; rc == TP_OK && ci < matrix->n_cases;) {
    int n = 1, together = 1;
    measured_together(matrix, ci, &n, &together);
    for (int k = 0; rc == TP_OK && k < n; k += together ? n : 1) {
      const int first = ci + k, count = together ? n : 1;
      const tp_layer_case *last = &matrix->cases[first + count - 1];
      if (last->first_config + last->n_configs > start)
        rc = run_cases(&st, first, count, together && n > 1, start, opts->resume);
    }
    ci += n;
  }
  free_meshes(&st);
  return tp_harness_close(h, rc, 1);
}
