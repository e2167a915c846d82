/*
 * run_program.h — runs a program the way a user or a CI job does and
 * captures what it says: exit status, stdout and stderr, each in a
 * malloc'd string, with a deadline; and the cmocka checks of what it said.
 * Header-only (static functions), the one program runner of the CPU tests
 * that drive the tpbench binary and headless Chromium.
 */
#ifndef TP_RUN_PROGRAM_H
#define TP_RUN_PROGRAM_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

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

/* Runs argv[0] (a path) with argv (NULL-terminated) for at most timeout_s,
 * stdin on /dev/null. stdout goes to stdout_path (opened for writing, e.g.
 * /dev/full) when that is given, and out is then "", else it is captured.
 * status is -1 if the program never started or had to be killed. */
static inline rp_result rp_run_to(char *const argv[], int timeout_s, const char *stdout_path) {
  rp_result r = {-1, NULL, NULL};
  FILE *out = tmpfile(), *err = tmpfile();
  int redirect = stdout_path ? open(stdout_path, O_WRONLY) : -1;
  if (!out || !err || (stdout_path && redirect < 0)) {
    if (out) fclose(out);
    if (err) fclose(err);
    if (redirect >= 0) close(redirect);
    return r;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(redirect >= 0 ? redirect : fileno(out), STDOUT_FILENO);
    dup2(fileno(err), STDERR_FILENO);
    int null_in = open("/dev/null", O_RDONLY);
    if (null_in >= 0) dup2(null_in, STDIN_FILENO);
    execv(argv[0], argv);
    _exit(127);
  }
  if (redirect >= 0) close(redirect);
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

/* rp_run_to with stdout captured. */
static inline rp_result rp_run(char *const argv[], int timeout_s) {
  return rp_run_to(argv, timeout_s, NULL);
}

/* The most arguments rp_run_exe passes; further ones are dropped. */
enum { RP_MAX_ARGS = 30 };

/* Runs exe with the NULL-terminated argument list first, ap as rp_run_to
 * does (stdout_path NULL: stdout captured). */
static inline rp_result rp_run_va(const char *exe, int timeout_s, const char *stdout_path,
                                  const char *first, va_list ap) {
  char *argv[RP_MAX_ARGS + 2] = {(char *)exe};
  int argc = 1;
  for (const char *a = first; a && argc <= RP_MAX_ARGS; a = va_arg(ap, const char *))
    argv[argc++] = (char *)a;
  argv[argc] = NULL;
  return rp_run_to(argv, timeout_s, stdout_path);
}

/* rp_run_va with the arguments listed, NULL last. The tests' one way to run
 * tpbench: `#define tpbench(...) rp_run_exe(TPBENCH_EXE, 60, NULL, __VA_ARGS__)`. */
static inline rp_result rp_run_exe(const char *exe, int timeout_s, const char *stdout_path,
                                   const char *first, ...) {
  va_list ap;
  va_start(ap, first);
  rp_result r = rp_run_va(exe, timeout_s, stdout_path, first, ap);
  va_end(ap);
  return r;
}

/* Fails the test unless r exited with status and its stdout and stderr hold
 * out_words and err_words (either NULL: not checked). */
static inline void rp_expect(const rp_result *r, int status, const char *out_words,
                             const char *err_words) {
  const char *out = r->out ? r->out : "", *err = r->err ? r->err : "";
  if (r->status != status)
    fail_msg("exit %d, expected %d\nstdout:\n%.2000s\nstderr:\n%s", r->status, status, out, err);
  if (out_words && !strstr(out, out_words))
    fail_msg("'%s' not in stdout:\n%.3000s", out_words, out);
  if (err_words && !strstr(err, err_words)) fail_msg("'%s' not in stderr:\n%s", err_words, err);
}

/* Runs exe with the arguments listed (NULL last) and checks what it did as
 * rp_expect does. */
static inline void rp_run_expect(const char *exe, int timeout_s, int status, const char *out_words,
                                 const char *err_words, const char *first, ...) {
  va_list ap;
  va_start(ap, first);
  rp_result r = rp_run_va(exe, timeout_s, NULL, first, ap);
  va_end(ap);
  rp_expect(&r, status, out_words, err_words);
  free(r.out);
  free(r.err);
}

static inline void rp_free(rp_result *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

#endif /* TP_RUN_PROGRAM_H */
