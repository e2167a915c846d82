/*
 * test_layers.c — GPU test of the non-TP layer pieces (kernels/tp_layers.h):
 * RMSNorm, RoPE, the causal GQA attention core and SwiGLU, forward and
 * backward, in bf16 and fp32, on one GPU.
 *
 * Every piece runs on small shapes with batch 3 (so rows in (seq, batch)
 * order that get mixed up with batch-major ones fail), random inputs, its
 * outputs poisoned with NaN first (an element nothing wrote shows up as
 * "unwritten"), and is compared with a float64 CPU reference computed from
 * the very values the GPU read: ||out − ref|| / ||ref|| against a stated
 * tolerance. bf16 tolerances cover one rounding of each stored value (2^-9
 * relative) and, for attention, the rounding of P and dS between GEMMs;
 * fp32 ones cover fp32 arithmetic. Each piece also runs twice and must give
 * the same bits; attention must keep earlier tokens and other batch
 * elements bit-identical when one future token of one batch element
 * changes (causal mask, batch isolation), and write exact zeros above the
 * diagonal of P; in-place use where a contract allows it must give the bits
 * of the out-of-place run; refused arguments must be refused.
 *
 * Each check prints one line: piece, pass, dtype, tensor, error, tolerance,
 * ok/FAIL. Exit 77 (skipped) without a GPU.
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

#include "kernels/tp_device.h"
#include "kernels/tp_layers.h"
#include "tests/gpu/gpu_harness.h"

enum {
  BATCH = 3,
  SEQ = 64,
  HEAD_DIM = 64,
  HQ = 4,
  HKV = 2,
  DIM = 256,
  FFN = 352,
  ROWS = SEQ * BATCH,
  QKV_W = (HQ + 2 * HKV) * HEAD_DIM,
  Q_COLS = HQ * HEAD_DIM,         /* dQ columns of dQKV; O's width */
  KV_COLS = HKV * HEAD_DIM,       /* K's (or V's) columns of QKV */
  V_COL0 = (HQ + HKV) * HEAD_DIM, /* V's first column */
  MAX_DEV = 32
};
/* Element counts, in size_t. */
#define N_X ((size_t)ROWS * DIM)             /* RMSNorm rows */
#define N_QKV ((size_t)ROWS * QKV_W)         /* the QKV buffer */
#define N_O ((size_t)ROWS * Q_COLS)          /* attention output */
#define N_P ((size_t)BATCH * HQ * SEQ * SEQ) /* P */
#define N_FFN ((size_t)ROWS * FFN)           /* SwiGLU tensors */

/* One rounding of each stored bf16 value (2^-9 relative at most, ~1e-3 as a
 * norm) with margin; fp32 elementwise and row pieces keep ~1e-7. */
static const double TOL_ELT_BF16 = 4e-3, TOL_ELT_FP32 = 1e-5;
/* inv_rms is fp32 in both dtypes, computed from the same stored x. */
static const double TOL_INV_RMS = 1e-6;
/* Attention: bf16 rounds P and dS between the GEMMs (~3e-3 expected); fp32
 * runs fp32 GEMMs (no TF32) and an fp32 softmax (~1e-6 expected). */
static const double TOL_ATTN_BF16 = 1e-2, TOL_ATTN_FP32 = 1e-4;
/* P itself is rounded once from an fp32 softmax. */
static const double TOL_P_BF16 = 4e-3, TOL_P_FP32 = 1e-5;

static double tol_elt(tp_dtype dt) { return dt == TP_BF16 ? TOL_ELT_BF16 : TOL_ELT_FP32; }

/* ---- device memory: every test frees what it allocated, pass or fail ------------------------ */

typedef struct dev_pool {
  void *p[MAX_DEV];
  int n;
  int failed;
} dev_pool;

static void *dev_alloc(dev_pool *pool, size_t bytes) {
  void *p = NULL;
  if (pool->n >= MAX_DEV || cudaMalloc(&p, bytes) != cudaSuccess) {
    fprintf(stderr, "cudaMalloc of %zu bytes failed\n", bytes);
    pool->failed = 1;
    return NULL;
  }
  pool->p[pool->n++] = p;
  return p;
}

static void *dev_upload(dev_pool *pool, const void *host, size_t bytes) {
  void *p = dev_alloc(pool, bytes);
  if (p && cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) pool->failed = 1;
  return p;
}

static void dev_pool_free(dev_pool *pool) {
  for (int i = 0; i < pool->n; ++i) cudaFree(pool->p[i]);
  pool->n = 0;
}

