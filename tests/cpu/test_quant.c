/*
 * test_quant.c — kernels/tp_quant.h's pure-C side: the reference fp8
 * encoding (known E4M3/E5M2 codes of chosen values: saturation, subnormals,
 * ties to even, zero, negative zero, NaN; every code decodes and encodes back
 * to itself), the scale rule and the stored layout of every format, THE
 * shard invariant (quantizing a shard gives bit for bit the data and scales
 * of quantizing the whole and taking the shard) for every format x shard
 * layout x TP in {2, 4, 8}, on random and adversarial data (the largest |x|
 * of the tensor inside one shard, at its edge, and a shard of tiny values),
 * with the amax agreement the shard rule asks for; the negative control (a
 * quantizer that flattens blocks across rows, the reshape(-1, block) bug,
 * fails the invariant on row-split layouts, where the real one passes); and
 * the shard rule rejecting straddling shapes with a reason that names the
 * format, the dimension, the block and the shard size, and accepting the
 * aligned ones; every row of TP_QUANT_FORMAT_LIST against what the code
 * makes of it. The coverage counted is printed. The scaled GEMM's accuracy
 * model: which devices get the reduced-precision MMA term, the dot's
 * magnitudes on a hand-checked case, and its bound holding for a simulated
 * 14-bit aligning accumulator where the fp32 model's does not.
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

#include "kernels/tp_quant.h"

static const int TP_DEGREES[] = {2, 4, 8};
enum { N_TP = 3 };

/* ---- inputs -----------------------------------------------------------------------------------
 */

static uint64_t rng_next(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

/* Uniform in [-1, 1), times 2^((row % 7) - 3) so rows differ in magnitude. */
static void fill_random(float *x, int64_t rows, int64_t cols, uint64_t seed) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float u = (float)(rng_next(&state) >> 40) / 16777216.0f;
      x[r * cols + c] = ldexpf(2.0f * u - 1.0f, (int)(r % 7) - 3);
    }
}

static uint16_t to_bf16(float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t v) {
  uint32_t bits = (uint32_t)v << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Bit patterns, so -0 and 0 (and NaNs) count as different. */
static uint32_t float_bits(float v) {
  uint32_t b;
  memcpy(&b, &v, sizeof b);
  return b;
}
static uint64_t double_bits(double v) {
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  return b;
}

/* ---- encoding ---------------------------------------------------------------------------------
 */

typedef struct known_code {
  float value;
  uint8_t e4m3, e5m2;
  const char *what;
} known_code;

static void test_known_encodings(void **state) {
  (void)state;
  const known_code table[] = {
      {0.0f, 0x00, 0x00, "zero"},
      {-0.0f, 0x80, 0x80, "negative zero keeps its sign"},
      {1.0f, 0x38, 0x3C, "one"},
      {-1.0f, 0xB8, 0xBC, "minus one"},
      {448.0f, 0x7E, 0x5F, "E4M3's largest finite"},
      {416.0f, 0x7D, 0x5E, "below E4M3's largest"},
      {464.0f, 0x7E, 0x5F, "E4M3 tie above 448 saturates"},
      {500.0f, 0x7E, 0x60, "E4M3 saturates; E5M2 rounds up across an exponent"},
      {57344.0f, 0x7E, 0x7B, "E5M2's largest finite"},
      {61440.0f, 0x7E, 0x7B, "E5M2 tie above its largest saturates"},
      {1e6f, 0x7E, 0x7B, "far above: saturate"},
      {-1e6f, 0xFE, 0xFB, "far below: saturate to minus the largest"},
      {INFINITY, 0x7E, 0x7B, "infinity saturates"},
      {-INFINITY, 0xFE, 0xFB, "minus infinity saturates"},
      {0x1p-6f, 0x08, 0x24, "E4M3's smallest normal"},
      {0x1p-9f, 0x01, 0x18, "E4M3's smallest subnormal"},
      {0x7p-9f, 0x07, 0x23, "E4M3's largest subnormal"},
      {0x1p-10f, 0x00, 0x14, "E4M3: half the smallest subnormal ties to zero"},
      {0x1.0002p-10f, 0x01, 0x14, "E4M3: just above that half rounds up"},
      {0x3p-10f, 0x02, 0x1A, "E4M3: 1.5 steps tie to the even 2"},
      {0xFp-10f, 0x08, 0x24,
       "E4M3: 7.5 steps tie to the even 8, the smallest normal; E5M2: a tie carrying into the "
       "exponent"},
      {0x1p-14f, 0x00, 0x04, "E5M2's smallest normal"},
      {0x1p-16f, 0x00, 0x01, "E5M2's smallest subnormal"},
      {0x1p-17f, 0x00, 0x00, "E5M2: half the smallest subnormal ties to zero"},
      {0x3p-17f, 0x00, 0x02, "E5M2: 1.5 steps tie to the even 2"},
      {0x7p-17f, 0x00, 0x04, "E5M2: 3.5 steps tie to the even 4, the smallest normal"},
      {-0x1p-18f, 0x80, 0x80, "a negative value rounding to zero gives -0"},
      {1.0625f, 0x38, 0x3C, "E4M3 tie between 1 and 1.125 goes to the even 1"},
      {1.1875f, 0x3A, 0x3D, "E4M3 tie between 1.125 and 1.25 goes to the even 1.25"},
      {0x1.1001p0f, 0x39, 0x3C, "E4M3 just above a tie rounds up"},
      {1.125f, 0x39, 0x3C, "E5M2 tie between 1 and 1.25 goes to the even 1"},
      {1.375f, 0x3B, 0x3E, "E5M2 tie between 1.25 and 1.5 goes to the even 1.5"},
      {NAN, 0x7F, 0x7F, "NaN"},
  };
  int checked = 0;
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
    const known_code *t = &table[i];
    const uint8_t e4 = tp_fp8_encode(TP_FP8_E4M3, t->value);
    const uint8_t e5 = tp_fp8_encode(TP_FP8_E5M2, t->value);
    if (e4 != t->e4m3 || e5 != t->e5m2)
      fail_msg("%a (%s): e4m3 0x%02X (want 0x%02X), e5m2 0x%02X (want 0x%02X)", (double)t->value,
               t->what, e4, t->e4m3, e5, t->e5m2);
    checked += 2;
  }
  printf("  %d known encodings checked\n", checked);
}

