/*
 * test_linear.c — GPU test of the TP projections, forward and backward.
 *
 * Every op (ag_linear, ag_linear_multi, linear_rs), dtype (bf16, fp32) and
 * schedule (stock; dist_gemm ce and sm at several chunk counts, ring, auto), with
 * the gathered input saved or gathered again, runs a training step (forward
 * then backward) on a real TP group of each degree (below): batch 3 with the
 * sequence sharded, so a flattening that mixes batches fails; random inputs;
 * outputs and gradients poisoned first. Each rank checks y, dx and dw against
 * a float64 CPU reference built from the unsharded tensors, and dist_gemm
 * against stock: bit-identical where no cross-rank sum is involved (the
 * gather side's y and dw, the scatter side's dx and dw), within a stated
 * tolerance where ranks are summed (the scatter side's y, the gather side's
 * dx, and the scatter side's bias gradient, which sums over ranks); with and
 * without a bias. multimem, ring and impossible shapes must be rejected with a reason.
 *
 * auto's chunk counts (test_auto_chunks, TP 2 up): plans at shapes reaching every branch of
 * kernels/tp_linear.c's documented rule must record the schedule and the
 * forward and backward chunk counts the rule, restated here, gives; and at
 * shapes just above 4 MiB per transfer (wide on the side that moves,
 * narrow on the other, so the float64 reference stays cheap) auto must
 * fuse with different forward and backward counts and a training step
 * must pass the same checks against the reference and stock.
 *
 * Planted faults (TP 2 up), each judged by the reference check, which must
 * FAIL on it after the unplanted outputs (stock, then dist_gemm ce) passed:
 * a misplaced shard on the all-gather side (ag_linear's y with rank q's
 * gathered rows also written at rank q + 1's offset, for every q) and a
 * missing partial on the reduce-scatter side (linear_rs's y less rank q's
 * partial x[:, K_q] · w[:, K_q]ᵀ, for every q).
 *
 * Every test runs once per TP degree (1, 2, 4, 8; gpu_harness.h): cases
 * NAME/tpN, `--tp LIST` selects degrees, a degree above the rank slots is
 * reported skipped. The shapes divide by 8 (tokens 3 x 128, K 256, N 384).
 * bf16 outputs that sum ranks take max(1e-2, 2·2^-8·sqrt(W)) (NCCL's ring
 * rounds after every addition). Exit 77 (skipped) without a GPU.
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
#include "kernels/tp_linear.h"
#include "tests/gpu/gpu_harness.h"

enum { BATCH = 3, SEQ = 128, D_SMALL = 256, D_LARGE = 384, MAXW = TP_MAX_WEIGHTS };

/* ||out - ref|| / ||ref||. bf16 rounds every stored value to 2^-9 relative
 * (the backward's inputs too); fp32 GEMMs over K <= 384 stay far below 1e-5. */
static const double TOL_REF_BF16 = 1e-2, TOL_REF_FP32 = 1e-5;
/* Reduced outputs, dist_gemm against stock: only the rank-sum order differs. */
static const double TOL_SUM_BF16 = 1e-2, TOL_SUM_FP32 = 1e-6;
/* A bf16 sum over W ranks (NCCL's ring rounds after every addition) strays
 * about u·sqrt(W) from the exact sum, u = 2^-8: rank-summed bf16 outputs
 * take at least 2·u·sqrt(W) (bench/stats/numerics.h's rule at depth 1), which
 * passes 1e-2 above TP 2. */
static const double BF16_UNIT_ROUNDOFF = 0x1p-8;

typedef enum { T_Y = 0, T_DX, T_DW, T_DB, N_OUTPUTS } output_kind;
static const char *const OUTPUT_NAMES[] = {"y", "dx", "dw", "db"};

typedef struct host_case {
  tp_dtype dt;
  tp_linear_desc desc;
  int rank, world, gather, n_w;
  size_t e, x_elems, w_elems, y_elems;
  int64_t T, K, N, S_l, seq; /* seq: positions per batch element, T = BATCH · seq */
  /* x [B,seq,K] natural layout; w [N,K]; dy [T,N] seq-major rows; b [N] */
  void *x_full, *w_full[MAXW], *dy_full[MAXW], *b_full[MAXW];
  void *x, *w[MAXW], *dy[MAXW], *b[MAXW]; /* this rank's shards */
  double *ref_y[MAXW], *ref_dx, *ref_dw[MAXW], *ref_db[MAXW];
} host_case;

static size_t bsk(const host_case *c, int64_t b, int64_t s, int64_t k) {
  return ((size_t)b * (size_t)c->seq + (size_t)s) * (size_t)c->K + (size_t)k;
}
/* Global row (seq-major) → batch and sequence position. */
static int64_t row_b(int64_t row) { return row % BATCH; }
static int64_t row_s(int64_t row) { return row / BATCH; }
static double xv(const host_case *c, int64_t row, int64_t k) {
  return gpu_host_value(c->dt, c->x_full, bsk(c, row_b(row), row_s(row), k));
}
static double dyv(const host_case *c, int i, int64_t row, int64_t n) {
  return gpu_host_value(c->dt, c->dy_full[i], (size_t)row * (size_t)c->N + (size_t)n);
}

static void *copy_rows(const host_case *c, const void *src, size_t src_ld, size_t col0, size_t cols,
                       size_t rows, size_t (*row_of)(const host_case *, size_t)) {
  char *out = malloc(rows * cols * c->e);
  for (size_t r = 0; r < rows; ++r)
    memcpy(out + r * cols * c->e, (const char *)src + (row_of(c, r) * src_ld + col0) * c->e,
           cols * c->e);
  return out;
}
static size_t identity_row(const host_case *c, size_t r) {
  (void)c;
  return r;
}
/* Rows a rank holds between layers: its sequence block, or all of them with SP off. */
static int64_t local_rows(const host_case *c) { return !c->desc.sp ? c->T : c->S_l * BATCH; }
static int64_t local_row0(const host_case *c) { return !c->desc.sp ? 0 : c->rank * local_rows(c); }

static size_t own_block_row(const host_case *c, size_t r) { return (size_t)local_row0(c) + r; }

