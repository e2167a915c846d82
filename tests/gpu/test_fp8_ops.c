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
 *   bound, and a NaN output is counted.
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
  return ok && cudaDeviceSynchronize() == cudaSuccess;
}

static void free_tensors(tensors *t) {
  cudaFree(t->x);
  for (int i = 0; i < TP_MAX_WEIGHTS; ++i) {
    cudaFree(t->w[i]);
    cudaFree(t->y[i]);
    cudaFree(t->y2[i]);
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

/* Doubles (up) or halves the first stored activation scale (an E8M0 byte:
 * one exponent more or less). */
static int scale_first(tp_fp8_linear *p, int up) {
  unsigned char bytes[4];
  const size_t e = p->x_scales_shape.elem_bytes;
  if (cudaMemcpy(bytes, p->x_scales, e, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
  if (e == 4) {
    float v;
    memcpy(&v, bytes, 4);
    v = up ? v * 2.0f : v * 0.5f;
    memcpy(bytes, &v, 4);
  } else {
    bytes[0] = (unsigned char)(up ? bytes[0] + 1 : bytes[0] - 1);
  }
  return cudaMemcpy(p->x_scales, bytes, e, cudaMemcpyHostToDevice) == cudaSuccess;
}

/* The worker's verdict on one output (bench/gpu/ops_worker.c's fp8_judge). */
static int passes(const tp_fp8_check *k) { return k->nonfinite == 0 && k->outside == 0; }

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
  const tp_fp8_linear_desc d = {c->dtype, c->op, c->t, c->k, c->n, c->weights};
  tp_fp8_linear p;
  const tp_rc rc = tp_fp8_linear_plan(g, &d, &p);
  int bad = 0;
  if (rc == TP_EREJECT) {
    printf("  %-9s %-15s rejected: %s\n", tp_dtype_name(c->dtype), tp_op_name(c->op), p.reason);
    const int may_refuse = c->dtype == TP_MXFP8 ? major < 10 : major < 9;
    bad = !may_refuse || !strstr(p.reason, tp_dtype_name(c->dtype)) ||
          !strstr(p.reason, "cublasLtMatmulAlgoGetHeuristic");
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
      {TP_FP8, TP_OP_AG_LINEAR, 512, 768, 1024, 1},
      {TP_FP8_ROW, TP_OP_AG_LINEAR_MULTI, 512, 768, 1024, 2},
      {TP_FP8_BLOCK, TP_OP_LINEAR_RS, 512, 768, 1024, 1},
      {TP_FP8_BLOCK, TP_OP_AG_LINEAR, 384, 640, 896, 1},
      {TP_MXFP8, TP_OP_AG_LINEAR, 512, 768, 1024, 1},
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
