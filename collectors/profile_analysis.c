/*
 * profile_analysis.c — windows, breakdowns, schedules and kernel summaries of a profiled
 * program's events (tp_profile_analysis.h; definitions in collectors/README.md, "Profiles").
 *
 * A program tpbench did not write marks its steps with NVTX ranges (PyTorch's
 * "ProfilerStep#N") and its operations with more ranges (record_function names, fused ops).
 * Ranges are CPU times; the device work they launch runs later, often after the range closed,
 * so work is placed in a range by the CPU time of the call that launched it (launch_ns), as
 * evidence.c places an op's transfers. A step's device window is then the stretch from the
 * first start to the last end of that work: an asynchronous step is measured where it ran.
 * The overlap math is overlap.c's, run over the window's own events; kernel origins come
 * from classify.c's one table. Pure C: tested on the CPU.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/tp_profile_analysis.h"
#include "common/tp_array.h"

/* ---- small helpers ------------------------------------------------------------------- */

typedef struct span {
  uint64_t start, end;
} span;

static int span_cmp(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return (x->end > y->end) - (x->end < y->end);
}

/* Length of the union of the spans (sorted in place). */
static uint64_t union_length(span *s, size_t n) {
  if (n == 0) return 0;
  qsort(s, n, sizeof *s, span_cmp);
  uint64_t total = 0, start = s[0].start, end = s[0].end;
  for (size_t i = 1; i < n; ++i) {
    if (s[i].start <= end) {
      if (s[i].end > end) end = s[i].end;
    } else {
      total += end - start;
      start = s[i].start;
      end = s[i].end;
    }
  }
  return total + (end - start);
}

/* CUPTI times a host-blocking synchronisation (cudaDeviceSynchronize,
 * cudaStreamSynchronize, cudaEventSynchronize) by the host's wait, not by
 * anything the GPU did: in a program that synchronises at the end of each
 * step it would stretch the step and count the whole wait as "sync". Only a
 * stream waiting on an event is the device waiting. */
static int is_host_wait(const tp_event *e) {
  return e->type == TP_EV_SYNC && e->name && strcmp(e->name, "sync stream wait event") != 0;
}

static int is_device_work(const tp_event *e) {
  return e->type == TP_EV_KERNEL || e->type == TP_EV_MEMCPY || e->type == TP_EV_MEMSET ||
         (e->type == TP_EV_SYNC && !is_host_wait(e));
}

static int starts_nocase(const char *s, const char *prefix) {
  for (; *prefix; ++s, ++prefix)
    if (tolower((unsigned char)*s) != tolower((unsigned char)*prefix)) return 0;
  return 1;
}

/* Reads a whole string of decimal digits into *out; 0 on anything else or overflow. */
static int read_decimal(const char *s, size_t len, int64_t *out) {
  if (len == 0) return 0;
  int64_t v = 0;
  for (size_t i = 0; i < len; ++i) {
    if (!isdigit((unsigned char)s[i])) return 0;
    int d = s[i] - '0';
    if (v > (INT64_MAX - d) / 10) return 0;
    v = v * 10 + d;
  }
  *out = v;
  return 1;
}

/* ---- selector ------------------------------------------------------------------------- */

/* One side of "A:B": digits only, named in the message when it is not. */
static tp_rc parse_step_bound(const char *opt, const char *s, size_t len, int64_t *out) {
  if (read_decimal(s, len, out)) return TP_OK;
  size_t digits = 0;
  while (digits < len && isdigit((unsigned char)s[digits])) ++digits;
  if (digits == len)
    return TP_FAIL(TP_EUSAGE, "--steps '%.40s': %.*s is too large for a step number", opt,
                   (int)(len > 40 ? 40 : len), s);
  return TP_FAIL(TP_EUSAGE,
                 "--steps '%.40s': '%.*s' is not a step number (a decimal integer >= 0; "
                 "the forms are A:B, A:, :B and N)",
                 opt, (int)(len > 40 ? 40 : len), s);
}

static tp_rc parse_steps(const char *text, tp_profile_selector *out) {
  const char *colon = strchr(text, ':');
  if (colon && strchr(colon + 1, ':'))
    return TP_FAIL(TP_EUSAGE, "--steps '%.40s': one colon at most (A:B, A:, :B or N)", text);
  if (!colon) {
    TP_TRY(parse_step_bound(text, text, strlen(text), &out->step_lo));
    if (out->step_lo == INT64_MAX)
      return TP_FAIL(TP_EUSAGE, "--steps '%.40s' is too large for a step number", text);
    out->step_hi = out->step_lo + 1;
    return TP_OK;
  }
  size_t lo_len = (size_t)(colon - text), hi_len = strlen(colon + 1);
  out->step_lo = 0;
  out->step_hi = INT64_MAX;
  if (lo_len) TP_TRY(parse_step_bound(text, text, lo_len, &out->step_lo));
  if (hi_len) TP_TRY(parse_step_bound(text, colon + 1, hi_len, &out->step_hi));
  if (out->step_hi <= out->step_lo)
    return TP_FAIL(TP_EUSAGE,
                   "--steps '%.40s' selects no step: A:B keeps the steps A <= N < B, so B must "
                   "be greater than A",
                   text);
  return TP_OK;
}

