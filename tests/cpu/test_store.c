/*
 * test_store.c — CPU tests of store/: creating and migrating a database,
 * refusing files that are not tpbench's without touching them, writing
 * configurations atomically, canonical configuration keys, finding runs;
 * the journal mode: WAL on a local filesystem, DELETE on a shared one.
 *
 * Every test works in its own mkdtemp directory, removed afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "schemas/tp_schemas.h"
#include "store/tp_store.h"

/* ---- fixture: a scratch directory --------------------------------------- */

typedef struct {
  char dir[256];
  char path[512]; /* scratch for path_in() */
} scratch;

static int make_scratch(void **state) {
  scratch *s = calloc(1, sizeof *s);
  if (!s) return -1;
  const char *tmp = getenv("TMPDIR");
  snprintf(s->dir, sizeof s->dir, "%s/tp_store_test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(s->dir)) {
    free(s);
    return -1;
  }
  *state = s;
  return 0;
}

static int remove_scratch(void **state) {
  scratch *s = *state;
  DIR *d = opendir(s->dir);
  if (d) {
    struct dirent *e;
    char p[600];
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      snprintf(p, sizeof p, "%s/%s", s->dir, e->d_name);
      struct stat st;
      if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
        chmod(p, 0700);
        rmdir(p);
      } else {
        unlink(p);
      }
    }
    closedir(d);
  }
  rmdir(s->dir);
  free(s);
  return 0;
}

static const char *path_in(scratch *s, const char *name) {
  snprintf(s->path, sizeof s->path, "%s/%s", s->dir, name);
  return s->path;
}

/* ---- helpers ------------------------------------------------------------ */

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* The whole file in a malloc'd buffer. */
static unsigned char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static void write_file(const char *path, const char *content) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs(content, f);
  fclose(f);
}

/* A connection that bypasses the store, to build or inspect files directly. */
static sqlite3 *raw_open(const char *path) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
                   SQLITE_OK);
  return db;
}

static void raw_exec(sqlite3 *db, const char *sql) {
  char *err = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
  if (rc != SQLITE_OK) fail_msg("%s: %s", sql, err);
}

static int64_t raw_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static void raw_close(sqlite3 *db) { assert_int_equal(sqlite3_close(db), SQLITE_OK); }

/* Through the store's own handle. */
static int64_t count(tp_store *store, const char *sql) { return raw_int(tp_store_db(store), sql); }

static tp_store *open_new(scratch *s, const char *name) {
  tp_store *store = NULL;
  tp_rc rc = tp_store_open(path_in(s, name), 1, &store);
  if (rc != TP_OK) fail_msg("open: %s", tp_last_error());
  return store;
}

/* Opening must be refused as foreign and leave the file and its directory as
 * they were: same bytes, no -wal/-shm/-journal beside it. */
static void assert_refused_untouched(const char *path, const char *expect_in_message) {
  size_t before_len = 0, after_len = 0;
  unsigned char *before = read_all(path, &before_len);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(path, 1, &store), TP_EFOREIGN);
  assert_null(store);
  assert_non_null(strstr(tp_last_error(), path));
  if (!strstr(tp_last_error(), expect_in_message))
    fail_msg("message lacks \"%s\": %s", expect_in_message, tp_last_error());
  unsigned char *after = read_all(path, &after_len);
  assert_int_equal(before_len, after_len);
  assert_memory_equal(before, after, before_len);
  free(before);
  free(after);
  char side[600];
  const char *suffixes[] = {"-wal", "-shm", "-journal"};
  for (size_t i = 0; i < 3; i++) {
    snprintf(side, sizeof side, "%s%s", path, suffixes[i]);
    if (file_exists(side)) fail_msg("%s was created", side);
  }
}

static const tp_run_info demo_run = {
    .commit = "0123456789abcdef0123456789abcdef01234567",
    .dirty = 1,
    .host = "gpu-host-1",
    .gpu_name = "NVIDIA H200",
    .gpu_count = 8,
    .driver_version = "550.54.15",
    .cuda_version = "12.4",
    .nccl_version = "2.21.5",
    .cublas_version = "12.4.5",
    .cupti_version = "2024.1",
    .command_line = "tpbench ops --model llama3-8b",
    .command = "ops",
    .warmup_iters = 5,
    .measure_iters = 20,
};

static tp_config_axes demo_axes(void) {
  tp_config_axes a = {
      .kind = "op",
      .model = "llama3-8b",
      .op_or_layer = "ag_linear",
      .proj = "qkv",
      .backend = "dist_gemm",
      .schedule = "ce",
      .chunks = 4,
      .tp = 8,
      .batch = 2,
      .seqlen = 4096,
      .tokens = 8192,
      .m = 8192,
      .n = 768,
      .k = 4096,
      .n_weights = 1,
      .dtype = "bf16",
      .sp = 1,
      .pass = "fwd",
      .graph = 0,
      .save_gathered = 0,
  };
  return a;
}

static tp_result demo_result(void) {
  tp_result r = {
      .n_samples = 20,
      .median_us = 1500.0,
      .p10_us = 1450.0,
      .p90_us = 1600.0,
      .mean_us = 1510.0,
      .min_us = 1400.0,
      .max_us = 1700.0,
      .cv = 0.02,
      .tokens_per_s = 8192 / 1.5e-3,
      .tflops = 350.0,
      .flops = 5.1e11,
      .bytes_moved = 5.0e7,
      .workspace_bytes = 64 << 20,
      .peak_mem_bytes = 1LL << 33,
      .max_abs_err = NAN,
      .rel_err = 1e-3,
      .numerics_ref = "stock",
  };
  return r;
}

static int64_t begin_demo_run(tp_store *store) {
  int64_t run = 0;
  if (tp_store_begin_run(store, &demo_run, &run) != TP_OK) fail_msg("%s", tp_last_error());
  assert_true(run > 0);
  return run;
}

static void assert_nothing_written(tp_store *store) {
  assert_int_equal(count(store, "SELECT count(*) FROM configs"), 0);
  assert_int_equal(count(store, "SELECT count(*) FROM results"), 0);
  assert_int_equal(count(store, "SELECT count(*) FROM samples"), 0);
  assert_int_equal(count(store, "SELECT count(*) FROM schedules"), 0);
}

/* ---- opening and migrating ---------------------------------------------- */

