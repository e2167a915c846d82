/*
 * test_blocks.c — GPU test of the layers `tpbench run` times (bench/gpu/
 * block.h): the attention block, the FFN block and the transformer block,
 * forward and backward, bf16 and fp32, on a real TP group of each degree
 * (1, 2, 4, 8), against a single-device reference.
 *
 * The reference is the same block computed on every rank by a TP group of
 * its own with one rank (TP=1 semantics: the unsharded weights, the whole
 * sequence, no communication). Every TP variant (stock with and without
 * sequence parallelism, with the gathered input saved, forward only;
 * dist_gemm auto, ce x2 with the gathered input saved, sm x2, sm forward
 * only) runs two steps back to back on the shards of the same tensors, its
 * outputs poisoned with NaN first, and each rank compares its part with
 * the reference's matching part: y and dx (its rows), dW of every
 * projection (its rows or columns of the global weight), and the RMSNorm
 * gain gradients (summed over ranks with sequence parallelism, where each
 * rank holds a partial sum). dist_gemm is also compared with stock, with
 * the tolerance `run` applies. The GEMMs alone and the collectives alone
 * must run.
 *
 * Schedules: each variant's plan must record, for every projection the
 * block has, the schedule it asked for. These shapes move a few KiB per
 * transfer, where auto takes the stock path (below kernels/tp_linear.c's
 * 4 MiB), so the fused pipelines are forced by requesting ce and sm; a
 * forced one that ran NCCL fails. The one auto variant must record the
 * stock path, one chunk each way, and its reason.
 *
 * The tests run once per TP degree (gpu_harness.h: cases NAME/tpN, `--tp
 * LIST`, a degree above the rank slots reported skipped): blocks_stock (the
 * reference and its checks, the stock variants, the halves, stock graph
 * replay, the placement refusal) at 1, 2, 4 and 8; blocks_dist_gemm (the
 * reference again, stock as the baseline, the dist_gemm variants, fused
 * graph replay and the frozen workspace) at 2, 4 and 8.
 *
 * The reference itself is checked two ways, so a mistake shared by TP and
 * TP=1 is not missed: its forward against a float64 CPU forward of the
 * block written from kernels/tp_layers.h's conventions, and (fp32) its
 * backward against finite differences of its forward: for a random
 * direction v, (L(p + εv) − L(p − εv)) / 2ε with L = Σ y·dy must match
 * Σ dL/dp · v for the input and every weight and gain.
 *
 * Activation checkpointing (blocks_ac: stock at TP 1; blocks_ac_dist_gemm:
 * dist_gemm ce at 2, 4 and 8): for every layer and
 * dtype, ac=selective (with and without save_gathered) and ac=full each run
 * two steps on the tensors an ac=none step just ran on, and every output (y,
 * dx, every weight and gain gradient) must equal ac=none's bit for bit and
 * be finite. The mode's kept tensors (tp_block_kept) must be forward tensors
 * of the counted bytes summing to the plan's activation bytes; a forward
 * whose every other tensor is then poisoned (NaN) must still give a backward
 * equal to ac=none's bit for bit (so the recomputation really runs and what
 * is kept is all the backward reads; ac=none is run through the same); and
 * one weight element flipped between the two runs must make some output
 * differ (the comparison can fail). The plan refuses ac with a forward only
 * and ac=full with save_gathered.
 *
 * CUDA graphs: a captured step replayed must give what the eager step gave;
 * a capture whose step asks the frozen symmetric workspace to grow must
 * fail with TP_EREJECT, leave no stream capturing, and the group must still
 * run eagerly. A dist_gemm block without sequence parallelism is refused by
 * its placement contracts.
 *
 * Tolerances are norm-wise relative errors, ||out − ref|| / ||ref||; a wrong
 * shard, head, position or gradient path gives errors of order 1:
 *   TP vs TP=1, dist_gemm vs stock  bf16 max(5e-2, 5·2^-7·sqrt(W)), fp32
 *                                   1e-3 (sum orders differ:
 *                                   the reduce-scatter's partials, GEMMs of
 *                                   other shapes; bf16 rounds every stored
 *                                   activation to 2^-9)
 *   TP=1 forward vs float64 CPU     bf16 3e-2, fp32 1e-4
 *   finite differences              1e-2 (fp32, ε = 1% of the tensor's rms)
 * Each check prints one line ending in ok or FAIL. Exit 77 (skipped)
 * without a GPU.
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

#include "bench/gpu/block.h"
#include "bench/gpu/graph.h"
#include "kernels/tp_device.h"
#include "tests/gpu/gpu_harness.h"

/* Small shapes that still exercise GQA (2 query heads per KV head), batch > 1
 * (rows in (seq, batch) order) and TP up to 8. */
enum { BATCH = 2, SEQ = 64, TOKENS = BATCH * SEQ, DIM = 128, HEADS = 16, KV_HEADS = 8, HD = 16 };
enum { FFN = 384, QKV_W = (HEADS + 2 * KV_HEADS) * HD, Q_W = HEADS * HD, MAX_OUT = 12 };

static const double TOL_TP_BF16 = 5e-2, TOL_TP_FP32 = 1e-3;
static const double TOL_CPU_BF16 = 3e-2, TOL_CPU_FP32 = 1e-4;
static const double TOL_FD = 1e-2;

/* TP against TP=1 (and dist_gemm against stock) at W ranks: bf16 partials summed over more
 * ranks stray further (NCCL's ring rounds after every addition), so bf16 takes at least
 * bench/stats/numerics.h's layer bound, 5 · 2u · sqrt(W) with u = 2^-8 (above 5e-2 from
 * TP 4 on); fp32 stays far below its tolerance at every degree. */
static double tol_tp(tp_dtype dt, int world) {
  if (dt != TP_BF16) return TOL_TP_FP32;
  return fmax(TOL_TP_BF16, 5.0 * 2.0 * 0x1p-8 * sqrt((double)world));
}

/* ---- the full (unsharded) tensors, on the host ---------------------------------------------- */

typedef struct model {
  tp_dtype dt;
  size_t e;
  void *x, *dy, *g_attn, *g_ffn, *w_qkv, *w_o, *w1, *w3, *w2;
} model;

static void *host_random(tp_dtype dt, size_t count, uint64_t seed, float scale) {
  void *p = malloc(count * tp_dtype_bytes(dt));
  gpu_fill_host(dt, p, count, seed, scale);
  return p;
}

static model model_make(tp_dtype dt) {
  model m;
  m.dt = dt;
  m.e = tp_dtype_bytes(dt);
  m.x = host_random(dt, (size_t)TOKENS * DIM, 1, 1.0f);
  m.dy = host_random(dt, (size_t)TOKENS * DIM, 2, 1.0f);
  m.g_attn = host_random(dt, DIM, 3, 1.0f);
  m.g_ffn = host_random(dt, DIM, 4, 1.0f);
  m.w_qkv = host_random(dt, (size_t)QKV_W * DIM, 5, 1.0f / sqrtf((float)DIM));
  m.w_o = host_random(dt, (size_t)DIM * Q_W, 6, 1.0f / sqrtf((float)Q_W));
  m.w1 = host_random(dt, (size_t)FFN * DIM, 7, 1.0f / sqrtf((float)DIM));
  m.w3 = host_random(dt, (size_t)FFN * DIM, 8, 1.0f / sqrtf((float)DIM));
  m.w2 = host_random(dt, (size_t)DIM * FFN, 9, 1.0f / sqrtf((float)FFN));
  return m;
}

static void model_free(model *m) {
  void *all[] = {m->x, m->dy, m->g_attn, m->g_ffn, m->w_qkv, m->w_o, m->w1, m->w3, m->w2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) free(all[i]);
}

static tp_block_shape shape_of(tp_layer kind, tp_dtype dt, int sp, int backward, int save) {
  /* designated, so a field added to the shape (its default 0) needs no change here */
  tp_block_shape s = {.layer = kind,
                      .dtype = dt,
                      .batch = BATCH,
                      .seq = SEQ,
                      .dim = DIM,
                      .n_heads = HEADS,
                      .n_kv_heads = KV_HEADS,
                      .head_dim = HD,
                      .ffn_hidden = FFN,
                      .sp = sp,
                      .backward = backward,
                      .save_gathered = save,
                      .proj_dtype = dt};
  return s;
}

/* ---- moving shards -----------------------------------------------------------------------------
 */

