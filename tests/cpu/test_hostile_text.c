/*
 * test_hostile_text.c — text read from a database never reaches a terminal
 * or a page raw, and never makes a reading command fail where it works on
 * clean text.
 *
 * Each sample database (the .db files of examples/) is copied twice: as it
 * is, and hostile — every text column of every table poisoned with terminal
 * escape sequences (ESC [ 31m, an OSC title, the C1 CSI), HTML (<script>,
 * <b>), '|' and a line break, an entity, and bytes that are not UTF-8. The
 * columns whose values are tpbench's own words (kind, backend, status, ...)
 * select rows: those are poisoned in one row in five (a row of a kind
 * tpbench does not know), the rest in every row; a column whose CHECK
 * constraint refuses the poison keeps its words (SQLite guarantees them).
 * Every reading command — runs, report (markdown, CSV, JSON, OpenMetrics),
 * compare (markdown, CSV, JSON, JUnit, BMF), history, trace, project, drift
 * --show, dashboard — then runs on both copies: a command that exits 0 on
 * the clean copy must exit 0 on the hostile one, and on the hostile one no
 * output (stdout, stderr, the dashboard's page) holds an ESC or a C1
 * control, and no markdown holds a tag that no backslash escapes.
 * TPBENCH_EXE names the binary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/cpu/fixture_db.h"
#include "tests/cpu/raw_markup.h"
#include "tests/cpu/run_program.h"

#ifndef TPBENCH_EXE
#error "TPBENCH_EXE must name the tpbench binary"
#endif

#define EXAMPLES TP_TEST_DATA_DIR "/../../examples/"

static const char POISON[] = "\x1b[31m\x1b]0;owned\x07<script>alert(1)</script>|a\nb|<b>x</b>"
                             "&amp;\xc2\x9b"
                             "2J";

/* Columns whose values select rows (tpbench's own words). */
static const char *const vocabulary[] = {
    "configs.kind",
    "configs.layer",
    "configs.proj",
    "configs.backend",
    "configs.schedule",
    "configs.dtype",
    "configs.pass",
    "configs.status",
    "configs.ac",
    "configs.rs_sum",
    "configs.comm_dtype",
    "configs.symm",
    "runs.command",
    "events.kind",
    "events.category",
    "events.copy_kind",
    "schedules.op",
    "schedules.schedule",
    "schedules.engine",
    "schedules.evidence",
    "checks.status",
    "checks.rule",
    "results.numerics",
    "traces.evidence",
    "profile_kernels.category",
    "profile_schedules.transport",
};

static int is_vocabulary(const char *table, const char *column) {
  char name[256];
  snprintf(name, sizeof name, "%s.%s", table, column);
  for (size_t i = 0; i < sizeof vocabulary / sizeof *vocabulary; i++)
    if (!strcmp(vocabulary[i], name)) return 1;
  return 0;
}

/* Runs an UPDATE that appends the poison (?1); 0 when the table has no rowid (a WITHOUT ROWID
 * table cannot pick one row in five by it). A CHECK constraint's refusal leaves it clean. */
static int poison_with(sqlite3 *db, const char *sql, const char *table, const char *column) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
    if (strstr(sqlite3_errmsg(db), "no such column: rowid")) return 0;
    fail_msg("poisoning %s.%s: %s", table, column, sqlite3_errmsg(db));
  }
  sqlite3_bind_text(st, 1, POISON, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_DONE && rc != SQLITE_CONSTRAINT)
    fail_msg("poisoning %s.%s: %s", table, column, sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return 1;
}

/* Poisons one text column: a word column in one row in five (every row where the table has
 * no rowid, which its CHECK constraints then refuse), the others in every row. */
