/*
 * progress_line.h — the one updating line a long matrix shows on a
 * terminal: "[done/total] elapsed mm:ss, left ~mm:ss (current label)", the
 * time left estimated from the time per configuration measured so far.
 * Formatting, and the rule that says which lines a run shows
 * (tp_progress_style_for); the harness draws them.
 */
#ifndef TP_PROGRESS_LINE_H
#define TP_PROGRESS_LINE_H

#include <stddef.h>

/* Seconds as "mm:ss", or "h:mm:ss" from an hour on ("--:--" when negative
 * or not finite), into out (at least 16 bytes). */
void tp_progress_clock(double seconds, char *out, size_t cap);

/* Seconds left when done_here configurations took elapsed_s and remaining
 * are left: elapsed_s / done_here * remaining; -1 (unknown) before the
 * first is done. */
double tp_progress_left(double elapsed_s, int done_here, int remaining);

/* The line into out (cap bytes, always terminated): "[done/total] elapsed
 * E, left ~L (label)", with done_here the configurations finished by this
 * process (a resumed job counts from its own start). With width > 0 the
 * label is cut (ending in "...") so the line fits width columns; a label
 * that does not fit at all is left out. */
void tp_progress_line(char *out, size_t cap, int done, int total, int done_here, double elapsed_s,
                      const char *label, int width);

/* How a matrix shows its progress on stderr. */
typedef struct tp_progress_style {
  int line;          /* one updating line with the time left ("\r" redraws it) */
  int every_config;  /* a line per finished configuration */
  int failures_only; /* per configuration, only those that failed (above the updating line) */
} tp_progress_style;

/* The one rule: rank 0 only, nothing with --quiet; on a terminal the updating line, with a line
 * per configuration only under --verbose (failures always, so they stay on screen); anywhere
 * else (a log, a pipe: no line to redraw) a line per configuration. */
tp_progress_style tp_progress_style_for(int rank, int quiet, int verbose, int stderr_is_terminal);

#endif /* TP_PROGRESS_LINE_H */
