/*
 * tp_linear_fp8.c — the fp8 projection of tp_linear_fp8.h: plan (the
 * rules, cuBLASLt's answer), prepare (weights quantized once), the timed
 * step (quantize X with the amax agreement, scaled GEMMs) and the sampled
 * float64 check.
 */
#include "kernels/tp_linear_fp8.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_quant_device.h"

/* cuBLASLt's workspace for the scaled GEMMs (what tp_gemm.c gives the bf16 ones). */
static const size_t FP8_GEMM_WORKSPACE = (size_t)32 << 20;

static tp_rc reject(tp_fp8_linear *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static tp_rc reject(tp_fp8_linear *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->reason, sizeof p->reason, fmt, ap);
  va_end(ap);
  return TP_FAIL(TP_EREJECT, "%s", p->reason);
}

/* The shard rule of X as this op splits it, and the agreement it asks for. */
static tp_rc check_activation_shards(tp_fp8_linear *p) {
  const tp_shard_layout layout = tp_op_gathers(p->desc.op) ? TP_SHARD_ACT_ROWS : TP_SHARD_ACT_COLS;
  char why[320];
  if (tp_quant_shard_check(p->format, layout, p->desc.tokens, p->desc.in_features, p->world,
                           &p->act_agreement, why, sizeof why) != TP_OK)
    return reject(p, "fp8 placement rule %s at TP %d: %s", tp_shard_layout_name(layout), p->world,
                  why);
  return TP_OK;
}

tp_rc tp_fp8_linear_plan(const tp_group *g, const tp_fp8_linear_desc *desc, tp_fp8_linear *out) {
  memset(out, 0, sizeof *out);
  out->desc = *desc;
  out->world = g->world;
  out->rank = g->rank;
  if (tp_quant_format_of(desc->dtype, &out->format) != TP_OK)
    return reject(out, "tp_fp8_linear: %s is not an fp8 dtype", tp_dtype_name(desc->dtype));
  if (desc->n_weights < 1 || desc->n_weights > TP_MAX_WEIGHTS || desc->tokens < 1 ||
      desc->in_features < 1 || desc->out_features < 1)
    return TP_FAIL(TP_EINTERNAL, "tp_fp8_linear: bad shape T=%lld N=%lld K=%lld x%d",
                   (long long)desc->tokens, (long long)desc->out_features,
                   (long long)desc->in_features, desc->n_weights);
  TP_TRY(check_activation_shards(out));
  if (g->world > 1)
    return reject(out,
                  "%s at TP %d: fp8 communication not implemented yet (the fp8 shard and its "
                  "scales would travel; never run as bf16)",
                  tp_dtype_name(desc->dtype), g->world);
  out->m = desc->tokens;
  out->n = desc->out_features;
  out->k = desc->in_features;
  TP_TRY(tp_quant_scale_shape(out->format, TP_QROLE_ACT, out->m, out->k, &out->x_scales_shape));
  TP_TRY(tp_quant_scale_shape(out->format, TP_QROLE_WEIGHT, out->n, out->k, &out->w_scales_shape));
  out->gemm_workspace_bytes = FP8_GEMM_WORKSPACE;
  TP_TRY(tp_gemm_scaled_create(out->gemm_workspace_bytes, &out->gemm));
  tp_rc rc = tp_gemm_scaled_supported(out->gemm, out->format, out->m, out->n, out->k, out->reason,
                                      sizeof out->reason);
  /* cuBLASLt's refusal is the rejection, in its words (recorded as the last error) */
  return rc;
}

static size_t amax_floats(const tp_fp8_linear *p) {
  if (p->act_agreement == TP_AMAX_AGREE_TENSOR) return 1;
  return p->act_agreement == TP_AMAX_AGREE_ROWS ? (size_t)p->m : 0;
}

static tp_rc device_alloc(tp_fp8_linear *p, void **out, size_t bytes) {
  TP_CUDA(cudaMalloc(out, bytes));
  p->quant_bytes += bytes;
  return TP_OK;
}

/* The quantization of an operand of p into out and scales. */
static tp_quant_args quant_args(const tp_fp8_linear *p, tp_quant_role role, const void *src,
                                int64_t rows) {
  const tp_quant_args a = {p->format, role, TP_FP8_E4M3, TP_BF16, src, rows,
                           p->k,      p->k, NULL,        NULL,    NULL};
  return a;
}

