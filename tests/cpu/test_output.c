/*
 * test_output.c — report/tp_output.h, the one way tpbench writes an output
 * file, tried as an attacker would: a target that is a FIFO, a link to a
 * device, a folder or the database (by inode, by link, by a side file's
 * name; its side files through a symbolic or hard link to it) is refused
 * with nothing changed; a replaced file keeps its permission bits; links
 * planted at the temporary names of old (out.json.tmp) are never followed;
 * a failed write leaves the target as it was and no temporary; writers
 * racing on one target always leave one writer's whole file. Each case runs
 * under an alarm, so a blocking open fails the test instead of hanging it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report/tp_output.h"

typedef struct {
  char dir[256];
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f) return -1;
  const char *tmp = getenv("TMPDIR");
  snprintf(f->dir, sizeof f->dir, "%s/tp_output_test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(f->dir)) return -1;
  alarm(60);
  *state = f;
  return 0;
}

/* Removes the folder's entries (files, links, FIFOs, one level of folders). */
static int teardown(void **state) {
  fixture *f = *state;
  DIR *d = opendir(f->dir);
  for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", f->dir, e->d_name);
    if (unlink(path) != 0) rmdir(path);
  }
  if (d) closedir(d);
  rmdir(f->dir);
  free(f);
  alarm(0);
  return 0;
}

static void path_in(const fixture *f, const char *name, char *buf, size_t cap) {
  snprintf(buf, cap, "%s/%s", f->dir, name);
}

static void put_file(const char *path, const char *text) {
  FILE *fp = fopen(path, "w");
  assert_non_null(fp);
  fputs(text, fp);
  assert_int_equal(fclose(fp), 0);
}

/* The file's bytes (malloc'd, NUL-terminated) or NULL. */
static char *slurp(const char *path) {
  FILE *fp = fopen(path, "r");
  if (!fp) return NULL;
  char *buf = NULL;
  size_t cap = 0, len = 0;
  for (;;) {
    if (len + 4097 > cap) {
      cap = cap * 2 + 8192;
      char *grown = realloc(buf, cap);
      assert_non_null(grown);
      buf = grown;
    }
    size_t n = fread(buf + len, 1, 4096, fp);
    len += n;
    if (n == 0) break;
  }
  fclose(fp);
  buf[len] = '\0';
  return buf;
}

static int entries(const fixture *f) {
  int n = 0;
  DIR *d = opendir(f->dir);
  assert_non_null(d);
  for (struct dirent *e = readdir(d); e; e = readdir(d))
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

/* Writes text to path through tp_output. */
static tp_rc write_output(const char *path, const char *db, const char *text) {
  tp_output out;
  tp_rc rc = tp_output_open(path, db, &out);
  if (rc != TP_OK) return rc;
  fputs(text, out.file);
  return tp_output_commit(&out, db);
}

static void expect_refused(const char *path, const char *db, const char *words) {
  tp_rc rc = write_output(path, db, "{\"json\": true}\n");
  if (rc != TP_EUSAGE) fail_msg("%s: expected a refusal, got %s", path, tp_rc_name(rc));
  if (!strstr(tp_last_error(), words)) fail_msg("'%s' not in: %s", words, tp_last_error());
}

/* ---- writing ------------------------------------------------------------------ */

static void test_writes_and_replaces(void **state) {
  fixture *f = *state;
  char path[600];
  path_in(f, "out.json", path, sizeof path);
  assert_int_equal(write_output(path, NULL, "first\n"), TP_OK);
  char *text = slurp(path);
  assert_string_equal(text, "first\n");
  free(text);
  /* the usual mode, not the temporary's 0600 */
  mode_t mask = umask(022);
  umask(mask);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0644 & ~mask);
  assert_int_equal(write_output(path, NULL, "second\n"), TP_OK);
  text = slurp(path);
  assert_string_equal(text, "second\n");
  free(text);
  assert_int_equal(entries(f), 1); /* no temporary left */
}

/* A replaced file keeps its permission bits (a private 0600 file is not
 * published as 0644; the umask does not narrow 0664), less set-id bits. */
