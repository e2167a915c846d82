/*
 * tp_compare.c — `tpbench compare` (see tp_compare.h): which configurations
 * got slower between two commits or runs, with a test that knows noise from
 * change.
 *
 * Like the throughput table it works in passes: resolve (each side's runs,
 * then per config key the configuration that stands for it), pair (merge the
 * two key-sorted lists), judge (per pair: the slowest rank's per-iteration
 * times, the ratio of medians, the Mann–Whitney test, the verdict), render
 * (markdown, CSV or JSON; none computes anything).
 *
 * Why Mann–Whitney: per-iteration GPU times are not normal (a long right
 * tail from clock and scheduling hiccups, occasional outliers many times the
 * median), so a t-test would be dominated by the tail. A rank test only asks
 * whether one side's iterations tend to be slower, which is the question.
 * The effect-size floor keeps a real but negligible shift (thousands of
 * samples make 0.5% significant) from failing a build.
 */
#include "report/tp_compare.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sqlite3.h>

#include "report/tp_report_util.h"

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "compare: out of memory"); }

/* ---- the Mann–Whitney U test ---------------------------------------------- */

typedef struct {
  double value;
  int first; /* 1: from sample a */
} ranked;

static int compare_ranked(const void *x, const void *y) {
  double a = ((const ranked *)x)->value, b = ((const ranked *)y)->value;
  return (a > b) - (a < b);
}

/* Sum of the mid-ranks of sample a, and sum over tie groups of t^3 - t. */
static void rank_sums(ranked *all, size_t n, double *rank_sum_a, double *tie_term) {
  *rank_sum_a = 0;
  *tie_term = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && all[j].value == all[i].value) j++;
    double t = (double)(j - i);
    double mid_rank = (double)(i + 1 + j) / 2.0; /* ranks i+1 .. j, averaged */
    for (size_t k = i; k < j; k++)
      if (all[k].first) *rank_sum_a += mid_rank;
    *tie_term += t * t * t - t;
    i = j;
  }
}

tp_rc tp_mann_whitney_test(const double *a, size_t na, const double *b, size_t nb,
                           tp_mann_whitney *out) {
  if (!a || !b || !out || na == 0 || nb == 0)
    return TP_FAIL(TP_EUSAGE, "Mann-Whitney test: both samples need values (%zu, %zu)", na, nb);
  size_t n = na + nb;
  ranked *all = malloc(n * sizeof *all);
  if (!all) return out_of_memory();
  for (size_t i = 0; i < n; i++) {
    all[i].value = i < na ? a[i] : b[i - na];
    all[i].first = i < na;
    if (isnan(all[i].value)) {
      free(all);
      return TP_FAIL(TP_EUSAGE, "Mann-Whitney test: sample value %zu is NaN", i);
    }
  }
  qsort(all, n, sizeof *all, compare_ranked);
  double rank_sum_a = 0, tie_term = 0;
  rank_sums(all, n, &rank_sum_a, &tie_term);
  free(all);
  double dna = (double)na, dnb = (double)nb, dn = (double)n;
  out->u = rank_sum_a - dna * (dna + 1) / 2;
  out->mean = dna * dnb / 2;
  double var = dna * dnb / 12.0 * ((dn + 1) - (n > 1 ? tie_term / (dn * (dn - 1)) : 0));
  out->sigma = var > 0 ? sqrt(var) : 0;
  double diff = out->u - out->mean;
  double corrected = fabs(diff) <= 0.5 ? 0 : diff - copysign(0.5, diff);
  out->z = out->sigma > 0 ? corrected / out->sigma : 0;
  out->p = out->sigma > 0 ? erfc(fabs(out->z) / sqrt(2.0)) : 1.0;
  return TP_OK;
}

/* ---- the sides --------------------------------------------------------------- */

/* One run of a side, as the header shows it. */
typedef struct {
  int64_t id;
  char *commit, *host, *gpu_name, *driver, *cuda, *nccl, *cublas, *started_at;
  int64_t gpu_count, dirty;
  int used; /* a configuration of the comparison comes from this run */
} side_run;

/* The configuration that stands for one key on one side. */
typedef struct {
  int64_t config_id, run_id;
  char *key, *status, *reason;
  char label[256];
  double result_median_us; /* results.median_us; NaN without a result */
} side_config;

typedef struct {
  const char *spec; /* what the user wrote */
  int64_t run_id;   /* "run:N": N; otherwise 0 */
  char *commit;     /* the full commit a prefix names; NULL for "run:N" */
  side_run *runs;
  size_t n_runs;
  side_config *configs; /* sorted by key */
  size_t n_configs;
} side;

