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

/* Refuses the database and the side files SQLite keeps beside it. */
static tp_rc check_not_database(const char *path, const char *db) {
  static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
  if (!db || !*db) return TP_OK;
  size_t cap = strlen(db) + sizeof "-journal";
  char *side = malloc(cap);
  if (!side) return out_of_memory();
  tp_rc rc = TP_OK;
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0] && rc == TP_OK; i++) {
    snprintf(side, cap, "%s%s", db, suffixes[i]);
    if (same_file(path, side))
      rc = TP_FAIL(TP_EUSAGE, "%s: this is the database%s%s; refusing to overwrite it", path,
                   i ? "'s side file " : "", i ? side : "");
  }
  free(side);
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
    tp_rc rc =
        TP_FAIL(TP_EIO, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
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

/* Flushes, syncs and closes the temporary; out->file is NULL afterwards. */
static tp_rc finish_temp(tp_output *out) {
  FILE *f = out->file;
  out->file = NULL;
  int failed = fflush(f) != 0 || ferror(f);
  int err = failed ? errno : 0;
  if (!failed && (fsync(fileno(f)) != 0 || fchmod(fileno(f), public_mode()) != 0)) {
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
