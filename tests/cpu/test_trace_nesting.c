/*
 * test_trace_nesting.c — the trace exports against the rules their readers
 * apply, on every traced configuration of the sample database (a migrated
 * copy; measured on the H200 pair):
 *   - nesting: on one track (pid, tid) complete events nest or are disjoint
 *     (the Trace Event format; Perfetto drops a slice that partially
 *     overlaps another), in the Chrome export and in every Kineto file; the
 *     checker itself catches a planted overlap;
 *   - projection and launches: in a stock configuration the NCCL kernel is
 *     given to NCCL's own range and the GEMM to the op's range, every range
 *     with work has a GPU projection, and each flow start has its finish;
 *   - the Kineto files carry what Holistic Trace Analysis reads: its loader
 *     finds a file's rank by the first text match of `"rank":` followed by
 *     whitespace and digits (so distributedInfo comes first, spaced); its
 *     parser keeps events with "dur" and "cat"; its comm/compute overlap
 *     takes events whose args have a "stream", calls a kernel communication
 *     when its name starts with "nccl" (or holds "ncclKernel"), memory when
 *     it starts with "Memcpy"/"Memset", computation when it is none of those
 *     nor a "...Sync"/"Stream Wait Event"; it rounds float times to whole
 *     microseconds (start up, end down), merges each kind's intervals and
 *     divides their intersection by the communication's length. The test
 *     computes that overlap from the Kineto file and compares it with the
 *     overlap tpbench stored for the same configuration.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>

#include "report/tp_trace_export.h"
#include "report/tp_trace_kineto.h"
#include "tests/cpu/fixture_db.h"

/* The sample's stock ag_linear (NCCL all-gather, then the GEMM) and the ce
 * dist_gemm of the same case. */
enum { STOCK_CONFIG = 241, CE_CONFIG = 242, SAMPLE_TRACES = 160 };

typedef struct {
  fx_dir dir;
  char db[512];
  tp_store *store;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || fx_mkdir(&f->dir, "tp_trace_nesting") != 0) return -1;
  fx_path(&f->dir, "sample.db", f->db, sizeof f->db);
  if (fx_copy(FX_SAMPLE_DB, f->db) != 0) return -1;
  if (tp_store_open(f->db, 0, &f->store) != TP_OK) return -1; /* migrates the copy */
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  tp_store_close(f->store);
  fx_rmdir(&f->dir);
  free(f);
  return 0;
}

/* ---- exporting --------------------------------------------------------------------- */

static json_t *parse_or_fail(char *text) {
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  if (!root) fail_msg("not JSON: %s (line %d)", err.text, err.line);
  return root;
}

static json_t *chrome(tp_store *s, int64_t id) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_chrome_trace(s, id, mem), TP_OK);
  fclose(mem);
  json_t *root = parse_or_fail(text);
  free(text);
  return root;
}

/* The Kineto file of one rank; *text keeps the raw text when not NULL. */
static json_t *kineto(tp_store *s, int64_t id, int rank, char **text_out) {
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  assert_int_equal(tp_report_kineto_trace(s, id, rank, mem), TP_OK);
  fclose(mem);
  json_t *root = parse_or_fail(text);
  if (text_out) *text_out = text;
  else free(text);
  return root;
}

static int64_t *traced_configs(tp_store *s, size_t *n) {
  sqlite3_stmt *st = NULL;
  assert_int_equal(
      sqlite3_prepare_v2(tp_store_db(s), "SELECT config_id FROM traces ORDER BY 1", -1, &st, NULL),
      SQLITE_OK);
  int64_t *ids = NULL;
  *n = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    ids = realloc(ids, (*n + 1) * sizeof *ids);
    ids[(*n)++] = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  return ids;
}

/* ---- the nesting checker -------------------------------------------------------------- */

typedef struct {
  int64_t pid, tid, start, end; /* ns, from the microsecond values */
} span;

static int by_track_then_start(const void *pa, const void *pb) {
  const span *a = pa, *b = pb;
  if (a->pid != b->pid) return a->pid < b->pid ? -1 : 1;
  if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return (a->end < b->end) - (a->end > b->end); /* longer first */
}

