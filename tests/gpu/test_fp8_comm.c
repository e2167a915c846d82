/*
 * test_fp8_comm.c — fp8 communication (issue 15) on the GPU.
 *
 * One GPU (gpu_fp8_comm), TP ranks simulated:
 * - every format x TP 2, 4, 8 x shard layouts (rows below, at and above a
 *   128-row tile, odd; columns with partial blocks, and an op set shape):
 *   each rank's row shard quantized by the device kernel (tensorwise with
 *   the ranks' agreed amax: each shard's local amax, their max), the
 *   shards' data and stored scale buffers concatenated rank-major as
 *   NCCL's all-gather delivers them, the scales re-placed by the device
 *   kernel (tp_quant_replace_gathered_enqueue) into a poisoned buffer: data
 *   and scales (padding included) equal quantizing the whole on the device
 *   bit for bit, and equal the reference re-placement of the same gathered
 *   bytes; a planted fault (an off-by-one in the rank stride) fails it for
 *   every layout but tensorwise (whose one float is rank 0's);
 * - each chunk's scaled GEMM reading its own chunk's scales (the source
 *   rank's shard scales, what dist_gemm's pushes carry) against a float64
 *   product of the dequantized operands, within tp_quant.h's bound, and
 *   bit for bit equal to the rows of one GEMM over the whole with the
 *   re-placed scales (what the ops harness holds dist_gemm to against
 *   stock); a chunk GEMM given the next chunk's scales fails the bound
 *   (row and block formats; tensorwise scales are equal by agreement).
 * TP 2, 4 and 8 (`gpu_fp8_comm tp` or `--tp LIST`: cases tp_paths/tpN,
 * gpu_harness.h; a degree above the rank slots is reported skipped): the
 * real paths of kernels/tp_linear_fp8_comm.h (T, N, K 1024: 128 rows and
 * columns per rank at TP 8) for fp8, fp8-row and
 * fp8-block: stock with comm fp8 and comm bf16 give the same bits on the
 * gather side, dist_gemm (ce and sm) gives stock's bits there, stock's
 * output passes the float64 check, and on the scatter side dist_gemm's y
 * lies within the bf16 sum's tolerance of stock's (at TP 2 each element within
 * two steps, above it the norm-wise 2·2^-8·sqrt(W): sums_agree); the collective alone
 * runs. The backward of both sides (tp_linear_fp8_bwd.c): stock's dx (the
 * local partial on the gather side) and dw within the float64 bound, its
 * gathered operands (Xᵀ; dY and dYᵀ) bit for bit those of quantizing the
 * whole (gathered in bf16 by the test), comm bf16's backward = comm fp8's,
 * dist_gemm ce and sm against stock (dw, the scatter side's dx bit for
 * bit; the gather side's summed dx within the bf16 sum's step), the
 * collectives alone run. Planted (planted_scale_shift/tpN): with rows of
 * different magnitudes, stock comm fp8's gathered X scales shifted one row
 * block for each rank's shard in turn make the float64 check of y fail
 * (fp8-row and fp8-block; tensorwise fp8 has one agreed scale).
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
#include "kernels/tp_gemm_scaled.h"
#include "kernels/tp_linear_fp8.h"
#include "kernels/tp_quant_device.h"
#include "tests/gpu/gpu_harness.h"

static int g_major, g_minor;

/* ---- device memory ------------------------------------------------------------------------ */

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
    fail_msg("cudaMalloc of %zu bytes failed", bytes);
  return p;
}

static void *dev_upload(const void *host, size_t bytes) {
  void *p = dev_alloc(bytes);
  if (cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    fail_msg("upload of %zu bytes failed", bytes);
  return p;
}

static void *download(const void *dev, size_t bytes) {
  void *h = malloc(bytes ? bytes : 1);
  assert_non_null(h);
  const cudaError_t err = cudaMemcpy(h, dev, bytes, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) fail_msg("download: %s", cudaGetErrorString(err));
  return h;
}

static void sync_ok(void) {
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) fail_msg("CUDA error: %s", cudaGetErrorString(err));
}

static void check_rc(tp_rc rc, const char *what) {
  if (rc != TP_OK) fail_msg("%s: %s", what, tp_last_error());
}

