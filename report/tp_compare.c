/*
 * tp_compare.c — `tpbench compare` (see tp_compare.h): which configurations
 * got slower between two commits or runs, with a test that tells machine
 * drift and noise from change.
 *
 * It works in passes: resolve (each side's runs, every configuration of
 * them with the references of its case, every round's window), group (per
 * config key and side: the latest entry decides the status, the ok entries
 * give samples), pair (merge the two key-sorted lists, apply the filter),
 * check the hardware, judge (per row and measure: samples, Welch's test;
 * then Benjamini–Hochberg over the family; then verdicts), select what is
 * shown (--changed-only, --top), render (markdown, CSV, JSON, JUnit XML or
 * BMF; none computes anything).
 *
 * Why ratios within a round: the H200 pair drifts 5-15 % between runs on
 * unchanged code, far more than a window's noise. A round runs every
 * configuration of a case back to back, so dist_gemm and its references see
 * the same clocks; their ratio keeps the code's effect and drops the
 * machine's. Why Welch on logs: a ratio's noise is multiplicative, round
 * medians are close to normal (a median of tens of iterations), and the
 * test needs no equal variances. Per-iteration times are never samples: the
 * iterations of one window are correlated and would make any drift look
 * significant.
 */
#include "report/tp_compare.h"
#include "report/tp_profile.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <sqlite3.h>

#include "report/tp_escape.h"
#include "report/tp_report.h"
#include "report/tp_report_util.h"

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "compare: out of memory"); }

/* ---- Student's t ------------------------------------------------------------ */

/* The continued fraction of the regularized incomplete beta function,
 * evaluated with the modified Lentz method; converges fast for
 * x < (a + 1) / (a + b + 2), where the caller uses it. */
static double beta_fraction(double a, double b, double x) {
  const double tiny = 1e-300, eps = 1e-15;
  double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
  if (fabs(d) < tiny) d = tiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 500; m++) {
    double dm = m, two_m = 2.0 * m;
    double even = dm * (b - dm) * x / ((a + two_m - 1.0) * (a + two_m));
    d = 1.0 + even * d;
    c = 1.0 + even / c;
    d = 1.0 / (fabs(d) < tiny ? tiny : d);
    c = fabs(c) < tiny ? tiny : c;
    h *= d * c;
    double odd = -(a + dm) * (a + b + dm) * x / ((a + two_m) * (a + two_m + 1.0));
    d = 1.0 + odd * d;
    c = 1.0 + odd / c;
    d = 1.0 / (fabs(d) < tiny ? tiny : d);
    c = fabs(c) < tiny ? tiny : c;
    double step = d * c;
    h *= step;
    if (fabs(step - 1.0) < eps) break;
  }
  return h;
}

/* I_x(a, b), the regularized incomplete beta function, for a, b > 0. */
static double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  double log_front = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
  if (x < (a + 1.0) / (a + b + 2.0)) return exp(log_front) * beta_fraction(a, b, x) / a;
  return 1.0 - exp(log_front) * beta_fraction(b, a, 1.0 - x) / b;
}

/* P(|T| >= |t|): the two tails of Student's t. */
static double t_two_sided(double t, double df) {
  if (!isfinite(t)) return 0;
  return incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
}

double tp_student_t_cdf(double t, double df) {
  if (isnan(t) || !(df > 0)) return NAN;
  double tail = t_two_sided(t, df) / 2.0;
  return t > 0 ? 1.0 - tail : tail;
}

/* The t with P(T <= t) = 0.975, by bisection (the CDF is monotone). */
static double t_quantile_975(double df) {
  double lo = 0, hi = 16;
  while (tp_student_t_cdf(hi, df) < 0.975 && hi < 1e12) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
    double mid = (lo + hi) / 2;
    if (tp_student_t_cdf(mid, df) < 0.975) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/* ---- Welch's test --------------------------------------------------------------- */

/* The mean of v[0..n) (n >= 1) and its sum of squared deviations, both taken about the first
 * value: a sample whose values are all equal (copies of one run pooled) has that value as its
 * mean and no spread, exactly. Summed as they come, ten copies of x can average to x's
 * neighbour, and the tiny spread that leaves made identical measurements "significant". */
static void moments(const double *v, size_t n, double *mean, double *sq) {
  double shift = v[0], sum = 0;
  for (size_t i = 1; i < n; i++) sum += v[i] - shift;
  double offset = sum / (double)n;
  *sq = 0;
  for (size_t i = 0; i < n; i++) *sq += (v[i] - shift - offset) * (v[i] - shift - offset);
  *mean = shift + offset;
}

static tp_rc mean_and_variance(const double *v, size_t n, const char *which, double *mean,
                               double *var) {
  if (!v || n < 2)
    return TP_FAIL(TP_EUSAGE, "Welch test: sample %s needs two values or more (%zu)", which, n);
  for (size_t i = 0; i < n; i++)
    if (!isfinite(v[i]))
      return TP_FAIL(TP_EUSAGE, "Welch test: value %zu of sample %s is not finite", i, which);
  double sq = 0;
  moments(v, n, mean, &sq);
  *var = sq / (double)(n - 1);
  return TP_OK;
}

tp_rc tp_welch_test(const double *a, size_t na, const double *b, size_t nb, tp_welch *out) {
  if (!out) return TP_FAIL(TP_EINTERNAL, "tp_welch_test: NULL result");
  double mean_a = 0, var_a = 0, mean_b = 0, var_b = 0;
  TP_TRY(mean_and_variance(a, na, "a", &mean_a, &var_a));
  TP_TRY(mean_and_variance(b, nb, "b", &mean_b, &var_b));
  double qa = var_a / (double)na, qb = var_b / (double)nb;
  out->diff = mean_b - mean_a;
  out->se = sqrt(qa + qb);
  if (!(out->se > 0)) {
    /* No spread on either side: the difference is what it is. */
    out->df = (double)(na + nb - 2);
    out->t = 0;
    out->p = out->diff == 0 ? 1.0 : 0.0;
    out->ci_lo = out->ci_hi = out->diff;
    return TP_OK;
  }
  out->df = (qa + qb) * (qa + qb) / (qa * qa / (double)(na - 1) + qb * qb / (double)(nb - 1));
  out->t = out->diff / out->se;
  out->p = t_two_sided(out->t, out->df);
  double half = t_quantile_975(out->df) * out->se;
  out->ci_lo = out->diff - half;
  out->ci_hi = out->diff + half;
  return TP_OK;
}

/* ---- Benjamini–Hochberg ------------------------------------------------------------ */

typedef struct {
  double p;
  size_t at;
} ranked_p;

static int compare_ranked_p(const void *x, const void *y) {
  double a = ((const ranked_p *)x)->p, b = ((const ranked_p *)y)->p;
  return (a > b) - (a < b);
}

tp_rc tp_bh_adjust(const double *p, size_t n, double *adjusted) {
  if (n == 0) return TP_OK;
  if (!p || !adjusted) return TP_FAIL(TP_EINTERNAL, "tp_bh_adjust: NULL argument");
  ranked_p *order = malloc(n * sizeof *order);
  if (!order) return out_of_memory();
  for (size_t i = 0; i < n; i++) order[i] = (ranked_p){isnan(p[i]) ? 1.0 : p[i], i};
  qsort(order, n, sizeof *order, compare_ranked_p);
  double running = 1.0;
  for (size_t rank = n; rank-- > 0;) {
    double scaled = order[rank].p * (double)n / (double)(rank + 1);
    if (scaled < running) running = scaled;
    adjusted[order[rank].at] = running;
  }
  free(order);
  return TP_OK;
}

/* ---- the sides: runs --------------------------------------------------------------- */

/* One run of a side, as the header shows it. */
typedef struct {
  int64_t id;
  char *commit, *host, *gpu_name, *driver, *cuda, *nccl, *cublas, *started_at, *command;
  char *test_knobs, *order_policy;
  int64_t gpu_count, dirty, rounds; /* rounds: 0 when the run predates them */
  int used;                         /* supplied a configuration that both sides have */
  int has_headline;                 /* a used run with an op or layer table: headline below */
  tp_headline headline;             /* report's rule (tp_report_headline) */
} side_run;

/* One configuration of one run of a side, with its case's references in
 * the same run (config ids, 0: none): stock and the collective alone in
 * both variants (plain, and on NCCL symmetric windows: schedule
 * nccl-window), of which the faster is the measure's reference. */
typedef enum { REF_STOCK, REF_GEMM, REF_COMM, REF_STOCK_WINDOW, REF_COMM_WINDOW, N_REFS } ref_role;

typedef struct {
  int64_t id;
  size_t run; /* index into the side's runs */
  char *key, *kind, *backend, *model, *layer, *pass, *dtype, *status, *failure;
  char label[256];
  double median_us; /* NaN without a result */
  int fused;        /* results.fused: 1, 0, or -1 (not recorded) */
  int ok;           /* status ok, numerics and evidence not failed */
  int64_t ref[N_REFS];
} entry;

/* A round's median of one configuration. */
typedef struct {
  int64_t config_id, round;
  double median_us;
} window;

/* The entries of one config key on one side: sorted[first .. first + count)
 * of the side's by-key index, latest run first. */
typedef struct {
  size_t first, count;
} key_group;

typedef struct {
  const char *spec; /* what the user wrote */
  side_run *runs;   /* sorted by start time, then id */
  size_t n_runs;
  entry *entries;
  size_t n_entries;
  entry **by_key; /* the entries by key, latest run first */
  entry **by_id;  /* the entries by config id */
  key_group *keys;
  size_t n_keys;
  window *windows; /* by config id, then round */
  size_t n_windows;
} side;

static char *dup_text(sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  return t ? strdup((const char *)t) : NULL;
}

static void free_run(side_run *r) {
  char *texts[] = {r->commit, r->host,       r->gpu_name, r->driver,     r->cuda,        r->nccl,
                   r->cublas, r->started_at, r->command,  r->test_knobs, r->order_policy};
  for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) free(texts[k]);
}

static void free_entry(entry *e) {
  char *texts[] = {e->key,  e->kind,  e->backend, e->model,  e->layer,
                   e->pass, e->dtype, e->status,  e->failure};
  for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) free(texts[k]);
}

static void free_side(side *s) {
  for (size_t i = 0; i < s->n_runs; i++) free_run(&s->runs[i]);
  for (size_t i = 0; i < s->n_entries; i++) free_entry(&s->entries[i]);
  free(s->runs);
  free(s->entries);
  free(s->by_key);
  free(s->by_id);
  free(s->keys);
  free(s->windows);
}

static tp_rc prepare(tp_store *store, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v2(tp_store_db(store), sql, -1, st, NULL) != SQLITE_OK) {
    *st = NULL;
    return TP_FAIL(TP_ESQLITE, "%s: compare: sqlite3_prepare_v2: %s", tp_store_path(store),
                   sqlite3_errmsg(tp_store_db(store)));
  }
  return TP_OK;
}

static tp_rc sql_error(tp_store *store, const char *what) {
  return TP_FAIL(TP_ESQLITE, "%s: compare: %s: %s", tp_store_path(store), what,
                 sqlite3_errmsg(tp_store_db(store)));
}

static tp_rc bind_error(tp_store *store) { return sql_error(store, "sqlite3_bind"); }

/* Room for one more in *items (an array of n); TP_EOOM when there is none. */
static tp_rc grow(void **items, size_t *cap, size_t n, size_t size) {
  void *grown = tp_grow_array(*items, cap, n, size);
  if (!grown) return out_of_memory();
  *items = grown;
  return TP_OK;
}

/* "run:N" into *run_id; anything else is a commit (prefix): *run_id 0. */
static tp_rc parse_element(const char *text, int64_t *run_id) {
  *run_id = 0;
  if (!*text) return TP_FAIL(TP_EUSAGE, "compare: an empty commit or run");
  if (strncmp(text, "run:", 4) != 0) return TP_OK;
  const char *digits = text + 4;
  char *end = NULL;
  long long id = isdigit((unsigned char)*digits) ? strtoll(digits, &end, 10) : 0;
  if (!end || *end || id <= 0)
    return TP_FAIL(TP_EUSAGE, "compare: '%s' is not run:N with a run id N >= 1", text);
  *run_id = id;
  return TP_OK;
}

/* The database's commits, oldest first by their first run, as "e92c4c5378 (run 1),
 * a06011ff18 (runs 2 to 5)": what a prefix that names none could have named. */