/* A host copy of a device buffer; all bits set (a NaN) when the copy fails. */
static void *download(const void *dev, size_t bytes) {
  void *h = malloc(bytes);
  if (cudaMemcpy(h, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) memset(h, 0xff, bytes);
  return h;
}

static int poison(tp_dtype dt, void *dev, size_t count) {
  return tp_launch_poison(dt, dev, count, 0) != cudaSuccess;
}

/* Reports and clears a CUDA error that surfaced at a synchronisation. */
static int sync_ok(const char *piece) {
  cudaError_t err = cudaDeviceSynchronize();
  if (err == cudaSuccess) return 1;
  printf("%-9s CUDA error: %s (%s): FAIL\n", piece, cudaGetErrorString(err), cudaGetErrorName(err));
  return 0;
}

static void *host_random(tp_dtype dt, size_t count, uint64_t seed, float scale) {
  void *h = malloc(count * tp_dtype_bytes(dt));
  gpu_fill_host(dt, h, count, seed, scale);
  return h;
}

static double *to_double(tp_dtype dt, const void *buf, size_t count) {
  double *out = malloc(count * sizeof *out);
  for (size_t i = 0; i < count; ++i) out[i] = gpu_host_value(dt, buf, i);
  return out;
}

/* ---- comparisons, one printed line each ----------------------------------------------------- */

/* ||out − ref|| / ||ref|| over columns [col0, col0 + cols) of rows [rows, ld];
 * non-finite outputs are counted, not summed. */
static double rel_err(tp_dtype dt, const void *out, const double *ref, size_t rows, size_t ld,
                      size_t col0, size_t cols, size_t *nonfinite) {
  double d2 = 0, r2 = 0;
  *nonfinite = 0;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = col0; c < col0 + cols; ++c) {
      double v = gpu_host_value(dt, out, r * ld + c), x = ref[r * ld + c];
      if (!isfinite(v)) {
        (*nonfinite)++;
        continue;
      }
      d2 += (v - x) * (v - x);
      r2 += x * x;
    }
  return sqrt(d2 / (r2 > 0 ? r2 : 1));
}

static int check_cols(const char *piece, const char *pass, tp_dtype dt, const char *what,
                      tp_dtype buf_dt, const void *out, const double *ref, size_t rows, size_t ld,
                      size_t col0, size_t cols, double tol) {
  size_t bad = 0;
  double err = rel_err(buf_dt, out, ref, rows, ld, col0, cols, &bad);
  int ok = bad == 0 && err <= tol;
  printf("%-9s %-3s %-4s %-8s vs fp64 rel err %.2e (tol %.0e), %zu unwritten/non-finite: %s\n",
         piece, pass, tp_dtype_name(dt), what, err, tol, bad, ok ? "ok" : "FAIL");
  return !ok;
}

static int check(const char *piece, const char *pass, tp_dtype dt, const char *what,
                 tp_dtype buf_dt, const void *out, const double *ref, size_t count, double tol) {
  return check_cols(piece, pass, dt, what, buf_dt, out, ref, 1, count, 0, count, tol);
}

static size_t elems_differ(const void *a, const void *b, size_t count, size_t e) {
  size_t n = 0;
  for (size_t i = 0; i < count; ++i)
    n += memcmp((const char *)a + i * e, (const char *)b + i * e, e) != 0;
  return n;
}

/* `rule` says what was compared ("two runs", "in place vs out of place"). */
static int check_same(const char *piece, const char *pass, tp_dtype dt, const char *what,
                      const char *rule, const void *a, const void *b, size_t count, size_t e) {
  size_t n = elems_differ(a, b, count, e);
  printf("%-9s %-3s %-4s %-8s %s: %zu of %zu elements differ (tol 0): %s\n", piece, pass,
         tp_dtype_name(dt), what, rule, n, count, n == 0 ? "ok" : "FAIL");
  return n != 0;
}

/* ---- RMSNorm -------------------------------------------------------------------------------- */

typedef struct norm_ref {
  double *y, *inv, *dx, *dg;
} norm_ref;

static norm_ref rmsnorm_reference(const double *x, const double *g, const double *dy) {
  norm_ref r = {calloc(N_X, sizeof(double)), calloc(ROWS, sizeof(double)),
                calloc(N_X, sizeof(double)), calloc(DIM, sizeof(double))};
  const double eps = (double)TP_RMSNORM_EPS;
  for (int row = 0; row < ROWS; ++row) {
    const double *xr = x + (size_t)row * DIM, *dyr = dy + (size_t)row * DIM;
    double ss = 0, dot = 0;
    for (int j = 0; j < DIM; ++j) ss += xr[j] * xr[j];
    const double inv = 1.0 / sqrt(ss / DIM + eps);
    r.inv[row] = inv;
    for (int j = 0; j < DIM; ++j) {
      r.y[row * DIM + j] = xr[j] * inv * g[j];
      dot += dyr[j] * g[j] * xr[j];
      r.dg[j] += dyr[j] * xr[j] * inv;
    }
    for (int j = 0; j < DIM; ++j)
      r.dx[row * DIM + j] = inv * (g[j] * dyr[j] - xr[j] * inv * inv * dot / DIM);
  }
  return r;
}

typedef struct norm_dev {
  void *x, *g, *dy, *y, *dx, *dg;
  float *inv, *ws;
} norm_dev;

typedef struct norm_out {
  void *y, *inv, *dx, *dg;
} norm_out;

static void norm_out_free(norm_out *o) {
  free(o->y);
  free(o->inv);
  free(o->dx);
  free(o->dg);
}

