/*
 * tp_drift.c — the drift table (see tp_drift.h): a run's drift
 * configurations and their steps loaded in one pass, each compared step by
 * step with the stock reference, then written as markdown or CSV.
 */
#include "report/tp_drift.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/tp_array.h"
#include "report/tp_report_util.h"

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "drift: out of memory"); }

static tp_rc sql_fail(tp_store *store, const char *what) {
  return TP_FAIL(TP_ESQLITE, "%s: %s: %s", tp_store_path(store), what,
                 sqlite3_errmsg(tp_store_db(store)));
}

static tp_rc prepare(tp_store *store, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v2(tp_store_db(store), sql, -1, st, NULL) != SQLITE_OK)
    return sql_fail(store, "preparing the drift query");
  return TP_OK;
}

static tp_rc dup_text(sqlite3_stmt *st, int col, char **out) {
  const unsigned char *text = sqlite3_column_text(st, col);
  *out = text ? strdup((const char *)text) : NULL;
  return !text || *out ? TP_OK : out_of_memory();
}

static double column_real_or_nan(sqlite3_stmt *st, int col) {
  return sqlite3_column_type(st, col) == SQLITE_NULL ? NAN : sqlite3_column_double(st, col);
}

/* ---- loading ----------------------------------------------------------------------------- */

/* The run meant: run_id itself, or the latest one with drift configurations. */
static tp_rc resolve_run(tp_store *store, int64_t run_id, int64_t *out) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store,
                 "SELECT (SELECT count(*) FROM runs WHERE id = ?1), (SELECT count(*) FROM configs "
                 "WHERE run_id = ?1 AND kind = 'drift'), (SELECT max(run_id) FROM configs WHERE "
                 "kind = 'drift')",
                 &st));
  sqlite3_bind_int64(st, 1, run_id);
  tp_rc rc = TP_OK;
  if (sqlite3_step(st) != SQLITE_ROW) rc = sql_fail(store, "finding the drift run");
  else if (run_id == 0 && sqlite3_column_type(st, 2) == SQLITE_NULL)
    rc =
        TP_FAIL(TP_EUSAGE, "%s has no drift run (`tpbench drift` makes one)", tp_store_path(store));
  else if (run_id == 0) *out = sqlite3_column_int64(st, 2);
  else if (sqlite3_column_int64(st, 0) == 0)
    rc = TP_FAIL(TP_EUSAGE, "%s has no run %lld", tp_store_path(store), (long long)run_id);
  else if (sqlite3_column_int64(st, 1) == 0)
    rc = TP_FAIL(TP_EUSAGE, "run %lld has no drift configurations (`tpbench drift` writes them)",
                 (long long)run_id);
  else *out = run_id;
  sqlite3_finalize(st);
  return rc;
}

static tp_rc load_command_line(tp_store *store, tp_drift_run *run) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store, "SELECT command_line FROM runs WHERE id = ?", &st));
  sqlite3_bind_int64(st, 1, run->run_id);
  tp_rc rc = sqlite3_step(st) == SQLITE_ROW ? dup_text(st, 0, &run->command_line)
                                            : sql_fail(store, "reading the run");
  sqlite3_finalize(st);
  return rc;
}

static tp_rc load_steps(tp_store *store, tp_drift_series *s) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store,
                 "SELECT step, loss, grad_norm FROM drift_steps WHERE config_id = ? ORDER BY step",
                 &st));
  sqlite3_bind_int64(st, 1, s->config_id);
  size_t cap_step = 0, cap_loss = 0, cap_norm = 0;
  tp_rc rc = TP_OK;
  int step;
  while (rc == TP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    const size_t n = (size_t)s->n_steps;
    int *steps = tp_grow_array(s->step, &cap_step, n, sizeof *s->step);
    if (steps) s->step = steps;
    double *loss = steps ? tp_grow_array(s->loss, &cap_loss, n, sizeof *s->loss) : NULL;
    if (loss) s->loss = loss;
    double *norm = loss ? tp_grow_array(s->grad_norm, &cap_norm, n, sizeof *s->grad_norm) : NULL;
    if (!norm) {
      rc = out_of_memory();
      break;
    }
    s->grad_norm = norm;
    const sqlite3_int64 number = sqlite3_column_int64(st, 0);
    if (number < 0 || number > INT_MAX) { /* read as int, it would alias another step */
      rc = TP_FAIL(TP_EFOREIGN,
                   "%s: configuration %lld has drift step %lld: not a step tpbench writes (0 to "
                   "%d)",
                   tp_store_path(store), (long long)s->config_id, (long long)number, INT_MAX);
      break;
    }
    s->step[n] = (int)number;
    s->loss[n] = column_real_or_nan(st, 1);
    s->grad_norm[n] = column_real_or_nan(st, 2);
    s->n_steps++;
  }
  if (rc == TP_OK && step != SQLITE_DONE) rc = sql_fail(store, "reading the drift steps");
  sqlite3_finalize(st);
  return rc;
}