/* bf16 values in [-1, 1) times 2^((row % 7) - 3): rows (and so chunks) differ in magnitude. */
static uint16_t *random_bf16(int64_t rows, int64_t cols, uint64_t seed) {
  float *f = malloc(sizeof(float) * (size_t)(rows * cols));
  uint16_t *b = malloc(sizeof(uint16_t) * (size_t)(rows * cols));
  assert_non_null(f);
  assert_non_null(b);
  gpu_fill_host(TP_FP32, f, (size_t)(rows * cols), seed, 1.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      b[r * cols + c] = gpu_float_to_bf16(ldexpf(f[r * cols + c], (int)(r % 7) - 3));
  free(f);
  return b;
}

/* ---- a simulated all-gather of quantized row shards ---------------------------------------- */

static const tp_quant_format FORMATS[] = {TP_QFMT_FP8, TP_QFMT_FP8_ROW, TP_QFMT_FP8_BLOCK,
                                          TP_QFMT_MXFP8};
static const int TP_DEGREES[] = {2, 4, 8};
static const int64_t SHARDS[][2] = {{3, 96}, {64, 256}, {130, 320}, {128, 4096}, {512, 1024}};

/* The whole and its gathered shards, on the device. */
typedef struct sim_gather {
  tp_quant_format f;
  int tp;
  int64_t s, k; /* shard rows, columns */
  tp_scale_gather g;
  void *x;                   /* bf16 [tp s, k] */
  uint8_t *q_whole, *q_gath; /* [tp s, k] */
  void *s_whole, *s_gath;    /* the whole's scales; tp shard scale buffers */
  void *s_placed;            /* re-placed from s_gath */
  float *amax;               /* tp shards' local amax (tensorwise), then the agreed one */
} sim_gather;

static tp_quant_args quant(tp_quant_format f, const void *x, int64_t rows, int64_t k, uint8_t *q,
                           void *scales, const float *agreed) {
  const tp_quant_args a = {f, TP_QROLE_ACT, TP_FP8_E4M3, TP_BF16, x, rows, k, k, q, scales, agreed};
  return a;
}

/* Tensorwise: the agreement an all-reduce max makes, from each shard's local amax. */
static void agree(sim_gather *sg) {
  for (int r = 0; r < sg->tp; ++r) {
    const char *xr = (const char *)sg->x + (size_t)(r * sg->s * sg->k) * 2;
    /* the amax reads x only; the arguments' check asks for the data and scale buffers the
     * quantization that follows writes (the shard's own, as the worker passes them) */
    const tp_quant_args a = quant(sg->f, xr, sg->s, sg->k, sg->q_gath, sg->s_gath, NULL);
    check_rc(tp_quant_local_amax_enqueue(&a, sg->amax + r, 0), "local amax");
  }
  sync_ok();
  float *h = download(sg->amax, sizeof(float) * (size_t)sg->tp);
  for (int r = 1; r < sg->tp; ++r) h[0] = fmaxf(h[0], h[r]);
  if (cudaMemcpy(sg->amax, h, sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess)
    fail_msg("amax upload");
  free(h);
}

static void sim_make(sim_gather *sg, tp_quant_format f, int tp, int64_t s, int64_t k,
                     uint64_t seed) {
  memset(sg, 0, sizeof *sg);
  sg->f = f;
  sg->tp = tp;
  sg->s = s;
  sg->k = k;
  check_rc(tp_scale_gather_shape(f, s, k, tp, &sg->g), "gather shape");
  const int64_t rows = s * tp;
  uint16_t *hx = random_bf16(rows, k, seed);
  sg->x = dev_upload(hx, sizeof(uint16_t) * (size_t)(rows * k));
  free(hx);
  const size_t whole = tp_quant_scale_bytes(&sg->g.whole),
               shard = tp_quant_scale_bytes(&sg->g.shard);
  sg->q_whole = dev_alloc((size_t)(rows * k));
  sg->q_gath = dev_alloc((size_t)(rows * k));
  sg->s_whole = dev_alloc(whole);
  sg->s_gath = dev_alloc(tp_scale_gather_bytes(&sg->g));
  sg->s_placed = dev_alloc(whole);
  sg->amax = dev_alloc(sizeof(float) * (size_t)tp);
  const tp_quant_args w = quant(f, sg->x, rows, k, sg->q_whole, sg->s_whole, NULL);
  check_rc(tp_quant_enqueue(&w, 0), "quantize the whole");
  if (f == TP_QFMT_FP8) agree(sg);
  for (int r = 0; r < tp; ++r) {
    const size_t row0 = (size_t)(r * s);
    const tp_quant_args a =
        quant(f, (const char *)sg->x + row0 * (size_t)k * 2, s, k, sg->q_gath + row0 * (size_t)k,
              (char *)sg->s_gath + (size_t)r * shard, f == TP_QFMT_FP8 ? sg->amax : NULL);
    check_rc(tp_quant_enqueue(&a, 0), "quantize a shard");
  }
  if (cudaMemset(sg->s_placed, 0xA5, whole) != cudaSuccess) fail_msg("poison");
  check_rc(tp_quant_replace_gathered_enqueue(&sg->g, sg->s_gath, sg->s_placed, 0), "re-place");
  sync_ok();
}

static void sim_free(sim_gather *sg) {
  void *all[] = {sg->x, sg->q_whole, sg->q_gath, sg->s_whole, sg->s_gath, sg->s_placed, sg->amax};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) cudaFree(all[i]);
}

/* 0 when the gathered data and the re-placed scales are the whole's, bit for bit. */
static int sim_mismatch(const sim_gather *sg, const void *placed_dev) {
  const size_t data = (size_t)(sg->s * sg->tp * sg->k), whole = tp_quant_scale_bytes(&sg->g.whole);
  uint8_t *qw = download(sg->q_whole, data), *qg = download(sg->q_gath, data);
  void *sw = download(sg->s_whole, whole), *sp = download(placed_dev, whole);
  const int bad = memcmp(qw, qg, data) != 0 ? 1 : memcmp(sw, sp, whole) != 0 ? 2 : 0;
  free(qw);
  free(qg);
  free(sw);
  free(sp);
  return bad;
}

static void test_replace_on_device(void **state) {
  (void)state;
  int cases = 0, faults_caught = 0, faults_planted = 0;
  for (size_t fi = 0; fi < sizeof FORMATS / sizeof FORMATS[0]; ++fi)
    for (size_t ti = 0; ti < sizeof TP_DEGREES / sizeof TP_DEGREES[0]; ++ti)
      for (size_t si = 0; si < sizeof SHARDS / sizeof SHARDS[0]; ++si) {
        sim_gather sg;
        sim_make(&sg, FORMATS[fi], TP_DEGREES[ti], SHARDS[si][0], SHARDS[si][1], 7 + si + ti);
        const int bad = sim_mismatch(&sg, sg.s_placed);
        if (bad)
          fail_msg("%s TP %d shard %lldx%lld: %s differ from quantizing the whole",
                   tp_quant_format_name(sg.f), sg.tp, (long long)sg.s, (long long)sg.k,
                   bad == 1 ? "gathered data" : "re-placed scales");
        /* the device kernel writes the reference's bytes */
        const size_t whole = tp_quant_scale_bytes(&sg.g.whole);
        void *gath = download(sg.s_gath, tp_scale_gather_bytes(&sg.g));
        void *ref = malloc(whole), *dev = download(sg.s_placed, whole);
        tp_quant_replace_gathered_ref(&sg.g, gath, ref);
        assert_memory_equal(ref, dev, whole);
        /* planted fault: each rank's buffer taken one element shorter (an off-by-one in the
         * rank stride; reads stay inside the gathered buffer); tensorwise reads rank 0 only */
        if (sg.g.shard.layout != TP_SCALE_SCALAR) {
          tp_scale_gather off = sg.g;
          off.shard.stored -= 1;
          check_rc(tp_quant_replace_gathered_enqueue(&off, sg.s_gath, sg.s_placed, 0), "fault");
          sync_ok();
          faults_planted++;
          faults_caught += sim_mismatch(&sg, sg.s_placed) == 2;
        }
        free(gath);
        free(ref);
        free(dev);
        sim_free(&sg);
        cases++;
      }
  printf("  %d gathers (4 formats x TP 2/4/8 x 5 shard layouts) re-placed on the device bit for "
         "bit; %d of %d planted off-by-one placements caught\n",
         cases, faults_caught, faults_planted);
  assert_int_equal(faults_caught, faults_planted);
  assert_true(faults_planted > 0);
}

/* ---- each chunk's GEMM on its own scales ------------------------------------------------------
 */

static double *dequant(tp_quant_format f, tp_quant_role role, const void *q_dev, const void *s_dev,
                       int64_t rows, int64_t k) {
  tp_scale_shape sh;
  check_rc(tp_quant_scale_shape(f, role, rows, k, &sh), "scale shape");
  tp_quant_args a = {f, role, TP_FP8_E4M3, TP_BF16, NULL, rows, k, k, NULL, NULL, NULL};
  a.q = download(q_dev, (size_t)(rows * k));
  a.scales = download(s_dev, tp_quant_scale_bytes(&sh));
  double *out = malloc(sizeof(double) * (size_t)(rows * k));
  assert_non_null(out);
  check_rc(tp_quant_dequant_ref(&a, out), "dequantize");
  free(a.q);
  free(a.scales);
  return out;
}

/* Elements of y (bf16 [m, n]) outside the bound against dx · dwᵀ. */
static long outside_bound(const uint16_t *y, const double *dx, const double *dw, int64_t m,
                          int64_t n, int64_t k, const tp_fp8_accum_model *model, double *worst) {
  long bad = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const tp_fp8_dot d = tp_fp8_dot_ref(dx + i * k, dw + j * k, k, model->group);
      const double v = gpu_bf16_to_float(y[i * n + j]);
      const double r =
          isfinite(v) ? fabs(v - d.ref) / tp_fp8_gemm_tolerance(model, &d, k) : INFINITY;
      if (r > *worst) *worst = r;
      bad += r > 1.0;
    }
  return bad;
}

