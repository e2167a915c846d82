/*
 * bench_testutil.h — helpers the bench/ CPU tests share: a monotonic clock,
 * waiting for a child process with a deadline, capturing what a piece of
 * code writes to stderr, and shared memory that forked children can write
 * their results to. Header-only (static functions): each test is one file.
 */
#ifndef TP_BENCH_TESTUTIL_H
#define TP_BENCH_TESTUTIL_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Doubles within eps of each other (cmocka 1.1 compares floats only, which
 * cannot hold a FLOP count exactly); eps 0 asks for equality. */
#define tu_assert_near(a, b, eps)                                                                  \
  do {                                                                                             \
    double tu_a_ = (a), tu_b_ = (b);                                                               \
    if (!(fabs(tu_a_ - tu_b_) <= (eps))) fail_msg("%s = %.17g, expected %.17g", #a, tu_a_, tu_b_); \
  } while (0)

static inline int64_t tu_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void tu_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Waits for pid up to timeout_ms; kills it (SIGKILL) when late. Returns the
 * wait status, or -1 if it had to be killed. */
static inline int tu_wait_child(pid_t pid, int timeout_ms) {
  int64_t deadline = tu_now_ms() + timeout_ms;
  for (;;) {
    int status = 0;
    pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) return status;
    if (got < 0 && errno != EINTR) return -1;
    if (tu_now_ms() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    tu_sleep_ms(10);
  }
}

/* Zeroed memory shared with forked children. */
static inline void *tu_shared(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* Redirects stderr into a temporary file until tu_capture_end. */
typedef struct tu_capture {
  int saved_fd;
  FILE *file;
} tu_capture;

static inline void tu_capture_begin(tu_capture *c) {
  fflush(stderr);
  c->file = tmpfile();
  c->saved_fd = dup(STDERR_FILENO);
  if (c->file) dup2(fileno(c->file), STDERR_FILENO);
}

/* Restores stderr and returns what was written (malloc'd, NUL-terminated). */
static inline char *tu_capture_end(tu_capture *c) {
  fflush(stderr);
  dup2(c->saved_fd, STDERR_FILENO);
  close(c->saved_fd);
  if (!c->file) return NULL;
  long size = ftell(c->file);
  if (size < 0) size = 0;
  char *text = calloc((size_t)size + 1, 1);
  rewind(c->file);
  if (text && fread(text, 1, (size_t)size, c->file) != (size_t)size) text[0] = '\0';
  fclose(c->file);
  return text;
}

#endif /* TP_BENCH_TESTUTIL_H */
