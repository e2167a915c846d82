/*
 * tp_report_util.h — the small writers every report/ output shares (and
 * dashboards/, which embeds report output): markdown cells, RFC 4180 CSV
 * fields, JSON values built with jansson, numbers that print blank when
 * missing, a configuration's one-line label, a median.
 *
 * Conventions all of them keep: a missing number (NaN, infinity) is "-" in
 * markdown, an empty CSV field and JSON null, never 0; text is escaped for
 * its format, whatever bytes it holds.
 */
#ifndef TP_REPORT_UTIL_H
#define TP_REPORT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "common/tp_array.h"
#include "store/tp_store.h"

struct sqlite3_stmt;

/* printf of a number with fixed decimals into buf; "" when not finite. */
const char *tp_fmt_num(char *buf, size_t cap, double value, int decimals);

/* Scientific notation with two decimals; "" when not finite. */
const char *tp_fmt_sci(char *buf, size_t cap, double value);

/* ---- markdown ---- */

/* Text for a markdown line or cell, whatever bytes it holds, that reads the
 * same in a terminal and on a rendered page: line breaks and tabs become
 * spaces, other control characters (ESC, C1) and ill-formed UTF-8 U+FFFD;
 * '\\' '|' '`' '[' ']' '<', and '&' where it would start an entity, are
 * backslash-escaped (never HTML entities, which a terminal shows as they
 * are), so stored text can add no row, line, code span, link, HTML tag or
 * escape sequence. NULL is empty. */
void tp_md_text(FILE *out, const char *text);

/* "| text " with text escaped as tp_md_text. */
void tp_md_cell(FILE *out, const char *text);

/* A number cell; "-" when there is no number. */
void tp_md_num(FILE *out, double value, int decimals);

/* Inline code whose fence is longer than any run of backticks inside;
 * line breaks become spaces. Text holding '|', '<', another control
 * character or ill-formed UTF-8 is written as tp_md_text instead. */
void tp_md_code(FILE *out, const char *text);

/* ---- CSV (RFC 4180) ---- */

/* A field, preceded by ',' unless first; quoted when it holds a comma, a
 * quote or a line break, quotes doubled. NULL is an empty field. Text a
 * spreadsheet would run as a formula (tp_csv_is_formula) is written quoted
 * with a leading "'", so it shows as text. */
void tp_csv_field(FILE *out, const char *text, int first);

/* Whether text starts like a formula ('=', '+', '-', '@', tab, CR) and is
 * not a plain decimal number ("-1.5", "2.5e-03" stay numbers). */
int tp_csv_is_formula(const char *text);

/* A number field (preceded by ',') with fixed decimals; empty when there is
 * no number (NaN, infinity). */
void tp_csv_num(FILE *out, double value, int decimals);

/* An integer field, preceded by ','. */
void tp_csv_int(FILE *out, int64_t value);

/* Ends a CSV line: CRLF, RFC 4180's line end, the one every CSV of tpbench writes. */
void tp_csv_end_line(FILE *out);

/* ---- JSON ---- */

/* Remembers the first failure (out of memory) so builder code stays
 * straight-line: check failed once at the end. */
typedef struct tp_json_builder {
  int failed;
} tp_json_builder;

/* obj[key] = value, taking the reference; a NULL value marks a failure. */
void tp_json_set(tp_json_builder *jb, json_t *obj, const char *key, json_t *value);

/* Appends value to array, taking the reference; NULL marks a failure. */
void tp_json_append(tp_json_builder *jb, json_t *array, json_t *value);

/* A string, or null for NULL; bytes that are not UTF-8, DEL and C1 controls
 * become U+FFFD, so the output stays valid JSON and carries no terminal
 * escape (jansson escapes the C0 controls, ESC among them). NULL only when
 * out of memory. */
json_t *tp_json_str(const char *s);

/* A number, or null when not finite (JSON has no NaN). */
json_t *tp_json_real(double value);

/* Writes root (indented by 2) and a newline to out, then releases root. A
 * failure starts with who: "who: building the JSON document failed (out of
 * memory)" when jb saw one, "who: writing the JSON document failed" when the
 * write failed. */
TP_MUST_CHECK tp_rc tp_json_write_document(FILE *out, json_t *root, const tp_json_builder *jb,
                                           const char *who);

/* ---- --columns ---- */