static void test_decode_values(void **state) {
  (void)state;
  assert_true(tp_fp8_decode(TP_FP8_E4M3, 0x7E) == 448.0f);
  assert_true(tp_fp8_decode(TP_FP8_E4M3, 0xFE) == -448.0f);
  assert_true(tp_fp8_decode(TP_FP8_E4M3, 0x01) == 0x1p-9f);
  assert_true(tp_fp8_decode(TP_FP8_E4M3, 0x08) == 0x1p-6f);
  assert_true(isnan(tp_fp8_decode(TP_FP8_E4M3, 0x7F)));
  assert_true(isnan(tp_fp8_decode(TP_FP8_E4M3, 0xFF)));
  assert_true(tp_fp8_decode(TP_FP8_E5M2, 0x7B) == 57344.0f);
  assert_true(tp_fp8_decode(TP_FP8_E5M2, 0x01) == 0x1p-16f);
  assert_true(isinf(tp_fp8_decode(TP_FP8_E5M2, 0x7C)));
  assert_true(isnan(tp_fp8_decode(TP_FP8_E5M2, 0x7D)));
  assert_true(signbit(tp_fp8_decode(TP_FP8_E4M3, 0x80)));
}

/* Every finite code decodes to a value that encodes back to the code. */
static void test_every_code_round_trips(void **state) {
  (void)state;
  int checked = 0;
  for (int t = 0; t < 2; ++t)
    for (int b = 0; b < 256; ++b) {
      const float v = tp_fp8_decode((tp_fp8_type)t, (uint8_t)b);
      if (!isfinite(v)) continue;
      const uint8_t back = tp_fp8_encode((tp_fp8_type)t, v);
      if (back != b)
        fail_msg("%s 0x%02X decodes to %a, which encodes to 0x%02X",
                 tp_fp8_type_name((tp_fp8_type)t), b, (double)v, back);
      ++checked;
    }
  printf("  %d finite codes round-trip\n", checked);
  assert_int_equal(checked, 254 + 248); /* E4M3: 2 NaN codes; E5M2: 2 inf + 6 NaN */
}

/* ---- scale rules and layouts ------------------------------------------------------------------
 */

typedef struct quant_buf {
  tp_quant_args a;
  tp_scale_shape shape;
  uint8_t *q;
  void *scales;
  double *deq;
} quant_buf;

/* Buffers for a quantization of x (fp32, ld = cols unless given). */
static void quant_buf_init(quant_buf *b, tp_quant_format f, tp_quant_role role, tp_fp8_type t,
                           const void *x, tp_dtype dt, int64_t rows, int64_t cols, int64_t ld) {
  memset(b, 0, sizeof *b);
  assert_int_equal(tp_quant_scale_shape(f, role, rows, cols, &b->shape), TP_OK);
  b->q = malloc((size_t)(rows * cols));
  b->scales = malloc(tp_quant_scale_bytes(&b->shape));
  b->deq = malloc(sizeof(double) * (size_t)(rows * cols));
  assert_non_null(b->q);
  assert_non_null(b->scales);
  assert_non_null(b->deq);
  b->a = (tp_quant_args){f, role, t, dt, x, rows, cols, ld, b->q, b->scales, NULL};
}

static void quant_buf_free(quant_buf *b) {
  free(b->q);
  free(b->scales);
  free(b->deq);
}

static void quantize_checked(quant_buf *b) {
  if (tp_quant_ref(&b->a) != TP_OK) fail_msg("tp_quant_ref: %s", tp_last_error());
  if (tp_quant_dequant_ref(&b->a, b->deq) != TP_OK) fail_msg("dequant: %s", tp_last_error());
}

static void test_tensorwise_rule(void **state) {
  (void)state;
  const float x[8] = {-896.0f, 1.0f, 0.5f, 0.0f, 3.0f, -2.0f, 0.25f, 96.0f};
  quant_buf b;
  quant_buf_init(&b, TP_QFMT_FP8, TP_QROLE_ACT, TP_FP8_E4M3, x, TP_FP32, 2, 4, 4);
  quantize_checked(&b);
  assert_true(((float *)b.scales)[0] == 2.0f);                       /* 896 / 448 */
  assert_int_equal(b.q[0], 0xFE);                                    /* -896 / 2 = -448 */
  assert_int_equal(b.q[1], 0x30);                                    /* 0.5 */
  for (int i = 0; i < 8; ++i) assert_true(b.deq[i] == (double)x[i]); /* all exact here */
  quant_buf_free(&b);

  const float zeros[4] = {0};
  quant_buf_init(&b, TP_QFMT_FP8, TP_QROLE_ACT, TP_FP8_E4M3, zeros, TP_FP32, 1, 4, 4);
  quantize_checked(&b);
  assert_true(((float *)b.scales)[0] == 1.0f); /* an all-zero tensor takes scale 1 */
  for (int i = 0; i < 4; ++i) assert_int_equal(b.q[i], 0);
  quant_buf_free(&b);

  const float big[2] = {229376.0f, -1.0f}; /* 57344 · 4 */
  quant_buf_init(&b, TP_QFMT_FP8, TP_QROLE_ACT, TP_FP8_E5M2, big, TP_FP32, 1, 2, 2);
  quantize_checked(&b);
  assert_true(((float *)b.scales)[0] == 4.0f);
  assert_int_equal(b.q[0], 0x7B);
  quant_buf_free(&b);
}

static void test_rowwise_rule(void **state) {
  (void)state;
  const float x[6] = {448.0f, 1.0f, -896.0f, 2.0f, 0.0f, 0.0f};
  quant_buf b;
  quant_buf_init(&b, TP_QFMT_FP8_ROW, TP_QROLE_WEIGHT, TP_FP8_E4M3, x, TP_FP32, 3, 2, 2);
  quantize_checked(&b);
  const float *s = b.scales;
  assert_true(s[0] == 1.0f && s[1] == 2.0f && s[2] == 1.0f);
  assert_int_equal(b.q[2], 0xFE);
  quant_buf_free(&b);
}

