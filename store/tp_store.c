/*
 * tp_store.c — tpbench's SQLite database (see tp_store.h): opening and
 * migrating it, recording runs and configurations, finding runs for readers.
 *
 * Opening is careful with files that are not ours. An existing file is first
 * looked at through an immutable, read-only connection, which reads the file
 * and nothing else: no locks, no -wal or -shm files. Only a file that is empty
 * or tpbench's at a schema this binary knows, whose schema is the one the
 * migrations make (tp_store_vet.c), is then opened read-write, and checked
 * once more inside the migration transaction (a -wal left by a crash can hold
 * what the main file does not show yet). WAL mode is switched on last, after
 * the file has proved to be ours, and only on a local filesystem: SQLite's
 * WAL shares its index through a memory-mapped -shm file, which network and
 * cluster filesystems do not keep coherent between hosts (or at all), so
 * there the rollback journal (DELETE) is used (tp_store_journal_for).
 *
 * Readers open with tp_store_open_readonly instead: never created, migrated
 * or switched to WAL, nothing left beside the file, every query under a time
 * limit.
 *
 * Every write of a configuration is one transaction whose statements are
 * prepared once per store and reused, so a long matrix costs one prepare per
 * statement, not one per row.
 */
#include "store/tp_store.h"

#include <errno.h>
#include <linux/magic.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/tp_log.h"
#include "schemas/tp_schemas.h"
#include "store/tp_store_internal.h"

/* Long enough for a busy parallel writer (an import, a second run) to finish
 * its transaction; short enough that a stuck lock is reported, not waited on. */
enum { STORE_BUSY_TIMEOUT_MS = 10000 };

struct tp_store {
  sqlite3 *db;
  char *path;
  int version;
  tp_query_limit limit; /* on every query of a store opened read-only */
  /* Statements of tp_store_put_config, prepared on first use. */
  sqlite3_stmt *insert_config;
  sqlite3_stmt *insert_result;
  sqlite3_stmt *insert_sample;
  sqlite3_stmt *insert_schedule;
  sqlite3_stmt *insert_window;
  sqlite3_stmt *insert_check;
  sqlite3_stmt *insert_drift_step;
  /* SQLite's extended code and message of the last failure said through tp_store_sql_fail or
   * tp_store_exec, until tp_store_take_failure (0, "": none) */
  int failed_code;
  char failed_msg[256];
};

/* ---- errors ------------------------------------------------------------ */

/* Records "path: what: sqlite's message (extended code)" at the caller's
 * file and line; the macro keeps __FILE__/__LINE__ where the failure is.
 * guard (may be NULL): the store's query guard, which says why it stopped a
 * statement in place of SQLite's "interrupted". */
static tp_rc sql_fail_at(const char *file, int line, sqlite3 *db, const char *path,
                         const tp_query_limit *guard, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static tp_rc sql_fail_at(const char *file, int line, sqlite3 *db, const char *path,
                         const tp_query_limit *guard, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const char *msg = db ? sqlite3_errmsg(db) : "out of memory";
  int code = db ? sqlite3_extended_errcode(db) : SQLITE_NOMEM;
  char why[160];
  const char *reason = guard ? tp_query_limit_reason(guard, why, sizeof why) : NULL;
  if (code == SQLITE_INTERRUPT && reason)
    return tp_fail(TP_ETIMEOUT, file, line, "%s: %s %s", path, what, reason);
  return tp_fail(TP_ESQLITE, file, line, "%s: %s: %s (sqlite code %d)", path, what, msg, code);
}

#define SQL_FAIL(db, path, ...) sql_fail_at(__FILE__, __LINE__, (db), (path), NULL, __VA_ARGS__)
/* The same for a reader's query on the store's own connection. */
#define STORE_FAIL(s, ...)                                                                         \
  sql_fail_at(__FILE__, __LINE__, (s)->db, (s)->path, &(s)->limit, __VA_ARGS__)

/* ---- small SQLite helpers ---------------------------------------------- */

/* Runs SQL without results; `what` says what it does, for the message. */
static tp_rc exec_sql(sqlite3 *db, const char *path, const char *sql, const char *what) {
  if (sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK) return TP_OK;
  return SQL_FAIL(db, path, "%s", what);
}

/* Runs a statement that yields one integer (a pragma, a count). */
static tp_rc query_int(sqlite3 *db, const char *path, const char *sql, const char *what,
                       int64_t *value) {
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK)
    return SQL_FAIL(db, path, "%s", what);
  if (sqlite3_step(stmt) != SQLITE_ROW) {
    tp_rc rc = SQL_FAIL(db, path, "%s", what);
    sqlite3_finalize(stmt);
    return rc;
  }
  *value = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return TP_OK;
}

/* Rolls back an open transaction after a failure, keeping the failure's
 * message: a rollback that fails too is only logged. */
static void rollback_quietly(sqlite3 *db, const char *path) {
  if (sqlite3_get_autocommit(db)) return; /* SQLite already rolled it back */
  int rc = sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  if (rc != SQLITE_OK) TP_LOGE("store", "%s: ROLLBACK failed: %s", path, sqlite3_errmsg(db));
}

/* Binds the parameters of one statement in order; the first failure sticks,
 * so a run of binds is checked once. */
typedef struct {
  sqlite3_stmt *stmt;
  int next;
  int rc;
} binder;

static void bind_text(binder *b, const char *value) {
  if (b->rc != SQLITE_OK) return;
  b->next++;
  b->rc = value ? sqlite3_bind_text(b->stmt, b->next, value, -1, SQLITE_TRANSIENT)
                : sqlite3_bind_null(b->stmt, b->next);
}

static void bind_int(binder *b, int64_t value) {
  if (b->rc != SQLITE_OK) return;
  b->next++;
  b->rc = sqlite3_bind_int64(b->stmt, b->next, value);
}

/* NaN means "not measured" and infinities are no measurement either: NULL. */
static void bind_real(binder *b, double value) {
  if (b->rc != SQLITE_OK) return;
  b->next++;
  b->rc = isfinite(value) ? sqlite3_bind_double(b->stmt, b->next, value)
                          : sqlite3_bind_null(b->stmt, b->next);
}

/* Checks the binds and steps a statement that returns no rows, then resets it
 * so it can be reused (and releases what it holds even on failure). */
static tp_rc bind_and_step(tp_store *s, binder *b, const char *what) {
  tp_rc out = TP_OK;
  if (b->rc != SQLITE_OK) {
    out = SQL_FAIL(s->db, s->path, "binding %s", what);
  } else if (b->next != sqlite3_bind_parameter_count(b->stmt)) {
    out = TP_FAIL(TP_EINTERNAL, "%s: %s: bound %d of %d parameters", s->path, what, b->next,
                  sqlite3_bind_parameter_count(b->stmt));
  } else if (sqlite3_step(b->stmt) != SQLITE_DONE) {
    out = SQL_FAIL(s->db, s->path, "%s", what);
  }
  sqlite3_reset(b->stmt); /* returns the step's error again: already reported */
  sqlite3_clear_bindings(b->stmt);
  return out;
}

/* Only SQL of this file goes through here: a failure means the schema is
 * not the one it was written for, which the message says without the SQL. */
static tp_rc prepare_once(tp_store *s, sqlite3_stmt **slot, const char *sql) {
  if (*slot) return TP_OK;
  if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, slot, NULL) != SQLITE_OK) {
    *slot = NULL;
    return SQL_FAIL(s->db, s->path, "preparing to write a configuration");
  }
  return TP_OK;
}

/* ---- opening: who owns the file ----------------------------------------- */

/* "file:" URI of a path, percent-encoding everything but unreserved
 * characters and '/', so '?', '#' and '%' in a name stay part of the name. */
static char *file_uri(const char *path, const char *query) {
  size_t n = strlen(path);
  size_t cap = 5 + 3 * n + strlen(query) + 1;
  char *uri = malloc(cap);
  if (!uri) return NULL;
  char *p = uri + sprintf(uri, "file:");
  for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
    int plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                strchr("/-._~", *c) != NULL;
    p += plain ? sprintf(p, "%c", *c) : sprintf(p, "%%%02X", *c);
  }
  strcpy(p, query);
  return uri;
}

