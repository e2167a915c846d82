/*
 * tp_compare.h — regression tracking: `tpbench compare BASE HEAD` and the
 * statistics under it.
 *
 * Machine drift between runs (5-15 % on unchanged references on the H200
 * pair) must not read as a regression, so compare gates on what drift
 * cancels: ratios measured inside one run. Per dist_gemm configuration (an
 * op or a layer) and per round of its run (schemas/003_trust.sql: `windows`),
 *   - dist/stock  its round median over the same round's median of the
 *                 stock configuration of its case (the inverse speedup);
 *   - dist/bound  over max(GEMM alone, collective alone) of the same case
 *                 and round;
 * so a run of R rounds gives R ratio samples, each of two windows minutes
 * apart at most. A run from before rounds (runs.rounds NULL, no windows)
 * gives one sample, from its results' medians. Across runs a side's samples
 * are pooled (every round of every run the side names) and the two sides
 * compared with Welch's t test on the log ratios; raw times are compared
 * only when each side has two runs or more (one sample per run, the run's
 * median: the only samples that carry between-run variance), and are
 * otherwise shown as information.
 *
 * The tests of a comparison form one family, adjusted by Benjamini–Hochberg
 * (false discovery rate at alpha, default 0.05): when no configuration
 * changed (identical code) that bounds the chance of any flag at alpha, and
 * when a change moves many configurations at once (a slower fused op moves
 * every dist_gemm row) it keeps the power that Holm would spend on the count
 * of tests. A test flags a configuration only when its adjusted p is below
 * alpha AND the ratio moved by at least the threshold (default 2 %): a real
 * but negligible shift never gates.
 */
#ifndef TP_COMPARE_H
#define TP_COMPARE_H

#include <stddef.h>
#include <stdio.h>

#include "report/tp_report.h"
#include "store/tp_store.h"

/* ---- the statistics ------------------------------------------------------ */

/* Welch's unequal-variance t test of mean(b) - mean(a), with its 95 %
 * interval. */
typedef struct tp_welch {
  double diff;         /* mean(b) - mean(a) */
  double se;           /* sqrt(var_a / n_a + var_b / n_b), sample variances */
  double df;           /* Welch–Satterthwaite degrees of freedom */
  double t;            /* diff / se; 0 when se is 0 */
  double p;            /* two-sided p value from Student's t with df degrees of freedom */
  double ci_lo, ci_hi; /* diff -+ t(0.975, df) se */
} tp_welch;

/* Welch's test of b[0..nb) against a[0..na). Both samples need two values
 * or more (a variance); NaN and infinities are refused. A sample of equal
 * values (copies of one run) has exactly that value as its mean and
 * variance 0, however many copies. When both variances are 0 the difference
 * is exact: p is 1 for equal means (identical measurements never differ),
 * 0 otherwise, and the interval is the difference itself. TP_EUSAGE for too
 * few or non-finite values. */
TP_MUST_CHECK tp_rc tp_welch_test(const double *a, size_t na, const double *b, size_t nb,
                                  tp_welch *out);

/* P(T <= t) for Student's t with df > 0 degrees of freedom. */
double tp_student_t_cdf(double t, double df);

/* Benjamini–Hochberg adjusted p values of p[0..n) into adjusted[0..n) (the
 * same order): adjusted_(i) = min over j >= i of n p_(j) / j, at most 1, for
 * the p values sorted ascending. A test whose adjusted p is below q is a
 * discovery at false discovery rate q. TP_EOOM; n == 0 is fine. */
TP_MUST_CHECK tp_rc tp_bh_adjust(const double *p, size_t n, double *adjusted);

/* ---- the comparison ------------------------------------------------------ */

/* Which rows are shown (and tested): NULL fields match everything. The
 * references that ratios need are read whatever the filter. */
/* Each NULL or "": any. model: a model's name in any case (model names match so); the others
 * exactly. */
typedef struct tp_compare_filter {
  const char *model, *layer, *pass, *dtype, *backend, *kind;
} tp_compare_filter;

typedef struct tp_compare_options {
  double threshold;         /* minimum relative change: 0.02 is 2 % */
  double alpha;             /* false discovery rate of the family: 0.05 */
  int gate_references;      /* 1: stock rows' stock/bound (round by round; at TP 1 the bound is the
                             * GEMM alone) and every reference's time (two runs a side) gate too */
  int allow_mixed_hardware; /* 1: compare runs on different GPUs or drivers anyway */
  tp_compare_filter filter;
  /* What is shown (never what is judged: the summary, the verdict line and
   * the exit status count every row the filter selects). */
  int changed_only; /* 1: only regressed and improved rows */
  int top;          /* > 0: only the rows of the `top` largest changes (see tp_report_compare) */
} tp_compare_options;

/* compare's output formats: the report's three and two for CI tools. */
typedef enum {
  TP_COMPARE_MD = 0,
  TP_COMPARE_CSV,
  TP_COMPARE_JSON,
  TP_COMPARE_JUNIT, /* JUnit XML: one test case per configuration */
  TP_COMPARE_BMF    /* Bencher Metric Format JSON */
} tp_compare_format;

/* "md" (or "markdown"), "csv", "json", "junit", "bmf" (any case) into
 * *out; TP_EUSAGE naming the accepted names otherwise. */
TP_MUST_CHECK tp_rc tp_compare_format_parse(const char *name, tp_compare_format *out);

#define TP_COMPARE_DEFAULT_THRESHOLD 0.02
#define TP_COMPARE_DEFAULT_ALPHA 0.05