static int64_t ns_of(json_t *e, const char *key) {
  return (int64_t)llround(json_number_value(json_object_get(e, key)) * 1000.0);
}

/* How many complete events partially overlap an open one on their track:
 * 0 when every track's slices nest or are disjoint. */
static size_t partial_overlaps(json_t *events) {
  size_t n = 0, bad = 0;
  span *v = calloc(json_array_size(events) + 1, sizeof *v);
  for (size_t i = 0; i < json_array_size(events); i++) {
    json_t *e = json_array_get(events, i);
    if (strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0) continue;
    int64_t start = ns_of(e, "ts");
    v[n++] = (span){json_integer_value(json_object_get(e, "pid")),
                    json_integer_value(json_object_get(e, "tid")), start, start + ns_of(e, "dur")};
  }
  qsort(v, n, sizeof *v, by_track_then_start);
  int64_t *open = calloc(n + 1, sizeof *open);
  size_t depth = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && (v[i].pid != v[i - 1].pid || v[i].tid != v[i - 1].tid)) depth = 0;
    while (depth > 0 && open[depth - 1] <= v[i].start) depth--;
    if (depth > 0 && v[i].end > open[depth - 1]) bad++;
    else open[depth++] = v[i].end;
  }
  free(open);
  free(v);
  return bad;
}

static void test_every_sample_trace_nests(void **state) {
  fixture *f = *state;
  size_t n_configs = 0, chrome_files = 0, kineto_files = 0, bad = 0;
  int64_t *ids = traced_configs(f->store, &n_configs);
  assert_int_equal(n_configs, SAMPLE_TRACES);
  for (size_t i = 0; i < n_configs; i++) {
    json_t *root = chrome(f->store, ids[i]);
    size_t here = partial_overlaps(json_object_get(root, "traceEvents"));
    if (here) print_message("configuration %lld: %zu partial overlaps\n", (long long)ids[i], here);
    bad += here;
    chrome_files++;
    json_decref(root);
    int *ranks = NULL;
    size_t n_ranks = 0;
    assert_int_equal(tp_report_trace_ranks(f->store, ids[i], &ranks, &n_ranks), TP_OK);
    for (size_t r = 0; r < n_ranks; r++) {
      json_t *k = kineto(f->store, ids[i], ranks[r], NULL);
      bad += partial_overlaps(json_object_get(k, "traceEvents"));
      kineto_files++;
      json_decref(k);
    }
    free(ranks);
  }
  print_message("nesting: %zu Chrome files, %zu Kineto files, %zu partial overlaps\n", chrome_files,
                kineto_files, bad);
  assert_int_equal(bad, 0);
  assert_true(kineto_files >= chrome_files);
  free(ids);
}

/* The checker finds a slice planted across a kernel's end, and accepts one inside it. */
static void test_checker_catches_planted_overlap(void **state) {
  fixture *f = *state;
  json_t *root = chrome(f->store, STOCK_CONFIG);
  json_t *events = json_object_get(root, "traceEvents");
  json_t *kernel = NULL;
  for (size_t i = 0; i < json_array_size(events) && !kernel; i++) {
    json_t *e = json_array_get(events, i);
    const char *cat = json_string_value(json_object_get(e, "cat"));
    if (cat && !strcmp(cat, "gemm")) kernel = e;
  }
  assert_non_null(kernel);
  assert_int_equal(partial_overlaps(events), 0);
  double ts = json_number_value(json_object_get(kernel, "ts"));
  double dur = json_number_value(json_object_get(kernel, "dur"));
  json_t *inside = json_deep_copy(kernel);
  json_object_set_new(inside, "ts", json_real(ts + dur / 4));
  json_object_set_new(inside, "dur", json_real(dur / 2));
  json_array_append_new(events, inside);
  assert_int_equal(partial_overlaps(events), 0);
  json_t *across = json_deep_copy(kernel);
  json_object_set_new(across, "ts", json_real(ts + dur / 2));
  json_object_set_new(across, "dur", json_real(dur));
  json_array_append_new(events, across);
  assert_int_equal(partial_overlaps(events), 1);
  json_decref(root);
}

