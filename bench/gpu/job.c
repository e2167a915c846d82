/*
 * job.c — the parent side of a GPU command before its workers start (see
 * job.h). Nothing here touches CUDA: devices are counted in a child, since
 * a CUDA context does not survive the fork() that starts the workers.
 */
#include "bench/gpu/job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/cli/commands.h"
#include "bench/gpu/worker_group.h"
#include "bench/launch/launcher.h"
#include "collectors/tp_collector.h"
#include "store/tp_store.h"
#include "tp_buildinfo.h"

int tp_job_world(const char *cmd, int gpus, int *world, int *external) {
  tp_launch_env env;
  *world = 0;
  *external = 0;
  if (tp_launch_env_from_environment(&env, external) != TP_OK) {
    fprintf(stderr, "tpbench %s: %s\n", cmd, tp_last_error());
    return TP_EXIT_USAGE;
  }
  if (*external) {
    *world = env.world;
    return TP_EXIT_OK;
  }
  int devices = tp_count_devices_in_child();
  if (devices == 0) {
    fprintf(stderr, "tpbench %s: no CUDA device found: this command needs at least one GPU\n", cmd);
    return TP_EXIT_FAILURE;
  }
  if (gpus > devices) {
    fprintf(stderr, "tpbench %s: --gpus %d asks for more GPUs than the %d visible\n", cmd, gpus,
            devices);
    return TP_EXIT_FAILURE;
  }
  *world = gpus > 0 ? gpus : devices;
  return TP_EXIT_OK;
}

int tp_job_precheck_database(const char *cmd, const char *path) {
  if (access(path, F_OK) == 0) {
    /* An existing file must be a tpbench database this binary can write. */
    tp_store *store = NULL;
    tp_rc rc = tp_store_open(path, 0, &store);
    if (rc != TP_OK) {
      fprintf(stderr, "tpbench %s: database %s: %s\n", cmd, path, tp_last_error());
      return tp_exit_for(rc);
    }
    tp_store_close(store);
    if (access(path, W_OK) != 0) {
      fprintf(stderr, "tpbench %s: database %s is not writable: %s\n", cmd, path, strerror(errno));
      return TP_EXIT_USAGE;
    }
    return TP_EXIT_OK;
  }
  /* A new file: its folder must exist and be writable (nothing is created yet). */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == dir) dir[1] = '\0';
  else *slash = '\0';
  if (access(dir, W_OK) != 0) {
    fprintf(stderr, "tpbench %s: cannot create database %s: folder %s: %s\n", cmd, path, dir,
            strerror(errno));
    return TP_EXIT_USAGE;
  }
  return TP_EXIT_OK;
}

int tp_job_check_database(const char *cmd, const char *path) {
  tp_store *store = NULL;
  tp_rc rc = tp_store_open(path, 1, &store);
  if (rc != TP_OK) {
    fprintf(stderr, "tpbench %s: database %s: %s\n", cmd, path, tp_last_error());
    return tp_exit_for(rc);
  }
  tp_store_close(store);
  return TP_EXIT_OK;
}

/* The driver version as the kernel module reports it. The line reads
 * "NVRM version: NVIDIA UNIX [Open Kernel Module for] x86_64 ... 580.159.04
 * <date>": the version is the first word of digits and dots with a dot in it. */
static void read_driver_version(char *buf, size_t cap) {
  snprintf(buf, cap, "unknown");
  FILE *f = fopen("/proc/driver/nvidia/version", "r");
  if (!f) return;
  char line[512];
  if (fgets(line, sizeof line, f)) {
    for (char *word = strtok(line, " \t\n"); word; word = strtok(NULL, " \t\n")) {
      if (strspn(word, "0123456789.") == strlen(word) && strchr(word, '.') && word[0] != '.') {
        snprintf(buf, cap, "%s", word);
        break;
      }
    }
  }
  fclose(f);
}

tp_rc tp_job_begin_run(tp_store *store, const tp_group *group, int world,
                       const tp_job_run_desc *desc, int64_t *run_id) {
  char cuda[32], driver_api[32], nccl[32], cublas[32], driver[64], host[256], cupti[32];
  char knobs[192] = "";
  tp_versions(cuda, sizeof cuda, driver_api, sizeof driver_api, nccl, sizeof nccl, cublas,
              sizeof cublas);
  read_driver_version(driver, sizeof driver);
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
  host[sizeof host - 1] = '\0';
  tp_run_info info = {0};
  info.commit = TP_BUILD_COMMIT;
  info.dirty = TP_BUILD_DIRTY;
  info.host = host;
  info.gpu_name = group->device_name;
  info.gpu_count = world;
  info.driver_version = driver;
  info.cuda_version = cuda;
  info.nccl_version = nccl;
  info.cublas_version = cublas;
  info.command_line = desc->command_line;
  info.command = desc->command;
  info.warmup_iters = desc->warmup_iters;
  info.measure_iters = desc->measure_iters;
  info.rounds = desc->rounds;
  info.order_policy = desc->order_policy;
  info.order_seed = desc->order_seed;
  info.cupti_version = tp_collector_cupti_version(cupti, sizeof cupti) == TP_OK ? cupti : NULL;
  size_t used = 0;
  if (group->test_delay_ns > 0)
    used +=
        (size_t)snprintf(knobs, sizeof knobs, "TPBENCH_TEST_DIST_DELAY_US=%llu (every fused op)",
                         (unsigned long long)(group->test_delay_ns / 1000));
  if (group->test_withhold_rank >= 0 && used < sizeof knobs)
    snprintf(knobs + used, sizeof knobs - used, "%sTPBENCH_TEST_WITHHOLD=%d:%d (a hung collective)",
             used ? "; " : "", group->test_withhold_rank, group->test_withhold_config);
  if (knobs[0]) info.test_knobs = knobs;
  return tp_store_begin_run(store, &info, run_id);
}

char *tp_job_command_line(int argc, char **argv) {
  size_t len = strlen("tpbench") + 1;
  for (int i = 0; i < argc; ++i) len += strlen(argv[i]) + 1;
  char *line = malloc(len);
  if (!line) return NULL;
  strcpy(line, "tpbench");
  for (int i = 0; i < argc; ++i) {
    strcat(line, " ");
    strcat(line, argv[i]);
  }
  return line;
}
