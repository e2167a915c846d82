/*
 * tp_project.h — `tpbench project`: an op's stock and dist_gemm time at other TP degrees and
 * link bandwidths, predicted from measured GEMM rates and the link probe, and checked against
 * the rows measured at a projected degree.
 *
 * The model, every assumption it rests on (docs/projection.md, "The model", says the
 * same with the figures):
 *
 *  1. Shapes. An op shape is global (tokens T, out features N per weight, in features K,
 *     weights W: 2 for ag_linear_multi). One rank's GEMM at TP p is the shard `tpbench ops`
 *     runs (bench/matrix/ops_matrix.h): M = T; N / p for the all-gather ops, K / p for
 *     linear_rs. A degree that does not divide N (or K) or T is not projected (the row says so).
 *  2. GEMM time G of the shard. A measured GEMM alone (kind gemm, pass fwd) of the same M, N,
 *     K, weights and dtype: its median (the latest such row). Otherwise the achieved rate is
 *     interpolated: FLOPs = 2·M·N·K·W; between the nearest measured FLOP counts below and above
 *     (same dtype; a count measured more than once gives the mean of its rates), the rate is
 *     linear in log FLOPs; beyond the measured range, the nearest count's rate, held flat. The
 *     GEMM rate is taken to depend on the FLOP count alone, not on the aspect of the shape.
 *  3. Communication. Per rank, V = (p − 1)/p of the gathered tensor crosses the rank's links
 *     (all-gather: its T×K input; reduce-scatter: the T×N partial output). The time of V bytes
 *     comes from the link probe's curve of that transport (points: per-rank bytes, time): the
 *     line through the two neighbouring points, t = latency + V / bandwidth (so the probe's
 *     per-call latency is kept); below the smallest point the line through the two smallest,
 *     above the largest the line through the two largest (a single point: no latency; a
 *     line that would fall with size: the bracketing point's bandwidth, no latency). On an
 *     NVSwitch host every rank's links run at the per-GPU bandwidth whatever p is, so the curve
 *     measured on a pair holds at TP 4 and 8. --link-gbps replaces the bandwidth of every
 *     transport (the probe's latency stays when there is a probe, else 0).
 *  4. stock = G + the NCCL collective's time at V (nccl_all_gather or nccl_reduce_scatter):
 *     the GEMM and the collective do not overlap.
 *  5. dist_gemm = a pipeline over p chunks (one per rank's rows), pushed by the copy engine
 *     (the `ce` schedule `auto` picks): chunk GEMM g = G / p, chunk transfer c = the ce_push
 *     time of V / (p − 1) bytes, and
 *         dist_gemm = g + (p − 1)·max(g, c)
 *     The first g is the fill: on the all-gather side the local chunk's GEMM, which waits for
 *     no transfer; on the reduce-scatter side the first partial's GEMM, before anything can be
 *     pushed. Each of the other p − 1 chunks costs the slower of its transfer and its GEMM.
 *  Left out: the reduce-scatter side's drain (the local rows wait for the last partial to
 *  land: up to min(g, c), less with the finer chunks auto picks there), the fused op's
 *  barrier and flag waits, chunk GEMMs slower than the whole, links shared by concurrent
 *  pushes, auto's fall-back to the stock path below 4 MiB per transfer, NCCL choosing another
 *  algorithm at another degree, the backward pass.
 *
 * Times are µs, bandwidths GB/s (10⁹ bytes/s), rates TFLOP/s. Pure C over the store.
 */
#ifndef TP_PROJECT_H
#define TP_PROJECT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/tp_error.h"
#include "common/tp_vocab.h"
#include "report/tp_report.h"
#include "store/tp_store.h"

/* One op shape, global, as a model's projection. */
typedef struct tp_project_shape {
  char model[48], proj[48];
  tp_op op;
  tp_dtype dtype;
  int64_t tokens, n, k, n_weights; /* M = tokens; N per weight */
} tp_project_shape;

/* One measured GEMM alone: the shard it ran and its median. */
typedef struct tp_project_gemm {
  int64_t config_id, run_id;
  int64_t m, n, k, n_weights;
  tp_dtype dtype;
  double median_us;
} tp_project_gemm;

/* The transports of the link probe the model reads. */
typedef enum {
  TP_LINK_NCCL_ALL_GATHER = 0,
  TP_LINK_NCCL_REDUCE_SCATTER,
  TP_LINK_CE_PUSH,
  TP_LINK_KINDS
} tp_link_kind;

/* The probe's name of a transport ("nccl_all_gather", ...). */
const char *tp_link_kind_name(tp_link_kind kind);

/* One probe point: bytes through one rank's links (a collective's shares of the other
 * ranks, a push's bytes) and the slowest rank's median time. */
