/*
 * ops_worker.c — one rank's side of `tpbench ops` (see ops_worker.h).
 *
 * Each configuration is an item of the shared harness (harness.h): a TP
 * projection planned for its backend and schedule, stepped on the case's
 * tensors. The case owns the tensors (random inputs and weights, seeded per
 * case, rank and tensor), so the stock op, each dist_gemm variant and the
 * two references of a case run on the same numbers; the harness keeps the
 * stock outputs and judges dist_gemm's, output by output, against them.
 *
 * Every dtype runs the one projection API (kernels/tp_linear.h) and one
 * item: the dtype picks the projection's recipe (kernels/tp_recipe.h).
 *
 * The references (the GEMM alone, the collective alone) read what a step of
 * their stock twin (tp_linear_twin) leaves before every window: for bf16 and
 * fp32 a private scratch, so the GEMM alone reads the gathered input the
 * all-gather delivers and the collective alone reduces the partial the GEMM
 * makes — the same data as the stock op, which the GEMM alone proves by
 * matching stock's gather-side outputs bit for bit.
 *
 * An fp8 dtype's case (issue 15) is the fp8 recipe on the same bf16
 * tensors: its stock step quantizes the activation (and with the backward
 * Xᵀ, dY and dYᵀ) and runs the scaled GEMMs, the weights quantized once in
 * prepare (tp_linear_prepare_weights), untimed; its references' twin is a
 * stock view of their own quantized buffers, so the GEMMs alone run on the
 * operands a stock step quantized (and gathered) and must match stock bit
 * for bit. The stock step also judges itself (tp_linear_judge): each output
 * against a float64 product of the dequantized operands on sampled rows and
 * columns ("y:fp64", "dx:fp64", "dw:fp64", with the device's accumulation
 * model), the error against the unquantized bf16 operands reported beside
 * ("y:bf16", not judged), and at TP > 1 each operand it gathered in fp8
 * against quantizing the whole ("x:whole", ...). Pass bwd times the backward
 * alone, its forward run once in `before`.
 *
 * The nccl-window stock variant (and its collective alone) runs the same
 * NCCL collectives on symmetric windows: NCCL takes its symmetric kernels
 * only when both buffers of a collective are windows, so such an item
 * carries its own copies of the case's tensors in one window of its own
 * (inputs copied from the case's at prepare time, untimed), the references'
 * scratch a window too. Its outputs are judged against plain stock's like
 * dist_gemm's: bit for bit where no rank's partials meet.
 */
#include "bench/gpu/ops_worker.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/gpu/harness.h"
#include "bench/gpu/plan_info.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_linear.h"
#include "kernels/tp_window.h"

enum { REASON_CAP = 416 };

/* This rank's tensors of one case. */
typedef struct case_buffers {
  void *x, *w[TP_MAX_WEIGHTS], *y[TP_MAX_WEIGHTS], *dy[TP_MAX_WEIGHTS], *dx, *dw[TP_MAX_WEIGHTS];
  void *saved;
} case_buffers;

/* ---- tensors ------------------------------------------------------------------ */

static tp_linear_desc case_desc(const tp_ops_case *c) {
  tp_linear_desc d;
  memset(&d, 0, sizeof d);
  d.op = c->proj.op;
  d.dtype = tp_dtype_storage(c->dtype); /* an fp8 case's tensors are bf16 */
  d.tokens = c->tokens;
  d.in_features = c->proj.k;
  d.out_features = c->proj.n;
  d.n_weights = c->proj.n_weights;
  d.backward = tp_pass_has_backward(c->pass);
  d.sp = 1; /* the ops take and give sequence-sharded activations */
  return d;
}

static void free_buffers(case_buffers *b) {
  void *all[] = {b->x, b->dx, b->saved};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) tp_device_release(all[i]);
  for (int i = 0; i < TP_MAX_WEIGHTS; ++i) {
    void *per[] = {b->w[i], b->y[i], b->dy[i], b->dw[i]};
    for (size_t j = 0; j < sizeof per / sizeof per[0]; ++j) tp_device_release(per[j]);
  }
  memset(b, 0, sizeof *b);
}

