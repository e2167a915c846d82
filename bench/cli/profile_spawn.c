/*
 * profile_spawn.c — fork/exec/wait of the command `tpbench profile` runs
 * (profile_spawn.h).
 */
#include "bench/cli/profile_spawn.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { EXIT_NOT_FOUND = 127, EXIT_SIGNAL_BASE = 128 };

int tp_profile_exit_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return EXIT_SIGNAL_BASE + WTERMSIG(wait_status);
  return 1; /* stopped or continued: waitpid without WUNTRACED does not report these */
}

/* In the child: set the variables and exec; only returns by _exit. The
 * signals tpbench ignores while it waits are given back as they were before
 * (a command started with SIGINT ignored, in a script's background, keeps
 * it ignored); a handler does not survive exec, so anything else is default. */
static void exec_child(char *const argv[], const char *const env[], void (*old_int)(int),
                       void (*old_term)(int)) {
  for (size_t i = 0; env && env[i]; ++i)
    if (putenv((char *)(uintptr_t)env[i]) != 0) _exit(EXIT_NOT_FOUND);
  signal(SIGINT, old_int == SIG_IGN ? SIG_IGN : SIG_DFL);
  signal(SIGTERM, old_term == SIG_IGN ? SIG_IGN : SIG_DFL);
  execvp(argv[0], argv);
  fprintf(stderr, "tpbench profile: cannot run %s: %s\n", argv[0], strerror(errno));
  _exit(EXIT_NOT_FOUND);
}

tp_rc tp_profile_spawn(char *const argv[], const char *const env[], int *exit_status) {
  if (!argv || !argv[0] || !exit_status)
    return TP_FAIL(TP_EUSAGE, "profile: no command to run (tpbench profile -- CMD ARGS...)");
  fflush(NULL); /* nothing buffered is written twice */
  void (*old_int)(int) = signal(SIGINT, SIG_IGN);
  void (*old_term)(int) = signal(SIGTERM, SIG_IGN);
  pid_t pid = fork();
  if (pid == 0) exec_child(argv, env, old_int, old_term);
  tp_rc rc = TP_OK;
  int status = 0;
  if (pid < 0) {
    rc = TP_FAIL(TP_EIO, "profile: fork failed: %s", strerror(errno));
  } else {
    pid_t got;
    while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {}
    if (got < 0) rc = TP_FAIL(TP_EIO, "profile: waitpid failed: %s", strerror(errno));
    else *exit_status = tp_profile_exit_status(status);
  }
  signal(SIGINT, old_int);
  signal(SIGTERM, old_term);
  return rc;
}
