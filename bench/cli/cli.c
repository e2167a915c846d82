/*
 * cli.c — table-driven option parsing for tpbench's subcommands (see cli.h).
 *
 * The parser walks argv once, looks each `--name` up in the command's table
 * and converts its value by the option's type. It never keeps state of its
 * own: string values point into argv, lists are copied into the caller's
 * list structs.
 */
#include "bench/cli/cli.h"
#include "bench/cli/help_notes.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- values ------------------------------------------------------------ */

int tp_cli_decimal(const char *text, double *out) {
  if (!text || strpbrk(text, "xXpP")) return 0; /* hexadecimal's digits and exponent */
  char *end = NULL;
  errno = 0;
  const double value = strtod(text, &end);
  if (end == text || *end != '\0' || errno == ERANGE || !isfinite(value)) return 0;
  *out = value;
  return 1;
}

const char *tp_cli_last_message(void) { return tp_last_message(); }

/* Records the last error again as "prefix: text". The text is copied first:
 * the message buffer is also tp_fail's destination. */
static tp_rc fail_prefixed(const char *prefix) {
  char text[1024];
  snprintf(text, sizeof text, "%s", tp_cli_last_message());
  return TP_FAIL(TP_EUSAGE, "%s: %s", prefix, text);
}

tp_rc tp_parse_int(const char *what, const char *text, long long min, long long max,
                   long long *out) {
  const char *p = text;
  if (*p == '+' || *p == '-') p++;
  if (*p < '0' || *p > '9') return TP_FAIL(TP_EUSAGE, "%s: '%s' is not a whole number", what, text);
  errno = 0;
  char *end = NULL;
  long long value = strtoll(text, &end, 10);
  if (*end != '\0') return TP_FAIL(TP_EUSAGE, "%s: '%s' is not a whole number", what, text);
  if (errno == ERANGE || value < min || value > max)
    return TP_FAIL(TP_EUSAGE, "%s: %s is out of range [%lld, %lld]", what, text, min, max);
  *out = value;
  return TP_OK;
}

const char *tp_str_list_at(const tp_str_list *list, int i) {
  return list->storage + list->start[i];
}

/* Counts the comma-separated items of text; rejects empty ones. */
static tp_rc count_items(const char *text, int *count) {
  int n = 1;
  const char *item = text;
  for (const char *p = text;; p++) {
    if (*p != ',' && *p != '\0') continue;
    if (p == item) return TP_FAIL(TP_EUSAGE, "empty item in list '%s'", text);
    if (*p == '\0') break;
    n++;
    item = p + 1;
  }
  if (n > TP_LIST_MAX)
    return TP_FAIL(TP_EUSAGE, "list '%s' has %d items, at most %d are accepted", text, n,
                   TP_LIST_MAX);
  *count = n;
  return TP_OK;
}

tp_rc tp_str_list_set(tp_str_list *list, const char *text) {
  int n = 0;
  TP_TRY(count_items(text, &n));
  size_t len = strlen(text);
  if (len >= TP_LIST_STORAGE)
    return TP_FAIL(TP_EUSAGE, "list '%.40s...' is longer than %d characters", text,
                   TP_LIST_STORAGE - 1);
  tp_str_list parsed = {.count = n};
  memcpy(parsed.storage, text, len + 1);
  int item = 0;
  parsed.start[item++] = 0;
  for (size_t i = 0; i < len; i++) {
    if (parsed.storage[i] != ',') continue;
    parsed.storage[i] = '\0';
    parsed.start[item++] = (unsigned short)(i + 1);
  }
  *list = parsed;
  return TP_OK;
}

/* Parses a comma list of whole numbers; "what" names it in messages. */
static tp_rc parse_int_list(const char *what, const char *text, long long min, long long max,
                            tp_int_list *list) {
  tp_str_list words = {0};
  if (tp_str_list_set(&words, text) != TP_OK) return fail_prefixed(what);
  tp_int_list parsed = {.count = words.count};
  for (int i = 0; i < words.count; i++)
    TP_TRY(tp_parse_int(what, tp_str_list_at(&words, i), min, max, &parsed.items[i]));
  *list = parsed;
  return TP_OK;
}

