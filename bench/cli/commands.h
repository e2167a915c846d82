/*
 * commands.h — the subcommands of `tpbench <command> [options]`.
 *
 * Each takes the arguments after `tpbench` (argv[0] is the command's name)
 * and returns the process exit status: 0 success, 1 failure, 2 the user's
 * input is wrong (tp_exit_for below says which is which). main.c
 * dispatches on the name.
 */
#ifndef TP_COMMANDS_H
#define TP_COMMANDS_H

#include "common/tp_error.h"
#include "store/tp_store.h"

/* `tpbench ops`: the op benchmark (stock vs dist_gemm TP linear ops).
 * Implemented in bench/gpu/cmd_ops.c (or bench/cmd_ops.c) where the build
 * has CUDA; otherwise bench/cli/cmd_ops_unavailable.c parses the same options
 * (ops_args.h), honours --list and reports that CUDA is missing. */
int tp_cmd_ops(int argc, char **argv);

/* `tpbench link`: peer bandwidth of each transport over a size sweep
 * (bench/gpu/cmd_link.c; a stand-in without CUDA). */
int tp_cmd_link(int argc, char **argv);

/* `tpbench run`: the layers (attention, FFN, transformer block), stock vs
 * dist_gemm, over a matrix (bench/gpu/cmd_run.c; without CUDA,
 * bench/cli/cmd_run_unavailable.c parses the same options, run_args.h). */
int tp_cmd_run(int argc, char **argv);

/* `tpbench drift`: a block trained N steps stock and dist_gemm from the same weights and data,
 * the loss and gradient norm of every step stored and compared with stock's
 * (bench/gpu/cmd_drift.c; without CUDA, bench/cli/cmd_drift_unavailable.c parses the same
 * options, drift_args.h, and --show prints a stored table). Exits 0 whatever the drift, 1
 * when something failed or a value is not finite. */
int tp_cmd_drift(int argc, char **argv);

/* `tpbench matrix`: run's configurations and rejections, no GPU needed
 * (bench/cli/cmd_matrix.c). */
int tp_cmd_matrix(int argc, char **argv);

/* `tpbench runs`: the runs of a database, one line each (bench/cli/cmd_runs.c). */
int tp_cmd_runs(int argc, char **argv);

/* `tpbench report`: the throughput table of a database (bench/cli/cmd_report.c). */
int tp_cmd_report(int argc, char **argv);

/* `tpbench compare BASE HEAD` (bench/cli/cmd_compare.c). Exits 0 when nothing
 * regressed, 1 when something did, 2 on bad input or any error. */
int tp_cmd_compare(int argc, char **argv);

/* `tpbench history` (bench/cli/cmd_history.c). */
int tp_cmd_history(int argc, char **argv);

/* `tpbench trace` (bench/cli/cmd_trace.c). */
int tp_cmd_trace(int argc, char **argv);

/* `tpbench import` (bench/cli/cmd_import.c). */
int tp_cmd_import(int argc, char **argv);

/* `tpbench dashboard` (bench/cli/cmd_dashboard.c). */
int tp_cmd_dashboard(int argc, char **argv);

/* `tpbench migrate`: an older database up to this binary's schema
 * (bench/cli/cmd_migrate.c). */
int tp_cmd_migrate(int argc, char **argv);

/* `tpbench profile -- CMD` (bench/cli/cmd_profile.c): exits with the command's own status
 * (127: not runnable; 128 + N: killed by signal N); 1 in a build without CUDA. */
int tp_cmd_profile(int argc, char **argv);

/* `tpbench project`: stock and dist_gemm predicted at other TP degrees from the database's
 * GEMM rates and link probe, validated against measured rows (bench/cli/cmd_project.c). */
int tp_cmd_project(int argc, char **argv);

/* The exit statuses every command uses are TP_EXIT_OK, TP_EXIT_FAILURE and TP_EXIT_USAGE
 * (common/tp_error.h, beside the codes tp_exit_for maps to them). */

/* ---- shared by the commands (bench/cli/commands.c) ---------------------------- */

/*
 * The exit status of a command that ended with rc: the one place the rule
 * of the README's Commands section lives. TP_OK: 0. The user's input is
 * wrong: 2 — TP_EUSAGE (an unknown option or value, a path that cannot be
 * used as asked: no such database, a folder or a device, an older schema
 * that needs `tpbench migrate`, an output folder that is missing) and
 * TP_EFOREIGN (a file that is not a tpbench database: empty, not SQLite,
 * another program's, a schema tpbench's migrations did not make, a newer
 * one). Every other code: 1, the command ran and something failed that is
 * not the input (an I/O error, a locked or broken database, a timeout, a
 * GPU failure). compare's 1 for a regression is its verdict, not a code.
 */
int tp_exit_for(tp_rc rc);

/*
 * status, unless what was written to stdout did not all get out (a full
 * disk, a closed descriptor): stdout is flushed and its error flag read,
 * and then "tpbench CMD: writing the output failed: REASON" goes to stderr
 * and the status is 1. A status that is already a failure is kept as it
 * is (the command said why). main.c passes every command, --help and
 * --version through it.
 */
int tp_exit_after_stdout(const char *cmd, int status);

/*
 * TP_OK when a file can be created at path: the folder that would hold it
 * exists, is a folder and may be written. TP_EUSAGE otherwise, naming the
 * folder and why: an output path that cannot be written as asked, refused
 * before the command's work.
 */
TP_MUST_CHECK tp_rc tp_check_output_folder(const char *path);

/*
 * Opens the database a reading command (report, history, trace, dashboard)
 * was given, read-only (tp_store_open_readonly), or says why not on stderr
 * as "tpbench CMD: ..." and returns the store's code for tp_exit_for.
 */
TP_MUST_CHECK tp_rc tp_open_for_reading(const char *cmd, const char *path, tp_store **store);

/* Prints this thread's last error as "tpbench CMD: message" on stderr; a
 * message that already starts with "CMD: " (a module naming itself, as
 * report/ and compare do) is not prefixed twice. */
void tp_print_error(const char *cmd);

#endif /* TP_COMMANDS_H */
