/*
 * progress_line.c — the terminal progress line (contract in progress_line.h).
 */
#include "bench/launch/progress_line.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void tp_progress_clock(double seconds, char *out, size_t cap) {
  if (!isfinite(seconds) || seconds < 0 || seconds > 359999999.0) {
    snprintf(out, cap, "--:--");
    return;
  }
  const long total = lround(seconds);
  const long h = total / 3600, m = total / 60 % 60, s = total % 60;
  if (h > 0) snprintf(out, cap, "%ld:%02ld:%02ld", h, m, s);
  else snprintf(out, cap, "%02ld:%02ld", m, s);
}

double tp_progress_left(double elapsed_s, int done_here, int remaining) {
  if (done_here <= 0 || !(elapsed_s >= 0)) return -1.0;
  return elapsed_s / done_here * (remaining > 0 ? remaining : 0);
}

void tp_progress_line(char *out, size_t cap, int done, int total, int done_here, double elapsed_s,
                      const char *label, int width) {
  char elapsed[24], left[24];
  tp_progress_clock(elapsed_s, elapsed, sizeof elapsed);
  tp_progress_clock(tp_progress_left(elapsed_s, done_here, total - done), left, sizeof left);
  int n = snprintf(out, cap, "[%d/%d] elapsed %s, left ~%s", done, total, elapsed, left);
  if (n < 0 || (size_t)n >= cap || !label || !label[0]) return;
  /* " (" + label + ")" in what is left of the width and the buffer */
  size_t room = cap - (size_t)n - 1;
  if (width > 0) room = (size_t)width > (size_t)n ? (size_t)width - (size_t)n : 0;
  if (room > cap - (size_t)n - 1) room = cap - (size_t)n - 1;
  const size_t len = strlen(label);
  if (room >= len + 3) {
    snprintf(out + n, cap - (size_t)n, " (%s)", label);
  } else if (room >= 2 + 1 + 3 + 1) { /* " (", ")", "..." and a character at least */
    snprintf(out + n, cap - (size_t)n, " (%.*s...)", (int)(room - 6), label);
  }
}

tp_progress_style tp_progress_style_for(int rank, int quiet, int verbose, int stderr_is_terminal) {
  tp_progress_style s = {0, 0, 0};
  if (rank != 0 || quiet) return s;
  s.line = stderr_is_terminal;
  s.every_config = !stderr_is_terminal || verbose;
  s.failures_only = stderr_is_terminal && !verbose;
  return s;
}