/* Rows [row0, +rows) of a host matrix with cols columns into dev. */
static int put_rows(void *dev, const void *host, size_t row0, size_t rows, size_t cols, size_t e) {
  return cudaMemcpy(dev, (const char *)host + row0 * cols * e, rows * cols * e,
                    cudaMemcpyHostToDevice) != cudaSuccess;
}

/* Columns [col0, +cols) of a host matrix [rows, ld] into dev [rows, cols]. */
static int put_cols(void *dev, const void *host, size_t rows, size_t ld, size_t col0, size_t cols,
                    size_t e) {
  return cudaMemcpy2D(dev, cols * e, (const char *)host + col0 * e, ld * e, cols * e, rows,
                      cudaMemcpyHostToDevice) != cudaSuccess;
}

/* This rank's shards of the model into a block's tensors (the layouts of block.h). */
static int load_model(const tp_block_plan *p, const model *m, tp_block_tensors *t, int rank) {
  const size_t e = m->e, L = (size_t)p->local_rows, r = (size_t)rank;
  const size_t row0 = p->shape.sp ? r * L : 0;
  int bad = put_rows(t->x, m->x, row0, L, DIM, e);
  if (p->shape.backward) bad |= put_rows(t->dy, m->dy, row0, L, DIM, e);
  if (p->has[TP_PROJ_QKV]) {
    const size_t hq = (size_t)p->hq, hkv = (size_t)p->hkv;
    char *w = t->attn.w_qkv;
    bad |= put_rows(t->attn.g, m->g_attn, 0, 1, DIM, e);
    bad |= put_rows(w, m->w_qkv, r * hq * HD, hq * HD, DIM, e);
    w += hq * HD * DIM * e;
    bad |= put_rows(w, m->w_qkv, (size_t)HEADS * HD + r * hkv * HD, hkv * HD, DIM, e);
    w += hkv * HD * DIM * e;
    bad |= put_rows(w, m->w_qkv, (size_t)(HEADS + KV_HEADS) * HD + r * hkv * HD, hkv * HD, DIM, e);
    bad |= put_cols(t->attn.w_o, m->w_o, DIM, Q_W, r * hq * HD, hq * HD, e);
  }
  if (p->has[TP_PROJ_W13]) {
    const size_t fl = (size_t)p->ffn_local;
    bad |= put_rows(t->ffn.g, m->g_ffn, 0, 1, DIM, e);
    bad |= put_rows(t->ffn.w1, m->w1, r * fl, fl, DIM, e);
    bad |= put_rows(t->ffn.w3, m->w3, r * fl, fl, DIM, e);
    bad |= put_cols(t->ffn.w2, m->w2, DIM, FFN, r * fl, fl, e);
  }
  /* landed before any stream reads them (pageable copies may return early) */
  return bad || cudaDeviceSynchronize() != cudaSuccess;
}

/* Host copies of a block's outputs, by name. */
typedef struct outputs {
  int n;
  const char *name[MAX_OUT];
  void *host[MAX_OUT];
  size_t count[MAX_OUT];
} outputs;

static void outputs_free(outputs *o) {
  for (int i = 0; i < o->n; ++i) free(o->host[i]);
  memset(o, 0, sizeof *o);
}

static const void *output_named(const outputs *o, const char *name, size_t *count) {
  for (int i = 0; i < o->n; ++i)
    if (strcmp(o->name[i], name) == 0) {
      if (count) *count = o->count[i];
      return o->host[i];
    }
  return NULL;
}

static int poison_outputs(const tp_block_plan *p, tp_block_tensors *t, cudaStream_t s) {
  tp_block_output out[TP_BLOCK_MAX_OUTPUTS];
  int n = tp_block_outputs(p, t, out), bad = 0;
  for (int i = 0; i < n; ++i)
    bad |= tp_launch_poison(p->shape.dtype, out[i].ptr, out[i].count, s) != cudaSuccess;
  return bad;
}

static int download(const tp_block_plan *p, const tp_block_tensors *t, outputs *o) {
  tp_block_output out[TP_BLOCK_MAX_OUTPUTS];
  memset(o, 0, sizeof *o);
  o->n = tp_block_outputs(p, t, out);
  const size_t e = tp_dtype_bytes(p->shape.dtype);
  int bad = 0;
  for (int i = 0; i < o->n; ++i) {
    o->name[i] = out[i].name;
    o->count[i] = out[i].count;
    o->host[i] = malloc(out[i].count * e);
    bad |=
        cudaMemcpy(o->host[i], out[i].ptr, out[i].count * e, cudaMemcpyDeviceToHost) != cudaSuccess;
  }
  return bad;
}

/* Poisons the outputs, runs `steps` steps back to back, downloads. */
static int run_block(tp_group *g, const tp_block_plan *p, tp_block_tensors *t, int steps,
                     outputs *o) {
  if (poison_outputs(p, t, g->main_stream)) return 1;
  for (int i = 0; i < steps; ++i) {
    if (tp_block_step(g, p, t) != TP_OK) {
      printf("rank %d: step: %s: FAIL\n", g->rank, tp_last_error());
      return 1;
    }
  }
  cudaError_t err = cudaStreamSynchronize(g->main_stream);
  if (err != cudaSuccess) {
    printf("rank %d: step: %s: FAIL\n", g->rank, cudaGetErrorString(err));
    return 1;
  }
  return download(p, t, o);
}

/* ---- comparing with the reference
 * ----------------------------------------------------------------- */

/* A block of the reference matrix [*, ld] this rank's output covers. */
typedef struct region {
  size_t row0, rows, col0, cols;
} region;

/* The regions of output `name`, in the order the rank's output holds them. */
static int regions_of(const char *name, const tp_block_plan *p, int rank, region *r, size_t *ld) {
  const size_t R = (size_t)rank, L = (size_t)p->local_rows, hq = (size_t)p->hq;
  const size_t hkv = (size_t)p->hkv, fl = (size_t)p->ffn_local;
  *ld = DIM;
  if (!strcmp(name, "y") || !strcmp(name, "dx")) {
    r[0] = (region){p->shape.sp ? R * L : 0, L, 0, DIM};
    return 1;
  }
  if (!strcmp(name, "dw_qkv")) {
    r[0] = (region){R * hq * HD, hq * HD, 0, DIM};
    r[1] = (region){(size_t)HEADS * HD + R * hkv * HD, hkv * HD, 0, DIM};
    r[2] = (region){(size_t)(HEADS + KV_HEADS) * HD + R * hkv * HD, hkv * HD, 0, DIM};
    return 3;
  }
  if (!strcmp(name, "dw_o")) {
    *ld = Q_W;
    r[0] = (region){0, DIM, R * hq * HD, hq * HD};
    return 1;
  }
  if (!strcmp(name, "dw1") || !strcmp(name, "dw3")) {
    r[0] = (region){R * fl, fl, 0, DIM};
    return 1;
  }
  if (!strcmp(name, "dw2")) {
    *ld = FFN;
    r[0] = (region){0, DIM, R * fl, fl};
    return 1;
  }
  r[0] = (region){0, 1, 0, DIM}; /* the gain gradients */
  return 1;
}

typedef struct err_stats {
  double rel;
  size_t nonfinite, differ;
} err_stats;

static err_stats compare_regions(tp_dtype dt, const void *out, const void *ref, size_t ld,
                                 const region *r, int n) {
  err_stats st = {0, 0, 0};
  double d2 = 0, r2 = 0;
  size_t k = 0;
  for (int i = 0; i < n; ++i)
    for (size_t row = 0; row < r[i].rows; ++row)
      for (size_t col = 0; col < r[i].cols; ++col, ++k) {
        const double a = gpu_host_value(dt, out, k);
        const double b = gpu_host_value(dt, ref, (r[i].row0 + row) * ld + r[i].col0 + col);
        if (!isfinite(a)) {
          st.nonfinite++;
          continue;
        }
        st.differ += a != b;
        d2 += (a - b) * (a - b);
        r2 += b * b;
      }
  st.rel = sqrt(d2 / (r2 > 0 ? r2 : 1));
  return st;
}

/* A gain gradient with sequence parallelism is a partial sum on each rank:
 * the ranks' parts are summed (in float64) before the comparison. Without
 * it every rank holds the whole gradient. */