static void test_replacing_keeps_mode(void **state) {
  fixture *f = *state;
  char path[600];
  path_in(f, "private.json", path, sizeof path);
  mode_t mask = umask(022);
  static const struct {
    mode_t before, after;
  } cases[] = {{0600, 0600}, {0664, 0664}, {0640, 0640}, {04755, 0755}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    put_file(path, "old");
    assert_int_equal(chmod(path, cases[i].before), 0);
    assert_int_equal(write_output(path, NULL, "new\n"), TP_OK);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    if ((st.st_mode & 07777) != cases[i].after)
      fail_msg("mode %o became %o, expected %o", (unsigned)cases[i].before,
               (unsigned)(st.st_mode & 07777), (unsigned)cases[i].after);
  }
  umask(mask);
  char *text = slurp(path);
  assert_string_equal(text, "new\n");
  free(text);
  assert_int_equal(entries(f), 1);
}

/* While written, the temporary is private (0600), in the target's folder,
 * and not at a name anyone could guess. */
static void test_temporary_is_private(void **state) {
  fixture *f = *state;
  char path[600], guess[700];
  path_in(f, "out.json", path, sizeof path);
  tp_output out;
  assert_int_equal(tp_output_open(path, NULL, &out), TP_OK);
  struct stat st;
  assert_int_equal(fstat(fileno(out.file), &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_memory_equal(out.tmp, f->dir, strlen(f->dir));
  snprintf(guess, sizeof guess, "%s.tmp", path);
  assert_string_not_equal(out.tmp, guess);
  char tmp[700];
  snprintf(tmp, sizeof tmp, "%s", out.tmp);
  tp_output_abort(&out);
  assert_int_not_equal(access(tmp, F_OK), 0); /* abort removes it */
  assert_int_not_equal(access(path, F_OK), 0);
  assert_int_equal(entries(f), 0);
}

/* ---- refused targets -------------------------------------------------------------------- */

static void test_refuses_fifo(void **state) {
  fixture *f = *state;
  char path[600];
  path_in(f, "out.json", path, sizeof path);
  assert_int_equal(mkfifo(path, 0600), 0);
  struct stat before, after;
  assert_int_equal(lstat(path, &before), 0);
  expect_refused(path, NULL, "is a FIFO");
  assert_int_equal(lstat(path, &after), 0);
  assert_true(S_ISFIFO(after.st_mode));
  assert_int_equal(before.st_ino, after.st_ino);
  assert_int_equal(entries(f), 1);
}

static void test_refuses_link_to_device(void **state) {
  fixture *f = *state;
  char path[600], target[64];
  path_in(f, "null.json", path, sizeof path);
  assert_int_equal(symlink("/dev/null", path), 0);
  struct stat dev_before, dev_after;
  assert_int_equal(stat("/dev/null", &dev_before), 0);
  expect_refused(path, NULL, "is a device (through a symbolic link)");
  ssize_t n = readlink(path, target, sizeof target - 1);
  assert_true(n > 0);
  target[n] = '\0';
  assert_string_equal(target, "/dev/null"); /* the link itself is left too */
  assert_int_equal(stat("/dev/null", &dev_after), 0);
  assert_true(S_ISCHR(dev_after.st_mode));
  assert_int_equal(dev_before.st_ino, dev_after.st_ino);
  assert_int_equal(entries(f), 1);
}

static void test_refuses_folder_and_empty(void **state) {
  fixture *f = *state;
  char path[600];
  path_in(f, "site", path, sizeof path);
  assert_int_equal(mkdir(path, 0700), 0);
  expect_refused(path, NULL, "is a folder");
  expect_refused("", NULL, "an empty output path");
  path_in(f, "new/", path, sizeof path);
  expect_refused(path, NULL, "names a folder");
  assert_int_equal(entries(f), 1);
}

/* The database, whichever way it is named, and its side files. */
static void test_refuses_database(void **state) {
  fixture *f = *state;
  char db[600], symlinked[600], hard[600], wal[700], shm[700], journal[700];
  path_in(f, "tpbench.db", db, sizeof db);
  put_file(db, "SQLite format 3 and precious rows");
  struct stat before, after;
  assert_int_equal(stat(db, &before), 0);

  expect_refused(db, db, "this is the database");
  path_in(f, "link.json", symlinked, sizeof symlinked);
  assert_int_equal(symlink("tpbench.db", symlinked), 0);
  expect_refused(symlinked, db, "this is the database");
  path_in(f, "hard.json", hard, sizeof hard);
  assert_int_equal(link(db, hard) == 0 || errno == EPERM, 1);
  if (access(hard, F_OK) == 0) expect_refused(hard, db, "this is the database");
  /* -wal and -journal do not exist: refused by name; -shm exists */
  snprintf(wal, sizeof wal, "%s-wal", db);
  expect_refused(wal, db, "side file");
  snprintf(journal, sizeof journal, "%s-journal", db);
  expect_refused(journal, db, "side file");
  snprintf(shm, sizeof shm, "%s-shm", db);
  put_file(shm, "shared memory");
  expect_refused(shm, db, "side file");
  /* the same file spelt with a detour through the folder */
  char detour[700];
  snprintf(detour, sizeof detour, "%s/../%s/tpbench.db", f->dir, strrchr(f->dir, '/') + 1);
  expect_refused(detour, db, "this is the database");

  char *text = slurp(db);
  assert_string_equal(text, "SQLite format 3 and precious rows");
  free(text);
  assert_int_equal(stat(db, &after), 0);
  assert_int_equal(before.st_ino, after.st_ino);
  assert_int_not_equal(access(wal, F_OK), 0);
  /* another file beside it is fine */
  path_in(f, "out.json", symlinked, sizeof symlinked);
  assert_int_equal(write_output(symlinked, db, "ok\n"), TP_OK);
}

/* The database's side files named through another name of the database:
 * --db a symbolic link (SQLite resolves it, so the real -wal sits beside
 * the real file), a hard link ("X-wal" where X is the database's inode), a
 * folder reached through a link. The -wal holds a committed transaction:
 * it must keep its bytes and inode. */
static void test_refuses_side_files_by_identity(void **state) {
  fixture *f = *state;
  char db[600], symlinked[600], hard[600], wal[700], shm[700], journal[700], hard_wal[700];
  path_in(f, "s2.db", db, sizeof db);
  put_file(db, "SQLite format 3 in WAL mode");
  snprintf(wal, sizeof wal, "%s-wal", db);
  put_file(wal, "a committed transaction");
  snprintf(shm, sizeof shm, "%s-shm", db);
  snprintf(journal, sizeof journal, "%s-journal", db);
  struct stat before, after;
  assert_int_equal(stat(wal, &before), 0);

  path_in(f, "link.db", symlinked, sizeof symlinked);
  assert_int_equal(symlink("s2.db", symlinked), 0);
  expect_refused(wal, symlinked, "side file");     /* exists: by inode */
  expect_refused(shm, symlinked, "side file");     /* absent: by resolved name */
  expect_refused(journal, symlinked, "side file"); /* absent: by resolved name */
  char folder_link[600], through[700];
  path_in(f, "folder", folder_link, sizeof folder_link);
  assert_int_equal(symlink(f->dir, folder_link), 0);
  snprintf(through, sizeof through, "%s/link.db", folder_link);
  expect_refused(journal, through, "side file");

  path_in(f, "hard.json", hard, sizeof hard);
  if (link(db, hard) == 0) {
    expect_refused(wal, hard, "database under another name");
    expect_refused(shm, hard, "database under another name");
    expect_refused(journal, hard, "database under another name");
    snprintf(hard_wal, sizeof hard_wal, "%s-wal", hard);
    expect_refused(hard_wal, db, "database under another name");
  } else {
    assert_int_equal(errno, EPERM); /* hard links not allowed here */
  }

  char *text = slurp(wal);
  assert_string_equal(text, "a committed transaction");
  free(text);
  assert_int_equal(stat(wal, &after), 0);
  assert_int_equal(before.st_ino, after.st_ino);
  assert_int_not_equal(access(shm, F_OK), 0);
  assert_int_not_equal(access(journal, F_OK), 0);
  /* another database's side file, and names that only start alike, are fine */
  char other[600], other_wal[700], longer[800];
  path_in(f, "other.db", other, sizeof other);
  put_file(other, "SQLite format 3 in WAL mode");
  snprintf(other_wal, sizeof other_wal, "%s-wal", other);
  assert_int_equal(write_output(other_wal, symlinked, "ok\n"), TP_OK);
  snprintf(longer, sizeof longer, "%s.json", wal);
  assert_int_equal(write_output(longer, symlinked, "ok\n"), TP_OK);
}

/* Links planted where the old code put its temporaries ("out.json.tmp")
 * point at a file the writer must not touch. */
static void test_planted_links_not_followed(void **state) {
  fixture *f = *state;
  char victim[600], path[600], planted[700];
  path_in(f, "victim", victim, sizeof victim);
  put_file(victim, "do not touch");
  path_in(f, "out.json", path, sizeof path);
  const char *suffixes[] = {".tmp", ".XXXXXX", ".json.tmp"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    snprintf(planted, sizeof planted, "%s%s", path, suffixes[i]);
    assert_int_equal(symlink(victim, planted), 0);
  }
  assert_int_equal(write_output(path, NULL, "output\n"), TP_OK);
  char *text = slurp(victim);
  assert_string_equal(text, "do not touch");
  free(text);
  text = slurp(path);
  assert_string_equal(text, "output\n");
  free(text);
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(entries(f), 2 + 3);
}

/* A target that turns into a FIFO while the content is written is still
 * refused at the rename, and the temporary goes. */
static void test_checked_again_at_commit(void **state) {
  fixture *f = *state;
  char path[600];
  path_in(f, "out.json", path, sizeof path);
  tp_output out;
  assert_int_equal(tp_output_open(path, NULL, &out), TP_OK);
  fputs("content", out.file);
  assert_int_equal(mkfifo(path, 0600), 0);
  assert_int_equal(tp_output_commit(&out, NULL), TP_EUSAGE);
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISFIFO(st.st_mode));
  assert_int_equal(entries(f), 1);
}

/* A write that fails (here: the descriptor is gone) leaves the old file
 * and no temporary. */
static void test_failed_write_leaves_target(void **state) {
  fixture *f = *state;
  char path[600];
  path_in(f, "out.json", path, sizeof path);
  put_file(path, "previous complete file");
  tp_output out;
  assert_int_equal(tp_output_open(path, NULL, &out), TP_OK);
  fputs("half a fi", out.file);
  close(fileno(out.file));
  assert_int_equal(tp_output_commit(&out, NULL), TP_EIO);
  assert_non_null(strstr(tp_last_error(), "writing failed"));
  char *text = slurp(path);
  assert_string_equal(text, "previous complete file");
  free(text);
  assert_int_equal(entries(f), 1);
}

/* ---- racing writers ------------------------------------------------------------------------ */

enum { WRITERS = 4, ROUNDS = 25, SIZE = 256 * 1024 };

/* Writer w's file: SIZE bytes of one letter. */
static void write_letter(const char *path, int w) {
  char *text = malloc(SIZE + 1);
  if (!text) _exit(3);
  memset(text, 'A' + w, SIZE);
  text[SIZE] = '\0';
  for (int r = 0; r < ROUNDS; r++)
    if (write_output(path, NULL, text) != TP_OK) _exit(1);
  free(text);
  _exit(0);
}

/* Whether the file is one writer's whole file. */
static int whole(const char *text) {
  if (strlen(text) != SIZE) return 0;
  for (size_t i = 1; i < SIZE; i++)
    if (text[i] != text[0]) return 0;
  return text[0] >= 'A' && text[0] < 'A' + WRITERS;
}

static void test_racing_writers_never_mix(void **state) {
  fixture *f = *state;
  char path[600];
  path_in(f, "index.html", path, sizeof path);
  pid_t pids[WRITERS];
  for (int w = 0; w < WRITERS; w++) {
    pids[w] = fork();
    assert_true(pids[w] >= 0);
    if (pids[w] == 0) write_letter(path, w);
  }
  /* Read while they write: every version seen is somebody's whole file. */
  int seen = 0, running = WRITERS;
  while (running > 0) {
    char *text = slurp(path);
    if (text) {
      if (!whole(text)) fail_msg("a mixed file of %zu bytes", strlen(text));
      seen++;
    }
    free(text);
    running = 0;
    for (int w = 0; w < WRITERS; w++) {
      if (pids[w] <= 0) continue;
      int status = 0;
      if (waitpid(pids[w], &status, WNOHANG) == pids[w]) {
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        pids[w] = 0;
      } else {
        running++;
      }
    }
  }
  char *text = slurp(path);
  assert_non_null(text);
  assert_true(whole(text));
  free(text);
  printf("  read %d complete versions while %d writers raced\n", seen, WRITERS);
  assert_int_equal(entries(f), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_writes_and_replaces, setup, teardown),
      cmocka_unit_test_setup_teardown(test_replacing_keeps_mode, setup, teardown),
      cmocka_unit_test_setup_teardown(test_temporary_is_private, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refuses_fifo, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refuses_link_to_device, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refuses_folder_and_empty, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refuses_database, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refuses_side_files_by_identity, setup, teardown),
      cmocka_unit_test_setup_teardown(test_planted_links_not_followed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_checked_again_at_commit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_failed_write_leaves_target, setup, teardown),
      cmocka_unit_test_setup_teardown(test_racing_writers_never_mix, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
