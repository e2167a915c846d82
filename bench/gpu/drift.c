/*
 * drift.c — the training steps of `tpbench drift` (see drift.h): a stack of
 * blocks with their parameters (each weight and gain with its gradient,
 * fp32 master copy and optimizer moments), the step's loss, gradient norm
 * and update, and the agreement of the ranks between phases.
 */
#include "bench/gpu/drift.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/cli/drift_args.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_train.h"

const char *tp_drift_optimizer_name(tp_drift_optimizer optimizer) {
  switch (optimizer) {
  case TP_DRIFT_SGD: return "sgd";
  case TP_DRIFT_ADAMW: return "adamw";
  }
  return "?";
}

tp_rc tp_drift_plan(const tp_group *g, const tp_block_shape *shape, const tp_drift_variant *v,
                    tp_block_plan *plan) {
  if (!shape->sp)
    return TP_FAIL(TP_EREJECT, "drift needs sequence parallelism (the gains' gradients are "
                               "summed over the ranks' row shards)");
  tp_block_shape s = *shape;
  s.backward = 1;
  s.save_gathered = 0;
  s.rs_sum = v->rs_sum;
  return tp_block_plan_make(g, &s, v->backend, v->schedule, v->chunks, plan);
}

/* ---- agreement between ranks ---------------------------------------------------------- */

typedef struct agree_msg {
  int32_t rc;
  char text[412];
} agree_msg;

tp_rc tp_drift_agree(tp_exchange_fn exchange, void *ctx, int world, tp_rc local, char *reason,
                     size_t cap) {
  if (world < 1 || world > TP_MAX_WORLD)
    return TP_FAIL(TP_EINTERNAL, "drift: %d ranks (at most %d)", world, TP_MAX_WORLD);
  agree_msg mine, all[TP_MAX_WORLD];
  memset(&mine, 0, sizeof mine);
  mine.rc = (int32_t)local;
  if (local != TP_OK) snprintf(mine.text, sizeof mine.text, "%s", tp_last_message());
  TP_TRY(exchange(ctx, &mine, sizeof mine, all));
  if (reason && cap) reason[0] = '\0';
  for (int r = 0; r < world; ++r) {
    if (all[r].rc == TP_OK) continue;
    all[r].text[sizeof all[r].text - 1] = '\0';
    const tp_rc rc = (tp_rc)all[r].rc;
    if (reason && cap) {
      if (rc == TP_EREJECT) snprintf(reason, cap, "%s", all[r].text);
      else snprintf(reason, cap, "rank %d: %s", r, all[r].text);
    }
    return TP_FAIL(rc, "%s", reason && cap ? reason : all[r].text);
  }
  return TP_OK;
}

/* ---- the state of one configuration's training ------------------------------------------ */

/* A weight or a gain, with what its update needs. */
typedef struct drift_param {
  void *w;        /* the block's tensor (dtype) */
  void *grad;     /* its gradient: this rank's shard, or a gain's partial sum */
  void *grad_sum; /* gains: the complete gradient summed over ranks; NULL for weights */
  size_t count;   /* elements */
  float *master;  /* fp32 copy of w */
  float *m, *v;   /* AdamW's moments; NULL for SGD */
} drift_param;

typedef struct drift_state {
  tp_group *g;
  const tp_block_plan *plan;
  const tp_drift_recipe *recipe;
  tp_block_tensors *layers; /* recipe->depth blocks */
  drift_param *params;
  int n_params, cap_params;
  void *target;       /* [L, D] */
  float *row_sums;    /* [L] */
  float *all_rows;    /* [T]: every rank's rows, in rank order */
  float *host_rows;   /* [T] */
  float *partials;    /* TP_SUM_SQUARES_PARTIALS */
  double *sumsq;      /* [n_params] */
  double *all_sumsq;  /* [world · n_params] */
  double *host_sumsq; /* [world · n_params] */
  void *gain_gather;  /* [world, D]: every rank's partial of one gain's gradient */
} drift_state;

static size_t elem_bytes(const drift_state *st) { return tp_dtype_bytes(st->plan->shape.dtype); }
static size_t rows_elems(const drift_state *st) {
  return (size_t)st->plan->local_rows * (size_t)st->plan->shape.dim;
}
static ncclDataType_t nccl_type(tp_dtype dt) { return dt == TP_BF16 ? ncclBfloat16 : ncclFloat32; }

