/*
 * tp_output.c — output files written through a private temporary and an
 * atomic rename (see tp_output.h).
 *
 * rename() replaces the directory entry, never writes through it, so the
 * checks on the target (regular file, not the database) are there to refuse
 * a wrong path with a sentence rather than to make the write safe: a device
 * node or FIFO would otherwise be replaced by a plain file, the database by
 * JSON. They run twice, before the temporary is made and right before the
 * rename.
 */
#include "report/tp_output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/tp_store.h"

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "output file: out of memory"); }

/* "a FIFO" for a file type that may not be replaced. */
static const char *kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/* A malloc'd copy of the folder part of path ("." when there is none). */
static char *folder_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  if (slash == path) return strdup("/");
  return strndup(path, (size_t)(slash - path));
}

static const char *name_of(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Whether a and b are the same file: the same inode when both exist, or the
 * same name in the same folder (a side file that does not exist yet). */
static int same_file(const char *a, const char *b) {
  struct stat sa, sb;
  if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (strcmp(name_of(a), name_of(b)) != 0) return 0;
  char *fa = folder_of(a), *fb = folder_of(b);
  int same = fa && fb && stat(fa, &sa) == 0 && stat(fb, &sb) == 0 && sa.st_dev == sb.st_dev &&
             sa.st_ino == sb.st_ino;
  free(fa);
  free(fb);
  return same;
}

static tp_rc refuse_side_file(const char *path, const char *side) {
  return TP_FAIL(TP_EUSAGE, "%s: this is the database's side file %s; refusing to overwrite it",
                 path, side);
}

/* Refuses path when it is spelling's -wal, -shm or -journal. */
static tp_rc check_side_files_of(const char *path, const char *spelling) {
  size_t cap = strlen(spelling) + sizeof "-journal";
  char *side = malloc(cap);
  if (!side) return out_of_memory();
  tp_rc rc = TP_OK;
  for (size_t i = 0; i < TP_STORE_N_SIDE_FILES && rc == TP_OK; i++) {
    snprintf(side, cap, "%s%s", spelling, tp_store_side_suffixes[i]);
    if (same_file(path, side)) rc = refuse_side_file(path, side);
  }
  free(side);
  return rc;
}

/* A hard link names the database as well as its own name does, and SQLite
 * opened through it keeps its side files beside that name: a target
 * "X-wal", "X-shm" or "X-journal" is refused when X is the database's
 * inode, whatever the side files of --db are called. */
static tp_rc check_side_file_of_alias(const char *path, const struct stat *db_st) {
  size_t len = strlen(path);
  for (size_t i = 0; i < TP_STORE_N_SIDE_FILES; i++) {
    size_t suffix = strlen(tp_store_side_suffixes[i]);
    if (len <= suffix || strcmp(path + len - suffix, tp_store_side_suffixes[i]) != 0) continue;
    char *alias = strndup(path, len - suffix);
    if (!alias) return out_of_memory();
    struct stat st;
    int same = stat(alias, &st) == 0 && st.st_dev == db_st->st_dev && st.st_ino == db_st->st_ino;
    tp_rc rc = same ? TP_FAIL(TP_EUSAGE,
                              "%s: this is the database's side file (%s is the database under "
                              "another name); refusing to overwrite it",
                              path, alias)
                    : TP_OK;
    free(alias);
    return rc;
  }
  return TP_OK;
}

/* Refuses the database and the side files SQLite keeps beside it, by
 * identity rather than by spelling: db as given, db with its links
 * resolved (SQLite resolves a symbolic link and keeps the side files beside
 * the real file), and any hard link's side files. */
static tp_rc check_not_database(const char *path, const char *db) {
  if (!db || !*db) return TP_OK;
  if (same_file(path, db))
    return TP_FAIL(TP_EUSAGE, "%s: this is the database; refusing to overwrite it", path);
  TP_TRY(check_side_files_of(path, db));
  char *resolved = realpath(db, NULL); /* NULL while db does not exist */
  tp_rc rc = resolved ? check_side_files_of(path, resolved) : TP_OK;
  free(resolved);
  struct stat db_st;
  if (rc == TP_OK && stat(db, &db_st) == 0) rc = check_side_file_of_alias(path, &db_st);
  return rc;
}

/* The target may be absent (or a dangling link, which the rename replaces)
 * or a regular file, which the rename replaces whole. */
static tp_rc check_target(const char *path, const char *db) {
  if (!path || !*path) return TP_FAIL(TP_EUSAGE, "an empty output path: name a file");
  size_t len = strlen(path);
  if (path[len - 1] == '/') return TP_FAIL(TP_EUSAGE, "%s: names a folder, not a file", path);
  struct stat st;
  if (stat(path, &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      struct stat link;
      int through_link = lstat(path, &link) == 0 && S_ISLNK(link.st_mode);
      return TP_FAIL(TP_EUSAGE, "%s: is %s%s; only a regular file can be replaced", path,
                     kind_of(st.st_mode), through_link ? " (through a symbolic link)" : "");
    }
  } else if (errno != ENOENT) {
    return TP_FAIL(TP_EUSAGE, "%s: cannot use this path: %s", path, strerror(errno));
  }
  return check_not_database(path, db);
}

/* mkstemp's name: ".NAME.XXXXXX" in the target's folder, so the rename
 * stays within one file system. */
static char *temp_template(const char *path) {
  char *folder = folder_of(path);
  if (!folder) return NULL;
  size_t cap = strlen(folder) + strlen(name_of(path)) + sizeof "/..XXXXXX";
  char *tmp = malloc(cap);
  if (tmp) snprintf(tmp, cap, "%s/.%s.XXXXXX", folder, name_of(path));
  free(folder);
  return tmp;
}

tp_rc tp_output_check(const char *path, const char *protect_db) {
  return check_target(path, protect_db);
}

tp_rc tp_output_open(const char *path, const char *protect_db, tp_output *out) {
  memset(out, 0, sizeof *out);
  TP_TRY(check_target(path, protect_db));
  out->path = strdup(path);
  out->tmp = temp_template(path);
  if (!out->path || !out->tmp) {
    tp_output_abort(out);
    return out_of_memory();
  }
  /* O_CREAT | O_EXCL, mode 0600: never an existing file, never a link */
  int fd = mkstemp(out->tmp);
  if (fd < 0) {
    const int err = errno;
    tp_rc rc = TP_FAIL(tp_rc_for_path_errno(err),
                       "%s: cannot create a temporary file beside it: %s", path, strerror(err));
    free(out->tmp);
    out->tmp = NULL;
    tp_output_abort(out);
    return rc;
  }
  out->file = fdopen(fd, "w");
  if (!out->file) {
    close(fd);
    tp_output_abort(out);
    return out_of_memory();
  }
  return TP_OK;
}

/* The mode a plain fopen would give, capped at 0644: umask is read by
 * setting it and putting it back (there is no other portable way). */
static mode_t public_mode(void) {
  mode_t mask = umask(077);
  umask(mask);
  return (mode_t)(0644 & ~mask);
}

/* The new file's mode: an existing file's permission bits, so replacing a
 * private (0600) file does not publish it, else public_mode(). The set-id
 * and sticky bits are not carried: the new file belongs to whoever runs
 * tpbench, and a set-id bit would then grant that owner's rights. */
static mode_t new_file_mode(const char *path) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 0777;
  return public_mode();
}