/* fp8-block activation: 1x128 blocks, scales stored row index fastest. */
static void test_block_act_layout(void **state) {
  (void)state;
  float x[2 * 256];
  for (int i = 0; i < 2 * 256; ++i) x[i] = 0.5f;
  for (int r = 0; r < 2; ++r)
    for (int kb = 0; kb < 2; ++kb) x[r * 256 + kb * 128 + 7] = 448.0f * (float)(1 + r * 2 + kb);
  quant_buf b;
  quant_buf_init(&b, TP_QFMT_FP8_BLOCK, TP_QROLE_ACT, TP_FP8_E4M3, x, TP_FP32, 2, 256, 256);
  assert_int_equal(b.shape.layout, TP_SCALE_VEC);
  assert_int_equal(b.shape.stored, 4);
  quantize_checked(&b);
  const float *s = b.scales;
  /* (r0, kb0), (r1, kb0), (r0, kb1), (r1, kb1) */
  assert_true(s[0] == 1.0f && s[1] == 3.0f && s[2] == 2.0f && s[3] == 4.0f);
  quant_buf_free(&b);
}

/* fp8-block weight: 128x128 blocks, K-block fastest, the K-block count padded to 4. */
static void test_block_weight_layout(void **state) {
  (void)state;
  const int64_t rows = 256, cols = 384;
  float *x = malloc(sizeof(float) * (size_t)(rows * cols));
  assert_non_null(x);
  for (int64_t i = 0; i < rows * cols; ++i) x[i] = 0.25f;
  for (int64_t gr = 0; gr < 2; ++gr)
    for (int64_t gc = 0; gc < 3; ++gc)
      x[(gr * 128 + 5) * cols + gc * 128 + 9] = 448.0f * (float)(1 + gr * 3 + gc);
  quant_buf b;
  quant_buf_init(&b, TP_QFMT_FP8_BLOCK, TP_QROLE_WEIGHT, TP_FP8_E4M3, x, TP_FP32, rows, cols, cols);
  assert_int_equal(b.shape.layout, TP_SCALE_BLK);
  assert_int_equal(b.shape.ld, 4);
  assert_int_equal(b.shape.stored, 8);
  quantize_checked(&b);
  const float *s = b.scales;
  for (int gr = 0; gr < 2; ++gr)
    for (int gc = 0; gc < 3; ++gc) assert_true(s[gc + gr * 4] == (float)(1 + gr * 3 + gc));
  assert_true(s[3] == 0.0f && s[7] == 0.0f); /* padding */
  quant_buf_free(&b);
  free(x);
}

/* mxfp8: E8M0 = floor(log2(amax)) - emax + 127, in cuBLASLt's 128x4 tiled layout. */
static void test_mx_rule_and_layout(void **state) {
  (void)state;
  assert_int_equal(tp_quant_scale_e8m0(TP_FP8_E4M3, 1.0f), 119);   /* 2^(0 - 8) */
  assert_int_equal(tp_quant_scale_e8m0(TP_FP8_E4M3, 448.0f), 127); /* 2^(8 - 8) */
  assert_int_equal(tp_quant_scale_e8m0(TP_FP8_E4M3, 511.9f), 127);
  assert_int_equal(tp_quant_scale_e8m0(TP_FP8_E4M3, 512.0f), 128);
  assert_int_equal(tp_quant_scale_e8m0(TP_FP8_E4M3, 0.0f), 0);
  assert_int_equal(tp_quant_scale_e8m0(TP_FP8_E5M2, 1.0f), 112);    /* 2^(0 - 15) */
  assert_int_equal(tp_quant_scale_e8m0(TP_FP8_E4M3, 0x1p-130f), 0); /* clamped to 2^-127 */
  assert_true(tp_e8m0_value(127) == 1.0f);
  assert_true(tp_e8m0_value(0) == 0x1p-127f);
  assert_true(tp_e8m0_value(254) == 0x1p127f);

  const int64_t rows = 130, cols = 256; /* 8 block columns, rows padded to 256 */
  float *x = malloc(sizeof(float) * (size_t)(rows * cols));
  assert_non_null(x);
  for (int64_t i = 0; i < rows * cols; ++i) x[i] = 0.5f;
  x[(int64_t)33 * cols + (int64_t)5 * 32 + 3] = 1024.0f; /* block (33, 5): 2^(10 - 8) */
  x[(int64_t)129 * cols + (int64_t)2 * 32] = 500.0f; /* block (129, 2): 2^(8 - 8); 500 saturates */
  quant_buf b;
  quant_buf_init(&b, TP_QFMT_MXFP8, TP_QROLE_ACT, TP_FP8_E4M3, x, TP_FP32, rows, cols, cols);
  assert_int_equal(b.shape.stored, 256 * 4 * 2);
  quantize_checked(&b);
  const uint8_t *s = b.scales;
  assert_int_equal(s[533], 129);  /* tile 1: 512 + (33 % 32)·16 + (33 / 32)·4 + 5 % 4 */
  assert_int_equal(s[1042], 127); /* tile 2: 1024 + (129 % 32)·16 + 0·4 + 2 */
  assert_int_equal(s[0], 118);    /* amax 0.5: 2^(-1 - 8) */
  assert_int_equal(s[1072], 0);   /* row 131 is padding */
  assert_int_equal(b.q[(int64_t)129 * cols + (int64_t)2 * 32], 0x7E);
  /* 1024 / 2^2 = 256 = 2^8 */
  assert_int_equal(b.q[(int64_t)33 * cols + (int64_t)5 * 32 + 3], 0x78);
  quant_buf_free(&b);
  free(x);
}

/* bf16 input gives the bits of the same values in fp32. */
static void test_bf16_input(void **state) {
  (void)state;
  const int64_t rows = 64, cols = 96;
  float *x = malloc(sizeof(float) * (size_t)(rows * cols));
  uint16_t *xb = malloc(sizeof(uint16_t) * (size_t)(rows * cols));
  assert_non_null(x);
  assert_non_null(xb);
  fill_random(x, rows, cols, 7);
  for (int64_t i = 0; i < rows * cols; ++i) {
    xb[i] = to_bf16(x[i]);
    x[i] = from_bf16(xb[i]);
  }
  for (int f = 0; f < TP_QFMT_COUNT; ++f) {
    quant_buf a, b;
    quant_buf_init(&a, (tp_quant_format)f, TP_QROLE_ACT, TP_FP8_E4M3, x, TP_FP32, rows, cols, cols);
    quant_buf_init(&b, (tp_quant_format)f, TP_QROLE_ACT, TP_FP8_E4M3, xb, TP_BF16, rows, cols,
                   cols);
    quantize_checked(&a);
    quantize_checked(&b);
    assert_memory_equal(a.q, b.q, (size_t)(rows * cols));
    assert_memory_equal(a.scales, b.scales, tp_quant_scale_bytes(&a.shape));
    quant_buf_free(&a);
    quant_buf_free(&b);
  }
  free(x);
  free(xb);
}

