/*
 * test_quant.c — GPU test of the low-precision foundations (issue 15) on
 * one GPU: the device quantizer (kernels/tp_quant_device.h) and the scaled
 * FP8 GEMM (kernels/tp_gemm_scaled.h).
 *
 * - The hardware fp8 conversion every quantize kernel stores equals the
 *   reference tp_fp8_encode for every bf16 value and 2^20 random fp32 ones,
 *   E4M3 and E5M2 (NaN inputs left out: their code is not compared).
 * - Every format x role x element type x input type on shapes with partial
 *   blocks gives the reference's bytes: data and the whole stored scale
 *   buffer (padding included), from NaN-poisoned outputs.
 * - The same on the activation shapes of the default op set (T up to 16384,
 *   K up to 28672) and on the vectorised kernels' edges: K not a multiple
 *   of 8, rows too long for registers, more rows than a grid dimension, a
 *   misaligned input.
 * - The fused transpose-quantize (the backward's wgrad operands) equals the
 *   reference quantizer of the host-transposed tensor bit for bit (data and
 *   stored scales, padding included): every format, role and element type,
 *   with and without an agreed amax (fp8 taking the untransposed tensor's),
 *   on the tiles' edges and on the op set's Xᵀ / dYᵀ (T 4096..16384, C
 *   4096..28672); fp8-block's 128x128 weight blocks must be refused.
 * - Shard invariance on the device: for every format x shard layout x TP in
 *   {2, 4, 8}, each shard quantized from its slice of the tensor (with the
 *   amax agreement the shard rule asks for, reduced on the device) gives the
 *   whole's data and logical scales bit for bit, on adversarial data; the
 *   same with K shards of 32, 64 and 128 columns (the warp-segment kernels'
 *   widths: fp8-row's agreed row amax must reach them).
 * - The scaled GEMM of every format cuBLASLt supports here against a float64
 *   CPU product of the DEQUANTIZED operands (so quantization error is not
 *   counted), element by element, with the tolerance of tp_quant.h's
 *   accumulation model for this device (sm_90: the FP8 MMA's ~14-bit
 *   accumulator); every format and shape runs and prints its worst
 *   |err|/tol before the test's verdict; a non-finite output fails, and the
 *   check is shown to catch a NaN and an off value. On a device with major
 *   < 10, mxfp8 must be refused by tp_gemm_scaled_supported with the
 *   library's reason, and the GEMM is not run (its output stays poisoned);
 *   on sm_90, fp8, fp8-row and fp8-block must be supported; on major >= 10
 *   mxfp8 must be supported and is checked.
 *
 * Exit 77 (skipped) without a GPU.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cuda_runtime_api.h>

#include "kernels/tp_gemm_scaled.h"
#include "kernels/tp_quant_device.h"
#include "tests/gpu/gpu_harness.h"

static int g_major, g_minor;
static const int TP_DEGREES[] = {2, 4, 8};
enum { N_TP = 3 };

/* ---- device memory ----------------------------------------------------------------------------
 */

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes) != cudaSuccess) fail_msg("cudaMalloc of %zu bytes failed", bytes);
  return p;
}

static void *dev_upload(const void *host, size_t bytes) {
  void *p = dev_alloc(bytes);
  if (cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    fail_msg("upload of %zu bytes failed", bytes);
  return p;
}

static void *download(const void *dev, size_t bytes) {
  void *h = malloc(bytes);
  assert_non_null(h);
  cudaError_t err = cudaMemcpy(h, dev, bytes, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess)
    fail_msg("download: %s (%s)", cudaGetErrorString(err), cudaGetErrorName(err));
  return h;
}

static void sync_ok(void) {
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess)
    fail_msg("CUDA error at synchronisation: %s (%s)", cudaGetErrorString(err),
             cudaGetErrorName(err));
}

static void check_rc(tp_rc rc, const char *what) {
  if (rc != TP_OK) fail_msg("%s: %s", what, tp_last_error());
}

/* A float's bit pattern: -0 and 0 differ. */
static uint32_t float_bits(float v) {
  uint32_t b;
  memcpy(&b, &v, sizeof b);
  return b;
}

/* ---- inputs -----------------------------------------------------------------------------------
 */

/* bf16 values uniform in [-1, 1) times 2^((row % 7) - 3), so rows and blocks differ in magnitude.
 */
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

static float *bf16_to_f32(const uint16_t *b, size_t n) {
  float *f = malloc(sizeof(float) * n);
  assert_non_null(f);
  for (size_t i = 0; i < n; ++i) f[i] = gpu_bf16_to_float(b[i]);
  return f;
}

/* ---- the conversion ---------------------------------------------------------------------------
 */