static char *dup_text(sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  return t ? strdup((const char *)t) : NULL;
}

static void free_side(side *s) {
  for (size_t i = 0; i < s->n_runs; i++) {
    side_run *r = &s->runs[i];
    char *texts[] = {r->commit, r->host, r->gpu_name, r->driver,
                     r->cuda,   r->nccl, r->cublas,   r->started_at};
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) free(texts[k]);
  }
  for (size_t i = 0; i < s->n_configs; i++) {
    free(s->configs[i].key);
    free(s->configs[i].status);
    free(s->configs[i].reason);
  }
  free(s->runs);
  free(s->configs);
  free(s->commit);
}

static tp_rc prepare(tp_store *store, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v2(tp_store_db(store), sql, -1, st, NULL) != SQLITE_OK) {
    *st = NULL;
    return TP_FAIL(TP_ESQLITE, "%s: compare: %s", tp_store_path(store),
                   sqlite3_errmsg(tp_store_db(store)));
  }
  return TP_OK;
}

static tp_rc sql_error(tp_store *store, const char *what) {
  return TP_FAIL(TP_ESQLITE, "%s: compare: %s: %s", tp_store_path(store), what,
                 sqlite3_errmsg(tp_store_db(store)));
}

/* "run:N" into s->run_id; anything else is a commit (prefix). */
static tp_rc parse_spec(const char *spec, side *s) {
  if (!spec || !*spec) return TP_FAIL(TP_EUSAGE, "compare: an empty commit or run");
  s->spec = spec;
  if (strncmp(spec, "run:", 4) != 0) return TP_OK;
  const char *digits = spec + 4;
  char *end = NULL;
  long long id = isdigit((unsigned char)*digits) ? strtoll(digits, &end, 10) : 0;
  if (!end || *end || id <= 0)
    return TP_FAIL(TP_EUSAGE, "compare: '%s' is not run:N with a run id N >= 1", spec);
  s->run_id = id;
  return TP_OK;
}

/* The one commit a prefix names (ambiguity is an error, as in git). */
static tp_rc resolve_commit(tp_store *store, side *s) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store,
                 "SELECT DISTINCT commit_sha FROM runs WHERE commit_sha IS NOT NULL AND "
                 "lower(substr(commit_sha, 1, length(?1))) = lower(?1) ORDER BY commit_sha",
                 &st));
  tp_rc rc = TP_OK;
  int step = sqlite3_bind_text(st, 1, s->spec, -1, SQLITE_STATIC);
  while (rc == TP_OK && step == SQLITE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    if (s->commit) {
      rc = TP_FAIL(TP_EUSAGE, "%s: commit prefix %s is ambiguous (%s, %s, ...)",
                   tp_store_path(store), s->spec, s->commit, sqlite3_column_text(st, 0));
      break;
    }
    if (!(s->commit = dup_text(st, 0))) rc = out_of_memory();
    step = SQLITE_OK;
  }
  if (rc == TP_OK && step != SQLITE_DONE) rc = sql_error(store, "looking up the commit");
  if (rc == TP_OK && !s->commit)
    rc = TP_FAIL(TP_EUSAGE, "%s: no run of a commit starting with '%s' (use run:N for a run id)",
                 tp_store_path(store), s->spec);
  sqlite3_finalize(st);
  return rc;
}

/* Binds the side's selector as ?1 (run id, 0 for a commit) and ?2 (commit). */
static int bind_side(sqlite3_stmt *st, const side *s) {
  int rc = sqlite3_bind_int64(st, 1, s->run_id);
  if (rc != SQLITE_OK) return rc;
  return s->commit ? sqlite3_bind_text(st, 2, s->commit, -1, SQLITE_STATIC)
                   : sqlite3_bind_null(st, 2);
}

#define SIDE_SQL "((?1 > 0 AND r.id = ?1) OR (?1 = 0 AND r.commit_sha = ?2))"

static tp_rc grow(void **items, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return TP_OK;
  size_t grown_cap = *cap ? 2 * *cap : 16;
  void *grown = realloc(*items, grown_cap * size);
  if (!grown) return out_of_memory();
  *items = grown;
  *cap = grown_cap;
  return TP_OK;
}