/* Chunk r's GEMM [s, n] into y rows r·s, from the gathered data and shard r's scales (or, for
 * the planted fault, shard `scales_of`'s). */
/* A shard's scales in the rank-major gathered buffer sit at multiples of their own size (4
 * bytes for a tensorwise scale), which cuBLASLt refuses as a scale pointer (seen on the H200:
 * CUBLAS_STATUS_NOT_SUPPORTED from cublasLtMatmul); the fused path's packets put each shard's
 * scales at a 256-byte boundary (kernels/tp_linear_fp8_comm.c), so the test does too. */
enum { SCALE_SLOT_ALIGN = 256 };

static size_t scale_slot_bytes(const sim_gather *sg) {
  const size_t shard = tp_quant_scale_bytes(&sg->g.shard);
  return (shard + SCALE_SLOT_ALIGN - 1) / SCALE_SLOT_ALIGN * SCALE_SLOT_ALIGN;
}

/* Every shard's scales out of the gathered buffer into its own aligned slot (device memory). */
static void *stage_scales(const sim_gather *sg) {
  const size_t shard = tp_quant_scale_bytes(&sg->g.shard), slot = scale_slot_bytes(sg);
  char *slots = dev_alloc(slot * (size_t)sg->tp);
  for (int r = 0; r < sg->tp; ++r) {
    const cudaError_t err =
        cudaMemcpy(slots + (size_t)r * slot, (const char *)sg->s_gath + (size_t)r * shard, shard,
                   cudaMemcpyDeviceToDevice);
    if (err != cudaSuccess) fail_msg("staging shard %d's scales: %s", r, cudaGetErrorString(err));
  }
  return slots;
}

static void chunk_gemm(tp_gemm_scaled *g, const sim_gather *sg, const void *slots, int r,
                       int scales_of, const uint8_t *wq, const void *ws, int64_t n, void *y) {
  const tp_gemm_scaled_desc d = {sg->f,
                                 sg->s,
                                 n,
                                 sg->k,
                                 sg->q_gath + (size_t)(r * sg->s * sg->k),
                                 (const char *)slots + (size_t)scales_of * scale_slot_bytes(sg),
                                 wq,
                                 ws,
                                 (char *)y + (size_t)(r * sg->s * n) * 2,
                                 TP_GEMM_SCALED_FWD};
  check_rc(tp_gemm_scaled_enqueue(g, &d, 0), "chunk GEMM");
}

static void chunk_case(tp_gemm_scaled *g, tp_quant_format f, int tp, int64_t s, int64_t n,
                       int64_t k, const tp_fp8_accum_model *model) {
  char reason[400];
  const int64_t m = s * tp;
  if (tp_gemm_scaled_supported(g, f, s, n, k, reason, sizeof reason) != TP_OK ||
      tp_gemm_scaled_supported(g, f, m, n, k, reason, sizeof reason) != TP_OK) {
    printf("  %-9s: not run here (%s)\n", tp_quant_format_name(f), reason);
    assert_true(f == TP_QFMT_MXFP8 && g_major < 10);
    return;
  }
  sim_gather sg;
  sim_make(&sg, f, tp, s, k, 40 + (uint64_t)tp);
  uint16_t *hw = random_bf16(n, k, 77);
  void *w = dev_upload(hw, sizeof(uint16_t) * (size_t)(n * k));
  free(hw);
  tp_scale_shape wsh;
  check_rc(tp_quant_scale_shape(f, TP_QROLE_WEIGHT, n, k, &wsh), "weight scales");
  uint8_t *wq = dev_alloc((size_t)(n * k));
  void *ws = dev_alloc(tp_quant_scale_bytes(&wsh));
  const tp_quant_args wa = {f, TP_QROLE_WEIGHT, TP_FP8_E4M3, TP_BF16, w, n, k, k, wq, ws, NULL};
  check_rc(tp_quant_enqueue(&wa, 0), "quantize W");
  const size_t ybytes = (size_t)(m * n) * 2;
  void *y_chunks = dev_alloc(ybytes), *y_whole = dev_alloc(ybytes), *y_fault = dev_alloc(ybytes);
  void *slots = stage_scales(&sg);
  for (int r = 0; r < tp; ++r) chunk_gemm(g, &sg, slots, r, r, wq, ws, n, y_chunks);
  for (int r = 0; r < tp; ++r) chunk_gemm(g, &sg, slots, r, (r + 1) % tp, wq, ws, n, y_fault);
  const tp_gemm_scaled_desc whole = {f,           m,  n,  k,       sg.q_whole,
                                     sg.s_placed, wq, ws, y_whole, TP_GEMM_SCALED_FWD};
  check_rc(tp_gemm_scaled_enqueue(g, &whole, 0), "whole GEMM");
  sync_ok();
  double *dx = dequant(f, TP_QROLE_ACT, sg.q_whole, sg.s_whole, m, k);
  double *dw = dequant(f, TP_QROLE_WEIGHT, wq, ws, n, k);
  uint16_t *yc = download(y_chunks, ybytes), *yw = download(y_whole, ybytes),
           *yf = download(y_fault, ybytes);
  double worst = 0.0, worst_fault = 0.0;
  const long bad = outside_bound(yc, dx, dw, m, n, k, model, &worst);
  const long bad_fault = outside_bound(yf, dx, dw, m, n, k, model, &worst_fault);
  const int same = memcmp(yc, yw, ybytes) == 0;
  printf("  %-9s TP %d chunks of %lld rows, n=%lld k=%lld: %ld outside the bound (worst %.3g); "
         "%s the whole GEMM's bits; next chunk's scales: %ld outside (worst %.3g)\n",
         tp_quant_format_name(f), tp, (long long)s, (long long)n, (long long)k, bad, worst,
         same ? "equal to" : "DIFFERENT from", bad_fault, worst_fault);
  assert_int_equal(bad, 0);
  if (!same)
    fail_msg("chunk GEMMs differ from the whole GEMM's rows (the ops harness's exact rule)");
  if (f != TP_QFMT_FP8) assert_true(bad_fault > 0);
  free(dx);
  free(dw);
  free(yc);
  free(yw);
  free(yf);
  void *all[] = {w, wq, ws, y_chunks, y_whole, y_fault, slots};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) cudaFree(all[i]);
  sim_free(&sg);
}

