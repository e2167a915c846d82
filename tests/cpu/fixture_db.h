/*
 * fixture_db.h — databases the report, compare, import, trace and dashboard
 * tests share. Header-only (static functions), like bench_testutil.h.
 *
 * The base is tests/data/h200_pair_run1.db: a real `tpbench ops` run on two
 * H200s (see tests/data/README.md), copied into a scratch directory and
 * migrated by opening it. Everything added on top is SYNTHESISED HERE and
 * marked so in the database itself (host "synthetic", a command line that
 * says "synthesised by tests/cpu ... not measured"): a second run at another
 * commit whose samples are the real ones scaled and jittered, and traces
 * whose events are made up to the shape a two-rank CUPTI window has. None of
 * it is a measurement.
 */
#ifndef TP_FIXTURE_DB_H
#define TP_FIXTURE_DB_H

#include <ftw.h>
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/tp_store.h"

#define FX_REAL_DB TP_TEST_DATA_DIR "/h200_pair_run1.db"
/* The sample database of real runs at two commits (examples/README.md). */
#define FX_SAMPLE_DB TP_TEST_DATA_DIR "/../../examples/tpbench-h200-sample.db"
#define FX_SYNTHETIC_HOST "synthetic"
#define FX_SYNTHETIC_NOTE "synthesised by tests/cpu/fixture_db.h from run 1: not measured"

/* ---- scratch directories -------------------------------------------------- */

typedef struct fx_dir {
  char path[256];
} fx_dir;