static void known_commits(tp_store *store, char *buf, size_t cap) {
  sqlite3_stmt *st = NULL;
  buf[0] = '\0';
  if (prepare(store,
              "SELECT substr(commit_sha, 1, 10), min(id), max(id), count(*) FROM runs WHERE "
              "commit_sha IS NOT NULL GROUP BY commit_sha ORDER BY min(started_at), min(id) "
              "LIMIT 9",
              &st) != TP_OK) {
    tp_clear_error();
    return;
  }
  size_t used = 0;
  for (int i = 0; sqlite3_step(st) == SQLITE_ROW && used < cap; i++) {
    const long long first = sqlite3_column_int64(st, 1), last = sqlite3_column_int64(st, 2),
                    count = sqlite3_column_int64(st, 3);
    const int n = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "",
                           i == 8 ? "..." : (const char *)sqlite3_column_text(st, 0));
    used += n > 0 ? (size_t)n : 0;
    if (i == 8 || used >= cap) break;
    const int m =
        count == 1 ? snprintf(buf + used, cap - used, " (run %lld)", first)
        : last - first + 1 == count
            ? snprintf(buf + used, cap - used, " (runs %lld to %lld)", first, last)
            : snprintf(buf + used, cap - used, " (%lld runs, %lld to %lld)", count, first, last);
    used += m > 0 ? (size_t)m : 0;
  }
  sqlite3_finalize(st);
}

/* The one commit a prefix names (ambiguity is an error, as in git). */
static tp_rc resolve_commit(tp_store *store, const char *prefix, char **commit) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store,
                 "SELECT DISTINCT commit_sha FROM runs WHERE commit_sha IS NOT NULL AND "
                 "lower(substr(commit_sha, 1, length(?1))) = lower(?1) ORDER BY commit_sha",
                 &st));
  tp_rc rc =
      sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC) == SQLITE_OK ? TP_OK : bind_error(store);
  int step = SQLITE_DONE;
  while (rc == TP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    if (*commit) {
      rc = TP_FAIL(TP_EUSAGE, "%s: commit prefix %s is ambiguous (%s, %s, ...)",
                   tp_store_path(store), prefix, *commit, sqlite3_column_text(st, 0));
      break;
    }
    if (!(*commit = dup_text(st, 0))) rc = out_of_memory();
  }
  if (rc == TP_OK && step != SQLITE_DONE) rc = sql_error(store, "looking up the commit");
  if (rc == TP_OK && !*commit) {
    char known[512];
    known_commits(store, known, sizeof known);
    rc = TP_FAIL(TP_EUSAGE,
                 "%s: no run of a commit starting with '%s' (use run:N for a run id); its "
                 "commits: %s",
                 tp_store_path(store), prefix, known[0] ? known : "none recorded");
  }
  sqlite3_finalize(st);
  if (rc != TP_OK) {
    free(*commit);
    *commit = NULL;
  }
  return rc;
}

static const char runs_sql[] =
    "SELECT id, commit_sha, host, gpu_name, driver_version, cuda_version, nccl_version, "
    "cublas_version, started_at, command, test_knobs, order_policy, coalesce(gpu_count, -1), "
    "dirty, coalesce(rounds, 0) FROM runs WHERE (?1 > 0 AND id = ?1) OR (?1 = 0 AND "
    "commit_sha = ?2) ORDER BY " TP_STORE_OLDEST_FIRST;

static void read_run(sqlite3_stmt *st, side_run *r) {
  memset(r, 0, sizeof *r);
  r->id = sqlite3_column_int64(st, 0);
  char **texts[] = {&r->commit,  &r->host,       &r->gpu_name,    &r->driver,
                    &r->cuda,    &r->nccl,       &r->cublas,      &r->started_at,
                    &r->command, &r->test_knobs, &r->order_policy};
  for (int k = 0; k < (int)(sizeof texts / sizeof *texts); k++) *texts[k] = dup_text(st, k + 1);
  r->gpu_count = sqlite3_column_int64(st, 12);
  r->dirty = sqlite3_column_int64(st, 13);
  r->rounds = sqlite3_column_int64(st, 14);
}

/* Appends the runs one element of a side names (a run, or a commit's). */
static tp_rc load_element_runs(tp_store *store, const char *text, side *s, size_t *cap) {
  int64_t run_id = 0;
  char *commit = NULL;
  TP_TRY(parse_element(text, &run_id));
  if (run_id == 0) TP_TRY(resolve_commit(store, text, &commit));
  sqlite3_stmt *st = NULL;
  tp_rc rc = prepare(store, runs_sql, &st);
  if (rc == TP_OK && (sqlite3_bind_int64(st, 1, run_id) != SQLITE_OK ||
                      sqlite3_bind_text(st, 2, commit, -1, SQLITE_STATIC) != SQLITE_OK))
    rc = bind_error(store);
  size_t before = s->n_runs;
  int step = SQLITE_DONE;
  while (rc == TP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    rc = grow((void **)&s->runs, cap, s->n_runs, sizeof *s->runs);
    if (rc == TP_OK) read_run(st, &s->runs[s->n_runs++]);
  }
  if (rc == TP_OK && step != SQLITE_DONE) rc = sql_error(store, "reading runs");
  if (rc == TP_OK && s->n_runs == before)
    rc = TP_FAIL(TP_EUSAGE, "%s: there is no run %lld", tp_store_path(store), (long long)run_id);
  sqlite3_finalize(st);
  free(commit);
  return rc;
}

static int compare_runs(const void *x, const void *y) {
  const side_run *a = x, *b = y;
  int order = strcmp(a->started_at ? a->started_at : "", b->started_at ? b->started_at : "");
  if (order) return order;
  return (a->id > b->id) - (a->id < b->id);
}

/* Every run the comma-separated spec names, oldest first, each once. */
static tp_rc load_runs(tp_store *store, side *s) {
  char *list = strdup(s->spec);
  if (!list) return out_of_memory();
  size_t cap = 0;
  tp_rc rc = TP_OK;
  char *rest = list;
  for (char *item = strsep(&rest, ","); rc == TP_OK && item; item = strsep(&rest, ","))
    rc = load_element_runs(store, item, s, &cap);
  free(list);
  TP_TRY(rc);
  qsort(s->runs, s->n_runs, sizeof *s->runs, compare_runs);
  size_t kept = 0;
  for (size_t i = 0; i < s->n_runs; i++) {
    if (kept > 0 && s->runs[kept - 1].id == s->runs[i].id) free_run(&s->runs[i]);
    else s->runs[kept++] = s->runs[i];
  }
  s->n_runs = kept;
  return TP_OK;
}

/* ---- the sides: configurations and windows ------------------------------------------ */

/* Every configuration of run ?1 with its case's stock, GEMM-alone and
 * collective-alone configurations in that run (picked as the throughput
 * table picks them: an ok one first, then the latest). Drift configurations
 * (`tpbench drift`'s training steps) are no measurement to gate: left out. */
static const char entries_sql[] =
    "WITH roles AS (SELECT id, case_key, status, CASE WHEN kind IN ('op', 'layer') AND backend = "
    "'stock' AND schedule = 'nccl-window' THEN 4 WHEN kind IN ('op', 'layer') AND backend = "
    "'stock' THEN 1 WHEN kind = 'gemm' AND backend = 'cublaslt' THEN 2 WHEN kind = 'comm' AND "
    "backend = 'nccl' AND schedule = 'nccl-window' THEN 5 WHEN kind = 'comm' AND backend = "
    "'nccl' THEN 3 ELSE 0 END AS role FROM configs WHERE run_id = ?1), "
    "picked AS (SELECT id, case_key, role FROM (SELECT id, case_key, role, row_number() OVER "
    "(PARTITION BY case_key, role ORDER BY status = 'ok' DESC, id DESC) AS pick FROM roles WHERE "
    "role > 0) WHERE pick = 1) "
    "SELECT c.id, c.config_key, " TP_LABEL_COLUMNS
    ", c.status, c.reason, res.median_us, res.numerics, "
    "res.numerics_reason, res.fused, t.evidence, t.evidence_message, "
    "coalesce((SELECT id FROM picked p WHERE p.case_key = c.case_key AND p.role = 1), 0), "
    "coalesce((SELECT id FROM picked p WHERE p.case_key = c.case_key AND p.role = 2), 0), "
    "coalesce((SELECT id FROM picked p WHERE p.case_key = c.case_key AND p.role = 3), 0), "
    "coalesce((SELECT id FROM picked p WHERE p.case_key = c.case_key AND p.role = 4), 0), "
    "coalesce((SELECT id FROM picked p WHERE p.case_key = c.case_key AND p.role = 5), 0) "
    "FROM configs c LEFT JOIN results res ON res.config_id = c.id LEFT JOIN traces t ON "
    "t.config_id = c.id WHERE c.run_id = ?1 AND c.kind <> 'drift' ORDER BY c.id";

static const char *column_text(sqlite3_stmt *st, int col) {
  return (const char *)sqlite3_column_text(st, col);
}

/* Why an entry is not ok, or NULL when it is: its status, else its
 * numerics, else its schedule evidence. */
static char *failure_of(sqlite3_stmt *st) {
  const char *status = column_text(st, 13), *reason = column_text(st, 14);
  char buf[600];
  if (status && strcmp(status, "ok") != 0)
    snprintf(buf, sizeof buf, "%s: %s", status, reason ? reason : "no reason recorded");
  else if (column_text(st, 16) && !strcmp(column_text(st, 16), "failed"))
    snprintf(buf, sizeof buf, "numerics failed: %s",
             column_text(st, 17) ? column_text(st, 17) : "no reason recorded");
  else if (column_text(st, 19) && !strcmp(column_text(st, 19), "failed"))
    snprintf(buf, sizeof buf, "schedule evidence failed: %s",
             column_text(st, 20) ? column_text(st, 20) : "no message recorded");
  else return NULL;
  return strdup(buf);
}

static tp_rc read_entry(sqlite3_stmt *st, size_t run, entry *e) {
  memset(e, 0, sizeof *e);
  e->id = sqlite3_column_int64(st, 0);
  e->run = run;
  char **texts[] = {&e->key, &e->kind, &e->backend, &e->model, &e->layer};
  for (int k = 0; k < 5; k++) *texts[k] = dup_text(st, k + 1);
  e->dtype = dup_text(st, 8);
  e->pass = dup_text(st, 9);
  e->status = dup_text(st, 13);
  e->failure = failure_of(st);
  e->ok = e->status && !strcmp(e->status, "ok") && !e->failure;
  tp_config_axes axes;
  tp_axes_from_row(st, 2, &axes);
  tp_config_label(e->label, sizeof e->label, &axes);
  e->median_us = sqlite3_column_type(st, 15) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 15);
  e->fused = sqlite3_column_type(st, 18) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 18);
  for (int r = 0; r < N_REFS; r++) e->ref[r] = sqlite3_column_int64(st, 21 + r);
  if (!e->key || !e->status || (!e->ok && !e->failure)) return out_of_memory();
  return TP_OK;
}

static tp_rc load_run_entries(tp_store *store, side *s, size_t run, size_t *cap) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store, entries_sql, &st));
  tp_rc rc = sqlite3_bind_int64(st, 1, s->runs[run].id) == SQLITE_OK ? TP_OK : bind_error(store);
  int step = SQLITE_DONE;
  while (rc == TP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    rc = grow((void **)&s->entries, cap, s->n_entries, sizeof *s->entries);
    if (rc == TP_OK) rc = read_entry(st, run, &s->entries[s->n_entries++]);
  }
  if (rc == TP_OK && step != SQLITE_DONE) rc = sql_error(store, "reading configurations");
  sqlite3_finalize(st);
  return rc;
}

static tp_rc load_run_windows(tp_store *store, side *s, size_t run, size_t *cap) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store,
                 "SELECT w.config_id, w.round, w.median_us FROM windows w JOIN configs c ON c.id "
                 "= w.config_id WHERE c.run_id = ?1 AND w.median_us IS NOT NULL",
                 &st));
  tp_rc rc = sqlite3_bind_int64(st, 1, s->runs[run].id) == SQLITE_OK ? TP_OK : bind_error(store);
  int step = SQLITE_DONE;
  while (rc == TP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    rc = grow((void **)&s->windows, cap, s->n_windows, sizeof *s->windows);
    if (rc == TP_OK)
      s->windows[s->n_windows++] = (window){
          sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), sqlite3_column_double(st, 2)};
  }
  if (rc == TP_OK && step != SQLITE_DONE) rc = sql_error(store, "reading round windows");
  sqlite3_finalize(st);
  return rc;
}

static int compare_windows(const void *x, const void *y) {
  const window *a = x, *b = y;
  if (a->config_id != b->config_id)
    return (a->config_id > b->config_id) - (a->config_id < b->config_id);
  return (a->round > b->round) - (a->round < b->round);
}

static int compare_by_key(const void *x, const void *y) {
  const entry *a = *(const entry *const *)x, *b = *(const entry *const *)y;
  int order = strcmp(a->key, b->key);
  if (order) return order;
  if (a->run != b->run) return a->run < b->run ? 1 : -1; /* latest run first */
  return (a->id < b->id) - (a->id > b->id);
}

static int compare_by_id(const void *x, const void *y) {
  int64_t a = (*(const entry *const *)x)->id, b = (*(const entry *const *)y)->id;
  return (a > b) - (a < b);
}

/* The by-key and by-id indexes and the key groups (once every entry is
 * loaded: the indexes point into the entries array). */
