/*
 * tp_store_profile.c — writes and reads the profile tables of
 * schemas/005_profile.sql (see tp_store_profile.h).
 */
#include "store/tp_store_profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/tp_array.h"
#include "store/tp_store_internal.h"

static int bind_text(sqlite3_stmt *st, int col, const char *text) {
  return text && *text ? sqlite3_bind_text(st, col, text, -1, SQLITE_TRANSIENT)
                       : sqlite3_bind_null(st, col);
}

static tp_rc put_header(tp_store *s, int64_t config_id, const tp_profile_record *r) {
  sqlite3_stmt *st = NULL;
  TP_TRY(tp_store_prepare(
      s,
      "INSERT INTO profiles (config_id, selector, processes, ranks, windows, "
      "exit_status, gpu_name, baseline_method, baseline_step_us, profiled_step_us, "
      "overhead_pct) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      "the profile row", &st));
  int b = sqlite3_bind_int64(st, 1, config_id);
  b = b ? b : sqlite3_bind_text(st, 2, r->selector, -1, SQLITE_TRANSIENT);
  b = b ? b : sqlite3_bind_int64(st, 3, r->processes);
  b = b ? b : sqlite3_bind_int64(st, 4, r->ranks);
  b = b ? b : sqlite3_bind_int64(st, 5, (int64_t)r->n_steps);
  b = b ? b : sqlite3_bind_int(st, 6, r->exit_status);
  b = b ? b : bind_text(st, 7, r->gpu_name);
  b = b ? b : bind_text(st, 8, r->baseline_method);
  b = b ? b : tp_store_bind_real_or_null(st, 9, r->baseline_step_us);
  b = b ? b : tp_store_bind_real_or_null(st, 10, r->profiled_step_us);
  b = b ? b : tp_store_bind_real_or_null(st, 11, r->overhead_pct);
  tp_rc rc = tp_store_step_done(s, st, b, "inserting the profile row");
  sqlite3_finalize(st);
  return rc;
}

static tp_rc put_steps(tp_store *s, int64_t config_id, const tp_profile_record *r) {
  sqlite3_stmt *st = NULL;
  TP_TRY(tp_store_prepare(
      s,
      "INSERT INTO profile_steps (config_id, rank, step, name, host_start_ns, "
      "host_end_ns, start_ns, end_ns, comm_ns, compute_ns, sync_ns, other_ns, idle_ns, "
      "overlap_ns, exposed_ns, kernels, empty) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      "a profile step", &st));
  tp_rc rc = TP_OK;
  for (size_t i = 0; rc == TP_OK && i < r->n_steps; ++i) {
    const tp_profile_step_row *p = &r->steps[i];
    const uint64_t ns[] = {p->host_start_ns, p->host_end_ns, p->start_ns,  p->end_ns,
                           p->comm_ns,       p->compute_ns,  p->sync_ns,   p->other_ns,
                           p->idle_ns,       p->overlap_ns,  p->exposed_ns};
    int b = sqlite3_bind_int64(st, 1, config_id);
    b = b ? b : sqlite3_bind_int(st, 2, p->rank);
    b = b ? b : sqlite3_bind_int64(st, 3, p->step);
    b = b ? b : sqlite3_bind_text(st, 4, p->name, -1, SQLITE_TRANSIENT);
    for (int k = 0; k < (int)(sizeof ns / sizeof ns[0]) && !b; ++k)
      b = sqlite3_bind_int64(st, 5 + k, (int64_t)ns[k]);
    b = b ? b : sqlite3_bind_int64(st, 16, p->kernels);
    b = b ? b : sqlite3_bind_int(st, 17, p->empty ? 1 : 0);
    rc = tp_store_step_done(s, st, b, "inserting a profile step");
  }
  sqlite3_finalize(st);
  return rc;
}

static tp_rc put_schedules(tp_store *s, int64_t config_id, const tp_profile_record *r) {
  sqlite3_stmt *st = NULL;
  TP_TRY(tp_store_prepare(
      s,
      "INSERT INTO profile_schedules (config_id, rank, range_name, ranges, "
      "nccl_kernels, ce_copies, sm_copy_kernels, multicast_kernels, comm_ns, gemm_ns, "
      "transport) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      "a profile schedule", &st));
  tp_rc rc = TP_OK;
  for (size_t i = 0; rc == TP_OK && i < r->n_schedules; ++i) {
    const tp_profile_schedule_row *p = &r->schedules[i];
    int b = sqlite3_bind_int64(st, 1, config_id);
    b = b ? b : sqlite3_bind_int(st, 2, p->rank);
    b = b ? b : sqlite3_bind_text(st, 3, p->range_name, -1, SQLITE_TRANSIENT);
    b = b ? b : sqlite3_bind_int64(st, 4, p->ranges);
    b = b ? b : sqlite3_bind_int64(st, 5, p->nccl_kernels);
    b = b ? b : sqlite3_bind_int64(st, 6, p->ce_copies);
    b = b ? b : sqlite3_bind_int64(st, 7, p->sm_copy_kernels);
    b = b ? b : sqlite3_bind_int64(st, 8, p->multicast_kernels);
    b = b ? b : sqlite3_bind_int64(st, 9, (int64_t)p->comm_ns);
    b = b ? b : sqlite3_bind_int64(st, 10, (int64_t)p->gemm_ns);
    b = b ? b : sqlite3_bind_text(st, 11, p->transport, -1, SQLITE_TRANSIENT);
    rc = tp_store_step_done(s, st, b, "inserting a profile schedule");
  }
  sqlite3_finalize(st);
  return rc;
}

static tp_rc put_kernels(tp_store *s, int64_t config_id, const tp_profile_record *r) {
  sqlite3_stmt *st = NULL;
  TP_TRY(
      tp_store_prepare(s,
                       "INSERT INTO profile_kernels (config_id, name, category, count, total_ns) "
                       "VALUES (?, ?, ?, ?, ?)",
                       "a profile kernel", &st));
  tp_rc rc = TP_OK;
  for (size_t i = 0; rc == TP_OK && i < r->n_kernels; ++i) {
    const tp_profile_kernel_row *k = &r->kernels[i];
    int b = sqlite3_bind_int64(st, 1, config_id);
    b = b ? b : sqlite3_bind_text(st, 2, k->name, -1, SQLITE_TRANSIENT);
    b = b ? b : sqlite3_bind_text(st, 3, k->category, -1, SQLITE_TRANSIENT);
    b = b ? b : sqlite3_bind_int64(st, 4, k->count);
    b = b ? b : sqlite3_bind_int64(st, 5, (int64_t)k->total_ns);
    rc = tp_store_step_done(s, st, b, "inserting a profile kernel");
  }
  sqlite3_finalize(st);
  return rc;
}

tp_rc tp_store_put_profile(tp_store *store, int64_t config_id, const tp_profile_record *rec) {
  if (!store || !rec || (rec->n_steps && !rec->steps) || (rec->n_schedules && !rec->schedules) ||
      (rec->n_kernels && !rec->kernels))
    return TP_FAIL(TP_EUSAGE, "tp_store_put_profile: NULL argument");
  TP_TRY(tp_store_exec(store, "BEGIN IMMEDIATE", "starting the profile's transaction"));
  tp_rc rc = put_header(store, config_id, rec);
  if (rc == TP_OK) rc = put_steps(store, config_id, rec);
  if (rc == TP_OK) rc = put_schedules(store, config_id, rec);
  if (rc == TP_OK) rc = put_kernels(store, config_id, rec);
  if (rc == TP_OK) rc = tp_store_exec(store, "COMMIT", "committing the profile");
  if (rc != TP_OK) tp_store_rollback(store);
  return rc;
}

/* ---- reading ------------------------------------------------------------------ */

static void copy_text(char *dst, size_t cap, sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static double real_or_nan(sqlite3_stmt *st, int col) {
  return sqlite3_column_type(st, col) == SQLITE_NULL ? NAN : sqlite3_column_double(st, col);
}

static tp_rc get_header(tp_store *s, int64_t config_id, tp_profile_record *r, int *found) {
  sqlite3_stmt *st = NULL;
  TP_TRY(
      tp_store_prepare(s,
                       "SELECT selector, processes, ranks, exit_status, gpu_name, baseline_method, "
                       "baseline_step_us, profiled_step_us, overhead_pct FROM profiles "
                       "WHERE config_id = ?",
                       "the profile lookup", &st));
  tp_rc rc = TP_OK;
  int step = sqlite3_bind_int64(st, 1, config_id) == SQLITE_OK ? sqlite3_step(st) : SQLITE_ERROR;
  if (step == SQLITE_ROW) {
    *found = 1;
    copy_text(r->selector, sizeof r->selector, st, 0);
    r->processes = sqlite3_column_int64(st, 1);
    r->ranks = sqlite3_column_int64(st, 2);
    r->exit_status = sqlite3_column_int(st, 3);
    copy_text(r->gpu_name, sizeof r->gpu_name, st, 4);
    copy_text(r->baseline_method, sizeof r->baseline_method, st, 5);
    r->baseline_step_us = real_or_nan(st, 6);
    r->profiled_step_us = real_or_nan(st, 7);
    r->overhead_pct = real_or_nan(st, 8);
  } else if (step != SQLITE_DONE) {
    rc = TP_STORE_SQL_FAIL(s, "reading the profile of configuration %lld", (long long)config_id);
  }
  sqlite3_finalize(st);
  return rc;
}

static void read_step(sqlite3_stmt *st, tp_profile_step_row *p) {
  p->rank = sqlite3_column_int(st, 0);
  p->step = sqlite3_column_int64(st, 1);
  copy_text(p->name, sizeof p->name, st, 2);
  uint64_t *ns[] = {&p->host_start_ns, &p->host_end_ns, &p->start_ns,  &p->end_ns,
                    &p->comm_ns,       &p->compute_ns,  &p->sync_ns,   &p->other_ns,
                    &p->idle_ns,       &p->overlap_ns,  &p->exposed_ns};
  for (int k = 0; k < (int)(sizeof ns / sizeof ns[0]); ++k)
    *ns[k] = (uint64_t)sqlite3_column_int64(st, 3 + k);
  p->kernels = sqlite3_column_int64(st, 14);
  p->empty = sqlite3_column_int(st, 15);
}

static void read_schedule(sqlite3_stmt *st, tp_profile_schedule_row *p) {
  p->rank = sqlite3_column_int(st, 0);
  copy_text(p->range_name, sizeof p->range_name, st, 1);
  p->ranges = sqlite3_column_int64(st, 2);
  p->nccl_kernels = sqlite3_column_int64(st, 3);
  p->ce_copies = sqlite3_column_int64(st, 4);
  p->sm_copy_kernels = sqlite3_column_int64(st, 5);
  p->multicast_kernels = sqlite3_column_int64(st, 6);
  p->comm_ns = (uint64_t)sqlite3_column_int64(st, 7);
  p->gemm_ns = (uint64_t)sqlite3_column_int64(st, 8);
  copy_text(p->transport, sizeof p->transport, st, 9);
}

static void read_kernel(sqlite3_stmt *st, tp_profile_kernel_row *k) {
  copy_text(k->name, sizeof k->name, st, 0);
  copy_text(k->category, sizeof k->category, st, 1);
  k->count = sqlite3_column_int64(st, 2);
  k->total_ns = (uint64_t)sqlite3_column_int64(st, 3);
}

/* Every row of sql (bound to config_id) read by `read` into a grown array of
 * rows of `size` bytes at *items; *n counts them. `what` names them in errors. */
static tp_rc read_rows(tp_store *s, int64_t config_id, const char *sql, const char *what,
                       void **items, size_t *n, size_t size, void (*read)(sqlite3_stmt *, void *)) {
  sqlite3_stmt *st = NULL;
  TP_TRY(tp_store_prepare(s, sql, what, &st));
  size_t cap = 0;
  tp_rc rc = TP_OK;
  int step = sqlite3_bind_int64(st, 1, config_id) == SQLITE_OK ? SQLITE_OK : SQLITE_ERROR;
  while (rc == TP_OK && step == SQLITE_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    char *grown = tp_grow_array(*items, &cap, *n, size);
    if (!grown) rc = TP_FAIL(TP_EOOM, "store: out of memory reading %s", what);
    else {
      *items = grown;
      read(st, grown + size * (*n)++);
      step = SQLITE_OK;
    }
  }
  if (rc == TP_OK && step != SQLITE_DONE)
    rc = TP_STORE_SQL_FAIL(s, "reading %s of configuration %lld", what, (long long)config_id);
  sqlite3_finalize(st);
  return rc;
}

static void read_step_row(sqlite3_stmt *st, void *row) { read_step(st, row); }
static void read_schedule_row(sqlite3_stmt *st, void *row) { read_schedule(st, row); }
static void read_kernel_row(sqlite3_stmt *st, void *row) { read_kernel(st, row); }

static tp_rc get_rows(tp_store *s, int64_t config_id, tp_profile_record *r) {
  TP_TRY(read_rows(s, config_id,
                   "SELECT rank, step, name, host_start_ns, host_end_ns, start_ns, end_ns, "
                   "comm_ns, compute_ns, sync_ns, other_ns, idle_ns, overlap_ns, exposed_ns, "
                   "kernels, empty FROM profile_steps WHERE config_id = ? "
                   "ORDER BY rank, start_ns, step",
                   "the profile steps", (void **)&r->steps, &r->n_steps, sizeof *r->steps,
                   read_step_row));
  TP_TRY(read_rows(s, config_id,
                   "SELECT rank, range_name, ranges, nccl_kernels, ce_copies, sm_copy_kernels, "
                   "multicast_kernels, comm_ns, gemm_ns, transport FROM profile_schedules "
                   "WHERE config_id = ? ORDER BY rank, range_name",
                   "the profile schedules", (void **)&r->schedules, &r->n_schedules,
                   sizeof *r->schedules, read_schedule_row));
  return read_rows(s, config_id,
                   "SELECT name, category, count, total_ns FROM profile_kernels "
                   "WHERE config_id = ? ORDER BY total_ns DESC, name",
                   "the profile kernels", (void **)&r->kernels, &r->n_kernels, sizeof *r->kernels,
                   read_kernel_row);
}

tp_rc tp_store_get_profile(tp_store *store, int64_t config_id, tp_profile_record *out, int *found) {
  if (!store || !out || !found) return TP_FAIL(TP_EUSAGE, "tp_store_get_profile: NULL argument");
  memset(out, 0, sizeof *out);
  *found = 0;
  if (tp_store_version(store) < 5) return TP_OK;
  tp_rc rc = get_header(store, config_id, out, found);
  if (rc == TP_OK && *found) rc = get_rows(store, config_id, out);
  if (rc != TP_OK) tp_profile_record_free(out);
  return rc;
}

void tp_profile_record_free(tp_profile_record *rec) {
  if (!rec) return;
  free(rec->steps);
  free(rec->schedules);
  free(rec->kernels);
  rec->steps = NULL;
  rec->schedules = NULL;
  rec->kernels = NULL;
  rec->n_steps = rec->n_schedules = rec->n_kernels = 0;
}