static tp_rc device_alloc(void **p, size_t bytes) { return tp_device_malloc(p, bytes ? bytes : 1); }

static tp_rc add_param(drift_state *st, void *w, void *grad, size_t count, int gain) {
  if (st->n_params == st->cap_params) {
    int cap = st->cap_params ? 2 * st->cap_params : 16;
    drift_param *grown = realloc(st->params, (size_t)cap * sizeof *grown);
    if (!grown) return TP_FAIL(TP_EOOM, "no host memory for the drift parameters");
    st->params = grown;
    st->cap_params = cap;
  }
  drift_param *p = &st->params[st->n_params++];
  memset(p, 0, sizeof *p);
  p->w = w;
  p->grad = grad;
  p->count = count;
  if (gain) TP_TRY(device_alloc(&p->grad_sum, count * elem_bytes(st)));
  TP_TRY(device_alloc((void **)&p->master, count * sizeof(float)));
  TP_CUDA(tp_launch_to_fp32(st->plan->shape.dtype, w, p->master, count, st->g->main_stream));
  if (st->recipe->optimizer != TP_DRIFT_ADAMW) return TP_OK;
  TP_TRY(device_alloc((void **)&p->m, count * sizeof(float)));
  TP_TRY(device_alloc((void **)&p->v, count * sizeof(float)));
  TP_CUDA(cudaMemsetAsync(p->m, 0, count * sizeof(float), st->g->main_stream));
  TP_CUDA(cudaMemsetAsync(p->v, 0, count * sizeof(float), st->g->main_stream));
  return TP_OK;
}

/* A block's parameters in layer order: norm gain, QKV, wo; norm gain, w1, w3, w2. */
static tp_rc add_block_params(drift_state *st, tp_block_tensors *t) {
  const tp_block_plan *p = st->plan;
  const size_t D = (size_t)p->shape.dim;
  if (p->has[TP_PROJ_QKV]) {
    const size_t q = (size_t)(p->hq * p->shape.head_dim);
    const size_t k = (size_t)tp_attention_qkv_width(&p->attn);
    TP_TRY(add_param(st, t->attn.g, t->attn.dg, D, 1));
    TP_TRY(add_param(st, t->attn.w_qkv, t->attn.dw_qkv, k * D, 0));
    TP_TRY(add_param(st, t->attn.w_o, t->attn.dw_o, D * q, 0));
  }
  if (p->has[TP_PROJ_W13]) {
    const size_t fl = (size_t)p->ffn_local;
    TP_TRY(add_param(st, t->ffn.g, t->ffn.dg, D, 1));
    TP_TRY(add_param(st, t->ffn.w1, t->ffn.dw1, fl * D, 0));
    TP_TRY(add_param(st, t->ffn.w3, t->ffn.dw3, fl * D, 0));
    TP_TRY(add_param(st, t->ffn.w2, t->ffn.dw2, D * fl, 0));
  }
  return TP_OK;
}

static uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* The initial weights of block i: the recipe's seed alone decides them. */
static uint64_t weight_seed(const tp_drift_recipe *r, int layer) {
  return mix64(r->seed) + (uint64_t)layer + 1;
}

/* Step data: which 0 is the input, 1 the target; sharded rows differ by rank. */
static uint64_t data_seed(const tp_drift_recipe *r, int step, int which, int rank) {
  const uint64_t s = r->same_batch ? 0 : (uint64_t)step;
  return mix64(mix64(r->seed ^ 0xD1F7ull) ^ (s << 1) ^ (uint64_t)which) ^
         ((uint64_t)rank + 1) * 0x9E3779B97F4A7C15ull;
}

