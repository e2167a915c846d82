/*
 * tp_linear_fp8.h — a TP projection whose GEMMs run in an fp8 format
 * (issue 15): the activation is stored in bf16 like the bf16 path's, each
 * step quantizes it (kernels/tp_quant_device.h) and runs the scaled GEMM of
 * each weight (kernels/tp_gemm_scaled.h) into a bf16 output.
 *
 *   step (timed)   quantize X [T, K] in the format (after the amax agreement
 *                  the shard rule asks for, an NCCL all-reduce max of the
 *                  local amax: nothing at TP 1), then Y_i = X · W_iᵀ per weight
 *   prepare        each weight quantized ONCE, outside the timed step (a
 *                  training step would quantize it once per step and reuse
 *                  it for every micro-batch; inference keeps it quantized)
 *   GEMMs alone    the scaled GEMMs on the X quantized by the last step
 *
 * Where it runs: TP 1 (stock and dist_gemm are the same there: no
 * communication). TP > 1 would move the fp8 shard and its scales on the
 * all-gather side (NCCL for stock, the fused pushes for dist_gemm) and keep
 * reducing bf16 partials on the reduce-scatter side; until that is written
 * the plan rejects TP > 1 (fp8 communication not implemented yet) rather
 * than run bf16 communication under an fp8 name. The forward only.
 *
 * tp_fp8_linear_check judges a step's output against a float64 product of
 * the DEQUANTIZED operands on sampled rows and columns, with tp_quant.h's
 * accumulation model for this device, and reports the error against the
 * float64 product of the unquantized bf16 operands (what quantization
 * costs) beside it.
 */
#ifndef TP_LINEAR_FP8_H
#define TP_LINEAR_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"
#include "common/tp_vocab.h"
#include "kernels/tp_gemm_scaled.h"
#include "kernels/tp_group.h"
#include "kernels/tp_linear.h"
#include "kernels/tp_quant.h"

typedef struct tp_fp8_linear_desc {
  tp_dtype dtype;       /* an fp8 dtype: fp8, fp8-row, fp8-block, mxfp8 */
  tp_op op;             /* any; at TP 1 each is one GEMM per weight */
  int64_t tokens;       /* T */
  int64_t in_features;  /* K */
  int64_t out_features; /* N of each weight */
  int n_weights;        /* 1..TP_MAX_WEIGHTS */
} tp_fp8_linear_desc;

typedef struct tp_fp8_linear {
  tp_fp8_linear_desc desc;
  tp_quant_format format;
  int world, rank;
  int64_t m, n, k;                 /* this rank's GEMM: m = T, n = N, k = K at TP 1 */
  tp_amax_agreement act_agreement; /* what the ranks agree on before quantizing X */
  tp_scale_shape x_scales_shape, w_scales_shape;
  uint8_t *xq;    /* X quantized, m x k */
  void *x_scales; /* its scales */
  float *amax;    /* the agreed amax (1 float, or m for rows); NULL when not needed */
  uint8_t *wq[TP_MAX_WEIGHTS];
  void *w_scales[TP_MAX_WEIGHTS];
  tp_gemm_scaled *gemm;
  size_t gemm_workspace_bytes;
  size_t quant_bytes; /* the quantized copies, their scales and the amax */
  char reason[400];   /* a rejection's reason */
} tp_fp8_linear;

/* Plans the projection on this group (zeroes *out first; release it in every
 * case). TP_EREJECT with the reason in out->reason (and as the last error):
 * not an fp8 dtype, TP > 1 (fp8 communication not implemented yet), a shard
 * the format cannot quantize locally (tp_quant_shard_check), or cuBLASLt's
 * heuristic turning the format down on this GPU (mxfp8 below sm_100), in
 * cuBLASLt's words. TP_ECUBLAS / TP_ECUDA for a library failure. */
TP_MUST_CHECK tp_rc tp_fp8_linear_plan(const tp_group *g, const tp_fp8_linear_desc *desc,
                                       tp_fp8_linear *out);

/* Allocates the quantized buffers and quantizes each bf16 weight w[i]
 * (device, N x K) once, waited for. */
TP_MUST_CHECK tp_rc tp_fp8_linear_prepare(tp_fp8_linear *p, const void *const *w,
                                          cudaStream_t stream);

/* Quantizes x (bf16, device, T x K) into p's buffers, with the amax
 * agreement p->act_agreement asks for (an all-reduce max over the group's
 * NCCL communicator). Enqueued on stream. */
TP_MUST_CHECK tp_rc tp_fp8_linear_quantize_input(tp_group *g, tp_fp8_linear *p, const void *x,
                                                 cudaStream_t stream);

/* The scaled GEMM of every weight: y[i] (bf16, device, T x N) = X · W_iᵀ
 * from the quantized X and W_i. Enqueued on stream. */
TP_MUST_CHECK tp_rc tp_fp8_linear_gemms(tp_fp8_linear *p, void *const *y, cudaStream_t stream);

/* The timed step: quantize_input, then gemms. */
TP_MUST_CHECK tp_rc tp_fp8_linear_forward(tp_group *g, tp_fp8_linear *p, const void *x,
                                          void *const *y, cudaStream_t stream);

/* Frees what plan and prepare made (a zeroed or partly made p is fine). */
void tp_fp8_linear_release(tp_fp8_linear *p);

/* Bytes the projection holds besides the layer's bf16 tensors. */
size_t tp_fp8_linear_workspace_bytes(const tp_fp8_linear *p);

/* The judgement of one output of a step against the float64 products. */
typedef struct tp_fp8_check {
  int64_t elements;    /* sampled elements */
  int64_t nonfinite;   /* of them not finite */
  int64_t outside;     /* of the finite ones outside tp_fp8_gemm_tolerance */
  double worst_ratio;  /* max |y - ref| / tolerance */
  double rel_err;      /* ||y - ref|| / ||ref||, ref the dequantized operands' product */
  double rel_tol;      /* ||tolerances|| / ||ref||: the bound as a relative norm */
  double max_abs_err;  /* max |y - ref| */
  double rel_err_bf16; /* ||y - ref16|| / ||ref16||, ref16 the unquantized bf16 operands' */
} tp_fp8_check;

/* Checks y (bf16, device, T x N, the output of weight `weight` after a
 * step on x) on up to `rows` rows and `cols` columns spread evenly over the
 * output (first and last included), against float64 products of the
 * operands downloaded from the device: quantized X and W with their scales,
 * and the bf16 x and w. model: tp_fp8_accum_model_of the device. Waits for
 * the device. */
TP_MUST_CHECK tp_rc tp_fp8_linear_check(const tp_fp8_linear *p, int weight, const void *x,
                                        const void *w, const void *y, int rows, int cols,
                                        const tp_fp8_accum_model *model, tp_fp8_check *out);

#endif /* TP_LINEAR_FP8_H */
