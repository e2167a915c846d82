/*
 * test_profile.c — `tpbench profile` without a GPU: the per-process event
 * file (collectors/tp_profile_file.h) written and read back, alone and as a
 * folder of processes' files, a synthetic one
 * imported into a database (report/tp_profile.h) with its overlap over the
 * process window and its kernel summary, the failed and the empty cases, and
 * the fork/exec/wait that gives back the command's exit status
 * (bench/cli/profile_spawn.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "bench/cli/profile_spawn.h"
#include "collectors/tp_profile_analysis.h"
#include "collectors/tp_profile_file.h"
#include "report/tp_profile.h"
#include "store/tp_store_profile.h"
#include "tests/cpu/raw_markup.h"

static const uint64_t US = 1000;                   /* ns */
static const uint64_t T0 = 1700000000000000000ull; /* CLOCK_REALTIME-like */

static tp_event kernel(const char *name, tp_event_category cat, uint64_t start_us,
                       uint64_t end_us) {
  return (tp_event){.name = name,
                    .start_ns = T0 + start_us * US,
                    .end_ns = T0 + end_us * US,
                    .device = 0,
                    .stream = 7,
                    .type = TP_EV_KERNEL,
                    .category = cat,
                    .peer_device = -1};
}

/* Three GEMMs (500 µs in all), one NCCL kernel (400 µs) under two of them
 * for 200 µs, an NVTX range over everything and a peer copy of 0 length. */
static size_t synthetic_events(tp_event *ev) {
  size_t n = 0;
  ev[n++] = kernel("ampere_bf16_gemm", TP_CAT_GEMM, 0, 300);
  ev[n++] = kernel("ncclDevKernel_AllGather_RING_LL", TP_CAT_COMM, 200, 600);
  ev[n++] = kernel("ampere_bf16_gemm", TP_CAT_GEMM, 400, 500);
  ev[n++] = kernel("ampere_bf16_gemm", TP_CAT_GEMM, 700, 800);
  tp_event range = kernel("step\twith tab", TP_CAT_RANGE, 0, 900);
  range.type = TP_EV_RANGE;
  range.device = -1;
  range.stream = TP_STREAM_NONE;
  ev[n++] = range;
  tp_event copy = kernel("PtoP", TP_CAT_COMM, 850, 850);
  copy.type = TP_EV_MEMCPY;
  copy.copy_kind = TP_COPY_PTOP;
  copy.peer_device = 1;
  copy.bytes = 4096;
  ev[n++] = copy;
  return n;
}

/* Writes the synthetic profile as process `pid`'s file in `dir` (path: its name). */
static void write_process(const char *dir, char *path, int64_t pid, int complete,
                          const char *tail) {
  snprintf(path, 128, "%s/process-%lld.tpprof", dir, (long long)pid);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  tp_event ev[8];
  size_t n = synthetic_events(ev);
  tp_profile_meta meta = {.pid = pid,
                          .start_ns = T0,
                          .end_ns = T0 + 1000 * US,
                          .clock_offset_ns = 3,
                          .complete = complete};
  assert_int_equal(tp_profile_file_write(f, &meta, ev, n), TP_OK);
  if (tail) fputs(tail, f);
  assert_int_equal(fclose(f), 0);
}

/* A fresh folder for the processes' files (dir: 64 bytes). */
static void make_folder(char *dir) {
  snprintf(dir, 64, "/tmp/test_profile_XXXXXX");
  assert_non_null(mkdtemp(dir));
}

static void remove_folder(const char *dir, const char *path) {
  if (path) unlink(path);
  assert_int_equal(rmdir(dir), 0);
}

/* The synthetic profile of process 42 in a fresh folder. */
static void write_profile(char *dir, char *path, int complete, const char *tail) {
  make_folder(dir);
  write_process(dir, path, 42, complete, tail);
}

static void test_file_round_trip(void **state) {
  (void)state;
  char dir[64], path[128];
  write_profile(dir, path, 1, NULL);
  tp_profile_data d;
  assert_int_equal(tp_profile_file_read(path, &d), TP_OK);
  assert_int_equal(d.n_events, 6);
  assert_int_equal(d.meta.pid, 42);
  assert_int_equal(d.meta.complete, 1);
  assert_int_equal(d.meta.clock_offset_ns, 3);
  assert_int_equal(d.truncated, 0);
  assert_string_equal(d.events[1].name, "ncclDevKernel_AllGather_RING_LL");
  assert_int_equal(d.events[1].category, TP_CAT_COMM);
  assert_int_equal(d.events[1].end_ns - d.events[1].start_ns, 400 * US);
  assert_string_equal(d.events[4].name, "step with tab"); /* one line per event */
  assert_int_equal(d.events[4].type, TP_EV_RANGE);
  assert_int_equal(d.events[5].copy_kind, TP_COPY_PTOP);
  assert_int_equal(d.events[5].peer_device, 1);
  assert_int_equal(d.events[5].bytes, 4096);
  assert_int_equal(d.events[4].stream, TP_STREAM_NONE);
  tp_profile_data_free(&d);
  remove_folder(dir, path);
}

/* A writer killed mid-line leaves a last line without its newline: the
 * events before it are read, the file is marked truncated. A bad line in the
 * middle, or another file, is an error. */
static void test_file_cut_short_and_foreign(void **state) {
  (void)state;
  char dir[64], path[128];
  write_profile(dir, path, 0, "ev 0 2 0 17");
  tp_profile_data d;
  assert_int_equal(tp_profile_file_read(path, &d), TP_OK);
  assert_int_equal(d.n_events, 6);
  assert_int_equal(d.truncated, 1);
  tp_profile_data_free(&d);
  unlink(path);
  write_process(dir, path, 42, 1, "garbage\nev 0 2 0 1 2 0 0 0 0 7 0 -1 k\n");
  assert_int_equal(tp_profile_file_read(path, &d), TP_EIO);
  unlink(path);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("SQLite format 3\n", f);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(tp_profile_file_read(path, &d), TP_EIO);
  assert_non_null(strstr(tp_last_error(), "not a tpbench profile file"));
  remove_folder(dir, path);
}

