/*
 * tp_quant.h — the low-precision formats of the TP path (issue 15): what a
 * quantized operand is, how its scales are laid out for cuBLASLt, which
 * shard layouts keep quantization shard-local, and the pure-C reference
 * quantizer every device kernel is checked against (tp_quant_ref.c; the
 * device kernels are in tp_quant.cu, declared in tp_quant_device.h).
 *
 * Operands. Both GEMM operands are row-major with K inner: the activation
 * X[T, K] (role ACT, rows are tokens) and the weight W[N, K] (role WEIGHT,
 * rows are output channels). Every format blocks along K, so one code path
 * quantizes both; a format may give the two roles different blocks
 * (fp8-block does).
 *
 * The formats are the rows of TP_QUANT_FORMAT_LIST (below): fp8 (one fp32
 * scale per tensor), fp8-row (one per row), fp8-block (1x128 activation and
 * 128x128 weight blocks, DeepSeek-V3) and mxfp8 (1x32 blocks, E8M0 scales,
 * OCP MX). Each row gives the format's dtype, scale encoding and amax
 * agreement and, per role, the stored scale layout, the block one scale
 * covers and cuBLASLt's scale mode.
 *
 * Blocks at the end of a row or column may be partial (ceil division); the
 * scale then covers the elements present.
 *
 * Gradients (the recipe for the backward): forward operands are E4M3;
 * gradients are E5M2 with the same block granularity as the operand they
 * stand beside, and their scales come from the gradient's own amax (current
 * scaling, no history). `elem` selects the element type for every format.
 *
 * Scale of a block, from amax = max |x| over the block (NaNs ignored):
 *   fp32 scales: s = amax / fmax (fp32 division, round to nearest), fmax =
 *     448 (E4M3) or 57344 (E5M2); s = 1 when that is not > 0 (an all-zero
 *     block, or amax so small that s underflows).
 *   E8M0 scales (the OCP Microscaling Formats v1.0 conversion of a vector
 *     of floats): s = 2^e with e = floor(log2(amax)) - emax_elem, emax_elem
 *     = 8 (E4M3) or 15 (E5M2), the element type's largest normal exponent.
 *     Implemented with two choices the spec leaves open: e is clamped to
 *     the E8M0 range [-127, 127], and amax = 0 (or an fp32-subnormal amax)
 *     gives e = -127. The stored byte is e + 127. With this rule amax / s
 *     lies in [2^emax, 2^(emax+1)), above fmax for its top part: those
 *     elements saturate to fmax, as the spec's conversion does.
 * Element: q = fp8(x / s), x / s in fp32 (one IEEE division, round to
 * nearest even), then rounded to the fp8 type to nearest, ties to even,
 * saturating: |v| >= fmax (infinities too) gives ±fmax (±448 E4M3, ±57344
 * E5M2); the sign of a zero is kept (-0 and negative values that round to
 * zero give 0x80); NaN gives 0x7F. Dequantized: x ≈ value(q) · s.
 *
 * Stored scale layouts (tp_scale_layout: exactly what cuBLASLt reads for the
 * modes named; offsets in elements of the scale type; gr, gc index the
 * logical scale grid of a [rows, cols] operand, grid = ceil(rows /
 * block_rows) x ceil(cols / block_cols)). None depends on the block's size,
 * so a format with another block reuses one:
 *   SCALAR (SCALAR_32F)      1 scale.
 *   OUTER_VEC (OUTER_VEC_32F) rows scales, offset gr.
 *   VEC (VEC128_32F)         1 x B blocks, outer (row) index fastest: offset
 *                            gr + gc · rows, rows · ceil(cols / B) scales.
 *   BLK (BLK128x128_32F)     K-block index fastest, the K-block count padded
 *                            to a multiple of 4: offset gc + gr · ld, ld =
 *                            round_up(ceil(cols / B), 4); grid_rows · ld.
 *   TILED (VEC32_UE8M0)      1 x B blocks in cuBLASLt's tiled 1D block-scaling
 *                            layout: 128 x 4 tiles of 512 scales, tile (gr /
 *                            128, gc / 4) at 512 · ((gr / 128) · col_tiles +
 *                            gc / 4), col_tiles = ceil(grid_cols / 4); inside
 *                            a tile (gr % 32) · 16 + ((gr % 128) / 32) · 4 +
 *                            gc % 4. round_up(rows, 128) · 4 · col_tiles.
 * Padding entries are written as zero bytes. The quantizer writes the layout
 * of the tensor it is given: a shard's scales follow the shard's own layout
 * (so a row shard's VEC128 or VEC32 scales are not a contiguous piece of the
 * whole's; moving shards' scales between ranks must re-place them).
 *
 * THE invariant (the torchao TP fix): quantizing a shard gives bit for bit
 * the data and the logical scale grid of quantizing the whole tensor and then
 * taking that shard — provided tp_quant_shard_check accepts the shape and the
 * caller supplies the agreed amax it asks for. Blocks never cross a row
 * (there is no flattening of rows into blocks).
 */
