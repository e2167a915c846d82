/*
 * tp_openmetrics.c — a run as OpenMetrics text (see tp_openmetrics.h).
 *
 * The format wants each family's samples together, so the configurations
 * are read once per family: a run holds hundreds of them at most, and a
 * query per family keeps every family's loop the same few lines.
 */
#include "report/tp_openmetrics.h"

#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

#include "report/tp_escape.h"

typedef struct {
  const char *name;   /* without the _info suffix of info samples */
  const char *unit;   /* NULL: none */
  const char *column; /* SQL expression over results r */
  const char *help;
} family;

static const family families[] = {
    {"tpbench_median_seconds", "seconds", "r.median_us / 1e6",
     "median time of one iteration (the slowest rank's)"},
    {"tpbench_p10_seconds", "seconds", "r.p10_us / 1e6", "10th percentile of the iteration time"},
    {"tpbench_p90_seconds", "seconds", "r.p90_us / 1e6", "90th percentile of the iteration time"},
    {"tpbench_mean_seconds", "seconds", "r.mean_us / 1e6", "mean iteration time"},
    {"tpbench_min_seconds", "seconds", "r.min_us / 1e6", "fastest iteration"},
    {"tpbench_max_seconds", "seconds", "r.max_us / 1e6", "slowest iteration"},
    {"tpbench_cv_ratio", "ratio", "r.cv", "coefficient of variation of the iteration time"},
    {"tpbench_tokens_per_second", NULL, "r.tokens_per_s", "tokens processed per second"},
    {"tpbench_tflops", NULL, "r.tflops", "throughput in TFLOP/s (whole TP group)"},
};

static tp_rc sql_fail(tp_store *store, const char *what) {
  return TP_FAIL(TP_ESQLITE, "%s: openmetrics: %s: %s", tp_store_path(store), what,
                 sqlite3_errmsg(tp_store_db(store)));
}

static tp_rc prepare(tp_store *store, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v2(tp_store_db(store), sql, -1, st, NULL) == SQLITE_OK) return TP_OK;
  *st = NULL;
  return sql_fail(store, "sqlite3_prepare_v2");
}

static tp_rc bind_text(tp_store *store, sqlite3_stmt *st, int at, const char *text) {
  int rc = text ? sqlite3_bind_text(st, at, text, -1, SQLITE_STATIC) : sqlite3_bind_null(st, at);
  return rc == SQLITE_OK ? TP_OK : sql_fail(store, "sqlite3_bind_text");
}

/* name="value" with the value escaped; comma first unless first. */
static void label(FILE *out, const char *name, const char *value, int first) {
  fprintf(out, "%s%s=\"", first ? "" : ",", name);
  tp_openmetrics_label(out, value ? value : "");
  fputc('"', out);
}

static tp_rc write_run_info(tp_store *store, int64_t run, FILE *out) {
  static const char *const names[] = {"commit", "host",    "gpu",       "gpu_count",
                                      "driver", "command", "started_at"};
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store,
                 "SELECT commit_sha, host, gpu_name, CAST(gpu_count AS TEXT), driver_version, "
                 "command, started_at FROM runs WHERE id = ?1",
                 &st));
  tp_rc rc = sqlite3_bind_int64(st, 1, run) == SQLITE_OK ? TP_OK : sql_fail(store, "sqlite3_bind");
  int step = rc == TP_OK ? sqlite3_step(st) : SQLITE_DONE;
  if (rc == TP_OK && step != SQLITE_ROW) rc = sql_fail(store, "reading the run");
  if (rc == TP_OK) {
    fputs("# TYPE tpbench_run info\n# HELP tpbench_run the run these measurements come from\n",
          out);
    fprintf(out, "tpbench_run_info{run=\"%lld\"", (long long)run);
    for (int k = 0; k < (int)(sizeof names / sizeof *names); k++)
      label(out, names[k], (const char *)sqlite3_column_text(st, k), 0);
    fputs("} 1\n", out);
  }
  sqlite3_finalize(st);
  return rc;
}

/* The labels of a configuration row: columns 1.. of family_sql. */
static const char *const label_names[] = {"kind",   "model", "op_or_layer", "backend", "schedule",
                                          "tokens", "tp",    "dtype",       "pass",    "key"};

static const char family_sql[] =
    "SELECT %s, c.kind, c.model, c.layer, c.backend, c.schedule, CAST(c.tokens AS TEXT), "
    "CAST(c.tp AS TEXT), c.dtype, c.pass, c.config_key FROM configs c JOIN results r ON "
    "r.config_id = c.id WHERE c.id IN (SELECT id FROM (SELECT id, row_number() OVER (PARTITION "
    "BY config_key ORDER BY status = 'ok' DESC, id DESC) AS pick FROM configs WHERE run_id = ?1) "
    "WHERE pick = 1) AND c.status = 'ok' AND c.kind <> 'drift' AND (?2 IS NULL OR c.model = ?2 "
    "COLLATE NOCASE) "
    "AND (?3 IS NULL OR c.layer = ?3) AND (?4 IS NULL OR c.pass = ?4) AND (?5 IS NULL OR "
    "c.dtype = ?5) ORDER BY c.id";