static void test_migrations_numbered(void **state) {
  (void)state;
  assert_true(tp_n_migrations >= 1);
  assert_int_equal(tp_store_schema_version(), tp_n_migrations);
  for (int i = 0; i < tp_n_migrations; i++) {
    assert_int_equal(tp_migrations[i].version, i + 1);
    char prefix[16];
    snprintf(prefix, sizeof prefix, "%03d_", i + 1);
    assert_memory_equal(tp_migrations[i].name, prefix, 4);
    assert_true(strlen(tp_migrations[i].sql) > 100);
  }
  /* The embedded text is the file's, byte for byte, including UTF-8. */
  assert_non_null(strstr(tp_migrations[0].sql, "CREATE TABLE runs"));
  assert_non_null(strstr(tp_migrations[0].sql, "\xe2\x80\x94"));
}

static void test_create_and_migrate(void **state) {
  scratch *s = *state;
  tp_store *store = open_new(s, "new.db");
  sqlite3 *db = tp_store_db(store);
  assert_int_equal(tp_store_version(store), tp_store_schema_version());
  assert_int_equal(raw_int(db, "PRAGMA user_version"), tp_store_schema_version());
  assert_int_equal(raw_int(db, "PRAGMA application_id"), TP_STORE_APP_ID);
  assert_int_equal(raw_int(db, "PRAGMA foreign_keys"), 1);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM pragma_journal_mode WHERE journal_mode='wal'"),
                   1);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
                               "('runs','configs','results','samples','schedules')"),
                   5);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE type='view' AND name IN "
                               "('config_results','case_references','throughput_rows')"),
                   3);
  /* 002_trace: the trace tables and the runs' uuid. */
  assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
                               "('events','strings','overlap','traces')"),
                   4);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM pragma_table_info('runs') WHERE name='uuid'"),
                   1);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE type='index' AND name IN "
                               "('configs_by_key','configs_by_run_case')"),
                   2);
  assert_string_equal(tp_store_path(store), path_in(s, "new.db"));
  tp_store_close(store);
}

static void test_missing_without_create(void **state) {
  scratch *s = *state;
  tp_store *store = NULL;
  const char *path = path_in(s, "absent.db");
  assert_int_equal(tp_store_open(path, 0, &store), TP_EUSAGE); /* the caller's path */
  assert_null(store);
  assert_non_null(strstr(tp_last_error(), "absent.db"));
  assert_false(file_exists(path));
}

static void test_reopen_keeps_data(void **state) {
  scratch *s = *state;
  tp_store *store = open_new(s, "keep.db");
  int64_t run = begin_demo_run(store);
  tp_config_axes axes = demo_axes();
  tp_result result = demo_result();
  tp_config_record rec = {.axes = &axes, .status = TP_STATUS_OK, .result = &result};
  int64_t id = 0;
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_OK);
  assert_int_equal(tp_store_finish_run(store, run), TP_OK);
  tp_store_close(store);

  store = NULL;
  assert_int_equal(tp_store_open(path_in(s, "keep.db"), 0, &store), TP_OK);
  assert_int_equal(count(store, "SELECT count(*) FROM runs WHERE finished_at IS NOT NULL"), 1);
  assert_int_equal(count(store, "SELECT count(*) FROM configs"), 1);
  assert_int_equal(count(store, "SELECT count(*) FROM results WHERE median_us = 1500.0"), 1);
  assert_int_equal(count(store, "SELECT gpu_count FROM runs"), 8);
  assert_int_equal(count(store, "SELECT dirty FROM runs"), 1);
  assert_int_equal(tp_store_version(store), tp_store_schema_version());
  tp_store_close(store);
}

static void test_empty_file_is_migrated(void **state) {
  scratch *s = *state;
  const char *path = path_in(s, "empty.db");
  write_file(path, "");
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(path, 0, &store), TP_OK);
  assert_int_equal(count(store, "PRAGMA application_id"), TP_STORE_APP_ID);
  assert_int_equal(count(store, "SELECT count(*) FROM sqlite_master WHERE name='configs'"), 1);
  tp_store_close(store);
}

static void test_older_version_is_migrated(void **state) {
  scratch *s = *state;
  const char *path = path_in(s, "old.db");
  sqlite3 *db = raw_open(path);
  raw_exec(db, "PRAGMA application_id = 1414545969"); /* 0x54504231, version 0 */
  raw_close(db);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(path, 0, &store), TP_OK);
  assert_int_equal(count(store, "PRAGMA user_version"), tp_store_schema_version());
  assert_int_equal(count(store, "SELECT count(*) FROM sqlite_master WHERE name='samples'"), 1);
  tp_store_close(store);
}

/* A migration that fails part-way leaves the file at its old version. */
static void test_failed_migration_rolls_back(void **state) {
  scratch *s = *state;
  const char *path = path_in(s, "clash.db");
  sqlite3 *db = raw_open(path);
  raw_exec(db, "PRAGMA application_id = 1414545969; CREATE TABLE configs (x)");
  raw_close(db);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(path, 0, &store), TP_ESQLITE);
  assert_null(store);
  assert_non_null(strstr(tp_last_error(), "001_init"));
  db = raw_open(path);
  assert_int_equal(raw_int(db, "PRAGMA user_version"), 0);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_master WHERE name='runs'"), 0);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_master"), 1);
  raw_close(db);
}

/* '?', '#' and '%' would start a query, a fragment or an escape in a URI. */
static void test_odd_file_name(void **state) {
  scratch *s = *state;
  tp_store *store = open_new(s, "odd ?name#1 %41.db");
  tp_store_close(store);
  assert_true(file_exists(path_in(s, "odd ?name#1 %41.db")));
  assert_false(file_exists(path_in(s, "odd ")));
  assert_int_equal(tp_store_open(path_in(s, "odd ?name#1 %41.db"), 0, &store), TP_OK);
  tp_store_close(store);
}

