/*
 * tp_store_vet.c — reading database files that tpbench may not have written
 * (tp_store_internal.h): how to open one so that nothing is left beside it,
 * whether its schema is the one tpbench's migrations make, and a time limit
 * on every query against it.
 *
 * A file can carry tpbench's application id and still be hostile: its "runs"
 * may be a recursive view that never ends. The schema check refuses such a
 * file before any reader's query runs; the time limit stops whatever the
 * check cannot foresee (a planner trap, a huge file), so a reader ends with
 * a sentence instead of hanging.
 *
 * Reading leaves nothing beside the file, even when the reader is killed:
 * a WAL database without -wal is read immutable (SQLite's mode=ro would
 * create -wal and -shm and leave them), and the guard stops a statement as
 * soon as a writer shows up, since an immutable connection would not see
 * its changes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/tp_log.h"
#include "schemas/tp_schemas.h"
#include "store/tp_store_internal.h"

/* ---- the schema migrations make ------------------------------------------ */

/* An in-memory database with migrations 1..version applied: the reference a
 * file's schema is compared with. */
static tp_rc expected_schema(const char *path, int64_t version, sqlite3 **out) {
  *out = NULL;
  sqlite3 *mem = NULL;
  if (sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    tp_rc rc = TP_FAIL(TP_ESQLITE, "%s: cannot open a scratch database to check the schema: %s",
                       path, mem ? sqlite3_errmsg(mem) : "out of memory");
    sqlite3_close(mem);
    return rc;
  }
  for (int64_t i = 0; i < version && i < tp_n_migrations; i++) {
    char *err = NULL;
    if (sqlite3_exec(mem, tp_migrations[i].sql, NULL, NULL, &err) != SQLITE_OK) {
      tp_rc rc = TP_FAIL(TP_EINTERNAL, "%s: migration %s does not apply to an empty database: %s",
                         path, tp_migrations[i].name, err ? err : sqlite3_errmsg(mem));
      sqlite3_free(err);
      sqlite3_close(mem);
      return rc;
    }
  }
  *out = mem;
  return TP_OK;
}

static const char *text_or_empty(sqlite3_stmt *st, int col) {
  const char *t = (const char *)sqlite3_column_text(st, col);
  return t ? t : "";
}