static void make_shards(host_case *c) {
  const int64_t W = c->world, T = c->T, K = c->K, N = c->N;
  /* x in seq-major rows: a copy of the natural layout reordered. */
  void *x_rows = malloc((size_t)T * (size_t)K * c->e);
  for (int64_t row = 0; row < T; ++row)
    memcpy((char *)x_rows + (size_t)row * (size_t)K * c->e,
           (char *)c->x_full + bsk(c, row_b(row), row_s(row), 0) * c->e, (size_t)K * c->e);
  if (c->gather) {
    c->x = copy_rows(c, x_rows, (size_t)K, 0, (size_t)K, (size_t)local_rows(c), own_block_row);
    for (int i = 0; i < c->n_w; ++i) {
      size_t w_bytes = (size_t)(N / W) * (size_t)K * c->e;
      c->w[i] = malloc(w_bytes);
      memcpy(c->w[i], (char *)c->w_full[i] + (size_t)(c->rank * (N / W)) * (size_t)K * c->e,
             w_bytes);
      c->dy[i] = copy_rows(c, c->dy_full[i], (size_t)N, (size_t)(c->rank * (N / W)),
                           (size_t)(N / W), (size_t)T, identity_row);
    }
  } else {
    c->x = copy_rows(c, x_rows, (size_t)K, (size_t)(c->rank * (K / W)), (size_t)(K / W), (size_t)T,
                     identity_row);
    c->w[0] = copy_rows(c, c->w_full[0], (size_t)K, (size_t)(c->rank * (K / W)), (size_t)(K / W),
                        (size_t)N, identity_row);
    c->dy[0] =
        copy_rows(c, c->dy_full[0], (size_t)N, 0, (size_t)N, (size_t)local_rows(c), own_block_row);
  }
  free(x_rows);
}

static double bv(const host_case *c, int i, int64_t n) {
  return c->desc.bias ? gpu_host_value(c->dt, c->b_full[i], (size_t)n) : 0.0;
}

/* db over all T rows of the full gradient, for columns [col0, col0 + cols). */
static double *reference_db(const host_case *c, int i, int64_t col0, int64_t cols) {
  double *db = calloc((size_t)cols, sizeof(double));
  for (int64_t n = 0; n < cols; ++n)
    for (int64_t row = 0; row < c->T; ++row) db[n] += dyv(c, i, row, col0 + n);
  return db;
}

/* The unsharded tensors in float64 (x in seq-major rows), converted once:
 * the reference's loops then run over plain arrays, fast enough for the
 * shapes at which auto fuses. */
typedef struct dense {
  double *x, *w[MAXW], *dy[MAXW]; /* [T, K], [N, K], [T, N] */
} dense;

/* n zeroed doubles; the reference cannot go on without them. */
static double *zeros(size_t n) {
  double *p = calloc(n ? n : 1, sizeof(double));
  if (!p) abort();
  return p;
}

static dense dense_make(const host_case *c) {
  dense f = {0};
  const int64_t T = c->T, K = c->K, N = c->N;
  f.x = zeros((size_t)(T * K));
  for (int64_t row = 0; row < T; ++row)
    for (int64_t k = 0; k < K; ++k) f.x[row * K + k] = xv(c, row, k);
  for (int i = 0; i < c->n_w; ++i) {
    f.w[i] = zeros((size_t)(N * K));
    f.dy[i] = zeros((size_t)(T * N));
    for (size_t j = 0; j < (size_t)(N * K); ++j) f.w[i][j] = gpu_host_value(c->dt, c->w_full[i], j);
    for (size_t j = 0; j < (size_t)(T * N); ++j)
      f.dy[i][j] = gpu_host_value(c->dt, c->dy_full[i], j);
  }
  return f;
}

static void dense_free(dense *f) {
  free(f->x);
  for (int i = 0; i < MAXW; ++i) {
    free(f->w[i]);
    free(f->dy[i]);
  }
}

/* Column-parallel (gather side): y_i = x · w_i[rank's rows]ᵀ + b_i for all T
 * rows; dx = Σ_i dy_i · w_i for this rank's rows; dw_i = dy_i[:, rank's
 * columns]ᵀ · x. Every sum runs in index order. */
static void reference_gather(host_case *c, const dense *f) {
  const int64_t W = c->world, T = c->T, K = c->K, N = c->N, r = c->rank;
  const int64_t rows_local = local_rows(c), row0 = local_row0(c), Nl = N / W;
  c->ref_dx = zeros((size_t)(rows_local * K));
  for (int i = 0; i < c->n_w; ++i) {
    const double *w = f->w[i], *dy = f->dy[i];
    double *y = c->ref_y[i] = zeros((size_t)(T * Nl));
    double *dw = c->ref_dw[i] = zeros((size_t)(Nl * K));
    for (int64_t row = 0; row < T; ++row)
      for (int64_t n = 0; n < Nl; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += f->x[row * K + k] * w[(r * Nl + n) * K + k];
        y[row * Nl + n] = acc + bv(c, i, r * Nl + n);
      }
    for (int64_t row = 0; row < rows_local; ++row)
      for (int64_t n = 0; n < N; ++n) {
        const double d = dy[(row0 + row) * N + n];
        for (int64_t k = 0; k < K; ++k) c->ref_dx[row * K + k] += d * w[n * K + k];
      }
    for (int64_t row = 0; row < T; ++row)
      for (int64_t n = 0; n < Nl; ++n) {
        const double d = dy[row * N + r * Nl + n];
        for (int64_t k = 0; k < K; ++k) dw[n * K + k] += d * f->x[row * K + k];
      }
    c->ref_db[i] = reference_db(c, i, r * Nl, Nl);
  }
}

/* Row-parallel (scatter side): y = x · wᵀ + b for this rank's rows (the
 * sum over all K); dx = dy · w[:, rank's columns] and dw = dyᵀ · x[:,
 * rank's columns] over all T rows. */
static void reference_scatter(host_case *c, const dense *f) {
  const int64_t W = c->world, T = c->T, K = c->K, N = c->N, r = c->rank;
  const int64_t rows_local = local_rows(c), row0 = local_row0(c), Kl = K / W;
  const double *w = f->w[0], *dy = f->dy[0];
  double *y = c->ref_y[0] = zeros((size_t)(rows_local * N));
  double *dx = c->ref_dx = zeros((size_t)(T * Kl));
  double *dw = c->ref_dw[0] = zeros((size_t)(N * Kl));
  for (int64_t row = 0; row < rows_local; ++row)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += f->x[(row0 + row) * K + k] * w[n * K + k];
      y[row * N + n] = acc + bv(c, 0, n);
    }
  for (int64_t row = 0; row < T; ++row)
    for (int64_t n = 0; n < N; ++n) {
      const double d = dy[row * N + n];
      for (int64_t k = 0; k < Kl; ++k) {
        dx[row * Kl + k] += d * w[n * K + r * Kl + k];
        dw[n * Kl + k] += d * f->x[row * K + r * Kl + k];
      }
    }
  c->ref_db[0] = reference_db(c, 0, 0, N);
}

static void make_reference(host_case *c) {
  if (c->n_w < 1) abort(); /* as build_case checked; said again for the static analyser */
  dense f = dense_make(c);
  if (c->gather) reference_gather(c, &f);
  else reference_scatter(c, &f);
  dense_free(&f);
}