/* ---- the formats' rows ----------------------------------------------------------------------
 *
 * Every row of TP_QUANT_FORMAT_LIST, read here on its own, against what the
 * code does with it: the format of the row's dtype and its name, the scale
 * shape per role (layout, encoding, block), cuBLASLt's mode name, the
 * agreement the shard rule asks for, and the reference quantizer's scale of
 * every block of the row's shape. A row the code ignores fails here. */

typedef struct row_role {
  tp_scale_layout layout;
  int64_t block_rows, block_cols;
  const char *mode;
} row_role;

typedef struct format_row {
  tp_quant_format format;
  tp_dtype dtype;
  tp_scale_encoding encoding;
  tp_amax_agreement agreement;
  row_role role[2];
} format_row;

#define ROW_ROLE(layout, block_rows, block_cols, mode)                                             \
  { layout, block_rows, block_cols, #mode }
#define FORMAT_ROW(format, dtype, encoding, agreement, act, weight)                                \
  {format, dtype, encoding, agreement, {ROW_ROLE act, ROW_ROLE weight}},
static const format_row FORMAT_ROWS[] = {TP_QUANT_FORMAT_LIST(FORMAT_ROW)};
#undef FORMAT_ROW
#undef ROW_ROLE

/* The agreement a split of a TP_QUANT_WHOLE block dimension needs follows from the blocks. */
static void check_agreement_column(const format_row *row) {
  for (int role = 0; role < 2; ++role) {
    const row_role *r = &row->role[role];
    const int whole_rows = r->block_rows == TP_QUANT_WHOLE,
              whole_cols = r->block_cols == TP_QUANT_WHOLE;
    if (row->agreement == TP_AMAX_AGREE_TENSOR) assert_true(whole_rows && whole_cols);
    if (row->agreement == TP_AMAX_AGREE_ROWS) assert_true(r->block_rows == 1 && whole_cols);
    if (row->agreement == TP_AMAX_LOCAL) assert_true(!whole_rows && !whole_cols);
  }
}

/* Every block's stored scale is the scale of the amax over the row's block. */
static void check_reference_blocks(const format_row *row, tp_quant_role role) {
  const int64_t rows = 300, cols = 200; /* partial blocks at both ends */
  const row_role *r = &row->role[role];
  const int64_t br = r->block_rows == TP_QUANT_WHOLE ? rows : r->block_rows;
  const int64_t bc = r->block_cols == TP_QUANT_WHOLE ? cols : r->block_cols;
  float *x = malloc(sizeof(float) * (size_t)(rows * cols));
  assert_non_null(x);
  fill_random(x, rows, cols, 29u + (uint64_t)row->format);
  quant_buf b;
  quant_buf_init(&b, row->format, role, TP_FP8_E4M3, x, TP_FP32, rows, cols, cols);
  assert_int_equal(b.shape.layout, r->layout);
  assert_int_equal(b.shape.encoding, row->encoding);
  assert_int_equal(b.shape.elem_bytes, row->encoding == TP_SCALE_E8M0 ? 1 : 4);
  assert_int_equal(b.shape.block_rows, br);
  assert_int_equal(b.shape.block_cols, bc);
  quantize_checked(&b);
  for (int64_t gr = 0; gr * br < rows; ++gr)
    for (int64_t gc = 0; gc * bc < cols; ++gc) {
      float amax = 0.0f;
      for (int64_t i = gr * br; i < rows && i < (gr + 1) * br; ++i)
        for (int64_t j = gc * bc; j < cols && j < (gc + 1) * bc; ++j)
          amax = fmaxf(amax, fabsf(x[i * cols + j]));
      const float want = row->encoding == TP_SCALE_E8M0
                             ? tp_e8m0_value(tp_quant_scale_e8m0(TP_FP8_E4M3, amax))
                             : tp_quant_scale_f32(TP_FP8_E4M3, amax);
      assert_int_equal(float_bits(tp_quant_scale_at(&b.shape, b.scales, gr, gc)), float_bits(want));
    }
  quant_buf_free(&b);
  free(x);
}

static void test_rows_match_code(void **state) {
  (void)state;
  assert_int_equal(sizeof FORMAT_ROWS / sizeof FORMAT_ROWS[0], TP_QFMT_COUNT);
  for (int i = 0; i < TP_QFMT_COUNT; ++i) {
    const format_row *row = &FORMAT_ROWS[i];
    assert_int_equal(row->format, i); /* the rows are the enum's order */
    assert_true(tp_dtype_is_fp8(row->dtype));
    tp_quant_format f;
    assert_int_equal(tp_quant_format_of(row->dtype, &f), TP_OK);
    assert_int_equal(f, row->format);
    assert_string_equal(tp_quant_format_name(f), tp_dtype_name(row->dtype));
    assert_int_equal(tp_quant_format_agreement(f), row->agreement);
    check_agreement_column(row);
    for (int role = 0; role < 2; ++role) {
      assert_string_equal(tp_quant_scale_mode_name(f, (tp_quant_role)role), row->role[role].mode);
      check_reference_blocks(row, (tp_quant_role)role);
    }
    for (int l = 0; l < TP_SHARD_COUNT; ++l) {
      const row_role *r = &row->role[tp_shard_layout_role((tp_shard_layout)l)];
      const int64_t block =
          tp_shard_layout_splits_rows((tp_shard_layout)l) ? r->block_rows : r->block_cols;
      tp_amax_agreement agreement = TP_AMAX_LOCAL;
      assert_int_equal(
          tp_quant_shard_check(f, (tp_shard_layout)l, 256, 256, 2, &agreement, NULL, 0), TP_OK);
      assert_int_equal(agreement, block == TP_QUANT_WHOLE ? row->agreement : TP_AMAX_LOCAL);
    }
  }
  for (int dt = 0; dt < TP_N_DTYPES; ++dt) { /* every fp8 dtype has its row */
    tp_quant_format f;
    if (tp_dtype_is_fp8((tp_dtype)dt))
      assert_int_equal(tp_quant_format_of((tp_dtype)dt, &f), TP_OK);
  }
}

static void test_bad_arguments_refused(void **state) {
  (void)state;
  float x[4] = {1, 2, 3, 4}, amax = 4.0f, s[4];
  uint8_t q[4];
  tp_quant_args a = {
      TP_QFMT_FP8_BLOCK, TP_QROLE_ACT, TP_FP8_E4M3, TP_FP32, x, 1, 4, 4, q, s, &amax};
  assert_int_equal(tp_quant_ref(&a), TP_EINTERNAL); /* block formats agree on nothing */
  a.agreed_amax = NULL;
  a.ld = 3;
  assert_int_equal(tp_quant_ref(&a), TP_EINTERNAL); /* ld < cols */
  a.ld = 4;
  assert_int_equal(tp_quant_ref(&a), TP_OK);
  assert_int_equal(tp_quant_local_amax_ref(&a, &amax), TP_EINTERNAL);
}

/* ---- the shard invariant ----------------------------------------------------------------------
 */

/* A quantizer under test: quantizes a (its q, and its scales when it has
 * any) and writes the dequantized values, rows x cols. */
typedef struct quantizer {
  const char *name;
  void (*run)(const tp_quant_args *a, double *deq);
  int has_scale_grid; /* the real one: compare the logical scale grids too */
} quantizer;

static void real_run(const tp_quant_args *a, double *deq) {
  if (tp_quant_ref(a) != TP_OK) fail_msg("tp_quant_ref: %s", tp_last_error());
  if (tp_quant_dequant_ref(a, deq) != TP_OK) fail_msg("dequant: %s", tp_last_error());
}

static const quantizer REAL = {"tp_quant_ref", real_run, 1};

/* The deliberately wrong one: blocks of `block` consecutive elements of the
 * flattened tensor (x.reshape(-1, block)), E8M0 scales as mxfp8's, so blocks
 * run across row ends. a->ld must be a->cols (a contiguous tensor or row shard). */
static void flat_run(const tp_quant_args *a, double *deq, int64_t block) {
  const int64_t n = a->rows * a->cols;
  const float *x = a->x;
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = b0 + block < n ? b0 + block : n;
    float amax = 0.0f;
    for (int64_t i = b0; i < b1; ++i) amax = fmaxf(amax, fabsf(x[i]));
    const float s = tp_e8m0_value(tp_quant_scale_e8m0(a->elem, amax));
    for (int64_t i = b0; i < b1; ++i) {
      a->q[i] = tp_fp8_encode(a->elem, x[i] / s);
      deq[i] = (double)tp_fp8_decode(a->elem, a->q[i]) * s;
    }
  }
}
static void flat32_run(const tp_quant_args *a, double *deq) { flat_run(a, deq, 32); }
static void flat128_run(const tp_quant_args *a, double *deq) { flat_run(a, deq, 128); }
static const quantizer FLAT32 = {"flattening 32-blocks", flat32_run, 0};
static const quantizer FLAT128 = {"flattening 128-blocks", flat128_run, 0};

