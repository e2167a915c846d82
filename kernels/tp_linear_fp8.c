/*
 * tp_linear_fp8.c — the fp8 projection of tp_linear_fp8.h: plan (the
 * rules, cuBLASLt's answer for each GEMM kind), prepare (weights, and for
 * the backward their transposes, quantized once), the timed forward
 * (quantize X with the amax agreement, scaled GEMMs), the timed backward
 * (quantize dY along N; dYᵀ and Xᵀ transposed and quantized along T in
 * one pass each; dgrad and wgrad GEMMs) and the sampled float64 checks.
 */
#include "kernels/tp_linear_fp8.h"
#include "kernels/tp_linear_fp8_comm.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_quant_device.h"
#include "kernels/tp_recipe_rules.h"

tp_rc fp8_reject(tp_fp8_linear *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->reason, sizeof p->reason, fmt, ap);
  va_end(ap);
  return TP_FAIL(TP_EREJECT, "%s", p->reason);
}

/* The recipe's rules (kernels/tp_recipe_rules.h: the matrix asks the same,
 * so a rejection reads the same here as in `ops --list`), and what the ranks
 * agree on before they quantize each operand. */
static tp_rc check_rules(tp_fp8_linear *p) {
  const tp_fp8_linear_desc *d = &p->desc;
  const tp_recipe_case c = {d->dtype,
                            d->op,
                            d->tokens,
                            d->out_features,
                            d->in_features,
                            p->world,
                            d->backward ? TP_PASS_FWD_BWD : TP_PASS_FWD,
                            d->comm};
  tp_recipe_agreements agree;
  char why[sizeof p->reason];
  if (tp_recipe_rejection(&c, &agree, why, sizeof why) ||
      (d->schedule == TP_SCHED_NCCL_WINDOW &&
       tp_recipe_window_rejection(d->dtype, TP_RECIPE_FOR_OP, why, sizeof why)) ||
      (d->backend == TP_BACKEND_DIST &&
       tp_recipe_dist_rejection(&c, d->schedule, d->chunks, why, sizeof why)))
    return fp8_reject(p, "%s", why);
  p->act_agreement = agree.x;
  p->bwd.dy_agreement = agree.dy;
  p->bwd.t_agreement = agree.t;
  p->bwd.t_rows = agree.t_rows;
  return TP_OK;
}

/* The backward's scale shapes and cuBLASLt's answer for its two GEMM kinds:
 * dgrad m = T, n = K, k = N; wgrad m = N, n = K, k = T. */
static tp_rc plan_backward(tp_fp8_linear *p) {
  const tp_quant_format f = p->format;
  TP_TRY(tp_quant_scale_shape(f, TP_QROLE_ACT, p->m, p->n, &p->dy_scales_shape));
  TP_TRY(tp_quant_scale_shape(f, TP_QROLE_WEIGHT, p->k, p->n, &p->wt_scales_shape));
  TP_TRY(tp_quant_scale_shape(f, TP_QROLE_ACT, p->n, p->m, &p->dyt_scales_shape));
  TP_TRY(tp_quant_scale_shape(f, TP_QROLE_ACT, p->k, p->m, &p->xt_scales_shape));
  TP_TRY(tp_gemm_scaled_supported_kind(p->gemm, TP_GEMM_SCALED_DGRAD, f, p->m, p->k, p->n,
                                       p->reason, sizeof p->reason));
  return tp_gemm_scaled_supported_kind(p->gemm, TP_GEMM_SCALED_WGRAD, f, p->n, p->k, p->m,
                                       p->reason, sizeof p->reason);
}