/* Poisons the outputs, runs forward and backward, downloads. */
static int rmsnorm_run(tp_dtype dt, const norm_dev *d, norm_out *o) {
  const size_t e = tp_dtype_bytes(dt);
  int bad = poison(dt, d->y, N_X) | poison(dt, d->dx, N_X) | poison(dt, d->dg, DIM) |
            poison(TP_FP32, d->inv, ROWS);
  bad |= tp_launch_rmsnorm_fwd(dt, d->x, d->g, d->y, d->inv, ROWS, DIM, TP_RMSNORM_EPS, 0) !=
         cudaSuccess;
  bad |= tp_launch_rmsnorm_bwd(dt, d->dy, d->x, d->g, d->inv, d->dx, d->dg, d->ws, ROWS, DIM, 0) !=
         cudaSuccess;
  if (bad || !sync_ok("rmsnorm")) return 1;
  o->y = download(d->y, N_X * e);
  o->inv = download(d->inv, ROWS * sizeof(float));
  o->dx = download(d->dx, N_X * e);
  o->dg = download(d->dg, DIM * e);
  return 0;
}

/* The contract lets dx alias dy: run the backward in place on a copy of dy. */
static int rmsnorm_in_place(tp_dtype dt, dev_pool *pool, const norm_dev *d, const void *dy_host,
                            const norm_out *first) {
  const size_t e = tp_dtype_bytes(dt);
  void *dyx = dev_upload(pool, dy_host, N_X * e);
  if (!dyx || tp_launch_rmsnorm_bwd(dt, dyx, d->x, d->g, d->inv, dyx, d->dg, d->ws, ROWS, DIM, 0) !=
                  cudaSuccess)
    return 1;
  if (!sync_ok("rmsnorm")) return 1;
  void *dx = download(dyx, N_X * e);
  int failures = check_same("rmsnorm", "bwd", dt, "dx", "dx = dy in place vs out of place", dx,
                            first->dx, N_X, e);
  free(dx);
  return failures;
}

static int rmsnorm_case(tp_dtype dt) {
  const size_t e = tp_dtype_bytes(dt);
  void *x = host_random(dt, N_X, 11, 2.0f), *g = host_random(dt, DIM, 12, 1.0f);
  void *dy = host_random(dt, N_X, 13, 1.0f);
  double *xd = to_double(dt, x, N_X), *gd = to_double(dt, g, DIM);
  double *dyd = to_double(dt, dy, N_X);
  norm_ref ref = rmsnorm_reference(xd, gd, dyd);
  dev_pool pool = {0};
  norm_dev d = {dev_upload(&pool, x, N_X * e),
                dev_upload(&pool, g, DIM * e),
                dev_upload(&pool, dy, N_X * e),
                dev_alloc(&pool, N_X * e),
                dev_alloc(&pool, N_X * e),
                dev_alloc(&pool, DIM * e),
                dev_alloc(&pool, ROWS * sizeof(float)),
                dev_alloc(&pool, tp_rmsnorm_bwd_workspace_bytes(ROWS, DIM))};
  norm_out o1 = {0}, o2 = {0};
  int failures = pool.failed || rmsnorm_run(dt, &d, &o1) || rmsnorm_run(dt, &d, &o2);
  if (!failures) {
    const double tol = tol_elt(dt);
    failures += check("rmsnorm", "fwd", dt, "y", dt, o1.y, ref.y, N_X, tol);
    failures += check("rmsnorm", "fwd", dt, "inv_rms", TP_FP32, o1.inv, ref.inv, ROWS, TOL_INV_RMS);
    failures += check("rmsnorm", "bwd", dt, "dx", dt, o1.dx, ref.dx, N_X, tol);
    failures += check("rmsnorm", "bwd", dt, "dg", dt, o1.dg, ref.dg, DIM, tol);
    failures += check_same("rmsnorm", "fwd", dt, "y", "two runs", o1.y, o2.y, N_X, e);
    failures += check_same("rmsnorm", "fwd", dt, "inv_rms", "two runs", o1.inv, o2.inv, ROWS, 4);
    failures += check_same("rmsnorm", "bwd", dt, "dx", "two runs", o1.dx, o2.dx, N_X, e);
    failures += check_same("rmsnorm", "bwd", dt, "dg", "two runs", o1.dg, o2.dg, DIM, e);
    failures += rmsnorm_in_place(dt, &pool, &d, dy, &o1);
  } else {
    printf("rmsnorm   %s: setup or launch failed: FAIL\n", tp_dtype_name(dt));
  }
  norm_out_free(&o1);
  norm_out_free(&o2);
  dev_pool_free(&pool);
  free(ref.y);
  free(ref.inv);
  free(ref.dx);
  free(ref.dg);
  free(xd);
  free(gd);
  free(dyd);
  free(x);
  free(g);
  free(dy);
  return failures;
}

/* ---- RoPE ----------------------------------------------------------------------------------- */

/* Rotates the Q and K heads of rows [ROWS, QKV_W] by +angle (sign 1) or
 * −angle (sign −1); position of row r is r / BATCH. V is copied. */
static double *rope_reference(const double *in, int sign) {
  double *out = malloc(N_QKV * sizeof *out);
  memcpy(out, in, N_QKV * sizeof *out);
  const int half = HEAD_DIM / 2;
  for (int r = 0; r < ROWS; ++r) {
    const int pos = r / BATCH; /* rows are (seq, batch) */
    const double s = pos;
    for (int h = 0; h < HQ + HKV; ++h)
      for (int i = 0; i < half; ++i) {
        const double angle = s * pow(TP_ROPE_THETA, -2.0 * i / HEAD_DIM);
        const double c = cos(angle), sn = sign * sin(angle);
        const size_t lo = (size_t)r * QKV_W + (size_t)h * HEAD_DIM + (size_t)i, hi = lo + half;
        out[lo] = in[lo] * c - in[hi] * sn;
        out[hi] = in[hi] * c + in[lo] * sn;
      }
  }
  return out;
}