static void poison_column(sqlite3 *db, const char *table, const char *column) {
  char sql[512];
  const int word = is_vocabulary(table, column);
  snprintf(sql, sizeof sql, "UPDATE \"%s\" SET \"%s\" = \"%s\" || ?1%s WHERE \"%s\" IS NOT NULL%s",
           table, column, column, word ? "" : " || CAST(X'FF80C0' AS TEXT)", column,
           word ? " AND rowid % 5 = 0" : "");
  if (poison_with(db, sql, table, column)) return;
  snprintf(sql, sizeof sql, "UPDATE \"%s\" SET \"%s\" = \"%s\" || ?1 WHERE \"%s\" IS NOT NULL",
           table, column, column, column);
  poison_with(db, sql, table, column);
}

/* Every text column of every table of the file poisoned. */
static void poison(const char *path) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_stmt *tables = NULL;
  assert_int_equal(sqlite3_prepare_v2(db,
                                      "SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                      "name NOT LIKE 'sqlite%'",
                                      -1, &tables, NULL),
                   SQLITE_OK);
  while (sqlite3_step(tables) == SQLITE_ROW) {
    char table[128], sql[256];
    snprintf(table, sizeof table, "%s", sqlite3_column_text(tables, 0));
    snprintf(sql, sizeof sql, "SELECT name, type FROM pragma_table_info('%s')", table);
    sqlite3_stmt *cols = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &cols, NULL), SQLITE_OK);
    while (sqlite3_step(cols) == SQLITE_ROW) {
      const char *type = (const char *)sqlite3_column_text(cols, 1);
      if (type && !strcasecmp(type, "TEXT"))
        poison_column(db, table, (const char *)sqlite3_column_text(cols, 0));
    }
    sqlite3_finalize(cols);
  }
  sqlite3_finalize(tables);
  sqlite3_close(db);
}

/* ---- the commands ---------------------------------------------------------------------- */

enum { MAX_ARGS = 16 };

typedef struct {
  /* after "tpbench"; "DB" stands for the database, "SITE" the dashboard's folder, "DB.kineto"
   * the folder of Kineto traces */
  const char *argv[MAX_ARGS];
  int markdown; /* the output is markdown: no raw tag either */
} command;

typedef struct {
  command *items;
  size_t n, cap;
  char texts[256][64]; /* room for the numbers the commands name */
  int n_texts;
} command_list;

static const char *keep_text(command_list *l, const char *fmt, long long v) {
  assert_true(l->n_texts < 256);
  snprintf(l->texts[l->n_texts], sizeof l->texts[0], fmt, v);
  return l->texts[l->n_texts++];
}

static void add(command_list *l, int markdown, ...) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->items = realloc(l->items, l->cap * sizeof *l->items);
    assert_non_null(l->items);
  }
  command *c = &l->items[l->n++];
  memset(c, 0, sizeof *c);
  c->markdown = markdown;
  va_list ap;
  va_start(ap, markdown);
  for (int i = 0; i < MAX_ARGS - 1; i++) {
    const char *a = va_arg(ap, const char *);
    if (!a) break;
    c->argv[i] = a;
  }
  va_end(ap);
}