tp_rc tp_fp8_linear_plan(const tp_group *g, const tp_fp8_linear_desc *desc, tp_fp8_linear *out) {
  memset(out, 0, sizeof *out);
  out->desc = *desc;
  out->world = g->world;
  out->rank = g->rank;
  if (tp_quant_format_of(desc->dtype, &out->format) != TP_OK)
    return fp8_reject(out, "tp_fp8_linear: %s is not an fp8 dtype", tp_dtype_name(desc->dtype));
  if (desc->n_weights < 1 || desc->n_weights > TP_MAX_WEIGHTS || desc->tokens < 1 ||
      desc->in_features < 1 || desc->out_features < 1)
    return TP_FAIL(TP_EINTERNAL, "tp_fp8_linear: bad shape T=%lld N=%lld K=%lld x%d",
                   (long long)desc->tokens, (long long)desc->out_features,
                   (long long)desc->in_features, desc->n_weights);
  TP_TRY(check_rules(out));
  /* the group's one cuBLASLt context and workspace, claimed as the bf16 GEMMs claim it */
  out->gemm = g->gemm_scaled;
  TP_TRY(tp_device_claim(TP_SHARED_GEMM, tp_gemm_workspace_bytes(g->gemm)));
  if (g->world > 1) return fp8_comm_plan(g, out);
  out->m = desc->tokens;
  out->n = desc->out_features;
  out->k = desc->in_features;
  TP_TRY(tp_quant_scale_shape(out->format, TP_QROLE_ACT, out->m, out->k, &out->x_scales_shape));
  TP_TRY(tp_quant_scale_shape(out->format, TP_QROLE_WEIGHT, out->n, out->k, &out->w_scales_shape));
  /* cuBLASLt's refusal is the rejection, in its words (recorded as the last error) */
  TP_TRY(tp_gemm_scaled_supported(out->gemm, out->format, out->m, out->n, out->k, out->reason,
                                  sizeof out->reason));
  return desc->backward ? plan_backward(out) : TP_OK;
}

size_t fp8_amax_floats(const tp_fp8_linear *p) {
  if (p->act_agreement == TP_AMAX_AGREE_TENSOR) return 1;
  return p->act_agreement == TP_AMAX_AGREE_ROWS ? (size_t)p->m : 0;
}

tp_rc fp8_device_alloc(tp_fp8_linear *p, void **out, size_t bytes) {
  TP_TRY(tp_device_malloc(out, bytes));
  p->quant_bytes += bytes;
  return TP_OK;
}

/* The quantization of a [rows, cols] bf16 operand of p (q and scales for the caller to set). */
tp_quant_args fp8_quant_of(const tp_fp8_linear *p, tp_quant_role role, tp_fp8_type elem,
                           const void *src, int64_t rows, int64_t cols) {
  const tp_quant_args a = {p->format, role, elem, TP_BF16, src, rows, cols, cols, NULL, NULL, NULL};
  return a;
}

tp_quant_args fp8_quant_args(const tp_fp8_linear *p, tp_quant_role role, const void *src,
                             int64_t rows) {
  return fp8_quant_of(p, role, TP_FP8_E4M3, src, rows, p->k);
}

/* A quantized copy and its scales. */
static tp_rc alloc_quantized(tp_fp8_linear *p, int64_t elems, const tp_scale_shape *shape,
                             uint8_t **q, void **scales) {
  TP_TRY(fp8_device_alloc(p, (void **)q, (size_t)elems));
  return fp8_device_alloc(p, scales, tp_quant_scale_bytes(shape));
}

/* Transposes src (bf16, rows x cols) into p->transposed and quantizes it
 * along rows (its new contraction) into q and scales. */
static tp_rc transpose_quantize(tp_fp8_linear *p, tp_quant_role role, tp_fp8_type elem,
                                const void *src, int64_t rows, int64_t cols, uint8_t *q,
                                void *scales, cudaStream_t stream) {
  TP_TRY(tp_quant_transpose_enqueue(TP_BF16, src, rows, cols, p->transposed, stream));
  tp_quant_args a = fp8_quant_of(p, role, elem, p->transposed, cols, rows);
  a.q = q;
  a.scales = scales;
  return tp_quant_enqueue(&a, stream);
}

/* The quantization of src's transpose (src bf16, rows x cols) along rows,
 * in one pass (the wgrad operands, quantized along T). */