/* Two handles on one file (a report while a run writes): both work. */
static void test_two_handles(void **state) {
  scratch *s = *state;
  tp_store *writer = open_new(s, "shared.db");
  tp_store *reader = NULL;
  assert_int_equal(tp_store_open(path_in(s, "shared.db"), 0, &reader), TP_OK);
  int64_t run = begin_demo_run(writer);
  tp_config_axes axes = demo_axes();
  tp_config_record rec = {.axes = &axes, .status = TP_STATUS_OOM, .reason = "out of memory"};
  assert_int_equal(tp_store_put_config(reader, run, &rec, NULL), TP_OK);
  assert_int_equal(count(writer, "SELECT count(*) FROM configs WHERE status = 'oom'"), 1);
  int64_t found = 0;
  assert_int_equal(tp_store_find_run(reader, 0, NULL, &found), TP_OK);
  assert_int_equal(found, run);
  tp_store_close(reader);
  tp_store_close(writer);
}

/* ---- foreign files ------------------------------------------------------ */

static void test_foreign_text_file(void **state) {
  scratch *s = *state;
  const char *path = path_in(s, "notes.txt");
  write_file(path, "these are my notes, not a database\n");
  assert_refused_untouched(path, "not a SQLite database");
}

static void test_foreign_large_binary_file(void **state) {
  scratch *s = *state;
  const char *path = path_in(s, "blob.bin");
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  for (int i = 0; i < 10000; i++) fputc((i * 7919) & 0xff, f);
  fclose(f);
  assert_refused_untouched(path, "not a SQLite database");
}

static void test_foreign_other_app_id(void **state) {
  scratch *s = *state;
  const char *path = path_in(s, "other.db");
  sqlite3 *db = raw_open(path);
  /* WAL mode: a careless reader would make -wal and -shm files appear. */
  raw_exec(db, "PRAGMA journal_mode = WAL; PRAGMA application_id = 305419896;"
               "CREATE TABLE t (x); INSERT INTO t VALUES (1)");
  raw_close(db);
  assert_refused_untouched(path, "application_id 0x12345678");
}

static void test_foreign_tables_without_app_id(void **state) {
  scratch *s = *state;
  const char *path = path_in(s, "plain.db");
  sqlite3 *db = raw_open(path);
  raw_exec(db, "CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)");
  raw_close(db);
  assert_refused_untouched(path, "without tpbench's application_id");
}

static void test_foreign_newer_version(void **state) {
  scratch *s = *state;
  tp_store *store = open_new(s, "future.db");
  tp_store_close(store);
  const char *path = path_in(s, "future.db");
  sqlite3 *db = raw_open(path);
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d", tp_store_schema_version() + 1);
  raw_exec(db, sql);
  raw_close(db); /* the last close checkpoints and removes -wal and -shm */
  assert_false(file_exists(path_in(s, "future.db-wal")));
  assert_refused_untouched(path_in(s, "future.db"), "newer");
}

/* ---- unwritable places -------------------------------------------------- */

static void test_unwritable_paths(void **state) {
  scratch *s = *state;
  tp_store *store = NULL;
  /* Paths the caller cannot use as asked (exit 2), not I/O failures. */
  assert_int_equal(tp_store_open("/nonexistent/dir/x.db", 1, &store), TP_EUSAGE);
  assert_null(store);
  assert_non_null(strstr(tp_last_error(), "/nonexistent/dir/x.db"));

  assert_int_equal(tp_store_open(s->dir, 1, &store), TP_EUSAGE);
  assert_null(store);
  assert_non_null(strstr(tp_last_error(), "directory"));

  assert_int_equal(tp_store_open("", 1, &store), TP_EUSAGE);
  assert_null(store);
}

static void test_read_only_file(void **state) {
  scratch *s = *state;
  if (geteuid() == 0) skip(); /* root writes through any file mode */
  tp_store *store = open_new(s, "ro.db");
  tp_store_close(store);
  const char *path = path_in(s, "ro.db");
  assert_int_equal(chmod(path, 0444), 0);
  assert_int_equal(tp_store_open(path, 0, &store), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "ro.db"));
}

/* ---- configuration keys ------------------------------------------------- */

static void test_config_key_golden(void **state) {
  (void)state;
  tp_config_axes a = demo_axes();
  char key[512];
  size_t len = tp_config_key(&a, key, sizeof key);
  /* Stored in databases: this string must never change for these axes. */
  const char *expect = "kind=op;model=llama3-8b;layer=ag_linear;proj=qkv;backend=dist_gemm;"
                       "schedule=ce;chunks=4;tp=8;batch=2;seqlen=4096;tokens=8192;m=8192;n=768;"
                       "k=4096;n_weights=1;dtype=bf16;sp=1;pass=fwd;graph=0;save_gathered=0";
  assert_string_equal(key, expect);
  assert_int_equal(len, strlen(expect));
  char again[512];
  tp_config_key(&a, again, sizeof again);
  assert_string_equal(key, again);

  tp_case_key(&a, key, sizeof key);
  assert_string_equal(key, "model=llama3-8b;layer=ag_linear;proj=qkv;tp=8;batch=2;seqlen=4096;"
                           "tokens=8192;m=8192;n=768;k=4096;n_weights=1;dtype=bf16;sp=1;pass=fwd;"
                           "graph=0;save_gathered=0");
}

/* Changing any one axis changes the key, and no two single changes collide. */
static void test_config_key_every_axis_matters(void **state) {
  (void)state;
  enum { N = 20 };
  tp_config_axes variants[N];
  for (int i = 0; i < N; i++) variants[i] = demo_axes();
  variants[0].kind = "gemm";
  variants[1].model = "llama3-70b";
  variants[2].op_or_layer = "linear_rs";
  variants[3].proj = "wo";
  variants[4].backend = "stock";
  variants[5].schedule = "sm";
  variants[6].chunks = 2;
  variants[7].tp = 4;
  variants[8].batch = 1;
  variants[9].seqlen = 2048;
  variants[10].tokens = 4096;
  variants[11].m = 4096;
  variants[12].n = 1024;
  variants[13].k = 8192;
  variants[14].n_weights = 2;
  variants[15].dtype = "fp32";
  variants[16].sp = 0;
  variants[17].pass = "bwd";
  variants[18].graph = 1;
  variants[19].save_gathered = 1;
  char keys[N + 1][512];
  tp_config_axes base = demo_axes();
  tp_config_key(&base, keys[N], sizeof keys[N]);
  for (int i = 0; i < N; i++) tp_config_key(&variants[i], keys[i], sizeof keys[i]);
  for (int i = 0; i <= N; i++)
    for (int j = i + 1; j <= N; j++)
      if (!strcmp(keys[i], keys[j])) fail_msg("variants %d and %d share key %s", i, j, keys[i]);

  /* The case key ignores exactly kind, backend, schedule and chunks. */
  char base_case[512], case_key[512];
  tp_case_key(&base, base_case, sizeof base_case);
  for (int i = 0; i < N; i++) {
    tp_case_key(&variants[i], case_key, sizeof case_key);
    int ignored = i == 0 || i == 4 || i == 5 || i == 6;
    if (ignored != !strcmp(case_key, base_case)) fail_msg("case key and axis %d disagree", i);
  }
}