tp_rc tp_fp8_linear_prepare(tp_fp8_linear *p, const void *const *w, cudaStream_t stream) {
  TP_TRY(device_alloc(p, (void **)&p->xq, (size_t)(p->m * p->k)));
  TP_TRY(device_alloc(p, &p->x_scales, tp_quant_scale_bytes(&p->x_scales_shape)));
  if (amax_floats(p)) TP_TRY(device_alloc(p, (void **)&p->amax, amax_floats(p) * sizeof(float)));
  for (int i = 0; i < p->desc.n_weights; ++i) {
    TP_TRY(device_alloc(p, (void **)&p->wq[i], (size_t)(p->n * p->k)));
    TP_TRY(device_alloc(p, &p->w_scales[i], tp_quant_scale_bytes(&p->w_scales_shape)));
    tp_quant_args a = quant_args(p, TP_QROLE_WEIGHT, w[i], p->n);
    a.q = p->wq[i];
    a.scales = p->w_scales[i];
    TP_TRY(tp_quant_enqueue(&a, stream));
  }
  TP_CUDA(cudaStreamSynchronize(stream));
  return TP_OK;
}

tp_rc tp_fp8_linear_quantize_input(tp_group *g, tp_fp8_linear *p, const void *x,
                                   cudaStream_t stream) {
  tp_quant_args a = quant_args(p, TP_QROLE_ACT, x, p->m);
  a.q = p->xq;
  a.scales = p->x_scales;
  if (p->act_agreement != TP_AMAX_LOCAL && g->world > 1) {
    /* Tensorwise (and row scales split along K) cannot be shard-local: the
     * ranks agree on the amax first, inside the timed step. */
    TP_TRY(tp_quant_local_amax_enqueue(&a, p->amax, stream));
    TP_NCCL(ncclAllReduce(p->amax, p->amax, amax_floats(p), ncclFloat32, ncclMax, g->nccl, stream),
            g->nccl);
    a.agreed_amax = p->amax;
  }
  return tp_quant_enqueue(&a, stream);
}

tp_rc tp_fp8_linear_gemms(tp_fp8_linear *p, void *const *y, cudaStream_t stream) {
  for (int i = 0; i < p->desc.n_weights; ++i) {
    const tp_gemm_scaled_desc d = {p->format,   p->m,     p->n,           p->k, p->xq,
                                   p->x_scales, p->wq[i], p->w_scales[i], y[i]};
    TP_TRY(tp_gemm_scaled_enqueue(p->gemm, &d, stream));
  }
  return TP_OK;
}

tp_rc tp_fp8_linear_forward(tp_group *g, tp_fp8_linear *p, const void *x, void *const *y,
                            cudaStream_t stream) {
  TP_TRY(tp_fp8_linear_quantize_input(g, p, x, stream));
  return tp_fp8_linear_gemms(p, y, stream);
}

void tp_fp8_linear_release(tp_fp8_linear *p) {
  void *bufs[] = {p->xq, p->x_scales, p->amax};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) cudaFree(bufs[i]);
  for (int i = 0; i < TP_MAX_WEIGHTS; ++i) {
    cudaFree(p->wq[i]);
    cudaFree(p->w_scales[i]);
  }
  tp_gemm_scaled_destroy(p->gemm);
  const tp_fp8_linear_desc desc = p->desc;
  memset(p, 0, sizeof *p);
  p->desc = desc;
}

size_t tp_fp8_linear_workspace_bytes(const tp_fp8_linear *p) {
  return p->quant_bytes + (p->gemm ? p->gemm_workspace_bytes : 0);
}

/* ---- the sampled float64 check ---------------------------------------------------------------
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

/* One sampled row of an operand: its quantized bytes, dequantized, and its bf16 values. */
typedef struct operand_rows {
  const tp_scale_shape *shape;
  void *scales; /* the whole stored scale buffer (host) */
  double *deq;  /* n_rows x k */
  double *orig; /* n_rows x k, the bf16 operand */
} operand_rows;

static tp_rc load_rows(const tp_fp8_linear *p, const uint8_t *q, const void *scales,
                       const void *bf16, const tp_scale_shape *shape, const int64_t *rows, int n,
                       operand_rows *out) {
  const size_t k = (size_t)p->k;
  out->shape = shape;
  out->scales = malloc(tp_quant_scale_bytes(shape));
  out->deq = malloc(sizeof(double) * k * (size_t)n);
  out->orig = malloc(sizeof(double) * k * (size_t)n);
  uint8_t *qrow = malloc(k);
  uint16_t *brow = malloc(k * sizeof(uint16_t));
  tp_rc rc = out->scales && out->deq && out->orig && qrow && brow
                 ? TP_OK
                 : TP_FAIL(TP_EOOM, "no host memory for the fp8 check");
  if (rc == TP_OK) rc = download(out->scales, scales, tp_quant_scale_bytes(shape));
  for (int r = 0; rc == TP_OK && r < n; ++r) {
    rc = download(qrow, q + (size_t)rows[r] * k, k);
    if (rc == TP_OK) rc = download(brow, (const uint16_t *)bf16 + (size_t)rows[r] * k, k * 2);
    for (size_t c = 0; rc == TP_OK && c < k; ++c) {
      const float s = tp_quant_scale_at(shape, out->scales, rows[r] / shape->block_rows,
                                        (int64_t)c / shape->block_cols);
      out->deq[(size_t)r * k + c] = (double)tp_fp8_decode(TP_FP8_E4M3, qrow[c]) * (double)s;
      out->orig[(size_t)r * k + c] = bf16_value(brow[c]);
    }
  }
  free(qrow);
  free(brow);
  return rc;
}

