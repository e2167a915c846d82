/*
 * test_fp8_blocks.c — the fp8 layers of `tpbench run` (bench/gpu/
 * block_fp8.h, what layer_worker.c's fp8 items run) at TP 1 on one GPU, and
 * their forward and backward at TP 2, 4 and 8 (below). At TP 1:
 * the attention block, the FFN block and the transformer block, forward
 * and forward+backward, with their four TP projections in fp8, fp8-row and
 * fp8-block (everything else bf16), on a small model whose projections are
 * whole 128-blocks (dim 256, 4 heads and 2 KV heads of 64, FFN 512, batch 2
 * x seqlen 128). Per layer, format and pass:
 *
 * - the stock fp8 layer plans (an fp8-row or fp8-block backward may be
 *   refused by cuBLASLt's heuristic for a dgrad or wgrad GEMM: printed with
 *   a NOTE, as gpu_fp8_ops accepts it), runs one step on outputs poisoned
 *   with NaN, and every output is finite;
 * - each projection's outputs the step leaves intact pass the worker's
 *   check (every sampled element finite and within tp_quant.h's bound
 *   against a float64 product of its dequantized operands), and the check
 *   judged as many outputs as the step leaves (qkv's y is rotated by RoPE,
 *   w1/w3's are overwritten by their gradients in the backward);
 * - the layer against the bf16 layer run on the same tensors (the worker's
 *   NAME:bf16 report): ||fp8 - bf16|| / ||bf16|| of y below 0.1 and of
 *   every gradient (dx, the weight and gain gradients, E5M2 through the
 *   layer) below 0.25, and above 1e-4 for each (quantization happened: a
 *   bf16 step on the same tensors gives 0); the comparison puts the fp8
 *   outputs back bit for bit;
 * - the GEMMs alone (GEMM_ONLY, operands quantized by a full step first)
 *   give the stock fp8 layer's outputs bit for bit;
 * - the checks can fail: the last projection's (wo, or w2) GEMMs rerun with
 *   its first activation scale doubled, judged with the right one, have
 *   elements outside the bound; and with every stored weight scale of wo
 *   and w2 doubled, the layer's y moves more than 5x its quantization error
 *   from bf16's (past 0.1 in the attention and FFN layers, whose y is that
 *   projection's output).
 * mxfp8 is rejected at plan time below sm_100 with cuBLASLt's answer
 * (naming the heuristic and the format, prefixed by the projection); on
 * sm_100 it runs the same checks. dist_gemm is rejected at TP 1 for every
 * format (nothing to gather or scatter).
 *
 * At TP 2, 4 and 8 (the second half, fp8_blocks/tpN; gpu_harness.h: a
 * degree above the rank slots is reported skipped; TPBENCH_TEST_SHARE_GPU=1
 * runs every rank on one GPU), the forward and the forward+backward
 * (kernels/tp_linear_fp8_bwd.c) of each layer and format on a shape grown
 * with the degree so that every dimension a rank splits is whole 128-blocks
 * per rank (shape_tp: sequence 64·W, 2·W query and 2·W KV heads of 64, FFN
 * 256·W; printed per case):
 * - the stock fp8 layer with comm_dtype fp8: every output finite, each
 *   projection's check (wo and w2 judge their local partial before the bf16
 *   reduce-scatter, w13 its y, qkv none: RoPE), against the bf16 layer of
 *   the same degree within the TP 1 bounds, and the planted faults as at
 *   TP 1 (an activation scale doubled fails its projection's check);
 * - comm_dtype bf16 (the bf16 shard gathered, the whole quantized) gives the
 *   comm_dtype fp8 layer's outputs bit for bit (the agreed amax is the
 *   whole's; row and block scales never cross a rank's rows);
 * - dist_gemm ce and sm against the stock layer within the harness's layer
 *   tolerance, tp_numerics_tolerance(bf16, max(FFN, dim), W, 5) (the gather
 *   side is bit-identical by design; the scatter side sums the bf16
 *   partials in fp32 in rank order, NCCL in its own; the count of differing
 *   elements is printed);
 * - the GEMMs alone and the collectives alone run after a quantizing step;
 * - rejected, each with its reason: dist_gemm ring, chunks 2, symm=nccl and
 *   comm_dtype bf16, sp off;
 * - at TP 4 and 8, the TP 2 shape not grown: rejected where the rules say
 *   (heads that do not divide by 8; fp8-block's 128-element blocks that
 *   would straddle two ranks: restated in splits_whole_blocks), with the
 *   reason, and planned where they allow it.
 * Each check prints one line. Exit 77 (skipped) without a GPU.
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

#include "bench/gpu/block.h"
#include "bench/gpu/block_fp8.h"
#include "bench/stats/numerics.h"
#include "kernels/tp_device.h"
#include "tests/gpu/gpu_harness.h"

enum { BATCH = 2, SEQ = 128, DIM = 256, HEADS = 4, KV_HEADS = 2, HD = 64, FFN = 512 };
/* fp8-block's scale block: a rank's part of every split dimension is a multiple of it */
enum { SCALE_BLOCK = 128 };

