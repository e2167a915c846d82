/*
 * tp_quant_ref.c — the pure-C side of tp_quant.h: names, scale shapes, the
 * shard rule, and the reference quantizer (fp32/bf16 to E4M3/E5M2 plus
 * scales, for the four formats) with its dequantizer. No CUDA: the CPU tests
 * and the matrix's placement rules link it, and the device kernels of
 * tp_quant.cu are checked against it bit for bit.
 *
 * The fp8 rounding is written from the formats' definitions in integer
 * arithmetic on the fp32 bits (round to nearest, ties to even, saturating),
 * so it does not depend on the host's floating-point environment; the
 * device kernels use the hardware conversion instead, which makes their
 * agreement a real check of this code.
 */
#include "kernels/tp_quant.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- the formats' rows -----------------------------------------------------------------------
 */

/* How one role's scales are laid out (a row of TP_QUANT_FORMAT_LIST, per role). */
typedef struct role_scales {
  tp_scale_layout layout;
  int64_t block_rows, block_cols; /* TP_QUANT_WHOLE: the operand's whole dimension */
  const char *mode_name;          /* cuBLASLt's scale mode */
} role_scales;

typedef struct format_row {
  tp_dtype dtype;
  tp_scale_encoding encoding;
  tp_amax_agreement agreement;
  role_scales role[2]; /* indexed by tp_quant_role */
} format_row;

