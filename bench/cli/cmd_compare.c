/*
 * cmd_compare.c — `tpbench compare BASE HEAD`: which configurations got
 * slower between two commits or runs (report/tp_compare.h does the work).
 * Needs no GPU.
 *
 * The exit status is for CI: 0 nothing regressed, 1 something regressed,
 * 2 anything else (usage, a side that names no run, a missing database,
 * nothing in common to compare, runs on different hardware, an error), so
 * a gate never mistakes a broken invocation, an empty or an unfair
 * comparison for a regression or a pass. A pass that gated no test stays 0
 * and says so on stderr whatever the format.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "bench/matrix/presets.h"
#include "report/tp_compare.h"

enum { EXIT_REGRESSED = 1, EXIT_BAD = 2 };

typedef struct compare_args {
  const char *db;
  const char *format;
  const char *threshold; /* percent */
  const char *alpha;
  int gate_references;
  int allow_mixed_hardware;
  int changed_only;
  int top;
  tp_compare_filter filter;
  const char *sides[2];
  int n_sides;
} compare_args;

static tp_rc parse_args(int argc, char **argv, compare_args *a, int *help) {
  tp_compare_filter *f = &a->filter;
  const tp_option options[] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "database to read (never created)", 0, 0, NULL},
      {"format", TP_OPT_STRING, &a->format, "FMT",
       "output format (junit: JUnit XML for CI test reports; bmf: Bencher Metric Format)", 0, 0,
       "md|csv|json|junit|bmf"},
      {"changed-only", TP_OPT_FLAG, &a->changed_only, NULL,
       "show only regressed and improved configurations (the exit status still counts all)", 0, 0,
       NULL},
      {"top", TP_OPT_INT, &a->top, "N",
       "show only the N largest changes (a failure in head first; 0 = all)", 0, 1000000, NULL},
      {"threshold", TP_OPT_STRING, &a->threshold, "PCT",
       "smallest change of a ratio (or time), in percent, that counts", 0, 0, NULL},
      {"alpha", TP_OPT_STRING, &a->alpha, "Q",
       "false discovery rate of the gated tests (Benjamini-Hochberg)", 0, 0, NULL},
      {"gate-references", TP_OPT_FLAG, &a->gate_references, NULL,
       "gate the references too: stock over its bound round by round (what a run at TP 1 "
       "can gate), every reference's time with two runs a side",
       0, 0, NULL},
      {"allow-mixed-hardware", TP_OPT_FLAG, &a->allow_mixed_hardware, NULL,
       "compare runs on different GPUs, GPU counts or drivers (refused otherwise)", 0, 0, NULL},
      {"model", TP_OPT_STRING, &f->model, "NAME",
       "only configurations of this model (8b, llama3-8b, a matrix file's; any case)", 0, 0, NULL},
      {"layer", TP_OPT_STRING, &f->layer, "NAME", "only this op or layer", 0, 0, NULL},
      {"pass", TP_OPT_STRING, &f->pass, "PASS", "only this pass", 0, 0, "fwd|bwd|fwd+bwd"},
      {"dtype", TP_OPT_STRING, &f->dtype, "TYPE", "only this data type", 0, 0, NULL},
      {"backend", TP_OPT_STRING, &f->backend, "NAME",
       "only this backend (stock, dist_gemm, cublaslt, nccl, ...)", 0, 0, NULL},
      {"kind", TP_OPT_STRING, &f->kind, "KIND", "only this kind of configuration", 0, 0,
       "op|layer|gemm|comm|link"},
  };
  const tp_command cmd = {
      .name = "compare",
      .usage = "tpbench compare BASE HEAD [options]",
      .summary =
          "Compares every configuration measured at BASE and at HEAD. Each side is a commit (a\n"
          "prefix will do; all its runs), run:N, or a comma list of them.\n"
          "Gated, per dist_gemm configuration: dist/stock and dist/bound (bound = max(GEMM\n"
          "alone, collective alone)), taken round by round inside each run so machine drift\n"
          "cancels, compared across the sides with Welch's t test on the log ratios (every\n"
          "round one sample; a run without rounds is one sample); raw times only when each\n"
          "side has two runs or more. Benjamini-Hochberg over all gated tests at --alpha;\n"
          "flagged when the adjusted p < alpha and the change is at least --threshold.\n"
          "Reference rows are information unless --gate-references. A configuration ok in\n"
          "BASE that failed, timed out or ran out of memory in HEAD regressed; when a side\n"
          "has several runs, the latest run of each configuration decides its status.\n"
          "Runs on different GPUs or drivers are refused unless --allow-mixed-hardware.\n"
          "Markdown output is ready for a pull-request comment; junit writes one test case\n"
          "per configuration (regressions as failures, rows nothing gated as skipped) and\n"
          "bmf the head's latency (ns), speedup and dist/bound for Bencher.\n"
          "Exit status: 0 no regression, 1 a regression, 2 bad input, nothing compared (no\n"
          "configuration in common, or the filters match none), mixed hardware or an error.\n"
          "A pass that gated no test (all information only) is 0 and says \"nothing gated\".",
      .options = options,
      .n_options = (int)(sizeof options / sizeof options[0]),
  };
  return tp_cli_parse(&cmd, argc, argv, a->sides, 2, &a->n_sides, help);
}