static err_stats compare_gain(tp_rdzv *rdzv, int world, int sp, tp_dtype dt, const void *out,
                              const void *ref) {
  double mine[DIM], all[TP_MAX_WORLD][DIM];
  for (size_t i = 0; i < DIM; ++i) mine[i] = gpu_host_value(dt, out, i);
  if (sp && tp_rdzv_allgather(rdzv, mine, sizeof mine, all) != TP_OK) {
    err_stats bad = {INFINITY, DIM, DIM};
    return bad;
  }
  err_stats st = {0, 0, 0};
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < DIM; ++i) {
    double sum = sp ? 0 : mine[i];
    for (int w = 0; sp && w < world; ++w) sum += all[w][i];
    const double b = gpu_host_value(dt, ref, i);
    if (!isfinite(sum)) {
      st.nonfinite++;
      continue;
    }
    d2 += (sum - b) * (sum - b);
    r2 += b * b;
  }
  st.rel = sqrt(d2 / (r2 > 0 ? r2 : 1));
  return st;
}

typedef struct variant {
  const char *name;
  tp_backend backend;
  tp_schedule schedule; /* dist_gemm's request: ce and sm force a fused schedule */
  int chunks, sp, save, backward;
} variant;

/* "stock" is also the baseline dist_gemm is compared with. */
static const variant VARIANTS[] = {
    {"stock", TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, 1, 0, 1},
    {"stock save_gathered", TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, 1, 1, 1},
    {"stock sp=off", TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, 0, 0, 1},
    {"stock fwd", TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, 1, 0, 0},
    {"dist_gemm auto", TP_BACKEND_DIST, TP_SCHED_AUTO, 0, 1, 0, 1},
    {"dist_gemm ce x2 save_gathered", TP_BACKEND_DIST, TP_SCHED_CE, 2, 1, 1, 1},
    {"dist_gemm sm x2", TP_BACKEND_DIST, TP_SCHED_SM, 2, 1, 0, 1},
    {"dist_gemm sm fwd", TP_BACKEND_DIST, TP_SCHED_SM, 0, 1, 0, 0},
};
enum { N_VARIANTS = sizeof VARIANTS / sizeof VARIANTS[0] };

/* The two halves of the test: everything that runs at any TP degree, and
 * the dist_gemm variants, which need TP >= 2 (skipped below that). */
typedef enum { PART_STOCK = 0, PART_DIST_GEMM, PART_AC_STOCK, PART_AC_DIST_GEMM } test_part;

static int is_baseline(const variant *v) { return !strcmp(v->name, "stock"); }

static int in_part(const variant *v, test_part part) {
  return part == PART_STOCK ? v->backend == TP_BACKEND_STOCK
                            : v->backend == TP_BACKEND_DIST || is_baseline(v);
}

typedef struct layer_ctx {
  tp_group *g, *ref;
  tp_rdzv *rdzv;
  tp_layer kind;
  const model *m;
  outputs ref_out;   /* the TP=1 reference */
  outputs stock_out; /* the "stock" variant, for dist_gemm against stock */
  int have_stock;
} layer_ctx;

static const char *kind_name(tp_layer k) { return tp_layer_name(k); }

/* kernels/tp_linear.c: below this many bytes per rank and transfer, auto
 * takes the stock path (AUTO_FUSE_MIN_BYTES). */
enum { AUTO_FUSE_MIN_BYTES = 4 << 20 };

/* Bytes one rank moves per forward transfer: its shard of the gathered
 * input (all-gather side) or of a destination's partial (reduce-scatter side). */
static size_t transfer_bytes(const tp_linear_plan *lp) {
  const int64_t width =
      lp->desc.op == TP_OP_LINEAR_RS ? lp->desc.out_features : lp->desc.in_features;
  return (size_t)lp->shard_rows * (size_t)width * tp_dtype_bytes(lp->desc.dtype);
}

/* What a projection's plan must record: stock runs NCCL; ce and sm are
 * forced (at the requested chunk count, both passes, when one is given);
 * auto takes the stock path below AUTO_FUSE_MIN_BYTES and ce above. */
static tp_schedule expected_schedule(const variant *v, const tp_linear_plan *lp) {
  if (v->backend != TP_BACKEND_DIST) return TP_SCHED_NCCL;
  if (v->schedule != TP_SCHED_AUTO) return v->schedule;
  return transfer_bytes(lp) < AUTO_FUSE_MIN_BYTES ? TP_SCHED_NCCL : TP_SCHED_CE;
}

static int check_projection(const variant *v, const tp_linear_plan *lp) {
  const tp_schedule want = expected_schedule(v, lp);
  int ok = lp->schedule == want && lp->reason[0] != '\0';
  if (v->backend == TP_BACKEND_DIST && v->chunks > 0)
    ok = ok && lp->chunks == v->chunks && lp->bwd_chunks == v->chunks;
  if (v->backend == TP_BACKEND_DIST && v->schedule == TP_SCHED_AUTO && want == TP_SCHED_NCCL)
    ok = ok && lp->chunks == 1 && lp->bwd_chunks == 1 && strstr(lp->reason, "stock path");
  return ok;
}

/* Every projection the block has recorded the schedule the variant asks
 * for (a dist_gemm row that silently ran the stock path fails here). */
static int check_schedules(int rank, const char *layer, tp_dtype dt, const variant *v,
                           const tp_block_plan *p) {
  int failures = 0;
  for (int i = 0; i < TP_N_PROJ; ++i) {
    if (!p->has[i]) continue;
    const tp_linear_plan *lp = &p->proj[i];
    const int ok = check_projection(v, lp);
    printf("rank %d: %-9s %-4s %-29s %-4s plan: %s x%d, backward x%d at %zu bytes per transfer "
           "(want %s; %s): %s\n",
           rank, layer, tp_dtype_name(dt), v->name, tp_block_proj_name((tp_block_proj)i),
           tp_schedule_name(lp->schedule), lp->chunks, lp->bwd_chunks, transfer_bytes(lp),
           tp_schedule_name(expected_schedule(v, lp)),
           lp->reason[0] ? lp->reason : "no reason recorded", ok ? "ok" : "FAIL");
    failures += !ok;
  }
  return failures;
}

/* Every output of a variant against the reference (and dist_gemm against stock). */
static int check_variant(layer_ctx *lc, const variant *v, const tp_block_plan *p,
                         const outputs *o) {
  const tp_dtype dt = lc->m->dt;
  int failures = 0;
  for (int i = 0; i < o->n; ++i) {
    const void *ref = output_named(&lc->ref_out, o->name[i], NULL);
    region r[3];
    size_t ld = 0;
    const int n = regions_of(o->name[i], p, lc->g->rank, r, &ld);
    const int gain = !strncmp(o->name[i], "dg_", 3);
    err_stats st = !ref   ? (err_stats){INFINITY, 0, 0}
                   : gain ? compare_gain(lc->rdzv, lc->g->world, p->shape.sp, dt, o->host[i], ref)
                          : compare_regions(dt, o->host[i], ref, ld, r, n);
    int ok = st.nonfinite == 0 && st.rel <= tol_tp(dt, lc->g->world);
    char vs_stock[160] = "";
    if (v->backend == TP_BACKEND_DIST && lc->have_stock) {
      size_t count = 0;
      const void *s = output_named(&lc->stock_out, o->name[i], &count);
      region all = {0, 1, 0, count};
      err_stats sv =
          s ? compare_regions(dt, o->host[i], s, count, &all, 1) : (err_stats){INFINITY, 0, 0};
      snprintf(vs_stock, sizeof vs_stock, "; vs stock %.2e, %zu of %zu differ", sv.rel, sv.differ,
               count);
      ok = ok && sv.rel <= tol_tp(dt, lc->g->world);
    }
    printf("rank %d: TP %d %-9s %-4s %-29s %-17s vs TP=1: rel %.2e (tol %.1e), non-finite %zu%s: "
           "%s\n",
           lc->g->rank, lc->g->world, kind_name(lc->kind), tp_dtype_name(dt), v->name, o->name[i],
           st.rel, tol_tp(dt, lc->g->world), st.nonfinite, vs_stock, ok ? "ok" : "FAIL");
    failures += !ok;
  }
  return failures;
}