static tp_rc quantize_transposed(const tp_fp8_linear *p, tp_fp8_type elem, const void *src,
                                 int64_t rows, int64_t cols, const float *agreed_amax, uint8_t *q,
                                 void *scales, cudaStream_t stream) {
  tp_quant_args a = fp8_quant_of(p, TP_QROLE_ACT, elem, src, rows, cols);
  a.q = q;
  a.scales = scales;
  a.agreed_amax = agreed_amax;
  return tp_quant_transpose_quantize_enqueue(&a, stream);
}

/* The backward's buffers, and each W_iᵀ quantized along N (its 128x128
 * blocks for fp8-block span rows of the transpose: transposed first). */
static tp_rc prepare_backward(tp_fp8_linear *p, const void *const *w, cudaStream_t stream) {
  const int64_t t = p->m, n = p->n, k = p->k;
  TP_TRY(fp8_device_alloc(p, &p->transposed, (size_t)(n * k) * 2));
  if (p->format == TP_QFMT_FP8) TP_TRY(fp8_device_alloc(p, (void **)&p->dy_amax, sizeof(float)));
  TP_TRY(alloc_quantized(p, k * t, &p->xt_scales_shape, &p->xtq, &p->xt_scales));
  for (int i = 0; i < p->desc.n_weights; ++i) {
    TP_TRY(alloc_quantized(p, t * n, &p->dy_scales_shape, &p->dyq[i], &p->dy_scales[i]));
    TP_TRY(alloc_quantized(p, n * t, &p->dyt_scales_shape, &p->dytq[i], &p->dyt_scales[i]));
    TP_TRY(alloc_quantized(p, k * n, &p->wt_scales_shape, &p->wtq[i], &p->wt_scales[i]));
    TP_TRY(transpose_quantize(p, TP_QROLE_WEIGHT, TP_FP8_E4M3, w[i], n, k, p->wtq[i],
                              p->wt_scales[i], stream));
    if (p->desc.n_weights > 1) TP_TRY(fp8_device_alloc(p, &p->dx_parts[i], (size_t)(t * k) * 2));
  }
  return TP_OK;
}

tp_rc tp_fp8_linear_prepare(tp_fp8_linear *p, const void *const *w, cudaStream_t stream) {
  TP_TRY(fp8_device_alloc(p, (void **)&p->xq, (size_t)(p->m * p->k)));
  TP_TRY(fp8_device_alloc(p, &p->x_scales, tp_quant_scale_bytes(&p->x_scales_shape)));
  if (fp8_amax_floats(p))
    TP_TRY(fp8_device_alloc(p, (void **)&p->amax, fp8_amax_floats(p) * sizeof(float)));
  for (int i = 0; i < p->desc.n_weights; ++i) {
    TP_TRY(fp8_device_alloc(p, (void **)&p->wq[i], (size_t)(p->n * p->k)));
    TP_TRY(fp8_device_alloc(p, &p->w_scales[i], tp_quant_scale_bytes(&p->w_scales_shape)));
    tp_quant_args a = fp8_quant_args(p, TP_QROLE_WEIGHT, w[i], p->n);
    a.q = p->wq[i];
    a.scales = p->w_scales[i];
    TP_TRY(tp_quant_enqueue(&a, stream));
  }
  if (p->desc.backward) TP_TRY(prepare_backward(p, w, stream));
  TP_CUDA(cudaStreamSynchronize(stream));
  return TP_OK;
}

tp_rc tp_fp8_linear_prepare_group(tp_group *g, tp_fp8_linear *p, const void *const *w,
                                  cudaStream_t stream) {
  TP_TRY(tp_fp8_linear_prepare(p, w, stream));
  return p->world > 1 ? fp8_comm_prepare(g, p) : TP_OK;
}

tp_rc fp8_quantize_local(tp_group *g, tp_fp8_linear *p, const void *x, cudaStream_t stream) {
  tp_quant_args a = fp8_quant_args(p, TP_QROLE_ACT, x, p->m);
  a.q = p->xq;
  a.scales = p->x_scales;
  if (p->act_agreement != TP_AMAX_LOCAL && g->world > 1) {
    /* Tensorwise (and row scales split along K) cannot be shard-local: the
     * ranks agree on the amax first, inside the timed step. */
    TP_TRY(tp_quant_local_amax_enqueue(&a, p->amax, stream));
    TP_TRY(fp8_agree_max(g, p, p->amax, fp8_amax_floats(p), stream));
    a.agreed_amax = p->amax;
  }
  return tp_quant_enqueue(&a, stream);
}