static void test_encode_matches_reference(void **state) {
  (void)state;
  const size_t n_bf16 = 65536, n_rand = (size_t)1 << 20, n = n_bf16 + n_rand;
  float *x = malloc(sizeof(float) * n);
  assert_non_null(x);
  uint64_t s = 0x2545F4914F6CDD1Dull;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    if (i < n_bf16) {
      bits = (uint32_t)i << 16;
    } else {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      bits = (uint32_t)s;
    }
    memcpy(&x[i], &bits, sizeof bits);
  }
  float *dx = dev_upload(x, sizeof(float) * n);
  uint8_t *dout = dev_alloc(n);
  long compared = 0, bad = 0;
  for (int t = 0; t < 2; ++t) {
    check_rc(tp_quant_encode_enqueue((tp_fp8_type)t, dx, n, dout, 0), "encode");
    sync_ok();
    uint8_t *out = download(dout, n);
    for (size_t i = 0; i < n; ++i) {
      if (isnan(x[i])) continue;
      const uint8_t want = tp_fp8_encode((tp_fp8_type)t, x[i]);
      ++compared;
      if (out[i] != want && bad++ < 8)
        printf("  %s %a: device 0x%02X, reference 0x%02X\n", tp_fp8_type_name((tp_fp8_type)t),
               (double)x[i], out[i], want);
    }
    free(out);
  }
  printf("  fp8 conversion: %ld values compared with the reference (every bf16 and 2^20 random "
         "fp32, e4m3 and e5m2), %ld differ\n",
         compared, bad);
  cudaFree(dx);
  cudaFree(dout);
  free(x);
  assert_int_equal(bad, 0);
}

/* ---- quantization, whole tensors --------------------------------------------------------------
 */

typedef struct dev_quant {
  tp_scale_shape shape;
  uint8_t *q;
  void *scales;
} dev_quant;

/* Device outputs for a [rows, cols] quantization, poisoned (0xFF bytes). */
static void dev_quant_init(dev_quant *d, tp_quant_format f, tp_quant_role role, int64_t rows,
                           int64_t cols) {
  memset(d, 0, sizeof *d);
  check_rc(tp_quant_scale_shape(f, role, rows, cols, &d->shape), "scale shape");
  d->q = dev_alloc((size_t)(rows * cols));
  d->scales = dev_alloc(tp_quant_scale_bytes(&d->shape));
  if (cudaMemset(d->q, 0xff, (size_t)(rows * cols)) != cudaSuccess ||
      cudaMemset(d->scales, 0xff, tp_quant_scale_bytes(&d->shape)) != cudaSuccess)
    fail_msg("poisoning failed");
}

static void dev_quant_free(dev_quant *d) {
  cudaFree(d->q);
  cudaFree(d->scales);
}

/* The device quantizer of a random [rows, cols] tensor against the
 * reference. x_offset: elements the device input starts past a cudaMalloc'd
 * (256-byte aligned) buffer, so 1 makes every vector load misaligned. */
