/*
 * job.c — the parent side of a GPU command before its workers start, and
 * the run's record its rank 0 writes (see job.h). The parent side touches no
 * CUDA: devices are counted in a child, since a CUDA context does not
 * survive the fork() that starts the workers; the system record is gathered
 * in the workers, over the rendezvous.
 */
#include "bench/gpu/job.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/cli/commands.h"
#include "bench/gpu/worker_group.h"
#include "bench/launch/launcher.h"
#include "collectors/tp_collector.h"
#include "common/tp_log.h"
#include "kernels/tp_device_alloc.h"
#include "store/tp_store.h"
#include "tp_buildinfo.h"

/* A job's world is one group (kernels/tp_group.h), which holds at most TP_MAX_GROUP_RANKS
 * ranks: a larger job could not form it, every worker would fail there (or wait at the
 * rendezvous for peers that give up). Refused before any worker starts. */
static int check_world(const char *cmd, int world) {
  char what[48], reason[256];
  snprintf(what, sizeof what, "a job of %d workers", world);
  if (!tp_group_size_rejection(what, world, reason, sizeof reason)) return TP_EXIT_OK;
  fprintf(stderr, "tpbench %s: %s; start at most %d (--gpus, or the launcher's task count)\n", cmd,
          reason, TP_MAX_GROUP_RANKS);
  return TP_EXIT_USAGE;
}

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
    return check_world(cmd, *world);
  }
  int devices = tp_count_devices_in_child();
  if (devices == 0) {
    fprintf(stderr, "tpbench %s: no CUDA device found: this command needs at least one GPU\n", cmd);
    return TP_EXIT_FAILURE;
  }
  if (gpus > devices && !tp_worker_share_one_gpu()) {
    fprintf(stderr, "tpbench %s: --gpus %d asks for more GPUs than the %d visible\n", cmd, gpus,
            devices);
    return TP_EXIT_FAILURE;
  }
  *world = gpus > 0 ? gpus : devices;
  return check_world(cmd, *world);
}

