/*
 * cupti_collector.c — the CUPTI Activity API collector of one worker process.
 *
 * The only file that includes cupti.h. Two seams, so that CUPTI's callbacks
 * stay short and the conversion runs on the collector's own thread:
 *
 *  collect  CUPTI asks for empty buffers and hands back full ones through two
 *           callbacks that may run on CUPTI's own thread at any time. They do
 *           the least possible: allocate an 8 MiB, 8-byte aligned buffer; queue a
 *           completed buffer and add CUPTI's dropped-record count, under a
 *           mutex held only for the queue operation. cuptiActivityFlushAll
 *           calls the completion callback synchronously, so the collector
 *           never holds that mutex (or any lock) while it flushes.
 *  process  At window end, after the flush, the queued buffers are taken in
 *           one step and converted outside the lock: kernel, copy, memset and
 *           sync records become tp_event with interned names; NVTX start and
 *           end markers are paired by id into ranges; API records are kept
 *           as correlation id -> launch time and stamped onto the device
 *           events (tp_event.launch_ns). Records whose interval misses the
 *           window are counted and dropped.
 *
 * Every activity kind (CONCURRENT_KERNEL, never the serialising KERNEL;
 * MEMCPY; MEMCPY2 for peer-to-peer; MEMSET; SYNCHRONIZATION; RUNTIME and
 * DRIVER, whose API records give each kernel and copy the host time of its
 * launch; MARKER for NVTX) is enabled only between window_begin and
 * window_end, so untraced, timed iterations do not pay for tracing. MARKER
 * is on for a moment at start as well: NVTX attaches to a tool once, at its
 * first call, and CUPTI is listening then; right after, it is disabled and
 * tpbench's own NVTX calls are gated off outside windows (tp_nvtx_gate), so
 * an untraced window makes no NVTX call into CUPTI at all. How NVTX reaches
 * CUPTI is described at setup_nvtx_injection().
 *
 * CUPTI allows one activity client per process, so there is one collector
 * per process; its buffer queue is file-global because the callbacks carry
 * no user pointer.
 */
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectors/tp_collector.h"
#include "collectors/tp_nvtx.h"
#include "common/tp_log.h"

/* Checks one CUPTI call; on failure records CUPTI's own text and returns TP_ECUPTI. */
#define TP_CUPTI(call)                                                                             \
  do {                                                                                             \
    CUptiResult tp_cupti_err_ = (call);                                                            \
    if (tp_cupti_err_ != CUPTI_SUCCESS) {                                                          \
      const char *tp_cupti_msg_ = NULL;                                                            \
      if (cuptiGetResultString(tp_cupti_err_, &tp_cupti_msg_) != CUPTI_SUCCESS)                    \
        tp_cupti_msg_ = NULL;                                                                      \
      return TP_FAIL(TP_ECUPTI, "%s failed: %s (%d)", #call,                                       \
                     tp_cupti_msg_ ? tp_cupti_msg_ : "unknown CUPTI error", (int)tp_cupti_err_);   \
    }                                                                                              \
  } while (0)

enum {
  BUFFER_BYTES = 8 << 20, /* per CUPTI buffer: a window of a large layer fits in a few */
  BUFFER_ALIGN = 8,       /* CUPTI requires 8-byte aligned records */
  BUFFER_HEADER = 64,     /* our queue link lives in front of what CUPTI sees */
  CLOCK_SAMPLES = 16
};

static const char LOG[] = "collect";

/* ---- collect: buffers and the completed-buffer queue ----------------------- */

typedef struct raw_buffer {
  struct raw_buffer *next;
  size_t valid; /* bytes of records CUPTI wrote */
} raw_buffer;

_Static_assert(sizeof(raw_buffer) <= BUFFER_HEADER, "queue header must fit in front of the buffer");

static struct {
  pthread_mutex_t lock;
  raw_buffer *head, *tail; /* completed buffers, oldest first */
  uint64_t dropped;        /* CUPTI's dropped-record counts, summed */
  size_t requested;        /* buffers handed to CUPTI */
  size_t alloc_failures;   /* buffer requests we could not satisfy */
} queue = {.lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_int collector_running;
static atomic_int nvtx_prepared; /* NVTX was initialised by a collector of this process */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  uint8_t *block = aligned_alloc(BUFFER_ALIGN, (size_t)BUFFER_HEADER + BUFFER_BYTES);
  pthread_mutex_lock(&queue.lock);
  if (block) ++queue.requested;
  else ++queue.alloc_failures; /* CUPTI then drops records and counts them */
  pthread_mutex_unlock(&queue.lock);
  *buffer = block ? block + BUFFER_HEADER : NULL;
  *size = block ? (size_t)BUFFER_BYTES : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  size_t dropped = 0;
  /* The context argument is always NULL since CUDA 6: ask the global queue. */
  if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) != CUPTI_SUCCESS) dropped = 0;
  raw_buffer *rb = buffer ? (raw_buffer *)(void *)(buffer - BUFFER_HEADER) : NULL;
  if (rb) {
    rb->next = NULL;
    rb->valid = valid;
  }
  pthread_mutex_lock(&queue.lock);
  queue.dropped += dropped;
  if (rb) {
    if (queue.tail) queue.tail->next = rb;
    else queue.head = rb;
    queue.tail = rb;
  }
  pthread_mutex_unlock(&queue.lock);
}