tp_rc tp_fp8_linear_quantize_input(tp_group *g, tp_fp8_linear *p, const void *x,
                                   cudaStream_t stream) {
  if (p->world > 1) return fp8_comm_quantize_input(g, p, x, stream);
  return fp8_quantize_local(g, p, x, stream);
}

tp_rc tp_fp8_linear_gemms(tp_fp8_linear *p, void *const *y, cudaStream_t stream) {
  if (p->world > 1) return fp8_comm_gemms(p, y, stream);
  for (int i = 0; i < p->desc.n_weights; ++i) {
    const tp_gemm_scaled_desc d = {p->format,   p->m,     p->n,           p->k, p->xq,
                                   p->x_scales, p->wq[i], p->w_scales[i], y[i], TP_GEMM_SCALED_FWD};
    TP_TRY(tp_gemm_scaled_enqueue(p->gemm, &d, stream));
  }
  return TP_OK;
}

tp_rc tp_fp8_linear_collective(tp_group *g, tp_fp8_linear *p, const void *x, void *const *y,
                               cudaStream_t stream) {
  if (p->world < 2) return TP_FAIL(TP_EINTERNAL, "fp8 collective alone at TP 1: nothing travels");
  return fp8_comm_collective(g, p, x, y, stream);
}

tp_rc tp_fp8_linear_forward(tp_group *g, tp_fp8_linear *p, const void *x, void *const *y,
                            cudaStream_t stream) {
  if (p->world > 1) return fp8_comm_forward(g, p, x, y, stream);
  TP_TRY(tp_fp8_linear_quantize_input(g, p, x, stream));
  return tp_fp8_linear_gemms(p, y, stream);
}

static tp_rc need_backward(const tp_fp8_linear *p) {
  if (!p->desc.backward || !p->xtq)
    return TP_FAIL(TP_EINTERNAL, "fp8 backward: the plan has no backward or was not prepared");
  return TP_OK;
}

tp_rc tp_fp8_linear_quantize_grads(tp_group *g, tp_fp8_linear *p, const void *x,
                                   const void *const *dy, cudaStream_t stream) {
  TP_TRY(need_backward(p));
  if (p->world > 1) return fp8_bwd_quantize_grads(g, p, x, dy, stream);
  TP_TRY(quantize_transposed(p, TP_FP8_E4M3, x, p->m, p->k, NULL, p->xtq, p->xt_scales, stream));
  for (int i = 0; i < p->desc.n_weights; ++i) {
    /* dY is quantized twice, both needed: along N (dgrad) and transposed along T (wgrad) */
    tp_quant_args a = fp8_quant_of(p, TP_QROLE_ACT, TP_FP8_E5M2, dy[i], p->m, p->n);
    a.q = p->dyq[i];
    a.scales = p->dy_scales[i];
    if (p->format == TP_QFMT_FP8) {
      /* tensorwise: dYᵀ's amax is dY's, found once for both (the same scale bits) */
      TP_TRY(tp_quant_local_amax_enqueue(&a, p->dy_amax, stream));
      a.agreed_amax = p->dy_amax;
    }
    TP_TRY(tp_quant_enqueue(&a, stream));
    TP_TRY(quantize_transposed(p, TP_FP8_E5M2, dy[i], p->m, p->n, a.agreed_amax, p->dytq[i],
                               p->dyt_scales[i], stream));
  }
  return TP_OK;
}

