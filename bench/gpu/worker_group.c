/*
 * worker_group.c — joining a TP group from a worker process (worker_group.h).
 */
#include "bench/gpu/worker_group.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/tp_log.h"
#include "kernels/tp_cuda_check.h"
#include "kernels/tp_device_alloc.h"

tp_rc tp_worker_exchange(void *rdzv, const void *send, size_t bytes, void *recv) {
  return tp_rdzv_allgather((tp_rdzv *)rdzv, send, bytes, recv);
}

int tp_worker_share_one_gpu(void) {
  const char *v = getenv("TPBENCH_TEST_SHARE_GPU");
  return v && strcmp(v, "1") == 0;
}

/* Before this process's first NCCL call: a host id of the rank's own, loopback sockets. */
static void share_gpu_env(int rank) {
  char host[48];
  snprintf(host, sizeof host, "tpbench-shared-gpu-rank-%d", rank);
  setenv("NCCL_HOSTID", host, 1);
  setenv("NCCL_IB_DISABLE", "1", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
}

tp_rc tp_worker_join(const tp_launch_env *env, int timeout_ms, tp_worker_ctx *out) {
  const int rank = env->rank, world = env->world, local_rank = env->local_rank;
  memset(out, 0, sizeof *out);
  out->rank = rank;
  out->world = world;
  out->local_rank = local_rank;
  out->launcher = env->launcher;
  char tag[32];
  snprintf(tag, sizeof tag, "rank %d", rank);
  tp_log_set_tag(tag);
  TP_TRY(tp_rdzv_connect(env->master_addr, env->master_port, rank, world, timeout_ms, &out->rdzv));
  int devices = 0;
  const char *who = env->launcher ? env->launcher : "?";
  cudaError_t counted = cudaGetDeviceCount(&devices);
  if (counted != cudaSuccess)
    return TP_FAIL(TP_ENODEV,
                   "rank %d of %d (%s, local rank %d): no CUDA device can be used: "
                   "cudaGetDeviceCount: %s",
                   rank, world, who, local_rank, cudaGetErrorString(counted));
  const int shared = tp_worker_share_one_gpu();
  if (shared) share_gpu_env(rank);
  const int device = shared ? 0 : local_rank;
  if (device >= devices)
    return TP_FAIL(TP_ENODEV, "rank %d of %d (%s): local rank %d has no GPU: %d visible", rank,
                   world, who, local_rank, devices);
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0) TP_NCCL(ncclGetUniqueId(&id), NULL);
  TP_TRY(tp_rdzv_broadcast(out->rdzv, 0, &id, sizeof id));
  TP_LOGI("launch", "rank %d/%d joining on device %d%s", rank, world, device,
          shared ? " (TPBENCH_TEST_SHARE_GPU: shared)" : "");
  TP_TRY(tp_group_create(rank, world, device, &id, tp_worker_exchange, out->rdzv, &out->group));
  if (!shared) return TP_OK;
  /* every rank's context and communicator exist once all have met */
  TP_TRY(tp_rdzv_barrier(out->rdzv));
  int64_t share = 0;
  TP_TRY(tp_device_limit_to_share(world, &share));
  TP_LOGI("launch", "rank %d/%d: device 0 shared by %d ranks: this rank's share %.0f MiB", rank,
          world, world, (double)share / 1048576.0);
  return TP_OK;
}

void tp_worker_leave(tp_worker_ctx *ctx) {
  tp_group_destroy(ctx->group);
  ctx->group = NULL;
  if (ctx->rdzv) tp_rdzv_close(ctx->rdzv);
  ctx->rdzv = NULL;
}

int tp_worker_run(const tp_launch_env *env, const char *cmd, int trace, tp_worker_body body,
                  void *arg) {
  tp_worker_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  tp_collector *collector = NULL;
  tp_rc rc = TP_OK;
  /* The collector (and NVTX's injection) must be in place before any NVTX
   * call and before the GPU work it is to see. */
  if (trace) rc = tp_collector_start(env->rank, &collector);
  if (rc == TP_OK) rc = tp_worker_join(env, TP_WORKER_RENDEZVOUS_TIMEOUT_MS, &ctx);
  if (rc == TP_OK) rc = body(&ctx, collector, arg);
  if (rc != TP_OK)
    fprintf(stderr, "tpbench %s: rank %d: %s: %s\n", cmd, env->rank, tp_rc_name(rc),
            tp_last_error());
  tp_worker_leave(&ctx);
  if (collector) tp_collector_stop(collector);
  return rc == TP_OK ? TP_EXIT_OK : TP_EXIT_FAILURE;
}
