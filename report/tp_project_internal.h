/*
 * tp_project_internal.h — what `tpbench project`'s two files share inside report/: the
 * inputs read from the store and the projected rows with their measurements
 * (tp_project_load.c fills them, tp_project_write.c writes them). Not for use outside report/.
 */
#ifndef TP_PROJECT_INTERNAL_H
#define TP_PROJECT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "report/tp_project.h"
#include "report/tp_report_util.h"
#include "store/tp_store.h"

/* A projected row and, where the database measured this shape at this degree, the
 * measurement (pass fwd, the latest ok row; dist_gemm: schedule auto, else ce). */
typedef struct {
  tp_project_row row;
  int64_t stock_id, dist_id; /* 0: not measured */
  double stock_measured_us, dist_measured_us;
  double stock_err_pct, dist_err_pct; /* (predicted − measured) / measured; NaN: no pair */
  int dist_stock_path;                /* the measured dist_gemm took the stock path */
  int other_gpu_rows; /* rows of this shape and degree on another GPU the validation would take
                        there (one per backend and GPU): not compared */
} tp_projected;

/* One degree's validation: the error summary of each backend over its shapes. */
typedef struct {
  int tp;
  tp_project_error_summary stock, dist;
  int64_t stock_worst_config, dist_worst_config; /* the measured row of the worst |error| */
} tp_project_check;

typedef struct {
  tp_project_shape *shapes;
  size_t n_shapes, shapes_cap;
  tp_project_gemm *gemms;
  size_t n_gemms, gemms_cap;
  /* The GPU the GEMM rows are read from ("" a run that named none: still one card); the rows
   * of the request's scope on other GPUs are counted, not read. */
  char gemm_gpu[128];   /* cut to fit: the rows are picked by gemm_gpu_key */
  int64_t gemm_gpu_key; /* the GPU's latest GEMM row in the scope */
  int gemm_gpu_found;
  int gemm_other_gpus, gemm_other_listed;
  int64_t gemm_other_rows, gemm_other_listed_rows;
  /* "NAME (N rows), ...", whole entries only; those that did not fit: ", and N more GPUs (M
   * rows)" */
  char gemm_other_names[320];
  tp_project_link_point *points[TP_LINK_KINDS];
  size_t n_points[TP_LINK_KINDS], points_cap[TP_LINK_KINDS];
  int64_t link_run; /* 0: no probe */
  char link_host[128], link_gpu[128], link_gpu_name[128];
  char link_knobs[256]; /* the probe run's test knobs; "": none */
  tp_project_cost costs[TP_COST_KINDS];
  /* GEMMs between gaps (model point 4): the latest probe run on the GEMM rows' GPU, one
   * without test knobs before any with them; pace_run 0: none (pace_skipped: one on another
   * GPU, which is not read) */
  tp_project_pace_point *pace;
  size_t n_pace, pace_cap;
  int64_t pace_run;
  char pace_gpu[128], pace_knobs[256];
  char pace_skipped[320]; /* "run N on NAME, not ...": a driver's name (up to 255 bytes) whole */
  int64_t measured_other_gpu; /* measured rows at a projected degree on another GPU than the
                                 GEMM rows': a prediction is judged on its own card only */
  tp_projected *rows;         /* shape-major, then the request's degrees */
  size_t n_rows;
  tp_project_check *checks; /* the degrees with a measured row, in the request's order */
  size_t n_checks;
} tp_project_data;

/* Reads the shapes (req's, else the database's), GEMM rows and the latest link probe for req,
 * and resolves the pipeline's costs (tp_project_report's refusals: TP_EUSAGE for no such run,
 * no GEMM rows, no probe without --link-gbps). */
TP_MUST_CHECK tp_rc tp_project_load(tp_store *store, const tp_project_request *req,
                                    tp_project_data *data);

/* Projects every shape at every degree of req and reads the rows measured there, then the
 * error summary per degree and backend. */
TP_MUST_CHECK tp_rc tp_project_compute(tp_store *store, const tp_project_request *req,
                                       tp_project_data *data);

void tp_project_data_free(tp_project_data *data);

/* ---- the predictions' columns (tp_project_columns.c) ---- */

enum { TP_PROJECT_MAX_COLUMNS = 64 };

/* The columns the predictions show, in order: indexes into the registry. */
typedef struct {
  int index[TP_PROJECT_MAX_COLUMNS];
  int count;
  int full; /* the format's full output: --columns all, or CSV and JSON by default */
} tp_project_columns;

/* The columns of spec for fmt: NULL is the default (markdown: the compact set, the
 * predictions without their inputs; CSV and JSON: everything, as "all"); "all" the format's
 * full output (markdown's 32-column table, the CSV's 47 columns, JSON's nested rows); otherwise
 * a comma list of names, in that order, in any format. TP_EUSAGE naming a wrong name and
 * listing the valid ones (tp_columns_parse). */
TP_MUST_CHECK tp_rc tp_project_columns_pick(const char *spec, tp_report_format fmt,
                                            tp_project_columns *out);

/* The predictions in markdown: header line, alignment line, one line per row. */
void tp_project_md_rows(FILE *out, const tp_project_data *data, const tp_project_columns *cols);

/* The CSV's header line and one prediction's line. */
void tp_project_csv_header(FILE *out, const tp_project_columns *cols);
void tp_project_csv_row(FILE *out, const tp_projected *p, const tp_project_columns *cols);

/* A CSV error summary line: result, tp, note and the two backends' figures, in the columns of
 * those names when chosen; every other column empty. Nothing without the result column, which
 * tells the line from a prediction. */
typedef struct {
  const char *result; /* "error_median", "error_worst_abs", "not_compared" */
  int tp;
  double stock_pct, dist_pct;
  const char *note;
} tp_project_csv_summary_line;

void tp_project_csv_summary(FILE *out, const tp_project_csv_summary_line *s,
                            const tp_project_columns *cols);

/* One prediction as a flat JSON object of the chosen columns (keys: the CSV's headers); NULL
 * when out of memory. */
json_t *tp_project_json_flat_row(tp_json_builder *jb, const tp_projected *p,
                                 const tp_project_columns *cols);

/* The inputs of a prediction, pointing into data. */
tp_project_inputs tp_project_inputs_of(const tp_project_data *data, double link_gbps);

#endif /* TP_PROJECT_INTERNAL_H */