/* "stock", "dist_gemm ce x2 rs_sum=nccl": backend, schedule, chunks, rs_sum. */
static void base_label(const tp_drift_series *s, char *buf, size_t cap) {
  char chunks[16] = "";
  if (s->chunks > 0) snprintf(chunks, sizeof chunks, " x%d", s->chunks);
  snprintf(buf, cap, "%.24s%s%.16s%s%s%.16s", s->backend ? s->backend : "?", s->schedule ? " " : "",
           s->schedule ? s->schedule : "", chunks, s->rs_sum ? " rs_sum=" : "",
           s->rs_sum ? s->rs_sum : "");
}

/* The base label, then " #k" for the k-th configuration of one base label. */
static void label_series(tp_drift_run *run, int i) {
  tp_drift_series *s = &run->series[i];
  char base[80], earlier[80];
  base_label(s, base, sizeof base);
  int same = 1;
  for (int j = 0; j < i; ++j) {
    base_label(&run->series[j], earlier, sizeof earlier);
    same += !strcmp(earlier, base);
  }
  if (same > 1) snprintf(s->label, sizeof s->label, "%s #%d", base, same);
  else snprintf(s->label, sizeof s->label, "%s", base);
}

static tp_rc take_series(tp_store *store, sqlite3_stmt *st, tp_drift_run *run, size_t *cap) {
  tp_drift_series *grown = tp_grow_array(run->series, cap, (size_t)run->n_series, sizeof *grown);
  if (!grown) return out_of_memory();
  run->series = grown;
  tp_drift_series *s = &run->series[run->n_series++];
  memset(s, 0, sizeof *s);
  s->config_id = sqlite3_column_int64(st, 0);
  s->chunks = sqlite3_column_int(st, 3);
  char **texts[] = {&s->backend, &s->schedule, NULL, &s->rs_sum, &s->status, &s->reason};
  for (int c = 0; c < 6; ++c)
    if (texts[c]) TP_TRY(dup_text(st, 1 + c, texts[c]));
  if (run->n_series == 1) {
    TP_TRY(dup_text(st, 7, &run->model));
    TP_TRY(dup_text(st, 8, &run->layer));
    TP_TRY(dup_text(st, 9, &run->dtype));
    run->tp = sqlite3_column_int(st, 10);
    run->batch = sqlite3_column_int(st, 11);
    run->seqlen = sqlite3_column_int(st, 12);
    run->tokens = sqlite3_column_int64(st, 13);
  }
  label_series(run, run->n_series - 1);
  return load_steps(store, s);
}

static tp_rc load_series(tp_store *store, tp_drift_run *run) {
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare(store,
                 "SELECT id, backend, schedule, chunks, rs_sum, status, reason, model, layer, "
                 "dtype, tp, batch, seqlen, tokens FROM configs WHERE run_id = ? AND kind = "
                 "'drift' ORDER BY id",
                 &st));
  sqlite3_bind_int64(st, 1, run->run_id);
  size_t cap = 0;
  tp_rc rc = TP_OK;
  int step;
  while (rc == TP_OK && (step = sqlite3_step(st)) == SQLITE_ROW)
    rc = take_series(store, st, run, &cap);
  if (rc == TP_OK && step != SQLITE_DONE) rc = sql_fail(store, "reading the drift configurations");
  sqlite3_finalize(st);
  return rc;
}