static int run_variant(layer_ctx *lc, const variant *v) {
  tp_group *g = lc->g;
  tp_block_shape s = shape_of(lc->kind, lc->m->dt, v->sp, v->backward, v->save);
  tp_block_plan p;
  tp_rc rc = tp_block_plan_make(g, &s, v->backend, v->schedule, v->chunks, &p);
  tp_block_tensors t;
  if (rc == TP_OK) rc = tp_block_prepare(g, &p);
  if (rc == TP_OK) rc = tp_block_alloc(g, &p, 77, &t);
  if (rc != TP_OK) {
    printf("rank %d: %-9s %-4s %s: %s: FAIL\n", g->rank, kind_name(lc->kind),
           tp_dtype_name(lc->m->dt), v->name, tp_last_error());
    return 1;
  }
  outputs o;
  memset(&o, 0, sizeof o);
  int failures = check_schedules(g->rank, kind_name(lc->kind), lc->m->dt, v, &p);
  int ran = load_model(&p, lc->m, &t, g->rank) == 0 && run_block(g, &p, &t, 2, &o) == 0;
  if (ran) failures += check_variant(lc, v, &p, &o);
  else printf("rank %d: %-9s %s: did not run: FAIL\n", g->rank, kind_name(lc->kind), v->name);
  failures += !ran;
  if (!failures && is_baseline(v)) {
    lc->stock_out = o;
    lc->have_stock = 1;
  } else {
    outputs_free(&o);
  }
  tp_block_free(&t);
  return failures;
}

/* The GEMMs alone and the collectives alone run (their numbers mean nothing). */
static int run_halves(layer_ctx *lc) {
  int failures = 0;
  const tp_backend halves[] = {TP_BACKEND_GEMM_ONLY, TP_BACKEND_COMM_ONLY};
  for (int i = 0; i < 2; ++i) {
    tp_group *g = lc->g;
    tp_block_shape s = shape_of(lc->kind, lc->m->dt, 1, 1, 0);
    tp_block_plan p;
    tp_block_tensors t;
    memset(&t, 0, sizeof t);
    tp_rc rc = tp_block_plan_make(g, &s, halves[i], TP_SCHED_AUTO, 0, &p);
    if (rc == TP_OK) rc = tp_block_prepare(g, &p);
    if (rc == TP_OK) rc = tp_block_alloc(g, &p, 78, &t);
    for (int k = 0; rc == TP_OK && k < 2; ++k) rc = tp_block_step(g, &p, &t);
    if (rc == TP_OK && cudaStreamSynchronize(g->main_stream) != cudaSuccess)
      rc = TP_FAIL(TP_ECUDA, "%s", cudaGetErrorString(cudaGetLastError()));
    printf("rank %d: %-9s %-4s %-29s runs: %s\n", g->rank, kind_name(lc->kind),
           tp_dtype_name(lc->m->dt), tp_backend_name(halves[i]),
           rc == TP_OK ? "ok" : tp_last_error());
    failures += rc != TP_OK;
    tp_block_free(&t);
  }
  return failures;
}

/* ---- the reference and its own checks ----------------------------------------------------------
 */

static double *to_double(tp_dtype dt, const void *src, size_t n) {
  double *d = malloc(n * sizeof *d);
  for (size_t i = 0; i < n; ++i) d[i] = gpu_host_value(dt, src, i);
  return d;
}

static void cpu_rmsnorm(const double *x, const double *g, double *y) {
  for (size_t r = 0; r < TOKENS; ++r) {
    double ss = 0;
    for (size_t j = 0; j < DIM; ++j) ss += x[r * DIM + j] * x[r * DIM + j];
    const double inv = 1.0 / sqrt(ss / DIM + (double)TP_RMSNORM_EPS);
    for (size_t j = 0; j < DIM; ++j) y[r * DIM + j] = x[r * DIM + j] * inv * g[j];
  }
}

/* y[rows, n] = x[rows, k] · w[n, k]ᵀ */
static void cpu_linear(const double *x, const double *w, double *y, size_t n, size_t k) {
  for (size_t r = 0; r < TOKENS; ++r)
    for (size_t o = 0; o < n; ++o) {
      double acc = 0;
      for (size_t i = 0; i < k; ++i) acc += x[r * k + i] * w[o * k + i];
      y[r * n + o] = acc;
    }
}

/* RoPE on the Q and K heads; row r is at position r / BATCH. */
static void cpu_rope(double *qkv) {
  const size_t half = HD / 2;
  for (size_t r = 0; r < TOKENS; ++r)
    for (size_t h = 0; h < HEADS + KV_HEADS; ++h)
      for (size_t i = 0; i < half; ++i) {
        const size_t position = r / BATCH; /* rows are (seq, batch) */
        const double angle = (double)position * pow(TP_ROPE_THETA, -2.0 * (double)i / HD);
        const size_t lo = r * QKV_W + h * HD + i, hi = lo + half;
        const double a = qkv[lo], b = qkv[hi];
        qkv[lo] = a * cos(angle) - b * sin(angle);
        qkv[hi] = b * cos(angle) + a * sin(angle);
      }
}

/* Causal GQA attention: query head h reads KV head h / (HEADS / KV_HEADS). */
static void cpu_attention(const double *qkv, double *o) {
  double p[SEQ];
  for (size_t b = 0; b < BATCH; ++b)
    for (size_t h = 0; h < HEADS; ++h) {
      const size_t kv = h / (HEADS / KV_HEADS);
      const size_t qc = h * HD, kc = (HEADS + kv) * HD, vc = (HEADS + KV_HEADS + kv) * HD;
      for (size_t s = 0; s < SEQ; ++s) {
        const double *q = qkv + (s * BATCH + b) * QKV_W + qc;
        double m = -INFINITY, sum = 0;
        for (size_t j = 0; j <= s; ++j) {
          const double *k = qkv + (j * BATCH + b) * QKV_W + kc;
          double acc = 0;
          for (size_t t = 0; t < HD; ++t) acc += q[t] * k[t];
          p[j] = acc / sqrt((double)HD);
          m = fmax(m, p[j]);
        }
        for (size_t j = 0; j <= s; ++j) sum += (p[j] = exp(p[j] - m));
        double *out = o + (s * BATCH + b) * Q_W + qc;
        for (size_t t = 0; t < HD; ++t) out[t] = 0;
        for (size_t j = 0; j <= s; ++j)
          for (size_t t = 0; t < HD; ++t)
            out[t] += p[j] / sum * qkv[(j * BATCH + b) * QKV_W + vc + t];
      }
    }
}

typedef struct dmodel {
  double *g_attn, *g_ffn, *w_qkv, *w_o, *w1, *w3, *w2;
} dmodel;

static void cpu_attention_block(const dmodel *m, const double *x, double *y) {
  double *h = malloc((size_t)TOKENS * DIM * sizeof *h);
  double *qkv = malloc((size_t)TOKENS * QKV_W * sizeof *qkv);
  double *o = malloc((size_t)TOKENS * Q_W * sizeof *o);
  cpu_rmsnorm(x, m->g_attn, h);
  cpu_linear(h, m->w_qkv, qkv, QKV_W, DIM);
  cpu_rope(qkv);
  cpu_attention(qkv, o);
  cpu_linear(o, m->w_o, y, DIM, Q_W);
  free(h);
  free(qkv);
  free(o);
}

static void cpu_ffn_block(const dmodel *m, const double *x, double *y) {
  double *h = malloc((size_t)TOKENS * DIM * sizeof *h);
  double *a = malloc((size_t)TOKENS * FFN * sizeof *a);
  double *b = malloc((size_t)TOKENS * FFN * sizeof *b);
  cpu_rmsnorm(x, m->g_ffn, h);
  cpu_linear(h, m->w1, a, FFN, DIM);
  cpu_linear(h, m->w3, b, FFN, DIM);
  for (size_t i = 0; i < (size_t)TOKENS * FFN; ++i) a[i] = a[i] / (1.0 + exp(-a[i])) * b[i];
  cpu_linear(a, m->w2, y, DIM, FFN);
  free(h);
  free(a);
  free(b);
}