/* V columns must come back exactly as they went in. */
static int rope_v_untouched(const char *pass, tp_dtype dt, const void *out, const void *in) {
  const size_t e = tp_dtype_bytes(dt), v0 = V_COL0, vn = KV_COLS;
  size_t differ = 0;
  for (size_t r = 0; r < ROWS; ++r)
    differ += elems_differ((const char *)out + (r * QKV_W + v0) * e,
                           (const char *)in + (r * QKV_W + v0) * e, vn, e);
  printf("%-9s %-3s %-4s %-8s untouched: %zu of %zu elements changed (tol 0): %s\n", "rope", pass,
         tp_dtype_name(dt), pass[0] == 'f' ? "V" : "dV", differ, (size_t)ROWS * vn,
         differ == 0 ? "ok" : "FAIL");
  return differ != 0;
}

/* Uploads `in`, rotates it on the device (forward or backward) and downloads. */
static void *rope_run(tp_dtype dt, dev_pool *pool, const float *table, const void *in,
                      int backward) {
  const size_t bytes = N_QKV * tp_dtype_bytes(dt);
  void *dev = dev_upload(pool, in, bytes);
  if (!dev) return NULL;
  const tp_attention_shape shape = {dt, SEQ, BATCH, HQ, HKV, HEAD_DIM};
  cudaError_t err = backward ? tp_launch_rope_bwd(&shape, dev, table, 0)
                             : tp_launch_rope_fwd(&shape, dev, table, 0);
  if (err != cudaSuccess || !sync_ok("rope")) return NULL;
  return download(dev, bytes);
}

static int rope_pass(tp_dtype dt, dev_pool *pool, const float *table, int backward) {
  const char *pass = backward ? "bwd" : "fwd";
  void *in = host_random(dt, N_QKV, backward ? 22 : 21, 1.0f);
  double *ind = to_double(dt, in, N_QKV);
  double *ref = rope_reference(ind, backward ? -1 : 1);
  void *o1 = rope_run(dt, pool, table, in, backward), *o2 = rope_run(dt, pool, table, in, backward);
  int failures = 0;
  if (!o1 || !o2) {
    printf("rope      %s %s: launch failed: FAIL\n", pass, tp_dtype_name(dt));
    failures = 1;
  } else {
    failures += check_cols("rope", pass, dt, backward ? "dQ,dK" : "Q,K", dt, o1, ref, ROWS, QKV_W,
                           0, V_COL0, tol_elt(dt));
    failures += rope_v_untouched(pass, dt, o1, in);
    failures += check_same("rope", pass, dt, "qkv", "two runs", o1, o2, N_QKV, tp_dtype_bytes(dt));
  }
  free(o1);
  free(o2);
  free(ref);
  free(ind);
  free(in);
  return failures;
}

/* The rotation into another buffer: the in-place rotation's bits, V copied
 * (the whole buffer equal, a poisoned element nothing wrote shows), its input
 * left as it was. */
static int rope_into_pass(tp_dtype dt, dev_pool *pool, const float *table) {
  const size_t bytes = N_QKV * tp_dtype_bytes(dt);
  void *in = host_random(dt, N_QKV, 21, 1.0f);
  void *in_place = rope_run(dt, pool, table, in, 0);
  void *src = dev_upload(pool, in, bytes), *dst = dev_alloc(pool, bytes);
  const tp_attention_shape shape = {dt, SEQ, BATCH, HQ, HKV, HEAD_DIM};
  int failures = !in_place || !src || !dst || poison(dt, dst, N_QKV);
  if (!failures)
    failures =
        tp_launch_rope_fwd_into(&shape, src, dst, table, 0) != cudaSuccess || !sync_ok("rope into");
  if (failures) {
    printf("rope      into %s: launch failed: FAIL\n", tp_dtype_name(dt));
  } else {
    void *out = download(dst, bytes), *kept = download(src, bytes);
    failures += check_same("rope", "fwd", dt, "qkv", "into another buffer vs in place", out,
                           in_place, N_QKV, tp_dtype_bytes(dt));
    failures += check_same("rope", "fwd", dt, "qkv", "input of the rotation into another buffer",
                           kept, in, N_QKV, tp_dtype_bytes(dt));
    free(out);
    free(kept);
  }
  free(in_place);
  free(in);
  return failures;
}

static int rope_case(tp_dtype dt) {
  dev_pool pool = {0};
  float *table = dev_alloc(&pool, tp_rope_table_bytes(SEQ, HEAD_DIM));
  int failures =
      !table || tp_launch_rope_table(table, SEQ, HEAD_DIM, TP_ROPE_THETA, 0) != cudaSuccess;
  if (failures) printf("rope      %s: table failed: FAIL\n", tp_dtype_name(dt));
  if (!failures) failures += rope_pass(dt, &pool, table, 0) + rope_pass(dt, &pool, table, 1);
  if (!failures) failures += rope_into_pass(dt, &pool, table);
  dev_pool_free(&pool);
  return failures;
}