/* What the header of a database says about its owner. */
typedef struct {
  int64_t app_id;
  int64_t version;
  int64_t n_objects; /* tables, indexes, views, triggers */
} db_identity;

/* Reads the identity of schema ("main" or an attached name: an internal
 * constant, never user input). */
static tp_rc read_identity(sqlite3 *db, const char *schema, const char *path, db_identity *id) {
  char sql[96];
  snprintf(sql, sizeof sql, "PRAGMA \"%s\".application_id", schema);
  TP_TRY(query_int(db, path, sql, "reading the application id", &id->app_id));
  snprintf(sql, sizeof sql, "PRAGMA \"%s\".user_version", schema);
  TP_TRY(query_int(db, path, sql, "reading the schema version", &id->version));
  snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".sqlite_schema", schema);
  return query_int(db, path, sql, "counting the schema's objects", &id->n_objects);
}

/* TP_OK for an empty database or tpbench's at a known version; otherwise
 * TP_EFOREIGN saying whose it seems to be. */
static tp_rc judge_identity(const char *path, const db_identity *id) {
  int newest = tp_store_schema_version();
  if (id->app_id == TP_STORE_APP_ID) {
    if (id->version > newest)
      return TP_FAIL(TP_EFOREIGN,
                     "%s: schema version %lld is newer than this tpbench knows (%d); "
                     "use a newer tpbench. The file was not changed",
                     path, (long long)id->version, newest);
    /* No migration makes a negative version: the header was damaged or forged. */
    if (id->version < 0)
      return TP_FAIL(TP_EFOREIGN,
                     "%s: schema version %lld is not one tpbench ever wrote (versions run from "
                     "1 to %d); the file is damaged or not tpbench's. The file was not changed",
                     path, (long long)id->version, newest);
    return TP_OK;
  }
  if (id->app_id != 0)
    return TP_FAIL(TP_EFOREIGN,
                   "%s: application_id 0x%08llx belongs to another program (tpbench's is "
                   "0x%08x); not a tpbench database. The file was not changed",
                   path, (unsigned long long)(uint32_t)id->app_id, TP_STORE_APP_ID);
  if (id->n_objects != 0 || id->version != 0)
    return TP_FAIL(TP_EFOREIGN,
                   "%s: a SQLite database with %lld schema objects (user_version %lld) but "
                   "without tpbench's application_id; not a tpbench database. The file was "
                   "not changed",
                   path, (long long)id->n_objects, (long long)id->version);
  return TP_OK; /* empty: ours to fill */
}

/* Identity, then the schema itself (tp_store_internal.h). */
static tp_rc check_identity(sqlite3 *db, const char *schema, const char *path, db_identity *id) {
  TP_TRY(read_identity(db, schema, path, id));
  TP_TRY(judge_identity(path, id));
  if (id->app_id != TP_STORE_APP_ID) return TP_OK; /* empty */
  return tp_store_vet_schema(db, schema, path, id->version);
}

tp_rc tp_store_check_identity(sqlite3 *db, const char *schema, const char *path, int64_t *version) {
  db_identity id = {0};
  TP_TRY(check_identity(db, schema, path, &id));
  *version = id.version;
  return TP_OK;
}

/* A failure to read the identity, said as what it means for the file. */
static tp_rc explain_unreadable(sqlite3 *db, const char *path, tp_rc rc) {
  int code = sqlite3_errcode(db);
  if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
    return TP_FAIL(TP_EFOREIGN,
                   "%s: not a SQLite database (%s); not a tpbench database. "
                   "The file was not changed",
                   path, sqlite3_errmsg(db));
  if (code != SQLITE_CANTOPEN && code != SQLITE_PERM && code != SQLITE_IOERR) return rc;
  tp_rc why = code == SQLITE_IOERR ? TP_EIO : tp_rc_for_path_errno(sqlite3_system_errno(db));
  return TP_FAIL(why, "%s: cannot read: %s", path, sqlite3_errmsg(db));
}

/* Whether path has a -wal beside it. */
static int has_wal_file(const char *path) {
  char wal[4096];
  struct stat st;
  return snprintf(wal, sizeof wal, "%s-wal", path) < (int)sizeof wal && stat(wal, &st) == 0;
}

/* Looks at an existing file without changing anything on disk: an immutable
 * connection takes no locks and never creates -wal/-shm/-journal files. It
 * reads the main file alone, so a file with a -wal beside it is read through
 * the -wal instead (read-only): what was committed may still be there (a
 * writer still connected, a checkpoint a full disk stopped), and the main
 * file alone may then be older than the database or torn. */
static tp_rc sniff_existing_file(const char *path, int64_t *version) {
  char *uri = file_uri(path, has_wal_file(path) ? "?mode=ro" : "?immutable=1");
  if (!uri) return TP_FAIL(TP_EOOM, "%s: out of memory", path);
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
  free(uri);
  if (rc == SQLITE_OK) rc = sqlite3_busy_timeout(db, STORE_BUSY_TIMEOUT_MS);
  if (rc != SQLITE_OK) {
    tp_rc why = db ? tp_rc_for_path_errno(sqlite3_system_errno(db)) : TP_EIO;
    tp_rc out = TP_FAIL(why, "%s: cannot open for reading: %s", path,
                        db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return out;
  }
  tp_query_limit limit;
  tp_query_limit_start(&limit, db, path, 0);
  db_identity id = {0};
  tp_rc out = read_identity(db, "main", path, &id);
  if (out != TP_OK) {
    out = explain_unreadable(db, path, out);
  } else {
    out = judge_identity(path, &id);
    if (out == TP_OK && id.app_id == TP_STORE_APP_ID)
      out = tp_store_vet_schema(db, "main", path, id.version);
    *version = id.version;
  }
  tp_query_limit_stop(&limit);
  if (sqlite3_close(db) != SQLITE_OK && out == TP_OK)
    out = TP_FAIL(TP_ESQLITE, "%s: closing the read-only look: %s", path, sqlite3_errmsg(db));
  return out;
}

/* Refuses what cannot be a database file before SQLite sees it (TP_EUSAGE:
 * the path the user gave). Sets *exists. */
static tp_rc check_path(const char *path, int create, int *exists) {
  struct stat st;
  if (stat(path, &st) != 0) {
    int err = errno;
    if (err != ENOENT)
      return TP_FAIL(tp_rc_for_path_errno(err), "%s: cannot open database: %s", path,
                     strerror(err));
    if (!create)
      return TP_FAIL(TP_EUSAGE, "%s: no such database (run a benchmark first, or check the path)",
                     path);
    *exists = 0;
    return TP_OK;
  }
  if (S_ISDIR(st.st_mode))
    return TP_FAIL(TP_EUSAGE, "%s: is a directory, not a database file", path);
  if (!S_ISREG(st.st_mode))
    return TP_FAIL(TP_EUSAGE, "%s: not a regular file; a database must be one", path);
  *exists = 1;
  return TP_OK;
}

/* Migration i must have version i + 1: user_version counts applied ones. */
static tp_rc check_migrations(void) {
  for (int i = 0; i < tp_n_migrations; i++)
    if (tp_migrations[i].version != i + 1 || !tp_migrations[i].sql)
      return TP_FAIL(TP_EINTERNAL, "embedded migration %d (%s) is out of order", i,
                     tp_migrations[i].name ? tp_migrations[i].name : "?");
  return TP_OK;
}

/* ---- opening: read-write, migrate, WAL ---------------------------------- */

/* The folder path is in ("." for a bare name), into dir. */
static void folder_of(const char *path, char *dir, size_t cap) {
  snprintf(dir, cap, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, cap, ".");
  else if (slash == dir) dir[1] = '\0';
  else *slash = '\0';
}

/* Why a database that does not exist yet could not be made there: the folder's errno when the
 * user cannot write it (EACCES, EROFS), else 0. SQLite retries a failed create read-only, so
 * the errno it keeps is that retry's ENOENT, which names the wrong cause. */
static int why_not_created(const char *path) {
  struct stat st;
  if (stat(path, &st) == 0 || errno != ENOENT) return 0;
  char dir[4096];
  folder_of(path, dir, sizeof dir);
  return access(dir, W_OK | X_OK) == 0 ? 0 : errno;
}

static tp_rc open_read_write(tp_store *s, int create) {
  char *uri = file_uri(s->path, "");
  if (!uri) return TP_FAIL(TP_EOOM, "%s: out of memory", s->path);
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI | (create ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(uri, &s->db, flags, NULL);
  free(uri);
  if (rc != SQLITE_OK) {
    int sys = s->db ? sqlite3_system_errno(s->db) : 0;
    int folder = create ? why_not_created(s->path) : 0;
    if (folder) sys = folder;
    tp_rc why = tp_rc_for_path_errno(sys);
    return TP_FAIL(why, "%s: cannot %s database: %s%s%s", s->path, create ? "create" : "open",
                   s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc), sys ? ": " : "",
                   sys ? strerror(sys) : "");
  }
  /* SQLite quietly falls back to read-only when the file is write-protected. */
  if (sqlite3_db_readonly(s->db, "main") == 1)
    return TP_FAIL(TP_EUSAGE, "%s: cannot write the database (permission denied)", s->path);
  if (sqlite3_extended_result_codes(s->db, 1) != SQLITE_OK)
    return SQL_FAIL(s->db, s->path, "enabling extended result codes");
  if (sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS) != SQLITE_OK)
    return SQL_FAIL(s->db, s->path, "setting the busy timeout");
  TP_TRY(exec_sql(s->db, s->path, "PRAGMA foreign_keys = ON", "turning on foreign keys"));
  int64_t fk = 0;
  TP_TRY(query_int(s->db, s->path, "PRAGMA foreign_keys", "checking foreign keys", &fk));
  if (fk != 1) return TP_FAIL(TP_ESQLITE, "%s: this SQLite cannot enforce foreign keys", s->path);
  return TP_OK;
}