/* The block's forward in float64 from the model's (rounded) values. */
static double *cpu_forward(tp_layer kind, const model *m) {
  const size_t n = (size_t)TOKENS * DIM;
  dmodel d = {to_double(m->dt, m->g_attn, DIM),
              to_double(m->dt, m->g_ffn, DIM),
              to_double(m->dt, m->w_qkv, (size_t)QKV_W * DIM),
              to_double(m->dt, m->w_o, (size_t)DIM * Q_W),
              to_double(m->dt, m->w1, (size_t)FFN * DIM),
              to_double(m->dt, m->w3, (size_t)FFN * DIM),
              to_double(m->dt, m->w2, (size_t)DIM * FFN)};
  double *x = to_double(m->dt, m->x, n), *y = malloc(n * sizeof *y);
  if (kind == TP_LAYER_ATTENTION) cpu_attention_block(&d, x, y);
  else if (kind == TP_LAYER_FFN) cpu_ffn_block(&d, x, y);
  else {
    double *part = malloc(n * sizeof *part), *x1 = malloc(n * sizeof *x1);
    cpu_attention_block(&d, x, part);
    for (size_t i = 0; i < n; ++i) x1[i] = x[i] + part[i];
    cpu_ffn_block(&d, x1, part);
    for (size_t i = 0; i < n; ++i) y[i] = x1[i] + part[i];
    free(part);
    free(x1);
  }
  double *all[] = {d.g_attn, d.g_ffn, d.w_qkv, d.w_o, d.w1, d.w3, d.w2, x};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) free(all[i]);
  return y;
}

static int check_cpu_forward(const layer_ctx *lc) {
  const tp_dtype dt = lc->m->dt;
  const size_t n = (size_t)TOKENS * DIM;
  double *ref = cpu_forward(lc->kind, lc->m);
  const void *y = output_named(&lc->ref_out, "y", NULL);
  double d2 = 0, r2 = 0;
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = gpu_host_value(dt, y, i);
    if (!isfinite(a)) {
      bad++;
      continue;
    }
    d2 += (a - ref[i]) * (a - ref[i]);
    r2 += ref[i] * ref[i];
  }
  free(ref);
  const double rel = sqrt(d2 / (r2 > 0 ? r2 : 1)),
               tol = dt == TP_BF16 ? TOL_CPU_BF16 : TOL_CPU_FP32;
  const int ok = bad == 0 && rel <= tol;
  printf("rank %d: %-9s %-4s TP=1 forward y vs float64 CPU forward: rel %.2e (tol %.0e), "
         "non-finite %zu: %s\n",
         lc->g->rank, kind_name(lc->kind), tp_dtype_name(dt), rel, tol, bad, ok ? "ok" : "FAIL");
  return !ok;
}

/* L = Σ y·dy after a forward with the reference's current parameters. */
static double loss(tp_group *ref, const tp_block_plan *p, tp_block_tensors *t, const float *dy) {
  const size_t n = (size_t)TOKENS * DIM;
  if (tp_block_forward(ref, p, t) != TP_OK ||
      cudaStreamSynchronize(ref->main_stream) != cudaSuccess)
    return NAN;
  float *y = malloc(n * sizeof *y);
  double l = NAN;
  if (cudaMemcpy(y, t->y, n * sizeof *y, cudaMemcpyDeviceToHost) == cudaSuccess) {
    l = 0;
    for (size_t i = 0; i < n; ++i) l += (double)y[i] * (double)dy[i];
  }
  free(y);
  return l;
}

typedef struct fd_param {
  const char *name, *grad;
  void *dev;
  const float *host;
  size_t count;
} fd_param;

/* host to dev, landed: a copy from pageable memory may return before its
 * DMA completes, and the forward runs on a non-blocking stream that does not
 * wait for it (a shared-GPU run read half-moved parameters that way). */
static int upload_landed(void *dev, const float *host, size_t n) {
  return cudaMemcpy(dev, host, n * sizeof *host, cudaMemcpyHostToDevice) == cudaSuccess &&
         cudaDeviceSynchronize() == cudaSuccess;
}

/* Σ grad·v against (L(p + εv) − L(p − εv)) / 2ε, ε = 1% of the tensor's rms. */
static int fd_one(layer_ctx *lc, const tp_block_plan *p, tp_block_tensors *t, const fd_param *f,
                  uint64_t seed) {
  const size_t n = f->count;
  const float *grad = output_named(&lc->ref_out, f->grad, NULL);
  float *v = malloc(n * sizeof *v), *moved = malloc(n * sizeof *moved);
  gpu_fill_host(TP_FP32, v, n, seed, 1.0f);
  double rms = 0, predicted = 0;
  for (size_t i = 0; i < n; ++i) {
    rms += (double)f->host[i] * f->host[i];
    predicted += grad ? (double)grad[i] * v[i] : NAN;
  }
  const double eps = 1e-2 * sqrt(rms / (double)n);
  double l[2];
  for (int side = 0; side < 2; ++side) {
    for (size_t i = 0; i < n; ++i) moved[i] = (float)(f->host[i] + (side ? -eps : eps) * v[i]);
    l[side] = upload_landed(f->dev, moved, n) ? loss(lc->ref, p, t, lc->m->dy) : NAN;
  }
  int restored = upload_landed(f->dev, f->host, n);
  const double fd = (l[0] - l[1]) / (2.0 * eps);
  const double rel = fabs(fd - predicted) / fmax(fabs(predicted), 1e-30);
  const int ok = restored && isfinite(rel) && rel <= TOL_FD;
  printf("rank %d: %-9s fp32 backward %-17s along a random direction %+.6e, finite differences "
         "%+.6e: rel %.2e (tol %.0e): %s\n",
         lc->g->rank, kind_name(lc->kind), f->grad, predicted, fd, rel, TOL_FD, ok ? "ok" : "FAIL");
  free(v);
  free(moved);
  return !ok;
}

static int check_finite_differences(layer_ctx *lc, const tp_block_plan *p, tp_block_tensors *t) {
  const model *m = lc->m;
  fd_param params[8];
  int n = 0;
  params[n++] = (fd_param){"x", "dx", t->x, m->x, (size_t)TOKENS * DIM};
  if (p->has[TP_PROJ_QKV]) {
    params[n++] = (fd_param){"g", "dg_attention_norm", t->attn.g, m->g_attn, DIM};
    params[n++] = (fd_param){"w_qkv", "dw_qkv", t->attn.w_qkv, m->w_qkv, (size_t)QKV_W * DIM};
    params[n++] = (fd_param){"w_o", "dw_o", t->attn.w_o, m->w_o, (size_t)DIM * Q_W};
  }
  if (p->has[TP_PROJ_W13]) {
    params[n++] = (fd_param){"g", "dg_ffn_norm", t->ffn.g, m->g_ffn, DIM};
    params[n++] = (fd_param){"w1", "dw1", t->ffn.w1, m->w1, (size_t)FFN * DIM};
    params[n++] = (fd_param){"w3", "dw3", t->ffn.w3, m->w3, (size_t)FFN * DIM};
    params[n++] = (fd_param){"w2", "dw2", t->ffn.w2, m->w2, (size_t)DIM * FFN};
  }
  int failures = 0;
  for (int i = 0; i < n; ++i) failures += fd_one(lc, p, t, &params[i], 1000 + (uint64_t)i);
  return failures;
}

/* The TP=1 block on the whole model: its outputs become the reference;
 * self_check: also against the CPU forward and finite differences (once
 * per model is enough: the dist_gemm part recomputes the same reference). */
static int run_reference(layer_ctx *lc, int self_check) {
  tp_block_shape s = shape_of(lc->kind, lc->m->dt, 1, 1, 0);
  tp_block_plan p;
  tp_block_tensors t;
  tp_rc rc = tp_block_plan_make(lc->ref, &s, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &p);
  if (rc == TP_OK) rc = tp_block_prepare(lc->ref, &p);
  if (rc == TP_OK) rc = tp_block_alloc(lc->ref, &p, 79, &t);
  if (rc != TP_OK) {
    printf("rank %d: %-9s reference: %s: FAIL\n", lc->g->rank, kind_name(lc->kind),
           tp_last_error());
    return 1;
  }
  int failures = load_model(&p, lc->m, &t, 0);
  if (!failures) failures = run_block(lc->ref, &p, &t, 1, &lc->ref_out);
  if (failures)
    printf("rank %d: %-9s reference did not run: FAIL\n", lc->g->rank, kind_name(lc->kind));
  if (!failures && self_check) failures += check_cpu_forward(lc);
  if (!failures && self_check && lc->m->dt == TP_FP32)
    failures += check_finite_differences(lc, &p, &t);
  tp_block_free(&t);
  return failures;
}