static int64_t one_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  int64_t v = 0;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* The reading commands for the clean database at path. */
static void list_commands(const char *path, command_list *l) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  static const char *const formats[] = {"md", "csv", "json"};
  for (int k = 0; k < 3; k++) add(l, k == 0, "runs", "--db", "DB", "--format", formats[k], NULL);
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, "SELECT id FROM runs ORDER BY id", -1, &st, NULL),
                   SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *run = keep_text(l, "%lld", sqlite3_column_int64(st, 0));
    add(l, 1, "report", "--db", "DB", "--run", run, NULL);
    add(l, 0, "report", "--db", "DB", "--run", run, "--format", "csv", NULL);
    add(l, 0, "report", "--db", "DB", "--run", run, "--format", "json", NULL);
    add(l, 0, "report", "--db", "DB", "--run", run, "--format", "openmetrics", NULL);
    add(l, 1, "drift", "--show", run, "--db", "DB", NULL);
  }
  sqlite3_finalize(st);
  const char *first = keep_text(l, "run:%lld", one_int(db, "SELECT min(id) FROM runs"));
  const char *last = keep_text(l, "run:%lld", one_int(db, "SELECT max(id) FROM runs"));
  static const char *const compare_formats[] = {"md", "csv", "json", "junit", "bmf"};
  for (int k = 0; k < 5; k++)
    add(l, k == 0, "compare", first, last, "--db", "DB", "--format", compare_formats[k], NULL);
  add(l, 1, "compare", last, last, "--db", "DB", NULL);
  /* by commit: a prefix of the first run's commit (the poison comes after it) */
  sqlite3_stmt *c = NULL;
  if (sqlite3_prepare_v2(db, "SELECT substr(commit_sha, 1, 7) FROM runs ORDER BY id LIMIT 1", -1,
                         &c, NULL) == SQLITE_OK &&
      sqlite3_step(c) == SQLITE_ROW && sqlite3_column_text(c, 0)) {
    assert_true(l->n_texts < 256);
    snprintf(l->texts[l->n_texts], sizeof l->texts[0], "%s", sqlite3_column_text(c, 0));
    const char *commit = l->texts[l->n_texts++];
    add(l, 1, "compare", commit, commit, "--db", "DB", NULL);
  }
  sqlite3_finalize(c);
  const char *configs[] = {
      keep_text(l, "%lld", one_int(db, "SELECT min(id) FROM configs")),
      keep_text(l, "%lld",
                one_int(db, "SELECT max(id) FROM configs WHERE kind IN ('op', "
                            "'layer')")),
  };
  for (int k = 0; k < 2; k++)
    for (int f = 0; f < 3; f++)
      add(l, f == 0, "history", "--config", configs[k], "--db", "DB", "--format", formats[f], NULL);
  const int64_t traced = one_int(db, "SELECT min(config_id) FROM traces");
  if (traced) {
    const char *id = keep_text(l, "%lld", traced);
    add(l, 0, "trace", "--config", id, "--db", "DB", NULL);
    add(l, 0, "trace", "--config", id, "--db", "DB", "--format", "kineto", "--out", "DB.kineto",
        NULL);
  }
  for (int f = 0; f < 3; f++) {
    add(l, f == 0, "project", "--db", "DB", "--format", formats[f], NULL);
    add(l, f == 0, "project", "--db", "DB", "--format", formats[f], "--gemm-tp", "1", "--link-gbps",
        "300", NULL);
  }
  add(l, 0, "dashboard", "--db", "DB", "--out", "SITE", NULL);
  sqlite3_close(db);
}

/* Runs a command with DB and SITE replaced. */
static rp_result run_on(const command *c, const char *db, const char *site) {
  char *argv[MAX_ARGS + 2] = {(char *)TPBENCH_EXE};
  int n = 1;
  char kineto[800];
  snprintf(kineto, sizeof kineto, "%s.kineto", db);
  for (int i = 0; i < MAX_ARGS && c->argv[i]; i++)
    argv[n++] = (char *)(!strcmp(c->argv[i], "DB")          ? db
                         : !strcmp(c->argv[i], "SITE")      ? site
                         : !strcmp(c->argv[i], "DB.kineto") ? kineto
                                                            : c->argv[i]);
  argv[n] = NULL;
  return rp_run(argv, 300);
}

static void describe(const command *c, char *buf, size_t cap) {
  size_t used = 0;
  for (int i = 0; i < MAX_ARGS && c->argv[i] && used < cap; i++) {
    int n = snprintf(buf + used, cap - used, "%s%s", i ? " " : "", c->argv[i]);
    used += n > 0 ? (size_t)n : 0;
  }
}