static tp_rc alloc_random(void **buf, tp_dtype dt, size_t count, uint64_t seed, float scale,
                          cudaStream_t s) {
  TP_TRY(tp_device_malloc(buf, count * tp_dtype_bytes(dt)));
  TP_CUDA(tp_launch_fill_random(dt, *buf, count, seed, scale, s));
  return TP_OK;
}

/* Allocates the case's tensors and fills inputs and weights with random
 * values (never zeros), seeded per case, rank and tensor. */
static tp_rc alloc_buffers(tp_group *g, const tp_linear_plan *p, int case_index, case_buffers *b) {
  const tp_dtype dt = p->desc.dtype;
  const size_t e = tp_dtype_bytes(dt);
  const uint64_t seed = ((uint64_t)case_index << 20) ^ ((uint64_t)g->rank << 8);
  const size_t nx = tp_linear_x_elems(p), nw = tp_linear_w_elems(p), ny = tp_linear_y_elems(p);
  cudaStream_t s = g->main_stream;
  TP_TRY(alloc_random(&b->x, dt, nx, seed + 1, 1.0f, s));
  /* Weights scaled by 1/sqrt(K) keep outputs near unit size. */
  const float w_scale = 1.0f / sqrtf((float)p->gemm_k);
  for (int i = 0; i < p->desc.n_weights; ++i) {
    TP_TRY(alloc_random(&b->w[i], dt, nw, seed + 2 + (uint64_t)i, w_scale, s));
    TP_TRY(tp_device_malloc(&b->y[i], ny * e));
    if (!p->desc.backward) continue;
    TP_TRY(alloc_random(&b->dy[i], dt, ny, seed + 10 + (uint64_t)i, 1.0f, s));
    TP_TRY(tp_device_malloc(&b->dw[i], nw * e));
  }
  if (p->desc.backward) TP_TRY(tp_device_malloc(&b->dx, nx * e));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  return TP_OK;
}

/* ---- the op as a harness item ---------------------------------------------------------- */

typedef struct op_item {
  const tp_ops_case *c;
  const tp_ops_config *cfg;
  case_buffers *b; /* the tensors it runs on: the case's, or (nccl-window) its own */
  tp_linear_plan plan;
  int have_plan;
  int bwd_only;        /* pass bwd: the window times the backward alone */
  tp_linear_plan twin; /* references: the stock plan whose step fills what they read */
  void *scratch;       /* references: their own stock-path scratch, if the twin has one
                          (nccl-window: a window) */
  case_buffers own;    /* nccl-window: the case's tensors again, in the window below */
  void *own_window;    /* nccl-window: the window its tensors are carved from */
} op_item;

static int is_reference(const op_item *it) { return tp_backend_is_reference(it->cfg->backend); }

/* The stock variant on NCCL symmetric windows (its op or its collective alone). */
static int is_window(const op_item *it) { return it->cfg->schedule == TP_SCHED_NCCL_WINDOW; }

static tp_linear_tensors tensors_of(const tp_linear_plan *p, case_buffers *b, void *scratch) {
  tp_linear_tensors t;
  memset(&t, 0, sizeof t);
  t.scratch = scratch;
  t.x = b->x;
  t.dx = b->dx;
  t.saved = p->desc.save_gathered ? b->saved : NULL;
  for (int i = 0; i < p->desc.n_weights; ++i) {
    t.w[i] = b->w[i];
    t.y[i] = b->y[i];
    t.dy[i] = b->dy[i];
    t.dw[i] = b->dw[i];
  }
  return t;
}

/* symm=nccl: a plan on which auto chose the stock path uses no symmetric
 * memory (it would time symm=ipc's configuration again); else NCCL says here
 * whether it has symmetric memory (collective; its refusal rejects the
 * configuration), never the IPC heap instead. */
static tp_rc check_nccl_heap(tp_group *g, const tp_linear_plan *p) {
  if (p->desc.symm != TP_SYMM_NCCL) return TP_OK;
  if (p->schedule == TP_SCHED_NCCL)
    return TP_FAIL(TP_EREJECT, "symm=nccl: auto runs the stock path on this shape, which uses no "
                               "symmetric memory (the symm=ipc configuration times it)");
  tp_symm *heap = NULL;
  return tp_group_symm(g, TP_SYMM_NCCL, &heap);
}

