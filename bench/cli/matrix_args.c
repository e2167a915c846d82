/*
 * matrix_args.c — the matrix options `ops`, `run` and `matrix` share (see
 * matrix_args.h): --axis and the convenience flags, taken out of argv in
 * order and applied to a command's spec through its set_axis.
 */
#include "bench/cli/matrix_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/matrix/layer_matrix.h"
#include "bench/matrix/ops_matrix.h"

enum { AXIS_TEXT = 1024 };

/* One convenience flag: the axis it sets and how its value is parsed. */
typedef struct flag_alias {
  const char *flag;
  const char *axis;
  tp_opt_type type;
  const char *metavar;
  const char *help;
  long long min, max;
  const char *choices_ops; /* NULL: any */
  const char *choices_run; /* NULL: any; the flag is ops' only when run_field is -1 */
  ptrdiff_t ops_field;     /* its list in tp_ops_spec (-1: a string, no list) */
  ptrdiff_t run_field;     /* its list in tp_layer_spec (-1: run has no such axis) */
} flag_alias;

#define OPS(f) ((ptrdiff_t)offsetof(tp_ops_spec, f))
#define RUN(f) ((ptrdiff_t)offsetof(tp_layer_spec, f))

static const flag_alias aliases[TP_MATRIX_N_FLAGS] = {
    {"models", "model", TP_OPT_STR_LIST, "LIST",
     "models: presets (debug,1b,8b,70b,405b,qwen2.5-72b,mixtral-8x7b,deepseek-v3-dense) or "
     "the matrix file's",
     0, 0, NULL, NULL, OPS(models), RUN(model)},
    {"projs", "proj", TP_OPT_STR_LIST, "LIST", "projections (qkv,wo,w13,w2)", 0, 0, NULL, NULL,
     OPS(projs), -1},
    {"tokens", "tokens", TP_OPT_INT_LIST, "LIST", "tokens per step, whole TP group", 1, 1 << 24,
     NULL, NULL, OPS(tokens), -1},
    {"dtype", "dtype", TP_OPT_STR_LIST, "LIST",
     "element types, or an fp8 recipe (bf16 activations, quantized GEMMs)", 0, 0,
     TP_VOCAB_PIPED(TP_DTYPE_LIST), TP_VOCAB_PIPED(TP_DTYPE_LIST), OPS(dtypes), RUN(dtype)},
    {"tp", "tp", TP_OPT_INT_LIST, "LIST", "TP degrees (default: the number of workers)", 1,
     TP_MAX_DEGREE, NULL, NULL, OPS(tp), RUN(tp)},
    {"schedule", "schedule", TP_OPT_STR_LIST, "LIST", "dist_gemm schedules", 0, 0,
     TP_VOCAB_PIPED(TP_SCHEDULE_LIST), TP_VOCAB_PIPED(TP_SCHEDULE_LIST), OPS(schedules),
     RUN(schedule)},
    {"chunks", "chunks", TP_OPT_INT_LIST, "LIST",
     "chunks per rank's shard (0: the schedule decides)", 0, 64, NULL, NULL, OPS(chunks),
     RUN(chunks)},
    {"pass", "pass", TP_OPT_STR_LIST, "LIST", "passes timed per iteration", 0, 0, "fwd|bwd|fwd+bwd",
     "fwd|fwd+bwd", OPS(passes), RUN(pass)},
    {"save-gathered", "save_gathered", TP_OPT_STR_LIST, "LIST",
     "all-gather ops' backward: reuse the forward's gathered input (on) or gather again (off)", 0,
     0, "off|on", "off|on", OPS(save_gathered), RUN(save_gathered)},
    {"stock", "stock", TP_OPT_STR_LIST, "LIST",
     "stock variants: plain NCCL buffers, and window (the same NCCL collectives on symmetric "
     "windows: ncclMemAlloc + ncclCommWindowRegister); speedups are against the faster",
     0, 0, "plain|window", "plain|window", OPS(stocks), RUN(stock)},
    {"symm", "symm", TP_OPT_STR_LIST, "LIST",
     "dist_gemm's symmetric memory: ipc (tpbench's CUDA-IPC heap) and/or nccl (NCCL symmetric "
     "windows, peers through NCCL's LSA pointers); the same fused schedules over either",
     0, 0, "ipc|nccl", "ipc|nccl", OPS(symms), RUN(symm)},
    {"shape", "shape", TP_OPT_STRING, "M,N,K[,OP]",
     "a bare projection instead of models: M tokens, N out and K in features (global), OP "
     "ag_linear (default), ag_linear_multi or linear_rs; repeatable",
     0, 0, NULL, NULL, -1, -1},
};