static tp_rc apply_migrations(tp_store *s, int64_t from) {
  if (from < 0 || from > tp_n_migrations) /* judge_identity refuses these first */
    return TP_FAIL(TP_EINTERNAL, "%s: no migration starts at schema version %lld", s->path,
                   (long long)from);
  char sql[64];
  if (from == 0) {
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d", TP_STORE_APP_ID);
    TP_TRY(exec_sql(s->db, s->path, sql, "marking the file as tpbench's (application_id)"));
  }
  for (int i = (int)from; i < tp_n_migrations; i++) {
    const tp_migration *m = &tp_migrations[i];
    TP_LOGI("store", "%s: applying migration %s", s->path, m->name);
    char *err = NULL;
    if (sqlite3_exec(s->db, m->sql, NULL, NULL, &err) != SQLITE_OK) {
      tp_rc rc = TP_FAIL(TP_ESQLITE, "%s: applying migration %s: %s", s->path, m->name,
                         err ? err : sqlite3_errmsg(s->db));
      sqlite3_free(err);
      return rc;
    }
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", m->version);
    TP_TRY(exec_sql(s->db, s->path, sql, "recording the schema version"));
  }
  return TP_OK;
}

/* Checks ownership again, now with the -wal in view. A database already up to
 * date needs no write lock, so readers do not queue behind a running
 * benchmark; one to migrate is checked again and migrated in one IMMEDIATE
 * transaction (another process may have migrated it meanwhile), so a failed
 * migration leaves the file at its old version. */
static tp_rc check_and_migrate(tp_store *s) {
  const int newest = tp_store_schema_version();
  db_identity id = {0};
  TP_TRY(check_identity(s->db, "main", s->path, &id));
  if (id.app_id == TP_STORE_APP_ID && id.version == newest) {
    s->version = newest;
    return TP_OK;
  }
  TP_TRY(exec_sql(s->db, s->path, "BEGIN IMMEDIATE",
                  "starting the migration (is another tpbench writing?)"));
  tp_rc rc = check_identity(s->db, "main", s->path, &id);
  if (rc == TP_OK && id.version < newest) rc = apply_migrations(s, id.version);
  if (rc == TP_OK) rc = exec_sql(s->db, s->path, "COMMIT", "committing the migration");
  if (rc != TP_OK) {
    rollback_quietly(s->db, s->path);
    return rc;
  }
  int64_t version = 0;
  TP_TRY(query_int(s->db, s->path, "PRAGMA user_version", "reading the schema version", &version));
  s->version = (int)version;
  return TP_OK;
}

/* statfs(2) f_type of filesystems whose files other hosts share, or whose
 * memory mappings are not coherent: network (NFS, SMB/CIFS, 9p, AFS, Coda,
 * NCP), cluster (Lustre, GPFS/Spectrum Scale, BeeGFS, Ceph, OCFS2, GFS2,
 * PanFS, OrangeFS) and FUSE (sshfs and the FUSE clients of the above). The
 * magic numbers linux/magic.h lacks are the filesystems' own. */
static const struct {
  uint64_t magic;
  const char *name;
} SHARED_FILESYSTEMS[] = {
    {NFS_SUPER_MAGIC, "NFS"},   {SMB_SUPER_MAGIC, "SMB"},     {CIFS_SUPER_MAGIC, "CIFS"},
    {SMB2_SUPER_MAGIC, "SMB2"}, {V9FS_MAGIC, "9p"},           {AFS_SUPER_MAGIC, "AFS"},
    {AFS_FS_MAGIC, "AFS"},      {CODA_SUPER_MAGIC, "Coda"},   {NCP_SUPER_MAGIC, "NCP"},
    {CEPH_SUPER_MAGIC, "Ceph"}, {OCFS2_SUPER_MAGIC, "OCFS2"}, {FUSE_SUPER_MAGIC, "FUSE"},
    {0x0BD00BD0, "Lustre"},     {0x47504653, "GPFS"},         {0x19830326, "BeeGFS"},
    {0x01161970, "GFS2"},       {0xAAD7AAEA, "PanFS"},        {0x20030528, "OrangeFS"},
};

tp_rc tp_store_journal_for(uint64_t fs_type, const char *override, tp_store_journal *out) {
  memset(out, 0, sizeof *out);
  if (override && override[0]) {
    if (strcmp(override, "wal") != 0 && strcmp(override, "delete") != 0)
      return TP_FAIL(TP_EUSAGE, "TPBENCH_DB_JOURNAL must be 'wal' or 'delete', not '%s'", override);
    out->mode = strcmp(override, "wal") == 0 ? "WAL" : "DELETE";
    snprintf(out->why, sizeof out->why, "TPBENCH_DB_JOURNAL=%s", override);
    return TP_OK;
  }
  for (size_t i = 0; i < sizeof SHARED_FILESYSTEMS / sizeof SHARED_FILESYSTEMS[0]; i++)
    if (SHARED_FILESYSTEMS[i].magic == (fs_type & 0xffffffffu)) {
      out->mode = "DELETE";
      snprintf(out->why, sizeof out->why, "the database is on %s, a shared filesystem",
               SHARED_FILESYSTEMS[i].name);
      return TP_OK;
    }
  out->mode = "WAL";
  snprintf(out->why, sizeof out->why, "a local filesystem (type 0x%llx)",
           (unsigned long long)fs_type);
  return TP_OK;
}

/* The journal mode for the database at path: its folder's filesystem (the
 * -wal and -shm files live beside it). A statfs that fails keeps WAL. */
static tp_rc choose_journal(const tp_store *s, tp_store_journal *out) {
  char dir[4096];
  folder_of(s->path, dir, sizeof dir);
  struct statfs fs;
  uint64_t type = statfs(dir, &fs) == 0 ? (uint64_t)fs.f_type : 0;
  return tp_store_journal_for(type, getenv("TPBENCH_DB_JOURNAL"), out);
}