/* The case's projection in the case's recipe (an fp8 dtype's: fp8 GEMMs on
 * the case's bf16 tensors), for this configuration's backend. */
static tp_rc op_plan(void *self, tp_group *g) {
  op_item *it = self;
  tp_linear_desc desc = case_desc(it->c);
  desc.dtype = it->c->dtype;
  desc.comm = it->c->comm;
  desc.save_gathered = it->c->save_gathered;
  if (it->cfg->backend == TP_BACKEND_DIST) desc.symm = it->cfg->symm;
  tp_rc rc = tp_linear_plan_make(g, &desc, it->cfg->backend, it->cfg->schedule,
                                 it->cfg->axes.chunks, &it->plan);
  if (rc == TP_OK) rc = check_nccl_heap(g, &it->plan);
  /* a window reference's twin is the window stock op: the data its own collective
   * delivers there */
  if (rc == TP_OK && is_reference(it))
    rc = tp_linear_twin(g, &it->plan, TP_BACKEND_STOCK,
                        is_window(it) ? TP_SCHED_NCCL_WINDOW : TP_SCHED_AUTO, &it->twin);
  it->have_plan = rc == TP_OK;
  return rc;
}

/* Room for one tensor in a window: whole pages, so every tensor starts aligned. */
static size_t window_room(size_t bytes) {
  const size_t page = 4096;
  return (bytes + page - 1) / page * page;
}

/* Carves the next tensor of bytes from *at (a NULL base only counts). */
static void *carve(char *base, size_t *at, size_t bytes) {
  void *p = base ? base + *at : NULL;
  *at += window_room(bytes ? bytes : 1);
  return p;
}

/* Lays the case's tensors out in one window from base (NULL: only sizes
 * them); returns the bytes. The same order and sizes on every rank, so each
 * tensor sits at the same offset of every rank's window. */
static size_t lay_out(const tp_linear_plan *p, char *base, case_buffers *own) {
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  const size_t x = tp_linear_x_elems(p) * e, y = tp_linear_y_elems(p) * e;
  size_t at = 0;
  own->x = carve(base, &at, x);
  for (int i = 0; i < p->desc.n_weights; ++i) {
    own->y[i] = carve(base, &at, y);
    if (p->desc.backward) own->dy[i] = carve(base, &at, y);
  }
  if (p->desc.backward) own->dx = carve(base, &at, x);
  if (p->saved_bytes) own->saved = carve(base, &at, p->saved_bytes);
  return at;
}

/* The window item's own tensors: the collectives' ones in its window, the
 * weights and weight gradients the case's (no collective touches them);
 * the inputs copied from the case's, so every variant runs on the same numbers. */
static tp_rc own_window_tensors(op_item *it, tp_group *g) {
  const tp_linear_plan *p = &it->plan;
  const case_buffers *cb = it->b;
  TP_TRY(tp_window_alloc(g, lay_out(p, NULL, &it->own), &it->own_window));
  lay_out(p, it->own_window, &it->own);
  const size_t e = tp_dtype_bytes(p->desc.dtype);
  cudaStream_t s = g->main_stream;
  TP_CUDA(cudaMemcpyAsync(it->own.x, cb->x, tp_linear_x_elems(p) * e, cudaMemcpyDeviceToDevice, s));
  for (int i = 0; i < p->desc.n_weights; ++i) {
    it->own.w[i] = cb->w[i];
    it->own.dw[i] = cb->dw[i];
    if (p->desc.backward)
      TP_CUDA(cudaMemcpyAsync(it->own.dy[i], cb->dy[i], tp_linear_y_elems(p) * e,
                              cudaMemcpyDeviceToDevice, s));
  }
  TP_CUDA(cudaStreamSynchronize(s));
  it->b = &it->own;
  return TP_OK;
}

/* A reference's twin and the private scratch its step fills (none where the
 * twin keeps what it delivers in the plan's own buffers: the fp8 recipe). */
