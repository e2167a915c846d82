/*
 * layer_worker.c — one rank's side of `tpbench run` (see layer_worker.h).
 *
 * Each configuration is a layer item of the harness: a block (block.h)
 * planned for the configuration's backend, stepped on the case's tensors.
 * The case owns the tensors, so the stock layer, each dist_gemm variant and
 * the GEMM-alone and collectives-alone references of a case run on the same
 * numbers; the harness keeps the stock outputs and gradients and judges
 * every dist_gemm configuration of the case against them, one by one. The
 * references give each projection a private scratch that one stock step
 * fills before each window, so the GEMMs alone read the gathered inputs the
 * stock layer's collectives deliver (not another op's leftovers), and the
 * collectives alone move the partials its GEMMs make.
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
 */
#include "bench/gpu/layer_worker.h"

#include <stdio.h>
#include <string.h>

#include "bench/gpu/block.h"
#include "bench/gpu/plan_info.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_window.h"

enum { REASON_CAP = 416 };

/* Outputs through a layer: the tolerance's depth factor (bench/stats/numerics.h). */
enum { LAYER_DEPTH = 5 };

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
  uint64_t seed;            /* the case's tensors' */
  tp_block_tensors own;     /* nccl-window: the case's tensors again, in a window */
} layer_item;

static int is_reference(const layer_item *it) { return tp_backend_is_reference(it->cfg->backend); }

/* The stock variant on NCCL symmetric windows (its layer or its collectives alone). */
static int is_window(const layer_item *it) { return it->cfg->schedule == TP_SCHED_NCCL_WINDOW; }

static tp_block_shape shape_of(const tp_layer_case *c) {
  const tp_model_preset *m = c->model;
  tp_block_shape s;
  memset(&s, 0, sizeof s);
  s.layer = c->layer;
  s.dtype = c->dtype;
  s.batch = c->batch;
  s.seq = c->seqlen;
  s.dim = m->dim;
  s.n_heads = m->n_heads;
  s.n_kv_heads = m->n_kv_heads;
  s.head_dim = m->head_dim;
  s.ffn_hidden = m->ffn_hidden;
  s.sp = c->sp;
  s.backward = tp_pass_has_backward(c->pass);
  s.save_gathered = c->save_gathered;
  return s;
}

static tp_rc layer_plan(void *self, tp_group *g) {
  layer_item *it = self;
  tp_rc rc = tp_block_plan_make(g, &it->shape, it->cfg->backend, it->cfg->schedule,
                                it->cfg->axes.chunks, &it->plan);
  /* a window reference's scratches are filled by the window stock layer */
  if (rc == TP_OK && is_reference(it))
    rc = tp_block_plan_make(g, &it->shape, TP_BACKEND_STOCK,
                            is_window(it) ? TP_SCHED_NCCL_WINDOW : TP_SCHED_AUTO, 0, &it->stock);
  it->have_plan = rc == TP_OK;
  return rc;
}

static tp_rc layer_prepare(void *self, tp_group *g) {
  layer_item *it = self;
  /* first: a window plan on a communicator without symmetric memory is rejected here */
  TP_TRY(tp_block_prepare(g, &it->plan));
  if (is_window(it)) {
    TP_TRY(tp_block_alloc_window(g, &it->plan, it->seed, &it->own));
    it->t = &it->own;
  }
  if (!is_reference(it)) return TP_OK;
  TP_TRY(tp_block_prepare(g, &it->stock));
  for (int k = 0; k < TP_N_PROJ; ++k) {
    if (!it->stock.has[k]) continue;
    const size_t bytes = it->stock.proj[k].workspace_bytes;
    if (is_window(it)) TP_TRY(tp_window_alloc(g, bytes, &it->scratch[k]));
    else TP_CUDA(cudaMalloc(&it->scratch[k], bytes));
  }
  return TP_OK;
}

/* Windows go in the same order on every rank (the items' order). */
static void free_scratch(tp_group *g, layer_item *it) {
  for (int k = 0; k < TP_N_PROJ; ++k) {
    if (is_window(it)) tp_window_free(g, it->scratch[k]);
    else cudaFree(it->scratch[k]);
    it->scratch[k] = NULL;
  }
  tp_block_free(&it->own);
}

/* A step of plan with this item's private scratches in place. */
static tp_rc step_with_scratch(layer_item *it, tp_group *g, const tp_block_plan *plan) {
  memcpy(it->t->proj_scratch, it->scratch, sizeof it->scratch);
  tp_rc rc = tp_block_step(g, plan, it->t);
  memset(it->t->proj_scratch, 0, sizeof it->t->proj_scratch);
  return rc;
}

/* A reference's window needs its scratches filled as the stock layer fills them. */
static tp_rc layer_before(void *self, tp_group *g) {
  layer_item *it = self;
  return is_reference(it) ? step_with_scratch(it, g, &it->stock) : TP_OK;
}

static tp_rc layer_step(void *self, tp_group *g) {
  layer_item *it = self;
  return step_with_scratch(it, g, &it->plan);
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
  info->workspace_bytes =
      (int64_t)(p->symm_bytes + p->scratch_bytes + p->window_bytes + p->saved_bytes);
  info->fused = fused_of(it);
  info->transfers_per_step = tp_block_transfers(p);
}

