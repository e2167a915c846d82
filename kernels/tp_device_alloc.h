/*
 * tp_device_alloc.h — tpbench's own accounting of the device memory it
 * allocates: every cudaMalloc/cudaFree of tpbench's buffers goes through
 * tp_device_malloc/tp_device_free, which keep, per *owner*, the bytes it
 * holds and their high-water mark. The driver's reading (cudaMemGetInfo)
 * counts everything resident — the CUDA context, NCCL's own buffers, every
 * configuration of a case — so two configurations of one case cannot be
 * told apart by it; the ledger can.
 *
 * An owner is a tag (kind, index): the group's shared buffers, one case's
 * tensors, one configuration's own buffers (index: its matrix index), the
 * harness's own, or none. What an owner *holds*:
 *
 *   held = live bytes it allocated and has not freed
 *        + for each shared buffer of the group (symmetric workspace, stock
 *          scratch, bias scratch, cuBLASLt workspace) the largest request it
 *          made of that buffer: its *claim*.
 *
 * A claim is a share, not an allocation: the shared buffers grow
 * monotonically to the largest request of any configuration (and are
 * allocated under the group's owner), while a configuration is charged the
 * bytes its own plan asks for. Ops carve the shared buffers from offset 0,
 * so an owner's requests of one buffer alias: its claim is their maximum,
 * not their sum.
 *
 * The owner a plain tp_device_malloc or tp_device_claim charges is the
 * ledger's *current* owner, set by scopes (tp_device_enter/leave) around
 * the calls that allocate for someone — a case's tensors, a
 * configuration's prepare and steps — so the allocation sites stay plain
 * one-line calls. Buffers that belong to one owner whatever the scope (the
 * group's, the harness's) use tp_device_malloc_as.
 *
 * Each owner's peak is the high-water mark of its held bytes since it was
 * first charged or its peak was reset. A *watch* follows the joint held
 * bytes of a set of owners (a configuration and its case) and their
 * high-water mark between begin and end: the harness's alloc_peak_bytes.
 *
 * Two layers:
 * - the ledger (tp_alloc_*, tp_device_alloc.c, pure C: library
 *   tp_alloc_core, built with and without CUDA): the bookkeeping over an
 *   injected backend of allocate/free functions, so the CPU tests run it on
 *   host memory;
 * - the process's device ledger (tp_device_*, tp_device_alloc_cuda.c, in
 *   tp_kernels): one ledger over cudaMalloc/cudaFree, made on first use and
 *   kept for the life of the process. This module-level ledger is the only
 *   global state here; a mutex makes it safe to call from any thread.
 *
 * Memory another allocator makes for tpbench (NCCL's ncclMemAlloc, the
 * windows of kernels/tp_window.h) is *adopted*: recorded as its owner's
 * live bytes like the ledger's own allocations, and *disowned* before that
 * allocator frees it. The ledger never frees an adopted pointer itself.
 *
 * Errors: a free of a pointer the ledger does not hold (never allocated
 * through it, or freed already) is TP_EINTERNAL and frees nothing; so are a
 * free of an adopted pointer, a disown of one the ledger allocated or does
 * not hold, and an adoption of a pointer it holds already; a CUDA
 * failure is TP_ECUDA (TP_EOOM when the device is full) with the call, the
 * size and CUDA's text. 0 bytes allocate nothing and give NULL; freeing NULL
 * does nothing.
 */
#ifndef TP_DEVICE_ALLOC_H
#define TP_DEVICE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"

typedef enum tp_alloc_kind {
  TP_ALLOC_UNOWNED = 0, /* outside every scope */
  TP_ALLOC_GROUP,       /* the TP group: symmetric heap and pads, scratch, cuBLASLt workspace */
  TP_ALLOC_CASE,        /* the tensors of the case being measured (one at a time) */
  TP_ALLOC_CONFIG,      /* one configuration's own buffers and claims; index: its matrix index */
  TP_ALLOC_HARNESS,     /* the harness's own: reference copies, accumulators, trace marker */
  TP_ALLOC_TEST         /* tests' own owners */
} tp_alloc_kind;

typedef struct tp_alloc_owner {
  tp_alloc_kind kind;
  int64_t index; /* TP_ALLOC_CONFIG: the configuration's index; else 0 */
} tp_alloc_owner;

#define TP_ALLOC_OWNER(kind, index) ((tp_alloc_owner){(kind), (index)})

/* "group", "case", "configuration 7", ... into buf. */
void tp_alloc_owner_name(tp_alloc_owner owner, char *buf, size_t cap);

