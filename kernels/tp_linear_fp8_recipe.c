/*
 * tp_linear_fp8_recipe.c — the fp8 recipe's table (tp_recipe.h): the one
 * projection API (tp_linear.h) over the fp8 projection's code
 * (tp_linear_fp8.h: quantize, scaled GEMMs; tp_linear_fp8_comm.c and
 * tp_linear_fp8_bwd.c at TP > 1). Here: the generic plan's fields from the
 * fp8 plan (schedule, reason, engine, workspace, NVTX names), the pass each
 * backend runs, the transfers a trace must show, the outputs and how they
 * are compared, the recipe's own checks (float64 products of the
 * dequantized operands; the gathered operands against the whole's
 * quantization) and the twin a reference's `before` steps.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_linear_fp8.h"
#include "kernels/tp_linear_fp8_comm.h"
#include "kernels/tp_linear_internal.h"
#include "kernels/tp_recipe.h"
#include "kernels/tp_recipe_rules.h"

/* The fp8 recipe's own state of a plan. */
struct tp_recipe_state {
  tp_fp8_linear lin;
};

/* Sampled outputs of the recipe's float64 checks: rows x columns of each output. */
enum { FP8_CHECK_ROWS = 16, FP8_CHECK_COLS = 128 };

tp_fp8_linear *tp_linear_fp8_of(const tp_linear_plan *p) {
  return p->recipe == &tp_recipe_fp8 && p->state ? &p->state->lin : NULL;
}

static tp_fp8_linear *lin_of(const tp_linear_plan *p) { return &p->state->lin; }

static int gathers(const tp_linear_plan *p) { return tp_op_gathers(p->desc.op); }

/* ---- plan ------------------------------------------------------------------------------- */

/* What the plan records of its transport: TP 1 moves nothing; the GEMMs
 * alone move nothing; a fused plan its schedule's pushes; the rest NCCL. */
static void describe_transport(tp_linear_plan *p) {
  const tp_fp8_linear *l = lin_of(p);
  if (l->world == 1) {
    p->engine = "none";
    snprintf(p->reason, sizeof p->reason, "TP 1: no communication");
  } else if (p->backend == TP_BACKEND_GEMM_ONLY) {
    p->engine = "cublaslt";
    snprintf(p->reason, sizeof p->reason,
             "cuBLASLt scaled GEMMs alone, on the operands a stock step quantized%s",
             gathers(p) ? " and gathered" : "");
  } else if (l->fused) {
    p->engine = linear_engine(&l->base);
    snprintf(p->reason, sizeof p->reason, "%s", l->base.reason);
  } else {
    p->engine = "nccl";
    snprintf(p->reason, sizeof p->reason, "%s",
             !gathers(p)                   ? "NCCL reduce-scatter of the fp8 GEMM's bf16 partials"
             : p->desc.comm == TP_COMM_FP8 ? "NCCL all-gather of the fp8 shard and its scales"
                                           : "NCCL all-gather of the bf16 shard, then quantized");
  }
}

/* The generic plan's fields from the fp8 plan l: what the harness records
 * and the entry points check (tp_linear.h). */
static void fill_plan(const tp_group *g, tp_linear_plan *p) {
  const tp_fp8_linear *l = lin_of(p);
  const tp_linear_desc *d = &p->desc;
  p->shard_rows = d->tokens / g->world;
  p->gemm_m = l->m;
  p->gemm_n = l->n;
  p->gemm_k = l->k;
  p->schedule = l->fused ? l->base.schedule : TP_SCHED_NCCL;
  p->chunks = p->bwd_chunks = 1; /* an fp8 shard travels whole with its scales */
  p->sm_blocks = l->base.sm_blocks;
  p->workspace_bytes = l->fused ? l->symm_bytes : 0; /* the stock path's buffers are its own */
  p->saved_bytes = 0;                                /* it keeps no gathered bf16 copy */
  p->comm_bytes = l->comm_bytes;
  p->flops = 2.0 * (double)d->tokens * (double)d->out_features * (double)d->in_features *
             (double)d->n_weights * (d->backward ? 3.0 : 1.0);
  describe_transport(p);
  linear_name_ranges(p);
}

