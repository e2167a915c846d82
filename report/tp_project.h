/*
 * tp_project.h — `tpbench project`: an op's stock and dist_gemm time at other TP degrees and
 * link bandwidths, predicted from measured GEMM rates and the link probe, and checked against
 * the rows measured at a projected degree. A prediction, never a measurement: the output says
 * so in a header line and a column.
 *
 * The model (docs/projection.md says the same with the figures). W is the degree, T the
 * tokens, e the dtype's bytes:
 *
 *  1. Shapes. An op shape is global (tokens T, out features N per weight, in features K,
 *     weights: 2 for ag_linear_multi). One rank's GEMM at TP W is the shard `tpbench ops` runs
 *     (bench/matrix/ops_matrix.h): M = T; N / W for the all-gather ops, K / W for linear_rs.
 *     A degree that does not divide N (or K) or T is not projected (the row says so).
 *  2. GEMM time of an M×N×K GEMM (a shard, or a chunk of one). A measured GEMM alone (kind
 *     gemm, pass fwd) of the same M, N, K, weights and dtype: its median (the latest such
 *     row). Otherwise the achieved rate, linear in log FLOPs between the nearest measured FLOP
 *     counts below and above (same dtype; a count measured more than once gives the mean of
 *     its rates). Above the measured counts the largest count's rate is held. Below them the
 *     time falls linearly in FLOPs from the smallest count's time to the kernel cost k at zero
 *     FLOPs (point 6): a kernel's launch, pipeline fill and epilogue do not shrink with it, so
 *     a chunk of M / C rows runs below the whole GEMM's rate. The rate is taken to depend on
 *     the FLOP count alone, not on the aspect of the shape.
 *  3. Communication. Per rank, V = (W − 1)/W of the gathered tensor crosses the rank's links
 *     (all-gather: its T×K input; reduce-scatter: the T×N partial output). The time of B
 *     bytes comes from the link probe's curve of that transport (points: per-rank bytes,
 *     time): the line through the two neighbouring points, t = latency + B / bandwidth (so
 *     the probe's per-call latency is kept); below the smallest point the line through the two
 *     smallest, above the largest the line through the two largest (a single point: no
 *     latency; a line that would fall with size: the bracketing point's bandwidth, no
 *     latency). On an NVSwitch host every rank's links run at the per-GPU bandwidth whatever W
 *     is, so the curve measured on a pair holds at TP 4 and 8. --link-gbps replaces the
 *     bandwidth of every transport (the probe's latency stays when there is a probe, else 0).
 *  4. stock = G(T rows)·p + the NCCL collective's time c at V (nccl_all_gather or
 *     nccl_reduce_scatter): the GEMM and the collective do not overlap; NCCL's latency is the
 *     probe's at its degree, the same at every W. p, the pace factor, is how much faster a
 *     GEMM runs when each call follows a gap of c than back to back (the GEMM-alone rows): the
 *     GPU's clock, held down by a GEMM's power, recovers while the collective keeps few SMs
 *     busy. It comes from `tpbench link`'s GEMMs between gaps (bench/gpu/link_pacing.h) on
 *     the GEMM rows' GPU (their card's clock): per probed shape, its time after a gap of g %
 *     of its back-to-back time over the back-to-back time, linear in g between the probed gaps
 *     (the largest gap's held above), and linear in log FLOPs between the two probed shapes
 *     around the GEMM's FLOPs (the nearest one's held outside). Without such a probe p = 1
 *     (the output says so).
 *  5. dist_gemm = the fused op's two streams per rank, simulated in the order the code issues
 *     them (kernels/tp_linear_fused.c), every rank alike. C = the chunks `auto` picks
 *     (common/tp_chunk_rule.h), S = T / W rows per rank, R = S / C rows a chunk.
 *       copy stream: the barrier b, then (W − 1)·C pushes of R rows, one after another, each
 *       push(R·row) from the ce_push line;
 *       main stream, all-gather side: the local shard's GEMM G(S), then per chunk and peer a
 *       wait for that push and the GEMM G(R) of its rows;
 *       main stream, reduce-scatter side: per chunk, the W − 1 partial GEMMs G(R) (each push
 *       starts once its partial is written), then the previous chunk's local GEMM G(R) after
 *       its W − 1 waits, a reduce pass over the W − 1 partials when W > 2 and the GEMM's read
 *       of the summed partial as its C operand; the last local GEMM is the drain.
 *     A wait ends at max(main stream's time + w, the push's landing + h); a push that waits
 *     for its partial starts at max(copy stream's time, partial's end + w). Local memory
 *     traffic (the reduce pass: W·R·N·e bytes; the C read: R·N·e) runs at the probe's local
 *     rate. dist_gemm is the later of the two streams' ends. Where `auto` takes the stock path
 *     (below 4 MiB per rank and transfer), dist_gemm = stock.
 *  6. Per-op costs, each from a probe point of its own (`tpbench link`), else from a fallback
 *     rule on the probe's older points, which the output names:
 *       L  push latency: ce_push's smallest point when at most 1 MiB, else the line's latency;
 *       k  kernel cost: sm_push's smallest point when at most 1 MiB, else its line's latency;
 *       b  barrier: the barrier point; fallback 2·h (a barrier is one flag round trip);
 *       h  handoff: half the flag_round_trip point; fallback L (a flag is a small write to the
 *          peer behind the push, on the same copy stream);
 *       w  a met dependency: the flag_wait point; fallback L;
 *       local memory rate: the local_copy point (2·bytes per time: read and write), fallback
 *          the GPU's datasheet HBM bandwidth, else the terms are left out (the note says so).
 *  Degree-dependent: V = (W − 1)/W·T·width·e; (W − 1)·C pushes and waits per op; 1 + (W − 1)·C
 *  GEMMs on the all-gather side, W·C on the reduce-scatter side, of R = T/(W·C) rows; the
 *  reduce pass from W = 3; stock's pace factor through the gap c/G, which falls with W at a
 *  fixed shape when the collective's time falls less than the GEMM's. Left out: links shared by
 *  concurrent pushes, NCCL choosing another algorithm or paying more steps at another degree, a
 *  barrier waiting longer for the slowest of more ranks, a collective drawing more or less
 *  power than the probe's idle gap, dist_gemm's GEMMs at other clocks beside its pushes, the
 *  backward pass.
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

/* The link probe's points the model reads: transports (bytes through one rank's links) and
 * per-call latencies (flags, barrier) of `tpbench link`. */