static tp_rc set_journal_mode(tp_store *s) {
  tp_store_journal want;
  TP_TRY(choose_journal(s, &want));
  TP_LOGI("store", "%s: journal mode %s (%s)", s->path, want.mode, want.why);
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA journal_mode = %s", want.mode);
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &stmt, NULL) != SQLITE_OK)
    return SQL_FAIL(s->db, s->path, "preparing the journal mode switch");
  tp_rc out = TP_OK;
  if (sqlite3_step(stmt) != SQLITE_ROW) {
    out = SQL_FAIL(s->db, s->path, "switching the journal mode");
  } else {
    const char *mode = (const char *)sqlite3_column_text(stmt, 0);
    if (!mode || strcasecmp(mode, want.mode) != 0)
      out = TP_FAIL(TP_EIO,
                    "%s: cannot use journal mode %s (%s; it stays %s); is the directory "
                    "writable?",
                    s->path, want.mode, want.why, mode ? mode : "unknown");
  }
  sqlite3_finalize(stmt);
  return out;
}

int tp_store_schema_version(void) { return tp_n_migrations; }

tp_rc tp_store_probe(const char *path, int *version) {
  if (!path || !*path) return TP_FAIL(TP_EUSAGE, "no database path given");
  TP_TRY(check_migrations());
  int exists = 0;
  TP_TRY(check_path(path, 0, &exists));
  int64_t found = 0;
  TP_TRY(sniff_existing_file(path, &found));
  if (found == 0) return tp_store_refuse_empty(path);
  if (version) *version = (int)found;
  return TP_OK;
}

tp_rc tp_store_refuse_empty(const char *path) {
  return TP_FAIL(TP_EFOREIGN,
                 "%s: an empty file or a SQLite database without tables, not a tpbench "
                 "database. The file was not changed",
                 path);
}

char *tp_store_file_uri(const char *path, const char *query) { return file_uri(path, query); }

int tp_store_version(const tp_store *store) { return store ? store->version : 0; }

const char *tp_store_path(const tp_store *store) { return store ? store->path : ""; }

const char *const tp_store_side_suffixes[TP_STORE_N_SIDE_FILES] = {"-wal", "-shm", "-journal"};

tp_rc tp_store_open(const char *path, int create, tp_store **out) {
  if (!out) return TP_FAIL(TP_EINTERNAL, "tp_store_open: out is NULL");
  *out = NULL;
  if (!path || !*path) return TP_FAIL(TP_EUSAGE, "no database path given");
  TP_TRY(check_migrations());
  tp_store_journal journal; /* a bad TPBENCH_DB_JOURNAL stops the open before any file is made */
  TP_TRY(tp_store_journal_for(0, getenv("TPBENCH_DB_JOURNAL"), &journal));
  int exists = 0;
  TP_TRY(check_path(path, create, &exists));
  int64_t version = 0;
  if (exists) TP_TRY(sniff_existing_file(path, &version));

  tp_store *s = calloc(1, sizeof *s);
  if (!s || !(s->path = strdup(path))) {
    free(s);
    return TP_FAIL(TP_EOOM, "%s: out of memory", path);
  }
  tp_rc rc = open_read_write(s, create);
  if (rc == TP_OK) rc = check_and_migrate(s);
  if (rc == TP_OK) rc = set_journal_mode(s);
  if (rc != TP_OK) {
    tp_store_close(s);
    return rc;
  }
  *out = s;
  return TP_OK;
}

/* ---- opening for reading only ------------------------------------------- */

/* What the immutable look found, said for a reader: only a tpbench database
 * at the newest schema can be read without changing it. */
static tp_rc check_readable_version(const char *path, int64_t version) {
  const int newest = tp_store_schema_version();
  if (version == 0)
    return TP_FAIL(TP_EFOREIGN, "%s: an empty database, not one tpbench wrote; nothing to read",
                   path);
  if (version < newest)
    return TP_FAIL(TP_EUSAGE,
                   "%s: schema version %lld is older than this tpbench reads (%d); run 'tpbench "
                   "migrate --db %s' to bring it up to date (older tpbench builds cannot read it "
                   "afterwards). The file was not changed",
                   path, (long long)version, newest, path);
  return TP_OK;
}

static tp_rc open_for_reading(tp_store *s) {
  tp_read_mode mode = tp_store_read_mode(s->path);
  char *uri = file_uri(s->path, tp_store_read_query(mode));
  if (!uri) return TP_FAIL(TP_EOOM, "%s: out of memory", s->path);
  int rc = sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
  free(uri);
  if (rc != SQLITE_OK) {
    tp_rc why = s->db ? tp_rc_for_path_errno(sqlite3_system_errno(s->db)) : TP_EIO;
    return TP_FAIL(why, "%s: cannot open the database for reading: %s", s->path,
                   s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
  }
  if (sqlite3_extended_result_codes(s->db, 1) != SQLITE_OK)
    return SQL_FAIL(s->db, s->path, "enabling extended result codes");
  if (sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS) != SQLITE_OK)
    return SQL_FAIL(s->db, s->path, "setting the busy timeout");
  /* Belt and braces: the connection is read-only already. */
  TP_TRY(exec_sql(s->db, s->path, "PRAGMA query_only = 1", "making the connection read-only"));
  tp_query_limit_start(&s->limit, s->db, s->path, mode == TP_READ_IMMUTABLE);
  return TP_OK;
}

tp_rc tp_store_open_readonly(const char *path, tp_store **out) {
  if (!out) return TP_FAIL(TP_EINTERNAL, "tp_store_open_readonly: out is NULL");
  *out = NULL;
  if (!path || !*path) return TP_FAIL(TP_EUSAGE, "no database path given");
  TP_TRY(check_migrations());
  int exists = 0;
  TP_TRY(check_path(path, 0, &exists));
  struct stat st;
  if (stat(path, &st) == 0 && st.st_size == 0)
    return TP_FAIL(TP_EFOREIGN, "%s: an empty file, not a tpbench database; nothing to read", path);
  int64_t version = 0;
  TP_TRY(sniff_existing_file(path, &version));
  TP_TRY(check_readable_version(path, version));

  tp_store *s = calloc(1, sizeof *s);
  if (!s || !(s->path = strdup(path))) {
    free(s);
    return TP_FAIL(TP_EOOM, "%s: out of memory", path);
  }
  /* Once more through the connection that reads: it sees the -wal too. */
  tp_rc rc = open_for_reading(s);
  if (rc == TP_OK) rc = tp_store_check_identity(s->db, "main", path, &version);
  if (rc == TP_OK) rc = check_readable_version(path, version);
  if (rc != TP_OK) {
    tp_store_close(s);
    return rc;
  }
  s->version = (int)version;
  *out = s;
  return TP_OK;
}

void tp_store_close(tp_store *store) {
  if (!store) return;
  sqlite3_finalize(store->insert_config);
  sqlite3_finalize(store->insert_result);
  sqlite3_finalize(store->insert_sample);
  sqlite3_finalize(store->insert_schedule);
  sqlite3_finalize(store->insert_window);
  sqlite3_finalize(store->insert_check);
  sqlite3_finalize(store->insert_drift_step);
  if (store->db && sqlite3_close(store->db) != SQLITE_OK)
    TP_LOGE("store", "%s: close failed: %s", store->path, sqlite3_errmsg(store->db));
  free(store->path);
  free(store);
}

struct sqlite3 *tp_store_db(tp_store *store) {
  return store ? store->db : NULL;
}

/* ---- runs --------------------------------------------------------------- */