tp_rc tp_drift_is_drift_run(tp_store *store, int64_t run_id, int *is_drift) {
  sqlite3_stmt *st = NULL;
  *is_drift = 0;
  TP_TRY(prepare(store,
                 "SELECT coalesce(sum(kind IN ('op', 'layer', 'link')), 0), "
                 "coalesce(sum(kind = 'drift'), 0) FROM configs WHERE run_id = ?",
                 &st));
  sqlite3_bind_int64(st, 1, run_id);
  tp_rc rc = TP_OK;
  if (sqlite3_step(st) == SQLITE_ROW)
    /* drift configurations and none of a throughput table or a probe: rows of a kind this
     * tpbench does not know leave a drift run a drift run */
    *is_drift = sqlite3_column_int64(st, 0) == 0 && sqlite3_column_int64(st, 1) > 0;
  else rc = sql_fail(store, "counting the run's drift configurations");
  sqlite3_finalize(st);
  return rc;
}

static int trained(const tp_drift_series *s) { return s->status && !strcmp(s->status, "ok"); }

static int is_stock(const tp_drift_series *s) { return s->backend && !strcmp(s->backend, "stock"); }

tp_rc tp_drift_load(tp_store *store, int64_t run_id, tp_drift_run *out) {
  memset(out, 0, sizeof *out);
  out->reference = -1;
  TP_TRY(resolve_run(store, run_id, &out->run_id));
  TP_TRY(load_command_line(store, out));
  TP_TRY(load_series(store, out));
  for (int i = 0; i < out->n_series && out->reference < 0; ++i)
    if (is_stock(&out->series[i]) && trained(&out->series[i])) out->reference = i;
  return TP_OK;
}

void tp_drift_run_free(tp_drift_run *run) {
  for (int i = 0; i < run->n_series; ++i) {
    tp_drift_series *s = &run->series[i];
    char *texts[] = {s->backend, s->schedule, s->rs_sum, s->status, s->reason};
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; ++t) free(texts[t]);
    free(s->step);
    free(s->loss);
    free(s->grad_norm);
  }
  free(run->series);
  free(run->command_line);
  free(run->model);
  free(run->layer);
  free(run->dtype);
  memset(run, 0, sizeof *run);
  run->reference = -1;
}

/* ---- judging ------------------------------------------------------------------------------ */

const char *tp_drift_match_name(tp_drift_match match) {
  switch (match) {
  case TP_DRIFT_IDENTICAL: return "bit-identical";
  case TP_DRIFT_DIFFERS: return "differs";
  case TP_DRIFT_NONFINITE: return "non-finite";
  case TP_DRIFT_MISSING: return "missing";
  }
  return "?";
}

tp_drift_match tp_drift_compare(double reference, double value) {
  if (!isfinite(reference) || !isfinite(value)) return TP_DRIFT_NONFINITE;
  /* bit for bit: -0.0 and 0.0 differ (both finite here, so no NaN payloads) */
  uint64_t ref_bits = 0, value_bits = 0;
  memcpy(&ref_bits, &reference, sizeof ref_bits);
  memcpy(&value_bits, &value, sizeof value_bits);
  return ref_bits == value_bits ? TP_DRIFT_IDENTICAL : TP_DRIFT_DIFFERS;
}

/* The index of step number `step` in s, -1 when it has none. */
static int step_index(const tp_drift_series *s, int step) {
  for (int i = 0; i < s->n_steps; ++i)
    if (s->step[i] == step) return i;
  return -1;
}

/* A series' step against the reference's k-th step; which 0 is the loss, 1 the norm. */
static tp_drift_match match_at(const tp_drift_run *run, const tp_drift_series *s, int k,
                               int which) {
  const tp_drift_series *ref = &run->series[run->reference];
  const int i = step_index(s, ref->step[k]);
  if (i < 0) return TP_DRIFT_MISSING;
  return which ? tp_drift_compare(ref->grad_norm[k], s->grad_norm[i])
               : tp_drift_compare(ref->loss[k], s->loss[i]);
}

static int series_differs(const tp_drift_run *run, const tp_drift_series *s) {
  if (run->reference < 0) return 0;
  const tp_drift_series *ref = &run->series[run->reference];
  if (s->n_steps != ref->n_steps) return 1;
  for (int k = 0; k < ref->n_steps; ++k)
    if (match_at(run, s, k, 0) != TP_DRIFT_IDENTICAL ||
        match_at(run, s, k, 1) != TP_DRIFT_IDENTICAL)
      return 1;
  return 0;
}