/* Rank r's part of a [rows, cols] tensor split by layout over tp. */
typedef struct shard_geom {
  int64_t r0, c0, rows, cols;
} shard_geom;

static shard_geom shard_of(tp_shard_layout l, int64_t rows, int64_t cols, int tp, int r) {
  if (tp_shard_layout_splits_rows(l)) return (shard_geom){r * (rows / tp), 0, rows / tp, cols};
  return (shard_geom){0, r * (cols / tp), rows, cols / tp};
}

/* The amax the ranks agree on (an all-reduce max of the shards' own), as the
 * worker will do it; it must be the whole tensor's. A row agreement only
 * arises with K split, where every shard holds every row. */
static float *agree_amax(tp_quant_args whole, tp_shard_layout l, int tp, size_t elem_bytes) {
  const size_t n = whole.format == TP_QFMT_FP8 ? 1 : (size_t)whole.rows;
  float *agreed = calloc(n, sizeof(float)), *local = calloc(n, sizeof(float));
  assert_non_null(agreed);
  assert_non_null(local);
  for (int r = 0; r < tp; ++r) {
    const shard_geom g = shard_of(l, whole.rows, whole.cols, tp, r);
    tp_quant_args a = whole;
    a.x = (const char *)whole.x + (size_t)(g.r0 * whole.ld + g.c0) * elem_bytes;
    a.rows = g.rows;
    a.cols = g.cols;
    assert_int_equal(tp_quant_local_amax_ref(&a, local), TP_OK);
    for (size_t i = 0; i < n; ++i) agreed[i] = fmaxf(agreed[i], local[i]);
  }
  assert_int_equal(tp_quant_local_amax_ref(&whole, local), TP_OK);
  assert_memory_equal(agreed, local, n * sizeof(float)); /* the amax of the whole */
  free(local);
  return agreed;
}

/* Mismatching bytes, values and scales between every shard's quantization
 * and the whole's (0: the invariant holds). */
static long shard_mismatches(const quantizer *qz, tp_quant_format f, tp_shard_layout l,
                             tp_fp8_type t, tp_dtype dt, const void *x, int64_t rows, int64_t cols,
                             int tp, tp_amax_agreement agreement) {
  const size_t eb = tp_dtype_bytes(dt);
  quant_buf whole;
  quant_buf_init(&whole, f, tp_shard_layout_role(l), t, x, dt, rows, cols, cols);
  qz->run(&whole.a, whole.deq);
  float *agreed = agreement != TP_AMAX_LOCAL ? agree_amax(whole.a, l, tp, eb) : NULL;
  long bad = 0;
  for (int r = 0; r < tp; ++r) {
    const shard_geom g = shard_of(l, rows, cols, tp, r);
    quant_buf part;
    quant_buf_init(&part, f, tp_shard_layout_role(l), t,
                   (const char *)x + (size_t)(g.r0 * cols + g.c0) * eb, dt, g.rows, g.cols, cols);
    part.a.agreed_amax = agreed;
    qz->run(&part.a, part.deq);
    for (int64_t i = 0; i < g.rows; ++i)
      for (int64_t j = 0; j < g.cols; ++j) {
        const int64_t w = (g.r0 + i) * cols + g.c0 + j, p = i * g.cols + j;
        bad += whole.q[w] != part.q[p] || double_bits(whole.deq[w]) != double_bits(part.deq[p]);
      }
    if (qz->has_scale_grid) {
      const int64_t gr0 = g.r0 / whole.shape.block_rows, gc0 = g.c0 / whole.shape.block_cols;
      for (int64_t gr = 0; gr < part.shape.grid_rows; ++gr)
        for (int64_t gc = 0; gc < part.shape.grid_cols; ++gc) {
          const float a = tp_quant_scale_at(&part.shape, part.scales, gr, gc);
          const float b = tp_quant_scale_at(&whole.shape, whole.scales, gr0 + gr, gc0 + gc);
          bad += float_bits(a) != float_bits(b);
        }
    }
    quant_buf_free(&part);
  }
  free(agreed);
  quant_buf_free(&whole);
  return bad;
}

