/*
 * block_fp8.c — the two checks of `run`'s fp8 layers (see block_fp8.h):
 * each projection against float64 products of its dequantized operands,
 * and every output against the bf16 block's. The projections themselves are
 * tp_linear plans of the fp8 recipe (block.c plans, prepares and runs them
 * as it does bf16's).
 *
 * Which tensors are a projection's operands is block_run.c's wiring; the
 * checks read them again here (proj_io), after the step.
 */
#include "bench/gpu/block_fp8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "kernels/tp_device_alloc.h"

/* A projection's weights in the tensors (block.h's layouts). */
static int proj_weights(const tp_block_tensors *t, tp_block_proj proj, const void **w) {
  switch (proj) {
  case TP_PROJ_QKV: w[0] = t->attn.w_qkv; return 1;
  case TP_PROJ_WO: w[0] = t->attn.w_o; return 1;
  case TP_PROJ_W13:
    w[0] = t->ffn.w1;
    w[1] = t->ffn.w3;
    return 2;
  case TP_PROJ_W2:
  default: w[0] = t->ffn.w2; return 1;
  }
}

/* ---- the check against float64 products --------------------------------------------------- */

/* A projection's operands and outputs in a step (block_run.c's wiring);
 * y_intact: the step leaves y as the projection wrote it. */
typedef struct proj_io {
  const void *x, *w[TP_MAX_WEIGHTS], *dy[TP_MAX_WEIGHTS];
  void *y[TP_MAX_WEIGHTS], *dx, *dw[TP_MAX_WEIGHTS];
  int y_intact;
} proj_io;

static proj_io proj_io_of(const tp_block_plan *p, const tp_block_tensors *t, tp_block_proj proj) {
  const tp_block_attn *a = &t->attn;
  const tp_block_ffn *f = &t->ffn;
  const int bwd = p->shape.backward;
  const void *w[TP_MAX_WEIGHTS] = {NULL};
  proj_weights(t, proj, w);
  switch (proj) {
  case TP_PROJ_QKV: /* RoPE rotates its output in place */
    return (proj_io){a->h, {w[0]}, {a->dqkv}, {a->qkv}, a->dh, {a->dw_qkv}, 0};
  case TP_PROJ_WO: /* in the full block, dy is the gradient around and through the FFN */
    return (proj_io){a->o,   {w[0]}, {p->shape.layer == TP_LAYER_BLOCK ? t->dx1 : t->dy},
                     {a->y}, a->d_o, {a->dw_o},
                     1};
  case TP_PROJ_W13: /* SwiGLU's backward writes the gradients over a and b */
    return (proj_io){f->h, {w[0], w[1]}, {f->a, f->b}, {f->a, f->b}, f->dh, {f->dw1, f->dw3}, !bwd};
  case TP_PROJ_W2:
  default: return (proj_io){f->m, {w[0]}, {t->dy}, {f->y}, f->dm, {f->dw2}, 1};
  }
}

static void add_check(tp_block_fp8_verdict *v, const char *name, const tp_fp8_check *k) {
  tp_fp8_check *s = &v->sum;
  s->elements += k->elements;
  s->nonfinite += k->nonfinite;
  s->outside += k->outside;
  s->worst_ratio = fmax(s->worst_ratio, k->worst_ratio);
  s->rel_err = fmax(s->rel_err, k->rel_err);
  s->rel_tol = fmax(s->rel_tol, k->rel_tol);
  s->max_abs_err = fmax(s->max_abs_err, k->max_abs_err);
  s->rel_err_bf16 = fmax(s->rel_err_bf16, k->rel_err_bf16);
  const size_t used = strlen(v->judged);
  snprintf(v->judged + used, sizeof v->judged - used, "%s%s", v->n_judged ? ", " : "", name);
  v->n_judged++;
}

tp_rc tp_block_fp8_check(const tp_block_plan *p, const tp_block_tensors *t, tp_block_proj proj,
                         const tp_fp8_accum_model *model, tp_block_fp8_verdict *out) {
  memset(out, 0, sizeof *out);
  const tp_fp8_linear *lin = tp_linear_fp8_of(&p->proj[proj]);
  if (!lin || !p->has[proj])
    return TP_FAIL(TP_EINTERNAL, "fp8 check of %s: not an fp8 projection of this block",
                   tp_block_proj_name(proj));
  static const char *y_names[TP_MAX_WEIGHTS] = {"y", "y1", "y2", "y3"};
  static const char *dw_names[TP_MAX_WEIGHTS] = {"dw", "dw1", "dw2", "dw3"};
  const proj_io io = proj_io_of(p, t, proj);
  const int nw = lin->desc.n_weights, r = TP_BLOCK_FP8_CHECK_ROWS, c = TP_BLOCK_FP8_CHECK_COLS;
  tp_fp8_check k;
  for (int i = 0; io.y_intact && i < nw; ++i) {
    TP_TRY(tp_fp8_linear_check(lin, i, io.x, io.w[i], io.y[i], r, c, model, &k));
    add_check(out, y_names[i], &k);
  }
  if (!p->shape.backward) return TP_OK;
  TP_TRY(tp_fp8_linear_check_dx(lin, io.dy, io.w, io.dx, r, c, model, &k));
  add_check(out, "dx", &k);
  for (int i = 0; i < nw; ++i) {
    TP_TRY(tp_fp8_linear_check_dw(lin, i, io.x, io.dy[i], io.dw[i], r, c, model, &k));
    add_check(out, dw_names[i], &k);
  }
  return TP_OK;
}