void tp_drift_judge(const tp_drift_run *run, tp_drift_verdict *out) {
  memset(out, 0, sizeof *out);
  out->has_reference = run->reference >= 0;
  for (int i = 0; i < run->n_series; ++i) {
    const tp_drift_series *s = &run->series[i];
    if (!trained(s)) {
      if (s->status && !strcmp(s->status, "rejected")) out->rejected++;
      else out->failed++;
      continue;
    }
    out->trained++;
    for (int k = 0; k < s->n_steps; ++k)
      out->nonfinite_steps += !isfinite(s->loss[k]) || !isfinite(s->grad_norm[k]);
    if (i != run->reference) out->differing += series_differs(run, s);
  }
}

int tp_drift_exit_status(const tp_drift_verdict *v) {
  return v->has_reference && v->failed == 0 && v->nonfinite_steps == 0 ? TP_EXIT_OK
                                                                       : TP_EXIT_FAILURE;
}

const char *tp_drift_failure(const tp_drift_verdict *v, char *buf, size_t cap) {
  if (tp_drift_exit_status(v) == TP_EXIT_OK) return NULL;
  size_t used = 0;
  buf[0] = '\0';
  if (!v->has_reference && used < cap)
    used += (size_t)snprintf(buf + used, cap - used, "no stock configuration trained");
  if (v->failed && used < cap)
    used += (size_t)snprintf(buf + used, cap - used, "%s%d configuration%s failed",
                             used ? "; " : "", v->failed, v->failed == 1 ? "" : "s");
  if (v->nonfinite_steps && used < cap)
    snprintf(buf + used, cap - used, "%s%d step%s with a non-finite loss or gradient norm",
             used ? "; " : "", v->nonfinite_steps, v->nonfinite_steps == 1 ? "" : "s");
  return buf;
}

/* ---- markdown ----------------------------------------------------------------------------- */

static void md_value(FILE *out, double v) {
  char buf[40];
  if (isfinite(v)) snprintf(buf, sizeof buf, "%.10g", v);
  else snprintf(buf, sizeof buf, "non-finite");
  tp_md_cell(out, buf);
}

static void md_diff(FILE *out, double ref, double v, tp_drift_match m) {
  char buf[40];
  if (m == TP_DRIFT_IDENTICAL) snprintf(buf, sizeof buf, "0");
  else if (m == TP_DRIFT_DIFFERS) snprintf(buf, sizeof buf, "%+.3e", v - ref);
  else snprintf(buf, sizeof buf, "-");
  tp_md_cell(out, buf);
}

static void md_header(const tp_drift_run *run, FILE *out) {
  fprintf(out, "## Drift of run %lld\n\n", (long long)run->run_id);
  if (run->command_line) {
    fputs("Command: ", out);
    tp_md_code(out, run->command_line);
    fputs("\n\n", out);
  }
  fputs("Shape: ", out);
  tp_md_text(out, run->model);
  fputc(' ', out);
  tp_md_text(out, run->layer);
  fprintf(out, ", T=%lld (batch %d × seqlen %d), ", (long long)run->tokens, run->batch,
          run->seqlen);
  tp_md_text(out, run->dtype);
  fprintf(out, ", TP %d.", run->tp);
  if (run->reference >= 0) {
    const tp_drift_series *ref = &run->series[run->reference];
    fputs(" Reference: ", out);
    tp_md_text(out, ref->label);
    fprintf(out,
            " (config %lld): each step's loss and global gradient norm, before the "
            "update.\n\n",
            (long long)ref->config_id);
  } else {
    fputs(" No stock configuration trained: nothing to compare against.\n\n", out);
  }
}

static void md_step_row(FILE *out, const tp_drift_run *run, const tp_drift_series *s, int k) {
  const tp_drift_series *ref = &run->series[run->reference];
  const int i = step_index(s, ref->step[k]);
  const double loss = i < 0 ? NAN : s->loss[i], norm = i < 0 ? NAN : s->grad_norm[i];
  const tp_drift_match ml = match_at(run, s, k, 0), mn = match_at(run, s, k, 1);
  fprintf(out, "| %d ", ref->step[k]);
  md_value(out, ref->loss[k]);
  tp_md_cell(out, s->label);
  if (i < 0) fputs("| - ", out);
  else md_value(out, loss);
  md_diff(out, ref->loss[k], loss, ml);
  tp_md_cell(out, tp_drift_match_name(ml));
  md_value(out, ref->grad_norm[k]);
  if (i < 0) fputs("| - ", out);
  else md_value(out, norm);
  md_diff(out, ref->grad_norm[k], norm, mn);
  tp_md_cell(out, tp_drift_match_name(mn));
  fputs("|\n", out);
}

