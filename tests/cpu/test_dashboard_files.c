/*
 * test_dashboard_files.c — what `tpbench dashboard` writes, checked without
 * a browser (test_dashboard.c loads the page in Chromium):
 *   - the sample database's index.html is at most 3 MB and carries no trace;
 *     every traced configuration has a file in traces/, named by its config
 *     id and the CRC-32 of its compressed bytes, that decodes (base64, zlib)
 *     to exactly the Chrome trace `tpbench trace` exports;
 *   - --max-events cuts a trace file to that many complete events;
 *   - the timeline the page opens first is a dist_gemm configuration of the
 *     latest traced run, the one with the most work;
 *   - the link probes: every stored point with nccl-tests' algbw and busbw,
 *     recomputed here from the stored medians;
 *   - a regeneration replaces the folder whole (the last one's trace files
 *     gone, nothing left beside it) and refuses a folder holding a file it
 *     did not write; a traces/ that is not a folder and a database without
 *     runs are refused before anything is created.
 * The sample's sizes are printed (the acceptance figure).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <dirent.h>
#include <jansson.h>
#include <sodium.h>
#include <sys/stat.h>
#include <zlib.h>

#include "dashboards/tp_dashboard.h"
#include "dashboards/tp_dashboard_files.h"
#include "report/tp_trace_export.h"
#include "tests/cpu/fixture_db.h"

typedef struct {
  fx_dir dir;
  char db[512];
  char site[512];
  tp_store *store;
  tp_dashboard_stats stats;
  json_t *doc; /* the page's embedded document */
} fixture;

static fixture fx;

/* The JSON inside <script id="tp-data">, parsed. */
static json_t *page_document(const char *site) {
  char path[700];
  snprintf(path, sizeof path, "%s/index.html", site);
  size_t len = 0;
  char *page = (char *)fx_read_all(path, &len);
  if (!page) return NULL;
  const char *open = "id=\"tp-data\">";
  char *at = memmem(page, len, open, strlen(open));
  char *close = at ? strstr(at, "</script>") : NULL;
  json_t *doc = NULL;
  if (close) {
    at += strlen(open);
    json_error_t err;
    doc = json_loadb(at, (size_t)(close - at), 0, &err);
  }
  free(page);
  return doc;
}

static int setup(void **state) {
  (void)state;
  if (access(FX_SAMPLE_DB, R_OK) != 0) return -1;
  if (fx_mkdir(&fx.dir, "tp_dashboard_files") != 0) return -1;
  fx_path(&fx.dir, "sample.db", fx.db, sizeof fx.db);
  fx_path(&fx.dir, "site", fx.site, sizeof fx.site);
  if (fx_copy(FX_SAMPLE_DB, fx.db) != 0) return -1;
  if (tp_store_open(fx.db, 0, &fx.store) != TP_OK) return -1;
  if (tp_dashboard_write(fx.store, fx.site, NULL, &fx.stats) != TP_OK) {
    fprintf(stderr, "%s\n", tp_last_error());
    return -1;
  }
  fx.doc = page_document(fx.site);
  return fx.doc ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  json_decref(fx.doc);
  tp_store_close(fx.store);
  fx_rmdir(&fx.dir);
  return 0;
}

static size_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* The sizes of dir's regular files together; *count of them. */
static size_t folder_bytes(const char *dir, int *count) {
  DIR *d = opendir(dir);
  size_t total = 0;
  *count = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
      total += (size_t)st.st_size;
      (*count)++;
    }
  }
  if (d) closedir(d);
  return total;
}

/* ---- the sample's page ------------------------------------------------------- */