/* The small shape every schedule runs at: batch 3, 128 positions. */
static tp_linear_desc small_desc(tp_op kind, tp_dtype dt, int bias, int sp_off) {
  const int gather = kind != TP_OP_LINEAR_RS;
  return (tp_linear_desc){.op = kind,
                          .dtype = dt,
                          .tokens = (int64_t)BATCH * SEQ,
                          .in_features = gather ? D_SMALL : D_LARGE,
                          .out_features = gather ? D_LARGE : D_SMALL,
                          .n_weights = kind == TP_OP_AG_LINEAR_MULTI ? 2 : 1,
                          .backward = 1,
                          .sp = !sp_off,
                          .bias = bias};
}

/* Random tensors of desc's shape (tokens: BATCH times a multiple of the
 * world), this rank's shards and the float64 reference. */
static void build_case(host_case *c, const tp_linear_desc *desc, int rank, int world) {
  memset(c, 0, sizeof *c);
  const tp_dtype dt = desc->dtype;
  c->desc = *desc;
  c->dt = dt;
  c->rank = rank;
  c->world = world;
  c->gather = desc->op != TP_OP_LINEAR_RS;
  c->n_w = desc->n_weights;
  c->e = tp_dtype_bytes(dt);
  c->T = desc->tokens;
  c->seq = c->T / BATCH;
  c->K = desc->in_features;
  c->N = desc->out_features;
  c->S_l = c->seq / world;
  /* every rank holds rows and columns of every tensor: an empty shard is a mistake here */
  if (c->S_l < 1 || c->K < world || c->N < world || c->n_w < 1 || c->n_w > MAXW) abort();
  c->x_full = malloc((size_t)(c->T * c->K) * c->e);
  gpu_fill_host(dt, c->x_full, (size_t)(c->T * c->K), 11, 1.0f);
  for (int i = 0; i < c->n_w; ++i) {
    c->w_full[i] = malloc((size_t)(c->N * c->K) * c->e);
    gpu_fill_host(dt, c->w_full[i], (size_t)(c->N * c->K), 100 + (uint64_t)i,
                  1.0f / sqrtf((float)c->K));
    c->dy_full[i] = malloc((size_t)(c->T * c->N) * c->e);
    gpu_fill_host(dt, c->dy_full[i], (size_t)(c->T * c->N), 200 + (uint64_t)i, 1.0f);
    c->b_full[i] = malloc((size_t)c->N * c->e);
    gpu_fill_host(dt, c->b_full[i], (size_t)c->N, 300 + (uint64_t)i, 0.5f);
    /* column-parallel: this rank's slice; row-parallel: the whole (replicated) bias */
    size_t b_cols = (size_t)(c->gather ? c->N / world : c->N);
    c->b[i] = malloc(b_cols * c->e);
    memcpy(c->b[i], (char *)c->b_full[i] + (size_t)(c->gather ? rank * (c->N / world) : 0) * c->e,
           b_cols * c->e);
  }
  make_shards(c);
  make_reference(c);
}

static void free_case(host_case *c) {
  free(c->x_full);
  free(c->x);
  free(c->ref_dx);
  for (int i = 0; i < MAXW; ++i) {
    free(c->w_full[i]);
    free(c->dy_full[i]);
    free(c->w[i]);
    free(c->dy[i]);
    free(c->ref_y[i]);
    free(c->ref_dw[i]);
    free(c->b_full[i]);
    free(c->b[i]);
    free(c->ref_db[i]);
  }
}

/* ---- device side --------------------------------------------------------------- */

typedef struct dev_case {
  void *x, *w[MAXW], *dy[MAXW], *y[MAXW], *dx, *dw[MAXW], *b[MAXW], *db[MAXW], *saved;
} dev_case;

static int dev_copy_in(void **dst, const void *src, size_t bytes) {
  return cudaMalloc(dst, bytes) != cudaSuccess ||
         cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess;
}

static int upload(const host_case *c, const tp_linear_plan *p, dev_case *d) {
  memset(d, 0, sizeof *d);
  int bad = dev_copy_in(&d->x, c->x, tp_linear_x_elems(p) * c->e);
  bad |= cudaMalloc(&d->dx, tp_linear_x_elems(p) * c->e) != cudaSuccess;
  bad |= cudaMalloc(&d->saved, (size_t)(c->T * c->K) * c->e) != cudaSuccess;
  for (int i = 0; i < c->n_w; ++i) {
    bad |= dev_copy_in(&d->w[i], c->w[i], tp_linear_w_elems(p) * c->e);
    bad |= dev_copy_in(&d->dy[i], c->dy[i], tp_linear_y_elems(p) * c->e);
    bad |= cudaMalloc(&d->y[i], tp_linear_y_elems(p) * c->e) != cudaSuccess;
    bad |= cudaMalloc(&d->dw[i], tp_linear_w_elems(p) * c->e) != cudaSuccess;
    bad |= dev_copy_in(&d->b[i], c->b[i], tp_linear_b_elems(p) * c->e);
    bad |= cudaMalloc(&d->db[i], tp_linear_b_elems(p) * c->e) != cudaSuccess;
  }
  return bad;
}

static void release(dev_case *d) {
  cudaFree(d->x);
  cudaFree(d->dx);
  cudaFree(d->saved);
  for (int i = 0; i < MAXW; ++i) {
    cudaFree(d->w[i]);
    cudaFree(d->dy[i]);
    cudaFree(d->y[i]);
    cudaFree(d->dw[i]);
    cudaFree(d->b[i]);
    cudaFree(d->db[i]);
  }
}

/* Host copies of one run's outputs: y[i], dx, dw[i]. */
typedef struct outputs {
  void *y[MAXW], *dx, *dw[MAXW], *db[MAXW];
} outputs;

static void free_outputs(outputs *o) {
  free(o->dx);
  for (int i = 0; i < MAXW; ++i) {
    free(o->y[i]);
    free(o->dw[i]);
    free(o->db[i]);
  }
  memset(o, 0, sizeof *o);
}

