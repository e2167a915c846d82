/*
 * cmd_migrate.c — `tpbench migrate [--db PATH]`: brings a database written
 * by an older tpbench up to this binary's schema (store/tp_store.h). The
 * reading commands (report, compare, history, trace, dashboard) never change
 * a file, so they refuse an older one and name this command. Needs no GPU.
 *
 * Exit status (tp_exit_for): 0 migrated or already up to date; 2 a path that
 * is not a tpbench database (missing, a folder, empty, another program's,
 * newer than this binary); 1 otherwise (a read error, a failed migration,
 * which leaves the file as it was).
 */
#include <stdio.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "store/tp_store.h"

static tp_rc parse_args(int argc, char **argv, const char **db, int *help) {
  const tp_option options[] = {
      {"db", TP_OPT_STRING, db, "PATH", "database to migrate (never created)", 0, 0, NULL},
  };
  const tp_command cmd = {
      .name = "migrate",
      .usage = "tpbench migrate [--db PATH]",
      .summary = "Brings a database written by an older tpbench up to this binary's schema,\n"
                 "in one transaction. report, compare, history, trace and dashboard read\n"
                 "only databases at the current schema, and never change a file themselves.",
      .options = options,
      .n_options = (int)(sizeof options / sizeof options[0]),
  };
  return tp_cli_parse(&cmd, argc, argv, NULL, 0, NULL, help);
}

/* The probe refuses an empty file (which the store would make a new
 * database: not this command's job) before anything is opened to write. */
static tp_rc migrate(const char *db) {
  int before = 0;
  tp_rc rc = tp_store_probe(db, &before);
  if (rc != TP_OK) {
    tp_print_error("migrate");
    return rc;
  }
  if (before == tp_store_schema_version()) {
    printf("%s: already at schema version %d; nothing to do\n", db, before);
    return TP_OK;
  }
  tp_store *store = NULL;
  rc = tp_store_open(db, 0, &store);
  if (rc != TP_OK) {
    tp_print_error("migrate");
    return rc;
  }
  printf("%s: schema version %d -> %d\n", db, before, tp_store_version(store));
  tp_store_close(store);
  return TP_OK;
}

int tp_cmd_migrate(int argc, char **argv) {
  const char *db = "tpbench.db";
  int help = 0;
  tp_rc rc = parse_args(argc, argv, &db, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  return tp_exit_for(migrate(db));
}
