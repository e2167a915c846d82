/*
 * cmd_matrix.c — `tpbench matrix`: the configurations `tpbench run` (or, with
 * --for ops, `tpbench ops`) would run for the same matrix options — a preset,
 * a matrix file, --axis assignments and the convenience flags — each marked
 * run, rejected with its rule, or planned with why (a runtime not there yet,
 * or more GPUs than the job: --gpus N, default TP_MATRIX_DEFAULT_GPUS, decided by
 * run's own rule, tp_layer_reject_world, as `run --gpus N` decides it).
 * --composition prints instead the supported-composition table generated
 * from the rules (composition.h). Pure CPU: it works in every build and on
 * any machine; rules only a GPU host can decide are named at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/commands.h"
#include "bench/cli/matrix_args.h"
#include "bench/cli/ops_args.h"
#include "bench/cli/run_args.h"
#include "bench/matrix/composition.h"

/* The host `matrix` lists against without --gpus: the GPUs of the lent pair,
 * the same number a missing tp axis stands for. */
#define TP_MATRIX_DEFAULT_GPUS TP_RUN_MATRIX_DEFAULT_TP

/* matrix's own options, taken out of argv before the run or ops parser. */
typedef struct matrix_own {
  const char *target; /* "run" or "ops" */
  int gpus;           /* host size listed against */
  int composition;    /* print the composition table */
} matrix_own;

/* "--OPT: 'VALUE' WHAT" on stderr, as the other options' mistakes read. */
static tp_rc own_usage(const char *option, const char *value, const char *what) {
  fprintf(stderr, "tpbench matrix: %s: '%s' %s\nTry 'tpbench matrix --help'.\n", option, value,
          what);
  return TP_FAIL(TP_EUSAGE, "%s: '%s' %s", option, value, what);
}

/* The value of "--NAME V" or "--NAME=V" at argv[*i] (moving *i past V), or NULL if
 * argv[*i] is not that option. */
static const char *option_value(const char *name, int argc, char **argv, int *i) {
  const size_t len = strlen(name);
  const char *arg = argv[*i];
  if (!arg || strncmp(arg, "--", 2) != 0 || strncmp(arg + 2, name, len) != 0) return NULL;
  if (arg[2 + len] == '=') return arg + 3 + len;
  if (arg[2 + len] != '\0') return NULL;
  return *i + 1 < argc ? argv[++*i] : "";
}

static tp_rc parse_gpus(const char *value, int *gpus) {
  char *end = NULL;
  long n = strtol(value, &end, 10);
  if (!*value || *end || n < 1 || n > 4096)
    return own_usage("--gpus", value, "is not a whole number in [1, 4096]");
  *gpus = (int)n;
  return TP_OK;
}

/* Takes every --for, --gpus and --composition (up to a "--") out of argv
 * into *own (the last one counts); kept receives the rest. TP_EUSAGE,
 * printed, for a missing or wrong value. */
static tp_rc take_one(int argc, char **argv, int *i, matrix_own *own, int *taken) {
  const char *value = NULL;
  *taken = 1;
  if (strcmp(argv[*i], "--composition") == 0) {
    own->composition = 1;
  } else if ((value = option_value("for", argc, argv, i)) != NULL) {
    if (strcmp(value, "run") != 0 && strcmp(value, "ops") != 0)
      return own_usage("--for", value, "is not one of run|ops");
    own->target = value;
  } else if ((value = option_value("gpus", argc, argv, i)) != NULL) {
    TP_TRY(parse_gpus(value, &own->gpus));
  } else {
    *taken = 0;
  }
  return TP_OK;
}

static tp_rc take_own(int argc, char **argv, char **kept, int *n_kept, matrix_own *own) {
  int n = 0, done = 0;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && !done && strcmp(argv[i], "--") == 0) done = 1;
    int taken = 0;
    if (i > 0 && !done) TP_TRY(take_one(argc, argv, &i, own, &taken));
    if (!taken) kept[n++] = argv[i];
  }
  *n_kept = n;
  return TP_OK;
}

