/*
 * test_fp8_columns.c — the wgrad's column pieces (kernels/tp_quant.h,
 * tp_scale_gather_cols_shape) on one GPU, TP ranks simulated (gpu_fp8_columns).
 *
 * The backward's sequence-sharded operand ([S, C] on each rank) enters the
 * wgrad transposed, [C, T], quantized along T. Here, as the ranks of
 * kernels/tp_linear_fp8_bwd.c do it: each rank's shard transposed and
 * quantized by tp_quant_transpose_quantize_enqueue into its own poisoned
 * buffers, with the amax the placement rule asks it to agree on (each
 * piece's tp_quant_transpose_local_amax_enqueue, maxed on the host as the
 * all-reduce would, uploaded); the pieces' bytes and stored scale buffers
 * concatenated rank-major into one device buffer each (NCCL's all-gather),
 * re-placed by tp_quant_replace_columns_enqueue and
 * tp_quant_replace_gathered_enqueue into poisoned (0xA5) buffers, and
 * compared bit for bit (padding included) with the whole's transpose
 * quantized on the device, and with the reference re-placement of the same
 * gathered bytes. Formats fp8, fp8-row, fp8-block, mxfp8 (no GEMM here,
 * so mxfp8 runs below sm_100 too) x TP 2, 4, 8 x shapes: small and odd C,
 * an op set's (C 4096, S 2048), and S not a multiple of 16 (the byte
 * kernel's scalar path; fp8 and fp8-row, the formats the rule lets split
 * there); E4M3 and E5M2 (dY's type). The pieces back to back are not the
 * whole's bytes, and planted faults are caught: the byte re-placement one
 * column short, the scale gather one element short per rank (where the
 * whole's scales come from several ranks) and pieces quantized without the
 * agreement. Exit 77 (skipped) without a GPU.
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

#include "kernels/tp_quant_device.h"
#include "tests/gpu/gpu_harness.h"

/* ---- device memory ------------------------------------------------------------------------ */

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
    fail_msg("cudaMalloc of %zu bytes failed", bytes);
  return p;
}

static void *host_alloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  assert_non_null(p);
  return p;
}

static void upload(void *dev, const void *host, size_t bytes) {
  const cudaError_t err = cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
  if (err != cudaSuccess) fail_msg("upload of %zu bytes: %s", bytes, cudaGetErrorString(err));
}

static void *download(const void *dev, size_t bytes) {
  void *h = host_alloc(bytes);
  const cudaError_t err = cudaMemcpy(h, dev, bytes, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) fail_msg("download: %s", cudaGetErrorString(err));
  return h;
}

static void dev_copy(void *dst, const void *src, size_t bytes) {
  const cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice);
  if (err != cudaSuccess) fail_msg("device copy: %s", cudaGetErrorString(err));
}

/* Every byte 0xA5: what a kernel leaves unwritten shows in the comparison. */
static void poison(void *dev, size_t bytes) {
  if (cudaMemset(dev, 0xA5, bytes) != cudaSuccess) fail_msg("poison of %zu bytes", bytes);
}

static void sync_ok(void) {
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) fail_msg("CUDA error: %s", cudaGetErrorString(err));
}

static void check_rc(tp_rc rc, const char *what) {
  if (rc != TP_OK) fail_msg("%s: %s", what, tp_last_error());
}

/* ---- the source ---------------------------------------------------------------------------- */

/* 2^m, m in [-4, 4] from a hash of (column, 32-row group of T): the transpose's rows and its
 * 1x32 and 1x128 blocks along T differ in magnitude, so a scale from the wrong block or rank
 * shows. */
static float block_magnitude(int64_t col, int64_t t_group, uint64_t seed) {
  uint64_t h = ((uint64_t)(col * 1000003 + t_group) + 1) * 0x9E3779B97F4A7C15ull ^ seed;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return ldexpf(1.0f, (int)(h % 9) - 4);
}

/* The whole source [t, c] in bf16 (values in [-1, 1) times the block's magnitude); the outlier
 * in the last row is the tensor amax and lies in the last rank's shard (tensorwise needs the
 * agreement). */