static tp_rc compile_range(const char *text, tp_profile_selector *out) {
  int err = regcomp(&out->range_re, text, REG_EXTENDED | REG_NOSUB);
  if (err != 0) {
    char why[256];
    (void)regerror(err, &out->range_re, why, sizeof why);
    return TP_FAIL(TP_EUSAGE, "--range '%.80s' is not a valid extended regular expression: %s",
                   text, why);
  }
  out->range_re_compiled = 1;
  return TP_OK;
}

tp_rc tp_profile_selector_parse(const char *steps, const char *range, tp_profile_selector *out) {
  if (!out) return TP_FAIL(TP_EUSAGE, "tp_profile_selector_parse: NULL output");
  memset(out, 0, sizeof *out);
  int has_steps = steps && *steps, has_range = range && *range;
  if (steps && !*steps)
    return TP_FAIL(TP_EUSAGE, "--steps: empty value (the forms are A:B, A:, :B and N)");
  if (range && !*range) return TP_FAIL(TP_EUSAGE, "--range: empty regular expression");
  if (has_steps && has_range)
    return TP_FAIL(TP_EUSAGE,
                   "--steps and --range both select the windows; give one of them (steps by "
                   "number, or ranges by a regular expression)");
  if (has_steps) {
    out->mode = TP_SELECT_STEPS;
    (void)snprintf(out->text, sizeof out->text, "%s", steps);
    return parse_steps(steps, out);
  }
  if (has_range) {
    out->mode = TP_SELECT_RANGE;
    (void)snprintf(out->text, sizeof out->text, "%s", range);
    return compile_range(range, out);
  }
  out->mode = TP_SELECT_PROCESS;
  return TP_OK;
}

void tp_profile_selector_free(tp_profile_selector *sel) {
  if (!sel || !sel->range_re_compiled) return;
  regfree(&sel->range_re);
  sel->range_re_compiled = 0;
}

int tp_profile_step_number(const char *name, int64_t *step) {
  if (!name || !step) return 0;
  const char *colon = strrchr(name, ':');
  const char *s = colon ? colon + 1 : name, *digits;
  if (starts_nocase(s, "profilerstep#")) digits = s + strlen("profilerstep#");
  else if (starts_nocase(s, "step")) {
    digits = s + strlen("step");
    if (*digits == ' ' || *digits == '#' || *digits == '_') ++digits;
  } else return 0;
  return read_decimal(digits, strlen(digits), step);
}

/* ---- windows --------------------------------------------------------------------------- */

typedef struct window_list {
  tp_profile_window *items;
  size_t n, cap;
} window_list;

static tp_rc push_window(window_list *l, const tp_profile_window *w) {
  tp_profile_window *grown = tp_grow_array(l->items, &l->cap, l->n, sizeof *l->items);
  if (!grown) return TP_FAIL(TP_EOOM, "profile windows: no memory for %zu windows", l->n + 1);
  l->items = grown;
  l->items[l->n++] = *w;
  return TP_OK;
}

static int window_cmp(const void *a, const void *b) {
  const tp_profile_window *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->host_start_ns != y->host_start_ns) return x->host_start_ns < y->host_start_ns ? -1 : 1;
  return (x->host_end_ns < y->host_end_ns) - (x->host_end_ns > y->host_end_ns);
}

int tp_profile_in_window(const tp_event *e, const tp_profile_window *w) {
  if (e->rank != w->rank || !is_device_work(e)) return 0;
  if (w->whole_process) return 1;
  return e->launch_ns != 0 && e->launch_ns >= w->host_start_ns && e->launch_ns < w->host_end_ns;
}

/* ---- device work by launch, and the windows as intervals ------------------------------ */

/* Each window's work is found in one sorted index, not by scanning every event per window:
 * a profile of a training job holds millions of events and tens of thousands of windows. */

/* A device event placed by its launch. */
typedef struct launch_ref {
  uint64_t at;
  int rank;
  size_t index;
} launch_ref;

static int by_rank_launch(const void *a, const void *b) {
  const launch_ref *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->at != y->at) return x->at < y->at ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index); /* a stable order */
}

/* The device work of the events (launch time 0 included), by rank then launch. */
typedef struct launch_index {
  launch_ref *refs;
  size_t n;
} launch_index;

static tp_rc launch_index_build(const tp_event *ev, size_t n, launch_index *idx) {
  idx->n = 0;
  idx->refs = malloc((n ? n : 1) * sizeof *idx->refs);
  if (!idx->refs) return TP_FAIL(TP_EOOM, "profile analysis: no memory to index %zu events", n);
  for (size_t i = 0; i < n; ++i)
    if (is_device_work(&ev[i])) idx->refs[idx->n++] = (launch_ref){ev[i].launch_ns, ev[i].rank, i};
  qsort(idx->refs, idx->n, sizeof *idx->refs, by_rank_launch);
  return TP_OK;
}