/* The group's shared buffers an owner claims a share of. */
typedef enum tp_alloc_shared {
  TP_SHARED_SYMM = 0, /* the symmetric workspace (dist_gemm) */
  TP_SHARED_SCRATCH,  /* the private stock-path scratch */
  TP_SHARED_BIAS,     /* the fp32 bias-gradient partial sums */
  TP_SHARED_GEMM,     /* the cuBLASLt workspace of the group's GEMM context */
  TP_SHARED_WINDOW,   /* the NCCL window scratch of the stock path's window variant */
  TP_SHARED_COUNT
} tp_alloc_shared;

/* What one owner holds now. */
typedef struct tp_alloc_stats {
  int64_t live_bytes;    /* allocated and not freed */
  int64_t live_count;    /* allocations behind live_bytes */
  int64_t claimed_bytes; /* the sum over shared buffers of its claim */
  int64_t held_bytes;    /* live_bytes + claimed_bytes */
  int64_t peak_bytes;    /* high-water mark of held_bytes since first charged or last reset */
} tp_alloc_stats;

/* ---- the ledger, over any backend (tp_alloc_core) ---------------------------------- */

/* The allocator underneath: allocate `bytes` (> 0) into *out, free what it gave. */
typedef struct tp_alloc_backend {
  tp_rc (*alloc)(void *ctx, void **out, size_t bytes);
  tp_rc (*free)(void *ctx, void *ptr);
  void *ctx;
} tp_alloc_backend;

typedef struct tp_alloc_ledger tp_alloc_ledger;

/* A ledger over backend (copied). Its current owner starts as TP_ALLOC_UNOWNED. */
TP_MUST_CHECK tp_rc tp_alloc_ledger_create(const tp_alloc_backend *backend, tp_alloc_ledger **out);

/* Frees the bookkeeping (not the allocations still live: their owners leaked them). */
void tp_alloc_ledger_destroy(tp_alloc_ledger *ledger);

/* Allocates bytes through the backend, charged to owner. */
TP_MUST_CHECK tp_rc tp_alloc_malloc(tp_alloc_ledger *ledger, tp_alloc_owner owner, void **out,
                                    size_t bytes);

/* Frees ptr through the backend and uncharges its owner; TP_EINTERNAL (nothing
 * freed) when the ledger does not hold ptr. */
TP_MUST_CHECK tp_rc tp_alloc_free(tp_alloc_ledger *ledger, void *ptr);

/* Records [ptr, +bytes) that another allocator made (bytes > 0) as owner's
 * live allocation; TP_EINTERNAL when the ledger holds ptr already. */
TP_MUST_CHECK tp_rc tp_alloc_adopt(tp_alloc_ledger *ledger, tp_alloc_owner owner, void *ptr,
                                   size_t bytes);

/* Forgets the adopted ptr (its allocator frees it) and uncharges its owner;
 * TP_EINTERNAL, nothing changed, when ptr is not an adopted allocation. */
TP_MUST_CHECK tp_rc tp_alloc_disown(tp_alloc_ledger *ledger, void *ptr);

/* Owner asks for `bytes` of a shared buffer: its claim on it becomes the
 * larger of the two. */
TP_MUST_CHECK tp_rc tp_alloc_claim(tp_alloc_ledger *ledger, tp_alloc_owner owner,
                                   tp_alloc_shared shared, size_t bytes);

/* Makes owner the current one and returns the one before (pass it to leave). */
tp_alloc_owner tp_alloc_enter(tp_alloc_ledger *ledger, tp_alloc_owner owner);
void tp_alloc_leave(tp_alloc_ledger *ledger, tp_alloc_owner previous);
tp_alloc_owner tp_alloc_current(tp_alloc_ledger *ledger);

/* Owner's figures (all zero for an owner never charged or released). */
void tp_alloc_stats_of(tp_alloc_ledger *ledger, tp_alloc_owner owner, tp_alloc_stats *out);

/* Live bytes and allocations over every owner. */
void tp_alloc_totals(tp_alloc_ledger *ledger, int64_t *live_bytes, int64_t *live_count);

/* Caps the live bytes over every owner at limit_bytes (0: no cap). An
 * allocation that would pass the cap allocates nothing and fails with
 * TP_EREJECT: "WHY: BYTES more bytes would bring this process's device
 * memory to X MiB, over its share of Y MiB". Adoptions are counted, never
 * refused (their memory exists already). What tpbench uses where several
 * ranks share one GPU (TPBENCH_TEST_SHARE_GPU): each rank's share of the
 * card, so a shape that cannot fit them all is rejected with the reason
 * instead of failing in the driver. why is copied (up to 159 characters). */
