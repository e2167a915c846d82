/*
 * job.c — the parent side of a GPU command before its workers start (see
 * job.h). Nothing here touches CUDA: devices are counted in a child, since
 * a CUDA context does not survive the fork() that starts the workers.
 */
#include "job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../store/tp_store.h"
#include "../launcher.h"
#include "worker_group.h"

enum { EXIT_USAGE = 2 };

int tp_job_world(const char *cmd, int gpus, int *external) {
  tp_launch_env env;
  *external = 0;
  if (tp_launch_env_from_environment(&env, external) != TP_OK) {
    fprintf(stderr, "tpbench %s: %s\n", cmd, tp_last_error());
    return -EXIT_USAGE;
  }
  if (*external) return env.world;
  int devices = tp_count_devices_in_child();
  if (devices == 0) {
    fprintf(stderr, "tpbench %s: no CUDA device found: this command needs at least one GPU\n", cmd);
    return -1;
  }
  if (gpus > devices) {
    fprintf(stderr, "tpbench %s: --gpus %d asks for more GPUs than the %d visible\n", cmd, gpus,
            devices);
    return -1;
  }
  return gpus > 0 ? gpus : devices;
}

int tp_job_precheck_database(const char *cmd, const char *path) {
  if (access(path, F_OK) == 0) {
    /* An existing file must be a tpbench database this binary can write. */
    tp_store *store = NULL;
    tp_rc rc = tp_store_open(path, 0, &store);
    if (rc != TP_OK) {
      fprintf(stderr, "tpbench %s: database %s: %s\n", cmd, path, tp_last_error());
      return rc == TP_EFOREIGN || rc == TP_EIO || rc == TP_EUSAGE ? EXIT_USAGE : 1;
    }
    tp_store_close(store);
    if (access(path, W_OK) != 0) {
      fprintf(stderr, "tpbench %s: database %s is not writable: %s\n", cmd, path, strerror(errno));
      return EXIT_USAGE;
    }
    return 0;
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
    return EXIT_USAGE;
  }
  return 0;
}

int tp_job_check_database(const char *cmd, const char *path) {
  tp_store *store = NULL;
  tp_rc rc = tp_store_open(path, 1, &store);
  if (rc != TP_OK) {
    fprintf(stderr, "tpbench %s: database %s: %s\n", cmd, path, tp_last_error());
    return rc == TP_EFOREIGN || rc == TP_EIO || rc == TP_EUSAGE ? EXIT_USAGE : 1;
  }
  tp_store_close(store);
  return 0;
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