/* The first entry at or after (rank, at); with past_rank, the first of a later rank. */
static size_t launch_index_seek(const launch_index *idx, int rank, uint64_t at, int past_rank) {
  size_t lo = 0, hi = idx->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const launch_ref *r = &idx->refs[mid];
    int before = r->rank < rank || (r->rank == rank && (past_rank || r->at < at));
    if (before) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The entries [*first, *last) of the work of window w (tp_profile_in_window). */
static void launch_index_slice(const launch_index *idx, const tp_profile_window *w, size_t *first,
                               size_t *last) {
  if (w->whole_process) {
    *first = launch_index_seek(idx, w->rank, 0, 0);
    *last = launch_index_seek(idx, w->rank, 0, 1);
    return;
  }
  uint64_t from = w->host_start_ns ? w->host_start_ns : 1; /* launch time 0: unknown */
  *first = launch_index_seek(idx, w->rank, from, 0);
  *last = w->host_end_ns > from ? launch_index_seek(idx, w->rank, w->host_end_ns, 0) : *first;
}

/* One window's host interval, and the latest end of it and of the windows of its rank
 * that start earlier: a time is inside some window of the rank when the last window
 * starting at or before it reaches past it. */
typedef struct window_reach {
  int rank;
  uint64_t start, reach;
} window_reach;

static int by_window_start(const void *a, const void *b) {
  const window_reach *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return (x->start > y->start) - (x->start < y->start);
}

/* The windows as sorted intervals, and the ranks a whole-process window covers. */
typedef struct window_set {
  window_reach *iv;
  size_t n;
  int *whole_ranks; /* sorted */
  size_t n_whole;
} window_set;

static int by_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static void window_set_free(window_set *s) {
  free(s->iv);
  free(s->whole_ranks);
  memset(s, 0, sizeof *s);
}

static tp_rc window_set_build(const tp_profile_window *w, size_t n_w, window_set *s) {
  memset(s, 0, sizeof *s);
  s->iv = malloc((n_w ? n_w : 1) * sizeof *s->iv);
  s->whole_ranks = malloc((n_w ? n_w : 1) * sizeof *s->whole_ranks);
  if (!s->iv || !s->whole_ranks) {
    window_set_free(s);
    return TP_FAIL(TP_EOOM, "profile analysis: no memory for %zu windows", n_w);
  }
  for (size_t k = 0; k < n_w; ++k) {
    if (w[k].whole_process) s->whole_ranks[s->n_whole++] = w[k].rank;
    else s->iv[s->n++] = (window_reach){w[k].rank, w[k].host_start_ns, w[k].host_end_ns};
  }
  qsort(s->whole_ranks, s->n_whole, sizeof *s->whole_ranks, by_int);
  qsort(s->iv, s->n, sizeof *s->iv, by_window_start);
  for (size_t k = 1; k < s->n; ++k)
    if (s->iv[k].rank == s->iv[k - 1].rank && s->iv[k - 1].reach > s->iv[k].reach)
      s->iv[k].reach = s->iv[k - 1].reach;
  return TP_OK;
}

static int window_set_whole(const window_set *s, int rank) {
  return bsearch(&rank, s->whole_ranks, s->n_whole, sizeof rank, by_int) != NULL;
}

/* 1 when `at` lies in [host start, host end) of a window of `rank` (whole-process ones
 * aside). */
static int window_set_covers(const window_set *s, int rank, uint64_t at) {
  size_t lo = 0, hi = s->n; /* find the first interval after (rank, at) */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const window_reach *r = &s->iv[mid];
    if (r->rank < rank || (r->rank == rank && r->start <= at)) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 && s->iv[lo - 1].rank == rank && s->iv[lo - 1].reach > at;
}

/* 1 when `e` is device work of some window (tp_profile_in_window of any). */
static int window_set_holds_launch(const window_set *s, const tp_event *e) {
  if (!is_device_work(e)) return 0;
  if (window_set_whole(s, e->rank)) return 1;
  return e->launch_ns != 0 && window_set_covers(s, e->rank, e->launch_ns);
}

/* 1 when the range `r` starts inside some window of its rank (any range of the rank for a
 * whole-process window). */
static int window_set_holds_range(const window_set *s, const tp_event *r) {
  return window_set_whole(s, r->rank) || window_set_covers(s, r->rank, r->start_ns);
}

/* Sets the device bounds of a window from the work launched inside it. */
static void set_device_bounds(const tp_event *ev, const launch_index *idx, tp_profile_window *w) {
  uint64_t lo = UINT64_MAX, hi = 0;
  size_t first, last;
  launch_index_slice(idx, w, &first, &last);
  for (size_t k = first; k < last; ++k) {
    const tp_event *e = &ev[idx->refs[k].index];
    if (e->start_ns < lo) lo = e->start_ns;
    if (e->end_ns > hi) hi = e->end_ns;
  }
  w->empty = lo == UINT64_MAX;
  w->start_ns = w->empty ? w->host_start_ns : lo;
  w->end_ns = w->empty ? w->host_end_ns : (hi > lo ? hi : lo);
}

static int range_selected(const tp_event *e, const tp_profile_selector *sel, int64_t *step) {
  if (e->type != TP_EV_RANGE) return 0;
  if (sel->mode == TP_SELECT_STEPS)
    return tp_profile_step_number(e->name, step) && *step >= sel->step_lo &&
           (*step < sel->step_hi || sel->step_hi == INT64_MAX); /* "A:" keeps the last too */
  *step = 0;
  return regexec(&sel->range_re, e->name, 0, NULL, 0) == 0;
}

static tp_rc collect_range_windows(const tp_event *ev, size_t n, const tp_profile_selector *sel,
                                   window_list *l) {
  for (size_t i = 0; i < n; ++i) {
    tp_profile_window w = {0};
    if (!range_selected(&ev[i], sel, &w.step)) continue;
    w.name = ev[i].name;
    w.rank = ev[i].rank;
    w.host_start_ns = ev[i].start_ns;
    w.host_end_ns = ev[i].end_ns;
    TP_TRY(push_window(l, &w));
  }
  return TP_OK;
}

/* Widens the whole-process window of e's rank (added on first sight) by e. */
static tp_rc widen_process_window(const tp_event *e, window_list *l) {
  size_t k = 0;
  while (k < l->n && l->items[k].rank != e->rank) ++k;
  if (k == l->n) {
    tp_profile_window w = {.name = "process",
                           .rank = e->rank,
                           .step = -1,
                           .whole_process = 1,
                           .host_start_ns = UINT64_MAX};
    TP_TRY(push_window(l, &w));
  }
  tp_profile_window *w = &l->items[k];
  if (e->start_ns < w->host_start_ns) w->host_start_ns = e->start_ns;
  if (e->end_ns > w->host_end_ns) w->host_end_ns = e->end_ns;
  return TP_OK;
}

/* A bounded message being written piece by piece. */
typedef struct message {
  char text[512];
  size_t len;
} message;

static void message_add(message *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void message_add(message *m, const char *fmt, ...) {
  if (m->len >= sizeof m->text - 1) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(m->text + m->len, sizeof m->text - m->len, fmt, ap);
  va_end(ap);
  if (w > 0) m->len += (size_t)w < sizeof m->text - m->len ? (size_t)w : sizeof m->text - m->len;
}

typedef struct rank_step {
  int rank;
  int64_t step;
} rank_step;

static int rank_step_cmp(const void *a, const void *b) {
  const rank_step *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return (x->step > y->step) - (x->step < y->step);
}

/* "0..7 on rank 0, 0..3, 5 on rank 1": the sorted steps as runs per rank. */
static void describe_steps(const rank_step *s, size_t n, message *m) {
  for (size_t i = 0; i < n;) {
    size_t end = i;
    while (end < n && s[end].rank == s[i].rank) ++end;
    message_add(m, "%s", i ? "; " : "");
    for (size_t j = i; j < end;) {
      size_t k = j;
      while (k + 1 < end && s[k + 1].step - s[k].step <= 1) ++k; /* sorted: no overflow */
      message_add(m, "%s%lld", j > i ? ", " : "", (long long)s[j].step);
      if (s[k].step != s[j].step) message_add(m, "..%lld", (long long)s[k].step);
      j = k + 1;
    }
    message_add(m, " on rank %d", s[i].rank);
    i = end;
  }
}

static tp_rc fail_no_step(const tp_event *ev, size_t n, const tp_profile_selector *sel) {
  rank_step *s = malloc((n ? n : 1) * sizeof *s);
  if (!s) return TP_FAIL(TP_EOOM, "profile windows: no memory for the message");
  size_t k = 0;
  for (size_t i = 0; i < n; ++i)
    if (ev[i].type == TP_EV_RANGE && tp_profile_step_number(ev[i].name, &s[k].step))
      s[k++].rank = ev[i].rank;
  qsort(s, k, sizeof *s, rank_step_cmp);
  message m = {.len = 0};
  if (k == 0) message_add(&m, "the program opened no step range (ProfilerStep#N, step N, step_N)");
  else {
    message_add(&m, "the program's steps are ");
    describe_steps(s, k, &m);
  }
  free(s);
  return TP_FAIL(TP_EUSAGE, "no step in %s; %s", sel->text, m.text);
}

/* A range's name and where it first appears in the events. */
typedef struct name_seen {
  const char *name;
  size_t at;
} name_seen;

static int by_name_then_at(const void *a, const void *b) {
  const name_seen *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c) return c;
  return (x->at > y->at) - (x->at < y->at);
}

static int by_at(const void *a, const void *b) {
  const name_seen *x = a, *y = b;
  return (x->at > y->at) - (x->at < y->at);
}

/* The distinct range names, each at its first appearance, in order of it (sorted, not
 * compared pairwise: a program opens millions of ranges of a few names); returns the count. */
static size_t distinct_range_names(const tp_event *ev, size_t n, name_seen *out) {
  size_t k = 0;
  for (size_t i = 0; i < n; ++i)
    if (ev[i].type == TP_EV_RANGE) out[k++] = (name_seen){ev[i].name, i};
  qsort(out, k, sizeof *out, by_name_then_at);
  size_t kept = 0;
  for (size_t i = 0; i < k; ++i)
    if (kept == 0 || strcmp(out[kept - 1].name, out[i].name) != 0) out[kept++] = out[i];
  qsort(out, kept, sizeof *out, by_at);
  return kept;
}

static tp_rc fail_no_range(const tp_event *ev, size_t n, const tp_profile_selector *sel) {
  name_seen *names = malloc((n ? n : 1) * sizeof *names);
  if (!names) return TP_FAIL(TP_EOOM, "profile windows: no memory for the message");
  size_t listed = distinct_range_names(ev, n, names);
  message m = {.len = 0};
  for (size_t i = 0; i < listed && i < 8; ++i)
    message_add(&m, "%s'%.60s'", i ? ", " : "", names[i].name);
  free(names);
  if (listed == 0)
    return TP_FAIL(TP_EUSAGE, "no NVTX range matches --range '%s': the program opened none",
                   sel->text);
  return TP_FAIL(TP_EUSAGE, "no NVTX range matches --range '%s'; the program's ranges include %s",
                 sel->text, m.text);
}

static int by_rank_step_start(const void *a, const void *b) {
  const tp_profile_window *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  return window_cmp(a, b);
}

/* A program that marks its steps twice ("ProfilerStep#3" around "step 3")
 * has one step there: a step window inside another of the same number on
 * the same rank is dropped, the outer one kept (one window per rank, step
 * and start: the store's key). Leaves the windows in window_cmp order;
 * returns the count kept. */
static size_t drop_nested_steps(tp_profile_window *w, size_t n) {
  if (n < 2) return n;
  qsort(w, n, sizeof *w, by_rank_step_start);
  size_t kept = 0;
  uint64_t reach = 0; /* the latest end of the kept windows of this rank and step */
  for (size_t i = 0; i < n; ++i) {
    int same = kept > 0 && w[kept - 1].rank == w[i].rank && w[kept - 1].step == w[i].step;
    if (same && w[i].host_end_ns <= reach) continue; /* inside an earlier-starting one */
    reach = w[i].host_end_ns;                        /* later than reach when same */
    w[kept++] = w[i];
  }
  qsort(w, kept, sizeof *w, window_cmp);
  return kept;
}

/* Numbers --range windows by their order of start on their rank. */
static void number_by_order(tp_profile_window *w, size_t n) {
  int64_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && w[i].rank != w[i - 1].rank) next = 0;
    w[i].step = next++;
  }
}