static tp_rc prepare_twin(op_item *it, tp_group *g) {
  TP_TRY(tp_linear_prepare(g, &it->twin));
  const size_t bytes = it->twin.workspace_bytes;
  if (bytes == 0) return TP_OK;
  if (is_window(it)) return tp_window_alloc(g, bytes, &it->scratch);
  return tp_device_malloc(&it->scratch, bytes);
}

static tp_rc op_prepare(void *self, tp_group *g) {
  op_item *it = self;
  /* first: a window plan on a communicator without symmetric memory is rejected here */
  TP_TRY(tp_linear_prepare(g, &it->plan));
  if (is_window(it)) TP_TRY(own_window_tensors(it, g));
  if (it->plan.saved_bytes && !it->b->saved) /* a case tensor, made by its first user */
    TP_TRY(
        tp_device_malloc_as(TP_ALLOC_OWNER(TP_ALLOC_CASE, 0), &it->b->saved, it->plan.saved_bytes));
  /* a recipe that keeps its own weights (fp8) quantizes the case's, untimed */
  const tp_linear_tensors t = tensors_of(&it->plan, it->b, NULL);
  TP_TRY(tp_linear_prepare_weights(g, &it->plan, &t));
  return is_reference(it) ? prepare_twin(it, g) : TP_OK;
}

/* What a window needs and does not make: for a reference, what its own half
 * reads, left by one step of its stock twin (the data the skipped half
 * delivers); for a backward window, the forward's state. */
static tp_rc op_before(void *self, tp_group *g) {
  op_item *it = self;
  if (is_reference(it)) {
    tp_linear_tensors st = tensors_of(&it->twin, it->b, it->scratch);
    TP_TRY(tp_linear_step(g, &it->twin, &st));
  }
  if (!it->bwd_only) return TP_OK;
  tp_linear_tensors t = tensors_of(&it->plan, it->b, it->scratch);
  return tp_linear_forward(g, &it->plan, &t);
}

/* One timed iteration is the pass the case names: the forward, the backward
 * alone (its forward ran once before the window), or both. */
static tp_rc op_step(void *self, tp_group *g) {
  op_item *it = self;
  tp_linear_tensors t = tensors_of(&it->plan, it->b, it->scratch);
  return it->bwd_only ? tp_linear_backward(g, &it->plan, &t) : tp_linear_step(g, &it->plan, &t);
}

/* The plan's outputs (tp_linear_outputs) as the harness judges them: bit
 * for bit where no rank's partials meet in one, else within the tolerance
 * for the ranks summed; a GEMM alone computes only the former. */
static int op_outputs(void *self, tp_item_output *out, int max) {
  op_item *it = self;
  tp_linear_output lo[TP_ITEM_MAX_OUTPUTS];
  const tp_linear_tensors t = tensors_of(&it->plan, it->b, it->scratch);
  const int n =
      tp_linear_outputs(&it->plan, &t, lo, max < TP_ITEM_MAX_OUTPUTS ? max : TP_ITEM_MAX_OUTPUTS);
  for (int i = 0; i < n; ++i) {
    const int summed = lo[i].summed;
    out[i] = (tp_item_output){lo[i].name,
                              lo[i].ptr,
                              lo[i].count,
                              summed ? TP_RULE_TOLERANCE : TP_RULE_EXACT,
                              lo[i].reduction_len,
                              summed ? it->plan.world : 1,
                              1,
                              NULL};
    if (it->cfg->backend == TP_BACKEND_GEMM_ONLY && summed) {
      out[i].rule = TP_RULE_SKIP;
      out[i].skip_why = "the GEMM alone does not sum the ranks' partials";
    }
  }
  return n;
}