/* Flushes, syncs and closes the temporary; out->file is NULL afterwards. */
static tp_rc finish_temp(tp_output *out) {
  FILE *f = out->file;
  out->file = NULL;
  int failed = fflush(f) != 0 || ferror(f);
  int err = failed ? errno : 0;
  if (!failed && (fchmod(fileno(f), new_file_mode(out->path)) != 0 || fsync(fileno(f)) != 0)) {
    failed = 1;
    err = errno;
  }
  if (fclose(f) != 0 && !failed) {
    failed = 1;
    err = errno;
  }
  if (failed)
    return TP_FAIL(TP_EIO, "%s: writing failed: %s", out->path,
                   err ? strerror(err) : "a write error");
  return TP_OK;
}

/* Makes the rename itself durable; a folder that cannot be synced (some
 * file systems refuse) does not undo a complete file. */
static void sync_folder(const char *path) {
  char *folder = folder_of(path);
  if (!folder) return;
  int fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
  free(folder);
}

tp_rc tp_output_commit(tp_output *out, const char *protect_db) {
  if (!out->file) return TP_FAIL(TP_EINTERNAL, "tp_output_commit: the output is not open");
  tp_rc rc = finish_temp(out);
  if (rc == TP_OK) rc = check_target(out->path, protect_db);
  if (rc == TP_OK && rename(out->tmp, out->path) != 0)
    rc = TP_FAIL(TP_EIO, "%s: cannot rename the temporary into place: %s", out->path,
                 strerror(errno));
  if (rc == TP_OK) {
    sync_folder(out->path);
    free(out->tmp);
    out->tmp = NULL; /* renamed: nothing left to remove */
  }
  tp_output_abort(out);
  return rc;
}

void tp_output_abort(tp_output *out) {
  if (out->file) fclose(out->file);
  if (out->tmp) unlink(out->tmp);
  free(out->tmp);
  free(out->path);
  memset(out, 0, sizeof *out);
}