/* ---- projection and launches ------------------------------------------------------------ */

static const char *arg_str(json_t *e, const char *key) {
  return json_string_value(json_object_get(json_object_get(e, "args"), key));
}

static void test_ranges_projected_and_launches_linked(void **state) {
  fixture *f = *state;
  json_t *root = chrome(f->store, STOCK_CONFIG);
  json_t *events = json_object_get(root, "traceEvents");
  size_t nccl = 0, gemm = 0, projected = 0, starts = 0, finishes = 0, device = 0;
  for (size_t i = 0; i < json_array_size(events); i++) {
    json_t *e = json_array_get(events, i);
    const char *ph = json_string_value(json_object_get(e, "ph"));
    const char *cat = json_string_value(json_object_get(e, "cat"));
    if (!strcmp(ph, "s")) starts++;
    if (!strcmp(ph, "f")) {
      finishes++;
      assert_string_equal(json_string_value(json_object_get(e, "bp")), "e");
    }
    if (strcmp(ph, "X") != 0) continue;
    if (!strcmp(cat, "range_gpu")) projected++;
    const char *kind = arg_str(e, "kind");
    if (kind && (!strcmp(kind, "kernel") || !strcmp(kind, "memcpy") || !strcmp(kind, "memset")))
      device++;
    if (!strcmp(cat, "comm")) {
      nccl++;
      assert_string_equal(arg_str(e, "nvtx_range"), "NCCL:ncclAllGather");
    } else if (!strcmp(cat, "gemm")) {
      gemm++;
      assert_string_equal(arg_str(e, "nvtx_range"), "ag_linear.fwd stock nccl x1");
    }
  }
  assert_int_equal(nccl, 10); /* 5 iterations x 2 ranks */
  assert_int_equal(gemm, 10);
  assert_int_equal(projected, 30); /* iteration, op and NCCL range, 5 x 2 ranks */
  assert_int_equal(starts, finishes);
  assert_int_equal(starts, device); /* every launch placed in a range */
  json_decref(root);
}

/* ---- what HTA reads ------------------------------------------------------------------------ */

static int starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

typedef enum { K_COMM, K_MEMORY, K_COMPUTE, K_OTHER } kernel_kind;

/* HTA's kernel kinds by name (see the file comment). */
static kernel_kind hta_kind(const char *name) {
  if (starts_with(name, "nccl") || strstr(name, "ncclKernel")) return K_COMM;
  if (starts_with(name, "Memcpy") || starts_with(name, "Memset")) return K_MEMORY;
  if (strstr(name, "Sync") || starts_with(name, "Stream Wait Event")) return K_OTHER;
  return K_COMPUTE;
}

typedef struct {
  int64_t *start, *end;
  size_t n;
} intervals;

static void add_interval(intervals *v, int64_t start, int64_t end) {
  v->start = realloc(v->start, (v->n + 1) * sizeof *v->start);
  v->end = realloc(v->end, (v->n + 1) * sizeof *v->end);
  v->start[v->n] = start;
  v->end[v->n++] = end;
}

static int by_start(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  return (x[0] > y[0]) - (x[0] < y[0]);
}

/* Merged, sorted [start, end) pairs (in place, as pairs); returns their count. */
static size_t merge(intervals *v, int64_t (*out)[2]) {
  for (size_t i = 0; i < v->n; i++) {
    out[i][0] = v->start[i];
    out[i][1] = v->end[i];
  }
  qsort(out, v->n, sizeof *out, by_start);
  size_t m = 0;
  for (size_t i = 0; i < v->n; i++) {
    if (out[i][1] <= out[i][0]) continue;
    if (m > 0 && out[i][0] <= out[m - 1][1]) {
      if (out[i][1] > out[m - 1][1]) out[m - 1][1] = out[i][1];
    } else {
      out[m][0] = out[i][0];
      out[m++][1] = out[i][1];
    }
  }
  return m;
}

/* 100 * |U comm ∩ U compute| / |U comm|; NaN without communication. unit_us: times rounded
 * to whole microseconds as HTA's parser does; otherwise nanoseconds. by_tpbench_category:
 * comm and compute by the file's "tpbench category" instead of HTA's names. */