static void *download(const void *dev, size_t bytes) {
  void *h = malloc(bytes);
  if (cudaMemcpy(h, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) memset(h, 0xff, bytes);
  return h;
}

/* Poisons the outputs, runs `repeat` steps back to back (flags and barriers
 * reused while the host runs ahead), and downloads. */
static int run_plan(tp_group *g, const host_case *c, const tp_linear_plan *p, dev_case *d,
                    int repeat, outputs *o) {
  if (tp_linear_prepare(g, p) != TP_OK) {
    fprintf(stderr, "rank %d: prepare: %s\n", g->rank, tp_last_error());
    return 1;
  }
  tp_linear_tensors t;
  memset(&t, 0, sizeof t);
  t.x = d->x;
  t.dx = d->dx;
  t.saved = p->desc.save_gathered ? d->saved : NULL;
  int bad = tp_launch_poison(c->dt, d->dx, tp_linear_x_elems(p), g->main_stream) != cudaSuccess;
  for (int i = 0; i < c->n_w; ++i) {
    t.w[i] = d->w[i];
    t.dy[i] = d->dy[i];
    t.y[i] = d->y[i];
    t.dw[i] = d->dw[i];
    t.b[i] = d->b[i];
    t.db[i] = d->db[i];
    bad |= tp_launch_poison(c->dt, d->db[i], tp_linear_b_elems(p), g->main_stream) != cudaSuccess;
    bad |= tp_launch_poison(c->dt, d->y[i], tp_linear_y_elems(p), g->main_stream) != cudaSuccess;
    bad |= tp_launch_poison(c->dt, d->dw[i], tp_linear_w_elems(p), g->main_stream) != cudaSuccess;
  }
  for (int it = 0; it < repeat && !bad; ++it) {
    if (tp_linear_step(g, p, &t) != TP_OK) {
      fprintf(stderr, "rank %d: step: %s\n", g->rank, tp_last_error());
      return 1;
    }
  }
  cudaError_t err = cudaStreamSynchronize(g->main_stream);
  if (err != cudaSuccess || bad) {
    fprintf(stderr, "rank %d: %s: %s\n", g->rank, tp_backend_name(p->backend),
            cudaGetErrorString(err));
    return 1;
  }
  o->dx = download(d->dx, tp_linear_x_elems(p) * c->e);
  for (int i = 0; i < c->n_w; ++i) {
    o->y[i] = download(d->y[i], tp_linear_y_elems(p) * c->e);
    o->dw[i] = download(d->dw[i], tp_linear_w_elems(p) * c->e);
    o->db[i] = download(d->db[i], tp_linear_b_elems(p) * c->e);
  }
  return 0;
}

static double rel_err_ref(const host_case *c, const void *out, const double *ref, size_t n,
                          int *bad) {
  double d2 = 0, r2 = 0;
  *bad = 0;
  for (size_t i = 0; i < n; ++i) {
    double v = gpu_host_value(c->dt, out, i);
    if (!isfinite(v)) {
      (*bad)++;
      continue;
    }
    d2 += (v - ref[i]) * (v - ref[i]);
    r2 += ref[i] * ref[i];
  }
  return sqrt(d2 / (r2 > 0 ? r2 : 1));
}

static double rel_err_pair(const host_case *c, const void *a, const void *b, size_t n,
                           size_t *differ) {
  double d2 = 0, r2 = 0;
  *differ = 0;
  for (size_t i = 0; i < n; ++i) {
    if (memcmp((const char *)a + i * c->e, (const char *)b + i * c->e, c->e) != 0) (*differ)++;
    double x = gpu_host_value(c->dt, a, i), y = gpu_host_value(c->dt, b, i);
    d2 += (x - y) * (x - y);
    r2 += y * y;
  }
  return sqrt(d2 / (r2 > 0 ? r2 : 1));
}

typedef struct variant {
  tp_backend backend;
  tp_schedule schedule;
  int chunks;
  int save_gathered;
} variant;

static const variant VARIANTS[] = {
    {TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, 0}, {TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, 1},
    {TP_BACKEND_DIST, TP_SCHED_AUTO, 0, 0},  {TP_BACKEND_DIST, TP_SCHED_CE, 1, 0},
    {TP_BACKEND_DIST, TP_SCHED_CE, 2, 1},    {TP_BACKEND_DIST, TP_SCHED_CE, 4, 0},
    {TP_BACKEND_DIST, TP_SCHED_SM, 1, 1},    {TP_BACKEND_DIST, TP_SCHED_SM, 3, 0},
    {TP_BACKEND_DIST, TP_SCHED_SM, 4, 1},    {TP_BACKEND_DIST, TP_SCHED_RING, 2, 0},
};

/* Whether an output involves a sum over ranks (and so may differ from stock in rounding). */
static int is_rank_summed(const host_case *c, output_kind k) {
  return c->gather ? k == T_DX : (k == T_Y || k == T_DB);
}

/* The tolerance of output k: base, widened with the rank count where ranks are summed. */
static double tolerance_of(const host_case *c, output_kind k, double base) {
  if (c->dt != TP_BF16 || !is_rank_summed(c, k)) return base;
  return fmax(base, 2.0 * BF16_UNIT_ROUNDOFF * sqrt((double)c->world));
}

/* One output's judgement: against the float64 reference, and against stock when given. */
typedef struct verdict {
  double err, vs, tol_ref, tol_sum;
  int unwritten;
  size_t differ;
  const char *rule;
  int ok;
} verdict;

/* The rule check_outputs applies to output k of weight i (out: its host copy). */
static verdict judge_output(const host_case *c, const tp_linear_plan *p, output_kind k, int i,
                            const void *out, const void *st) {
  const double *refs[N_OUTPUTS] = {c->ref_y[i], c->ref_dx, c->ref_dw[i], c->ref_db[i]};
  const size_t counts[N_OUTPUTS] = {tp_linear_y_elems(p), tp_linear_x_elems(p),
                                    tp_linear_w_elems(p), tp_linear_b_elems(p)};
  verdict v = {0};
  v.tol_ref = tolerance_of(c, k, c->dt == TP_BF16 ? TOL_REF_BF16 : TOL_REF_FP32);
  v.tol_sum = tolerance_of(c, k, c->dt == TP_BF16 ? TOL_SUM_BF16 : TOL_SUM_FP32);
  v.err = rel_err_ref(c, out, refs[k], counts[k], &v.unwritten);
  v.ok = v.unwritten == 0 && v.err <= v.tol_ref;
  v.rule = "reference";
  if (!st) return v;
  v.vs = rel_err_pair(c, out, st, counts[k], &v.differ);
  if (is_rank_summed(c, k)) {
    v.ok = v.ok && v.vs <= v.tol_sum;
    v.rule = "rank-summed: tolerance vs stock";
  } else {
    v.ok = v.ok && v.differ == 0;
    v.rule = "no rank sum: bit-identical to stock";
  }
  return v;
}

static const void *output_of(const outputs *o, output_kind k, int i) {
  const void *outs[N_OUTPUTS] = {o->y[i], o->dx, o->dw[i], o->db[i]};
  return outs[k];
}

static int check_outputs(tp_group *g, const host_case *c, const tp_linear_plan *p, const outputs *o,
                         const outputs *stock) {
  int failures = 0;
  for (int i = 0; i < c->n_w; ++i)
    for (int k = 0; k < N_OUTPUTS; ++k) {
      if (k == T_DX && i > 0) continue; /* one dx for all weights */
      if (k == T_DB && !c->desc.bias) continue;
      const verdict v = judge_output(c, p, (output_kind)k, i, output_of(o, (output_kind)k, i),
                                     stock ? output_of(stock, (output_kind)k, i) : NULL);
      printf("rank %d: TP %d %-15s %s %-9s %-4s x%d sp=%s save=%d bias=%d %-2s[%d]: vs fp64 %.2e "
             "(tol %.1e) unwritten %d; vs stock %.2e (tol %.1e), %zu differ (%s): %s\n",
             g->rank, g->world, tp_op_name(c->desc.op), tp_dtype_name(c->dt),
             tp_backend_name(p->backend), tp_schedule_name(p->schedule), p->chunks,
             p->desc.sp ? "on" : "off", p->desc.save_gathered, p->desc.bias, OUTPUT_NAMES[k], i,
             v.err, v.tol_ref, v.unwritten, v.vs, v.tol_sum, v.differ, v.rule,
             v.ok ? "ok" : "FAIL");
      failures += !v.ok;
    }
  return failures;
}

static int check_rejections(tp_group *g, const tp_linear_desc *desc) {
  tp_linear_plan p;
  int failures = 0;
  char multimem_said[sizeof p.reason] = "(not asked at TP 1)";
  if (g->world > 1) {
    tp_rc rc = tp_linear_plan_make(g, desc, TP_BACKEND_DIST, TP_SCHED_MULTIMEM, 0, &p);
    snprintf(multimem_said, sizeof multimem_said, "%s", p.reason);
    if (rc != TP_EREJECT || strstr(p.reason, "multimem") == NULL) {
      fprintf(stderr, "rank %d: multimem not rejected with a reason ('%s')\n", g->rank, p.reason);
      failures++;
    }
    tp_linear_desc odd = *desc;
    odd.tokens = desc->tokens + 1;
    if (tp_linear_plan_make(g, &odd, TP_BACKEND_DIST, TP_SCHED_CE, 0, &p) != TP_EREJECT) {
      fprintf(stderr, "rank %d: tokens not divisible by TP were accepted\n", g->rank);
      failures++;
    }
    if (tp_linear_plan_make(g, desc, TP_BACKEND_DIST, TP_SCHED_CE, 7, &p) != TP_EREJECT) {
      fprintf(stderr, "rank %d: 7 chunks were accepted\n", g->rank);
      failures++;
    }
  } else if (tp_linear_plan_make(g, desc, TP_BACKEND_DIST, TP_SCHED_CE, 0, &p) != TP_EREJECT) {
    fprintf(stderr, "rank 0: dist_gemm at TP 1 was accepted\n");
    failures++;
  }
  printf("rank %d: rejections checked (%d failure(s)); multimem said: %s\n", g->rank, failures,
         multimem_said);
  return failures;
}

static int run_dtype(tp_group *g, tp_op kind, tp_dtype dt, int bias, int sp_off) {
  host_case c;
  const tp_linear_desc desc0 = small_desc(kind, dt, bias, sp_off);
  build_case(&c, &desc0, g->rank, g->world);
  tp_linear_plan shape;
  if (tp_linear_plan_make(g, &c.desc, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &shape) != TP_OK) {
    fprintf(stderr, "rank %d: plan: %s\n", g->rank, tp_last_error());
    free_case(&c);
    return 1;
  }
  dev_case d;
  int failures = upload(&c, &shape, &d);
  outputs stock = {0};
  int have_stock = 0;
  for (size_t v = 0; v < sizeof VARIANTS / sizeof VARIANTS[0] && !failures; ++v) {
    tp_linear_desc desc = c.desc;
    desc.save_gathered = VARIANTS[v].save_gathered && c.gather;
    if (VARIANTS[v].save_gathered && (!c.gather || sp_off)) continue;
    tp_linear_plan p;
    tp_rc rc = tp_linear_plan_make(g, &desc, VARIANTS[v].backend, VARIANTS[v].schedule,
                                   VARIANTS[v].chunks, &p);
    if (sp_off && VARIANTS[v].backend == TP_BACKEND_DIST) {
      /* dist_gemm without sequence parallelism is refused, never run as something else */
      int ok = g->world == 1 || (rc == TP_EREJECT && strstr(p.reason, "sequence parallelism"));
      printf("rank %d: %s sp=off dist_gemm %s: %s: %s\n", g->rank, tp_op_name(kind),
             tp_schedule_name(VARIANTS[v].schedule), rc == TP_EREJECT ? p.reason : "accepted",
             ok ? "ok" : "FAIL");
      failures += !ok;
      continue;
    }
    if (rc == TP_EREJECT && g->world == 1 && VARIANTS[v].backend == TP_BACKEND_DIST) continue;
    if (VARIANTS[v].backend == TP_BACKEND_DIST && VARIANTS[v].schedule == TP_SCHED_RING &&
        g->world > 2) {
      /* beyond TP 2 the ring is refused by its rule (no forwarding ring is built), never run as
       * another schedule */
      int ok = rc == TP_EREJECT && strstr(p.reason, "ring") != NULL;
      printf("rank %d: %s %s dist_gemm ring at TP %d: %s: %s\n", g->rank, tp_op_name(kind),
             tp_dtype_name(dt), g->world, rc == TP_EREJECT ? p.reason : "accepted",
             ok ? "ok" : "FAIL");
      failures += !ok;
      continue;
    }
    if (rc != TP_OK) {
      fprintf(stderr, "rank %d: plan: %s\n", g->rank, tp_last_error());
      failures++;
      break;
    }
    if (VARIANTS[v].backend == TP_BACKEND_DIST && VARIANTS[v].schedule == TP_SCHED_AUTO) {
      /* transfers of a few KiB: auto must take the recorded stock path, not fuse */
      int ok = p.schedule == TP_SCHED_NCCL && strstr(p.reason, "stock path") != NULL;
      printf("rank %d: %s %s dist_gemm auto at %zu bytes per transfer chose %s (%s): %s\n", g->rank,
             tp_op_name(kind), tp_dtype_name(dt),
             (size_t)p.shard_rows * (size_t)(c.gather ? c.K : c.N) * c.e,
             tp_schedule_name(p.schedule), p.reason, ok ? "ok" : "FAIL");
      failures += !ok;
    }
    outputs o = {0};
    if (run_plan(g, &c, &p, &d, 3, &o)) {
      failures++;
      free_outputs(&o);
      break;
    }
    failures += check_outputs(g, &c, &p, &o, have_stock ? &stock : NULL);
    if (!have_stock) {
      stock = o;
      have_stock = 1;
    } else {
      free_outputs(&o);
    }
  }
  if (!sp_off) failures += check_rejections(g, &c.desc);
  free_outputs(&stock);
  release(&d);
  free_case(&c);
  return failures;
}

static int body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  tp_op kind = *(const tp_op *)ctx;
  int failures = 0;
  for (int bias = 0; bias <= 1; ++bias)
    failures += run_dtype(g, kind, TP_BF16, bias, 0) + run_dtype(g, kind, TP_FP32, bias, 0);
  /* sequence parallelism off: stock only, with a bias */
  failures += run_dtype(g, kind, TP_BF16, 1, 1) + run_dtype(g, kind, TP_FP32, 1, 1);
  fflush(stdout);
  return failures ? 1 : 0;
}

