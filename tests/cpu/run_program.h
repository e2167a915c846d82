/*
 * run_program.h — runs a program the way a user or a CI job does and
 * captures what it says: exit status, stdout and stderr, each in a
 * malloc'd string, with a deadline. Header-only (static functions), for the
 * CPU tests that drive the tpbench binary and headless Chromium.
 */
#ifndef TP_RUN_PROGRAM_H
#define TP_RUN_PROGRAM_H

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct rp_result {
  int status; /* exit status; 128 + signal; -1 if it had to be killed or never started */
  char *out;
  char *err;
} rp_result;

static inline char *rp_slurp(FILE *f) {
  fflush(f);
  long size = ftell(f);
  char *text = calloc((size_t)(size > 0 ? size : 0) + 1, 1);
  rewind(f);
  if (text && size > 0 && fread(text, 1, (size_t)size, f) != (size_t)size) text[0] = '\0';
  fclose(f);
  return text;
}

/* Runs argv[0] (a path) with argv (NULL-terminated) for at most timeout_s. */
static inline rp_result rp_run(char *const argv[], int timeout_s) {
  rp_result r = {-1, NULL, NULL};
  FILE *out = tmpfile(), *err = tmpfile();
  if (!out || !err) {
    if (out) fclose(out);
    if (err) fclose(err);
    return r;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fileno(out), STDOUT_FILENO);
    dup2(fileno(err), STDERR_FILENO);
    int null_in = open("/dev/null", O_RDONLY);
    if (null_in >= 0) dup2(null_in, STDIN_FILENO);
    execv(argv[0], argv);
    _exit(127);
  }
  int wstatus = 0;
  struct timespec tick = {0, 10 * 1000 * 1000};
  for (long waited = 0; pid > 0; waited += 10) {
    pid_t got = waitpid(pid, &wstatus, WNOHANG);
    if (got == pid) {
      r.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
      break;
    }
    if (got < 0 || waited > (long)timeout_s * 1000) {
      kill(pid, SIGKILL);
      waitpid(pid, &wstatus, 0);
      break;
    }
    nanosleep(&tick, NULL);
  }
  r.out = rp_slurp(out);
  r.err = rp_slurp(err);
  return r;
}

static inline void rp_free(rp_result *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

#endif /* TP_RUN_PROGRAM_H */
