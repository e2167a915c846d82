/*
 * tp_agree.h — allocations that every rank of a TP group makes or none
 * makes. A collective that follows an allocation (ncclCommWindowRegister
 * after ncclMemAlloc, the symmetric workspace's handle exchange after its
 * cudaMalloc) hangs its peers when one rank's allocation failed and that
 * rank returned: they wait in the collective until a watchdog ends the job.
 * So each rank's local outcome is exchanged first (tp_agree_alloc), and
 * only when every rank has its memory does anyone go on; otherwise every
 * rank frees what it got and fails alike, with a reason naming the ranks
 * that failed and the size, and the caller fails the configuration.
 *
 * The exchange is the group's own all-gather (the bench's TCP rendezvous,
 * tp_symm.h's tp_exchange_fn): it needs no device memory, which is what
 * the failing rank lacks, and carries the failing rank's message.
 *
 * The test-only knob TPBENCH_TEST_FAIL_ALLOC=RANK[:MIN_BYTES] plants the
 * fault: rank RANK's window allocations (ncclMemAlloc) and symmetric
 * workspace growths of at least MIN_BYTES (0 when not given) fail as out of
 * memory without asking the allocator. Off when unset or empty; recorded in
 * the run (runs.test_knobs).
 *
 * Pure C (library tp_agree_core): the CPU tests run the agreement over
 * threads standing in for ranks.
 */
#ifndef TP_AGREE_H
#define TP_AGREE_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An all-gather of bytes from every rank into recv (world * bytes, rank
 * order): the shape of tp_symm.h's tp_exchange_fn. */
typedef tp_rc (*tp_agree_exchange_fn)(void *ctx, const void *send, size_t bytes, void *recv);

enum { TP_AGREE_MAX_WORLD = 16 };

/* Collective. Each rank's local outcome of allocating `bytes` for `what`
 * (local: TP_OK or the failure, whose message is this thread's last one),
 * exchanged. TP_OK when every rank's is TP_OK. Otherwise, on every rank,
 * the first failing rank's code with "WHAT of BYTES bytes failed on rank(s)
 * R[, R...] of W: rank R: ITS MESSAGE; every rank frees what it allocated"
 * (the caller then frees its own). A failed exchange is returned as it is
 * (the ranks may disagree then: the exchange itself broke). */
TP_MUST_CHECK tp_rc tp_agree_alloc(tp_agree_exchange_fn exchange, void *ctx, int rank, int world,
                                   tp_rc local, const char *what, size_t bytes);

/* The planted allocation failure (TPBENCH_TEST_FAIL_ALLOC). */
typedef struct tp_fail_alloc {
  int rank;           /* -1: off */
  uint64_t min_bytes; /* allocations of at least this many bytes fail */
} tp_fail_alloc;

#define TP_FAIL_ALLOC_ENV "TPBENCH_TEST_FAIL_ALLOC"

/* Parses value (NULL or "": off) for a group of world ranks; TP_EUSAGE
 * naming the variable and the expected form otherwise. */
TP_MUST_CHECK tp_rc tp_fail_alloc_parse(const char *value, int world, tp_fail_alloc *out);

/* Whether the knob fails rank's allocation of bytes. */
int tp_fail_alloc_hits(const tp_fail_alloc *knob, int rank, size_t bytes);

/* TP_OK when the knob spares rank's allocation of bytes for what; else
 * TP_EOOM saying the failure is the planted one. */
TP_MUST_CHECK tp_rc tp_fail_alloc_check(const tp_fail_alloc *knob, int rank, const char *what,
                                        size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* TP_AGREE_H */
