/*
 * link_latency.h — the per-call latencies `tpbench link` times beside its bandwidth sweep:
 * the costs a fused op pays per op and per chunk whatever its bytes, which `tpbench project`
 * reads into its pipeline model (report/tp_project.h, point 6):
 *   barrier          the fused op's barrier kernel across every rank of the group;
 *   flag_round_trip  a flag raised in a peer's pad, awaited and lowered there, an empty kernel
 *                    launched behind the wait, and a flag raised back: two handoffs of the
 *                    kind between a chunk's push and its consumer (ranks in pairs 0-1, 2-3...);
 *   flag_wait        a rank's own flag raised, a wait that finds it raised, its reset and an
 *                    empty kernel: a dependency that is already met.
 * Flags go through the stream memory operations the fused schedules use where the driver
 * offers them, else the signal kernels, as tp_linear_fused.c raises and awaits them.
 */
#ifndef TP_LINK_LATENCY_H
#define TP_LINK_LATENCY_H

#include <stddef.h>

#include "common/tp_error.h"
#include "kernels/tp_group.h"

typedef enum {
  TP_LATENCY_BARRIER = 0,
  TP_LATENCY_FLAG_ROUND_TRIP,
  TP_LATENCY_FLAG_WAIT,
  TP_LATENCY_KINDS
} tp_latency_kind;

/* The name stored as the point's layer ("barrier", "flag_round_trip", "flag_wait"). */
const char *tp_latency_name(tp_latency_kind kind);

/* The bytes stored with the point: 0 for the barrier, a flag's 4 otherwise. */
size_t tp_latency_bytes(tp_latency_kind kind);

/* Enqueues one call of kind on g's comm stream (every rank of the group calls it the same
 * number of times). */
TP_MUST_CHECK tp_rc tp_latency_call(tp_group *g, tp_latency_kind kind);

#endif /* TP_LINK_LATENCY_H */