/* Takes every queued buffer; the caller owns the list. */
static raw_buffer *queue_take(uint64_t *dropped_total) {
  pthread_mutex_lock(&queue.lock);
  raw_buffer *list = queue.head;
  queue.head = queue.tail = NULL;
  *dropped_total = queue.dropped;
  pthread_mutex_unlock(&queue.lock);
  return list;
}

static void buffer_free(raw_buffer *rb) { free(rb); /* rb is the start of the aligned block */ }

/* ---- process: names, open markers, context -> device ---------------------- */

typedef struct strtab {
  char **slots; /* open addressing; NULL = empty */
  size_t cap, used;
} strtab;

typedef struct open_marker {
  uint32_t id;
  uint64_t start_ns;
  const char *name;
} open_marker;

typedef struct ctx_device {
  uint32_t context, device;
} ctx_device;

/* A runtime or driver API call: when the host issued the work of `correlation`. */
typedef struct api_call {
  uint32_t correlation;
  uint64_t start_ns;
} api_call;

struct tp_collector {
  int rank;
  int window_open;
  uint64_t win_start, win_end;
  uint64_t dropped_seen; /* queue.dropped at the last window end */
  tp_event *events;      /* the last window's events */
  size_t n_events, cap_events;
  strtab names;
  open_marker *open;
  size_t n_open, cap_open;
  ctx_device *ctx;
  size_t n_ctx, cap_ctx;
  api_call *calls; /* the window's API calls, by correlation id after sorting */
  size_t n_calls, cap_calls;
  tp_collector_stats stats;
  CUpti_SubscriberHandle subscriber; /* CUPTI's one subscriber slot, held while running */
  int subscribed;
};

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static int strtab_grow(strtab *t) {
  size_t cap = t->cap ? t->cap * 2 : 256;
  char **slots = calloc(cap, sizeof *slots);
  if (!slots) return 0;
  for (size_t i = 0; i < t->cap; ++i) {
    if (!t->slots[i]) continue;
    size_t j = hash_str(t->slots[i]) & (cap - 1);
    while (slots[j]) j = (j + 1) & (cap - 1);
    slots[j] = t->slots[i];
  }
  free(t->slots);
  t->slots = slots;
  t->cap = cap;
  return 1;
}

/* The one copy of `s` owned by the table, or NULL when out of memory. */
static const char *strtab_intern(strtab *t, const char *s) {
  if ((t->used + 1) * 2 > t->cap && !strtab_grow(t)) return NULL;
  size_t j = hash_str(s) & (t->cap - 1);
  for (; t->slots[j]; j = (j + 1) & (t->cap - 1))
    if (strcmp(t->slots[j], s) == 0) return t->slots[j];
  char *copy = strdup(s);
  if (!copy) return NULL;
  t->slots[j] = copy;
  ++t->used;
  return copy;
}

static void strtab_free(strtab *t) {
  for (size_t i = 0; i < t->cap; ++i) free(t->slots[i]);
  free(t->slots);
  memset(t, 0, sizeof *t);
}

/* Makes room for one more element in a growable array. */
static int reserve(void **items, size_t *cap, size_t n, size_t elem) {
  if (n < *cap) return 1;
  size_t ncap = *cap ? *cap * 2 : 64;
  void *p = realloc(*items, ncap * elem);
  if (!p) return 0;
  *items = p;
  *cap = ncap;
  return 1;
}

static tp_rc push_event(tp_collector *c, const tp_event *e) {
  if (!reserve((void **)&c->events, &c->cap_events, c->n_events, sizeof *c->events))
    return TP_FAIL(TP_EOOM, "collector: no memory for %zu events", c->n_events + 1);
  c->events[c->n_events++] = *e;
  return TP_OK;
}

static void note_context(tp_collector *c, uint32_t context, uint32_t device) {
  for (size_t i = 0; i < c->n_ctx; ++i)
    if (c->ctx[i].context == context) return;
  if (!reserve((void **)&c->ctx, &c->cap_ctx, c->n_ctx, sizeof *c->ctx))
    return; /* device stays -1 */
  c->ctx[c->n_ctx++] = (ctx_device){context, device};
}

static int context_device(const tp_collector *c, uint32_t context) {
  for (size_t i = 0; i < c->n_ctx; ++i)
    if (c->ctx[i].context == context) return (int)c->ctx[i].device;
  return -1;
}

static tp_event base_event(const tp_collector *c, tp_event_type type) {
  tp_event e = {0};
  e.rank = c->rank;
  e.device = -1;
  e.stream = TP_STREAM_NONE;
  e.type = type;
  e.category = TP_CAT_OTHER;
  e.copy_kind = TP_COPY_NONE;
  e.peer_device = -1;
  return e;
}