typedef enum {
  TP_LINK_NCCL_ALL_GATHER = 0,
  TP_LINK_NCCL_REDUCE_SCATTER,
  TP_LINK_CE_PUSH,
  TP_LINK_SM_PUSH,
  TP_LINK_LOCAL_COPY,      /* a copy within one GPU: bytes copied (read once, written once) */
  TP_LINK_BARRIER,         /* the fused op's barrier, per call */
  TP_LINK_FLAG_ROUND_TRIP, /* a flag to a peer and back, per call */
  TP_LINK_FLAG_WAIT,       /* a flag wait and reset that finds the flag raised, per call */
  TP_LINK_KINDS
} tp_link_kind;

/* The probe's name of a point kind ("nccl_all_gather", "flag_round_trip", ...). */
const char *tp_link_kind_name(tp_link_kind kind);

/* One probe point: bytes through one rank's links (a collective's shares of the other
 * ranks, a push's bytes; a flag's 4, a barrier's 0) and the slowest rank's median time. */
typedef struct tp_project_link_point {
  int64_t config_id;
  double bytes, time_us;
} tp_project_link_point;

/* A kind's points, sorted by bytes (ascending, no two alike). */
typedef struct tp_project_link_curve {
  const tp_project_link_point *points;
  size_t n;
} tp_project_link_curve;

/* One point of the GEMMs between gaps (model point 4): a shape's median after a gap of
 * gap_pct % of its back-to-back time before each call (gap 0: back to back). */
typedef struct tp_project_pace_point {
  int64_t config_id;
  double flops, gap_pct, time_us;
} tp_project_pace_point;

/* Every point of one probe run, sorted by FLOPs, then gap (no two alike); n = 0: none. */
typedef struct tp_project_pacing {
  const tp_project_pace_point *points;
  size_t n;
} tp_project_pacing;

/* Stock's pace factor of one GEMM and what it was read from. */
typedef struct tp_project_pace_est {
  double factor;        /* p: 1 without points */
  double gap_pct;       /* the collective's time over the GEMM's, % */
  int64_t lo_id, hi_id; /* the gap's point read of the shape below and of the shape above
                           (the same one when a shape is held); 0: none read */
  char source[256];
} tp_project_pace_est;

/* p for a GEMM of flops FLOPs taking gemm_us back to back, each call following a collective of
 * coll_us (model point 4). A shape without its gap-0 point is skipped; none usable: p = 1. */
void tp_project_pace(const tp_project_pacing *pacing, double flops, double gemm_us, double coll_us,
                     tp_project_pace_est *est);

/* The fused pipeline's fixed costs (model point 6). */
typedef enum {
  TP_COST_PUSH_LATENCY = 0, /* L, µs */
  TP_COST_KERNEL,           /* k, µs */
  TP_COST_BARRIER,          /* b, µs */
  TP_COST_HANDOFF,          /* h, µs */
  TP_COST_WAIT,             /* w, µs */
  TP_COST_LOCAL_GBPS,       /* local memory traffic, GB/s */
  TP_COST_KINDS
} tp_cost_kind;