tp_rc tp_profile_windows(const tp_event *ev, size_t n, const tp_profile_selector *sel,
                         tp_profile_window **out, size_t *n_out) {
  if (!sel || !out || !n_out || (n > 0 && !ev))
    return TP_FAIL(TP_EUSAGE, "tp_profile_windows: NULL argument");
  *out = NULL;
  *n_out = 0;
  window_list l = {0};
  tp_rc rc = TP_OK;
  if (sel->mode == TP_SELECT_PROCESS)
    for (size_t i = 0; rc == TP_OK && i < n; ++i) rc = widen_process_window(&ev[i], &l);
  else rc = collect_range_windows(ev, n, sel, &l);
  if (rc == TP_OK && l.n == 0 && sel->mode != TP_SELECT_PROCESS)
    rc = sel->mode == TP_SELECT_STEPS ? fail_no_step(ev, n, sel) : fail_no_range(ev, n, sel);
  if (rc != TP_OK) {
    free(l.items);
    return rc;
  }
  if (l.n > 1) qsort(l.items, l.n, sizeof *l.items, window_cmp);
  if (sel->mode == TP_SELECT_STEPS) l.n = drop_nested_steps(l.items, l.n);
  if (sel->mode == TP_SELECT_RANGE) number_by_order(l.items, l.n);
  launch_index idx;
  rc = launch_index_build(ev, n, &idx);
  for (size_t k = 0; rc == TP_OK && k < l.n; ++k) set_device_bounds(ev, &idx, &l.items[k]);
  free(idx.refs);
  if (rc != TP_OK) {
    free(l.items);
    return rc;
  }
  *out = l.items;
  *n_out = l.n;
  return TP_OK;
}