typedef struct tp_project_link_point {
  int64_t config_id;
  double bytes, time_us;
} tp_project_link_point;

/* A transport's points, sorted by bytes (ascending, no two alike). */
typedef struct tp_project_link_curve {
  const tp_project_link_point *points;
  size_t n;
} tp_project_link_curve;

/* Everything a prediction reads. */
typedef struct tp_project_inputs {
  const tp_project_gemm *gemms;
  size_t n_gemms;
  tp_project_link_curve links[TP_LINK_KINDS];
  double link_gbps; /* > 0: the bandwidth of every transport (--link-gbps); 0: the probe's */
} tp_project_inputs;

/* A GEMM time and where it came from. */
typedef struct tp_project_gemm_est {
  double flops, us, tflops; /* NaN us and tflops: no rate of the dtype */
  int exact;                /* 1: a measured row of the same shard */
  int extrapolated;         /* 1: beyond the measured FLOP counts, the nearest rate held */
  int64_t lo_id, hi_id;     /* the rows read: both the exact row's id when exact */
  char source[256];         /* "config 243", "interpolated ...", "extrapolated ..." */
} tp_project_gemm_est;

/* A transfer time and the line it was read from. */
typedef struct tp_project_link_est {
  double bytes, us, gbps, latency_us; /* NaN us: no curve and no override */
  char source[120];
} tp_project_link_est;

/* One shape at one degree: every input and the predictions. */
typedef struct tp_project_row {
  tp_project_shape shape;
  int tp;
  int64_t m, n, k; /* the rank's shard */
  tp_project_gemm_est gemm;
  tp_project_link_est coll;          /* the stock path's NCCL collective over V */
  tp_project_link_est chunk;         /* one ce push of V / (tp - 1) */
  double stock_us, dist_us, speedup; /* NaN: not projected (note says why) */
  char note[120];
} tp_project_row;

/* The GEMM time of an M×N×K shard with n_weights weights in dtype from the measured rows
 * (model point 2). TP_OK always; est->us is NaN with the reason in est->source when no row
 * has the dtype. */
void tp_project_gemm_time(const tp_project_gemm *gemms, size_t n_gemms, int64_t m, int64_t n,
                          int64_t k, int64_t n_weights, tp_dtype dtype, tp_project_gemm_est *est);

/* The time of bytes over a curve (model point 3); gbps_override > 0 replaces the
 * bandwidth. est->us is NaN when the curve is empty and there is no override. */
void tp_project_link_time(const tp_project_link_curve *curve, double bytes, double gbps_override,
                          tp_project_link_est *est);

/* stock = GEMM + collective (model point 4). */
double tp_project_stock_us(double gemm_us, double coll_us);

/* dist_gemm's pipeline over tp chunks (model point 5): gemm_us is the whole shard's G,
 * chunk_us one chunk's transfer. NaN for tp < 2. */
double tp_project_dist_us(int tp, double gemm_us, double chunk_us);

/* Bytes one rank's links carry in the op's collective at degree tp: (tp − 1)/tp of the
 * gathered tensor. */
double tp_project_volume_bytes(const tp_project_shape *shape, int tp);

/* Predicts shape at degree tp from in (tp >= 2). A degree that does not divide the shape
 * leaves the predictions NaN with the note saying so. */
void tp_project_predict(const tp_project_inputs *in, const tp_project_shape *shape, int tp,
                        tp_project_row *row);

/* What `tpbench project` was asked. */
typedef struct tp_project_request {
  int64_t run_id; /* 0: every run (the latest row per shard shape); else GEMM rows, shapes and
                     measured rows of this run only */
  int gemm_tp;    /* > 0: GEMM rates only from rows measured at this degree (1: single-GPU
                     GEMMs, so TP 2 is predicted without its own shard rows); 0: any */
  const int *tps; /* the degrees, each >= 2 */
  int n_tps;
  double link_gbps; /* > 0: --link-gbps */
} tp_project_request;

/*
 * `tpbench project`: loads the shapes and GEMM rows (pass fwd, ops' three op kinds), the
 * latest link probe, projects every shape at every degree and writes the inputs, the
 * predictions and — where the database holds stock or dist_gemm rows measured at a projected
 * degree — the validation (error % per shape, median |error|) in fmt. TP_EUSAGE, with the
 * message naming what is missing: no such run, no GEMM rows, no link probe without
 * --link-gbps. Nothing is written to out on an error.
 */
TP_MUST_CHECK tp_rc tp_project_report(tp_store *store, const tp_project_request *req,
                                      tp_report_format fmt, FILE *out);

#endif /* TP_PROJECT_H */