/* TP_EFOREIGN: "path: <detail>; not a database tpbench wrote ...". */
static tp_rc refuse(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static tp_rc refuse(const char *path, const char *fmt, ...) {
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return TP_FAIL(TP_EFOREIGN,
                 "%s: %s; not a database tpbench wrote (or one changed by hand). The file was "
                 "not changed",
                 path, detail);
}

/* Compares one object the migrations make (want: type, name, tbl_name, sql)
 * with the file's object of that name (got, bound: type, tbl_name, sql). */
static tp_rc compare_object(const char *path, sqlite3_stmt *want, sqlite3_stmt *got) {
  const char *type = text_or_empty(want, 0);
  const char *name = text_or_empty(want, 1);
  if (sqlite3_step(got) != SQLITE_ROW)
    return refuse(path, "it has no %s %s, which tpbench's migrations make", type, name);
  if (strcmp(text_or_empty(got, 0), type) != 0)
    return refuse(path, "%s is a %s where tpbench's migrations make a %s", name,
                  text_or_empty(got, 0), type);
  if (strcmp(text_or_empty(got, 1), text_or_empty(want, 2)) != 0)
    return refuse(path, "the %s %s belongs to %s, not %s", type, name, text_or_empty(got, 1),
                  text_or_empty(want, 2));
  /* A view's or trigger's SQL is what runs when it is read or fired. */
  int runs_sql = strcmp(type, "view") == 0 || strcmp(type, "trigger") == 0;
  if (runs_sql && strcmp(text_or_empty(got, 2), text_or_empty(want, 3)) != 0)
    return refuse(path, "the %s %s is not the one tpbench's migrations make", type, name);
  return TP_OK;
}

static tp_rc prepare_on(sqlite3 *db, const char *path, const char *sql, const char *what,
                        sqlite3_stmt **st) {
  if (sqlite3_prepare_v2(db, sql, -1, st, NULL) == SQLITE_OK) return TP_OK;
  *st = NULL;
  return TP_FAIL(TP_ESQLITE, "%s: %s: %s", path, what, sqlite3_errmsg(db));
}

/* A table's columns are the migrations', by name (as SQLite matches names: in any case) and in
 * order: its SQL text is not compared (spacing and comments may differ), but a column renamed,
 * missing or added (a byte of the schema damaged, an edit by hand) would fail the first query
 * naming it, inside a reader or halfway through an import. */
static tp_rc compare_columns(sqlite3 *db, const char *schema, sqlite3 *mem, const char *path,
                             const char *table) {
  static const char sql[] = "SELECT name FROM pragma_table_info(?1, ?2) ORDER BY cid";
  sqlite3_stmt *want = NULL, *got = NULL;
  tp_rc rc = prepare_on(mem, path, sql, "listing the columns tpbench expects", &want);
  if (rc == TP_OK) rc = prepare_on(db, path, sql, "reading a table's columns", &got);
  if (rc == TP_OK && (sqlite3_bind_text(want, 1, table, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
                      sqlite3_bind_text(want, 2, "main", -1, SQLITE_STATIC) != SQLITE_OK ||
                      sqlite3_bind_text(got, 1, table, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
                      sqlite3_bind_text(got, 2, schema, -1, SQLITE_TRANSIENT) != SQLITE_OK))
    rc = TP_FAIL(TP_ESQLITE, "%s: reading the columns of %s: %s", path, table, sqlite3_errmsg(db));
  for (int col = 1; rc == TP_OK; col++) {
    const int w = sqlite3_step(want), g = sqlite3_step(got);
    if (w != SQLITE_ROW && w != SQLITE_DONE)
      rc = TP_FAIL(TP_ESQLITE, "%s: listing the columns tpbench expects: %s", path,
                   sqlite3_errmsg(mem));
    else if (g != SQLITE_ROW && g != SQLITE_DONE)
      rc =
          TP_FAIL(TP_ESQLITE, "%s: reading the columns of %s: %s", path, table, sqlite3_errmsg(db));
    else if (w == SQLITE_DONE && g == SQLITE_DONE) break;
    else if (w == SQLITE_DONE)
      rc = refuse(path, "the table %s has a column %s that tpbench's migrations do not make", table,
                  text_or_empty(got, 0));
    else if (g == SQLITE_DONE)
      rc = refuse(path, "the table %s has no column %s, which tpbench's migrations make", table,
                  text_or_empty(want, 0));
    else if (strcasecmp(text_or_empty(got, 0), text_or_empty(want, 0)) != 0)
      rc = refuse(path, "column %d of the table %s is %s where tpbench's migrations make %s", col,
                  table, text_or_empty(got, 0), text_or_empty(want, 0));
  }
  sqlite3_finalize(want);
  sqlite3_finalize(got);
  return rc;
}

static tp_rc compare_objects(sqlite3 *db, const char *schema, const char *path, sqlite3 *mem) {
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT type, tbl_name, sql FROM \"%s\".sqlite_schema WHERE name = ?",
           schema);
  sqlite3_stmt *want = NULL, *got = NULL;
  tp_rc rc = prepare_on(mem, path,
                        "SELECT type, name, tbl_name, sql FROM sqlite_schema "
                        "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid",
                        "listing the schema tpbench expects", &want);
  if (rc == TP_OK) rc = prepare_on(db, path, sql, "reading the schema", &got);
  int step = SQLITE_ROW;
  while (rc == TP_OK && (step = sqlite3_step(want)) == SQLITE_ROW) {
    if (sqlite3_bind_text(got, 1, text_or_empty(want, 1), -1, SQLITE_TRANSIENT) != SQLITE_OK)
      rc = TP_FAIL(TP_ESQLITE, "%s: reading the schema: %s", path, sqlite3_errmsg(db));
    else rc = compare_object(path, want, got);
    sqlite3_reset(got);
    if (rc == TP_OK && strcmp(text_or_empty(want, 0), "table") == 0)
      rc = compare_columns(db, schema, mem, path, text_or_empty(want, 1));
  }
  if (rc == TP_OK && step != SQLITE_DONE)
    rc = TP_FAIL(TP_ESQLITE, "%s: listing the schema tpbench expects: %s", path,
                 sqlite3_errmsg(mem));
  sqlite3_finalize(want);
  sqlite3_finalize(got);
  return rc;
}

static tp_rc count_triggers(sqlite3 *db, const char *schema, const char *path, int64_t *n) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".sqlite_schema WHERE type = 'trigger'",
           schema);
  sqlite3_stmt *st = NULL;
  TP_TRY(prepare_on(db, path, sql, "counting the triggers", &st));
  tp_rc rc = TP_OK;
  if (sqlite3_step(st) == SQLITE_ROW) *n = sqlite3_column_int64(st, 0);
  else rc = TP_FAIL(TP_ESQLITE, "%s: counting the triggers: %s", path, sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return rc;
}

tp_rc tp_store_vet_schema(sqlite3 *db, const char *schema, const char *path, int64_t version) {
  sqlite3 *mem = NULL;
  TP_TRY(expected_schema(path, version, &mem));
  tp_rc rc = compare_objects(db, schema, path, mem);
  int64_t have = 0, want = 0;
  if (rc == TP_OK) rc = count_triggers(db, schema, path, &have);
  if (rc == TP_OK) rc = count_triggers(mem, "main", path, &want);
  /* Every expected trigger matched by name, so more means one of someone
   * else's: it would run inside tpbench's writes. */
  if (rc == TP_OK && have != want)
    rc = refuse(path, "it holds %lld triggers where tpbench's migrations make %lld",
                (long long)have, (long long)want);
  if (sqlite3_close(mem) != SQLITE_OK)
    TP_LOGW("store", "%s: closing the scratch schema: %s", path, sqlite3_errmsg(mem));
  return rc;
}

/* ---- how to open a file for reading ---------------------------------------- */

/* The file's header says WAL (bytes 18 and 19, the read and write versions,
 * are 2); a file too short to tell is left to SQLite to refuse. */
static int header_says_wal(const char *path) {
  unsigned char header[20] = {0};
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t got = read(fd, header, sizeof header);
  close(fd);
  return got == (ssize_t)sizeof header && (header[18] == 2 || header[19] == 2);
}

static int side_file_exists(const char *path, const char *suffix) {
  char side[4096];
  if (snprintf(side, sizeof side, "%s%s", path, suffix) >= (int)sizeof side) return 0;
  struct stat st;
  return stat(side, &st) == 0;
}

tp_read_mode tp_store_read_mode(const char *path) {
  if (!header_says_wal(path) || side_file_exists(path, "-wal")) return TP_READ_PLAIN;
  return TP_READ_IMMUTABLE;
}

const char *tp_store_read_query(tp_read_mode mode) {
  return mode == TP_READ_IMMUTABLE ? "?immutable=1" : "?mode=ro";
}

/* ---- the guard ------------------------------------------------------------ */

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The file as it is: identity, size, modification time, and whether a -wal
 * is beside it. Absent fields read as -1. */
static void note_file(tp_query_limit *lim) {
  struct stat st;
  int ok = stat(lim->path, &st) == 0;
  lim->file_ino = ok ? (long long)st.st_ino : -1;
  lim->file_size = ok ? (long long)st.st_size : -1;
  lim->file_mtime_ns = ok ? (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec : -1;
  lim->had_wal = side_file_exists(lim->path, "-wal");
}

static int file_changed(const tp_query_limit *lim) {
  tp_query_limit now = *lim;
  note_file(&now);
  return now.file_ino != lim->file_ino || now.file_size != lim->file_size ||
         now.file_mtime_ns != lim->file_mtime_ns || now.had_wal != lim->had_wal;
}

/* Says once, on stderr, why a statement was stopped: readers outside the
 * store (report/, dashboards/) only see SQLite's "interrupted". */
static void stop(tp_query_limit *lim, int *flag) {
  int first = !lim->tripped && !lim->changed;
  *flag = 1;
  char why[160];
  if (first)
    TP_LOGE("store", "%s: a query %s", lim->path, tp_query_limit_reason(lim, why, sizeof why));
}

static int on_progress(void *ctx) {
  tp_query_limit *lim = ctx;
  if (lim->watch && file_changed(lim)) stop(lim, &lim->changed);
  else if (monotonic_s() - lim->started > lim->seconds) stop(lim, &lim->tripped);
  return lim->tripped || lim->changed; /* non-zero: SQLITE_INTERRUPT */
}

/* SQLITE_TRACE_STMT comes when a statement starts running: its clock starts
 * there (a long series of quick statements is never stopped), and a file
 * that changed since the last statement stops it before it reads a page. */
static int on_statement(unsigned type, void *ctx, void *stmt, void *sql) {
  (void)type;
  (void)stmt;
  (void)sql;
  tp_query_limit *lim = ctx;
  lim->started = monotonic_s();
  if (lim->changed || (lim->watch && file_changed(lim))) {
    if (!lim->changed) stop(lim, &lim->changed);
    sqlite3_interrupt(lim->db);
  }
  return 0;
}

static int limit_seconds(const char *path) {
  long long bytes = 0;
  struct stat st;
  if (stat(path, &st) == 0) bytes += st.st_size;
  char wal[4096];
  if (snprintf(wal, sizeof wal, "%s-wal", path) < (int)sizeof wal && stat(wal, &st) == 0)
    bytes += st.st_size;
  return TP_STORE_QUERY_LIMIT_S + (int)(bytes / TP_STORE_QUERY_BYTES_PER_S);
}

/* How many virtual-machine steps pass between looks at the clock (and the
 * file): a look costs a few system calls, a step well under a microsecond. */
enum { STEPS_PER_CHECK = 10000 };

void tp_query_limit_start(tp_query_limit *lim, sqlite3 *db, const char *path, int watch) {
  memset(lim, 0, sizeof *lim);
  lim->db = db;
  lim->path = path;
  lim->seconds = limit_seconds(path);
  lim->started = monotonic_s();
  lim->watch = watch;
  note_file(lim);
  /* Watching means the mode was chosen because there was no -wal: one that
   * appeared since is already a writer. */
  if (watch) lim->had_wal = 0;
  sqlite3_progress_handler(db, STEPS_PER_CHECK, on_progress, lim);
  /* Without the trace every statement counts from the start (stopped
   * earlier, never later) and a change shows a few steps later: logged. */
  if (sqlite3_trace_v2(db, SQLITE_TRACE_STMT, on_statement, lim) != SQLITE_OK)
    TP_LOGW("store", "%s: sqlite3_trace_v2 failed: %s", path, sqlite3_errmsg(db));
}

void tp_query_limit_stop(tp_query_limit *lim) {
  if (!lim->db) return;
  sqlite3_progress_handler(lim->db, 0, NULL, NULL);
  if (sqlite3_trace_v2(lim->db, 0, NULL, NULL) != SQLITE_OK)
    TP_LOGW("store", "%s: sqlite3_trace_v2 failed: %s", lim->path, sqlite3_errmsg(lim->db));
  lim->db = NULL;
}

const char *tp_query_limit_reason(const tp_query_limit *lim, char *buf, size_t cap) {
  if (lim->changed)
    snprintf(buf, cap,
             "was stopped: the file changed while it was read (another program is "
             "writing to it); try again");
  else if (lim->tripped)
    snprintf(buf, cap, "took longer than %.0f s and was stopped: not a database tpbench wrote?",
             lim->seconds);
  else return NULL;
  return buf;
}