static int print_run_plan(int argc, char **argv, const matrix_own *own, const tp_option *extra) {
  tp_run_args args;
  tp_run_args_defaults(&args);
  int help = 0;
  tp_rc rc = tp_run_args_parse_for("matrix", argc, argv, extra, TP_MATRIX_N_EXTRA, &args, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  tp_layer_matrix matrix;
  /* The options were checked by expanding them once: a failure here is not the input's.
   * --gpus N stands where `run --gpus N` puts its worker count: the TP of a missing tp axis,
   * and the job size of run's own host rule, so each verdict and reason is the one run gives. */
  rc = tp_layer_expand(&args.spec, own->gpus, &matrix);
  if (rc != TP_OK) {
    fprintf(stderr, "tpbench matrix: %s\n", tp_last_message());
    return tp_exit_for(rc);
  }
  tp_layer_reject_world(&matrix, own->gpus);
  tp_layer_matrix_print(&matrix, own->gpus, stdout);
  tp_layer_matrix_free(&matrix);
  return tp_exit_for(TP_OK);
}

static int print_ops_plan(int argc, char **argv, const matrix_own *own, const tp_option *extra) {
  tp_ops_args *args = malloc(sizeof *args);
  if (!args) return tp_exit_for(TP_FAIL(TP_EOOM, "no memory for the options"));
  tp_ops_args_defaults(args);
  int help = 0;
  tp_rc rc = tp_ops_matrix_args_parse("matrix", argc, argv, extra, TP_MATRIX_N_EXTRA, args, &help);
  tp_ops_matrix matrix;
  memset(&matrix, 0, sizeof matrix);
  if (rc == TP_OK && !help) {
    /* --gpus N as `ops --gpus N` takes it (tp default and job size), as for run above */
    tp_ops_spec spec = tp_ops_args_spec(args, own->gpus);
    /* what `ops` refuses before it runs (exit 2), refused here alike (the check says why) */
    rc = tp_ops_check_tokens_divisible("matrix", &spec);
    if (rc == TP_OK) {
      rc = tp_ops_expand(&spec, &matrix);
      if (rc != TP_OK) fprintf(stderr, "tpbench matrix: %s\n", tp_last_message());
    }
    if (rc == TP_OK) {
      tp_ops_reject_world(&matrix, own->gpus);
      tp_ops_matrix_print(&matrix, stdout);
    }
  }
  tp_ops_matrix_free(&matrix);
  free(args);
  return tp_exit_for(rc);
}

static int print_composition_table(int gpus) {
  tp_rc rc = tp_composition_table_print(gpus, stdout);
  if (rc != TP_OK) fprintf(stderr, "tpbench matrix: %s\n", tp_last_message());
  if (rc == TP_OK && (fflush(stdout) != 0 || ferror(stdout)))
    rc = TP_FAIL(TP_EIO, "writing the output failed");
  return tp_exit_for(rc);
}

int tp_cmd_matrix(int argc, char **argv) {
  char **kept = calloc((size_t)argc + 1, sizeof *kept);
  if (!kept) return tp_exit_for(TP_FAIL(TP_EOOM, "no memory for the command line"));
  matrix_own own = {"run", TP_MATRIX_DEFAULT_GPUS, 0};
  const char *for_shown = "run";
  int gpus_shown = TP_MATRIX_DEFAULT_GPUS, composition_shown = 0;
  const tp_option extra[TP_MATRIX_N_EXTRA] = {
      {"for", TP_OPT_STRING, &for_shown, "CMD",
       "whose configurations to print: run's layers or ops' projections", 0, 0, "run|ops"},
      {"gpus", TP_OPT_INT, &gpus_shown, "N",
       "list as `run --gpus N` would: a mesh (dp x tp) of more than N GPUs is planned, one of "
       "fewer rejected",
       1, 4096, NULL},
      {"composition", TP_OPT_FLAG, &composition_shown, NULL,
       "print the supported-composition table generated from the rules instead (README's)", 0, 0,
       NULL},
  };
  int n_kept = 0, status = 0;
  tp_rc rc = take_own(argc, argv, kept, &n_kept, &own);
  if (rc != TP_OK) status = tp_exit_for(rc);
  else if (own.composition && n_kept > 1)
    status = tp_exit_for(own_usage("--composition", kept[1],
                                   "is not taken: the table has its "
                                   "own matrix (only --gpus applies)"));
  else if (own.composition) status = print_composition_table(own.gpus);
  else if (strcmp(own.target, "ops") == 0) status = print_ops_plan(n_kept, kept, &own, extra);
  else status = print_run_plan(n_kept, kept, &own, extra);
  free(kept);
  return status;
}