/* ---- auto's chunk counts, forward and backward ------------------------------------- */

/* kernels/tp_linear.c's documented rule for dist_gemm auto, restated with
 * its constants so that plans can be checked against it:
 *   - below 4 MiB per rank and forward transfer (S rows of the gathered
 *     input, K wide, or of a destination's partial, N wide): the stock path,
 *     schedule nccl, one chunk each way;
 *   - otherwise ce, and each pass chunks for its own pipeline. The gather
 *     pipeline (the all-gather side's forward, the reduce-scatter side's
 *     backward) takes one chunk when the model's pushes, (W-1)·S·row bytes
 *     at 350 GB/s, take at most 0.75 of the local shard's GEMM,
 *     2·S·(N/W)·K·n_weights FLOP at 650 (bf16) or 50 (fp32) TFLOP/s, and
 *     otherwise the most of 4, 2 that divides S into chunks of >= 512 rows.
 *     The reduce-scatter pipeline (the other two passes) takes two chunks
 *     when S is even and S/2 >= 512 rows, else one;
 *   - a forward-only plan keeps one backward chunk. */
enum { AUTO_FUSE_MIN_BYTES = 4 << 20, AUTO_MIN_CHUNK_ROWS = 512, AUTO_MAX_CHUNKS = 4 };
static const double MODEL_PUSH_BYTES_PER_S = 350e9, MODEL_HIDDEN_SHARE = 0.75;