static tp_copy_kind copy_kind_of(uint8_t cupti_kind) {
  switch ((CUpti_ActivityMemcpyKind)cupti_kind) {
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return TP_COPY_HTOD;
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return TP_COPY_DTOH;
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return TP_COPY_HTOA;
  case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return TP_COPY_ATOH;
  case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return TP_COPY_ATOA;
  case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return TP_COPY_ATOD;
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return TP_COPY_DTOA;
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return TP_COPY_DTOD;
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return TP_COPY_HTOH;
  case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return TP_COPY_PTOP;
  default: return TP_COPY_NONE;
  }
}

/* Fixed labels of copies, so the name column is never empty. */
static const char *copy_label(tp_copy_kind kind) {
  static const char *const labels[] = {"memcpy",      "memcpy HtoD", "memcpy DtoH", "memcpy HtoA",
                                       "memcpy AtoH", "memcpy AtoA", "memcpy AtoD", "memcpy DtoA",
                                       "memcpy DtoD", "memcpy HtoH", "memcpy PtoP"};
  return (unsigned)kind < sizeof labels / sizeof labels[0] ? labels[kind] : "memcpy";
}

/* The fields CUPTI's device records (kernel, memcpy, peer copy, memset,
 * synchronisation) share, read once per record. The kernel, copy and memset
 * records are distinct structs whose common fields carry the same names,
 * hence the macro; a sync record has no device field. */
typedef struct device_record {
  uint64_t start_ns, end_ns;
  uint64_t bytes; /* copies and memsets; 0 otherwise */
  uint32_t context, stream, correlation;
  int device; /* CUDA ordinal; a sync record's comes from its context (-1: unknown) */
} device_record;

#define DEVICE_RECORD(r, nbytes)                                                                   \
  ((device_record){(r)->start, (r)->end, (nbytes), (r)->contextId, (r)->streamId,                  \
                   (r)->correlationId, (int)(r)->deviceId})

/* A record CUPTI could not time (both stamps 0 after a forced flush) is no interval. */
static int untimed(tp_collector *c, const device_record *r) {
  if (r->start_ns != 0 || r->end_ns != 0) return 0;
  ++c->stats.untimed_records;
  return 1;
}

/* An event of `type` with the record's interval, device, stream, bytes and
 * correlation id; each record kind adds what is its own. */
static tp_event device_event(const tp_collector *c, tp_event_type type, const device_record *r) {
  tp_event e = base_event(c, type);
  e.device = r->device;
  e.stream = r->stream;
  e.start_ns = r->start_ns;
  e.end_ns = r->end_ns;
  e.bytes = r->bytes;
  e.correlation = r->correlation;
  return e;
}

/* Remembers the record's context -> device (what sync records are placed by)
 * and keeps the event. */
static tp_rc push_device_event(tp_collector *c, const device_record *r, const tp_event *e) {
  note_context(c, r->context, (uint32_t)r->device);
  return push_event(c, e);
}

static tp_rc convert_kernel(tp_collector *c, const CUpti_ActivityKernel10 *k) {
  device_record r = DEVICE_RECORD(k, 0);
  if (untimed(c, &r)) return TP_OK;
  tp_event e = device_event(c, TP_EV_KERNEL, &r);
  e.name = strtab_intern(&c->names, k->name ? k->name : "<unnamed kernel>");
  if (!e.name) return TP_FAIL(TP_EOOM, "collector: no memory for a kernel name");
  e.category = tp_classify_kernel(e.name);
  return push_device_event(c, &r, &e);
}

/* A copy of direction `kind`: its category and fixed label follow from it. */
static tp_rc push_copy(tp_collector *c, const device_record *r, tp_copy_kind kind,
                       int peer_device) {
  tp_event e = device_event(c, TP_EV_MEMCPY, r);
  e.copy_kind = kind;
  e.category = tp_classify_copy(kind);
  e.name = copy_label(kind);
  e.peer_device = peer_device;
  return push_device_event(c, r, &e);
}

static tp_rc convert_memcpy(tp_collector *c, const CUpti_ActivityMemcpy6 *m) {
  device_record r = DEVICE_RECORD(m, m->bytes);
  if (untimed(c, &r)) return TP_OK;
  return push_copy(c, &r, copy_kind_of(m->copyKind), -1);
}

/* MEMCPY2 is CUPTI's peer-to-peer record: always communication. */
static tp_rc convert_peer_copy(tp_collector *c, const CUpti_ActivityMemcpyPtoP4 *p) {
  device_record r = DEVICE_RECORD(p, p->bytes);
  if (untimed(c, &r)) return TP_OK;
  return push_copy(c, &r, TP_COPY_PTOP,
                   (int)(p->srcDeviceId == p->deviceId ? p->dstDeviceId : p->srcDeviceId));
}

static tp_rc convert_memset(tp_collector *c, const CUpti_ActivityMemset4 *m) {
  device_record r = DEVICE_RECORD(m, m->bytes);
  if (untimed(c, &r)) return TP_OK;
  tp_event e = device_event(c, TP_EV_MEMSET, &r);
  e.name = "memset";
  return push_device_event(c, &r, &e);
}

static const char *sync_label(CUpti_ActivitySynchronizationType type) {
  switch (type) {
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "sync event";
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "sync stream wait event";
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "sync stream";
  case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "sync context";
  default: return "sync";
  }
}

/* Sync records name a context, not a device: the device comes from the
 * kernels and copies seen on that context (-1 until one is seen). */