static int run_layer(tp_group *g, tp_rdzv *rdzv, tp_group *ref, const model *m, tp_layer kind,
                     test_part part) {
  layer_ctx lc;
  memset(&lc, 0, sizeof lc);
  lc.g = g;
  lc.ref = ref;
  lc.rdzv = rdzv;
  lc.kind = kind;
  lc.m = m;
  int failures = run_reference(&lc, part == PART_STOCK);
  for (int v = 0; v < N_VARIANTS; ++v)
    if (in_part(&VARIANTS[v], part)) failures += run_variant(&lc, &VARIANTS[v]);
  if (part == PART_STOCK) failures += run_halves(&lc);
  outputs_free(&lc.ref_out);
  outputs_free(&lc.stock_out);
  return failures;
}

/* ---- CUDA graphs
 * ----------------------------------------------------------------------------------- */

typedef struct step_ctx {
  tp_group *g;
  const tp_block_plan *p;
  tp_block_tensors *t;
} step_ctx;

static tp_rc step_fn(void *arg) {
  step_ctx *s = arg;
  return tp_block_step(s->g, s->p, s->t);
}

static int no_capture_left(tp_group *g) {
  enum cudaStreamCaptureStatus a = cudaStreamCaptureStatusActive, b = cudaStreamCaptureStatusActive;
  return cudaStreamIsCapturing(g->main_stream, &a) == cudaSuccess &&
         cudaStreamIsCapturing(g->comm_stream, &b) == cudaSuccess &&
         a == cudaStreamCaptureStatusNone && b == cudaStreamCaptureStatusNone;
}

/* A step captured and replayed twice gives what the eager step gave. */
static int graph_replay(tp_group *g, const model *m, tp_backend backend) {
  tp_block_shape s = shape_of(TP_LAYER_BLOCK, m->dt, 1, 1, 0);
  tp_block_plan p;
  tp_block_tensors t;
  /* ce, not auto: at these tiny shapes auto takes the stock path, and the
   * fused pipeline is what must survive capture */
  const variant v = {.name = backend == TP_BACKEND_DIST ? "graph dist_gemm ce" : "graph stock",
                     .backend = backend,
                     .schedule = backend == TP_BACKEND_DIST ? TP_SCHED_CE : TP_SCHED_AUTO,
                     .sp = 1,
                     .backward = 1};
  tp_rc rc = tp_block_plan_make(g, &s, backend, v.schedule, 0, &p);
  if (rc == TP_OK) rc = tp_block_prepare(g, &p);
  if (rc == TP_OK) rc = tp_block_alloc(g, &p, 80, &t);
  if (rc != TP_OK) {
    printf("rank %d: graph %s: %s: FAIL\n", g->rank, tp_backend_name(backend), tp_last_error());
    return 1;
  }
  outputs eager, replay;
  memset(&eager, 0, sizeof eager);
  memset(&replay, 0, sizeof replay);
  int failures = check_schedules(g->rank, "block", m->dt, &v, &p);
  failures += load_model(&p, m, &t, g->rank) || run_block(g, &p, &t, 1, &eager);
  step_ctx sc = {g, &p, &t};
  cudaGraphExec_t exec = NULL;
  if (!failures && tp_graph_capture(g, step_fn, &sc, &exec) != TP_OK) {
    printf("rank %d: graph %s: capture: %s: FAIL\n", g->rank, tp_backend_name(backend),
           tp_last_error());
    failures = 1;
  }
  if (!failures) failures = poison_outputs(&p, &t, g->main_stream);
  for (int i = 0; !failures && i < 2; ++i) failures = tp_graph_launch(g, exec) != TP_OK;
  if (!failures) failures = cudaStreamSynchronize(g->main_stream) != cudaSuccess;
  if (!failures) failures = download(&p, &t, &replay);
  for (int i = 0; !failures && i < replay.n; ++i) {
    region all = {0, 1, 0, replay.count[i]};
    err_stats st = compare_regions(m->dt, replay.host[i], eager.host[i], replay.count[i], &all, 1);
    const int ok = st.nonfinite == 0 && st.rel <= tol_tp(m->dt, g->world);
    printf("rank %d: TP %d graph %-9s %-4s %-17s replay vs eager: rel %.2e (tol %.1e), %zu of %zu "
           "differ, non-finite %zu: %s\n",
           g->rank, g->world, tp_backend_name(backend), tp_dtype_name(m->dt), replay.name[i],
           st.rel, tol_tp(m->dt, g->world), st.differ, replay.count[i], st.nonfinite,
           ok ? "ok" : "FAIL");
    failures += !ok;
  }
  tp_graph_destroy(exec);
  outputs_free(&eager);
  outputs_free(&replay);
  tp_block_free(&t);
  return failures;
}

/* Growth of the frozen workspace during capture: TP_EREJECT, no stream left
 * capturing, and the group still runs eagerly. */
static int graph_growth(tp_group *g, const model *m) {
  tp_block_shape s = shape_of(TP_LAYER_FFN, m->dt, 1, 1, 0);
  tp_block_plan p;
  tp_block_tensors t;
  tp_rc rc = tp_block_plan_make(g, &s, TP_BACKEND_DIST, TP_SCHED_CE, 0, &p);
  if (rc == TP_OK) rc = tp_block_prepare(g, &p);
  if (rc == TP_OK) rc = tp_block_alloc(g, &p, 81, &t);
  if (rc != TP_OK) {
    printf("rank %d: graph growth: %s: FAIL\n", g->rank, tp_last_error());
    return 1;
  }
  int failures = load_model(&p, m, &t, g->rank);
  tp_block_plan bigger = p;
  bigger.symm_bytes = tp_symm_size(g->symm) + 1;
  step_ctx sc = {g, &bigger, &t};
  cudaGraphExec_t exec = NULL;
  rc = tp_graph_capture(g, step_fn, &sc, &exec);
  const int refused = rc == TP_EREJECT && !exec && strstr(tp_last_error(), "CUDA graph capture") &&
                      strstr(tp_last_error(), "frozen");
  printf("rank %d: graph capture growing the frozen workspace: %s (%s): %s\n", g->rank,
         tp_rc_name(rc), tp_last_error(), refused ? "ok" : "FAIL");
  failures += !refused;
  tp_graph_destroy(exec);
  const int clean = no_capture_left(g);
  printf("rank %d: graph after the failed capture: no stream capturing: %s\n", g->rank,
         clean ? "ok" : "FAIL");
  failures += !clean;
  outputs o;
  memset(&o, 0, sizeof o);
  const int eager_ok = run_block(g, &p, &t, 1, &o) == 0;
  printf("rank %d: graph after the failed capture: eager step runs: %s\n", g->rank,
         eager_ok ? "ok" : "FAIL");
  failures += !eager_ok;
  outputs_free(&o);
  tp_block_free(&t);
  return failures;
}

/* dist_gemm without sequence parallelism breaks the placement contracts. */
static int placement_refusal(tp_group *g) {
  tp_block_shape s = shape_of(TP_LAYER_BLOCK, TP_BF16, 0, 1, 0);
  tp_block_plan p;
  tp_rc rc = tp_block_plan_make(g, &s, TP_BACKEND_DIST, TP_SCHED_AUTO, 0, &p);
  const int ok = rc == TP_EREJECT && strstr(tp_last_error(), "placement") &&
                 strstr(tp_last_error(), "sequence-sharded");
  printf("rank %d: dist_gemm block with sp=off refused: %s: %s\n", g->rank, tp_last_error(),
         ok ? "ok" : "FAIL");
  return !ok;
}

/* ---- activation checkpointing -----------------------------------------------------------------
 */

/* A mode against ac=none with the same save_gathered. none itself is here for
 * its poisoned backward (what none keeps must be all its backward reads). */
typedef struct ac_variant {
  const char *name;
  tp_ac ac;
  int save;
} ac_variant;

static const ac_variant AC_VARIANTS[] = {
    {"ac=none", TP_AC_NONE, 0},           {"ac=none save_gathered", TP_AC_NONE, 1},
    {"ac=selective", TP_AC_SELECTIVE, 0}, {"ac=selective save_gathered", TP_AC_SELECTIVE, 1},
    {"ac=full", TP_AC_FULL, 0},
};
enum { N_AC_VARIANTS = sizeof AC_VARIANTS / sizeof AC_VARIANTS[0] };

/* Where a block of an ac variant runs: stock on a TP group of one rank, or
 * dist_gemm (ce, fused) on the TP group of every GPU. */
typedef struct ac_ctx {
  tp_group *g;
  tp_backend backend;
  tp_schedule schedule;
  tp_layer kind;
  const model *m;
  const char *where; /* "stock TP=1", "dist_gemm ce TP=2" */
} ac_ctx;