/* ---- breakdown ------------------------------------------------------------------------- */

tp_transport tp_profile_transport_of(const tp_event *e) {
  if (!e) return TP_TRANSPORT_NONE;
  if (e->type == TP_EV_MEMCPY) {
    int other_device =
        e->copy_kind == TP_COPY_DTOD && e->peer_device >= 0 && e->peer_device != e->device;
    return e->copy_kind == TP_COPY_PTOP || other_device ? TP_TRANSPORT_COPY_ENGINE
                                                        : TP_TRANSPORT_NONE;
  }
  if (e->type != TP_EV_KERNEL) return TP_TRANSPORT_NONE;
  switch (tp_classify_kernel_ex(e->name).origin) {
  case TP_KERNEL_NCCL: return TP_TRANSPORT_NCCL;
  case TP_KERNEL_OWN_COPY:
  case TP_KERNEL_SYMM_MEM: return TP_TRANSPORT_SM_COPY;
  case TP_KERNEL_MULTICAST: return TP_TRANSPORT_MULTICAST;
  default: return TP_TRANSPORT_NONE;
  }
}

/* The event as the overlap math must see it: a copy to another device is communication
 * even where CUPTI called it DtoD (classify.c files only PtoP as comm). */
static tp_event as_counted(const tp_event *e) {
  tp_event c = *e;
  if (tp_profile_transport_of(e) == TP_TRANSPORT_COPY_ENGINE) c.category = TP_CAT_COMM;
  return c;
}

/* The window's events and the spans the overlap math does not measure. */
typedef struct window_events {
  tp_event *ev;
  span *busy, *other;
  size_t n, n_other, kernels;
  size_t cap; /* room in each array */
} window_events;

/* Room for `cap` events in we, emptied (the arrays replaced when smaller). */
static tp_rc window_events_reserve(window_events *we, size_t cap) {
  we->n = we->n_other = we->kernels = 0;
  if (we->ev && cap <= we->cap) return TP_OK;
  free(we->ev);
  free(we->busy);
  free(we->other);
  we->cap = cap ? cap : 1;
  we->ev = malloc(we->cap * sizeof *we->ev);
  we->busy = malloc(we->cap * sizeof *we->busy);
  we->other = malloc(we->cap * sizeof *we->other);
  if (!we->ev || !we->busy || !we->other)
    return TP_FAIL(TP_EOOM, "profile breakdown: no memory for %zu events", cap);
  return TP_OK;
}