tp_rc tp_store_begin_run(tp_store *store, const tp_run_info *info, int64_t *run_id) {
  if (!store || !info || !run_id) return TP_FAIL(TP_EINTERNAL, "tp_store_begin_run: NULL argument");
  static const char sql[] =
      "INSERT INTO runs (commit_sha, dirty, host, gpu_name, gpu_count, driver_version, "
      "cuda_version, nccl_version, cublas_version, cupti_version, command_line, command, "
      "warmup_iters, measure_iters, rounds, order_policy, order_seed, test_knobs) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(store->db, sql, -1, &stmt, NULL) != SQLITE_OK)
    return SQL_FAIL(store->db, store->path, "preparing the run insert");
  binder b = {stmt, 0, SQLITE_OK};
  bind_text(&b, info->commit);
  bind_int(&b, info->dirty != 0);
  bind_text(&b, info->host);
  bind_text(&b, info->gpu_name);
  bind_int(&b, info->gpu_count);
  bind_text(&b, info->driver_version);
  bind_text(&b, info->cuda_version);
  bind_text(&b, info->nccl_version);
  bind_text(&b, info->cublas_version);
  bind_text(&b, info->cupti_version);
  bind_text(&b, info->command_line);
  bind_text(&b, info->command);
  bind_int(&b, info->warmup_iters);
  bind_int(&b, info->measure_iters);
  if (info->rounds > 0) bind_int(&b, info->rounds);
  else bind_text(&b, NULL);
  bind_text(&b, info->order_policy);
  if (info->order_policy && strcmp(info->order_policy, "shuffle") == 0)
    bind_int(&b, info->order_seed);
  else bind_text(&b, NULL);
  bind_text(&b, info->test_knobs);
  tp_rc rc = bind_and_step(store, &b, "recording the run");
  sqlite3_finalize(stmt);
  if (rc == TP_OK) *run_id = sqlite3_last_insert_rowid(store->db);
  return rc;
}

static tp_rc put_run_system(tp_store *s, int64_t run_id, const tp_run_system *sys) {
  static const char sql[] =
      "UPDATE runs SET launcher = ?, slurm_job_id = ?, slurm_array_job_id = ?, "
      "slurm_array_task_id = ?, topology = ?, topology_source = ?, environment = ? WHERE id = ?";
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &stmt, NULL) != SQLITE_OK)
    return SQL_FAIL(s->db, s->path, "preparing the system update");
  binder b = {stmt, 0, SQLITE_OK};
  bind_text(&b, sys->launcher);
  bind_text(&b, sys->slurm_job_id);
  bind_text(&b, sys->slurm_array_job_id);
  bind_text(&b, sys->slurm_array_task_id);
  bind_text(&b, sys->topology);
  bind_text(&b, sys->topology_source);
  bind_text(&b, sys->environment);
  bind_int(&b, run_id);
  tp_rc rc = bind_and_step(s, &b, "recording the run's system");
  sqlite3_finalize(stmt);
  if (rc == TP_OK && sqlite3_changes(s->db) != 1)
    rc = TP_FAIL(TP_EUSAGE, "%s: no run %lld to record the system of", s->path, (long long)run_id);
  return rc;
}

static const char *text_or_null(const char *text) { return text && text[0] ? text : NULL; }

static tp_rc put_rank_hosts(tp_store *s, int64_t run_id, const tp_run_system *sys) {
  static const char sql[] =
      "INSERT INTO run_ranks (run_id, rank, local_rank, host, gpu_uuid, pci_bus_id, "
      "sm_clock_mhz, max_sm_clock_mhz, power_limit_w) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &stmt, NULL) != SQLITE_OK)
    return SQL_FAIL(s->db, s->path, "preparing the rank insert");
  tp_rc rc = TP_OK;
  for (int i = 0; rc == TP_OK && i < sys->n_ranks; i++) {
    const tp_rank_host *r = &sys->ranks[i];
    sqlite3_reset(stmt);
    binder b = {stmt, 0, SQLITE_OK};
    bind_int(&b, run_id);
    bind_int(&b, r->rank);
    bind_int(&b, r->local_rank);
    bind_text(&b, text_or_null(r->host));
    bind_text(&b, text_or_null(r->gpu_uuid));
    bind_text(&b, text_or_null(r->pci_bus_id));
    if (r->sm_clock_mhz > 0) bind_int(&b, r->sm_clock_mhz);
    else bind_text(&b, NULL);
    if (r->max_sm_clock_mhz > 0) bind_int(&b, r->max_sm_clock_mhz);
    else bind_text(&b, NULL);
    bind_real(&b, r->power_limit_w > 0 ? r->power_limit_w : NAN);
    rc = bind_and_step(s, &b, "recording a rank's host");
  }
  sqlite3_finalize(stmt);
  return rc;
}

tp_rc tp_store_put_system(tp_store *store, int64_t run_id, const tp_run_system *sys) {
  if (!store || !sys || (sys->n_ranks > 0 && !sys->ranks))
    return TP_FAIL(TP_EINTERNAL, "tp_store_put_system: NULL argument");
  TP_TRY(exec_sql(store->db, store->path, "BEGIN IMMEDIATE", "starting the system record"));
  tp_rc rc = put_run_system(store, run_id, sys);
  if (rc == TP_OK) rc = put_rank_hosts(store, run_id, sys);
  if (rc == TP_OK)
    return exec_sql(store->db, store->path, "COMMIT", "committing the system record");
  rollback_quietly(store->db, store->path);
  return rc;
}

tp_rc tp_store_finish_run(tp_store *store, int64_t run_id) {
  if (!store) return TP_FAIL(TP_EINTERNAL, "tp_store_finish_run: NULL store");
  static const char sql[] =
      "UPDATE runs SET finished_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE id = ?";
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(store->db, sql, -1, &stmt, NULL) != SQLITE_OK)
    return SQL_FAIL(store->db, store->path, "preparing the run update");
  binder b = {stmt, 0, SQLITE_OK};
  bind_int(&b, run_id);
  tp_rc rc = bind_and_step(store, &b, "finishing the run");
  sqlite3_finalize(stmt);
  if (rc == TP_OK && sqlite3_changes(store->db) != 1)
    rc = TP_FAIL(TP_EUSAGE, "%s: no run %lld to finish", store->path, (long long)run_id);
  return rc;
}

/* The commit of run_id into *commit (malloc'd, NULL if none); *found = 0 if
 * there is no such run. */
static tp_rc run_commit(tp_store *s, int64_t run_id, int *found, char **commit) {
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(s->db, "SELECT commit_sha FROM runs WHERE id = ?", -1, &stmt, NULL) !=
      SQLITE_OK)
    return STORE_FAIL(s, "preparing the run lookup");
  tp_rc out = TP_OK;
  *found = 0;
  *commit = NULL;
  if (sqlite3_bind_int64(stmt, 1, run_id) != SQLITE_OK) {
    out = STORE_FAIL(s, "binding the run id");
  } else {
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
      *found = 1;
      const char *c = (const char *)sqlite3_column_text(stmt, 0);
      if (c && !(*commit = strdup(c))) out = TP_FAIL(TP_EOOM, "out of memory");
    } else if (rc != SQLITE_DONE) {
      out = STORE_FAIL(s, "looking up run %lld", (long long)run_id);
    }
  }
  sqlite3_finalize(stmt);
  return out;
}

static int has_prefix_nocase(const char *s, const char *prefix) {
  if (!s) return 0;
  for (; *prefix; prefix++, s++) {
    unsigned char a = (unsigned char)*s, b = (unsigned char)*prefix;
    if (!a || (a | 0x20) != (b | 0x20)) return 0;
  }
  return 1;
}

static tp_rc find_run_by_id(tp_store *s, int64_t run_id, const char *commit, int64_t *out) {
  int found = 0;
  char *actual = NULL;
  TP_TRY(run_commit(s, run_id, &found, &actual));
  tp_rc rc = TP_OK;
  if (!found) rc = TP_FAIL(TP_EUSAGE, "%s: there is no run %lld", s->path, (long long)run_id);
  else if (commit && !has_prefix_nocase(actual, commit))
    rc = TP_FAIL(TP_EUSAGE, "%s: run %lld is of commit %s, not %s", s->path, (long long)run_id,
                 actual ? actual : "(unknown)", commit);
  else *out = run_id;
  free(actual);
  return rc;
}

/* The latest run whose commit starts with prefix; two different commits
 * matching the prefix is an error, as git would say for an ambiguous one. */
