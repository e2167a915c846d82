/*
 * test_profile.c — `tpbench profile` on a real GPU, from outside, on
 * profile_target (a stand-in for a user's CUDA program with NVTX step
 * ranges): the steps --steps keeps, their device times against the
 * program's own CUDA-event times (within 5 % + 50 µs), the kernel summary's
 * counts, --overhead stored, a step window that does not exist (exit 1 with
 * the steps that do), and CUPTI claimed by the program itself (one of the
 * two subscribers is refused, never both silently sharing). Exits 77
 * (skipped) without a device.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

enum { SKIP = 77 };

static char dir[64];
static int failures;

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                              \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

/* Runs a shell command line; its exit status (-1 when it did not exit). */
static int sh(const char *fmt, const char *a, const char *b) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, fmt, a, b);
  fprintf(stderr, "+ %s\n", cmd);
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double query_real(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  double v = NAN;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
      sqlite3_column_type(st, 0) != SQLITE_NULL)
    v = sqlite3_column_double(st, 0);
  else fprintf(stderr, "query %s: %s\n", sql, sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return v;
}

static int file_has(const char *path, const char *needle) {
  static char text[1 << 16];
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  return strstr(text, needle) != NULL;
}

/* --steps 1:5 of 6 steps: four windows whose device times match the program's own. */
static void steps_agree_with_program(const char *db_path) {
  char times[128];
  snprintf(times, sizeof times, "%s/times.txt", dir);
  int st = sh(TPBENCH_EXE " profile --db %s --steps 1:5 --label target -- " TARGET_EXE
                          " --steps 6 --step-us 3000 --times %s",
              db_path, times);
  EXPECT(st == 0, "exit %d", st);
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    EXPECT(0, "cannot open %s", db_path);
    return;
  }
  EXPECT(query_real(db, "SELECT count(*) FROM profile_steps") == 4, "four windows");
  EXPECT(query_real(db, "SELECT min(step) FROM profile_steps") == 1, "first step 1");
  EXPECT(query_real(db, "SELECT max(step) FROM profile_steps") == 4, "last step 4");
  EXPECT(query_real(db, "SELECT sum(count) FROM profile_kernels WHERE name LIKE '%spin_kernel%'") ==
             4,
         "one spin kernel per kept step");
  EXPECT(query_real(db, "SELECT n_samples FROM results") == 4, "four samples");
  FILE *f = fopen(times, "r");
  EXPECT(f != NULL, "the program's times");
  double own[6] = {0};
  for (int i = 0; f && i < 6; ++i)
    if (fscanf(f, "%lf", &own[i]) != 1) EXPECT(0, "line %d of %s", i, times);
  if (f) fclose(f);
  for (int s = 1; s <= 4; ++s) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT (end_ns - start_ns) / 1e6 FROM profile_steps WHERE step = %d",
             s);
    double ms = query_real(db, sql);
    fprintf(stderr, "step %d: tpbench %.3f ms, the program's CUDA events %.3f ms\n", s, ms, own[s]);
    EXPECT(fabs(ms - own[s]) <= 0.05 * own[s] + 0.05, "step %d: %.3f vs %.3f ms", s, ms, own[s]);
  }
  sqlite3_close(db);
}

/* --overhead stores the baseline and the overhead. */
static void overhead_is_stored(const char *db_path) {
  int st = sh(TPBENCH_EXE " profile --db %s --overhead --steps 2:10 --label overhead -- " TARGET_EXE
                          " --steps 12 --step-us 10000%s",
              db_path, "");
  EXPECT(st == 0, "exit %d", st);
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return;
  double pct = query_real(db, "SELECT overhead_pct FROM profiles p JOIN configs c ON "
                              "c.id = p.config_id WHERE c.layer = 'overhead'");
  double base = query_real(db, "SELECT baseline_step_us FROM profiles p JOIN configs c ON "
                               "c.id = p.config_id WHERE c.layer = 'overhead'");
  fprintf(stderr, "overhead on 10 ms steps: %+.2f %% (baseline %.1f us)\n", pct, base);
  EXPECT(isfinite(pct) && base > 9000, "overhead %f, baseline %f", pct, base);
  sqlite3_close(db);
}

/* Steps that do not exist: exit 1, the reason lists those that do. */
static void missing_steps_fail(const char *db_path) {
  char err[128];
  snprintf(err, sizeof err, "%s/missing.err", dir);
  int st = sh(TPBENCH_EXE " profile --db %s --steps 50:60 -- " TARGET_EXE " --steps 3 2> %s",
              db_path, err);
  EXPECT(st == 1, "exit %d", st);
  EXPECT(file_has(err, "no step in 50:60"), "the reason names the window");
}

/* CUPTI claimed by the program: whichever subscriber comes second is refused. */
static void busy_cupti_is_said(const char *db_path) {
  char err[128];
  snprintf(err, sizeof err, "%s/busy.err", dir);
  int st = sh(TPBENCH_EXE " profile --db %s -- " TARGET_EXE " --steps 2 --claim-cupti 2> %s",
              db_path, err);
  if (st == 3) {
    fprintf(stderr, "busy: tpbench's collector subscribed first; the program was refused\n");
    EXPECT(file_has(err, "cuptiSubscribe refused"), "the program says it was refused");
  } else {
    fprintf(stderr, "busy: the program subscribed first; tpbench exit %d\n", st);
    EXPECT(st == 1, "exit %d", st);
    EXPECT(file_has(err, "CUPTI is busy") || file_has(err, "CUPTI refused"),
           "tpbench says CUPTI is busy");
  }
}

int main(void) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    fprintf(stderr, "no CUDA device: skipped\n");
    return SKIP;
  }
  snprintf(dir, sizeof dir, "/tmp/tpbench-gpu-profile-XXXXXX");
  if (!mkdtemp(dir)) return 1;
  char db[128];
  snprintf(db, sizeof db, "%s/p.db", dir);
  steps_agree_with_program(db);
  overhead_is_stored(db);
  missing_steps_fail(db);
  busy_cupti_is_said(db);
  fprintf(stderr, "%s (files in %s)\n", failures ? "FAILED" : "passed", dir);
  return failures ? 1 : 0;
}