static tp_rc write_family(tp_store *store, int64_t run, const tp_report_filter *f,
                          const family *fam, FILE *out) {
  char sql[sizeof family_sql + 64];
  snprintf(sql, sizeof sql, family_sql, fam->column);
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store, sql, &st));
  tp_rc rc = sqlite3_bind_int64(st, 1, run) == SQLITE_OK ? TP_OK : sql_fail(store, "sqlite3_bind");
  const char *filters[] = {f->model, f->layer, f->pass, f->dtype};
  for (int k = 0; rc == TP_OK && k < 4; k++) rc = bind_text(store, st, k + 2, filters[k]);
  fprintf(out, "# TYPE %s gauge\n", fam->name);
  if (fam->unit) fprintf(out, "# UNIT %s %s\n", fam->name, fam->unit);
  fprintf(out, "# HELP %s %s\n", fam->name, fam->help);
  int step = SQLITE_DONE;
  while (rc == TP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    double value = sqlite3_column_double(st, 0);
    if (sqlite3_column_type(st, 0) == SQLITE_NULL || !isfinite(value)) continue;
    fprintf(out, "%s{", fam->name);
    for (int k = 0; k < (int)(sizeof label_names / sizeof *label_names); k++)
      label(out, label_names[k], (const char *)sqlite3_column_text(st, k + 1), k == 0);
    fprintf(out, "} %.12g\n", value);
  }
  if (rc == TP_OK && step != SQLITE_DONE) rc = sql_fail(store, "reading configurations");
  sqlite3_finalize(st);
  return rc;
}

/* One headline figure: the run's (scope "headline", or "toys only" when the run has nothing
 * else) and each toy model's apart (scope "toy"). */
typedef struct {
  const char *name, *help;
  int is_count; /* rows: an integer */
  double (*value)(const tp_headline_figures *f);
} headline_family;

static double speedup_of(const tp_headline_figures *f) { return f->geomean_speedup; }
static double bound_of(const tp_headline_figures *f) { return f->median_dist_over_bound; }
static double rows_of(const tp_headline_figures *f) { return f->rows; }

static const headline_family headline_families[] = {
    {"tpbench_headline_speedup",
     "geometric mean of stock / dist_gemm over the run's rows where dist_gemm fused, toy models "
     "apart (report's summary)",
     0, speedup_of},
    {"tpbench_headline_dist_over_bound",
     "median of dist_gemm / bound over those rows with a bound (report's summary)", 0, bound_of},
    {"tpbench_headline_rows", "rows the headline covers", 1, rows_of},
};

static void headline_sample(FILE *out, const headline_family *fam, int64_t run, const char *scope,
                            const char *model, const tp_headline_figures *f) {
  const double v = fam->value(f);
  if (!isfinite(v)) return;
  fprintf(out, "%s{run=\"%lld\"", fam->name, (long long)run);
  label(out, "scope", scope, 0);
  if (model) label(out, "model", model, 0);
  fprintf(out, "} %.12g\n", v);
}

/* The run's headline (tp_report_headline, the rule report and the dashboard show): nothing
 * for a run without one (a link probe, a drift run). */
static tp_rc write_headline(tp_store *store, int64_t run, FILE *out) {
  tp_headline h;
  tp_rc rc = tp_report_headline(store, run, &h);
  if (rc == TP_EUSAGE) {
    tp_clear_error();
    return TP_OK;
  }
  TP_TRY(rc);
  for (size_t i = 0; i < sizeof headline_families / sizeof *headline_families; i++) {
    const headline_family *fam = &headline_families[i];
    fprintf(out, "# TYPE %s gauge\n# HELP %s %s\n", fam->name, fam->name, fam->help);
    headline_sample(out, fam, run, h.toy_only ? "toys only" : "headline", NULL, &h.figures);
    for (int t = 0; !h.toy_only && t < h.n_toys; t++)
      headline_sample(out, fam, run, "toy", h.toys[t].model, &h.toys[t].figures);
  }
  return TP_OK;
}

tp_rc tp_report_openmetrics(tp_store *store, const tp_report_filter *filter, FILE *out) {
  if (!store || !filter || !out)
    return TP_FAIL(TP_EINTERNAL, "tp_report_openmetrics: NULL argument");
  int64_t run = 0;
  /* the run every reader means (store/tp_store.h: the latest by start time) */
  TP_TRY(tp_store_find_run(store, filter->run_id, filter->commit, &run));
  TP_TRY(write_run_info(store, run, out));
  TP_TRY(write_headline(store, run, out));
  for (size_t i = 0; i < sizeof families / sizeof *families; i++)
    TP_TRY(write_family(store, run, filter, &families[i], out));
  fputs("# EOF\n", out);
  if (fflush(out) != 0 || ferror(out)) return TP_FAIL(TP_EIO, "openmetrics: writing failed");
  return TP_OK;
}