static void test_sample_page_is_small_and_carries_no_trace(void **state) {
  (void)state;
  char path[700], traces[700];
  snprintf(path, sizeof path, "%s/index.html", fx.site);
  snprintf(traces, sizeof traces, "%s/traces", fx.site);
  size_t page = file_size(path);
  assert_int_equal(page, fx.stats.bytes);
  assert_true(page <= (size_t)3 * 1024 * 1024);
  int files = 0;
  size_t trace_bytes = folder_bytes(traces, &files);
  assert_int_equal(trace_bytes, fx.stats.trace_bytes);
  assert_int_equal(files, fx.stats.traces);
  assert_int_equal(fx.stats.traces, fx_int(fx.store, "SELECT count(*) FROM traces"));
  size_t len = 0;
  char *text = (char *)fx_read_all(path, &len);
  assert_non_null(text);
  assert_null(memmem(text, len, "\"traceEvents\":", 14)); /* no trace inlined */
  free(text);
  printf("sample dashboard: index.html %zu bytes, traces/ %zu bytes in %d files, %zu in all\n",
         page, trace_bytes, files, page + trace_bytes);
}

/* The trace file's payload: base64 decoded and inflated, as the page does. */
static json_t *decode_trace_file(const char *site, const char *name, int64_t config_id) {
  char path[800];
  snprintf(path, sizeof path, "%s/%s", site, name);
  size_t len = 0;
  char *text = (char *)fx_read_all(path, &len);
  assert_non_null(text);
  char head[64];
  int head_len = snprintf(head, sizeof head, "tpTraceLoaded(%lld,\"", (long long)config_id);
  assert_true(len > (size_t)head_len + 4);
  assert_memory_equal(text, head, (size_t)head_len);
  assert_memory_equal(text + len - 4, "\");\n", 4);
  size_t b64_len = len - (size_t)head_len - 4, bin_len = 0;
  unsigned char *bin = malloc(b64_len);
  assert_int_equal(sodium_base642bin(bin, b64_len, text + head_len, b64_len, NULL, &bin_len, NULL,
                                     sodium_base64_VARIANT_ORIGINAL),
                   0);
  /* The name carries the CRC-32 of the compressed bytes. */
  char want[TP_DASHBOARD_TRACE_NAME_MAX];
  snprintf(want, sizeof want, "traces/%lld-%08lx.js", (long long)config_id,
           crc32(0L, bin, (uInt)bin_len) & 0xffffffffUL);
  assert_string_equal(name, want);
  uLongf cap = 64u << 20;
  unsigned char *json = malloc(cap);
  assert_int_equal(uncompress(json, &cap, bin, (uLong)bin_len), Z_OK);
  json_error_t err;
  json_t *trace = json_loadb((const char *)json, cap, 0, &err);
  assert_non_null(trace);
  free(json);
  free(bin);
  free(text);
  return trace;
}

static json_t *exported_trace(int64_t config_id) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_chrome_trace(fx.store, config_id, mem), TP_OK);
  fclose(mem);
  json_error_t err;
  json_t *trace = json_loadb(text, len, 0, &err);
  free(text);
  assert_non_null(trace);
  return trace;
}

/* Every trace entry's file exists; every fifth (and the default) decodes to
 * exactly the export (the sample's traces are all below the event cap). */
static void test_trace_files_decode_to_the_export(void **state) {
  (void)state;
  json_t *traces = json_object_get(fx.doc, "traces");
  assert_int_equal(json_array_size(traces), (size_t)fx.stats.traces);
  json_int_t preferred = json_integer_value(json_object_get(fx.doc, "default_trace"));
  int compared = 0;
  for (size_t i = 0; i < json_array_size(traces); i++) {
    json_t *entry = json_array_get(traces, i);
    int64_t id = json_integer_value(json_object_get(entry, "config_id"));
    const char *name = json_string_value(json_object_get(entry, "file"));
    assert_non_null(name);
    char path[800];
    snprintf(path, sizeof path, "%s/%s", fx.site, name);
    assert_true(file_size(path) > 0);
    assert_false(json_is_true(json_object_get(entry, "truncated")));
    if (i % 5 != 0 && id != preferred) continue;
    json_t *stored = decode_trace_file(fx.site, name, id), *exported = exported_trace(id);
    assert_true(json_equal(stored, exported));
    json_decref(stored);
    json_decref(exported);
    compared++;
  }
  assert_true(compared >= fx.stats.traces / 5);
}