static tp_rc index_side(side *s) {
  size_t n = s->n_entries ? s->n_entries : 1;
  s->by_key = malloc(n * sizeof(entry *));
  s->by_id = malloc(n * sizeof(entry *));
  s->keys = malloc(n * sizeof *s->keys);
  if (!s->by_key || !s->by_id || !s->keys) return out_of_memory();
  for (size_t i = 0; i < s->n_entries; i++) s->by_key[i] = s->by_id[i] = &s->entries[i];
  qsort(s->by_key, s->n_entries, sizeof(entry *), compare_by_key);
  qsort(s->by_id, s->n_entries, sizeof(entry *), compare_by_id);
  if (s->n_windows) qsort(s->windows, s->n_windows, sizeof *s->windows, compare_windows);
  const char *group_key = NULL;
  for (size_t i = 0; i < s->n_entries; i++) {
    const char *key = s->by_key[i]->key;
    if (group_key && !strcmp(group_key, key)) {
      s->keys[s->n_keys - 1].count++;
    } else {
      s->keys[s->n_keys++] = (key_group){i, 1};
      group_key = key;
    }
  }
  return TP_OK;
}

static tp_rc load_side(tp_store *store, const char *spec, side *s) {
  if (!spec) return TP_FAIL(TP_EUSAGE, "compare: an empty commit or run");
  s->spec = spec;
  TP_TRY(load_runs(store, s));
  size_t entry_cap = 0, window_cap = 0;
  for (size_t r = 0; r < s->n_runs; r++) {
    TP_TRY(load_run_entries(store, s, r, &entry_cap));
    TP_TRY(load_run_windows(store, s, r, &window_cap));
  }
  return index_side(s);
}

/* ---- lookups -------------------------------------------------------------------------- */

static const entry *entry_by_id(const side *s, int64_t id) {
  size_t lo = 0, hi = s->n_entries;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int64_t at = s->by_id[mid]->id;
    if (at == id) return s->by_id[mid];
    if (at < id) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

/* The windows of one configuration: *n of them from the returned one. */
static const window *windows_of(const side *s, int64_t config_id, size_t *n) {
  *n = 0;
  if (!s->n_windows) return NULL;
  size_t lo = 0, hi = s->n_windows;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->windows[mid].config_id < config_id) lo = mid + 1;
    else hi = mid;
  }
  size_t end = lo;
  while (end < s->n_windows && s->windows[end].config_id == config_id) end++;
  *n = end - lo;
  return s->windows + lo;
}

/* The median of round `round` among w[0..n), or NaN. */
static double round_median(const window *w, size_t n, int64_t round) {
  for (size_t i = 0; i < n; i++)
    if (w[i].round == round) return w[i].median_us;
  return NAN;
}

static const entry *group_entry(const side *s, const key_group *g, size_t i) {
  return s->by_key[g->first + i];
}

/* ---- samples ----------------------------------------------------------------------------- */

typedef enum { M_VS_STOCK, M_VS_BOUND, M_TIME, N_MEASURES } measure;
static const char *const measure_names[] = {"dist/stock", "dist/bound", "time"};

/* A measure as a row names it: a stock row's bound ratio is stock/bound. */
static const char *measure_name(const entry *e, int m) {
  return m == 1 && e && e->backend && !strcmp(e->backend, "stock") ? "stock/bound"
                                                                   : measure_names[m];
}
static const char *const measure_keys[] = {"vs_stock", "vs_bound", "time"};

typedef struct {
  double *v;
  size_t n, cap;
} samples;

static tp_rc push(samples *s, double value) {
  TP_TRY(grow((void **)&s->v, &s->cap, s->n, sizeof *s->v));
  s->v[s->n++] = value;
  return TP_OK;
}

static const entry *ref_entry(const side *s, const entry *e, ref_role role) {
  return e->ref[role] ? entry_by_id(s, e->ref[role]) : NULL;
}

/* The faster of a plain reference and its nccl-window variant by the run's
 * median, as the throughput table takes it: the one that ran ok when only
 * one did, plain on a tie or when neither did (a missing reference then). */
static const entry *faster_ref(const side *s, const entry *e, ref_role plain, ref_role on_windows) {
  const entry *p = ref_entry(s, e, plain), *w = ref_entry(s, e, on_windows);
  const int p_ok = p && p->ok && p->median_us > 0, w_ok = w && w->ok && w->median_us > 0;
  if (p_ok && w_ok) return w->median_us < p->median_us ? w : p;
  return w_ok && !p_ok ? w : p;
}

static int is_stock_op(const entry *e) {
  return e->backend && !strcmp(e->backend, "stock") && e->kind &&
         (!strcmp(e->kind, "op") || !strcmp(e->kind, "layer"));
}

static int was_rejected(const entry *e) { return e && e->status && !strcmp(e->status, "rejected"); }

/* The references a measure divides by: the faster stock configuration, or
 * GEMM alone and the faster collective alone (the bound is the larger). A
 * stock row (gated with --gate-references) has the bound alone; where its
 * collective alone was rejected or not run (TP 1: nothing travels) the bound
 * is the GEMM alone. */
static size_t measure_refs(measure m, const side *s, const entry *e, const entry **refs) {
  if (m == M_VS_STOCK) {
    refs[0] = is_stock_op(e) ? NULL : faster_ref(s, e, REF_STOCK, REF_STOCK_WINDOW);
    return 1;
  }
  refs[0] = ref_entry(s, e, REF_GEMM);
  refs[1] = faster_ref(s, e, REF_COMM, REF_COMM_WINDOW);
  return is_stock_op(e) && (!refs[1] || was_rejected(refs[1])) ? 1 : 2;
}

/* log(e / max(refs)) per round both ran in; for a run without rounds (no
 * common round), one sample from the results' medians. */
static tp_rc ratio_samples(const side *s, const entry *e, measure m, samples *out) {
  const entry *refs[2] = {NULL, NULL};
  size_t n_refs = measure_refs(m, s, e, refs);
  for (size_t r = 0; r < n_refs; r++)
    if (!refs[r] || !refs[r]->ok) return TP_OK;
  size_t n_own = 0, n_ref[2] = {0, 0};
  const window *own = windows_of(s, e->id, &n_own), *ref_w[2] = {NULL, NULL};
  for (size_t r = 0; r < n_refs; r++) ref_w[r] = windows_of(s, refs[r]->id, &n_ref[r]);
  size_t before = out->n;
  for (size_t i = 0; i < n_own; i++) {
    double denominator = 0;
    for (size_t r = 0; r < n_refs; r++)
      denominator = fmax(denominator, round_median(ref_w[r], n_ref[r], own[i].round));
    if (own[i].median_us > 0 && denominator > 0 && isfinite(denominator))
      TP_TRY(push(out, log(own[i].median_us / denominator)));
  }
  if (out->n > before) return TP_OK;
  double denominator = 0;
  for (size_t r = 0; r < n_refs; r++) denominator = fmax(denominator, refs[r]->median_us);
  if (e->median_us > 0 && denominator > 0 && isfinite(denominator))
    TP_TRY(push(out, log(e->median_us / denominator)));
  return TP_OK;
}

/* A measure's samples on one side: over every ok entry of the key (every
 * run where it ran); time: one per run, the run's median; the ratios only
 * for a row that has them (ratios: dist_gemm, or stock under
 * --gate-references). */
static tp_rc side_samples(const side *s, const key_group *g, measure m, int ratios, samples *out) {
  for (size_t i = 0; i < g->count; i++) {
    const entry *e = group_entry(s, g, i);
    if (!e->ok) continue;
    if (m == M_TIME) {
      if (e->median_us > 0) TP_TRY(push(out, log(e->median_us)));
    } else if (ratios) {
      TP_TRY(ratio_samples(s, e, m, out));
    }
  }
  return TP_OK;
}

/* ---- rows -------------------------------------------------------------------------------- */

/* V_NOT_COMPARED: on both sides, and ran on neither (rejected or failed both times): no
 * measure to judge, so neither unchanged nor a change. */
typedef enum {
  V_REGRESSED,
  V_IMPROVED,
  V_NEW,
  V_MISSING,
  V_UNCHANGED,
  V_INFORMATION,
  V_NOT_COMPARED
} verdict;
static const char *const verdict_names[] = {"regressed", "improved",    "new",         "missing",
                                            "unchanged", "information", "not_compared"};

typedef struct {
  size_t n_base, n_head;
  double base, head;           /* geometric means (a ratio, or µs); NaN without samples */
  double change, ci_lo, ci_hi; /* head / base - 1, and its 95 % interval */
  double head_lo, head_hi;     /* the 95 % interval of head's geometric mean; NaN: < 2 samples */
  int tested, gated;
  double p, p_adj; /* NaN when not tested / not gated */
  verdict v;       /* V_REGRESSED, V_IMPROVED or V_UNCHANGED */
} measured;

typedef struct {
  const key_group *base, *head; /* either may be NULL */
  const entry *base_latest, *head_latest;
  int subject; /* a dist_gemm op or layer: its ratios are gated */
  int failure; /* ok in base, failed in head */
  measured m[N_MEASURES];
  verdict v;
  double worst; /* the change that decided a regressed/improved verdict (sorting) */
  int shown;    /* selected for the output (changed_only, top) */
  char note[700];
} compare_row;

typedef struct {
  side base, head;
  compare_row *rows;
  size_t n_rows;
  tp_compare_options opt;
  tp_compare_summary sum;
  int mixed_hardware; /* allowed by the options, warned about */
} comparison;

static const entry *row_entry(const compare_row *row) {
  return row->head_latest ? row->head_latest : row->base_latest;
}

static int is_subject(const entry *e) {
  return e->backend && !strcmp(e->backend, "dist_gemm") && e->kind &&
         (!strcmp(e->kind, "op") || !strcmp(e->kind, "layer"));
}

/* A `tpbench link` measurement: of the interconnect, not of code; shown,
 * never gated, and its run is no part of the hardware check. */
static int is_link_probe(const entry *e) { return e->kind && !strcmp(e->kind, "link"); }

static int matches(const char *want, const char *have) {
  return !want || !*want || (have && !strcmp(want, have));
}

static int passes_filter(const tp_compare_filter *f, const entry *e) {
  const int model = !f->model || !*f->model || (e->model && !strcasecmp(f->model, e->model));
  return model && matches(f->layer, e->layer) && matches(f->pass, e->pass) &&
         matches(f->dtype, e->dtype) && matches(f->backend, e->backend) &&
         matches(f->kind, e->kind);
}

static tp_rc add_row(comparison *c, size_t *cap, const key_group *b, const key_group *h) {
  compare_row row = {.base = b, .head = h};
  row.base_latest = b ? group_entry(&c->base, b, 0) : NULL;
  row.head_latest = h ? group_entry(&c->head, h, 0) : NULL;
  if (!passes_filter(&c->opt.filter, row_entry(&row))) return TP_OK;
  row.subject = is_subject(row_entry(&row));
  for (int m = 0; m < N_MEASURES; m++) {
    measured *x = &row.m[m];
    x->base = x->head = x->change = x->ci_lo = x->ci_hi = x->p = x->p_adj = NAN;
    x->head_lo = x->head_hi = NAN;
    x->v = V_UNCHANGED;
  }
  row.worst = NAN;
  TP_TRY(grow((void **)&c->rows, cap, c->n_rows, sizeof *c->rows));
  c->rows[c->n_rows++] = row;
  return TP_OK;
}

/* Merges the two key-sorted lists (SQLite's BINARY order is strcmp's). */
static tp_rc pair_sides(comparison *c) {
  size_t i = 0, j = 0, cap = 0;
  const side *b = &c->base, *h = &c->head;
  while (i < b->n_keys || j < h->n_keys) {
    int order = i == b->n_keys   ? 1
                : j == h->n_keys ? -1
                                 : strcmp(group_entry(b, &b->keys[i], 0)->key,
                                          group_entry(h, &h->keys[j], 0)->key);
    const key_group *bk = order <= 0 ? &b->keys[i++] : NULL;
    const key_group *hk = order >= 0 ? &h->keys[j++] : NULL;
    TP_TRY(add_row(c, &cap, bk, hk));
  }
  return TP_OK;
}

/* ---- hardware ---------------------------------------------------------------------------- */

static void mark_group_runs(side *s, const key_group *g) {
  for (size_t i = 0; i < g->count; i++) s->runs[group_entry(s, g, i)->run].used = 1;
}

/* Which runs supplied compared configurations (on both sides, not link
 * probes): only they describe a side and are checked for like hardware. A
 * commit's `tpbench run` whose layers the other side lacks says nothing
 * about the timings compared, and neither does its `tpbench link` run
 * (which early versions stored with the CUDA version as its driver). */
static void mark_used_runs(comparison *c) {
  for (size_t i = 0; i < c->n_rows; i++) {
    const compare_row *row = &c->rows[i];
    if (!row->base || !row->head || is_link_probe(row_entry(row))) continue;
    mark_group_runs(&c->base, row->base);
    mark_group_runs(&c->head, row->head);
  }
}

static int has_filter(const tp_compare_filter *f) {
  const char *fields[] = {f->model, f->layer, f->pass, f->dtype, f->backend, f->kind};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
    if (fields[i] && *fields[i]) return 1;
  return 0;
}

/* A gate that compared nothing must not pass: refused (TP_EUSAGE) when no
 * configuration the filters select is on both sides, saying why. */
