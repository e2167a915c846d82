/*
 * gpu_harness.h — runs a test body on every rank of a real TP group.
 *
 * The test process never touches CUDA itself: it counts devices in a forked
 * child, then forks one worker per rank; each worker joins a loopback
 * rendezvous, builds its tp_group (NCCL, symmetric heap, cuBLASLt) and runs
 * the body. The test passes when every worker exits 0.
 */
#ifndef GPU_HARNESS_H
#define GPU_HARNESS_H

#include "bench/launch/rendezvous.h"
#include "kernels/tp_group.h"

enum {
  GPU_TEST_SKIP = 77, /* ctest's SKIP_RETURN_CODE: nothing could run here */
  GPU_TEST_USAGE = 2, /* a bad command line */
  GPU_MAX_GROUP = 16, /* ranks gpu_run_group forks at most (its table of workers) */
  /* TPBENCH_TEST_SHARE_GPU=1: the rank slots offered on device 0 (TP 8, the largest degree a
   * case runs at, on a machine of one GPU) */
  GPU_SHARED_RANK_SLOTS = 8,
  GPU_MAX_DEGREE = 8 /* the largest TP degree of a per-degree case */
};

typedef int (*gpu_body_fn)(tp_group *group, tp_rdzv *rdzv, void *ctx);

/* Rank slots: CUDA devices, counted in a child process (0 when none or no
 * driver); with TPBENCH_TEST_SHARE_GPU=1 and a device, GPU_SHARED_RANK_SLOTS
 * (or the device count if larger): every rank on device 0. */
int gpu_device_count(void);

/* TPBENCH_TEST_SHARE_GPU=1 (a test knob, never the benchmark's): every
 * worker of gpu_run_group takes device 0, each with an NCCL host id of its
 * own so NCCL accepts ranks that share a GPU (it carries their traffic over
 * its socket transport on loopback). The code paths of TP > 1 (NCCL
 * collectives, the symmetric heap over CUDA IPC, the fused pushes) then run
 * on a machine of one GPU; their timings mean nothing. */
int gpu_share_one_device(void);

/* With TPBENCH_TEST_SHARE_GPU=1: prints that `what` needs NCCL symmetric
 * windows, which ranks made separate NCCL hosts never have, and returns 1
 * (the caller skips); 0 otherwise. */
int gpu_shared_lacks_windows(const char *what);

/* Forks `world` workers (1 to GPU_MAX_GROUP) running body; returns 0 when all
 * of them returned 0 (1 for a world out of range, said on stderr). */
int gpu_run_group(int world, gpu_body_fn body, void *ctx);

/* Device 0's free and total memory, read in a child process (the caller
 * stays free of CUDA); 0 on success. */
int gpu_device_memory(size_t *free_bytes, size_t *total_bytes);

/* ---- cases per TP degree ------------------------------------------------------------------
 *
 * A test function run at every degree (1, 2, 4, 8) in its range becomes one
 * cmocka case per degree, named NAME/tpN, its degree the case's state
 * (gpu_case_degree). The command line `--tp LIST` (e.g. `--tp 4`, `--tp
 * 2,4,8`) selects degrees; without it every degree runs. A case whose degree
 * exceeds the rank slots (gpu_device_count) is reported skipped with the
 * reason, never passed; with TPBENCH_TEST_SHARE_GPU=1 each case first prints
 * device 0's free and total memory and the share of each of its ranks. */
typedef void (*gpu_case_fn)(void **state); /* cmocka's CMUnitTestFunction */

typedef struct gpu_tp_test {
  const char *name; /* the cases are NAME/tp1, NAME/tp2, ... */
  gpu_case_fn fn;
  int min_degree, max_degree; /* the degrees it runs at: 1 (TP 1 only) to 8 */
} gpu_tp_test;

/* The degree of the case whose state this is. */
int gpu_case_degree(void *const *state);

/* Prints "NAME: why: skipped" and reports the running case skipped (cmocka's skip(), which
 * does not return), counted with the cases skipped for want of rank slots: a run whose every
 * case was skipped exits GPU_TEST_SKIP, never as passed. */
void gpu_skip_case(void *const *state, const char *why);

/* The degrees a command line selects: `--tp LIST` (each 1, 2, 4 or 8; several
 * comma-separated) or, without it, all of them. Writes a 0/1 flag per degree
 * into selected[GPU_MAX_DEGREE + 1]; other arguments are left to the caller
 * (*tp_given says whether --tp was there). 0, or GPU_TEST_USAGE with the
 * reason on stderr. */
int gpu_parse_degrees(int argc, char **argv, int selected[GPU_MAX_DEGREE + 1], int *tp_given);

/* main of a per-degree test: counts the rank slots (GPU_TEST_SKIP without a
 * device), parses --tp, prints the slots, runs the selected cases of tests as
 * cmocka group `group` and returns the exit status: cmocka's count of failed
 * cases, GPU_TEST_SKIP when every selected case was skipped (or none was
 * selected), GPU_TEST_USAGE on a bad command line. */
int gpu_run_tp_tests(const char *group, const gpu_tp_test *tests, size_t n_tests, int argc,
                     char **argv);

/* An all-gather over the rendezvous, shaped as tp_exchange_fn. */
tp_rc gpu_exchange(void *ctx, const void *send, size_t bytes, void *recv);

/* Host-side helpers for references. */
uint16_t gpu_float_to_bf16(float v);
float gpu_bf16_to_float(uint16_t v);
/* Deterministic uniform values in [-scale, scale), rounded to dt. */
void gpu_fill_host(tp_dtype dt, void *buf, size_t count, uint64_t seed, float scale);
double gpu_host_value(tp_dtype dt, const void *buf, size_t index);

/* The first column of the first row sql gives on the database at db_path, opened read-only;
 * -1 (the error printed) when it cannot be read. */
int64_t gpu_query_int(const char *db_path, const char *sql);

#endif