/* The first timeline: dist_gemm, of the latest run with a trace, no traced
 * dist_gemm configuration of that run with more FLOPs per iteration. */
static void test_default_trace_is_fused_of_the_latest_run(void **state) {
  (void)state;
  json_int_t id = json_integer_value(json_object_get(fx.doc, "default_trace"));
  assert_true(id > 0);
  char sql[600];
  snprintf(sql, sizeof sql, "SELECT backend = 'dist_gemm' FROM configs WHERE id = %lld",
           (long long)id);
  assert_int_equal(fx_int(fx.store, sql), 1);
  int64_t latest = fx_int(fx.store, "SELECT c.run_id FROM traces t JOIN configs c ON c.id = "
                                    "t.config_id JOIN runs r ON r.id = c.run_id ORDER BY "
                                    "r.started_at DESC, r.id DESC LIMIT 1");
  snprintf(sql, sizeof sql, "SELECT run_id FROM configs WHERE id = %lld", (long long)id);
  assert_int_equal(fx_int(fx.store, sql), latest);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM traces t JOIN configs c ON c.id = t.config_id JOIN results x ON "
           "x.config_id = c.id WHERE c.run_id = %lld AND c.backend = 'dist_gemm' AND x.flops > "
           "(SELECT flops FROM results WHERE config_id = %lld)",
           (long long)latest, (long long)id);
  assert_int_equal(fx_int(fx.store, sql), 0);
  /* The sample's latest traced run has a toy model too: not chosen. */
  snprintf(sql, sizeof sql, "SELECT model <> 'debug' FROM configs WHERE id = %lld", (long long)id);
  assert_int_equal(fx_int(fx.store, sql), 1);
}

/* Every stored link point, with nccl-tests' bandwidths from its median. */
static void test_link_points(void **state) {
  (void)state;
  json_t *links = json_object_get(fx.doc, "links");
  assert_int_equal(json_array_size(links), (size_t)fx.stats.link_runs);
  assert_int_equal(fx.stats.link_runs,
                   fx_int(fx.store, "SELECT count(DISTINCT run_id) FROM configs WHERE kind = "
                                    "'link'"));
  json_t *run = json_array_get(links, 0);
  json_t *points = json_object_get(run, "points");
  int64_t run_id = json_integer_value(json_object_get(json_object_get(run, "run"), "id"));
  char sql[300];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM configs WHERE run_id = %lld AND kind = 'link'",
           (long long)run_id);
  assert_int_equal(json_array_size(points), (size_t)fx_int(fx.store, sql));
  assert_true(json_array_size(points) >= 4);
  for (size_t i = 0; i < json_array_size(points); i++) {
    json_t *p = json_array_get(points, i);
    int64_t id = json_integer_value(json_object_get(p, "config_id"));
    snprintf(sql, sizeof sql, "SELECT median_us FROM results WHERE config_id = %lld",
             (long long)id);
    double seconds = fx_real(fx.store, sql) * 1e-6;
    snprintf(sql, sizeof sql, "SELECT m FROM configs WHERE id = %lld", (long long)id);
    double bytes = (double)fx_int(fx.store, sql);
    snprintf(sql, sizeof sql, "SELECT tp FROM configs WHERE id = %lld", (long long)id);
    double tp = (double)fx_int(fx.store, sql);
    int nccl = !strcmp(json_string_value(json_object_get(p, "engine")), "nccl");
    double algbw = (nccl ? tp * bytes : bytes) / seconds / 1e9;
    double busbw = nccl ? (tp - 1) * bytes / seconds / 1e9 : algbw;
    assert_float_equal(json_real_value(json_object_get(p, "algbw_gbps")), algbw, algbw * 1e-12);
    assert_float_equal(json_real_value(json_object_get(p, "busbw_gbps")), busbw, busbw * 1e-12);
    assert_int_equal(json_integer_value(json_object_get(p, "bytes")), (json_int_t)bytes);
  }
}

