/*
 * test_dashboard_whole.c — `tpbench dashboard` on the sample database (5 MB,
 * 160 traces) as a user runs it:
 *   - it takes at most 3 s of CPU (user + system; the issue measured 11 s
 *     of wall time before). CPU time, not wall time, is held to the bound:
 *     the build machine is shared and its wall time swings with the load;
 *     on this 2-core machine an unloaded run took about 1.6 s of both
 *     (1.4 s user), so 3 s leaves a margin of nearly two;
 *   - a dashboard killed (SIGKILL) at any moment leaves its folder whole: no
 *     folder (the first generation) or one whose index.html names exactly
 *     the trace files in its traces/ — never an old page beside new traces,
 *     or a new page beside old ones, as writing in place left it. The kills
 *     land at moments spread over a run; a slower build (sanitizers) only
 *     moves them earlier in it.
 * TPBENCH_EXE names the binary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/cpu/fixture_db.h"

#ifndef TPBENCH_EXE
#error "TPBENCH_EXE must name the tpbench binary"
#endif

static const double CPU_BOUND_S = 3.0;

/* The bound holds for an optimised build without sanitizers (CMake says which). */
#ifndef TP_TEST_OPTIMIZED
#define TP_TEST_OPTIMIZED 0
#endif

typedef struct {
  fx_dir dir;
  char db[600], other_db[600], site[600];
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || fx_mkdir(&f->dir, "tp_dashboard_whole") != 0) return -1;
  fx_path(&f->dir, "sample.db", f->db, sizeof f->db);
  fx_path(&f->dir, "site", f->site, sizeof f->site);
  fx_path(&f->dir, "other.db", f->other_db, sizeof f->other_db);
  if (fx_copy(FX_SAMPLE_DB, f->db) != 0 || fx_copy(FX_SAMPLE_DB, f->other_db) != 0) return -1;
  /* a second database whose every trace file differs (each names its run's commit): two
   * generations then share no trace file name, so half of each shows */
  sqlite3 *db = NULL;
  int rc = sqlite3_open(f->other_db, &db);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(db, "UPDATE runs SET commit_sha = 'f' || substr(commit_sha, 2)", NULL, NULL,
                      NULL);
  sqlite3_close(db);
  if (rc != SQLITE_OK) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  fx_rmdir(&f->dir);
  free(f);
  return 0;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Starts `tpbench dashboard --db DB --out site`, its output on /dev/null. */
static pid_t start_dashboard(const fixture *f, const char *database) {
  pid_t pid = fork();
  if (pid == 0) {
    int null_fd = open("/dev/null", O_WRONLY);
    if (null_fd >= 0) {
      dup2(null_fd, STDOUT_FILENO);
      dup2(null_fd, STDERR_FILENO);
    }
    execl(TPBENCH_EXE, TPBENCH_EXE, "dashboard", "--db", database, "--out", f->site, (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* User and system time of a finished child, in seconds. */
static double cpu_s(const struct rusage *ru) {
  return (double)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) +
         (double)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1e6;
}

static void test_sample_dashboard_within_three_seconds(void **state) {
  fixture *f = *state;
  const double start = now_s();
  pid_t pid = start_dashboard(f, f->db);
  assert_true(pid > 0);
  int status = 0;
  struct rusage ru;
  assert_int_equal(wait4(pid, &status, 0, &ru), pid);
  const double wall = now_s() - start;
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  printf("dashboard of the sample database: %.2f s wall, %.2f s CPU (bound %.1f s CPU%s)\n", wall,
         cpu_s(&ru), CPU_BOUND_S,
         TP_TEST_OPTIMIZED ? "" : "; not held: a build without optimisation or with sanitizers");
  if (TP_TEST_OPTIMIZED && cpu_s(&ru) > CPU_BOUND_S)
    fail_msg("the dashboard took %.2f s of CPU (%.2f s wall), more than %.1f s", cpu_s(&ru), wall,
             CPU_BOUND_S);
}

/* Whether name is in the NULL-terminated list. */
static int listed(char **names, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(names[i], name)) return 1;
  return 0;
}

/* The trace files index.html names ("file":"traces/NAME"), malloc'd names into names[]. */
static size_t named_traces(const char *page, char **names, size_t cap) {
  static const char key[] = "\"file\":\"traces/";
  size_t n = 0;
  for (const char *at = strstr(page, key); at && n < cap; at = strstr(at + 1, key)) {
    const char *name = at + sizeof key - 1;
    names[n++] = strndup(name, strcspn(name, "\""));
  }
  return n;
}

/* Whether traces/ holds exactly the names listed (hidden temporaries aside); *extra gets the
 * first one it holds beyond them. */
static int holds_exactly(const char *traces, char **names, size_t n, char *extra, size_t cap) {
  DIR *d = opendir(traces);
  extra[0] = '\0';
  if (!d) return 0;
  size_t on_disk = 0;
  for (struct dirent *e = readdir(d); e; e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    on_disk++;
    if (!extra[0] && !listed(names, n, e->d_name)) snprintf(extra, cap, "%s", e->d_name);
  }
  closedir(d);
  return on_disk == n && !extra[0];
}

/* Fails unless site is missing (allowed while first) or whole: index.html
 * names exactly the files of traces/. */
static void expect_whole(const char *site, int may_be_missing, const char *when) {
  struct stat st;
  if (stat(site, &st) != 0) {
    if (!may_be_missing) fail_msg("%s: the site is gone", when);
    return;
  }
  char page_path[700], traces[700], extra[256];
  snprintf(page_path, sizeof page_path, "%s/index.html", site);
  snprintf(traces, sizeof traces, "%s/traces", site);
  size_t len = 0;
  char *page = (char *)fx_read_all(page_path, &len);
  enum { MAX = 1024 };
  char **names = calloc(MAX, sizeof *names);
  size_t n = page && names ? named_traces(page, names, MAX) : 0;
  const int whole = page && names && holds_exactly(traces, names, n, extra, sizeof extra);
  const char *page_state = page ? "read" : "missing";
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  free(page);
  if (!whole)
    fail_msg("%s: not whole (index.html %s, names %zu trace files; first file not named: '%s')",
             when, page_state, n, extra);
}

/* Kills a dashboard of database after delay_ms (or lets it finish first). */
static void kill_after(const fixture *f, const char *database, int delay_ms) {
  pid_t pid = start_dashboard(f, database);
  assert_true(pid > 0);
  struct timespec t = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
  kill(pid, SIGKILL);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
}

static void test_killed_dashboard_leaves_its_folder_whole(void **state) {
  fixture *f = *state;
  /* the first generation killed early: no folder or a whole one */
  kill_after(f, f->db, 300);
  expect_whole(f->site, 1, "first generation killed at 300 ms");
  pid_t pid = start_dashboard(f, f->db);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  expect_whole(f->site, 0, "a finished generation");
  /* later generations, of the two databases in turn, killed at moments spread over a run
   * (about 1.6 s here): while the reports are built, while the trace files are written,
   * near the end */
  const int delays_ms[] = {100, 400, 700, 900, 1100, 1300, 1500, 1800};
  for (size_t i = 0; i < sizeof delays_ms / sizeof delays_ms[0]; i++) {
    char when[64];
    snprintf(when, sizeof when, "killed at %d ms", delays_ms[i]);
    kill_after(f, i % 2 ? f->db : f->other_db, delays_ms[i]);
    expect_whole(f->site, 0, when);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sample_dashboard_within_three_seconds),
      cmocka_unit_test(test_killed_dashboard_leaves_its_folder_whole),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
