/*
 * hostlist.c — Slurm host list expansion (contract in hostlist.h).
 *
 * A term is expanded left to right: the text before its first bracket is
 * kept, each number of the bracket appended in turn, and the rest of the
 * term (which may hold more brackets) expanded after it, recursively.
 */
#include "bench/launch/hostlist.h"

#include <stdio.h>
#include <string.h>

enum { MAX_HOSTS = 1000000 };

typedef struct walk {
  const char *list; /* the whole list, for messages */
  int (*fn)(const char *host, void *ctx);
  void *ctx;
  long emitted;
  int stopped;
} walk;

/* At most this much of a list is quoted in a message: the reason must fit
 * after it (the error text is bounded; a 100 KB list once left no reason). */
enum { QUOTED = 80 };
#define QUOTE_FMT "'%.*s%s'"
#define QUOTE_ARGS(list) (int)QUOTED, (list), strlen(list) > QUOTED ? "..." : ""

static tp_rc malformed(const walk *w, const char *why) {
  return TP_FAIL(TP_EUSAGE, "host list " QUOTE_FMT ": %s", QUOTE_ARGS(w->list), why);
}

/* Reads an unsigned decimal number of at most 9 digits at *p; its digit
 * count goes to *width. 0 when there is none. */
static int read_number(const char **p, const char *end, long *value, int *width) {
  const char *s = *p;
  long v = 0;
  int n = 0;
  while (s < end && *s >= '0' && *s <= '9' && n < 9) {
    v = v * 10 + (*s - '0');
    s++;
    n++;
  }
  if (n == 0 || (s < end && *s >= '0' && *s <= '9')) return 0;
  *p = s;
  *value = v;
  *width = n;
  return 1;
}

static tp_rc expand(walk *w, char *head, size_t head_len, const char *tail, const char *end);

/* Appends one number (padded to width) to head and expands the rest. */
static tp_rc emit_number(walk *w, char *head, size_t head_len, long value, int width,
                         const char *rest, const char *end) {
  int n = snprintf(head + head_len, TP_HOSTLIST_NAME_MAX - head_len, "%0*ld", width, value);
  if (n < 0 || head_len + (size_t)n >= TP_HOSTLIST_NAME_MAX)
    return malformed(w, "a host name is too long");
  return expand(w, head, head_len + (size_t)n, rest, end);
}

/* The bracket group at open ('[') ... close (']'), then the rest. */
static tp_rc expand_group(walk *w, char *head, size_t head_len, const char *open, const char *close,
                          const char *end) {
  const char *p = open + 1;
  if (p == close) return malformed(w, "an empty bracket");
  while (p < close && !w->stopped) {
    long lo = 0, hi = 0;
    int width = 0, hi_width = 0;
    if (!read_number(&p, close, &lo, &width)) return malformed(w, "a bracket holds a non-number");
    hi = lo;
    if (p < close && *p == '-') {
      p++;
      if (!read_number(&p, close, &hi, &hi_width)) return malformed(w, "a range has no end");
      if (hi < lo) return malformed(w, "a range runs backwards");
    }
    if (p < close && *p != ',') return malformed(w, "a bracket holds a non-number");
    if (p < close) p++;
    if (hi - lo >= MAX_HOSTS) return malformed(w, "more than a million hosts");
    for (long v = lo; v <= hi && !w->stopped; v++)
      TP_TRY(emit_number(w, head, head_len, v, width, close + 1, end));
  }
  return TP_OK;
}

/* head (head_len characters so far) followed by every expansion of tail. */
static tp_rc expand(walk *w, char *head, size_t head_len, const char *tail, const char *end) {
  const char *open = memchr(tail, '[', (size_t)(end - tail));
  const char *stop = open ? open : end;
  const size_t lit = (size_t)(stop - tail);
  if (memchr(tail, ']', lit)) return malformed(w, "a ']' without its '['");
  if (head_len + lit >= TP_HOSTLIST_NAME_MAX) return malformed(w, "a host name is too long");
  memcpy(head + head_len, tail, lit);
  head_len += lit;
  head[head_len] = '\0';
  if (!open) {
    if (head_len == 0) return malformed(w, "an empty host name");
    if (++w->emitted > MAX_HOSTS) return malformed(w, "more than a million hosts");
    if (w->fn(head, w->ctx)) w->stopped = 1;
    return TP_OK;
  }
  const char *close = memchr(open, ']', (size_t)(end - open));
  if (!close) return malformed(w, "a '[' without its ']'");
  return expand_group(w, head, head_len, open, close, end);
}

/* The end of the term that starts at p: the next comma outside brackets. */
static const char *term_end(const char *p) {
  int depth = 0;
  for (; *p; p++) {
    if (*p == '[') depth++;
    else if (*p == ']' && depth > 0) depth--;
    else if (*p == ',' && depth == 0) break;
  }
  return p;
}

tp_rc tp_hostlist_each(const char *list, int (*fn)(const char *host, void *ctx), void *ctx) {
  walk w = {list ? list : "", fn, ctx, 0, 0};
  if (!list || !list[0]) return malformed(&w, "it is empty");
  char head[TP_HOSTLIST_NAME_MAX];
  for (const char *p = list; !w.stopped;) {
    const char *end = term_end(p);
    if (end == p) return malformed(&w, "an empty host name");
    TP_TRY(expand(&w, head, 0, p, end));
    if (!*end) break;
    p = end + 1;
  }
  return TP_OK;
}

typedef struct first_host {
  char *out;
  size_t cap;
  int fits;
} first_host;

static int keep_first(const char *host, void *ctx) {
  first_host *f = ctx;
  f->fits = strlen(host) < f->cap;
  if (f->fits) memcpy(f->out, host, strlen(host) + 1);
  return 1;
}

tp_rc tp_hostlist_first(const char *list, char *out, size_t cap) {
  first_host f = {out, cap, 0};
  TP_TRY(tp_hostlist_each(list, keep_first, &f));
  if (!f.fits)
    return TP_FAIL(TP_EUSAGE,
                   "host list " QUOTE_FMT ": its first host is longer than %zu characters",
                   QUOTE_ARGS(list), cap ? cap - 1 : 0);
  return TP_OK;
}
