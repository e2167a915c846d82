/*
 * main.c — `tpbench <command> [options]`: finds the subcommand and hands it
 * the rest of the command line (commands.h). Also --help and --version,
 * which names the git commit the binary was built from. Whatever ran, a
 * write to stdout that failed (a full disk) makes the exit status 1
 * (tp_exit_after_stdout).
 */
#include <stdio.h>
#include <string.h>

#include "bench/cli/commands.h"
#include "tp_buildinfo.h"

typedef struct command_entry {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} command_entry;

static const command_entry commands[] = {
    {"ops", tp_cmd_ops, "time stock vs dist_gemm TP linear ops and store the results"},
    {"link", tp_cmd_link, "measure peer bandwidth: copy engine, SM copy, NCCL collectives"},
    {"run", tp_cmd_run, "time the layers (attention, FFN, block) stock vs dist_gemm over a matrix"},
    {"drift", tp_cmd_drift, "train a block N steps stock and dist_gemm: loss and grad norm drift"},
    {"matrix", tp_cmd_matrix, "print run's configurations and rejections (no GPU needed)"},
    {"runs", tp_cmd_runs, "list the runs of a database: id, commit, time, host, counts"},
    {"report", tp_cmd_report, "print the throughput table of a database"},
    {"compare", tp_cmd_compare, "which configurations got slower between two commits or runs"},
    {"history", tp_cmd_history, "one configuration's median and spread across commits"},
    {"trace", tp_cmd_trace, "a configuration's GPU timeline as Chrome trace JSON (Perfetto)"},
    {"import", tp_cmd_import, "merge runs from other databases"},
    {"dashboard", tp_cmd_dashboard, "write a static, offline HTML dashboard of a database"},
    {"migrate", tp_cmd_migrate, "bring a database of an older tpbench up to this schema"},
    {"profile", tp_cmd_profile, "run a CUDA program or job with the collector injected"},
    {"project", tp_cmd_project, "predict stock and dist_gemm at other TP degrees and link speeds"},
};
enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

static void print_usage(FILE *out) {
  fprintf(out, "Usage: tpbench <command> [options]\n\n"
               "Benchmarks stock against dist_gemm (collective fused into the GEMM)\n"
               "tensor-parallel layers and keeps the results in SQLite.\n\nCommands:\n");
  for (int i = 0; i < N_COMMANDS; i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\n  tpbench <command> --help   options of a command, its exit statuses, an example\n"
          "  tpbench --version          version and the git commit it was built from\n"
          "\nExit status: 0 success; 1 the command ran and something failed that is not the "
          "input;\n2 the input is wrong. Each command's --help says what its 1 means.\n");
}

static void print_version(void) {
  printf("tpbench %s (commit %s%s)\n", TPBENCH_VERSION, TP_BUILD_COMMIT,
         TP_BUILD_DIRTY ? ", with uncommitted changes" : "");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_usage(stderr);
    return TP_EXIT_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
    print_usage(stdout);
    return tp_exit_after_stdout(NULL, TP_EXIT_OK);
  }
  if (strcmp(name, "--version") == 0) {
    print_version();
    return tp_exit_after_stdout(NULL, TP_EXIT_OK);
  }
  for (int i = 0; i < N_COMMANDS; i++)
    if (strcmp(name, commands[i].name) == 0)
      return tp_exit_after_stdout(name, commands[i].run(argc - 1, argv + 1));
  fprintf(stderr, "tpbench: unknown command '%s'\n\n", name);
  print_usage(stderr);
  return TP_EXIT_USAGE;
}