typedef struct tp_compare_summary {
  int regressed;    /* configurations that regressed, failures included: exit 1 when > 0 */
  int failed;       /* of those, ok in base and failed (numerics, evidence, timeout, oom) in head */
  int improved;     /* a gated ratio (or time) got better, none worse */
  int unchanged;    /* gated, and no gated test flagged */
  int information;  /* nothing gated: reference rows, or too few samples to test */
  int added;        /* in head only (or ran in head only) */
  int missing;      /* in base only, or rejected in head */
  int not_compared; /* on both sides, ran on neither (rejected or failed both times): not judged */
  int not_compared_rejected; /* of those, rejected in head (the latest run) */
  int not_compared_failed;   /* of those, failed in head (error, timeout, oom, numerics, ...) */
  int tests;                 /* tests in the Benjamini–Hochberg family; 0: nothing was gated */
  int compared; /* configurations (that the filters select) on both sides; > 0 on success */
} tp_compare_summary;

/*
 * Compares side base with side head and writes the result.
 *
 * A side is a comma-separated list of "run:N" (that run) and commit shas or
 * prefixes (case-insensitive; every run of the commit; a prefix matching
 * two commits is an error). Configurations are matched by their canonical
 * config key. When a side holds a key in several runs, the latest run (by
 * start time, then id) decides its status — a later failure is never hidden
 * by an earlier success — and when that one is ok, every run where it was
 * ok contributes samples. A configuration is failed when its status is not
 * ok, or its numerics or schedule evidence say failed.
 *
 * Verdicts: regressed (a gated test flagged it slower, or it was ok in base
 * and failed, oom or timed out in head — for every kind of configuration),
 * improved, unchanged, information (nothing gated: reference rows unless
 * gate_references, link probes always, and rows with fewer than two samples
 * on a side), new, missing (also rejected in head), not compared (on both
 * sides and ran on neither: rejected or failed both times; counted apart,
 * never as unchanged). Rows where dist_gemm
 * took the stock path (results.fused = 0) are gated like the others and
 * labelled.
 *
 * Nothing compared is no pass: when no configuration that the filters
 * select is on both sides, the comparison is refused (TP_EUSAGE, saying
 * whether the filters matched nothing or the sides share no configuration).
 * When some are compared but no test is gated, summary.tests is 0 and the
 * markdown verdict line says "No regression (nothing gated: why)".
 *
 * Hardware: the runs that supplied compared configurations (on both sides;
 * link probes are none) must share the GPU model, the GPU count and the
 * driver, or the comparison is refused (TP_EUSAGE, naming both) unless
 * opt->allow_mixed_hardware; it then warns.
 *
 * Markdown (for a pull-request comment; stored text goes through
 * tp_md_text, so a run's host or versions add no line or markup): a title,
 * the verdict line, the
 * method in one paragraph, both sides (runs, rounds, commit, host, GPUs,
 * test knobs in force), then the regressed and improved configurations,
 * each with the measure that moved, the change of its geometric mean, the
 * 95 % interval of that change and the adjusted p; new and missing ones; the
 * unchanged and the information-only rows in collapsed blocks. CSV: one line
 * per configuration. JSON: {"base", "head", "options", "summary", "rows"}.
 *
 * JUnit XML (for CI test reports): <testsuites> holding one <testsuite>
 * whose <properties> name both sides (specs, commits, runs, host, GPUs,
 * driver, versions) and the test knobs (alpha, threshold); one <testcase>
 * per row: name the label, classname "kind/model/op", time the head's median
 * in seconds (0 without one). A regressed row holds a <failure> whose
 * message names each measure that moved, its change, 95 % interval and
 * adjusted p (or, for a configuration ok in base that failed in head, the
 * failure). Rows that were judged and passed (unchanged, improved) are
 * passed test cases. Rows that nothing gated (information only, new,
 * missing, or not run on either side) are <skipped> with the reason: a
 * passed test case would claim a test that never ran. Every stored text is
 * escaped (report/tp_escape.h).
 *
 * BMF (Bencher Metric Format): {"<label>": {"latency": {...}, "speedup":
 * {...}, "dist_over_bound": {...}}} for every row ok on both sides, head
 * values only: latency in nanoseconds, the head's median (lower/upper: the
 * lowest and highest of its round medians, when it has two rounds or more);
 * speedup (stock / dist_gemm) and dist_over_bound (dist_gemm / max(GEMM
 * alone, collective alone)) for dist_gemm rows, the head's geometric mean
 * over its rounds (lower/upper: the 95 % interval of that mean, when it has
 * two samples or more). A label that two rows share gets " [config_key]"
 * appended, so no row overwrites another; bytes of a name that are not
 * UTF-8 read as in the JSON format's labels.
 *
 * What is shown: opt->changed_only keeps the regressed and improved rows;
 * opt->top keeps the `top` rows of the largest changes (a configuration
 * that failed in head first, then by the largest |change| of any of its
 * measures), after changed_only. Both apply to every
 * format; the summary and the verdict line still count every row.
 *
 * opt may be NULL (defaults). summary (may be NULL) receives the counts;
 * the caller decides the exit status from summary.regressed. TP_EUSAGE for a
 * side that names no run, an ambiguous prefix, a malformed "run:", nothing
 * compared, mixed hardware, or options out of range (threshold in [0, 1), alpha in (0, 1),
 * top >= 0);
 * TP_EIO when out cannot be written.
 */
TP_MUST_CHECK tp_rc tp_report_compare(tp_store *store, const char *base, const char *head,
                                      const tp_compare_options *opt, tp_compare_format fmt,
                                      FILE *out, tp_compare_summary *summary);

#endif /* TP_COMPARE_H */
