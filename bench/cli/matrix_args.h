/*
 * matrix_args.h — the one matrix interface of `tpbench ops`, `tpbench run` and
 * `tpbench matrix`: the same --matrix FILE (matrix_file.h), the same
 * repeatable --axis NAME=LIST, and the same convenience flags, each an alias
 * of one axis:
 *   --models → model   --projs → proj   --tokens → tokens   --dtype → dtype
 *   --tp → tp   --schedule → schedule   --chunks → chunks   --pass → pass
 *   --save-gathered → save_gathered   --shape M,N,K[,OP] → shape (ops; repeatable,
 *   each adds one "MxNxK[:OP]")
 * A command lists in --help the flags of its own axes; a flag or an --axis of
 * an axis it does not have is a usage error naming its axes. The spec is
 * built as: the command's base (ops' defaults, run's preset), then the file,
 * then every --axis and convenience flag in command-line order (a later one
 * replaces an earlier one's list; --shape adds to earlier --shape flags).
 */
#ifndef TP_MATRIX_ARGS_H
#define TP_MATRIX_ARGS_H

#include "bench/cli/cli.h"

enum { TP_MATRIX_ITEMS_MAX = 64 };

/* One --axis or convenience flag as it came, in order. */
typedef struct tp_matrix_item {
  const char *flag;  /* "axis", or the convenience flag's name ("tokens") */
  const char *value; /* its value; NULL when the command line ended before it */
} tp_matrix_item;

typedef struct tp_matrix_items {
  tp_matrix_item items[TP_MATRIX_ITEMS_MAX];
  int count;
} tp_matrix_items;

/* What a command's spec offers the interface. */
typedef struct tp_matrix_target {
  const char *command; /* "ops", "run", "matrix": messages read "tpbench CMD: ..." */
  const char *owner;   /* whose axes: "ops" or "run" (named in messages) */
  void *spec;
  tp_rc (*set_axis)(void *spec, const char *axis, const char *values);
  const char *const *(*axis_names)(int *count);
} tp_matrix_target;

/*
 * Moves every --axis and convenience flag ("--tokens V", "--tokens=V"), up to
 * a "--", out of argv into *out, in order; *kept receives the rest, argv[0]
 * first (kept has room for argc + 1). TP_EUSAGE (printed as "tpbench CMD:
 * ...") for more than TP_MATRIX_ITEMS_MAX of them.
 */
TP_MUST_CHECK tp_rc tp_matrix_items_take(const char *cmd, int argc, char **argv, char **kept,
                                         int *n_kept, tp_matrix_items *out);

/*
 * Applies items to target->spec in order: an --axis NAME=LIST through
 * set_axis; a convenience flag parsed with its own option definition (the
 * messages of before: "--tokens: 'x' is not a whole number"), then set on its
 * axis. Any mistake is TP_EUSAGE with "tpbench CMD: message" printed on
 * stderr: a malformed value, an axis (or a flag's axis) the owner does not
 * have, naming the owner's axes.
 */
TP_MUST_CHECK tp_rc tp_matrix_items_apply(const tp_matrix_items *items,
                                          const tp_matrix_target *target);

/* Fills out (room for TP_MATRIX_N_FLAGS) with the option rows --help shows for
 * the convenience flags of the axes owner has ("ops" or "run"), their
 * defaults read from the lists in display (a spec of the owner: a tp_ops_spec
 * for "ops", a tp_layer_spec for "run"); returns how many. They are listed
 * only: tp_matrix_items_take has taken the flags out of argv before the table
 * parses it. */
enum { TP_MATRIX_N_FLAGS = 12 };
int tp_matrix_flag_options(const char *owner, void *display, tp_option *out);

/* The --matrix and --axis rows of --help; axes_help names the owner's axes. */
enum { TP_MATRIX_N_COMMON = 2 };

/* Options of `tpbench matrix` itself (--for, --gpus, --composition), which it
 * takes out of argv first and hands to the run or ops parser to list. */
enum { TP_MATRIX_N_EXTRA = 3 };
void tp_matrix_common_options(const char **matrix_file, const char **axis_dummy,
                              const char *axis_help, tp_option *out);

#endif /* TP_MATRIX_ARGS_H */