static tp_rc fp8_plan(const tp_group *g, tp_linear_plan *p, tp_schedule requested, int chunks) {
  tp_linear_desc *d = &p->desc;
  char why[sizeof p->reason];
  if (p->backend == TP_BACKEND_DIST &&
      tp_recipe_symm_rejection(d->dtype, d->symm, TP_RECIPE_FOR_OP, why, sizeof why)) {
    snprintf(p->reason, sizeof p->reason, "%s", why);
    return TP_FAIL(TP_EREJECT, "%s", why);
  }
  /* the recipe gathers fp8 again rather than keep a bf16 copy: asked to keep one, it would
   * run as save_gathered=off under save_gathered=on's key (the matrices reject it first) */
  if (d->save_gathered && tp_recipe_save_gathered_rejection(d->dtype, why, sizeof why)) {
    snprintf(p->reason, sizeof p->reason, "%s", why);
    return TP_FAIL(TP_EREJECT, "%s", why);
  }
  p->state = calloc(1, sizeof *p->state);
  if (!p->state) return TP_FAIL(TP_EOOM, "no host memory for an fp8 plan");
  const tp_fp8_linear_desc fd = {d->dtype,        d->op,        d->tokens,   d->in_features,
                                 d->out_features, d->n_weights, d->backward, p->backend,
                                 requested,       chunks,       d->comm};
  const tp_rc rc = tp_fp8_linear_plan(g, &fd, lin_of(p));
  if (rc != TP_OK) {
    snprintf(p->reason, sizeof p->reason, "%s", lin_of(p)->reason);
    return rc;
  }
  fill_plan(g, p);
  return TP_OK;
}

/* ---- prepare and the passes ------------------------------------------------------------- */

static tp_rc fp8_prepare_weights(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  return tp_fp8_linear_prepare_group(g, lin_of(p), (const void *const *)t->w, g->main_stream);
}

static tp_rc need_prepared(const tp_linear_plan *p) {
  if (!lin_of(p)->xq)
    return TP_FAIL(TP_EINTERNAL, "%s %s: not prepared: call tp_linear_prepare_weights",
                   tp_dtype_name(p->desc.dtype), tp_op_name(p->desc.op));
  return TP_OK;
}

static tp_rc fp8_forward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  TP_TRY(need_prepared(p));
  tp_fp8_linear *l = lin_of(p);
  cudaStream_t s = g->main_stream;
  if (p->backend == TP_BACKEND_GEMM_ONLY) return tp_fp8_linear_gemms(l, t->y, s);
  if (p->backend == TP_BACKEND_COMM_ONLY) return tp_fp8_linear_collective(g, l, t->x, t->y, s);
  if (l->world == 1) return tp_fp8_linear_forward(g, l, t->x, t->y, s); /* quantize, GEMMs */
  if (p->backend == TP_BACKEND_DIST && l->fused) return fp8_comm_fused_forward(g, l, t->x, t->y, s);
  return fp8_comm_stock_forward(g, l, t->x, t->y, s);
}

static tp_rc fp8_backward(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t) {
  TP_TRY(need_prepared(p));
  tp_fp8_linear *l = lin_of(p);
  cudaStream_t s = g->main_stream;
  if (p->backend == TP_BACKEND_GEMM_ONLY) return tp_fp8_linear_backward_gemms(l, t->dx, t->dw, s);
  if (p->backend == TP_BACKEND_COMM_ONLY) return tp_fp8_linear_backward_collective(g, l, t->dx, s);
  /* stock, or dist_gemm: the fused pipeline where the plan fuses (l->fused) */
  return tp_fp8_linear_backward(g, l, t->x, (const void *const *)t->dy, t->dx, t->dw, s);
}

