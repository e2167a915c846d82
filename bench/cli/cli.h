/*
 * cli.h — the option parser every tpbench subcommand shares.
 *
 * A command describes its options in a table (tp_option): a long name, a type,
 * where the parsed value goes and one line of help. The caller fills every
 * destination with its default before parsing, so the same table prints the
 * defaults in --help and receives the user's values. Accepted forms are
 * `--name value` and `--name=value`; flags take no value; lists are
 * comma-separated and replace the default as a whole; `--` ends the options.
 *
 * A mistake (unknown option, missing, empty or malformed value) is printed to stderr
 * as "tpbench CMD: message" with a pointer to --help, recorded as this
 * thread's last error and returned as TP_EUSAGE; the caller exits with status 2.
 */
#ifndef TP_CLI_H
#define TP_CLI_H

#include <stdio.h>

#include "common/tp_error.h"

#define TP_LIST_MAX 32      /* items in one comma list */
#define TP_LIST_STORAGE 512 /* bytes of text in one string list */

/* A list of strings. Items are stored as offsets into the list's own storage,
 * so the struct may be copied by assignment. Read items with tp_str_list_at. */
typedef struct tp_str_list {
  int count;
  unsigned short start[TP_LIST_MAX];
  char storage[TP_LIST_STORAGE];
} tp_str_list;

typedef struct tp_int_list {
  int count;
  long long items[TP_LIST_MAX];
} tp_int_list;

/* Item i (0 <= i < list->count) of a string list. */
const char *tp_str_list_at(const tp_str_list *list, int i);

/* Replaces the list with the comma-separated items of text. Empty items, too
 * many items or too much text give TP_EUSAGE; the list is unchanged then. */
TP_MUST_CHECK tp_rc tp_str_list_set(tp_str_list *list, const char *text);

/* Replaces the list with the comma-separated whole numbers of text, each in
 * [min, max]. A malformed or out-of-range item gives TP_EUSAGE, list unchanged. */
TP_MUST_CHECK tp_rc tp_int_list_set(tp_int_list *list, const char *text, long long min,
                                    long long max);

/* Parses a whole decimal number in [min, max] ("what" names it in the
 * message: "--iters: 'abc' is not a whole number"). TP_EUSAGE otherwise. */
TP_MUST_CHECK tp_rc tp_parse_int(const char *what, const char *text, long long min, long long max,
                                 long long *out);

typedef enum {
  TP_OPT_FLAG,     /* dest: int*, set to 1 when present */
  TP_OPT_INT,      /* dest: int* */
  TP_OPT_INT64,    /* dest: long long* */
  TP_OPT_STRING,   /* dest: const char **, pointing into argv */
  TP_OPT_STR_LIST, /* dest: tp_str_list* */
  TP_OPT_INT_LIST  /* dest: tp_int_list* */
} tp_opt_type;

typedef struct tp_option {
  const char *name; /* long name without the dashes: "iters" */
  tp_opt_type type;
  void *dest;          /* see tp_opt_type */
  const char *metavar; /* value placeholder in --help ("N", "PATH"); NULL: one per type */
  const char *help;    /* one line */
  long long min, max;  /* INT, INT64, INT_LIST items: accepted range; both 0: the type's */
  const char *choices; /* STRING, STR_LIST items: accepted values "md|csv|json"; NULL: any */
} tp_option;

typedef struct tp_command {
  const char *name;    /* "ops": messages read "tpbench ops: ..." */
  const char *usage;   /* "tpbench ops [options]" */
  const char *summary; /* what the command does, printed by --help */
  const tp_option *options;
  int n_options;
} tp_command;

/*
 * Parses argv[1..argc-1] (argv[0] is the command's name) into the options'
 * destinations. Arguments that are not options go to positional[] (at most
 * max_positional; more is a usage error) and their number to *n_positional
 * (both may be NULL/0 for a command without positional arguments).
 * `--help` or `-h` prints the help to stdout, sets *help_shown = 1 and returns
 * TP_OK without parsing further; the caller then exits 0. The hidden
 * `--help-markdown` does the same with tp_cli_print_markdown. Otherwise
 * *help_shown = 0. Returns TP_EUSAGE (message already on stderr) on a mistake.
 */
TP_MUST_CHECK tp_rc tp_cli_parse(const tp_command *cmd, int argc, char **argv,
                                 const char **positional, int max_positional, int *n_positional,
                                 int *help_shown);

/* A finite decimal number, the whole of text, into *out: 1; else 0 (*out untouched). strtod
 * alone would also take hexadecimal ("0x10"), "inf" and "nan": no option means those. */
int tp_cli_decimal(const char *text, double *out);

/* This thread's last error message without its "file:line: " prefix: the
 * form to show a user ("--iters: 'abc' is not a whole number"). */
const char *tp_cli_last_message(void);

/* Prints usage, summary, every option with its current (default) value, then
 * the command's exit statuses and example (help_notes.h, by cmd->name). */
void tp_cli_print_help(const tp_command *cmd, FILE *out);

/* The same help as a section of the CLI reference in markdown (docs/cli.md): a
 * heading, the usage and summary as --help prints them, then a table of the
 * options (name, value, accepted values, default, help) with `|` escaped. What
 * the hidden `--help-markdown` prints; `tpbench --help-markdown` prints every
 * command's, so the reference is never typed twice (scripts/gen-cli-docs.sh). */
void tp_cli_print_markdown(const tp_command *cmd, FILE *out);

#endif /* TP_CLI_H */
