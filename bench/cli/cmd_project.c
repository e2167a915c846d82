/*
 * cmd_project.c — `tpbench project`: stock and dist_gemm time at other TP degrees and link
 * bandwidths, predicted from a database's GEMM-alone rows and link probe, with the validation
 * against rows measured at a projected degree (report/tp_project.h holds the model). The
 * shapes are the database's, or with --models / --tokens the model presets' four projections
 * (bench/matrix/presets.h), so models and token counts nobody measured can be predicted. Reads
 * the database only; needs no GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "bench/matrix/presets.h"
#include "report/tp_project.h"

typedef struct project_args {
  const char *db;
  const char *format;
  tp_int_list tp;
  const char *link_gbps;
  long long run;
  long long shapes_run;
  int gemm_tp;
  const char *gemm_gpu;
  tp_str_list models; /* count 0: not given */
  tp_int_list tokens; /* count 0: not given */
  const char *columns;
  int gemms;
} project_args;

/* --models / --tokens: what the other defaults to when only one is given. */
static const char DEFAULT_MODELS[] = "8b,70b,405b";
static const long long DEFAULT_TOKENS[] = {4096, 8192, 16384, 32768};

static tp_rc parse_args(int argc, char **argv, project_args *a, int *help) {
  const tp_option options[] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "database to read (never created)", 0, 0, NULL},
      {"tp", TP_OPT_INT_LIST, &a->tp, "N,...", "TP degrees to project (2 and up)", 2, 64, NULL},
      {"link-gbps", TP_OPT_STRING, &a->link_gbps, "X",
       "per-GPU link bandwidth in GB/s for every transport (default: the link probe's)", 0, 0,
       NULL},
      {"run", TP_OPT_INT64, &a->run, "N",
       "read GEMM rows, shapes and measured rows of this run only (0: every run)", 0, 0, NULL},
      {"shapes-run", TP_OPT_INT64, &a->shapes_run, "N",
       "predict only the op shapes run N measured (GEMM rows from every run); not with "
       "--models/--tokens, nor with --run of another run (--run reads its own shapes only)",
       0, 0, NULL},
      {"gemm-tp", TP_OPT_INT, &a->gemm_tp, "N",
       "GEMM rates only from rows measured at TP N (1: single-GPU GEMMs; 0: any)", 0, 64, NULL},
      {"gemm-gpu", TP_OPT_STRING, &a->gemm_gpu, "NAME",
       "GEMM rates only from rows of this GPU, the name `tpbench runs` shows before the × "
       "(default: the GPU of the latest GEMM row; other GPUs' rows are counted, never mixed in)",
       0, 0, NULL},
      {"models", TP_OPT_STR_LIST, &a->models, "M,...",
       "predict these presets' qkv, wo, w13, w2 (default with --tokens: 8b,70b,405b) instead of "
       "the database's shapes",
       0, 0, NULL},
      {"tokens", TP_OPT_INT_LIST, &a->tokens, "T,...",
       "tokens of the presets' shapes (default with --models: 4096,8192,16384,32768)", 1, 1LL << 30,
       NULL},
      {"format", TP_OPT_STRING, &a->format, "FMT",
       "output format (md when not given; --gemms: csv only)", 0, 0, "md|csv|json"},
      {"columns", TP_OPT_STRING, &a->columns, "LIST",
       "columns of the predictions, comma-separated, or all (default: md a compact table; csv "
       "and json every field). all: every input of each row (md's full table). Names: the CSV's "
       "headers, and md's shard, volume_mib, chunk_mib",
       0, 0, NULL},
      {"gemms", TP_OPT_FLAG, &a->gemms, NULL,
       "instead of the report, every GEMM the predictions read as CSV: role (stock, shard, "
       "chunk), shape as `ops --shape` takes it, exact (a row of that shape) or estimated, time",
       0, 0, NULL},
  };
  const tp_command cmd = {
      .name = "project",
      .usage = "tpbench project [--db PATH] [--tp 2,4,8] [--link-gbps X] [--run N] "
               "[--shapes-run N] [--gemm-tp N] [--gemm-gpu NAME] [--models M,...] [--tokens T,...] "
               "[--format md|csv|json] [--columns LIST|all] [--gemms]",
      .summary = "Predicts the stock and dist_gemm time of every op shape the database measured\n"
                 "(or of the presets' projections: --models, --tokens) at other TP degrees (an\n"
                 "NVSwitch host) from its GEMM-alone rates and its link probe, showing every\n"
                 "input, and compares the prediction with the rows measured at a projected\n"
                 "degree (error % per shape; per backend the signed median and worst |error|).\n"
                 "Markdown shows the predictions compactly (--columns all: every input); CSV and\n"
                 "JSON every field. The output is a prediction, and says so.",
      .options = options,
      .n_options = (int)(sizeof options / sizeof options[0]),
  };
  return tp_cli_parse(&cmd, argc, argv, NULL, 0, NULL, help);
}