/* A cost's name in the output ("push latency", "kernel", ...). */
const char *tp_cost_kind_name(tp_cost_kind kind);

/* One cost and where it came from. */
typedef struct tp_project_cost {
  double value;      /* NaN: unknown, the term left out */
  int measured;      /* 1: a probe point of its own; 0: a fallback rule */
  int64_t config_id; /* the probe point read; 0: none */
  char source[200];
} tp_project_cost;

/* Every cost from the probe's points (links indexed by tp_link_kind); gpu_name (the probe
 * run's GPU, may be NULL) picks the datasheet HBM bandwidth when no local_copy point exists. */
void tp_project_resolve_costs(const tp_project_link_curve *links, const char *gpu_name,
                              tp_project_cost *costs);

/* Everything a prediction reads. */
typedef struct tp_project_inputs {
  const tp_project_gemm *gemms;
  size_t n_gemms;
  tp_project_link_curve links[TP_LINK_KINDS];
  tp_project_cost costs[TP_COST_KINDS];
  tp_project_pacing pacing; /* stock's GEMMs between collectives (n = 0: p = 1) */
  double link_gbps; /* > 0: the bandwidth of every transport (--link-gbps); 0: the probe's */
} tp_project_inputs;

/* A GEMM time and where it came from. */
typedef struct tp_project_gemm_est {
  double flops, us, tflops; /* NaN us and tflops: no rate of the dtype */
  int exact;                /* 1: a measured row of the same shard */
  int extrapolated;         /* 1: beyond the measured FLOP counts */
  int64_t lo_id, hi_id;     /* the rows read: both the exact row's id when exact */
  char source[256];         /* "config 243", "interpolated ...", "extrapolated ..." */
} tp_project_gemm_est;

/* A transfer time and the line it was read from. */
typedef struct tp_project_link_est {
  double bytes, us, gbps, latency_us; /* NaN us: no curve and no override */
  char source[120];
} tp_project_link_est;

/* The fused pipeline of one op at one degree (model point 5), and its parts. */
typedef struct tp_project_pipeline {
  int chunks;               /* C per rank's shard; 0: not run (note says why) */
  int64_t shard_rows;       /* S = T / W: the all-gather side's local GEMM */
  int64_t chunk_rows;       /* R = T / (W·C) */
  int pushes, waits, gemms; /* per rank and op: (W − 1)·C, (W − 1)·C, the GEMM kernels */
  int stock_path;           /* auto takes the stock path here: dist_gemm = stock */
  tp_project_gemm_est shard_gemm; /* G(S): the all-gather side's local shard (unused on the
                                     reduce-scatter side: flops 0) */
  tp_project_gemm_est chunk_gemm; /* G(R) */
  tp_project_link_est push;       /* one chunk's push */
  double local_us;    /* reduce-scatter side: one chunk's local traffic (reduce pass, C read) */
  double gemm_sum_us; /* every GEMM of the main stream, back to back */
  double stall_us;    /* main stream time not spent in GEMMs or local traffic: waits, handoffs */
  double drain_us;    /* from the last partial GEMM's end (reduce-scatter side) or the last
                         push's landing (all-gather side) to the op's end */
  double total_us;    /* the later stream's end */
} tp_project_pipeline;

/* One shape at one degree: every input and the predictions. */
typedef struct tp_project_row {
  tp_project_shape shape;
  int tp;
  int64_t m, n, k; /* the rank's shard */
  tp_project_gemm_est gemm;
  tp_project_link_est coll;          /* the stock path's NCCL collective over V */
  tp_project_pace_est pace;          /* stock's GEMM: gemm.us · pace.factor */
  tp_project_pipeline pipe;          /* dist_gemm's pipeline */
  double stock_us, dist_us, speedup; /* NaN: not projected (note says why) */
  char note[160];
} tp_project_row;

/* The GEMM time of an M×N×K GEMM with n_weights weights in dtype from the measured rows
 * (model point 2); kernel_us is k, the time at zero FLOPs below the measured counts (NaN or
 * not below the smallest count's time: that count's rate held). est->us is NaN with the
 * reason in est->source when no row has the dtype. */
void tp_project_gemm_time(const tp_project_gemm *gemms, size_t n_gemms, int64_t m, int64_t n,
                          int64_t k, int64_t n_weights, tp_dtype dtype, double kernel_us,
                          tp_project_gemm_est *est);

/* The time of bytes over a curve (model point 3); gbps_override > 0 replaces the
 * bandwidth. est->us is NaN when the curve is empty and there is no override. */
void tp_project_link_time(const tp_project_link_curve *curve, double bytes, double gbps_override,
                          tp_project_link_est *est);

/* stock = GEMM · pace factor + collective (model point 4). */
double tp_project_stock_us(double gemm_us, double pace_factor, double coll_us);

