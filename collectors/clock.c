/*
 * clock.c — the offset between a tracer's clock and CLOCK_REALTIME.
 *
 * Every rank traces in its own process, and the store lays the ranks of one
 * configuration side by side on one timeline. CUPTI on Linux stamps records
 * with clock_gettime(CLOCK_REALTIME) unless a tool registered its own clock,
 * so ranks on one host normally share a timebase already; measuring the
 * offset at collector start makes that an observed fact instead of an
 * assumption (and catches a registered timestamp callback). The method
 * (collectors/README.md): read CLOCK_REALTIME, the tracer clock, CLOCK_REALTIME
 * again; the tracer read happened somewhere in that bracket, so its midpoint
 * is the best estimate and half its width the uncertainty. Keep the tightest
 * of several brackets (a preemption only ever widens one).
 */
#include <time.h>

#include "collectors/tp_collector.h"

static int realtime_ns(uint64_t *ns) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return 0;
  *ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  return 1;
}

tp_rc tp_clock_offset_measure(uint64_t (*read_clock)(void *ctx), void *ctx, int samples,
                              tp_clock_offset *out) {
  if (!read_clock || !out || samples < 1)
    return TP_FAIL(TP_EUSAGE, "tp_clock_offset_measure: bad arguments (samples %d)", samples);
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < samples; ++i) {
    uint64_t before, after;
    if (!realtime_ns(&before)) return TP_FAIL(TP_EIO, "clock_gettime(CLOCK_REALTIME) failed");
    uint64_t tracer = read_clock(ctx);
    if (!realtime_ns(&after)) return TP_FAIL(TP_EIO, "clock_gettime(CLOCK_REALTIME) failed");
    if (tracer == 0) return TP_FAIL(TP_EIO, "the tracer clock could not be read");
    if (after < before) continue; /* the wall clock stepped back inside the bracket */
    uint64_t width = after - before;
    if (width >= best_width) continue;
    best_width = width;
    uint64_t mid = before + width / 2;
    out->offset_ns = tracer >= mid ? (int64_t)(tracer - mid) : -(int64_t)(mid - tracer);
    out->uncertainty_ns = (width + 1) / 2;
    out->realtime_ns = mid;
  }
  if (best_width == UINT64_MAX)
    return TP_FAIL(TP_EIO, "CLOCK_REALTIME went backwards in all %d samples", samples);
  return TP_OK;
}