static void test_chunk_gemms(void **state) {
  (void)state;
  tp_gemm_scaled *g = NULL;
  check_rc(tp_gemm_scaled_create((size_t)32 << 20, &g), "tp_gemm_scaled_create");
  const tp_fp8_accum_model model = tp_fp8_accum_model_of(g_major, g_minor);
  for (size_t fi = 0; fi < sizeof FORMATS / sizeof FORMATS[0]; ++fi) {
    chunk_case(g, FORMATS[fi], 2, 128, 256, 512, &model);
    chunk_case(g, FORMATS[fi], 4, 64, 128, 1024, &model);
  }
  tp_gemm_scaled_destroy(g);
}

/* ---- TP 2, 4, 8: the real paths ------------------------------------------------------------- */

typedef struct tpn_shape {
  tp_op op;
  int64_t t, n, k;
} tpn_shape;

/* This rank's bf16 tensors of one op (x, w, y), seeded by rank. */
typedef struct tpn_tensors {
  void *x, *w, *y;
  size_t x_elems, w_elems, y_elems;
} tpn_tensors;

static int fail_rank(tp_group *g, const char *what, const char *detail) {
  fprintf(stderr, "rank %d: %s: %s\n", g->rank, what, detail);
  return 1;
}

/* A worker's CUDA call: a failure ends the worker (the harness sees its exit status). */
static void cuda_ok(cudaError_t err, const char *what) {
  if (err == cudaSuccess) return;
  fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
  exit(1);
}

static void tpn_alloc(tp_group *g, const tpn_shape *sh, tpn_tensors *t) {
  const int gather = tp_op_gathers(sh->op);
  const int64_t w = g->world, s = sh->t / w;
  t->x_elems = (size_t)(gather ? s * sh->k : sh->t * (sh->k / w));
  t->w_elems = (size_t)(gather ? (sh->n / w) * sh->k : sh->n * (sh->k / w));
  t->y_elems = (size_t)(gather ? sh->t * (sh->n / w) : s * sh->n);
  cuda_ok(cudaMalloc(&t->x, t->x_elems * 2), "cudaMalloc x");
  cuda_ok(cudaMalloc(&t->w, t->w_elems * 2), "cudaMalloc w");
  cuda_ok(cudaMalloc(&t->y, t->y_elems * 2), "cudaMalloc y");
  cuda_ok(tp_launch_fill_random(TP_BF16, t->x, t->x_elems, 100 + (uint64_t)g->rank, 1.0f,
                                g->main_stream),
          "fill x");
  cuda_ok(tp_launch_fill_random(TP_BF16, t->w, t->w_elems, 200 + (uint64_t)g->rank, 0.03f,
                                g->main_stream),
          "fill w");
  cuda_ok(cudaStreamSynchronize(g->main_stream), "synchronize");
}

/* One configuration's forward; its y downloaded into *out (malloc'd). */
static int tpn_run(tp_group *g, tp_dtype dt, const tpn_shape *sh, tp_backend backend,
                   tp_schedule sched, tp_comm_dtype comm, const tpn_tensors *t, uint16_t **out,
                   tp_fp8_check *check) {
  const tp_fp8_linear_desc d = {dt, sh->op, sh->t, sh->k, sh->n, 1, 0, backend, sched, 0, comm};
  tp_fp8_linear p;
  const void *w[1] = {t->w};
  void *y[1] = {t->y};
  tp_rc rc = tp_fp8_linear_plan(g, &d, &p);
  if (rc == TP_OK) rc = tp_fp8_linear_prepare_group(g, &p, w, g->main_stream);
  cuda_ok(cudaMemset(t->y, 0xff, t->y_elems * 2), "poison y");
  if (rc == TP_OK && backend == TP_BACKEND_COMM_ONLY) {
    rc = tp_fp8_linear_quantize_input(g, &p, t->x, g->main_stream);
    if (rc == TP_OK) rc = tp_fp8_linear_gemms(&p, y, g->main_stream);
    if (rc == TP_OK) rc = tp_fp8_linear_collective(g, &p, t->x, y, g->main_stream);
  } else if (rc == TP_OK) {
    rc = tp_fp8_linear_forward(g, &p, t->x, y, g->main_stream);
  }
  if (rc == TP_OK && cudaStreamSynchronize(g->main_stream) != cudaSuccess)
    rc = TP_FAIL(TP_ECUDA, "synchronize");
  if (rc == TP_OK && check) {
    int major = 0, minor = 0;
    cuda_ok(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g->device), "cc");
    cuda_ok(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, g->device), "cc");
    const tp_fp8_accum_model model = tp_fp8_accum_model_of(major, minor);
    rc = tp_fp8_linear_check(&p, 0, t->x, t->w, t->y, 16, 64, &model, check);
  }
  if (rc == TP_OK) {
    *out = malloc(t->y_elems * 2);
    if (!*out) exit(1);
    cuda_ok(cudaMemcpy(*out, t->y, t->y_elems * 2, cudaMemcpyDeviceToHost), "download y");
  }
  tp_fp8_linear_release(&p);
  if (rc != TP_OK) {
    char what[160];
    snprintf(what, sizeof what, "%s %s %s %s comm %s", tp_dtype_name(dt), tp_op_name(sh->op),
             tp_backend_name(backend), tp_schedule_name(sched), tp_comm_dtype_name(comm));
    return fail_rank(g, what, tp_last_error());
  }
  return 0;
}

static int tpn_gather_side(tp_group *g, tp_dtype dt, const tpn_shape *sh) {
  tpn_tensors t;
  tpn_alloc(g, sh, &t);
  uint16_t *y_fp8 = NULL, *y_bf16 = NULL, *y_ce = NULL, *y_sm = NULL, *y_comm = NULL;
  tp_fp8_check k;
  int bad = tpn_run(g, dt, sh, TP_BACKEND_STOCK, TP_SCHED_AUTO, TP_COMM_FP8, &t, &y_fp8, &k);
  if (!bad && (k.outside || k.nonfinite))
    bad = fail_rank(g, tp_dtype_name(dt), "stock comm fp8 fails the float64 check");
  if (!bad)
    bad = tpn_run(g, dt, sh, TP_BACKEND_STOCK, TP_SCHED_AUTO, TP_COMM_BF16, &t, &y_bf16, NULL);
  if (!bad) bad = tpn_run(g, dt, sh, TP_BACKEND_DIST, TP_SCHED_CE, TP_COMM_FP8, &t, &y_ce, NULL);
  if (!bad) bad = tpn_run(g, dt, sh, TP_BACKEND_DIST, TP_SCHED_SM, TP_COMM_FP8, &t, &y_sm, NULL);
  if (!bad)
    bad = tpn_run(g, dt, sh, TP_BACKEND_COMM_ONLY, TP_SCHED_AUTO, TP_COMM_FP8, &t, &y_comm, NULL);
  const size_t bytes = t.y_elems * 2;
  if (!bad && memcmp(y_fp8, y_bf16, bytes) != 0)
    bad = fail_rank(g, tp_dtype_name(dt), "comm fp8 and comm bf16 differ");
  if (!bad && memcmp(y_fp8, y_ce, bytes) != 0)
    bad = fail_rank(g, tp_dtype_name(dt), "dist_gemm ce differs from stock");
  if (!bad && memcmp(y_fp8, y_sm, bytes) != 0)
    bad = fail_rank(g, tp_dtype_name(dt), "dist_gemm sm differs from stock");
  if (!bad)
    printf("  rank %d: %-9s %s TP %d: stock comm fp8 = comm bf16 = dist_gemm ce = sm, bit for bit; "
           "check worst |err|/bound %.3g\n",
           g->rank, tp_dtype_name(dt), tp_op_name(sh->op), g->world, k.worst_ratio);
  free(y_fp8);
  free(y_bf16);
  free(y_ce);
  free(y_sm);
  free(y_comm);
  cudaFree(t.x);
  cudaFree(t.w);
  cudaFree(t.y);
  return bad;
}