static uint16_t *col_source(int64_t t, int64_t c, uint64_t seed) {
  const size_t n = (size_t)(t * c);
  float *f = host_alloc(sizeof(float) * n);
  uint16_t *b = host_alloc(sizeof(uint16_t) * n);
  gpu_fill_host(TP_FP32, f, n, seed, 1.0f);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < c; ++j)
      b[i * c + j] = gpu_float_to_bf16(f[i * c + j] * block_magnitude(j, i / 32, seed));
  b[(t - 1) * c] = gpu_float_to_bf16(300.0f);
  free(f);
  return b;
}

/* ---- one simulated gather of column pieces -------------------------------------------------- */

typedef struct col_case {
  tp_quant_format f;
  tp_fp8_type elem;
  int64_t c, s; /* the transpose's rows (the source's columns); each rank's share of T */
  int tp;
} col_case;

typedef struct dev_cols {
  col_case k;
  tp_scale_gather g;
  int64_t t;                 /* tp · s */
  size_t n;                  /* c · t: bytes of the whole's data */
  void *x;                   /* bf16 [t, c] on the device */
  uint8_t *q_whole, *q_gath; /* [c, t]; the pieces' bytes, rank-major */
  void *s_whole, *s_gath;    /* the whole's scales; the pieces' scale buffers, rank-major */
  uint8_t *q_piece;          /* one rank's own buffers, before the gather */
  void *s_piece;
  float *agreed;                  /* device: the agreed amax, or NULL where the rule needs none */
  uint8_t *h_q_whole, *h_s_whole; /* the whole, downloaded once */
} dev_cols;

static tp_quant_args col_args(const dev_cols *d, const void *x, uint8_t *q, void *scales,
                              const float *agreed) {
  tp_quant_args a = {d->k.f, TP_QROLE_ACT, d->k.elem, TP_BF16, x,     d->k.s,
                     d->k.c, d->k.c,       NULL,      scales,  agreed};
  a.q = q; /* written through (an initializer's copy reads as const to clang-tidy) */
  return a;
}

/* Rank r's shard: the source's rows r·s .. r·s + s - 1. */
static const void *shard_of(const dev_cols *d, int r) {
  return (const char *)d->x + (size_t)(r * d->k.s * d->k.c) * sizeof(uint16_t);
}

/* Floats the ranks agree on: 1 (tensorwise), one per row of the transpose (fp8-row: a row's
 * scale spans every rank's piece of it), else none. */
static int64_t amax_count(const col_case *k) {
  return k->f == TP_QFMT_FP8 ? 1 : k->f == TP_QFMT_FP8_ROW ? k->c : 0;
}

/* The agreement as the ranks make it: each piece's local amax on the device, their max (the
 * all-reduce) on the host, uploaded. NULL where the format needs none. */
static float *dev_agree(const dev_cols *d) {
  const int64_t n = amax_count(&d->k);
  if (n == 0) return NULL;
  float *local = dev_alloc(sizeof(float) * (size_t)(n * d->k.tp));
  for (int r = 0; r < d->k.tp; ++r) {
    /* the amax reads x only; the arguments' check asks for the buffers the quantization that
     * follows writes (the rank's own) */
    const tp_quant_args a = col_args(d, shard_of(d, r), d->q_piece, d->s_piece, NULL);
    check_rc(tp_quant_transpose_local_amax_enqueue(&a, local + r * n, 0), "transposed amax");
  }
  sync_ok();
  float *h = download(local, sizeof(float) * (size_t)(n * d->k.tp));
  for (int r = 1; r < d->k.tp; ++r)
    for (int64_t i = 0; i < n; ++i) h[i] = fmaxf(h[i], h[r * n + i]);
  float *agreed = dev_alloc(sizeof(float) * (size_t)n);
  upload(agreed, h, sizeof(float) * (size_t)n);
  free(h);
  cudaFree(local);
  return agreed;
}

/* Every rank transposes and quantizes its shard (with `agreed`, NULL for its own amax) into its
 * own poisoned buffers, which the all-gather then lays back to back in q_gath and s_gath. */