/* Bytes of one row a forward transfer moves (K wide gathered, N wide scattered). */
static size_t plan_row_bytes(const tp_linear_plan *p) {
  const int64_t width = p->desc.op == TP_OP_LINEAR_RS ? p->desc.out_features : p->desc.in_features;
  return (size_t)width * tp_dtype_bytes(p->desc.dtype);
}

static int rule_gather_chunks(const tp_linear_plan *p) {
  const tp_linear_desc *d = &p->desc;
  const int64_t S = p->shard_rows;
  const double push_s =
      (double)(p->world - 1) * (double)S * (double)plan_row_bytes(p) / MODEL_PUSH_BYTES_PER_S;
  const double gemm_s = 2.0 * (double)S * ((double)d->out_features / p->world) *
                        (double)d->in_features * (double)d->n_weights /
                        (d->dtype == TP_BF16 ? 650e12 : 50e12);
  if (push_s <= MODEL_HIDDEN_SHARE * gemm_s) return 1;
  for (int c = AUTO_MAX_CHUNKS; c > 1; c /= 2)
    if (S % c == 0 && S / c >= AUTO_MIN_CHUNK_ROWS) return c;
  return 1;
}

static int rule_scatter_chunks(const tp_linear_plan *p) {
  return p->shard_rows % 2 == 0 && p->shard_rows / 2 >= AUTO_MIN_CHUNK_ROWS ? 2 : 1;
}

typedef struct auto_choice {
  tp_schedule schedule;
  int chunks, bwd_chunks;
} auto_choice;

/* What the rule gives for a plan's shape (sizes read from the plan). */
static auto_choice rule_choice(const tp_linear_plan *p) {
  const int gather = p->desc.op != TP_OP_LINEAR_RS;
  if ((size_t)p->shard_rows * plan_row_bytes(p) < AUTO_FUSE_MIN_BYTES)
    return (auto_choice){TP_SCHED_NCCL, 1, 1};
  auto_choice a = {TP_SCHED_CE, gather ? rule_gather_chunks(p) : rule_scatter_chunks(p), 1};
  if (p->desc.backward) a.bwd_chunks = gather ? rule_scatter_chunks(p) : rule_gather_chunks(p);
  return a;
}

/* An auto plan against the rule: schedule, both chunk counts, a reason. */
static int check_auto_plan(int rank, const char *what, const tp_linear_plan *p) {
  const auto_choice want = rule_choice(p);
  const int ok = p->schedule == want.schedule && p->chunks == want.chunks &&
                 p->bwd_chunks == want.bwd_chunks && p->reason[0] != '\0';
  printf("rank %d: auto %-31s %-15s %-4s S=%lld K=%lld N=%lld W=%d bwd=%d, %.2f MiB per transfer: "
         "%s x%d, backward x%d; rule %s x%d, backward x%d: %s (%s)\n",
         rank, what, tp_op_name(p->desc.op), tp_dtype_name(p->desc.dtype), (long long)p->shard_rows,
         (long long)p->desc.in_features, (long long)p->desc.out_features, p->world,
         p->desc.backward, (double)((size_t)p->shard_rows * plan_row_bytes(p)) / 1048576.0,
         tp_schedule_name(p->schedule), p->chunks, p->bwd_chunks, tp_schedule_name(want.schedule),
         want.chunks, want.bwd_chunks, ok ? "ok" : "FAIL", p->reason);
  return !ok;
}

typedef struct auto_shape {
  const char *what;
  tp_op kind;
  tp_dtype dt;
  int64_t rows, K, N; /* rows per rank; the unsharded weight's K and N */
  int backward;
} auto_shape;

/* Shapes that reach every branch of the rule at TP 2 (1, 2 and 4 chunks
 * each way, the stock path on either side of 4 MiB); on larger groups the
 * expectation moves with W: it is computed, not tabled. Planned only. */
static const auto_shape AUTO_SHAPES[] = {
    {"gather, GEMM hides the pushes", TP_OP_AG_LINEAR, TP_BF16, 4096, 8192, 28672, 1},
    {"two weights, GEMM hides", TP_OP_AG_LINEAR_MULTI, TP_BF16, 2048, 8192, 28672, 1},
    {"gather, pushes exposed, 4 MiB", TP_OP_AG_LINEAR, TP_BF16, 2048, 1024, 1024, 1},
    {"gather, just under 4 MiB", TP_OP_AG_LINEAR, TP_BF16, 2040, 1024, 1024, 1},
    {"gather fp32, GEMM hides", TP_OP_AG_LINEAR, TP_FP32, 1536, 1024, 1024, 1},
    {"gather, forward only", TP_OP_AG_LINEAR, TP_BF16, 2048, 2048, 1024, 0},
    {"scatter, GEMM hides", TP_OP_LINEAR_RS, TP_BF16, 4096, 28672, 8192, 1},
    {"scatter, too few rows to chunk", TP_OP_LINEAR_RS, TP_BF16, 1000, 1024, 8192, 1},
    {"scatter fp32, pushes exposed", TP_OP_LINEAR_RS, TP_FP32, 2048, 256, 2048, 1},
};