void tp_alloc_set_limit(tp_alloc_ledger *ledger, int64_t limit_bytes, const char *why);
int64_t tp_alloc_limit(tp_alloc_ledger *ledger);

/* Restarts owner's high-water mark at what it holds now. */
void tp_alloc_reset_peak(tp_alloc_ledger *ledger, tp_alloc_owner owner);

/* Forgets owner (its claims and figures) once it holds no allocation;
 * TP_EINTERNAL naming what it still holds otherwise (kept then). */
TP_MUST_CHECK tp_rc tp_alloc_release(tp_alloc_ledger *ledger, tp_alloc_owner owner);

enum { TP_ALLOC_WATCH_MAX = 4 };

/* Starts following the joint held bytes of owners[0..n) (n <= TP_ALLOC_WATCH_MAX,
 * distinct): the watch's peak starts at what they hold now. One watch at a
 * time per ledger (TP_EINTERNAL otherwise). */
TP_MUST_CHECK tp_rc tp_alloc_watch_begin(tp_alloc_ledger *ledger, const tp_alloc_owner *owners,
                                         int n);

/* Ends the watch: *peak is the most the owners held together while it ran. */
TP_MUST_CHECK tp_rc tp_alloc_watch_end(tp_alloc_ledger *ledger, int64_t *peak);

/* ---- the process's device ledger (tp_kernels) ---------------------------------------- */

/* The process's ledger over cudaMalloc/cudaFree; NULL only when there was no
 * host memory to make it (every tp_device_* call then fails with TP_EOOM). */
tp_alloc_ledger *tp_device_ledger(void);

/* cudaMalloc of bytes charged to the current owner, or to owner. */
/* tp_alloc_set_limit / tp_alloc_limit of the process's ledger (0 when there is none). */
TP_MUST_CHECK tp_rc tp_device_set_limit(int64_t limit_bytes, const char *why);
int64_t tp_device_limit(void);

/* Ranks sharing one GPU (TPBENCH_TEST_SHARE_GPU): caps this process's ledger
 * at its share of the device, measured once every rank has its CUDA context
 * and communicator (the caller meets its peers first): what it holds now
 * plus 90 % of the device's free memory split evenly over `ranks`. The
 * refusal's message names the ranks and the share; *share_bytes gets it. */
TP_MUST_CHECK tp_rc tp_device_limit_to_share(int ranks, int64_t *share_bytes);
TP_MUST_CHECK tp_rc tp_device_malloc(void **out, size_t bytes);
TP_MUST_CHECK tp_rc tp_device_malloc_as(tp_alloc_owner owner, void **out, size_t bytes);

/* Memory NCCL (or another allocator) made, adopted for the current owner or
 * for owner, and disowned before it is freed (tp_alloc_adopt, _disown). */
TP_MUST_CHECK tp_rc tp_device_adopt(void *ptr, size_t bytes);
TP_MUST_CHECK tp_rc tp_device_adopt_as(tp_alloc_owner owner, void *ptr, size_t bytes);
TP_MUST_CHECK tp_rc tp_device_disown(void *ptr);

/* cudaFree through the ledger (NULL: nothing). */
TP_MUST_CHECK tp_rc tp_device_free(void *ptr);

/* For teardown paths that cannot return an error: tp_device_free, a
 * failure logged as a warning (subsystem "alloc") with its message. */
void tp_device_release(void *ptr);

/* The current owner asks for bytes of a shared buffer (tp_alloc_claim). */
TP_MUST_CHECK tp_rc tp_device_claim(tp_alloc_shared shared, size_t bytes);

/* Scopes on the device ledger (tp_alloc_enter / tp_alloc_leave). */
tp_alloc_owner tp_device_enter(tp_alloc_owner owner);
void tp_device_leave(tp_alloc_owner previous);

void tp_device_stats(tp_alloc_owner owner, tp_alloc_stats *out);
TP_MUST_CHECK tp_rc tp_device_owner_release(tp_alloc_owner owner);
TP_MUST_CHECK tp_rc tp_device_watch_begin(const tp_alloc_owner *owners, int n);
TP_MUST_CHECK tp_rc tp_device_watch_end(int64_t *peak);

#endif /* TP_DEVICE_ALLOC_H */
