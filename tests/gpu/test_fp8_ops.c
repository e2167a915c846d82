/*
 * test_fp8_ops.c — the fp8 projection of `tpbench ops` (kernels/
 * tp_linear_fp8.h, what bench/gpu/ops_worker.c's fp8 items run) at TP 1 on
 * one GPU, per format (fp8, fp8-row, fp8-block, mxfp8) and per op:
 *
 * - the plan: on sm_90 fp8, fp8-row and fp8-block are planned and mxfp8 is
 *   rejected (TP_EREJECT) with cuBLASLt's heuristic named in the reason; on
 *   sm_100 and later every format is planned;
 * - the timed step (quantize the bf16 activation, scaled GEMM per weight,
 *   weights quantized once in prepare) gives outputs that pass the worker's
 *   numerics verdict: every sampled element finite and within the bound of
 *   tp_quant.h's accumulation model for this device against a float64
 *   product of the dequantized operands; the error against the unquantized
 *   bf16 operands is printed and must lie between 1e-4 and 0.2 (quantization
 *   costs something, not everything);
 * - the GEMMs alone on the step's quantized activation equal the step's
 *   outputs bit for bit (the worker's exact rule for the GEMM alone);
 * - the check can fail: outputs of GEMMs run with the first activation
 *   scale doubled, judged with the right scale, have elements outside the
 *   bound, and a NaN output is counted;
 * - the backward (cases marked bwd: dX = sum_i dY_i · W_i with dY_i E5M2
 *   along N and W_iᵀ E4M3 from prepare, dW_i = dY_iᵀ · X with both
 *   transposed and quantized along T): dx and every dw pass the same
 *   verdict against float64 products of their dequantized operands (dx of
 *   two weights against the sum of two), their error against the bf16
 *   operands lies between 1e-4 and 0.25 (E5M2 keeps 2 mantissa bits), the
 *   backward's GEMMs alone on its quantized operands equal its outputs bit
 *   for bit, and dx from GEMMs run with the first dY scale doubled fails
 *   the check (so does a dw with the first dYᵀ scale doubled). fp8's
 *   backward must plan on sm_90; fp8-row's and fp8-block's may be refused
 *   by cuBLASLt's heuristic for a dgrad or wgrad GEMM (E5M2 with vector or
 *   block scales), the refusal printed with a NOTE.
 *
 * Exit 77 (skipped) without a GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/tp_device.h"
#include "kernels/tp_linear_fp8.h"
#include "tests/gpu/gpu_harness.h"

/* One case: a format on an op's shapes (T, N, K, weights). */
typedef struct fp8_case {
  tp_dtype dtype;
  tp_op op;
  int64_t t, n, k;
  int weights;
  int backward;
} fp8_case;