/* Two bf16 sums of W ranks' partials (NCCL's, rounding after every addition in its ring, and
 * dist_gemm's fp32 sum rounded once) against each other. At TP 2 each rounds a + b once:
 * every element within 2 steps of 2^-7 of the larger magnitude. Beyond, the rounding errors
 * add up over W - 1 additions and cancel unevenly element by element: the norm-wise rule of
 * bench/stats/numerics.h at depth 1, ||a - b|| / ||a|| <= 2u·sqrt(W) + 4u32·sqrt(K). */
typedef struct sum_verdict {
  int ok;
  char said[160];
} sum_verdict;

static sum_verdict sums_agree(const uint16_t *a, const uint16_t *b, size_t n, int world,
                              int64_t k) {
  sum_verdict v = {1, ""};
  double worst = 0.0, d2 = 0.0, r2 = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double x = gpu_bf16_to_float(a[i]), y = gpu_bf16_to_float(b[i]);
    if (!isfinite(x) || !isfinite(y)) {
      snprintf(v.said, sizeof v.said, "element %zu not finite", i);
      v.ok = 0;
      return v;
    }
    worst = fmax(worst, fabs(x - y) / (0x1p-7 * fmax(fmax(fabs(x), fabs(y)), 1e-3)));
    d2 += (x - y) * (x - y);
    r2 += x * x;
  }
  const double rel = r2 > 0 ? sqrt(d2 / r2) : (d2 > 0 ? INFINITY : 0.0);
  const double tol = 2.0 * 0x1p-8 * sqrt((double)world) + 4.0 * 0x1p-24 * sqrt((double)k);
  v.ok = world <= 2 ? worst <= 2.0 : rel <= tol;
  snprintf(v.said, sizeof v.said,
           "worst %.3g steps of the bf16 sum (TP 2 allows 2), ||diff||/||y|| "
           "%.3g (tol %.3g above TP 2)",
           worst, rel, tol);
  return v;
}

static int tpn_scatter_side(tp_group *g, tp_dtype dt, const tpn_shape *sh) {
  tpn_tensors t;
  tpn_alloc(g, sh, &t);
  uint16_t *y_stock = NULL, *y_ce = NULL, *y_comm = NULL;
  tp_fp8_check k;
  int bad = tpn_run(g, dt, sh, TP_BACKEND_STOCK, TP_SCHED_AUTO, TP_COMM_NONE, &t, &y_stock, &k);
  if (!bad && (k.outside || k.nonfinite))
    bad = fail_rank(g, tp_dtype_name(dt), "the stock partial fails the float64 check");
  if (!bad) bad = tpn_run(g, dt, sh, TP_BACKEND_DIST, TP_SCHED_CE, TP_COMM_NONE, &t, &y_ce, NULL);
  if (!bad)
    bad = tpn_run(g, dt, sh, TP_BACKEND_COMM_ONLY, TP_SCHED_AUTO, TP_COMM_NONE, &t, &y_comm, NULL);
  sum_verdict v = {0};
  if (!bad) v = sums_agree(y_stock, y_ce, t.y_elems, g->world, sh->k);
  if (!bad && !v.ok) bad = fail_rank(g, tp_dtype_name(dt), "dist_gemm y far from stock's");
  if (!bad)
    printf("  rank %d: %-9s linear_rs TP %d: stock partial checked (worst %.3g), dist_gemm ce vs "
           "stock: %s\n",
           g->rank, tp_dtype_name(dt), g->world, k.worst_ratio, v.said);
  free(y_stock);
  free(y_ce);
  free(y_comm);
  cudaFree(t.x);
  cudaFree(t.w);
  cudaFree(t.y);
  return bad;
}

/* ---- TP 2, 4, 8: the backward ------------------------------------------------------------ */

/* This rank's gradient tensors of one op (dy, dx, dw), seeded by rank. */
typedef struct tpn_grads {
  void *dy, *dx, *dw;
  size_t dx_elems, dw_elems;
} tpn_grads;

static void tpn_alloc_grads(tp_group *g, const tpn_tensors *t, tpn_grads *d) {
  d->dx_elems = t->x_elems;
  d->dw_elems = t->w_elems;
  cuda_ok(cudaMalloc(&d->dy, t->y_elems * 2), "cudaMalloc dy");
  cuda_ok(cudaMalloc(&d->dx, d->dx_elems * 2), "cudaMalloc dx");
  cuda_ok(cudaMalloc(&d->dw, d->dw_elems * 2), "cudaMalloc dw");
  cuda_ok(tp_launch_fill_random(TP_BF16, d->dy, t->y_elems, 300 + (uint64_t)g->rank, 1.0f,
                                g->main_stream),
          "fill dy");
  cuda_ok(cudaStreamSynchronize(g->main_stream), "synchronize");
}

static void tpn_free_grads(tpn_grads *d) {
  cudaFree(d->dy);
  cudaFree(d->dx);
  cudaFree(d->dw);
}

/* One backward run's downloaded outputs and the stock checks. */
typedef struct tpn_bwd_out {
  uint16_t *dx, *dw;
  tp_fp8_check dx_check, dw_check;
  int whole_mismatch; /* stock: the gathered operands against quantizing the whole */
} tpn_bwd_out;

static void *tpn_download(const void *dev, size_t bytes) {
  void *h = malloc(bytes);
  if (!h) exit(1);
  cuda_ok(cudaMemcpy(h, dev, bytes, cudaMemcpyDeviceToHost), "download");
  return h;
}

/* 0 when q and scales (device) equal what quantizing `whole` (bf16, device, rows x cols as
 * it lies; transposed: its transpose) gives in p's format, bit for bit. */
