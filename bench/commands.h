/*
 * commands.h — the subcommands of `tpbench <command> [options]`.
 *
 * Each takes the arguments after `tpbench` (argv[0] is the command's name)
 * and returns the process exit status: 0 success, 1 failure, 2 usage error.
 * main.c dispatches on the name.
 */
#ifndef TP_COMMANDS_H
#define TP_COMMANDS_H

/* `tpbench ops`: the op benchmark (stock vs dist_gemm TP linear ops).
 * Implemented in bench/gpu/cmd_ops.c (or bench/cmd_ops.c) where the build
 * has CUDA; otherwise bench/cmd_ops_unavailable.c parses the same options
 * (ops_args.h), honours --list and reports that CUDA is missing. */
int tp_cmd_ops(int argc, char **argv);

/* `tpbench link`: peer bandwidth of each transport over a size sweep
 * (bench/gpu/cmd_link.c; a stand-in without CUDA). */
int tp_cmd_link(int argc, char **argv);

/* `tpbench run`: the layers (attention, FFN, transformer block), stock vs
 * dist_gemm, over a matrix (bench/gpu/cmd_run.c; without CUDA,
 * bench/cmd_run_unavailable.c parses the same options, run_args.h). */
int tp_cmd_run(int argc, char **argv);

/* `tpbench matrix`: run's configurations and rejections, no GPU needed
 * (bench/cmd_matrix.c). */
int tp_cmd_matrix(int argc, char **argv);

/* `tpbench report`: the throughput table of a database (bench/cmd_report.c). */
int tp_cmd_report(int argc, char **argv);

/* `tpbench compare BASE HEAD` (bench/cmd_compare.c). Exits 0 when nothing
 * regressed, 1 when something did, 2 on bad input or any error. */
int tp_cmd_compare(int argc, char **argv);

/* `tpbench history` (bench/cmd_history.c). */
int tp_cmd_history(int argc, char **argv);

/* `tpbench trace` (bench/cmd_trace.c). */
int tp_cmd_trace(int argc, char **argv);

/* `tpbench import` (bench/cmd_import.c). */
int tp_cmd_import(int argc, char **argv);

/* `tpbench dashboard` (bench/cmd_dashboard.c). */
int tp_cmd_dashboard(int argc, char **argv);

/* `tpbench migrate`: an older database up to this binary's schema
 * (bench/cmd_migrate.c). */
int tp_cmd_migrate(int argc, char **argv);

/* Exit statuses every command uses. */
enum { TP_EXIT_OK = 0, TP_EXIT_FAILURE = 1, TP_EXIT_USAGE = 2 };

#endif /* TP_COMMANDS_H */