static void test_config_key_nulls_escapes_truncation(void **state) {
  (void)state;
  tp_config_axes a = demo_axes();
  tp_config_axes b = demo_axes();
  a.schedule = NULL;
  b.schedule = "";
  char ka[512], kb[512];
  tp_config_key(&a, ka, sizeof ka);
  tp_config_key(&b, kb, sizeof kb);
  assert_string_equal(ka, kb);
  assert_non_null(strstr(ka, ";schedule=;"));

  /* A value cannot fake a separator: "x;tp=1" stays one value. */
  a = demo_axes();
  a.model = "x;tp=1";
  tp_config_key(&a, ka, sizeof ka);
  assert_non_null(strstr(ka, "model=x\\;tp\\=1;"));

  char small[10];
  size_t len = tp_config_key(&b, small, sizeof small);
  assert_int_equal(len, sizeof small - 1);
  assert_int_equal(strlen(small), sizeof small - 1);
  assert_memory_equal(small, "kind=op;m", 9);
  assert_int_equal(tp_config_key(&b, small, 0), 0);
}

/* ---- writing configurations --------------------------------------------- */

static void test_put_config_writes_everything(void **state) {
  scratch *s = *state;
  tp_store *store = open_new(s, "put.db");
  int64_t run = begin_demo_run(store);
  tp_config_axes axes = demo_axes();
  tp_result result = demo_result();
  double rank0[5] = {1500, 1510, NAN, 1490, 1505};
  double rank1[5] = {1502, 1511, 1499, 1491, 1506};
  tp_samples sets[2] = {{0, 5, rank0, NULL, NULL}, {1, 5, rank1, NULL, NULL}};
  tp_schedule_choice choices[2] = {
      {"ag_linear", "ce", "copy-engine", 4, "large M: copy engine"},
      {"ag_linear.dx", "sm", "sm-kernel", 2, "user asked"},
  };
  tp_config_record rec = {.axes = &axes,
                          .status = TP_STATUS_OK,
                          .result = &result,
                          .samples = sets,
                          .n_sample_sets = 2,
                          .schedules = choices,
                          .n_schedules = 2};
  int64_t id = 0;
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_OK);
  assert_true(id > 0);
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM samples WHERE config_id = %lld", (long long)id);
  assert_int_equal(count(store, sql), 10);
  assert_int_equal(count(store, "SELECT count(*) FROM samples WHERE time_us IS NULL"), 1);
  assert_int_equal(count(store, "SELECT count(*) FROM samples WHERE rank = 1 AND iter = 4 AND "
                                "time_us = 1506"),
                   1);
  assert_int_equal(count(store, "SELECT count(*) FROM results WHERE max_abs_err IS NULL AND "
                                "rel_err = 1e-3 AND workspace_bytes = 67108864"),
                   1);
  assert_int_equal(count(store, "SELECT count(*) FROM schedules WHERE seq = 0 AND op = "
                                "'ag_linear' AND schedule = 'ce' AND chunks = 4"),
                   1);
  assert_int_equal(count(store, "SELECT count(*) FROM schedules WHERE seq = 1 AND engine = "
                                "'sm-kernel'"),
                   1);
  char key[512];
  tp_config_key(&axes, key, sizeof key);
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(tp_store_db(store),
                                      "SELECT config_key, status, reason FROM configs", -1, &st,
                                      NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), key);
  assert_string_equal((const char *)sqlite3_column_text(st, 1), "ok");
  assert_int_equal(sqlite3_column_type(st, 2), SQLITE_NULL);
  sqlite3_finalize(st);
  tp_store_close(store);
}

static void test_put_config_rejected(void **state) {
  scratch *s = *state;
  tp_store *store = open_new(s, "rej.db");
  int64_t run = begin_demo_run(store);
  tp_config_axes axes = demo_axes();
  axes.schedule = "multimem";
  tp_config_record rec = {
      .axes = &axes, .status = TP_STATUS_REJECTED, .reason = "multicast unavailable"};
  assert_int_equal(tp_store_put_config(store, run, &rec, NULL), TP_OK);
  assert_int_equal(count(store, "SELECT count(*) FROM configs WHERE status = 'rejected' AND "
                                "reason = 'multicast unavailable'"),
                   1);
  assert_int_equal(count(store, "SELECT count(*) FROM results"), 0);

  /* Without a reason the table could not say why: refused, nothing written. */
  rec.reason = NULL;
  assert_int_equal(tp_store_put_config(store, run, &rec, NULL), TP_ESQLITE);
  assert_non_null(strstr(tp_last_error(), "CHECK constraint failed"));
  assert_int_equal(count(store, "SELECT count(*) FROM configs"), 1);
  tp_store_close(store);
}

/* The same rank twice violates samples' key after configs and results rows
 * were inserted: the whole configuration must vanish. */
static void test_put_config_atomic_on_samples(void **state) {
  scratch *s = *state;
  tp_store *store = open_new(s, "atomic.db");
  int64_t run = begin_demo_run(store);
  tp_config_axes axes = demo_axes();
  tp_result result = demo_result();
  double t[3] = {1, 2, 3};
  tp_samples sets[2] = {{0, 3, t, NULL, NULL}, {0, 3, t, NULL, NULL}};
  tp_schedule_choice choice = {"ag_linear", "ce", "copy-engine", 4, "heuristic"};
  tp_config_record rec = {.axes = &axes,
                          .status = TP_STATUS_OK,
                          .result = &result,
                          .samples = sets,
                          .n_sample_sets = 2,
                          .schedules = &choice,
                          .n_schedules = 1};
  int64_t id = -7;
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_ESQLITE);
  assert_int_equal(id, -7);
  assert_non_null(strstr(tp_last_error(), "samples"));
  assert_non_null(strstr(tp_last_error(), "atomic.db"));
  assert_nothing_written(store);

  /* The store is usable afterwards: no transaction was left open. */
  rec.n_sample_sets = 1;
  assert_int_equal(tp_store_put_config(store, run, &rec, &id), TP_OK);
  assert_int_equal(count(store, "SELECT count(*) FROM samples"), 3);
  assert_int_equal(count(store, "SELECT count(*) FROM schedules"), 1);
  tp_store_close(store);
}