/* ---- regeneration and refusals ------------------------------------------------------ */

static void put_file(const char *path) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("x", f);
  fclose(f);
}

/* A regeneration replaces the folder whole: an earlier generation's trace file is gone, and
 * nothing is left beside the folder. A file the dashboard did not write makes it refuse (the
 * folder would be replaced with it), before anything is made. */
static void test_regeneration_replaces_the_folder_whole(void **state) {
  (void)state;
  char stale[700], notes[700];
  snprintf(stale, sizeof stale, "%s/traces/999999-0000beef.js", fx.site);
  snprintf(notes, sizeof notes, "%s/traces/notes.txt", fx.site);
  put_file(stale);
  tp_dashboard_stats again;
  assert_int_equal(tp_dashboard_write(fx.store, fx.site, NULL, &again), TP_OK);
  assert_int_not_equal(access(stale, F_OK), 0);
  assert_int_equal(again.trace_bytes, fx.stats.trace_bytes); /* same files, same names */
  int files = 0;
  char traces[700];
  snprintf(traces, sizeof traces, "%s/traces", fx.site);
  folder_bytes(traces, &files);
  assert_int_equal(files, again.traces);
  /* beside the site: the database and the sites of other tests, no staging folder */
  DIR *d = opendir(fx.dir.path);
  assert_non_null(d);
  for (struct dirent *e = readdir(d); e; e = readdir(d))
    if (strstr(e->d_name, ".new-")) fail_msg("left beside the site: %s", e->d_name);
  closedir(d);
  put_file(notes);
  assert_int_equal(tp_dashboard_write(fx.store, fx.site, NULL, NULL), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "holds traces/notes.txt, which a dashboard did not"));
  tp_clear_error();
  assert_int_equal(access(notes, F_OK), 0);
  remove(notes);
}

/* A folder's index.html that a dashboard did not write (the user's page of the same name) is
 * refused, kept byte for byte, and nothing is made beside it; one a dashboard wrote is replaced
 * (the regeneration above). */
static void test_foreign_page_is_refused(void **state) {
  (void)state;
  char site[600], page[700];
  fx_path(&fx.dir, "foreign-page", site, sizeof site);
  assert_int_equal(mkdir(site, 0777), 0);
  snprintf(page, sizeof page, "%s/index.html", site);
  static const char mine[] = "<!DOCTYPE html>\n<title>my notes: the tpbench dashboard</title>\n";
  FILE *f = fopen(page, "w");
  assert_non_null(f);
  assert_true(fputs(mine, f) >= 0);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(tp_dashboard_write(fx.store, site, NULL, NULL), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "holds index.html, which is not known to be a "
                                          "dashboard's (it lacks the page's mark"));
  tp_clear_error();
  char kept[256] = {0};
  f = fopen(page, "r");
  assert_non_null(f);
  assert_int_equal(fread(kept, 1, sizeof kept - 1, f), strlen(mine));
  assert_int_equal(fclose(f), 0);
  assert_string_equal(kept, mine);
  char traces[700];
  snprintf(traces, sizeof traces, "%s/traces", site);
  assert_int_not_equal(access(traces, F_OK), 0);
  DIR *d = opendir(fx.dir.path);
  assert_non_null(d);
  for (struct dirent *e = readdir(d); e; e = readdir(d))
    if (strstr(e->d_name, ".new-")) fail_msg("left beside the site: %s", e->d_name);
  closedir(d);
  /* a link to nothing is refused for what it is, and left as it was */
  char dangling[600];
  fx_path(&fx.dir, "dangling-page", dangling, sizeof dangling);
  assert_int_equal(mkdir(dangling, 0777), 0);
  snprintf(page, sizeof page, "%s/index.html", dangling);
  assert_int_equal(symlink("no-such-page.html", page), 0);
  assert_int_equal(tp_dashboard_write(fx.store, dangling, NULL, NULL), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "(it cannot be followed ("));
  tp_clear_error();
  char target[64] = {0};
  assert_int_equal(readlink(page, target, sizeof target - 1), strlen("no-such-page.html"));
}