/* Shape of a combination: the split dimension a multiple of tp times the
 * block along it; the other one not a multiple of any block (partial blocks). */
static void combo_shape(tp_quant_format f, tp_shard_layout l, int tp, int64_t *rows,
                        int64_t *cols) {
  /* the block along the split, from the format's row: a shard holds whole
   * blocks, at least 64 elements of them; a whole-dimension or one-row block
   * (agreed or local anyway) takes 40 rows or 24 columns */
  const int64_t probe = 1 << 20;
  tp_scale_shape s;
  assert_int_equal(tp_quant_scale_shape(f, tp_shard_layout_role(l), probe, probe, &s), TP_OK);
  const int by_rows = tp_shard_layout_splits_rows(l);
  const int64_t block = by_rows ? s.block_rows : s.block_cols;
  int64_t per = block;
  while (per < 64) per *= 2;
  if (block == 1 || block == probe) per = by_rows ? 40 : 24;
  *rows = by_rows ? (int64_t)tp * per : 72;
  *cols = by_rows ? 200 : (int64_t)tp * per;
}

/* Random data, then the adversary: the tensor's largest |x| at the last
 * element of shard 0 (beside the boundary) and the last shard scaled down
 * by 2^-12, so a scale that leaked across the boundary shows. */
static void make_data(int adversarial, tp_shard_layout l, int tp, int64_t rows, int64_t cols,
                      uint64_t seed, float *x) {
  fill_random(x, rows, cols, seed);
  if (!adversarial) return;
  const shard_geom first = shard_of(l, rows, cols, tp, 0),
                   last = shard_of(l, rows, cols, tp, tp - 1);
  for (int64_t i = 0; i < last.rows; ++i)
    for (int64_t j = 0; j < last.cols; ++j) x[(last.r0 + i) * cols + last.c0 + j] *= 0x1p-12f;
  x[(first.r0 + first.rows - 1) * cols + first.c0 + first.cols - 1] = -3000.0f;
}

static void test_shard_invariance(void **state) {
  (void)state;
  int combos = 0, checks = 0;
  for (int f = 0; f < TP_QFMT_COUNT; ++f)
    for (int l = 0; l < TP_SHARD_COUNT; ++l)
      for (int ti = 0; ti < N_TP; ++ti) {
        const int tp = TP_DEGREES[ti];
        int64_t rows, cols;
        combo_shape((tp_quant_format)f, (tp_shard_layout)l, tp, &rows, &cols);
        tp_amax_agreement agreement;
        char reason[320];
        if (tp_quant_shard_check((tp_quant_format)f, (tp_shard_layout)l, rows, cols, tp, &agreement,
                                 reason, sizeof reason) != TP_OK)
          fail_msg("aligned shape refused: %s", reason);
        float *x = malloc(sizeof(float) * (size_t)(rows * cols));
        uint16_t *xb = malloc(sizeof(uint16_t) * (size_t)(rows * cols));
        assert_non_null(x);
        assert_non_null(xb);
        for (int adversarial = 0; adversarial < 2; ++adversarial) {
          make_data(adversarial, (tp_shard_layout)l, tp, rows, cols,
                    (uint64_t)1000 * (uint64_t)f + 100 * (uint64_t)l + 10 * (uint64_t)tp +
                        (uint64_t)adversarial,
                    x);
          for (int64_t i = 0; i < rows * cols; ++i) xb[i] = to_bf16(x[i]);
          for (int t = 0; t < 2; ++t)
            for (int d = 0; d < 2; ++d) {
              const long bad =
                  shard_mismatches(&REAL, (tp_quant_format)f, (tp_shard_layout)l, (tp_fp8_type)t,
                                   d ? TP_BF16 : TP_FP32, d ? (const void *)xb : (const void *)x,
                                   rows, cols, tp, agreement);
              if (bad != 0)
                fail_msg("%s, %s, TP %d, %s, %s, %s data: %ld mismatches",
                         tp_quant_format_name((tp_quant_format)f),
                         tp_shard_layout_name((tp_shard_layout)l), tp,
                         tp_fp8_type_name((tp_fp8_type)t), d ? "bf16" : "fp32",
                         adversarial ? "adversarial" : "random", bad);
              ++checks;
            }
        }
        free(x);
        free(xb);
        ++combos;
      }
  printf("  shard invariance: %d formats x %d layouts x %d TP degrees = %d combinations, "
         "each with e4m3/e5m2 x fp32/bf16 x random/adversarial data: %d shard-vs-whole "
         "comparisons, all bit-identical\n",
         (int)TP_QFMT_COUNT, (int)TP_SHARD_COUNT, N_TP, combos, checks);
  assert_int_equal(combos, TP_QFMT_COUNT * TP_SHARD_COUNT * N_TP);
}

/* The flattening quantizer breaks the invariant where rows are split (a
 * shard starts mid flat block); the real one holds on the same data. */
static void test_flattening_quantizer_fails(void **state) {
  (void)state;
  const struct {
    const quantizer *flat;
    tp_quant_format real_format;
    int64_t cols; /* not a multiple of the block, so flat blocks cross rows */
  } cases[] = {{&FLAT32, TP_QFMT_MXFP8, 48}, {&FLAT128, TP_QFMT_FP8_BLOCK, 192}};
  int caught = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
    for (int ti = 0; ti < N_TP; ++ti) {
      const int tp = TP_DEGREES[ti];
      const int64_t rows = 3 * (int64_t)tp, cols = cases[c].cols;
      float *x = malloc(sizeof(float) * (size_t)(rows * cols));
      assert_non_null(x);
      make_data(1, TP_SHARD_ACT_ROWS, tp, rows, cols, 77 + (uint64_t)tp, x);
      tp_amax_agreement agreement;
      assert_int_equal(tp_quant_shard_check(cases[c].real_format, TP_SHARD_ACT_ROWS, rows, cols, tp,
                                            &agreement, NULL, 0),
                       TP_OK);
      const long flat_bad =
          shard_mismatches(cases[c].flat, cases[c].real_format, TP_SHARD_ACT_ROWS, TP_FP8_E4M3,
                           TP_FP32, x, rows, cols, tp, TP_AMAX_LOCAL);
      const long real_bad = shard_mismatches(&REAL, cases[c].real_format, TP_SHARD_ACT_ROWS,
                                             TP_FP8_E4M3, TP_FP32, x, rows, cols, tp, agreement);
      printf("  negative control, %s on %lldx%lld rows split over TP %d: %ld mismatches "
             "(real %s: %ld)\n",
             cases[c].flat->name, (long long)rows, (long long)cols, tp, flat_bad,
             tp_quant_format_name(cases[c].real_format), real_bad);
      assert_true(flat_bad > 0);
      assert_int_equal(real_bad, 0);
      ++caught;
      free(x);
    }
  assert_int_equal(caught, 6);
}