static tp_rc load_runs(tp_store *store, side *s) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store,
                 "SELECT r.id, commit_sha, host, gpu_name, driver_version, cuda_version, "
                 "nccl_version, cublas_version, started_at, coalesce(gpu_count, -1), dirty "
                 "FROM runs r WHERE " SIDE_SQL " ORDER BY started_at, r.id",
                 &st));
  tp_rc rc = TP_OK;
  size_t cap = 0;
  int step = bind_side(st, s);
  while (rc == TP_OK && step == SQLITE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    rc = grow((void **)&s->runs, &cap, s->n_runs, sizeof *s->runs);
    if (rc != TP_OK) break;
    side_run *r = &s->runs[s->n_runs++];
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    char **texts[] = {&r->commit, &r->host, &r->gpu_name, &r->driver,
                      &r->cuda,   &r->nccl, &r->cublas,   &r->started_at};
    for (int k = 0; k < (int)(sizeof texts / sizeof *texts); k++) *texts[k] = dup_text(st, k + 1);
    r->gpu_count = sqlite3_column_int64(st, 9);
    r->dirty = sqlite3_column_int64(st, 10);
    step = SQLITE_OK;
  }
  if (rc == TP_OK && step != SQLITE_DONE) rc = sql_error(store, "reading runs");
  if (rc == TP_OK && s->n_runs == 0)
    rc = TP_FAIL(TP_EUSAGE, "%s: there is no run %lld", tp_store_path(store), (long long)s->run_id);
  sqlite3_finalize(st);
  return rc;
}

/* Per key, rows come ordered best first: ok before not, then the latest run;
 * the first row of each key stands for it. */
static const char configs_sql[] =
    "SELECT c.id, c.run_id, c.config_key, c.status, c.reason, c.kind, c.backend, c.model, "
    "c.layer, c.proj, c.tokens, c.dtype, c.pass, c.tp, c.schedule, c.chunks, res.median_us "
    "FROM configs c JOIN runs r ON r.id = c.run_id LEFT JOIN results res ON res.config_id = c.id "
    "WHERE " SIDE_SQL " ORDER BY c.config_key, c.status = 'ok' DESC, r.started_at DESC, c.id DESC";

static tp_rc add_config(sqlite3_stmt *st, side *s, size_t *cap) {
  TP_TRY(grow((void **)&s->configs, cap, s->n_configs, sizeof *s->configs));
  side_config *c = &s->configs[s->n_configs++];
  memset(c, 0, sizeof *c);
  c->config_id = sqlite3_column_int64(st, 0);
  c->run_id = sqlite3_column_int64(st, 1);
  c->key = dup_text(st, 2);
  c->status = dup_text(st, 3);
  c->reason = dup_text(st, 4);
  tp_config_label(
      c->label, sizeof c->label, (const char *)sqlite3_column_text(st, 5),
      (const char *)sqlite3_column_text(st, 6), (const char *)sqlite3_column_text(st, 7),
      (const char *)sqlite3_column_text(st, 8), (const char *)sqlite3_column_text(st, 9),
      sqlite3_column_int64(st, 10), (const char *)sqlite3_column_text(st, 11),
      (const char *)sqlite3_column_text(st, 12), sqlite3_column_int64(st, 13),
      (const char *)sqlite3_column_text(st, 14), sqlite3_column_int64(st, 15));
  c->result_median_us =
      sqlite3_column_type(st, 16) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 16);
  return c->key && c->status ? TP_OK : out_of_memory();
}

static tp_rc load_configs(tp_store *store, side *s) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store, configs_sql, &st));
  tp_rc rc = TP_OK;
  size_t cap = 0;
  int step = bind_side(st, s);
  while (rc == TP_OK && step == SQLITE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    const char *key = (const char *)sqlite3_column_text(st, 2);
    int repeat = s->n_configs > 0 && key && !strcmp(s->configs[s->n_configs - 1].key, key);
    if (!repeat) rc = add_config(st, s, &cap);
    step = SQLITE_OK;
  }
  if (rc == TP_OK && step != SQLITE_DONE) rc = sql_error(store, "reading configurations");
  sqlite3_finalize(st);
  return rc;
}

static tp_rc load_side(tp_store *store, const char *spec, side *s) {
  TP_TRY(parse_spec(spec, s));
  if (s->run_id == 0) TP_TRY(resolve_commit(store, s));
  TP_TRY(load_runs(store, s));
  return load_configs(store, s);
}

/* The run that describes a side: its latest run that supplied a compared
 * configuration, or its latest run when none did. */
static const side_run *representative(const side *s) {
  for (size_t i = s->n_runs; i-- > 0;)
    if (s->runs[i].used) return &s->runs[i];
  return &s->runs[s->n_runs - 1];
}

/* ---- pairing and judging ------------------------------------------------------ */