/* Adds e, device work of the window, to we (room reserved): work of no length is left out. */
static void window_events_add(window_events *we, const tp_event *ev) {
  if (ev->end_ns <= ev->start_ns) return;
  tp_event e = as_counted(ev);
  span s = {e.start_ns, e.end_ns};
  we->ev[we->n] = e;
  we->busy[we->n++] = s;
  we->kernels += e.type == TP_EV_KERNEL;
  if (e.type == TP_EV_MEMSET || (e.type == TP_EV_MEMCPY && e.category != TP_CAT_COMM))
    we->other[we->n_other++] = s;
}

static tp_rc gather_window(const tp_event *ev, size_t n, const tp_profile_window *w,
                           window_events *we) {
  TP_TRY(window_events_reserve(we, n));
  for (size_t i = 0; i < n; ++i)
    if (tp_profile_in_window(&ev[i], w)) window_events_add(we, &ev[i]);
  return TP_OK;
}

static void free_window_events(window_events *we) {
  free(we->ev);
  free(we->busy);
  free(we->other);
}

/* The breakdown of w from its gathered events (their span lists sorted in place). */
static tp_rc breakdown_from(window_events *we, const tp_profile_window *w,
                            tp_profile_breakdown *out) {
  tp_overlap o = {0};
  TP_TRY(tp_overlap_compute(we->ev, we->n, w->rank, w->start_ns, w->end_ns, &o));
  tp_profile_breakdown b = {0};
  b.step_ns = w->end_ns - w->start_ns;
  b.host_ns = w->host_end_ns > w->host_start_ns ? w->host_end_ns - w->host_start_ns : 0;
  b.comm_ns = o.comm_ns;
  b.compute_ns = o.compute_ns;
  b.sync_ns = o.sync_ns;
  b.overlap_ns = o.overlap_ns;
  b.exposed_comm_ns = o.exposed_comm_ns;
  b.overlap_pct = o.overlap_pct;
  b.other_ns = union_length(we->other, we->n_other);
  b.busy_ns = union_length(we->busy, we->n);
  b.idle_ns = b.step_ns > b.busy_ns ? b.step_ns - b.busy_ns : 0;
  b.kernels = we->kernels;
  *out = b;
  return TP_OK;
}

tp_rc tp_profile_breakdown_of(const tp_event *ev, size_t n, const tp_profile_window *w,
                              tp_profile_breakdown *out) {
  if (!w || !out || (n > 0 && !ev))
    return TP_FAIL(TP_EUSAGE, "tp_profile_breakdown_of: NULL argument");
  window_events we = {0};
  tp_rc rc = gather_window(ev, n, w, &we);
  if (rc == TP_OK) rc = breakdown_from(&we, w, out);
  free_window_events(&we);
  return rc;
}

/* The breakdown of window w from its slice of the index, gathered in we (reused). */
static tp_rc breakdown_indexed(const tp_event *ev, const launch_index *idx,
                               const tp_profile_window *w, window_events *we,
                               tp_profile_breakdown *out) {
  size_t first, last;
  launch_index_slice(idx, w, &first, &last);
  TP_TRY(window_events_reserve(we, last - first));
  for (size_t k = first; k < last; ++k) window_events_add(we, &ev[idx->refs[k].index]);
  return breakdown_from(we, w, out);
}

tp_rc tp_profile_breakdowns(const tp_event *ev, size_t n, const tp_profile_window *w, size_t n_w,
                            tp_profile_breakdown *out) {
  if ((n_w > 0 && (!w || !out)) || (n > 0 && !ev))
    return TP_FAIL(TP_EUSAGE, "tp_profile_breakdowns: NULL argument");
  launch_index idx;
  tp_rc rc = launch_index_build(ev, n, &idx);
  window_events we = {0};
  for (size_t k = 0; rc == TP_OK && k < n_w; ++k)
    rc = breakdown_indexed(ev, &idx, &w[k], &we, &out[k]);
  free_window_events(&we);
  free(idx.refs);
  return rc;
}

/* ---- schedules per range name --------------------------------------------------------- */

/* A range of the program inside the windows, and the (rank, name) group it belongs to. */
typedef struct named_range {
  const char *name;
  uint64_t start, end;
  int rank;
  size_t group;
} named_range;

static int by_rank_name_start(const void *a, const void *b) {
  const named_range *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  int c = strcmp(x->name, y->name);
  if (c) return c;
  return (x->start > y->start) - (x->start < y->start);
}

static int by_rank_start(const void *a, const void *b) {
  const named_range *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return (x->start > y->start) - (x->start < y->start);
}

/* The device events a group of ranges launched (indices into the events). */
typedef struct group {
  size_t *events;
  size_t n, cap;
  size_t ranges;
  size_t stamp; /* 1 + the last launch placed in it, so an event counts once per name */
} group;

/* The program's ranges inside the windows, step ranges left out. */
static size_t collect_named_ranges(const tp_event *ev, size_t n, const window_set *w,
                                   named_range *out) {
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    int64_t step;
    if (ev[i].type != TP_EV_RANGE || tp_profile_step_number(ev[i].name, &step)) continue;
    if (!window_set_holds_range(w, &ev[i])) continue;
    named_range r = {ev[i].name, ev[i].start_ns, ev[i].end_ns, ev[i].rank, 0};
    out[k++] = r;
  }
  return k;
}

/* Numbers the (rank, name) groups; returns their count. Leaves the ranges sorted by start. */
static size_t number_groups(named_range *r, size_t n) {
  if (n == 0) return 0;
  qsort(r, n, sizeof *r, by_rank_name_start);
  size_t g = 0;
  for (size_t i = 1; i < n; ++i) {
    if (r[i].rank != r[i - 1].rank || strcmp(r[i].name, r[i - 1].name) != 0) ++g;
    r[i].group = g;
  }
  qsort(r, n, sizeof *r, by_rank_start);
  return g + 1;
}