/* ---- attention ------------------------------------------------------------------------------ */

static size_t p_index(int b, int h, int s, int j) {
  return (((size_t)b * HQ + (size_t)h) * SEQ + (size_t)s) * SEQ + (size_t)j;
}

typedef struct attn_ref {
  double *p, *o, *dqkv;
} attn_ref;

/* Forward and backward of one (b, h) in float64, straight from the math. */
static void attention_reference_head(const double *qkv, const double *dout, int b, int h,
                                     attn_ref *r) {
  const int kv = h / (HQ / HKV), d = HEAD_DIM, od = Q_COLS;
  const size_t qc = (size_t)h * d, kc = (size_t)(HQ + kv) * d, vc = (size_t)(HQ + HKV + kv) * d;
  const double scale = 1.0 / sqrt((double)d);
  double dp[SEQ];
  for (int s = 0; s < SEQ; ++s) {
    const size_t qs = ((size_t)s * BATCH + (size_t)b) * QKV_W;
    double m = -INFINITY, sum = 0, dsum = 0;
    for (int j = 0; j <= s; ++j) {
      const size_t kj = ((size_t)j * BATCH + (size_t)b) * QKV_W;
      double acc = 0;
      for (int t = 0; t < d; ++t) acc += qkv[qs + qc + t] * qkv[kj + kc + t];
      r->p[p_index(b, h, s, j)] = acc * scale;
      if (acc * scale > m) m = acc * scale;
    }
    for (int j = 0; j <= s; ++j) sum += exp(r->p[p_index(b, h, s, j)] - m);
    for (int j = 0; j <= s; ++j)
      r->p[p_index(b, h, s, j)] = exp(r->p[p_index(b, h, s, j)] - m) / sum;
    const double *dos = dout + ((size_t)s * BATCH + (size_t)b) * od + qc;
    double *os = r->o + ((size_t)s * BATCH + (size_t)b) * od + qc;
    for (int j = 0; j <= s; ++j) {
      const size_t vj = ((size_t)j * BATCH + (size_t)b) * QKV_W + vc;
      const double pj = r->p[p_index(b, h, s, j)];
      dp[j] = 0;
      for (int t = 0; t < d; ++t) {
        os[t] += pj * qkv[vj + t];
        dp[j] += dos[t] * qkv[vj + t];
        r->dqkv[vj + t] += pj * dos[t]; /* dV */
      }
      dsum += pj * dp[j];
    }
    for (int j = 0; j <= s; ++j) {
      const size_t kj = ((size_t)j * BATCH + (size_t)b) * QKV_W;
      const double ds = r->p[p_index(b, h, s, j)] * (dp[j] - dsum) * scale;
      for (int t = 0; t < d; ++t) {
        r->dqkv[qs + qc + t] += ds * qkv[kj + kc + t]; /* dQ */
        r->dqkv[kj + kc + t] += ds * qkv[qs + qc + t]; /* dK */
      }
    }
  }
}

static attn_ref attention_reference(const double *qkv, const double *dout) {
  attn_ref r = {calloc(N_P, sizeof(double)), calloc(N_O, sizeof(double)),
                calloc(N_QKV, sizeof(double))};
  for (int b = 0; b < BATCH; ++b)
    for (int h = 0; h < HQ; ++h) attention_reference_head(qkv, dout, b, h, &r);
  return r;
}

typedef struct attn_dev {
  tp_gemm *gemm;
  tp_attention_shape shape;
  void *qkv, *dout, *out, *p, *dqkv, *ws;
  size_t ws_bytes;
} attn_dev;

typedef struct attn_out {
  void *o, *p, *dqkv;
} attn_out;

static void attn_out_free(attn_out *o) {
  free(o->o);
  free(o->p);
  free(o->dqkv);
}

/* Poisons outputs, saved P and the workspace (so a region read before it is
 * written turns into NaN: the bf16 NaN pattern 0x7fc0 repeated is a NaN as
 * fp32 too), runs forward and backward, downloads. */
static int attention_run(const attn_dev *d, attn_out *o) {
  const tp_dtype dt = d->shape.dtype;
  const size_t e = tp_dtype_bytes(dt), p_elems = tp_attention_saved_bytes(&d->shape) / e;
  int bad = poison(dt, d->out, N_O) | poison(dt, d->p, p_elems) | poison(dt, d->dqkv, N_QKV) |
            poison(TP_BF16, d->ws, d->ws_bytes / 2);
  if (bad) return 1;
  if (tp_attention_forward(d->gemm, &d->shape, d->qkv, d->out, d->p, d->ws, 0) != TP_OK ||
      tp_attention_backward(d->gemm, &d->shape, d->qkv, d->p, d->dout, d->dqkv, d->ws, 0) !=
          TP_OK) {
    printf("attention %s: %s: FAIL\n", tp_dtype_name(dt), tp_last_error());
    return 1;
  }
  if (!sync_ok("attention")) return 1;
  o->o = download(d->out, N_O * e);
  o->p = download(d->p, p_elems * e);
  o->dqkv = download(d->dqkv, N_QKV * e);
  return 0;
}