static tp_rc alloc_buffers(drift_state *st) {
  const tp_block_plan *p = st->plan;
  const size_t L = (size_t)p->local_rows, T = (size_t)p->tokens, W = (size_t)p->world;
  const size_t n = (size_t)st->n_params;
  TP_TRY(device_alloc(&st->target, rows_elems(st) * elem_bytes(st)));
  TP_TRY(device_alloc((void **)&st->row_sums, L * sizeof(float)));
  TP_TRY(device_alloc((void **)&st->all_rows, T * sizeof(float)));
  TP_TRY(device_alloc((void **)&st->partials, TP_SUM_SQUARES_PARTIALS * sizeof(float)));
  TP_TRY(device_alloc((void **)&st->sumsq, n * sizeof(double)));
  TP_TRY(device_alloc((void **)&st->all_sumsq, W * n * sizeof(double)));
  TP_TRY(device_alloc(&st->gain_gather, W * (size_t)p->shape.dim * elem_bytes(st)));
  /* at least one element each: the shapes are never empty, but malloc(0) may return NULL */
  st->host_rows = calloc(T ? T : 1, sizeof(float));
  st->host_sumsq = calloc(W * n > 0 ? W * n : 1, sizeof(double));
  if (!st->host_rows || !st->host_sumsq)
    return TP_FAIL(TP_EOOM, "no host memory for the drift read-backs");
  return TP_OK;
}

static tp_rc setup(drift_state *st) {
  const tp_drift_recipe *r = st->recipe;
  TP_TRY(tp_block_prepare(st->g, st->plan));
  st->layers = calloc((size_t)r->depth, sizeof *st->layers);
  if (!st->layers) return TP_FAIL(TP_EOOM, "no host memory for %d blocks", r->depth);
  for (int i = 0; i < r->depth; ++i) {
    TP_TRY(tp_block_alloc(st->g, st->plan, weight_seed(r, i), &st->layers[i]));
    TP_TRY(add_block_params(st, &st->layers[i]));
  }
  TP_TRY(alloc_buffers(st));
  TP_CUDA(cudaStreamSynchronize(st->g->main_stream));
  return TP_OK;
}

static void teardown(drift_state *st) {
  if (cudaStreamSynchronize(st->g->main_stream) != cudaSuccess) (void)cudaGetLastError();
  for (int i = 0; i < st->n_params; ++i) {
    drift_param *p = &st->params[i];
    tp_device_release(p->grad_sum);
    tp_device_release(p->master);
    tp_device_release(p->m);
    tp_device_release(p->v);
  }
  free(st->params);
  for (int i = 0; st->layers && i < st->recipe->depth; ++i) tp_block_free(&st->layers[i]);
  free(st->layers);
  void *const device[] = {st->target, st->row_sums,  st->all_rows,   st->partials,
                          st->sumsq,  st->all_sumsq, st->gain_gather};
  for (size_t i = 0; i < sizeof device / sizeof device[0]; ++i) tp_device_release(device[i]);
  free(st->host_rows);
  free(st->host_sumsq);
}

/* ---- one step ------------------------------------------------------------------------------ */

static tp_rc fill_step_data(drift_state *st, int step) {
  const tp_dtype dt = st->plan->shape.dtype;
  const int rank = st->g->rank;
  cudaStream_t s = st->g->main_stream;
  TP_CUDA(tp_launch_fill_random(dt, st->layers[0].x, rows_elems(st),
                                data_seed(st->recipe, step, 0, rank), 1.0f, s));
  TP_CUDA(tp_launch_fill_random(dt, st->target, rows_elems(st),
                                data_seed(st->recipe, step, 1, rank), 1.0f, s));
  return TP_OK;
}

static tp_rc forward_stack(drift_state *st) {
  const size_t bytes = rows_elems(st) * elem_bytes(st);
  for (int i = 0; i < st->recipe->depth; ++i) {
    if (i > 0)
      TP_CUDA(cudaMemcpyAsync(st->layers[i].x, st->layers[i - 1].y, bytes, cudaMemcpyDeviceToDevice,
                              st->g->main_stream));
    TP_TRY(tp_block_forward(st->g, st->plan, &st->layers[i]));
  }
  return TP_OK;
}

static tp_rc backward_stack(drift_state *st) {
  const size_t bytes = rows_elems(st) * elem_bytes(st);
  for (int i = st->recipe->depth - 1; i >= 0; --i) {
    TP_TRY(tp_block_backward(st->g, st->plan, &st->layers[i]));
    if (i > 0)
      TP_CUDA(cudaMemcpyAsync(st->layers[i - 1].dy, st->layers[i].dx, bytes,
                              cudaMemcpyDeviceToDevice, st->g->main_stream));
  }
  return TP_OK;
}