/* ---- transfers -------------------------------------------------------------------------- */

static int agrees(tp_amax_agreement a) { return a != TP_AMAX_LOCAL; }

/* NCCL launches of the forward that is not fused: the stock path, or the
 * collective alone (a group of collectives is one launch). */
static int forward_nccl_launches(const tp_linear_plan *p) {
  const tp_fp8_linear *l = lin_of(p);
  if (!gathers(p)) /* the reduce-scatter, after the agreement of the stock step's quantization */
    return 1 + (p->backend == TP_BACKEND_STOCK || p->backend == TP_BACKEND_DIST
                    ? agrees(l->act_agreement)
                    : 0);
  if (p->desc.comm == TP_COMM_BF16) return 1;
  return agrees(l->act_agreement) + 1; /* the agreement, then bytes and scales in one group */
}

/* NCCL launches of the stock backward (tp_linear_fp8_bwd.c's stock path). */
static int backward_stock_launches(const tp_linear_plan *p) {
  const tp_fp8_linear *l = lin_of(p);
  const int tensorwise = l->format == TP_QFMT_FP8,
            t_rows = l->bwd.t_agreement == TP_AMAX_AGREE_ROWS;
  const int dy = agrees(l->bwd.dy_agreement);
  if (gathers(p)) /* X's tensor amax, Xᵀ's row amax, the pieces' group, dY per weight, dX's RS */
    return tensorwise + t_rows + 1 + p->desc.n_weights * dy + 1;
  return dy + t_rows + 1 + tensorwise; /* dY's amax, dYᵀ's, the gathers' group, X's for Xᵀ */
}

/* NCCL launches of the backward's collectives alone (tp_fp8_linear_backward_collective). */
static int backward_collective_launches(const tp_linear_plan *p) {
  const tp_fp8_linear *l = lin_of(p);
  const int dy = agrees(l->bwd.dy_agreement) ? (gathers(p) ? p->desc.n_weights : 1) : 0;
  return dy + (l->bwd.t_amax != NULL) + (l->bwd.x_amax != NULL) + 1 + gathers(p);
}

static int fp8_transfers(const tp_linear_plan *p, int fwd, int bwd) {
  const tp_fp8_linear *l = lin_of(p);
  bwd = bwd && p->desc.backward;
  if (l->world == 1 || p->backend == TP_BACKEND_GEMM_ONLY) return 0;
  const int peers = l->world - 1;
  if (p->backend == TP_BACKEND_DIST && l->fused) /* pushes: one per peer and agreement; one
                                                    per peer forward; the backward's pieces
                                                    (bytes, scales) and its other payload */
    return (fwd ? (1 + fp8_pass_agreements(l, 0)) * peers : 0) +
           (bwd ? (3 + fp8_pass_agreements(l, 1)) * peers : 0);
  int n = fwd ? forward_nccl_launches(p) : 0;
  if (bwd)
    n += p->backend == TP_BACKEND_COMM_ONLY ? backward_collective_launches(p)
                                            : backward_stock_launches(p);
  return n;
}

/* ---- outputs ---------------------------------------------------------------------------- */

/* y (and dw) per weight, then dx: at TP > 1 the reduce-scatter side's y and
 * the all-gather side's dx are this rank's rows of the ranks' summed
 * partials; everything else is every row of this rank's columns, which
 * dist_gemm's per-rank row GEMMs give bit for bit. */