static void op_info(void *self, tp_item_info *info) {
  op_item *it = self;
  const tp_linear_plan *p = &it->plan;
  memset(info, 0, sizeof *info);
  info->dtype = tp_dtype_storage(it->c->dtype); /* the outputs' element type */
  if (!it->have_plan) return;
  info->planned = 1;
  info->schedules[0] =
      (tp_schedule_choice){it->cfg->axes.op_or_layer, tp_schedule_name(p->schedule),
                           tp_plan_engine(p), p->chunks, p->reason};
  info->n_schedules = 1;
  info->schedule_label = tp_schedule_name(p->schedule);
  info->bytes_moved = (double)p->comm_bytes;
  /* the symmetric workspace (or stock scratch) plus a saved gathered input,
   * plus the recipe's own buffers (fp8: quantized copies, scales, the
   * communication's buffers); the cuBLASLt workspace is the group's */
  info->workspace_bytes = (int64_t)(p->workspace_bytes + p->saved_bytes + tp_linear_own_bytes(p));
  info->transfers_per_step =
      tp_linear_transfers(p, !it->bwd_only, tp_pass_has_backward(it->c->pass));
  if (it->cfg->backend == TP_BACKEND_DIST)
    info->fused = p->backend == TP_BACKEND_DIST && p->schedule != TP_SCHED_NCCL
                      ? TP_FUSED_ALL
                      : TP_FUSED_STOCK_PATH;
  if (is_reference(it)) info->workspace_bytes += (int64_t)it->twin.workspace_bytes;
}

/* The recipe's own checks of a stock step's outputs (tp_linear_judge: the
 * fp8 recipe's float64 products and gathered operands; none for bf16). */
static tp_rc op_judge(void *self, tp_group *g, tp_item_check *out, int max, int *n) {
  op_item *it = self;
  const tp_linear_tensors t = tensors_of(&it->plan, it->b, it->scratch);
  return tp_linear_judge(g, &it->plan, &t, !it->bwd_only, out, max, n);
}

static const tp_item_ops op_item_ops = {"op",    op_plan,    op_prepare, op_before,
                                        op_step, op_outputs, op_info,    op_judge};

/* ---- the matrix ------------------------------------------------------------------- */

static tp_numerics_use numerics_use(const tp_ops_config *cfg) {
  const tp_backend backend = cfg->backend;
  /* plain stock is the reference; its window variant is judged against it */
  if (backend == TP_BACKEND_STOCK)
    return cfg->schedule == TP_SCHED_NCCL_WINDOW ? TP_NUMERICS_CHECK : TP_NUMERICS_REFERENCE;
  /* the GEMM alone is checked too: its gather-side outputs must equal stock's */
  return backend == TP_BACKEND_DIST || backend == TP_BACKEND_GEMM_ONLY ? TP_NUMERICS_CHECK
                                                                       : TP_NUMERICS_NONE;
}