/* The loss of the stack's output (drift.h), then its gradient into the last block's dy. */
static tp_rc loss_and_grad(drift_state *st, double *loss) {
  const tp_block_plan *p = st->plan;
  tp_group *g = st->g;
  tp_block_tensors *last = &st->layers[st->recipe->depth - 1];
  const double elements = (double)p->tokens * (double)p->shape.dim;
  if (!st->host_rows) return TP_FAIL(TP_EINTERNAL, "drift: the loss's read-back buffer is missing");
  TP_CUDA(tp_launch_sq_err_row_sums(p->shape.dtype, last->y, st->target, p->local_rows,
                                    p->shape.dim, st->row_sums, g->main_stream));
  TP_NCCL(ncclAllGather(st->row_sums, st->all_rows, (size_t)p->local_rows, ncclFloat32, g->nccl,
                        g->main_stream),
          g->nccl);
  TP_CUDA(cudaMemcpyAsync(st->host_rows, st->all_rows, (size_t)p->tokens * sizeof(float),
                          cudaMemcpyDeviceToHost, g->main_stream));
  TP_CUDA(tp_launch_sq_err_grad(p->shape.dtype, last->y, st->target, rows_elems(st),
                                (float)(2.0 / elements), last->dy, g->main_stream));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  double sum = 0.0;
  for (int64_t r = 0; r < p->tokens; ++r) sum += (double)st->host_rows[r];
  *loss = sum / elements;
  return TP_OK;
}

/* Each gain's complete gradient: every rank's partial, summed in rank order (fp32). */
static tp_rc sum_gain_grads(drift_state *st) {
  tp_group *g = st->g;
  const tp_dtype dt = st->plan->shape.dtype;
  const size_t D = (size_t)st->plan->shape.dim;
  for (int i = 0; i < st->n_params; ++i) {
    drift_param *p = &st->params[i];
    if (!p->grad_sum) continue;
    TP_NCCL(ncclAllGather(p->grad, st->gain_gather, D, nccl_type(dt), g->nccl, g->main_stream),
            g->nccl);
    const void *srcs[TP_MAX_WORLD];
    for (int r = 0; r < g->world; ++r)
      srcs[r] = (const char *)st->gain_gather + (size_t)r * D * elem_bytes(st);
    TP_CUDA(tp_launch_reduce_sum(dt, p->grad_sum, srcs, g->world, D, g->main_stream));
  }
  return TP_OK;
}

static const void *update_grad(const drift_param *p) { return p->grad_sum ? p->grad_sum : p->grad; }

/* sqrt(Σ over ranks, then parameters, of the sums of squares), gains once (rank 0's). */
static tp_rc grad_norm(drift_state *st, double *norm) {
  tp_group *g = st->g;
  const tp_dtype dt = st->plan->shape.dtype;
  const int n = st->n_params;
  for (int i = 0; i < n; ++i)
    TP_CUDA(tp_launch_sum_squares(dt, update_grad(&st->params[i]), st->params[i].count,
                                  st->partials, st->sumsq + i, g->main_stream));
  TP_NCCL(ncclAllGather(st->sumsq, st->all_sumsq, (size_t)n, ncclFloat64, g->nccl, g->main_stream),
          g->nccl);
  TP_CUDA(cudaMemcpyAsync(st->host_sumsq, st->all_sumsq,
                          (size_t)g->world * (size_t)n * sizeof(double), cudaMemcpyDeviceToHost,
                          g->main_stream));
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  double sum = 0.0;
  for (int r = 0; r < g->world; ++r)
    for (int i = 0; i < n; ++i)
      if (r == 0 || !st->params[i].grad_sum)
        sum += st->host_sumsq[(size_t)r * (size_t)n + (size_t)i];
  *norm = sqrt(sum);
  return TP_OK;
}