static tp_rc find_run_by_commit(tp_store *s, const char *prefix, int64_t *out) {
  static const char sql[] = "SELECT id, commit_sha FROM runs "
                            "WHERE lower(substr(commit_sha, 1, length(?1))) = lower(?1) "
                            "ORDER BY " TP_STORE_LATEST_FIRST;
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &stmt, NULL) != SQLITE_OK)
    return STORE_FAIL(s, "preparing the commit lookup");
  tp_rc rc = TP_OK;
  int64_t latest = 0;
  char *first = NULL;
  if (sqlite3_bind_text(stmt, 1, prefix, -1, SQLITE_TRANSIENT) != SQLITE_OK)
    rc = STORE_FAIL(s, "binding the commit");
  int step = SQLITE_DONE;
  while (rc == TP_OK && (step = sqlite3_step(stmt)) == SQLITE_ROW) {
    const char *commit = (const char *)sqlite3_column_text(stmt, 1);
    if (!first) {
      latest = sqlite3_column_int64(stmt, 0);
      if (!(first = strdup(commit ? commit : ""))) rc = TP_FAIL(TP_EOOM, "out of memory");
    } else if (commit && strcmp(commit, first) != 0) {
      rc = TP_FAIL(TP_EUSAGE, "%s: commit prefix %s is ambiguous (%s, %s, ...)", s->path, prefix,
                   first, commit);
    }
  }
  if (rc == TP_OK && step != SQLITE_DONE)
    rc = STORE_FAIL(s, "looking up runs of commit %s", prefix);
  if (rc == TP_OK && !first)
    rc = TP_FAIL(TP_EUSAGE, "%s: no run of a commit starting with %s", s->path, prefix);
  if (rc == TP_OK) *out = latest;
  free(first);
  sqlite3_finalize(stmt);
  return rc;
}

tp_rc tp_store_find_run(tp_store *store, int64_t run_id, const char *commit, int64_t *out) {
  if (!store || !out) return TP_FAIL(TP_EINTERNAL, "tp_store_find_run: NULL argument");
  if (run_id < 0) return TP_FAIL(TP_EUSAGE, "run id %lld is not valid", (long long)run_id);
  if (commit && !*commit) commit = NULL;
  if (run_id > 0) return find_run_by_id(store, run_id, commit, out);
  if (commit) return find_run_by_commit(store, commit, out);
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(store->db,
                         "SELECT coalesce((SELECT id FROM runs ORDER BY " TP_STORE_LATEST_FIRST
                         " LIMIT 1), 0)",
                         -1, &stmt, NULL) != SQLITE_OK)
    return STORE_FAIL(store, "preparing to find the latest run");
  int step = sqlite3_step(stmt);
  int64_t latest = step == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
  sqlite3_finalize(stmt);
  if (step != SQLITE_ROW) return STORE_FAIL(store, "finding the latest run");
  if (latest == 0) return TP_FAIL(TP_EUSAGE, "%s: the database holds no runs yet", store->path);
  *out = latest;
  return TP_OK;
}

/* ---- configuration keys ------------------------------------------------- */

/* Writes into buf as far as cap allows while counting the whole length, so
 * one pass both fills a fixed buffer and sizes an allocation. */
typedef struct {
  char *buf;
  size_t cap;
  size_t len;
} key_writer;

static void key_char(key_writer *w, char c) {
  if (w->len + 1 < w->cap) w->buf[w->len] = c;
  w->len++;
}

static void key_name(key_writer *w, const char *name) {
  if (w->len > 0) key_char(w, ';');
  for (; *name; name++) key_char(w, *name);
  key_char(w, '=');
}

/* Escapes the separators so a value can never fake another axis. */
static void key_str(key_writer *w, const char *name, const char *value) {
  key_name(w, name);
  for (; value && *value; value++) {
    if (*value == '\\' || *value == ';' || *value == '=') key_char(w, '\\');
    key_char(w, *value);
  }
}

static void key_int(key_writer *w, const char *name, int64_t value) {
  char digits[24];
  snprintf(digits, sizeof digits, "%lld", (long long)value);
  key_name(w, name);
  for (const char *d = digits; *d; d++) key_char(w, *d);
}

/* The order below is the stored format: append new axes, never reorder. */
static size_t write_key(const tp_config_axes *a, int whole_config, char *buf, size_t cap) {
  key_writer w = {buf, cap, 0};
  if (whole_config) key_str(&w, "kind", a->kind);
  key_str(&w, "model", a->model);
  key_str(&w, "layer", a->op_or_layer);
  key_str(&w, "proj", a->proj);
  if (whole_config) {
    key_str(&w, "backend", a->backend);
    key_str(&w, "schedule", a->schedule);
    key_int(&w, "chunks", a->chunks);
  }
  key_int(&w, "tp", a->tp);
  key_int(&w, "batch", a->batch);
  key_int(&w, "seqlen", a->seqlen);
  key_int(&w, "tokens", a->tokens);
  key_int(&w, "m", a->m);
  key_int(&w, "n", a->n);
  key_int(&w, "k", a->k);
  key_int(&w, "n_weights", a->n_weights);
  key_str(&w, "dtype", a->dtype);
  key_int(&w, "sp", a->sp);
  key_str(&w, "pass", a->pass);
  key_int(&w, "graph", a->graph);
  key_int(&w, "save_gathered", a->save_gathered);
  /* Appended in 006, only where not at the default: older keys stay valid. */
  if (a->dp > 1) key_int(&w, "dp", a->dp);
  if (a->ac && *a->ac && strcmp(a->ac, "none") != 0) key_str(&w, "ac", a->ac);
  if (a->graph_sizes && *a->graph_sizes) key_str(&w, "graph_sizes", a->graph_sizes);
  if (whole_config && a->rs_sum && *a->rs_sum) key_str(&w, "rs_sum", a->rs_sum);
  /* Appended in 007, likewise. */
  if (a->comm_dtype && *a->comm_dtype) key_str(&w, "comm_dtype", a->comm_dtype);
  if (a->fsdp_traffic) key_int(&w, "fsdp_traffic", 1);
  if (whole_config && a->symm && *a->symm && strcmp(a->symm, "ipc") != 0)
    key_str(&w, "symm", a->symm);
  if (cap > 0) buf[w.len < cap ? w.len : cap - 1] = '\0';
  return w.len;
}

size_t tp_config_key(const tp_config_axes *axes, char *buf, size_t cap) {
  if (!axes || !buf || cap == 0) return 0;
  size_t len = write_key(axes, 1, buf, cap);
  return len < cap ? len : cap - 1;
}

size_t tp_case_key(const tp_config_axes *axes, char *buf, size_t cap) {
  if (!axes || !buf || cap == 0) return 0;
  size_t len = write_key(axes, 0, buf, cap);
  return len < cap ? len : cap - 1;
}

/* The whole key, however long, in a malloc'd string (NULL when out of memory). */
static char *key_dup(const tp_config_axes *axes, int whole_config) {
  size_t len = write_key(axes, whole_config, NULL, 0);
  char *key = malloc(len + 1);
  if (key) write_key(axes, whole_config, key, len + 1);
  return key;
}

/* ---- configurations ----------------------------------------------------- */

const char *tp_status_name(tp_config_status status) {
  switch (status) {
  case TP_STATUS_OK: return "ok";
  case TP_STATUS_REJECTED: return "rejected";
  case TP_STATUS_FAILED: return "failed";
  case TP_STATUS_OOM: return "oom";
  case TP_STATUS_TIMEOUT: return "timeout";
  }
  return "invalid";
}

/* Catches records a caller built wrongly before anything is written; what the
 * data itself violates is left to the schema's constraints. */