tp_rc tp_int_list_set(tp_int_list *list, const char *text, long long min, long long max) {
  return parse_int_list("list", text, min, max, list);
}

/* ---- messages ---------------------------------------------------------- */

/* Prints "tpbench CMD: message" and the --help hint, records the message. */
static tp_rc usage_error(const tp_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static tp_rc usage_error(const tp_command *cmd, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "tpbench %s: %s\nTry 'tpbench %s --help'.\n", cmd->name, msg, cmd->name);
  return TP_FAIL(TP_EUSAGE, "%s", msg);
}

/* ---- help -------------------------------------------------------------- */

static const char *default_metavar(tp_opt_type type) {
  switch (type) {
  case TP_OPT_FLAG: return "";
  case TP_OPT_INT:
  case TP_OPT_INT64: return "N";
  case TP_OPT_STRING: return "TEXT";
  case TP_OPT_STR_LIST:
  case TP_OPT_INT_LIST: return "LIST";
  }
  return "";
}

/* Renders the option's current value, which is its default before parsing. */
static void format_value(const tp_option *opt, char *buf, size_t cap) {
  buf[0] = '\0';
  switch (opt->type) {
  case TP_OPT_FLAG: snprintf(buf, cap, "%s", *(const int *)opt->dest ? "on" : "off"); break;
  case TP_OPT_INT: snprintf(buf, cap, "%d", *(const int *)opt->dest); break;
  case TP_OPT_INT64: snprintf(buf, cap, "%lld", *(const long long *)opt->dest); break;
  case TP_OPT_STRING: {
    const char *s = *(const char *const *)opt->dest;
    snprintf(buf, cap, "%s", s ? s : "");
    break;
  }
  case TP_OPT_STR_LIST: {
    const tp_str_list *list = opt->dest;
    size_t used = 0;
    for (int i = 0; i < list->count && used < cap; i++)
      used +=
          (size_t)snprintf(buf + used, cap - used, "%s%s", i ? "," : "", tp_str_list_at(list, i));
    break;
  }
  case TP_OPT_INT_LIST: {
    const tp_int_list *list = opt->dest;
    size_t used = 0;
    for (int i = 0; i < list->count && used < cap; i++)
      used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? "," : "", list->items[i]);
    break;
  }
  }
}

/* Whether help shows "[default: value]": not for flags, not for an option
 * without a default (an empty list, no string), and not where the help text
 * already says its default in words. */
static int shows_default(const tp_option *opt, const char *value) {
  if (opt->type == TP_OPT_FLAG || value[0] == '\0') return 0;
  return strstr(opt->help, "default") == NULL;
}

void tp_cli_print_help(const tp_command *cmd, FILE *out) {
  fprintf(out, "Usage: %s\n\n%s\n\nOptions:\n", cmd->usage, cmd->summary);
  for (int i = 0; i < cmd->n_options; i++) {
    const tp_option *opt = &cmd->options[i];
    const char *metavar = opt->metavar ? opt->metavar : default_metavar(opt->type);
    char left[64];
    snprintf(left, sizeof left, "--%s%s%s", opt->name, metavar[0] ? " " : "", metavar);
    char value[256];
    format_value(opt, value, sizeof value);
    fprintf(out, "  %-22s %s", left, opt->help);
    if (opt->choices) fprintf(out, " (one of %s)", opt->choices);
    if (shows_default(opt, value)) fprintf(out, " [default: %s]", value);
    fputc('\n', out);
  }
  fprintf(out, "  %-22s %s\n", "--help", "show this help and exit");
  tp_help_notes_print(cmd->name, out);
}

/* Writes text with markdown table cells' metacharacters escaped: `|` ends a
 * cell and a line break ends the row. */
static void put_cell(const char *text, FILE *out) {
  for (const char *p = text; *p; p++) {
    if (*p == '|') fputs("\\|", out);
    else if (*p == '\n') fputc(' ', out);
    else fputc(*p, out);
  }
}