static double overlap_pct(json_t *events, int unit_us, int by_tpbench_category) {
  intervals comm = {0}, comp = {0};
  for (size_t i = 0; i < json_array_size(events); i++) {
    json_t *e = json_array_get(events, i);
    json_t *args = json_object_get(e, "args");
    if (strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0) continue;
    if (!json_is_integer(json_object_get(args, "stream"))) continue;
    double ts = json_number_value(json_object_get(e, "ts"));
    double end_us = ts + json_number_value(json_object_get(e, "dur"));
    int64_t start = unit_us ? (int64_t)ceil(ts) : llround(ts * 1000);
    int64_t end = unit_us ? (int64_t)floor(end_us) : start + ns_of(e, "dur");
    kernel_kind kind = hta_kind(json_string_value(json_object_get(e, "name")));
    if (by_tpbench_category) {
      const char *cat = json_string_value(json_object_get(args, "tpbench category"));
      int kernel = !strcmp(json_string_value(json_object_get(e, "cat")), "kernel");
      kind = !strcmp(cat, "comm")                 ? K_COMM
             : kernel && strcmp(cat, "sync") != 0 ? K_COMPUTE
                                                  : K_OTHER;
    }
    if (kind == K_COMM) add_interval(&comm, start, end);
    if (kind == K_COMPUTE) add_interval(&comp, start, end);
  }
  int64_t(*a)[2] = calloc(comm.n + 1, sizeof *a), (*b)[2] = calloc(comp.n + 1, sizeof *b);
  size_t na = merge(&comm, a), nb = merge(&comp, b);
  int64_t total = 0, both = 0;
  for (size_t i = 0; i < na; i++) total += a[i][1] - a[i][0];
  for (size_t i = 0, j = 0; i < na && j < nb;) {
    int64_t lo = a[i][0] > b[j][0] ? a[i][0] : b[j][0], hi = a[i][1] < b[j][1] ? a[i][1] : b[j][1];
    if (hi > lo) both += hi - lo;
    if (a[i][1] < b[j][1]) i++;
    else j++;
  }
  free(a);
  free(b);
  free(comm.start);
  free(comm.end);
  free(comp.start);
  free(comp.end);
  return total > 0 ? 100.0 * (double)both / (double)total : NAN;
}

/* tpbench's own: 100 * sum overlap / sum comm over the rank's stored windows. */
static double stored_pct(tp_store *s, int64_t id, int rank) {
  tp_trace_overlap *rows = NULL;
  size_t n = 0;
  assert_int_equal(tp_store_trace_overlap(s, id, &rows, &n), TP_OK);
  uint64_t comm = 0, both = 0;
  for (size_t i = 0; i < n; i++) {
    if (rows[i].rank != rank) continue;
    comm += rows[i].comm_ns;
    both += rows[i].overlap_ns;
  }
  free(rows);
  return comm ? 100.0 * (double)both / (double)comm : NAN;
}

/* The keys and categories HTA reads, in every event of one rank's file.
 * Not inlined: GCC's -Wdangling-pointer at -O3 misreads the string search
 * into the caller's buffer once inlined (a false positive). */