/* ---- the shard rule ---------------------------------------------------------------------------
 */

static void expect_refused(tp_quant_format f, tp_shard_layout l, int64_t rows, int64_t cols, int tp,
                           const char *const *words, size_t n_words) {
  char reason[320];
  tp_clear_error();
  assert_int_equal(tp_quant_shard_check(f, l, rows, cols, tp, NULL, reason, sizeof reason),
                   TP_EUSAGE);
  printf("  refused: %s\n", reason);
  assert_non_null(strstr(tp_last_message(), reason));
  for (size_t i = 0; i < n_words; ++i)
    if (!strstr(reason, words[i])) fail_msg("'%s' missing from: %s", words[i], reason);
}

static void test_shard_rule_refuses_straddling(void **state) {
  (void)state;
  const char *const act_k[] = {"fp8-block", "K of the activation", "128-element", "500"};
  expect_refused(TP_QFMT_FP8_BLOCK, TP_SHARD_ACT_COLS, 256, 1000, 2, act_k, 4);
  const char *const mx_k[] = {"mxfp8", "K of the weight", "32-element", "2056"};
  expect_refused(TP_QFMT_MXFP8, TP_SHARD_WEIGHT_COLS, 4096, 4112, 2, mx_k, 4);
  const char *const w_n[] = {"fp8-block", "N (rows of the weight)", "128-element", "192",
                             "128x128"};
  expect_refused(TP_QFMT_FP8_BLOCK, TP_SHARD_WEIGHT_ROWS, 1536, 4096, 8, w_n, 5);
  const char *const w_k[] = {"fp8-block", "K of the weight", "128-element", "192"};
  expect_refused(TP_QFMT_FP8_BLOCK, TP_SHARD_WEIGHT_COLS, 4096, 1536, 8, w_k, 4);
  const char *const mx_act[] = {"mxfp8", "K of the activation", "32-element", "500"};
  expect_refused(TP_QFMT_MXFP8, TP_SHARD_ACT_COLS, 4096, 4000, 8, mx_act, 4);
  const char *const undivided[] = {"fp8-row", "T (rows of the activation)", "1001",
                                   "not divisible by TP 2"};
  expect_refused(TP_QFMT_FP8_ROW, TP_SHARD_ACT_ROWS, 1001, 4096, 2, undivided, 4);
  const char *const fp8_k[] = {"fp8", "K of the activation", "4097", "not divisible"};
  expect_refused(TP_QFMT_FP8, TP_SHARD_ACT_COLS, 16, 4097, 4, fp8_k, 4);
}

static void expect_accepted(tp_quant_format f, tp_shard_layout l, int64_t rows, int64_t cols,
                            int tp, tp_amax_agreement want) {
  tp_amax_agreement got = (tp_amax_agreement)-1;
  char reason[320];
  if (tp_quant_shard_check(f, l, rows, cols, tp, &got, reason, sizeof reason) != TP_OK)
    fail_msg("%s %s %lldx%lld TP %d refused: %s", tp_quant_format_name(f), tp_shard_layout_name(l),
             (long long)rows, (long long)cols, tp, reason);
  assert_int_equal(got, want);
  assert_string_equal(reason, "");
}

static void test_shard_rule_accepts_aligned(void **state) {
  (void)state;
  /* Llama 3 8B's w2 at TP 8: K = 14336, 1792 per rank = 14 blocks of 128. */
  expect_accepted(TP_QFMT_FP8_BLOCK, TP_SHARD_ACT_COLS, 4096, 14336, 8, TP_AMAX_LOCAL);
  expect_accepted(TP_QFMT_FP8_BLOCK, TP_SHARD_WEIGHT_COLS, 4096, 14336, 8, TP_AMAX_LOCAL);
  expect_accepted(TP_QFMT_FP8_BLOCK, TP_SHARD_WEIGHT_ROWS, 6144, 4096, 8, TP_AMAX_LOCAL);
  expect_accepted(TP_QFMT_FP8_BLOCK, TP_SHARD_ACT_ROWS, 6, 4096, 2, TP_AMAX_LOCAL);
  expect_accepted(TP_QFMT_MXFP8, TP_SHARD_ACT_COLS, 4096, 4096, 8, TP_AMAX_LOCAL);
  expect_accepted(TP_QFMT_MXFP8, TP_SHARD_WEIGHT_ROWS, 6, 4096, 2, TP_AMAX_LOCAL);
  expect_accepted(TP_QFMT_FP8_ROW, TP_SHARD_ACT_ROWS, 4096, 4096, 8, TP_AMAX_LOCAL);
  expect_accepted(TP_QFMT_FP8_ROW, TP_SHARD_WEIGHT_ROWS, 4096, 4096, 8, TP_AMAX_LOCAL);
  expect_accepted(TP_QFMT_FP8_ROW, TP_SHARD_ACT_COLS, 4096, 4096, 8, TP_AMAX_AGREE_ROWS);
  expect_accepted(TP_QFMT_FP8_ROW, TP_SHARD_WEIGHT_COLS, 4096, 4096, 8, TP_AMAX_AGREE_ROWS);
  for (int l = 0; l < TP_SHARD_COUNT; ++l)
    expect_accepted(TP_QFMT_FP8, (tp_shard_layout)l, 4096, 4096, 4, TP_AMAX_AGREE_TENSOR);
  expect_accepted(TP_QFMT_FP8_BLOCK, TP_SHARD_ACT_COLS, 100, 1000, 1, TP_AMAX_LOCAL); /* TP 1 */
  expect_accepted(TP_QFMT_FP8, TP_SHARD_ACT_ROWS, 100, 1000, 1, TP_AMAX_LOCAL);
}