/* A schedule without a name fails last, after samples were written. */
static void test_put_config_atomic_on_schedules(void **state) {
  scratch *s = *state;
  tp_store *store = open_new(s, "atomic2.db");
  int64_t run = begin_demo_run(store);
  tp_config_axes axes = demo_axes();
  tp_result result = demo_result();
  double t[4] = {1, 2, 3, 4};
  tp_samples set = {0, 4, t, NULL, NULL};
  tp_schedule_choice choices[2] = {{"ag_linear", "ce", "copy-engine", 4, "ok"},
                                   {"ag_linear.dx", NULL, NULL, 0, "broken"}};
  tp_config_record rec = {.axes = &axes,
                          .status = TP_STATUS_OK,
                          .result = &result,
                          .samples = &set,
                          .n_sample_sets = 1,
                          .schedules = choices,
                          .n_schedules = 2};
  assert_int_equal(tp_store_put_config(store, run, &rec, NULL), TP_ESQLITE);
  assert_non_null(strstr(tp_last_error(), "NOT NULL"));
  assert_nothing_written(store);
  tp_store_close(store);
}

static void test_put_config_bad_records(void **state) {
  scratch *s = *state;
  tp_store *store = open_new(s, "bad.db");
  int64_t run = begin_demo_run(store);
  tp_config_axes axes = demo_axes();
  tp_result result = demo_result();

  tp_config_record rec = {.axes = &axes, .status = (tp_config_status)42, .result = &result};
  assert_int_equal(tp_store_put_config(store, run, &rec, NULL), TP_EINTERNAL);
  assert_string_equal(tp_status_name((tp_config_status)42), "invalid");

  rec.status = TP_STATUS_OK;
  rec.result = NULL; /* ok without a result */
  assert_int_equal(tp_store_put_config(store, run, &rec, NULL), TP_EINTERNAL);

  rec.result = &result;
  rec.n_sample_sets = 1; /* samples promised, none given */
  assert_int_equal(tp_store_put_config(store, run, &rec, NULL), TP_EINTERNAL);

  rec.n_sample_sets = 0;
  assert_int_equal(tp_store_put_config(store, run + 100, &rec, NULL), TP_ESQLITE);
  assert_non_null(strstr(tp_last_error(), "FOREIGN KEY"));
  assert_nothing_written(store);
  tp_store_close(store);
}

/* ---- runs --------------------------------------------------------------- */

static void test_find_run(void **state) {
  scratch *s = *state;
  tp_store *store = open_new(s, "runs.db");
  int64_t found = 0;
  assert_int_equal(tp_store_find_run(store, 0, NULL, &found), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "no runs"));

  tp_run_info a = demo_run, b = demo_run;
  a.commit = "aaaa111100000000000000000000000000000000";
  b.commit = "aaaa222200000000000000000000000000000000";
  int64_t r1 = 0, r2 = 0, r3 = 0;
  assert_int_equal(tp_store_begin_run(store, &a, &r1), TP_OK);
  assert_int_equal(tp_store_begin_run(store, &b, &r2), TP_OK);
  assert_int_equal(tp_store_begin_run(store, &a, &r3), TP_OK);

  assert_int_equal(tp_store_find_run(store, 0, NULL, &found), TP_OK);
  assert_int_equal(found, r3);
  assert_int_equal(tp_store_find_run(store, r1, NULL, &found), TP_OK);
  assert_int_equal(found, r1);
  assert_int_equal(tp_store_find_run(store, 0, "AAAA2222", &found), TP_OK);
  assert_int_equal(found, r2);
  assert_int_equal(tp_store_find_run(store, 0, "aaaa1111", &found), TP_OK);
  assert_int_equal(found, r3);
  assert_int_equal(tp_store_find_run(store, 0, "aaaa", &found), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "ambiguous"));
  assert_int_equal(tp_store_find_run(store, 0, "bbbb", &found), TP_EUSAGE);
  assert_int_equal(tp_store_find_run(store, 99, NULL, &found), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "99"));
  assert_int_equal(tp_store_find_run(store, r2, "aaaa1111", &found), TP_EUSAGE);
  assert_int_equal(tp_store_find_run(store, -1, NULL, &found), TP_EUSAGE);

  assert_int_equal(tp_store_finish_run(store, 99), TP_EUSAGE);
  assert_int_equal(tp_store_finish_run(store, r2), TP_OK);
  tp_store_close(store);
}

/* The system record: the run's columns and one row per rank, NULL where
 * unknown; a second rank 0 fails the whole record (nothing kept); an
 * unknown run is a usage error. */
static void test_put_system(void **state) {
  scratch *s = *state;
  tp_store *store = open_new(s, "system.db");
  int64_t run = begin_demo_run(store);
  const tp_rank_host ranks[] = {
      {0, 0, "node01", "GPU-aaaa", "0000:19:00.0", 1980, 1980, 700.0},
      {1, 0, "node02", "", NULL, 0, 0, NAN},
  };
  tp_run_system sys = {
      "Slurm", "4242", "4240", "2", "GPU0 X NV18", "nvidia-smi topo -m", "NCCL_DEBUG=INFO\n",
      ranks,   2};
  assert_int_equal(tp_store_put_system(store, run, &sys), TP_OK);
  sqlite3 *db = tp_store_db(store);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM runs WHERE launcher = 'Slurm' AND "
                               "slurm_job_id = '4242' AND slurm_array_job_id = '4240' AND "
                               "slurm_array_task_id = '2' AND topology = 'GPU0 X NV18' AND "
                               "topology_source = 'nvidia-smi topo -m' AND "
                               "environment = 'NCCL_DEBUG=INFO' || char(10)"),
                   1);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM run_ranks WHERE rank = 0 AND host = 'node01' "
                               "AND gpu_uuid = 'GPU-aaaa' AND pci_bus_id = '0000:19:00.0' AND "
                               "sm_clock_mhz = 1980 AND power_limit_w = 700.0"),
                   1);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM run_ranks WHERE rank = 1 AND host = 'node02' "
                               "AND gpu_uuid IS NULL AND pci_bus_id IS NULL AND sm_clock_mhz IS "
                               "NULL AND power_limit_w IS NULL"),
                   1);
  int64_t run2 = begin_demo_run(store);
  const tp_rank_host twice[] = {{0, 0, "a", NULL, NULL, 0, 0, 0}, {0, 1, "b", NULL, NULL, 0, 0, 0}};
  tp_run_system dup = {"torchrun", NULL, NULL, NULL, NULL, NULL, NULL, twice, 2};
  assert_int_not_equal(tp_store_put_system(store, run2, &dup), TP_OK);
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM run_ranks WHERE run_id = %lld", (long long)run2);
  assert_int_equal(raw_int(db, sql), 0);
  snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE id = %lld AND launcher IS NULL",
           (long long)run2);
  assert_int_equal(raw_int(db, sql), 1);
  assert_int_equal(tp_store_put_system(store, 999, &sys), TP_EUSAGE);
  tp_store_close(store);
}