#define ROLE_SCALES(layout, block_rows, block_cols, mode)                                          \
  { layout, block_rows, block_cols, #mode }
#define FORMAT_ROW(format, dtype, encoding, agreement, act, weight)                                \
  [format] = {dtype, encoding, agreement, {ROLE_SCALES act, ROLE_SCALES weight}},
static const format_row format_rows[TP_QFMT_COUNT] = {TP_QUANT_FORMAT_LIST(FORMAT_ROW)};
#undef FORMAT_ROW
#undef ROLE_SCALES

/* a term of the sum below: parentheses around it would break the sum */
#define COUNT_FP8_DTYPE(value, name, class)                                                        \
  +TP_VOCAB_FP8_##class /* NOLINT(bugprone-macro-parentheses) */
_Static_assert(0 TP_DTYPE_LIST(COUNT_FP8_DTYPE) == TP_QFMT_COUNT,
               "every fp8 dtype of TP_DTYPE_LIST has its row in TP_QUANT_FORMAT_LIST");
#undef COUNT_FP8_DTYPE

/* The row of f; NULL for an unknown format. */
static const format_row *row_of(tp_quant_format f) {
  return (int)f >= 0 && f < TP_QFMT_COUNT ? &format_rows[f] : NULL;
}

/* ---- names ------------------------------------------------------------------------------------
 */

const char *tp_quant_format_name(tp_quant_format f) {
  const format_row *row = row_of(f);
  return row ? tp_dtype_name(row->dtype) : "?";
}

const char *tp_fp8_type_name(tp_fp8_type t) { return t == TP_FP8_E4M3 ? "e4m3" : "e5m2"; }

const char *tp_quant_role_name(tp_quant_role r) {
  return r == TP_QROLE_ACT ? "activation" : "weight";
}

const char *tp_shard_layout_name(tp_shard_layout l) {
  switch (l) {
  case TP_SHARD_ACT_ROWS: return "activation rows";
  case TP_SHARD_ACT_COLS: return "activation K";
  case TP_SHARD_WEIGHT_COLS: return "weight K";
  case TP_SHARD_WEIGHT_ROWS: return "weight N";
  case TP_SHARD_COUNT: break;
  }
  return "?";
}

const char *tp_quant_scale_mode_name(tp_quant_format f, tp_quant_role role) {
  const format_row *row = row_of(f);
  if (!row || (role != TP_QROLE_ACT && role != TP_QROLE_WEIGHT)) return "?";
  return row->role[role].mode_name;
}

tp_rc tp_quant_format_of(tp_dtype dt, tp_quant_format *out) {
  for (int f = 0; f < TP_QFMT_COUNT; ++f)
    if (format_rows[f].dtype == dt) {
      *out = (tp_quant_format)f;
      return TP_OK;
    }
  return TP_FAIL(TP_EINTERNAL, "dtype %s is not an fp8 format", tp_dtype_name(dt));
}

tp_amax_agreement tp_quant_format_agreement(tp_quant_format f) {
  const format_row *row = row_of(f);
  return row ? row->agreement : TP_AMAX_LOCAL;
}

tp_quant_role tp_shard_layout_role(tp_shard_layout l) {
  return l == TP_SHARD_WEIGHT_COLS || l == TP_SHARD_WEIGHT_ROWS ? TP_QROLE_WEIGHT : TP_QROLE_ACT;
}

int tp_shard_layout_splits_rows(tp_shard_layout l) {
  return l == TP_SHARD_ACT_ROWS || l == TP_SHARD_WEIGHT_ROWS;
}

/* ---- scale shapes -----------------------------------------------------------------------------
 */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

tp_rc tp_quant_scale_shape(tp_quant_format f, tp_quant_role role, int64_t rows, int64_t cols,
                           tp_scale_shape *out) {
  if (rows <= 0 || cols <= 0)
    return TP_FAIL(TP_EINTERNAL, "quantized operand with an empty dimension (%lld x %lld)",
                   (long long)rows, (long long)cols);
  if (role != TP_QROLE_ACT && role != TP_QROLE_WEIGHT)
    return TP_FAIL(TP_EINTERNAL, "unknown quantization role %d", (int)role);
  const format_row *row = row_of(f);
  if (!row) return TP_FAIL(TP_EINTERNAL, "unknown quantization format %d", (int)f);
  const role_scales *r = &row->role[role];
  tp_scale_shape s;
  memset(&s, 0, sizeof s);
  s.rows = rows;
  s.cols = cols;
  s.layout = r->layout;
  s.encoding = row->encoding;
  s.elem_bytes = row->encoding == TP_SCALE_E8M0 ? 1 : 4;
  s.block_rows = r->block_rows == TP_QUANT_WHOLE ? rows : r->block_rows;
  s.block_cols = r->block_cols == TP_QUANT_WHOLE ? cols : r->block_cols;
  s.grid_rows = ceil_div(rows, s.block_rows);
  s.grid_cols = ceil_div(cols, s.block_cols);
  switch (s.layout) {
  case TP_SCALE_BLK:
    s.ld = round_up(s.grid_cols, 4);
    s.stored = s.grid_rows * s.ld;
    break;
  case TP_SCALE_TILED:
    s.ld = ceil_div(s.grid_cols, 4);
    s.stored = round_up(rows, 128) * 4 * s.ld;
    break;
  default: s.stored = s.grid_rows * s.grid_cols; break;
  }
  *out = s;
  return TP_OK;
}

size_t tp_quant_scale_bytes(const tp_scale_shape *s) { return (size_t)s->stored * s->elem_bytes; }

float tp_quant_scale_at(const tp_scale_shape *s, const void *scales, int64_t gr, int64_t gc) {
  int64_t off = tp_scale_offset(s, gr, gc);
  if (s->encoding == TP_SCALE_E8M0) return tp_e8m0_value(((const uint8_t *)scales)[off]);
  return ((const float *)scales)[off];
}

/* ---- gathered shards' scales ------------------------------------------------------------------
 */

tp_rc tp_scale_gather_shape(tp_quant_format f, int64_t shard_rows, int64_t cols, int tp,
                            tp_scale_gather *out) {
  memset(out, 0, sizeof *out);
  if (tp < 1) return TP_FAIL(TP_EINTERNAL, "scale gather over TP %d", tp);
  TP_TRY(tp_quant_scale_shape(f, TP_QROLE_ACT, shard_rows, cols, &out->shard));
  TP_TRY(tp_quant_scale_shape(f, TP_QROLE_ACT, shard_rows * tp, cols, &out->whole));
  out->tp = tp;
  return TP_OK;
}

tp_rc tp_scale_gather_cols_shape(tp_quant_format f, int64_t rows, int64_t shard_cols, int tp,
                                 tp_scale_gather *out) {
  memset(out, 0, sizeof *out);
  if (tp < 1) return TP_FAIL(TP_EINTERNAL, "column scale gather over TP %d", tp);
  TP_TRY(tp_quant_scale_shape(f, TP_QROLE_ACT, rows, shard_cols, &out->shard));
  TP_TRY(tp_quant_scale_shape(f, TP_QROLE_ACT, rows, shard_cols * tp, &out->whole));
  out->tp = tp;
  out->by_cols = 1;
  return TP_OK;
}

void tp_quant_replace_columns_ref(const uint8_t *gathered, int tp, int64_t rows, int64_t shard_cols,
                                  uint8_t *whole) {
  const size_t piece = (size_t)(rows * shard_cols), width = (size_t)shard_cols;
  for (int r = 0; r < tp; ++r)
    for (int64_t i = 0; i < rows; ++i)
      memcpy(whole + (size_t)i * width * (size_t)tp + (size_t)r * width,
             gathered + (size_t)r * piece + (size_t)i * width, width);
}

size_t tp_scale_gather_bytes(const tp_scale_gather *g) {
  if (g->rank_stride) return (size_t)g->tp * (size_t)g->rank_stride * g->shard.elem_bytes;
  return (size_t)g->tp * tp_quant_scale_bytes(&g->shard);
}

void tp_quant_replace_gathered_ref(const tp_scale_gather *g, const void *gathered, void *whole) {
  const tp_scale_shape *w = &g->whole;
  const size_t e = w->elem_bytes;
  memset(whole, 0, tp_quant_scale_bytes(w));
  for (int64_t gr = 0; gr < w->grid_rows; ++gr)
    for (int64_t gc = 0; gc < w->grid_cols; ++gc)
      memcpy((char *)whole + (size_t)tp_scale_offset(w, gr, gc) * e,
             (const char *)gathered + (size_t)tp_scale_gathered_offset(g, gr, gc) * e, e);
}

int tp_quant_op_splits(int gathers, int64_t tokens, int64_t n, int64_t k, int backward,
                       tp_quant_split *out) {
  if (gathers) {
    out[0] = (tp_quant_split){"X", NULL, TP_SHARD_ACT_ROWS, tokens, k};
    out[1] = (tp_quant_split){"W", NULL, TP_SHARD_WEIGHT_ROWS, n, k};
    out[2] = (tp_quant_split){"dY, along N for the dgrad", "N of dY", TP_SHARD_ACT_COLS, tokens, n};
    out[3] = (tp_quant_split){"X transposed, along T for the wgrad", "T of Xᵀ", TP_SHARD_ACT_COLS,
                              k, tokens};
  } else {
    out[0] = (tp_quant_split){"X", NULL, TP_SHARD_ACT_COLS, tokens, k};
    out[1] = (tp_quant_split){"W", NULL, TP_SHARD_WEIGHT_COLS, n, k};
    out[2] = (tp_quant_split){"dY, along N for the dgrad", "T of dY", TP_SHARD_ACT_ROWS, tokens, n};
    out[3] = (tp_quant_split){"dY transposed, along T for the wgrad", "T of dYᵀ", TP_SHARD_ACT_COLS,
                              n, tokens};
  }
  return backward ? 4 : 2;
}

/* ---- the shard rule ---------------------------------------------------------------------------
 */

/* Records the rejection as the last error and copies it to reason. */
static tp_rc shard_reject(char *reason, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static tp_rc shard_reject(char *reason, size_t cap, const char *fmt, ...) {
  char msg[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (reason && cap > 0) snprintf(reason, cap, "%s", msg);
  return TP_FAIL(TP_EUSAGE, "%s", msg);
}

static const char *split_dim_name(tp_shard_layout l) {
  switch (l) {
  case TP_SHARD_ACT_ROWS: return "T (rows of the activation)";
  case TP_SHARD_ACT_COLS: return "K of the activation";
  case TP_SHARD_WEIGHT_COLS: return "K of the weight";
  default: return "N (rows of the weight)";
  }
}

tp_rc tp_quant_shard_check(tp_quant_format f, tp_shard_layout layout, int64_t rows, int64_t cols,
                           int tp, tp_amax_agreement *agreement, char *reason, size_t cap) {
  return tp_quant_split_check(f, layout, rows, cols, tp, NULL, agreement, reason, cap);
}

tp_rc tp_quant_split_check(tp_quant_format f, tp_shard_layout layout, int64_t rows, int64_t cols,
                           int tp, const char *dim_name, tp_amax_agreement *agreement, char *reason,
                           size_t cap) {
  if (agreement) *agreement = TP_AMAX_LOCAL;
  if (reason && cap > 0) reason[0] = '\0';
  if ((int)layout < 0 || layout >= TP_SHARD_COUNT)
    return shard_reject(reason, cap, "unknown shard layout %d", (int)layout);
  if (tp < 1) return shard_reject(reason, cap, "TP %d: the degree must be at least 1", tp);
  tp_scale_shape s;
  if (tp_quant_scale_shape(f, tp_shard_layout_role(layout), rows, cols, &s) != TP_OK)
    return shard_reject(reason, cap, "%s", tp_last_message());
  const int by_rows = tp_shard_layout_splits_rows(layout);
  const int64_t dim = by_rows ? rows : cols, block = by_rows ? s.block_rows : s.block_cols;
  const char *fname = tp_quant_format_name(f),
             *dname = dim_name ? dim_name : split_dim_name(layout);
  if (dim % tp != 0)
    return shard_reject(reason, cap, "%s: %s = %lld is not divisible by TP %d", fname, dname,
                        (long long)dim, tp);
  if (tp == 1) return TP_OK;
  const int64_t shard = dim / tp;
  const role_scales *r = &row_of(f)->role[tp_shard_layout_role(layout)];
  if ((by_rows ? r->block_rows : r->block_cols) == TP_QUANT_WHOLE) {
    /* one scale spans every rank's part: the ranks agree on its amax first */
    if (agreement) *agreement = row_of(f)->agreement;
    return TP_OK;
  }
  if (shard % block != 0)
    return shard_reject(reason, cap,
                        "%s: %s / TP %d = %lld per rank is not a multiple of the %lld-element "
                        "scale block along it (%s %lldx%lld blocks): a block would straddle two "
                        "ranks' shards",
                        fname, dname, tp, (long long)shard, (long long)block,
                        tp_quant_role_name(tp_shard_layout_role(layout)), (long long)s.block_rows,
                        (long long)s.block_cols);
  return TP_OK;
}

/* ---- fp8 encoding -----------------------------------------------------------------------------
 */

typedef struct fp8_spec {
  int mant_bits, bias;
  uint32_t max_bits; /* fp32 bits of the largest finite value */
  uint8_t max_code;
} fp8_spec;

static fp8_spec spec_of(tp_fp8_type t) {
  if (t == TP_FP8_E4M3) return (fp8_spec){3, 7, 0x43E00000u /* 448 */, 0x7E};
  return (fp8_spec){2, 15, 0x47600000u /* 57344 */, 0x7B};
}

uint8_t tp_fp8_encode(tp_fp8_type t, float v) {
  const fp8_spec sp = spec_of(t);
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  const uint8_t sign = (uint8_t)((bits >> 24) & 0x80u);
  const uint32_t mag = bits & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0x7F;                /* NaN */
  if (mag >= sp.max_bits) return sign | sp.max_code; /* saturate, infinities too */
  const int e = (int)(mag >> 23) - 127;              /* unbiased exponent of v */
  if (e < -126) return sign; /* zero or fp32-subnormal: far below the smallest fp8 subnormal */
  const uint32_t m = (mag & 0x7fffffu) | 0x800000u; /* 24-bit significand */
  const int min_normal_exp = 1 - sp.bias;
  /* Bits of m dropped: a normal result keeps mant_bits fraction bits; a
   * subnormal one counts units of 2^(min_normal_exp - mant_bits). */
  int shift = 23 - sp.mant_bits + (e < min_normal_exp ? min_normal_exp - e : 0);
  if (shift > 24) return sign; /* below half the smallest subnormal */
  uint32_t q = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) ++q;
  /* A normal q lies in [2^mant_bits, 2^(mant_bits+1)]; its top (a carry out of
   * the mantissa) lands on the next exponent through the addition. A
   * subnormal q of 2^mant_bits is the smallest normal, encoded the same way. */
  uint32_t code =
      e < min_normal_exp ? q : ((uint32_t)(e + sp.bias) << sp.mant_bits) + q - (1u << sp.mant_bits);
  return sign | (uint8_t)code;
}

float tp_fp8_decode(tp_fp8_type t, uint8_t byte) {
  const fp8_spec sp = spec_of(t);
  const int exp_bits = 7 - sp.mant_bits, mant_mask = (1 << sp.mant_bits) - 1;
  const int e = (byte >> sp.mant_bits) & ((1 << exp_bits) - 1), m = byte & mant_mask;
  const float sign = (byte & 0x80u) ? -1.0f : 1.0f;
  const int top = (1 << exp_bits) - 1;
  if (t == TP_FP8_E4M3 && e == top && m == mant_mask) return NAN;
  if (t == TP_FP8_E5M2 && e == top) return m == 0 ? sign * INFINITY : NAN;
  if (e == 0) return sign * ldexpf((float)m, 1 - sp.bias - sp.mant_bits);
  return sign * ldexpf((float)((1 << sp.mant_bits) + m), e - sp.bias - sp.mant_bits);
}

/* ---- the quantizer ----------------------------------------------------------------------------
 */

tp_rc tp_quant_args_check(const tp_quant_args *a) {
  if (!a) return TP_FAIL(TP_EINTERNAL, "quantize: no arguments");
  if ((int)a->format < 0 || a->format >= TP_QFMT_COUNT)
    return TP_FAIL(TP_EINTERNAL, "quantize: unknown format %d", (int)a->format);
  if (a->elem != TP_FP8_E4M3 && a->elem != TP_FP8_E5M2)
    return TP_FAIL(TP_EINTERNAL, "quantize: unknown fp8 type %d", (int)a->elem);
  if (a->role != TP_QROLE_ACT && a->role != TP_QROLE_WEIGHT)
    return TP_FAIL(TP_EINTERNAL, "quantize: unknown role %d", (int)a->role);
  if (a->in_dtype != TP_BF16 && a->in_dtype != TP_FP32)
    return TP_FAIL(TP_EINTERNAL, "quantize: unknown input type %d", (int)a->in_dtype);
  if (a->rows <= 0 || a->cols <= 0 || a->ld < a->cols)
    return TP_FAIL(TP_EINTERNAL, "quantize: bad shape %lld x %lld, ld %lld", (long long)a->rows,
                   (long long)a->cols, (long long)a->ld);
  if (!a->x || !a->q || !a->scales)
    return TP_FAIL(TP_EINTERNAL, "quantize: missing input, data or scale buffer");
  if (a->agreed_amax && format_rows[a->format].agreement == TP_AMAX_LOCAL)
    return TP_FAIL(TP_EINTERNAL, "quantize: %s takes no agreed amax (its blocks are local)",
                   tp_quant_format_name(a->format));
  return TP_OK;
}

static float input_at(const tp_quant_args *a, int64_t r, int64_t c) {
  const size_t i = (size_t)(r * a->ld + c);
  if (a->in_dtype == TP_FP32) return ((const float *)a->x)[i];
  uint32_t bits = (uint32_t)((const uint16_t *)a->x)[i] << 16;
  float v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

/* One scale block: rows [r0, r1), columns [c0, c1) of the operand. */
typedef struct region {
  int64_t r0, r1, c0, c1;
} region;

static region block_region(const tp_scale_shape *s, int64_t gr, int64_t gc) {
  region g = {gr * s->block_rows, gr * s->block_rows + s->block_rows, gc * s->block_cols,
              gc * s->block_cols + s->block_cols};
  if (g.r1 > s->rows) g.r1 = s->rows;
  if (g.c1 > s->cols) g.c1 = s->cols;
  return g;
}

/* max |x| over a region; NaNs do not count (fmaxf keeps the number). */
static float region_amax(const tp_quant_args *a, region g) {
  float amax = 0.0f;
  for (int64_t r = g.r0; r < g.r1; ++r)
    for (int64_t c = g.c0; c < g.c1; ++c) amax = fmaxf(amax, fabsf(input_at(a, r, c)));
  return amax;
}

tp_rc tp_quant_local_amax_ref(const tp_quant_args *a, float *amax) {
  if (!a || !amax) return TP_FAIL(TP_EINTERNAL, "local amax: NULL argument");
  /* only the input is read: the output buffers may be absent */
  static unsigned char unused;
  tp_quant_args in = *a;
  if (!in.q) in.q = &unused;
  if (!in.scales) in.scales = &unused;
  TP_TRY(tp_quant_args_check(&in));
  switch (format_rows[a->format].agreement) {
  case TP_AMAX_AGREE_TENSOR: *amax = region_amax(a, (region){0, a->rows, 0, a->cols}); return TP_OK;
  case TP_AMAX_AGREE_ROWS:
    for (int64_t r = 0; r < a->rows; ++r) amax[r] = region_amax(a, (region){r, r + 1, 0, a->cols});
    return TP_OK;
  case TP_AMAX_LOCAL: break;
  }
  return TP_FAIL(TP_EINTERNAL, "%s has no amax to agree on (its blocks are local)",
                 tp_quant_format_name(a->format));
}

/* Quantizes one scale block and stores its scale. */
static void quantize_block(const tp_quant_args *a, const tp_scale_shape *s, int64_t gr,
                           int64_t gc) {
  const region g = block_region(s, gr, gc);
  float amax = region_amax(a, g);
  if (a->agreed_amax)
    amax = a->agreed_amax[format_rows[a->format].agreement == TP_AMAX_AGREE_TENSOR ? 0 : gr];
  const int64_t off = tp_scale_offset(s, gr, gc);
  float scale;
  if (s->encoding == TP_SCALE_E8M0) {
    const uint8_t byte = tp_quant_scale_e8m0(a->elem, amax);
    ((uint8_t *)a->scales)[off] = byte;
    scale = tp_e8m0_value(byte);
  } else {
    scale = tp_quant_scale_f32(a->elem, amax);
    ((float *)a->scales)[off] = scale;
  }
  for (int64_t r = g.r0; r < g.r1; ++r)
    for (int64_t c = g.c0; c < g.c1; ++c)
      a->q[r * a->cols + c] = tp_fp8_encode(a->elem, input_at(a, r, c) / scale);
}

tp_rc tp_quant_ref(const tp_quant_args *a) {
  TP_TRY(tp_quant_args_check(a));
  tp_scale_shape s;
  TP_TRY(tp_quant_scale_shape(a->format, a->role, a->rows, a->cols, &s));
  memset(a->scales, 0, tp_quant_scale_bytes(&s));
  for (int64_t gr = 0; gr < s.grid_rows; ++gr)
    for (int64_t gc = 0; gc < s.grid_cols; ++gc) quantize_block(a, &s, gr, gc);
  return TP_OK;
}

tp_rc tp_quant_dequant_ref(const tp_quant_args *a, double *out) {
  if (!a || !a->q || !a->scales || !out)
    return TP_FAIL(TP_EINTERNAL, "dequantize: missing data, scale or output buffer");
  tp_scale_shape s;
  TP_TRY(tp_quant_scale_shape(a->format, a->role, a->rows, a->cols, &s));
  for (int64_t r = 0; r < a->rows; ++r)
    for (int64_t c = 0; c < a->cols; ++c) {
      const double scale = tp_quant_scale_at(&s, a->scales, r / s.block_rows, c / s.block_cols);
      out[r * a->cols + c] = (double)tp_fp8_decode(a->elem, a->q[r * a->cols + c]) * scale;
    }
  return TP_OK;
}

/* ---- the scaled GEMM's accuracy ---------------------------------------------------------------
 */

/* Standard deviations the addends' independent cuts are bounded at (tp_quant.h). */
static const double FP8_MMA_LAMBDA = 8.0;

tp_fp8_accum_model tp_fp8_accum_model_of(int major, int minor) {
  /* Ada (8.9) and Hopper (9.x) run FP8 MMAs with the reduced accumulator. */
  const int reduced = major == 9 || (major == 8 && minor == 9);
  const tp_fp8_accum_model m = {reduced, 32};
  return m;
}

tp_fp8_dot tp_fp8_dot_ref(const double *x, const double *w, int64_t k, int group) {
  tp_fp8_dot d = {0.0, 0.0, 0.0, 0.0};
  double peak = 0.0, pmax = 0.0; /* largest |partial| at a step boundary; |product| in the step */
  for (int64_t p = 0; p < k; ++p) {
    const double prod = x[p] * w[p];
    d.ref += prod;
    d.sabs += fabs(prod);
    if (fabs(prod) > pmax) pmax = fabs(prod);
    if (group < 1 || ((p + 1) % group != 0 && p + 1 != k)) continue;
    const double m_j = fmax(2.0 * peak, pmax); /* this step's M_j, with P of the steps before */
    d.mma_mag += m_j;
    d.mma_mag2 += m_j * m_j;
    if (fabs(d.ref) > peak) peak = fabs(d.ref);
    pmax = 0.0;
  }
  return d;
}

double tp_fp8_gemm_tolerance(const tp_fp8_accum_model *m, const tp_fp8_dot *d, int64_t k) {
  double acc = (double)(k + 2) * 0x1p-24 * d->sabs;
  if (m->reduced_mma)
    acc += 0x1p-13 * (d->mma_mag + FP8_MMA_LAMBDA * sqrt((double)(m->group + 1) * d->mma_mag2));
  return 0x1p-8 * (fabs(d->ref) + acc) + acc;
}
