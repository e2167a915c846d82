/*
 * gpu_harness.c — fork-per-rank runner for GPU tests (see gpu_harness.h).
 */
#include "tests/gpu/gpu_harness.h"

#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/tp_log.h"

int gpu_device_count(void) {
  const int devices = tp_count_devices_in_child();
  /* shared: two rank slots on device 0 (gpu_harness.h) */
  return gpu_share_one_device() && devices == 1 ? 2 : devices;
}

tp_rc gpu_exchange(void *ctx, const void *send, size_t bytes, void *recv) {
  return tp_rdzv_allgather((tp_rdzv *)ctx, send, bytes, recv);
}

static int worker(int rank, int world, int port, gpu_body_fn body, void *ctx) {
  char tag[32];
  snprintf(tag, sizeof tag, "rank %d", rank);
  tp_log_set_tag(tag);
  tp_rdzv *rdzv = NULL;
  if (tp_rdzv_connect("127.0.0.1", port, rank, world, 60000, &rdzv) != TP_OK) {
    fprintf(stderr, "rank %d: rendezvous: %s\n", rank, tp_last_error());
    return 1;
  }
  ncclUniqueId id;
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "rank 0: ncclGetUniqueId failed\n");
    return 1;
  }
  if (tp_rdzv_broadcast(rdzv, 0, &id, sizeof id) != TP_OK) {
    fprintf(stderr, "rank %d: broadcast: %s\n", rank, tp_last_error());
    return 1;
  }
  tp_group *group = NULL;
  const int device = gpu_share_one_device() ? 0 : rank;
  if (tp_group_create(rank, world, device, &id, gpu_exchange, rdzv, &group) != TP_OK) {
    fprintf(stderr, "rank %d: group: %s\n", rank, tp_last_error());
    return 1;
  }
  int rc = body(group, rdzv, ctx);
  tp_group_destroy(group);
  tp_rdzv_close(rdzv);
  return rc;
}

static int free_port(void) {
  int port = 0;
  if (tp_find_free_port(&port) != TP_OK) return 29500 + (int)(getpid() % 1000);
  return port;
}

int gpu_share_one_device(void) {
  const char *v = getenv("TPBENCH_TEST_SHARE_GPU");
  return v && strcmp(v, "1") == 0;
}

int gpu_shared_lacks_windows(const char *what) {
  if (!gpu_share_one_device()) return 0;
  printf("%s: NCCL symmetric windows need the ranks inside one NCCL host, and "
         "TPBENCH_TEST_SHARE_GPU makes each rank a host of its own: skipped\n",
         what);
  return 1;
}

/* A worker sharing device 0: NCCL refuses two ranks of one host on one GPU,
 * so each rank names a host of its own, reached over loopback sockets. */
static void share_device_env(int rank) {
  char host[48];
  snprintf(host, sizeof host, "tpbench-shared-gpu-rank-%d", rank);
  setenv("NCCL_HOSTID", host, 1);
  setenv("NCCL_IB_DISABLE", "1", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
}

int gpu_run_group(int world, gpu_body_fn body, void *ctx) {
  int port = free_port();
  /* The ranks inherit one fresh job secret, as tpbench's launcher hands it. */
  tp_rdzv_secret secret;
  if (tp_rdzv_secret_generate(&secret) != TP_OK) {
    fprintf(stderr, "job secret: %s\n", tp_last_error());
    return 1;
  }
  tp_rdzv_set_job_secret(&secret);
  pid_t pids[16];
  fflush(NULL);
  for (int r = 0; r < world; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      setenv("NCCL_NVLS_ENABLE", "0", 1);
      setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
      setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
      if (gpu_share_one_device()) share_device_env(r);
      int rc = worker(r, world, port, body, ctx);
      fflush(NULL);
      _exit(rc);
    }
  }
  int failed = 0;
  for (int done = 0; done < world; ++done) {
    int status = 0;
    pid_t pid = wait(&status);
    if (pid < 0) break;
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && !failed) {
      failed = 1;
      fprintf(stderr, "gpu test: a worker failed (%s %d); stopping the others\n",
              WIFEXITED(status) ? "exit status" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      for (int r = 0; r < world; ++r)
        if (pids[r] != pid) kill(pids[r], SIGTERM);
    }
  }
  return failed;
}

uint16_t gpu_float_to_bf16(float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)((bits + rounding) >> 16);
}

float gpu_bf16_to_float(uint16_t v) {
  uint32_t bits = (uint32_t)v << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

void gpu_fill_host(tp_dtype dt, void *buf, size_t count, uint64_t seed, float scale) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < count; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    float u = (float)(state >> 40) / 16777216.0f;
    float v = (2.0f * u - 1.0f) * scale;
    if (dt == TP_BF16) ((uint16_t *)buf)[i] = gpu_float_to_bf16(v);
    else ((float *)buf)[i] = v;
  }
}

double gpu_host_value(tp_dtype dt, const void *buf, size_t index) {
  if (dt == TP_BF16) return gpu_bf16_to_float(((const uint16_t *)buf)[index]);
  return ((const float *)buf)[index];
}