/* The table of every trained configuration against the reference, step by step. */
static void md_table(const tp_drift_run *run, FILE *out) {
  const tp_drift_series *ref = &run->series[run->reference];
  int compared = 0;
  for (int i = 0; i < run->n_series; ++i)
    compared += i != run->reference && trained(&run->series[i]);
  if (!compared) {
    fputs("| step | stock loss | stock grad norm |\n|---:|---:|---:|\n", out);
    for (int k = 0; k < ref->n_steps; ++k) {
      fprintf(out, "| %d ", ref->step[k]);
      md_value(out, ref->loss[k]);
      md_value(out, ref->grad_norm[k]);
      fputs("|\n", out);
    }
    fputs("\nNo other configuration trained: nothing was compared.\n", out);
    return;
  }
  fputs("| step | stock loss | configuration | loss | Δ loss | loss bits | stock grad norm | "
        "grad norm | Δ grad norm | grad norm bits |\n"
        "|---:|---:|---|---:|---:|---|---:|---:|---:|---|\n",
        out);
  for (int i = 0; i < run->n_series; ++i) {
    const tp_drift_series *s = &run->series[i];
    if (i == run->reference || !trained(s)) continue;
    for (int k = 0; k < ref->n_steps; ++k) md_step_row(out, run, s, k);
  }
}

/* How one value (which: 0 loss, 1 norm) of a configuration stands over the steps. */
typedef struct drift_tally {
  int same, differ;        /* steps bit-identical; finite and different */
  double max_abs, max_rel; /* the largest |Δ| of the differing ones, and relative to stock's */
} drift_tally;

static drift_tally tally(const tp_drift_run *run, const tp_drift_series *s, int which) {
  const tp_drift_series *ref = &run->series[run->reference];
  drift_tally t = {0, 0, 0.0, 0.0};
  for (int k = 0; k < ref->n_steps; ++k) {
    const tp_drift_match m = match_at(run, s, k, which);
    t.same += m == TP_DRIFT_IDENTICAL;
    if (m != TP_DRIFT_DIFFERS) continue;
    t.differ++;
    const int i = step_index(s, ref->step[k]);
    const double r = which ? ref->grad_norm[k] : ref->loss[k];
    const double d = fabs((which ? s->grad_norm[i] : s->loss[i]) - r);
    if (d > t.max_abs) t.max_abs = d;
    if (r != 0.0 && d / fabs(r) > t.max_rel) t.max_rel = d / fabs(r);
  }
  return t;
}

static void md_compared_line(const tp_drift_run *run, const tp_drift_series *s, FILE *out) {
  const int n = run->series[run->reference].n_steps;
  const drift_tally loss = tally(run, s, 0), norm = tally(run, s, 1);
  fprintf(out, "loss bit-identical at %d of %d steps, grad norm at %d of %d", loss.same, n,
          norm.same, n);
  if (loss.differ || norm.differ)
    fprintf(out, "; largest |Δ loss| %.3e (%.3e of stock's), |Δ grad norm| %.3e (%.3e)",
            loss.max_abs, loss.max_rel, norm.max_abs, norm.max_rel);
  if (s->n_steps != n) fprintf(out, "; %d steps stored against stock's %d", s->n_steps, n);
}

static void md_series_line(const tp_drift_run *run, int i, FILE *out) {
  const tp_drift_series *s = &run->series[i];
  fputs("- ", out);
  tp_md_text(out, s->label);
  fprintf(out, " (config %lld): ", (long long)s->config_id);
  if (!trained(s)) {
    tp_md_text(out, s->status);
    fputs(" — ", out);
    tp_md_text(out, s->reason ? s->reason : "no reason recorded");
    /* a configuration that failed or hung mid-training keeps the steps it finished */
    if (s->n_steps > 0)
      fprintf(out, "; %d step%s stored before it stopped (not compared)", s->n_steps,
              s->n_steps == 1 ? "" : "s");
  } else if (i == run->reference) {
    fprintf(out, "the reference, %d steps", s->n_steps);
    if (s->n_steps > 0) fprintf(out, ", loss %.6g → %.6g", s->loss[0], s->loss[s->n_steps - 1]);
  } else if (run->reference >= 0) {
    md_compared_line(run, s, out);
  } else {
    fprintf(out, "%d steps, no reference to compare with", s->n_steps);
  }
  int nonfinite = 0;
  for (int k = 0; trained(s) && k < s->n_steps; ++k)
    nonfinite += !isfinite(s->loss[k]) || !isfinite(s->grad_norm[k]);
  if (nonfinite) fprintf(out, "; **%d steps not finite**", nonfinite);
  fputs(".\n", out);
}