static tp_rc check_something_compared(comparison *c) {
  size_t only_base = 0, only_head = 0;
  for (size_t i = 0; i < c->n_rows; i++) {
    const compare_row *row = &c->rows[i];
    if (row->base && row->head) c->sum.compared++;
    else if (row->base) only_base++;
    else only_head++;
  }
  if (c->sum.compared > 0) return TP_OK;
  const char *base = c->base.spec, *head = c->head.spec;
  if (c->n_rows == 0 && has_filter(&c->opt.filter))
    return TP_FAIL(TP_EUSAGE,
                   "compare: nothing compared: the filters match no configuration of %s or %s",
                   base, head);
  if (c->n_rows == 0)
    return TP_FAIL(TP_EUSAGE,
                   "compare: nothing compared: %s and %s recorded no configuration compare gates "
                   "(a drift run's steps: tpbench drift --show RUN)",
                   base, head);
  return TP_FAIL(TP_EUSAGE,
                 "compare: nothing compared: %s and %s have no configuration in common%s (%zu "
                 "only in %s, %zu only in %s): compare runs of the same matrix",
                 base, head, has_filter(&c->opt.filter) ? " that the filters select" : "",
                 only_base, base, only_head, head);
}

/* Pairs that ran on neither side measure nothing: when every pair is one, the gate would pass
 * whatever the code does (dist_gemm failing on both sides, say), so it is refused, saying why. */
static tp_rc check_something_ran(const comparison *c) {
  if (c->sum.not_compared < c->sum.compared) return TP_OK;
  return TP_FAIL(TP_EUSAGE,
                 "compare: nothing compared: every one of the %d configuration%s %s and %s share "
                 "ran on neither side (in %s: rejected %d, failed %d)",
                 c->sum.compared, c->sum.compared == 1 ? "" : "s", c->base.spec, c->head.spec,
                 c->head.spec, c->sum.not_compared_rejected, c->sum.not_compared_failed);
}

static const char *or_q(const char *s) { return s ? s : "?"; }

/* Unknown (NULL) matches anything: an old run that did not record a field
 * cannot be told apart, and is not refused for it. */
static int same_known(const char *a, const char *b) { return !a || !b || !strcmp(a, b); }

static int same_hardware(const side_run *a, const side_run *b) {
  return same_known(a->gpu_name, b->gpu_name) && same_known(a->driver, b->driver) &&
         (a->gpu_count < 0 || b->gpu_count < 0 || a->gpu_count == b->gpu_count);
}

/* The first used run whose hardware differs from the first used run's. */
static tp_rc check_hardware(comparison *c) {
  const side_run *first = NULL;
  side *sides[] = {&c->base, &c->head};
  for (int k = 0; k < 2; k++) {
    for (size_t i = 0; i < sides[k]->n_runs; i++) {
      const side_run *r = &sides[k]->runs[i];
      if (!r->used) continue;
      if (!first) {
        first = r;
        continue;
      }
      if (same_hardware(first, r)) continue;
      if (c->opt.allow_mixed_hardware) {
        c->mixed_hardware = 1;
        return TP_OK;
      }
      return TP_FAIL(TP_EUSAGE,
                     "compare: refused: the runs ran on different hardware (run %lld: %s x %lld, "
                     "driver %s; run %lld: %s x %lld, driver %s); timings of different GPUs or "
                     "drivers are not comparable (--allow-mixed-hardware compares them anyway)",
                     (long long)first->id, or_q(first->gpu_name), (long long)first->gpu_count,
                     or_q(first->driver), (long long)r->id, or_q(r->gpu_name),
                     (long long)r->gpu_count, or_q(r->driver));
    }
  }
  return TP_OK;
}

/* ---- judging ------------------------------------------------------------------------------- */

static double geometric_mean(const samples *s) {
  if (s->n == 0) return NAN;
  double mean = 0, sq = 0;
  moments(s->v, s->n, &mean, &sq);
  return exp(mean);
}

/* The 95 % interval of the geometric mean of s (log samples), from
 * Student's t with n - 1 degrees of freedom; NaN with fewer than two. */
static void geometric_interval(const samples *s, double *lo, double *hi) {
  *lo = *hi = NAN;
  if (s->n < 2) return;
  double mean = 0, sq = 0;
  moments(s->v, s->n, &mean, &sq);
  double half = t_quantile_975((double)(s->n - 1)) * sqrt(sq / (double)(s->n - 1) / (double)s->n);
  *lo = exp(mean - half);
  *hi = exp(mean + half);
}

/* Whether a row's within-run ratios are measured: a dist_gemm row's always; a stock row's
 * (stock over its bound) with --gate-references, which is what a run without fused
 * configurations (TP 1, one GPU) can gate. */
static int has_ratios(const comparison *c, const compare_row *row) {
  return row->subject || (c->opt.gate_references && is_stock_op(row_entry(row)));
}

/* One measure of a row where both sides ran: samples, means, Welch. */
static tp_rc measure_row(const comparison *c, compare_row *row, measure m) {
  samples b = {0}, h = {0};
  measured *x = &row->m[m];
  const int ratios = has_ratios(c, row);
  tp_rc rc = side_samples(&c->base, row->base, m, ratios, &b);
  if (rc == TP_OK) rc = side_samples(&c->head, row->head, m, ratios, &h);
  x->n_base = b.n;
  x->n_head = h.n;
  x->base = geometric_mean(&b);
  x->head = geometric_mean(&h);
  x->change = x->head / x->base - 1.0;
  geometric_interval(&h, &x->head_lo, &x->head_hi);
  if (rc == TP_OK && b.n >= 2 && h.n >= 2) {
    tp_welch w;
    rc = tp_welch_test(b.v, b.n, h.v, h.n, &w);
    if (rc == TP_OK) {
      x->tested = 1;
      x->p = w.p;
      x->ci_lo = expm1(w.ci_lo);
      x->ci_hi = expm1(w.ci_hi);
      x->gated = row->subject || (c->opt.gate_references && !is_link_probe(row_entry(row)));
    }
  }
  free(b.v);
  free(h.v);
  return rc;
}

static void append_note(compare_row *row, const char *text) {
  size_t used = strlen(row->note);
  snprintf(row->note + used, sizeof row->note - used, "%s%s", used ? "; " : "", text);
}

/* "plain" or "nccl-window": the stock variant an entry's dist/stock divides
 * by in its run (NULL: none ran). */
static const char *stock_variant_of(const side *s, const entry *e) {
  const entry *ref = faster_ref(s, e, REF_STOCK, REF_STOCK_WINDOW);
  if (!ref || !ref->ok) return NULL;
  return e->ref[REF_STOCK_WINDOW] == ref->id ? "nccl-window" : "plain";
}

/* What the row's label leaves out: the stock path, the stock variant its
 * ratio divides by when that changed between the sides, samples too few to
 * test. */
static void describe_row(const comparison *c, compare_row *row) {
  const entry *e = row_entry(row);
  if (row->subject && row->base_latest && row->head_latest) {
    const char *b = stock_variant_of(&c->base, row->base_latest);
    const char *h = stock_variant_of(&c->head, row->head_latest);
    if (b && h && strcmp(b, h) != 0) {
      char buf[120];
      snprintf(buf, sizeof buf, "faster stock: %s in base, %s in head", b, h);
      append_note(row, buf);
    }
  }
  if (row->subject && e && e->fused == 0) append_note(row, "dist_gemm took the stock path");
  if (row->subject && row->base_latest && row->head_latest && row->base_latest->fused >= 0 &&
      row->head_latest->fused >= 0 && row->base_latest->fused != row->head_latest->fused)
    append_note(row, row->head_latest->fused ? "path changed: stock path in base, fused in head"
                                             : "path changed: fused in base, stock path in head");
  if (!row->base_latest || !row->head_latest || !row->base_latest->ok || !row->head_latest->ok)
    return;
  const measured *r = &row->m[M_VS_STOCK];
  if (row->subject && !r->tested) {
    char buf[200];
    if (r->n_base == 0 || r->n_head == 0)
      snprintf(buf, sizeof buf, "no ratio on the %s side (a reference did not run)",
               r->n_base == 0 ? "base" : "head");
    else
      snprintf(buf, sizeof buf,
               "ratios not tested: %zu / %zu samples (a run without rounds is one sample; two "
               "or more per side are needed)",
               r->n_base, r->n_head);
    append_note(row, buf);
  }
}

static int is_hard_failure(const entry *e) {
  return !e->ok && e->status && strcmp(e->status, "rejected") != 0;
}

/* Verdicts that need no test: one side missing or not ok. */
static void judge_unpaired(compare_row *row) {
  const entry *b = row->base_latest, *h = row->head_latest;
  char buf[700];
  if (b && b->ok) {
    if (h && is_hard_failure(h)) {
      row->v = V_REGRESSED;
      row->failure = 1;
      snprintf(buf, sizeof buf, "ok in base, in head %s", h->failure);
    } else if (h) {
      row->v = V_MISSING;
      snprintf(buf, sizeof buf, "head: %s", h->failure);
    } else {
      row->v = V_MISSING;
      snprintf(buf, sizeof buf, "not measured in head");
    }
  } else if (h && h->ok) {
    row->v = V_NEW;
    if (b) snprintf(buf, sizeof buf, "base: %s", b->failure);
    else snprintf(buf, sizeof buf, "not measured in base");
  } else {
    /* Neither side ran it (failed or rejected both times, say). */
    const entry *either = h ? h : b;
    if (!either) return; /* a row has a side: pair_sides makes none without */
    row->v = b && h ? V_NOT_COMPARED : (b ? V_MISSING : V_NEW);
    snprintf(buf, sizeof buf, "did not run: %s", either->failure);
  }
  append_note(row, buf);
}

static tp_rc measure_all(comparison *c) {
  for (size_t i = 0; i < c->n_rows; i++) {
    compare_row *row = &c->rows[i];
    int both_ok =
        row->base_latest && row->head_latest && row->base_latest->ok && row->head_latest->ok;
    if (!both_ok) continue;
    for (int m = 0; m < N_MEASURES; m++) {
      if (m != M_TIME && !has_ratios(c, row)) continue;
      TP_TRY(measure_row(c, row, (measure)m));
    }
  }
  return TP_OK;
}

/* Benjamini–Hochberg over every gated test of the comparison. */
static tp_rc adjust_family(comparison *c) {
  measured **family = NULL;
  size_t n = 0, cap = 0;
  tp_rc rc = TP_OK;
  for (size_t i = 0; rc == TP_OK && i < c->n_rows; i++)
    for (int m = 0; rc == TP_OK && m < N_MEASURES; m++) {
      if (!c->rows[i].m[m].gated) continue;
      rc = grow((void **)&family, &cap, n, sizeof(measured *));
      if (rc == TP_OK) family[n++] = &c->rows[i].m[m];
    }
  c->sum.tests = (int)n;
  double *p = NULL, *adjusted = NULL;
  if (rc == TP_OK && n > 0) {
    p = malloc(n * sizeof *p);
    adjusted = malloc(n * sizeof *adjusted);
    if (!p || !adjusted) rc = out_of_memory();
  }
  for (size_t k = 0; rc == TP_OK && k < n; k++) p[k] = family[k]->p;
  if (rc == TP_OK && n > 0) rc = tp_bh_adjust(p, n, adjusted);
  for (size_t k = 0; rc == TP_OK && k < n; k++) family[k]->p_adj = adjusted[k];
  free(family);
  free(p);
  free(adjusted);
  return rc;
}

/* Flagged: adjusted p below alpha and a change of at least the threshold;
 * larger is slower for every measure. */
static void judge_measures(const tp_compare_options *opt, compare_row *row) {
  int regressed = 0, improved = 0, gated = 0;
  for (int m = 0; m < N_MEASURES; m++) {
    measured *x = &row->m[m];
    if (!x->gated) continue;
    gated = 1;
    if (!(x->p_adj < opt->alpha)) continue;
    if (x->change >= opt->threshold) x->v = V_REGRESSED;
    else if (x->change <= -opt->threshold) x->v = V_IMPROVED;
    if (x->v == V_REGRESSED && !(x->change <= row->worst)) row->worst = x->change;
    regressed |= x->v == V_REGRESSED;
    improved |= x->v == V_IMPROVED;
  }
  if (improved && !regressed)
    for (int m = 0; m < N_MEASURES; m++)
      if (row->m[m].v == V_IMPROVED && !(row->m[m].change >= row->worst))
        row->worst = row->m[m].change;
  row->v = regressed ? V_REGRESSED : improved ? V_IMPROVED : gated ? V_UNCHANGED : V_INFORMATION;
}

/* A row that ran on neither side counts by why head did not run it: rejected by a rule, or
 * failed (an error, a timeout, out of memory, numerics or evidence). */
static int rejected_in_head(const compare_row *row) {
  const entry *h = row->head_latest;
  return h && h->status && !strcmp(h->status, "rejected");
}

