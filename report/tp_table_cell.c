/*
 * tp_table_cell.c — a table's cell and its rendering (see tp_table_cell.h).
 */
#include "report/tp_table_cell.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "report/tp_report_util.h"

void tp_cell_clear(tp_cell *c) { memset(c, 0, offsetof(tp_cell, buf)); }

void tp_cell_set_text(tp_cell *c, const char *text) {
  c->type = text ? TP_CELL_TEXT : TP_CELL_NONE;
  c->text = text;
}

void tp_cell_set_own_text(tp_cell *c) {
  c->type = TP_CELL_TEXT;
  c->text = c->buf;
}

void tp_cell_set_num(tp_cell *c, double value) {
  c->type = isfinite(value) ? TP_CELL_NUM : TP_CELL_NONE;
  c->num = value;
}

void tp_cell_set_int(tp_cell *c, int64_t value) {
  c->type = TP_CELL_INT;
  c->i = value;
}

void tp_cell_set_bool(tp_cell *c, int value) {
  c->type = TP_CELL_BOOL;
  c->i = value != 0;
}

void tp_cell_md(FILE *out, const tp_cell *c, int decimals, const char *empty_text) {
  char buf[64];
  switch (c->type) {
  case TP_CELL_NONE: tp_md_cell(out, "-"); break;
  case TP_CELL_TEXT: tp_md_cell(out, c->text[0] ? c->text : empty_text); break;
  case TP_CELL_NUM: tp_md_num(out, c->num, decimals); break;
  case TP_CELL_SCI: tp_md_cell(out, tp_fmt_sci(buf, sizeof buf, c->num)); break;
  case TP_CELL_INT:
    snprintf(buf, sizeof buf, "%lld", (long long)c->i);
    tp_md_cell(out, buf);
    break;
  case TP_CELL_BOOL: tp_md_cell(out, c->i ? "yes" : "no"); break;
  }
}

void tp_cell_csv(FILE *out, const tp_cell *c, int decimals, int index, int count) {
  const int first = index == 0;
  const int empty = c->type == TP_CELL_NONE || (c->type == TP_CELL_TEXT && !c->text[0]);
  if (count == 1 && empty) {
    fputs("\"\"", out);
    return;
  }
  char buf[64];
  switch (c->type) {
  case TP_CELL_NONE: tp_csv_field(out, "", first); break;
  case TP_CELL_TEXT: tp_csv_field(out, c->text, first); break;
  case TP_CELL_NUM: tp_csv_field(out, tp_fmt_num(buf, sizeof buf, c->num, decimals), first); break;
  case TP_CELL_SCI: tp_csv_field(out, tp_fmt_sci(buf, sizeof buf, c->num), first); break;
  case TP_CELL_INT:
  case TP_CELL_BOOL:
    snprintf(buf, sizeof buf, "%lld", (long long)c->i);
    tp_csv_field(out, buf, first);
    break;
  }
}

json_t *tp_cell_json(const tp_cell *c) {
  switch (c->type) {
  case TP_CELL_NONE: return json_null();
  case TP_CELL_TEXT: return tp_json_str(c->text);
  case TP_CELL_NUM:
  case TP_CELL_SCI: return tp_json_real(c->num);
  case TP_CELL_INT: return json_integer(c->i);
  case TP_CELL_BOOL: return json_boolean(c->i);
  }
  return json_null();
}