int tp_job_precheck_database(const char *cmd, const char *path) {
  if (!tp_launch_opens_database()) return TP_EXIT_OK;
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
  if (!tp_launch_opens_database()) return TP_EXIT_OK;
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

/* ---- the system record ------------------------------------------------------------- */

enum { TOPOLOGY_MAX = 64 * 1024 };

/* A command's whole output (at most cap - 1 bytes) in a malloc'd string;
 * NULL when it cannot run, fails or says nothing. */
static char *command_output(const char *command, size_t cap) {
  /* fixed command lines (nvidia-smi), the one argument a PCI bus id from CUDA */
  FILE *p = popen(command, "r"); /* NOLINT(cert-env33-c) */
  if (!p) return NULL;
  char *text = malloc(cap);
  size_t got = 0;
  if (text) {
    size_t n;
    while (got < cap - 1 && (n = fread(text + got, 1, cap - 1 - got, p)) > 0) got += n;
    text[got] = '\0';
  }
  char drain[256];
  while (fread(drain, 1, sizeof drain, p) > 0) {}
  int status = pclose(p);
  if (text && (status != 0 || got == 0)) {
    free(text);
    text = NULL;
  }
  return text;
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi writes it. */
static void format_uuid(const unsigned char b[16], char *out, size_t cap) {
  snprintf(out, cap, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
           b[14], b[15]);
}

/* This rank's facts: CUDA for the GPU's identity, nvidia-smi for its clocks
 * and power limit. The GPU is the group's device, not local_rank's: ranks
 * sharing one GPU (TPBENCH_TEST_SHARE_GPU) all run on device 0. */
static void local_facts(const tp_worker_ctx *ctx, tp_host_facts *f) {
  memset(f, 0, sizeof *f);
  f->rank = ctx->rank;
  f->local_rank = ctx->local_rank;
  if (gethostname(f->host, sizeof f->host) != 0) snprintf(f->host, sizeof f->host, "unknown");
  f->host[sizeof f->host - 1] = '\0';
  const int device = ctx->group ? ctx->group->device : ctx->local_rank;
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
    format_uuid((const unsigned char *)prop.uuid.bytes, f->gpu_uuid, sizeof f->gpu_uuid);
  if (cudaDeviceGetPCIBusId(f->pci_bus_id, sizeof f->pci_bus_id, device) != cudaSuccess)
    f->pci_bus_id[0] = '\0';
  for (char *c = f->pci_bus_id; *c; c++)
    if (*c >= 'A' && *c <= 'F') *c = (char)(*c - 'A' + 'a');
  (void)cudaGetLastError();
  if (!f->pci_bus_id[0]) return;
  char command[192];
  snprintf(command, sizeof command,
           "nvidia-smi --query-gpu=uuid,pci.bus_id,clocks.sm,clocks.max.sm,power.limit "
           "--format=csv,noheader,nounits -i %s 2>/dev/null",
           f->pci_bus_id);
  char *line = command_output(command, 512);
  if (line && tp_host_facts_parse_smi(line, f) != TP_OK)
    TP_LOGW("launch", "nvidia-smi's query not read: %s", tp_last_error());
  free(line);
}

/* CUDA's peer-access matrix of the visible GPUs, as text. */
static char *peer_matrix(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    (void)cudaGetLastError();
    return NULL;
  }
  const size_t cap = (size_t)(n + 1) * (size_t)(n + 1) * 8 + 64;
  char *text = malloc(cap);
  if (!text) return NULL;
  size_t used = 0;
  used += (size_t)snprintf(text + used, cap - used, "     ");
  for (int j = 0; j < n; j++) used += (size_t)snprintf(text + used, cap - used, " GPU%-3d", j);
  used += (size_t)snprintf(text + used, cap - used, "\n");
  for (int i = 0; i < n; i++) {
    used += (size_t)snprintf(text + used, cap - used, "GPU%-3d", i);
    for (int j = 0; j < n; j++) {
      int can = 0;
      if (i != j && cudaDeviceCanAccessPeer(&can, i, j) != cudaSuccess) can = -1;
      used += (size_t)snprintf(text + used, cap - used, " %-6s",
                               i == j     ? "X"
                               : can > 0  ? "P2P"
                               : can == 0 ? "-"
                                          : "?");
    }
    used += (size_t)snprintf(text + used, cap - used, "\n");
  }
  (void)cudaGetLastError();
  return text;
}

tp_rc tp_job_gather_system(const tp_worker_ctx *ctx, tp_job_system *out) {
  memset(out, 0, sizeof *out);
  tp_host_facts mine;
  local_facts(ctx, &mine);
  unsigned char packed[TP_HOST_FACTS_WIRE];
  tp_host_facts_pack(&mine, packed);
  unsigned char *all = malloc((size_t)TP_HOST_FACTS_WIRE * (size_t)ctx->world);
  if (!all) return TP_FAIL(TP_EOOM, "no host memory for the ranks' host facts");
  tp_rc rc = tp_rdzv_allgather(ctx->rdzv, packed, sizeof packed, all);
  if (rc == TP_OK && ctx->rank == 0) {
    out->ranks = calloc((size_t)ctx->world, sizeof *out->ranks);
    if (!out->ranks) rc = TP_FAIL(TP_EOOM, "no host memory for the ranks' host facts");
    for (int r = 0; rc == TP_OK && r < ctx->world; r++) {
      rc = tp_host_facts_unpack(all + (size_t)r * TP_HOST_FACTS_WIRE, TP_HOST_FACTS_WIRE,
                                &out->ranks[r]);
      if (rc == TP_OK && out->ranks[r].rank != r)
        rc = TP_FAIL(TP_EIO, "host facts: rank %d sent rank %d's", r, out->ranks[r].rank);
    }
    out->n_ranks = ctx->world;
    out->launcher = ctx->launcher;
    out->topology = command_output("nvidia-smi topo -m 2>/dev/null", TOPOLOGY_MAX);
    out->topology_source = "nvidia-smi topo -m";
    if (!out->topology) {
      out->topology = peer_matrix();
      out->topology_source = out->topology ? "cuda peer access" : NULL;
    }
    out->environment = tp_host_facts_environment(environ);
  }
  free(all);
  if (rc != TP_OK) tp_job_system_free(out);
  return rc;
}

void tp_job_system_free(tp_job_system *sys) {
  if (!sys) return;
  free(sys->ranks);
  free(sys->topology);
  free(sys->environment);
  memset(sys, 0, sizeof *sys);
}

static const char *env_or_null(const char *name) {
  const char *v = getenv(name);
  return v && v[0] ? v : NULL;
}

static tp_rc record_system(tp_store *store, int64_t run_id, const tp_job_system *sys) {
  tp_rank_host *ranks = calloc(sys->n_ranks > 0 ? (size_t)sys->n_ranks : 1, sizeof *ranks);
  if (!ranks) return TP_FAIL(TP_EOOM, "no host memory for the system record");
  for (int r = 0; r < sys->n_ranks; r++) {
    const tp_host_facts *f = &sys->ranks[r];
    ranks[r] = (tp_rank_host){f->rank,
                              f->local_rank,
                              f->host,
                              f->gpu_uuid,
                              f->pci_bus_id,
                              f->sm_clock_mhz,
                              f->max_sm_clock_mhz,
                              f->power_limit_mw / 1000.0};
  }
  tp_run_system rec = {sys->launcher,
                       env_or_null("SLURM_JOB_ID"),
                       env_or_null("SLURM_ARRAY_JOB_ID"),
                       env_or_null("SLURM_ARRAY_TASK_ID"),
                       sys->topology,
                       sys->topology_source,
                       sys->environment,
                       ranks,
                       sys->n_ranks};
  tp_rc rc = tp_store_put_system(store, run_id, &rec);
  free(ranks);
  return rc;
}

tp_rc tp_job_begin_run(tp_store *store, const tp_group *group, int world,
                       const tp_job_run_desc *desc, const tp_job_system *system, int64_t *run_id) {
  char cuda[32], driver_api[32], nccl[32], cublas[32], driver[64], host[256], cupti[32];
  char knobs[512] = "";
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
  /* ranks sharing one GPU (a test knob) run on one card, whatever their number */
  info.gpu_count = tp_worker_share_one_gpu() ? 1 : world;
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
        (size_t)snprintf(knobs, sizeof knobs,
                         "TPBENCH_TEST_DIST_DELAY_US=%llu (every fused op; at TP 1, where nothing "
                         "fuses, every stock op)",
                         (unsigned long long)(group->test_delay_ns / 1000));
  if (group->test_withhold_rank >= 0 && used < sizeof knobs)
    used += (size_t)snprintf(knobs + used, sizeof knobs - used,
                             "%sTPBENCH_TEST_WITHHOLD=%d:%d (a hung collective)", used ? "; " : "",
                             group->test_withhold_rank, group->test_withhold_config);
  if (group->test_fail_alloc.rank >= 0 && used < sizeof knobs)
    used += (size_t)snprintf(knobs + used, sizeof knobs - used,
                             "%s" TP_FAIL_ALLOC_ENV "=%d:%llu (one rank's window and workspace "
                             "allocations fail)",
                             used ? "; " : "", group->test_fail_alloc.rank,
                             (unsigned long long)group->test_fail_alloc.min_bytes);
  if (tp_worker_share_one_gpu() && used < sizeof knobs)
    used += (size_t)snprintf(knobs + used, sizeof knobs - used,
                             "%sTPBENCH_TEST_SHARE_GPU=1 (%d ranks on device 0, %.0f MiB each, "
                             "NCCL over loopback sockets: the timings mean nothing)",
                             used ? "; " : "", world, (double)tp_device_limit() / 1048576.0);
  if (desc->test_knob && used < sizeof knobs)
    snprintf(knobs + used, sizeof knobs - used, "%s%s", used ? "; " : "", desc->test_knob);
  if (knobs[0]) info.test_knobs = knobs;
  TP_TRY(tp_store_begin_run(store, &info, run_id));
  return system ? record_system(store, *run_id, system) : TP_OK;
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