typedef enum { V_REGRESSED, V_IMPROVED, V_NEW, V_MISSING, V_UNCHANGED } verdict;
static const char *const verdict_names[] = {"regressed", "improved", "new", "missing", "unchanged"};

typedef struct {
  const side_config *base, *head; /* either may be NULL */
  verdict v;
  double base_median_us, head_median_us, ratio;
  size_t n_base, n_head;
  int tested;
  tp_mann_whitney mw;
  char note[400];
} compare_row;

static int ran(const side_config *c) { return c && !strcmp(c->status, "ok"); }

/* A side's median of per-iteration times (*n of them); the stored median
 * when there are no samples. */
static tp_rc side_times(tp_store *store, const side_config *c, double **times, size_t *n,
                        double *median) {
  TP_TRY(tp_store_iteration_times(store, c->config_id, times, n));
  if (*n == 0) {
    *median = c->result_median_us;
    return TP_OK;
  }
  double *sorted = malloc(*n * sizeof *sorted);
  if (!sorted) return out_of_memory();
  memcpy(sorted, *times, *n * sizeof *sorted);
  *median = tp_median(sorted, *n);
  free(sorted);
  return TP_OK;
}

/* The test's direction must agree with the medians': z > 0 says the head's
 * iterations tend to be slower. */
static verdict judge(const compare_row *row, const tp_compare_options *opt) {
  if (!row->tested || !(row->mw.p < opt->alpha)) return V_UNCHANGED;
  if (row->ratio >= 1.0 + opt->threshold && row->mw.z > 0) return V_REGRESSED;
  if (row->ratio <= 1.0 - opt->threshold && row->mw.z < 0) return V_IMPROVED;
  return V_UNCHANGED;
}

static tp_rc compare_pair(tp_store *store, compare_row *row, const tp_compare_options *opt) {
  double *a = NULL, *b = NULL;
  tp_rc rc = side_times(store, row->base, &a, &row->n_base, &row->base_median_us);
  if (rc == TP_OK) rc = side_times(store, row->head, &b, &row->n_head, &row->head_median_us);
  row->ratio =
      (isfinite(row->base_median_us) && isfinite(row->head_median_us) && row->base_median_us > 0)
          ? row->head_median_us / row->base_median_us
          : NAN;
  if (rc == TP_OK && row->n_base > 0 && row->n_head > 0) {
    /* U of the head: the pairs where the head's iteration was the slower. */
    rc = tp_mann_whitney_test(b, row->n_head, a, row->n_base, &row->mw);
    row->tested = rc == TP_OK;
  } else if (rc == TP_OK) {
    snprintf(row->note, sizeof row->note, "no per-iteration samples on the %s side: not tested",
             row->n_base == 0 ? "base" : "head");
  }
  free(a);
  free(b);
  if (rc == TP_OK) row->v = judge(row, opt);
  return rc;
}

/* Verdicts without a test: one side missing or not run. */
static void judge_unpaired(compare_row *row) {
  const side_config *b = row->base, *h = row->head;
  if (ran(b) && ran(h)) return;
  if (ran(b)) {
    row->v = V_MISSING;
    if (h)
      snprintf(row->note, sizeof row->note, "head: %s: %s", h->status,
               h->reason ? h->reason : "no reason recorded");
    else snprintf(row->note, sizeof row->note, "not measured in head");
  } else if (ran(h)) {
    row->v = V_NEW;
    if (b)
      snprintf(row->note, sizeof row->note, "base: %s: %s", b->status,
               b->reason ? b->reason : "no reason recorded");
    else snprintf(row->note, sizeof row->note, "not measured in base");
  } else {
    /* Neither side ran it (rejected both times, say): nothing changed. */
    row->v = b && h ? V_UNCHANGED : (b ? V_MISSING : V_NEW);
    const side_config *c = h ? h : b;
    snprintf(row->note, sizeof row->note, "did not run: %s: %s", c->status,
             c->reason ? c->reason : "no reason recorded");
  }
}

typedef struct {
  side base, head;
  compare_row *rows;
  size_t n_rows;
  tp_compare_options opt;
  tp_compare_summary sum;
} comparison;

static tp_rc add_row(comparison *c, size_t *cap, const side_config *b, const side_config *h) {
  TP_TRY(grow((void **)&c->rows, cap, c->n_rows, sizeof *c->rows));
  compare_row *row = &c->rows[c->n_rows++];
  memset(row, 0, sizeof *row);
  row->base = b;
  row->head = h;
  row->base_median_us = row->head_median_us = row->ratio = NAN;
  return TP_OK;
}

