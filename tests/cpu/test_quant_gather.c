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
 *
 * Column pieces (tp_scale_gather_cols_shape: the backward's wgrad operand
 * that is sequence-sharded, [S, C] on each rank, enters the GEMM
 * transposed, [C, T], quantized along T): every rank transposes its shard
 * and quantizes it with the amax the rule asks it to agree on (computed as
 * the ranks would, from each piece's local amax), the pieces' bytes and
 * scale buffers are concatenated rank-major, re-placed, and compared bit
 * for bit (padding included) with quantizing the whole's transpose; for
 * every format x TP 2, 4, 8 x C (small and odd, 4096) x S (multiples of
 * the blocks and, where the rule allows, not), E4M3 and E5M2. The pieces
 * back to back are not the whole's bytes (so the re-placement is not
 * vacuous), and planted faults are caught: a byte re-placement one column
 * short, a scale gather one element short per rank (where the whole's
 * scales come from several ranks) and pieces quantized without the
 * agreement. The placement rule's side: fp8-block's transposed split at
 * T = 2112, TP 2 is rejected naming the per-rank share, fp8-row's asks
 * for per-row amax.
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
  tp_quant_args a = {f,    TP_QROLE_ACT, TP_FP8_E4M3, TP_FP32, x,     rows,
                     cols, cols,         NULL,        scales,  agreed};
  a.q = q; /* written through (an initializer's copy reads as const to clang-tidy) */
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

/* ---- column pieces: the wgrad's transposed, sequence-sharded operand ---------------------------
 */

/* malloc that fails the test rather than return NULL (and never asks for 0 bytes). */
static void *col_alloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  assert_non_null(p);
  return p;
}

/* A scrambled 64-bit value of key and seed (two xorshift steps of their mix). */
static uint64_t col_hash(uint64_t key, uint64_t seed) {
  uint64_t st = (key + 1) * 0x9E3779B97F4A7C15ull ^ seed;
  rng_next(&st);
  return rng_next(&st);
}

/* The bf16 bits of v, truncated: any bf16 value serves as test data. */
static uint16_t bf16_bits(float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return (uint16_t)(bits >> 16);
}

/* The source [t, c] in bf16: values in [-1, 1) times 2^m, m in [-4, 4] from a hash of (column,
 * t / 32), so the transpose's rows and its 1x32 and 1x128 blocks along T differ in magnitude
 * (a scale taken from the wrong block or rank shows); the outlier in the last row is the tensor
 * amax and lies in the last rank's shard (tensorwise needs the agreement). */
static uint16_t *col_source(int64_t t, int64_t c, uint64_t seed) {
  uint16_t *x = col_alloc(sizeof(uint16_t) * (size_t)(t * c));
  uint64_t st = seed * 0x9E3779B97F4A7C15ull + 7; /* as fill(): a nonzero xorshift state */
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < c; ++j) {
      const int m = (int)(col_hash((uint64_t)(j * 1000003 + i / 32), seed) % 9) - 4;
      const float u = (float)(rng_next(&st) >> 40) / 16777216.0f;
      x[i * c + j] = bf16_bits((2.0f * u - 1.0f) * ldexpf(1.0f, m));
    }
  x[(t - 1) * c] = bf16_bits(300.0f);
  return x;
}

