/*
 * tp_store_internal.h — what the store's own source files share and nothing
 * outside store/ should use: the store is one module split over tp_store.c
 * (opening, migrating, runs, configurations), tp_store_trace.c (traces and
 * readers), tp_store_import.c (merging databases) and tp_store_vet.c
 * (reading files tpbench may not have written: how to open them, their
 * schema, a time limit on queries).
 */
#ifndef TP_STORE_INTERNAL_H
#define TP_STORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "common/tp_array.h" /* arrays grow through tp_grow_array */
#include "store/tp_store.h"

/* "file:" URI of a path with query appended ("?mode=ro"), every byte but
 * unreserved characters and '/' percent-encoded, so '?', '#' and '%' in a
 * file name stay part of the name. malloc'd; NULL when out of memory. */
char *tp_store_file_uri(const char *path, const char *query);

/* Records "path: what: sqlite's message (extended code)" as TP_ESQLITE at
 * the caller's file and line (TP_ETIMEOUT with the reason when the store's
 * guard, below, stopped the statement). `what` is a phrase ("reading the
 * runs"), never SQL. */
#define TP_STORE_SQL_FAIL(store, ...) tp_store_sql_fail(__FILE__, __LINE__, (store), __VA_ARGS__)
TP_MUST_CHECK tp_rc tp_store_sql_fail(const char *file, int line, tp_store *store, const char *fmt,
                                      ...) __attribute__((format(printf, 4, 5)));

/* Runs SQL without results (several statements are fine); a failure says
 * "path: what: sqlite's message". */
TP_MUST_CHECK tp_rc tp_store_exec(tp_store *store, const char *sql, const char *what);

/* Prepares sql on the store's connection; a failure says "preparing what"
 * (`what` names the statement, never its SQL) and leaves *stmt NULL. */
TP_MUST_CHECK tp_rc tp_store_prepare(tp_store *store, const char *sql, const char *what,
                                     sqlite3_stmt **stmt);

/* Steps a statement that returns no rows after its binds (bind_rc: the first
 * bind's failure, or SQLITE_OK), then resets it and clears its bindings for
 * reuse, on failure too. A failure says "binding what" or "what". */
TP_MUST_CHECK tp_rc tp_store_step_done(tp_store *store, sqlite3_stmt *stmt, int bind_rc,
                                       const char *what);

/* Binds value at col, or NULL for NaN or an infinity: "not measured". Returns
 * SQLite's code. */
int tp_store_bind_real_or_null(sqlite3_stmt *stmt, int col, double value);

/* SQLite's extended code of the last failure said through TP_STORE_SQL_FAIL or tp_store_exec
 * since the previous call (0: none), with SQLite's message in msg[cap] (msg may be NULL); the
 * failure is forgotten then. Lets a caller tell what SQLite refused after a rollback. */
int tp_store_take_failure(tp_store *store, char *msg, size_t cap);

/* Rolls back an open transaction after a failure, keeping that failure's
 * message (a failed rollback is only logged). */
void tp_store_rollback(tp_store *store);

/* The checks of tp_store_put_trace on a trace record (TP_EINTERNAL). */
TP_MUST_CHECK tp_rc tp_store_check_trace(const tp_trace_record *rec);

/* The rows of tp_store_put_trace, inside the caller's transaction. */
TP_MUST_CHECK tp_rc tp_store_write_trace(tp_store *store, int64_t config_id,
                                         const tp_trace_record *rec);

/* Prefixes the last error with context, as tp_fail_context does, but keeps
 * the message a sentence: the cause's own "file:line: " is dropped, and the
 * result is recorded at the caller's file and line like any failure. */