/* Every process's file of the folder is read, in one set; other files are
 * not; a missing folder is no file at all. */
static void test_folder_of_processes(void **state) {
  (void)state;
  char dir[64], first[128], second[128], other[128];
  write_profile(dir, first, 1, NULL);
  write_process(dir, second, 43, 0, NULL);
  snprintf(other, sizeof other, "%s/process-44.tpprof.tmp", dir);
  FILE *f = fopen(other, "w");
  assert_non_null(f);
  assert_int_equal(fclose(f), 0);
  tp_profile_data d;
  size_t files = 0;
  assert_int_equal(tp_profile_folder_read(dir, &d, &files), TP_OK);
  assert_int_equal(files, 2);
  assert_int_equal(d.n_events, 12);
  assert_int_equal(d.meta.complete, 0); /* the second process's file was not */
  assert_string_equal(d.events[6].name, "ampere_bf16_gemm");
  tp_profile_data_free(&d);
  unlink(first);
  unlink(second);
  remove_folder(dir, other);
  assert_int_equal(tp_profile_folder_read("/nonexistent/folder", &d, &files), TP_OK);
  assert_int_equal(files, 0);
  assert_int_equal(d.n_events, 0);
}

static tp_store *fresh_store(char *db) {
  snprintf(db, 64, "/tmp/test_profile_db_XXXXXX");
  int fd = mkstemp(db);
  assert_true(fd >= 0);
  close(fd);
  unlink(db);
  tp_store *store = NULL;
  if (tp_store_open(db, 1, &store) != TP_OK) fail_msg("%s", tp_last_error());
  return store;
}

static void remove_db(const char *db) {
  char side[160];
  unlink(db);
  snprintf(side, sizeof side, "%s-wal", db);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", db);
  unlink(side);
}

static tp_profile_import_args import_args(const char *dir, int exit_status) {
  return (tp_profile_import_args){.profile_dir = dir,
                                  .command_line = "python3 train.py --steps 10",
                                  .label = "train",
                                  .commit = "abc123",
                                  .host = "testhost",
                                  .exit_status = exit_status};
}

/* Redirects descriptor fd to path; the saved descriptor (-1: path is NULL). */
static int redirect(int fd, const char *path) {
  if (!path) return -1;
  int saved = dup(fd);
  FILE *f = fopen(path, "w");
  assert_true(saved >= 0 && f != NULL);
  assert_true(dup2(fileno(f), fd) >= 0);
  assert_int_equal(fclose(f), 0);
  return saved;
}

static void restore(int fd, int saved) {
  if (saved < 0) return;
  assert_true(dup2(saved, fd) >= 0);
  close(saved);
}

/* Runs argv with stderr into err_path and stdout into out_path (NULL: left
 * alone); the exit status. */
static int run_quietly(char *const argv[], const char *err_path, const char *out_path) {
  fflush(NULL);
  int saved_err = redirect(2, err_path), saved_out = redirect(1, out_path);
  int status = -1;
  tp_rc rc = tp_profile_spawn(argv, NULL, &status);
  fflush(NULL);
  restore(1, saved_out);
  restore(2, saved_err);
  assert_int_equal(rc, TP_OK);
  return status;
}

static int file_has(const char *path, const char *needle) {
  static char text[1 << 16];
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(text, 1, sizeof text - 1, f); /* the files here are small */
  text[n] = '\0';
  fclose(f);
  return strstr(text, needle) != NULL;
}

/* `tpbench report --run N` prints the profile's kernel summary, and
 * `tpbench trace --config ID` exports its events, as for any trace. */
static void commands_read_profile(const char *dir, const char *db, int64_t run, int64_t config) {
  char run_arg[32], config_arg[32], out[128], err[128];
  snprintf(run_arg, sizeof run_arg, "%lld", (long long)run);
  snprintf(config_arg, sizeof config_arg, "%lld", (long long)config);
  snprintf(out, sizeof out, "%s/trace.json", dir);
  snprintf(err, sizeof err, "%s/err", dir);
  char *report[] = {TPBENCH_EXE, "report", "--db", (char *)(uintptr_t)db, "--run", run_arg, NULL};
  char *trace[] = {TPBENCH_EXE, "trace", "--db", (char *)(uintptr_t)db, "--config", config_arg,
                   "--out",     out,     NULL};
  assert_int_equal(run_quietly(report, err, out), 0);
  assert_true(file_has(out, "| ampere_bf16_gemm | gemm | 3 | 500.0 | 166.67 | 55.6 |"));
  assert_int_equal(run_quietly(trace, err, NULL), 0);
  assert_true(file_has(out, "ncclDevKernel_AllGather_RING_LL"));
  assert_true(file_has(out, "\"traceEvents\""));
  unlink(out);
  unlink(err);
}

