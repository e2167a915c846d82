/*
 * tp_report_util.c — shared writers of report/ (see tp_report_util.h). Every
 * output of tpbench (the throughput table, compare, history, the trace
 * export, the dashboard's data) escapes and prints through these, so a value
 * looks the same in each.
 */
#include "report/tp_report_util.h"
#include <ctype.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "report/tp_escape.h"

const char *tp_fmt_num(char *buf, size_t cap, double value, int decimals) {
  if (!isfinite(value)) return "";
  int n = snprintf(buf, cap, "%.*f", decimals, value);
  /* a value too long for the buffer in fixed notation: in exponent notation, never cut */
  if (n < 0 || (size_t)n >= cap) snprintf(buf, cap, "%.6g", value);
  return buf;
}

const char *tp_fmt_sci(char *buf, size_t cap, double value) {
  if (!isfinite(value)) return "";
  snprintf(buf, cap, "%.2e", value);
  return buf;
}

/* ---- markdown ----------------------------------------------------------- */

/* Stored text is outside input (a host name, a reason, a command line), and
 * markdown output is pasted into pull requests and read in terminals: nothing
 * in it may end a cell or a line, open a code span or link, reach the page as
 * HTML or the terminal as an escape sequence. Escapes are backslashes, which
 * every CommonMark renderer drops and a terminal reader reads past: "TP > 1"
 * stays as it is (a lone '>' inside a line is no markup), '<' is "\\<". */

/* Whether p starts what a renderer would take for an entity ("&amp;", "&#60;"). */
static int starts_entity(const char *p) {
  size_t name = strspn(p + 1, "#abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
  return name > 0 && p[1 + name] == ';';
}

static const char replacement_char[] = "\xEF\xBF\xBD"; /* U+FFFD */

void tp_md_text(FILE *out, const char *text) {
  const char *p = text ? text : "";
  size_t n = strlen(p);
  tp_char_class cls = TP_CHAR_PLAIN;
  for (size_t len; (len = tp_text_char((const unsigned char *)p, n, &cls)) > 0;
       p += len, n -= len) {
    if (cls == TP_CHAR_LINE_BREAK || cls == TP_CHAR_TAB) fputc(' ', out);
    else if (cls != TP_CHAR_PLAIN) fputs(replacement_char, out);
    else if (strchr("\\|`[]<", *p) || (*p == '&' && starts_entity(p))) fprintf(out, "\\%c", *p);
    else fwrite(p, 1, len, out);
  }
}

void tp_md_cell(FILE *out, const char *text) {
  fputs("| ", out);
  tp_md_text(out, text);
  fputc(' ', out);
}

/* "-" marks a blank so a reader sees it is missing, not 0. */
void tp_md_num(FILE *out, double value, int decimals) {
  char buf[64];
  const char *text = tp_fmt_num(buf, sizeof buf, value, decimals);
  tp_md_cell(out, *text ? text : "-");
}

/* Whether text reads the same inside a code span everywhere: a '|' would
 * still end a table cell (GitHub splits cells before code spans), a '<'
 * reads as a tag to any tool that greps the page for one, and a control
 * character or ill-formed byte would be shown raw. */
static int code_span_safe(const char *text) {
  const unsigned char *s = (const unsigned char *)text;
  size_t n = strlen(text);
  tp_char_class cls = TP_CHAR_PLAIN;
  for (size_t len; (len = tp_text_char(s, n, &cls)) > 0; s += len, n -= len)
    if ((cls != TP_CHAR_PLAIN && cls != TP_CHAR_LINE_BREAK) || *s == '|' || *s == '<') return 0;
  return 1;
}

/* Inside a code span nothing is markup, so only what ends the span's line
 * is replaced; text a code span cannot hold safely is written as escaped
 * text instead (it loses the code font, never a character). */
void tp_md_code(FILE *out, const char *text) {
  if (!code_span_safe(text)) {
    tp_md_text(out, text);
    return;
  }
  size_t run = 0, longest = 0;
  for (const char *p = text; *p; p++) {
    run = *p == '`' ? run + 1 : 0;
    if (run > longest) longest = run;
  }
  for (size_t i = 0; i <= longest; i++) fputc('`', out);
  int pad = text[0] == '`' || (*text && text[strlen(text) - 1] == '`');
  if (pad) fputc(' ', out);
  for (const char *p = text; *p; p++) {
    unsigned char c = (unsigned char)*p;
    fputc(c < 0x20 || c == 0x7f ? ' ' : c, out);
  }
  if (pad) fputc(' ', out);
  for (size_t i = 0; i <= longest; i++) fputc('`', out);
}

/* ---- CSV ---------------------------------------------------------------- */

/* A whole decimal number as the writers print it: [+-]digits[.digits][e[+-]digits].
 * A spreadsheet reads it as a number, never as a formula. */
static int is_plain_number(const char *s) {
  if (*s == '+' || *s == '-') s++;
  size_t digits = strspn(s, "0123456789");
  s += digits;
  if (*s == '.') {
    size_t frac = strspn(s + 1, "0123456789");
    digits += frac;
    s += 1 + frac;
  }
  if (digits == 0) return 0;
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '+' || *s == '-') s++;
    size_t exp = strspn(s, "0123456789");
    if (exp == 0) return 0;
    s += exp;
  }
  return *s == '\0';
}

