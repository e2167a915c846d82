/*
 * numerics.c — the verdict rules of numerics.h.
 */
#include "bench/stats/numerics.h"

#include <math.h>
#include <stdio.h>

double tp_numerics_tolerance(tp_dtype dtype, int64_t reduction_len, int summed_ranks, int depth) {
  const double u = tp_dtype_storage(dtype) == TP_FP32 ? ldexp(1.0, -24) : ldexp(1.0, -8);
  const double u32 = ldexp(1.0, -24);
  const double w = summed_ranks > 1 ? (double)summed_ranks : 1.0;
  const double k = reduction_len > 1 ? (double)reduction_len : 1.0;
  const double d = depth > 1 ? (double)depth : 1.0;
  return d * (2.0 * u * sqrt(w) + 4.0 * u32 * sqrt(k));
}

double tp_numerics_rel_err(const tp_output_measure *m) {
  if (!isfinite(m->diff2) || !isfinite(m->ref2)) return NAN;
  if (m->ref2 > 0.0) return sqrt(m->diff2 / m->ref2);
  return m->diff2 > 0.0 ? INFINITY : 0.0;
}

static void verdict(tp_output_verdict *out, const char *status, const char *rule, double rel,
                    double tol) {
  out->status = status;
  out->rule = rule;
  out->rel_err = rel;
  out->tolerance = tol;
  out->reason[0] = '\0';
}

void tp_numerics_judge_reference(const char *name, const tp_output_measure *m,
                                 tp_output_verdict *out) {
  verdict(out, "ok", "finite", NAN, NAN);
  if (m->nonfinite > 0) {
    out->status = "failed";
    snprintf(out->reason, sizeof out->reason,
             "%s: %.0f of %.0f elements are not finite (unwritten, or overflow)", name,
             m->nonfinite, m->elements);
  }
}

static const char *rule_name(tp_output_rule rule) {
  return rule == TP_RULE_EXACT ? "exact" : "tolerance";
}

void tp_numerics_judge(const char *name, tp_output_rule rule, double tolerance,
                       const tp_output_measure *m, tp_output_verdict *out) {
  const double rel = tp_numerics_rel_err(m);
  verdict(out, "ok", rule_name(rule), rel, rule == TP_RULE_EXACT ? NAN : tolerance);
  if (m->nonfinite > 0) {
    out->status = "failed";
    snprintf(out->reason, sizeof out->reason,
             "%s: %.0f of %.0f elements are not finite (unwritten, or overflow)", name,
             m->nonfinite, m->elements);
  } else if (rule == TP_RULE_EXACT && m->differ > 0) {
    out->status = "failed";
    snprintf(out->reason, sizeof out->reason,
             "%s: %.0f of %.0f elements differ from the reference bit for bit (rel err %.3e)", name,
             m->differ, m->elements, rel);
  } else if (rule != TP_RULE_EXACT && !(rel <= tolerance)) {
    out->status = "failed";
    snprintf(out->reason, sizeof out->reason,
             "%s: rel err %.3e against the reference, tolerance %.1e", name, rel, tolerance);
  }
}

void tp_numerics_not_checked(tp_output_rule rule, const char *why, tp_output_verdict *out) {
  verdict(out, "not checked", rule == TP_RULE_EXACT ? "exact" : "tolerance", NAN, NAN);
  snprintf(out->reason, sizeof out->reason, "%s", why ? why : "not checked");
}