static void test_import_summary_overlap(void **state) {
  (void)state;
  char dir[64], path[128], db[64];
  write_profile(dir, path, 1, NULL);
  tp_store *store = fresh_store(db);
  tp_profile_import_args a = import_args(dir, 0);
  tp_profile_import_result r;
  assert_int_equal(tp_profile_import(store, &a, &r), TP_OK);
  assert_true(r.run_id > 0 && r.config_id > 0);
  assert_int_equal(r.n_events, 6);
  assert_int_equal(r.n_processes, 1);
  assert_int_equal(r.empty, 0);
  assert_int_equal(r.incomplete, 0);
  int64_t cfg = 0;
  assert_int_equal(tp_profile_config_of_run(store, r.run_id, &cfg), TP_OK);
  assert_int_equal(cfg, r.config_id);

  /* the kernel summary: GEMM 3 x, 500 µs; NCCL 1 x, 400 µs */
  tp_profile_record prof;
  int found = 0;
  assert_int_equal(tp_store_get_profile(store, r.config_id, &prof, &found), TP_OK);
  assert_int_equal(found, 1);
  assert_string_equal(prof.selector, "whole process");
  assert_int_equal(prof.processes, 1);
  assert_int_equal(prof.ranks, 1);
  assert_int_equal(prof.n_kernels, 2);
  assert_string_equal(prof.kernels[0].name, "ampere_bf16_gemm");
  assert_string_equal(prof.kernels[0].category, "gemm");
  assert_int_equal(prof.kernels[0].count, 3);
  assert_int_equal(prof.kernels[0].total_ns, 500 * US);
  assert_string_equal(prof.kernels[1].category, "comm");
  assert_int_equal(prof.kernels[1].total_ns, 400 * US);
  /* one window, the whole process: device work from 0 to 850 µs, comm
   * [200,600) meets compute for 200 µs, idle where nothing ran */
  assert_int_equal(prof.n_steps, 1);
  assert_int_equal(prof.steps[0].comm_ns, 400 * US);
  assert_int_equal(prof.steps[0].overlap_ns, 200 * US);
  assert_int_equal(prof.steps[0].exposed_ns, 200 * US);
  assert_int_equal(prof.steps[0].compute_ns, 500 * US);
  assert_int_equal(prof.steps[0].end_ns - prof.steps[0].start_ns, 850 * US);
  assert_int_equal(prof.steps[0].idle_ns, 850 * US - 700 * US);
  assert_true(isnan(prof.overhead_pct));
  tp_profile_record_free(&prof);

  /* the same window as an overlap row, for trace and dashboard */
  tp_trace_overlap *ov = NULL;
  size_t n = 0;
  assert_int_equal(tp_store_trace_overlap(store, r.config_id, &ov, &n), TP_OK);
  assert_int_equal(n, 1);
  assert_int_equal(ov[0].comm_ns, 400 * US);
  assert_int_equal(ov[0].overlap_ns, 200 * US);
  assert_true(fabs(ov[0].overlap_pct - 50.0) < 1e-9);
  free(ov);

  /* stored as a trace, so `tpbench trace --config` reads it */
  tp_trace_info info;
  assert_int_equal(tp_store_trace_info(store, r.config_id, &found, &info), TP_OK);
  assert_int_equal(found, 1);
  assert_int_equal(info.n_events, 6);

  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  assert_int_equal(tp_profile_report(store, r.run_id, out), TP_OK);
  assert_int_equal(fclose(out), 0);
  assert_non_null(strstr(text, "command: python3 train.py --steps 10"));
  assert_non_null(strstr(text, "status: ok"));
  assert_non_null(strstr(text, "| 0 | -1 | process | 0.850 |"));
  assert_non_null(strstr(text, "| 0.200 | 4 |")); /* exposed ms, kernels: all 4 of the process */
  assert_non_null(strstr(text, "| ampere_bf16_gemm | gemm | 3 | 500.0 | 166.67 | 55.6 |"));
  free(text);
  tp_store_close(store);
  commands_read_profile(dir, db, r.run_id, r.config_id);
  remove_db(db);
  remove_folder(dir, path);
}

/* A command that failed keeps its events, marked incomplete (status failed). */
static void test_import_failed_command(void **state) {
  (void)state;
  char dir[64], path[128], db[64];
  write_profile(dir, path, 1, NULL);
  tp_store *store = fresh_store(db);
  tp_profile_import_args a = import_args(dir, 3);
  tp_profile_import_result r;
  assert_int_equal(tp_profile_import(store, &a, &r), TP_OK);
  assert_int_equal(r.incomplete, 1);
  assert_int_equal(r.n_events, 6);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  assert_int_equal(tp_profile_report(store, r.run_id, out), TP_OK);
  assert_int_equal(fclose(out), 0);
  assert_non_null(strstr(text, "status: failed: the command exited with status 3"));
  assert_non_null(strstr(text, "ncclDevKernel_AllGather_RING_LL"));
  free(text);
  tp_store_close(store);
  remove_db(db);
  remove_folder(dir, path);
}

/* No event file: the program never initialised CUDA; an empty run says so. */
static void test_import_empty(void **state) {
  (void)state;
  char db[64];
  tp_store *store = fresh_store(db);
  tp_profile_import_args a = import_args("/nonexistent/profile-folder", 0);
  tp_profile_import_result r;
  assert_int_equal(tp_profile_import(store, &a, &r), TP_OK);
  assert_int_equal(r.empty, 1);
  assert_int_equal(r.n_events, 0);
  assert_true(r.config_id > 0);
  tp_profile_record prof;
  int found = 0;
  assert_int_equal(tp_store_get_profile(store, r.config_id, &prof, &found), TP_OK);
  assert_int_equal(found, 1);
  assert_int_equal(prof.n_kernels + prof.n_steps, 0);
  tp_profile_record_free(&prof);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  assert_int_equal(tp_profile_report(store, r.run_id, out), TP_OK);
  assert_int_equal(fclose(out), 0);
  assert_non_null(strstr(text, "never initialised CUDA"));
  assert_non_null(strstr(text, "no kernels were recorded"));
  free(text);
  tp_store_close(store);
  remove_db(db);
}

/* One rank's process file of a training loop: steps 0..3, each an NVTX
 * range "ProfilerStep#N" of 1000 µs on the host holding a GEMM launched at
 * its start and, on rank 1, a slower GEMM; an NCCL kernel inside a nested
 * range "all_gather" that overlaps half of the GEMM. */