static tp_rc check_record(const tp_config_record *rec) {
  if (!rec || !rec->axes) return TP_FAIL(TP_EINTERNAL, "configuration record without axes");
  if (rec->status < TP_STATUS_OK || rec->status > TP_STATUS_TIMEOUT)
    return TP_FAIL(TP_EINTERNAL, "configuration status %d is not a tp_config_status",
                   (int)rec->status);
  if (rec->status == TP_STATUS_OK && !rec->result)
    return TP_FAIL(TP_EINTERNAL, "an ok configuration needs its result");
  if (rec->n_sample_sets < 0 || (rec->n_sample_sets > 0 && !rec->samples))
    return TP_FAIL(TP_EINTERNAL, "%d sample sets without samples", rec->n_sample_sets);
  for (int i = 0; i < rec->n_sample_sets; i++)
    if (rec->samples[i].count < 0 || (rec->samples[i].count > 0 && !rec->samples[i].time_us))
      return TP_FAIL(TP_EINTERNAL, "sample set %d: %d samples without times", i,
                     rec->samples[i].count);
  if (rec->n_schedules < 0 || (rec->n_schedules > 0 && !rec->schedules))
    return TP_FAIL(TP_EINTERNAL, "%d schedules without entries", rec->n_schedules);
  if (rec->n_windows < 0 || (rec->n_windows > 0 && !rec->windows))
    return TP_FAIL(TP_EINTERNAL, "%d windows without entries", rec->n_windows);
  if (rec->n_checks < 0 || (rec->n_checks > 0 && !rec->checks))
    return TP_FAIL(TP_EINTERNAL, "%d checks without entries", rec->n_checks);
  if (rec->n_drift_steps < 0 || (rec->n_drift_steps > 0 && !rec->drift_steps))
    return TP_FAIL(TP_EINTERNAL, "%d drift steps without entries", rec->n_drift_steps);
  if (rec->trace) return tp_store_check_trace(rec->trace);
  return TP_OK;
}