/* Fewer events than the trace holds: the file carries exactly that many. */
static void test_max_events_cuts_the_trace_file(void **state) {
  (void)state;
  char site[600];
  fx_path(&fx.dir, "cut", site, sizeof site);
  tp_dashboard_options opt = {.max_trace_events = 5};
  tp_dashboard_stats st;
  assert_int_equal(tp_dashboard_write(fx.store, site, &opt, &st), TP_OK);
  json_t *doc = page_document(site);
  assert_non_null(doc);
  json_t *entry = json_array_get(json_object_get(doc, "traces"), 0);
  assert_true(json_is_true(json_object_get(entry, "truncated")));
  assert_int_equal(json_integer_value(json_object_get(entry, "shown_events")), 5);
  json_t *trace = decode_trace_file(site, json_string_value(json_object_get(entry, "file")),
                                    json_integer_value(json_object_get(entry, "config_id")));
  json_t *events = json_object_get(trace, "traceEvents");
  int complete = 0;
  for (size_t i = 0; i < json_array_size(events); i++)
    complete += !strcmp(json_string_value(json_object_get(json_array_get(events, i), "ph")), "X");
  assert_int_equal(complete, 5);
  json_decref(trace);
  json_decref(doc);
}

static void test_traces_not_a_folder_is_refused_first(void **state) {
  (void)state;
  char site[600], traces[700], page[700];
  fx_path(&fx.dir, "blocked", site, sizeof site);
  assert_int_equal(mkdir(site, 0777), 0);
  snprintf(traces, sizeof traces, "%s/traces", site);
  snprintf(page, sizeof page, "%s/index.html", site);
  put_file(traces);
  assert_int_equal(tp_dashboard_write(fx.store, site, NULL, NULL), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "not a directory"));
  assert_int_not_equal(access(page, F_OK), 0);
  tp_clear_error();
}

static void test_no_runs_creates_nothing(void **state) {
  (void)state;
  char db[600], site[600];
  fx_path(&fx.dir, "empty.db", db, sizeof db);
  fx_path(&fx.dir, "empty-site", site, sizeof site);
  tp_store *s = NULL;
  assert_int_equal(tp_store_open(db, 1, &s), TP_OK);
  assert_int_equal(tp_dashboard_write(s, site, NULL, NULL), TP_EUSAGE);
  assert_int_not_equal(access(site, F_OK), 0);
  tp_clear_error();
  tp_store_close(s);
}

static void test_trace_file_names(void **state) {
  (void)state;
  assert_true(tp_dashboard_is_trace_file_name("12-0a1b2c3d.js"));
  assert_false(tp_dashboard_is_trace_file_name("12-0A1B2C3D.js"));
  assert_false(tp_dashboard_is_trace_file_name("12-0a1b2c3.js"));
  assert_false(tp_dashboard_is_trace_file_name("-0a1b2c3d.js"));
  assert_false(tp_dashboard_is_trace_file_name("12-0a1b2c3d.json"));
  assert_false(tp_dashboard_is_trace_file_name("notes.txt"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sample_page_is_small_and_carries_no_trace),
      cmocka_unit_test(test_trace_files_decode_to_the_export),
      cmocka_unit_test(test_default_trace_is_fused_of_the_latest_run),
      cmocka_unit_test(test_link_points),
      cmocka_unit_test(test_regeneration_replaces_the_folder_whole),
      cmocka_unit_test(test_foreign_page_is_refused),
      cmocka_unit_test(test_max_events_cuts_the_trace_file),
      cmocka_unit_test(test_traces_not_a_folder_is_refused_first),
      cmocka_unit_test(test_no_runs_creates_nothing),
      cmocka_unit_test(test_trace_file_names),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