static int fp8_outputs(const tp_linear_plan *p, const tp_linear_tensors *t, tp_linear_output *out,
                       int max) {
  const tp_fp8_linear *l = lin_of(p);
  const int tp = l->world > 1, bwd = p->desc.backward;
  const int y_summed = tp && !gathers(p), dx_summed = tp && gathers(p);
  const int64_t y_rows = y_summed ? p->shard_rows : l->m,
                dx_rows = dx_summed ? p->shard_rows : l->m;
  int n = 0;
  for (int i = 0; i < p->desc.n_weights && n + 2 <= max; ++i) {
    out[n++] =
        (tp_linear_output){linear_y_name(i), t->y[i], (size_t)(y_rows * l->n), y_summed, l->k};
    if (bwd)
      out[n++] = (tp_linear_output){linear_dw_name(i), t->dw[i], (size_t)(l->n * l->k), 0, l->m};
  }
  if (bwd && n < max)
    out[n++] = (tp_linear_output){"dx", t->dx, (size_t)(dx_rows * l->k), dx_summed, l->n};
  return n;
}

/* ---- the recipe's own checks ------------------------------------------------------------ */

void tp_fp8_check_record(const tp_fp8_check *k, const char *name, tp_judgement *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s:fp64", name);
  out->failed = k->nonfinite > 0 || k->outside > 0;
  out->elements = (double)k->elements;
  out->nonfinite = (double)k->nonfinite;
  out->differ = (double)k->outside;
  out->rel_err = k->rel_err;
  out->max_abs_err = k->max_abs_err;
  out->tolerance = k->rel_tol;
}

void tp_fp8_whole_check_record(const tp_fp8_whole_check *w, const char *prefix, tp_dtype dtype,
                               tp_judgement *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%.7s%.23s", prefix, w->name);
  out->exact = 1;
  out->elements = (double)(w->bytes + w->scale_bytes);
  out->differ = (double)(w->differ + w->scale_differ);
  out->failed = out->differ > 0;
  out->rel_err = NAN;
  out->max_abs_err = NAN;
  snprintf(out->reason, sizeof out->reason,
           "%sthe gathered %s operand against quantizing the whole (gathered in bf16 for the "
           "check): %lld of %lld bytes and %lld of %lld scale bytes differ",
           out->failed ? "failed: " : "", tp_dtype_name(dtype), (long long)w->differ,
           (long long)w->bytes, (long long)w->scale_differ, (long long)w->scale_bytes);
}

/* One output's two records: the kernel against the dequantized operands
 * (judged), then quantization against bf16 (reported). */