static void count_verdict(tp_compare_summary *sum, const compare_row *row) {
  int *counts[] = {&sum->regressed, &sum->improved,    &sum->added,       &sum->missing,
                   &sum->unchanged, &sum->information, &sum->not_compared};
  (*counts[row->v])++;
  sum->failed += row->failure;
  if (row->v == V_NOT_COMPARED) {
    if (rejected_in_head(row)) sum->not_compared_rejected++;
    else sum->not_compared_failed++;
  }
}

static tp_rc judge_all(comparison *c) {
  TP_TRY(measure_all(c));
  TP_TRY(adjust_family(c));
  for (size_t i = 0; i < c->n_rows; i++) {
    compare_row *row = &c->rows[i];
    int both_ok =
        row->base_latest && row->head_latest && row->base_latest->ok && row->head_latest->ok;
    if (both_ok) judge_measures(&c->opt, row);
    else judge_unpaired(row);
    describe_row(c, row);
    count_verdict(&c->sum, row);
  }
  return TP_OK;
}

/* Regressed first (failures, then the largest change), improved (the
 * largest gain first), new, missing, unchanged, information; ties in key
 * order. */
static int compare_rows(const void *x, const void *y) {
  const compare_row *a = x, *b = y;
  if (a->v != b->v) return (int)a->v - (int)b->v;
  if (a->v == V_REGRESSED && a->failure != b->failure) return b->failure - a->failure;
  if (a->v == V_REGRESSED && a->worst != b->worst) return a->worst < b->worst ? 1 : -1;
  if (a->v == V_IMPROVED && a->worst != b->worst) return a->worst < b->worst ? -1 : 1;
  return strcmp(row_entry(a)->key, row_entry(b)->key);
}

/* ---- what is shown ------------------------------------------------------------------------ */

/* How far a row moved, for --top: a failure in head first, then the
 * largest |change| of its measures; -1 when none is known. */
static double row_magnitude(const compare_row *row) {
  if (row->failure) return INFINITY;
  double largest = -1;
  for (int m = 0; m < N_MEASURES; m++)
    if (isfinite(row->m[m].change)) largest = fmax(largest, fabs(row->m[m].change));
  return largest;
}

typedef struct {
  double magnitude;
  size_t at;
} ranked_row;

static int compare_ranked_rows(const void *x, const void *y) {
  const ranked_row *a = x, *b = y;
  if (a->magnitude != b->magnitude) return a->magnitude < b->magnitude ? 1 : -1;
  return (a->at > b->at) - (a->at < b->at);
}

/* Marks the rows the output shows: regressed and improved ones only when
 * changed_only, then the `top` largest changes among those. */
static tp_rc select_shown(comparison *c) {
  size_t candidates = 0;
  for (size_t i = 0; i < c->n_rows; i++) {
    compare_row *row = &c->rows[i];
    row->shown = !c->opt.changed_only || row->v == V_REGRESSED || row->v == V_IMPROVED;
    candidates += (size_t)row->shown;
  }
  if (c->opt.top <= 0 || candidates <= (size_t)c->opt.top) return TP_OK;
  ranked_row *ranked = malloc(candidates * sizeof *ranked);
  if (!ranked) return out_of_memory();
  size_t n = 0;
  for (size_t i = 0; i < c->n_rows; i++)
    if (c->rows[i].shown) ranked[n++] = (ranked_row){row_magnitude(&c->rows[i]), i};
  qsort(ranked, n, sizeof *ranked, compare_ranked_rows);
  for (size_t k = (size_t)c->opt.top; k < n; k++) c->rows[ranked[k].at].shown = 0;
  free(ranked);
  return TP_OK;
}

static int shown_count(const comparison *c, verdict v) {
  int n = 0;
  for (size_t i = 0; i < c->n_rows; i++) n += c->rows[i].shown && c->rows[i].v == v;
  return n;
}

static size_t shown_rows(const comparison *c) {
  size_t n = 0;
  for (size_t i = 0; i < c->n_rows; i++) n += (size_t)c->rows[i].shown;
  return n;
}

/* ---- rendering: shared ------------------------------------------------------------------ */

static size_t used_runs(const side *s) {
  size_t used = 0;
  for (size_t i = 0; i < s->n_runs; i++) used += (size_t)s->runs[i].used;
  return used;
}

/* Whether a run the side's figures come from (its used runs; every run when none was used)
 * was built from a tree with uncommitted changes: the representative alone may be clean. */
static int side_dirty(const side *s) {
  size_t used = used_runs(s);
  for (size_t i = 0; i < s->n_runs; i++)
    if ((s->runs[i].used || used == 0) && s->runs[i].dirty == 1) return 1;
  return 0;
}

/* The run that describes a side: its latest used run, or its latest. */
static const side_run *representative(const side *s) {
  for (size_t i = s->n_runs; i-- > 0;)
    if (s->runs[i].used) return &s->runs[i];
  return &s->runs[s->n_runs - 1];
}

static int same_text(const char *a, const char *b) {
  return (!a && !b) || (a && b && !strcmp(a, b));
}

/* A change as a signed percentage: "+5.1%"; "-" when unknown. */
static const char *fmt_change(char *buf, size_t cap, double change) {
  if (isfinite(change)) snprintf(buf, cap, "%+.1f%%", change * 100.0);
  else snprintf(buf, cap, "-");
  return buf;
}

static const char *fmt_p(char *buf, size_t cap, double p) {
  if (!isfinite(p)) snprintf(buf, cap, "-");
  else if (p < 1e-4) snprintf(buf, cap, "<0.0001");
  else snprintf(buf, cap, "%.4f", p);
  return buf;
}

/* The row's label, "(stock path)" when dist_gemm did not fuse. */
static void row_label(char *buf, size_t cap, const compare_row *row) {
  const entry *e = row_entry(row);
  snprintf(buf, cap, "%s%s", e->label, row->subject && e->fused == 0 ? " (stock path)" : "");
}

/* ---- markdown ------------------------------------------------------------------------------ */

static void md_runs(FILE *out, const side *s) {
  size_t used = used_runs(s), k = 0;
  fprintf(out, ": run%s", used > 1 ? "s" : "");
  for (size_t i = 0; i < s->n_runs; i++) {
    const side_run *r = &s->runs[i];
    if (!r->used && used > 0) continue;
    fprintf(out, "%s %lld", k++ ? "," : "", (long long)r->id);
    const char *dirty = r->dirty == 1 ? ", dirty tree" : "";
    if (r->rounds > 0) fprintf(out, " (%lld rounds%s)", (long long)r->rounds, dirty);
    else fprintf(out, " (before rounds: one sample%s)", dirty);
  }
  if (used > 0 && used < s->n_runs)
    fprintf(out, " [%zu more run%s named: nothing in common, or link probes only]",
            s->n_runs - used, s->n_runs - used == 1 ? "" : "s");
}

/* before, then stored text through tp_md_text ("?" when unknown): a host
 * name or version cannot add a line, a table row or HTML to the comment. */
static void md_words(FILE *out, const char *before, const char *text) {
  fputs(before, out);
  tp_md_text(out, or_q(text));
}

static void md_side(FILE *out, const char *name, const side *s) {
  fprintf(out, "- **%s** ", name);
  tp_md_code(out, s->spec);
  md_runs(out, s);
  const side_run *r = representative(s);
  fputs(", commit ", out);
  tp_md_code(out, r->commit ? r->commit : "unknown");
  fputs(r->dirty == 1 ? " (dirty tree)" : "", out);
  md_words(out, ", ", r->started_at);
  md_words(out, ", ", r->host);
  md_words(out, ": ", r->gpu_name);
  if (r->gpu_count >= 0) fprintf(out, " × %lld", (long long)r->gpu_count);
  else fputs(" × ?", out);
  md_words(out, ", driver ", r->driver);
  md_words(out, ", CUDA ", r->cuda);
  md_words(out, ", NCCL ", r->nccl);
  md_words(out, ", cuBLAS ", r->cublas);
  fputc('\n', out);
}

/* Each used run's headline, as report prints it (tp_headline_line). */
static void md_headlines(FILE *out, const comparison *c) {
  const side *sides[] = {&c->base, &c->head};
  int any = 0;
  char line[1024];
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < sides[k]->n_runs; i++) {
      const side_run *r = &sides[k]->runs[i];
      if (!r->has_headline) continue;
      if (!any++)
        fputs("\nHeadline of each run (as `tpbench report` and the dashboard give it: fused rows "
              "of models that are not toys; geometric mean of the speedup, median of "
              "dist/bound):\n\n",
              out);
      tp_headline_line(&r->headline, line, sizeof line);
      fprintf(out, "- run %lld (%s): ", (long long)r->id, k ? "head" : "base");
      tp_md_text(out, line);
      fputc('\n', out);
    }
}

/* What a run's test knobs did to its numbers, by knob: only the delay is a deliberate
 * slowdown (the knob's own text says of what); ranks sharing one GPU make every timing
 * meaningless; the others plant faults. An effect two knobs share is said once. */
static void md_knob_effects(FILE *out, const char *knobs) {
  static const struct {
    const char *knob, *effect;
  } effects[] = {
      {"TPBENCH_TEST_DIST_DELAY_US=", "a deliberate slowdown"},
      {"TPBENCH_TEST_SHARE_GPU=", "ranks sharing one GPU, so its timings mean nothing"},
      {"TPBENCH_TEST_WITHHOLD=", "a planted hang"},
      {"TPBENCH_TEST_FAIL_ALLOC=", "planted allocation failures"},
      {"TPBENCH_TEST_HANG_STEP=", "a planted hang"},
  };
  const char *said[sizeof effects / sizeof *effects];
  size_t n_said = 0;
  for (size_t k = 0; k < sizeof effects / sizeof *effects; k++) {
    if (!strstr(knobs, effects[k].knob)) continue;
    int again = 0;
    for (size_t j = 0; j < n_said; j++) again |= !strcmp(said[j], effects[k].effect);
    if (again) continue;
    fprintf(out, "%s%s", n_said ? "; " : "", effects[k].effect);
    said[n_said++] = effects[k].effect;
  }
  fputs(n_said ? ". Not the code as shipped.\n" : "not the code as shipped.\n", out);
}

static int side_has_run(const side *s, int64_t id) {
  for (size_t i = 0; i < s->n_runs; i++)
    if (s->runs[i].used && s->runs[i].id == id) return 1;
  return 0;
}

/* Each run's knobs once, though a run may be on both sides (run:4 against run:4). */
static void md_knobs(FILE *out, const side *s, const side *said_already) {
  for (size_t i = 0; i < s->n_runs; i++) {
    const side_run *r = &s->runs[i];
    if (!r->used || !r->test_knobs || !*r->test_knobs) continue;
    if (said_already && side_has_run(said_already, r->id)) continue;
    fprintf(out, "\n> **Note**: run %lld ran with test knobs on (", (long long)r->id);
    tp_md_text(out, r->test_knobs);
    fputs("): ", out);
    md_knob_effects(out, r->test_knobs);
  }
}

/* What makes the two sides not like for like, said before the numbers. */
static void md_warnings(FILE *out, const comparison *c) {
  const side_run *b = representative(&c->base), *h = representative(&c->head);
  if (c->mixed_hardware)
    fputs("\n> **Warning**: the runs ran on different GPUs or drivers "
          "(--allow-mixed-hardware): not like for like.\n",
          out);
  if (!same_text(b->host, h->host)) {
    md_words(out, "\n> **Note**: different hosts (", b->host);
    md_words(out, " vs ", h->host);
    fputs(").\n", out);
  }
  if (!same_text(b->cuda, h->cuda) || !same_text(b->nccl, h->nccl) ||
      !same_text(b->cublas, h->cublas))
    fputs("\n> **Note**: library versions differ between the sides.\n", out);
  if (side_dirty(&c->base) || side_dirty(&c->head))
    fputs("\n> **Note**: a side was built from a tree with uncommitted changes.\n", out);
  md_knobs(out, &c->base, NULL);
  md_knobs(out, &c->head, &c->base);
}

static void md_value(FILE *out, measure m, double value) {
  if (m == M_TIME) tp_md_num(out, value / 1000.0, 3);
  else tp_md_num(out, value, 3);
}

static void md_interval(FILE *out, const measured *x) {
  char lo[32], hi[32], buf[80];
  if (x->tested)
    snprintf(buf, sizeof buf, "%s … %s", fmt_change(lo, sizeof lo, x->ci_lo),
             fmt_change(hi, sizeof hi, x->ci_hi));
  else snprintf(buf, sizeof buf, "-");
  tp_md_cell(out, buf);
}

/* One line of a regressed or improved configuration: the failure, or each
 * measure that moved. */
static void md_flagged_row(FILE *out, const compare_row *row, verdict v) {
  char label[sizeof row->note + 300], buf[64];
  row_label(label, sizeof label, row);
  if (row->failure) {
    size_t used = strlen(label);
    snprintf(label + used, sizeof label - used, " — %s", row->note);
    tp_md_cell(out, label);
    fputs("| status | ok | failed | - | - | - | - |\n", out);
    return;
  }
  for (int m = 0; m < N_MEASURES; m++) {
    const measured *x = &row->m[m];
    if (x->v != v) continue;
    tp_md_cell(out, label);
    tp_md_cell(out, measure_name(row_entry(row), m));
    md_value(out, (measure)m, x->base);
    md_value(out, (measure)m, x->head);
    tp_md_cell(out, fmt_change(buf, sizeof buf, x->change));
    md_interval(out, x);
    tp_md_cell(out, fmt_p(buf, sizeof buf, x->p_adj));
    snprintf(buf, sizeof buf, "%zu / %zu", x->n_base, x->n_head);
    tp_md_cell(out, buf);
    fputs("|\n", out);
  }
}