#define TP_STORE_CONTEXT(rc, ...) tp_store_context(__FILE__, __LINE__, (rc), __VA_ARGS__)
TP_MUST_CHECK tp_rc tp_store_context(const char *file, int line, tp_rc rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads application_id, user_version and the object count of schema ("main"
 * or an attached name) and judges them: TP_OK for tpbench's database at a
 * version this binary knows (0 <= version <= newest) whose schema passes
 * tp_store_vet_schema, or an empty database (no application id, no objects,
 * version 0); TP_EFOREIGN with a sentence otherwise. *version receives the
 * file's user_version. */
TP_MUST_CHECK tp_rc tp_store_check_identity(sqlite3 *db, const char *schema, const char *path,
                                            int64_t *version);

/* TP_EFOREIGN for a source or a database to read that holds nothing: a
 * 0-byte file or a SQLite database without tables is not a tpbench
 * database (only tp_store_open makes one of it). */
TP_MUST_CHECK tp_rc tp_store_refuse_empty(const char *path);

/* ---- tp_store_vet.c --------------------------------------------------- */

/* Compares the schema of a tpbench database at `version` (schema "main" or
 * an attached name) with what migrations 1..version create: every object
 * they make must be there with the same type and table, views and triggers
 * with the same SQL, and there must be no other triggers. Anything else is
 * TP_EFOREIGN naming the first difference: a file whose "runs" became a
 * (recursive) view never reaches a reader's query. Extra tables, indexes and
 * views are allowed (nothing of tpbench reads them). */
TP_MUST_CHECK tp_rc tp_store_vet_schema(sqlite3 *db, const char *schema, const char *path,
                                        int64_t version);

/* How a file is opened for reading so that nothing is left beside it. */
typedef enum {
  TP_READ_PLAIN,    /* mode=ro: a rollback-journal file, or a WAL file whose -wal exists */
  TP_READ_IMMUTABLE /* immutable=1: a WAL file without -wal */
} tp_read_mode;

/* Picks the mode for path. A read-only (mode=ro) connection to a WAL file
 * whose -wal is missing creates -wal and -shm and leaves them behind (and
 * cannot create them in a read-only folder or on a full disk); an immutable
 * one reads the main file alone, which then holds everything committed (no
 * -wal: no writer is connected), but would not see a writer that starts
 * meanwhile: the guard below watches for one. */
tp_read_mode tp_store_read_mode(const char *path);

/* The URI query ("?mode=ro", "?immutable=1") of a mode. */
const char *tp_store_read_query(tp_read_mode mode);

/* Guards the statements of a connection that reads a file tpbench may not
 * have written: each statement gets a time limit, counted from its first
 * step, so a hostile file (a planner trap, what the schema check cannot
 * foresee) is stopped with SQLITE_INTERRUPT instead of hanging the reader;
 * and, when watching (an immutable connection), a statement is stopped as
 * soon as the file changes (a -wal appears or goes, the main file is
 * rewritten), since what it reads could then be torn. The limit grows with
 * the file: TP_STORE_QUERY_LIMIT_S plus a second per
 * TP_STORE_QUERY_BYTES_PER_S of the database and its -wal. */
enum { TP_STORE_QUERY_LIMIT_S = 5, TP_STORE_QUERY_BYTES_PER_S = 4 << 20 };

typedef struct tp_query_limit {
  sqlite3 *db;
  const char *path; /* for the messages; must outlive the guard */
  double seconds;
  double started; /* monotonic seconds at the current statement's start */
  int watch;      /* stop when the file changes */
  long long file_ino, file_size, file_mtime_ns;
  int had_wal;
  int tripped; /* a statement ran past the limit */
  int changed; /* the file changed while it was read */
} tp_query_limit;

/* Installs the guard on db (a progress handler and a statement trace, both
 * owned by the guard until tp_query_limit_stop) and notes the file as it is
 * now. lim must stay in place while installed. */
void tp_query_limit_start(tp_query_limit *lim, sqlite3 *db, const char *path, int watch);

/* Removes the guard's handlers from the connection (a failure is only
 * logged); lim may then go. Safe to call twice. */
void tp_query_limit_stop(tp_query_limit *lim);

/* Why the guard stopped a statement, as a phrase ("took longer than 6 s:
 * not a database tpbench wrote?"), or NULL when it did not. */
const char *tp_query_limit_reason(const tp_query_limit *lim, char *buf, size_t cap);

#endif /* TP_STORE_INTERNAL_H */