static tp_rc convert_sync(tp_collector *c, const CUpti_ActivitySynchronization2 *s) {
  uint32_t stream =
      s->streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? TP_STREAM_NONE : s->streamId;
  device_record r = {
      s->start, s->end, 0, s->contextId, stream, s->correlationId, context_device(c, s->contextId)};
  if (untimed(c, &r)) return TP_OK;
  tp_event e = device_event(c, TP_EV_SYNC, &r);
  e.category = tp_classify_sync();
  e.name = sync_label(s->type);
  return push_event(c, &e);
}

/* "name" for tpbench's and the default domain, "domain:name" for others (NCCL, ...). */
static const char *range_name(tp_collector *c, const CUpti_ActivityMarker2 *m) {
  const char *name = m->name ? m->name : "";
  if (!m->domain || strcmp(m->domain, "tpbench") == 0) return strtab_intern(&c->names, name);
  char buf[512];
  snprintf(buf, sizeof buf, "%s:%s", m->domain, name);
  return strtab_intern(&c->names, buf);
}

static tp_rc open_range(tp_collector *c, const CUpti_ActivityMarker2 *m) {
  const char *name = range_name(c, m);
  if (!name || !reserve((void **)&c->open, &c->cap_open, c->n_open, sizeof *c->open))
    return TP_FAIL(TP_EOOM, "collector: no memory for an NVTX range");
  c->open[c->n_open++] = (open_marker){m->id, m->timestamp, name};
  return TP_OK;
}

static tp_rc close_range(tp_collector *c, const CUpti_ActivityMarker2 *m) {
  for (size_t i = c->n_open; i-- > 0;) {
    if (c->open[i].id != m->id) continue;
    tp_event e = base_event(c, TP_EV_RANGE);
    e.category = TP_CAT_RANGE;
    e.name = c->open[i].name;
    e.start_ns = c->open[i].start_ns;
    e.end_ns = m->timestamp;
    e.correlation = m->id;
    c->open[i] = c->open[--c->n_open];
    return push_event(c, &e);
  }
  ++c->stats.unpaired_markers;
  return TP_OK;
}

static tp_rc convert_marker(tp_collector *c, const CUpti_ActivityMarker2 *m) {
  if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) return open_range(c, m);
  if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) return close_range(c, m);
  if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
    tp_event e = base_event(c, TP_EV_RANGE);
    e.category = TP_CAT_RANGE;
    e.name = range_name(c, m);
    if (!e.name) return TP_FAIL(TP_EOOM, "collector: no memory for an NVTX mark");
    e.start_ns = e.end_ns = m->timestamp;
    e.correlation = m->id;
    return push_event(c, &e);
  }
  ++c->stats.unknown_records;
  return TP_OK;
}

static tp_rc convert_api(tp_collector *c, const CUpti_ActivityAPI *a) {
  if (!reserve((void **)&c->calls, &c->cap_calls, c->n_calls, sizeof *c->calls))
    return TP_FAIL(TP_EOOM, "collector: no memory for %zu API records", c->n_calls + 1);
  c->calls[c->n_calls++] = (api_call){a->correlationId, a->start};
  return TP_OK;
}

static int call_cmp(const void *a, const void *b) {
  const api_call *x = a, *y = b;
  return (x->correlation > y->correlation) - (x->correlation < y->correlation);
}

/* Stamps every device event with the start of the API call that issued it
 * (left 0 when the call was not recorded, e.g. issued before the window). */
static void stamp_launches(tp_collector *c) {
  if (c->n_calls > 1) qsort(c->calls, c->n_calls, sizeof *c->calls, call_cmp);
  for (size_t i = 0; i < c->n_events; ++i) {
    tp_event *e = &c->events[i];
    if (e->type == TP_EV_RANGE || e->correlation == 0) continue;
    api_call key = {e->correlation, 0};
    const api_call *hit =
        c->n_calls ? bsearch(&key, c->calls, c->n_calls, sizeof key, call_cmp) : NULL;
    if (hit) e->launch_ns = hit->start_ns;
  }
  c->n_calls = 0;
}

static tp_rc convert_record(tp_collector *c, const CUpti_Activity *r) {
  ++c->stats.records;
  switch (r->kind) {
  case CUPTI_ACTIVITY_KIND_KERNEL:
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    return convert_kernel(c, (const CUpti_ActivityKernel10 *)(const void *)r);
  case CUPTI_ACTIVITY_KIND_MEMCPY:
    return convert_memcpy(c, (const CUpti_ActivityMemcpy6 *)(const void *)r);
  case CUPTI_ACTIVITY_KIND_MEMCPY2:
    return convert_peer_copy(c, (const CUpti_ActivityMemcpyPtoP4 *)(const void *)r);
  case CUPTI_ACTIVITY_KIND_MEMSET:
    return convert_memset(c, (const CUpti_ActivityMemset4 *)(const void *)r);
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
    return convert_sync(c, (const CUpti_ActivitySynchronization2 *)(const void *)r);
  case CUPTI_ACTIVITY_KIND_MARKER:
    return convert_marker(c, (const CUpti_ActivityMarker2 *)(const void *)r);
  case CUPTI_ACTIVITY_KIND_RUNTIME:
  case CUPTI_ACTIVITY_KIND_DRIVER:
    return convert_api(c, (const CUpti_ActivityAPI *)(const void *)r);
  default: ++c->stats.unknown_records; return TP_OK;
  }
}