/* Merges the two key-sorted lists (SQLite's BINARY order is strcmp's). */
static tp_rc pair_sides(comparison *c) {
  size_t i = 0, j = 0, cap = 0;
  const side *b = &c->base, *h = &c->head;
  while (i < b->n_configs || j < h->n_configs) {
    int order = i == b->n_configs   ? 1
                : j == h->n_configs ? -1
                                    : strcmp(b->configs[i].key, h->configs[j].key);
    const side_config *bc = order <= 0 ? &b->configs[i++] : NULL;
    const side_config *hc = order >= 0 ? &h->configs[j++] : NULL;
    TP_TRY(add_row(c, &cap, bc, hc));
  }
  return TP_OK;
}

static void mark_run(side *s, int64_t run_id) {
  for (size_t k = 0; k < s->n_runs; k++)
    if (s->runs[k].id == run_id) s->runs[k].used = 1;
}

/* Which runs supplied the configurations measured on both sides: only they
 * describe a side (a commit's `tpbench link` run, whose keys no other side
 * has, says nothing about the op timings being compared). Without any such
 * pair, every run that supplied a configuration. */
static void mark_used_runs(comparison *c) {
  int paired = 0;
  for (size_t i = 0; i < c->n_rows; i++) {
    const compare_row *row = &c->rows[i];
    if (!row->base || !row->head) continue;
    paired = 1;
    mark_run(&c->base, row->base->run_id);
    mark_run(&c->head, row->head->run_id);
  }
  for (size_t i = 0; !paired && i < c->n_rows; i++) {
    if (c->rows[i].base) mark_run(&c->base, c->rows[i].base->run_id);
    if (c->rows[i].head) mark_run(&c->head, c->rows[i].head->run_id);
  }
}

static tp_rc judge_all(tp_store *store, comparison *c) {
  for (size_t i = 0; i < c->n_rows; i++) {
    compare_row *row = &c->rows[i];
    if (ran(row->base) && ran(row->head)) TP_TRY(compare_pair(store, row, &c->opt));
    else judge_unpaired(row);
    int *counts[] = {&c->sum.regressed, &c->sum.improved, &c->sum.added, &c->sum.missing,
                     &c->sum.unchanged};
    (*counts[row->v])++;
  }
  return TP_OK;
}

/* Regressed worst first, then improved best first, new, missing, unchanged
 * (each in key order). */
static int compare_rows(const void *x, const void *y) {
  const compare_row *a = x, *b = y;
  if (a->v != b->v) return (int)a->v - (int)b->v;
  if (a->v == V_REGRESSED && a->ratio != b->ratio) return a->ratio < b->ratio ? 1 : -1;
  if (a->v == V_IMPROVED && a->ratio != b->ratio) return a->ratio < b->ratio ? -1 : 1;
  const side_config *ca = a->head ? a->head : a->base, *cb = b->head ? b->head : b->base;
  return strcmp(ca->key, cb->key);
}

/* ---- rendering: shared -------------------------------------------------------- */

static const side_config *any_config(const compare_row *row) {
  return row->head ? row->head : row->base;
}

static const char *or_q(const char *s) { return s ? s : "?"; }

static int same_text(const char *a, const char *b) {
  return (!a && !b) || (a && b && !strcmp(a, b));
}

/* ---- markdown ----------------------------------------------------------------- */

static void md_side(FILE *out, const char *name, const side *s) {
  fprintf(out, "- **%s** ", name);
  tp_md_code(out, s->spec);
  const side_run *r = representative(s);
  size_t used = 0;
  for (size_t i = 0; i < s->n_runs; i++) used += (size_t)s->runs[i].used;
  if (used <= 1) {
    fprintf(out, ": run %lld", (long long)r->id);
  } else {
    fprintf(out, ": runs");
    for (size_t i = 0, k = 0; i < s->n_runs; i++)
      if (s->runs[i].used) fprintf(out, "%s %lld", k++ ? "," : "", (long long)s->runs[i].id);
    fprintf(out, " (per configuration, the latest run that ran it)");
  }
  if (used > 0 && used < s->n_runs)
    fprintf(out, " [%zu more run%s of the commit had nothing to compare]", s->n_runs - used,
            s->n_runs - used == 1 ? "" : "s");
  fputs(", commit ", out);
  tp_md_code(out, r->commit ? r->commit : "unknown");
  fprintf(out, "%s, %s, %s: %s × %lld, CUDA %s, NCCL %s, cuBLAS %s\n",
          r->dirty == 1 ? " (dirty tree)" : "", or_q(r->started_at), or_q(r->host),
          or_q(r->gpu_name), (long long)r->gpu_count, or_q(r->cuda), or_q(r->nccl),
          or_q(r->cublas));
}