static int whole_differs(const tp_fp8_linear *p, tp_fp8_type elem, const void *whole, int64_t rows,
                         int64_t cols, int transposed, const uint8_t *q, const void *scales,
                         const tp_scale_shape *shape) {
  const size_t bytes = (size_t)(rows * cols), sbytes = tp_quant_scale_bytes(shape);
  uint8_t *rq = NULL;
  void *rs = NULL;
  cuda_ok(cudaMalloc((void **)&rq, bytes), "cudaMalloc");
  cuda_ok(cudaMalloc(&rs, sbytes), "cudaMalloc");
  const tp_quant_args a = {p->format, TP_QROLE_ACT, elem, TP_BF16, whole, rows,
                           cols,      cols,         rq,   rs,      NULL};
  const tp_rc rc =
      transposed ? tp_quant_transpose_quantize_enqueue(&a, 0) : tp_quant_enqueue(&a, 0);
  cuda_ok(cudaDeviceSynchronize(), "synchronize");
  uint8_t *h1 = tpn_download(q, bytes), *h2 = tpn_download(rq, bytes);
  void *s1 = tpn_download(scales, sbytes), *s2 = tpn_download(rs, sbytes);
  const int differs = rc != TP_OK || memcmp(h1, h2, bytes) != 0 || memcmp(s1, s2, sbytes) != 0;
  free(h1);
  free(h2);
  free(s1);
  free(s2);
  cudaFree(rq);
  cudaFree(rs);
  return differs;
}

/* The bf16 whole [T, cols] of every rank's [S, cols] rows (an NCCL all-gather). */
static void *gather_whole(tp_group *g, const void *rows, int64_t s, int64_t cols) {
  void *whole = NULL;
  cuda_ok(cudaMalloc(&whole, (size_t)(s * g->world * cols) * 2), "cudaMalloc whole");
  if (ncclAllGather(rows, whole, (size_t)(s * cols), ncclBfloat16, g->nccl, g->main_stream) !=
      ncclSuccess)
    exit(1);
  cuda_ok(cudaStreamSynchronize(g->main_stream), "synchronize");
  return whole;
}

/* The stock backward's gathered operands against the whole's quantization:
 * the all-gather side's Xᵀ, the reduce-scatter side's dY (along N) and dYᵀ. */
static int stock_wholes_differ(tp_group *g, const tp_fp8_linear *p, const tpn_tensors *t,
                               const tpn_grads *d) {
  const int64_t s = p->shard_rows;
  if (tp_op_gathers(p->desc.op)) {
    void *x = gather_whole(g, t->x, s, p->k);
    const int bad =
        whole_differs(p, TP_FP8_E4M3, x, p->m, p->k, 1, p->xtq, p->xt_scales, &p->xt_scales_shape);
    cudaFree(x);
    return bad;
  }
  void *dy = gather_whole(g, d->dy, s, p->n);
  int bad = whole_differs(p, TP_FP8_E5M2, dy, p->m, p->n, 0, p->dyq[0], p->dy_scales[0],
                          &p->dy_scales_shape);
  bad |= 2 * whole_differs(p, TP_FP8_E5M2, dy, p->m, p->n, 1, p->dytq[0], p->dyt_scales[0],
                           &p->dyt_scales_shape);
  cudaFree(dy);
  return bad;
}

static tp_rc tpn_backward_step(tp_group *g, tp_fp8_linear *p, tp_backend backend,
                               const tpn_tensors *t, const tpn_grads *d) {
  const void *dy[1] = {d->dy};
  void *y[1] = {t->y}, *dw[1] = {d->dw};
  cudaStream_t s = g->main_stream;
  if (backend != TP_BACKEND_COMM_ONLY) {
    TP_TRY(tp_fp8_linear_forward(g, p, t->x, y, s));
    return tp_fp8_linear_backward(g, p, t->x, dy, d->dx, dw, s);
  }
  TP_TRY(tp_fp8_linear_quantize_input(g, p, t->x, s));
  TP_TRY(tp_fp8_linear_gemms(p, y, s));
  TP_TRY(tp_fp8_linear_collective(g, p, t->x, y, s));
  TP_TRY(tp_fp8_linear_quantize_grads(g, p, t->x, dy, s));
  TP_TRY(tp_fp8_linear_backward_gemms(p, d->dx, dw, s));
  return tp_fp8_linear_backward_collective(g, p, d->dx, s);
}

static tp_rc tpn_checks(tp_group *g, const tp_fp8_linear *p, const tpn_tensors *t,
                        const tpn_grads *d, tpn_bwd_out *out) {
  int major = 0, minor = 0;
  cuda_ok(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g->device), "cc");
  cuda_ok(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, g->device), "cc");
  const tp_fp8_accum_model model = tp_fp8_accum_model_of(major, minor);
  const void *dy[1] = {d->dy}, *w[1] = {t->w};
  TP_TRY(tp_fp8_linear_check_dx(p, dy, w, d->dx, 16, 64, &model, &out->dx_check));
  TP_TRY(tp_fp8_linear_check_dw(p, 0, t->x, d->dy, d->dw, 16, 64, &model, &out->dw_check));
  out->whole_mismatch = stock_wholes_differ(g, p, t, d);
  return TP_OK;
}

/* One configuration's forward and backward; dx and dw downloaded into out. */
static int tpn_run_bwd(tp_group *g, tp_dtype dt, const tpn_shape *sh, tp_backend backend,
                       tp_schedule sched, tp_comm_dtype comm, const tpn_tensors *t,
                       const tpn_grads *d, tpn_bwd_out *out) {
  memset(out, 0, sizeof *out);
  const tp_fp8_linear_desc desc = {dt, sh->op, sh->t, sh->k, sh->n, 1, 1, backend, sched, 0, comm};
  tp_fp8_linear p;
  const void *w[1] = {t->w};
  tp_rc rc = tp_fp8_linear_plan(g, &desc, &p);
  if (rc == TP_OK) rc = tp_fp8_linear_prepare_group(g, &p, w, g->main_stream);
  cuda_ok(cudaMemset(d->dx, 0xff, d->dx_elems * 2), "poison dx");
  cuda_ok(cudaMemset(d->dw, 0xff, d->dw_elems * 2), "poison dw");
  if (rc == TP_OK) rc = tpn_backward_step(g, &p, backend, t, d);
  if (rc == TP_OK && cudaStreamSynchronize(g->main_stream) != cudaSuccess)
    rc = TP_FAIL(TP_ECUDA, "synchronize");
  if (rc == TP_OK && backend == TP_BACKEND_STOCK) rc = tpn_checks(g, &p, t, d, out);
  if (rc == TP_OK) {
    out->dx = tpn_download(d->dx, d->dx_elems * 2);
    out->dw = tpn_download(d->dw, d->dw_elems * 2);
  }
  tp_fp8_linear_release(&p);
  if (rc == TP_OK) return 0;
  char what[160];
  snprintf(what, sizeof what, "%s %s %s %s comm %s, the backward", tp_dtype_name(dt),
           tp_op_name(sh->op), tp_backend_name(backend), tp_schedule_name(sched),
           tp_comm_dtype_name(comm));
  return fail_rank(g, what, tp_last_error());
}

static void tpn_free_out(tpn_bwd_out *o) {
  free(o->dx);
  free(o->dw);
}