static void md_flagged_table(FILE *out, const comparison *c, verdict v) {
  fputs("\n| configuration | measure | base | head | change | 95% interval | adjusted p | "
        "samples |\n|---|---|---:|---:|---:|---|---:|---:|\n",
        out);
  for (size_t i = 0; i < c->n_rows; i++)
    if (c->rows[i].shown && c->rows[i].v == v) md_flagged_row(out, &c->rows[i], v);
}

/* Unchanged and information rows: each measure's change in one line. */
static void md_change_table(FILE *out, const comparison *c, verdict v) {
  fputs("\n| configuration | dist/stock | dist/bound | time | note |\n|---|---:|---:|---:|---|\n",
        out);
  char label[300], buf[64];
  for (size_t i = 0; i < c->n_rows; i++) {
    const compare_row *row = &c->rows[i];
    if (!row->shown || row->v != v) continue;
    row_label(label, sizeof label, row);
    tp_md_cell(out, label);
    for (int m = 0; m < N_MEASURES; m++)
      tp_md_cell(out, fmt_change(buf, sizeof buf, row->m[m].change));
    tp_md_cell(out, row->note);
    fputs("|\n", out);
  }
}

static void md_note_table(FILE *out, const comparison *c, verdict v) {
  fputs("\n| configuration | note |\n|---|---|\n", out);
  char label[300];
  for (size_t i = 0; i < c->n_rows; i++) {
    const compare_row *row = &c->rows[i];
    if (!row->shown || row->v != v) continue;
    row_label(label, sizeof label, row);
    tp_md_cell(out, label);
    tp_md_cell(out, row->note);
    fputs("|\n", out);
  }
}

static void md_section(FILE *out, const comparison *c, verdict v, int count, const char *title) {
  if (count == 0) return;
  int collapsed = v == V_UNCHANGED || v == V_INFORMATION || v == V_NOT_COMPARED;
  if (collapsed) fprintf(out, "\n<details><summary>%s (%d)</summary>\n", title, count);
  else fprintf(out, "\n### %s (%d)\n", title, count);
  if (v == V_NEW || v == V_MISSING || v == V_NOT_COMPARED) md_note_table(out, c, v);
  else if (collapsed) md_change_table(out, c, v);
  else md_flagged_table(out, c, v);
  if (collapsed) fputs("\n</details>\n", out);
}

static void md_method(FILE *out, const comparison *c) {
  fprintf(out,
          "Gated: per dist_gemm configuration, dist/stock and dist/bound (stock: the faster of "
          "plain stock and its variant on NCCL symmetric windows where the run has both; bound = "
          "max(GEMM alone, the faster collective alone) of the same case), each taken round by "
          "round inside its run so that "
          "machine drift between runs cancels; raw times only when each side has two runs or "
          "more. Welch's t test on the log ratios (every round of every run one sample; a run "
          "without rounds is one sample), Benjamini–Hochberg over the %d gated test%s at a false "
          "discovery rate of %g; a configuration is flagged when its adjusted p < %g and the "
          "change is at least %.1f%%. Reference rows are information%s. A configuration ok in "
          "base that failed in head regressed. Larger is slower for every measure.\n\n",
          c->sum.tests, c->sum.tests == 1 ? "" : "s", c->opt.alpha, c->opt.alpha,
          c->opt.threshold * 100.0,
          c->opt.gate_references
              ? " but gate too (--gate-references): a stock row's stock/bound round by round as "
                "dist_gemm's ratios (at TP 1, where no collective is timed, the bound is the GEMM "
                "alone), and every reference's time with two runs a side"
              : "");
}

/* Why no test was gated although configurations were compared. */
static const char *nothing_gated_reason(const comparison *c) {
  for (size_t i = 0; i < c->n_rows; i++) {
    const compare_row *row = &c->rows[i];
    if (row->subject && row->base_latest && row->head_latest && row->base_latest->ok &&
        row->head_latest->ok)
      return "no dist_gemm ratio had two samples a side; a run without rounds is one";
  }
  return c->opt.gate_references
             ? "no dist_gemm configuration ran on both sides, and no reference ratio had two "
               "samples a side"
             : "no dist_gemm configuration ran on both sides; the rest is information (at TP 1, "
               "where nothing fuses, --gate-references gates stock over its bound)";
}

/* The verdict line. A pass that gated nothing says so in its verdict: a
 * reader of the comment must not take it for a tested pass. */
static void md_verdict(FILE *out, const comparison *c) {
  const tp_compare_summary *s = &c->sum;
  if (s->regressed) fputs("**Regression**", out);
  else if (s->tests == 0)
    fprintf(out, "**No regression (nothing gated: %s)**", nothing_gated_reason(c));
  else fputs("**No regression**", out);
  fprintf(out,
          ": %d regressed (%d failed in head), %d improved, %d unchanged, %d information only, "
          "%d new, %d missing",
          s->regressed, s->failed, s->improved, s->unchanged, s->information, s->added, s->missing);
  if (s->not_compared)
    fprintf(out, "; not compared (ran on neither side): rejected %d, failed %d",
            s->not_compared_rejected, s->not_compared_failed);
  fputs(".\n\n", out);
}

/* Says which rows --changed-only and --top left out, when they did. */
static void md_shown(FILE *out, const comparison *c) {
  size_t shown = shown_rows(c);
  if (shown == c->n_rows) return;
  fprintf(out, "\n_Shown: %zu of %zu configurations", shown, c->n_rows);
  if (c->opt.changed_only) fputs(", only the regressed and improved ones", out);
  if (c->opt.top > 0) fprintf(out, ", the %d largest changes", c->opt.top);
  fputs("._\n", out);
}

static void write_markdown(FILE *out, const comparison *c) {
  fputs("## tpbench compare: ", out);
  tp_md_code(out, c->base.spec);
  fputs(" → ", out);
  tp_md_code(out, c->head.spec);
  fputs("\n\n", out);
  md_verdict(out, c);
  md_method(out, c);
  md_side(out, "base", &c->base);
  md_side(out, "head", &c->head);
  md_headlines(out, c);
  md_warnings(out, c);
  md_shown(out, c);
  static const struct {
    verdict v;
    const char *title;
  } sections[] = {{V_REGRESSED, "Regressed"},
                  {V_IMPROVED, "Improved"},
                  {V_NEW, "New (in head only)"},
                  {V_MISSING, "Missing (in base, not run in head)"},
                  {V_UNCHANGED, "Unchanged"},
                  {V_INFORMATION, "Information only (not gated)"},
                  {V_NOT_COMPARED, "Not compared (ran on neither side)"}};
  for (size_t k = 0; k < sizeof sections / sizeof *sections; k++)
    md_section(out, c, sections[k].v, shown_count(c, sections[k].v), sections[k].title);
}

/* ---- CSV ----------------------------------------------------------------------------------- */

static const char *const measure_columns[] = {"base",      "head",   "change_pct", "ci_lo_pct",
                                              "ci_hi_pct", "p",      "p_adjusted", "n_base",
                                              "n_head",    "verdict"};

static void csv_header(FILE *out) {
  static const char *const columns[] = {"verdict",    "config_key",     "label",         "role",
                                        "stock_path", "base_config_id", "head_config_id"};
  for (size_t i = 0; i < sizeof columns / sizeof *columns; i++)
    tp_csv_field(out, columns[i], i == 0);
  char name[64];
  for (int m = 0; m < N_MEASURES; m++)
    for (size_t k = 0; k < sizeof measure_columns / sizeof *measure_columns; k++) {
      snprintf(name, sizeof name, "%s_%s", measure_keys[m], measure_columns[k]);
      tp_csv_field(out, name, 0);
    }
  tp_csv_field(out, "note", 0);
  tp_csv_end_line(out);
}

static void csv_measure(FILE *out, const measured *x) {
  tp_csv_num(out, x->base, 6);
  tp_csv_num(out, x->head, 6);
  tp_csv_num(out, x->change * 100.0, 3);
  tp_csv_num(out, x->ci_lo * 100.0, 3);
  tp_csv_num(out, x->ci_hi * 100.0, 3);
  char buf[64] = "";
  if (x->tested) snprintf(buf, sizeof buf, "%.6g", x->p);
  tp_csv_field(out, buf, 0);
  buf[0] = '\0';
  if (x->gated) snprintf(buf, sizeof buf, "%.6g", x->p_adj);
  tp_csv_field(out, buf, 0);
  tp_csv_int(out, (int64_t)x->n_base);
  tp_csv_int(out, (int64_t)x->n_head);
  tp_csv_field(out, x->gated ? verdict_names[x->v] : "", 0);
}

static void write_csv(FILE *out, const comparison *c) {
  csv_header(out);
  for (size_t i = 0; i < c->n_rows; i++) {
    const compare_row *row = &c->rows[i];
    if (!row->shown) continue;
    const entry *e = row_entry(row);
    tp_csv_field(out, verdict_names[row->v], 1);
    tp_csv_field(out, e->key, 0);
    tp_csv_field(out, e->label, 0);
    tp_csv_field(out, row->subject ? "dist_gemm" : "reference", 0);
    tp_csv_field(out,
                 row->subject && e->fused == 0   ? "1"
                 : row->subject && e->fused == 1 ? "0"
                                                 : "",
                 0);
    if (row->base_latest) tp_csv_int(out, row->base_latest->id);
    else tp_csv_field(out, "", 0);
    if (row->head_latest) tp_csv_int(out, row->head_latest->id);
    else tp_csv_field(out, "", 0);
    for (int m = 0; m < N_MEASURES; m++) csv_measure(out, &row->m[m]);
    tp_csv_field(out, row->note, 0);
    tp_csv_end_line(out);
  }
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static json_t *json_figures(tp_json_builder *jb, const tp_headline_figures *f) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "rows", json_integer(f->rows));
  tp_json_set(jb, o, "geomean_speedup", tp_json_real(f->geomean_speedup));
  tp_json_set(jb, o, "bound_rows", json_integer(f->bound_rows));
  tp_json_set(jb, o, "median_dist_over_bound", tp_json_real(f->median_dist_over_bound));
  return o;
}

/* A run's headline: report's summary figures (the same keys), toy models apart. */
static json_t *json_headline(tp_json_builder *jb, const tp_headline *h) {
  json_t *o = json_figures(jb, &h->figures), *toys = json_array();
  if (!o || !toys) {
    json_decref(o);
    json_decref(toys);
    return NULL;
  }
  tp_json_set(jb, o, "toy_only", json_boolean(h->toy_only));
  for (int i = 0; i < h->n_toys; i++) {
    json_t *t = json_figures(jb, &h->toys[i].figures);
    if (t) tp_json_set(jb, t, "model", tp_json_str(h->toys[i].model));
    tp_json_append(jb, toys, t);
  }
  tp_json_set(jb, o, "toys", toys);
  return o;
}

static json_t *json_run(tp_json_builder *jb, const side_run *r) {
  json_t *run = json_object();
  if (!run) return NULL;
  tp_json_set(jb, run, "id", json_integer(r->id));
  tp_json_set(jb, run, "commit", tp_json_str(r->commit));
  tp_json_set(jb, run, "dirty", json_boolean(r->dirty == 1));
  tp_json_set(jb, run, "started_at", tp_json_str(r->started_at));
  tp_json_set(jb, run, "command", tp_json_str(r->command));
  tp_json_set(jb, run, "host", tp_json_str(r->host));
  tp_json_set(jb, run, "gpu_name", tp_json_str(r->gpu_name));
  tp_json_set(jb, run, "gpu_count", json_integer(r->gpu_count));
  tp_json_set(jb, run, "driver", tp_json_str(r->driver));
  tp_json_set(jb, run, "rounds", r->rounds > 0 ? json_integer(r->rounds) : json_null());
  tp_json_set(jb, run, "test_knobs", tp_json_str(r->test_knobs));
  tp_json_set(jb, run, "used", json_boolean(r->used));
  tp_json_set(jb, run, "headline", r->has_headline ? json_headline(jb, &r->headline) : json_null());
  return run;
}

static json_t *json_side(tp_json_builder *jb, const side *s) {
  json_t *o = json_object(), *runs = json_array();
  if (!o || !runs) {
    json_decref(o);
    json_decref(runs);
    return NULL;
  }
  tp_json_set(jb, o, "spec", tp_json_str(s->spec));
  tp_json_set(jb, o, "commit", tp_json_str(representative(s)->commit));
  for (size_t i = 0; i < s->n_runs; i++) tp_json_append(jb, runs, json_run(jb, &s->runs[i]));
  tp_json_set(jb, o, "runs", runs);
  return o;
}

