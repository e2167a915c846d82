/*
 * cmd_import.c — `tpbench import OTHER.db...`: merges runs measured
 * elsewhere (a Slurm array's per-job databases, a colleague's results) into
 * --db (store/tp_store.h, tp_store_import). Needs no GPU.
 *
 * Each file is checked before the target is even opened: a file that is not
 * a tpbench database (an empty one included: 0 bytes, or SQLite without
 * tables), is missing or has a newer schema is refused (exit 2) and the
 * target stays byte-for-byte as it was, or is not created. Each file is then one transaction;
 * runs already present (same run uuid) are skipped, so importing a file
 * twice adds nothing, except a run imported unfinished that has grown since:
 * it is replaced (tp_store_import says when). A file damaged past its first
 * pages fails during the copy, also exit 2. An import that fails before any
 * file went in removes the target when it made it (and the side files it
 * made), never a file that was there before.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "store/tp_store.h"

enum { MAX_SOURCES = 64 };

typedef struct import_args {
  const char *db;
  const char *sources[MAX_SOURCES];
  int n_sources;
} import_args;

static tp_rc parse_args(int argc, char **argv, import_args *a, int *help) {
  const tp_option options[] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "database to import into (created if missing)", 0, 0,
       NULL},
  };
  const tp_command cmd = {
      .name = "import",
      .usage = "tpbench import OTHER.db... [--db PATH]",
      .summary = "Copies every run of each OTHER.db that --db does not hold yet (runs are\n"
                 "matched by their uuid), with configurations, results, samples, schedules and\n"
                 "traces; one transaction per file. Importing a file again adds nothing.",
      .options = options,
      .n_options = (int)(sizeof options / sizeof options[0]),
  };
  return tp_cli_parse(&cmd, argc, argv, a->sources, MAX_SOURCES, &a->n_sources, help);
}

/* Refuses what cannot be imported before anything is opened for writing. */
static tp_rc check_sources(const import_args *a) {
  for (int i = 0; i < a->n_sources; i++) {
    tp_rc rc = tp_store_probe(a->sources[i], NULL);
    if (rc == TP_OK) continue;
    tp_print_error("import");
    return rc;
  }
  return TP_OK;
}

/* The target as the import found it: made here (empty, by O_EXCL, so never a file another
 * program made meanwhile, which tp_store_open then makes a database) when the path did not
 * exist, and which of its side files were there before. The file made is the one the path
 * names in the end: --db may be a symbolic link to a file not there yet, which the store would
 * create through the link (and SQLite keeps side files beside the file a link leads to). */
typedef struct new_target {
  int made;
  char path[PATH_MAX]; /* the file made: db, or where its links lead */
  struct stat made_as;
  int side_was_there[TP_STORE_N_SIDE_FILES];
} new_target;

/* Whether db's side file i fits buf (a cut name would be another file's). */
static int side_path(const char *db, int i, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s%s", db, tp_store_side_suffixes[i]);
  return n >= 0 && (size_t)n < cap;
}

/* Where a file created at db lands: db itself, or, db being a symbolic link (to another, ...),
 * the path the last link names, relative to its own folder. 0 when that path exists or cannot
 * be told (a loop, a name too long): nothing to make then. */
static int landing_path(const char *db, char *out, size_t cap) {
  if (snprintf(out, cap, "%s", db) >= (int)cap) return 0;
  for (int hop = 0; hop < 40; hop++) {
    struct stat st;
    if (lstat(out, &st) != 0) return errno == ENOENT;
    if (!S_ISLNK(st.st_mode)) return 0;
    char link[PATH_MAX];
    const ssize_t n = readlink(out, link, sizeof link - 1);
    if (n <= 0) return 0;
    link[n] = '\0';
    const char *slash = strrchr(out, '/');
    char next[PATH_MAX];
    const int len = link[0] == '/' || !slash
                        ? snprintf(next, sizeof next, "%s", link)
                        : snprintf(next, sizeof next, "%.*s/%s", (int)(slash - out), out, link);
    if (len < 0 || (size_t)len >= sizeof next || (size_t)len >= cap) return 0;
    memcpy(out, next, (size_t)len + 1);
  }
  return 0;
}

static void make_target(const char *db, new_target *t) {
  *t = (new_target){0};
  if (!landing_path(db, t->path, sizeof t->path)) return; /* there already: tp_store_open's */
  char side[PATH_MAX + 16];
  struct stat st;
  for (int i = 0; i < TP_STORE_N_SIDE_FILES; i++) {
    t->side_was_there[i] =
        !side_path(t->path, i, side, sizeof side) || lstat(side, &st) == 0 || errno != ENOENT;
  }
  int fd = open(t->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return; /* there already, or not to be made: tp_store_open says why */
  t->made = fstat(fd, &t->made_as) == 0;
  (void)close(fd);
}

/* After a failure that left nothing in the target: removes what make_target made, the store
 * closed (SQLite's side files of the new database included), and nothing that was there: not
 * the side files either when the file is no longer the one made (another program's now). */
static void unmake_target(const new_target *t) {
  if (!t->made) return;
  struct stat st;
  if (lstat(t->path, &st) != 0 || st.st_dev != t->made_as.st_dev ||
      st.st_ino != t->made_as.st_ino || unlink(t->path) != 0)
    return;
  char side[PATH_MAX + 16];
  for (int i = 0; i < TP_STORE_N_SIDE_FILES; i++) {
    if (!t->side_was_there[i] && side_path(t->path, i, side, sizeof side)) (void)unlink(side);
  }
}

static tp_rc import_all(const import_args *a) {
  tp_store *store = NULL;
  new_target target;
  make_target(a->db, &target);
  tp_rc rc = tp_store_open(a->db, 1, &store);
  if (rc != TP_OK) {
    fprintf(stderr, "tpbench import: cannot open '%s': %s\n", a->db, tp_cli_last_message());
    unmake_target(&target);
    return rc;
  }
  for (int i = 0; i < a->n_sources; i++) {
    tp_import_stats st;
    rc = tp_store_import(store, a->sources[i], &st);
    if (rc != TP_OK) {
      tp_print_error("import");
      tp_store_close(store);
      /* an earlier file went in (and was said to): the target keeps it */
      if (i == 0) unmake_target(&target);
      return rc;
    }
    char drift[48] = ""; /* named only when there are any: other imports read as before */
    if (st.drift_steps > 0)
      snprintf(drift, sizeof drift, ", %lld drift steps", (long long)st.drift_steps);
    char updated[96] = ""; /* likewise */
    if (st.runs_updated > 0)
      snprintf(updated, sizeof updated, ", %d updated (unfinished here, grown in the source)",
               st.runs_updated);
    printf("%s: %d run%s imported (%lld configurations, %lld samples, %lld trace events%s), "
           "%d already present%s\n",
           a->sources[i], st.runs_imported, st.runs_imported == 1 ? "" : "s", (long long)st.configs,
           (long long)st.samples, (long long)st.events, drift, st.runs_present, updated);
  }
  tp_store_close(store);
  return TP_OK;
}

int tp_cmd_import(int argc, char **argv) {
  import_args a = {.db = "tpbench.db"};
  int help = 0;
  tp_rc rc = parse_args(argc, argv, &a, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
  if (a.n_sources == 0) {
    fprintf(stderr, "tpbench import: name at least one database to import\n"
                    "Try 'tpbench import --help'.\n");
    return tp_exit_for(TP_EUSAGE);
  }
  rc = check_sources(&a);
  return tp_exit_for(rc == TP_OK ? import_all(&a) : rc);
}