/* "md|csv|json" as "`md`, `csv`, `json`". */
static void put_choices(const char *choices, FILE *out) {
  fputc('`', out);
  for (const char *p = choices; *p; p++) {
    if (*p == '|') fputs("`, `", out);
    else fputc(*p, out);
  }
  fputc('`', out);
}

/* The words of usage that name the command's form: "matrix --for ops" from
 * "tpbench matrix --for ops [...]" (an option with a fixed lowercase value),
 * else the command's name. */
static void print_heading(const tp_command *cmd, FILE *out) {
  char form[64];
  const char *rest = "";
  size_t skip = strlen("tpbench ") + strlen(cmd->name) + 1;
  if (strlen(cmd->usage) > skip && strncmp(cmd->usage + skip, "--", 2) == 0)
    rest = cmd->usage + skip;
  const char *space = strchr(rest, ' ');
  size_t len = 0;
  if (space && space[1] >= 'a' && space[1] <= 'z') {
    const char *end = strchr(space + 1, ' ');
    len = end ? (size_t)(end - rest) : strlen(rest);
  }
  snprintf(form, sizeof form, "%.*s", (int)len, rest);
  fprintf(out, "## tpbench %s%s%s\n\n", cmd->name, len ? " " : "", form);
}

void tp_cli_print_markdown(const tp_command *cmd, FILE *out) {
  print_heading(cmd, out);
  fprintf(out, "```text\nUsage: %s\n\n%s\n```\n\n", cmd->usage, cmd->summary);
  fprintf(out, "| option | value | accepted | default | what it sets |\n|---|---|---|---|---|\n");
  for (int i = 0; i < cmd->n_options; i++) {
    const tp_option *opt = &cmd->options[i];
    const char *metavar = opt->metavar ? opt->metavar : default_metavar(opt->type);
    char value[256];
    format_value(opt, value, sizeof value);
    fprintf(out, "| `--%s` | %s%s%s | ", opt->name, metavar[0] ? "`" : "", metavar,
            metavar[0] ? "`" : "");
    if (opt->choices) put_choices(opt->choices, out);
    fputs(" | ", out);
    if (shows_default(opt, value)) {
      fputc('`', out);
      put_cell(value, out);
      fputc('`', out);
    }
    fputs(" | ", out);
    put_cell(opt->help, out);
    fputs(" |\n", out);
  }
  fprintf(out, "| `--help` |  |  |  | show this help and exit |\n\n");
}

/* ---- parsing ----------------------------------------------------------- */

static const tp_option *find_option(const tp_command *cmd, const char *name, size_t len) {
  for (int i = 0; i < cmd->n_options; i++) {
    const char *candidate = cmd->options[i].name;
    if (strlen(candidate) == len && strncmp(candidate, name, len) == 0) return &cmd->options[i];
  }
  return NULL;
}

/* True if word is one of the '|'-separated choices. */
static int is_choice(const char *choices, const char *word) {
  size_t len = strlen(word);
  for (const char *p = choices; *p;) {
    const char *bar = strchr(p, '|');
    size_t item = bar ? (size_t)(bar - p) : strlen(p);
    if (item == len && strncmp(p, word, len) == 0) return 1;
    if (!bar) break;
    p = bar + 1;
  }
  return 0;
}

static void int_range(const tp_option *opt, long long type_min, long long type_max, long long *min,
                      long long *max) {
  int unset = opt->min == 0 && opt->max == 0;
  *min = unset ? type_min : opt->min;
  *max = unset ? type_max : opt->max;
}