static int is_ops(const char *owner) { return strcmp(owner, "ops") == 0; }

static int alias_in(const flag_alias *a, const char *owner) {
  return is_ops(owner) || a->run_field >= 0;
}

static const flag_alias *find_alias(const char *name, size_t len) {
  for (int i = 0; i < TP_MATRIX_N_FLAGS; i++)
    if (strlen(aliases[i].flag) == len && strncmp(aliases[i].flag, name, len) == 0)
      return &aliases[i];
  return NULL;
}

static tp_rc usage(const char *cmd, const char *msg) {
  fprintf(stderr, "tpbench %s: %s\nTry 'tpbench %s --help'.\n", cmd, msg, cmd);
  return TP_FAIL(TP_EUSAGE, "%s", msg);
}

/* ---- taking them out of argv --------------------------------------------------------------- */

/* The flag name of "--name" or "--name=value" if it is --axis or an alias; NULL otherwise. */
static const char *matrix_flag(const char *arg, const char **inline_value) {
  *inline_value = NULL;
  if (strncmp(arg, "--", 2) != 0) return NULL;
  const char *name = arg + 2, *eq = strchr(name, '=');
  size_t len = eq ? (size_t)(eq - name) : strlen(name);
  const char *flag = NULL;
  if (len == 4 && strncmp(name, "axis", 4) == 0) flag = "axis";
  else if (find_alias(name, len)) flag = find_alias(name, len)->flag;
  if (flag && eq) *inline_value = eq + 1;
  return flag;
}

tp_rc tp_matrix_items_take(const char *cmd, int argc, char **argv, char **kept, int *n_kept,
                           tp_matrix_items *out) {
  int n = 0, done = 0;
  memset(out, 0, sizeof *out);
  for (int i = 0; i < argc; ++i) {
    const char *value = NULL;
    const char *flag = i > 0 && !done ? matrix_flag(argv[i], &value) : NULL;
    if (i > 0 && !done && strcmp(argv[i], "--") == 0) done = 1;
    if (!flag) {
      kept[n++] = argv[i];
      continue;
    }
    if (!value && i + 1 < argc) value = argv[++i];
    if (out->count == TP_MATRIX_ITEMS_MAX) return usage(cmd, "too many --axis and axis flags");
    out->items[out->count++] = (tp_matrix_item){flag, value};
  }
  *n_kept = n;
  return TP_OK;
}

/* ---- applying them -------------------------------------------------------------------------- */

static void join_axes(const tp_matrix_target *t, char *buf, size_t cap) {
  int n = 0;
  const char *const *names = t->axis_names(&n);
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used < cap; i++) {
    int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", names[i]);
    if (w > 0) used += (size_t)w;
  }
}

/* The flag's value parsed as the flag always was (its messages included), as axis text. */
static tp_rc parse_flag(const tp_matrix_target *t, const flag_alias *a, const char *value,
                        char *text, size_t cap) {
  tp_str_list strings;
  tp_int_list numbers;
  const char *string = NULL;
  memset(&strings, 0, sizeof strings);
  memset(&numbers, 0, sizeof numbers);
  void *dest = a->type == TP_OPT_STR_LIST   ? (void *)&strings
               : a->type == TP_OPT_INT_LIST ? (void *)&numbers
                                            : (void *)&string;
  const tp_option opt = {
      a->flag, a->type, dest,   a->metavar,
      a->help, a->min,  a->max, is_ops(t->owner) ? a->choices_ops : a->choices_run};
  const tp_command one = {t->command, "", "", &opt, 1};
  char word[64];
  snprintf(word, sizeof word, "--%s", a->flag);
  char *args[] = {(char *)t->command, word, (char *)value, NULL};
  int help = 0;
  TP_TRY(tp_cli_parse(&one, value ? 3 : 2, args, NULL, 0, NULL, &help));
  size_t used = 0;
  text[0] = '\0';
  for (int i = 0; i < strings.count && used < cap; i++)
    used += (size_t)snprintf(text + used, cap - used, "%s%s", i ? "," : "",
                             tp_str_list_at(&strings, i));
  for (int i = 0; i < numbers.count && used < cap; i++)
    used += (size_t)snprintf(text + used, cap - used, "%s%lld", i ? "," : "", numbers.items[i]);
  if (string) snprintf(text, cap, "%s", string);
  return TP_OK;
}