/* Converts every record of one buffer; stops at the first failure. */
static tp_rc convert_buffer(tp_collector *c, raw_buffer *rb) {
  uint8_t *data = (uint8_t *)rb + BUFFER_HEADER;
  CUpti_Activity *r = NULL;
  for (;;) {
    CUptiResult st = cuptiActivityGetNextRecord(data, rb->valid, &r);
    if (st == CUPTI_ERROR_MAX_LIMIT_REACHED) return TP_OK; /* end of the buffer */
    TP_CUPTI(st);
    TP_TRY(convert_record(c, r));
  }
}

/* Converts and frees a list of buffers; every buffer is freed even after a failure. */
static tp_rc convert_buffers(tp_collector *c, raw_buffer *list) {
  tp_rc rc = TP_OK;
  while (list) {
    raw_buffer *next = list->next;
    if (rc == TP_OK) rc = convert_buffer(c, list);
    buffer_free(list);
    list = next;
  }
  return rc;
}

static int event_cmp(const void *a, const void *b) {
  const tp_event *x = a, *y = b;
  if (x->start_ns != y->start_ns) return x->start_ns < y->start_ns ? -1 : 1;
  return (x->end_ns > y->end_ns) - (x->end_ns < y->end_ns);
}

/* Keeps the events that touch [win_start, win_end], sorted; counts the rest. */
static void keep_window(tp_collector *c) {
  size_t w = 0;
  for (size_t i = 0; i < c->n_events; ++i) {
    const tp_event *e = &c->events[i];
    if (e->end_ns < c->win_start || e->start_ns > c->win_end) ++c->stats.outside_window;
    else c->events[w++] = *e;
  }
  c->n_events = w;
  if (w > 1) qsort(c->events, w, sizeof *c->events, event_cmp);
}

/* ---- NVTX injection --------------------------------------------------------- */

/* Path of the libcupti this process has loaded (the one that receives records). */
static tp_rc loaded_cupti_path(char *out, size_t size) {
  CUptiResult (*fn)(uint64_t *) = cuptiGetTimestamp;
  void *addr;
  memcpy(&addr, &fn, sizeof addr); /* ISO C has no function-to-object pointer cast */
  Dl_info info;
  if (!dladdr(addr, &info) || !info.dli_fname || !*info.dli_fname)
    return TP_FAIL(TP_ECUPTI, "cannot find the path of the loaded libcupti (dladdr failed)");
  if (!realpath(info.dli_fname, out)) snprintf(out, size, "%s", info.dli_fname);
  return TP_OK;
}

/* NVTX v3 looks for a tool once per module, at that module's first NVTX call,
 * in NVTX_INJECTION64_PATH. For an application that embeds CUPTI, CUPTI's
 * documentation says to point that variable at libcupti itself (which exports
 * InitializeInjectionNvtx2) and to enable CUPTI_ACTIVITY_KIND_MARKER: the
 * variable is read lazily, so setting it here, before the first NVTX call,
 * is enough; no re-exec is needed. A variable already set to another tool
 * (Nsight Systems) is left alone and reported: tpbench's ranges then go
 * there, not here. Modules that called NVTX before this point (NCCL during
 * init, say) stay unattached; only the "tpbench" domain is checked. */
static tp_rc setup_nvtx_injection(int *injected) {
  char cupti_path[PATH_MAX];
  TP_TRY(loaded_cupti_path(cupti_path, sizeof cupti_path));
  const char *current = getenv("NVTX_INJECTION64_PATH");
  *injected = 1;
  if (!current || !*current) {
    if (setenv("NVTX_INJECTION64_PATH", cupti_path, 1) != 0)
      return TP_FAIL(TP_EIO, "setenv(NVTX_INJECTION64_PATH) failed");
  } else {
    char resolved[PATH_MAX];
    if (!realpath(current, resolved) || strcmp(resolved, cupti_path) != 0) {
      TP_LOGW(LOG,
              "NVTX_INJECTION64_PATH=%s is another tool, not %s: NVTX ranges will not reach "
              "the collector",
              current, cupti_path);
      *injected = 0;
    }
  }
  TP_LOGD(LOG, "NVTX injection: NVTX_INJECTION64_PATH=%s", getenv("NVTX_INJECTION64_PATH"));
  return TP_OK;
}

/* ---- public ----------------------------------------------------------------- */

/* Every kind the collector records, all of them only inside windows. */
static const CUpti_ActivityKind window_kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                                  CUPTI_ACTIVITY_KIND_MEMCPY,
                                                  CUPTI_ACTIVITY_KIND_MEMCPY2,
                                                  CUPTI_ACTIVITY_KIND_MEMSET,
                                                  CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                                  CUPTI_ACTIVITY_KIND_RUNTIME,
                                                  CUPTI_ACTIVITY_KIND_DRIVER,
                                                  CUPTI_ACTIVITY_KIND_MARKER};
