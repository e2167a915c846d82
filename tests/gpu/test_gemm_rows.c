/*
 * test_gemm_rows.c — GPU test of kernels/tp_gemm.h's row contract: a GEMM
 * over a chunk of rows gives, for those rows, the bits the GEMM over all of
 * them gives. dist_gemm's all-gather side computes its output chunk by chunk
 * (a rank's shard, or a fraction of it, at a time) where stock runs one GEMM
 * over the gathered whole, and its outputs are judged bit for bit against
 * stock's; the contract is what makes that judgement fair.
 *
 * On one GPU, no ranks: for bf16 and fp32, for the shapes of the llama3-1b
 * projections at 1024 tokens (qkv, w13, wo's dgrad), the whole GEMM and the
 * same rows in 2, 4 and 8 chunks (TP 2, 4, 8), with random inputs and the
 * output poisoned first; every chunked output must equal the whole's bit for
 * bit. (Found by the coverage matrix at TP 4: cuBLASLt's heuristic gave 256
 * rows of fp32 another summation order than 1024.) Exits 77 without a GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/tp_gemm.h"
#include "tests/gpu/gpu_harness.h"

typedef struct gemm_shape {
  const char *name;
  int64_t m, n, k; /* Y[m, n] = X[m, k] · W[n, k]ᵀ */
} gemm_shape;

static const gemm_shape SHAPES[] = {
    {"llama3-1b qkv (TP 4 shard of N)", 1024, 768, 2048},
    {"llama3-1b w13 (TP 4 shard of N, both weights)", 1024, 4096, 2048},
    {"llama3-1b wo dgrad (dX = dY · W)", 1024, 512, 2048},
    {"llama3-1b qkv (TP 8 shard of N)", 1024, 384, 2048},
};

static int check(cudaError_t err, const char *what) {
  if (err == cudaSuccess) return 0;
  fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
  return 1;
}

/* Y whole, then Y again in `chunks` row chunks; the count of differing bytes. */
static long compare_chunked(tp_gemm *gemm, tp_dtype dt, const gemm_shape *s, const void *x,
                            const void *w, void *whole, void *parts, int chunks) {
  const size_t e = dt == TP_BF16 ? 2 : 4, bytes = (size_t)(s->m * s->n) * e;
  tp_gemm_desc d = {dt, 0, 1, s->m, s->n, s->k, x, s->k, w, s->k, whole, s->n, NULL, 0.0f};
  if (check(cudaMemset(whole, 0xff, bytes), "cudaMemset") ||
      check(cudaMemset(parts, 0xff, bytes), "cudaMemset") || tp_gemm_enqueue(gemm, &d, 0) != TP_OK)
    return -1;
  const int64_t rows = s->m / chunks;
  for (int c = 0; c < chunks; ++c) {
    tp_gemm_desc p = d;
    p.m = rows;
    p.a = (const char *)x + (size_t)(c * rows * s->k) * e;
    p.c = (char *)parts + (size_t)(c * rows * s->n) * e;
    if (tp_gemm_enqueue(gemm, &p, 0) != TP_OK) return -1;
  }
  if (check(cudaDeviceSynchronize(), "GEMMs")) return -1;
  unsigned char *a = malloc(bytes), *b = malloc(bytes);
  long differ = -1;
  if (a && b && !check(cudaMemcpy(a, whole, bytes, cudaMemcpyDeviceToHost), "copy") &&
      !check(cudaMemcpy(b, parts, bytes, cudaMemcpyDeviceToHost), "copy")) {
    differ = 0;
    for (size_t i = 0; i < bytes; i += e) differ += memcmp(a + i, b + i, e) != 0;
  }
  free(a);
  free(b);
  return differ;
}

static int run_shape(tp_gemm *gemm, tp_dtype dt, const gemm_shape *s) {
  const size_t e = dt == TP_BF16 ? 2 : 4;
  const size_t nx = (size_t)(s->m * s->k), nw = (size_t)(s->n * s->k), ny = (size_t)(s->m * s->n);
  void *hx = malloc(nx * e), *hw = malloc(nw * e), *x = NULL, *w = NULL, *whole = NULL,
       *parts = NULL;
  int failures = 1;
  if (hx && hw && !check(cudaMalloc(&x, nx * e), "cudaMalloc") &&
      !check(cudaMalloc(&w, nw * e), "cudaMalloc") &&
      !check(cudaMalloc(&whole, ny * e), "cudaMalloc") &&
      !check(cudaMalloc(&parts, ny * e), "cudaMalloc")) {
    gpu_fill_host(dt, hx, nx, 11, 1.0f);
    gpu_fill_host(dt, hw, nw, 12, 0.05f);
    failures = check(cudaMemcpy(x, hx, nx * e, cudaMemcpyHostToDevice), "copy") +
               check(cudaMemcpy(w, hw, nw * e, cudaMemcpyHostToDevice), "copy");
    for (int chunks = 2; chunks <= 8 && !failures; chunks *= 2) {
      long differ = compare_chunked(gemm, dt, s, x, w, whole, parts, chunks);
      printf("%s %s: %d chunks of %lld rows: %ld of %zu elements differ from the whole GEMM\n",
             dt == TP_BF16 ? "bf16" : "fp32", s->name, chunks, (long long)(s->m / chunks), differ,
             ny);
      failures += differ != 0;
    }
  }
  cudaFree(x);
  cudaFree(w);
  cudaFree(whole);
  cudaFree(parts);
  free(hx);
  free(hw);
  return failures;
}

static void test_chunks_give_the_whole_bits(void **state) {
  (void)state;
  tp_gemm *gemm = NULL;
  assert_int_equal(cudaSetDevice(0), cudaSuccess);
  assert_int_equal(tp_gemm_create(64u << 20, &gemm), TP_OK);
  int failures = 0;
  for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; ++i)
    failures += run_shape(gemm, TP_BF16, &SHAPES[i]) + run_shape(gemm, TP_FP32, &SHAPES[i]);
  tp_gemm_destroy(gemm);
  assert_int_equal(failures, 0);
}

int main(void) {
  if (gpu_device_count() == 0) {
    printf("no CUDA device: GPU test skipped\n");
    return GPU_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_chunks_give_the_whole_bits)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