/* --link-gbps: a decimal number of GB/s in [0.001, 1e6]; 0 when not given. */
static tp_rc parse_gbps(const char *text, double *out) {
  *out = 0;
  if (!text) return TP_OK;
  double v = 0;
  if (!tp_cli_decimal(text, &v) || v < 1e-3 || v > 1e6) {
    fprintf(stderr,
            "tpbench project: --link-gbps: '%s' is not a bandwidth in GB/s (a decimal number "
            "from 0.001 to 1000000)\n",
            text);
    return TP_FAIL(TP_EUSAGE, "--link-gbps: '%s' is not a bandwidth in GB/s", text);
  }
  *out = v;
  return TP_OK;
}

/* A value given twice would predict the same shapes twice and count them twice in the
 * error summary, as --tp does: refused. */
static tp_rc check_repeats(const project_args *a) {
  for (int i = 0; i < a->tokens.count; i++)
    for (int j = 0; j < i; j++)
      if (a->tokens.items[j] == a->tokens.items[i]) {
        fprintf(stderr, "tpbench project: --tokens: %lld is listed twice\n",
                (long long)a->tokens.items[i]);
        return TP_FAIL(TP_EUSAGE, "--tokens: %lld is listed twice", (long long)a->tokens.items[i]);
      }
  for (int i = 0; i < a->models.count; i++) {
    const tp_model_preset *mi = NULL;
    if (tp_preset_find(tp_str_list_at(&a->models, i), &mi) != TP_OK) continue; /* named later */
    for (int j = 0; j < i; j++) {
      const tp_model_preset *mj = NULL;
      if (tp_preset_find(tp_str_list_at(&a->models, j), &mj) == TP_OK && mj == mi) {
        fprintf(stderr, "tpbench project: --models: %s is listed twice ('%s', '%s')\n", mi->name,
                tp_str_list_at(&a->models, j), tp_str_list_at(&a->models, i));
        return TP_FAIL(TP_EUSAGE, "--models: %s is listed twice", mi->name);
      }
    }
  }
  return TP_OK;
}

/* The presets' four projections of every model at every token count, bf16, in that order
 * (model, projection, tokens). TP_EUSAGE naming an unknown model. */
static tp_rc preset_shapes(const project_args *a, tp_project_shape *shapes, size_t cap, size_t *n) {
  tp_str_list models = a->models;
  tp_int_list tokens = a->tokens;
  if (models.count == 0) TP_TRY(tp_str_list_set(&models, DEFAULT_MODELS));
  if (tokens.count == 0) {
    tokens.count = (int)(sizeof DEFAULT_TOKENS / sizeof DEFAULT_TOKENS[0]);
    for (int i = 0; i < tokens.count; i++) tokens.items[i] = DEFAULT_TOKENS[i];
  }
  int n_projs = 0;
  const char *const *projs = tp_projection_names(&n_projs);
  *n = 0;
  for (int m = 0; m < models.count; m++) {
    const tp_model_preset *model = NULL;
    tp_rc rc = tp_preset_find(tp_str_list_at(&models, m), &model);
    if (rc != TP_OK) {
      tp_print_error("project --models");
      return rc;
    }
    for (int p = 0; p < n_projs; p++)
      for (int t = 0; t < tokens.count && *n < cap; t++) {
        tp_projection proj;
        TP_TRY(tp_preset_projection(model, projs[p], &proj));
        tp_project_shape *s = &shapes[(*n)++];
        memset(s, 0, sizeof *s);
        snprintf(s->model, sizeof s->model, "%s", model->name);
        snprintf(s->proj, sizeof s->proj, "%s", proj.name);
        s->op = proj.op;
        s->dtype = TP_BF16;
        s->tokens = tokens.items[t];
        s->n = proj.n;
        s->k = proj.k;
        s->n_weights = proj.n_weights;
      }
  }
  return TP_OK;
}