static int stock_checks_fail(tp_group *g, tp_dtype dt, const tpn_bwd_out *o) {
  const tp_fp8_check *c[2] = {&o->dx_check, &o->dw_check};
  for (int i = 0; i < 2; ++i)
    if (c[i]->outside || c[i]->nonfinite || c[i]->elements == 0)
      return fail_rank(g, tp_dtype_name(dt),
                       i ? "stock dw fails the float64 check"
                         : "stock dx (partial) fails the float64 check");
  if (o->whole_mismatch)
    return fail_rank(g, tp_dtype_name(dt),
                     "a gathered backward operand differs from quantizing the whole");
  return 0;
}

/* The backward of one side at TP 2: stock checked (float64 bounds; the gathered operands
 * bit for bit against the whole's quantization), comm_dtype bf16 giving the same bits,
 * dist_gemm ce and sm against stock (dw and the scatter side's dx bit for bit, the gather
 * side's summed dx within the bf16 sum's step), the collectives alone run. */
static int tpn_backward(tp_group *g, tp_dtype dt, const tpn_shape *sh) {
  const int gather = tp_op_gathers(sh->op);
  const tp_comm_dtype comm = gather ? TP_COMM_FP8 : TP_COMM_NONE;
  tpn_tensors t;
  tpn_grads d;
  tpn_alloc(g, sh, &t);
  tpn_alloc_grads(g, &t, &d);
  tpn_bwd_out stock, other;
  int bad = tpn_run_bwd(g, dt, sh, TP_BACKEND_STOCK, TP_SCHED_AUTO, comm, &t, &d, &stock);
  if (!bad) bad = stock_checks_fail(g, dt, &stock);
  const tp_schedule scheds[] = {TP_SCHED_CE, TP_SCHED_SM};
  char summed[2][160] = {"", ""};
  for (int i = 0; !bad && i < 2; ++i) {
    bad = tpn_run_bwd(g, dt, sh, TP_BACKEND_DIST, scheds[i], comm, &t, &d, &other);
    if (!bad && memcmp(stock.dw, other.dw, d.dw_elems * 2) != 0)
      bad = fail_rank(g, tp_dtype_name(dt), "dist_gemm dw differs from stock");
    if (!bad && !gather && memcmp(stock.dx, other.dx, d.dx_elems * 2) != 0)
      bad = fail_rank(g, tp_dtype_name(dt), "dist_gemm dx differs from stock");
    if (!bad && gather) {
      /* the gather side's dx sums every rank's partial: stock's NCCL sum against dist_gemm's */
      const sum_verdict v = sums_agree(stock.dx, other.dx, d.dx_elems, g->world, sh->n);
      snprintf(summed[i], sizeof summed[i], "%s", v.said);
      if (!v.ok) bad = fail_rank(g, tp_dtype_name(dt), "dist_gemm dx far from stock's");
    }
    tpn_free_out(&other); /* NULL, a no-op, where the run failed */
  }
  if (!bad && gather) {
    bad = tpn_run_bwd(g, dt, sh, TP_BACKEND_STOCK, TP_SCHED_AUTO, TP_COMM_BF16, &t, &d, &other);
    if (!bad && (memcmp(stock.dw, other.dw, d.dw_elems * 2) != 0 ||
                 memcmp(stock.dx, other.dx, d.dx_elems * 2) != 0))
      bad = fail_rank(g, tp_dtype_name(dt), "comm bf16's backward differs from comm fp8's");
    tpn_free_out(&other);
  }
  if (!bad) bad = tpn_run_bwd(g, dt, sh, TP_BACKEND_COMM_ONLY, TP_SCHED_AUTO, comm, &t, &d, &other);
  if (!bad) tpn_free_out(&other);
  if (!bad)
    printf("  rank %d: %-9s %s TP %d backward: stock dx/dw within the bound (worst %.3g / %.3g), "
           "the gathered operands = the whole's quantization bit for bit; dist_gemm ce = sm = "
           "stock dw%s%s%s%s\n",
           g->rank, tp_dtype_name(dt), tp_op_name(sh->op), g->world, stock.dx_check.worst_ratio,
           stock.dw_check.worst_ratio, gather ? "; summed dx, ce: " : " and dx", summed[0],
           gather ? "; sm: " : "", summed[1]);
  tpn_free_out(&stock);
  tpn_free_grads(&d);
  cudaFree(t.x);
  cudaFree(t.w);
  cudaFree(t.y);
  return bad;
}

static int tpn_body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  const tp_dtype dtypes[] = {TP_FP8, TP_FP8_ROW, TP_FP8_BLOCK};
  const tpn_shape gather = {TP_OP_AG_LINEAR, 1024, 1024, 1024};
  const tpn_shape scatter = {TP_OP_LINEAR_RS, 1024, 1024, 1024};
  int bad = 0;
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; ++i) {
    bad |= tpn_gather_side(g, dtypes[i], &gather);
    bad |= tpn_scatter_side(g, dtypes[i], &scatter);
    bad |= tpn_backward(g, dtypes[i], &gather);
    bad |= tpn_backward(g, dtypes[i], &scatter);
  }
  return bad;
}

/* ---- TP 2, 4, 8: a planted off-by-one scale block ------------------------------------------- */

/* x's shard [S, K] (bf16, device) with rows of different magnitudes: global row r times
 * 2^(r % 5 - 2), so that neighbouring rows' (fp8-row) and 1x128 blocks' (fp8-block) scales
 * differ 2x to 16x; uniform rows would give every block nearly the same scale and a scale
 * taken one block off would go unseen by any check. Scaling by a power of two is exact. */
static void fill_row_magnitudes(tp_group *g, void *x, int64_t s, int64_t k) {
  const size_t n = (size_t)(s * k);
  uint16_t *h = malloc(n * sizeof *h);
  if (!h) exit(1);
  gpu_fill_host(TP_BF16, h, n, 500 + (uint64_t)g->rank, 1.0f);
  for (int64_t r = 0; r < s; ++r) {
    const int64_t global = (int64_t)g->rank * s + r;
    const float factor = ldexpf(1.0f, (int)(global % 5) - 2);
    for (int64_t c = 0; c < k; ++c)
      h[r * k + c] = gpu_float_to_bf16(gpu_bf16_to_float(h[r * k + c]) * factor);
  }
  cuda_ok(cudaMemcpy(x, h, n * sizeof *h, cudaMemcpyHostToDevice), "upload x");
  free(h);
}

/* The whole's scales with rank q's row blocks each given the next row block's scale (the
 * last one the whole's first): a re-placement one block off for q's shard. */
static void shift_rank_scales(const tp_scale_shape *sh, const unsigned char *orig,
                              unsigned char *out, int q, int world) {
  const size_t e = sh->elem_bytes;
  memcpy(out, orig, (size_t)sh->stored * e);
  const int64_t per_rank = sh->grid_rows / world;
  for (int64_t gr = q * per_rank; gr < (q + 1) * per_rank; ++gr)
    for (int64_t gc = 0; gc < sh->grid_cols; ++gc) {
      const int64_t from = tp_scale_offset(sh, (gr + 1) % sh->grid_rows, gc);
      memcpy(out + (size_t)tp_scale_offset(sh, gr, gc) * e, orig + (size_t)from * e, e);
    }
}