/* fp8 against bf16: y (E4M3 operands) and the gradients (E5M2 beside E4M3, through the
 * layer's backward); above MIN_ERR, quantization changed something. */
static const double TOL_Y = 0.1, TOL_GRAD = 0.25, MIN_ERR = 1e-4;

#define FAIL_IF(cond, ...)                                                                         \
  do {                                                                                             \
    if (cond) {                                                                                    \
      printf("  FAIL: " __VA_ARGS__);                                                              \
      printf("\n");                                                                                \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static int rc_ok(tp_rc rc, const char *what) {
  if (rc == TP_OK) return 1;
  printf("  FAIL: %s: %s (%s)\n", what, tp_rc_name(rc), tp_last_message());
  return 0;
}

static tp_block_shape shape_of(tp_layer layer, tp_dtype format, int backward) {
  const tp_block_shape s = {.layer = layer,
                            .dtype = TP_BF16,
                            .batch = BATCH,
                            .seq = SEQ,
                            .dim = DIM,
                            .n_heads = HEADS,
                            .n_kv_heads = KV_HEADS,
                            .head_dim = HD,
                            .ffn_hidden = FFN,
                            .sp = 1,
                            .backward = backward,
                            .proj_dtype = format,
                            .ac = TP_AC_NONE};
  return s;
}

/* The layer's shape at TP `world` (2, 4, 8): every dimension a rank splits is whole
 * 128-blocks (fp8-block's scale block) per rank: sequence 64·W (T / W = 128 rows), 2·W query
 * and 2·W KV heads of 64 (each rank's query, key and value heads 128 rows), FFN 256·W (256
 * per rank); dim 256. At TP 2 that is 128 positions, 4 and 4 heads, FFN 512. comm: what the
 * gathering projections move. */
static tp_block_shape shape_tp(tp_layer layer, tp_dtype format, tp_comm_dtype comm, int backward,
                               int world) {
  tp_block_shape s = shape_of(layer, format, backward);
  s.seq = 64 * (int64_t)world;
  s.n_heads = s.n_kv_heads = 2 * (int64_t)world;
  s.ffn_hidden = 256 * (int64_t)world;
  s.comm = tp_dtype_is_fp8(format) ? comm : TP_COMM_NONE;
  return s;
}

/* The TP 2 shape as it is (not grown with the degree): at TP 4 and 8 the rules reject it. */
static tp_block_shape shape_tp2(tp_layer layer, tp_dtype format, int backward) {
  return shape_tp(layer, format, TP_COMM_FP8, backward, 2);
}

/* One (layer, format, pass) and what it runs on. */
typedef struct fp8_case {
  tp_group *g;
  tp_layer layer;
  tp_dtype format;
  int backward;
  int major;
  tp_fp8_accum_model model;
  char what[64];
} fp8_case;

/* Plans, tensors and host copies of one case. */
typedef struct fixture {
  tp_block_plan fp8, gemm, bf16;
  tp_block_tensors t;
  tp_block_output out[TP_BLOCK_MAX_OUTPUTS];
  void *host[TP_BLOCK_MAX_OUTPUTS]; /* the stock fp8 step's outputs */
  int n_out;
} fixture;

static void fixture_free(fixture *f) {
  tp_block_release(&f->fp8);
  tp_block_release(&f->gemm);
  tp_block_release(&f->bf16);
  tp_block_free(&f->t);
  for (int i = 0; i < f->n_out; ++i) free(f->host[i]);
  memset(f, 0, sizeof *f);
}

/* A step of plan on outputs poisoned first, waited for. */
static int poisoned_step(tp_group *g, const tp_block_plan *p, fixture *f) {
  for (int i = 0; i < f->n_out; ++i)
    if (tp_launch_poison(TP_BF16, f->out[i].ptr, f->out[i].count, g->main_stream) != cudaSuccess)
      return 0;
  return rc_ok(tp_block_step(g, p, &f->t), "step") &&
         cudaStreamSynchronize(g->main_stream) == cudaSuccess;
}

static int download_outputs(fixture *f) {
  for (int i = 0; i < f->n_out; ++i) {
    const size_t bytes = f->out[i].count * 2;
    f->host[i] = malloc(bytes);
    if (!f->host[i] ||
        cudaMemcpy(f->host[i], f->out[i].ptr, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
      return 0;
  }
  return 1;
}

/* The index of the first output whose device bits differ from the kept copy; -1: none. */
static int first_changed(const fixture *f) {
  for (int i = 0; i < f->n_out; ++i) {
    const size_t bytes = f->out[i].count * 2;
    void *now = malloc(bytes);
    const int same = now &&
                     cudaMemcpy(now, f->out[i].ptr, bytes, cudaMemcpyDeviceToHost) == cudaSuccess &&
                     memcmp(now, f->host[i], bytes) == 0;
    free(now);
    if (!same) return i;
  }
  return -1;
}

/* Outputs the step leaves as each projection wrote them (block_fp8.h). */
static int expected_judged(tp_block_proj proj, int backward) {
  const int weights = proj == TP_PROJ_W13 ? 2 : 1;
  const int y = proj == TP_PROJ_QKV ? 0 : proj == TP_PROJ_W13 ? (backward ? 0 : 2) : 1;
  return y + (backward ? 1 + weights : 0);
}

/* Every projection's own check after the stock step. */
static int check_projections(const fp8_case *c, fixture *f) {
  int bad = 0;
  for (int i = 0; i < TP_N_PROJ; ++i) {
    if (!f->fp8.has[i]) continue;
    tp_block_fp8_verdict v;
    if (!rc_ok(tp_block_fp8_check(&f->fp8, &f->t, (tp_block_proj)i, &c->model, &v), "check"))
      return 1;
    const tp_fp8_check *k = &v.sum;
    printf("  %-24s %-3s:fp64 (%s): %lld sampled, %lld outside, %lld non-finite, worst "
           "|err|/bound %.3g, vs bf16 operands %.2e\n",
           c->what, tp_block_proj_name((tp_block_proj)i), v.judged, (long long)k->elements,
           (long long)k->outside, (long long)k->nonfinite, k->worst_ratio, k->rel_err_bf16);
    bad |= v.n_judged != expected_judged((tp_block_proj)i, c->backward) ||
           (v.n_judged > 0 && (k->elements == 0 || k->outside > 0 || k->nonfinite > 0));
  }
  if (bad) printf("  FAIL: %s: a projection's check\n", c->what);
  return bad;
}

static double rel_of(const tp_block_diff *d) {
  return d->ref2 > 0 ? sqrt(d->diff2 / d->ref2) : INFINITY;
}

/* The layer against the bf16 layer on the same tensors; *y_err: y's error.
 * judge: hold every output to its bounds (else only measure y). */
static int against_bf16(const fp8_case *c, fixture *f, int judge, double *y_err) {
  tp_block_diff d[TP_BLOCK_MAX_OUTPUTS];
  int n = 0, bad = 0;
  if (!rc_ok(tp_block_fp8_against(c->g, &f->fp8, &f->bf16, &f->t, d, &n), "against bf16")) return 1;
  FAIL_IF(n != f->n_out, "%s: %d outputs compared of %d", c->what, n, f->n_out);
  for (int i = 0; i < n; ++i) {
    const int is_y = strcmp(d[i].name, "y") == 0;
    const double rel = rel_of(&d[i]), tol = is_y ? TOL_Y : TOL_GRAD;
    if (is_y) *y_err = rel;
    if (!judge) continue;
    const int ok = d[i].nonfinite == 0 && d[i].ref_nonfinite == 0 && rel > MIN_ERR && rel < tol;
    printf("  %-24s %s:bf16 %.3e (bounds %.0e, %.2g), %.0f / %.0f non-finite: %s\n", c->what,
           d[i].name, rel, MIN_ERR, tol, d[i].nonfinite, d[i].ref_nonfinite, ok ? "ok" : "FAIL");
    bad |= !ok;
  }
  return bad;
}

/* Multiplies the first `count` stored scales of a buffer by 2 (up) or 1/2
 * (E8M0: one exponent more or less; zero padding bytes left alone). */
static int scale_stored(void *scales, const tp_scale_shape *shape, int64_t count, int up) {
  const size_t e = shape->elem_bytes, bytes = (size_t)count * e;
  unsigned char *h = malloc(bytes);
  int ok = h && cudaMemcpy(h, scales, bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
  for (int64_t i = 0; ok && i < count; ++i) {
    if (e == 1) {
      if (h[i]) h[i] = (unsigned char)(up ? h[i] + 1 : h[i] - 1);
      continue;
    }
    float v;
    memcpy(&v, h + 4 * i, 4);
    v = up ? v * 2.0f : v * 0.5f;
    memcpy(h + 4 * i, &v, 4);
  }
  ok = ok && cudaMemcpy(scales, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  free(h);
  return ok;
}

/* Every stored weight scale of the projections that write the layer's
 * parts (wo, w2) times 2 (up) or 1/2. */
static int scale_part_weights(fixture *f, int up) {
  const tp_block_proj parts[] = {TP_PROJ_WO, TP_PROJ_W2};
  int ok = 1;
  for (int i = 0; ok && i < 2; ++i) {
    if (!f->fp8.has[parts[i]]) continue;
    tp_fp8_linear *lin = tp_linear_fp8_of(&f->fp8.proj[parts[i]]);
    ok = scale_stored(lin->w_scales[0], &lin->w_scales_shape, lin->w_scales_shape.stored, up);
  }
  return ok;
}

/* The checks can fail. The last projection's (wo, or w2) GEMMs rerun with
 * its first activation scale doubled fail its own check. With every weight
 * scale of wo and w2 doubled, the layer's parts double and its y moves far
 * from bf16's: more than 5x the quantization's own error, and past TOL_Y
 * where y is that part itself (not the block's residual sum). */
static int planted_faults(const fp8_case *c, fixture *f, double y_err) {
  const tp_block_proj last = c->layer == TP_LAYER_ATTENTION ? TP_PROJ_WO : TP_PROJ_W2;
  tp_fp8_linear *lin = tp_linear_fp8_of(&f->fp8.proj[last]);
  void *y = last == TP_PROJ_WO ? f->t.attn.y : f->t.ffn.y;
  tp_block_fp8_verdict v;
  int ok = scale_stored(lin->x_scales, &lin->x_scales_shape, 1, 1) &&
           rc_ok(tp_fp8_linear_gemms(lin, &y, c->g->main_stream), "GEMMs") &&
           cudaStreamSynchronize(c->g->main_stream) == cudaSuccess &&
           scale_stored(lin->x_scales, &lin->x_scales_shape, 1, 0) &&
           rc_ok(tp_block_fp8_check(&f->fp8, &f->t, last, &c->model, &v), "check");
  FAIL_IF(!ok, "%s: the doubled activation scale", c->what);
  printf("  %-24s %s, first activation scale doubled: %lld of %lld outside the bound\n", c->what,
         tp_block_proj_name(last), (long long)v.sum.outside, (long long)v.sum.elements);
  FAIL_IF(v.sum.outside == 0, "%s: the check missed a doubled scale", c->what);
  double faulty = 0.0;
  ok = scale_part_weights(f, 1) && poisoned_step(c->g, &f->fp8, f) &&
       against_bf16(c, f, 0, &faulty) == 0 && scale_part_weights(f, 0);
  FAIL_IF(!ok, "%s: the doubled weight scales", c->what);
  printf("  %-24s weight scales of wo, w2 doubled: y vs bf16 %.3e (unbroken %.3e)\n", c->what,
         faulty, y_err);
  FAIL_IF(!(faulty > 5.0 * y_err) || (c->layer != TP_LAYER_BLOCK && !(faulty > TOL_Y)),
          "%s: the bf16 report missed doubled weight scales", c->what);
  return 0;
}

/* A plan refused at plan time: mxfp8 below sm_100, or a backward GEMM of
 * fp8-row / fp8-block that cuBLASLt turns down (a NOTE). 0 when acceptable. */
static int refusal(const fp8_case *c, tp_rc rc) {
  const char *why = tp_last_message();
  if (rc != TP_EREJECT) return !rc_ok(rc, "plan");
  printf("  %-24s rejected: %s\n", c->what, why);
  int projection = 0; /* the reason starts with the projection refused */
  for (int i = 0; i < TP_N_PROJ; ++i) {
    const char *name = tp_block_proj_name((tp_block_proj)i);
    projection |= strncmp(why, name, strlen(name)) == 0 && why[strlen(name)] == ':';
  }
  const int names = projection && strstr(why, tp_dtype_name(c->format)) &&
                    strstr(why, "cublasLtMatmulAlgoGetHeuristic");
  if (c->format == TP_MXFP8 && c->major < 10) return !names;
  const int bwd = c->backward && c->format != TP_FP8 &&
                  (strstr(why, "dgrad GEMM") || strstr(why, "wgrad GEMM"));
  if (bwd) printf("  NOTE: cuBLASLt refuses the %s backward here\n", tp_dtype_name(c->format));
  return !(bwd && names);
}

/* The stock fp8 layer, its checks, the bf16 report, the GEMMs alone, the faults. */
static int run_planned(const fp8_case *c, fixture *f) {
  tp_group *g = c->g;
  const tp_block_shape s16 = shape_of(c->layer, TP_BF16, c->backward);
  const tp_block_shape s = shape_of(c->layer, c->format, c->backward);
  int ok = rc_ok(tp_block_plan_make(g, &s16, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &f->bf16),
                 "bf16 plan") &&
           rc_ok(tp_block_plan_make(g, &s, TP_BACKEND_GEMM_ONLY, TP_SCHED_AUTO, 0, &f->gemm),
                 "GEMM-alone plan") &&
           rc_ok(tp_block_alloc(g, &f->bf16, 7, &f->t), "tensors") &&
           rc_ok(tp_block_prepare(g, &f->bf16), "bf16 prepare") &&
           rc_ok(tp_block_prepare_weights(g, &f->fp8, &f->t), "fp8 prepare") &&
           rc_ok(tp_block_prepare_weights(g, &f->gemm, &f->t), "GEMM-alone prepare");
  FAIL_IF(!ok, "%s: set-up", c->what);
  f->n_out = tp_block_outputs(&f->fp8, &f->t, f->out);
  FAIL_IF(!poisoned_step(g, &f->fp8, f) || !download_outputs(f), "%s: the stock step", c->what);
  int bad = check_projections(c, f);
  double y_err = 0.0;
  bad |= against_bf16(c, f, 1, &y_err);
  const int changed = first_changed(f);
  FAIL_IF(changed >= 0, "%s: %s not put back after the bf16 step", c->what, f->out[changed].name);
  /* the GEMMs alone read what a full step quantized: the same outputs, bit for bit */
  FAIL_IF(!rc_ok(tp_block_twin_step(g, &f->gemm, &f->t), "quantizing step") ||
              !poisoned_step(g, &f->gemm, f),
          "%s: the GEMMs alone", c->what);
  const int differs = first_changed(f);
  printf("  %-24s GEMMs alone: %s\n", c->what,
         differs < 0 ? "every output equal to stock's, bit for bit" : f->out[differs].name);
  bad |= differs >= 0;
  return bad || planted_faults(c, f, y_err);
}

static int run_case(fp8_case *c) {
  snprintf(c->what, sizeof c->what, "%s %s %s", tp_dtype_name(c->format), tp_layer_name(c->layer),
           c->backward ? "fwd+bwd" : "fwd");
  fixture f;
  memset(&f, 0, sizeof f);
  const tp_block_shape s = shape_of(c->layer, c->format, c->backward);
  const tp_rc rc = tp_block_plan_make(c->g, &s, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &f.fp8);
  int bad;
  if (rc != TP_OK) bad = refusal(c, rc);
  else bad = (c->format == TP_MXFP8 && c->major < 10) || run_planned(c, &f);
  /* dist_gemm at TP 1: rejected, nothing travels */
  tp_block_plan dist;
  const tp_rc drc = tp_block_plan_make(c->g, &s, TP_BACKEND_DIST, TP_SCHED_AUTO, 0, &dist);
  const int dist_ok =
      drc == TP_EREJECT && strstr(tp_last_message(), "at TP 1: dist_gemm has nothing to gather");
  if (!dist_ok) printf("  FAIL: %s dist_gemm: %s\n", c->what, tp_last_message());
  tp_block_release(&dist);
  fixture_free(&f);
  bad |= !dist_ok;
  if (bad) printf("  FAIL: %s\n", c->what);
  return bad;
}

static int body(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  int major = 0, minor = 0;
  FAIL_IF(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g->device) !=
                  cudaSuccess ||
              cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, g->device) !=
                  cudaSuccess,
          "compute capability");
  const tp_dtype formats[] = {TP_FP8, TP_FP8_ROW, TP_FP8_BLOCK, TP_MXFP8};
  const tp_layer layers[] = {TP_LAYER_ATTENTION, TP_LAYER_FFN, TP_LAYER_BLOCK};
  int failures = 0;
  for (int fi = 0; fi < 4; ++fi)
    for (int li = 0; li < 3; ++li)
      for (int backward = 0; backward < 2; ++backward) {
        fp8_case c = {
            g, layers[li], formats[fi], backward, major, tp_fp8_accum_model_of(major, minor), ""};
        failures += run_case(&c);
      }
  printf("%d failure(s)\n", failures);
  fflush(stdout);
  return failures ? 1 : 0;
}

/* ---- TP 2, 4, 8: the layers with fp8 communication --------------------------------------------
 */

/* What differs between the outputs now on the device and the kept copies
 * (f->host): elementwise over every output, ||now - kept|| / ||kept||
 * (the worst output's), the differing elements, the non-finite ones. */
typedef struct host_diff {
  double rel_err, differ, nonfinite;
  const char *worst;
} host_diff;

static int diff_from_kept(const fixture *f, host_diff *d) {
  memset(d, 0, sizeof *d);
  for (int i = 0; i < f->n_out; ++i) {
    const size_t n = f->out[i].count;
    uint16_t *now = malloc(n * 2);
    if (!now || cudaMemcpy(now, f->out[i].ptr, n * 2, cudaMemcpyDeviceToHost) != cudaSuccess) {
      free(now);
      return 0;
    }
    const uint16_t *kept = f->host[i];
    double diff2 = 0.0, ref2 = 0.0;
    for (size_t j = 0; j < n; ++j) {
      const double a = gpu_bf16_to_float(now[j]), b = gpu_bf16_to_float(kept[j]);
      d->nonfinite += !isfinite(a);
      d->differ += now[j] != kept[j];
      diff2 += (a - b) * (a - b);
      ref2 += b * b;
    }
    free(now);
    const double rel = ref2 > 0 ? sqrt(diff2 / ref2) : diff2 > 0 ? INFINITY : 0.0;
    if (!(rel <= d->rel_err)) {
      d->rel_err = rel;
      d->worst = f->out[i].name;
    }
  }
  return 1;
}

/* The harness's judgement of a dist_gemm layer against the stock layer
 * (bench/gpu/layer_worker.c's layer_outputs): the bf16 outputs within
 * tp_numerics_tolerance(bf16, the longest reduction, W ranks, depth 5). */
static double layer_tolerance(const tp_block_shape *s, int world) {
  return tp_numerics_tolerance(TP_BF16, s->ffn_hidden > s->dim ? s->ffn_hidden : s->dim, world, 5);
}

/* A plan at TP > 1 that must be rejected with words in its reason. */
static int expect_rejected(tp_group *g, const tp_block_shape *s, tp_backend backend,
                           tp_schedule schedule, int chunks, const char *words, const char *what) {
  tp_block_plan p;
  const tp_rc rc = tp_block_plan_make(g, s, backend, schedule, chunks, &p);
  const int ok = rc == TP_EREJECT && strstr(tp_last_message(), words);
  printf("  %-24s %s: %s\n", what, ok ? "rejected" : "FAIL, not rejected as expected",
         rc == TP_OK ? "planned" : tp_last_message());
  tp_block_release(&p);
  return !ok;
}

/* Every TP > 1 rule the plan applies, each with its reason. */
static int tp_rejections(const fp8_case *c) {
  tp_block_shape s = shape_tp(c->layer, c->format, TP_COMM_FP8, c->backward, c->g->world);
  int bad = 0;
  bad |= expect_rejected(c->g, &s, TP_BACKEND_DIST, TP_SCHED_RING, 0,
                         "only ce and sm push fp8 chunks", c->what);
  bad |= expect_rejected(c->g, &s, TP_BACKEND_DIST, TP_SCHED_CE, 2,
                         "an fp8 shard travels whole with its scales", c->what);
  s.symm = TP_SYMM_NCCL;
  bad |=
      expect_rejected(c->g, &s, TP_BACKEND_DIST, TP_SCHED_CE, 0, "the CUDA-IPC heap only", c->what);
  s.symm = TP_SYMM_IPC;
  s.comm = TP_COMM_BF16;
  bad |= expect_rejected(c->g, &s, TP_BACKEND_DIST, TP_SCHED_CE, 0,
                         "dist_gemm with comm_dtype bf16", c->what);
  s.comm = TP_COMM_FP8;
  s.sp = 0;
  bad |= expect_rejected(c->g, &s, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, "with sp off", c->what);
  return bad;
}

/* A plan of the layer at the group's degree, prepared on f's tensors (collective). */
static int plan_prepared(const fp8_case *c, fixture *f, tp_comm_dtype comm, tp_backend backend,
                         tp_schedule schedule, tp_block_plan *p) {
  const tp_block_shape s = shape_tp(c->layer, c->format, comm, c->backward, c->g->world);
  return rc_ok(tp_block_plan_make(c->g, &s, backend, schedule, 0, p), "TP > 1 plan") &&
         rc_ok(tp_block_prepare_weights(c->g, p, &f->t), "TP > 1 prepare");
}

/* A step of p on poisoned outputs, then every output against the stock
 * layer's kept ones. */
static int step_and_diff(const fp8_case *c, fixture *f, const tp_block_plan *p, host_diff *d) {
  return poisoned_step(c->g, p, f) && diff_from_kept(f, d);
}

/* dist_gemm (a fused schedule) against the stock layer: the gather side's
 * chunk GEMMs give the whole GEMM's rows bit for bit, the scatter side sums
 * the bf16 partials in fp32 in rank order (one rounding) where NCCL sums
 * them in its order: within the layer tolerance. */
static int dist_against_stock(const fp8_case *c, fixture *f, tp_schedule schedule) {
  tp_block_plan dist;
  memset(&dist, 0, sizeof dist);
  host_diff d;
  const int ran = plan_prepared(c, f, TP_COMM_FP8, TP_BACKEND_DIST, schedule, &dist) &&
                  step_and_diff(c, f, &dist, &d);
  tp_block_release(&dist);
  FAIL_IF(!ran, "%s dist_gemm %s: set-up or step", c->what, tp_schedule_name(schedule));
  const tp_block_shape s = shape_tp(c->layer, c->format, TP_COMM_FP8, c->backward, c->g->world);
  const double tol = layer_tolerance(&s, c->g->world);
  const int ok = d.nonfinite == 0 && d.rel_err <= tol;
  printf("  %-24s dist_gemm %s vs stock: worst rel %.3e (%s) of tolerance %.3e, %.0f elements "
         "differ, %.0f non-finite: %s\n",
         c->what, tp_schedule_name(schedule), d.rel_err, d.worst ? d.worst : "-", tol, d.differ,
         d.nonfinite, ok ? "ok" : "FAIL");
  return !ok;
}

/* The GEMMs alone and the collectives alone run after a quantizing step
 * (their outputs are not the layer's: nothing to compare but that they run). */
static int references_run(const fp8_case *c, fixture *f) {
  const tp_backend refs[] = {TP_BACKEND_GEMM_ONLY, TP_BACKEND_COMM_ONLY};
  int bad = 0;
  for (int i = 0; i < 2; ++i) {
    tp_block_plan p;
    memset(&p, 0, sizeof p);
    const int ok = plan_prepared(c, f, TP_COMM_FP8, refs[i], TP_SCHED_AUTO, &p) &&
                   rc_ok(tp_block_twin_step(c->g, &p, &f->t), "quantizing step") &&
                   rc_ok(tp_block_step(c->g, &p, &f->t), "reference step") &&
                   cudaStreamSynchronize(c->g->main_stream) == cudaSuccess;
    printf("  %-24s %s: %s\n", c->what, tp_backend_axis(refs[i]), ok ? "runs" : "FAIL");
    tp_block_release(&p);
    bad |= !ok;
  }
  return bad;
}

/* The stock layer with comm_dtype fp8: finite, its projections' checks
 * (wo, w2: the local partial; w13's y; qkv none: RoPE), against the bf16
 * layer of the same degree, the planted faults; comm_dtype bf16 gives the same bits (the
 * gathered whole quantized is the shards quantized with the agreed amax);
 * dist_gemm ce and sm within the tolerance; the references run. */
static int run_tp_planned(const fp8_case *c, fixture *f) {
  tp_group *g = c->g;
  const tp_block_shape s16 = shape_tp(c->layer, TP_BF16, TP_COMM_NONE, c->backward, g->world);
  int ok = rc_ok(tp_block_plan_make(g, &s16, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &f->bf16),
                 "bf16 plan") &&
           rc_ok(tp_block_alloc(g, &f->bf16, 7, &f->t), "tensors") &&
           rc_ok(tp_block_prepare(g, &f->bf16), "bf16 prepare") &&
           rc_ok(tp_block_prepare_weights(g, &f->fp8, &f->t), "fp8 prepare");
  FAIL_IF(!ok, "%s: set-up", c->what);
  f->n_out = tp_block_outputs(&f->fp8, &f->t, f->out);
  FAIL_IF(!poisoned_step(g, &f->fp8, f) || !download_outputs(f), "%s: the stock step", c->what);
  int bad = check_projections(c, f);
  double y_err = 0.0;
  bad |= against_bf16(c, f, 1, &y_err);
  tp_block_plan bf16_comm;
  memset(&bf16_comm, 0, sizeof bf16_comm);
  host_diff d;
  ok = plan_prepared(c, f, TP_COMM_BF16, TP_BACKEND_STOCK, TP_SCHED_AUTO, &bf16_comm) &&
       step_and_diff(c, f, &bf16_comm, &d);
  tp_block_release(&bf16_comm);
  FAIL_IF(!ok, "%s: the comm_dtype bf16 layer", c->what);
  printf("  %-24s comm_dtype bf16 vs fp8: %.0f elements differ: %s\n", c->what, d.differ,
         d.differ == 0 && d.nonfinite == 0 ? "ok, the same bits" : "FAIL");
  bad |= d.differ != 0 || d.nonfinite != 0;
  bad |= dist_against_stock(c, f, TP_SCHED_CE);
  bad |= dist_against_stock(c, f, TP_SCHED_SM);
  bad |= references_run(c, f);
  /* last: the faults rerun the stock plan's projections on scaled scales */
  FAIL_IF(!poisoned_step(g, &f->fp8, f), "%s: the stock step again", c->what);
  return bad || planted_faults(c, f, y_err);
}

static int has_attention(tp_layer l) { return l != TP_LAYER_FFN; }
static int has_ffn(tp_layer l) { return l != TP_LAYER_ATTENTION; }

/* fp8-block's placement rule restated (tp_quant.h: a rank's part of a split dimension is whole
 * scale blocks): the dimensions the layer's projections split, forward: wo's K (the query
 * width) and w2's K (FFN); with the backward also qkv's N (dY along N), w13's N (FFN) and T
 * (the wgrad operands transposed along T). 1 when every one splits into whole blocks. */
static int splits_whole_blocks(const tp_block_shape *s, int world) {
  int64_t dims[4];
  int n = 0;
  if (has_attention(s->layer)) dims[n++] = s->n_heads * s->head_dim;
  if (has_attention(s->layer) && s->backward)
    dims[n++] = (s->n_heads + 2 * s->n_kv_heads) * s->head_dim;
  if (has_ffn(s->layer)) dims[n++] = s->ffn_hidden;
  if (s->backward) dims[n++] = s->batch * s->seq;
  for (int i = 0; i < n; ++i)
    if (dims[i] % world != 0 || (dims[i] / world) % SCALE_BLOCK != 0) return 0;
  return 1;
}

/* The words a plan of shape s at TP `world` must be rejected with; NULL: it must plan (or be
 * refused by cuBLASLt, as refusal() accepts). */
static const char *rule_words(const tp_block_shape *s, tp_dtype format, int world) {
  if (has_attention(s->layer) && (s->n_heads % world != 0 || s->n_kv_heads % world != 0))
    return "must both divide by TP";
  if (format == TP_FP8_BLOCK && !splits_whole_blocks(s, world))
    return "-element scale block along it";
  return NULL;
}

/* At TP 4 and 8 the TP 2 shape, not grown: the rules must reject it where they say so, each
 * with its reason (heads that do not divide; fp8-block's blocks straddling two ranks). */
static int tp2_shape_at_degree(const fp8_case *c) {
  const tp_block_shape s = shape_tp2(c->layer, c->format, c->backward);
  const char *words = rule_words(&s, c->format, c->g->world);
  tp_block_plan p;
  memset(&p, 0, sizeof p);
  const tp_rc rc = tp_block_plan_make(c->g, &s, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &p);
  char why[512];
  snprintf(why, sizeof why, "%s", rc == TP_OK ? "planned" : tp_last_message());
  tp_block_release(&p);
  int ok;
  if (words) ok = rc == TP_EREJECT && strstr(why, words);
  else ok = rc == TP_OK || refusal(c, rc) == 0;
  printf("  %-24s the TP 2 shape at TP %d: %s, %s: %s\n", c->what, c->g->world,
         words ? "rejected by the rules" : "within the rules", why,
         ok ? "ok" : "FAIL, not as the rules say");
  return !ok;
}

static int run_tp_case(fp8_case *c) {
  snprintf(c->what, sizeof c->what, "TP %d %s %s %s", c->g->world, tp_dtype_name(c->format),
           tp_layer_name(c->layer), c->backward ? "fwd+bwd" : "fwd");
  fixture f;
  memset(&f, 0, sizeof f);
  const tp_block_shape s = shape_tp(c->layer, c->format, TP_COMM_FP8, c->backward, c->g->world);
  const tp_rc rc = tp_block_plan_make(c->g, &s, TP_BACKEND_STOCK, TP_SCHED_AUTO, 0, &f.fp8);
  int bad;
  if (rc != TP_OK) bad = refusal(c, rc);
  else bad = (c->format == TP_MXFP8 && c->major < 10) || run_tp_planned(c, &f);
  fixture_free(&f);
  bad |= tp_rejections(c);
  if (c->g->world > 2) bad |= tp2_shape_at_degree(c);
  if (bad) printf("  FAIL: %s\n", c->what);
  return bad;
}

static int body_tp(tp_group *g, tp_rdzv *rdzv, void *ctx) {
  (void)rdzv;
  (void)ctx;
  int major = 0, minor = 0;
  FAIL_IF(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g->device) !=
                  cudaSuccess ||
              cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, g->device) !=
                  cudaSuccess,
          "compute capability");
  const tp_dtype formats[] = {TP_FP8, TP_FP8_ROW, TP_FP8_BLOCK, TP_MXFP8};
  const tp_layer layers[] = {TP_LAYER_ATTENTION, TP_LAYER_FFN, TP_LAYER_BLOCK};
  int failures = 0;
  for (int fi = 0; fi < 4; ++fi)
    for (int li = 0; li < 3; ++li)
      for (int backward = 0; backward < 2; ++backward) {
        fp8_case c = {
            g, layers[li], formats[fi], backward, major, tp_fp8_accum_model_of(major, minor), ""};
        failures += run_tp_case(&c);
      }
  printf("TP %d: %d failure(s)\n", g->world, failures);
  fflush(stdout);
  return failures ? 1 : 0;
}

static void print_shape_tp(int world) {
  const tp_block_shape s = shape_tp(TP_LAYER_BLOCK, TP_FP8, TP_COMM_FP8, 1, world);
  printf("TP %d: batch %lld x seq %lld (%lld rows per rank), dim %lld, %lld heads and %lld KV "
         "heads of %lld (%lld and %lld per rank), FFN %lld (%lld per rank); fp8-block's splits in "
         "whole %d-blocks: %s\n",
         world, (long long)s.batch, (long long)s.seq, (long long)(s.batch * s.seq / world),
         (long long)s.dim, (long long)s.n_heads, (long long)s.n_kv_heads, (long long)s.head_dim,
         (long long)(s.n_heads / world), (long long)(s.n_kv_heads / world), (long long)s.ffn_hidden,
         (long long)(s.ffn_hidden / world), SCALE_BLOCK,
         splits_whole_blocks(&s, world) ? "yes" : "NO");
}

static void test_fp8_blocks_tp1(void **state) {
  assert_int_equal(gpu_run_group(gpu_case_degree(state), body, NULL), 0);
}

/* The layers at TP 2, 4, 8: fused schedules and the communication need a peer. */
static void test_fp8_blocks_tp(void **state) {
  const int world = gpu_case_degree(state);
  print_shape_tp(world);
  assert_int_equal(gpu_run_group(world, body_tp, NULL), 0);
}

int main(int argc, char **argv) {
  const gpu_tp_test tests[] = {
      {"fp8_blocks_tp1", test_fp8_blocks_tp1, 1, 1},
      {"fp8_blocks", test_fp8_blocks_tp, 2, GPU_MAX_DEGREE},
  };
  return gpu_run_tp_tests("gpu_fp8_blocks", tests, sizeof tests / sizeof tests[0], argc, argv);
}
