/*
 * tp_bootstrap.c — the two-stage (rounds, then iterations) bootstrap of
 * tp_bootstrap.h. Samples are grouped by round once; each resample draws
 * rounds, then iterations inside each drawn round, into one scratch array
 * whose median is taken by selection (linear; n is a few hundred at most per
 * series).
 */
#include "common/tp_bootstrap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64: small, fast, good enough for resampling indices. */
static uint64_t next_u64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int draw(uint64_t *state, int n) { return (int)(next_u64(state) % (uint64_t)n); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void swap_at(double *v, int i, int j) {
  const double t = v[i];
  v[i] = v[j];
  v[j] = t;
}

/* Rearranges v[0..n) so that v[k] is the value a sort would put there, with
 * nothing larger before it (Hoare's selection, median-of-three pivots). */
static void select_kth(double *v, int n, int k) {
  int lo = 0, hi = n - 1;
  while (hi > lo) {
    const int mid = lo + (hi - lo) / 2;
    if (v[mid] < v[lo]) swap_at(v, mid, lo);
    if (v[hi] < v[lo]) swap_at(v, hi, lo);
    if (v[hi] < v[mid]) swap_at(v, hi, mid);
    const double pivot = v[mid];
    int i = lo, j = hi;
    while (i <= j) {
      while (v[i] < pivot) i++;
      while (v[j] > pivot) j--;
      if (i <= j) swap_at(v, i++, j--);
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return; /* v[j+1 .. i-1] all equal the pivot */
  }
}

/* The median of v[0..n), v rearranged. The same value sorting gives, in
 * linear time: the bootstrap takes 2000 medians per interval and every
 * report row has two intervals, where sorting was most of a report's time. */
static double median_of(double *v, int n) {
  const int k = n / 2;
  select_kth(v, n, k);
  if (n % 2) return v[k];
  double lower = v[0]; /* the largest of v[0..k): the (k-1)-th value */
  for (int i = 1; i < k; i++)
    if (v[i] > lower) lower = v[i];
  return 0.5 * (lower + v[k]);
}

/* The samples of one series grouped by round: start[r] .. start[r+1] in by_round. */
typedef struct grouped {
  double *by_round;
  int *start; /* n_rounds + 1 */
  int n;
} grouped;

static void grouped_free(grouped *g) {
  free(g->by_round);
  free(g->start);
  g->by_round = NULL;
  g->start = NULL;
}

static tp_rc group_series(const tp_round_series *s, int n_rounds, grouped *g) {
  memset(g, 0, sizeof *g);
  if (!s || !s->x || s->n < 1) return TP_FAIL(TP_EINTERNAL, "bootstrap: no samples");
  g->by_round = malloc(sizeof(double) * (size_t)s->n);
  g->start = calloc((size_t)n_rounds + 1, sizeof(int));
  if (!g->by_round || !g->start) {
    grouped_free(g);
    return TP_FAIL(TP_EOOM, "bootstrap: no memory for %d samples", s->n);
  }
  for (int i = 0; i < s->n; ++i) {
    int r = s->round ? s->round[i] : 0;
    if (r < 0 || r >= n_rounds || !isfinite(s->x[i])) {
      grouped_free(g);
      return TP_FAIL(TP_EINTERNAL, "bootstrap: sample %d has round %d of %d or is not finite", i, r,
                     n_rounds);
    }
    g->start[r + 1]++;
  }
  for (int r = 0; r < n_rounds; ++r) g->start[r + 1] += g->start[r];
  int *fill = malloc(sizeof(int) * (size_t)n_rounds);
  if (!fill) {
    grouped_free(g);
    return TP_FAIL(TP_EOOM, "bootstrap: no memory");
  }
  memcpy(fill, g->start, sizeof(int) * (size_t)n_rounds);
  for (int i = 0; i < s->n; ++i) g->by_round[fill[s->round ? s->round[i] : 0]++] = s->x[i];
  free(fill);
  g->n = s->n;
  return TP_OK;
}

static int round_size(const grouped *g, int r) { return g->start[r + 1] - g->start[r]; }

/* One resample of g over the drawn rounds, into out; returns its median. */
static double resample_median(const grouped *g, const int *rounds, int n_drawn, uint64_t *state,
                              double *out) {
  int k = 0;
  for (int d = 0; d < n_drawn; ++d) {
    const int r = rounds[d], size = round_size(g, r);
    const double *src = g->by_round + g->start[r];
    for (int i = 0; i < size; ++i) out[k++] = src[draw(state, size)];
  }
  return median_of(out, k);
}

static tp_rc check_level(double level) {
  if (!(level > 0.0 && level < 1.0)) return TP_FAIL(TP_EINTERNAL, "bootstrap: level %g", level);
  return TP_OK;
}

/* Percentile interval of stats[0..n). */
static void percentile_interval(double *stats, int n, double level, tp_interval *out) {
  qsort(stats, (size_t)n, sizeof *stats, cmp_double);
  const double tail = (1.0 - level) / 2.0;
  int lo = (int)floor(tail * (n - 1)), hi = (int)ceil((1.0 - tail) * (n - 1));
  out->lo = stats[lo];
  out->hi = stats[hi];
}

/* The rounds that hold samples in every given series. */
static int common_rounds(const grouped *a, const grouped *b, int n_rounds, int *rounds) {
  int n = 0;
  for (int r = 0; r < n_rounds; ++r)
    if (round_size(a, r) > 0 && (!b || round_size(b, r) > 0)) rounds[n++] = r;
  return n;
}

typedef struct boot_state {
  grouped a, b;
  int *rounds, *drawn;
  double *scratch, *stats;
} boot_state;

static void boot_free(boot_state *st) {
  grouped_free(&st->a);
  grouped_free(&st->b);
  free(st->rounds);
  free(st->drawn);
  free(st->scratch);
  free(st->stats);
}

static tp_rc boot_alloc(boot_state *st, int n_rounds, int n_max) {
  st->rounds = malloc(sizeof(int) * (size_t)n_rounds);
  st->drawn = malloc(sizeof(int) * (size_t)n_rounds);
  /* a resample of drawn rounds can repeat the largest round n_rounds times */
  st->scratch = malloc(sizeof(double) * (size_t)n_max * (size_t)n_rounds);
  st->stats = malloc(sizeof(double) * TP_BOOT_RESAMPLES);
  if (!st->rounds || !st->drawn || !st->scratch || !st->stats)
    return TP_FAIL(TP_EOOM, "bootstrap: no memory");
  return TP_OK;
}

static void draw_rounds(const int *rounds, int n, uint64_t *state, int *drawn) {
  for (int d = 0; d < n; ++d) drawn[d] = rounds[draw(state, n)];
}

tp_rc tp_boot_median(const tp_round_series *s, int n_rounds, double level, uint64_t seed,
                     tp_interval *out) {
  TP_TRY(check_level(level));
  if (n_rounds < 1) return TP_FAIL(TP_EINTERNAL, "bootstrap: %d rounds", n_rounds);
  boot_state st;
  memset(&st, 0, sizeof st);
  tp_rc rc = group_series(s, n_rounds, &st.a);
  if (rc == TP_OK) rc = boot_alloc(&st, n_rounds, s->n);
  if (rc == TP_OK) {
    const int n_used = common_rounds(&st.a, NULL, n_rounds, st.rounds);
    uint64_t state = seed;
    memcpy(st.scratch, st.a.by_round, sizeof(double) * (size_t)s->n);
    out->point = median_of(st.scratch, s->n);
    for (int b = 0; b < TP_BOOT_RESAMPLES; ++b) {
      draw_rounds(st.rounds, n_used, &state, st.drawn);
      st.stats[b] = resample_median(&st.a, st.drawn, n_used, &state, st.scratch);
    }
    percentile_interval(st.stats, TP_BOOT_RESAMPLES, level, out);
    out->rounds_used = n_used;
  }
  boot_free(&st);
  return rc;
}

tp_rc tp_boot_ratio(const tp_round_series *a, const tp_round_series *b, int n_rounds, double level,
                    uint64_t seed, tp_interval *out) {
  TP_TRY(check_level(level));
  if (n_rounds < 1) return TP_FAIL(TP_EINTERNAL, "bootstrap: %d rounds", n_rounds);
  boot_state st;
  memset(&st, 0, sizeof st);
  tp_rc rc = group_series(a, n_rounds, &st.a);
  if (rc == TP_OK) rc = group_series(b, n_rounds, &st.b);
  if (rc == TP_OK) rc = boot_alloc(&st, n_rounds, a->n > b->n ? a->n : b->n);
  int n_used = 0;
  if (rc == TP_OK) {
    n_used = common_rounds(&st.a, &st.b, n_rounds, st.rounds);
    if (n_used == 0) rc = TP_FAIL(TP_EINTERNAL, "bootstrap: the two series share no round");
  }
  if (rc == TP_OK) {
    memcpy(st.scratch, st.a.by_round, sizeof(double) * (size_t)a->n);
    const double ma = median_of(st.scratch, a->n);
    memcpy(st.scratch, st.b.by_round, sizeof(double) * (size_t)b->n);
    out->point = ma / median_of(st.scratch, b->n);
    uint64_t state = seed;
    for (int k = 0; k < TP_BOOT_RESAMPLES; ++k) {
      draw_rounds(st.rounds, n_used, &state, st.drawn);
      const double num = resample_median(&st.a, st.drawn, n_used, &state, st.scratch);
      st.stats[k] = num / resample_median(&st.b, st.drawn, n_used, &state, st.scratch);
    }
    percentile_interval(st.stats, TP_BOOT_RESAMPLES, level, out);
    out->rounds_used = n_used;
  }
  boot_free(&st);
  return rc;
}