static void dev_quantize_pieces(const dev_cols *d, const float *agreed, uint8_t *q_gath,
                                void *s_gath) {
  const size_t piece = (size_t)(d->k.c * d->k.s), sb = tp_quant_scale_bytes(&d->g.shard);
  for (int r = 0; r < d->k.tp; ++r) {
    poison(d->q_piece, piece);
    poison(d->s_piece, sb);
    const tp_quant_args a = col_args(d, shard_of(d, r), d->q_piece, d->s_piece, agreed);
    check_rc(tp_quant_transpose_quantize_enqueue(&a, 0), "transpose-quantize a piece");
    dev_copy(q_gath + (size_t)r * piece, d->q_piece, piece);
    dev_copy((char *)s_gath + (size_t)r * sb, d->s_piece, sb);
  }
}

static void dev_make(dev_cols *d, const col_case *k, uint64_t seed) {
  memset(d, 0, sizeof *d);
  d->k = *k;
  check_rc(tp_scale_gather_cols_shape(k->f, k->c, k->s, k->tp, &d->g), "column gather shape");
  d->t = k->s * k->tp;
  d->n = (size_t)(k->c * d->t);
  uint16_t *hx = col_source(d->t, k->c, seed);
  d->x = dev_alloc(sizeof(uint16_t) * d->n);
  upload(d->x, hx, sizeof(uint16_t) * d->n);
  free(hx);
  const size_t whole = tp_quant_scale_bytes(&d->g.whole);
  d->q_whole = dev_alloc(d->n);
  d->q_gath = dev_alloc(d->n);
  d->s_whole = dev_alloc(whole);
  d->s_gath = dev_alloc(tp_scale_gather_bytes(&d->g));
  d->q_piece = dev_alloc((size_t)(k->c * k->s));
  d->s_piece = dev_alloc(tp_quant_scale_bytes(&d->g.shard));
  /* the whole: [t, c] transposed and quantized along T, no agreement */
  poison(d->q_whole, d->n);
  poison(d->s_whole, whole);
  tp_quant_args w = col_args(d, d->x, d->q_whole, d->s_whole, NULL);
  w.rows = d->t;
  check_rc(tp_quant_transpose_quantize_enqueue(&w, 0), "transpose-quantize the whole");
  d->agreed = dev_agree(d);
  dev_quantize_pieces(d, d->agreed, d->q_gath, d->s_gath);
  sync_ok();
  d->h_q_whole = download(d->q_whole, d->n);
  d->h_s_whole = download(d->s_whole, whole);
}

static void dev_free(dev_cols *d) {
  void *all[] = {d->x,      d->q_whole, d->q_gath,  d->s_whole,
                 d->s_gath, d->q_piece, d->s_piece, d->agreed};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) cudaFree(all[i]);
  free(d->h_q_whole);
  free(d->h_s_whole);
}

/* The device placement of gathered bytes (pieces of shard_cols columns) and scales (gather g),
 * into poisoned buffers, downloaded. */
typedef struct placed {
  uint8_t *q, *s;
} placed;

static placed dev_place(const dev_cols *d, const uint8_t *q_gath, const void *s_gath,
                        int64_t shard_cols, const tp_scale_gather *g) {
  const size_t sb = tp_quant_scale_bytes(&d->g.whole);
  uint8_t *q = dev_alloc(d->n);
  void *s = dev_alloc(sb);
  poison(q, d->n);
  poison(s, sb);
  check_rc(tp_quant_replace_columns_enqueue(q_gath, (size_t)(d->k.c * d->k.s), d->k.tp, d->k.c,
                                            shard_cols, q, 0),
           "re-place the bytes");
  check_rc(tp_quant_replace_gathered_enqueue(g, s_gath, s, 0), "re-place the scales");
  sync_ok();
  const placed p = {download(q, d->n), download(s, sb)};
  cudaFree(q);
  cudaFree(s);
  return p;
}

/* 0 when p is the whole's bytes and scales bit for bit, 1 when the bytes differ, 2 the scales. */
static int placed_mismatch(const dev_cols *d, const placed *p) {
  if (memcmp(p->q, d->h_q_whole, d->n) != 0) return 1;
  return memcmp(p->s, d->h_s_whole, tp_quant_scale_bytes(&d->g.whole)) != 0 ? 2 : 0;
}

static void placed_free(placed *p) {
  free(p->q);
  free(p->s);
}