int tp_csv_is_formula(const char *text) {
  return text && *text && strchr("=+-@\t\r", *text) && !is_plain_number(text);
}

void tp_csv_field(FILE *out, const char *text, int first) {
  if (!first) fputc(',', out);
  text = text ? text : "";
  int formula = tp_csv_is_formula(text);
  if (!formula && !strpbrk(text, ",\"\r\n")) {
    tp_safe_text(out, text, 1);
    return;
  }
  fputc('"', out);
  if (formula) fputc('\'', out); /* read as text, not run */
  /* doubled quotes; control characters but line breaks and tabs (which a quoted field may
   * hold) as U+FFFD, so a CSV printed to a terminal carries no escape sequence */
  const unsigned char *s = (const unsigned char *)text;
  size_t n = strlen(text);
  tp_char_class cls = TP_CHAR_PLAIN;
  for (size_t len; (len = tp_text_char(s, n, &cls)) > 0; s += len, n -= len) {
    if (*s == '"') fputs("\"\"", out);
    else if (cls == TP_CHAR_CONTROL || cls == TP_CHAR_ILL_FORMED) fputs(replacement_char, out);
    else fwrite(s, 1, len, out);
  }
  fputc('"', out);
}

void tp_csv_num(FILE *out, double value, int decimals) {
  char buf[64];
  tp_csv_field(out, tp_fmt_num(buf, sizeof buf, value, decimals), 0);
}

void tp_csv_int(FILE *out, int64_t value) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)value);
  tp_csv_field(out, buf, 0);
}

void tp_csv_end_line(FILE *out) { fputs("\r\n", out); }

/* ---- JSON --------------------------------------------------------------- */

void tp_json_set(tp_json_builder *jb, json_t *obj, const char *key, json_t *value) {
  if (!value || json_object_set_new(obj, key, value) != 0) jb->failed = 1;
}

void tp_json_append(tp_json_builder *jb, json_t *array, json_t *value) {
  if (!value || json_array_append_new(array, value) != 0) jb->failed = 1;
}

/* Whether s needs tp_json_str's cleaning: an ill-formed byte, DEL or a C1 control (jansson
 * escapes the C0 controls itself, and writes these raw). */
static int needs_cleaning(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = strlen(s);
  tp_char_class cls = TP_CHAR_PLAIN;
  for (size_t len; (len = tp_text_char(p, n, &cls)) > 0; p += len, n -= len)
    if (cls == TP_CHAR_ILL_FORMED || (cls == TP_CHAR_CONTROL && (*p >= 0x7f))) return 1;
  return 0;
}

json_t *tp_json_str(const char *s) {
  if (!s) return json_null();
  if (!needs_cleaning(s)) return json_string(s);
  /* each such character U+FFFD (3 bytes for at most 2): JSON printed to a terminal carries no
   * escape sequence, and jansson takes only UTF-8 */
  size_t n = strlen(s);
  char *clean = malloc(3 * n + 1), *to = clean;
  if (!clean) return NULL;
  const unsigned char *p = (const unsigned char *)s;
  tp_char_class cls = TP_CHAR_PLAIN;
  for (size_t len; (len = tp_text_char(p, n, &cls)) > 0; p += len, n -= len) {
    const int bad = cls == TP_CHAR_ILL_FORMED || (cls == TP_CHAR_CONTROL && *p >= 0x7f);
    memcpy(to, bad ? replacement_char : (const char *)p, bad ? 3 : len);
    to += bad ? 3 : len;
  }
  *to = '\0';
  json_t *value = json_string(clean);
  free(clean);
  return value;
}

json_t *tp_json_real(double value) { return isfinite(value) ? json_real(value) : json_null(); }