static void compare_whole_at(tp_quant_format f, tp_quant_role role, tp_fp8_type t, tp_dtype dt,
                             int64_t rows, int64_t cols, uint64_t seed, int64_t x_offset) {
  uint16_t *xb = random_bf16(rows, cols, seed);
  float *xf = bf16_to_f32(xb, (size_t)(rows * cols));
  const void *host_x = dt == TP_BF16 ? (const void *)xb : (const void *)xf;
  const size_t esize = tp_dtype_bytes(dt), bytes = (size_t)(rows * cols) * esize;
  char *dbuf = dev_alloc(bytes + (size_t)x_offset * esize);
  void *dx = dbuf + (size_t)x_offset * esize;
  if (cudaMemcpy(dx, host_x, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    fail_msg("upload of %zu bytes failed", bytes);
  dev_quant d;
  dev_quant_init(&d, f, role, rows, cols);
  const tp_quant_args dev_args = {f, role, t, dt, dx, rows, cols, cols, d.q, d.scales, NULL};
  check_rc(tp_quant_enqueue(&dev_args, 0), "tp_quant_enqueue");
  sync_ok();
  uint8_t *q = download(d.q, (size_t)(rows * cols));
  void *scales = download(d.scales, tp_quant_scale_bytes(&d.shape));
  uint8_t *ref_q = malloc((size_t)(rows * cols));
  void *ref_scales = malloc(tp_quant_scale_bytes(&d.shape));
  const tp_quant_args ref_args = {f,    role, t,     dt,         host_x, rows,
                                  cols, cols, ref_q, ref_scales, NULL};
  check_rc(tp_quant_ref(&ref_args), "tp_quant_ref");
  size_t bad_q = 0;
  for (int64_t i = 0; i < rows * cols; ++i) bad_q += q[i] != ref_q[i];
  const int scales_equal = memcmp(scales, ref_scales, tp_quant_scale_bytes(&d.shape)) == 0;
  if (bad_q || !scales_equal)
    fail_msg("%s %s %s %s %lldx%lld: %zu data bytes differ, scales %s", tp_quant_format_name(f),
             tp_quant_role_name(role), tp_fp8_type_name(t), tp_dtype_name(dt), (long long)rows,
             (long long)cols, bad_q, scales_equal ? "equal" : "differ");
  free(q);
  free(scales);
  free(ref_q);
  free(ref_scales);
  dev_quant_free(&d);
  cudaFree(dbuf);
  free(xb);
  free(xf);
}

static void compare_whole(tp_quant_format f, tp_quant_role role, tp_fp8_type t, tp_dtype dt,
                          int64_t rows, int64_t cols, uint64_t seed) {
  compare_whole_at(f, role, t, dt, rows, cols, seed, 0);
}

static void test_quantize_matches_reference(void **state) {
  (void)state;
  const int64_t shapes[][2] = {{256, 1024}, {130, 200}, {1, 4100}};
  int checked = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
    for (int f = 0; f < TP_QFMT_COUNT; ++f)
      for (int role = 0; role < 2; ++role)
        for (int t = 0; t < 2; ++t)
          for (int dt = 0; dt < 2; ++dt) {
            compare_whole((tp_quant_format)f, (tp_quant_role)role, (tp_fp8_type)t, (tp_dtype)dt,
                          shapes[s][0], shapes[s][1], 100 + (uint64_t)checked);
            ++checked;
          }
  printf("  device quantizer: %d cases (3 shapes x 4 formats x 2 roles x 2 fp8 types x 2 input "
         "types), data and scale buffers bit-identical to the reference\n",
         checked);
}

/* The activation shapes of the default op set and the edges of the
 * vectorised kernels (8 elements a thread): T up to 16384, K up to 28672
 * (rows of 1, 2, 4 and 8 vectors a thread for fp8-row), rows whose length
 * is not a multiple of 8 (unaligned rows, partial vectors), a row too long
 * to hold in registers, more rows than a grid dimension (65535), and an
 * input that starts off a 16-byte boundary. Every format, E4M3 and E5M2,
 * bf16 in (fp32 on the smaller shapes): data and scales bit-identical. */
static void test_quantize_op_shapes(void **state) {
  (void)state;
  typedef struct {
    int64_t rows, cols, x_offset;
    int with_fp32;
  } op_shape;
  const op_shape shapes[] = {
      {16384, 4096, 0, 0}, /* llama3-8b qkv/o/gate_up at T = 16384 */
      {512, 14336, 0, 1},  /* 8b's down projection */
      {256, 28672, 0, 1},  /* 70b's down projection */
      {3, 4100, 0, 1},     /* K % 8 = 4: every row but the first unaligned */
      {5, 1031, 0, 1},     /* K % 8 = 7 */
      {2, 40000, 0, 1},    /* fp8-row past the register-held row */
      {70000, 24, 0, 1},   /* rows past gridDim.y */
      {64, 4096, 1, 1},    /* input 2 bytes (bf16) / 4 bytes (fp32) off alignment */
  };
  int checked = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
    for (int f = 0; f < TP_QFMT_COUNT; ++f)
      for (int t = 0; t < 2; ++t)
        for (int dt = 0; dt < 1 + shapes[s].with_fp32; ++dt) {
          compare_whole_at((tp_quant_format)f, TP_QROLE_ACT, (tp_fp8_type)t, dt ? TP_FP32 : TP_BF16,
                           shapes[s].rows, shapes[s].cols, 300 + (uint64_t)checked,
                           shapes[s].x_offset);
          ++checked;
        }
  printf("  device quantizer on the op set's activation shapes and the kernels' edges: %d cases, "
         "data and scale buffers bit-identical to the reference\n",
         checked);
  assert_int_equal(checked, 8 * TP_QFMT_COUNT * 2 + 7 * TP_QFMT_COUNT * 2);
}

/* ---- the fused transpose-quantize -------------------------------------------------------------
 */

static uint16_t *transpose_host(const uint16_t *x, int64_t rows, int64_t cols) {
  uint16_t *out = malloc(sizeof(uint16_t) * (size_t)(rows * cols));
  assert_non_null(out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = x[r * cols + c];
  return out;
}

/* One source [rows, cols] (host bf16 x, its transpose xt) on the device. */
typedef struct tsrc {
  const uint16_t *x, *xt;
  int64_t rows, cols;
  const void *dev; /* x on the device, x_offset elements past a 256-byte boundary */
} tsrc;

/* The amax agreement the transposed quantization takes, on the device: fp8
 * the tensor amax of the UNtransposed source (what the backward shares
 * between dY and dYᵀ), fp8-row one per row of the transpose. NULL for the
 * rest. */
static float *agreed_for_transpose(tp_quant_format f, const tsrc *s) {
  if (f != TP_QFMT_FP8 && f != TP_QFMT_FP8_ROW) return NULL;
  const int row = f == TP_QFMT_FP8_ROW;
  const tp_quant_args a = {f,
                           TP_QROLE_ACT,
                           TP_FP8_E4M3,
                           TP_BF16,
                           row ? s->xt : s->x,
                           row ? s->cols : s->rows,
                           row ? s->rows : s->cols,
                           row ? s->rows : s->cols,
                           NULL,
                           NULL,
                           NULL};
  const size_t n = row ? (size_t)s->cols : 1;
  float *host = malloc(sizeof(float) * n);
  assert_non_null(host);
  check_rc(tp_quant_local_amax_ref(&a, host), "tp_quant_local_amax_ref");
  float *dev = dev_upload(host, sizeof(float) * n);
  free(host);
  return dev;
}

/* tp_quant_transpose_quantize_enqueue of s against tp_quant_ref of its
 * transpose: data and the whole stored scale buffer, from poisoned outputs.
 * Returns 1 when compared (0 for fp8-block weights, which must be refused). */
static int compare_transposed(tp_quant_format f, tp_quant_role role, tp_fp8_type t, const tsrc *s,
                              int agreed) {
  const int64_t n = s->rows * s->cols;
  dev_quant d;
  dev_quant_init(&d, f, role, s->cols, s->rows);
  float *dev_amax = agreed ? agreed_for_transpose(f, s) : NULL;
  const tp_quant_args args = {f,       role,    t,   TP_BF16,  s->dev,  s->rows,
                              s->cols, s->cols, d.q, d.scales, dev_amax};
  const tp_rc rc = tp_quant_transpose_quantize_enqueue(&args, 0);
  if (f == TP_QFMT_FP8_BLOCK && role == TP_QROLE_WEIGHT) {
    if (rc == TP_OK) fail_msg("fp8-block weight (128x128 blocks) transpose-quantize accepted");
    dev_quant_free(&d);
    return 0;
  }
  check_rc(rc, "tp_quant_transpose_quantize_enqueue");
  sync_ok();
  uint8_t *q = download(d.q, (size_t)n);
  void *scales = download(d.scales, tp_quant_scale_bytes(&d.shape));
  uint8_t *ref_q = malloc((size_t)n);
  void *ref_scales = malloc(tp_quant_scale_bytes(&d.shape));
  assert_non_null(ref_q);
  assert_non_null(ref_scales);
  const tp_quant_args ref = {f,       role,    t,     TP_BF16,    s->xt, s->cols,
                             s->rows, s->rows, ref_q, ref_scales, NULL};
  check_rc(tp_quant_ref(&ref), "tp_quant_ref of the transpose");
  size_t bad_q = 0;
  for (int64_t i = 0; i < n; ++i) bad_q += q[i] != ref_q[i];
  const int scales_equal = memcmp(scales, ref_scales, tp_quant_scale_bytes(&d.shape)) == 0;
  if (bad_q || !scales_equal)
    fail_msg("transpose-quantize %s %s %s of %lldx%lld%s: %zu data bytes differ, scales %s",
             tp_quant_format_name(f), tp_quant_role_name(role), tp_fp8_type_name(t),
             (long long)s->rows, (long long)s->cols, agreed ? " (agreed amax)" : "", bad_q,
             scales_equal ? "equal" : "differ");
  free(q);
  free(scales);
  free(ref_q);
  free(ref_scales);
  cudaFree(dev_amax);
  dev_quant_free(&d);
  return 1;
}

/* Every format x role x element type (x an agreed amax for fp8 and fp8-row)
 * on one random source of rows x cols; returns the cases compared. */
static int compare_transposed_all(int64_t rows, int64_t cols, int64_t x_offset, int both_roles,
                                  uint64_t seed) {
  uint16_t *x = random_bf16(rows, cols, seed);
  uint16_t *xt = transpose_host(x, rows, cols);
  const size_t bytes = sizeof(uint16_t) * (size_t)(rows * cols);
  char *dbuf = dev_alloc(bytes + (size_t)x_offset * 2);
  if (cudaMemcpy(dbuf + x_offset * 2, x, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    fail_msg("upload of %zu bytes failed", bytes);
  const tsrc s = {x, xt, rows, cols, dbuf + x_offset * 2};
  int checked = 0;
  for (int f = 0; f < TP_QFMT_COUNT; ++f)
    for (int role = 0; role < 1 + both_roles; ++role)
      for (int t = 0; t < 2; ++t)
        for (int agreed = 0; agreed < 1 + (f == TP_QFMT_FP8 || f == TP_QFMT_FP8_ROW); ++agreed)
          checked += compare_transposed((tp_quant_format)f, (tp_quant_role)role, (tp_fp8_type)t, &s,
                                        agreed);
  cudaFree(dbuf);
  free(xt);
  free(x);
  return checked;
}

/* The edges of the tiles (128 source rows x 64 columns) and of the vector
 * paths: dimensions below, just past and not multiples of a tile, source
 * rows whose length is not a multiple of 8 (unaligned rows), a misaligned
 * start, a single row or column; both roles (fp8-block weights refused). */
static void test_transpose_quantize_edges(void **state) {
  (void)state;
  const int64_t shapes[][3] = {{1, 1, 0},      {3, 5, 0},    {130, 200, 0},  {127, 65, 0},
                               {129, 4100, 0}, {1000, 7, 0}, {256, 1031, 0}, {64, 4096, 1},
                               {300, 24, 0},   {1, 4096, 0}, {4100, 1, 0}};
  int checked = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i)
    checked += compare_transposed_all(shapes[i][0], shapes[i][1], shapes[i][2], 1, 700 + i);
  printf("  transpose-quantize on the tiles' edges: %d cases, data and scale buffers "
         "bit-identical to the reference quantizer of the transpose\n",
         checked);
  /* per shape: 4 formats x 2 types, x2 agreed for fp8 and fp8-row, x2 roles, less fp8-block weight
   */
  assert_int_equal(checked, 11 * (2 * (2 * 2 + 2 * 2 + 2 + 2) - 2));
}

/* The wgrad operands of the default op set: Xᵀ and dYᵀ of llama3-8b and
 * 70b at T 4096 and 16384 (C from 4096 to 28672), as activations. */
static void test_transpose_quantize_op_shapes(void **state) {
  (void)state;
  const int64_t shapes[][2] = {
      {4096, 4096}, {4096, 6144}, {16384, 4096}, {4096, 28672}, {16384, 8192}};
  int checked = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i)
    checked += compare_transposed_all(shapes[i][0], shapes[i][1], 0, 0, 800 + i);
  printf("  transpose-quantize on the op set's wgrad operands: %d cases, data and scale buffers "
         "bit-identical to the reference quantizer of the transpose\n",
         checked);
  assert_int_equal(checked, 5 * (2 * 2 + 2 * 2 + 2 + 2));
}

/* ---- shard invariance on the device -----------------------------------------------------------
 */

typedef struct shard_geom {
  int64_t r0, c0, rows, cols;
} shard_geom;

static shard_geom shard_of(tp_shard_layout l, int64_t rows, int64_t cols, int tp, int r) {
  if (tp_shard_layout_splits_rows(l)) return (shard_geom){r * (rows / tp), 0, rows / tp, cols};
  return (shard_geom){0, r * (cols / tp), rows, cols / tp};
}

/* The agreed amax: every shard's own, reduced on the device, maxed over the
 * shards (the all-reduce the worker will run), uploaded. */
static float *agree_on_device(const tp_quant_args *whole, tp_shard_layout l, int tp) {
  const size_t n = whole->format == TP_QFMT_FP8 ? 1 : (size_t)whole->rows;
  float *agreed = calloc(n, sizeof(float));
  float *dlocal = dev_alloc(n * sizeof(float));
  assert_non_null(agreed);
  for (int r = 0; r < tp; ++r) {
    const shard_geom g = shard_of(l, whole->rows, whole->cols, tp, r);
    tp_quant_args a = *whole;
    a.x = (const char *)whole->x + (size_t)(g.r0 * whole->ld + g.c0) * tp_dtype_bytes(a.in_dtype);
    a.rows = g.rows;
    a.cols = g.cols;
    check_rc(tp_quant_local_amax_enqueue(&a, dlocal, 0), "local amax");
    sync_ok();
    float *local = download(dlocal, n * sizeof(float));
    for (size_t i = 0; i < n; ++i) agreed[i] = fmaxf(agreed[i], local[i]);
    free(local);
  }
  cudaFree(dlocal);
  float *dagreed = dev_upload(agreed, n * sizeof(float));
  free(agreed);
  return dagreed;
}

static long device_shard_mismatches(tp_quant_format f, tp_shard_layout l, tp_fp8_type t, int tp,
                                    int64_t rows, int64_t cols, const void *dx) {
  const tp_quant_role role = tp_shard_layout_role(l);
  tp_amax_agreement agreement;
  char reason[320];
  if (tp_quant_shard_check(f, l, rows, cols, tp, &agreement, reason, sizeof reason) != TP_OK)
    fail_msg("aligned shape refused: %s", reason);
  dev_quant whole;
  dev_quant_init(&whole, f, role, rows, cols);
  const tp_quant_args wa = {f, role, t, TP_BF16, dx, rows, cols, cols, whole.q, whole.scales, NULL};
  check_rc(tp_quant_enqueue(&wa, 0), "whole");
  sync_ok();
  uint8_t *wq = download(whole.q, (size_t)(rows * cols));
  void *ws = download(whole.scales, tp_quant_scale_bytes(&whole.shape));
  float *agreed = agreement != TP_AMAX_LOCAL ? agree_on_device(&wa, l, tp) : NULL;
  long bad = 0;
  for (int r = 0; r < tp; ++r) {
    const shard_geom g = shard_of(l, rows, cols, tp, r);
    dev_quant part;
    dev_quant_init(&part, f, role, g.rows, g.cols);
    const tp_quant_args pa = {
        f,      role,   t,    TP_BF16, (const char *)dx + (size_t)(g.r0 * cols + g.c0) * 2,
        g.rows, g.cols, cols, part.q,  part.scales,
        agreed};
    check_rc(tp_quant_enqueue(&pa, 0), "shard");
    sync_ok();
    uint8_t *pq = download(part.q, (size_t)(g.rows * g.cols));
    void *ps = download(part.scales, tp_quant_scale_bytes(&part.shape));
    for (int64_t i = 0; i < g.rows; ++i)
      for (int64_t j = 0; j < g.cols; ++j)
        bad += pq[i * g.cols + j] != wq[(g.r0 + i) * cols + g.c0 + j];
    const int64_t gr0 = g.r0 / whole.shape.block_rows, gc0 = g.c0 / whole.shape.block_cols;
    for (int64_t gr = 0; gr < part.shape.grid_rows; ++gr)
      for (int64_t gc = 0; gc < part.shape.grid_cols; ++gc) {
        const float a = tp_quant_scale_at(&part.shape, ps, gr, gc);
        const float b = tp_quant_scale_at(&whole.shape, ws, gr0 + gr, gc0 + gc);
        bad += float_bits(a) != float_bits(b);
      }
    free(pq);
    free(ps);
    dev_quant_free(&part);
  }
  cudaFree(agreed);
  free(wq);
  free(ws);
  dev_quant_free(&whole);
  return bad;
}

/* The tensor's largest |x| at the last element of shard 0 and the last
 * shard scaled down by 2^-12: a scale leaking across a boundary shows. */
static void make_adversarial(uint16_t *x, tp_shard_layout l, int tp, int64_t rows, int64_t cols) {
  const shard_geom first = shard_of(l, rows, cols, tp, 0),
                   last = shard_of(l, rows, cols, tp, tp - 1);
  for (int64_t i = 0; i < last.rows; ++i)
    for (int64_t j = 0; j < last.cols; ++j) {
      uint16_t *v = &x[(last.r0 + i) * cols + last.c0 + j];
      *v = gpu_float_to_bf16(ldexpf(gpu_bf16_to_float(*v), -12));
    }
  x[(first.r0 + first.rows - 1) * cols + first.c0 + first.cols - 1] = gpu_float_to_bf16(-3000.0f);
}

static void test_shard_invariance_on_device(void **state) {
  (void)state;
  int combos = 0;
  for (int f = 0; f < TP_QFMT_COUNT; ++f)
    for (int l = 0; l < TP_SHARD_COUNT; ++l)
      for (int ti = 0; ti < N_TP; ++ti) {
        const int tp = TP_DEGREES[ti];
        const int by_rows = tp_shard_layout_splits_rows((tp_shard_layout)l);
        const int64_t rows = by_rows ? 2048 : 384, cols = by_rows ? 1000 : 2048;
        uint16_t *x = random_bf16(rows, cols, 500 + (uint64_t)combos);
        make_adversarial(x, (tp_shard_layout)l, tp, rows, cols);
        void *dx = dev_upload(x, sizeof(uint16_t) * (size_t)(rows * cols));
        for (int t = 0; t < 2; ++t) {
          const long bad = device_shard_mismatches((tp_quant_format)f, (tp_shard_layout)l,
                                                   (tp_fp8_type)t, tp, rows, cols, dx);
          if (bad)
            fail_msg("%s, %s, TP %d, %s: %ld mismatches", tp_quant_format_name((tp_quant_format)f),
                     tp_shard_layout_name((tp_shard_layout)l), tp, tp_fp8_type_name((tp_fp8_type)t),
                     bad);
        }
        cudaFree(dx);
        free(x);
        ++combos;
      }
  printf("  shard invariance on the device: %d formats x %d layouts x %d TP degrees = %d "
         "combinations (e4m3 and e5m2, adversarial bf16 data), all bit-identical\n",
         (int)TP_QFMT_COUNT, (int)TP_SHARD_COUNT, N_TP, combos);
  assert_int_equal(combos, TP_QFMT_COUNT * TP_SHARD_COUNT * N_TP);
}

/* The same on narrow K shards: a rank's K of 32, 64 or 128 columns is a whole row of a 1 x 32,
 * 1 x 64 or 1 x 128 block, the widths of the warp-segment kernels; fp8-row's row scales split
 * along K must still take the agreed amax there (a kernel that finds its own gives each rank its
 * local row scale). Every K layout x format x TP the shard rule accepts. */
static void test_shard_invariance_narrow_k(void **state) {
  (void)state;
  const tp_shard_layout layouts[] = {TP_SHARD_ACT_COLS, TP_SHARD_WEIGHT_COLS};
  const int64_t widths[] = {32, 64, 128};
  int combos = 0;
  for (int f = 0; f < TP_QFMT_COUNT; ++f)
    for (int li = 0; li < 2; ++li)
      for (int ti = 0; ti < N_TP; ++ti)
        for (int wi = 0; wi < 3; ++wi) {
          const int tp = TP_DEGREES[ti];
          const int64_t rows = 256, cols = widths[wi] * tp;
          if (tp_quant_shard_check((tp_quant_format)f, layouts[li], rows, cols, tp, NULL, NULL,
                                   0) != TP_OK)
            continue; /* a block would straddle ranks: refused, nothing to compare */
          uint16_t *x = random_bf16(rows, cols, 900 + (uint64_t)combos);
          make_adversarial(x, layouts[li], tp, rows, cols);
          void *dx = dev_upload(x, sizeof(uint16_t) * (size_t)(rows * cols));
          for (int t = 0; t < 2; ++t) {
            const long bad = device_shard_mismatches((tp_quant_format)f, layouts[li],
                                                     (tp_fp8_type)t, tp, rows, cols, dx);
            if (bad)
              fail_msg("%s, %s, TP %d, %lld columns a rank, %s: %ld mismatches",
                       tp_quant_format_name((tp_quant_format)f), tp_shard_layout_name(layouts[li]),
                       tp, (long long)widths[wi], tp_fp8_type_name((tp_fp8_type)t), bad);
          }
          cudaFree(dx);
          free(x);
          ++combos;
        }
  printf("  shard invariance on narrow K shards (32, 64, 128 columns a rank): %d combinations, "
         "all bit-identical\n",
         combos);
  assert_true(combos > 0);
}

/* ---- the scaled GEMM --------------------------------------------------------------------------
 */

/* Per element: |d - ref| <= tp_fp8_gemm_tolerance under this device's
 * accumulation model (tp_quant.h: the reduced-precision FP8 MMA of sm_89 and
 * sm_90, fp32 accumulation elsewhere). */
static tp_fp8_accum_model g_model;

typedef struct gemm_report {
  long bad, nonfinite;
  double worst_ratio; /* max |d - ref| / tolerance */
} gemm_report;

static gemm_report gemm_check(const uint16_t *d, const tp_fp8_dot *ref, int64_t m, int64_t n,
                              int64_t k) {
  gemm_report rep = {0, 0, 0.0};
  for (int64_t i = 0; i < m * n; ++i) {
    const double v = gpu_bf16_to_float(d[i]);
    if (!isfinite(v)) {
      rep.nonfinite++;
      rep.bad++;
      continue;
    }
    const double ratio = fabs(v - ref[i].ref) / tp_fp8_gemm_tolerance(&g_model, &ref[i], k);
    if (ratio > rep.worst_ratio) rep.worst_ratio = ratio;
    rep.bad += ratio > 1.0;
  }
  return rep;
}

typedef struct gemm_case {
  int64_t m, n, k;
  uint16_t *x, *w; /* host bf16 */
  void *dx, *dw;   /* device bf16 */
} gemm_case;

/* Quantizes a device bf16 operand; returns the dequantized values (host). */
static double *quantize_operand(tp_quant_format f, tp_quant_role role, const void *dsrc,
                                int64_t rows, int64_t cols, dev_quant *out) {
  dev_quant_init(out, f, role, rows, cols);
  const tp_quant_args a = {f,    role, TP_FP8_E4M3, TP_BF16,     dsrc, rows,
                           cols, cols, out->q,      out->scales, NULL};
  check_rc(tp_quant_enqueue(&a, 0), "quantize operand");
  sync_ok();
  tp_quant_args h = a;
  h.q = download(out->q, (size_t)(rows * cols));
  h.scales = download(out->scales, tp_quant_scale_bytes(&out->shape));
  double *deq = malloc(sizeof(double) * (size_t)(rows * cols));
  assert_non_null(deq);
  check_rc(tp_quant_dequant_ref(&h, deq), "dequantize");
  free(h.q);
  free(h.scales);
  return deq;
}

/* The injected faults the check must catch: a NaN, and a value off by twice the tolerance. */
static void check_catches_faults(uint16_t *d, const tp_fp8_dot *ref, const gemm_case *c) {
  const uint16_t saved0 = d[0], saved1 = d[1];
  d[0] = 0x7fc0;
  d[1] = gpu_float_to_bf16(
      (float)(ref[1].ref + 2.0 * tp_fp8_gemm_tolerance(&g_model, &ref[1], c->k) + 0.01));
  const gemm_report broken = gemm_check(d, ref, c->m, c->n, c->k);
  assert_int_equal(broken.nonfinite, 1);
  assert_int_equal(broken.bad, 2);
  d[0] = saved0;
  d[1] = saved1;
}

/* A refused format: the reason names it and the heuristic, enqueue refuses
 * as well and D stays poisoned. */
static void check_refusal(tp_gemm_scaled *g, tp_rc rc, const char *reason,
                          const tp_gemm_scaled_desc *desc, const gemm_case *c) {
  assert_int_equal(rc, TP_EREJECT);
  assert_non_null(strstr(reason, tp_quant_format_name(desc->format)));
  assert_non_null(strstr(reason, "cublasLtMatmulAlgoGetHeuristic"));
  assert_int_equal(tp_gemm_scaled_enqueue(g, desc, 0), TP_EREJECT);
  sync_ok();
  uint16_t *d = download(desc->d, sizeof(uint16_t) * (size_t)(c->m * c->n));
  for (int64_t i = 0; i < c->m * c->n; ++i) assert_int_equal(d[i], 0xffff);
  free(d);
}

/* Runs and checks one format; returns the elements outside the tolerance
 * (printed with the worst ratio), so every format is seen before a failure. */
static long gemm_run_checked(tp_gemm_scaled *g, const tp_gemm_scaled_desc *desc, const double *dx,
                             const double *dw, const gemm_case *c) {
  check_rc(tp_gemm_scaled_enqueue(g, desc, 0), "scaled GEMM");
  sync_ok();
  uint16_t *d = download(desc->d, sizeof(uint16_t) * (size_t)(c->m * c->n));
  tp_fp8_dot *ref = calloc((size_t)(c->m * c->n), sizeof *ref);
  assert_non_null(ref);
  for (int64_t i = 0; i < c->m; ++i)
    for (int64_t j = 0; j < c->n; ++j)
      ref[i * c->n + j] = tp_fp8_dot_ref(dx + i * c->k, dw + j * c->k, c->k, g_model.group);
  const gemm_report rep = gemm_check(d, ref, c->m, c->n, c->k);
  printf("  %-9s m=%lld n=%lld k=%lld: %ld of %lld outside the tolerance, %ld non-finite, "
         "worst |err|/tol %.3g\n",
         tp_quant_format_name(desc->format), (long long)c->m, (long long)c->n, (long long)c->k,
         rep.bad, (long long)c->m * c->n, rep.nonfinite, rep.worst_ratio);
  check_catches_faults(d, ref, c);
  free(ref);
  free(d);
  return rep.bad;
}

static long gemm_one_format(tp_gemm_scaled *g, tp_quant_format f, const gemm_case *c) {
  char reason[400];
  const tp_rc rc = tp_gemm_scaled_supported(g, f, c->m, c->n, c->k, reason, sizeof reason);
  const int must_refuse = f == TP_QFMT_MXFP8 && g_major < 10;
  const int must_support =
      (f == TP_QFMT_MXFP8 && g_major >= 10) || (f != TP_QFMT_MXFP8 && g_major == 9);
  dev_quant qx, qw;
  double *dx = quantize_operand(f, TP_QROLE_ACT, c->dx, c->m, c->k, &qx);
  double *dw = quantize_operand(f, TP_QROLE_WEIGHT, c->dw, c->n, c->k, &qw);
  void *dd = dev_alloc(sizeof(uint16_t) * (size_t)(c->m * c->n));
  if (cudaMemset(dd, 0xff, sizeof(uint16_t) * (size_t)(c->m * c->n)) != cudaSuccess)
    fail_msg("poisoning D failed");
  const tp_gemm_scaled_desc desc = {f,         c->m, c->n,      c->k, qx.q,
                                    qx.scales, qw.q, qw.scales, dd,   TP_GEMM_SCALED_FWD};
  long bad = 0;
  if (rc != TP_OK) {
    printf("  %-9s m=%lld n=%lld k=%lld: refused (%s): %s\n", tp_quant_format_name(f),
           (long long)c->m, (long long)c->n, (long long)c->k, tp_rc_name(rc), reason);
    if (must_support) {
      printf("  %s must be supported on sm_%d%d\n", tp_quant_format_name(f), g_major, g_minor);
      bad = 1;
    } else {
      check_refusal(g, rc, reason, &desc, c);
    }
  } else if (must_refuse) {
    printf("  %s reported supported on sm_%d%d\n", tp_quant_format_name(f), g_major, g_minor);
    bad = 1;
  } else {
    bad = gemm_run_checked(g, &desc, dx, dw, c);
  }
  cudaFree(dd);
  dev_quant_free(&qx);
  dev_quant_free(&qw);
  free(dx);
  free(dw);
  return bad;
}

static void test_scaled_gemm(void **state) {
  (void)state;
  tp_gemm_scaled *g = NULL;
  check_rc(tp_gemm_scaled_create((size_t)32 << 20, &g), "tp_gemm_scaled_create");
  g_model = tp_fp8_accum_model_of(g_major, g_minor);
  printf("  accumulation model of sm_%d%d: %s\n", g_major, g_minor,
         g_model.reduced_mma ? "FP8 MMA accumulator of ~14 bits, fp32 promotion"
                             : "fp32 accumulation");
  long bad = 0; /* every format and shape runs before the verdict */
  const int64_t shapes[][3] = {{256, 384, 512}, {128, 256, 1024}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
    gemm_case c = {shapes[s][0], shapes[s][1], shapes[s][2], NULL, NULL, NULL, NULL};
    c.x = random_bf16(c.m, c.k, 900 + s);
    c.w = random_bf16(c.n, c.k, 950 + s);
    c.dx = dev_upload(c.x, sizeof(uint16_t) * (size_t)(c.m * c.k));
    c.dw = dev_upload(c.w, sizeof(uint16_t) * (size_t)(c.n * c.k));
    for (int f = 0; f < TP_QFMT_COUNT; ++f) bad += gemm_one_format(g, (tp_quant_format)f, &c);
    cudaFree(c.dx);
    cudaFree(c.dw);
    free(c.x);
    free(c.w);
  }
  tp_gemm_scaled_destroy(g);
  assert_int_equal(bad, 0);
}

int main(void) {
  /* Counted in a child: this process meets CUDA only when there is a device. */
  if (gpu_device_count() == 0) {
    printf("no CUDA device: GPU test skipped\n");
    return GPU_TEST_SKIP;
  }
  if (cudaSetDevice(0) != cudaSuccess ||
      cudaDeviceGetAttribute(&g_major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&g_minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
    printf("cudaSetDevice(0) or the compute capability failed\n");
    return 1;
  }
  printf("quant: device 0 is sm_%d%d\n", g_major, g_minor);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_encode_matches_reference),
      cmocka_unit_test(test_quantize_matches_reference),
      cmocka_unit_test(test_quantize_op_shapes),
      cmocka_unit_test(test_transpose_quantize_edges),
      cmocka_unit_test(test_transpose_quantize_op_shapes),
      cmocka_unit_test(test_shard_invariance_on_device),
      cmocka_unit_test(test_shard_invariance_narrow_k),
      cmocka_unit_test(test_scaled_gemm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
