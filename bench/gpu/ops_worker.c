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
 * The references (the GEMM alone, the collective alone) each keep a private
 * scratch that a stock step fills before every window: the GEMM alone then
 * reads the gathered input the all-gather delivers, the collective alone
 * reduces the partial the GEMM makes — the same data as the stock op, which
 * the GEMM alone proves by matching stock's gather-side outputs bit for bit.
 *
 * An fp8 dtype's case (issue 15) runs kernels/tp_linear_fp8.h on the same
 * bf16 tensors: its stock step quantizes the activation and runs the scaled
 * GEMMs (the weights are quantized once, in prepare, untimed); the GEMM
 * alone runs the scaled GEMMs on the activation its `before` quantized, and
 * must match stock bit for bit. The stock step also judges its outputs
 * against a float64 product of the dequantized operands on sampled rows and
 * columns (tp_linear_fp8_check, with the device's accumulation model), and
 * reports the error against the unquantized bf16 operands as a check of its
 * own ("y:bf16", not judged). With the backward (pass bwd or fwd+bwd, TP 1)
 * the step also transposes and quantizes Xᵀ, dY and dYᵀ and runs the dgrad
 * and wgrad GEMMs (tp_linear_fp8.h); dx and each dw are judged the same way
 * ("dx:fp64", "dw:fp64", and their ":bf16" errors reported), and the GEMMs
 * alone run every GEMM of the pass on operands their `before` quantized.
 * Pass bwd times the backward alone, its forward run once in `before`.
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
#include "kernels/tp_linear_fp8.h"
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
  int bwd_only;         /* pass bwd: the window times the backward alone */
  tp_linear_plan stock; /* references: the stock op that fills their scratch */
  void *scratch;        /* references: their own stock-path scratch (nccl-window: a window) */
  case_buffers own;     /* nccl-window: the case's tensors again, in the window below */
  void *own_window;     /* nccl-window: the window its tensors are carved from */
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

static tp_rc op_plan(void *self, tp_group *g) {
  op_item *it = self;
  tp_linear_desc desc = case_desc(it->c);
  desc.save_gathered = it->c->save_gathered;
  if (it->cfg->backend == TP_BACKEND_DIST) desc.symm = it->cfg->symm;
  tp_rc rc = tp_linear_plan_make(g, &desc, it->cfg->backend, it->cfg->schedule,
                                 it->cfg->axes.chunks, &it->plan);
  if (rc == TP_OK) rc = check_nccl_heap(g, &it->plan);
  /* a window reference's scratch is filled by the window stock op: the data its own collective
   * delivers there */
  if (rc == TP_OK && is_reference(it))
    rc = tp_linear_plan_make(g, &desc, TP_BACKEND_STOCK,
                             is_window(it) ? TP_SCHED_NCCL_WINDOW : TP_SCHED_AUTO, 0, &it->stock);
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

static tp_rc op_prepare(void *self, tp_group *g) {
  op_item *it = self;
  /* first: a window plan on a communicator without symmetric memory is rejected here */
  TP_TRY(tp_linear_prepare(g, &it->plan));
  if (is_window(it)) TP_TRY(own_window_tensors(it, g));
  if (it->plan.saved_bytes && !it->b->saved) /* a case tensor, made by its first user */
    TP_TRY(
        tp_device_malloc_as(TP_ALLOC_OWNER(TP_ALLOC_CASE, 0), &it->b->saved, it->plan.saved_bytes));
  if (is_reference(it)) {
    TP_TRY(tp_linear_prepare(g, &it->stock));
    if (is_window(it)) TP_TRY(tp_window_alloc(g, it->stock.workspace_bytes, &it->scratch));
    else TP_TRY(tp_device_malloc(&it->scratch, it->stock.workspace_bytes));
  }
  return TP_OK;
}

/* What a window needs and does not make: for a reference, its scratch
 * filled by one stock step (the data the skipped half delivers); for a
 * backward window, the forward's state. */
static tp_rc op_before(void *self, tp_group *g) {
  op_item *it = self;
  if (is_reference(it)) {
    tp_linear_tensors st = tensors_of(&it->stock, it->b, it->scratch);
    TP_TRY(tp_linear_step(g, &it->stock, &st));
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

/* How one output is judged: bit for bit where no rank's partials meet in it
 * (the gather side's y and dW, the scatter side's dx and dW), else within
 * the tolerance for ranks summed; a GEMM alone computes only the former. */
static tp_item_output output_of(const op_item *it, const char *name, const void *ptr, size_t count,
                                int summed, int64_t k) {
  const int world = it->plan.world;
  tp_item_output o = {
      name, ptr, count, summed ? TP_RULE_TOLERANCE : TP_RULE_EXACT, k, summed ? world : 1, 1, NULL};
  if (it->cfg->backend == TP_BACKEND_GEMM_ONLY && summed) {
    o.rule = TP_RULE_SKIP;
    o.skip_why = "the GEMM alone does not sum the ranks' partials";
  }
  return o;
}

/* y (and dw) per weight, then dx: the tensors stock and dist_gemm must agree on. */
static int op_outputs(void *self, tp_item_output *out, int max) {
  static const char *y_names[TP_MAX_WEIGHTS] = {"y", "y1", "y2", "y3"};
  static const char *dw_names[TP_MAX_WEIGHTS] = {"dw", "dw1", "dw2", "dw3"};
  op_item *it = self;
  const tp_linear_plan *p = &it->plan;
  const int gather = tp_op_gathers(p->desc.op), sp = p->desc.sp;
  int n = 0;
  for (int i = 0; i < p->desc.n_weights && n + 2 <= max; ++i) {
    /* y: summed on the scatter side (reduce-scatter, or all-reduce without SP) */
    out[n++] = output_of(it, y_names[i], it->b->y[i], tp_linear_y_elems(p), !gather, p->gemm_k);
    if (p->desc.backward)
      out[n++] = output_of(it, dw_names[i], it->b->dw[i], tp_linear_w_elems(p), 0, p->gemm_m);
  }
  /* dx: summed on the gather side; on the scatter side only without SP (replicated dy) */
  if (p->desc.backward && n < max)
    out[n++] = output_of(it, "dx", it->b->dx, tp_linear_x_elems(p), gather || !sp, p->gemm_n);
  return n;
}

static void op_info(void *self, tp_item_info *info) {
  op_item *it = self;
  const tp_linear_plan *p = &it->plan;
  memset(info, 0, sizeof *info);
  info->dtype = it->c->dtype;
  if (!it->have_plan) return;
  info->planned = 1;
  info->schedules[0] =
      (tp_schedule_choice){it->cfg->axes.op_or_layer, tp_schedule_name(p->schedule),
                           tp_plan_engine(p), p->chunks, p->reason};
  info->n_schedules = 1;
  info->schedule_label = tp_schedule_name(p->schedule);
  info->bytes_moved = (double)p->comm_bytes;
  /* the symmetric workspace (or stock scratch) plus a saved gathered input */
  info->workspace_bytes = (int64_t)(p->workspace_bytes + p->saved_bytes);
  info->transfers_per_step =
      tp_linear_transfers(p, !it->bwd_only, tp_pass_has_backward(it->c->pass));
  if (it->cfg->backend == TP_BACKEND_DIST)
    info->fused = p->backend == TP_BACKEND_DIST && p->schedule != TP_SCHED_NCCL
                      ? TP_FUSED_ALL
                      : TP_FUSED_STOCK_PATH;
  if (is_reference(it)) info->workspace_bytes += (int64_t)it->stock.workspace_bytes;
}

static const tp_item_ops op_item_ops = {"op",    op_plan,    op_prepare, op_before,
                                        op_step, op_outputs, op_info,    NULL};

/* ---- an fp8 op as a harness item --------------------------------------------------------- */

/* Sampled outputs of the fp8 check: rows x columns of each output. */
enum { FP8_CHECK_ROWS = 16, FP8_CHECK_COLS = 128 };

typedef struct fp8_item {
  const tp_ops_case *c;
  const tp_ops_config *cfg;
  case_buffers *b;
  tp_fp8_linear lin;
  int have_plan;
  int bwd_only; /* pass bwd: the window times the backward alone */
} fp8_item;

static int fp8_has_backward(const fp8_item *it) { return tp_pass_has_backward(it->c->pass); }

static int fp8_gemm_alone(const fp8_item *it) { return it->cfg->backend == TP_BACKEND_GEMM_ONLY; }

static int fp8_comm_alone(const fp8_item *it) { return it->cfg->backend == TP_BACKEND_COMM_ONLY; }

static tp_rc fp8_plan(void *self, tp_group *g) {
  fp8_item *it = self;
  if (it->cfg->schedule == TP_SCHED_NCCL_WINDOW)
    return TP_FAIL(TP_EREJECT, "%s: the stock path has no nccl-window variant for the fp8 formats",
                   tp_dtype_name(it->c->dtype));
  /* TP 1 runs stock and the GEMM alone (the matrix rejects the rest); TP > 1
   * every backend, through tp_linear_fp8_comm.h */
  const tp_fp8_linear_desc d = {it->c->dtype,         it->c->proj.op,   it->c->tokens,
                                it->c->proj.k,        it->c->proj.n,    it->c->proj.n_weights,
                                fp8_has_backward(it), it->cfg->backend, it->cfg->schedule,
                                it->cfg->axes.chunks, it->c->comm};
  tp_rc rc = tp_fp8_linear_plan(g, &d, &it->lin);
  it->have_plan = rc == TP_OK;
  return rc;
}

static tp_rc fp8_prepare(void *self, tp_group *g) {
  fp8_item *it = self;
  return tp_fp8_linear_prepare_group(g, &it->lin, (const void *const *)it->b->w, g->main_stream);
}

/* The GEMMs alone read operands quantized here, untimed, and the
 * collective alone moves what a stock step left here (the quantized shard
 * and its scales, or the bf16 partial); a backward window (pass bwd) has
 * its forward run here once. */
static tp_rc fp8_before(void *self, tp_group *g) {
  fp8_item *it = self;
  cudaStream_t s = g->main_stream;
  case_buffers *b = it->b;
  if (!fp8_gemm_alone(it) && !fp8_comm_alone(it))
    return it->bwd_only ? tp_fp8_linear_forward(g, &it->lin, b->x, b->y, s) : TP_OK;
  TP_TRY(tp_fp8_linear_quantize_input(g, &it->lin, b->x, s));
  if (fp8_comm_alone(it) || it->bwd_only) TP_TRY(tp_fp8_linear_gemms(&it->lin, b->y, s));
  if (!fp8_has_backward(it)) return TP_OK;
  TP_TRY(tp_fp8_linear_quantize_grads(g, &it->lin, b->x, (const void *const *)b->dy, s));
  /* the collective alone reduce-scatters the partial a stock backward's GEMMs left */
  return fp8_comm_alone(it) ? tp_fp8_linear_backward_gemms(&it->lin, b->dx, b->dw, s) : TP_OK;
}

static tp_rc fp8_step(void *self, tp_group *g) {
  fp8_item *it = self;
  cudaStream_t s = g->main_stream;
  case_buffers *b = it->b;
  if (fp8_comm_alone(it)) {
    if (!it->bwd_only) TP_TRY(tp_fp8_linear_collective(g, &it->lin, b->x, b->y, s));
    if (!fp8_has_backward(it)) return TP_OK;
    return tp_fp8_linear_backward_collective(g, &it->lin, b->dx, s);
  }
  if (!it->bwd_only)
    TP_TRY(fp8_gemm_alone(it) ? tp_fp8_linear_gemms(&it->lin, b->y, s)
                              : tp_fp8_linear_forward(g, &it->lin, b->x, b->y, s));
  if (!fp8_has_backward(it)) return TP_OK;
  if (fp8_gemm_alone(it)) return tp_fp8_linear_backward_gemms(&it->lin, b->dx, b->dw, s);
  return tp_fp8_linear_backward(g, &it->lin, b->x, (const void *const *)b->dy, b->dx, b->dw, s);
}

/* The forward's output i as the harness compares it with stock's: bit for
 * bit where no rank's partials meet (the gather side: dist_gemm's chunk
 * GEMMs give the rows of the whole GEMM), within the tolerance for ranks
 * summed on the scatter side at TP > 1 (NCCL's bf16 reduce-scatter against
 * dist_gemm's fp32 sum), which the GEMM alone does not compute. */
static tp_item_output fp8_y_output(const fp8_item *it, const char *name, int i) {
  const tp_fp8_linear *l = &it->lin;
  const int summed = l->world > 1 && !tp_op_gathers(it->c->proj.op);
  const int64_t rows = summed ? l->shard_rows : l->m;
  tp_item_output o = {name,
                      it->b->y[i],
                      (size_t)(rows * l->n),
                      summed ? TP_RULE_TOLERANCE : TP_RULE_EXACT,
                      l->k,
                      summed ? l->world : 1,
                      1,
                      NULL};
  if (summed && fp8_gemm_alone(it)) {
    o.rule = TP_RULE_SKIP;
    o.skip_why = "the GEMM alone does not sum the ranks' partials";
  }
  return o;
}

/* dx as the harness compares it: at TP > 1 the all-gather side's dx is this
 * rank's rows of the ranks' summed partials (NCCL's bf16 reduce-scatter
 * against dist_gemm's fp32 sum: within the tolerance; the GEMM alone does
 * not sum), the reduce-scatter side's every row of this rank's K columns
 * (dist_gemm's per-rank row GEMMs give the whole GEMM's rows: bit for bit). */
static tp_item_output fp8_dx_output(const fp8_item *it) {
  const tp_fp8_linear *l = &it->lin;
  const int summed = l->world > 1 && tp_op_gathers(it->c->proj.op);
  const int64_t rows = summed ? l->shard_rows : l->m;
  tp_item_output o = {"dx",
                      it->b->dx,
                      (size_t)(rows * l->k),
                      summed ? TP_RULE_TOLERANCE : TP_RULE_EXACT,
                      l->n,
                      summed ? l->world : 1,
                      1,
                      NULL};
  if (summed && fp8_gemm_alone(it)) {
    o.rule = TP_RULE_SKIP;
    o.skip_why = "the GEMM alone does not sum the ranks' partials";
  }
  return o;
}

/* y (and dw) per weight, then dx: the GEMMs alone must equal stock bit for
 * bit (the same quantized operands, the same GEMMs). */
static int fp8_outputs(void *self, tp_item_output *out, int max) {
  static const char *y_names[TP_MAX_WEIGHTS] = {"y", "y1", "y2", "y3"};
  static const char *dw_names[TP_MAX_WEIGHTS] = {"dw", "dw1", "dw2", "dw3"};
  fp8_item *it = self;
  const tp_fp8_linear *l = &it->lin;
  const int bwd = fp8_has_backward(it);
  int n = 0;
  for (int i = 0; i < it->c->proj.n_weights && n + 2 <= max; ++i) {
    out[n++] = fp8_y_output(it, y_names[i], i);
    if (bwd)
      out[n++] = (tp_item_output){
          dw_names[i], it->b->dw[i], (size_t)(l->n * l->k), TP_RULE_EXACT, l->m, 1, 1, NULL};
  }
  if (bwd && n < max) out[n++] = fp8_dx_output(it);
  return n;
}

static void fp8_info(void *self, tp_item_info *info) {
  fp8_item *it = self;
  memset(info, 0, sizeof *info);
  info->dtype = TP_BF16; /* the outputs' element type: an fp8 recipe stores bf16 */
  if (!it->have_plan) return;
  info->planned = 1;
  const tp_fp8_linear *l = &it->lin;
  if (l->world == 1)
    info->schedules[0] = (tp_schedule_choice){it->cfg->axes.op_or_layer, "nccl", "none", 1,
                                              "TP 1: no communication"};
  else if (l->fused)
    info->schedules[0] =
        (tp_schedule_choice){it->cfg->axes.op_or_layer, tp_schedule_name(l->base.schedule),
                             tp_plan_engine(&l->base), 1, l->base.reason};
  else
    info->schedules[0] = (tp_schedule_choice){
        it->cfg->axes.op_or_layer, "nccl", "nccl", 1,
        tp_op_gathers(it->c->proj.op)
            ? (it->c->comm == TP_COMM_FP8 ? "NCCL all-gather of the fp8 shard and its scales"
                                          : "NCCL all-gather of the bf16 shard, then quantized")
            : "NCCL reduce-scatter of the fp8 GEMM's bf16 partials"};
  info->n_schedules = 1;
  info->schedule_label =
      l->fused ? tp_schedule_name(l->base.schedule) : tp_dtype_name(it->c->dtype);
  info->bytes_moved = (double)l->comm_bytes;
  /* the quantized copies, their scales, the communication's buffers, the
   * symmetric workspace of a fused pipeline and cuBLASLt's workspace */
  info->workspace_bytes = (int64_t)tp_fp8_linear_workspace_bytes(l);
  if (it->cfg->backend == TP_BACKEND_DIST)
    info->fused = l->fused ? TP_FUSED_ALL : TP_FUSED_STOCK_PATH;
}

/* One output's check as the harness records it: the kernel against the
 * dequantized operands (judged), then quantization against bf16 (reported). */
static void fp8_checks_of(const fp8_item *it, const char *name, const tp_fp8_check *k,
                          tp_item_check *out) {
  tp_item_check *judged = &out[0], *reported = &out[1];
  memset(reported, 0, sizeof *reported);
  tp_fp8_check_as_item(k, name, judged);
  /* at TP > 1 the output whose ranks' partials NCCL sums is checked as the
   * GEMM's local partial: y on the reduce-scatter side, dx on the all-gather side */
  const int gathers = tp_op_gathers(it->c->proj.op);
  const int partial =
      it->lin.world > 1 && (gathers ? strcmp(name, "dx") == 0 : strcmp(name, "y") == 0);
  snprintf(judged->reason, sizeof judged->reason,
           "%s%s%s against a float64 product of the dequantized %s operands on %lld sampled "
           "elements: %lld outside the per-element bound, %lld not finite, worst |err|/bound %.3g",
           judged->failed ? "failed: " : "", name, partial ? " (local partial)" : "",
           tp_dtype_name(it->c->dtype), (long long)k->elements, (long long)k->outside,
           (long long)k->nonfinite, k->worst_ratio);
  snprintf(reported->name, sizeof reported->name, "%s:bf16", name);
  reported->elements = (double)k->elements;
  reported->nonfinite = (double)k->nonfinite;
  reported->rel_err = k->rel_err_bf16;
  reported->max_abs_err = NAN;
  reported->tolerance = NAN;
  /* at TP > 1 a gathered operand (X with comm_dtype fp8, the backward's
   * sequence-sharded one) exists on no rank in bf16: its product is NaN */
  const int no_bf16 = isnan(k->rel_err_bf16);
  reported->not_checked = no_bf16;
  snprintf(reported->reason, sizeof reported->reason,
           no_bf16 ? "not available: no rank holds the gathered bf16 operand %s's bf16 product "
                     "needs (only its fp8 form travels)"
                   : "reported, not judged: %s's error against a float64 product of the "
                     "unquantized bf16 operands (what quantization costs)",
           name);
}

/* At TP > 1 the operands the stock step gathered in fp8 against quantizing
 * the whole, bit for bit (tp_fp8_linear_check_wholes; collective). */
static tp_rc fp8_judge_wholes(const fp8_item *it, tp_group *g, tp_item_check *out, int max,
                              int *n) {
  tp_fp8_whole_check w[4];
  int nw = 0;
  TP_TRY(tp_fp8_linear_check_wholes(g, &it->lin, it->b->x, it->b->dy[0], w, 4, &nw));
  for (int i = 0; i < nw && *n < max; ++i)
    tp_fp8_whole_check_as_item(&w[i], "", it->c->dtype, &out[(*n)++]);
  return TP_OK;
}

static tp_rc fp8_judge(void *self, tp_group *g, tp_item_check *out, int max, int *n) {
  fp8_item *it = self;
  *n = 0;
  /* the GEMM alone and dist_gemm are held to stock's outputs instead; the
   * collective alone computes nothing */
  if (it->cfg->backend != TP_BACKEND_STOCK) return TP_OK;
  int major = 0, minor = 0;
  TP_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g->device));
  TP_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, g->device));
  const tp_fp8_accum_model model = tp_fp8_accum_model_of(major, minor);
  static const char *y_names[TP_MAX_WEIGHTS] = {"y", "y1", "y2", "y3"};
  static const char *dw_names[TP_MAX_WEIGHTS] = {"dw", "dw1", "dw2", "dw3"};
  const case_buffers *b = it->b;
  tp_fp8_check k;
  /* pass bwd: y came from `before`, untimed; the pass's own outputs are judged */
  for (int i = 0; !it->bwd_only && i < it->c->proj.n_weights && *n + 2 <= max; ++i) {
    TP_TRY(tp_fp8_linear_check(&it->lin, i, b->x, b->w[i], b->y[i], FP8_CHECK_ROWS, FP8_CHECK_COLS,
                               &model, &k));
    fp8_checks_of(it, y_names[i], &k, out + *n);
    *n += 2;
  }
  TP_TRY(fp8_judge_wholes(it, g, out, max, n));
  if (!fp8_has_backward(it)) return TP_OK;
  if (*n + 2 <= max) {
    TP_TRY(tp_fp8_linear_check_dx(&it->lin, (const void *const *)b->dy, (const void *const *)b->w,
                                  b->dx, FP8_CHECK_ROWS, FP8_CHECK_COLS, &model, &k));
    fp8_checks_of(it, "dx", &k, out + *n);
    *n += 2;
  }
  for (int i = 0; i < it->c->proj.n_weights && *n + 2 <= max; ++i) {
    TP_TRY(tp_fp8_linear_check_dw(&it->lin, i, b->x, b->dy[i], b->dw[i], FP8_CHECK_ROWS,
                                  FP8_CHECK_COLS, &model, &k));
    fp8_checks_of(it, dw_names[i], &k, out + *n);
    *n += 2;
  }
  return TP_OK;
}