static void write_rank(const char *dir, int64_t pid, int rank, const char *gpu) {
  char path[128];
  snprintf(path, sizeof path, "%s/process-%lld.tpprof", dir, (long long)pid);
  tp_event ev[32];
  size_t n = 0;
  for (uint64_t s = 0; s < 4; ++s) {
    uint64_t t = s * 1000;
    tp_event step = kernel("ProfilerStep#0", TP_CAT_RANGE, t, t + 1000);
    static const char *names[] = {"ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2",
                                  "ProfilerStep#3"};
    step.name = names[s];
    step.type = TP_EV_RANGE;
    step.device = -1;
    step.stream = TP_STREAM_NONE;
    step.rank = rank;
    ev[n++] = step;
    tp_event ag = step;
    ag.name = "all_gather";
    ag.start_ns = T0 + (t + 10) * US;
    ag.end_ns = T0 + (t + 20) * US;
    ev[n++] = ag;
    tp_event g = kernel("nvjet_gemm", TP_CAT_GEMM, t + 100, t + 500 + (uint64_t)rank * 100);
    g.launch_ns = T0 + (t + 5) * US;
    g.rank = rank;
    ev[n++] = g;
    tp_event c = kernel("ncclDevKernel_AllGather_RING_LL", TP_CAT_COMM, t + 300, t + 700);
    c.launch_ns = T0 + (t + 15) * US;
    c.rank = rank;
    ev[n++] = c;
  }
  tp_profile_meta meta = {
      .pid = pid, .rank = rank, .start_ns = T0, .end_ns = T0 + 4000 * US, .complete = 1};
  snprintf(meta.gpu_name, sizeof meta.gpu_name, "%s", gpu);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(tp_profile_file_write(f, &meta, ev, n), TP_OK);
  assert_int_equal(fclose(f), 0);
}

