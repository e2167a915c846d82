/*
 * progress_line.h — the one updating line a long matrix shows on a
 * terminal: "[done/total] elapsed mm:ss, left ~mm:ss (current label)", the
 * time left estimated from the time per configuration measured so far.
 * Formatting only; the harness decides when to draw it (rank 0, stderr a
 * terminal) and prints plain lines otherwise.
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

#endif /* TP_PROGRESS_LINE_H */