/* The fused pipeline (model point 5) of shape at degree tp, whose shard is m×n×k, with chunks
 * chunks (0: the count auto picks). pipe->total_us is NaN when an input is missing. */
void tp_project_dist_pipeline(const tp_project_inputs *in, const tp_project_shape *shape, int tp,
                              int chunks, tp_project_pipeline *pipe);

/* Bytes one rank's links carry in the op's collective at degree tp: (tp − 1)/tp of the
 * gathered tensor. */
double tp_project_volume_bytes(const tp_project_shape *shape, int tp);

/* Predicts shape at degree tp from in (tp >= 2). A degree that does not divide the shape
 * leaves the predictions NaN with the note saying so. */
void tp_project_predict(const tp_project_inputs *in, const tp_project_shape *shape, int tp,
                        tp_project_row *row);

/* Measured rows shorter than this are listed but left out of the error summary: there a
 * launch or a host stall moves the time by more than the model's terms. */
#define TP_PROJECT_MIN_JUDGED_US 100.0

/* The error summary of one backend at one degree: signed errors (predicted − measured) /
 * measured in %, over the rows measured at >= TP_PROJECT_MIN_JUDGED_US. */
typedef struct tp_project_error_summary {
  int rows;              /* rows summarised */
  double median_pct;     /* signed median; NaN without rows */
  double worst_abs_pct;  /* the largest |error| */
  double worst_pct;      /* that error, signed */
  double median_abs_pct; /* the median |error| */
  size_t worst_index;    /* its index among the errors given */
} tp_project_error_summary;

/* Summarises errors[i] (NaN: no pair, skipped) of rows measured at measured_us[i]. TP_EOOM
 * when no memory. */
TP_MUST_CHECK tp_rc tp_project_summarise_errors(const double *errors, const double *measured_us,
                                                size_t n, tp_project_error_summary *out);

/* What `tpbench project` was asked. */
typedef struct tp_project_request {
  int64_t run_id;       /* 0: every run (the latest row per shard shape); else GEMM rows, shapes and
                           measured rows of this run only */
  int gemm_tp;          /* > 0: GEMM rates only from rows measured at this degree (1: single-GPU
                           GEMMs, so TP 2 is predicted without its own shard rows); 0: any */
  const char *gemm_gpu; /* GEMM rates only from rows of this GPU (runs.gpu_name); NULL: the GPU
                           of the latest GEMM row. Two cards' rates never mix */
  const int *tps;       /* the degrees, each >= 2 */
  int n_tps;
  double link_gbps;               /* > 0: --link-gbps */
  const tp_project_shape *shapes; /* NULL: every op shape the database measured; else these */
  int64_t shapes_run; /* > 0 (shapes NULL): only the op shapes this run measured (GEMM rows as
                         run_id says), e.g. a job's own ops beside its bare GEMM shapes */
  size_t n_shapes;
  const char *columns; /* --columns of the predictions: NULL the format's default (markdown a
                          compact table, CSV and JSON every field), "all" every input, or names */
  int gemms; /* 1: write every GEMM the predictions read (tp_project_report's GEMM list, CSV)
                instead of the report */
} tp_project_request;

/* Checks a --columns value (tp_project_request.columns) before any database is read: TP_OK for
 * NULL, "all" or a list of known names; TP_EUSAGE naming an unknown or repeated column, with
 * every valid name. */
TP_MUST_CHECK tp_rc tp_project_check_columns(const char *columns);

/*
 * `tpbench project`: loads the shapes (the request's, else the database's) and GEMM rows (pass
 * fwd, ops' three op kinds), the latest link probe (one without test knobs in force when there
 * is one), projects every shape at every degree and writes the inputs, the costs, the
 * predictions and — where the database holds stock or dist_gemm rows measured at a projected
 * degree — the validation (error % per shape; per backend the signed median and the worst
 * |error|) in fmt; the predictions in req->columns' columns (markdown's default: a compact
 * table of what was predicted; the costs, validation and summaries whatever the columns).
 * TP_EUSAGE, with the message naming what is wrong: an unknown column, no such run, no GEMM
 * rows (or none on req->gemm_gpu: the GPUs that have some named), no link probe without
 * --link-gbps. Nothing is written to out on an error.
 * With req->gemms the output is instead the GEMM list, CSV whatever fmt: one line per GEMM a
 * prediction reads (stock's G(T); dist_gemm's G(S) on the all-gather side and G(R)), its
 * shape as `tpbench ops --shape` takes it (M, N per weight, K, op; at TP 1 the shard is the
 * whole), whether a row measured that exact shape and the time read or estimated, so the
 * estimated ones can be measured on one GPU and read exactly.
 */
TP_MUST_CHECK tp_rc tp_project_report(tp_store *store, const tp_project_request *req,
                                      tp_report_format fmt, FILE *out);

#endif /* TP_PROJECT_H */
