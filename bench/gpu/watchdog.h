/*
 * watchdog.h — the backstop for a window that never ends. The harness waits
 * for its windows with a deadline (harness.c), but a worker can also hang
 * where no wait can see it: inside a kernel launch whose queue is full behind
 * a dead peer's collective, or inside an NCCL call. A watchdog thread, armed
 * around each phase that runs GPU work, ends the worker with
 * TP_WATCHDOG_EXIT when the phase outlives its deadline; the parent then
 * records the configuration as timed out and starts new workers (resume.h).
 * It does not abort the NCCL communicator first: an abort unblocks the main
 * thread, which then ran on into the freed communicator and died of SIGSEGV
 * before the _exit (a TP 2 drift step hung by its peer); process exit tears
 * the CUDA context down, hung kernels included.
 */
#ifndef TP_BENCH_WATCHDOG_H
#define TP_BENCH_WATCHDOG_H

#include "bench/launch/resume.h"
#include "common/tp_error.h"
#include "kernels/tp_group.h"

typedef struct tp_watchdog tp_watchdog;

/* Starts the thread; it fires only while armed (group: the worker's, kept for its rank's words). */
TP_MUST_CHECK tp_rc tp_watchdog_start(tp_group *group, int rank, tp_watchdog **out);

/* Fires if not disarmed within seconds from now; what names the phase. */
void tp_watchdog_arm(tp_watchdog *w, double seconds, const char *what);
void tp_watchdog_disarm(tp_watchdog *w);

/* What the worker says on the watchdog's thread when it fires, before the
 * worker ends: host work only (the main
 * thread is stuck in the armed phase, perhaps holding CUDA's or NCCL's
 * locks), such as rank 0 recording what it had finished. what names the
 * phase. NULL fn: nothing (the default). */
typedef void (*tp_watchdog_last_words_fn)(void *ctx, const char *what);
void tp_watchdog_set_last_words(tp_watchdog *w, tp_watchdog_last_words_fn fn, void *ctx);

/* Stops and frees the thread (NULL is fine). */
void tp_watchdog_stop(tp_watchdog *w);

#endif
