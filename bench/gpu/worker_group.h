/*
 * worker_group.h — how one worker process joins its TP group: the TCP
 * rendezvous, the NCCL unique id from rank 0, then the GPU-side group
 * (kernels/tp_group.h) on the device LOCAL_RANK names.
 */
#ifndef TP_WORKER_GROUP_H
#define TP_WORKER_GROUP_H

#include "bench/launch/launcher.h"
#include "bench/launch/rendezvous.h"
#include "collectors/tp_collector.h"
#include "kernels/tp_group.h"

typedef struct tp_worker_ctx {
  int rank, world, local_rank;
  const char *launcher; /* who started this worker (tp_launch_env.launcher) */
  tp_rdzv *rdzv;
  tp_group *group;
} tp_worker_ctx;

/* How long a worker waits at the rendezvous for the others. */
enum { TP_WORKER_RENDEZVOUS_TIMEOUT_MS = 120000 };

/* Joins the group env describes: rendezvous at its master address and port,
 * NCCL id broadcast from rank 0, group creation on the device local_rank
 * names. TP_ENODEV when that device does not exist (or no CUDA device can be
 * used: the message names the rank, the world and the launcher); errors of
 * the steps. */
TP_MUST_CHECK tp_rc tp_worker_join(const tp_launch_env *env, int timeout_ms, tp_worker_ctx *out);
void tp_worker_leave(tp_worker_ctx *ctx);

/* A worker's share of the job once it is in its group; collector is NULL
 * when the job traces nothing. */
typedef tp_rc (*tp_worker_body)(tp_worker_ctx *ctx, tp_collector *collector, void *arg);

/* One worker of `tpbench CMD` from start to end: the collector started when
 * trace is set, the group joined, body(ctx, collector, arg), the group left
 * and the collector stopped. A failure is printed on stderr as "tpbench CMD:
 * rank R: CODE: message". Returns the worker's exit status, TP_EXIT_OK or
 * TP_EXIT_FAILURE. */
int tp_worker_run(const tp_launch_env *env, const char *cmd, int trace, tp_worker_body body,
                  void *arg);

/* An all-gather over the rendezvous, shaped as tp_exchange_fn. */
TP_MUST_CHECK tp_rc tp_worker_exchange(void *rdzv, const void *send, size_t bytes, void *recv);

/* TPBENCH_TEST_SHARE_GPU=1, a test knob: every rank of the job on device 0,
 * each naming an NCCL host of its own (NCCL refuses two ranks of one host on
 * one GPU and then carries their traffic over loopback sockets), so the TP >
 * 1 code paths run on a machine of one GPU. Recorded with the run as a test
 * knob: its timings mean nothing. */
int tp_worker_share_one_gpu(void);

#endif