static tp_rc project(const project_args *a) {
  tp_report_format fmt;
  double gbps = 0;
  tp_rc rc = tp_report_format_parse(a->format ? a->format : "md", &fmt);
  if (rc != TP_OK) {
    tp_print_error("project");
    return rc;
  }
  /* the GEMM list is CSV and has columns of its own */
  if (a->gemms && ((a->format && fmt != TP_FMT_CSV) || a->columns)) {
    fprintf(stderr, "tpbench project: --gemms writes its own CSV: --%s does not apply to it\n",
            a->columns ? "columns" : "format");
    return TP_FAIL(TP_EUSAGE, "--gemms with --%s", a->columns ? "columns" : "format");
  }
  TP_TRY(parse_gbps(a->link_gbps, &gbps));
  TP_TRY(check_repeats(a));
  rc = tp_project_check_columns(a->columns); /* before the database: a typo costs no read */
  if (rc != TP_OK) {
    tp_print_error("project");
    return rc;
  }
  if (a->run < 0 || a->shapes_run < 0) {
    const char *name = a->run < 0 ? "run" : "shapes-run";
    long long value = a->run < 0 ? a->run : a->shapes_run;
    fprintf(stderr, "tpbench project: --%s: %lld is not a run id\n", name, value);
    return TP_FAIL(TP_EUSAGE, "--%s: %lld is not a run id", name, value);
  }
  if (a->shapes_run && (a->models.count || a->tokens.count)) {
    fprintf(stderr, "tpbench project: --shapes-run picks the database's shapes; --models and "
                    "--tokens give presets' instead: not both\n");
    return TP_FAIL(TP_EUSAGE, "--shapes-run with --models or --tokens");
  }
  int tps[TP_LIST_MAX];
  for (int i = 0; i < a->tp.count; i++) {
    tps[i] = (int)a->tp.items[i];
    for (int j = 0; j < i; j++)
      if (tps[j] == tps[i]) {
        fprintf(stderr, "tpbench project: --tp: %d is listed twice\n", tps[i]);
        return TP_FAIL(TP_EUSAGE, "--tp: %d is listed twice", tps[i]);
      }
  }
  tp_project_request req = {.run_id = a->run,
                            .shapes_run = a->shapes_run,
                            .gemm_tp = a->gemm_tp,
                            .gemm_gpu = a->gemm_gpu,
                            .tps = tps,
                            .n_tps = a->tp.count,
                            .link_gbps = gbps,
                            .columns = a->columns,
                            .gemms = a->gemms};
  const size_t cap = (size_t)TP_LIST_MAX * TP_LIST_MAX * 4; /* models × tokens × 4 projections */
  tp_project_shape *shapes = NULL;
  if (a->models.count || a->tokens.count) {
    shapes = calloc(cap, sizeof *shapes);
    if (!shapes) return TP_FAIL(TP_EOOM, "project: no memory for the shapes");
    rc = preset_shapes(a, shapes, cap, &req.n_shapes);
    req.shapes = shapes;
  }
  tp_store *store = NULL;
  if (rc == TP_OK) rc = tp_open_for_reading("project", a->db, &store);
  if (rc == TP_OK) {
    rc = tp_project_report(store, &req, fmt, stdout);
    if (rc != TP_OK) tp_print_error("project");
    tp_store_close(store);
  }
  free(shapes);
  return rc;
}

int tp_cmd_project(int argc, char **argv) {
  project_args args = {.db = "tpbench.db", .tp = {3, {2, 4, 8}}}; /* format NULL: md */
  int help = 0;
  tp_rc rc = parse_args(argc, argv, &args, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  return tp_exit_for(project(&args));
}