tp_rc tp_block_fp8_check_wholes(tp_group *g, const tp_block_plan *p, const tp_block_tensors *t,
                                tp_block_proj proj, tp_fp8_whole_check *out, int max, int *n) {
  *n = 0;
  const tp_fp8_linear *lin = tp_linear_fp8_of(&p->proj[proj]);
  if (!lin || !p->has[proj]) return TP_OK;
  const proj_io io = proj_io_of(p, t, proj);
  return tp_fp8_linear_check_wholes(g, lin, io.x, io.dy[0], out, max, n);
}

/* ---- against the bf16 block ---------------------------------------------------------------- */

enum { DIFF_DOUBLES = 10 }; /* tp_launch_compare's 5 of out vs ref, then 5 of ref vs itself */

/* Device copies of the outputs, to put back after the reference's step. */
typedef struct saved_outputs {
  tp_block_output out[TP_BLOCK_MAX_OUTPUTS];
  void *copy[TP_BLOCK_MAX_OUTPUTS];
  int n;
  double *acc; /* DIFF_DOUBLES per output */
} saved_outputs;

static void free_saved(saved_outputs *s) {
  for (int i = 0; i < s->n; ++i) tp_device_release(s->copy[i]);
  tp_device_release(s->acc);
  memset(s, 0, sizeof *s);
}

static tp_rc save_outputs(const tp_block_plan *p, tp_block_tensors *t, cudaStream_t st,
                          saved_outputs *s) {
  const size_t e = tp_dtype_bytes(p->shape.dtype);
  const int n = tp_block_outputs(p, t, s->out);
  TP_TRY(tp_device_malloc((void **)&s->acc, sizeof(double) * DIFF_DOUBLES * (size_t)n));
  TP_CUDA(cudaMemsetAsync(s->acc, 0, sizeof(double) * DIFF_DOUBLES * (size_t)n, st));
  for (int i = 0; i < n; ++i) {
    TP_TRY(tp_device_malloc(&s->copy[i], s->out[i].count * e));
    s->n = i + 1;
    TP_CUDA(cudaMemcpyAsync(s->copy[i], s->out[i].ptr, s->out[i].count * e,
                            cudaMemcpyDeviceToDevice, st));
  }
  return TP_OK;
}

/* After the reference's step: each saved output against the reference's,
 * the reference's own non-finite count, and the saved output put back. */
static tp_rc compare_and_restore(tp_dtype dt, const saved_outputs *s, cudaStream_t st) {
  const size_t e = tp_dtype_bytes(dt);
  for (int i = 0; i < s->n; ++i) {
    double *acc = s->acc + (size_t)DIFF_DOUBLES * (size_t)i;
    TP_CUDA(tp_launch_compare(dt, s->copy[i], s->out[i].ptr, s->out[i].count, acc, st));
    TP_CUDA(tp_launch_compare(dt, s->out[i].ptr, s->out[i].ptr, s->out[i].count, acc + 5, st));
    TP_CUDA(cudaMemcpyAsync(s->out[i].ptr, s->copy[i], s->out[i].count * e,
                            cudaMemcpyDeviceToDevice, st));
  }
  return TP_OK;
}

static tp_rc read_diffs(const saved_outputs *s, cudaStream_t st, tp_block_diff *out) {
  double host[DIFF_DOUBLES * TP_BLOCK_MAX_OUTPUTS];
  TP_CUDA(cudaMemcpyAsync(host, s->acc, sizeof(double) * DIFF_DOUBLES * (size_t)s->n,
                          cudaMemcpyDeviceToHost, st));
  TP_CUDA(cudaStreamSynchronize(st));
  for (int i = 0; i < s->n; ++i) {
    const double *a = host + (size_t)DIFF_DOUBLES * (size_t)i;
    out[i] =
        (tp_block_diff){s->out[i].name, (double)s->out[i].count, a[0], a[1], a[2], a[4], a[5 + 4]};
  }
  return TP_OK;
}

tp_rc tp_block_fp8_against(tp_group *g, const tp_block_plan *p, const tp_block_plan *ref,
                           tp_block_tensors *t, tp_block_diff *out, int *n) {
  *n = 0;
  if (ref->shape.dtype != p->shape.dtype || ref->local_rows != p->local_rows ||
      ref->shape.layer != p->shape.layer || ref->shape.backward != p->shape.backward)
    return TP_FAIL(TP_EINTERNAL, "the reference block has another shape");
  cudaStream_t st = g->main_stream;
  saved_outputs s;
  memset(&s, 0, sizeof s);
  tp_rc rc = save_outputs(p, t, st, &s);
  if (rc == TP_OK) rc = tp_block_step(g, ref, t);
  if (rc == TP_OK) rc = compare_and_restore(p->shape.dtype, &s, st);
  if (rc == TP_OK) rc = read_diffs(&s, st, out);
  if (rc == TP_OK) *n = s.n;
  free_saved(&s);
  return rc;
}
