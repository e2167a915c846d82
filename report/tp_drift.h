/*
 * tp_drift.h — the drift table of a `tpbench drift` run, read back from the
 * database (schemas/006_composition.sql: configurations of kind "drift" and
 * their drift_steps): per training step, the stock reference's loss and
 * global gradient norm beside each other configuration's, the difference and
 * whether the two doubles are bit-identical; then one line per
 * configuration (how many steps matched, the largest difference, or why it
 * did not train). `tpbench drift` prints it after its run, `tpbench drift
 * --show RUN` and `tpbench report` on a drift run print it again.
 *
 * The reference is the run's first stock configuration that trained (a
 * repeated stock configuration is compared with it like any other, which is
 * what shows stock's own determinism). Bit-identical means the same 64 bits:
 * both values finite and equal byte for byte; a value stored as NULL (not
 * finite) is never identical, and is counted in the verdict.
 */
#ifndef TP_DRIFT_H
#define TP_DRIFT_H

#include <stdint.h>
#include <stdio.h>

#include "report/tp_report.h"
#include "store/tp_store.h"

/* One drift configuration of a run and its stored steps, in step order. */
typedef struct tp_drift_series {
  int64_t config_id;
  char *backend, *schedule, *rs_sum, *status, *reason; /* NULL where stored NULL */
  int chunks;
  char label[96]; /* "stock", "stock #2", "dist_gemm ce rs_sum=nccl" */
  int n_steps;
  int *step;
  double *loss, *grad_norm; /* NaN where stored NULL (not finite) */
} tp_drift_series;

/* A run's drift configurations, in the order they were recorded. */
typedef struct tp_drift_run {
  int64_t run_id;
  char *command_line;
  char *model, *layer, *dtype; /* of the run's first drift configuration */
  int tp, batch, seqlen;
  int64_t tokens;
  tp_drift_series *series;
  int n_series;
  int reference; /* index of the reference in series, -1 when no stock configuration trained */
} tp_drift_run;

/* Loads run_id's drift configurations (run_id 0: the latest run that has
 * any). TP_EUSAGE when there is no such run, or it has no drift
 * configuration (the message says which); TP_ESQLITE or TP_ETIMEOUT when
 * reading fails. Free with tp_drift_run_free (also after a failure). */
TP_MUST_CHECK tp_rc tp_drift_load(tp_store *store, int64_t run_id, tp_drift_run *out);
void tp_drift_run_free(tp_drift_run *run);

/* *is_drift = 1 when run_id has configurations of kind "drift" and none of kind op, layer or
 * link (a `tpbench drift` run, whose report is this table; rows of a kind tpbench does not know
 * are left aside). TP_ESQLITE when reading fails. */
TP_MUST_CHECK tp_rc tp_drift_is_drift_run(tp_store *store, int64_t run_id, int *is_drift);

/* How a configuration's value of one step stands against the reference's. */
typedef enum {
  TP_DRIFT_IDENTICAL = 0, /* both finite, the same 64 bits */
  TP_DRIFT_DIFFERS,       /* both finite, other bits */
  TP_DRIFT_NONFINITE,     /* either not finite (NaN: stored NULL) */
  TP_DRIFT_MISSING        /* the configuration has no such step */
} tp_drift_match;

/* "bit-identical", "differs", "non-finite", "missing". */
const char *tp_drift_match_name(tp_drift_match match);

/* value against reference (a missing step is the caller's to say). */
tp_drift_match tp_drift_compare(double reference, double value);

/* What the run says as a whole: an exit status follows from it. */
typedef struct tp_drift_verdict {
  int trained;         /* configurations with status ok */
  int rejected;        /* could not run here, with a reason (not a failure) */
  int failed;          /* failed, oom or timeout */
  int nonfinite_steps; /* steps of trained configurations with a non-finite loss or norm */
  int has_reference;   /* a stock configuration trained */
  int differing;       /* trained configurations with a step that is not bit-identical */
} tp_drift_verdict;

void tp_drift_judge(const tp_drift_run *run, tp_drift_verdict *out);

/* TP_EXIT_OK when a stock reference trained, nothing failed and every value
 * is finite: a drift, however large, is a finding, not an error; else
 * TP_EXIT_FAILURE. */
int tp_drift_exit_status(const tp_drift_verdict *verdict);

/* Why the exit status is a failure ("no stock configuration trained", "1 configuration failed",
 * "3 steps with a non-finite loss or gradient norm"), into buf; NULL when it is not. */
const char *tp_drift_failure(const tp_drift_verdict *verdict, char *buf, size_t cap);

/* Writes the table: markdown (a header naming the run, its command line,
 * shape and reference; one row per step and compared configuration; a line
 * per configuration) or CSV (RFC 4180: one header line, then one line per
 * step of every trained configuration, the reference's own included,
 * values with 17 significant digits so they read back bit for bit).
 * TP_EUSAGE for JSON (not offered). */
TP_MUST_CHECK tp_rc tp_drift_print(const tp_drift_run *run, tp_report_format fmt, FILE *out);

/* `drift`'s ending, after a training run and for `drift --show`: loads run_id
 * (tp_drift_load), prints its table on out, judges it, and where the verdict
 * fails says why on err ("tpbench drift: run N: ..."). *status: the exit
 * status the table calls for (tp_drift_exit_status), set when TP_OK. */
TP_MUST_CHECK tp_rc tp_drift_show_table(tp_store *store, int64_t run_id, tp_report_format fmt,
                                        FILE *out, FILE *err, int *status);

#endif /* TP_DRIFT_H */