static int attention_check_ref(tp_dtype dt, const attn_out *o, const attn_ref *r) {
  const double tol = dt == TP_BF16 ? TOL_ATTN_BF16 : TOL_ATTN_FP32;
  const double tol_p = dt == TP_BF16 ? TOL_P_BF16 : TOL_P_FP32;
  int failures = 0;
  failures += check("attention", "fwd", dt, "P", dt, o->p, r->p, N_P, tol_p);
  failures += check("attention", "fwd", dt, "O", dt, o->o, r->o, N_O, tol);
  failures +=
      check_cols("attention", "bwd", dt, "dQ", dt, o->dqkv, r->dqkv, ROWS, QKV_W, 0, Q_COLS, tol);
  failures += check_cols("attention", "bwd", dt, "dK", dt, o->dqkv, r->dqkv, ROWS, QKV_W, Q_COLS,
                         KV_COLS, tol);
  failures += check_cols("attention", "bwd", dt, "dV", dt, o->dqkv, r->dqkv, ROWS, QKV_W, V_COL0,
                         KV_COLS, tol);
  /* Above the diagonal P must be exactly zero, not merely small. */
  size_t nonzero = 0;
  for (int b = 0; b < BATCH; ++b)
    for (int h = 0; h < HQ; ++h)
      for (int s = 0; s < SEQ; ++s)
        for (int j = s + 1; j < SEQ; ++j)
          nonzero += gpu_host_value(dt, o->p, p_index(b, h, s, j)) != 0.0;
  printf("%-9s %-3s %-4s %-8s above the diagonal: %zu nonzero (tol 0): %s\n", "attention", "fwd",
         tp_dtype_name(dt), "P", nonzero, nonzero == 0 ? "ok" : "FAIL");
  return failures + (nonzero != 0);
}

/* Rows of [ROWS, width] in columns [col0, col0 + cols) that must be
 * bit-identical between a and b: every row of another batch element, and
 * the rows of batch element `pb` before position `ps`. Returns how many of
 * them differ; *changed tells whether row (ps, pb) itself differs. */
static size_t causal_differ(const void *a, const void *b, size_t e, size_t width, size_t col0,
                            size_t cols, int ps, int pb, int *changed) {
  size_t differ = 0;
  for (int s = 0; s < SEQ; ++s)
    for (int bb = 0; bb < BATCH; ++bb) {
      const size_t off = (((size_t)s * BATCH + (size_t)bb) * width + col0) * e;
      const int same = memcmp((const char *)a + off, (const char *)b + off, cols * e) == 0;
      if (s == ps && bb == pb) *changed = !same;
      if ((bb != pb || s < ps) && !same) differ++;
    }
  return differ;
}

/* Changes every QKV value of one token (position SEQ/2 of batch element 1)
 * and reruns: O and dQ of earlier tokens of that batch element and all of
 * the other batch elements must keep their bits; the token's own O must
 * change (so the perturbation reached the GEMMs). */
static int attention_causal(attn_dev *d, const void *qkv_host, const attn_out *base) {
  const tp_dtype dt = d->shape.dtype;
  const size_t e = tp_dtype_bytes(dt);
  const int ps = SEQ / 2, pb = 1;
  void *qkv2 = malloc(N_QKV * e);
  memcpy(qkv2, qkv_host, N_QKV * e);
  gpu_fill_host(dt, (char *)qkv2 + ((size_t)ps * BATCH + pb) * QKV_W * e, QKV_W, 99, 2.0f);
  attn_out o = {0};
  int failures = cudaMemcpy(d->qkv, qkv2, N_QKV * e, cudaMemcpyHostToDevice) != cudaSuccess ||
                 attention_run(d, &o);
  if (!failures) {
    int o_changed = 0, dq_changed = 0;
    size_t o_diff = causal_differ(base->o, o.o, e, Q_COLS, 0, Q_COLS, ps, pb, &o_changed);
    size_t dq_diff = causal_differ(base->dqkv, o.dqkv, e, QKV_W, 0, Q_COLS, ps, pb, &dq_changed);
    /* Batch isolation of the backward: every dQKV column of the other batch elements. */
    int unused = 0;
    size_t dkv_diff = causal_differ(base->dqkv, o.dqkv, e, QKV_W, 0, QKV_W, -1, pb, &unused);
    int ok = o_diff == 0 && dq_diff == 0 && dkv_diff == 0 && o_changed;
    printf("%-9s %-3s %-4s %-8s token (s=%d, b=%d) changed: earlier/other-batch rows differing: "
           "O %zu, dQ %zu, other-batch dQKV %zu (tol 0); its own O %s: %s\n",
           "attention", "mask", tp_dtype_name(dt), "causal", ps, pb, o_diff, dq_diff, dkv_diff,
           o_changed ? "changed" : "UNCHANGED", ok ? "ok" : "FAIL");
    failures = !ok;
  } else {
    printf("attention mask %s: rerun failed: FAIL\n", tp_dtype_name(dt));
  }
  attn_out_free(&o);
  free(qkv2);
  return failures;
}

