/*
 * nvtx_ranges.c — tp_nvtx_push/pop over NVTX v3 (header-only, from the CUDA
 * toolkit), in one domain named "tpbench" (see tp_nvtx.h).
 *
 * The domain keeps tpbench's ranges apart from NCCL's and cuBLAS's own, so
 * the collector can tell an iteration range from a library's. The domain is
 * created once, on the first call; that first call is also the moment NVTX
 * looks for a tool (NVTX_INJECTION64_PATH), which is why the collector, which
 * sets that variable, asks tp_nvtx_used() before it starts and then calls
 * tp_nvtx_attach() to make the moment happen under its control.
 *
 * The gate (tp_nvtx.h) keeps a running collector's NVTX recording out of
 * untraced windows: with a collector attached and no window open, push and
 * pop return before any NVTX call. Each thread keeps a stack of one bit per
 * open push (recorded or skipped), so a pop matches its own push even when
 * the window opened or closed in between; pushes nested deeper than 64 are
 * always recorded.
 */
#include "collectors/tp_nvtx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#ifndef TP_NVTX_DISABLED
#include <nvtx3/nvToolsExt.h>
#endif

static pthread_once_t domain_once = PTHREAD_ONCE_INIT;
static atomic_int nvtx_used;
static atomic_int gate_closed_outside; /* a collector runs: record inside its windows only */
static atomic_int window_open;

enum { MAX_TRACKED_DEPTH = 64 };

/* This thread's pushes: bit d of `recorded` says whether push d reached NVTX. */
static _Thread_local uint64_t recorded_bits;
static _Thread_local int depth, open_recorded;

void tp_nvtx_gate(int collector_attached) {
  atomic_store(&gate_closed_outside, !!collector_attached);
}

void tp_nvtx_window(int open) { atomic_store(&window_open, !!open); }

int tp_nvtx_recording(void) {
  return !atomic_load(&gate_closed_outside) || atomic_load(&window_open);
}

int tp_nvtx_open_ranges(void) { return open_recorded; }

/* Decides and remembers whether this push is recorded. */
static int push_recorded(void) {
  int rec = tp_nvtx_recording();
  if (depth < MAX_TRACKED_DEPTH) {
    uint64_t bit = 1ull << depth;
    recorded_bits = rec ? recorded_bits | bit : recorded_bits & ~bit;
  } else {
    rec = 1;
  }
  ++depth;
  open_recorded += rec;
  return rec;
}

/* Whether the matching push was recorded (a pop without a push: recorded). */
static int pop_recorded(void) {
  if (depth == 0) return 1;
  --depth;
  int rec = depth >= MAX_TRACKED_DEPTH || ((recorded_bits >> depth) & 1u);
  open_recorded -= rec;
  return rec;
}

#ifndef TP_NVTX_DISABLED
static nvtxDomainHandle_t domain;

static void create_domain(void) {
  atomic_store(&nvtx_used, 1);
  nvtxInitialize(NULL);
  /* Without a tool NVTX's stubs return a null handle: that is how attach knows. */
  domain = nvtxDomainCreateA("tpbench");
}

void tp_nvtx_push(const char *name) {
  pthread_once(&domain_once, create_domain);
  if (!push_recorded()) return;
  nvtxEventAttributes_t attr = {0};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = name ? name : "";
  nvtxDomainRangePushEx(domain, &attr);
}

void tp_nvtx_pop(void) {
  pthread_once(&domain_once, create_domain);
  if (pop_recorded()) nvtxDomainRangePop(domain);
}

int tp_nvtx_attach(void) {
  pthread_once(&domain_once, create_domain);
  return domain != NULL;
}

#else /* built without CUDA: no NVTX, nothing to attach to */

static void create_domain(void) { atomic_store(&nvtx_used, 1); }

void tp_nvtx_push(const char *name) {
  (void)name;
  pthread_once(&domain_once, create_domain);
  (void)push_recorded();
}

void tp_nvtx_pop(void) {
  pthread_once(&domain_once, create_domain);
  (void)pop_recorded();
}

int tp_nvtx_attach(void) {
  pthread_once(&domain_once, create_domain);
  return 0;
}

#endif

int tp_nvtx_used(void) { return atomic_load(&nvtx_used); }
