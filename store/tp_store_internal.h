/*
 * tp_store_internal.h — what the store's own source files share and nothing
 * outside store/ should use: the store is one module split over tp_store.c
 * (opening, migrating, runs, configurations), tp_store_trace.c (traces and
 * readers) and tp_store_import.c (merging databases).
 */
#ifndef TP_STORE_INTERNAL_H
#define TP_STORE_INTERNAL_H

#include <sqlite3.h>

#include "store/tp_store.h"

/* "file:" URI of a path with query appended ("?mode=ro"), every byte but
 * unreserved characters and '/' percent-encoded, so '?', '#' and '%' in a
 * file name stay part of the name. malloc'd; NULL when out of memory. */
char *tp_store_file_uri(const char *path, const char *query);

/* Records "path: what: sqlite's message (extended code)" as TP_ESQLITE at
 * the caller's file and line. */
#define TP_STORE_SQL_FAIL(store, ...) tp_store_sql_fail(__FILE__, __LINE__, (store), __VA_ARGS__)
tp_rc tp_store_sql_fail(const char *file, int line, tp_store *store, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Runs SQL without results (several statements are fine). */
tp_rc tp_store_exec(tp_store *store, const char *sql);

/* Rolls back an open transaction after a failure, keeping that failure's
 * message (a failed rollback is only logged). */
void tp_store_rollback(tp_store *store);

/* The checks of tp_store_put_trace on a trace record (TP_EINTERNAL). */
tp_rc tp_store_check_trace(const tp_trace_record *rec);

/* The rows of tp_store_put_trace, inside the caller's transaction. */
tp_rc tp_store_write_trace(tp_store *store, int64_t config_id, const tp_trace_record *rec);

#endif /* TP_STORE_INTERNAL_H */