static tp_rc group_add(group *g, size_t index, size_t launch_no) {
  if (g->stamp == launch_no + 1) return TP_OK;
  g->stamp = launch_no + 1;
  size_t *grown = tp_grow_array(g->events, &g->cap, g->n, sizeof *g->events);
  if (!grown) return TP_FAIL(TP_EOOM, "profile schedules: no memory for a range's events");
  g->events = grown;
  g->events[g->n++] = index;
  return TP_OK;
}

/* The state of one sweep over ranges and launches, both sorted by rank then time. */
typedef struct sweep {
  const named_range *r;
  size_t n_r, next;      /* ranges; the first not yet opened */
  size_t *active, n_act; /* ranges opened and not yet known to be closed */
  group *groups;
} sweep;

/* Opens the ranges that started by `l` and places l's event in every open range's group. */
static tp_rc place_launch(sweep *s, const launch_ref *l, size_t launch_no) {
  while (s->next < s->n_r && (s->r[s->next].rank < l->rank ||
                              (s->r[s->next].rank == l->rank && s->r[s->next].start <= l->at)))
    s->active[s->n_act++] = s->next++;
  size_t keep = 0;
  for (size_t a = 0; a < s->n_act; ++a) {
    const named_range *r = &s->r[s->active[a]];
    if (r->rank < l->rank || r->end <= l->at) continue; /* closed for good: drop */
    s->active[keep++] = s->active[a];
    TP_TRY(group_add(&s->groups[r->group], l->index, launch_no));
  }
  s->n_act = keep;
  return TP_OK;
}

static tp_rc place_launches(const tp_event *ev, size_t n, const window_set *w, const named_range *r,
                            size_t n_r, group *groups) {
  launch_ref *l = malloc((n ? n : 1) * sizeof *l);
  size_t *active = malloc((n_r ? n_r : 1) * sizeof *active);
  tp_rc rc =
      l && active ? TP_OK : TP_FAIL(TP_EOOM, "profile schedules: no memory for %zu events", n);
  size_t n_l = 0;
  for (size_t i = 0; rc == TP_OK && i < n; ++i)
    if (ev[i].launch_ns != 0 && window_set_holds_launch(w, &ev[i]))
      l[n_l++] = (launch_ref){ev[i].launch_ns, ev[i].rank, i};
  if (rc == TP_OK) qsort(l, n_l, sizeof *l, by_rank_launch);
  sweep s = {r, n_r, 0, active, 0, groups};
  for (size_t i = 0; rc == TP_OK && i < n_l; ++i) rc = place_launch(&s, &l[i], i);
  free(l);
  free(active);
  return rc;
}

static const char *verdict_of(const tp_profile_schedule *s) {
  const size_t counts[] = {s->nccl_kernels, s->peer_copies, s->sm_copy_kernels,
                           s->multicast_kernels};
  static const char *const words[] = {"nccl", "copy-engine", "sm-copy", "multicast"};
  const char *only = "none";
  int kinds = 0;
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; ++i)
    if (counts[i]) {
      only = words[i];
      ++kinds;
    }
  return kinds > 1 ? "mixed" : only;
}

static void count_transport(tp_profile_schedule *s, const tp_event *e) {
  switch (tp_profile_transport_of(e)) {
  case TP_TRANSPORT_NCCL: ++s->nccl_kernels; break;
  case TP_TRANSPORT_COPY_ENGINE: ++s->peer_copies; break;
  case TP_TRANSPORT_SM_COPY: ++s->sm_copy_kernels; break;
  case TP_TRANSPORT_MULTICAST: ++s->multicast_kernels; break;
  case TP_TRANSPORT_NONE: break;
  }
}

/* Fills a schedule row from the events its ranges launched. */
static tp_rc summarise_group(const tp_event *ev, const group *g, tp_profile_schedule *s) {
  tp_event *mine = malloc(g->n * sizeof *mine);
  span *gemm = malloc(g->n * sizeof *gemm);
  tp_rc rc = mine && gemm ? TP_OK : TP_FAIL(TP_EOOM, "profile schedules: no memory");
  size_t n_gemm = 0;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i = 0; rc == TP_OK && i < g->n; ++i) {
    const tp_event *e = &ev[g->events[i]];
    mine[i] = as_counted(e);
    count_transport(s, e);
    if (e->type == TP_EV_KERNEL && e->category == TP_CAT_GEMM && e->end_ns > e->start_ns)
      gemm[n_gemm++] = (span){e->start_ns, e->end_ns};
    if (e->start_ns < lo) lo = e->start_ns;
    if (e->end_ns > hi) hi = e->end_ns;
  }
  tp_overlap o = {0};
  if (rc == TP_OK) rc = tp_overlap_compute(mine, g->n, s->rank, lo, hi > lo ? hi : lo, &o);
  s->device_events = g->n;
  s->comm_ns = o.comm_ns;
  s->overlap_ns = o.overlap_ns;
  s->gemm_ns = union_length(gemm, n_gemm);
  s->verdict = verdict_of(s);
  free(mine);
  free(gemm);
  return rc;
}