/* The device placement of the case's gathered pieces equals the reference's of the same bytes. */
static void check_against_reference(const dev_cols *d, const placed *p) {
  const size_t sb = tp_quant_scale_bytes(&d->g.whole);
  uint8_t *q_gath = download(d->q_gath, d->n), *q_ref = host_alloc(d->n);
  void *s_gath = download(d->s_gath, tp_scale_gather_bytes(&d->g));
  uint8_t *s_ref = host_alloc(sb);
  tp_quant_replace_columns_ref(q_gath, d->k.tp, d->k.c, d->k.s, q_ref);
  tp_quant_replace_gathered_ref(&d->g, s_gath, s_ref);
  if (memcmp(q_ref, p->q, d->n) != 0 || memcmp(s_ref, p->s, sb) != 0)
    fail_msg("%s TP %d, C %lld, S %lld: the device placement differs from the reference's",
             tp_quant_format_name(d->k.f), d->k.tp, (long long)d->k.c, (long long)d->k.s);
  /* the re-placement is not vacuous: the pieces back to back are not the whole's bytes */
  if (memcmp(q_gath, d->h_q_whole, d->n) == 0)
    fail_msg("%s TP %d, C %lld, S %lld: the pieces back to back already are the whole's bytes",
             tp_quant_format_name(d->k.f), d->k.tp, (long long)d->k.c, (long long)d->k.s);
  free(q_gath);
  free(q_ref);
  free(s_gath);
  free(s_ref);
}

/* ---- the cases ------------------------------------------------------------------------------ */

typedef struct col_tally {
  int cases, rejected;
  int planted[3], caught[3]; /* byte shift, scale stride, missing agreement */
} col_tally;

/* Places (q_gath, s_gath) with the planted fault and counts it caught when it differs from the
 * whole (kind 0 must show in the bytes, kind 1 in the scales). */
static void plant(const dev_cols *d, col_tally *t, int kind, const uint8_t *q_gath,
                  const void *s_gath, int64_t shard_cols, const tp_scale_gather *g) {
  placed p = dev_place(d, q_gath, s_gath, shard_cols, g);
  const int bad = placed_mismatch(d, &p);
  t->planted[kind]++;
  t->caught[kind] += kind == 0 ? bad == 1 : kind == 1 ? bad == 2 : bad != 0;
  placed_free(&p);
}

static void dev_faults(const dev_cols *d, col_tally *t) {
  /* the byte re-placement one column short per piece: the whole's rows shift */
  plant(d, t, 0, d->q_gath, d->s_gath, d->k.s - 1, &d->g);
  /* one element short per rank in the scale gather; it can only show where the whole's scales
   * come from several ranks (tensorwise and fp8-row read rank 0's agreed scales alone) */
  if (d->g.shard.grid_cols < d->g.whole.grid_cols) {
    tp_scale_gather off = d->g;
    off.shard.stored -= 1;
    plant(d, t, 1, d->q_gath, d->s_gath, d->k.s, &off);
  }
  /* every rank on its own amax: the agreement is what makes the pieces the whole's */
  if (d->agreed) {
    uint8_t *q = dev_alloc(d->n);
    void *s = dev_alloc(tp_scale_gather_bytes(&d->g));
    dev_quantize_pieces(d, NULL, q, s);
    plant(d, t, 2, q, s, d->k.s, &d->g);
    cudaFree(q);
    cudaFree(s);
  }
}

/* One case: skipped where the placement rule rejects the split (a block straddling two ranks:
 * the block formats' S alone can do that), else the invariant, the reference and the faults. */
