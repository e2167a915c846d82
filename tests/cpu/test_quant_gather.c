/*
 * test_quant_gather.c — the re-placement of gathered shards' scales
 * (kernels/tp_quant.h, tp_scale_gather): for every format x TP 2, 4, 8 x
 * shard shapes (row counts below, at and above a 128-row tile, odd ones;
 * column counts with partial 32- and 128-blocks), each rank's shard is
 * quantized by the reference (tensorwise with the agreed amax, the
 * whole's), the shards' data and stored scale buffers are concatenated
 * rank-major as NCCL's all-gather delivers them, the scales re-placed, and
 * data and scales (padding bytes included) compared bit for bit with
 * quantizing the whole. Also: the gathered offsets of chosen entries
 * written out by hand (VEC128's gr + gc · rows of the WHOLE, VEC32's tile
 * of a padded shard), OUTER_VEC's identity, and negative controls (a
 * concatenation without re-placement, and an off-by-one in the rank of a
 * row, both fail the comparison where the layout needs re-placing).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/tp_quant.h"

static const int TP_DEGREES[] = {2, 4, 8};
static const int64_t SHARD_ROWS[] = {1, 3, 64, 128, 130, 200};
static const int64_t COLS[] = {32, 96, 256, 320};

static uint64_t rng_next(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

/* Random floats in [-1, 1) times 2^((row % 5) - 2), one outlier row per call. */
static void fill(float *x, int64_t rows, int64_t cols, uint64_t seed) {
  uint64_t st = seed * 0x9E3779B97F4A7C15ull + 7;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float u = (float)(rng_next(&st) >> 40) / 16777216.0f;
      x[r * cols + c] = (2.0f * u - 1.0f) * (float)(1 << (r % 5)) / 4.0f;
    }
  x[(rows - 1) * cols] = 300.0f; /* the tensor's amax in the last rank's shard */
}

/* One quantization by the reference (ACT, E4M3, fp32 in). */
static void quantize(tp_quant_format f, const float *x, int64_t rows, int64_t cols,
                     const float *agreed, uint8_t *q, void *scales) {
  const tp_quant_args a = {f,    TP_QROLE_ACT, TP_FP8_E4M3, TP_FP32, x,     rows,
                           cols, cols,         q,           scales,  agreed};
  assert_int_equal(tp_quant_ref(&a), TP_OK);
}

typedef struct gather_case {
  tp_quant_format f;
  int64_t shard_rows, cols;
  int tp;
} gather_case;

typedef struct gathered {
  tp_scale_gather g;
  uint8_t *q_whole, *q_gathered;
  unsigned char *s_whole, *s_gathered, *s_placed;
} gathered;

/* Quantizes the whole and each shard, and concatenates the shards as an all-gather would. */
static void make_gathered(const gather_case *c, gathered *out) {
  const int64_t rows = c->shard_rows * c->tp, cols = c->cols;
  assert_int_equal(tp_scale_gather_shape(c->f, c->shard_rows, cols, c->tp, &out->g), TP_OK);
  float *x = malloc(sizeof(float) * (size_t)(rows * cols));
  out->q_whole = malloc((size_t)(rows * cols));
  out->q_gathered = malloc((size_t)(rows * cols));
  const size_t whole_bytes = tp_quant_scale_bytes(&out->g.whole);
  const size_t shard_bytes = tp_quant_scale_bytes(&out->g.shard);
  out->s_whole = malloc(whole_bytes);
  out->s_placed = malloc(whole_bytes);
  out->s_gathered = malloc(tp_scale_gather_bytes(&out->g));
  assert_non_null(x);
  assert_int_equal(tp_scale_gather_bytes(&out->g), shard_bytes * (size_t)c->tp);
  fill(x, rows, cols, (uint64_t)(rows * 131 + cols + c->f));
  quantize(c->f, x, rows, cols, NULL, out->q_whole, out->s_whole);
  float amax = 0.0f; /* tensorwise: the agreement every rank makes first */
  if (c->f == TP_QFMT_FP8) {
    const tp_quant_args a = {c->f, TP_QROLE_ACT, TP_FP8_E4M3, TP_FP32, x,   rows,
                             cols, cols,         NULL,        NULL,    NULL};
    assert_int_equal(tp_quant_local_amax_ref(&a, &amax), TP_OK);
  }
  for (int r = 0; r < c->tp; ++r) {
    const size_t row0 = (size_t)(r * c->shard_rows);
    quantize(c->f, x + row0 * (size_t)cols, c->shard_rows, cols, c->f == TP_QFMT_FP8 ? &amax : NULL,
             out->q_gathered + row0 * (size_t)cols, out->s_gathered + (size_t)r * shard_bytes);
  }
  free(x);
}

static void free_gathered(gathered *g) {
  free(g->q_whole);
  free(g->q_gathered);
  free(g->s_whole);
  free(g->s_gathered);
  free(g->s_placed);
}

static const tp_quant_format FORMATS[] = {TP_QFMT_FP8, TP_QFMT_FP8_ROW, TP_QFMT_FP8_BLOCK,
                                          TP_QFMT_MXFP8};