static void remove_all(const char *dir) {
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* Processes without a launcher's rank (-1) are numbered 0, 1, ... when none
 * has one; beside ranked processes they keep -1. */
static void test_folder_ranks(void **state) {
  (void)state;
  char dir[64], path[128];
  make_folder(dir);
  write_rank(dir, 200, -1, "");
  write_rank(dir, 201, -1, "");
  tp_profile_data d;
  size_t files = 0;
  assert_int_equal(tp_profile_folder_read(dir, &d, &files), TP_OK);
  assert_int_equal(files, 2);
  assert_int_equal(d.events[0].rank, 0);
  assert_int_equal(d.events[d.n_events - 1].rank, 1);
  tp_profile_data_free(&d);
  snprintf(path, sizeof path, "%s/process-201.tpprof", dir);
  unlink(path);
  write_rank(dir, 202, 0, "NVIDIA H200"); /* torchrun's worker beside its agent */
  assert_int_equal(tp_profile_folder_read(dir, &d, &files), TP_OK);
  assert_string_equal(d.meta.gpu_name, "NVIDIA H200"); /* the agent's file came first */
  assert_int_equal(d.events[0].rank, -1);
  assert_int_equal(d.events[d.n_events - 1].rank, 0);
  tp_profile_data_free(&d);
  remove_all(dir);
}

/* Two ranks, --steps 1:3: two windows per rank, each step as long as its
 * slower rank, the all_gather range's transport, the GPU name, and the
 * overhead against a given baseline. */
static void test_import_two_ranks_steps(void **state) {
  (void)state;
  char dir[64], db[64];
  make_folder(dir);
  write_rank(dir, 100, 0, "NVIDIA H200");
  write_rank(dir, 101, 1, "NVIDIA H200");
  tp_profile_selector sel;
  assert_int_equal(tp_profile_selector_parse("1:3", NULL, &sel), TP_OK);
  tp_store *store = fresh_store(db);
  tp_profile_import_args a = import_args(dir, 0);
  a.selector = &sel;
  a.baseline_step_us = 800.0;
  a.baseline_method = "test baseline";
  tp_profile_import_result r;
  assert_int_equal(tp_profile_import(store, &a, &r), TP_OK);
  assert_int_equal(r.n_processes, 2);
  assert_int_equal(r.n_ranks, 2);
  assert_int_equal(r.n_windows, 4);
  assert_int_equal(r.incomplete, 0);
  /* host step 1000 µs against a baseline of 800 µs: +25 % */
  assert_true(fabs(r.overhead_pct - 25.0) < 1e-9);
  tp_profile_record prof;
  int found = 0;
  assert_int_equal(tp_store_get_profile(store, r.config_id, &prof, &found), TP_OK);
  assert_int_equal(found, 1);
  assert_string_equal(prof.selector, "--steps 1:3");
  assert_string_equal(prof.gpu_name, "NVIDIA H200");
  assert_int_equal(prof.n_steps, 4);
  assert_int_equal(prof.steps[0].rank, 0);
  assert_int_equal(prof.steps[0].step, 1);
  assert_int_equal(prof.steps[3].rank, 1);
  assert_int_equal(prof.steps[3].step, 2);
  /* rank 0: GEMM [100,500), NCCL [300,700): step 600 µs, 200 µs of overlap */
  assert_int_equal(prof.steps[0].end_ns - prof.steps[0].start_ns, 600 * US);
  assert_int_equal(prof.steps[0].overlap_ns, 200 * US);
  assert_int_equal(prof.steps[0].exposed_ns, 200 * US);
  /* rank 1's GEMM runs to 600: overlap 300 µs */
  assert_int_equal(prof.steps[2].overlap_ns, 300 * US);
  assert_int_equal(prof.n_schedules, 2); /* all_gather on each rank */
  assert_string_equal(prof.schedules[0].range_name, "all_gather");
  assert_string_equal(prof.schedules[0].transport, "nccl");
  assert_int_equal(prof.schedules[0].nccl_kernels, 2);
  assert_int_equal(prof.schedules[0].ranges, 2);
  assert_int_equal(prof.n_kernels, 2);
  assert_int_equal(prof.kernels[0].count, 4); /* 2 steps x 2 ranks */
  tp_profile_record_free(&prof);
  /* the result: two steps, each as long as the slower rank (600 µs) */
  sqlite3 *raw = tp_store_db(store);
  sqlite3_stmt *st = NULL;
  assert_int_equal(
      sqlite3_prepare_v2(raw, "SELECT n_samples, median_us FROM results", -1, &st, NULL),
      SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_int_equal(sqlite3_column_int(st, 0), 2);
  assert_true(fabs(sqlite3_column_double(st, 1) - 600.0) < 1e-9);
  sqlite3_finalize(st);
  assert_int_equal(sqlite3_prepare_v2(raw, "SELECT gpu_name, gpu_count FROM runs", -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "NVIDIA H200");
  assert_int_equal(sqlite3_column_int(st, 1), 2);
  sqlite3_finalize(st);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  assert_int_equal(tp_profile_report(store, r.run_id, out), TP_OK);
  assert_int_equal(fclose(out), 0);
  assert_non_null(strstr(text, "overhead: +25.0 %"));
  assert_non_null(strstr(text, "| 1 | all_gather | 2 | nccl | 2 | 0 | 0 | 0 |"));
  free(text);
  tp_store_close(store);
  tp_profile_selector_free(&sel);
  remove_db(db);
  remove_all(dir);
}

/* Steps that do not exist: the events are kept, the configuration failed
 * with the steps that do exist; the baseline's median comes from the host
 * durations of the kept steps. */
static void test_import_missing_steps(void **state) {
  (void)state;
  char dir[64], db[64];
  make_folder(dir);
  write_rank(dir, 100, 0, "");
  tp_profile_selector sel;
  assert_int_equal(tp_profile_selector_parse("50:60", NULL, &sel), TP_OK);
  tp_store *store = fresh_store(db);
  tp_profile_import_args a = import_args(dir, 0);
  a.selector = &sel;
  a.baseline_step_us = NAN;
  tp_profile_import_result r;
  assert_int_equal(tp_profile_import(store, &a, &r), TP_OK);
  assert_int_equal(r.no_windows, 1);
  assert_int_equal(r.incomplete, 1);
  assert_non_null(strstr(r.reason, "no step in 50:60"));
  assert_int_equal(r.n_events, 16);
  tp_profile_selector_free(&sel);
  double median = 0;
  size_t steps = 0;
  assert_int_equal(tp_profile_selector_parse("0:2", NULL, &sel), TP_OK);
  assert_int_equal(tp_profile_host_step_median(dir, &sel, &median, &steps), TP_OK);
  assert_int_equal(steps, 2);
  assert_true(fabs(median - 1000.0) < 1e-9);
  tp_profile_selector_free(&sel);
  tp_store_close(store);
  remove_db(db);
  remove_all(dir);
}

/* A process whose collector could not start leaves only its .error file:
 * nothing profiled, the reason stored and given back. */
static void test_import_busy(void **state) {
  (void)state;
  char dir[64], db[64], path[128];
  make_folder(dir);
  snprintf(path, sizeof path, "%s/process-77.error", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("CUPTI is busy: another profiler already subscribed\n", f);
  assert_int_equal(fclose(f), 0);
  tp_store *store = fresh_store(db);
  tp_profile_import_args a = import_args(dir, 0);
  a.baseline_step_us = NAN;
  tp_profile_import_result r;
  assert_int_equal(tp_profile_import(store, &a, &r), TP_OK);
  assert_int_equal(r.busy, 1);
  assert_int_equal(r.empty, 0);
  assert_int_equal(r.n_processes, 0);
  assert_non_null(strstr(r.reason, "CUPTI is busy"));
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  assert_int_equal(tp_profile_report(store, r.run_id, out), TP_OK);
  assert_int_equal(fclose(out), 0);
  assert_non_null(strstr(text, "status: rejected: not profiled: CUPTI is busy"));
  free(text);
  tp_store_close(store);
  remove_db(db);
  remove_all(dir);
}

/* Options are checked before anything runs: exit 2 with the reason. */
static void test_profile_bad_options(void **state) {
  (void)state;
  char dir[64], err[128];
  make_folder(dir);
  snprintf(err, sizeof err, "%s/err", dir);
  char *garbage[] = {TPBENCH_EXE, "profile", "--steps", "3:x", "--", "true", NULL};
  assert_int_equal(run_quietly(garbage, err, NULL), 2);
  assert_true(file_has(err, "--steps"));
  char *both[] = {TPBENCH_EXE, "profile", "--steps", "1:2", "--range", "x", "--", "true", NULL};
  assert_int_equal(run_quietly(both, err, NULL), 2);
  char *regex[] = {TPBENCH_EXE, "profile", "--range", "(", "--", "true", NULL};
  assert_int_equal(run_quietly(regex, err, NULL), 2);
  assert_true(file_has(err, "--range"));
  char *overhead[] = {TPBENCH_EXE, "profile", "--overhead", "--", "true", NULL};
  assert_int_equal(run_quietly(overhead, err, NULL), 2);
  assert_true(file_has(err, "--overhead compares step times"));
  remove_folder(dir, err);
}

/* Two profiled commits of the same program: compare prints their step
 * times and breakdowns side by side. */
static void test_compare_profiles(void **state) {
  (void)state;
  char dir[64], db[64], out[128], err[128];
  make_folder(dir);
  write_rank(dir, 100, 0, "NVIDIA H200");
  write_rank(dir, 101, 1, "NVIDIA H200");
  tp_profile_selector sel;
  assert_int_equal(tp_profile_selector_parse(":", NULL, &sel), TP_OK);
  tp_store *store = fresh_store(db);
  const char *commits[] = {"aaaa1111", "bbbb2222"};
  for (int i = 0; i < 2; ++i) {
    tp_profile_import_args a = import_args(dir, 0);
    a.commit = commits[i];
    a.selector = &sel;
    a.baseline_step_us = NAN;
    tp_profile_import_result r;
    assert_int_equal(tp_profile_import(store, &a, &r), TP_OK);
  }
  tp_store_close(store);
  tp_profile_selector_free(&sel);
  snprintf(out, sizeof out, "%s/compare.md", dir);
  snprintf(err, sizeof err, "%s/compare.err", dir);
  char *argv[] = {TPBENCH_EXE, "compare", "aaaa1111", "bbbb2222", "--db", db, NULL};
  int status = run_quietly(argv, err, out);
  assert_int_equal(status, 0);
  assert_true(file_has(out, "### profile"));
  /* four steps of 600 µs on both sides: no change */
  assert_true(file_has(out, "| step time | 0.600 | 0.600 | +0.0 % |"));
  assert_true(file_has(out, "| exposed communication |"));
  remove_db(db);
  remove_all(dir);
}

static int spawn(const char *script, const char *const *env) {
  char *argv[] = {"sh", "-c", (char *)(uintptr_t)script, NULL};
  int status = -1;
  assert_int_equal(tp_profile_spawn(argv, env, &status), TP_OK);
  return status;
}

/* The command's own status; 128 + N for signal N; 127 when it cannot run;
 * the injection variables reach the child. */
static void test_spawn_exit_status(void **state) {
  (void)state;
  assert_int_equal(spawn("exit 0", NULL), 0);
  assert_int_equal(spawn("exit 3", NULL), 3);
  assert_int_equal(spawn("kill -TERM $$", NULL), 128 + 15);
  const char *env[] = {"TPBENCH_PROFILE_OUT=/x/y", "CUDA_INJECTION64_PATH=/lib.so", NULL};
  assert_int_equal(
      spawn("test \"$TPBENCH_PROFILE_OUT\" = /x/y && test \"$CUDA_INJECTION64_PATH\" = /lib.so",
            env),
      0);
  char *missing[] = {"/nonexistent/tpbench-no-such-command", NULL};
  int status = -1;
  assert_int_equal(tp_profile_spawn(missing, NULL, &status), TP_OK);
  assert_int_equal(status, 127);
  char *none[] = {NULL};
  assert_int_equal(tp_profile_spawn(none, NULL, &status), TP_EUSAGE);
  assert_int_equal(tp_profile_exit_status(0x0200), 2); /* exited 2, as waitpid encodes it */
}

/* The command itself: a CUDA build runs the child, gives back its status and
 * stores an empty run (sh never initialises CUDA); a build without CUDA says
 * that profiling needs one and exits 1. */
static void test_profile_command(void **state) {
  (void)state;
  char dir[64], db[128], err[128];
  make_folder(dir);
  snprintf(db, sizeof db, "%s/p.db", dir);
  snprintf(err, sizeof err, "%s/err", dir);
  char *argv[] = {TPBENCH_EXE, "profile", "--db", db, "--", "sh", "-c", "exit 5", NULL};
  int status = run_quietly(argv, err, NULL);
#ifdef TPBENCH_PROFILE_INJECT
  assert_int_equal(status, 5);
  assert_true(file_has(err, "never initialised CUDA"));
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(db, 0, &store), TP_OK);
  int64_t run = 0, cfg = 0;
  assert_int_equal(tp_store_find_run(store, 0, NULL, &run), TP_OK);
  assert_int_equal(tp_profile_config_of_run(store, run, &cfg), TP_OK);
  assert_true(cfg > 0);
  tp_store_close(store);
  remove_db(db);
#else
  assert_int_equal(status, 1);
  assert_true(file_has(err, "profiling needs a CUDA build"));
#endif
  remove_folder(dir, err);
}

/* Writes text as the file dir/name. */
static void write_text(const char *dir, const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
}

/* The profile report of run_id, malloc'd. */
static char *report_text(tp_store *store, int64_t run_id) {
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  assert_int_equal(tp_profile_report(store, run_id, out), TP_OK);
  assert_int_equal(fclose(out), 0);
  return text;
}

/* torchrun's agent keeps rank -1 beside its workers, and a file may name
 * any int rank: `tpbench trace` (both formats) reads such a profile (the
 * trace model indexed an array by rank: -1 wrote before it, INT_MAX asked
 * for 8 GiB and overflowed). */
static void test_trace_odd_ranks(void **state) {
  (void)state;
  char dir[64], db[64], out[128], err[128], config[32];
  make_folder(dir);
  write_rank(dir, 100, -1, "");
  write_rank(dir, 101, 0, "NVIDIA H200");
  write_rank(dir, 102, 2147483647, "NVIDIA H200");
  tp_store *store = fresh_store(db);
  tp_profile_import_args a = import_args(dir, 0);
  a.baseline_step_us = NAN;
  tp_profile_import_result r;
  assert_int_equal(tp_profile_import(store, &a, &r), TP_OK);
  assert_int_equal(r.n_ranks, 3);
  tp_store_close(store);
  snprintf(config, sizeof config, "%lld", (long long)r.config_id);
  snprintf(out, sizeof out, "%s/trace.json", dir);
  snprintf(err, sizeof err, "%s/err", dir);
  char *chrome[] = {TPBENCH_EXE, "trace", "--db", db, "--config", config, "--out", out, NULL};
  assert_int_equal(run_quietly(chrome, err, NULL), 0);
  assert_true(file_has(out, "nvjet_gemm"));
  snprintf(out, sizeof out, "%s/kineto", dir);
  char *kineto[] = {TPBENCH_EXE, "trace",  "--db",  db,  "--config", config,
                    "--format",  "kineto", "--out", out, NULL};
  assert_int_equal(run_quietly(kineto, err, NULL), 0);
  snprintf(out, sizeof out, "%s/kineto/rank-1.json", dir);
  assert_true(file_has(out, "nvjet_gemm"));
  remove_db(db);
  remove_all(dir);
}

/* Names, the GPU, the label and the reason are the program's text: the
 * report and compare escape them (no HTML, no extra cell, no broken code
 * span), as every other report does. */
static void test_report_escapes_program_text(void **state) {
  (void)state;
  char dir[64], db[64], out[128], err[128];
  make_folder(dir);
  write_text(dir, "process-5.tpprof",
             "tpbench-profile 1\n"
             "meta 5 0 1000 900000 0 0 1\n"
             "gpu NVIDIA <b>H200</b>\n"
             "ev 4 6 0 1000 500000 0 0 0 -1 4294967295 0 -1 my|range <i>x</i>\n"
             "ev 0 0 0 2000 3000 0 1500 0 0 7 1 -1 nccl<script>alert(1)</script>|`x`\n");
  tp_store *store = fresh_store(db);
  const char *commits[] = {"aaaa1111", "bbbb2222"};
  int64_t run = 0;
  for (int i = 0; i < 2; ++i) {
    tp_profile_import_args a = import_args(dir, 0);
    a.commit = commits[i];
    a.label = "lab`el|<x>";
    a.command_line = "python3 <t>.py";
    a.baseline_step_us = NAN;
    tp_profile_import_result r;
    assert_int_equal(tp_profile_import(store, &a, &r), TP_OK);
    run = r.run_id;
  }
  char *text = report_text(store, run);
  tp_store_close(store);
  assert_null(raw_tag(text, "<"));
  assert_non_null(strstr(text, "command: python3 \\<t>.py"));
  assert_non_null(strstr(text, "GPU: NVIDIA \\<b>H200\\</b>"));
  assert_non_null(strstr(text, "| 0 | my\\|range \\<i>x\\</i> |"));
  assert_non_null(strstr(text, "| nccl\\<script>alert(1)\\</script>\\|\\`x\\` |"));
  free(text);
  snprintf(out, sizeof out, "%s/compare.md", dir);
  snprintf(err, sizeof err, "%s/compare.err", dir);
  char *argv[] = {TPBENCH_EXE, "compare", "aaaa1111", "bbbb2222", "--db", db, NULL};
  assert_int_equal(run_quietly(argv, err, out), 0);
  /* a label a code span cannot hold (a '|', a '<') is written as escaped text */
  assert_true(file_has(out, "### profile lab\\`el\\|\\<x>"));
  remove_db(db);
  remove_all(dir);
}

/* Two things the store's keys refused, failing the whole import after the
 * run was begun: a step marked twice from one start (ProfilerStep#1 around
 * "step 1"), and two range names that are the same in their first 127
 * bytes (one row, their counts summed). */
static void test_import_nested_steps_and_cut_names(void **state) {
  (void)state;
  char dir[64], db[64], text[2048], name[140];
  memset(name, 'x', 130);
  name[130] = '\0';
  make_folder(dir);
  snprintf(text, sizeof text,
           "tpbench-profile 1\n"
           "meta 5 0 1000 900000 0 0 1\n"
           "ev 4 6 0 1000 500000 0 0 0 -1 4294967295 0 -1 ProfilerStep#1\n"
           "ev 4 6 0 1000 400000 0 0 0 -1 4294967295 0 -1 step 1\n"
           "ev 4 6 0 1100 2000 0 0 0 -1 4294967295 0 -1 %sA\n"
           "ev 4 6 0 3000 4000 0 0 0 -1 4294967295 0 -1 %sB\n"
           "ev 0 0 0 5000 6000 0 1500 0 0 7 1 -1 ncclDevKernel_AllGather_RING_LL\n"
           "ev 0 0 0 7000 8000 0 3500 0 0 7 2 -1 ncclDevKernel_AllGather_RING_LL\n",
           name, name);
  write_text(dir, "process-5.tpprof", text);
  tp_profile_selector sel;
  assert_int_equal(tp_profile_selector_parse("1", NULL, &sel), TP_OK);
  tp_store *store = fresh_store(db);
  tp_profile_import_args a = import_args(dir, 0);
  a.selector = &sel;
  a.baseline_step_us = NAN;
  tp_profile_import_result r;
  if (tp_profile_import(store, &a, &r) != TP_OK) fail_msg("%s", tp_last_error());
  assert_int_equal(r.n_windows, 1);
  tp_profile_record prof;
  int found = 0;
  assert_int_equal(tp_store_get_profile(store, r.config_id, &prof, &found), TP_OK);
  assert_int_equal(prof.n_steps, 1);
  assert_string_equal(prof.steps[0].name, "ProfilerStep#1");
  assert_int_equal(prof.n_schedules, 1);
  assert_int_equal(prof.schedules[0].ranges, 2);
  assert_int_equal(prof.schedules[0].nccl_kernels, 2);
  assert_string_equal(prof.schedules[0].transport, "nccl");
  tp_profile_record_free(&prof);
  tp_profile_selector_free(&sel);
  tp_store_close(store);
  remove_db(db);
  remove_all(dir);
}

/* The folder is the program's to write: a FIFO named like an event file
 * is refused, not read (it blocked the import forever), a link is not
 * followed, and a binary .error file's reason is one line of text. */
static void test_folder_not_regular_files(void **state) {
  (void)state;
  char dir[64], path[160], reason[64];
  make_folder(dir);
  snprintf(path, sizeof path, "%s/process-5.tpprof", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  alarm(20); /* a blocked read fails the test instead of hanging it */
  tp_profile_data d;
  size_t files = 0;
  assert_int_equal(tp_profile_folder_read(dir, &d, &files), TP_EIO);
  assert_non_null(strstr(tp_last_message(), "not a regular file"));
  unlink(path);
  write_process(dir, path, 5, 1, NULL);
  char link[160];
  snprintf(link, sizeof link, "%s/process-6.tpprof", dir);
  assert_int_equal(symlink(path, link), 0);
  assert_int_equal(tp_profile_folder_read(dir, &d, &files), TP_EIO);
  assert_non_null(strstr(tp_last_message(), "process-6.tpprof (not a regular file)"));
  unlink(link);
  unlink(path);
  write_text(dir, "process-7.error", "\x1b[31mred\x01\tx\x7f|<b>\nsecond line\n");
  size_t n_errors = 0;
  assert_int_equal(tp_profile_folder_errors(dir, reason, sizeof reason, &n_errors), TP_OK);
  assert_int_equal(n_errors, 1);
  assert_string_equal(reason, " [31mred  x |<b>");
  snprintf(path, sizeof path, "%s/process-8.error", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  assert_int_equal(tp_profile_folder_errors(dir, reason, sizeof reason, &n_errors), TP_OK);
  assert_int_equal(n_errors, 2);
  alarm(0);
  remove_all(dir);
}

/* No event file and a command that failed: the reason says what is known
 * (127: it could not be run; 128 + N: a signal, whose SIGKILL leaves no
 * file) instead of claiming the program never used CUDA. */
static void test_import_unprofiled_reasons(void **state) {
  (void)state;
  char db[64];
  tp_store *store = fresh_store(db);
  tp_profile_import_args a = import_args("/nonexistent/profile-folder", 127);
  tp_profile_import_result r;
  assert_int_equal(tp_profile_import(store, &a, &r), TP_OK);
  assert_int_equal(r.empty, 1);
  assert_non_null(strstr(r.reason, "could not be run"));
  a.exit_status = 137;
  assert_int_equal(tp_profile_import(store, &a, &r), TP_OK);
  assert_non_null(strstr(r.reason, "killed by signal 9"));
  assert_null(strstr(r.reason, "the program never initialised CUDA"));
  a.exit_status = 5;
  assert_int_equal(tp_profile_import(store, &a, &r), TP_OK);
  assert_non_null(strstr(r.reason, "never initialised CUDA (it exited with status 5)"));
  tp_store_close(store);
  remove_db(db);
}

/* tpbench started with SIGINT ignored (a script's background job) starts
 * the command with SIGINT still ignored, as the shell would have. */
static void test_spawn_keeps_ignored_sigint(void **state) {
  (void)state;
  void (*old)(int) = signal(SIGINT, SIG_IGN);
  assert_int_equal(spawn("kill -INT $$; exit 4", NULL), 4);
  signal(SIGINT, old);
  assert_int_equal(spawn("kill -INT $$; exit 4", NULL), 128 + SIGINT);
}

/* The command line around the command: a database that cannot take the
 * profile is refused before anything runs; a user's LD_PRELOAD of any
 * length reaches the command after the collector; a command line longer
 * than the stored one ends in " ...". */
static void test_profile_command_edges(void **state) {
  (void)state;
  char dir[64], db[128], err[128], marker[128], script[256];
  make_folder(dir);
  snprintf(db, sizeof db, "%s/bad.db", dir);
  snprintf(err, sizeof err, "%s/err", dir);
  snprintf(marker, sizeof marker, "%s/ran", dir);
  write_text(dir, "bad.db", "not a database\n");
  snprintf(script, sizeof script, "touch '%s'", marker);
  char *bad[] = {TPBENCH_EXE, "profile", "--db", db, "--", "sh", "-c", script, NULL};
  assert_int_equal(run_quietly(bad, err, NULL), 1);
  assert_int_equal(access(marker, F_OK), -1); /* nothing ran */
#ifdef TPBENCH_PROFILE_INJECT
  assert_true(file_has(err, "nothing was run"));
  snprintf(db, sizeof db, "%s/p.db", dir);
  static char preload[9000], long_arg[6000];
  memset(preload, 'p', sizeof preload - 1);
  static const char prefix[] = "/nonexistent/";
  for (size_t i = 0; prefix[i]; ++i) preload[i] = prefix[i]; /* over the first 'p's, no NUL */
  memset(long_arg, 'a', sizeof long_arg - 1);
  assert_int_equal(setenv("LD_PRELOAD", preload, 1), 0);
  static const char check[] =
      "case \"$LD_PRELOAD\" in *libtpbench_inject.so:/nonexistent/ppp*ppp) exit 0;; esac; exit 9";
  char *argv[] = {TPBENCH_EXE, "profile", "--db",        db,       "--",
                  "sh",        "-c",      (char *)check, long_arg, NULL};
  int status = run_quietly(argv, err, NULL);
  unsetenv("LD_PRELOAD");
  assert_int_equal(status, 0);
  tp_store *store = NULL;
  assert_int_equal(tp_store_open(db, 0, &store), TP_OK);
  sqlite3_stmt *st = NULL;
  assert_int_equal(
      sqlite3_prepare_v2(tp_store_db(store), "SELECT command_line FROM runs", -1, &st, NULL),
      SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  const char *line = (const char *)sqlite3_column_text(st, 0);
  assert_non_null(line);
  assert_true(strlen(line) > 4 && strcmp(line + strlen(line) - 4, " ...") == 0);
  sqlite3_finalize(st);
  tp_store_close(store);
#else
  assert_true(file_has(err, "profiling needs a CUDA build"));
#endif
  remove_all(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_file_round_trip),
      cmocka_unit_test(test_file_cut_short_and_foreign),
      cmocka_unit_test(test_folder_of_processes),
      cmocka_unit_test(test_import_summary_overlap),
      cmocka_unit_test(test_import_failed_command),
      cmocka_unit_test(test_import_empty),
      cmocka_unit_test(test_folder_ranks),
      cmocka_unit_test(test_import_two_ranks_steps),
      cmocka_unit_test(test_import_missing_steps),
      cmocka_unit_test(test_import_busy),
      cmocka_unit_test(test_profile_bad_options),
      cmocka_unit_test(test_compare_profiles),
      cmocka_unit_test(test_spawn_exit_status),
      cmocka_unit_test(test_profile_command),
      cmocka_unit_test(test_trace_odd_ranks),
      cmocka_unit_test(test_report_escapes_program_text),
      cmocka_unit_test(test_import_nested_steps_and_cut_names),
      cmocka_unit_test(test_folder_not_regular_files),
      cmocka_unit_test(test_import_unprofiled_reasons),
      cmocka_unit_test(test_spawn_keeps_ignored_sigint),
      cmocka_unit_test(test_profile_command_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