/* Stores one option's value; messages are recorded, not yet printed. */
static tp_rc store_value(const tp_option *opt, const char *value) {
  char what[80];
  snprintf(what, sizeof what, "--%s", opt->name);
  long long min = 0, max = 0, parsed = 0;
  switch (opt->type) {
  case TP_OPT_FLAG: *(int *)opt->dest = 1; return TP_OK;
  case TP_OPT_INT:
    int_range(opt, INT_MIN, INT_MAX, &min, &max);
    TP_TRY(tp_parse_int(what, value, min, max, &parsed));
    *(int *)opt->dest = (int)parsed;
    return TP_OK;
  case TP_OPT_INT64:
    int_range(opt, LLONG_MIN, LLONG_MAX, &min, &max);
    return tp_parse_int(what, value, min, max, (long long *)opt->dest);
  case TP_OPT_STRING:
    /* No string option means anything when empty: `--db ''` is a slip of
     * the shell, better said than taken for a file name. */
    if (!*value)
      return TP_FAIL(TP_EUSAGE, "%s: the value is empty (give a %s)", what,
                     opt->metavar ? opt->metavar : default_metavar(opt->type));
    if (opt->choices && !is_choice(opt->choices, value))
      return TP_FAIL(TP_EUSAGE, "%s: '%s' is not one of %s", what, value, opt->choices);
    *(const char **)opt->dest = value;
    return TP_OK;
  case TP_OPT_STR_LIST: {
    tp_str_list list = {0};
    if (tp_str_list_set(&list, value) != TP_OK) return fail_prefixed(what);
    for (int i = 0; opt->choices && i < list.count; i++)
      if (!is_choice(opt->choices, tp_str_list_at(&list, i)))
        return TP_FAIL(TP_EUSAGE, "%s: '%s' is not one of %s", what, tp_str_list_at(&list, i),
                       opt->choices);
    *(tp_str_list *)opt->dest = list;
    return TP_OK;
  }
  case TP_OPT_INT_LIST:
    int_range(opt, LLONG_MIN, LLONG_MAX, &min, &max);
    return parse_int_list(what, value, min, max, opt->dest);
  }
  return TP_FAIL(TP_EINTERNAL, "%s: unknown option type %d", what, (int)opt->type);
}

/* Parses the option at argv[*i] ("--name" or "--name=value"), advancing *i
 * past a separate value. */
static tp_rc parse_option(const tp_command *cmd, int argc, char **argv, int *i) {
  const char *arg = argv[*i] + 2;
  const char *eq = strchr(arg, '=');
  size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
  const tp_option *opt = find_option(cmd, arg, name_len);
  if (!opt) return usage_error(cmd, "unknown option '--%.*s'", (int)name_len, arg);
  const char *value = NULL;
  if (opt->type == TP_OPT_FLAG) {
    if (eq) return usage_error(cmd, "--%s is a flag and takes no value", opt->name);
  } else if (eq) {
    value = eq + 1;
  } else if (*i + 1 < argc) {
    value = argv[++*i];
  } else {
    return usage_error(cmd, "--%s needs a value", opt->name);
  }
  if (store_value(opt, value) != TP_OK) return usage_error(cmd, "%s", tp_cli_last_message());
  return TP_OK;
}

tp_rc tp_cli_parse(const tp_command *cmd, int argc, char **argv, const char **positional,
                   int max_positional, int *n_positional, int *help_shown) {
  int n_pos = 0;
  int options_done = 0;
  *help_shown = 0;
  if (n_positional) *n_positional = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    int is_option = !options_done && arg[0] == '-' && arg[1] != '\0';
    if (is_option && (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)) {
      tp_cli_print_help(cmd, stdout);
      *help_shown = 1;
      return TP_OK;
    }
    if (is_option && strcmp(arg, "--help-markdown") == 0) { /* hidden: docs/cli.md */
      tp_cli_print_markdown(cmd, stdout);
      *help_shown = 1;
      return TP_OK;
    }
    if (is_option && strcmp(arg, "--") == 0) {
      options_done = 1;
    } else if (is_option && arg[1] == '-') {
      TP_TRY(parse_option(cmd, argc, argv, &i));
    } else if (is_option) {
      return usage_error(cmd, "unknown option '%s' (options are spelled --name)", arg);
    } else if (n_pos < max_positional) {
      positional[n_pos++] = arg;
    } else if (max_positional == 0) {
      return usage_error(cmd, "unexpected argument '%s' (%s takes options only)", arg, cmd->name);
    } else {
      return usage_error(cmd, "unexpected argument '%s' (%s takes at most %d)", arg, cmd->name,
                         max_positional);
    }
  }
  if (n_positional) *n_positional = n_pos;
  return TP_OK;
}