static const tp_item_ops fp8_item_ops = {"op",     fp8_plan,    fp8_prepare, fp8_before,
                                         fp8_step, fp8_outputs, fp8_info,    fp8_judge};

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
static void free_items(tp_group *g, op_item *items, fp8_item *fp8, int n) {
  for (int i = 0; i < n; ++i) {
    if (is_window(&items[i])) tp_window_free(g, items[i].scratch);
    else tp_device_release(items[i].scratch);
    tp_window_free(g, items[i].own_window); /* its tensors, saved among them */
    tp_fp8_linear_release(&fp8[i].lin);
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
  fp8_item fp8[TP_HARNESS_MAX_CASE];
  tp_harness_entry entries[TP_HARNESS_MAX_CASE];
  char labels[TP_HARNESS_MAX_CASE][LABEL_CAP];
  memset(items, 0, sizeof items);
  memset(fp8, 0, sizeof fp8);
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
    if (tp_dtype_is_fp8(c->dtype)) {
      fp8[n].c = c;
      fp8[n].cfg = cfg;
      fp8[n].b = &b;
      fp8[n].bwd_only = c->pass == TP_PASS_BWD;
      entries[n].item = (tp_item){&fp8_item_ops, &fp8[n]};
    }
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
  free_items(st->g, items, fp8, n);
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
