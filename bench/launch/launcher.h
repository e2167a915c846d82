/*
 * launcher.h — one worker process per GPU: started by tpbench itself, or
 * joined from an external launcher (torchrun, srun, mpirun).
 *
 * External: this process is one rank of a job someone else started when a
 * launcher's variables say so; tp_launch then runs the worker function once,
 * here, as that rank. Three launchers are read, in this order of precedence
 * (the first whose rank or size variable is set is used, the others are
 * ignored):
 *
 *   torchrun  RANK, WORLD_SIZE, LOCAL_RANK (LOCAL_WORLD_SIZE), MASTER_ADDR,
 *             MASTER_PORT. First because torchrun runs inside srun or
 *             mpirun, and its variables describe its own workers.
 *   Open MPI  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK (_LOCAL_SIZE); the
 *             master is MASTER_ADDR (mpirun -x MASTER_ADDR=...), or loopback
 *             when every rank is on one host; the port MASTER_PORT or 29500.
 *             Before Slurm because mpirun runs inside Slurm allocations,
 *             whose variables its processes inherit.
 *   Slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, in a task srun
 *             started (SLURM_STEP_ID set: a batch script's own SLURM_PROCID
 *             and SLURM_NTASKS are not a job's ranks, and there tpbench
 *             starts its own workers, as on any host); the master is
 *             MASTER_ADDR, else the first host of SLURM_STEP_NODELIST,
 *             SLURM_NODELIST or SLURM_JOB_NODELIST (hostlist.h); the port
 *             MASTER_PORT, else TP_LAUNCH_SLURM_PORT_BASE + SLURM_JOB_ID mod
 *             TP_LAUNCH_SLURM_PORT_SPAN (array tasks on one host differ).
 *
 * The local rank (the GPU to use on this host) is never guessed across
 * hosts: LOCAL_RANK may be left out only when the job is on one host
 * (WORLD_SIZE 1, or LOCAL_WORLD_SIZE equal to WORLD_SIZE); the others'
 * local ids are required. Every rank also needs the job's secret:
 * TPBENCH_JOB_SECRET (hex) or TPBENCH_JOB_SECRET_FILE (a file only its owner
 * can read). Without one the process refuses to start, saying how to set it.
 *
 * Own workers: otherwise tp_launch picks a free port and fork()s the workers.
 * The parent only supervises and must never touch CUDA (a CUDA context does
 * not survive fork()); each child gets RANK, WORLD_SIZE, LOCAL_RANK,
 * MASTER_ADDR=127.0.0.1 and MASTER_PORT in its environment and a fresh
 * random job secret (tp_rdzv_set_job_secret: inherited through fork, never
 * written to the environment or a file; the rendezvous listens on loopback
 * only, TPBENCH_RDZV_BIND is cleared), dies with the
 * parent (PR_SET_PDEATHSIG), tags its log lines with its rank and exits with
 * the worker function's return value. When a worker fails (non-zero exit or a
 * signal) the parent prints one line, stops the others (SIGTERM, then SIGKILL
 * after a grace period) and returns the failing worker's status. SIGINT and
 * SIGTERM sent to the parent are forwarded to the workers (SIGKILL follows
 * after the grace period); one the parent ignores, as a shell's background
 * job ignores SIGINT, stays ignored.
 *
 * In every process tpbench starts, and in an externally started one, NVLink
 * multicast stays off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
 * NVSHMEM_DISABLE_NVLS=1 are set before the worker function runs.
 */
#ifndef TP_LAUNCHER_H
#define TP_LAUNCHER_H

#include <stddef.h>

#include "bench/launch/rendezvous.h"
#include "common/tp_error.h"

/* Who this worker is and where the job's rendezvous lives. */
typedef struct tp_launch_env {
  int rank;
  int world;
  int local_rank; /* the GPU index on this host */
  char master_addr[64];
  int master_port;
  int external;          /* 1: started by an external launcher, 0: forked by tpbench */
  const char *launcher;  /* "torchrun", "Open MPI", "Slurm", "tpbench" (forked); static */
  tp_rdzv_secret secret; /* the job's, shared by every rank */
} tp_launch_env;