/* [cols, rows] = the transpose of src [rows, cols]: what a rank does to its shard first. */
static uint16_t *transpose_bf16(const uint16_t *src, int64_t rows, int64_t cols) {
  uint16_t *out = col_alloc(sizeof(uint16_t) * (size_t)(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = src[r * cols + c];
  return out;
}

typedef struct col_case {
  tp_quant_format f;
  tp_fp8_type elem;
  int64_t c, s; /* the transpose's rows (the source's columns); each rank's share of T */
  int tp;
} col_case;

/* One case's whole and its gathered pieces, on the host. */
typedef struct col_gather {
  tp_scale_gather g;
  int64_t t;                       /* tp · s */
  uint16_t *pieces;                /* the ranks' transposed shards, [c, s] each, rank-major */
  uint8_t *q_whole, *q_gath;       /* [c, t]; the pieces' bytes as gathered */
  unsigned char *s_whole, *s_gath; /* the whole's scales; the pieces' buffers as gathered */
  float *agreed;                   /* the agreed amax (fp8: 1, fp8-row: c floats), or NULL */
} col_gather;

static tp_quant_args col_args(const col_case *k, const uint16_t *x, int64_t rows, int64_t cols,
                              uint8_t *q, void *scales, const float *agreed) {
  tp_quant_args a = {k->f, TP_QROLE_ACT, k->elem, TP_BF16, x,     rows,
                     cols, cols,         NULL,    scales,  agreed};
  a.q = q; /* written through (an initializer's copy reads as const to clang-tidy) */
  return a;
}

/* Floats the ranks agree on for the transposed pieces: 1 (tensorwise), one per row of the
 * transpose (fp8-row: a row's scale spans every rank's piece of it), else none. */
static int64_t col_amax_count(const col_case *k) {
  return k->f == TP_QFMT_FP8 ? 1 : k->f == TP_QFMT_FP8_ROW ? k->c : 0;
}

/* The agreement as the ranks make it: each piece's local amax, their max (the all-reduce). */
static float *col_agree(const col_case *k, const uint16_t *pieces) {
  const int64_t n = col_amax_count(k), piece = k->c * k->s;
  if (n == 0) return NULL;
  float *agreed = col_alloc(sizeof(float) * (size_t)n),
        *local = col_alloc(sizeof(float) * (size_t)n);
  memset(agreed, 0, sizeof(float) * (size_t)n); /* amax >= 0: 0 is the max's identity */
  for (int r = 0; r < k->tp; ++r) {
    const tp_quant_args a = col_args(k, pieces + r * piece, k->c, k->s, NULL, NULL, NULL);
    assert_int_equal(tp_quant_local_amax_ref(&a, local), TP_OK);
    for (int64_t i = 0; i < n; ++i) agreed[i] = fmaxf(agreed[i], local[i]);
  }
  free(local);
  return agreed;
}

/* Every rank quantizes its transposed piece (with `agreed`, NULL for its own amax) into its slot
 * of the rank-major gathered buffers, as NCCL's all-gather delivers them. */
static void col_quantize_pieces(const col_case *k, const col_gather *cg, const float *agreed,
                                uint8_t *q_gath, unsigned char *s_gath) {
  const int64_t piece = k->c * k->s;
  const size_t shard_bytes = tp_quant_scale_bytes(&cg->g.shard);
  for (int r = 0; r < k->tp; ++r) {
    const tp_quant_args a = col_args(k, cg->pieces + r * piece, k->c, k->s, q_gath + r * piece,
                                     s_gath + (size_t)r * shard_bytes, agreed);
    assert_int_equal(tp_quant_ref(&a), TP_OK);
  }
}

static void col_make(const col_case *k, col_gather *cg) {
  memset(cg, 0, sizeof *cg);
  assert_int_equal(tp_scale_gather_cols_shape(k->f, k->c, k->s, k->tp, &cg->g), TP_OK);
  assert_int_equal(cg->g.by_cols, 1);
  cg->t = k->s * k->tp;
  const size_t n = (size_t)(k->c * cg->t);
  uint16_t *src = col_source(cg->t, k->c, (uint64_t)(k->c * 7919 + cg->t * 31 + k->f));
  cg->pieces = col_alloc(sizeof(uint16_t) * n);
  cg->q_whole = col_alloc(n);
  cg->q_gath = col_alloc(n);
  cg->s_whole = col_alloc(tp_quant_scale_bytes(&cg->g.whole));
  cg->s_gath = col_alloc(tp_scale_gather_bytes(&cg->g));
  /* the whole: its transpose [c, t] quantized along T, no agreement */
  uint16_t *xt = transpose_bf16(src, cg->t, k->c);
  const tp_quant_args w = col_args(k, xt, k->c, cg->t, cg->q_whole, cg->s_whole, NULL);
  assert_int_equal(tp_quant_ref(&w), TP_OK);
  free(xt);
  /* the ranks: shard r is the source's rows r·s .. r·s + s - 1, transposed on its own */
  for (int r = 0; r < k->tp; ++r) {
    uint16_t *p = transpose_bf16(src + r * k->s * k->c, k->s, k->c);
    memcpy(cg->pieces + r * k->c * k->s, p, sizeof(uint16_t) * (size_t)(k->c * k->s));
    free(p);
  }
  free(src);
  cg->agreed = col_agree(k, cg->pieces);
  col_quantize_pieces(k, cg, cg->agreed, cg->q_gath, cg->s_gath);
}

static void col_free(col_gather *cg) {
  free(cg->pieces);
  free(cg->q_whole);
  free(cg->q_gath);
  free(cg->s_whole);
  free(cg->s_gath);
  free(cg->agreed);
}

/* Re-places gathered bytes (pieces of shard_cols columns) and scales (gather g) into poisoned
 * buffers: 0 when both equal the whole's bit for bit, 1 when the bytes differ, 2 the scales. */
static int col_placed_mismatch(const col_case *k, const col_gather *cg, const uint8_t *q_gath,
                               const void *s_gath, int64_t shard_cols, const tp_scale_gather *g) {
  const size_t n = (size_t)(k->c * cg->t), sb = tp_quant_scale_bytes(&cg->g.whole);
  uint8_t *q = col_alloc(n);
  unsigned char *s = col_alloc(sb);
  memset(q, 0xA5, n);
  memset(s, 0xA5, sb);
  tp_quant_replace_columns_ref(q_gath, k->tp, k->c, shard_cols, q);
  tp_quant_replace_gathered_ref(g, s_gath, s);
  const int bad = memcmp(q, cg->q_whole, n) != 0 ? 1 : memcmp(s, cg->s_whole, sb) != 0 ? 2 : 0;
  free(q);
  free(s);
  return bad;
}

/* What the column tests counted. */
typedef struct col_tally {
  int cases, rejected;
  int planted[3], caught[3]; /* byte shift, scale stride, missing agreement */
} col_tally;

static void col_plant(col_tally *t, int kind, int caught) {
  t->planted[kind]++;
  t->caught[kind] += caught != 0;
}

/* The planted faults of one case (each must make the placement differ from the whole). */
static void col_faults(const col_case *k, const col_gather *cg, col_tally *t) {
  /* the byte re-placement one column short per piece: the whole's rows shift */
  col_plant(t, 0, col_placed_mismatch(k, cg, cg->q_gath, cg->s_gath, k->s - 1, &cg->g) == 1);
  /* one element short per rank in the scale gather; it can only show where the whole's scales
   * come from several ranks (tensorwise and fp8-row read rank 0's agreed scales alone) */
  if (cg->g.shard.grid_cols < cg->g.whole.grid_cols) {
    tp_scale_gather off = cg->g;
    off.shard.stored -= 1;
    col_plant(t, 1, col_placed_mismatch(k, cg, cg->q_gath, cg->s_gath, k->s, &off) == 2);
  }
  /* every rank on its own amax: the agreement is what makes the pieces the whole's */
  if (cg->agreed) {
    const size_t n = (size_t)(k->c * cg->t);
    uint8_t *q = col_alloc(n);
    unsigned char *s = col_alloc(tp_scale_gather_bytes(&cg->g));
    col_quantize_pieces(k, cg, NULL, q, s);
    col_plant(t, 2, col_placed_mismatch(k, cg, q, s, k->s, &cg->g) != 0);
    free(q);
    free(s);
  }
}

/* The agreement the placement rule asks for a transposed split ([C, T] along T). */
static tp_amax_agreement col_expected_agreement(tp_quant_format f) {
  return f == TP_QFMT_FP8       ? TP_AMAX_AGREE_TENSOR
         : f == TP_QFMT_FP8_ROW ? TP_AMAX_AGREE_ROWS
                                : TP_AMAX_LOCAL;
}

/* One case: skipped where the rule rejects the split (a block would straddle two ranks, which
 * only the block formats' S can make), else the invariant, the concatenation and the faults. */
static void col_run(const col_case *k, col_tally *t) {
  tp_amax_agreement agreement;
  char reason[400];
  if (tp_quant_split_check(k->f, TP_SHARD_ACT_COLS, k->c, k->s * k->tp, k->tp, "T", &agreement,
                           reason, sizeof reason) != TP_OK) {
    const int64_t block = k->f == TP_QFMT_FP8_BLOCK ? 128 : 32;
    assert_true(k->f == TP_QFMT_FP8_BLOCK || k->f == TP_QFMT_MXFP8);
    assert_true(k->s % block != 0);
    t->rejected++;
    return;
  }
  assert_int_equal(agreement, col_expected_agreement(k->f));
  col_gather cg;
  col_make(k, &cg);
  const int bad = col_placed_mismatch(k, &cg, cg.q_gath, cg.s_gath, k->s, &cg.g);
  if (bad)
    fail_msg("%s %s TP %d, C %lld, S %lld: re-placed %s differ from the whole's transpose "
             "quantized",
             tp_quant_format_name(k->f), tp_fp8_type_name(k->elem), k->tp, (long long)k->c,
             (long long)k->s, bad == 1 ? "bytes" : "scales");
  if (memcmp(cg.q_gath, cg.q_whole, (size_t)(k->c * cg.t)) == 0)
    fail_msg("%s TP %d, C %lld, S %lld: the pieces back to back already are the whole's bytes",
             tp_quant_format_name(k->f), k->tp, (long long)k->c, (long long)k->s);
  col_faults(k, &cg, t);
  col_free(&cg);
  t->cases++;
}

static const int64_t COL_C[] = {3, 37, 130, 4096};
static const int64_t COL_S[] = {3, 96, 128, 256, 384};

static void test_columns_match_whole(void **state) {
  (void)state;
  col_tally t;
  memset(&t, 0, sizeof t);
  for (size_t fi = 0; fi < sizeof FORMATS / sizeof FORMATS[0]; ++fi)
    for (size_t ti = 0; ti < sizeof TP_DEGREES / sizeof TP_DEGREES[0]; ++ti)
      for (size_t ci = 0; ci < sizeof COL_C / sizeof COL_C[0]; ++ci)
        for (size_t si = 0; si < sizeof COL_S / sizeof COL_S[0]; ++si)
          for (int e = 0; e < 2; ++e) {
            /* C = 4096 (an op set's width) at E4M3, S past one 128-block at TP 2 only: the
             * reference is slow, and the rest (E5M2, a gradient's type, too) runs on the
             * small C */
            if (COL_C[ci] == 4096 && (e == TP_FP8_E5M2 || (COL_S[si] > 128 && TP_DEGREES[ti] != 2)))
              continue;
            const col_case k = {FORMATS[fi], (tp_fp8_type)e, COL_C[ci], COL_S[si], TP_DEGREES[ti]};
            col_run(&k, &t);
          }
  const int planted = t.planted[0] + t.planted[1] + t.planted[2];
  const int caught = t.caught[0] + t.caught[1] + t.caught[2];
  printf("  %d column gathers (4 formats x TP 2/4/8 x C 3/37/130 x S 3/96/128/256/384, E4M3 and "
         "E5M2, and C 4096 x S 3/96/128 (and 256/384 at TP 2), E4M3, where the rule accepts the "
         "split; %d rejected) "
         "equal the whole; %d of %d planted faults caught (%d/%d byte shifts, %d/%d scale "
         "strides, %d/%d missing agreements)\n",
         t.cases, t.rejected, caught, planted, t.caught[0], t.planted[0], t.caught[1], t.planted[1],
         t.caught[2], t.planted[2]);
  assert_true(t.cases > 0);
  for (int i = 0; i < 3; ++i) {
    assert_true(t.planted[i] > 0);
    assert_int_equal(t.caught[i], t.planted[i]);
  }
}

/* The placement rule on the wgrad's transposed operand: fp8-block's 1x128 blocks along T need
 * T / TP a multiple of 128 (T = 2112 at TP 2 leaves 1056 per rank), fp8-row agrees per row. */
static void test_transposed_split_rule(void **state) {
  (void)state;
  tp_quant_split sp[TP_QUANT_MAX_SPLITS];
  tp_amax_agreement agreement;
  char reason[400];
  assert_int_equal(tp_quant_op_splits(1, 2112, 1024, 4096, 1, sp), 4);
  const tp_quant_split *xt = &sp[3];
  assert_string_equal(xt->dim, "T of Xᵀ");
  assert_int_equal(xt->layout, TP_SHARD_ACT_COLS);
  assert_int_equal(xt->rows, 4096);
  assert_int_equal(xt->cols, 2112);
  assert_int_equal(tp_quant_split_check(TP_QFMT_FP8_BLOCK, xt->layout, xt->rows, xt->cols, 2,
                                        xt->dim, &agreement, reason, sizeof reason),
                   TP_EUSAGE);
  assert_non_null(strstr(reason, "T of Xᵀ / TP 2 = 1056 per rank"));
  assert_int_equal(tp_quant_split_check(TP_QFMT_FP8_ROW, xt->layout, xt->rows, xt->cols, 2, xt->dim,
                                        &agreement, reason, sizeof reason),
                   TP_OK);
  assert_int_equal(agreement, TP_AMAX_AGREE_ROWS);
  /* mxfp8's 1x32 blocks fit 1056 (33 of them) */
  assert_int_equal(tp_quant_split_check(TP_QFMT_MXFP8, xt->layout, xt->rows, xt->cols, 2, xt->dim,
                                        &agreement, reason, sizeof reason),
                   TP_OK);
  assert_int_equal(agreement, TP_AMAX_LOCAL);
  /* the scatter side's dYᵀ ([N, T]) names itself */
  assert_int_equal(tp_quant_op_splits(0, 2112, 1024, 4096, 1, sp), 4);
  assert_int_equal(tp_quant_split_check(TP_QFMT_FP8_BLOCK, sp[3].layout, sp[3].rows, sp[3].cols, 2,
                                        sp[3].dim, &agreement, reason, sizeof reason),
                   TP_EUSAGE);
  assert_non_null(strstr(reason, "T of dYᵀ / TP 2 = 1056 per rank"));
  /* T = 4096: 2048 per rank, 16 blocks of 128 */
  assert_int_equal(tp_quant_op_splits(1, 4096, 1024, 4096, 1, sp), 4);
  assert_int_equal(tp_quant_split_check(TP_QFMT_FP8_BLOCK, sp[3].layout, sp[3].rows, sp[3].cols, 2,
                                        sp[3].dim, &agreement, reason, sizeof reason),
                   TP_OK);
  assert_int_equal(agreement, TP_AMAX_LOCAL);
  assert_string_equal(reason, "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replace_matches_whole), cmocka_unit_test(test_gathered_offsets_by_hand),
      cmocka_unit_test(test_negative_controls),     cmocka_unit_test(test_columns_match_whole),
      cmocka_unit_test(test_transposed_split_rule),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