/* Elements of a whose bits differ from b's, and elements of a not finite. */
static void bits_compare(tp_dtype dt, const void *a, const void *b, size_t n, size_t *differ,
                         size_t *nonfinite) {
  const size_t e = tp_dtype_bytes(dt);
  *differ = *nonfinite = 0;
  for (size_t i = 0; i < n; ++i) {
    *differ += memcmp((const char *)a + i * e, (const char *)b + i * e, e) != 0;
    *nonfinite += !isfinite(gpu_host_value(dt, a, i));
  }
}

/* Every output of o against ref's bit for bit, each finite; one line per output. */
static int check_bitwise(const ac_ctx *ac, const char *what, const outputs *o, const outputs *ref) {
  const tp_dtype dt = ac->m->dt;
  int failures = 0;
  if (o->n != ref->n) {
    printf("rank %d: %-9s %-4s %s %s: %d outputs, ac=none has %d: FAIL\n", ac->g->rank,
           kind_name(ac->kind), tp_dtype_name(dt), ac->where, what, o->n, ref->n);
    return 1;
  }
  for (int i = 0; i < o->n; ++i) {
    size_t count = 0, differ = 0, nonfinite = 0;
    const void *r = output_named(ref, o->name[i], &count);
    int ok = r && count == o->count[i];
    if (ok) bits_compare(dt, o->host[i], r, count, &differ, &nonfinite);
    ok = ok && differ == 0 && nonfinite == 0;
    printf("rank %d: %-9s %-4s %s %-38s %-17s vs ac=none: %zu of %zu elements' bits differ, "
           "non-finite %zu (tol 0): %s\n",
           ac->g->rank, kind_name(ac->kind), tp_dtype_name(dt), ac->where, what, o->name[i], differ,
           o->count[i], nonfinite, ok ? "ok" : "FAIL");
    failures += !ok;
  }
  return failures;
}

/* Every tensor the mode keeps is one the forward writes, of the bytes
 * counted, and the count is the plan's activation bytes. */
static int check_kept(const ac_ctx *ac, const char *what, const tp_block_plan *p,
                      const tp_block_tensors *t) {
  tp_activation_set kept;
  tp_block_kept(p, &kept);
  tp_block_tensor fwd[TP_BLOCK_MAX_FORWARD_TENSORS];
  const int n = tp_block_forward_tensors(p, t, fwd);
  int failures = 0;
  for (int k = 0; k < kept.n; ++k) {
    int found = 0;
    for (int i = 0; i < n; ++i)
      found |= !strcmp(fwd[i].name, kept.tensors[k].name) &&
               fwd[i].bytes == (size_t)kept.tensors[k].bytes;
    if (!found)
      printf("rank %d: %-9s %s %s: kept %s (%lld bytes) is no forward tensor of that size: FAIL\n",
             ac->g->rank, kind_name(ac->kind), ac->where, what, kept.tensors[k].name,
             (long long)kept.tensors[k].bytes);
    failures += !found;
  }
  const int same = kept.bytes == p->activation_bytes && kept.bytes > 0;
  printf("rank %d: %-9s %-4s %s %-38s activation bytes %lld in %d tensors (plan %lld): %s\n",
         ac->g->rank, kind_name(ac->kind), tp_dtype_name(ac->m->dt), ac->where, what,
         (long long)kept.bytes, kept.n, (long long)p->activation_bytes, same ? "ok" : "FAIL");
  return failures + !same;
}

/* The backward reads only what the mode keeps: after the forward every other
 * tensor it wrote is poisoned (NaN), and the backward, its recomputation
 * first, must still give ac=none's outputs bit for bit. */
static int poisoned_backward(const ac_ctx *ac, const char *what, const tp_block_plan *p,
                             tp_block_tensors *t, const outputs *ref) {
  tp_group *g = ac->g;
  tp_activation_set kept;
  tp_block_kept(p, &kept);
  tp_block_tensor fwd[TP_BLOCK_MAX_FORWARD_TENSORS];
  const int n = tp_block_forward_tensors(p, t, fwd);
  int bad = poison_outputs(p, t, g->main_stream) || tp_block_forward(g, p, t) != TP_OK;
  int poisoned = 0;
  for (int i = 0; !bad && i < n; ++i) {
    if (tp_activation_has(&kept, fwd[i].name)) continue;
    const size_t count = fwd[i].bytes / tp_dtype_bytes(fwd[i].dtype);
    bad = tp_launch_poison(fwd[i].dtype, fwd[i].ptr, count, g->main_stream) != cudaSuccess;
    poisoned++;
  }
  bad = bad || tp_block_backward(g, p, t) != TP_OK ||
        cudaStreamSynchronize(g->main_stream) != cudaSuccess;
  outputs o;
  memset(&o, 0, sizeof o);
  bad = bad || download(p, t, &o);
  if (bad) {
    printf("rank %d: %-9s %s %s poisoned backward: %s: FAIL\n", g->rank, kind_name(ac->kind),
           ac->where, what, tp_last_error());
    outputs_free(&o);
    return 1;
  }
  char label[96];
  snprintf(label, sizeof label, "%s, %d unkept poisoned", what, poisoned);
  const int failures = check_bitwise(ac, label, &o, ref);
  outputs_free(&o);
  return failures;
}