/* A number in (lo, hi) from text; what names it in the message. */
static int parse_number(const char *what, const char *text, double lo, double hi, double *out) {
  double value = 0;
  if (!tp_cli_decimal(text, &value) || value < lo || value >= hi) {
    fprintf(stderr, "tpbench compare: %s: '%s' is not a number in [%g, %g)\n", what, text, lo, hi);
    return -1;
  }
  *out = value;
  return 0;
}

static int run_compare(const compare_args *a, const tp_compare_options *opt,
                       tp_compare_format fmt) {
  /* compare keeps 2 for every error: its 1 means "a regression" to CI */
  tp_store *store = NULL;
  if (tp_open_for_reading("compare", a->db, &store) != TP_OK) return EXIT_BAD;
  tp_compare_summary sum = {0};
  tp_rc rc = tp_report_compare(store, a->sides[0], a->sides[1], opt, fmt, stdout, &sum);
  if (rc != TP_OK) tp_print_error("compare");
  tp_store_close(store);
  if (rc != TP_OK) return EXIT_BAD;
  if (sum.regressed > 0) return EXIT_REGRESSED;
  if (sum.tests == 0)
    fprintf(stderr,
            "tpbench compare: nothing gated: %d configuration%s compared, none with a gated "
            "test (%d information only, %d ran on neither side); exit 0 says no regression was "
            "found, not that nothing got slower\n",
            sum.compared, sum.compared == 1 ? "" : "s", sum.information, sum.not_compared);
  return TP_EXIT_OK;
}

int tp_cmd_compare(int argc, char **argv) {
  compare_args a = {.db = "tpbench.db", .format = "md", .threshold = "2", .alpha = "0.05"};
  int help = 0;
  if (parse_args(argc, argv, &a, &help) != TP_OK) return EXIT_BAD;
  if (help) return TP_EXIT_OK;
  if (a.n_sides != 2) {
    fprintf(stderr, "tpbench compare: needs BASE and HEAD (commits, run:N, or comma lists)\n"
                    "Try 'tpbench compare --help'.\n");
    return EXIT_BAD;
  }
  a.filter.model = tp_model_filter_name(a.filter.model); /* "8b" finds llama3-8b's rows */
  tp_compare_options opt = {.gate_references = a.gate_references,
                            .allow_mixed_hardware = a.allow_mixed_hardware,
                            .filter = a.filter,
                            .changed_only = a.changed_only,
                            .top = a.top};
  double pct = 0;
  if (parse_number("--threshold", a.threshold, 0, 100, &pct) != 0 ||
      parse_number("--alpha", a.alpha, 1e-12, 1, &opt.alpha) != 0)
    return EXIT_BAD;
  opt.threshold = pct / 100.0;
  tp_compare_format fmt;
  if (tp_compare_format_parse(a.format, &fmt) != TP_OK) {
    tp_print_error("compare");
    return EXIT_BAD;
  }
  return run_compare(&a, &opt, fmt);
}