enum { N_WINDOW_KINDS = sizeof window_kinds / sizeof window_kinds[0] };

uint64_t tp_collector_now(void) {
  uint64_t t = 0;
  if (cuptiGetTimestamp(&t) != CUPTI_SUCCESS) return 0;
  return t;
}

static uint64_t read_cupti_clock(void *ctx) {
  (void)ctx;
  return tp_collector_now();
}

static void disable_window_kinds(void) {
  for (size_t i = 0; i < N_WINDOW_KINDS; ++i) (void)cuptiActivityDisable(window_kinds[i]);
}

/* API calls that launch nothing and are made by the thousand per step
 * (PyTorch asks for the current device and stream capture state around
 * every op): their records cost time and say nothing about where device
 * work came from, so they are left out of the RUNTIME and DRIVER kinds. */
static const CUpti_CallbackId quiet_runtime_apis[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceProperties_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceProperties_v12000,
    CUPTI_RUNTIME_TRACE_CBID_cudaPointerGetAttributes_v4000,
    CUPTI_RUNTIME_TRACE_CBID_cudaFuncGetAttributes_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v12030,
    CUPTI_RUNTIME_TRACE_CBID_cudaThreadExchangeStreamCaptureMode_v10010,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetPriority_v5050,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetFlags_v5050,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetId_v12000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetDevice_v12080,
};
static const CUpti_CallbackId quiet_driver_apis[] = {
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetId,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGet,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3,
    CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing,
    CUPTI_DRIVER_TRACE_CBID_cuThreadExchangeStreamCaptureMode,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCtx,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetId,
};

/* cuptiActivityEnableRuntimeApi/DriverApi came with CUPTI 12.6: looked up,
 * not linked, so an older CUPTI still loads tpbench (and records every API
 * call). TPBENCH_CUPTI_EVERY_API=1 keeps every call, to measure what the
 * filter saves. Called after the kinds are enabled: enabling a kind resets
 * the per-API choices. */
static void quiet_query_apis(void) {
  const char *every = getenv("TPBENCH_CUPTI_EVERY_API");
  if (every && strcmp(every, "1") == 0) return;
  typedef CUptiResult(CUPTIAPI * per_api_fn)(CUpti_CallbackId, uint8_t);
  per_api_fn runtime = NULL, driver = NULL;
  void *r = dlsym(RTLD_DEFAULT, "cuptiActivityEnableRuntimeApi");
  void *d = dlsym(RTLD_DEFAULT, "cuptiActivityEnableDriverApi");
  memcpy(&runtime, &r, sizeof runtime); /* ISO C has no object-to-function pointer cast */
  memcpy(&driver, &d, sizeof driver);
  size_t failed = 0;
  for (size_t i = 0; runtime && i < sizeof quiet_runtime_apis / sizeof *quiet_runtime_apis; ++i)
    failed += runtime(quiet_runtime_apis[i], 0) != CUPTI_SUCCESS;
  for (size_t i = 0; driver && i < sizeof quiet_driver_apis / sizeof *quiet_driver_apis; ++i)
    failed += driver(quiet_driver_apis[i], 0) != CUPTI_SUCCESS;
  if (failed) TP_LOGD(LOG, "%zu query APIs could not be left out of the API records", failed);
}

/* Every window kind, or only NVTX markers (ranges_only: no device activity). */
static tp_rc enable_window_kinds(int ranges_only) {
  for (size_t i = 0; i < N_WINDOW_KINDS; ++i) {
    if (ranges_only && window_kinds[i] != CUPTI_ACTIVITY_KIND_MARKER) continue;
    CUptiResult st = cuptiActivityEnable(window_kinds[i]);
    if (st != CUPTI_SUCCESS) {
      disable_window_kinds();
      TP_CUPTI(st);
    }
  }
  if (!ranges_only) quiet_query_apis();
  return TP_OK;
}

/* The device of the first context created while a collector runs, as the
 * driver names it: a program profiled from outside records no system facts
 * of its own. Written once, by the callback. */
static char first_gpu_name[128];
static atomic_int have_gpu_name;

/* The driver's name of device `id`, or 0. The driver's entry points are
 * looked up, not linked: a tpbench built with CUDA must still start on a
 * machine without the driver (to say there is no GPU), and where a context
 * exists the driver is loaded. */
static int driver_device_name(uint32_t id, char *buf, int cap) {
  typedef CUresult (*get_fn)(CUdevice *, int);
  typedef CUresult (*name_fn)(char *, int, CUdevice);
  get_fn get = NULL;
  name_fn name = NULL;
  /* the runtime loads the driver privately (RTLD_LOCAL): ask for that copy, never load one */
  void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  void *g = lib ? dlsym(lib, "cuDeviceGet") : NULL, *n = lib ? dlsym(lib, "cuDeviceGetName") : NULL;
  memcpy(&get, &g, sizeof get); /* ISO C has no object-to-function pointer cast */
  memcpy(&name, &n, sizeof name);
  CUdevice dev = 0;
  int ok = get && name && get(&dev, (int)id) == CUDA_SUCCESS && name(buf, cap, dev) == CUDA_SUCCESS;
  if (lib) (void)dlclose(lib); /* drops the reference NOLOAD took; the driver stays loaded */
  return ok;
}

