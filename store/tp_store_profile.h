/*
 * tp_store_profile.h — the tables of schemas/005_profile.sql: what
 * `tpbench profile` found in a program (its window selection and overhead,
 * each selected step's breakdown per rank, the transport each NVTX range
 * used), written once after the profile's configuration and its events are
 * stored, and read back by the report and compare.
 */
#ifndef TP_STORE_PROFILE_H
#define TP_STORE_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"
#include "store/tp_store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One selected window of one rank (a profile_steps row). */
typedef struct tp_profile_step_row {
  int rank;
  int64_t step;
  char name[128]; /* the NVTX range, or "process" */
  uint64_t host_start_ns, host_end_ns, start_ns, end_ns;
  uint64_t comm_ns, compute_ns, sync_ns, other_ns, idle_ns, overlap_ns, exposed_ns;
  int64_t kernels;
  int empty; /* the range launched no device work */
} tp_profile_step_row;

/* How one NVTX range name's communication ran on one rank (a profile_schedules row). */
typedef struct tp_profile_schedule_row {
  int rank;
  char range_name[128];
  int64_t ranges, nccl_kernels, ce_copies, sm_copy_kernels, multicast_kernels;
  uint64_t comm_ns, gemm_ns;
  char transport[16]; /* "nccl", "copy-engine", "sm-copy", "multicast", "mixed", "none" */
} tp_profile_schedule_row;

/* One kernel name of the windows' summary (a profile_kernels row). */
typedef struct tp_profile_kernel_row {
  char name[512]; /* as CUPTI reported it; cut if longer */
  char category[16];
  int64_t count;
  uint64_t total_ns;
} tp_profile_kernel_row;

/* The profiles row and the rows below it. Reals: NaN is NULL (not measured). */
typedef struct tp_profile_record {
  char selector[160];
  int64_t processes, ranks;
  int exit_status;
  char gpu_name[128];        /* "" unknown */
  char baseline_method[160]; /* "" when no baseline run was made */
  double baseline_step_us, profiled_step_us, overhead_pct;
  tp_profile_step_row *steps; /* writing: borrowed; read back: malloc'd (tp_profile_record_free) */
  size_t n_steps;
  tp_profile_schedule_row *schedules;
  size_t n_schedules;
  tp_profile_kernel_row *kernels; /* longest total first when read back */
  size_t n_kernels;
} tp_profile_record;

/* Writes the profile of config_id (a configuration already stored) in one
 * transaction. TP_EUSAGE for NULL arguments; TP_ESQLITE (a second profile
 * for the same configuration is a constraint error). */
TP_MUST_CHECK tp_rc tp_store_put_profile(tp_store *store, int64_t config_id,
                                         const tp_profile_record *rec);

/* Reads the profile of config_id with its steps (by rank, then start),
 * schedules (by rank, then range name) and kernels (longest total first). *found 0 when the
 * configuration has none (a database before 005 has none either). TP_ESQLITE, TP_EOOM. */
TP_MUST_CHECK tp_rc tp_store_get_profile(tp_store *store, int64_t config_id, tp_profile_record *out,
                                         int *found);

/* Frees the arrays tp_store_get_profile allocated; NULL is a no-op. */
void tp_profile_record_free(tp_profile_record *rec);

#ifdef __cplusplus
}
#endif

#endif /* TP_STORE_PROFILE_H */