/* What makes the two sides not like for like, said before the numbers
 * (between the runs that describe them). */
static void md_warnings(FILE *out, const comparison *c) {
  const side_run *b = representative(&c->base), *h = representative(&c->head);
  if (!same_text(b->gpu_name, h->gpu_name) || b->gpu_count != h->gpu_count)
    fprintf(out, "\n> **Warning**: different GPUs (%s × %lld vs %s × %lld): not like for like.\n",
            or_q(b->gpu_name), (long long)b->gpu_count, or_q(h->gpu_name), (long long)h->gpu_count);
  if (!same_text(b->host, h->host))
    fprintf(out, "\n> **Note**: different hosts (%s vs %s).\n", or_q(b->host), or_q(h->host));
  if (!same_text(b->driver, h->driver) || !same_text(b->cuda, h->cuda) ||
      !same_text(b->nccl, h->nccl) || !same_text(b->cublas, h->cublas))
    fputs("\n> **Note**: driver or library versions differ between the sides.\n", out);
  if (b->dirty == 1 || h->dirty == 1)
    fputs("\n> **Note**: a side was built from a tree with uncommitted changes.\n", out);
}

static void md_change(FILE *out, double ratio) {
  char buf[64];
  if (isfinite(ratio)) snprintf(buf, sizeof buf, "%+.1f%%", (ratio - 1.0) * 100.0);
  else snprintf(buf, sizeof buf, "-");
  tp_md_cell(out, buf);
}

static void md_p(FILE *out, const compare_row *row) {
  char buf[64];
  if (!row->tested) snprintf(buf, sizeof buf, "-");
  else if (row->mw.p < 1e-4) snprintf(buf, sizeof buf, "<0.0001");
  else snprintf(buf, sizeof buf, "%.4f", row->mw.p);
  tp_md_cell(out, buf);
}

static void md_timing_table(FILE *out, const comparison *c, verdict v) {
  fputs("\n| configuration | base ms | head ms | head/base | change | p | iterations |\n"
        "|---|---:|---:|---:|---:|---:|---:|\n",
        out);
  for (size_t i = 0; i < c->n_rows; i++) {
    const compare_row *row = &c->rows[i];
    if (row->v != v) continue;
    char buf[sizeof row->note + sizeof row->base->label + 8];
    snprintf(buf, sizeof buf, "%s%s%s", any_config(row)->label, row->note[0] ? " — " : "",
             row->note);
    tp_md_cell(out, buf);
    tp_md_num(out, row->base_median_us / 1000.0, 3);
    tp_md_num(out, row->head_median_us / 1000.0, 3);
    tp_md_num(out, row->ratio, 3);
    md_change(out, row->ratio);
    md_p(out, row);
    snprintf(buf, sizeof buf, "%zu / %zu", row->n_base, row->n_head);
    tp_md_cell(out, buf);
    fputs("|\n", out);
  }
}

static void md_note_table(FILE *out, const comparison *c, verdict v) {
  fputs("\n| configuration | note |\n|---|---|\n", out);
  for (size_t i = 0; i < c->n_rows; i++) {
    const compare_row *row = &c->rows[i];
    if (row->v != v) continue;
    tp_md_cell(out, any_config(row)->label);
    tp_md_cell(out, row->note);
    fputs("|\n", out);
  }
}

static void md_section(FILE *out, const comparison *c, verdict v, int count, const char *title) {
  if (count == 0) return;
  if (v == V_UNCHANGED) fprintf(out, "\n<details><summary>%s (%d)</summary>\n", title, count);
  else fprintf(out, "\n### %s (%d)\n", title, count);
  if (v == V_NEW || v == V_MISSING) md_note_table(out, c, v);
  else md_timing_table(out, c, v);
  if (v == V_UNCHANGED) fputs("\n</details>\n", out);
}

