/*
 * tp_agree.c — the allocation agreement of a TP group and the planted
 * allocation failure (tp_agree.h). Each rank sends a fixed-size outcome
 * (code and message); every rank reads the same array, so every rank
 * reaches the same verdict with the same words.
 */
#include "kernels/tp_agree.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

enum { OUTCOME_TEXT = 300 };

typedef struct alloc_outcome {
  int32_t rc;
  char text[OUTCOME_TEXT];
} alloc_outcome;

/* "1, 3" into buf: the ranks whose outcome failed. */
static void failing_ranks(const alloc_outcome *all, int world, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int r = 0; r < world && used < cap; ++r) {
    if (all[r].rc == TP_OK) continue;
    int n = snprintf(buf + used, cap - used, "%s%d", used ? ", " : "", r);
    if (n < 0) break;
    used += (size_t)n;
  }
}

tp_rc tp_agree_alloc(tp_agree_exchange_fn exchange, void *ctx, int rank, int world, tp_rc local,
                     const char *what, size_t bytes) {
  if (world < 1 || world > TP_AGREE_MAX_WORLD || rank < 0 || rank >= world)
    return TP_FAIL(TP_EINTERNAL, "allocation agreement of rank %d in %d ranks (at most %d)", rank,
                   world, TP_AGREE_MAX_WORLD);
  alloc_outcome mine, all[TP_AGREE_MAX_WORLD];
  memset(&mine, 0, sizeof mine);
  mine.rc = (int32_t)local;
  if (local != TP_OK) snprintf(mine.text, sizeof mine.text, "%s", tp_last_message());
  TP_TRY(exchange(ctx, &mine, sizeof mine, all));
  int first = -1;
  for (int r = 0; r < world && first < 0; ++r)
    if (all[r].rc != TP_OK) first = r;
  if (first < 0) return TP_OK;
  all[first].text[sizeof all[first].text - 1] = '\0';
  char ranks[TP_AGREE_MAX_WORLD * 4];
  failing_ranks(all, world, ranks, sizeof ranks);
  return TP_FAIL((tp_rc)all[first].rc,
                 "%s of %zu bytes failed on rank%s %s of %d: rank %d: %s; every rank frees what "
                 "it allocated",
                 what, bytes, strchr(ranks, ',') ? "s" : "", ranks, world, first, all[first].text);
}

/* ---- the planted failure -------------------------------------------------------------- */

/* A run of decimal digits at *p of at most max, the end in *p; 0 when there
 * is none or it is larger (strtoul's blanks, sign and saturation would let
 * " 1" or a number past max through as something else). */
static int parse_digits(const char **p, uint64_t max, uint64_t *out) {
  const char *q = *p;
  uint64_t v = 0;
  for (; *q >= '0' && *q <= '9'; ++q) {
    const uint64_t d = (uint64_t)(*q - '0');
    if (v > (max - d) / 10) return 0;
    v = v * 10 + d;
  }
  if (q == *p) return 0;
  *p = q;
  *out = v;
  return 1;
}

tp_rc tp_fail_alloc_parse(const char *value, int world, tp_fail_alloc *out) {
  out->rank = -1;
  out->min_bytes = 0;
  if (!value || !*value) return TP_OK;
  const char *end = value;
  uint64_t rank = 0, min_bytes = 0;
  int ok = parse_digits(&end, UINT64_MAX, &rank) && world > 0 && rank < (uint64_t)world;
  if (ok && *end == ':') {
    ++end;
    ok = parse_digits(&end, UINT64_MAX, &min_bytes);
  }
  if (!ok || *end != '\0')
    return TP_FAIL(TP_EUSAGE,
                   "%s=%s: expected RANK[:MIN_BYTES] (a rank below %d whose window and "
                   "symmetric-workspace allocations of at least MIN_BYTES fail; test only)",
                   TP_FAIL_ALLOC_ENV, value, world);
  out->rank = (int)rank;
  out->min_bytes = min_bytes;
  return TP_OK;
}

int tp_fail_alloc_hits(const tp_fail_alloc *k, int rank, size_t bytes) {
  return k->rank >= 0 && k->rank == rank && (uint64_t)bytes >= k->min_bytes;
}

tp_rc tp_fail_alloc_check(const tp_fail_alloc *k, int rank, const char *what, size_t bytes) {
  if (!tp_fail_alloc_hits(k, rank, bytes)) return TP_OK;
  return TP_FAIL(TP_EOOM,
                 "%s of %zu bytes on rank %d: the planted failure of %s=%d:%" PRIu64 " (test only)",
                 what, bytes, rank, TP_FAIL_ALLOC_ENV, k->rank, k->min_bytes);
}