static tp_harness_config harness_config(const tp_ops_case *c, const tp_ops_config *cfg, int index,
                                        char *label, size_t cap) {
  const int window = cfg->schedule == TP_SCHED_NCCL_WINDOW;
  snprintf(label, cap, "%s %s %s T=%lld %s %s%s%s", c->model->name, c->proj.name,
           cfg->axes.op_or_layer, (long long)c->tokens, tp_dtype_name(c->dtype), cfg->axes.backend,
           window ? " nccl-window" : "", cfg->symm == TP_SYMM_NCCL ? " symm=nccl" : "");
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

enum { LABEL_CAP = 128 };

/* Windows go in the same order on every rank (the items' order). */
static void free_items(tp_group *g, op_item *items, int n) {
  for (int i = 0; i < n; ++i) {
    if (is_window(&items[i])) tp_window_free(g, items[i].scratch);
    else tp_device_release(items[i].scratch);
    tp_window_free(g, items[i].own_window); /* its tensors, saved among them */
    tp_linear_release(&items[i].twin);      /* a view of the plan's state: before the plan */
    tp_linear_release(&items[i].plan);
  }
}

/* The state a worker walks the matrix with. */
typedef struct ops_state {
  tp_harness *h;
  tp_group *g;
  const tp_ops_matrix *m;
  volatile tp_job_progress *progress;
} ops_state;

/* The configurations from..end of case ci but the lost ones (those that took
 * workers down), on the case's tensors, measured together. */
static tp_rc run_case(ops_state *st, int ci, int from, const tp_resume *resume) {
  const tp_ops_case *c = &st->m->cases[ci];
  const int end = c->first_config + c->n_configs;
  if (from < c->first_config) from = c->first_config;
  if (end - from > TP_HARNESS_MAX_CASE)
    return TP_FAIL(TP_EINTERNAL, "case %d has %d configurations (at most %d)", ci, end - from,
                   TP_HARNESS_MAX_CASE);
  op_item items[TP_HARNESS_MAX_CASE];
  tp_harness_entry entries[TP_HARNESS_MAX_CASE];
  char labels[TP_HARNESS_MAX_CASE][LABEL_CAP];
  memset(items, 0, sizeof items);
  case_buffers b;
  memset(&b, 0, sizeof b);
  int n = 0, runnable = 0;
  for (int index = from; index < end; ++index) {
    if (tp_resume_is_lost(resume, index)) continue;
    const tp_ops_config *cfg = &st->m->configs[index];
    entries[n].cfg = harness_config(c, cfg, index, labels[n], LABEL_CAP);
    items[n].c = c;
    items[n].cfg = cfg;
    items[n].b = &b;
    items[n].bwd_only = c->pass == TP_PASS_BWD;
    entries[n].item = (tp_item){&op_item_ops, &items[n]};
    runnable += !cfg->rejected;
    n++;
  }
  if (n == 0) return TP_OK;
  tp_linear_plan shape;
  tp_linear_desc desc = case_desc(c);
  tp_rc rc = tp_linear_plan_make(st->g, &desc, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &shape);
  const tp_alloc_owner outer = tp_device_enter(TP_ALLOC_OWNER(TP_ALLOC_CASE, 0));
  if (rc == TP_OK && runnable) rc = alloc_buffers(st->g, &shape, ci, &b);
  tp_device_leave(outer);
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
  if (st->g->rank == 0) tp_job_progress_case_done(st->progress, end, tp_harness_recorded(st->h));
  free_items(st->g, items, n);
  free_buffers(&b);
  const tp_rc released = tp_harness_release_case(entries, n);
  return rc != TP_OK ? rc : released;
}

/* A configuration that took the last workers down is recorded, not retried. */
static tp_rc record_lost(ops_state *st, int index, tp_rc rc, const char *why) {
  const tp_ops_config *cfg = &st->m->configs[index];
  char label[LABEL_CAP];
  tp_harness_config hc =
      harness_config(&st->m->cases[cfg->case_index], cfg, index, label, sizeof label);
  return tp_harness_skip(st->h, &hc, rc, why);
}

tp_rc tp_ops_worker_main(tp_worker_ctx *ctx, const tp_ops_matrix *matrix,
                         const tp_ops_options *opts, tp_collector *collector,
                         volatile tp_job_progress *progress) {
  tp_harness_options ho;
  memset(&ho, 0, sizeof ho);
  ho.command = "ops";
  ho.db_path = opts->db_path;
  ho.command_line = opts->command_line;
  ho.warmup_iters = opts->warmup_iters;
  ho.measure_iters = opts->measure_iters;
  ho.window_timeout_s = opts->window_timeout_s;
  ho.quiet = opts->quiet;
  ho.verbose = opts->verbose;
  ho.format = opts->format;
  ho.trace_iters = opts->trace_iters;
  ho.rounds = opts->rounds;
  ho.shuffle = opts->shuffle;
  ho.seed = opts->seed;
  ho.resume_run = progress->run_id;
  ho.current_config = &progress->current;
  tp_harness *h = NULL;
  TP_TRY(tp_harness_open(ctx, opts->trace ? collector : NULL, &ho, matrix->n_configs, &h));
  if (ctx->rank == 0) progress->run_id = tp_harness_run_id(h);
  const tp_resume *resume = opts->resume;
  tp_harness_set_done(h, resume->start);
  ops_state st = {h, ctx->group, matrix, progress};
  const int lost = resume->lost_reason ? resume->lost_index : -1;
  tp_rc rc = TP_OK;
  if (lost >= 0 && lost < matrix->n_configs) {
    rc = record_lost(&st, lost, resume->lost_rc, resume->lost_reason);
    if (ctx->rank == 0) progress->recorded = tp_harness_recorded(h);
  }
  for (int ci = 0; rc == TP_OK && ci < matrix->n_cases; ++ci) {
    const tp_ops_case *c = &matrix->cases[ci];
    if (c->first_config + c->n_configs <= resume->start) continue;
    rc = run_case(&st, ci, resume->start, resume);
  }
  return tp_harness_close(h, rc, 1);
}