/* import carries the system record: the run's 004 columns and its ranks. */
static void test_import_keeps_system(void **state) {
  scratch *s = *state;
  tp_store *src = open_new(s, "array-task.db");
  int64_t run = begin_demo_run(src);
  const tp_rank_host ranks[] = {{0, 0, "node01", "GPU-a", NULL, 0, 0, NAN},
                                {1, 0, "node02", "GPU-b", NULL, 0, 0, NAN}};
  tp_run_system sys = {"Slurm", "77", "70", "7", NULL, NULL, NULL, ranks, 2};
  assert_int_equal(tp_store_put_system(src, run, &sys), TP_OK);
  tp_store_close(src);
  tp_store *dst = open_new(s, "all.db");
  tp_import_stats stats;
  memset(&stats, 0, sizeof stats);
  assert_int_equal(tp_store_import(dst, path_in(s, "array-task.db"), &stats), TP_OK);
  assert_int_equal(stats.runs_imported, 1);
  sqlite3 *db = tp_store_db(dst);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM runs WHERE launcher = 'Slurm' AND "
                               "slurm_array_job_id = '70' AND slurm_array_task_id = '7'"),
                   1);
  assert_int_equal(
      raw_int(db, "SELECT count(*) FROM run_ranks JOIN runs ON runs.id = run_id "
                  "WHERE runs.slurm_job_id = '77' AND run_ranks.host IN ('node01', 'node02')"),
      2);
  tp_store_close(dst);
}

/* One configuration of the demo, with samples on two ranks, into run. */
static void put_demo_config(tp_store *store, int64_t run, int chunks) {
  tp_config_axes axes = demo_axes();
  axes.chunks = chunks;
  tp_result result = demo_result();
  double times[3] = {1500, 1510, 1490};
  tp_samples sets[2] = {{0, 3, times, NULL, NULL}, {1, 3, times, NULL, NULL}};
  tp_config_record rec = {.axes = &axes,
                          .status = TP_STATUS_OK,
                          .result = &result,
                          .samples = sets,
                          .n_sample_sets = 2};
  if (tp_store_put_config(store, run, &rec, NULL) != TP_OK) fail_msg("%s", tp_last_error());
}

/* Imports src into dst; the stats must read imported, present, updated. */
static void import_expect(tp_store *dst, const char *src, int imported, int present, int updated) {
  tp_import_stats st;
  if (tp_store_import(dst, src, &st) != TP_OK) fail_msg("import: %s", tp_last_error());
  if (st.runs_imported != imported || st.runs_present != present || st.runs_updated != updated)
    fail_msg("import of %s: %d imported, %d present, %d updated; expected %d, %d, %d", src,
             st.runs_imported, st.runs_present, st.runs_updated, imported, present, updated);
}

/* A job array imported while a job still ran: its run, unfinished in the store, is replaced
 * under its id once the source holds more (a configuration more, then its end), and only then;
 * nothing of it is doubled (configurations, samples, ranks). */
static void test_import_updates_a_grown_run(void **state) {
  scratch *s = *state;
  char job[600], other_path[600]; /* path_in's buffer is one for every name */
  snprintf(job, sizeof job, "%s", path_in(s, "job.db"));
  snprintf(other_path, sizeof other_path, "%s", path_in(s, "other.db"));
  tp_store *src = open_new(s, "job.db");
  int64_t run = begin_demo_run(src);
  const tp_rank_host ranks[] = {{0, 0, "node01", "GPU-a", NULL, 0, 0, NAN},
                                {1, 0, "node02", "GPU-b", NULL, 0, 0, NAN}};
  tp_run_system sys = {"Slurm", "77", "70", "7", NULL, NULL, NULL, ranks, 2};
  assert_int_equal(tp_store_put_system(src, run, &sys), TP_OK);
  put_demo_config(src, run, 1);
  tp_store_close(src);

  tp_store *dst = open_new(s, "all.db");
  tp_store *other = open_new(s, "other.db"); /* a run of its own first: ids differ from job's */
  begin_demo_run(other);
  tp_store_close(other);
  import_expect(dst, other_path, 1, 0, 0);
  import_expect(dst, job, 1, 0, 0);
  const char *job_run = "SELECT id FROM runs WHERE slurm_job_id = '77'";
  const int64_t id = count(dst, job_run);
  assert_int_equal(id, 2);
  import_expect(dst, job, 0, 1, 0); /* not grown: nothing to do */

  src = NULL;
  assert_int_equal(tp_store_open(job, 0, &src), TP_OK);
  put_demo_config(src, run, 2);
  tp_store_close(src);
  import_expect(dst, job, 0, 0, 1);
  assert_int_equal(count(dst, job_run), id);
  assert_int_equal(count(dst, "SELECT count(*) FROM configs WHERE run_id = 2"), 2);
  assert_int_equal(count(dst, "SELECT count(*) FROM samples JOIN configs c ON c.id = config_id "
                              "WHERE c.run_id = 2"),
                   12);
  assert_int_equal(count(dst, "SELECT count(*) FROM run_ranks WHERE run_id = 2"), 2);
  assert_int_equal(count(dst, "SELECT count(*) FROM runs WHERE id = 2 AND finished_at IS NULL"), 1);

  assert_int_equal(tp_store_open(job, 0, &src), TP_OK);
  assert_int_equal(tp_store_finish_run(src, run), TP_OK);
  tp_store_close(src);
  import_expect(dst, job, 0, 0, 1); /* as many configurations, and finished */
  assert_int_equal(count(dst, "SELECT count(*) FROM runs WHERE id = 2 AND finished_at IS NULL"), 0);
  assert_int_equal(count(dst, "SELECT count(*) FROM configs WHERE run_id = 2"), 2);
  assert_int_equal(count(dst, "SELECT count(*) FROM runs"), 2);
  import_expect(dst, job, 0, 1, 0); /* finished here: never replaced again */
  tp_store_close(dst);
}