#ifndef TP_QUANT_H
#define TP_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/tp_error.h"
#include "common/tp_vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Host and device (tp_quant.cu shares the scale rules and offsets). */
#if defined(__CUDACC__)
#define TP_QUANT_FN static inline __host__ __device__
#else
#define TP_QUANT_FN static inline
#endif

/* How a scale grid is stored (the header comment gives each one's offsets). */
typedef enum {
  TP_SCALE_SCALAR = 0, /* one scale */
  TP_SCALE_OUTER_VEC,  /* one per row */
  TP_SCALE_VEC,        /* 1 x B blocks, the row index fastest */
  TP_SCALE_BLK,        /* B x B blocks, the K-block index fastest, padded to 4 */
  TP_SCALE_TILED       /* 1 x B blocks in cuBLASLt's 128 x 4 tiles */
} tp_scale_layout;

/* What a stored scale is: a float, or an E8M0 power of two (one byte). */
typedef enum { TP_SCALE_F32 = 0, TP_SCALE_E8M0 } tp_scale_encoding;

/* Who must agree on an amax before a shard can be quantized like the whole. */
typedef enum {
  TP_AMAX_LOCAL = 0,    /* nothing: every scale block lies inside one shard */
  TP_AMAX_AGREE_TENSOR, /* one float: an all-reduce max of the shards' tensor amax */
  TP_AMAX_AGREE_ROWS /* one float per row: an all-reduce max of the rows' amax (fp8-row, K split) */
} tp_amax_agreement;

/* A block dimension of TP_QUANT_FORMAT_LIST that is the operand's whole dimension. */
enum { TP_QUANT_WHOLE = 0 };

/* The quantized formats, one row each: everything that differs between them.
 *
 *   X(FORMAT, DTYPE, ENCODING, AGREEMENT,
 *     (ACT_LAYOUT, ACT_BLOCK_ROWS, ACT_BLOCK_COLS, ACT_MODE),
 *     (WEIGHT_LAYOUT, WEIGHT_BLOCK_ROWS, WEIGHT_BLOCK_COLS, WEIGHT_MODE))
 *
 * FORMAT: the tp_quant_format value; DTYPE: the fp8 dtype of common/tp_vocab.h
 * that selects it (its name is the format's). ENCODING: tp_scale_encoding.
 * AGREEMENT: what the ranks agree on when a split dimension lies inside one
 * scale block (a TP_QUANT_WHOLE block dimension): the tensor amax, every
 * row's, or nothing (no block dimension is whole: a split that would cut a
 * block is rejected instead). Per role (ACT, WEIGHT), in parentheses (a
 * reader expands them with a macro of four parameters): the stored layout
 * (tp_scale_layout), the block one scale covers (rows x cols, TP_QUANT_WHOLE
 * for a whole dimension) and cuBLASLt's scale mode, CUBLASLT_MATMUL_MATRIX_
 * SCALE_<MODE> (tp_gemm_scaled.c; the name in its messages).
 *
 * The quantizers pick their kernels from the layout and the block (device:
 * SCALAR, OUTER_VEC, 1 x 32, 1 x 64 or 1 x 128 blocks have their own; any
 * other block runs the one-CUDA-block-per-scale-block kernel, and is refused
 * by the fused transpose-quantize of the backward). tp_quant_scale_shape
 * gives a format's shapes from its row. */