__attribute__((noinline)) static void check_hta_keys(json_t *root, const char *text, int rank) {
  const char *at = strstr(text, "\"rank\":"); /* the first match, then a space */
  assert_non_null(at);
  assert_true(at[7] == ' ');
  char *end = NULL;
  assert_int_equal(strtol(at + 8, &end, 10), rank);
  assert_true(end > at + 8);
  json_t *dist = json_object_get(root, "distributedInfo");
  assert_int_equal(json_integer_value(json_object_get(dist, "rank")), rank);
  assert_int_equal(json_integer_value(json_object_get(dist, "world_size")), 2);
  assert_string_equal(json_string_value(json_object_get(dist, "backend")), "nccl");
  assert_int_equal(json_integer_value(json_object_get(root, "schemaVersion")), 1);
  json_t *dev = json_array_get(json_object_get(root, "deviceProperties"), 0);
  assert_true(json_is_integer(json_object_get(dev, "id")));
  assert_string_equal(json_string_value(json_object_get(dev, "name")), "NVIDIA H200");
  static const char *const cats[] = {"kernel",    "gpu_memcpy",      "gpu_memset",
                                     "cuda_sync", "user_annotation", "gpu_user_annotation"};
  json_t *events = json_object_get(root, "traceEvents");
  size_t seen[6] = {0};
  for (size_t i = 0; i < json_array_size(events); i++) {
    json_t *e = json_array_get(events, i);
    if (strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0) continue;
    assert_true(json_is_number(json_object_get(e, "ts")));
    assert_true(json_number_value(json_object_get(e, "dur")) >= 0);
    assert_true(json_is_integer(json_object_get(e, "pid")));
    assert_true(json_is_integer(json_object_get(e, "tid")));
    assert_non_null(json_string_value(json_object_get(e, "name")));
    const char *cat = json_string_value(json_object_get(e, "cat"));
    size_t k = 0;
    while (k < 6 && strcmp(cat, cats[k]) != 0) k++;
    if (k == 6) fail_msg("category %s", cat);
    seen[k]++;
    json_t *args = json_object_get(e, "args");
    int annotation = k >= 4;
    /* an annotation with a stream would count as a kernel in the overlap */
    assert_int_equal(json_is_integer(json_object_get(args, "stream")), !annotation);
    if (!annotation) {
      assert_true(json_is_integer(json_object_get(args, "correlation")));
      assert_true(json_is_integer(json_object_get(args, "device")));
    }
  }
  assert_true(seen[0] > 0 && seen[3] > 0 && seen[4] > 0 && seen[5] > 0);
}

static void test_kineto_as_hta_reads_it(void **state) {
  fixture *f = *state;
  for (int rank = 0; rank < 2; rank++) {
    char *text = NULL;
    json_t *root = kineto(f->store, STOCK_CONFIG, rank, &text);
    check_hta_keys(root, text, rank);
    /* NCCL's kernels demangled, so HTA's name rule finds them */
    assert_non_null(strstr(text, "\"name\":\"ncclDevKernel_AllGather_RING_LL("));
    free(text);
    json_decref(root);
  }
}

/* HTA's comm/compute overlap from the Kineto files next to tpbench's stored one. */
static void test_overlap_matches_tpbench(void **state) {
  fixture *f = *state;
  for (int rank = 0; rank < 2; rank++) {
    json_t *root = kineto(f->store, STOCK_CONFIG, rank, NULL);
    json_t *events = json_object_get(root, "traceEvents");
    double hta = overlap_pct(events, 1, 0), own = stored_pct(f->store, STOCK_CONFIG, rank);
    print_message("config %d rank %d (stock, NCCL): HTA's rule %.2f %%, tpbench %.2f %%\n",
                  STOCK_CONFIG, rank, hta, own);
    assert_true(isfinite(hta) && isfinite(own));
    assert_true(fabs(hta - own) <= 1.0); /* whole-microsecond rounding */
    json_decref(root);

    root = kineto(f->store, CE_CONFIG, rank, NULL);
    events = json_object_get(root, "traceEvents");
    /* ce moves data by peer copies, which HTA files under memory: no communication */
    assert_true(isnan(overlap_pct(events, 1, 0)));
    double exact = overlap_pct(events, 0, 1), rounded = overlap_pct(events, 1, 1);
    own = stored_pct(f->store, CE_CONFIG, rank);
    print_message("config %d rank %d (ce): HTA's arithmetic on tpbench's comm %.2f %% (ns), "
                  "%.2f %% (us), tpbench %.2f %%\n",
                  CE_CONFIG, rank, exact, rounded, own);
    assert_true(fabs(exact - own) <= 0.05);
    assert_true(fabs(rounded - own) <= 1.0);
    json_decref(root);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_sample_trace_nests),
      cmocka_unit_test(test_checker_catches_planted_overlap),
      cmocka_unit_test(test_ranges_projected_and_launches_linked),
      cmocka_unit_test(test_kineto_as_hta_reads_it),
      cmocka_unit_test(test_overlap_matches_tpbench),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