static void test_replace_matches_whole(void **state) {
  (void)state;
  int cases = 0;
  for (size_t fi = 0; fi < sizeof FORMATS / sizeof FORMATS[0]; ++fi)
    for (size_t ti = 0; ti < sizeof TP_DEGREES / sizeof TP_DEGREES[0]; ++ti)
      for (size_t ri = 0; ri < sizeof SHARD_ROWS / sizeof SHARD_ROWS[0]; ++ri)
        for (size_t ci = 0; ci < sizeof COLS / sizeof COLS[0]; ++ci) {
          const gather_case c = {FORMATS[fi], SHARD_ROWS[ri], COLS[ci], TP_DEGREES[ti]};
          gathered g;
          make_gathered(&c, &g);
          const size_t rows = (size_t)(c.shard_rows * c.tp);
          if (memcmp(g.q_whole, g.q_gathered, rows * (size_t)c.cols) != 0)
            fail_msg("%s TP %d shard %lldx%lld: gathered data differs from the whole's",
                     tp_quant_format_name(c.f), c.tp, (long long)c.shard_rows, (long long)c.cols);
          tp_quant_replace_gathered_ref(&g.g, g.s_gathered, g.s_placed);
          if (memcmp(g.s_whole, g.s_placed, tp_quant_scale_bytes(&g.g.whole)) != 0)
            fail_msg("%s TP %d shard %lldx%lld: re-placed scales differ from the whole's",
                     tp_quant_format_name(c.f), c.tp, (long long)c.shard_rows, (long long)c.cols);
          free_gathered(&g);
          ++cases;
        }
  printf("  %d gathers (4 formats x TP 2/4/8 x 6 shard row counts x 4 column counts) re-placed "
         "bit for bit\n",
         cases);
  assert_int_equal(cases, 4 * 3 * 6 * 4);
}

/* Hand-written offsets: where the whole's scale (gr, gc) sits in the gathered buffer. */
static void test_gathered_offsets_by_hand(void **state) {
  (void)state;
  tp_scale_gather g;
  /* fp8-block, shard [3, 256] at TP 4: each shard stores 3 x 2 floats, gr + gc * 3 */
  assert_int_equal(tp_scale_gather_shape(TP_QFMT_FP8_BLOCK, 3, 256, 4, &g), TP_OK);
  assert_int_equal(g.shard.stored, 6);
  assert_int_equal(tp_scale_gathered_offset(&g, 0, 0), 0);
  assert_int_equal(tp_scale_gathered_offset(&g, 4, 1), 6 + 1 + 1 * 3); /* rank 1, row 1 */
  assert_int_equal(tp_scale_gathered_offset(&g, 11, 1), 18 + 2 + 3);   /* rank 3, row 2 */
  assert_int_equal(tp_scale_offset(&g.whole, 4, 1), 4 + 1 * 12);       /* the whole's: rows 12 */
  /* mxfp8, shard [3, 64] at TP 2: a shard pads to one 128-row tile of 512 bytes */
  assert_int_equal(tp_scale_gather_shape(TP_QFMT_MXFP8, 3, 64, 2, &g), TP_OK);
  assert_int_equal(g.shard.stored, 512);
  assert_int_equal(tp_scale_gathered_offset(&g, 4, 1), 512 + 1 * 16 + 1); /* rank 1, row 1 */
  assert_int_equal(tp_scale_offset(&g.whole, 4, 1), 4 * 16 + 1);
  /* fp8-row: the gathered buffer is the whole's */
  assert_int_equal(tp_scale_gather_shape(TP_QFMT_FP8_ROW, 5, 64, 8, &g), TP_OK);
  for (int64_t gr = 0; gr < 40; ++gr)
    assert_int_equal(tp_scale_gathered_offset(&g, gr, 0), tp_scale_offset(&g.whole, gr, 0));
  /* tensorwise: rank 0's float */
  assert_int_equal(tp_scale_gather_shape(TP_QFMT_FP8, 5, 64, 8, &g), TP_OK);
  assert_int_equal(tp_scale_gather_bytes(&g), 8 * sizeof(float));
  assert_int_equal(tp_scale_gathered_offset(&g, 0, 0), 0);
  assert_int_equal(tp_scale_gather_shape(TP_QFMT_FP8, 5, 64, 0, &g), TP_EINTERNAL);
}

/* A wrong placement fails the comparison: the plain concatenation (no
 * re-placement), and rows taken from the next rank's buffer one row early. */
static void test_negative_controls(void **state) {
  (void)state;
  const gather_case cases[] = {{TP_QFMT_FP8_BLOCK, 64, 256, 2}, {TP_QFMT_MXFP8, 64, 96, 4}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    gathered g;
    make_gathered(&cases[i], &g);
    const size_t whole_bytes = tp_quant_scale_bytes(&g.g.whole);
    const size_t n =
        tp_scale_gather_bytes(&g.g) < whole_bytes ? tp_scale_gather_bytes(&g.g) : whole_bytes;
    memset(g.s_placed, 0, whole_bytes);
    memcpy(g.s_placed, g.s_gathered, n);
    assert_true(memcmp(g.s_whole, g.s_placed, whole_bytes) != 0);
    /* off by one: the shard boundary moved one row */
    tp_scale_gather shifted = g.g;
    shifted.shard.grid_rows -= 1;
    const tp_scale_shape *w = &g.g.whole;
    memset(g.s_placed, 0, whole_bytes);
    for (int64_t gr = 0; gr < w->grid_rows; ++gr)
      for (int64_t gc = 0; gc < w->grid_cols; ++gc) {
        int64_t src = tp_scale_gathered_offset(&shifted, gr, gc);
        if (src < 0 || (size_t)src * w->elem_bytes >= tp_scale_gather_bytes(&g.g)) src = 0;
        memcpy(g.s_placed + (size_t)tp_scale_offset(w, gr, gc) * w->elem_bytes,
               g.s_gathered + (size_t)src * w->elem_bytes, w->elem_bytes);
      }
    assert_true(memcmp(g.s_whole, g.s_placed, whole_bytes) != 0);
    free_gathered(&g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replace_matches_whole),
      cmocka_unit_test(test_gathered_offsets_by_hand),
      cmocka_unit_test(test_negative_controls),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
