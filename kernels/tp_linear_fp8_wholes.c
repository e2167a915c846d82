/*
 * tp_linear_fp8_wholes.c — tp_fp8_linear_check_wholes (tp_linear_fp8.h):
 * at TP > 1 the operands a stock step gathered in fp8 (X on the all-gather
 * side with comm_dtype fp8; the backward's Xᵀ, dY and dYᵀ) against what
 * quantizing the whole gives, the whole gathered in bf16 for the check
 * alone. The float64 checks judge a GEMM against the operands it read, so a
 * misplaced piece or a missed agreement passes them; this one does not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device_alloc.h"
#include "kernels/tp_linear_fp8.h"
#include "kernels/tp_quant_device.h"

/* Bytes of a and b (device, n each) that differ, through host copies. */
static tp_rc count_differ(const void *a, const void *b, size_t n, int64_t *out) {
  unsigned char *ha = malloc(n), *hb = malloc(n);
  tp_rc rc = ha && hb ? TP_OK : TP_FAIL(TP_EOOM, "no host memory for the whole's check");
  if (rc == TP_OK && cudaMemcpy(ha, a, n, cudaMemcpyDeviceToHost) != cudaSuccess)
    rc = TP_FAIL(TP_ECUDA, "cudaMemcpy of the gathered operand: %s",
                 cudaGetErrorString(cudaGetLastError()));
  if (rc == TP_OK && cudaMemcpy(hb, b, n, cudaMemcpyDeviceToHost) != cudaSuccess)
    rc = TP_FAIL(TP_ECUDA, "cudaMemcpy of the whole's quantization: %s",
                 cudaGetErrorString(cudaGetLastError()));
  int64_t differ = 0;
  for (size_t i = 0; rc == TP_OK && i < n; ++i) differ += ha[i] != hb[i];
  *out = differ;
  free(ha);
  free(hb);
  return rc;
}

/* One gathered operand and how the whole is quantized for it. */
typedef struct whole_operand {
  const char *name;
  tp_fp8_type elem;
  int transposed; /* the whole's transpose, along T */
  const uint8_t *q;
  const void *scales;
  const tp_scale_shape *shape;
} whole_operand;

/* op against the quantization of whole (bf16 [rows, cols], device). */
static tp_rc check_one(const tp_fp8_linear *p, const whole_operand *op, const void *whole,
                       int64_t rows, int64_t cols, tp_fp8_whole_check *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", op->name);
  const size_t bytes = (size_t)(rows * cols), sbytes = tp_quant_scale_bytes(op->shape);
  uint8_t *q = NULL;
  void *scales = NULL;
  tp_rc rc = tp_device_malloc((void **)&q, bytes);
  if (rc == TP_OK) rc = tp_device_malloc(&scales, sbytes);
  const tp_quant_args a = {p->format, TP_QROLE_ACT, op->elem, TP_BF16, whole, rows,
                           cols,      cols,         q,        scales,  NULL};
  if (rc == TP_OK)
    rc = op->transposed ? tp_quant_transpose_quantize_enqueue(&a, 0) : tp_quant_enqueue(&a, 0);
  if (rc == TP_OK && cudaDeviceSynchronize() != cudaSuccess)
    rc = TP_FAIL(TP_ECUDA, "quantizing the whole for the check: %s",
                 cudaGetErrorString(cudaGetLastError()));
  out->bytes = (int64_t)bytes;
  out->scale_bytes = (int64_t)sbytes;
  if (rc == TP_OK) rc = count_differ(op->q, q, bytes, &out->differ);
  if (rc == TP_OK) rc = count_differ(op->scales, scales, sbytes, &out->scale_differ);
  tp_device_release(q);
  tp_device_release(scales);
  return rc;
}

/* Every rank's [rows, cols] bf16 shard rows into one whole (collective). */
static tp_rc gather_whole(tp_group *g, const void *shard, int64_t rows, int64_t cols,
                          void **whole) {
  TP_TRY(tp_device_malloc(whole, (size_t)(rows * cols * g->world) * 2));
  TP_NCCL(
      ncclAllGather(shard, *whole, (size_t)(rows * cols), ncclBfloat16, g->nccl, g->main_stream),
      g->nccl);
  TP_CUDA(cudaStreamSynchronize(g->main_stream));
  return TP_OK;
}

/* The operands gathered from x's rows: X (comm fp8) and the backward's Xᵀ. */
static tp_rc check_x(tp_group *g, const tp_fp8_linear *p, const void *x, tp_fp8_whole_check *out,
                     int max, int *n) {
  void *whole = NULL;
  tp_rc rc = gather_whole(g, x, p->shard_rows, p->k, &whole);
  const whole_operand ops[2] = {
      {"x:whole", TP_FP8_E4M3, 0, p->xq, p->x_scales, &p->x_scales_shape},
      {"xt:whole", TP_FP8_E4M3, 1, p->xtq, p->xt_scales, &p->xt_scales_shape}};
  const int first = p->desc.comm == TP_COMM_FP8 ? 0 : 1, last = p->desc.backward ? 2 : 1;
  for (int i = first; rc == TP_OK && i < last && *n < max; ++i)
    rc = check_one(p, &ops[i], whole, p->m, p->k, &out[(*n)++]);
  tp_device_release(whole);
  return rc;
}

/* The reduce-scatter side's backward: dY and dYᵀ, gathered from dy's rows. */
static tp_rc check_dy(tp_group *g, const tp_fp8_linear *p, const void *dy, tp_fp8_whole_check *out,
                      int max, int *n) {
  void *whole = NULL;
  tp_rc rc = gather_whole(g, dy, p->shard_rows, p->n, &whole);
  const whole_operand ops[2] = {
      {"dy:whole", TP_FP8_E5M2, 0, p->dyq[0], p->dy_scales[0], &p->dy_scales_shape},
      {"dyt:whole", TP_FP8_E5M2, 1, p->dytq[0], p->dyt_scales[0], &p->dyt_scales_shape}};
  for (int i = 0; rc == TP_OK && i < 2 && *n < max; ++i)
    rc = check_one(p, &ops[i], whole, p->m, p->n, &out[(*n)++]);
  tp_device_release(whole);
  return rc;
}

tp_rc tp_fp8_linear_check_wholes(tp_group *g, const tp_fp8_linear *p, const void *x,
                                 const void *dy0, tp_fp8_whole_check *out, int max, int *n) {
  *n = 0;
  if (p->world < 2 || p->fused || p->desc.backend != TP_BACKEND_STOCK) return TP_OK;
  if (tp_op_gathers(p->desc.op)) {
    if (p->desc.comm != TP_COMM_FP8 && !p->desc.backward) return TP_OK;
    return check_x(g, p, x, out, max, n);
  }
  return p->desc.backward ? check_dy(g, p, dy0, out, max, n) : TP_OK;
}