static tp_rc update_params(drift_state *st, int step) {
  const tp_drift_recipe *r = st->recipe;
  const tp_dtype dt = st->plan->shape.dtype;
  cudaStream_t s = st->g->main_stream;
  const tp_adamw_step adamw = {(float)r->lr,
                               (float)TP_DRIFT_ADAMW_BETA1,
                               (float)TP_DRIFT_ADAMW_BETA2,
                               (float)TP_DRIFT_ADAMW_EPS,
                               (float)TP_DRIFT_ADAMW_WEIGHT_DECAY,
                               (float)(1.0 - pow(TP_DRIFT_ADAMW_BETA1, step + 1)),
                               (float)(1.0 - pow(TP_DRIFT_ADAMW_BETA2, step + 1))};
  for (int i = 0; i < st->n_params; ++i) {
    drift_param *p = &st->params[i];
    if (r->optimizer == TP_DRIFT_ADAMW)
      TP_CUDA(tp_launch_adamw_step(dt, p->w, p->master, p->m, p->v, update_grad(p), p->count,
                                   &adamw, s));
    else
      TP_CUDA(tp_launch_sgd_step(dt, p->w, p->master, update_grad(p), p->count, (float)r->lr, s));
  }
  return TP_OK;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static tp_rc train_step(drift_state *st, int step, tp_drift_step *out, double *ms) {
  const double start = now_ms();
  out->step = step;
  TP_TRY(fill_step_data(st, step));
  TP_TRY(forward_stack(st));
  TP_TRY(loss_and_grad(st, &out->loss));
  TP_TRY(backward_stack(st));
  TP_TRY(sum_gain_grads(st));
  TP_TRY(grad_norm(st, &out->grad_norm));
  TP_TRY(update_params(st, step));
  TP_CUDA(cudaStreamSynchronize(st->g->main_stream));
  *ms = now_ms() - start;
  return TP_OK;
}

/* The test-only hang: this rank stops before the step's collectives until
 * the watchdog ends the worker (or, without one, the launcher). */
static void hang_if_planted(const tp_drift_guard *guard, const tp_group *g, int step) {
  if (!guard || guard->hang_step != step || guard->hang_rank != g->rank) return;
  fprintf(stderr,
          "tpbench drift: rank %d stops before step %d's collectives (" TP_DRIFT_HANG_ENV
          ", test only)\n",
          g->rank, step);
  for (;;) sleep(1);
}

static void arm(const tp_drift_guard *guard, const char *what) {
  if (guard) tp_watchdog_arm(guard->watchdog, guard->timeout_s, what);
}

tp_rc tp_drift_train_guarded(tp_group *g, tp_exchange_fn exchange, void *ctx,
                             const tp_block_plan *plan, const tp_drift_recipe *recipe,
                             const tp_drift_guard *guard, tp_drift_step *steps, double *step_ms) {
  if (recipe->steps < 1 || recipe->depth < 1 || !(recipe->lr > 0))
    return TP_FAIL(TP_EINTERNAL, "drift recipe: %d steps, depth %d, lr %g", recipe->steps,
                   recipe->depth, recipe->lr);
  drift_state st;
  memset(&st, 0, sizeof st);
  st.g = g;
  st.plan = plan;
  st.recipe = recipe;
  if (guard && guard->done) atomic_store(guard->done, 0);
  arm(guard, "a drift configuration's set-up");
  tp_rc rc = setup(&st);
  char reason[256];
  tp_rc agreed = tp_drift_agree(exchange, ctx, g->world, rc, reason, sizeof reason);
  for (int i = 0; agreed == TP_OK && i < recipe->steps; ++i) {
    arm(guard, "a drift training step");
    hang_if_planted(guard, g, i);
    agreed = train_step(&st, i, &steps[i], &step_ms[i]);
    if (agreed == TP_OK && guard && guard->done) atomic_store(guard->done, i + 1);
  }
  arm(guard, "a drift configuration's teardown");
  teardown(&st);
  if (guard) tp_watchdog_disarm(guard->watchdog);
  return agreed;
}

tp_rc tp_drift_train(tp_group *g, tp_exchange_fn exchange, void *ctx, const tp_block_plan *plan,
                     const tp_drift_recipe *recipe, tp_drift_step *steps, double *step_ms) {
  return tp_drift_train_guarded(g, exchange, ctx, plan, recipe, NULL, steps, step_ms);
}