#define TP_QUANT_FORMAT_LIST(X)                                                                    \
  X(TP_QFMT_FP8, TP_FP8, TP_SCALE_F32, TP_AMAX_AGREE_TENSOR,                                       \
    (TP_SCALE_SCALAR, TP_QUANT_WHOLE, TP_QUANT_WHOLE, SCALAR_32F),                                 \
    (TP_SCALE_SCALAR, TP_QUANT_WHOLE, TP_QUANT_WHOLE, SCALAR_32F))                                 \
  X(TP_QFMT_FP8_ROW, TP_FP8_ROW, TP_SCALE_F32, TP_AMAX_AGREE_ROWS,                                 \
    (TP_SCALE_OUTER_VEC, 1, TP_QUANT_WHOLE, OUTER_VEC_32F),                                        \
    (TP_SCALE_OUTER_VEC, 1, TP_QUANT_WHOLE, OUTER_VEC_32F))                                        \
  X(TP_QFMT_FP8_BLOCK, TP_FP8_BLOCK, TP_SCALE_F32, TP_AMAX_LOCAL,                                  \
    (TP_SCALE_VEC, 1, 128, VEC128_32F), (TP_SCALE_BLK, 128, 128, BLK128x128_32F))                  \
  X(TP_QFMT_MXFP8, TP_MXFP8, TP_SCALE_E8M0, TP_AMAX_LOCAL, (TP_SCALE_TILED, 1, 32, VEC32_UE8M0),   \
    (TP_SCALE_TILED, 1, 32, VEC32_UE8M0))

#define TP_QUANT_FORMAT_ENUM(format, ...) format,
typedef enum { TP_QUANT_FORMAT_LIST(TP_QUANT_FORMAT_ENUM) TP_QFMT_COUNT } tp_quant_format;

typedef enum { TP_FP8_E4M3 = 0, TP_FP8_E5M2 = 1 } tp_fp8_type;

typedef enum {
  TP_QROLE_ACT = 0,   /* X[T, K] (or a gradient beside it): rows are tokens */
  TP_QROLE_WEIGHT = 1 /* W[N, K]: rows are output channels */
} tp_quant_role;

/* The scales of one [rows, cols] operand (tp_quant_scale_shape). */
typedef struct tp_scale_shape {
  tp_scale_layout layout;
  tp_scale_encoding encoding;
  int64_t rows, cols;             /* the operand */
  int64_t block_rows, block_cols; /* elements one scale covers (a partial last block fewer) */
  int64_t grid_rows, grid_cols;   /* the logical scale grid */
  int64_t ld;                     /* BLK: padded K-block count; TILED: column tiles; else 0 */
  int64_t stored;                 /* elements of the stored buffer, padding included */
  size_t elem_bytes;              /* 4 (fp32) or 1 (E8M0) */
} tp_scale_shape;

/* How a tensor is split over the TP ranks (shard r of TP takes the r-th
 * equal part of the split dimension). */
typedef enum {
  TP_SHARD_ACT_ROWS = 0, /* X[T, K] by rows: sequence-sharded (all-gather side) */
  TP_SHARD_ACT_COLS,     /* X[T, K] along K (reduce-scatter side) */
  TP_SHARD_WEIGHT_COLS,  /* W[N, K] along K (row-parallel weight) */
  TP_SHARD_WEIGHT_ROWS,  /* W[N, K] along N (column-parallel weight) */
  TP_SHARD_COUNT
} tp_shard_layout;

/* One quantization: x (rows x cols, ld elements per stored row, in_dtype
 * TP_BF16 or TP_FP32) into q (rows x cols bytes, contiguous) and scales (the
 * layout of tp_quant_scale_shape(format, role, rows, cols)). agreed_amax,
 * when not NULL, replaces the amax the quantizer would find itself: 1 float
 * for fp8, rows floats for fp8-row (the agreement tp_quant_shard_check asks
 * for); other formats take NULL. Host pointers for the reference, device
 * pointers for tp_quant_enqueue. */
typedef struct tp_quant_args {
  tp_quant_format format;
  tp_quant_role role;
  tp_fp8_type elem;
  tp_dtype in_dtype;
  const void *x;
  int64_t rows, cols, ld;
  uint8_t *q;
  void *scales;
  const float *agreed_amax;
} tp_quant_args;

/* ---- names ------------------------------------------------------------------------------------
 */