static int attention_case(tp_dtype dt) {
  const size_t e = tp_dtype_bytes(dt);
  void *qkv = host_random(dt, N_QKV, 31, 2.0f);
  void *dout = host_random(dt, N_O, 32, 1.0f);
  double *qkvd = to_double(dt, qkv, N_QKV), *doutd = to_double(dt, dout, N_O);
  attn_ref ref = attention_reference(qkvd, doutd);
  dev_pool pool = {0};
  attn_dev d;
  memset(&d, 0, sizeof d);
  d.shape = (tp_attention_shape){dt, SEQ, BATCH, HQ, HKV, HEAD_DIM};
  d.ws_bytes = tp_attention_workspace_bytes(&d.shape, 1);
  d.qkv = dev_upload(&pool, qkv, N_QKV * e);
  d.dout = dev_upload(&pool, dout, N_O * e);
  d.out = dev_alloc(&pool, N_O * e);
  d.p = dev_alloc(&pool, tp_attention_saved_bytes(&d.shape));
  d.dqkv = dev_alloc(&pool, N_QKV * e);
  d.ws = dev_alloc(&pool, d.ws_bytes);
  int failures = pool.failed;
  if (!failures && tp_gemm_create(32u << 20, &d.gemm) != TP_OK) {
    printf("attention %s: gemm: %s: FAIL\n", tp_dtype_name(dt), tp_last_error());
    failures = 1;
  }
  attn_out o1 = {0}, o2 = {0};
  if (!failures) failures = attention_run(&d, &o1) || attention_run(&d, &o2);
  if (!failures) {
    failures += attention_check_ref(dt, &o1, &ref);
    failures += check_same("attention", "fwd", dt, "O", "two runs", o1.o, o2.o, N_O, e);
    failures += check_same("attention", "fwd", dt, "P", "two runs", o1.p, o2.p, N_P, e);
    failures += check_same("attention", "bwd", dt, "dQKV", "two runs", o1.dqkv, o2.dqkv, N_QKV, e);
    failures += attention_causal(&d, qkv, &o1);
  }
  attn_out_free(&o1);
  attn_out_free(&o2);
  tp_gemm_destroy(d.gemm);
  dev_pool_free(&pool);
  free(ref.p);
  free(ref.o);
  free(ref.dqkv);
  free(qkvd);
  free(doutd);
  free(qkv);
  free(dout);
  return failures;
}

/* ---- SwiGLU --------------------------------------------------------------------------------- */

static int swiglu_case(tp_dtype dt) {
  const size_t n = N_FFN, e = tp_dtype_bytes(dt);
  void *a = host_random(dt, n, 41, 4.0f), *b = host_random(dt, n, 42, 1.0f);
  void *dh = host_random(dt, n, 43, 1.0f);
  double *ad = to_double(dt, a, n), *bd = to_double(dt, b, n), *dhd = to_double(dt, dh, n);
  double *rh = malloc(n * sizeof *rh), *rda = malloc(n * sizeof *rda),
         *rdb = malloc(n * sizeof *rdb);
  for (size_t i = 0; i < n; ++i) {
    const double sg = 1.0 / (1.0 + exp(-ad[i]));
    rh[i] = ad[i] * sg * bd[i];
    rda[i] = dhd[i] * bd[i] * sg * (1.0 + ad[i] * (1.0 - sg));
    rdb[i] = dhd[i] * ad[i] * sg;
  }
  dev_pool pool = {0};
  void *da_ = dev_upload(&pool, a, n * e), *db_ = dev_upload(&pool, b, n * e);
  void *ddh = dev_upload(&pool, dh, n * e), *dhout = dev_alloc(&pool, n * e);
  void *dda = dev_alloc(&pool, n * e), *ddb = dev_alloc(&pool, n * e);
  void *out[2][3] = {{0}};
  int failures = pool.failed;
  for (int run = 0; run < 2 && !failures; ++run) {
    failures |= poison(dt, dhout, n) | poison(dt, dda, n) | poison(dt, ddb, n);
    failures |= tp_launch_swiglu_fwd(dt, da_, db_, dhout, n, 0) != cudaSuccess;
    failures |= tp_launch_swiglu_bwd(dt, ddh, da_, db_, dda, ddb, n, 0) != cudaSuccess;
    if (failures || !sync_ok("swiglu")) {
      failures = 1;
      break;
    }
    out[run][0] = download(dhout, n * e);
    out[run][1] = download(dda, n * e);
    out[run][2] = download(ddb, n * e);
  }
  if (!failures) {
    failures += check("swiglu", "fwd", dt, "h", dt, out[0][0], rh, n, tol_elt(dt));
    failures += check("swiglu", "bwd", dt, "da", dt, out[0][1], rda, n, tol_elt(dt));
    failures += check("swiglu", "bwd", dt, "db", dt, out[0][2], rdb, n, tol_elt(dt));
    for (int k = 0; k < 3; ++k)
      failures += check_same("swiglu", k ? "bwd" : "fwd", dt,
                             k == 0   ? "h"
                             : k == 1 ? "da"
                                      : "db",
                             "two runs", out[0][k], out[1][k], n, e);
    /* In place, as the contract allows: da over a, db over b. */
    if (tp_launch_swiglu_bwd(dt, ddh, da_, db_, da_, db_, n, 0) != cudaSuccess ||
        !sync_ok("swiglu")) {
      failures++;
    } else {
      void *ia = download(da_, n * e), *ib = download(db_, n * e);
      failures +=
          check_same("swiglu", "bwd", dt, "da", "in place vs out of place", ia, out[0][1], n, e);
      failures +=
          check_same("swiglu", "bwd", dt, "db", "in place vs out of place", ib, out[0][2], n, e);
      free(ia);
      free(ib);
    }
  } else {
    printf("swiglu    %s: setup or launch failed: FAIL\n", tp_dtype_name(dt));
  }
  for (int run = 0; run < 2; ++run)
    for (int k = 0; k < 3; ++k) free(out[run][k]);
  dev_pool_free(&pool);
  free(rh);
  free(rda);
  free(rdb);
  free(ad);
  free(bd);
  free(dhd);
  free(a);
  free(b);
  free(dh);
  return failures;
}