/* A fresh directory under $TMPDIR (or /tmp); 0 on success. */
static inline int fx_mkdir(fx_dir *d, const char *tag) {
  const char *tmp = getenv("TMPDIR");
  snprintf(d->path, sizeof d->path, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
  return mkdtemp(d->path) ? 0 : -1;
}

static inline int fx_remove_entry(const char *path, const struct stat *st, int flag,
                                  struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* Removes the directory and everything in it, unless TP_TEST_KEEP is set
 * (then it says where it is, to look at by hand). */
static inline void fx_rmdir(const fx_dir *d) {
  if (getenv("TP_TEST_KEEP")) {
    fprintf(stderr, "kept %s\n", d->path);
    return;
  }
  nftw(d->path, fx_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* dir/name into buf. */
static inline const char *fx_path(const fx_dir *d, const char *name, char *buf, size_t cap) {
  snprintf(buf, cap, "%s/%s", d->path, name);
  return buf;
}

/* Copies a file; 0 on success. */
static inline int fx_copy(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
  int rc = in && out ? 0 : -1;
  char buf[65536];
  size_t n;
  while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) rc = -1;
  if (in) fclose(in);
  if (out && fclose(out) != 0) rc = -1;
  return rc;
}

/* The whole file in a malloc'd buffer (*len its size); NULL if unreadable. */
static inline unsigned char *fx_read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  unsigned char *data = malloc(size > 0 ? (size_t)size : 1);
  if (data && size > 0 && fread(data, 1, (size_t)size, f) != (size_t)size) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *len = size > 0 ? (size_t)size : 0;
  return data;
}

/* A text file whole, NUL-terminated (fx_read_all's bytes are not: no strstr on those), its
 * length in *len; NULL when it cannot be read. */
static inline char *fx_read_text(const char *path, size_t *len) {
  unsigned char *bytes = fx_read_all(path, len);
  char *text = bytes ? strndup((const char *)bytes, *len) : NULL;
  free(bytes);
  return text;
}

/* ---- raw SQL --------------------------------------------------------------- */

/* One integer from a query on the store's connection (-1 on any error). */
static inline int64_t fx_int(tp_store *s, const char *sql) {
  sqlite3_stmt *st = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(tp_store_db(s), sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static inline double fx_real(tp_store *s, const char *sql) {
  sqlite3_stmt *st = NULL;
  double v = NAN;
  if (sqlite3_prepare_v2(tp_store_db(s), sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
    v = sqlite3_column_double(st, 0);
  sqlite3_finalize(st);
  return v;
}

static inline int fx_exec(tp_store *s, const char *sql) {
  return sqlite3_exec(tp_store_db(s), sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

/* ---- deterministic noise ---------------------------------------------------- */

/* xorshift64*: the same jitter on every machine and every run. */
static inline double fx_uniform(uint64_t *state) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0; /* [0, 1) */
}

/* ---- statistics of a synthetic window --------------------------------------- */

static inline int fx_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Percentile p (0..1) of sorted v by linear interpolation. */
static inline double fx_pct(const double *v, int n, double p) {
  double pos = p * (n - 1);
  int lo = (int)pos;
  return lo + 1 < n ? v[lo] + (pos - lo) * (v[lo + 1] - v[lo]) : v[n - 1];
}

/* Fills r from per-iteration times (the slowest rank already taken). */
static inline void fx_result_from(const double *t, int n, tp_result *r) {
  double *v = malloc((size_t)n * sizeof *v);
  memcpy(v, t, (size_t)n * sizeof *v);
  qsort(v, (size_t)n, sizeof *v, fx_cmp);
  double sum = 0, sq = 0;
  for (int i = 0; i < n; i++) sum += v[i];
  double mean = sum / n;
  for (int i = 0; i < n; i++) sq += (v[i] - mean) * (v[i] - mean);
  r->n_samples = n;
  r->median_us = fx_pct(v, n, 0.5);
  r->p10_us = fx_pct(v, n, 0.1);
  r->p90_us = fx_pct(v, n, 0.9);
  r->mean_us = mean;
  r->min_us = v[0];
  r->max_us = v[n - 1];
  r->cv = n > 1 ? sqrt(sq / (n - 1)) / mean : 0;
  free(v);
}

/* ---- a synthetic second run ----------------------------------------------------- */

/* How much slower (factor > 1) or faster a configuration becomes, and how
 * much relative jitter (uniform, +-noise) its samples get, by config key. */
typedef struct fx_change {
  double factor;
  double noise;
} fx_change;
typedef fx_change (*fx_change_fn)(const char *config_key, void *ctx);

static inline char *fx_text(sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  return t ? strdup((const char *)t) : NULL;
}

/* Axes of a stored configuration (strings malloc'd: fx_free_axes). */
static inline void fx_read_axes(sqlite3_stmt *st, tp_config_axes *a) {
  a->kind = fx_text(st, 1);
  a->model = fx_text(st, 2);
  a->op_or_layer = fx_text(st, 3);
  a->proj = fx_text(st, 4);
  a->backend = fx_text(st, 5);
  a->schedule = fx_text(st, 6);
  a->chunks = sqlite3_column_int(st, 7);
  a->tp = sqlite3_column_int(st, 8);
  a->batch = sqlite3_column_int(st, 9);
  a->seqlen = sqlite3_column_int(st, 10);
  a->tokens = sqlite3_column_int64(st, 11);
  a->m = sqlite3_column_int64(st, 12);
  a->n = sqlite3_column_int64(st, 13);
  a->k = sqlite3_column_int64(st, 14);
  a->n_weights = sqlite3_column_int(st, 15);
  a->dtype = fx_text(st, 16);
  a->sp = sqlite3_column_int(st, 17);
  a->pass = fx_text(st, 18);
  a->graph = sqlite3_column_int(st, 19);
  a->save_gathered = sqlite3_column_int(st, 20);
}

static inline void fx_free_axes(tp_config_axes *a) {
  const char *s[] = {a->kind,    a->model,    a->op_or_layer, a->proj,
                     a->backend, a->schedule, a->dtype,       a->pass};
  for (size_t i = 0; i < sizeof s / sizeof *s; i++) free((char *)s[i]);
}

/* Samples of one configuration, rank by rank: times[rank * iters + iter]. */
static inline int fx_read_samples(tp_store *s, int64_t config_id, double *times, int ranks,
                                  int iters) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(tp_store_db(s),
                         "SELECT rank, iter, time_us FROM samples WHERE config_id = ?", -1, &st,
                         NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_int64(st, 1, config_id);
  while (sqlite3_step(st) == SQLITE_ROW) {
    int r = sqlite3_column_int(st, 0), i = sqlite3_column_int(st, 1);
    if (r < ranks && i < iters) times[r * iters + i] = sqlite3_column_double(st, 2);
  }
  sqlite3_finalize(st);
  return 0;
}

/* Writes one changed copy of a stored configuration into run `run`. */
static inline int fx_copy_config(tp_store *s, sqlite3_stmt *st, int64_t run, fx_change_fn fn,
                                 void *ctx, uint64_t *rng) {
  enum { RANKS = 2, ITERS = 30 };
  tp_config_axes a = {0};
  fx_read_axes(st, &a);
  int64_t id = sqlite3_column_int64(st, 0);
  fx_change ch = fn((const char *)sqlite3_column_text(st, 21), ctx);
  double times[RANKS * ITERS], slowest[ITERS];
  for (int i = 0; i < RANKS * ITERS; i++) times[i] = NAN;
  int rc = fx_read_samples(s, id, times, RANKS, ITERS);
  for (int i = 0; i < RANKS * ITERS; i++)
    times[i] *= ch.factor * (1.0 + ch.noise * (2.0 * fx_uniform(rng) - 1.0));
  for (int i = 0; i < ITERS; i++) slowest[i] = fmax(times[i], times[ITERS + i]);
  tp_result r = {0};
  fx_result_from(slowest, ITERS, &r);
  r.tokens_per_s = (double)a.tokens / (r.median_us * 1e-6);
  r.tflops = sqlite3_column_double(st, 22) / (r.median_us * 1e-6) / 1e12;
  r.flops = sqlite3_column_double(st, 22);
  r.workspace_bytes = sqlite3_column_int64(st, 23);
  r.max_abs_err = r.rel_err = NAN;
  tp_samples sets[RANKS] = {{0, ITERS, times, NULL, NULL}, {1, ITERS, times + ITERS, NULL, NULL}};
  tp_schedule_choice ran = {a.op_or_layer,
                            a.backend && !strcmp(a.backend, "dist_gemm") ? "ce" : "nccl",
                            "synthetic", 2, FX_SYNTHETIC_NOTE};
  tp_config_record rec = {.axes = &a,
                          .status = TP_STATUS_OK,
                          .result = &r,
                          .samples = sets,
                          .n_sample_sets = RANKS,
                          .schedules = &ran,
                          .n_schedules = 1};
  if (rc == 0 && tp_store_put_config(s, run, &rec, NULL) != TP_OK) rc = -1;
  fx_free_axes(&a);
  return rc;
}

/* A new run at `commit` holding a changed copy of every ok configuration of
 * run `from` (two ranks, 30 iterations, as the real run has). Returns the
 * new run's id, or -1. seed fixes the jitter. */
static inline int64_t fx_synthesise_run(tp_store *s, int64_t from, const char *commit,
                                        fx_change_fn fn, void *ctx, uint64_t seed) {
  tp_run_info info = {.commit = commit,
                      .host = FX_SYNTHETIC_HOST,
                      .gpu_name = "NVIDIA H200",
                      .gpu_count = 2,
                      .driver_version = "synthetic",
                      .cuda_version = "13.0",
                      .nccl_version = "2.28.3",
                      .cublas_version = "13.1.0",
                      .command_line = FX_SYNTHETIC_NOTE,
                      .command = "ops",
                      .warmup_iters = 5,
                      .measure_iters = 30};
  int64_t run = 0;
  if (tp_store_begin_run(s, &info, &run) != TP_OK) return -1;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(tp_store_db(s),
                         "SELECT c.id, kind, model, layer, proj, backend, schedule, chunks, tp, "
                         "batch, seqlen, tokens, m, n, k, n_weights, dtype, sp, pass, graph, "
                         "save_gathered, config_key, coalesce(r.flops, 0), "
                         "coalesce(r.workspace_bytes, 0) FROM configs c JOIN results r ON "
                         "r.config_id = c.id WHERE c.run_id = ? AND c.status = 'ok' ORDER BY c.id",
                         -1, &st, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_int64(st, 1, from);
  uint64_t rng = seed ? seed : 1;
  int rc = 0;
  /* The statement reads while put_config writes: fine on one connection,
   * since every row read is of run `from`, never of the new run. */
  while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) rc = fx_copy_config(s, st, run, fn, ctx, &rng);
  sqlite3_finalize(st);
  if (rc != 0 || tp_store_finish_run(s, run) != TP_OK) return -1;
  return run;
}

/* ---- a synthetic trace ------------------------------------------------------------ */

/* A made-up two-rank trace of `iters` iterations: per rank and iteration an
 * NVTX "iteration" range (no stream), a GEMM on stream 7 and a peer copy on
 * stream 13 that overlaps the GEMM's second half (ce-like), so per rank and
 * window comm = 40 us, compute = 100 us, overlap = 30 us, exposed = 10 us. */
enum { FX_TRACE_EVENTS_PER_ITER = 3 };

static inline tp_rc fx_put_trace(tp_store *s, int64_t config_id, int iters, int evidence_ok) {
  int ranks = 2;
  size_t n = (size_t)(ranks * iters * FX_TRACE_EVENTS_PER_ITER);
  tp_trace_event *ev = calloc(n, sizeof *ev);
  tp_trace_overlap *ov = calloc((size_t)(ranks * iters), sizeof *ov);
  const uint64_t t0 = 1764503776000000000ULL; /* 2026-11-30T11:56:16Z */
  size_t k = 0;
  for (int r = 0; r < ranks; r++) {
    for (int it = 0; it < iters; it++) {
      uint64_t base = t0 + (uint64_t)it * 200000 + (uint64_t)r * 1500; /* rank 1 a bit later */
      ev[k++] = (tp_trace_event){"iteration",        "range", "range", NULL, base,
                                 base + 150000,      0,       r,       -1,   TP_TRACE_NO_STREAM,
                                 (uint32_t)(it + 1), -1};
      ev[k++] = (tp_trace_event){"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64",
                                 "kernel",
                                 "gemm",
                                 NULL,
                                 base + 10000,
                                 base + 110000,
                                 0,
                                 r,
                                 r,
                                 7,
                                 (uint32_t)(1000 + it),
                                 -1};
      ev[k++] = (tp_trace_event){"memcpy PtoP",         "memcpy", "comm", "PtoP", base + 80000,
                                 base + 120000,         8388608,  r,      r,      13,
                                 (uint32_t)(2000 + it), 1 - r};
      ov[r * iters + it] =
          (tp_trace_overlap){r, it, base, base + 150000, 40000, 100000, 30000, 10000, 75.0, 5000};
    }
  }
  tp_trace_record rec = {.events = ev,
                         .n_events = n,
                         .overlap = ov,
                         .n_overlap = (size_t)(ranks * iters),
                         .traced_iters = iters,
                         .traced_median_us = 165.0,
                         .untraced_median_us = 150.0,
                         .evidence_ok = evidence_ok,
                         .evidence_message = evidence_ok ? NULL
                                                         : "ce: expected 8 peer copies, saw 0 "
                                                           "(and 8 SM copy kernels)",
                         .dropped_records = 0,
                         .clock_offset_ns = 0};
  tp_rc rc = tp_store_put_trace(s, config_id, &rec);
  free(ev);
  free(ov);
  return rc;
}

/* ---- synthetic runs measured in rounds (schemas/003_trust.sql) ---------------------------
 *
 * A made-up machine for compare's statistics, with the noise the H200 pair
 * shows (all of it SYNTHESISED, none measured): per-iteration jitter, a
 * drift of the whole run (every configuration of a run scaled alike), a
 * drift per case and round (the configurations of one round share it),
 * window-to-window noise, a small drift per run and configuration, and
 * host stalls of one rank (an iteration's slowest rank is what counts).
 * Each configuration's iterations are generated and reduced to what the
 * database keeps of them: the result (median over every round), one
 * `windows` row per round (its median and position in the round's order)
 * and runs.rounds; per-iteration samples are not stored. */

typedef struct fx_noise {
  double jitter;       /* per iteration and rank: uniform +-jitter (relative) */
  double window_noise; /* per configuration and round: uniform +- */
  double round_drift;  /* per case and round, shared by its configurations: uniform +- */
  double config_drift; /* per run and configuration: uniform +- */
  double stall_prob;   /* per iteration and rank: a host stall */
  double stall_extra;  /* a stall adds up to this much (relative), uniform */
} fx_noise;

/* The noise the statistical tests of compare use (a judgement of what the
 * H200 pair shows, not a measurement of it). */
static const fx_noise FX_H200_LIKE_NOISE = {0.02, 0.005, 0.02, 0.003, 0.02, 1.0};

/* One configuration of a synthetic run: its axes, its true time on an
 * undrifted machine, and whether a dist_gemm one fused (1), took the stock
 * path (0) or is not dist_gemm (-1). */
typedef struct fx_synth_config {
  tp_config_axes axes;
  double level_us;
  int fused;
} fx_synth_config;

/* A run of the synthetic machine. factor (may be NULL) scales a
 * configuration's true time (a code change); drift scales every
 * configuration of the run (the machine). */
typedef struct fx_synth_run {
  const char *commit;
  const char *started_at; /* "2026-12-01T10:00:00Z"; NULL: now */
  const char *gpu_name;   /* NULL: "NVIDIA H200" */
  int gpu_count;          /* 0: 2 */
  const char *driver;     /* NULL: "580.159.04" */
  const char *test_knobs; /* NULL: none */
  int rounds;             /* 0: 3 */
  int iters;              /* 0: 20 */
  double drift;           /* 0: 1 */
  uint64_t seed;
  const fx_noise *noise; /* NULL: FX_H200_LIKE_NOISE */
  double (*factor)(const fx_synth_config *c, void *ctx);
  void *ctx;
} fx_synth_run;

enum { FX_SYNTH_MAX_CONFIGS = 64, FX_SYNTH_RANKS = 2 };

static inline void fx_synth_axes(fx_synth_config *c, const char *kind, const char *model,
                                 const char *layer, const char *proj, const char *backend,
                                 const char *schedule, const char *pass) {
  c->axes = (tp_config_axes){.kind = kind,
                             .model = model,
                             .op_or_layer = layer,
                             .proj = proj,
                             .backend = backend,
                             .schedule = schedule,
                             .tp = 2,
                             .tokens = 8192,
                             .m = 8192,
                             .n = 4096,
                             .k = 4096,
                             .n_weights = 1,
                             .dtype = "bf16",
                             .sp = 1,
                             .pass = pass};
}

/* The case set of the statistical tests: per model (8b, 70b) three op
 * cases (ag_linear qkv, ag_linear w13, linear_rs w2: stock, dist_gemm ce,
 * dist_gemm sm, GEMM alone, collective alone) and one layer case (ffn
 * fwd+bwd: stock, dist_gemm auto, GEMM alone, collective alone); the 8b qkv
 * case also has a dist_gemm auto that took the stock path. Returns the
 * count written to out (at most FX_SYNTH_MAX_CONFIGS). */
static inline size_t fx_synth_standard_cases(fx_synth_config *out) {
  static const char *const models[] = {"llama3-8b", "llama3-70b"};
  static const struct {
    const char *layer, *proj;
    double gemm_us, comm_us;
  } ops[] = {{"ag_linear", "qkv", 400, 260},
             {"ag_linear", "w13", 1500, 700},
             {"linear_rs", "w2", 800, 650}};
  size_t n = 0;
  for (int m = 0; m < 2; m++) {
    double scale = m ? 4.0 : 1.0;
    for (int o = 0; o < 3; o++) {
      double g = ops[o].gemm_us * scale, c = ops[o].comm_us * scale;
      const char *layer = ops[o].layer, *proj = ops[o].proj;
      fx_synth_axes(&out[n], "op", models[m], layer, proj, "stock", NULL, "fwd");
      out[n].level_us = g + 0.9 * c;
      out[n++].fused = -1;
      fx_synth_axes(&out[n], "op", models[m], layer, proj, "dist_gemm", "ce", "fwd");
      out[n].level_us = fmax(g, c) * 1.08;
      out[n++].fused = 1;
      fx_synth_axes(&out[n], "op", models[m], layer, proj, "dist_gemm", "sm", "fwd");
      out[n].level_us = fmax(g, c) * 1.15;
      out[n++].fused = 1;
      if (m == 0 && o == 0) {
        fx_synth_axes(&out[n], "op", models[m], layer, proj, "dist_gemm", "auto", "fwd");
        out[n].level_us = g + 0.9 * c;
        out[n++].fused = 0;
      }
      fx_synth_axes(&out[n], "gemm", models[m], layer, proj, "cublaslt", NULL, "fwd");
      out[n].level_us = g;
      out[n++].fused = -1;
      fx_synth_axes(&out[n], "comm", models[m], layer, proj, "nccl", NULL, "fwd");
      out[n].level_us = c;
      out[n++].fused = -1;
    }
    double g = 9000 * scale, c = 5000 * scale;
    fx_synth_axes(&out[n], "layer", models[m], "ffn", NULL, "stock", NULL, "fwd+bwd");
    out[n].level_us = g + 0.9 * c;
    out[n++].fused = -1;
    fx_synth_axes(&out[n], "layer", models[m], "ffn", NULL, "dist_gemm", "auto", "fwd+bwd");
    out[n].level_us = fmax(g, c) * 1.12;
    out[n++].fused = 1;
    fx_synth_axes(&out[n], "gemm", models[m], "ffn", NULL, "cublaslt", NULL, "fwd+bwd");
    out[n].level_us = g;
    out[n++].fused = -1;
    fx_synth_axes(&out[n], "comm", models[m], "ffn", NULL, "nccl", NULL, "fwd+bwd");
    out[n].level_us = c;
    out[n++].fused = -1;
  }
  return n;
}

/* Uniform in [-1, 1). */
static inline double fx_signed(uint64_t *rng) { return 2.0 * fx_uniform(rng) - 1.0; }

/* One round of one configuration: `iters` iterations, the slowest rank of
 * each, into t. */
static inline void fx_synth_window(const fx_noise *nz, double level, int iters, uint64_t *rng,
                                   double *t) {
  for (int i = 0; i < iters; i++) {
    double slowest = 0;
    for (int r = 0; r < FX_SYNTH_RANKS; r++) {
      double x = level * (1.0 + nz->jitter * fx_signed(rng));
      if (fx_uniform(rng) < nz->stall_prob) x *= 1.0 + nz->stall_extra * fx_uniform(rng);
      slowest = fmax(slowest, x);
    }
    t[i] = slowest;
  }
}

/* Stores one configuration with its result and round windows (the rounds'
 * rows in one transaction of their own: put_config opens its own). */
static inline int fx_synth_put(tp_store *s, int64_t run, const fx_synth_config *c,
                               const double *all, int rounds, int iters, const int *position) {
  double *sorted = malloc((size_t)iters * sizeof *sorted);
  tp_result res = {0};
  fx_result_from(all, rounds * iters, &res);
  res.max_abs_err = res.rel_err = NAN;
  tp_config_record rec = {.axes = &c->axes, .status = TP_STATUS_OK, .result = &res};
  int64_t id = 0;
  int rc = sorted && tp_store_put_config(s, run, &rec, &id) == TP_OK ? 0 : -1;
  char sql[4096];
  int len = snprintf(sql, sizeof sql,
                     "BEGIN; UPDATE results SET n_rounds = %d, fused = %s WHERE config_id = %lld;",
                     rounds,
                     c->fused < 0 ? "NULL"
                     : c->fused   ? "1"
                                  : "0",
                     (long long)id);
  for (int k = 0; rc == 0 && k < rounds; k++) {
    memcpy(sorted, all + (size_t)k * (size_t)iters, (size_t)iters * sizeof *sorted);
    qsort(sorted, (size_t)iters, sizeof *sorted, fx_cmp);
    len += snprintf(sql + len, sizeof sql - (size_t)len,
                    " INSERT INTO windows (config_id, round, position, median_us) VALUES (%lld, "
                    "%d, %d, %.17g);",
                    (long long)id, k, position[k], fx_pct(sorted, iters, 0.5));
    if (len >= (int)sizeof sql - 16) rc = -1;
  }
  if (rc == 0) snprintf(sql + len, sizeof sql - (size_t)len, " COMMIT;");
  if (rc == 0) rc = fx_exec(s, sql);
  free(sorted);
  return rc;
}

/* The case of configs[i]: the index of the first configuration with the
 * same model, layer, proj and pass (the configurations of a case are
 * adjacent in fx_synth_standard_cases). */
static inline size_t fx_synth_case_of(const fx_synth_config *configs, size_t i) {
  while (i > 0) {
    const tp_config_axes *a = &configs[i - 1].axes, *b = &configs[i].axes;
    int same = !strcmp(a->model, b->model) && !strcmp(a->op_or_layer, b->op_or_layer) &&
               !strcmp(a->pass, b->pass) &&
               ((!a->proj && !b->proj) || (a->proj && b->proj && !strcmp(a->proj, b->proj)));
    if (!same) break;
    i--;
  }
  return i;
}

/* Writes a run of the synthetic machine holding every configuration of
 * configs[0..n); returns its id, or -1. The rounds of a case rotate its
 * configurations' order. */
static inline int64_t fx_put_synth_run(tp_store *s, const fx_synth_run *spec,
                                       const fx_synth_config *configs, size_t n) {
  const fx_noise *nz = spec->noise ? spec->noise : &FX_H200_LIKE_NOISE;
  int rounds = spec->rounds > 0 ? spec->rounds : 3, iters = spec->iters > 0 ? spec->iters : 20;
  tp_run_info info = {.commit = spec->commit,
                      .host = FX_SYNTHETIC_HOST,
                      .gpu_name = spec->gpu_name ? spec->gpu_name : "NVIDIA H200",
                      .gpu_count = spec->gpu_count > 0 ? spec->gpu_count : 2,
                      .driver_version = spec->driver ? spec->driver : "580.159.04",
                      .cuda_version = "13.0",
                      .nccl_version = "2.28.3",
                      .cublas_version = "13.1.0",
                      .command_line = "synthesised by tests/cpu/fixture_db.h: not measured",
                      .command = "ops",
                      .warmup_iters = 5,
                      .measure_iters = iters};
  int64_t run = 0;
  if (n > FX_SYNTH_MAX_CONFIGS || tp_store_begin_run(s, &info, &run) != TP_OK) return -1;
  char sql[512];
  snprintf(sql, sizeof sql,
           "UPDATE runs SET rounds = %d, order_policy = 'rotate', test_knobs = %s%s%s%s%s%s "
           "WHERE id = %lld",
           rounds, spec->test_knobs ? "'" : "", spec->test_knobs ? spec->test_knobs : "NULL",
           spec->test_knobs ? "'" : "", spec->started_at ? ", started_at = '" : "",
           spec->started_at ? spec->started_at : "", spec->started_at ? "'" : "", (long long)run);
  if (fx_exec(s, sql) != 0) return -1;
  uint64_t rng = spec->seed ? spec->seed : 1;
  double drift = spec->drift > 0 ? spec->drift : 1.0;
  double case_drift[FX_SYNTH_MAX_CONFIGS][16];
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < rounds && k < 16; k++)
      case_drift[i][k] = 1.0 + nz->round_drift * fx_signed(&rng);
  double *all = malloc((size_t)(rounds * iters) * sizeof *all);
  int rc = all && rounds <= 16 ? 0 : -1;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    size_t first = fx_synth_case_of(configs, i), size = i - first + 1;
    while (first + size < n && fx_synth_case_of(configs, first + size) == first) size++;
    double level = configs[i].level_us * drift * (1.0 + nz->config_drift * fx_signed(&rng));
    if (spec->factor) level *= spec->factor(&configs[i], spec->ctx);
    int position[16];
    for (int k = 0; k < rounds; k++) {
      double window_level =
          level * case_drift[first][k] * (1.0 + nz->window_noise * fx_signed(&rng));
      fx_synth_window(nz, window_level, iters, &rng, all + (size_t)k * (size_t)iters);
      position[k] = (int)((i - first + (size_t)k) % size);
    }
    rc = fx_synth_put(s, run, &configs[i], all, rounds, iters, position);
  }
  free(all);
  if (rc != 0 || tp_store_finish_run(s, run) != TP_OK) return -1;
  return run;
}

#endif /* TP_FIXTURE_DB_H */