tp_rc tp_json_write_document(FILE *out, json_t *root, const tp_json_builder *jb, const char *who) {
  tp_rc rc = TP_OK;
  if (jb->failed)
    rc = TP_FAIL(TP_EOOM, "%s: building the JSON document failed (out of memory)", who);
  else if (json_dumpf(root, out, JSON_INDENT(2)) != 0 || fputc('\n', out) == EOF)
    rc = TP_FAIL(TP_EIO, "%s: writing the JSON document failed", who);
  json_decref(root);
  return rc;
}

/* ---- labels and statistics ---------------------------------------------- */

/* Appends " text" (or "text" at the start) when text is set. */
static void append_word(char *buf, size_t cap, size_t *len, const char *text) {
  if (!text || !*text || *len + 1 >= cap) return;
  /* memcpy rather than snprintf: the label is cut at cap on purpose */
  if (*len) buf[(*len)++] = ' ';
  size_t room = cap - *len - 1, n = strlen(text);
  if (n > room) n = room;
  memcpy(buf + *len, text, n);
  *len += n;
  buf[*len] = '\0';
}

static const char *column_text(sqlite3_stmt *st, int col) {
  return (const char *)sqlite3_column_text(st, col);
}

/* Reads up to n whole numbers separated by spaces from text into v; the
 * count read. */
static int read_numbers(const char *text, long long *v, int n) {
  int got = 0;
  for (const char *p = text; p && got < n;) {
    char *end = NULL;
    long long value = strtoll(p, &end, 10);
    if (end == p) break;
    v[got++] = value;
    p = end;
  }
  return got;
}

/* The word after the n-th space of text (NULL when there is none). */
static const char *word_after(const char *text, int n) {
  for (const char *p = text; p && *p; p++)
    if (*p == ' ' && --n == 0) return p + 1;
  return NULL;
}

/* Whether the word at p (ending at a space or the end) is word. */
static int word_is(const char *p, const char *word) {
  size_t len = strlen(word);
  return p && strncmp(p, word, len) == 0 && (p[len] == ' ' || p[len] == '\0');
}

/* A word of a fixed vocabulary as its static string (the row's text is not
 * terminated after it), NULL when it is none of them. */
static const char *static_word(const char *p, const char *const *words, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (word_is(p, words[i])) return words[i];
  return NULL;
}

/* The composition words of schemas 006 and 007 after the ten numbers: "dp ac
 * rs_sum comm_dtype fsdp_traffic symm graph_sizes", '-' for NULL. graph_sizes
 * is last, so it can point into the row's text. */
static void composition_from_text(const char *text, tp_config_axes *axes) {
  static const char *const acs[] = {"none", "selective", "full"};
  static const char *const sums[] = {"epilogue", "nccl"};
  static const char *const comm_dtypes[] = {"bf16", "fp8"};
  static const char *const symms[] = {"ipc", "nccl"};
  const char *dp = word_after(text, 10), *ac = word_after(text, 11);
  const char *rs = word_after(text, 12), *comm = word_after(text, 13);
  const char *traffic = word_after(text, 14), *symm = word_after(text, 15);
  const char *sizes = word_after(text, 16);
  axes->dp = dp ? atoi(dp) : 0;
  axes->ac = static_word(ac, acs, sizeof acs / sizeof acs[0]);
  axes->rs_sum = static_word(rs, sums, sizeof sums / sizeof sums[0]);
  axes->comm_dtype = static_word(comm, comm_dtypes, sizeof comm_dtypes / sizeof comm_dtypes[0]);
  axes->fsdp_traffic = word_is(traffic, "1");
  axes->symm = static_word(symm, symms, sizeof symms / sizeof symms[0]);
  axes->graph_sizes = sizes && strcmp(sizes, "-") != 0 ? sizes : NULL;
}

/* The eleventh label column: chunks, then the axes beyond the first ten
 * (TP_LABEL_COLUMNS). A column holding chunks alone leaves the defaults. */
static void extra_axes_from_text(const char *text, tp_config_axes *axes) {
  enum { CHUNKS, BATCH, SEQLEN, M, N, K, N_WEIGHTS, SP, GRAPH, SAVE, N_EXTRA };
  long long v[N_EXTRA] = {0};
  int got = read_numbers(text, v, N_EXTRA);
  axes->chunks = got >= 1 ? (int)v[CHUNKS] : 0;
  if (got < N_EXTRA) { /* chunks alone (or nothing): every other axis at its default */
    memset(v, 0, sizeof v);
    v[SP] = 1;
  }
  axes->batch = (int)v[BATCH];
  axes->seqlen = (int)v[SEQLEN];
  axes->m = v[M];
  axes->n = v[N];
  axes->k = v[K];
  axes->n_weights = (int)v[N_WEIGHTS];
  axes->sp = (int)v[SP];
  axes->graph = (int)v[GRAPH];
  axes->save_gathered = (int)v[SAVE];
  if (got == N_EXTRA) composition_from_text(text, axes);
}

