/*
 * tp_table_cell.h — one value of a table's row, as `report`'s and `project`'s column registries
 * compute it (tp_report_columns.c, tp_project_columns.c), and its rendering in markdown, CSV
 * and JSON: both tables show a number, a text or a missing value the same way.
 */
#ifndef TP_TABLE_CELL_H
#define TP_TABLE_CELL_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

typedef enum {
  TP_CELL_NONE,
  TP_CELL_TEXT,
  TP_CELL_NUM,
  TP_CELL_INT,
  TP_CELL_BOOL,
  TP_CELL_SCI
} tp_cell_type;

/* One value of one row: text, number (NaN: none), integer, boolean, or a number shown in
 * scientific notation. */
typedef struct {
  tp_cell_type type;
  const char *text;
  double num;
  int64_t i;
  char buf[1200]; /* text composed for the cell */
} tp_cell;

/* Empties the cell before its getter runs (not its buffer: a getter composes there). */
void tp_cell_clear(tp_cell *c);
void tp_cell_set_text(tp_cell *c, const char *text); /* NULL: none */
void tp_cell_set_own_text(tp_cell *c);               /* the text composed in c->buf */
void tp_cell_set_num(tp_cell *c, double value);      /* not finite: none */
void tp_cell_set_int(tp_cell *c, int64_t value);
void tp_cell_set_bool(tp_cell *c, int value);

/* Markdown: "-" for none; `empty_text` for a text cell that is "". */
void tp_cell_md(FILE *out, const tp_cell *c, int decimals, const char *empty_text);
/* CSV: "" for none, integers and booleans as integers; field `index` of a line of `count`: a
 * line's only field, empty, is written "" (a blank line is no field to a CSV reader). */
void tp_cell_csv(FILE *out, const tp_cell *c, int decimals, int index, int count);
/* JSON: null for none. */
json_t *tp_cell_json(const tp_cell *c);

#endif
