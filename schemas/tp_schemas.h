/*
 * tp_schemas.h — the SQLite schema of tpbench, embedded in the binary.
 *
 * schemas/NNN_name.sql are the migrations in order; cmake/embed.cmake turns
 * them into tp_migrations[] at build time, so the binary needs no file beside
 * it. Migration i (0-based) has version i + 1: applying it brings a database
 * from PRAGMA user_version i to i + 1. store/tp_store.c applies them; nothing
 * else should.
 */
#ifndef TP_SCHEMAS_H
#define TP_SCHEMAS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int version;      /* the NNN of the file name: 1, 2, ... */
  const char *name; /* the file name without ".sql", e.g. "001_init" */
  const char *sql;  /* the whole file, NUL-terminated; no BEGIN/COMMIT inside */
} tp_migration;

/* The migrations in order of version, tp_n_migrations of them. */
extern const tp_migration tp_migrations[];
extern const int tp_n_migrations;

#ifdef __cplusplus
}
#endif

#endif /* TP_SCHEMAS_H */