/* Schema 006's composition axes: absent from the key at their defaults (a key
 * made before them still matches), named in it otherwise, rs_sum in the whole
 * key only; stored in their columns with the drift steps and the memory
 * figures, and copied by import. */
static void test_composition_axes_and_drift(void **state) {
  scratch *s = *state;
  tp_config_axes plain = demo_axes(), defaults = demo_axes();
  defaults.dp = 1;
  defaults.ac = "none";
  char k_plain[512], k_def[512], k[512], case_k[512];
  tp_config_key(&plain, k_plain, sizeof k_plain);
  tp_config_key(&defaults, k_def, sizeof k_def);
  assert_string_equal(k_plain, k_def);
  tp_config_axes comp = demo_axes();
  comp.dp = 2;
  comp.ac = "selective";
  comp.graph_sizes = "2048,4096";
  comp.rs_sum = "nccl";
  tp_config_key(&comp, k, sizeof k);
  assert_string_not_equal(k, k_plain);
  assert_non_null(
      strstr(k, ";save_gathered=0;dp=2;ac=selective;graph_sizes=2048,4096;rs_sum=nccl"));
  tp_case_key(&comp, case_k, sizeof case_k);
  assert_non_null(strstr(case_k, ";dp=2;ac=selective;graph_sizes=2048,4096"));
  assert_null(strstr(case_k, "rs_sum"));

  tp_store *store = open_new(s, "comp.db");
  int64_t run = begin_demo_run(store);
  tp_result result = demo_result();
  result.activation_bytes = 3 << 20;
  result.alloc_peak_bytes = 5 << 20;
  const tp_drift_step steps[] = {{0, 2.5, 0.75}, {1, 2.25, NAN}};
  tp_config_record rec = {.axes = &comp,
                          .status = TP_STATUS_OK,
                          .result = &result,
                          .drift_steps = steps,
                          .n_drift_steps = 2};
  assert_int_equal(tp_store_put_config(store, run, &rec, NULL), TP_OK);
  tp_config_record old = {.axes = &plain, .status = TP_STATUS_OK, .result = &result};
  result.activation_bytes = 0;
  result.alloc_peak_bytes = 0;
  assert_int_equal(tp_store_put_config(store, run, &old, NULL), TP_OK);
  assert_int_equal(count(store, "SELECT count(*) FROM config_results WHERE dp = 2 AND ac = "
                                "'selective' AND graph_sizes = '2048,4096' AND rs_sum = 'nccl' "
                                "AND activation_bytes = 3145728 AND alloc_peak_bytes = 5242880"),
                   1);
  assert_int_equal(count(store, "SELECT count(*) FROM config_results WHERE dp = 1 AND ac = 'none' "
                                "AND graph_sizes IS NULL AND rs_sum IS NULL AND activation_bytes "
                                "IS NULL AND alloc_peak_bytes IS NULL"),
                   1);
  assert_int_equal(count(store, "SELECT count(*) FROM drift_steps WHERE (step = 0 AND loss = 2.5 "
                                "AND grad_norm = 0.75) OR (step = 1 AND grad_norm IS NULL)"),
                   2);
  /* a malformed record writes nothing */
  tp_config_record bad = {
      .axes = &comp, .status = TP_STATUS_OK, .result = &result, .n_drift_steps = 1};
  assert_int_equal(tp_store_put_config(store, run, &bad, NULL), TP_EINTERNAL);
  tp_store_close(store);

  tp_store *dst = open_new(s, "comp-all.db");
  tp_import_stats stats;
  memset(&stats, 0, sizeof stats);
  assert_int_equal(tp_store_import(dst, path_in(s, "comp.db"), &stats), TP_OK);
  assert_int_equal(stats.drift_steps, 2);
  sqlite3 *db = tp_store_db(dst);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM configs WHERE dp = 2 AND ac = 'selective' "
                               "AND graph_sizes = '2048,4096' AND rs_sum = 'nccl'"),
                   1);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM results WHERE activation_bytes = 3145728"), 1);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM drift_steps"), 2);
  tp_store_close(dst);
}

/* Schema 007's transport axes: keyed only away from their defaults (symm
 * "ipc" is the default, and only in the whole key), stored, copied by import. */
static void test_transport_axes(void **state) {
  scratch *s = *state;
  tp_config_axes plain = demo_axes(), ipc = demo_axes();
  ipc.symm = "ipc";
  char k_plain[512], k_ipc[512], k[512], case_k[512];
  tp_config_key(&plain, k_plain, sizeof k_plain);
  tp_config_key(&ipc, k_ipc, sizeof k_ipc);
  assert_string_equal(k_plain, k_ipc);
  tp_config_axes moved = demo_axes();
  moved.comm_dtype = "fp8";
  moved.fsdp_traffic = 1;
  moved.symm = "nccl";
  tp_config_key(&moved, k, sizeof k);
  assert_non_null(strstr(k, ";save_gathered=0;comm_dtype=fp8;fsdp_traffic=1;symm=nccl"));
  tp_case_key(&moved, case_k, sizeof case_k);
  assert_non_null(strstr(case_k, ";comm_dtype=fp8;fsdp_traffic=1"));
  assert_null(strstr(case_k, "symm"));

  tp_store *store = open_new(s, "transport.db");
  int64_t run = begin_demo_run(store);
  tp_result result = demo_result();
  result.traffic_bytes = 7 << 20;
  tp_config_record rec = {.axes = &moved, .status = TP_STATUS_OK, .result = &result};
  assert_int_equal(tp_store_put_config(store, run, &rec, NULL), TP_OK);
  result.traffic_bytes = 0;
  tp_config_record old = {.axes = &plain, .status = TP_STATUS_OK, .result = &result};
  assert_int_equal(tp_store_put_config(store, run, &old, NULL), TP_OK);
  assert_int_equal(count(store, "SELECT count(*) FROM config_results WHERE comm_dtype = 'fp8' "
                                "AND fsdp_traffic = 1 AND symm = 'nccl' AND traffic_bytes = "
                                "7340032"),
                   1);
  assert_int_equal(count(store, "SELECT count(*) FROM config_results WHERE comm_dtype IS NULL "
                                "AND fsdp_traffic = 0 AND symm IS NULL AND traffic_bytes IS NULL"),
                   1);
  tp_store_close(store);

  tp_store *dst = open_new(s, "transport-all.db");
  tp_import_stats stats;
  memset(&stats, 0, sizeof stats);
  assert_int_equal(tp_store_import(dst, path_in(s, "transport.db"), &stats), TP_OK);
  sqlite3 *db = tp_store_db(dst);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM configs WHERE comm_dtype = 'fp8' AND "
                               "fsdp_traffic = 1 AND symm = 'nccl'"),
                   1);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM results WHERE traffic_bytes = 7340032"), 1);
  tp_store_close(dst);
}

