/*
 * cmd_profile.c — `tpbench profile [--db PATH] [--label TEXT] -- CMD ARGS...`:
 * runs one process with tpbench's collector injected (libtpbench_inject.so,
 * beside the tpbench binary, through CUDA_INJECTION64_PATH, and preloaded so
 * that processes ending with _exit still write their events), waits for it,
 * and stores what it recorded as a run of command "profile"
 * (report/tp_profile.h). Exits with the command's own status (127: it could
 * not be run; 128 + N: signal N killed it). A build without CUDA has no
 * injection library: it parses the options, then says so and exits 1.
 * One process for now: launchers that start several (torchrun, srun) come
 * later.
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "bench/cli/profile_spawn.h"
#include "report/tp_profile.h"
#include "tp_buildinfo.h"

typedef struct profile_args {
  const char *db;
  const char *label;
} profile_args;

/* Parses the options before "--"; *cmd_at is the index of the command after
 * it (argc when there is none). */
static tp_rc parse_args(int argc, char **argv, profile_args *a, int *cmd_at, int *help) {
  int split = 1;
  while (split < argc && strcmp(argv[split], "--") != 0) ++split;
  *cmd_at = split < argc ? split + 1 : argc;
  const tp_option options[] = {
      {"db", TP_OPT_STRING, &a->db, "PATH", "database to write (created if missing)", 0, 0, NULL},
      {"label", TP_OPT_STRING, &a->label, "TEXT", "a name for the profile (stored as its layer)", 0,
       0, NULL},
  };
  const tp_command cmd = {
      .name = "profile",
      .usage = "tpbench profile [options] -- CMD ARGS...",
      .summary = "Runs CMD (one process) with tpbench's CUPTI collector injected and stores every\n"
                 "kernel, copy, memset, synchronisation and NVTX range it ran as a run of command\n"
                 "'profile'; `tpbench report --run N` prints its kernel summary and overlap,\n"
                 "`tpbench trace --config ID` its timeline. Exits with CMD's status. Needs a\n"
                 "CUDA build. torchrun/srun jobs of several processes are not supported yet.",
      .options = options,
      .n_options = (int)(sizeof options / sizeof options[0]),
  };
  TP_TRY(tp_cli_parse(&cmd, split, argv, NULL, 0, NULL, help));
  if (!*help && *cmd_at >= argc) {
    fprintf(stderr, "tpbench profile: no command: tpbench profile [options] -- CMD ARGS...\n");
    return TP_FAIL(TP_EUSAGE, "profile: no command");
  }
  return TP_OK;
}

#ifdef TPBENCH_PROFILE_INJECT
/* The command line as typed, arguments with spaces or quotes in single quotes. */
static void join_command(int argc, char **argv, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < argc && used < cap; ++i) {
    int quote = strpbrk(argv[i], " \t'\"") != NULL || !*argv[i];
    int n = snprintf(buf + used, cap - used, "%s%s%s%s", i ? " " : "", quote ? "'" : "", argv[i],
                     quote ? "'" : "");
    if (n < 0) break;
    used += (size_t)n;
  }
}

/* The injection library beside the running tpbench binary. */
static tp_rc inject_path(char *buf, size_t cap) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return TP_FAIL(TP_EIO, "profile: cannot read /proc/self/exe");
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash) *slash = '\0';
  snprintf(buf, cap, "%s/libtpbench_inject.so", exe);
  if (access(buf, R_OK) != 0)
    return TP_FAIL(TP_EUSAGE, "profile: %s is missing (it is built beside tpbench)", buf);
  return TP_OK;
}

/* Removes the processes' event files and their folder (after a good import). */
static void remove_folder(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *ent;
  char path[PATH_MAX];
  while (d && (ent = readdir(d)) != NULL) {
    if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
    if (unlink(path) != 0) fprintf(stderr, "tpbench profile: could not remove %s\n", path);
  }
  if (d) closedir(d);
  if (rmdir(dir) != 0) fprintf(stderr, "tpbench profile: could not remove %s\n", dir);
}

/* Stores what the command left, says what became of it; the exit status. */
static int import_profile(const profile_args *a, const char *out_dir, const char *line,
                          int status) {
  char host[256];
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
  tp_profile_import_args ia = {.profile_dir = out_dir,
                               .command_line = line,
                               .label = a->label,
                               .commit = TP_BUILD_COMMIT,
                               .dirty = TP_BUILD_DIRTY,
                               .host = host,
                               .exit_status = status};
  tp_profile_import_result res;
  tp_store *store = NULL;
  tp_rc rc = tp_store_open(a->db, 1, &store);
  if (rc == TP_OK) rc = tp_profile_import(store, &ia, &res);
  tp_store_close(store);
  if (rc != TP_OK) {
    tp_print_error("profile");
    fprintf(stderr, "tpbench profile: the events are left in %s\n", out_dir);
    return status ? status : TP_EXIT_FAILURE;
  }
  if (res.empty)
    fprintf(stderr,
            "tpbench profile: the command never initialised CUDA: nothing was profiled "
            "(run %lld stored, marked empty)\n",
            (long long)res.run_id);
  else
    fprintf(stderr,
            "tpbench profile: run %lld, configuration %lld: %zu events of %zu process(es)%s\n",
            (long long)res.run_id, (long long)res.config_id, res.n_events, res.n_processes,
            res.incomplete ? " (incomplete)" : "");
  remove_folder(out_dir);
  return status;
}

static int run_profile(const profile_args *a, int argc, char **argv) {
  char lib[PATH_MAX + 32], dir[] = "/tmp/tpbench-profile-XXXXXX";
  if (inject_path(lib, sizeof lib) != TP_OK) {
    tp_print_error("profile");
    return TP_EXIT_USAGE;
  }
  if (!mkdtemp(dir)) {
    fprintf(stderr, "tpbench profile: cannot make a folder for the events (mkdtemp)\n");
    return TP_EXIT_FAILURE;
  }
  char inject_env[sizeof lib + 32], out_env[sizeof dir + 32], preload_env[2 * PATH_MAX];
  snprintf(inject_env, sizeof inject_env, "CUDA_INJECTION64_PATH=%s", lib);
  snprintf(out_env, sizeof out_env, "TPBENCH_PROFILE_OUT=%s", dir);
  /* preloaded as well, so a process that ends with _exit still writes its events */
  const char *preload = getenv("LD_PRELOAD");
  snprintf(preload_env, sizeof preload_env, "LD_PRELOAD=%s%s%s", lib,
           preload && *preload ? ":" : "", preload ? preload : "");
  const char *env[] = {inject_env, out_env, preload_env, NULL};
  char line[4096];
  join_command(argc, argv, line, sizeof line);
  int status = 0;
  if (tp_profile_spawn(argv, env, &status) != TP_OK) {
    tp_print_error("profile");
    (void)rmdir(dir);
    return TP_EXIT_FAILURE;
  }
  return import_profile(a, dir, line, status);
}
#endif

int tp_cmd_profile(int argc, char **argv) {
  profile_args args = {.db = "tpbench.db"};
  int help = 0, cmd_at = argc;
  tp_rc rc = parse_args(argc, argv, &args, &cmd_at, &help);
  if (rc != TP_OK || help) return tp_exit_for(rc);
#ifdef TPBENCH_PROFILE_INJECT
  return run_profile(&args, argc - cmd_at, argv + cmd_at);
#else
  fprintf(stderr, "tpbench profile: this build has no CUDA support: profiling needs a CUDA build "
                  "(-DTPBENCH_WITH_CUDA=ON), whose libtpbench_inject.so is injected\n");
  return TP_EXIT_FAILURE;
#endif
}