static const tp_item_ops layer_item_ops = {"layer",    layer_plan,    layer_prepare, layer_before,
                                           layer_step, layer_outputs, layer_info,    NULL};

/* ---- the matrix ------------------------------------------------------------------------- */

typedef struct run_state {
  tp_harness *h;
  tp_group *g;
  const tp_layer_matrix *m;
  volatile tp_job_progress *progress;
} run_state;

/* Plain stock is the reference; its window variant is judged against it, like dist_gemm. */
static tp_numerics_use numerics_use(const tp_layer_config *cfg) {
  if (cfg->backend == TP_BACKEND_STOCK)
    return cfg->schedule == TP_SCHED_NCCL_WINDOW ? TP_NUMERICS_CHECK : TP_NUMERICS_REFERENCE;
  return cfg->backend == TP_BACKEND_DIST ? TP_NUMERICS_CHECK : TP_NUMERICS_NONE;
}

static tp_harness_config harness_config(const tp_layer_case *c, const tp_layer_config *cfg,
                                        int index, char *label, size_t cap) {
  snprintf(label, cap, "%s %s %s T=%lld %s %s%s%s", c->model->name, tp_layer_name(c->layer),
           tp_pass_name(c->pass), (long long)c->tokens, tp_dtype_name(c->dtype), cfg->axes.backend,
           cfg->schedule == TP_SCHED_NCCL_WINDOW ? " nccl-window" : "", c->graph ? " graph" : "");
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

/* The configurations from..end of case ci but the lost ones (those that took
 * workers down), on tensors allocated for its shape, measured together. */
static tp_rc run_case(run_state *st, int ci, int from, const tp_resume *resume) {
  const tp_layer_case *c = &st->m->cases[ci];
  const int end = c->first_config + c->n_configs;
  if (from < c->first_config) from = c->first_config;
  if (end - from > TP_HARNESS_MAX_CASE)
    return TP_FAIL(TP_EINTERNAL, "case %d has %d configurations (at most %d)", ci, end - from,
                   TP_HARNESS_MAX_CASE);
  tp_harness_entry entries[TP_HARNESS_MAX_CASE];
  layer_item items[TP_HARNESS_MAX_CASE];
  char labels[TP_HARNESS_MAX_CASE][LABEL_CAP];
  memset(items, 0, sizeof items);
  int n = 0, runnable = 0;
  tp_block_tensors t;
  memset(&t, 0, sizeof t);
  for (int i = from; i < end; ++i) {
    if (tp_resume_is_lost(resume, i)) continue;
    const tp_layer_config *cfg = &st->m->configs[i];
    entries[n].cfg = harness_config(c, cfg, i, labels[n], LABEL_CAP);
    items[n].c = c;
    items[n].cfg = cfg;
    items[n].t = &t;
    items[n].seed = (uint64_t)ci + 1;
    items[n].shape = shape_of(c);
    entries[n].item = (tp_item){&layer_item_ops, &items[n]};
    runnable += !cfg->rejected;
    n++;
  }
  if (n == 0) return TP_OK;
  tp_block_shape shape = shape_of(c);
  tp_block_plan sizes;
  tp_rc rc = TP_OK;
  if (runnable) {
    rc = tp_block_plan_make(st->g, &shape, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &sizes);
    if (rc == TP_OK) rc = tp_block_alloc(st->g, &sizes, items[0].seed, &t);
  }
  tp_rc agreed = TP_OK;
  char reason[REASON_CAP];
  rc = tp_harness_agree(st->h, rc, &agreed, reason, sizeof reason);
  if (rc == TP_OK && agreed != TP_OK) {
    for (int i = 0; rc == TP_OK && i < n; ++i)
      rc = entries[i].cfg.rejected
               ? tp_harness_skip(st->h, &entries[i].cfg, TP_EREJECT, entries[i].cfg.reason)
               : tp_harness_skip(st->h, &entries[i].cfg, agreed, reason);
  } else if (rc == TP_OK) {
    rc = tp_harness_measure_case(st->h, entries, n);
  }
  /* every configuration of the case is recorded once run_case returns, even on error */
  mark_next(st, end);
  for (int i = 0; i < n; ++i) free_scratch(st->g, &items[i]);
  tp_block_free(&t);
  return rc;
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
  run_state st = {h, ctx->group, matrix, progress};
  const int start = opts->resume->start;
  const int lost = opts->resume->lost_reason ? opts->resume->lost_index : -1;
  tp_rc rc = TP_OK;
  if (lost >= 0 && lost < matrix->n_configs) {
    rc = record_lost(&st, lost, opts->resume->lost_rc, opts->resume->lost_reason);
    if (ctx->rank == 0) progress->recorded = tp_harness_recorded(h);
  }
  for (int ci = 0; rc == TP_OK && ci < matrix->n_cases; ++ci) {
    const tp_layer_case *c = &matrix->cases[ci];
    if (c->first_config + c->n_configs <= start) continue;
    rc = run_case(&st, ci, start, opts->resume);
  }
  return tp_harness_close(h, rc, 1);
}