/* Flips the top mantissa bit of element 0 of a device tensor (again: back). */
static int flip_element(tp_dtype dt, void *dev) {
  uint32_t bits = 0;
  const size_t e = tp_dtype_bytes(dt);
  if (cudaMemcpy(&bits, dev, e, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
  bits ^= dt == TP_BF16 ? 0x0040u : 0x00400000u;
  return cudaMemcpy(dev, &bits, e, cudaMemcpyHostToDevice) != cudaSuccess ||
         cudaDeviceSynchronize() != cudaSuccess;
}

/* A planted fault: one weight element changed between the ac=none step and
 * the mode's, and the bitwise comparison must see it (some output differs). */
static int planted_fault(const ac_ctx *ac, const char *what, const tp_block_plan *p,
                         tp_block_tensors *t, const outputs *ref) {
  tp_group *g = ac->g;
  void *w = p->has[TP_PROJ_QKV] ? t->attn.w_qkv : t->ffn.w1;
  outputs o;
  memset(&o, 0, sizeof o);
  const int flipped = flip_element(ac->m->dt, w) == 0;
  int bad = !flipped || run_block(g, p, t, 1, &o);
  if (flipped) bad |= flip_element(ac->m->dt, w); /* back, for the next check */
  int differing = 0;
  for (int i = 0; !bad && i < o.n; ++i) {
    size_t count = 0, differ = 0, nonfinite = 0;
    const void *r = output_named(ref, o.name[i], &count);
    if (r && count == o.count[i]) bits_compare(ac->m->dt, o.host[i], r, count, &differ, &nonfinite);
    differing += !r || differ > 0 || nonfinite > 0;
  }
  const int ok = !bad && differing > 0;
  printf("rank %d: %-9s %-4s %s %-38s one %s element flipped: %d of %d outputs differ from "
         "ac=none's (want > 0): %s\n",
         g->rank, kind_name(ac->kind), tp_dtype_name(ac->m->dt), ac->where, what,
         p->has[TP_PROJ_QKV] ? "w_qkv" : "w1", differing, o.n, ok ? "ok" : "FAIL");
  outputs_free(&o);
  return !ok;
}

/* One mode of one layer: ac=none's step and the mode's (two steps back to
 * back) on the same tensors, bit for bit; the poisoned backward; the planted
 * fault. The tensors are allocated for the mode (selective's rotated copy
 * comes last: the rest hold the same numbers as ac=none's would). */
static int run_ac_variant(const ac_ctx *ac, const ac_variant *v) {
  tp_group *g = ac->g;
  tp_block_shape s = shape_of(ac->kind, ac->m->dt, 1, 1, v->save);
  tp_block_plan none, mode;
  tp_block_tensors t;
  memset(&t, 0, sizeof t);
  tp_rc rc = tp_block_plan_make(g, &s, ac->backend, ac->schedule, 0, &none);
  s.ac = v->ac;
  if (rc == TP_OK) rc = tp_block_plan_make(g, &s, ac->backend, ac->schedule, 0, &mode);
  if (rc == TP_OK) rc = tp_block_prepare(g, &none);
  if (rc == TP_OK) rc = tp_block_prepare(g, &mode);
  if (rc == TP_OK) rc = tp_block_alloc(g, &mode, 90, &t);
  if (rc != TP_OK) {
    printf("rank %d: %-9s %-4s %s %s: %s: FAIL\n", g->rank, kind_name(ac->kind),
           tp_dtype_name(ac->m->dt), ac->where, v->name, tp_last_error());
    return 1;
  }
  outputs ref, o;
  memset(&ref, 0, sizeof ref);
  memset(&o, 0, sizeof o);
  int failures = load_model(&mode, ac->m, &t, g->rank);
  if (!failures) failures = run_block(g, &none, &t, 1, &ref);
  if (!failures) failures = run_block(g, &mode, &t, 2, &o);
  if (failures) {
    printf("rank %d: %-9s %s %s: did not run: FAIL\n", g->rank, kind_name(ac->kind), ac->where,
           v->name);
  } else {
    failures += check_bitwise(ac, v->name, &o, &ref);
    failures += check_kept(ac, v->name, &mode, &t);
    failures += poisoned_backward(ac, v->name, &mode, &t, &ref);
    failures += planted_fault(ac, v->name, &mode, &t, &ref);
  }
  outputs_free(&ref);
  outputs_free(&o);
  tp_block_free(&t);
  return failures;
}

/* The plan refuses what the matrix rejects, in its words. */
static int ac_refusals(tp_group *g) {
  const struct {
    const char *what, *words;
    tp_ac ac;
    int backward, save;
  } cases[] = {
      {"ac=selective, forward only", "ac=selective recomputes activations in the backward",
       TP_AC_SELECTIVE, 0, 0},
      {"ac=full with save_gathered", "nothing is kept for save_gathered=on to reuse", TP_AC_FULL, 1,
       1},
  };
  int failures = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    tp_block_shape s = shape_of(TP_LAYER_BLOCK, TP_BF16, 1, cases[i].backward, cases[i].save);
    s.ac = cases[i].ac;
    tp_block_plan p;
    const tp_rc rc = tp_block_plan_make(g, &s, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &p);
    const int ok = rc == TP_EREJECT && strstr(tp_last_error(), cases[i].words);
    printf("rank %d: block %s refused: %s: %s\n", g->rank, cases[i].what, tp_last_error(),
           ok ? "ok" : "FAIL");
    failures += !ok;
  }
  return failures;
}

static int run_ac(tp_group *g, tp_backend backend, const model *m) {
  int failures = 0;
  for (int k = 0; k < 3; ++k) {
    char where[48];
    if (backend == TP_BACKEND_DIST) snprintf(where, sizeof where, "dist_gemm ce TP=%d", g->world);
    else snprintf(where, sizeof where, "stock TP=%d", g->world);
    const ac_ctx ac = {
        g,           backend, backend == TP_BACKEND_DIST ? TP_SCHED_CE : TP_SCHED_AUTO,
        (tp_layer)k, m,       where};
    for (int v = 0; v < N_AC_VARIANTS; ++v) failures += run_ac_variant(&ac, &AC_VARIANTS[v]);
  }
  return failures;
}

/* ---- the group
 * ---------------------------------------------------------------------------------------- */

static tp_rc one_rank_exchange(void *ctx, const void *send, size_t bytes, void *recv) {
  (void)ctx;
  memcpy(recv, send, bytes);
  return TP_OK;
}

/* A TP group of one rank on this rank's device: the single-device reference. */
static tp_group *reference_group(int device) {
  ncclUniqueId id;
  tp_group *ref = NULL;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    printf("reference group: ncclGetUniqueId failed: FAIL\n");
    return NULL;
  }
  if (tp_group_create(0, 1, device, &id, one_rank_exchange, NULL, &ref) != TP_OK) {
    printf("reference group: %s: FAIL\n", tp_last_error());
    return NULL;
  }
  return ref;
}

/* Activation checkpointing: stock on the one-rank group (TP 1), or dist_gemm
 * on the whole group, for every layer, dtype and mode. */
static int ac_body(tp_group *g, tp_group *ref, test_part part) {
  int failures = part == PART_AC_STOCK ? ac_refusals(ref) : 0;
  const tp_dtype dtypes[] = {TP_BF16, TP_FP32};
  for (int d = 0; d < 2; ++d) {
    model m = model_make(dtypes[d]);
    failures +=
        part == PART_AC_STOCK ? run_ac(ref, TP_BACKEND_STOCK, &m) : run_ac(g, TP_BACKEND_DIST, &m);
    model_free(&m);
  }
  return failures;
}

/* ctx: the test_part to run. */
static int body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  const test_part part = *(const test_part *)ctx;
  tp_group *ref = reference_group(g->device);
  if (!ref) return 1;
  if (part == PART_AC_STOCK || part == PART_AC_DIST_GEMM) {
    const int failures = ac_body(g, ref, part);
    tp_group_destroy(ref);
    if (cudaSetDevice(g->device) != cudaSuccess) return 1;
    printf("rank %d: %d failure(s)\n", g->rank, failures);
    fflush(stdout);
    return failures ? 1 : 0;
  }
  int failures = part == PART_STOCK ? placement_refusal(g) : 0;
  const tp_dtype dtypes[] = {TP_BF16, TP_FP32};
  for (int d = 0; d < 2; ++d) {
    model m = model_make(dtypes[d]);
    for (int k = 0; k < 3; ++k) failures += run_layer(g, rdzv, ref, &m, (tp_layer)k, part);
    if (part == PART_STOCK) {
      failures += graph_replay(g, &m, TP_BACKEND_STOCK);
    } else {
      failures += graph_replay(g, &m, TP_BACKEND_DIST);
      if (dtypes[d] == TP_BF16) failures += graph_growth(g, &m);
    }
    model_free(&m);
  }
  tp_group_destroy(ref);
  /* The group's device must be the current one again for the harness's teardown. */
  if (cudaSetDevice(g->device) != cudaSuccess) failures++;
  printf("rank %d: %d failure(s)\n", g->rank, failures);
  fflush(stdout);
  return failures ? 1 : 0;
}

static void print_shapes(int world) {
  printf("TP %d: batch %d x seq %d (%d rows per rank), dim %d, %d heads and %d KV heads of %d "
         "(%d and %d per rank), FFN %d (%d per rank)\n",
         world, BATCH, SEQ, TOKENS / world, DIM, HEADS, KV_HEADS, HD, HEADS / world,
         KV_HEADS / world, FFN, FFN / world);
}

static void run_part(void **state, test_part part) {
  const int world = gpu_case_degree(state);
  print_shapes(world);
  assert_int_equal(gpu_run_group(world, body, &part), 0);
}

/* The TP=1 reference (checked against the CPU forward and finite
 * differences), every stock variant, the halves, stock graph replay and
 * the placement refusal: at every degree. */
static void test_blocks_stock(void **state) { run_part(state, PART_STOCK); }

/* The dist_gemm variants with their recorded schedules, fused graph replay
 * and the frozen workspace: fusing needs a peer (TP 2 up). */
static void test_blocks_dist_gemm(void **state) { run_part(state, PART_DIST_GEMM); }

/* Activation checkpointing, stock at TP 1 (on each rank's one-rank group, so
 * TP 1 only): every layer and dtype, ac none, selective (with and without
 * the gathered input saved) and full against ac=none bit for bit, the kept
 * tensors' bytes, a backward whose unkept forward tensors are poisoned, a
 * planted fault, the plan's refusals. */
static void test_blocks_ac(void **state) { run_part(state, PART_AC_STOCK); }

/* The same with dist_gemm (ce, fused) on the whole group: TP 2 up. */
static void test_blocks_ac_dist_gemm(void **state) { run_part(state, PART_AC_DIST_GEMM); }

int main(int argc, char **argv) {
  /* Heads, KV heads, FFN and the sequence divide by every degree up to 8. */
  const gpu_tp_test tests[] = {
      {"blocks_stock", test_blocks_stock, 1, GPU_MAX_DEGREE},
      {"blocks_dist_gemm", test_blocks_dist_gemm, 2, GPU_MAX_DEGREE},
      {"blocks_ac", test_blocks_ac, 1, 1},
      {"blocks_ac_dist_gemm", test_blocks_ac_dist_gemm, 2, GPU_MAX_DEGREE},
  };
  return gpu_run_tp_tests("gpu_blocks", tests, sizeof tests / sizeof tests[0], argc, argv);
}
