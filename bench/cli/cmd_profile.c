/*
 * cmd_profile.c — `tpbench profile [--db PATH] [--steps A:B | --range REGEX]
 * [--overhead] [--label TEXT] -- CMD ARGS...`: runs the command with
 * tpbench's collector injected (libtpbench_inject.so, beside the tpbench
 * binary, through CUDA_INJECTION64_PATH, and preloaded so that processes
 * ending with _exit still write their events). Every process the command
 * starts inherits the variables, so a torchrun or srun job is profiled
 * rank by rank: each process writes its own event file (its rank from
 * RANK, SLURM_PROCID or OMPI_COMM_WORLD_RANK), and the files are merged
 * into one run of command "profile" when the command ends
 * (report/tp_profile.h). --overhead first runs the command once recording
 * NVTX ranges only, for the step time without device recording. Exits
 * with the command's own status (127: it could not be run; 128 + N: signal
 * N killed it); 1 when the command succeeded but nothing could be
 * profiled (CUPTI busy) or the windows were not found; 1, running nothing,
 * when the database cannot be opened. A build without
 * CUDA has no injection library: it parses the options, then says so and
 * exits 1.
 */
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/cli/cli.h"
#include "bench/cli/commands.h"
#include "bench/cli/profile_spawn.h"
#include "collectors/tp_profile_analysis.h"
#include "report/tp_profile.h"
#include "tp_buildinfo.h"

typedef struct profile_args {
  const char *db;
  const char *label;
  const char *steps, *range;
  int overhead;
  tp_profile_selector selector; /* parsed from steps and range */
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
      {"steps", TP_OPT_STRING, &a->steps, "A:B",
       "keep the program's steps A <= N < B (NVTX ranges ProfilerStep#N, step N)", 0, 0, NULL},
      {"range", TP_OPT_STRING, &a->range, "REGEX",
       "keep every NVTX range whose name matches (POSIX extended regex)", 0, 0, NULL},
      {"overhead", TP_OPT_FLAG, &a->overhead, NULL,
       "run the command twice: first recording NVTX ranges only, for the profiler's cost on the "
       "step time (needs --steps or --range)",
       0, 0, NULL},
  };
  const tp_command cmd = {
      .name = "profile",
      .usage = "tpbench profile [options] -- CMD ARGS...",
      .summary = "Runs CMD (and every process it starts: torchrun, srun) with tpbench's CUPTI\n"
                 "collector injected and stores every kernel, copy, memset, synchronisation and\n"
                 "NVTX range as a run of command 'profile', with each selected step's breakdown\n"
                 "per rank, the transport each NVTX range's communication used and the kernel\n"
                 "summary; `tpbench report --run N` prints them, `tpbench trace --config ID` the\n"
                 "timeline. Exits with CMD's status. Needs a CUDA build.",
      .options = options,
      .n_options = (int)(sizeof options / sizeof options[0]),
  };
  TP_TRY(tp_cli_parse(&cmd, split, argv, NULL, 0, NULL, help));
  if (*help) return TP_OK;
  if (*cmd_at >= argc) {
    fprintf(stderr, "tpbench profile: no command: tpbench profile [options] -- CMD ARGS...\n");
    return TP_FAIL(TP_EUSAGE, "profile: no command");
  }
  if (tp_profile_selector_parse(a->steps, a->range, &a->selector) != TP_OK) {
    tp_print_error("profile");
    return TP_EUSAGE;
  }
  if (a->overhead && a->selector.mode == TP_SELECT_PROCESS) {
    fprintf(stderr, "tpbench profile: --overhead compares step times: give --steps A:B or "
                    "--range REGEX to say which ranges are the steps\n");
    return TP_FAIL(TP_EUSAGE, "profile: --overhead without steps");
  }
  return TP_OK;
}

#ifdef TPBENCH_PROFILE_INJECT
#include "collectors/tp_collector.h"
#endif

#ifdef TPBENCH_PROFILE_INJECT
/* The command line as typed, arguments with spaces or quotes in single
 * quotes; one that does not fit ends in " ..." so it does not read whole. */