/* "M,N,K[,OP]" → "MxNxK[:OP]", appended to shapes (comma-separated). */
static tp_rc add_shape(const tp_matrix_target *t, const char *value, char *shapes, size_t cap) {
  char item[160];
  size_t len = strlen(shapes), out = 0;
  int commas = 0;
  for (const char *p = value; *p && out + 1 < sizeof item; p++) {
    char c = *p;
    if (c == ',') c = "x:"[++commas >= 3];
    item[out++] = c;
  }
  item[out] = '\0';
  if (commas < 2 || commas > 3 || strstr(item, "xx") || item[0] == 'x' ||
      item[out ? out - 1 : 0] == 'x' || strchr(item, ':') == item + out - 1) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "--shape: '%s' is not M,N,K or M,N,K,OP (e.g. 4096,8192,4096,linear_rs)", value);
    return usage(t->command, msg);
  }
  if (len + out + 2 > cap) return usage(t->command, "--shape: too many shapes");
  snprintf(shapes + len, cap - len, "%s%s", len ? "," : "", item);
  return TP_OK;
}

static tp_rc set_axis(const tp_matrix_target *t, const char *axis, const char *text) {
  if (t->set_axis(t->spec, axis, text) == TP_OK) return TP_OK;
  char msg[700];
  snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
  return usage(t->command, msg);
}

static tp_rc apply_assignment(const tp_matrix_target *t, const char *assignment) {
  if (!assignment) return usage(t->command, "--axis needs a value: NAME=V1,V2");
  const char *eq = strchr(assignment, '=');
  char msg[300];
  if (!eq || eq == assignment || !eq[1]) {
    snprintf(msg, sizeof msg, "'%s' is not NAME=V1,V2 (e.g. seqlen=2048,4096)", assignment);
    return usage(t->command, msg);
  }
  char name[64];
  size_t len = (size_t)(eq - assignment);
  if (len >= sizeof name) {
    snprintf(msg, sizeof msg, "axis name in '%.100s' is too long", assignment);
    return usage(t->command, msg);
  }
  memcpy(name, assignment, len);
  name[len] = '\0';
  return set_axis(t, name, eq + 1);
}

tp_rc tp_matrix_items_apply(const tp_matrix_items *items, const tp_matrix_target *t) {
  char shapes[AXIS_TEXT] = "";
  for (int i = 0; i < items->count; i++) {
    const tp_matrix_item *it = &items->items[i];
    if (strcmp(it->flag, "axis") == 0) {
      TP_TRY(apply_assignment(t, it->value));
      continue;
    }
    const flag_alias *a = find_alias(it->flag, strlen(it->flag));
    if (!a) return TP_FAIL(TP_EINTERNAL, "no alias --%s", it->flag);
    if (!alias_in(a, t->owner)) {
      char axes[256], msg[512];
      join_axes(t, axes, sizeof axes);
      snprintf(msg, sizeof msg, "--%s sets the axis '%s', which %s does not have (its axes: %s)",
               a->flag, a->axis, t->owner, axes);
      return usage(t->command, msg);
    }
    char text[AXIS_TEXT];
    TP_TRY(parse_flag(t, a, it->value, text, sizeof text));
    if (strcmp(a->axis, "shape") == 0) {
      TP_TRY(add_shape(t, text, shapes, sizeof shapes));
      TP_TRY(set_axis(t, "shape", shapes));
    } else {
      TP_TRY(set_axis(t, a->axis, text));
    }
  }
  return TP_OK;
}

/* ---- --help rows ------------------------------------------------------------------------------
 */

int tp_matrix_flag_options(const char *owner, void *display, tp_option *out) {
  static const char *no_shape = NULL;
  int n = 0;
  for (int i = 0; i < TP_MATRIX_N_FLAGS; i++) {
    const flag_alias *a = &aliases[i];
    if (!alias_in(a, owner)) continue;
    ptrdiff_t field = is_ops(owner) ? a->ops_field : a->run_field;
    void *dest = field >= 0 ? (char *)display + field : (void *)&no_shape;
    out[n++] =
        (tp_option){a->flag, a->type, dest,   a->metavar,
                    a->help, a->min,  a->max, is_ops(owner) ? a->choices_ops : a->choices_run};
  }
  return n;
}

void tp_matrix_common_options(const char **matrix_file, const char **axis_dummy,
                              const char *axis_help, tp_option *out) {
  out[0] = (tp_option){"matrix",
                       TP_OPT_STRING,
                       matrix_file,
                       "FILE",
                       "JSON matrix file: {\"models\": {NAME: {dim, ...}}, \"axes\": {NAME: "
                       "[values]}}",
                       0,
                       0,
                       NULL};
  out[1] = (tp_option){"axis", TP_OPT_STRING, axis_dummy, "NAME=LIST", axis_help, 0, 0, NULL};
}