/* The subscriber's callback: only context creation is enabled. A driver
 * call in a CUPTI callback is allowed; a failure leaves the name unknown. */
static void CUPTIAPI claim_callback(void *userdata, CUpti_CallbackDomain domain,
                                    CUpti_CallbackId cbid, const void *cbdata) {
  (void)userdata;
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_CONTEXT_CREATED ||
      atomic_load(&have_gpu_name))
    return;
  const CUpti_ResourceData *rd = cbdata;
  uint32_t id = 0;
  char name[sizeof first_gpu_name];
  if (cuptiGetDeviceId(rd->context, &id) == CUPTI_SUCCESS &&
      driver_device_name(id, name, (int)sizeof name) && !atomic_exchange(&have_gpu_name, 1))
    memcpy(first_gpu_name, name, sizeof name);
}

void tp_collector_gpu_name(char *buf, size_t cap) {
  if (!buf || cap == 0) return;
  snprintf(buf, cap, "%s", atomic_load(&have_gpu_name) ? first_gpu_name : "");
}

/* CUPTI takes one subscriber per process. Holding that slot makes a second
 * profiler (Nsight Systems, a program's own torch.profiler) fail loudly
 * instead of silently taking the activity buffers away, and finding it taken
 * means another profiler is attached: an error saying so. */
static tp_rc claim_cupti(tp_collector *c) {
  CUptiResult st = cuptiSubscribe(&c->subscriber, claim_callback, NULL);
  if (st == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    return TP_FAIL(TP_ECUPTI, "CUPTI is busy: another profiler already subscribed to this process "
                              "(cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)");
  TP_CUPTI(st);
  c->subscribed = 1;
  TP_CUPTI(cuptiEnableCallback(1, c->subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                               CUPTI_CBID_RESOURCE_CONTEXT_CREATED));
  return TP_OK;
}

static void release_cupti(tp_collector *c) {
  if (c->subscribed && cuptiUnsubscribe(c->subscriber) != CUPTI_SUCCESS)
    TP_LOGW(LOG, "cuptiUnsubscribe failed: CUPTI stays claimed until the process ends");
  c->subscribed = 0;
}

/* Everything of start that can fail after the collector exists. */
static tp_rc start_tracing(tp_collector *c) {
  TP_TRY(claim_cupti(c));
  TP_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  int injected = 0;
  TP_TRY(setup_nvtx_injection(&injected));
  /* CUPTI listens while NVTX attaches, then records nothing until a window. */
  TP_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER));
  atomic_store(&nvtx_prepared, 1);
  int attached = tp_nvtx_attach();
  TP_CUPTI(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MARKER));
  if (!attached)
    return TP_FAIL(TP_ECUPTI,
                   "NVTX did not attach to a tool (NVTX_INJECTION64_PATH=%s): ranges would be lost",
                   getenv("NVTX_INJECTION64_PATH"));
  tp_nvtx_gate(1);
  c->stats.nvtx_injected = injected;
  TP_TRY(tp_clock_offset_measure(read_cupti_clock, NULL, CLOCK_SAMPLES, &c->stats.clock));
  TP_LOGI(LOG, "collector started: rank %d, CUPTI clock - CLOCK_REALTIME = %lld ns (+- %llu)",
          c->rank, (long long)c->stats.clock.offset_ns,
          (unsigned long long)c->stats.clock.uncertainty_ns);
  return TP_OK;
}

tp_rc tp_collector_start(int rank, tp_collector **out) {
  if (!out) return TP_FAIL(TP_EUSAGE, "tp_collector_start: NULL output");
  *out = NULL;
  if (tp_nvtx_used() && !atomic_load(&nvtx_prepared))
    return TP_FAIL(TP_EUSAGE,
                   "NVTX was used before the collector started, so its ranges cannot reach "
                   "CUPTI: start the collector before the first tp_nvtx_push");
  if (atomic_exchange(&collector_running, 1))
    return TP_FAIL(TP_EUSAGE,
                   "a collector is already running in this process (CUPTI has one client)");
  tp_collector *c = calloc(1, sizeof *c);
  if (!c) {
    atomic_store(&collector_running, 0);
    return TP_FAIL(TP_EOOM, "collector: no memory");
  }
  c->rank = rank;
  pthread_mutex_lock(&queue.lock);
  c->dropped_seen = queue.dropped;
  pthread_mutex_unlock(&queue.lock);
  tp_rc rc = start_tracing(c);
  if (rc != TP_OK) {
    (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MARKER);
    tp_nvtx_gate(0);
    release_cupti(c);
    free(c);
    atomic_store(&collector_running, 0);
    return rc;
  }
  *out = c;
  return TP_OK;
}

static tp_rc window_begin(tp_collector *c, int ranges_only) {
  if (!c) return TP_FAIL(TP_EUSAGE, "tp_collector_window_begin: NULL collector");
  if (c->window_open)
    return TP_FAIL(TP_EUSAGE, "tp_collector_window_begin: a window is already open");
  TP_TRY(enable_window_kinds(ranges_only));
  c->win_start = tp_collector_now();
  c->window_open = 1;
  c->n_calls = 0;
  tp_nvtx_window(1);
  return TP_OK;
}