/* p's gathered X scales set to `scales` (host), then the float64 check of y again. */
static tp_fp8_check check_with_scales(tp_group *g, tp_fp8_linear *p, const tpn_tensors *t,
                                      const void *scales, const tp_fp8_accum_model *model) {
  tp_fp8_check k;
  memset(&k, 0, sizeof k);
  const size_t bytes = (size_t)p->x_scales_shape.stored * p->x_scales_shape.elem_bytes;
  cuda_ok(cudaMemcpy(p->x_scales, scales, bytes, cudaMemcpyHostToDevice), "upload scales");
  if (tp_fp8_linear_check(p, 0, t->x, t->w, t->y, 16, 64, model, &k) != TP_OK) {
    fprintf(stderr, "rank %d: check: %s\n", g->rank, tp_last_error());
    exit(1);
  }
  return k;
}

/* Stock comm fp8's gathered X scales shifted one row block for each rank's shard in turn:
 * the float64 check of the forward's y (the test's own, 16 rows x 64 columns sampled, every
 * rank's rows holding one) must fail each time; unshifted it passes. */
static int planted_scale_shift(tp_group *g, tp_dtype dt, const tp_fp8_accum_model *model) {
  const tpn_shape sh = {TP_OP_AG_LINEAR, 1024, 1024, 1024};
  const tp_fp8_linear_desc d = {
      dt, sh.op, sh.t, sh.k, sh.n, 1, 0, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, TP_COMM_FP8};
  tpn_tensors t;
  tpn_alloc(g, &sh, &t);
  fill_row_magnitudes(g, t.x, sh.t / g->world, sh.k);
  tp_fp8_linear p;
  const void *w[1] = {t.w};
  void *y[1] = {t.y};
  tp_rc rc = tp_fp8_linear_plan(g, &d, &p);
  if (rc == TP_OK) rc = tp_fp8_linear_prepare_group(g, &p, w, g->main_stream);
  if (rc == TP_OK) rc = tp_fp8_linear_forward(g, &p, t.x, y, g->main_stream);
  if (rc != TP_OK || cudaStreamSynchronize(g->main_stream) != cudaSuccess) {
    fprintf(stderr, "rank %d: %s planted scale shift: %s\n", g->rank, tp_dtype_name(dt),
            tp_last_error());
    exit(1);
  }
  const tp_scale_shape *ss = &p.x_scales_shape;
  const size_t bytes = (size_t)ss->stored * ss->elem_bytes;
  unsigned char *orig = tpn_download(p.x_scales, bytes), *shifted = malloc(bytes);
  if (!shifted) exit(1);
  const tp_fp8_check clean = check_with_scales(g, &p, &t, orig, model);
  int missed = clean.outside > 0 || clean.nonfinite > 0 || clean.elements == 0;
  printf("  rank %d: %-9s TP %d planted scale shift: unshifted, %lld of %lld sampled outside the "
         "bound: %s\n",
         g->rank, tp_dtype_name(dt), g->world, (long long)clean.outside, (long long)clean.elements,
         missed ? "FAIL, the check fails without a fault" : "ok");
  for (int q = 0; !missed && q < g->world; ++q) {
    shift_rank_scales(ss, orig, shifted, q, g->world);
    const tp_fp8_check k = check_with_scales(g, &p, &t, shifted, model);
    const int caught = k.outside > 0;
    printf("  rank %d: %-9s TP %d planted: rank %d's %lld row blocks of scales one block off "
           "(%lldx%lld blocks): %lld of %lld sampled outside the bound (worst %.3g): %s\n",
           g->rank, tp_dtype_name(dt), g->world, q, (long long)(ss->grid_rows / g->world),
           (long long)ss->block_rows, (long long)ss->block_cols, (long long)k.outside,
           (long long)k.elements, k.worst_ratio,
           caught ? "the check fails: caught" : "the check PASSES: FAIL, the fault went unseen");
    missed += !caught;
  }
  free(orig);
  free(shifted);
  tp_fp8_linear_release(&p);
  cudaFree(t.x);
  cudaFree(t.w);
  cudaFree(t.y);
  return missed;
}

/* fp8-row and fp8-block; tensorwise fp8 has one scale, agreed by every rank: no block to shift. */
static int planted_body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  int major = 0, minor = 0;
  cuda_ok(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g->device), "cc");
  cuda_ok(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, g->device), "cc");
  const tp_fp8_accum_model model = tp_fp8_accum_model_of(major, minor);
  if (g->rank == 0)
    printf("  TP %d fp8: one tensor scale, agreed by every rank: no scale block to shift\n",
           g->world);
  const int missed =
      planted_scale_shift(g, TP_FP8_ROW, &model) + planted_scale_shift(g, TP_FP8_BLOCK, &model);
  printf("  rank %d: TP %d planted scale shifts: %d missed\n", g->rank, g->world, missed);
  fflush(stdout);
  return missed ? 1 : 0;
}

static void print_tp_shapes(int world) {
  printf("TP %d: T 1024 (%d rows per rank), K 1024, N 1024 (%d per rank on the gather side, K "
         "%d per rank on the scatter side); fp8-block's 128-blocks whole per rank\n",
         world, 1024 / world, 1024 / world, 1024 / world);
}

/* The real paths at TP 2, 4 and 8 (a peer needed). */
static void test_tp_paths(void **state) {
  const int world = gpu_case_degree(state);
  print_tp_shapes(world);
  assert_int_equal(gpu_run_group(world, tpn_body, NULL), 0);
}

/* An off-by-one scale block in the gathered scales caught by the float64 check. */
static void test_planted_scale_shift(void **state) {
  const int world = gpu_case_degree(state);
  print_tp_shapes(world);
  assert_int_equal(gpu_run_group(world, planted_body, NULL), 0);
}

/* `tp` or `--tp LIST` on the command line: the real TP paths, not the one-GPU simulation. */
static int wants_tp_paths(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (strcmp(argv[i], "tp") == 0 || strcmp(argv[i], "--tp") == 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  if (wants_tp_paths(argc, argv)) {
    /* the workers meet CUDA in their own processes: the main process never does here */
    const gpu_tp_test tests[] = {
        {"tp_paths", test_tp_paths, 2, GPU_MAX_DEGREE},
        {"planted_scale_shift", test_planted_scale_shift, 2, GPU_MAX_DEGREE},
    };
    return gpu_run_tp_tests("gpu_fp8_comm_tp", tests, sizeof tests / sizeof tests[0], argc, argv);
  }
  if (gpu_device_count() == 0) {
    printf("no CUDA device: GPU test skipped\n");
    return GPU_TEST_SKIP;
  }
  if (cudaSetDevice(0) != cudaSuccess ||
      cudaDeviceGetAttribute(&g_major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&g_minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
    printf("device 0 unusable\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replace_on_device),
      cmocka_unit_test(test_chunk_gemms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