#define FAIL_IF(cond, ...)                                                                         \
  do {                                                                                             \
    if (cond) {                                                                                    \
      printf("  FAIL: " __VA_ARGS__);                                                              \
      printf("\n");                                                                                \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static int rc_ok(tp_rc rc, const char *what) {
  if (rc == TP_OK) return 1;
  printf("  FAIL: %s: %s (%s)\n", what, tp_rc_name(rc), tp_last_message());
  return 0;
}

/* The bf16 tensors of a case, random, on the device. */
typedef struct tensors {
  void *x, *w[TP_MAX_WEIGHTS], *y[TP_MAX_WEIGHTS], *y2[TP_MAX_WEIGHTS];
  void *dy[TP_MAX_WEIGHTS], *dw[TP_MAX_WEIGHTS], *dw2[TP_MAX_WEIGHTS], *dx, *dx2;
} tensors;

static int alloc_tensors(const fp8_case *c, tensors *t) {
  memset(t, 0, sizeof *t);
  int ok = cudaMalloc(&t->x, (size_t)(c->t * c->k) * 2) == cudaSuccess &&
           tp_launch_fill_random(TP_BF16, t->x, (size_t)(c->t * c->k), 11, 1.0f, 0) == cudaSuccess;
  for (int i = 0; ok && i < c->weights; ++i)
    ok = cudaMalloc(&t->w[i], (size_t)(c->n * c->k) * 2) == cudaSuccess &&
         cudaMalloc(&t->y[i], (size_t)(c->t * c->n) * 2) == cudaSuccess &&
         cudaMalloc(&t->y2[i], (size_t)(c->t * c->n) * 2) == cudaSuccess &&
         tp_launch_fill_random(TP_BF16, t->w[i], (size_t)(c->n * c->k), 20 + (uint64_t)i,
                               1.0f / sqrtf((float)c->k), 0) == cudaSuccess;
  if (!c->backward) return ok && cudaDeviceSynchronize() == cudaSuccess;
  const size_t nx = (size_t)(c->t * c->k), nw = (size_t)(c->n * c->k), ny = (size_t)(c->t * c->n);
  ok =
      ok && cudaMalloc(&t->dx, nx * 2) == cudaSuccess && cudaMalloc(&t->dx2, nx * 2) == cudaSuccess;
  for (int i = 0; ok && i < c->weights; ++i)
    ok = cudaMalloc(&t->dy[i], ny * 2) == cudaSuccess &&
         cudaMalloc(&t->dw[i], nw * 2) == cudaSuccess &&
         cudaMalloc(&t->dw2[i], nw * 2) == cudaSuccess &&
         tp_launch_fill_random(TP_BF16, t->dy[i], ny, 40 + (uint64_t)i, 1.0f, 0) == cudaSuccess;
  return ok && cudaDeviceSynchronize() == cudaSuccess;
}

static void free_tensors(tensors *t) {
  cudaFree(t->x);
  cudaFree(t->dx);
  cudaFree(t->dx2);
  for (int i = 0; i < TP_MAX_WEIGHTS; ++i) {
    void *per[] = {t->w[i], t->y[i], t->y2[i], t->dy[i], t->dw[i], t->dw2[i]};
    for (size_t j = 0; j < sizeof per / sizeof per[0]; ++j) cudaFree(per[j]);
  }
}

static int same_bytes(const void *a, const void *b, size_t bytes) {
  unsigned char *ha = malloc(bytes), *hb = malloc(bytes);
  int same = ha && hb && cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost) == cudaSuccess &&
             cudaMemcpy(hb, b, bytes, cudaMemcpyDeviceToHost) == cudaSuccess &&
             memcmp(ha, hb, bytes) == 0;
  free(ha);
  free(hb);
  return same;
}

/* Doubles (up) or halves the first stored scale of a buffer of elements of
 * e bytes (an E8M0 byte: one exponent more or less). */
static int scale_first_of(void *scales, size_t e, int up) {
  unsigned char bytes[4];
  if (cudaMemcpy(bytes, scales, e, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
  if (e == 4) {
    float v;
    memcpy(&v, bytes, 4);
    v = up ? v * 2.0f : v * 0.5f;
    memcpy(bytes, &v, 4);
  } else {
    bytes[0] = (unsigned char)(up ? bytes[0] + 1 : bytes[0] - 1);
  }
  return cudaMemcpy(scales, bytes, e, cudaMemcpyHostToDevice) == cudaSuccess;
}

/* The first stored activation scale. */
static int scale_first(tp_fp8_linear *p, int up) {
  return scale_first_of(p->x_scales, p->x_scales_shape.elem_bytes, up);
}

/* The worker's verdict on one output (bench/gpu/ops_worker.c's fp8_judge). */
static int passes(const tp_fp8_check *k) { return k->nonfinite == 0 && k->outside == 0; }

static void print_check(const fp8_case *c, const char *name, const tp_fp8_check *k) {
  printf("  %-9s %-15s %s: %lld sampled, %lld outside, %lld non-finite, worst |err|/bound %.3g, "
         "rel err %.2e (bound %.2e), vs bf16 %.2e\n",
         tp_dtype_name(c->dtype), tp_op_name(c->op), name, (long long)k->elements,
         (long long)k->outside, (long long)k->nonfinite, k->worst_ratio, k->rel_err, k->rel_tol,
         k->rel_err_bf16);
}

/* The worker's verdict on a gradient, and quantization's cost within reason. */
static int grad_passes(const tp_fp8_check *k) {
  return k->nonfinite == 0 && k->outside == 0 && k->rel_err_bf16 > 1e-4 && k->rel_err_bf16 < 0.25;
}

/* A broken backward is caught: GEMMs run with a doubled first scale of one
 * of the quantized gradients, judged with the right one. dx: dY_0's scale. */
static int backward_control(tp_fp8_linear *p, const fp8_case *c, tensors *t,
                            const tp_fp8_accum_model *model, cudaStream_t s) {
  tp_fp8_check k;
  int bad = !scale_first_of(p->dy_scales[0], p->dy_scales_shape.elem_bytes, 1) ||
            !rc_ok(tp_fp8_linear_backward_gemms(p, t->dx2, t->dw2, s), "backward GEMMs") ||
            cudaStreamSynchronize(s) != cudaSuccess ||
            !scale_first_of(p->dy_scales[0], p->dy_scales_shape.elem_bytes, 0) ||
            !rc_ok(tp_fp8_linear_check_dx(p, (const void *const *)t->dy, (const void *const *)t->w,
                                          t->dx2, 16, 128, model, &k),
                   "dx check");
  if (!bad) printf("  doubled first dY scale: dx %lld outside the bound\n", (long long)k.outside);
  bad |= !bad && k.outside == 0;
  bad |= bad || !scale_first_of(p->dyt_scales[0], p->dyt_scales_shape.elem_bytes, 1) ||
         !rc_ok(tp_fp8_linear_backward_gemms(p, t->dx2, t->dw2, s), "backward GEMMs") ||
         cudaStreamSynchronize(s) != cudaSuccess ||
         !scale_first_of(p->dyt_scales[0], p->dyt_scales_shape.elem_bytes, 0) ||
         !rc_ok(tp_fp8_linear_check_dw(p, 0, t->x, t->dy[0], t->dw2[0], 16, 128, model, &k),
                "dw check");
  if (!bad) printf("  doubled first dYt scale: dw %lld outside the bound\n", (long long)k.outside);
  (void)c;
  return bad || k.outside == 0;
}

/* The backward after a forward: judged, its GEMMs alone bit for bit, the control. */
static int run_backward(tp_group *g, tp_fp8_linear *p, const fp8_case *c, tensors *t,
                        const tp_fp8_accum_model *model, cudaStream_t s) {
  int bad = !rc_ok(tp_fp8_linear_backward(g, p, t->x, (const void *const *)t->dy, t->dx, t->dw, s),
                   "backward");
  bad |= bad || !rc_ok(tp_fp8_linear_backward_gemms(p, t->dx2, t->dw2, s), "backward GEMMs alone");
  if (bad) return 1;
  tp_fp8_check k;
  bad |= !rc_ok(tp_fp8_linear_check_dx(p, (const void *const *)t->dy, (const void *const *)t->w,
                                       t->dx, 16, 128, model, &k),
                "dx check");
  print_check(c, "dx", &k);
  bad |= !grad_passes(&k) || !same_bytes(t->dx, t->dx2, (size_t)(c->t * c->k) * 2);
  for (int i = 0; !bad && i < c->weights; ++i) {
    bad |= !rc_ok(tp_fp8_linear_check_dw(p, i, t->x, t->dy[i], t->dw[i], 16, 128, model, &k),
                  "dw check");
    print_check(c, i ? "dw1" : "dw", &k);
    bad |= !grad_passes(&k) || !same_bytes(t->dw[i], t->dw2[i], (size_t)(c->n * c->k) * 2);
  }
  return bad || backward_control(p, c, t, model, s);
}

static int run_planned(tp_group *g, const fp8_case *c, tp_fp8_linear *p,
                       const tp_fp8_accum_model *model) {
  tensors t;
  FAIL_IF(!alloc_tensors(c, &t), "device tensors");
  int bad = 0;
  cudaStream_t s = g->main_stream;
  bad |= !rc_ok(tp_fp8_linear_prepare(p, (const void *const *)t.w, s), "prepare");
  bad |= bad || !rc_ok(tp_fp8_linear_forward(g, p, t.x, t.y, s), "forward");
  bad |= bad || !rc_ok(tp_fp8_linear_gemms(p, t.y2, s), "GEMMs alone");
  for (int i = 0; !bad && i < c->weights; ++i) {
    tp_fp8_check k;
    bad |= !rc_ok(tp_fp8_linear_check(p, i, t.x, t.w[i], t.y[i], 16, 128, model, &k), "check");
    printf("  %-9s %-15s y%d: %lld sampled, %lld outside, %lld non-finite, worst |err|/bound "
           "%.3g, rel err %.2e (bound %.2e), vs bf16 %.2e\n",
           tp_dtype_name(c->dtype), tp_op_name(c->op), i, (long long)k.elements,
           (long long)k.outside, (long long)k.nonfinite, k.worst_ratio, k.rel_err, k.rel_tol,
           k.rel_err_bf16);
    bad |= !passes(&k) || !(k.rel_err_bf16 > 1e-4 && k.rel_err_bf16 < 0.2) ||
           !same_bytes(t.y[i], t.y2[i], (size_t)(c->t * c->n) * 2);
  }
  /* the check can fail: GEMMs run with a doubled scale, judged with the right one; then a NaN */
  tp_fp8_check broken;
  bad |= bad || !scale_first(p, 1) || !rc_ok(tp_fp8_linear_gemms(p, t.y2, s), "GEMMs") ||
         cudaStreamSynchronize(s) != cudaSuccess || !scale_first(p, 0) ||
         !rc_ok(tp_fp8_linear_check(p, 0, t.x, t.w[0], t.y2[0], 16, 128, model, &broken), "check");
  if (!bad) printf("  doubled first scale: %lld outside the bound\n", (long long)broken.outside);
  bad |= !bad && broken.outside == 0;
  const uint16_t nan = 0x7fc0;
  bad |= bad || cudaMemcpy(t.y[0], &nan, 2, cudaMemcpyHostToDevice) != cudaSuccess ||
         !rc_ok(tp_fp8_linear_check(p, 0, t.x, t.w[0], t.y[0], 16, 128, model, &broken), "check");
  bad |= !bad && broken.nonfinite != 1;
  if (!bad && c->backward) bad |= run_backward(g, p, c, &t, model, s);
  free_tensors(&t);
  return bad;
}

static int run_case(tp_group *g, const fp8_case *c) {
  int major = 0, minor = 0;
  FAIL_IF(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g->device) !=
                  cudaSuccess ||
              cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, g->device) !=
                  cudaSuccess,
          "compute capability");
  const tp_fp8_accum_model model = tp_fp8_accum_model_of(major, minor);
  const tp_fp8_linear_desc d = {c->dtype,      c->op,      c->t,        c->k,
                                c->n,          c->weights, c->backward, TP_BACKEND_STOCK,
                                TP_SCHED_AUTO, 0,          TP_COMM_NONE};
  tp_fp8_linear p;
  const tp_rc rc = tp_fp8_linear_plan(g, &d, &p);
  int bad = 0;
  if (rc == TP_EREJECT) {
    printf("  %-9s %-15s rejected: %s\n", tp_dtype_name(c->dtype), tp_op_name(c->op), p.reason);
    const int may_refuse = c->dtype == TP_MXFP8 ? major < 10 : major < 9;
    /* The backward's E5M2 x E4M3 GEMMs with vector or block scales: cuBLASLt
     * decides on the GPU; a refusal names the GEMM kind. fp8 (tensorwise)
     * E5M2 gradients are cuBLASLt's classic recipe and must plan on sm_90. */
    const int bwd_refusal = c->backward && c->dtype != TP_FP8 &&
                            (strstr(p.reason, "dgrad GEMM") || strstr(p.reason, "wgrad GEMM"));
    bad = !(may_refuse || bwd_refusal) || !strstr(p.reason, tp_dtype_name(c->dtype)) ||
          !strstr(p.reason, "cublasLtMatmulAlgoGetHeuristic");
    if (bwd_refusal)
      printf("  NOTE: cuBLASLt refuses the %s backward here\n", tp_dtype_name(c->dtype));
  } else if (rc != TP_OK) {
    bad = !rc_ok(rc, "plan");
  } else {
    bad = (c->dtype == TP_MXFP8 && major < 10) || run_planned(g, c, &p, &model);
  }
  tp_fp8_linear_release(&p);
  if (bad) printf("  FAIL: %s %s\n", tp_dtype_name(c->dtype), tp_op_name(c->op));
  return bad;
}

static int body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  const fp8_case cases[] = {
      {TP_FP8, TP_OP_AG_LINEAR, 512, 768, 1024, 1, 0},
      {TP_FP8_ROW, TP_OP_AG_LINEAR_MULTI, 512, 768, 1024, 2, 0},
      {TP_FP8_BLOCK, TP_OP_LINEAR_RS, 512, 768, 1024, 1, 0},
      {TP_FP8_BLOCK, TP_OP_AG_LINEAR, 384, 640, 896, 1, 0},
      {TP_MXFP8, TP_OP_AG_LINEAR, 512, 768, 1024, 1, 0},
      /* the backward: every format on every op, two weights summed into dx */
      {TP_FP8, TP_OP_AG_LINEAR, 512, 768, 1024, 1, 1},
      {TP_FP8, TP_OP_AG_LINEAR_MULTI, 256, 512, 768, 2, 1},
      {TP_FP8, TP_OP_LINEAR_RS, 384, 1024, 640, 1, 1},
      {TP_FP8_ROW, TP_OP_AG_LINEAR, 512, 768, 1024, 1, 1},
      {TP_FP8_ROW, TP_OP_AG_LINEAR_MULTI, 512, 768, 1024, 2, 1},
      {TP_FP8_ROW, TP_OP_LINEAR_RS, 384, 1024, 640, 1, 1},
      {TP_FP8_BLOCK, TP_OP_AG_LINEAR, 384, 640, 896, 1, 1},
      {TP_FP8_BLOCK, TP_OP_AG_LINEAR_MULTI, 256, 512, 768, 2, 1},
      {TP_FP8_BLOCK, TP_OP_LINEAR_RS, 512, 1024, 768, 1, 1},
      {TP_MXFP8, TP_OP_AG_LINEAR, 512, 768, 1024, 1, 1},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) bad |= run_case(g, &cases[i]);
  return bad;
}

static void test_fp8_ops_tp1(void **state) {
  (void)state;
  assert_int_equal(gpu_run_group(1, body, NULL), 0);
}

int main(void) {
  if (gpu_device_count() == 0) {
    printf("no CUDA device: GPU test skipped\n");
    return GPU_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_fp8_ops_tp1)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