/* What a hostile run printed must carry nothing raw. */
static void expect_neutral(const command *c, const rp_result *r, const char *site) {
  char what[300];
  describe(c, what, sizeof what);
  const char *streams[] = {r->out ? r->out : "", r->err ? r->err : ""};
  for (int k = 0; k < 2; k++) {
    const char *esc = raw_escape(streams[k], strlen(streams[k]));
    if (esc)
      fail_msg("tpbench %s: a terminal escape on %s: ...%.40s", what, k ? "stderr" : "stdout",
               esc > streams[k] + 20 ? esc - 20 : streams[k]);
  }
  if (c->markdown) {
    const char *tags[] = {"<script", "<b>", "</b>"};
    for (size_t t = 0; t < sizeof tags / sizeof *tags; t++) {
      const char *at = raw_tag(r->out ? r->out : "", tags[t]);
      if (at) fail_msg("tpbench %s: raw HTML in markdown: ...%.60s", what, at);
    }
  }
  if (!strcmp(c->argv[0], "dashboard") && r->status == 0) {
    char page_path[800];
    snprintf(page_path, sizeof page_path, "%s/index.html", site);
    size_t len = 0;
    char *page = (char *)fx_read_all(page_path, &len);
    assert_non_null(page);
    if (raw_escape(page, len)) fail_msg("the dashboard's page holds a terminal escape");
    if (strstr(page, "<script>alert")) fail_msg("the dashboard's page holds the stored script");
    free(page);
  }
}

typedef struct {
  fx_dir dir;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || fx_mkdir(&f->dir, "tp_hostile_text") != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  fx_rmdir(&f->dir);
  free(f);
  return 0;
}

/* Runs every reading command on a clean and a hostile copy of the sample; returns the
 * commands run on the hostile copy. */
static size_t check_sample(const fixture *f, const char *name) {
  char from[700], clean[700], hostile[700], clean_site[760], hostile_site[760];
  snprintf(from, sizeof from, "%s%s", EXAMPLES, name);
  snprintf(clean, sizeof clean, "%s/clean-%s", f->dir.path, name);
  snprintf(hostile, sizeof hostile, "%s/hostile-%s", f->dir.path, name);
  snprintf(clean_site, sizeof clean_site, "%s.site", clean);
  snprintf(hostile_site, sizeof hostile_site, "%s.site", hostile);
  assert_int_equal(fx_copy(from, clean), 0);
  assert_int_equal(fx_copy(from, hostile), 0);
  poison(hostile);
  command_list l = {0};
  list_commands(clean, &l);
  for (size_t i = 0; i < l.n; i++) {
    rp_result b = run_on(&l.items[i], hostile, hostile_site);
    expect_neutral(&l.items[i], &b, hostile_site);
    /* a failure on the hostile copy is fine only where the clean copy fails too (a drift
     * table of a run that is not one, a projection without GEMM rows) */
    if (b.status != 0) {
      rp_result a = run_on(&l.items[i], clean, clean_site);
      char what[300];
      describe(&l.items[i], what, sizeof what);
      if (a.status == 0)
        fail_msg("%s: tpbench %s exits 0 on the clean copy, %d on the hostile one:\n%.600s", name,
                 what, b.status, b.err ? b.err : "");
      rp_free(&a);
    }
    rp_free(&b);
  }
  size_t n = l.n;
  free(l.items);
  return n;
}

static void test_hostile_text_is_neutralised(void **state) {
  fixture *f = *state;
  static const char *const samples[] = {"tpbench-h200-sample.db", "tpbench-h200-fp8-tp1.db",
                                        "tpbench-h200-tp1-composition.db",
                                        "tpbench-h200-tp1-gemm.db"};
  size_t n = 0;
  for (size_t i = 0; i < sizeof samples / sizeof *samples; i++) n += check_sample(f, samples[i]);
  printf("hostile text: %zu reading commands on poisoned copies of %zu sample databases: none "
         "failed where the clean copy works, none printed an escape sequence or raw HTML\n",
         n, sizeof samples / sizeof *samples);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hostile_text_is_neutralised),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