static json_t *json_measure(tp_json_builder *jb, const measured *x) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "base", tp_json_real(x->base));
  tp_json_set(jb, o, "head", tp_json_real(x->head));
  tp_json_set(jb, o, "change", tp_json_real(x->change));
  tp_json_set(jb, o, "ci_lo", tp_json_real(x->ci_lo));
  tp_json_set(jb, o, "ci_hi", tp_json_real(x->ci_hi));
  tp_json_set(jb, o, "p", x->tested ? tp_json_real(x->p) : json_null());
  tp_json_set(jb, o, "p_adjusted", x->gated ? tp_json_real(x->p_adj) : json_null());
  tp_json_set(jb, o, "n_base", json_integer((json_int_t)x->n_base));
  tp_json_set(jb, o, "n_head", json_integer((json_int_t)x->n_head));
  tp_json_set(jb, o, "tested", json_boolean(x->tested));
  tp_json_set(jb, o, "gated", json_boolean(x->gated));
  tp_json_set(jb, o, "verdict", x->gated ? json_string(verdict_names[x->v]) : json_null());
  return o;
}

static json_t *json_row(tp_json_builder *jb, const compare_row *row) {
  json_t *o = json_object(), *measures = json_object();
  if (!o || !measures) {
    json_decref(o);
    json_decref(measures);
    return NULL;
  }
  const entry *e = row_entry(row);
  tp_json_set(jb, o, "verdict", json_string(verdict_names[row->v]));
  tp_json_set(jb, o, "config_key", tp_json_str(e->key));
  tp_json_set(jb, o, "label", tp_json_str(e->label));
  tp_json_set(jb, o, "role", json_string(row->subject ? "dist_gemm" : "reference"));
  tp_json_set(jb, o, "stock_path",
              row->subject && e->fused >= 0 ? json_boolean(e->fused == 0) : json_null());
  tp_json_set(jb, o, "failed_in_head", json_boolean(row->failure));
  tp_json_set(jb, o, "base_config_id",
              row->base_latest ? json_integer(row->base_latest->id) : json_null());
  tp_json_set(jb, o, "head_config_id",
              row->head_latest ? json_integer(row->head_latest->id) : json_null());
  for (int m = 0; m < N_MEASURES; m++)
    tp_json_set(jb, measures, measure_keys[m], json_measure(jb, &row->m[m]));
  tp_json_set(jb, o, "measures", measures);
  tp_json_set(jb, o, "note", row->note[0] ? tp_json_str(row->note) : json_null());
  return o;
}

static json_t *json_summary(tp_json_builder *jb, const comparison *c) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "regressed", json_integer(c->sum.regressed));
  tp_json_set(jb, o, "failed", json_integer(c->sum.failed));
  tp_json_set(jb, o, "improved", json_integer(c->sum.improved));
  tp_json_set(jb, o, "unchanged", json_integer(c->sum.unchanged));
  tp_json_set(jb, o, "information", json_integer(c->sum.information));
  tp_json_set(jb, o, "new", json_integer(c->sum.added));
  tp_json_set(jb, o, "missing", json_integer(c->sum.missing));
  tp_json_set(jb, o, "not_compared", json_integer(c->sum.not_compared));
  tp_json_set(jb, o, "not_compared_rejected", json_integer(c->sum.not_compared_rejected));
  tp_json_set(jb, o, "not_compared_failed", json_integer(c->sum.not_compared_failed));
  tp_json_set(jb, o, "tests", json_integer(c->sum.tests));
  tp_json_set(jb, o, "compared", json_integer(c->sum.compared));
  return o;
}

static json_t *json_options(tp_json_builder *jb, const comparison *c) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "test",
              json_string("welch-t on log ratios, two-sided; benjamini-hochberg over the gated "
                          "tests"));
  tp_json_set(jb, o, "samples",
              json_string("per round: dist_gemm over its stock (the faster of plain and "
                          "nccl-window by the run's median), and over max(GEMM alone, the faster "
                          "collective alone), of the same round; one per run without rounds; "
                          "time: one per run"));
  tp_json_set(jb, o, "threshold", json_real(c->opt.threshold));
  tp_json_set(jb, o, "alpha", json_real(c->opt.alpha));
  tp_json_set(jb, o, "gate_references", json_boolean(c->opt.gate_references));
  tp_json_set(jb, o, "mixed_hardware", json_boolean(c->mixed_hardware));
  tp_json_set(jb, o, "changed_only", json_boolean(c->opt.changed_only));
  tp_json_set(jb, o, "top", c->opt.top > 0 ? json_integer(c->opt.top) : json_null());
  return o;
}

static tp_rc write_json(FILE *out, const comparison *c) {
  tp_json_builder jb = {0};
  json_t *root = json_object(), *rows = json_array();
  if (!root || !rows) jb.failed = 1;
  for (size_t i = 0; rows && i < c->n_rows; i++)
    if (c->rows[i].shown) tp_json_append(&jb, rows, json_row(&jb, &c->rows[i]));
  if (root) {
    tp_json_set(&jb, root, "base", json_side(&jb, &c->base));
    tp_json_set(&jb, root, "head", json_side(&jb, &c->head));
    tp_json_set(&jb, root, "options", json_options(&jb, c));
    tp_json_set(&jb, root, "summary", json_summary(&jb, c));
    tp_json_set(&jb, root, "rows", rows);
  } else {
    json_decref(rows);
  }
  tp_rc rc = TP_OK;
  if (jb.failed) rc = TP_FAIL(TP_EOOM, "compare: building the JSON document failed");
  else if (json_dumpf(root, out, JSON_INDENT(2)) != 0 || fputc('\n', out) == EOF)
    rc = TP_FAIL(TP_EIO, "compare: writing the JSON document failed");
  json_decref(root);
  return rc;
}

/* ---- JUnit XML ------------------------------------------------------------------------------ */

/* Whether both sides' latest entries ran: the row was judged by a test. */
static int both_ran(const compare_row *row) {
  return row->base_latest && row->head_latest && row->base_latest->ok && row->head_latest->ok;
}

/* The head's median in seconds (its time measure over runs when known);
 * 0 when head has none. */
static double head_seconds(const compare_row *row) {
  double us = row->m[M_TIME].head;
  if (!isfinite(us) && row->head_latest) us = row->head_latest->median_us;
  return isfinite(us) && us > 0 ? us / 1e6 : 0;
}

/* "dist/stock +5.1% (95% interval +3.0% to +7.2%, adjusted p 0.0012)". */
static void describe_measure(char *buf, size_t cap, const compare_row *row, measure m,
                             const measured *x) {
  char change[32], lo[32], hi[32], p[32];
  snprintf(buf, cap, "%s %s (95%% interval %s to %s, adjusted p %s)",
           measure_name(row_entry(row), m), fmt_change(change, sizeof change, x->change),
           fmt_change(lo, sizeof lo, x->ci_lo), fmt_change(hi, sizeof hi, x->ci_hi),
           fmt_p(p, sizeof p, x->p_adj));
}

/* Every measure of the row that moved the way v says, "; "-separated. */
static void moved_measures(char *buf, size_t cap, const compare_row *row, verdict v) {
  buf[0] = '\0';
  for (int m = 0; m < N_MEASURES; m++) {
    if (!row->m[m].gated || row->m[m].v != v) continue;
    size_t used = strlen(buf);
    char one[200];
    describe_measure(one, sizeof one, row, (measure)m, &row->m[m]);
    snprintf(buf + used, cap - used, "%s%s", used ? "; " : "", one);
  }
}

/* One line per measured measure: base, head, change, interval, p, samples. */
static void junit_measure_lines(FILE *out, const compare_row *row) {
  for (int m = 0; m < N_MEASURES; m++) {
    const measured *x = &row->m[m];
    if (x->n_base == 0 && x->n_head == 0) continue;
    char line[400], one[200], base[32], head[32];
    describe_measure(one, sizeof one, row, (measure)m, x);
    double scale = m == M_TIME ? 1e-3 : 1.0; /* time in ms, as the markdown shows it */
    snprintf(line, sizeof line, "%s; base %s, head %s%s; samples %zu / %zu%s\n", one,
             tp_fmt_num(base, sizeof base, x->base * scale, 4),
             tp_fmt_num(head, sizeof head, x->head * scale, 4), m == M_TIME ? " ms" : "", x->n_base,
             x->n_head, x->gated ? "" : " (not gated)");
    tp_xml_text(out, line);
  }
}

static void junit_property(FILE *out, const char *name, const char *value) {
  fputs("      <property name=\"", out);
  tp_xml_attr(out, name);
  fputs("\" value=\"", out);
  tp_xml_attr(out, value ? value : "");
  fputs("\"/>\n", out);
}

/* A side's properties, prefixed "base." or "head.": what the CI report
 * needs to say which builds and which machine were compared. */
static void junit_side(FILE *out, const char *which, const side *s) {
  const side_run *r = representative(s);
  char name[64], runs[512] = "", buf[256];
  for (size_t i = 0, used = 0; i < s->n_runs && used < sizeof runs; i++) {
    if (!s->runs[i].used && used_runs(s) > 0) continue;
    used += (size_t)snprintf(runs + used, sizeof runs - used, "%s%lld", used ? "," : "",
                             (long long)s->runs[i].id);
  }
  const struct {
    const char *key, *value;
  } texts[] = {
      {"spec", s->spec},     {"commit", r->commit},        {"runs", runs},    {"host", r->host},
      {"gpu", r->gpu_name},  {"driver", r->driver},        {"cuda", r->cuda}, {"nccl", r->nccl},
      {"cublas", r->cublas}, {"started_at", r->started_at}};
  for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
    snprintf(name, sizeof name, "%s.%s", which, texts[k].key);
    junit_property(out, name, texts[k].value);
  }
  snprintf(name, sizeof name, "%s.gpu_count", which);
  snprintf(buf, sizeof buf, "%lld", (long long)r->gpu_count);
  junit_property(out, name, r->gpu_count >= 0 ? buf : NULL);
  snprintf(name, sizeof name, "%s.dirty", which);
  junit_property(out, name, side_dirty(s) ? "true" : "false");
}

/* Why a row is skipped (nothing gated it); NULL when it was judged. */
static void skip_reason(char *buf, size_t cap, const compare_row *row) {
  buf[0] = '\0';
  const char *note = row->note[0] ? row->note : NULL;
  if (row->v == V_NEW) snprintf(buf, cap, "new in head: %s", note ? note : "not in base");
  else if (row->v == V_MISSING) snprintf(buf, cap, "missing in head: %s", note ? note : "");
  else if (row->v == V_NOT_COMPARED)
    snprintf(buf, cap, "not compared: %s", note ? note : "did not run on either side");
  else if (row->v == V_INFORMATION && note) snprintf(buf, cap, "not gated: %s", note);
  else if (row->v == V_INFORMATION && is_link_probe(row_entry(row)))
    snprintf(buf, cap, "not gated: a link probe measures the interconnect, not the code");
  else if (row->v == V_INFORMATION)
    snprintf(buf, cap, "not gated: a reference configuration (--gate-references gates its time)");
}

static void junit_failure(FILE *out, const comparison *c, const compare_row *row) {
  char message[1200];
  if (row->failure) snprintf(message, sizeof message, "%s", row->note);
  else moved_measures(message, sizeof message, row, V_REGRESSED);
  fprintf(out, "      <failure type=\"%s\" message=\"",
          row->failure ? "failed in head" : "regression");
  tp_xml_attr(out, message);
  fputs("\">", out);
  if (!row->failure) {
    junit_measure_lines(out, row);
    char rule[160];
    snprintf(rule, sizeof rule,
             "flagged: adjusted p < %g (Benjamini-Hochberg over %d gated tests) and a change of "
             "at least %.1f%%\n",
             c->opt.alpha, c->sum.tests, c->opt.threshold * 100.0);
    tp_xml_text(out, rule);
  }
  if (!row->failure && row->note[0]) tp_xml_text(out, row->note);
  fputs("</failure>\n", out);
}

static void junit_testcase(FILE *out, const comparison *c, const compare_row *row) {
  const entry *e = row_entry(row);
  char label[300], reason[800];
  row_label(label, sizeof label, row);
  fputs("    <testcase name=\"", out);
  tp_xml_attr(out, label);
  fputs("\" classname=\"", out);
  tp_xml_attr(out, or_q(e->kind));
  fputc('/', out);
  tp_xml_attr(out, e->model ? e->model : "-");
  fputc('/', out);
  tp_xml_attr(out, e->layer ? e->layer : "-");
  fprintf(out, "\" time=\"%.6f\">\n", head_seconds(row));
  skip_reason(reason, sizeof reason, row);
  if (row->v == V_REGRESSED) {
    junit_failure(out, c, row);
  } else if (reason[0]) {
    fputs("      <skipped message=\"", out);
    tp_xml_attr(out, reason);
    fputs("\"/>\n", out);
  } else {
    fputs("      <system-out>", out);
    tp_xml_text(out, verdict_names[row->v]);
    tp_xml_text(out, "\n");
    junit_measure_lines(out, row);
    if (row->note[0]) tp_xml_text(out, row->note);
    fputs("</system-out>\n", out);
  }
  fputs("    </testcase>\n", out);
}