static void free_rows(operand_rows *o) {
  free(o->scales);
  free(o->deq);
  free(o->orig);
}

/* Running sums of the check. */
typedef struct check_sums {
  double diff2, ref2, tol2, diff16, ref16;
} check_sums;

static void judge_element(double y, const double *xd, const double *wd, const double *xo,
                          const double *wo, const tp_fp8_linear *p, const tp_fp8_accum_model *model,
                          check_sums *s, tp_fp8_check *out) {
  out->elements++;
  if (!isfinite(y)) {
    out->nonfinite++;
    return;
  }
  const tp_fp8_dot d = tp_fp8_dot_ref(xd, wd, p->k, model->group);
  const tp_fp8_dot d16 = tp_fp8_dot_ref(xo, wo, p->k, 0);
  const double err = fabs(y - d.ref), tol = tp_fp8_gemm_tolerance(model, &d, p->k);
  out->outside += err > tol;
  out->worst_ratio = fmax(out->worst_ratio, err / tol);
  out->max_abs_err = fmax(out->max_abs_err, err);
  s->diff2 += err * err;
  s->ref2 += d.ref * d.ref;
  s->tol2 += tol * tol;
  s->diff16 += (y - d16.ref) * (y - d16.ref);
  s->ref16 += d16.ref * d16.ref;
}

static double ratio_of(double num2, double den2) {
  if (den2 > 0.0) return sqrt(num2 / den2);
  return num2 > 0.0 ? INFINITY : 0.0;
}

enum { FP8_CHECK_MAX = 256 };

tp_rc tp_fp8_linear_check(const tp_fp8_linear *p, int weight, const void *x, const void *w,
                          const void *y, int rows, int cols, const tp_fp8_accum_model *model,
                          tp_fp8_check *out) {
  memset(out, 0, sizeof *out);
  if (weight < 0 || weight >= p->desc.n_weights || !p->xq)
    return TP_FAIL(TP_EINTERNAL, "fp8 check of weight %d: not prepared", weight);
  TP_CUDA(cudaDeviceSynchronize());
  int64_t ri[FP8_CHECK_MAX], ci[FP8_CHECK_MAX];
  const int nr = spread(p->m, rows < FP8_CHECK_MAX ? rows : FP8_CHECK_MAX, ri);
  const int nc = spread(p->n, cols < FP8_CHECK_MAX ? cols : FP8_CHECK_MAX, ci);
  operand_rows xs = {0}, ws = {0};
  uint16_t *yrow = malloc(sizeof(uint16_t) * (size_t)p->n);
  tp_rc rc = yrow ? TP_OK : TP_FAIL(TP_EOOM, "no host memory for the fp8 check");
  if (rc == TP_OK) rc = load_rows(p, p->xq, p->x_scales, x, &p->x_scales_shape, ri, nr, &xs);
  if (rc == TP_OK)
    rc = load_rows(p, p->wq[weight], p->w_scales[weight], w, &p->w_scales_shape, ci, nc, &ws);
  check_sums s = {0};
  for (int i = 0; rc == TP_OK && i < nr; ++i) {
    rc = download(yrow, (const uint16_t *)y + (size_t)(ri[i] * p->n), sizeof(uint16_t) * p->n);
    for (int j = 0; rc == TP_OK && j < nc; ++j) {
      const size_t xo = (size_t)i * (size_t)p->k, wo = (size_t)j * (size_t)p->k;
      judge_element(bf16_value(yrow[ci[j]]), xs.deq + xo, ws.deq + wo, xs.orig + xo, ws.orig + wo,
                    p, model, &s, out);
    }
  }
  out->rel_err = ratio_of(s.diff2, s.ref2);
  out->rel_tol = ratio_of(s.tol2, s.ref2);
  out->rel_err_bf16 = ratio_of(s.diff16, s.ref16);
  free_rows(&xs);
  free_rows(&ws);
  free(yrow);
  return rc;
}