static void join_command(int argc, char **argv, char *buf, size_t cap) {
  static const char more[] = " ...";
  size_t used = 0, room = cap - sizeof more; /* the mark always fits */
  buf[0] = '\0';
  for (int i = 0; i < argc; ++i) {
    int quote = strpbrk(argv[i], " \t'\"") != NULL || !*argv[i];
    int n = snprintf(buf + used, room - used, "%s%s%s%s", i ? " " : "", quote ? "'" : "", argv[i],
                     quote ? "'" : "");
    if (n < 0 || (size_t)n >= room - used) {
      memcpy(buf + used, more, sizeof more); /* used < room: the last whole argument */
      return;
    }
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
static int import_profile(const profile_args *a, const char *out_dir, const char *line, int status,
                          double baseline_us, const char *baseline_method) {
  char host[256];
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
  tp_profile_import_args ia = {.profile_dir = out_dir,
                               .command_line = line,
                               .label = a->label,
                               .commit = TP_BUILD_COMMIT,
                               .dirty = TP_BUILD_DIRTY,
                               .host = host,
                               .exit_status = status,
                               .selector = &a->selector,
                               .baseline_step_us = baseline_us,
                               .baseline_method = baseline_method};
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
  remove_folder(out_dir);
  if (res.empty) {
    fprintf(stderr, "tpbench profile: %s (run %lld stored, marked empty)\n", res.reason,
            (long long)res.run_id);
    return status;
  }
  if (res.busy && res.n_processes == 0) {
    fprintf(stderr, "tpbench profile: %s (run %lld stored, marked not profiled)\n", res.reason,
            (long long)res.run_id);
    return status ? status : TP_EXIT_FAILURE;
  }
  fprintf(stderr,
          "tpbench profile: run %lld, configuration %lld: %zu events of %zu process(es), %zu "
          "rank(s), %zu window(s)%s\n",
          (long long)res.run_id, (long long)res.config_id, res.n_events, res.n_processes,
          res.n_ranks, res.n_windows, res.incomplete ? " (incomplete)" : "");
  if (res.reason[0]) fprintf(stderr, "tpbench profile: %s\n", res.reason);
  if (res.overhead_pct == res.overhead_pct)
    fprintf(stderr, "tpbench profile: overhead on the median step: %+.1f %%\n", res.overhead_pct);
  fprintf(stderr, "tpbench profile: `tpbench report --db %s --run %lld` shows it\n", a->db,
          (long long)res.run_id);
  if (status == 0 && (res.busy || res.no_windows)) return TP_EXIT_FAILURE;
  return status;
}

/* Runs the command once with the library injected, its events into `dir`
 * (made here); mode "ranges" records NVTX ranges only. */
static tp_rc spawn_injected(const char *lib, const char *mode, char **argv, char *dir,
                            int *status) {
  if (!mkdtemp(dir))
    return TP_FAIL(TP_EIO, "profile: cannot make a folder for the events (mkdtemp)");
  char inject_env[PATH_MAX + 64], out_env[PATH_MAX + 64];
  char nvtx_env[PATH_MAX + 64], mode_env[64], cupti[PATH_MAX];
  snprintf(inject_env, sizeof inject_env, "CUDA_INJECTION64_PATH=%s", lib);
  snprintf(out_env, sizeof out_env, "TPBENCH_PROFILE_OUT=%s", dir);
  snprintf(mode_env, sizeof mode_env, "TPBENCH_PROFILE_MODE=%s", mode);
  /* preloaded as well, so a process that ends with _exit still writes its
   * events; the user's own preloads follow, whatever their length */
  const char *preload = getenv("LD_PRELOAD");
  size_t preload_len = sizeof "LD_PRELOAD=:" + strlen(lib) + (preload ? strlen(preload) : 0);
  char *preload_env = malloc(preload_len);
  if (!preload_env) {
    (void)rmdir(dir);
    return TP_FAIL(TP_EOOM, "profile: out of memory");
  }
  snprintf(preload_env, preload_len, "LD_PRELOAD=%s%s%s", lib, preload && *preload ? ":" : "",
           preload ? preload : "");
  /* NVTX finds its tool at a module's first call, which in a Python program
   * may come before CUDA starts and the collector could set the variable */
  const char *nvtx = getenv("NVTX_INJECTION64_PATH");
  int set_nvtx = (!nvtx || !*nvtx) && tp_collector_cupti_path(cupti, sizeof cupti) == TP_OK;
  snprintf(nvtx_env, sizeof nvtx_env, "NVTX_INJECTION64_PATH=%s", set_nvtx ? cupti : "");
  const char *env[] = {inject_env, out_env, preload_env, mode_env, set_nvtx ? nvtx_env : NULL,
                       NULL};
  tp_rc rc = tp_profile_spawn(argv, env, status);
  free(preload_env);
  if (rc != TP_OK) (void)rmdir(dir);
  return rc;
}

/* The baseline of --overhead: the command with NVTX ranges recorded only;
 * its median host step time, or NaN (said why) when it cannot be had. */
static double baseline_step(const profile_args *a, const char *lib, char **argv) {
  char dir[] = "/tmp/tpbench-profile-XXXXXX";
  int status = 0;
  fprintf(stderr, "tpbench profile: --overhead: the baseline run (NVTX ranges only)\n");
  if (spawn_injected(lib, "ranges", argv, dir, &status) != TP_OK) {
    tp_print_error("profile");
    return NAN;
  }
  double median = NAN;
  size_t steps = 0;
  if (status != 0)
    fprintf(stderr, "tpbench profile: the baseline run exited with status %d: no overhead\n",
            status);
  else if (tp_profile_host_step_median(dir, &a->selector, &median, &steps) != TP_OK)
    tp_print_error("profile");
  else
    fprintf(stderr, "tpbench profile: baseline: median step %.3f ms over %zu step(s)\n",
            median / 1e3, steps);
  remove_folder(dir);
  return status == 0 ? median : NAN;
}

/* Opens (creating or migrating) the database before the command runs: a
 * database that cannot take the profile is found now, not after a long
 * job whose events could then only be left in a folder. */
static tp_rc check_database(const char *db) {
  tp_store *store = NULL;
  tp_rc rc = tp_store_open(db, 1, &store);
  tp_store_close(store);
  return rc;
}

static int run_profile(const profile_args *a, int argc, char **argv) {
  char lib[PATH_MAX + 32], dir[] = "/tmp/tpbench-profile-XXXXXX";
  if (inject_path(lib, sizeof lib) != TP_OK) {
    tp_print_error("profile");
    return TP_EXIT_USAGE;
  }
  if (check_database(a->db) != TP_OK) {
    tp_print_error("profile");
    fprintf(stderr, "tpbench profile: nothing was run\n");
    return TP_EXIT_FAILURE;
  }
  char line[4096];
  join_command(argc, argv, line, sizeof line);
  double baseline = a->overhead ? baseline_step(a, lib, argv) : NAN;
  const char *method =
      a->overhead ? "the same command run just before with NVTX ranges only recorded (no device "
                    "activity, no API records); step = the host duration of the step range"
                  : NULL;
  int status = 0;
  if (spawn_injected(lib, "full", argv, dir, &status) != TP_OK) {
    tp_print_error("profile");
    return TP_EXIT_FAILURE;
  }
  return import_profile(a, dir, line, status, baseline, method);
}
#endif

int tp_cmd_profile(int argc, char **argv) {
  profile_args args = {.db = "tpbench.db"};
  int help = 0, cmd_at = argc;
  tp_rc rc = parse_args(argc, argv, &args, &cmd_at, &help);
  if (rc != TP_OK || help) {
    tp_profile_selector_free(&args.selector);
    return tp_exit_for(rc);
  }
#ifdef TPBENCH_PROFILE_INJECT
  int status = run_profile(&args, argc - cmd_at, argv + cmd_at);
  tp_profile_selector_free(&args.selector);
  return status;
#else
  tp_profile_selector_free(&args.selector);
  fprintf(stderr, "tpbench profile: this build has no CUDA support: profiling needs a CUDA build "
                  "(-DTPBENCH_WITH_CUDA=ON), whose libtpbench_inject.so is injected\n");
  return TP_EXIT_FAILURE;
#endif
}
