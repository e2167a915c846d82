/*
 * job.h — what the GPU commands (`ops`, `run`) do in the parent process
 * before any worker starts, without touching CUDA: how many workers the job
 * has, whether the database can take the results, and the command line to
 * record. Messages start with "tpbench CMD:".
 */
#ifndef TP_BENCH_JOB_H
#define TP_BENCH_JOB_H

#include <stdint.h>

#include "bench/gpu/worker_group.h"
#include "bench/launch/host_facts.h"
#include "kernels/tp_group.h"
#include "store/tp_store.h"

/* The job's workers in *world: WORLD_SIZE under an external launcher
 * (*external = 1), else gpus or every visible GPU, counted in a child.
 * Returns the exit status (bench/cli/commands.h): TP_EXIT_OK, or after a
 * message on stderr TP_EXIT_USAGE (a malformed launcher environment) or
 * TP_EXIT_FAILURE (no GPU, fewer GPUs than asked for); TP_EXIT_USAGE too for
 * a world of more than TP_MAX_GROUP_RANKS workers (one group cannot hold them). */
TP_MUST_CHECK int tp_job_world(const char *cmd, int gpus, int *world, int *external);

/* Before any GPU is counted: an existing file must be a tpbench database
 * and writable, a new one's folder writable; creates nothing. TP_EXIT_OK,
 * or the exit status after a message on stderr. An external launcher's rank
 * other than 0 never opens the database (tp_launch_opens_database): TP_EXIT_OK
 * at once, here and in tp_job_check_database. */
TP_MUST_CHECK int tp_job_precheck_database(const char *cmd, const char *path);

/* TP_EXIT_OK when the database at path opens (created if missing) as
 * tpbench's; else the exit status (TP_EXIT_USAGE for a foreign or unusable
 * file, TP_EXIT_FAILURE otherwise), with a message. */
TP_MUST_CHECK int tp_job_check_database(const char *cmd, const char *path);

/* What a command says about its run beyond the machine. */
typedef struct tp_job_run_desc {
  const char *command; /* "ops", "run", "link" */
  const char *command_line;
  int warmup_iters, measure_iters;
  int rounds;               /* 0: not measured in rounds (link) */
  const char *order_policy; /* "rotate", "shuffle"; NULL with rounds 0 */
  int64_t order_seed;
  const char *test_knob; /* a command's own test-only knob in force, as recorded; NULL: none */
} tp_job_run_desc;

/* The system record rank 0 gathers from every rank (tp_job_gather_system). */
typedef struct tp_job_system {
  tp_host_facts *ranks; /* world entries on rank 0, in rank order; NULL elsewhere */
  int n_ranks;
  const char *launcher;
  char *topology; /* rank 0's host; NULL when neither source gave one */
  const char *topology_source;
  char *environment;
} tp_job_system;

/* Collective over the rendezvous: every rank reads its host name, GPU UUID,
 * PCI bus id (CUDA), SM clocks and power limit (nvidia-smi, when it runs) and
 * sends them to rank 0, which also reads its host's topology (`nvidia-smi
 * topo -m`, else CUDA's peer-access matrix) and the NCCL_/CUDA_/TORCH_
 * environment. A fact that cannot be read stays unknown; only the
 * rendezvous failing is an error. Free with tp_job_system_free. */
TP_MUST_CHECK tp_rc tp_job_gather_system(const tp_worker_ctx *ctx, tp_job_system *out);
void tp_job_system_free(tp_job_system *sys);

/* Records a run in store (rank 0): the build's commit, the host, the GPUs,
 * the driver (as the kernel module reports it) and library versions (CUPTI
 * too), the command, its windows, rounds and order, any test-only
 * slowdown in force (tp_group's TPBENCH_TEST_DIST_DELAY_US), and the
 * system (NULL: none recorded) with the Slurm job and array ids. */
TP_MUST_CHECK tp_rc tp_job_begin_run(tp_store *store, const tp_group *group, int world,
                                     const tp_job_run_desc *desc, const tp_job_system *system,
                                     int64_t *run_id);

/* "tpbench ARGS..." in a malloc'd string (NULL when out of memory). */
char *tp_job_command_line(int argc, char **argv);

#endif