/* ---- contracts: refused arguments, workspace formulas --------------------------------------- */

static int refusal(const char *what, int refused) {
  printf("%-9s %-3s %-4s %-8s %s: %s\n", "contract", "-", "-", "refuse", what,
         refused ? "refused, ok" : "ACCEPTED: FAIL");
  return !refused;
}

static int contracts(void) {
  int failures = 0;
  float *dummy = NULL;
  if (cudaMalloc((void **)&dummy, 4096) != cudaSuccess) return 1;
  const tp_attention_shape odd_dim = {TP_FP32, 4, 1, 1, 1, 3};
  failures += refusal("rope with an odd head_dim",
                      tp_launch_rope_fwd(&odd_dim, dummy, dummy, 0) == cudaErrorInvalidValue);
  const tp_attention_shape small = {TP_FP32, 4, 1, 1, 1, 4}; /* 4 rows of 12 floats: 192 bytes */
  failures +=
      refusal("rope into a buffer overlapping its input",
              tp_launch_rope_fwd_into(&small, dummy, dummy + 8, dummy, 0) == cudaErrorInvalidValue);
  failures += refusal("gather of heads past the row's end",
                      tp_launch_attention_gather_heads(TP_FP32, dummy, 64, 32, dummy, 1, 1, 1, 64,
                                                       0) == cudaErrorInvalidValue);
  (void)cudaGetLastError();
  tp_attention_shape odd = {TP_BF16, 16, 1, 3, 2, 64};
  failures +=
      refusal("attention with 3 query heads over 2 KV heads",
              tp_attention_forward(NULL, &odd, dummy, dummy, dummy, dummy, 0) == TP_EREJECT);
  printf("contract  reason given: %s\n", tp_last_error());
  cudaFree(dummy);

  /* The formula of tp_layers.h for Llama 3 8B at TP 2, S = 8192, B = 1, bf16. */
  tp_attention_shape big = {TP_BF16, 8192, 1, 16, 4, 128};
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const size_t sq = (size_t)16 * 8192 * 8192, q = (size_t)16 * 8192 * 128 * 2,
               kv = (size_t)4 * 8192 * 128 * 2;
  const size_t want_fwd = q + 2 * kv + sq * 4, want_bwd = want_fwd + q + kv + sq * 2;
  const size_t got_fwd = tp_attention_workspace_bytes(&big, 0),
               got_bwd = tp_attention_workspace_bytes(&big, 1),
               got_p = tp_attention_saved_bytes(&big);
  int ok = got_fwd == want_fwd && got_bwd == want_bwd && got_p == sq * 2;
  printf("contract  8B TP2 S=8192 B=1 bf16: saved P %.3f GiB, workspace %.3f GiB forward, "
         "%.3f GiB with backward (formula: %.3f, %.3f): %s\n",
         (double)got_p / gib, (double)got_fwd / gib, (double)got_bwd / gib, (double)want_fwd / gib,
         (double)want_bwd / gib, ok ? "ok" : "FAIL");
  return failures + !ok;
}

/* ---- cmocka --------------------------------------------------------------------------------- */

static void run_both(int (*piece)(tp_dtype)) {
  int failures = piece(TP_BF16) + piece(TP_FP32);
  fflush(stdout);
  assert_int_equal(failures, 0);
}

static void test_rmsnorm(void **state) {
  (void)state;
  run_both(rmsnorm_case);
}
static void test_rope(void **state) {
  (void)state;
  run_both(rope_case);
}
static void test_attention(void **state) {
  (void)state;
  run_both(attention_case);
}
static void test_swiglu(void **state) {
  (void)state;
  run_both(swiglu_case);
}
static void test_contracts(void **state) {
  (void)state;
  int failures = contracts();
  fflush(stdout);
  assert_int_equal(failures, 0);
}

int main(void) {
  /* Counted in a child: this process meets CUDA only when there is a device. */
  if (gpu_device_count() == 0) {
    printf("no CUDA device: GPU test skipped\n");
    return GPU_TEST_SKIP;
  }
  if (cudaSetDevice(0) != cudaSuccess) {
    printf("cudaSetDevice(0) failed\n");
    return 1;
  }
  printf("layers: batch %d, seq %d, head_dim %d, %d query / %d KV heads, dim %d, ffn %d\n", BATCH,
         SEQ, HEAD_DIM, HQ, HKV, DIM, FFN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rmsnorm),   cmocka_unit_test(test_rope),
      cmocka_unit_test(test_attention), cmocka_unit_test(test_swiglu),
      cmocka_unit_test(test_contracts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