static void checks_of(const tp_linear_plan *p, const char *name, const tp_fp8_check *k,
                      tp_judgement *out) {
  tp_judgement *judged = &out[0], *reported = &out[1];
  memset(reported, 0, sizeof *reported);
  tp_fp8_check_record(k, name, judged);
  /* at TP > 1 the output whose ranks' partials NCCL sums is checked as the
   * GEMM's local partial: y on the reduce-scatter side, dx on the all-gather side */
  const int partial =
      lin_of(p)->world > 1 && (gathers(p) ? strcmp(name, "dx") == 0 : strcmp(name, "y") == 0);
  snprintf(judged->reason, sizeof judged->reason,
           "%s%s%s against a float64 product of the dequantized %s operands on %lld sampled "
           "elements: %lld outside the per-element bound, %lld not finite, worst |err|/bound %.3g",
           judged->failed ? "failed: " : "", name, partial ? " (local partial)" : "",
           tp_dtype_name(p->desc.dtype), (long long)k->elements, (long long)k->outside,
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
static tp_rc judge_wholes(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                          tp_judgement *out, int max, int *n) {
  tp_fp8_whole_check w[4];
  int nw = 0;
  TP_TRY(tp_fp8_linear_check_wholes(g, lin_of(p), t->x, t->dy[0], w, 4, &nw));
  for (int i = 0; i < nw && *n < max; ++i)
    tp_fp8_whole_check_record(&w[i], "", p->desc.dtype, &out[(*n)++]);
  return TP_OK;
}

static tp_rc judge_backward(const tp_linear_plan *p, const tp_linear_tensors *t,
                            const tp_fp8_accum_model *model, tp_judgement *out, int max, int *n) {
  const tp_fp8_linear *l = lin_of(p);
  const int rows = FP8_CHECK_ROWS, cols = FP8_CHECK_COLS;
  tp_fp8_check k;
  if (*n + 2 <= max) {
    TP_TRY(tp_fp8_linear_check_dx(l, (const void *const *)t->dy, (const void *const *)t->w, t->dx,
                                  rows, cols, model, &k));
    checks_of(p, "dx", &k, out + *n);
    *n += 2;
  }
  for (int i = 0; i < p->desc.n_weights && *n + 2 <= max; ++i) {
    TP_TRY(tp_fp8_linear_check_dw(l, i, t->x, t->dy[i], t->dw[i], rows, cols, model, &k));
    checks_of(p, linear_dw_name(i), &k, out + *n);
    *n += 2;
  }
  return TP_OK;
}

/* The stock plan judges itself; the GEMM alone and dist_gemm are held to
 * stock's outputs instead, the collective alone computes nothing. */
static tp_rc fp8_judge(tp_group *g, const tp_linear_plan *p, const tp_linear_tensors *t,
                       int forward, tp_judgement *out, int max, int *n) {
  if (p->backend != TP_BACKEND_STOCK) return TP_OK;
  int major = 0, minor = 0;
  TP_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g->device));
  TP_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, g->device));
  const tp_fp8_accum_model model = tp_fp8_accum_model_of(major, minor);
  const tp_fp8_linear *l = lin_of(p);
  tp_fp8_check k;
  /* pass bwd: y came from `before`, untimed; the pass's own outputs are judged */
  for (int i = 0; forward && i < p->desc.n_weights && *n + 2 <= max; ++i) {
    TP_TRY(tp_fp8_linear_check(l, i, t->x, t->w[i], t->y[i], FP8_CHECK_ROWS, FP8_CHECK_COLS, &model,
                               &k));
    checks_of(p, linear_y_name(i), &k, out + *n);
    *n += 2;
  }
  TP_TRY(judge_wholes(g, p, t, out, max, n));
  return p->desc.backward ? judge_backward(p, t, &model, out, max, n) : TP_OK;
}

/* ---- twin, memory, release -------------------------------------------------------------- */

/* A view of p's state run as `backend`: its stock step quantizes and gathers
 * into the buffers p's own half reads. */
static tp_rc fp8_twin(const tp_group *g, const tp_linear_plan *p, tp_backend backend,
                      tp_schedule requested, tp_linear_plan *out) {
  (void)g;
  char why[sizeof out->reason];
  if (requested == TP_SCHED_NCCL_WINDOW &&
      tp_recipe_window_rejection(p->desc.dtype, TP_RECIPE_FOR_OP, why, sizeof why))
    return TP_FAIL(TP_EREJECT, "%s", why);
  if (backend == TP_BACKEND_DIST || lin_of(p)->fused)
    return TP_FAIL(TP_EINTERNAL, "an fp8 twin is a stock view of a plan that does not fuse");
  *out = *p;
  out->backend = backend;
  out->twin = 1;
  describe_transport(out);
  linear_name_ranges(out);
  return TP_OK;
}

static size_t fp8_own_bytes(const tp_linear_plan *p) { return lin_of(p)->quant_bytes; }

static void fp8_release(tp_linear_plan *p) {
  if (!p->state) return;
  tp_fp8_linear_release(lin_of(p));
  free(p->state);
  p->state = NULL;
}

const tp_recipe tp_recipe_fp8 = {
    .name = "fp8",
    .plan = fp8_plan,
    .prepare = NULL, /* its buffers are made with its weights: prepare_weights */
    .prepare_weights = fp8_prepare_weights,
    .forward = fp8_forward,
    .backward = fp8_backward,
    .transfers = fp8_transfers,
    .outputs = fp8_outputs,
    .judge = fp8_judge,
    .twin = fp8_twin,
    .own_bytes = fp8_own_bytes,
    .release = fp8_release,
};