void tp_axes_from_row(sqlite3_stmt *st, int col, tp_config_axes *axes) {
  *axes = (tp_config_axes){.kind = column_text(st, col),
                           .backend = column_text(st, col + 1),
                           .model = column_text(st, col + 2),
                           .op_or_layer = column_text(st, col + 3),
                           .proj = column_text(st, col + 4),
                           .tokens = sqlite3_column_int64(st, col + 5),
                           .dtype = column_text(st, col + 6),
                           .pass = column_text(st, col + 7),
                           .tp = sqlite3_column_int(st, col + 8),
                           .schedule = column_text(st, col + 9)};
  extra_axes_from_text(column_text(st, col + 10), axes);
}

static int is_set(const char *text) { return text && *text; }

/* The size a link probe moves per rank: whole MiB as "8 MiB", else bytes. */
static void link_size_word(char *word, size_t cap, int64_t bytes) {
  if (bytes > 0 && bytes % (1 << 20) == 0)
    snprintf(word, cap, "%lld MiB", (long long)(bytes >> 20));
  else snprintf(word, cap, "%lld B", (long long)bytes);
}

/* Whether the model axis leaves the GEMM's shape open: no model, or the name
 * `ops --shape` records for a bare projection (TP_SHAPE_MODEL of
 * bench/matrix/presets.h, which report/ does not include). */
static int names_no_model(const char *model) { return !is_set(model) || !strcmp(model, "shape"); }

/* What fixes the shape: tokens and batch, or the GEMM's own M×N×K where no
 * model implies it, or a link probe's bytes. */
static void append_shape(char *buf, size_t cap, size_t *len, const tp_config_axes *axes,
                         int is_link) {
  char word[96];
  if (axes->tokens > 0) {
    snprintf(word, sizeof word, "T=%lld", (long long)axes->tokens);
    append_word(buf, cap, len, word);
  }
  if (axes->batch > 1) {
    snprintf(word, sizeof word, "B=%d", axes->batch);
    append_word(buf, cap, len, word);
  }
  if (is_link) {
    link_size_word(word, sizeof word, axes->m);
    append_word(buf, cap, len, word);
  } else if (names_no_model(axes->model) && axes->m > 0) {
    snprintf(word, sizeof word, "%lld×%lld×%lld", (long long)axes->m, (long long)axes->n,
             (long long)axes->k);
    append_word(buf, cap, len, word);
  }
}

/* Who computed it, how, and the switches that are not at their default. */
static void append_method(char *buf, size_t cap, size_t *len, const tp_config_axes *axes,
                          int is_link) {
  char word[64];
  const char *kind = axes->kind;
  if (kind && !strcmp(kind, "gemm")) append_word(buf, cap, len, "GEMM alone");
  else if (kind && !strcmp(kind, "comm")) append_word(buf, cap, len, "collective alone");
  else append_word(buf, cap, len, axes->backend);
  append_word(buf, cap, len, axes->schedule);
  if (axes->chunks > 0) {
    snprintf(word, sizeof word, "x%d", axes->chunks);
    append_word(buf, cap, len, word);
  }
  if (!axes->sp && !is_link) append_word(buf, cap, len, "no-sp");
  if (axes->graph) append_word(buf, cap, len, "graph");
  if (axes->save_gathered) append_word(buf, cap, len, "save-gathered");
  if (axes->dp > 1) {
    snprintf(word, sizeof word, "dp%d", axes->dp);
    append_word(buf, cap, len, word);
  }
  if (axes->ac && strcmp(axes->ac, "none") != 0) {
    snprintf(word, sizeof word, "ac-%s", axes->ac);
    append_word(buf, cap, len, word);
  }
  if (axes->rs_sum && !strcmp(axes->rs_sum, "nccl")) append_word(buf, cap, len, "rs-nccl");
  if (axes->comm_dtype) {
    snprintf(word, sizeof word, "comm-%.8s", axes->comm_dtype);
    append_word(buf, cap, len, word);
  }
  if (axes->fsdp_traffic) append_word(buf, cap, len, "fsdp-traffic");
  if (axes->symm && !strcmp(axes->symm, "nccl")) append_word(buf, cap, len, "symm-nccl");
  if (axes->graph_sizes) {
    snprintf(word, sizeof word, "among %.50s", axes->graph_sizes);
    append_word(buf, cap, len, word);
  }
}