static void write_junit(FILE *out, const comparison *c) {
  int tests = 0, failures = 0, skipped = 0;
  double seconds = 0;
  char reason[800];
  for (size_t i = 0; i < c->n_rows; i++) {
    const compare_row *row = &c->rows[i];
    if (!row->shown) continue;
    tests++;
    skip_reason(reason, sizeof reason, row);
    failures += row->v == V_REGRESSED;
    skipped += row->v != V_REGRESSED && reason[0] != '\0';
    seconds += head_seconds(row);
  }
  fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", out);
  fprintf(out,
          "<testsuites name=\"tpbench compare\" tests=\"%d\" failures=\"%d\" errors=\"0\" "
          "skipped=\"%d\" time=\"%.6f\">\n",
          tests, failures, skipped, seconds);
  fputs("  <testsuite name=\"tpbench compare ", out);
  tp_xml_attr(out, c->base.spec);
  fputs(" -&gt; ", out);
  tp_xml_attr(out, c->head.spec);
  fprintf(out, "\" tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"%d\" time=\"%.6f\">\n",
          tests, failures, skipped, seconds);
  fputs("    <properties>\n", out);
  junit_side(out, "base", &c->base);
  junit_side(out, "head", &c->head);
  char knob[64];
  snprintf(knob, sizeof knob, "%g", c->opt.alpha);
  junit_property(out, "alpha", knob);
  snprintf(knob, sizeof knob, "%g", c->opt.threshold);
  junit_property(out, "threshold", knob);
  snprintf(knob, sizeof knob, "%d", c->sum.tests);
  junit_property(out, "gated_tests", knob);
  junit_property(out, "mixed_hardware", c->mixed_hardware ? "true" : "false");
  fputs("    </properties>\n", out);
  for (size_t i = 0; i < c->n_rows; i++)
    if (c->rows[i].shown) junit_testcase(out, c, &c->rows[i]);
  fputs("  </testsuite>\n</testsuites>\n", out);
}

/* ---- BMF (Bencher Metric Format) ------------------------------------------------------------ */

/* {"value": v[, "lower_value": lo, "upper_value": hi]}; bounds only when
 * both are finite. NULL (nothing set) when v is not finite. */
static json_t *bmf_metric(tp_json_builder *jb, double value, double lo, double hi) {
  if (!isfinite(value)) return NULL;
  json_t *o = json_object();
  if (!o) {
    jb->failed = 1;
    return NULL;
  }
  tp_json_set(jb, o, "value", json_real(value));
  if (isfinite(lo) && isfinite(hi)) {
    tp_json_set(jb, o, "lower_value", json_real(fmin(lo, value)));
    tp_json_set(jb, o, "upper_value", json_real(fmax(hi, value)));
  }
  return o;
}

/* The lowest and highest round median (µs) of the head's ok runs of the
 * row; NaN when it has fewer than two rounds. */
static void head_round_range(const comparison *c, const compare_row *row, double *lo, double *hi) {
  *lo = INFINITY;
  *hi = -INFINITY;
  size_t rounds = 0;
  for (size_t i = 0; row->head && i < row->head->count; i++) {
    const entry *e = group_entry(&c->head, row->head, i);
    if (!e->ok) continue;
    size_t n = 0;
    const window *w = windows_of(&c->head, e->id, &n);
    for (size_t k = 0; k < n; k++, rounds++) {
      *lo = fmin(*lo, w[k].median_us);
      *hi = fmax(*hi, w[k].median_us);
    }
  }
  if (rounds < 2) *lo = *hi = NAN;
}

static json_t *bmf_row(tp_json_builder *jb, const comparison *c, const compare_row *row) {
  json_t *o = json_object();
  if (!o) {
    jb->failed = 1;
    return NULL;
  }
  double lo = NAN, hi = NAN;
  head_round_range(c, row, &lo, &hi);
  double median_ns = head_seconds(row) * 1e9;
  json_t *latency = bmf_metric(jb, median_ns > 0 ? median_ns : NAN, lo * 1e3, hi * 1e3);
  if (latency) tp_json_set(jb, o, "latency", latency);
  const measured *vs_stock = &row->m[M_VS_STOCK], *vs_bound = &row->m[M_VS_BOUND];
  json_t *speedup =
      bmf_metric(jb, 1.0 / vs_stock->head, 1.0 / vs_stock->head_hi, 1.0 / vs_stock->head_lo);
  if (row->subject && speedup) tp_json_set(jb, o, "speedup", speedup);
  else json_decref(speedup);
  json_t *bound = bmf_metric(jb, vs_bound->head, vs_bound->head_lo, vs_bound->head_hi);
  if (row->subject && bound) tp_json_set(jb, o, "dist_over_bound", bound);
  else json_decref(bound);
  return o;
}

/* A row's BMF benchmark name before any suffix: its label as a JSON key can
 * hold it (tp_json_str: text that is not UTF-8 reads '?' per byte), so that
 * labels differing only in such bytes count as one name. NULL when the row
 * has no BMF entry or there is no memory (*failed set). */
static json_t *bmf_label(const comparison *c, size_t i, int *failed) {
  if (!c->rows[i].shown || !both_ran(&c->rows[i])) return NULL;
  json_t *label = tp_json_str(row_entry(&c->rows[i])->label);
  if (!label) *failed = 1;
  return label;
}

/* Whether another BMF row before or after i has the same name. */
static int label_shared(const comparison *c, json_t *const *labels, size_t i) {
  for (size_t k = 0; k < c->n_rows; k++)
    if (k != i && labels[k] && !strcmp(json_string_value(labels[k]), json_string_value(labels[i])))
      return 1;
  return 0;
}

/* The BMF key of row i: its name, with " [config_key]" when another row
 * shares the name, and its config id too when even that is taken (keys
 * that differ only in bytes that are not UTF-8): no benchmark overwrites
 * another. NULL without memory. */
static json_t *bmf_key(const comparison *c, json_t *const *labels, size_t i, json_t *root) {
  const entry *e = row_entry(&c->rows[i]);
  char name[1024];
  if (label_shared(c, labels, i))
    snprintf(name, sizeof name, "%s [%s]", json_string_value(labels[i]), e->key);
  else snprintf(name, sizeof name, "%s", json_string_value(labels[i]));
  json_t *key = tp_json_str(name);
  if (key && json_object_get(root, json_string_value(key))) {
    snprintf(name, sizeof name, "%s (config %lld)", json_string_value(key), (long long)e->id);
    json_decref(key);
    key = tp_json_str(name);
  }
  return key;
}

static tp_rc write_bmf(FILE *out, const comparison *c) {
  tp_json_builder jb = {0};
  json_t *root = json_object();
  json_t **labels = calloc(c->n_rows ? c->n_rows : 1, sizeof(json_t *));
  if (!root || !labels) {
    json_decref(root);
    free(labels);
    return out_of_memory();
  }
  for (size_t i = 0; i < c->n_rows; i++) labels[i] = bmf_label(c, i, &jb.failed);
  for (size_t i = 0; !jb.failed && i < c->n_rows; i++) {
    if (!labels[i]) continue;
    json_t *key = bmf_key(c, labels, i, root);
    if (key) tp_json_set(&jb, root, json_string_value(key), bmf_row(&jb, c, &c->rows[i]));
    else jb.failed = 1;
    json_decref(key);
  }
  for (size_t i = 0; i < c->n_rows; i++) json_decref(labels[i]);
  free(labels);
  tp_rc rc = TP_OK;
  if (jb.failed) rc = TP_FAIL(TP_EOOM, "compare: building the BMF document failed");
  else if (json_dumpf(root, out, JSON_INDENT(2) | JSON_SORT_KEYS) != 0 || fputc('\n', out) == EOF)
    rc = TP_FAIL(TP_EIO, "compare: writing the BMF document failed");
  json_decref(root);
  return rc;
}

/* ---- entry point ------------------------------------------------------------------------------
 */

static tp_rc check_options(const tp_compare_options *opt) {
  if (!(opt->threshold >= 0 && opt->threshold < 1))
    return TP_FAIL(TP_EUSAGE, "compare: threshold %g is outside [0, 1)", opt->threshold);
  if (!(opt->alpha > 0 && opt->alpha < 1))
    return TP_FAIL(TP_EUSAGE, "compare: alpha %g is outside (0, 1)", opt->alpha);
  if (opt->top < 0) return TP_FAIL(TP_EUSAGE, "compare: top %d is negative", opt->top);
  return TP_OK;
}

tp_rc tp_compare_format_parse(const char *name, tp_compare_format *out) {
  static const struct {
    const char *name;
    tp_compare_format fmt;
  } names[] = {{"md", TP_COMPARE_MD},     {"markdown", TP_COMPARE_MD}, {"csv", TP_COMPARE_CSV},
               {"json", TP_COMPARE_JSON}, {"junit", TP_COMPARE_JUNIT}, {"bmf", TP_COMPARE_BMF}};
  for (size_t i = 0; name && i < sizeof names / sizeof *names; i++)
    if (!strcasecmp(name, names[i].name)) {
      *out = names[i].fmt;
      return TP_OK;
    }
  return TP_FAIL(TP_EUSAGE, "unknown format '%s' (md, csv, json, junit or bmf)", name ? name : "");
}

static tp_rc render(FILE *out, const comparison *c, tp_compare_format fmt) {
  switch (fmt) {
  case TP_COMPARE_MD: write_markdown(out, c); break;
  case TP_COMPARE_CSV: write_csv(out, c); break;
  case TP_COMPARE_JSON: TP_TRY(write_json(out, c)); break;
  case TP_COMPARE_JUNIT: write_junit(out, c); break;
  case TP_COMPARE_BMF: TP_TRY(write_bmf(out, c)); break;
  default: return TP_FAIL(TP_EUSAGE, "unknown report format %d", (int)fmt);
  }
  if (fflush(out) != 0 || ferror(out)) return TP_FAIL(TP_EIO, "compare: writing the output failed");
  return TP_OK;
}

/* Profiled programs (configurations of kind "profile") in both sides: their
 * step times and breakdowns side by side, after the table. */
static tp_rc write_profile_pairs(tp_store *store, const comparison *c, FILE *out) {
  for (size_t i = 0; i < c->n_rows; i++) {
    const compare_row *row = &c->rows[i];
    if (!row->base_latest || !row->head_latest || !row->base_latest->kind ||
        strcmp(row->base_latest->kind, "profile") != 0)
      continue;
    TP_TRY(tp_profile_compare_pair(store, row->base_latest->id, row->head_latest->id,
                                   row->head_latest->label, out));
  }
  return TP_OK;
}

/* Each used run's headline, by report's rule (tp_report_headline): compare shows it beside the
 * verdict, so the figures a reader sees for a run are the same wherever they look. A run
 * without one (a link probe) has none. */
static tp_rc load_headlines(tp_store *store, side *s) {
  for (size_t i = 0; i < s->n_runs; i++) {
    side_run *r = &s->runs[i];
    if (!r->used) continue;
    tp_rc rc = tp_report_headline(store, r->id, &r->headline);
    if (rc == TP_EUSAGE) tp_clear_error();
    else if (rc != TP_OK) return rc;
    r->has_headline = rc == TP_OK;
  }
  return TP_OK;
}

tp_rc tp_report_compare(tp_store *store, const char *base, const char *head,
                        const tp_compare_options *opt, tp_compare_format fmt, FILE *out,
                        tp_compare_summary *summary) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_report_compare: NULL argument");
  comparison c = {0};
  if (opt) c.opt = *opt;
  else
    c.opt = (tp_compare_options){.threshold = TP_COMPARE_DEFAULT_THRESHOLD,
                                 .alpha = TP_COMPARE_DEFAULT_ALPHA};
  tp_rc rc = check_options(&c.opt);
  if (rc == TP_OK) rc = load_side(store, base, &c.base);
  if (rc == TP_OK) rc = load_side(store, head, &c.head);
  if (rc == TP_OK) rc = pair_sides(&c);
  if (rc == TP_OK) rc = check_something_compared(&c);
  if (rc == TP_OK) {
    mark_used_runs(&c);
    rc = check_hardware(&c);
  }
  if (rc == TP_OK) rc = judge_all(&c);
  if (rc == TP_OK) rc = check_something_ran(&c);
  if (rc == TP_OK) rc = load_headlines(store, &c.base);
  if (rc == TP_OK) rc = load_headlines(store, &c.head);
  if (rc == TP_OK) {
    if (c.n_rows) qsort(c.rows, c.n_rows, sizeof *c.rows, compare_rows);
    rc = select_shown(&c);
  }
  if (rc == TP_OK) {
    rc = render(out, &c, fmt);
  }
  if (rc == TP_OK && fmt == TP_COMPARE_MD) rc = write_profile_pairs(store, &c, out);
  if (rc == TP_OK && summary) *summary = c.sum;
  free(c.rows);
  free_side(&c.base);
  free_side(&c.head);
  return rc;
}