/* A worker: returns its process exit status (0 success; 1..255 failure). */
typedef int (*tp_worker_fn)(const tp_launch_env *env, void *ctx);

/* Rendezvous ports when no MASTER_PORT is given (launcher comment above). */
enum {
  TP_LAUNCH_DEFAULT_PORT = 29500,
  TP_LAUNCH_SLURM_PORT_BASE = 20000,
  TP_LAUNCH_SLURM_PORT_SPAN = 10000
};

/* Exit status the launcher uses for a malformed external environment. */
#define TP_LAUNCH_USAGE_STATUS 2

/* Grace period between SIGTERM and SIGKILL when stopping workers. */
#define TP_LAUNCH_KILL_GRACE_MS 5000

/*
 * Runs fn as every rank of a job and returns the job's exit status:
 *  - external launcher (a launcher's rank and size set, see above): fn's
 *    return value, run in this process; n_workers is ignored (the job's
 *    size is the launcher's). A missing or malformed variable (only one of
 *    a launcher's rank and size set, the rank outside [0, size), a local
 *    rank missing or out of range, no master address, a port outside
 *    1..65535, no job secret or a bad one, ...) prints why to stderr and
 *    returns TP_LAUNCH_USAGE_STATUS. The secret is installed
 *    (tp_rdzv_set_job_secret) before fn runs.
 *  - otherwise n_workers (>= 1) forked workers: 0 if all exited 0; else the
 *    first failing worker's exit status, or 128 + signal number if it was
 *    killed (the shell's convention); 128 + SIGINT/SIGTERM when the parent was
 *    interrupted; 1 if the workers could not be started.
 * Call it before anything in this process touches CUDA. Not thread-safe: it
 * changes the signal mask of the calling thread while it waits.
 */
TP_MUST_CHECK int tp_launch(int n_workers, tp_worker_fn fn, void *ctx);

/* Reads the external launcher's environment, the job secret included, into
 * *env: TP_OK and *present = 1 if a launcher's rank and size are both set
 * (the first in the order of precedence above), TP_OK and *present = 0 if no
 * launcher's are, TP_EUSAGE (with the reason) if the chosen launcher's are
 * half set, malformed or contradict each other, or no valid secret is given. */
TP_MUST_CHECK tp_rc tp_launch_env_from_environment(tp_launch_env *env, int *present);

/* Whether this process may open the database: 1 unless it is an external
 * launcher's rank other than 0 (only rank 0 writes; the others send what
 * they measure over the rendezvous). A malformed launcher environment gives
 * 1: the command's own check of it reports the usage error. */
int tp_launch_opens_database(void);

/* Sets NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
 * NVSHMEM_DISABLE_NVLS=1 in this process's environment (overriding). */
void tp_launch_disable_multicast(void);

/*
 * Forks a child that runs fn(ctx) and exits with its return value, waits for
 * it and stores its status in *child_status: the exit status, or 128 + the
 * signal number if it was killed. For work that must not run in the calling
 * process, such as probing CUDA devices while the parent stays CUDA-free.
 * The child dies with the parent. TP_EIO if fork or wait failed.
 */
TP_MUST_CHECK tp_rc tp_run_in_child(int (*fn)(void *ctx), void *ctx, int *child_status);

/*
 * As tp_run_in_child, and the child may hand bytes back: fn writes up to
 * out_cap bytes to out (its own copy) and their count to *out_len; after it
 * returns they reach the caller's out and *out_len (0 if the child wrote
 * nothing or died). For a probe that reports more than a number.
 */
TP_MUST_CHECK tp_rc tp_run_in_child_output(int (*fn)(void *ctx, void *out, size_t out_cap,
                                                     size_t *out_len),
                                           void *ctx, void *out, size_t out_cap, size_t *out_len,
                                           int *child_status);

#endif /* TP_LAUNCHER_H */