/* A --columns list (comma-separated names, each once) read against a table's column names,
 * names[0..n_names): index[0..*count) gets each name's position in names, in the list's order
 * (index has room for n_names). "all" is the caller's to handle; inside a list it is refused,
 * as is a name listed twice (two CSV columns of one header, one JSON key). TP_EUSAGE with a
 * message naming the column that is wrong and, for an unknown one, every valid name: every
 * table's --columns (report, project) answers alike. */
TP_MUST_CHECK tp_rc tp_columns_parse(const char *spec, const char *const *names, int n_names,
                                     int *index, int *count);

/* ---- labels and statistics ---- */

/* The configs columns (table alias c) a configuration's label is made of,
 * in the order tp_axes_from_row reads them: list them in a SELECT and pass
 * the index of the first. The eleventh column is chunks followed by the
 * axes beyond the first ten, as text ("chunks batch seqlen m n k n_weights
 * sp graph save_gathered"): SQLite reads its leading number as chunks, so a
 * caller that indexes the columns after these counts eleven, as before, and
 * the label still sees every axis. */
#define TP_LABEL_COLUMNS                                                                           \
  "c.kind, c.backend, c.model, c.layer, c.proj, c.tokens, c.dtype, c.pass, c.tp, c.schedule, "     \
  "c.chunks || ' ' || c.batch || ' ' || c.seqlen || ' ' || c.m || ' ' || c.n || ' ' || c.k || "    \
  "' ' || c.n_weights || ' ' || c.sp || ' ' || c.graph || ' ' || c.save_gathered || ' ' || "       \
  "c.dp || ' ' || c.ac || ' ' || coalesce(c.rs_sum, '-') || ' ' || coalesce(c.comm_dtype, '-') "   \
  "|| ' ' || c.fsdp_traffic || ' ' || coalesce(c.symm, '-') || ' ' || "                            \
  "coalesce(c.graph_sizes, '-')"

/* Reads the TP_LABEL_COLUMNS of the statement's current row, starting at
 * column col, into *axes (kind, backend, model, op_or_layer, proj, tokens,
 * dtype, pass, tp, schedule, chunks, and from the eleventh column batch,
 * seqlen, m, n, k, n_weights, sp, graph, save_gathered, then the words dp, ac,
 * rs_sum of schema 006, comm_dtype, fsdp_traffic, symm of 007 and graph_sizes,
 * '-' for NULL). The strings point
 * into the row: they are valid until the statement is next stepped, reset or
 * finalized. NULL columns are NULL strings and 0; an eleventh column that
 * holds chunks alone leaves the other axes at their defaults (sp on, the
 * rest 0), so the label shows none of them. */
void tp_axes_from_row(struct sqlite3_stmt *st, int col, tp_config_axes *axes);

/* What a person calls a configuration, in one line, into buf (cut at cap,
 * nothing written when cap is 0). It names every axis of the configuration
 * key that is not implied by another or at its default, so two
 * configurations with different keys get different labels:
 * "llama3-8b ag_linear qkv T=4096 bf16 fwd tp=2 dist_gemm ce x2 graph".
 * In order: model, op or layer, projection; T=tokens (when set) and B=batch
 * (when above 1: the sequence length is then T/B); the GEMM shape M×N×K
 * when no model names it (a bare projection: no model, or `ops --shape`'s
 * "shape"), the bytes per rank for a link
 * probe ("8 MiB"); dtype, pass, tp=N (when set); the backend, or "GEMM
 * alone" / "collective alone" for kind gemm and comm; the schedule; xN
 * chunks (when set); then "no-sp" (sequence parallelism off, outside link
 * probes), "graph" (CUDA graph replay) and "save-gathered". NULL strings are
 * left out. The shape of a named model's projection is implied by the model,
 * projection, tokens and tp, and so is left out. */
void tp_config_label(char *buf, size_t cap, const tp_config_axes *axes);

/* A link probe layer of the GEMMs between gaps (bench/gpu/link_pacing.h: "gemm_gap_<pct>", the
 * whole percent in at most 6 digits, no sign or leading zero): a GEMM's time, no bytes on a link.
 * report and project read the same layers through it. */
int tp_link_is_gemm_gap(const char *layer);

/* Median of v[0..n), sorting v in place; NaN for n == 0. */
double tp_median(double *v, size_t n);

#endif /* TP_REPORT_UTIL_H */