static void col_run(const col_case *k, col_tally *t, uint64_t seed) {
  tp_amax_agreement agreement;
  char reason[400];
  if (tp_quant_split_check(k->f, TP_SHARD_ACT_COLS, k->c, k->s * k->tp, k->tp, "T", &agreement,
                           reason, sizeof reason) != TP_OK) {
    assert_true(k->f == TP_QFMT_FP8_BLOCK || k->f == TP_QFMT_MXFP8);
    assert_true(k->s % (k->f == TP_QFMT_FP8_BLOCK ? 128 : 32) != 0);
    t->rejected++;
    return;
  }
  assert_int_equal(agreement, k->f == TP_QFMT_FP8       ? TP_AMAX_AGREE_TENSOR
                              : k->f == TP_QFMT_FP8_ROW ? TP_AMAX_AGREE_ROWS
                                                        : TP_AMAX_LOCAL);
  dev_cols d;
  dev_make(&d, k, seed);
  placed p = dev_place(&d, d.q_gath, d.s_gath, k->s, &d.g);
  const int bad = placed_mismatch(&d, &p);
  if (bad)
    fail_msg("%s %s TP %d, C %lld, S %lld: re-placed %s differ from the whole's transpose "
             "quantized on the device",
             tp_quant_format_name(k->f), tp_fp8_type_name(k->elem), k->tp, (long long)k->c,
             (long long)k->s, bad == 1 ? "bytes" : "scales");
  check_against_reference(&d, &p);
  placed_free(&p);
  dev_faults(&d, t);
  dev_free(&d);
  t->cases++;
}

static const tp_quant_format FORMATS[] = {TP_QFMT_FP8, TP_QFMT_FP8_ROW, TP_QFMT_FP8_BLOCK,
                                          TP_QFMT_MXFP8};
static const int TP_DEGREES[] = {2, 4, 8};
/* {C, S}: small and odd C; S of one, three and sixteen 128-blocks (an op set's, C 4096, S 2048:
 * T 16384 at TP 8); S 96 (1x32 blocks, not 1x128); S 200 and 3, not multiples of 16 (the byte
 * kernel's scalar path; only fp8 and fp8-row may split there). */
static const int64_t E4M3_SHAPES[][2] = {{37, 128}, {130, 384}, {4096, 2048},
                                         {130, 96}, {300, 200}, {37, 3}};
/* E5M2, a gradient's type (dYᵀ on the scatter side): one block multiple, one scalar path. */
static const int64_t E5M2_SHAPES[][2] = {{130, 256}, {300, 200}};

static void run_shapes(tp_fp8_type elem, const int64_t (*shapes)[2], size_t count, col_tally *t) {
  for (size_t fi = 0; fi < sizeof FORMATS / sizeof FORMATS[0]; ++fi)
    for (size_t ti = 0; ti < sizeof TP_DEGREES / sizeof TP_DEGREES[0]; ++ti)
      for (size_t si = 0; si < count; ++si) {
        const col_case k = {FORMATS[fi], elem, shapes[si][0], shapes[si][1], TP_DEGREES[ti]};
        col_run(&k, t, 11 + fi * 7 + ti * 3 + si + (uint64_t)elem * 101);
      }
}

static void test_columns_on_device(void **state) {
  (void)state;
  col_tally t;
  memset(&t, 0, sizeof t);
  run_shapes(TP_FP8_E4M3, E4M3_SHAPES, sizeof E4M3_SHAPES / sizeof E4M3_SHAPES[0], &t);
  run_shapes(TP_FP8_E5M2, E5M2_SHAPES, sizeof E5M2_SHAPES / sizeof E5M2_SHAPES[0], &t);
  const int planted = t.planted[0] + t.planted[1] + t.planted[2];
  const int caught = t.caught[0] + t.caught[1] + t.caught[2];
  printf("  %d column gathers (4 formats x TP 2/4/8 x C,S 37,128 130,384 4096,2048 130,96 "
         "300,200 37,3 in E4M3 and 130,256 300,200 in E5M2, where the rule accepts the split; "
         "%d rejected) placed on the device equal the whole's transpose quantized and the "
         "reference placement, bit for bit; %d of %d planted faults caught (%d/%d byte shifts, "
         "%d/%d scale strides, %d/%d missing agreements)\n",
         t.cases, t.rejected, caught, planted, t.caught[0], t.planted[0], t.caught[1], t.planted[1],
         t.caught[2], t.planted[2]);
  assert_true(t.cases > 0);
  for (int i = 0; i < 3; ++i) {
    assert_true(t.planted[i] > 0);
    assert_int_equal(t.caught[i], t.planted[i]);
  }
}

int main(void) {
  if (gpu_device_count() == 0) {
    printf("no CUDA device: GPU test skipped\n");
    return GPU_TEST_SKIP;
  }
  if (cudaSetDevice(0) != cudaSuccess) {
    printf("device 0 unusable\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_columns_on_device)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
