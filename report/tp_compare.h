/*
 * tp_compare.h — regression tracking: `tpbench compare BASE HEAD` and the
 * statistical test under it.
 *
 * A comparison matches configurations of two sides by their canonical config
 * key (tp_config_key), so the same configuration is found across commits
 * whatever its row ids. For each key measured on both sides it takes, per
 * side, the per-iteration times of the slowest rank (tp_store_iteration_times)
 * and asks two questions:
 *   - is the difference real? A two-sided Mann–Whitney U test of the two
 *     samples (normal approximation, tie and continuity corrections) at
 *     significance alpha (default 0.01);
 *   - is it big enough to matter? The ratio of medians head / base must
 *     leave [1 - threshold, 1 + threshold] (default threshold 0.03).
 * Both yes: regressed (ratio above) or improved (below); otherwise unchanged.
 * Keys on one side only are new (head only) or missing (base only; also a
 * key whose head configuration did not run, with its status and reason).
 */
#ifndef TP_COMPARE_H
#define TP_COMPARE_H

#include <stddef.h>
#include <stdio.h>

#include "report/tp_report.h"
#include "store/tp_store.h"

/* ---- the test ----------------------------------------------------------- */

typedef struct tp_mann_whitney {
  double u;     /* U of the first sample: pairs (a_i, b_j) with a_i > b_j, ties count 1/2 */
  double mean;  /* n_a n_b / 2, U's mean when the samples come from one distribution */
  double sigma; /* U's standard deviation, tie-corrected; 0 when every value ties */
  double z;     /* (U - mean), moved 1/2 towards the mean (continuity), over sigma */
  double p;     /* two-sided p value, 2 (1 - Phi(|z|)); 1 when sigma is 0 */
} tp_mann_whitney;

/* The Mann–Whitney U test of a[0..na) against b[0..nb) (NaN values are not
 * allowed). TP_EUSAGE when a sample is empty or holds a NaN; TP_EOOM. */
tp_rc tp_mann_whitney_test(const double *a, size_t na, const double *b, size_t nb,
                           tp_mann_whitney *out);

/* ---- the comparison ----------------------------------------------------- */

typedef struct tp_compare_options {
  double threshold; /* minimum relative effect on the median: 0.03 is 3% */
  double alpha;     /* significance level of the test: 0.01 */
} tp_compare_options;

#define TP_COMPARE_DEFAULT_THRESHOLD 0.03
#define TP_COMPARE_DEFAULT_ALPHA 0.01

typedef struct tp_compare_summary {
  int regressed, improved, unchanged, added, missing;
} tp_compare_summary;

/*
 * Compares side base with side head and writes the result.
 *
 * A side is "run:N" (that run) or a commit sha or prefix (case-insensitive;
 * a prefix matching two commits is an error). A commit may have several
 * runs (run twice, or a matrix split over jobs and imported): for each key
 * the side takes the configuration of the latest run (by start time) that
 * ran it successfully, or, when none did, the latest one at all, so its
 * status is reported. Samples are never pooled across runs: run-to-run
 * variation is not the within-run noise the test assumes.
 *
 * Markdown (for a pull-request comment): a title, a verdict line, what each
 * side is (runs, commit, host, GPUs, and warnings when hardware or software
 * differ or a tree was dirty), then tables of regressed and improved
 * configurations (worst first), new and missing ones, and the unchanged in a
 * collapsed <details> block. CSV: one line per key. JSON: {"base", "head",
 * "options", "summary", "rows"}.
 *
 * opt may be NULL (defaults). summary (may be NULL) receives the counts;
 * the caller decides the exit status from summary.regressed. TP_EUSAGE for a
 * side that names no run, an ambiguous prefix, a malformed "run:" or options
 * out of range (threshold in [0, 1), alpha in (0, 1)); TP_EIO when out
 * cannot be written.
 */
tp_rc tp_report_compare(tp_store *store, const char *base, const char *head,
                        const tp_compare_options *opt, tp_report_format fmt, FILE *out,
                        tp_compare_summary *summary);

#endif /* TP_COMPARE_H */