/* One row per group that launched something, in (rank, name) order. */
static tp_rc build_rows(const tp_event *ev, const named_range *r, size_t n_r, group *groups,
                        size_t n_g, tp_profile_schedule **out, size_t *n_out) {
  tp_profile_schedule *rows = calloc(n_g ? n_g : 1, sizeof *rows);
  if (!rows) return TP_FAIL(TP_EOOM, "profile schedules: no memory for %zu rows", n_g);
  for (size_t i = 0; i < n_r; ++i) {
    tp_profile_schedule *s = &rows[r[i].group];
    s->name = r[i].name;
    s->rank = r[i].rank;
    ++s->ranges;
  }
  size_t k = 0;
  tp_rc rc = TP_OK;
  for (size_t g = 0; rc == TP_OK && g < n_g; ++g) {
    if (groups[g].n == 0) continue; /* ranges that launched nothing are not schedules */
    rows[k] = rows[g];
    rc = summarise_group(ev, &groups[g], &rows[k++]);
  }
  if (rc != TP_OK || k == 0) {
    free(rows);
    rows = NULL;
    k = 0;
  }
  *out = rows;
  *n_out = k;
  return rc;
}

tp_rc tp_profile_schedules(const tp_event *ev, size_t n, const tp_profile_window *w, size_t n_w,
                           tp_profile_schedule **out, size_t *n_out) {
  if (!out || !n_out || (n > 0 && !ev) || (n_w > 0 && !w))
    return TP_FAIL(TP_EUSAGE, "tp_profile_schedules: NULL argument");
  *out = NULL;
  *n_out = 0;
  window_set set;
  TP_TRY(window_set_build(w, n_w, &set));
  named_range *r = malloc((n ? n : 1) * sizeof *r);
  if (!r) {
    window_set_free(&set);
    return TP_FAIL(TP_EOOM, "profile schedules: no memory for %zu ranges", n);
  }
  size_t n_r = collect_named_ranges(ev, n, &set, r);
  size_t n_g = number_groups(r, n_r);
  group *groups = calloc(n_g ? n_g : 1, sizeof *groups);
  tp_rc rc = groups ? TP_OK : TP_FAIL(TP_EOOM, "profile schedules: no memory for %zu names", n_g);
  if (rc == TP_OK) rc = place_launches(ev, n, &set, r, n_r, groups);
  if (rc == TP_OK) rc = build_rows(ev, r, n_r, groups, n_g, out, n_out);
  for (size_t g = 0; groups && g < n_g; ++g) free(groups[g].events);
  free(groups);
  free(r);
  window_set_free(&set);
  return rc;
}

/* ---- kernel summary --------------------------------------------------------------------- */

typedef struct kernel_time {
  const char *name;
  uint64_t ns;
  tp_event_category category;
} kernel_time;

static int by_name(const void *a, const void *b) {
  return strcmp(((const kernel_time *)a)->name, ((const kernel_time *)b)->name);
}

static int by_total_desc(const void *a, const void *b) {
  const tp_profile_kernel *x = a, *y = b;
  if (x->total_ns != y->total_ns) return x->total_ns > y->total_ns ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Groups name-sorted kernel times into rows (rows holds room for n); returns the count. */
static size_t group_kernels(const kernel_time *k, size_t n, tp_profile_kernel *rows) {
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (m == 0 || strcmp(rows[m - 1].name, k[i].name) != 0)
      rows[m++] = (tp_profile_kernel){.name = k[i].name, .category = k[i].category};
    rows[m - 1].count++;
    rows[m - 1].total_ns += k[i].ns;
  }
  return m;
}

tp_rc tp_profile_kernel_summary_of(const tp_event *ev, size_t n, const tp_profile_window *w,
                                   size_t n_w, tp_profile_kernel **out, size_t *n_out) {
  if (!out || !n_out || (n > 0 && !ev) || (n_w > 0 && !w))
    return TP_FAIL(TP_EUSAGE, "tp_profile_kernel_summary_of: NULL argument");
  *out = NULL;
  *n_out = 0;
  window_set set;
  TP_TRY(window_set_build(w, n_w, &set));
  kernel_time *k = malloc((n ? n : 1) * sizeof *k);
  tp_profile_kernel *rows = malloc((n ? n : 1) * sizeof *rows);
  if (!k || !rows) {
    free(k);
    free(rows);
    window_set_free(&set);
    return TP_FAIL(TP_EOOM, "kernel summary: no memory for %zu events", n);
  }
  size_t m = 0;
  for (size_t i = 0; i < n; ++i)
    if (ev[i].type == TP_EV_KERNEL && window_set_holds_launch(&set, &ev[i]))
      k[m++] = (kernel_time){ev[i].name ? ev[i].name : "",
                             ev[i].end_ns > ev[i].start_ns ? ev[i].end_ns - ev[i].start_ns : 0,
                             ev[i].category};
  window_set_free(&set);
  qsort(k, m, sizeof *k, by_name);
  size_t n_rows = group_kernels(k, m, rows);
  uint64_t total = 0;
  for (size_t i = 0; i < n_rows; ++i) total += rows[i].total_ns;
  for (size_t i = 0; i < n_rows; ++i) {
    rows[i].mean_ns = (double)rows[i].total_ns / (double)rows[i].count;
    rows[i].share_pct = total ? 100.0 * (double)rows[i].total_ns / (double)total : 0.0;
  }
  qsort(rows, n_rows, sizeof *rows, by_total_desc);
  free(k);
  if (n_rows == 0) {
    free(rows);
    rows = NULL;
  }
  *out = rows;
  *n_out = n_rows;
  return TP_OK;
}