tp_rc tp_fp8_linear_backward_gemms(tp_fp8_linear *p, void *dx, void *const *dw,
                                   cudaStream_t stream) {
  TP_TRY(need_backward(p));
  if (p->world > 1) return fp8_bwd_gemms(p, dx, dw, stream);
  const int nw = p->desc.n_weights;
  for (int i = 0; i < nw; ++i) {
    const tp_gemm_scaled_desc d = {p->format,
                                   p->m,
                                   p->k,
                                   p->n,
                                   p->dyq[i],
                                   p->dy_scales[i],
                                   p->wtq[i],
                                   p->wt_scales[i],
                                   nw > 1 ? p->dx_parts[i] : dx,
                                   TP_GEMM_SCALED_DGRAD};
    TP_TRY(tp_gemm_scaled_enqueue(p->gemm, &d, stream));
  }
  if (nw > 1)
    TP_CUDA(tp_launch_reduce_sum(TP_BF16, dx, (const void *const *)p->dx_parts, nw,
                                 (size_t)(p->m * p->k), stream));
  for (int i = 0; i < nw; ++i) {
    const tp_gemm_scaled_desc d = {
        p->format,        p->n,   p->k,         p->m,  p->dytq[i],
        p->dyt_scales[i], p->xtq, p->xt_scales, dw[i], TP_GEMM_SCALED_WGRAD};
    TP_TRY(tp_gemm_scaled_enqueue(p->gemm, &d, stream));
  }
  return TP_OK;
}

tp_rc tp_fp8_linear_backward(tp_group *g, tp_fp8_linear *p, const void *x, const void *const *dy,
                             void *dx, void *const *dw, cudaStream_t stream) {
  TP_TRY(need_backward(p));
  if (p->world > 1) return fp8_bwd_backward(g, p, x, dy, dx, dw, stream);
  TP_TRY(tp_fp8_linear_quantize_grads(g, p, x, dy, stream));
  return tp_fp8_linear_backward_gemms(p, dx, dw, stream);
}

tp_rc tp_fp8_linear_backward_collective(tp_group *g, tp_fp8_linear *p, void *dx,
                                        cudaStream_t stream) {
  TP_TRY(need_backward(p));
  if (p->world < 2)
    return TP_FAIL(TP_EINTERNAL, "fp8 backward collective alone at TP 1: nothing travels");
  return fp8_bwd_collective(g, p, dx, stream);
}

void tp_fp8_linear_release(tp_fp8_linear *p) {
  void *bufs[] = {p->xq, p->x_scales, p->amax, p->xtq, p->xt_scales, p->transposed, p->dy_amax};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) tp_device_release(bufs[i]);
  for (int i = 0; i < TP_MAX_WEIGHTS; ++i) {
    void *per[] = {p->wq[i],        p->w_scales[i], p->wtq[i],        p->wt_scales[i], p->dyq[i],
                   p->dy_scales[i], p->dytq[i],     p->dyt_scales[i], p->dx_parts[i]};
    for (size_t j = 0; j < sizeof per / sizeof per[0]; ++j) tp_device_release(per[j]);
  }
  fp8_comm_release(p);
  const tp_fp8_linear_desc desc = p->desc;
  memset(p, 0, sizeof *p);
  p->desc = desc;
}

size_t tp_fp8_linear_workspace_bytes(const tp_fp8_linear *p) {
  return p->quant_bytes + p->symm_bytes;
}

/* ---- the sampled float64 checks ----------------------------------------------------------------
 */

