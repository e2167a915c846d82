/*
 * fuzz_cli.h — the option parsers the fuzz_cli target drives, one per
 * tpbench subcommand. Those of report, compare, history, trace, dashboard,
 * import and runs are the commands' own parse_args, compiled from their sources by
 * fuzz_cli_command.c.in (tests/fuzz/CMakeLists.txt generates one file per
 * command), so the fuzzer parses with the real option tables.
 */
#ifndef TP_FUZZ_CLI_H
#define TP_FUZZ_CLI_H

/* Each parses argv (argv[0] is the command's name) as the command would,
 * with every destination zeroed, and does nothing else: no file is opened.
 * Returns 1 when the command line was accepted (or --help shown), 0 when it
 * was refused. */
int fuzz_parse_report(int argc, char **argv);
int fuzz_parse_compare(int argc, char **argv);
int fuzz_parse_history(int argc, char **argv);
int fuzz_parse_trace(int argc, char **argv);
int fuzz_parse_dashboard(int argc, char **argv);
int fuzz_parse_import(int argc, char **argv);
int fuzz_parse_runs(int argc, char **argv);

#endif /* TP_FUZZ_CLI_H */
