/*
 * fuzz_cli.c — libFuzzer target: the option parser (bench/cli/cli.c) through the
 * option table of every tpbench subcommand: ops, link, run, matrix, report,
 * compare, history, trace, dashboard, import and runs.
 *
 * Input: the command line, its words separated by NUL bytes, as a shell
 * would pass them: the first word names the command ("run\0--axis\0tp=2");
 * an input naming no command is skipped. Parsing only: no command runs, no
 * database is
 * opened. `run` and `matrix` read the file named by --matrix while parsing;
 * its value is replaced with a small valid matrix file in the scratch folder
 * (fuzz_matrix_file fuzzes the file's contents), so the input cannot name
 * /dev/stdin or a FIFO.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cli/ops_args.h"
#include "bench/cli/run_args.h"
#include "tests/fuzz/fuzz_cli.h"
#include "tests/fuzz/fuzz_util.h"
#ifdef TP_FUZZ_HAVE_LINK_ARGS
#include "bench/cli/link_args.h"
#endif

enum { MAX_ARGS = 64, MATRIX_ARG = 600 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int parse_ops(int argc, char **argv) {
  tp_ops_args args;
  tp_ops_args_defaults(&args);
  int help = 0;
  return tp_ops_args_parse(argc, argv, NULL, 0, &args, &help) == TP_OK;
}

static int parse_run_or_matrix(int argc, char **argv) {
  tp_run_args args;
  tp_run_args_defaults(&args);
  int help = 0;
  return tp_run_args_parse(argv[0], argc, argv, &args, &help) == TP_OK;
}

#ifdef TP_FUZZ_HAVE_LINK_ARGS
static int parse_link(int argc, char **argv) {
  tp_link_args args;
  tp_link_args_defaults(&args);
  int help = 0;
  return tp_link_args_parse(argc, argv, &args, &help) == TP_OK;
}
#endif

typedef struct command_parser {
  const char *name;
  int (*parse)(int argc, char **argv);
} command_parser;

static const command_parser parsers[] = {
    {"ops", parse_ops},
    {"run", parse_run_or_matrix},
    {"matrix", parse_run_or_matrix},
    {"report", fuzz_parse_report},
    {"compare", fuzz_parse_compare},
    {"history", fuzz_parse_history},
    {"trace", fuzz_parse_trace},
    {"dashboard", fuzz_parse_dashboard},
    {"import", fuzz_parse_import},
    {"runs", fuzz_parse_runs},
#ifdef TP_FUZZ_HAVE_LINK_ARGS
    {"link", parse_link},
#endif
};
enum { N_PARSERS = sizeof parsers / sizeof parsers[0] };

/* The matrix file every --matrix value is replaced with. */
static const char *matrix_file(void) {
  static const char text[] = "{\"preset\": \"quick\", \"axes\": {\"model\": [\"debug\"], "
                             "\"seqlen\": [256, 512], \"graph\": false}}";
  const char *path = fuzz_scratch_path("cli-matrix.json");
  static int written;
  if (!written) fuzz_write_file(path, (const uint8_t *)text, sizeof text - 1);
  written = 1;
  return path;
}

/* Points --matrix values at matrix_file(); `--matrix=X` is rewritten into
 * storage (MATRIX_ARG bytes per argument). */
static void redirect_matrix_files(int argc, char **argv, char storage[][MATRIX_ARG]) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--") == 0) return;
    if (strcmp(argv[i], "--matrix") == 0 && i + 1 < argc) {
      argv[++i] = (char *)matrix_file();
    } else if (strncmp(argv[i], "--matrix=", 9) == 0) {
      snprintf(storage[i], MATRIX_ARG, "--matrix=%s", matrix_file());
      argv[i] = storage[i];
    }
  }
}

/* Splits text (len bytes, text[len] == '\0') at NUL bytes into argv;
 * returns argc. */
static int split_args(char *text, size_t len, char **argv) {
  int argc = 0;
  for (size_t start = 0; start <= len && argc < MAX_ARGS; start += strlen(text + start) + 1)
    argv[argc++] = text + start;
  return argc;
}

static const command_parser *find_parser(const char *name) {
  for (int i = 0; i < N_PARSERS; ++i)
    if (strcmp(parsers[i].name, name) == 0) return &parsers[i];
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  char *argv[MAX_ARGS + 1] = {0};
  int argc = split_args(text, size, argv);
  const command_parser *cmd = find_parser(argv[0]);
  if (cmd) {
    static char storage[MAX_ARGS][MATRIX_ARG];
    redirect_matrix_files(argc, argv, storage);
    (void)cmd->parse(argc, argv);
  }
  free(text);
  return 0;
}