static double bf16_value(uint16_t b) {
  const uint32_t bits = (uint32_t)b << 16;
  float v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

/* Up to `want` indices spread over [0, count), first and last included. */
static int spread(int64_t count, int want, int64_t *out) {
  const int n = count < want ? (int)count : want;
  for (int i = 0; i < n; ++i) out[i] = n > 1 ? (int64_t)i * (count - 1) / (n - 1) : 0;
  return n;
}

static tp_rc download(void *host, const void *dev, size_t bytes) {
  TP_CUDA(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
  return TP_OK;
}

/* One GEMM operand as the check reads it: the quantized rows (length
 * shape->cols, the contraction) with their scales and element type, and the
 * bf16 tensor they came from: row r of the operand is row r of bf16, or,
 * for a transposed operand, column r of bf16 (whose rows hold shape->rows
 * elements). */
typedef struct check_operand {
  const uint8_t *q;
  const void *scales;
  const tp_scale_shape *shape;
  tp_fp8_type elem;
  const void *bf16;
  int transposed;
} check_operand;

/* Sampled rows of an operand, dequantized and as bf16 values. */
typedef struct operand_rows {
  void *scales; /* the whole stored scale buffer (host) */
  double *deq;  /* n_rows x k */
  double *orig; /* n_rows x k, the bf16 operand */
} operand_rows;

/* Row r of op's bf16 tensor (k elements) into host, through a device
 * gather for a column. */
static tp_rc download_bf16_row(const check_operand *op, int64_t r, int64_t k, uint16_t *dev_tmp,
                               uint16_t *host) {
  const uint16_t *src = op->bf16;
  if (!op->transposed) return download(host, src + r * k, (size_t)k * 2);
  const int64_t width = op->shape->rows; /* the untransposed tensor's row length */
  TP_CUDA(
      cudaMemcpy2D(dev_tmp, 2, src + r, (size_t)width * 2, 2, (size_t)k, cudaMemcpyDeviceToDevice));
  return download(host, dev_tmp, (size_t)k * 2);
}

static tp_rc load_rows(const check_operand *op, const int64_t *rows, int n, operand_rows *out) {
  const size_t k = (size_t)op->shape->cols;
  const tp_scale_shape *shape = op->shape;
  out->scales = malloc(tp_quant_scale_bytes(shape));
  out->deq = malloc(sizeof(double) * k * (size_t)n);
  out->orig = malloc(sizeof(double) * k * (size_t)n);
  uint8_t *qrow = malloc(k);
  uint16_t *brow = malloc(k * sizeof(uint16_t)), *dev_tmp = NULL;
  tp_rc rc = out->scales && out->deq && out->orig && qrow && brow
                 ? TP_OK
                 : TP_FAIL(TP_EOOM, "no host memory for the fp8 check");
  if (rc == TP_OK && op->transposed) rc = tp_device_malloc((void **)&dev_tmp, k * 2);
  if (rc == TP_OK) rc = download(out->scales, op->scales, tp_quant_scale_bytes(shape));
  for (int r = 0; rc == TP_OK && r < n; ++r) {
    rc = download(qrow, op->q + (size_t)rows[r] * k, k);
    /* no bf16 operand to compare with (comm fp8 at TP > 1): its values are NaN */
    if (rc == TP_OK && op->bf16) rc = download_bf16_row(op, rows[r], (int64_t)k, dev_tmp, brow);
    for (size_t c = 0; rc == TP_OK && c < k; ++c) {
      const float s = tp_quant_scale_at(shape, out->scales, rows[r] / shape->block_rows,
                                        (int64_t)c / shape->block_cols);
      out->deq[(size_t)r * k + c] = (double)tp_fp8_decode(op->elem, qrow[c]) * (double)s;
      out->orig[(size_t)r * k + c] = op->bf16 ? bf16_value(brow[c]) : NAN;
    }
  }
  tp_device_release(dev_tmp);
  free(qrow);
  free(brow);
  return rc;
}

static void free_rows(operand_rows *o) {
  free(o->scales);
  free(o->deq);
  free(o->orig);
}

/* out[r, c] = sum over the products p of A_p[r, :] · B_p[c, :] (each a scaled
 * GEMM of contraction k, rounded to bf16; with several products the bf16
 * results summed in fp32 and rounded once more). */
typedef struct check_product {
  check_operand a[TP_MAX_WEIGHTS], b[TP_MAX_WEIGHTS];
  int n;
  int64_t rows, cols, k; /* the output and the contraction */
} check_product;

/* Running sums of the check. */
typedef struct check_sums {
  double diff2, ref2, tol2, diff16, ref16;
} check_sums;

/* The sampled rows of every operand of a product. */
typedef struct product_rows {
  operand_rows a[TP_MAX_WEIGHTS], b[TP_MAX_WEIGHTS];
} product_rows;

static void judge_element(double y, const product_rows *pr, int n, size_t ao, size_t bo,
                          const check_product *cp, const tp_fp8_accum_model *model, check_sums *s,
                          tp_fp8_check *out) {
  out->elements++;
  if (!isfinite(y)) {
    out->nonfinite++;
    return;
  }
  double ref = 0.0, tol = 0.0, ref16 = 0.0;
  for (int i = 0; i < n; ++i) {
    const tp_fp8_dot d = tp_fp8_dot_ref(pr->a[i].deq + ao, pr->b[i].deq + bo, cp->k, model->group);
    const tp_fp8_dot d16 = tp_fp8_dot_ref(pr->a[i].orig + ao, pr->b[i].orig + bo, cp->k, 0);
    ref += d.ref;
    tol += tp_fp8_gemm_tolerance(model, &d, cp->k);
    ref16 += d16.ref;
  }
  /* the sum of several products' bf16 results is rounded to bf16 once more */
  if (n > 1) tol += 0x1p-8 * (fabs(ref) + tol);
  const double err = fabs(y - ref);
  out->outside += err > tol;
  out->worst_ratio = fmax(out->worst_ratio, err / tol);
  out->max_abs_err = fmax(out->max_abs_err, err);
  s->diff2 += err * err;
  s->ref2 += ref * ref;
  s->tol2 += tol * tol;
  s->diff16 += (y - ref16) * (y - ref16);
  s->ref16 += ref16 * ref16;
}

static double ratio_of(double num2, double den2) {
  if (isnan(num2) || isnan(den2)) return NAN; /* an operand absent (bf16 not held) */
  if (den2 > 0.0) return sqrt(num2 / den2);
  return num2 > 0.0 ? INFINITY : 0.0;
}

enum { FP8_CHECK_MAX = 256 };

/* Judges y (bf16, device, cp->rows x cp->cols) on up to rows x cols sampled elements. */
static tp_rc check_product_output(const check_product *cp, const void *y, int rows, int cols,
                                  const tp_fp8_accum_model *model, tp_fp8_check *out) {
  memset(out, 0, sizeof *out);
  TP_CUDA(cudaDeviceSynchronize());
  int64_t ri[FP8_CHECK_MAX], ci[FP8_CHECK_MAX];
  const int nr = spread(cp->rows, rows < FP8_CHECK_MAX ? rows : FP8_CHECK_MAX, ri);
  const int nc = spread(cp->cols, cols < FP8_CHECK_MAX ? cols : FP8_CHECK_MAX, ci);
  product_rows pr;
  memset(&pr, 0, sizeof pr);
  uint16_t *yrow = malloc(sizeof(uint16_t) * (size_t)cp->cols);
  tp_rc rc = yrow ? TP_OK : TP_FAIL(TP_EOOM, "no host memory for the fp8 check");
  for (int i = 0; rc == TP_OK && i < cp->n; ++i) {
    rc = load_rows(&cp->a[i], ri, nr, &pr.a[i]);
    if (rc == TP_OK) rc = load_rows(&cp->b[i], ci, nc, &pr.b[i]);
  }
  check_sums s = {0};
  for (int i = 0; rc == TP_OK && i < nr; ++i) {
    rc = download(yrow, (const uint16_t *)y + (size_t)(ri[i] * cp->cols),
                  sizeof(uint16_t) * (size_t)cp->cols);
    for (int j = 0; rc == TP_OK && j < nc; ++j)
      judge_element(bf16_value(yrow[ci[j]]), &pr, cp->n, (size_t)i * (size_t)cp->k,
                    (size_t)j * (size_t)cp->k, cp, model, &s, out);
  }
  out->rel_err = ratio_of(s.diff2, s.ref2);
  out->rel_tol = ratio_of(s.tol2, s.ref2);
  out->rel_err_bf16 = ratio_of(s.diff16, s.ref16);
  for (int i = 0; i < cp->n; ++i) {
    free_rows(&pr.a[i]);
    free_rows(&pr.b[i]);
  }
  free(yrow);
  return rc;
}

tp_rc tp_fp8_linear_check(const tp_fp8_linear *p, int weight, const void *x, const void *w,
                          const void *y, int rows, int cols, const tp_fp8_accum_model *model,
                          tp_fp8_check *out) {
  memset(out, 0, sizeof *out);
  if (weight < 0 || weight >= p->desc.n_weights || !p->xq)
    return TP_FAIL(TP_EINTERNAL, "fp8 check of weight %d: not prepared", weight);
  check_product cp;
  memset(&cp, 0, sizeof cp);
  if (p->world > 1) {
    if (tp_op_gathers(p->desc.op)) x = p->desc.comm == TP_COMM_BF16 ? p->gathered_x : NULL;
    else y = p->partial;
  }
  cp.a[0] = (check_operand){p->xq, p->x_scales, &p->x_scales_shape, TP_FP8_E4M3, x, 0};
  cp.b[0] =
      (check_operand){p->wq[weight], p->w_scales[weight], &p->w_scales_shape, TP_FP8_E4M3, w, 0};
  cp.n = 1;
  cp.rows = p->m;
  cp.cols = p->n;
  cp.k = p->k;
  return check_product_output(&cp, y, rows, cols, model, out);
}

tp_rc tp_fp8_linear_check_dx(const tp_fp8_linear *p, const void *const *dy, const void *const *w,
                             const void *dx, int rows, int cols, const tp_fp8_accum_model *model,
                             tp_fp8_check *out) {
  memset(out, 0, sizeof *out);
  TP_TRY(need_backward(p));
  check_product cp;
  memset(&cp, 0, sizeof cp);
  /* TP > 1: the all-gather side's output is the local partial (the
   * reduce-scatter is NCCL's); the reduce-scatter side's dY is the gathered
   * whole, whose bf16 no rank holds */
  const int gathered_dy = p->world > 1 && !tp_op_gathers(p->desc.op);
  if (p->world > 1 && tp_op_gathers(p->desc.op)) dx = p->bwd.dx_partial;
  for (int i = 0; i < p->desc.n_weights; ++i) {
    cp.a[i] = (check_operand){
        p->dyq[i], p->dy_scales[i], &p->dy_scales_shape, TP_FP8_E5M2, gathered_dy ? NULL : dy[i],
        0};
    /* row j of W_iᵀ is column j of W_i */
    cp.b[i] =
        (check_operand){p->wtq[i], p->wt_scales[i], &p->wt_scales_shape, TP_FP8_E4M3, w[i], 1};
  }
  cp.n = p->desc.n_weights;
  cp.rows = p->m;
  cp.cols = p->k;
  cp.k = p->n;
  return check_product_output(&cp, dx, rows, cols, model, out);
}

tp_rc tp_fp8_linear_check_dw(const tp_fp8_linear *p, int weight, const void *x, const void *dy,
                             const void *dw, int rows, int cols, const tp_fp8_accum_model *model,
                             tp_fp8_check *out) {
  memset(out, 0, sizeof *out);
  TP_TRY(need_backward(p));
  if (weight < 0 || weight >= p->desc.n_weights)
    return TP_FAIL(TP_EINTERNAL, "fp8 dw check of weight %d of %d", weight, p->desc.n_weights);
  check_product cp;
  memset(&cp, 0, sizeof cp);
  /* row j of dY_iᵀ is column j of dY_i, row j of Xᵀ column j of X; at TP >
   * 1 the sequence-sharded one (X on the all-gather side, dY on the other)
   * is the gathered whole, whose bf16 no rank holds */
  if (p->world > 1) {
    if (tp_op_gathers(p->desc.op)) x = NULL;
    else dy = NULL;
  }
  cp.a[0] = (check_operand){
      p->dytq[weight], p->dyt_scales[weight], &p->dyt_scales_shape, TP_FP8_E5M2, dy, 1};
  cp.b[0] = (check_operand){p->xtq, p->xt_scales, &p->xt_scales_shape, TP_FP8_E4M3, x, 1};
  cp.n = 1;
  cp.rows = p->n;
  cp.cols = p->k;
  cp.k = p->m;
  return check_product_output(&cp, dw, rows, cols, model, out);
}