static int check_auto_shapes(tp_group *g) {
  int failures = 0;
  for (size_t i = 0; i < sizeof AUTO_SHAPES / sizeof AUTO_SHAPES[0]; ++i) {
    const auto_shape *a = &AUTO_SHAPES[i];
    const tp_linear_desc desc = {.op = a->kind,
                                 .dtype = a->dt,
                                 .tokens = a->rows * g->world,
                                 .in_features = a->K,
                                 .out_features = a->N,
                                 .n_weights = a->kind == TP_OP_AG_LINEAR_MULTI ? 2 : 1,
                                 .backward = a->backward,
                                 .sp = 1};
    tp_linear_plan p;
    if (tp_linear_plan_make(g, &desc, TP_BACKEND_DIST, TP_SCHED_AUTO, 0, &p) != TP_OK) {
      printf("rank %d: auto %s: plan: %s: FAIL\n", g->rank, a->what, tp_last_error());
      failures++;
      continue;
    }
    failures += check_auto_plan(g->rank, a->what, &p);
  }
  return failures;
}

/* Shapes at which auto fuses that the float64 CPU reference still checks
 * in a fraction of a second: the side that moves is 1024 wide, the other
 * 8 columns per rank. 2112 rows per rank (batch 3 x 704 positions) make
 * four chunks of at least 512 rows; bf16, as trained. */
enum { AUTO_RUN_POSITIONS = 704, AUTO_RUN_WIDE = 1024, AUTO_RUN_NARROW = 8 };

static tp_linear_desc auto_run_desc(tp_op kind, int world, int bias) {
  const int gather = kind != TP_OP_LINEAR_RS;
  const int64_t narrow = (int64_t)AUTO_RUN_NARROW * world;
  return (tp_linear_desc){.op = kind,
                          .dtype = TP_BF16,
                          .tokens = (int64_t)BATCH * AUTO_RUN_POSITIONS * world,
                          .in_features = gather ? AUTO_RUN_WIDE : narrow,
                          .out_features = gather ? narrow : AUTO_RUN_WIDE,
                          .n_weights = kind == TP_OP_AG_LINEAR_MULTI ? 2 : 1,
                          .backward = 1,
                          .sp = 1,
                          .bias = bias};
}

/* A training step of auto at a fusing shape: the plan follows the rule,
 * fuses, and counts its forward and backward chunks apart (they differ
 * here); run twice back to back, its outputs match the float64 reference
 * and stock (bit for bit where no rank sum is involved). */
static int run_auto_case(tp_group *g, tp_op kind, int bias) {
  const tp_linear_desc desc = auto_run_desc(kind, g->world, bias);
  host_case c;
  build_case(&c, &desc, g->rank, g->world);
  tp_linear_plan stock_plan, auto_plan;
  if (tp_linear_plan_make(g, &desc, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &stock_plan) != TP_OK ||
      tp_linear_plan_make(g, &desc, TP_BACKEND_DIST, TP_SCHED_AUTO, 0, &auto_plan) != TP_OK) {
    printf("rank %d: auto %s: plan: %s: FAIL\n", g->rank, tp_op_name(kind), tp_last_error());
    free_case(&c);
    return 1;
  }
  int failures = check_auto_plan(g->rank, "run, fwd+bwd", &auto_plan);
  const int separate =
      auto_plan.schedule != TP_SCHED_NCCL && auto_plan.chunks != auto_plan.bwd_chunks;
  printf("rank %d: auto %s runs fused with separate forward and backward chunk counts: %s\n",
         g->rank, tp_op_name(kind), separate ? "ok" : "FAIL");
  failures += !separate;
  dev_case d;
  outputs stock = {0}, fused = {0};
  int bad = upload(&c, &stock_plan, &d);
  bad = bad || run_plan(g, &c, &stock_plan, &d, 1, &stock);
  bad = bad || run_plan(g, &c, &auto_plan, &d, 2, &fused);
  if (!bad) {
    failures += check_outputs(g, &c, &stock_plan, &stock, NULL);
    failures += check_outputs(g, &c, &auto_plan, &fused, &stock);
  } else {
    printf("rank %d: auto %s did not run: FAIL\n", g->rank, tp_op_name(kind));
  }
  free_outputs(&stock);
  free_outputs(&fused);
  release(&d);
  free_case(&c);
  return failures + bad;
}

static int auto_body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  int failures = check_auto_shapes(g);
  failures += run_auto_case(g, TP_OP_AG_LINEAR, 0);
  failures += run_auto_case(g, TP_OP_AG_LINEAR_MULTI, 1);
  failures += run_auto_case(g, TP_OP_LINEAR_RS, 1);
  printf("rank %d: auto chunk counts: %d failure(s)\n", g->rank, failures);
  fflush(stdout);
  return failures ? 1 : 0;
}

/* ---- planted faults: the reference check must fail on them ---------------------------------- */

/* Rows of the gather side's y [T, N/W] that came from rank q's sequence block. */
static size_t block_rows(const host_case *c) { return (size_t)(c->S_l * BATCH); }

/* y with rank `from`'s gathered rows also placed at rank `to`'s offset (what
 * an all-gather writing shard `from` one slot late gives): a fresh copy. */
static void *misplace_rows(const host_case *c, const void *y, size_t cols, int from, int to) {
  const size_t rows = block_rows(c), bytes = rows * cols * c->e;
  void *out = malloc((size_t)c->T * cols * c->e);
  if (!out) abort();
  memcpy(out, y, (size_t)c->T * cols * c->e);
  memcpy((char *)out + (size_t)to * bytes, (const char *)y + (size_t)from * bytes, bytes);
  return out;
}

/* y [rows_local, N] less rank q's partial x[:, K_q] · w[:, K_q]ᵀ (a reduce-scatter that
 * dropped q's contribution), rounded to the dtype: a fresh copy. */
static void *drop_partial(const host_case *c, const dense *f, const void *y, int q) {
  const int64_t K = c->K, N = c->N, Kl = K / c->world, rows = local_rows(c), row0 = local_row0(c);
  void *out = malloc((size_t)(rows * N) * c->e);
  if (!out) abort();
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t n = 0; n < N; ++n) {
      double part = 0;
      for (int64_t k = q * Kl; k < (q + 1) * Kl; ++k)
        part += f->x[(row0 + row) * K + k] * f->w[0][n * K + k];
      const size_t at = (size_t)(row * N + n);
      const float v = (float)(gpu_host_value(c->dt, y, at) - part);
      if (c->dt == TP_BF16) ((uint16_t *)out)[at] = gpu_float_to_bf16(v);
      else ((float *)out)[at] = v;
    }
  return out;
}

/* A planted y judged by the reference check: it must fail. Returns 1 when it passes. */
static int expect_caught(tp_group *g, const host_case *c, const tp_linear_plan *p, const void *y,
                         const char *what) {
  const verdict v = judge_output(c, p, T_Y, 0, y, NULL);
  printf("rank %d: TP %d planted %s: %s %s y vs fp64 %.2e (tol %.1e), %d unwritten: the check %s\n",
         g->rank, g->world, what, tp_backend_name(p->backend), tp_schedule_name(p->schedule), v.err,
         v.tol_ref, v.unwritten, v.ok ? "PASSES: FAIL, the fault went unseen" : "fails: caught");
  return v.ok;
}