static tp_rc insert_config(tp_store *s, int64_t run_id, const tp_config_record *rec,
                           const char *key, const char *case_key, int64_t *id) {
  TP_TRY(prepare_once(s, &s->insert_config,
                      "INSERT INTO configs (run_id, config_key, case_key, kind, model, layer, "
                      "proj, backend, schedule, chunks, tp, batch, seqlen, tokens, m, n, k, "
                      "n_weights, dtype, sp, pass, graph, save_gathered, status, reason, dp, ac, "
                      "graph_sizes, rs_sum, comm_dtype, fsdp_traffic, symm) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                      "?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  const tp_config_axes *a = rec->axes;
  binder b = {s->insert_config, 0, SQLITE_OK};
  bind_int(&b, run_id);
  bind_text(&b, key);
  bind_text(&b, case_key);
  bind_text(&b, a->kind);
  bind_text(&b, a->model);
  bind_text(&b, a->op_or_layer);
  bind_text(&b, a->proj);
  bind_text(&b, a->backend);
  bind_text(&b, a->schedule);
  bind_int(&b, a->chunks);
  bind_int(&b, a->tp);
  bind_int(&b, a->batch);
  bind_int(&b, a->seqlen);
  bind_int(&b, a->tokens);
  bind_int(&b, a->m);
  bind_int(&b, a->n);
  bind_int(&b, a->k);
  bind_int(&b, a->n_weights);
  bind_text(&b, a->dtype);
  bind_int(&b, a->sp);
  bind_text(&b, a->pass);
  bind_int(&b, a->graph);
  bind_int(&b, a->save_gathered);
  bind_text(&b, tp_status_name(rec->status));
  bind_text(&b, rec->reason);
  bind_int(&b, a->dp > 1 ? a->dp : 1);
  bind_text(&b, a->ac && *a->ac ? a->ac : "none");
  bind_text(&b, a->graph_sizes && *a->graph_sizes ? a->graph_sizes : NULL);
  bind_text(&b, a->rs_sum && *a->rs_sum ? a->rs_sum : NULL);
  bind_text(&b, a->comm_dtype && *a->comm_dtype ? a->comm_dtype : NULL);
  bind_int(&b, a->fsdp_traffic != 0);
  bind_text(&b, a->symm && *a->symm ? a->symm : NULL);
  TP_TRY(bind_and_step(s, &b, "inserting into configs"));
  *id = sqlite3_last_insert_rowid(s->db);
  return TP_OK;
}

/* A byte count that 0 marks as not recorded: NULL then. */
static void bind_optional_bytes(binder *b, int64_t bytes) {
  if (bytes > 0) bind_int(b, bytes);
  else bind_text(b, NULL);
}

static tp_rc insert_result(tp_store *s, int64_t config_id, const tp_result *r) {
  TP_TRY(
      prepare_once(s, &s->insert_result,
                   "INSERT INTO results (config_id, n_samples, median_us, p10_us, p90_us, "
                   "mean_us, min_us, max_us, cv, tokens_per_s, tflops, flops, bytes_moved, "
                   "workspace_bytes, peak_mem_bytes, max_abs_err, rel_err, numerics_ref, "
                   "n_rounds, ci_lo_us, ci_hi_us, rank_skew, host_stall_frac, numerics, "
                   "numerics_reason, fused, activation_bytes, alloc_peak_bytes, traffic_bytes) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                   "?, ?, ?, ?, ?, ?)"));
  binder b = {s->insert_result, 0, SQLITE_OK};
  bind_int(&b, config_id);
  bind_int(&b, r->n_samples);
  bind_real(&b, r->median_us);
  bind_real(&b, r->p10_us);
  bind_real(&b, r->p90_us);
  bind_real(&b, r->mean_us);
  bind_real(&b, r->min_us);
  bind_real(&b, r->max_us);
  bind_real(&b, r->cv);
  bind_real(&b, r->tokens_per_s);
  bind_real(&b, r->tflops);
  bind_real(&b, r->flops);
  bind_real(&b, r->bytes_moved);
  bind_int(&b, r->workspace_bytes);
  bind_int(&b, r->peak_mem_bytes);
  bind_real(&b, r->max_abs_err);
  bind_real(&b, r->rel_err);
  bind_text(&b, r->numerics_ref);
  const int rounds = r->n_rounds > 0;
  if (rounds) bind_int(&b, r->n_rounds);
  else bind_text(&b, NULL);
  bind_real(&b, rounds ? r->ci_lo_us : NAN);
  bind_real(&b, rounds ? r->ci_hi_us : NAN);
  bind_real(&b, rounds ? r->rank_skew : NAN);
  bind_real(&b, rounds ? r->host_stall_frac : NAN);
  bind_text(&b, r->numerics);
  bind_text(&b, r->numerics_reason);
  if (r->fused == TP_FUSED_NA) bind_text(&b, NULL);
  else bind_int(&b, r->fused == TP_FUSED_ALL);
  bind_optional_bytes(&b, r->activation_bytes);
  bind_optional_bytes(&b, r->alloc_peak_bytes);
  bind_optional_bytes(&b, r->traffic_bytes);
  return bind_and_step(s, &b, "inserting into results");
}

static tp_rc insert_samples(tp_store *s, int64_t config_id, const tp_samples *sets, int n_sets) {
  if (n_sets == 0) return TP_OK;
  TP_TRY(prepare_once(s, &s->insert_sample,
                      "INSERT INTO samples (config_id, rank, iter, time_us, round, host_us) "
                      "VALUES (?, ?, ?, ?, ?, ?)"));
  for (int set = 0; set < n_sets; set++) {
    for (int iter = 0; iter < sets[set].count; iter++) {
      binder b = {s->insert_sample, 0, SQLITE_OK};
      bind_int(&b, config_id);
      bind_int(&b, sets[set].rank);
      bind_int(&b, iter);
      bind_real(&b, sets[set].time_us[iter]);
      bind_int(&b, sets[set].round ? sets[set].round[iter] : 0);
      bind_real(&b, sets[set].host_us ? sets[set].host_us[iter] : NAN);
      TP_TRY(bind_and_step(s, &b, "inserting into samples"));
    }
  }
  return TP_OK;
}

static tp_rc insert_schedules(tp_store *s, int64_t config_id, const tp_schedule_choice *choices,
                              int n) {
  if (n == 0) return TP_OK;
  TP_TRY(prepare_once(s, &s->insert_schedule,
                      "INSERT INTO schedules (config_id, seq, op, schedule, engine, chunks, "
                      "reason) VALUES (?, ?, ?, ?, ?, ?, ?)"));
  for (int i = 0; i < n; i++) {
    binder b = {s->insert_schedule, 0, SQLITE_OK};
    bind_int(&b, config_id);
    bind_int(&b, i);
    bind_text(&b, choices[i].op);
    bind_text(&b, choices[i].schedule);
    bind_text(&b, choices[i].engine);
    bind_int(&b, choices[i].chunks);
    bind_text(&b, choices[i].reason);
    TP_TRY(bind_and_step(s, &b, "inserting into schedules"));
  }
  return TP_OK;
}

static tp_rc insert_windows(tp_store *s, int64_t config_id, const tp_window *w, int n) {
  if (n == 0) return TP_OK;
  TP_TRY(prepare_once(s, &s->insert_window,
                      "INSERT INTO windows (config_id, round, position, median_us) "
                      "VALUES (?, ?, ?, ?)"));
  for (int i = 0; i < n; i++) {
    binder b = {s->insert_window, 0, SQLITE_OK};
    bind_int(&b, config_id);
    bind_int(&b, w[i].round);
    bind_int(&b, w[i].position);
    bind_real(&b, w[i].median_us);
    TP_TRY(bind_and_step(s, &b, "inserting into windows"));
  }
  return TP_OK;
}

static tp_rc insert_checks(tp_store *s, int64_t config_id, const tp_check *c, int n) {
  if (n == 0) return TP_OK;
  TP_TRY(prepare_once(s, &s->insert_check,
                      "INSERT INTO checks (config_id, seq, output, rule, status, elements, "
                      "nonfinite, differ, rel_err, max_abs_err, tolerance, reason) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  for (int i = 0; i < n; i++) {
    binder b = {s->insert_check, 0, SQLITE_OK};
    bind_int(&b, config_id);
    bind_int(&b, i);
    bind_text(&b, c[i].output);
    bind_text(&b, c[i].rule);
    bind_text(&b, c[i].status);
    bind_int(&b, c[i].elements);
    bind_int(&b, c[i].nonfinite);
    bind_int(&b, c[i].differ);
    bind_real(&b, c[i].rel_err);
    bind_real(&b, c[i].max_abs_err);
    bind_real(&b, c[i].tolerance);
    bind_text(&b, c[i].reason);
    TP_TRY(bind_and_step(s, &b, "inserting into checks"));
  }
  return TP_OK;
}

static tp_rc insert_drift_steps(tp_store *s, int64_t config_id, const tp_drift_step *d, int n) {
  if (n == 0) return TP_OK;
  TP_TRY(prepare_once(s, &s->insert_drift_step,
                      "INSERT INTO drift_steps (config_id, step, loss, grad_norm) "
                      "VALUES (?, ?, ?, ?)"));
  for (int i = 0; i < n; i++) {
    binder b = {s->insert_drift_step, 0, SQLITE_OK};
    bind_int(&b, config_id);
    bind_int(&b, d[i].step);
    bind_real(&b, d[i].loss);
    bind_real(&b, d[i].grad_norm);
    TP_TRY(bind_and_step(s, &b, "inserting into drift_steps"));
  }
  return TP_OK;
}

static tp_rc write_record(tp_store *s, int64_t run_id, const tp_config_record *rec, const char *key,
                          const char *case_key, int64_t *id) {
  TP_TRY(insert_config(s, run_id, rec, key, case_key, id));
  if (rec->result) TP_TRY(insert_result(s, *id, rec->result));
  TP_TRY(insert_samples(s, *id, rec->samples, rec->n_sample_sets));
  TP_TRY(insert_schedules(s, *id, rec->schedules, rec->n_schedules));
  TP_TRY(insert_windows(s, *id, rec->windows, rec->n_windows));
  TP_TRY(insert_checks(s, *id, rec->checks, rec->n_checks));
  TP_TRY(insert_drift_steps(s, *id, rec->drift_steps, rec->n_drift_steps));
  if (rec->trace) TP_TRY(tp_store_write_trace(s, *id, rec->trace));
  return TP_OK;
}

tp_rc tp_store_put_config(tp_store *store, int64_t run_id, const tp_config_record *rec,
                          int64_t *config_id) {
  if (!store) return TP_FAIL(TP_EINTERNAL, "tp_store_put_config: NULL store");
  TP_TRY(check_record(rec));
  char *key = key_dup(rec->axes, 1);
  char *case_key = key_dup(rec->axes, 0);
  tp_rc rc = (key && case_key) ? TP_OK : TP_FAIL(TP_EOOM, "out of memory");
  int64_t id = 0;
  if (rc == TP_OK)
    rc = exec_sql(store->db, store->path, "BEGIN IMMEDIATE",
                  "starting to write a configuration (is another tpbench writing?)");
  if (rc == TP_OK) {
    rc = write_record(store, run_id, rec, key, case_key, &id);
    if (rc == TP_OK) rc = exec_sql(store->db, store->path, "COMMIT", "committing a configuration");
    if (rc != TP_OK) rollback_quietly(store->db, store->path);
  }
  if (rc != TP_OK)
    rc = TP_STORE_CONTEXT(rc, "configuration %s of run %lld not written", key ? key : "?",
                          (long long)run_id);
  else if (config_id) *config_id = id;
  free(key);
  free(case_key);
  return rc;
}

/* ---- shared with the store's other files (tp_store_internal.h) ---------- */

/* Keeps SQLite's code and message of the failure just seen on store's connection. */
static void note_failure(tp_store *store) {
  store->failed_code = store->db ? sqlite3_extended_errcode(store->db) : SQLITE_NOMEM;
  snprintf(store->failed_msg, sizeof store->failed_msg, "%s",
           store->db ? sqlite3_errmsg(store->db) : "out of memory");
}

tp_rc tp_store_sql_fail(const char *file, int line, tp_store *store, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  note_failure(store);
  return sql_fail_at(file, line, store->db, store->path, &store->limit, "%s", what);
}

tp_rc tp_store_exec(tp_store *store, const char *sql, const char *what) {
  tp_rc rc = exec_sql(store->db, store->path, sql, what);
  if (rc != TP_OK) note_failure(store); /* SQLite's code and message stay until the next call */
  return rc;
}

int tp_store_take_failure(tp_store *store, char *msg, size_t cap) {
  const int code = store->failed_code;
  if (msg && cap) snprintf(msg, cap, "%s", store->failed_msg);
  store->failed_code = 0;
  store->failed_msg[0] = '\0';
  return code;
}

tp_rc tp_store_prepare(tp_store *store, const char *sql, const char *what, sqlite3_stmt **stmt) {
  if (sqlite3_prepare_v2(store->db, sql, -1, stmt, NULL) != SQLITE_OK) {
    *stmt = NULL;
    return TP_STORE_SQL_FAIL(store, "preparing %s", what);
  }
  return TP_OK;
}

tp_rc tp_store_step_done(tp_store *store, sqlite3_stmt *stmt, int bind_rc, const char *what) {
  tp_rc rc = TP_OK;
  if (bind_rc != SQLITE_OK) rc = TP_STORE_SQL_FAIL(store, "binding %s", what);
  else if (sqlite3_step(stmt) != SQLITE_DONE) rc = TP_STORE_SQL_FAIL(store, "%s", what);
  sqlite3_reset(stmt); /* returns the step's error again: already reported */
  sqlite3_clear_bindings(stmt);
  return rc;
}

int tp_store_bind_real_or_null(sqlite3_stmt *stmt, int col, double value) {
  return isfinite(value) ? sqlite3_bind_double(stmt, col, value) : sqlite3_bind_null(stmt, col);
}

tp_rc tp_store_context(const char *file, int line, tp_rc rc, const char *fmt, ...) {
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  /* tp_fail writes "file:line: " before every message; the cause keeps only
   * its sentence. Copied first: the buffer is also tp_fail's destination. */
  char cause[2048];
  const char *last = tp_last_error();
  const char *sep = strstr(last, ": ");
  snprintf(cause, sizeof cause, "%s", sep ? sep + 2 : last);
  return tp_fail(rc, file, line, "%s: %s", prefix, cause);
}

void tp_store_rollback(tp_store *store) { rollback_quietly(store->db, store->path); }