/* WAL on local filesystems, the rollback journal on network, cluster and
 * FUSE ones; TPBENCH_DB_JOURNAL overrides either way; a bad override is a
 * usage error. */
static void test_journal_mode_choice(void **state) {
  (void)state;
  static const struct {
    uint64_t type;
    const char *mode, *why;
  } cases[] = {
      {0xEF53, "WAL", "local filesystem (type 0xef53)"}, /* ext4 */
      {0x58465342, "WAL", "local"},                      /* XFS */
      {0x01021994, "WAL", "local"},                      /* tmpfs */
      {0x6969, "DELETE", "on NFS, a shared filesystem"},
      {0xFF534D42, "DELETE", "on CIFS"},
      {0xFE534D42, "DELETE", "on SMB2"},
      {0x0BD00BD0, "DELETE", "on Lustre"},
      {0x47504653, "DELETE", "on GPFS"},
      {0x19830326, "DELETE", "on BeeGFS"},
      {0x00C36400, "DELETE", "on Ceph"},
      {0x65735546, "DELETE", "on FUSE"},
      /* statfs's f_type is a signed long: CIFS's magic read as negative */
      {0xFFFFFFFFFF534D42ull, "DELETE", "on CIFS"},
  };
  tp_store_journal j;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    assert_int_equal(tp_store_journal_for(cases[i].type, NULL, &j), TP_OK);
    assert_string_equal(j.mode, cases[i].mode);
    if (!strstr(j.why, cases[i].why))
      fail_msg("0x%llx: '%s'", (unsigned long long)cases[i].type, j.why);
  }
  assert_int_equal(tp_store_journal_for(0xEF53, "delete", &j), TP_OK);
  assert_string_equal(j.mode, "DELETE");
  assert_string_equal(j.why, "TPBENCH_DB_JOURNAL=delete");
  assert_int_equal(tp_store_journal_for(0x6969, "wal", &j), TP_OK);
  assert_string_equal(j.mode, "WAL");
  assert_int_equal(tp_store_journal_for(0x6969, "", &j), TP_OK);
  assert_string_equal(j.mode, "DELETE");
  assert_int_equal(tp_store_journal_for(0xEF53, "WAL2", &j), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "must be 'wal' or 'delete', not 'WAL2'"));
}

/* The override reaches tp_store_open: a database made with
 * TPBENCH_DB_JOURNAL=delete has no WAL, and a bad value opens nothing. */
static void test_journal_mode_override_opens(void **state) {
  scratch *s = *state;
  setenv("TPBENCH_DB_JOURNAL", "delete", 1);
  tp_store *store = open_new(s, "delete.db");
  assert_int_equal(raw_int(tp_store_db(store),
                           "SELECT count(*) FROM pragma_journal_mode WHERE journal_mode='delete'"),
                   1);
  tp_store_close(store);
  setenv("TPBENCH_DB_JOURNAL", "sometimes", 1);
  tp_store *bad = NULL;
  assert_int_equal(tp_store_open(path_in(s, "bad.db"), 1, &bad), TP_EUSAGE);
  assert_null(bad);
  assert_false(file_exists(path_in(s, "bad.db")));
  unsetenv("TPBENCH_DB_JOURNAL");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_migrations_numbered),
      cmocka_unit_test_setup_teardown(test_create_and_migrate, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_missing_without_create, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_reopen_keeps_data, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_empty_file_is_migrated, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_older_version_is_migrated, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_failed_migration_rolls_back, make_scratch,
                                      remove_scratch),
      cmocka_unit_test_setup_teardown(test_odd_file_name, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_two_handles, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_foreign_text_file, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_foreign_large_binary_file, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_foreign_other_app_id, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_foreign_tables_without_app_id, make_scratch,
                                      remove_scratch),
      cmocka_unit_test_setup_teardown(test_foreign_newer_version, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_unwritable_paths, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_read_only_file, make_scratch, remove_scratch),
      cmocka_unit_test(test_config_key_golden),
      cmocka_unit_test(test_config_key_every_axis_matters),
      cmocka_unit_test(test_config_key_nulls_escapes_truncation),
      cmocka_unit_test_setup_teardown(test_put_config_writes_everything, make_scratch,
                                      remove_scratch),
      cmocka_unit_test_setup_teardown(test_put_config_rejected, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_put_config_atomic_on_samples, make_scratch,
                                      remove_scratch),
      cmocka_unit_test_setup_teardown(test_put_config_atomic_on_schedules, make_scratch,
                                      remove_scratch),
      cmocka_unit_test_setup_teardown(test_put_config_bad_records, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_find_run, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_put_system, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_import_keeps_system, make_scratch, remove_scratch),
      cmocka_unit_test_setup_teardown(test_import_updates_a_grown_run, make_scratch,
                                      remove_scratch),
      cmocka_unit_test_setup_teardown(test_composition_axes_and_drift, make_scratch,
                                      remove_scratch),
      cmocka_unit_test_setup_teardown(test_transport_axes, make_scratch, remove_scratch),
      cmocka_unit_test(test_journal_mode_choice),
      cmocka_unit_test_setup_teardown(test_journal_mode_override_opens, make_scratch,
                                      remove_scratch),
  };
  return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