tp_rc tp_collector_window_begin(tp_collector *c) { return window_begin(c, 0); }

tp_rc tp_collector_window_begin_ranges(tp_collector *c) { return window_begin(c, 1); }

tp_rc tp_collector_cupti_path(char *out, size_t size) {
  if (!out || size == 0) return TP_FAIL(TP_EUSAGE, "tp_collector_cupti_path: no buffer");
  return loaded_cupti_path(out, size);
}

/* Flushes CUPTI (no lock of ours held: the completion callback takes it),
 * then converts what was queued into c->events. */
static tp_rc flush_and_convert(tp_collector *c, uint64_t *dropped_total) {
  CUptiResult st = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  raw_buffer *list = queue_take(dropped_total);
  tp_rc rc = convert_buffers(c, list);
  TP_CUPTI(st);
  return rc;
}

tp_rc tp_collector_window_end(tp_collector *c, tp_event **events, size_t *n) {
  if (!c || !events || !n) return TP_FAIL(TP_EUSAGE, "tp_collector_window_end: NULL argument");
  *events = NULL;
  *n = 0;
  if (!c->window_open) return TP_FAIL(TP_EUSAGE, "tp_collector_window_end: no window is open");
  tp_nvtx_window(0);
  c->win_end = tp_collector_now();
  c->window_open = 0;
  c->n_events = 0;
  uint64_t dropped_total = 0;
  /* Flush while the kinds are still on, then stop tracing: nothing after the
   * window is recorded, and nothing of the window is left in CUPTI. */
  tp_rc rc = flush_and_convert(c, &dropped_total);
  disable_window_kinds();
  stamp_launches(c);
  keep_window(c);
  c->stats.dropped_window = dropped_total - c->dropped_seen;
  c->stats.dropped = dropped_total;
  c->dropped_seen = dropped_total;
  *events = c->events;
  *n = c->n_events;
  if (rc != TP_OK) return rc;
  if (c->stats.dropped_window > 0)
    return TP_FAIL(TP_ECUPTI,
                   "CUPTI dropped %llu activity records in this window: the trace is incomplete",
                   (unsigned long long)c->stats.dropped_window);
  return TP_OK;
}

void tp_collector_window_bounds(const tp_collector *c, uint64_t *start_ns, uint64_t *end_ns) {
  if (start_ns) *start_ns = c ? c->win_start : 0;
  if (end_ns) *end_ns = c ? c->win_end : 0;
}

void tp_collector_get_stats(const tp_collector *c, tp_collector_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!c) return;
  *out = c->stats;
  pthread_mutex_lock(&queue.lock);
  out->buffers = queue.requested;
  pthread_mutex_unlock(&queue.lock);
}

void tp_collector_stop(tp_collector *c) {
  if (!c) return;
  tp_nvtx_window(0);
  tp_nvtx_gate(0); /* NVTX calls reach whatever tool is attached again */
  disable_window_kinds();
  uint64_t dropped_total = 0;
  c->n_events = 0;
  if (flush_and_convert(c, &dropped_total) != TP_OK)
    TP_LOGW(LOG, "collector stop: final flush: %s", tp_last_error());
  if (dropped_total > c->dropped_seen)
    TP_LOGW(LOG, "collector stop: CUPTI dropped %llu records after the last window",
            (unsigned long long)(dropped_total - c->dropped_seen));
  if (c->n_open > 0 || c->stats.unpaired_markers > 0)
    TP_LOGW(LOG, "collector stop: %zu NVTX ranges never closed, %llu end markers without a start",
            c->n_open, (unsigned long long)c->stats.unpaired_markers);
  pthread_mutex_lock(&queue.lock);
  if (queue.alloc_failures > 0)
    TP_LOGW(LOG, "collector stop: %zu activity buffers could not be allocated",
            queue.alloc_failures);
  pthread_mutex_unlock(&queue.lock);
  release_cupti(c);
  free(c->events);
  free(c->open);
  free(c->ctx);
  free(c->calls);
  strtab_free(&c->names);
  free(c);
  atomic_store(&collector_running, 0);
}

tp_rc tp_collector_stream_id(void *stream, uint32_t *id) {
  if (!id) return TP_FAIL(TP_EUSAGE, "tp_collector_stream_id: NULL id");
  /* no context given: CUPTI takes the stream's own */
  TP_CUPTI(cuptiGetStreamIdEx(NULL, (CUstream)stream, 0, id));
  return TP_OK;
}

tp_rc tp_collector_cupti_version(char *buf, size_t cap) {
  uint32_t version = 0;
  CUptiResult r = cuptiGetVersion(&version);
  if (r != CUPTI_SUCCESS) {
    const char *msg = NULL;
    cuptiGetResultString(r, &msg);
    return TP_FAIL(TP_ECUPTI, "cuptiGetVersion: %s", msg ? msg : "unknown CUPTI error");
  }
  /* CUPTI's API version (CUPTI_API_VERSION), not the toolkit's */
  snprintf(buf, cap, "api %u", version);
  return TP_OK;
}