static void write_markdown(FILE *out, const comparison *c) {
  const tp_compare_summary *s = &c->sum;
  fputs("## tpbench compare: ", out);
  tp_md_code(out, c->base.spec);
  fputs(" → ", out);
  tp_md_code(out, c->head.spec);
  fprintf(out,
          "\n\n**%s**: %d regressed, %d improved, %d unchanged, %d new, %d missing.\n\n"
          "A configuration regressed (or improved) when its median per-iteration time (slowest "
          "rank) changed by at least %.1f%% and a two-sided Mann–Whitney U test of the "
          "iterations gives p < %g. head/base > 1 is slower.\n\n",
          s->regressed ? "Regression" : "No regression", s->regressed, s->improved, s->unchanged,
          s->added, s->missing, c->opt.threshold * 100.0, c->opt.alpha);
  md_side(out, "base", &c->base);
  md_side(out, "head", &c->head);
  md_warnings(out, c);
  md_section(out, c, V_REGRESSED, s->regressed, "Regressed");
  md_section(out, c, V_IMPROVED, s->improved, "Improved");
  md_section(out, c, V_NEW, s->added, "New (in head only)");
  md_section(out, c, V_MISSING, s->missing, "Missing (in base, not run in head)");
  md_section(out, c, V_UNCHANGED, s->unchanged, "Unchanged");
}

/* ---- CSV ------------------------------------------------------------------------- */

static void write_csv(FILE *out, const comparison *c) {
  static const char *const columns[] = {"verdict",
                                        "config_key",
                                        "label",
                                        "base_config_id",
                                        "head_config_id",
                                        "base_median_us",
                                        "head_median_us",
                                        "ratio",
                                        "change_pct",
                                        "p_value",
                                        "u",
                                        "z",
                                        "n_base",
                                        "n_head",
                                        "note"};
  for (size_t i = 0; i < sizeof columns / sizeof *columns; i++)
    tp_csv_field(out, columns[i], i == 0);
  fputs("\r\n", out);
  for (size_t i = 0; i < c->n_rows; i++) {
    const compare_row *row = &c->rows[i];
    tp_csv_field(out, verdict_names[row->v], 1);
    tp_csv_field(out, any_config(row)->key, 0);
    tp_csv_field(out, any_config(row)->label, 0);
    if (row->base) tp_csv_int(out, row->base->config_id);
    else tp_csv_field(out, "", 0);
    if (row->head) tp_csv_int(out, row->head->config_id);
    else tp_csv_field(out, "", 0);
    tp_csv_num(out, row->base_median_us, 3);
    tp_csv_num(out, row->head_median_us, 3);
    tp_csv_num(out, row->ratio, 5);
    tp_csv_num(out, (row->ratio - 1.0) * 100.0, 2);
    char buf[64] = "";
    if (row->tested) snprintf(buf, sizeof buf, "%.6g", row->mw.p);
    tp_csv_field(out, buf, 0);
    tp_csv_num(out, row->tested ? row->mw.u : NAN, 1);
    tp_csv_num(out, row->tested ? row->mw.z : NAN, 4);
    tp_csv_int(out, (int64_t)row->n_base);
    tp_csv_int(out, (int64_t)row->n_head);
    tp_csv_field(out, row->note, 0);
    fputs("\r\n", out);
  }
}

/* ---- JSON ----------------------------------------------------------------------------- */

static json_t *json_side(tp_json_builder *jb, const side *s) {
  json_t *o = json_object(), *runs = json_array();
  if (!o || !runs) {
    json_decref(o);
    json_decref(runs);
    return NULL;
  }
  tp_json_set(jb, o, "spec", tp_json_str(s->spec));
  tp_json_set(jb, o, "commit", tp_json_str(representative(s)->commit));
  for (size_t i = 0; i < s->n_runs; i++) {
    const side_run *r = &s->runs[i];
    json_t *run = json_object();
    if (run) {
      tp_json_set(jb, run, "id", json_integer(r->id));
      tp_json_set(jb, run, "commit", tp_json_str(r->commit));
      tp_json_set(jb, run, "dirty", json_boolean(r->dirty == 1));
      tp_json_set(jb, run, "started_at", tp_json_str(r->started_at));
      tp_json_set(jb, run, "host", tp_json_str(r->host));
      tp_json_set(jb, run, "gpu_name", tp_json_str(r->gpu_name));
      tp_json_set(jb, run, "gpu_count", json_integer(r->gpu_count));
      tp_json_set(jb, run, "used", json_boolean(r->used));
    }
    tp_json_append(jb, runs, run);
  }
  tp_json_set(jb, o, "runs", runs);
  return o;
}