/* One op's step (stock, then dist_gemm ce), checked, then every planted variant of its y. */
typedef int (*plant_fn)(tp_group *g, const host_case *c, const tp_linear_plan *p, const outputs *o);

static int run_planted(tp_group *g, tp_op kind, plant_fn plant) {
  host_case c;
  const tp_linear_desc desc = small_desc(kind, TP_BF16, 0, 0);
  build_case(&c, &desc, g->rank, g->world);
  const tp_backend backends[] = {TP_BACKEND_STOCK, TP_BACKEND_DIST};
  const tp_schedule schedules[] = {TP_SCHED_AUTO, TP_SCHED_CE};
  const int chunks[] = {0, 1};
  dev_case d;
  tp_linear_plan p;
  int failures = 0, uploaded = 0;
  for (int b = 0; b < 2 && !failures; ++b) {
    if (tp_linear_plan_make(g, &c.desc, backends[b], schedules[b], chunks[b], &p) != TP_OK) {
      printf("rank %d: plan: %s: FAIL\n", g->rank, tp_last_error());
      failures++;
      break;
    }
    if (!uploaded && upload(&c, &p, &d)) {
      printf("rank %d: upload: FAIL\n", g->rank);
      release(&d);
      free_case(&c);
      return 1;
    }
    uploaded = 1;
    outputs o = {0};
    failures += run_plan(g, &c, &p, &d, 1, &o);
    /* the unplanted outputs pass first, or a caught fault would prove nothing */
    if (!failures) failures += check_outputs(g, &c, &p, &o, NULL);
    if (!failures) failures += plant(g, &c, &p, &o);
    free_outputs(&o);
  }
  if (uploaded) release(&d);
  free_case(&c);
  return failures;
}

/* Gather side: rank q's rows at rank q + 1's offset, for every q. */
static int plant_misplaced(tp_group *g, const host_case *c, const tp_linear_plan *p,
                           const outputs *o) {
  const size_t cols = (size_t)(c->N / c->world);
  int missed = 0;
  for (int q = 0; q + 1 < c->world; ++q) {
    char what[96];
    snprintf(what, sizeof what, "misplaced shard (rank %d's gathered rows at rank %d's offset)", q,
             q + 1);
    void *bad = misplace_rows(c, o->y[0], cols, q, q + 1);
    missed += expect_caught(g, c, p, bad, what);
    free(bad);
  }
  return missed;
}

/* Reduce-scatter side: y without rank q's partial, for every q. */
static int plant_missing_partial(tp_group *g, const host_case *c, const tp_linear_plan *p,
                                 const outputs *o) {
  dense f = dense_make(c);
  int missed = 0;
  for (int q = 0; q < c->world; ++q) {
    char what[96];
    snprintf(what, sizeof what, "missing partial (rank %d's dropped from the reduce-scatter)", q);
    void *bad = drop_partial(c, &f, o->y[0], q);
    missed += expect_caught(g, c, p, bad, what);
    free(bad);
  }
  dense_free(&f);
  return missed;
}

static int misplaced_body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  const int failures = run_planted(g, TP_OP_AG_LINEAR, plant_misplaced);
  printf("rank %d: TP %d planted misplaced shards: %d failure(s)\n", g->rank, g->world, failures);
  fflush(stdout);
  return failures ? 1 : 0;
}

static int missing_partial_body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  const int failures = run_planted(g, TP_OP_LINEAR_RS, plant_missing_partial);
  printf("rank %d: TP %d planted missing partials: %d failure(s)\n", g->rank, g->world, failures);
  fflush(stdout);
  return failures ? 1 : 0;
}

/* ---- the cases, one per TP degree ------------------------------------------------------------ */

/* The shapes at degree W, printed once per case (every one divides by 2, 4 and 8). */
static void print_shapes(int world) {
  printf("TP %d: batch %d x %d positions (%d rows per rank); gather side K %d, N %d (%d per "
         "rank); scatter side K %d (%d per rank), N %d\n",
         world, BATCH, SEQ, BATCH * SEQ / world, D_SMALL, D_LARGE, D_LARGE / world, D_LARGE,
         D_LARGE / world, D_SMALL);
}

static void run_kind(void **state, tp_op kind) {
  const int world = gpu_case_degree(state);
  print_shapes(world);
  assert_int_equal(gpu_run_group(world, body, &kind), 0);
}
static void test_ag_linear(void **state) { run_kind(state, TP_OP_AG_LINEAR); }
static void test_ag_linear_multi(void **state) { run_kind(state, TP_OP_AG_LINEAR_MULTI); }
static void test_linear_rs(void **state) { run_kind(state, TP_OP_LINEAR_RS); }

/* auto's forward and backward chunk counts at shapes that fuse (a peer needed: TP 2 up). */
static void test_auto_chunks(void **state) {
  const int world = gpu_case_degree(state);
  printf("TP %d: auto runs at %d rows per rank (batch %d x %d positions), %d wide on the side "
         "that moves, %d per rank on the other\n",
         world, BATCH * AUTO_RUN_POSITIONS, BATCH, AUTO_RUN_POSITIONS, AUTO_RUN_WIDE,
         AUTO_RUN_NARROW);
  assert_int_equal(gpu_run_group(world, auto_body, NULL), 0);
}

/* The reference check fails on a misplaced all-gathered shard, at every rank pair. */
static void test_planted_misplaced_shard(void **state) {
  const int world = gpu_case_degree(state);
  print_shapes(world);
  assert_int_equal(gpu_run_group(world, misplaced_body, NULL), 0);
}

/* The reference check fails on a reduce-scatter missing any one rank's partial. */
static void test_planted_missing_partial(void **state) {
  const int world = gpu_case_degree(state);
  print_shapes(world);
  assert_int_equal(gpu_run_group(world, missing_partial_body, NULL), 0);
}

int main(int argc, char **argv) {
  const gpu_tp_test tests[] = {
      {"ag_linear", test_ag_linear, 1, GPU_MAX_DEGREE},
      {"ag_linear_multi", test_ag_linear_multi, 1, GPU_MAX_DEGREE},
      {"linear_rs", test_linear_rs, 1, GPU_MAX_DEGREE},
      {"auto_chunks", test_auto_chunks, 2, GPU_MAX_DEGREE},
      {"planted_misplaced_shard", test_planted_misplaced_shard, 2, GPU_MAX_DEGREE},
      {"planted_missing_partial", test_planted_missing_partial, 2, GPU_MAX_DEGREE},
  };
  return gpu_run_tp_tests("gpu_linear", tests, sizeof tests / sizeof tests[0], argc, argv);
}