const char *tp_quant_format_name(tp_quant_format f); /* "fp8", "fp8-row", "fp8-block", "mxfp8" */
const char *tp_fp8_type_name(tp_fp8_type t);         /* "e4m3", "e5m2" */
const char *tp_quant_role_name(tp_quant_role r);     /* "activation", "weight" */
const char *tp_shard_layout_name(tp_shard_layout l); /* e.g. "activation rows" */
/* cuBLASLt's scale mode of the format's role, e.g. "VEC128_32F" ("?" for an unknown format). */
const char *tp_quant_scale_mode_name(tp_quant_format f, tp_quant_role role);

/* The format of an fp8 dtype of the matrix (common/tp_vocab.h): its row's
 * DTYPE. TP_EINTERNAL for bf16, fp32 or another value. */
TP_MUST_CHECK tp_rc tp_quant_format_of(tp_dtype dt, tp_quant_format *out);

/* The row's AGREEMENT: what a split dimension inside a scale block makes the
 * ranks agree on (TP_AMAX_LOCAL for an unknown format). */
tp_amax_agreement tp_quant_format_agreement(tp_quant_format f);

/* The role a shard layout splits (ACT or WEIGHT) and whether it splits rows. */
tp_quant_role tp_shard_layout_role(tp_shard_layout l);
int tp_shard_layout_splits_rows(tp_shard_layout l);

/* ---- scale rules (host and device) ------------------------------------------------------------
 */

TP_QUANT_FN float tp_fp8_max(tp_fp8_type t) { return t == TP_FP8_E4M3 ? 448.0f : 57344.0f; }
TP_QUANT_FN int tp_fp8_emax(tp_fp8_type t) { return t == TP_FP8_E4M3 ? 8 : 15; }

/* fp32 scale of a block from its amax (see the header comment). */
TP_QUANT_FN float tp_quant_scale_f32(tp_fp8_type t, float amax) {
#if defined(__CUDA_ARCH__)
  float s = __fdiv_rn(amax, tp_fp8_max(t));
#else
  float s = amax / tp_fp8_max(t);
#endif
  return s > 0.0f ? s : 1.0f;
}

/* E8M0 byte of a block from its amax: e + 127, e = floor(log2(amax)) - emax,
 * clamped to [-127, 127]. */
TP_QUANT_FN uint8_t tp_quant_scale_e8m0(tp_fp8_type t, float amax) {
  uint32_t bits;
  memcpy(&bits, &amax, sizeof bits);
  int field = (int)((bits >> 23) & 0xffu);
  if (field == 0) return 0; /* zero or fp32-subnormal: floor(log2) <= -127 */
  int e = field - 127 - tp_fp8_emax(t);
  if (e < -127) e = -127;
  if (e > 127) e = 127;
  return (uint8_t)(e + 127);
}