/* ---- the scaled GEMM's accuracy model ---------------------------------------------------------
 */

/* x cut to `bits` significant bits on the grid of 2^e_top (toward zero), as
 * an aligning accumulator does. */
static double cut_to_grid(double x, int e_top, int bits) {
  const double ulp = ldexp(1.0, e_top - bits + 1);
  return trunc(x / ulp) * ulp;
}

/* A 14-bit aligning accumulator over steps of `group` products (the model of
 * tp_quant.h), restarted every `restart` steps into an fp64 total. */
static double simulate_reduced_mma(const double *x, const double *w, int64_t k, int group,
                                   int restart) {
  double total = 0.0, acc = 0.0;
  int steps = 0;
  for (int64_t p0 = 0; p0 < k; p0 += group) {
    double top = fabs(acc);
    const int64_t end = p0 + group < k ? p0 + group : k;
    for (int64_t p = p0; p < end; ++p) top = fmax(top, fabs(x[p] * w[p]));
    int e_top = 0;
    (void)frexp(top, &e_top);
    double sum = cut_to_grid(acc, e_top - 1, 14);
    for (int64_t p = p0; p < end; ++p) sum += cut_to_grid(x[p] * w[p], e_top - 1, 14);
    (void)frexp(sum, &e_top);
    acc = sum != 0.0 ? cut_to_grid(sum, e_top - 1, 14) : 0.0;
    if (++steps % restart == 0) {
      total += acc;
      acc = 0.0;
    }
  }
  return total + acc;
}

static void test_accum_model_per_device(void **state) {
  (void)state;
  assert_int_equal(tp_fp8_accum_model_of(9, 0).reduced_mma, 1);
  assert_int_equal(tp_fp8_accum_model_of(8, 9).reduced_mma, 1);
  assert_int_equal(tp_fp8_accum_model_of(10, 0).reduced_mma, 0);
  assert_int_equal(tp_fp8_accum_model_of(8, 0).reduced_mma, 0);
  assert_int_equal(tp_fp8_accum_model_of(9, 0).group, 32);
}

/* Hand-checked magnitudes: 64 products of 1 then 64 of -1, steps of 32. */
static void test_dot_magnitudes(void **state) {
  (void)state;
  double x[128], w[128];
  for (int i = 0; i < 128; ++i) {
    x[i] = 1.0;
    w[i] = i < 64 ? 1.0 : -1.0;
  }
  const tp_fp8_dot d = tp_fp8_dot_ref(x, w, 128, 32);
  assert_true(d.ref == 0.0);
  assert_true(d.sabs == 128.0);
  /* Steps: P before = 0, 32, 64, 64 -> M = max(2P, 1) = 1, 64, 128, 128. */
  assert_true(d.mma_mag == 1.0 + 64.0 + 128.0 + 128.0);
  assert_true(d.mma_mag2 == 1.0 + 64.0 * 64.0 + 2 * 128.0 * 128.0);
  /* A partial last step counts as a step. */
  assert_true(tp_fp8_dot_ref(x, w, 40, 32).mma_mag == 1.0 + 64.0);
}

/* The reduced model's bound holds for a simulated 14-bit MMA accumulator
 * (addends aligned and truncated, the sum truncated; restarted every step,
 * every 4 steps or never), on dots of 512 and 4096 products of mixed or one
 * sign, where the fp32 model's bound does not always. */
static void test_reduced_model_covers_simulation(void **state) {
  (void)state;
  enum { K_MAX = 4096 };
  static double x[K_MAX], w[K_MAX];
  uint64_t seed = 4242;
  const tp_fp8_accum_model hopper = tp_fp8_accum_model_of(9, 0);
  const tp_fp8_accum_model full = tp_fp8_accum_model_of(10, 0);
  long over_fp32 = 0, runs = 0;
  double worst = 0.0;
  for (int trial = 0; trial < 400; ++trial) {
    /* every fourth dot is long; every other one has products of one sign (the
     * accumulator's truncation then biases one way) */
    const int64_t k = trial % 4 == 3 ? K_MAX : 512;
    const int one_sign = trial % 2 == 1;
    for (int64_t i = 0; i < k; ++i) {
      x[i] = tp_fp8_decode(TP_FP8_E4M3, (uint8_t)(rng_next(&seed) & 0x7e)) *
             (!one_sign && (rng_next(&seed) & 1) ? -1.0 : 1.0);
      w[i] = tp_fp8_decode(TP_FP8_E4M3, (uint8_t)(rng_next(&seed) & 0x7e));
    }
    const tp_fp8_dot d = tp_fp8_dot_ref(x, w, k, 32);
    const int restarts[] = {1, 4, 1000000};
    for (size_t r = 0; r < 3; ++r, ++runs) {
      const double err = fabs(simulate_reduced_mma(x, w, k, 32, restarts[r]) - d.ref);
      const double ratio = err / tp_fp8_gemm_tolerance(&hopper, &d, k);
      worst = fmax(worst, ratio);
      over_fp32 += err > tp_fp8_gemm_tolerance(&full, &d, k);
    }
  }
  printf("  14-bit MMA simulation: worst |err|/tol %.3g under the sm_90 model, %ld of %ld over "
         "the fp32 model's tolerance\n",
         worst, over_fp32, runs);
  assert_true(worst <= 1.0);
  assert_true(over_fp32 > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known_encodings),
      cmocka_unit_test(test_decode_values),
      cmocka_unit_test(test_every_code_round_trips),
      cmocka_unit_test(test_tensorwise_rule),
      cmocka_unit_test(test_rowwise_rule),
      cmocka_unit_test(test_block_act_layout),
      cmocka_unit_test(test_block_weight_layout),
      cmocka_unit_test(test_mx_rule_and_layout),
      cmocka_unit_test(test_bf16_input),
      cmocka_unit_test(test_rows_match_code),
      cmocka_unit_test(test_bad_arguments_refused),
      cmocka_unit_test(test_shard_invariance),
      cmocka_unit_test(test_flattening_quantizer_fails),
      cmocka_unit_test(test_shard_rule_refuses_straddling),
      cmocka_unit_test(test_shard_rule_accepts_aligned),
      cmocka_unit_test(test_accum_model_per_device),
      cmocka_unit_test(test_dot_magnitudes),
      cmocka_unit_test(test_reduced_model_covers_simulation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