static json_t *json_row(tp_json_builder *jb, const compare_row *row) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "verdict", json_string(verdict_names[row->v]));
  tp_json_set(jb, o, "config_key", tp_json_str(any_config(row)->key));
  tp_json_set(jb, o, "label", tp_json_str(any_config(row)->label));
  tp_json_set(jb, o, "base_config_id",
              row->base ? json_integer(row->base->config_id) : json_null());
  tp_json_set(jb, o, "head_config_id",
              row->head ? json_integer(row->head->config_id) : json_null());
  tp_json_set(jb, o, "base_median_us", tp_json_real(row->base_median_us));
  tp_json_set(jb, o, "head_median_us", tp_json_real(row->head_median_us));
  tp_json_set(jb, o, "ratio", tp_json_real(row->ratio));
  tp_json_set(jb, o, "p_value", row->tested ? tp_json_real(row->mw.p) : json_null());
  tp_json_set(jb, o, "u", row->tested ? tp_json_real(row->mw.u) : json_null());
  tp_json_set(jb, o, "z", row->tested ? tp_json_real(row->mw.z) : json_null());
  tp_json_set(jb, o, "n_base", json_integer((json_int_t)row->n_base));
  tp_json_set(jb, o, "n_head", json_integer((json_int_t)row->n_head));
  tp_json_set(jb, o, "note", row->note[0] ? tp_json_str(row->note) : json_null());
  return o;
}

static json_t *json_summary(tp_json_builder *jb, const comparison *c) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "regressed", json_integer(c->sum.regressed));
  tp_json_set(jb, o, "improved", json_integer(c->sum.improved));
  tp_json_set(jb, o, "unchanged", json_integer(c->sum.unchanged));
  tp_json_set(jb, o, "new", json_integer(c->sum.added));
  tp_json_set(jb, o, "missing", json_integer(c->sum.missing));
  return o;
}

static json_t *json_options(tp_json_builder *jb, const comparison *c) {
  json_t *o = json_object();
  if (!o) return NULL;
  tp_json_set(jb, o, "test",
              json_string("mann-whitney-u, two-sided, normal approximation, "
                          "tie and continuity corrected"));
  tp_json_set(jb, o, "samples", json_string("slowest rank per iteration"));
  tp_json_set(jb, o, "threshold", json_real(c->opt.threshold));
  tp_json_set(jb, o, "alpha", json_real(c->opt.alpha));
  return o;
}

static tp_rc write_json(FILE *out, const comparison *c) {
  tp_json_builder jb = {0};
  json_t *root = json_object(), *rows = json_array();
  if (!root || !rows) jb.failed = 1;
  for (size_t i = 0; rows && i < c->n_rows; i++)
    tp_json_append(&jb, rows, json_row(&jb, &c->rows[i]));
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

/* ---- entry point ------------------------------------------------------------------------- */

static tp_rc check_options(const tp_compare_options *opt) {
  if (!(opt->threshold >= 0 && opt->threshold < 1))
    return TP_FAIL(TP_EUSAGE, "compare: threshold %g is outside [0, 1)", opt->threshold);
  if (!(opt->alpha > 0 && opt->alpha < 1))
    return TP_FAIL(TP_EUSAGE, "compare: alpha %g is outside (0, 1)", opt->alpha);
  return TP_OK;
}

static tp_rc render(FILE *out, const comparison *c, tp_report_format fmt) {
  switch (fmt) {
  case TP_FMT_MARKDOWN: write_markdown(out, c); break;
  case TP_FMT_CSV: write_csv(out, c); break;
  case TP_FMT_JSON: TP_TRY(write_json(out, c)); break;
  default: return TP_FAIL(TP_EUSAGE, "unknown report format %d", (int)fmt);
  }
  if (fflush(out) != 0 || ferror(out)) return TP_FAIL(TP_EIO, "compare: writing the output failed");
  return TP_OK;
}

tp_rc tp_report_compare(tp_store *store, const char *base, const char *head,
                        const tp_compare_options *opt, tp_report_format fmt, FILE *out,
                        tp_compare_summary *summary) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_report_compare: NULL argument");
  comparison c = {0};
  c.opt = opt ? *opt : (tp_compare_options){TP_COMPARE_DEFAULT_THRESHOLD, TP_COMPARE_DEFAULT_ALPHA};
  tp_rc rc = check_options(&c.opt);
  if (rc == TP_OK) rc = load_side(store, base, &c.base);
  if (rc == TP_OK) rc = load_side(store, head, &c.head);
  if (rc == TP_OK) rc = pair_sides(&c);
  if (rc == TP_OK) mark_used_runs(&c);
  if (rc == TP_OK) rc = judge_all(store, &c);
  if (rc == TP_OK) {
    qsort(c.rows, c.n_rows, sizeof *c.rows, compare_rows);
    rc = render(out, &c, fmt);
  }
  if (rc == TP_OK && summary) *summary = c.sum;
  free(c.rows);
  free_side(&c.base);
  free_side(&c.head);
  return rc;
}