/* The power of two an E8M0 byte stands for (0xFF is NaN). */
TP_QUANT_FN float tp_e8m0_value(uint8_t byte) {
  uint32_t bits = byte == 0 ? 0x00400000u : byte == 0xffu ? 0x7fc00000u : (uint32_t)byte << 23;
  float v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

/* Offset, in scale elements, of logical scale (gr, gc) in the stored buffer. */
TP_QUANT_FN int64_t tp_scale_offset(const tp_scale_shape *s, int64_t gr, int64_t gc) {
  switch (s->layout) {
  case TP_SCALE_SCALAR: return 0;
  case TP_SCALE_OUTER_VEC: return gr;
  case TP_SCALE_VEC: return gr + gc * s->rows;
  case TP_SCALE_BLK: return gc + gr * s->ld;
  case TP_SCALE_TILED:
    return 512 * ((gr / 128) * s->ld + gc / 4) + (gr % 32) * 16 + ((gr % 128) / 32) * 4 + gc % 4;
  }
  return 0;
}

/* ---- shapes and the shard rule (tp_quant_ref.c) -----------------------------------------------
 */

/* The scales of a [rows, cols] operand of this format and role. TP_EINTERNAL
 * for an unknown format or role or an empty dimension. */
TP_MUST_CHECK tp_rc tp_quant_scale_shape(tp_quant_format f, tp_quant_role role, int64_t rows,
                                         int64_t cols, tp_scale_shape *out);

/* Bytes of the stored scale buffer. */
size_t tp_quant_scale_bytes(const tp_scale_shape *s);

/* The placement rule: whether a [rows, cols] tensor split over tp ranks by
 * `layout` can be quantized shard by shard and give the whole's quantization
 * bit for bit. TP_OK, with *agreement (may be NULL) saying what the ranks
 * must agree on first: fp8 (tensorwise) always needs the tensor amax
 * (TP_AMAX_AGREE_TENSOR; tp > 1), fp8-row split along K needs every row's
 * amax (TP_AMAX_AGREE_ROWS), the rest nothing. TP_EUSAGE when the split
 * dimension is not divisible by tp or its shard is not a multiple of the
 * scale block along it (a block would straddle two ranks); the reason,
 * written to reason (cap bytes, may be NULL) and recorded as the last error,
 * names the format, the dimension, the block and the shard size. */
TP_MUST_CHECK tp_rc tp_quant_shard_check(tp_quant_format f, tp_shard_layout layout, int64_t rows,
                                         int64_t cols, int tp, tp_amax_agreement *agreement,
                                         char *reason, size_t cap);

/* One quantized tensor of a TP projection, whole, and how the op splits it. */
typedef struct tp_quant_split {
  const char *what; /* e.g. "X transposed, along T for the wgrad" */
  const char *dim;  /* the split dimension's name in a rejection; NULL: the layout's */
  tp_shard_layout layout;
  int64_t rows, cols;
} tp_quant_split;
enum { TP_QUANT_MAX_SPLITS = 4 };
/* The tensors a projection of T tokens, N outputs and K inputs quantizes,
 * split as its side splits them at TP > 1 (gathers: the all-gather side,
 * column-parallel; else the reduce-scatter side): X and W, then with the
 * backward dY (along N, the dgrad's contraction) and the wgrad's
 * sequence-sharded operand transposed ([C, T] along T: Xᵀ on the all-gather
 * side, dYᵀ on the other). The other wgrad operand holds every token on its
 * rank and is local. Returns the count (2, or 4 with backward). */
int tp_quant_op_splits(int gathers, int64_t tokens, int64_t n, int64_t k, int backward,
                       tp_quant_split *out);
/* tp_quant_shard_check with the split dimension named dim_name in the
 * reason (NULL: the layout's own name). */
TP_MUST_CHECK tp_rc tp_quant_split_check(tp_quant_format f, tp_shard_layout layout, int64_t rows,
                                         int64_t cols, int tp, const char *dim_name,
                                         tp_amax_agreement *agreement, char *reason, size_t cap);
/* ---- gathered shards' scales (fp8 communication) ----------------------------------------------
 *
 * An all-gather of row shards (TP_SHARD_ACT_ROWS: sequence-sharded
 * activations, tp equal shards of shard_rows rows) of quantized data and
 * their scales, as NCCL delivers it: every rank's buffer back to back,
 * rank-major. The data needs nothing more (the shards' rows back to back
 * are the whole's rows). The scales do: the gathered buffer is tp stored
 * shard buffers of the shard's own layout, and the whole's layout is not
 * their concatenation (VEC128: gr + gc · rows, with rows the WHOLE's;
 * VEC32: 128-row tiles, a shard's padded to 128 rows; SCALAR: one float,
 * the same on every rank after the amax agreement). OUTER_VEC is the one
 * layout whose gathered buffer is the whole's already. The re-placement
 * (tp_quant_replace_gathered_ref; the device kernel in tp_quant_device.h)
 * writes every logical scale of the whole from its rank's shard buffer and
 * zeroes the whole's padding, so its bytes equal quantizing the whole. */
typedef struct tp_scale_gather {
  tp_scale_shape shard; /* one rank's [shard_rows, cols] scales (by_cols: [rows, shard_cols]) */
  tp_scale_shape
      whole; /* the gathered [tp · shard_rows, cols] operand's ([rows, tp · shard_cols]) */
  int tp;
  int by_cols;         /* 0: row shards; 1: column shards (tp_scale_gather_cols_shape) */
  int64_t rank_stride; /* scale elements from one rank's buffer to the next; 0: shard.stored */
} tp_scale_gather;

/* The shapes of a gather of tp row shards of an ACT operand [shard_rows,
 * cols] in format f. TP_EINTERNAL for an unknown format, tp < 1 or an empty
 * dimension. */
TP_MUST_CHECK tp_rc tp_scale_gather_shape(tp_quant_format f, int64_t shard_rows, int64_t cols,
                                          int tp, tp_scale_gather *out);

/* Column shards: the backward's wgrad contracts over T, so a sequence-
 * sharded tensor [S, C] enters it transposed, [C, T], quantized along T:
 * every rank transposes and quantizes its own [C, S] piece (the columns
 * r·S .. r·S + S - 1 of the whole's transpose) and the pieces are gathered
 * rank-major. Neither their bytes nor their scales are the whole's layout
 * back to back: the bytes are re-placed by tp_quant_replace_columns_ref (a
 * strided copy), the scales by tp_quant_replace_gathered_ref with the shapes
 * made here (logical scale (gr, gc) from rank gc / shard grid columns; one
 * scale per row or per tensor, agreed first, from rank 0). TP_EINTERNAL for
 * an unknown format, tp < 1 or an empty dimension. */
TP_MUST_CHECK tp_rc tp_scale_gather_cols_shape(tp_quant_format f, int64_t rows, int64_t shard_cols,
                                               int tp, tp_scale_gather *out);
/* whole [rows, tp · shard_cols] (bytes) from the rank-major gathered pieces
 * (tp of [rows, shard_cols], back to back). */
void tp_quant_replace_columns_ref(const uint8_t *gathered, int tp, int64_t rows, int64_t shard_cols,
                                  uint8_t *whole);
/* Bytes of the gathered buffer (tp shard buffers back to back, rank_stride apart). */
size_t tp_scale_gather_bytes(const tp_scale_gather *g);

/* Offset, in scale elements, inside the gathered buffer of the whole's
 * logical scale (gr, gc): rank gr / shard grid rows (by_cols: gc / shard
 * grid columns), that rank's own layout.
 * Tensorwise: rank 0's float (every rank holds the agreed one). */
TP_QUANT_FN int64_t tp_scale_gathered_offset(const tp_scale_gather *g, int64_t gr, int64_t gc) {
  if (g->shard.layout == TP_SCALE_SCALAR) return 0;
  const int64_t stride = g->rank_stride ? g->rank_stride : g->shard.stored;
  if (g->by_cols) {
    const int64_t per_col = g->shard.grid_cols;
    return (gc / per_col) * stride + tp_scale_offset(&g->shard, gr, gc % per_col);
  }
  const int64_t per = g->shard.grid_rows;
  return (gr / per) * stride + tp_scale_offset(&g->shard, gr % per, gc);
}

/* The whole's stored scales (padding zeroed) from the gathered buffer. */
void tp_quant_replace_gathered_ref(const tp_scale_gather *g, const void *gathered, void *whole);

/* ---- the reference quantizer (tp_quant_ref.c) -------------------------------------------------
 */

/* args' fields are consistent (known format, role, element and input types,
 * positive dimensions, ld >= cols, buffers present, agreed_amax only for a
 * format with an agreement: fp8 and fp8-row); TP_EINTERNAL with what is wrong
 * otherwise. */
TP_MUST_CHECK tp_rc tp_quant_args_check(const tp_quant_args *a);

/* fp32 to fp8, round to nearest even, saturating (see the header comment). */
uint8_t tp_fp8_encode(tp_fp8_type t, float v);
/* The exact value of an fp8 byte (E5M2 0x7C is +inf; NaN codes give NaN). */
float tp_fp8_decode(tp_fp8_type t, uint8_t byte);

/* The amax the ranks would agree on, from this tensor alone: for fp8 one
 * float (max |x|), for fp8-row one per row (the row's AGREEMENT). Only a->x
 * is read (q and scales may be NULL). TP_EINTERNAL for formats without one. */
TP_MUST_CHECK tp_rc tp_quant_local_amax_ref(const tp_quant_args *a, float *amax);

/* Quantizes a->x into a->q and a->scales (padding zeroed). */
TP_MUST_CHECK tp_rc tp_quant_ref(const tp_quant_args *a);

/* The exact dequantized values value(q) · s of a->q and a->scales, as
 * doubles, rows x cols contiguous (a->x is not read). */
TP_MUST_CHECK tp_rc tp_quant_dequant_ref(const tp_quant_args *a, double *out);

/* Logical scale (gr, gc) of a stored buffer as a float (E8M0 decoded). */
float tp_quant_scale_at(const tp_scale_shape *s, const void *scales, int64_t gr, int64_t gc);

/* ---- the scaled GEMM's accuracy (tp_quant_ref.c) -----------------------------------------------
 *
 * How far a scaled-FP8 GEMM's bf16 output may lie from the float64 product
 * of the DEQUANTIZED operands (quantization error is not counted: both sides
 * see the same fp8 values and scales). The products of two fp8 values are
 * exact; what differs is how they are summed, and that depends on the GPU:
 *
 * - Reduced-precision MMA (sm_89, sm_90): the FP8 tensor-core MMA keeps only
 *   about 14 significant bits in its own accumulator (measured on Hopper and
 *   reported with DeepSeek-V3's FP8 recipe), and cuBLASLt with fast
 *   accumulation off (tp_gemm_scaled sets it off) promotes the MMA's partial
 *   sums into fp32 at intervals it does not document. Modelled: each MMA
 *   k-step adds `group` products to the MMA accumulator, aligning its
 *   group + 1 addends to the largest magnitude M_j among them and cutting
 *   each to 14 bits (less than 2^-13 M_j each), then cutting the sum once
 *   more (less than 2^-13 of the accumulator). M_j <= max(2 P_{j-1},
 *   pmax_j), P the largest |partial sum| at a step boundary so far, pmax_j
 *   the largest |product| of step j (the factor 2 covers an accumulator
 *   restarted at any step boundary by a promotion or a 128-block: a partial
 *   sum since then is a difference of two partial sums).
 *   A worst-case sum of those cuts, (2 group + 2) 2^-13 sum_j M_j, exceeds
 *   |ref| itself from k of a few thousand on (it assumes every cut of every
 *   addend has the same sign), so the addends' cuts are bounded as
 *   independent errors of either sign, mean zero (the products' signs vary),
 *   each within 2^-13 M_j: by Hoeffding's inequality their sum exceeds
 *   8 2^-13 sqrt((group + 1) sum_j M_j^2) with probability below 1e-13 per
 *   element (the probabilistic rounding-error analysis of Higham and Mary),
 *   while the accumulator's own cut, which truncation biases one way, keeps
 *   its worst case: 2^-13 sum_j M_j. On random data the bound is 5 % of
 *   |ref| at k = 512, 24 % at 8192, 70 % at 28672: it catches non-finite
 *   and grossly wrong outputs (a misplaced or doubled scale) at every k,
 *   small ones only at small k; the recorded ||err|| / ||ref|| shows the
 *   error actually made.
 * - Full fp32 accumulation (every other GPU, until measured otherwise): no
 *   MMA term.
 * Both: the fp32 summation of the promoted partials and the application of
 *   the two scales, (k + 2) 2^-24 S with S = sum |x_p w_p| (Higham's gamma
 *   bound for any summation order); then D's rounding to bf16, 2^-8 of the
 *   value. tol = 2^-8 (|ref| + acc) + acc, acc = the sum of the terms above. */

typedef struct tp_fp8_accum_model {
  int reduced_mma; /* 1: the MMA accumulator keeps ~14 bits (sm_89, sm_90) */
  int group;       /* products per MMA k-step (32 for 8-bit operands) */
} tp_fp8_accum_model;

/* The model of a device of compute capability major.minor. */
tp_fp8_accum_model tp_fp8_accum_model_of(int major, int minor);

/* One output element's float64 reference and the magnitudes its bound needs. */
typedef struct tp_fp8_dot {
  double ref;      /* sum_p x_p w_p */
  double sabs;     /* sum_p |x_p w_p| */
  double mma_mag;  /* sum over k-steps of M_j (above); 0 with group < 1 */
  double mma_mag2; /* sum over k-steps of M_j^2 */
} tp_fp8_dot;

/* The dot product of x[0..k) and w[0..k) (dequantized values) in k order,
 * with steps of `group` products. */
tp_fp8_dot tp_fp8_dot_ref(const double *x, const double *w, int64_t k, int group);

/* The tolerance of one element under model m (above). */
double tp_fp8_gemm_tolerance(const tp_fp8_accum_model *m, const tp_fp8_dot *d, int64_t k);

#ifdef __cplusplus
}
#endif

#endif /* TP_QUANT_H */