static void print_markdown(const tp_drift_run *run, FILE *out) {
  md_header(run, out);
  if (run->reference >= 0) {
    md_table(run, out);
    fputc('\n', out);
  }
  for (int i = 0; i < run->n_series; ++i) md_series_line(run, i, out);
}

/* ---- CSV ------------------------------------------------------------------------------------ */

static void csv_real(FILE *out, double v) {
  if (isfinite(v)) fprintf(out, ",%.17g", v);
  else fputc(',', out);
}

static void csv_step(FILE *out, const tp_drift_run *run, const tp_drift_series *s, int k) {
  const tp_drift_series *ref = run->reference >= 0 ? &run->series[run->reference] : NULL;
  const int r = ref ? step_index(ref, s->step[k]) : -1;
  const double ref_loss = r < 0 ? NAN : ref->loss[r], ref_norm = r < 0 ? NAN : ref->grad_norm[r];
  const tp_drift_match ml = r < 0 ? TP_DRIFT_MISSING : tp_drift_compare(ref_loss, s->loss[k]);
  const tp_drift_match mn = r < 0 ? TP_DRIFT_MISSING : tp_drift_compare(ref_norm, s->grad_norm[k]);
  fprintf(out, "%lld,%d", (long long)run->run_id, s->step[k]);
  tp_csv_field(out, s->label, 0);
  tp_csv_int(out, s->config_id);
  if (ref) tp_csv_int(out, ref->config_id);
  else fputc(',', out);
  csv_real(out, ref_loss);
  csv_real(out, s->loss[k]);
  csv_real(out, s->loss[k] - ref_loss);
  tp_csv_field(out, tp_drift_match_name(ml), 0);
  csv_real(out, ref_norm);
  csv_real(out, s->grad_norm[k]);
  csv_real(out, s->grad_norm[k] - ref_norm);
  tp_csv_field(out, tp_drift_match_name(mn), 0);
  tp_csv_end_line(out);
}

static void print_csv(const tp_drift_run *run, FILE *out) {
  fputs("run_id,step,configuration,config_id,reference_config_id,reference_loss,loss,loss_diff,"
        "loss_bits,reference_grad_norm,grad_norm,grad_norm_diff,grad_norm_bits",
        out);
  tp_csv_end_line(out);
  for (int i = 0; i < run->n_series; ++i) {
    const tp_drift_series *s = &run->series[i];
    for (int k = 0; trained(s) && k < s->n_steps; ++k) csv_step(out, run, s, k);
  }
}

tp_rc tp_drift_print(const tp_drift_run *run, tp_report_format fmt, FILE *out) {
  if (fmt == TP_FMT_MARKDOWN) print_markdown(run, out);
  else if (fmt == TP_FMT_CSV) print_csv(run, out);
  else return TP_FAIL(TP_EUSAGE, "drift: the table is markdown or CSV (no JSON)");
  return TP_OK;
}

tp_rc tp_drift_show_table(tp_store *store, int64_t run_id, tp_report_format fmt, FILE *out,
                          FILE *err, int *status) {
  tp_drift_run run;
  tp_rc rc = tp_drift_load(store, run_id, &run);
  if (rc == TP_OK) rc = tp_drift_print(&run, fmt, out);
  if (rc == TP_OK) {
    tp_drift_verdict verdict;
    tp_drift_judge(&run, &verdict);
    *status = tp_drift_exit_status(&verdict);
    char why[160];
    if (tp_drift_failure(&verdict, why, sizeof why))
      fprintf(err, "tpbench drift: run %lld: %s\n", (long long)run.run_id, why);
  }
  tp_drift_run_free(&run);
  return rc;
}