int tp_link_is_gemm_gap(const char *layer) {
  static const char prefix[] = "gemm_gap_";
  if (!layer || strncmp(layer, prefix, strlen(prefix)) != 0) return 0;
  /* a whole percent as the probe writes it: digits, no sign, no leading zero, at most 6 */
  const char *digits = layer + strlen(prefix);
  size_t n = strspn(digits, "0123456789");
  return n > 0 && n <= 6 && digits[n] == '\0' && (digits[0] != '0' || n == 1);
}

void tp_config_label(char *buf, size_t cap, const tp_config_axes *axes) {
  if (cap == 0) return;
  buf[0] = '\0';
  size_t len = 0;
  int is_link = axes->kind && !strcmp(axes->kind, "link");
  /* a link probe's GEMM between gaps (bench/gpu/link_pacing.h): a GEMM's M×N×K, no bytes */
  int is_gemm_gap = is_link && tp_link_is_gemm_gap(axes->op_or_layer);
  append_word(buf, cap, &len, axes->model);
  append_word(buf, cap, &len, axes->op_or_layer);
  append_word(buf, cap, &len, axes->proj);
  append_shape(buf, cap, &len, axes, is_link && !is_gemm_gap);
  append_word(buf, cap, &len, axes->dtype);
  append_word(buf, cap, &len, axes->pass);
  if (axes->tp > 0) {
    char word[32];
    snprintf(word, sizeof word, "tp=%d", axes->tp);
    append_word(buf, cap, &len, word);
  }
  append_method(buf, cap, &len, axes, is_link);
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double tp_median(double *v, size_t n) {
  if (n == 0) return NAN;
  qsort(v, n, sizeof *v, compare_doubles);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- --columns ---------------------------------------------------------- */

static int find_name(const char *name, size_t len, const char *const *names, int n_names) {
  for (int i = 0; i < n_names; i++)
    if (strlen(names[i]) == len && !strncmp(names[i], name, len)) return i;
  return -1;
}

/* "--columns: unknown column \"X\"; the columns are: all, a, b, ..." (the list cut where the
 * message buffer ends: the reader still sees the start of it and the name that was wrong). */
/* A name as typed, fit for a message: at most 40 bytes, anything unprintable as '?' (a
 * hostile argument must neither flood the message nor reach the terminal raw). */
static void printable_name(char *out, size_t cap, const char *name, size_t len) {
  const size_t keep = len < 40 ? len : 40;
  size_t o = 0;
  for (size_t i = 0; i < keep && o + 4 < cap; i++)
    out[o++] = isprint((unsigned char)name[i]) ? name[i] : '?';
  if (keep < len && o + 4 < cap) o += (size_t)snprintf(out + o, cap - o, "...");
  out[o] = '\0';
}

static tp_rc unknown_column(const char *name, size_t len, const char *const *names, int n_names) {
  if (len == 0) return TP_FAIL(TP_EUSAGE, "--columns: an empty name in the list");
  char shown[64];
  printable_name(shown, sizeof shown, name, len);
  char list[2048];
  size_t used = 0;
  list[0] = '\0';
  for (int i = 0; i < n_names && used < sizeof list; i++) {
    int n = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", names[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
  return TP_FAIL(TP_EUSAGE, "--columns: unknown column \"%s\"; the columns are: all, %s", shown,
                 list);
}

tp_rc tp_columns_parse(const char *spec, const char *const *names, int n_names, int *index,
                       int *count) {
  *count = 0;
  for (const char *p = spec;;) {
    size_t len = strcspn(p, ",");
    if (len == 3 && !strncmp(p, "all", 3))
      return TP_FAIL(TP_EUSAGE, "--columns: all stands alone (it shows every column)");
    int found = len ? find_name(p, len, names, n_names) : -1;
    if (found < 0) return unknown_column(p, len, names, n_names);
    for (int i = 0; i < *count; i++)
      if (index[i] == found)
        return TP_FAIL(TP_EUSAGE, "--columns: column \"%s\" is listed twice", names[found]);
    index[(*count)++] = found; /* no overflow: each name at most once */
    if (!p[len]) return TP_OK;
    p += len + 1;
  }
}
