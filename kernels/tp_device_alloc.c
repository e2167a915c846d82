/*
 * tp_device_alloc.c — the ledger of tp_device_alloc.h over an injected
 * backend (pure C; the CUDA backend and the process's ledger are in
 * tp_device_alloc_cuda.c).
 *
 * Live allocations sit in an open-addressed table keyed by pointer (linear
 * probing, tombstones, rebuilt when half full); each records its size and
 * owner. Owners are a short array searched linearly: a process has a group,
 * a case, the harness and the configurations of one case at a time. One
 * mutex guards all of it; the backend is called with it held, so an
 * allocation and its record never part.
 */
#include "kernels/tp_device_alloc.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FIRST_SLOTS = 64, FIRST_ACCOUNTS = 8 };

typedef struct record {
  void *ptr; /* NULL: empty; &tombstone: removed */
  size_t bytes;
  tp_alloc_owner owner;
  int adopted; /* made by another allocator: disowned, never freed, here */
} record;

typedef struct account {
  tp_alloc_owner owner;
  int64_t live_bytes, live_count;
  int64_t claims[TP_SHARED_COUNT];
  int64_t peak;
} account;

typedef struct watch {
  int active;
  tp_alloc_owner owners[TP_ALLOC_WATCH_MAX];
  int n;
  int64_t held, peak;
} watch;

struct tp_alloc_ledger {
  tp_alloc_backend backend;
  pthread_mutex_t lock;
  record *slots;
  size_t n_slots, n_live, n_tombs;
  account *accounts;
  int n_accounts, cap_accounts;
  tp_alloc_owner current;
  watch watch;
  int64_t limit;       /* live bytes over every owner; 0: none */
  char limit_why[160]; /* what the limit is, for the refusal's message */
};

static char tombstone;

void tp_alloc_owner_name(tp_alloc_owner o, char *buf, size_t cap) {
  static const char *const names[] = {"no owner",      "group",   "case",
                                      "configuration", "harness", "test owner"};
  const char *name = (unsigned)o.kind < sizeof names / sizeof names[0] ? names[o.kind] : "owner?";
  if (o.kind == TP_ALLOC_CONFIG || o.kind == TP_ALLOC_TEST)
    snprintf(buf, cap, "%s %" PRId64, name, o.index);
  else snprintf(buf, cap, "%s", name);
}

static int same_owner(tp_alloc_owner a, tp_alloc_owner b) {
  return a.kind == b.kind && a.index == b.index;
}

tp_rc tp_alloc_ledger_create(const tp_alloc_backend *backend, tp_alloc_ledger **out) {
  *out = NULL;
  if (!backend || !backend->alloc || !backend->free)
    return TP_FAIL(TP_EINTERNAL, "a ledger needs an allocate and a free function");
  tp_alloc_ledger *l = calloc(1, sizeof *l);
  if (!l) return TP_FAIL(TP_EOOM, "no host memory for a device-memory ledger");
  if (pthread_mutex_init(&l->lock, NULL) != 0) {
    free(l);
    return TP_FAIL(TP_EINTERNAL, "pthread_mutex_init failed for the device-memory ledger");
  }
  l->backend = *backend;
  l->current = TP_ALLOC_OWNER(TP_ALLOC_UNOWNED, 0);
  *out = l;
  return TP_OK;
}

void tp_alloc_ledger_destroy(tp_alloc_ledger *l) {
  if (!l) return;
  pthread_mutex_destroy(&l->lock);
  free(l->slots);
  free(l->accounts);
  free(l);
}

/* ---- the pointer table ------------------------------------------------------------------ */

static size_t hash_of(const void *p, size_t n_slots) {
  uint64_t v = (uint64_t)(uintptr_t)p;
  v ^= v >> 33;
  v *= 0xff51afd7ed558ccdull;
  v ^= v >> 33;
  return (size_t)(v & (n_slots - 1));
}

/* The slot holding p, or NULL. */
static record *find_record(tp_alloc_ledger *l, const void *p) {
  if (!l->n_slots) return NULL;
  for (size_t i = hash_of(p, l->n_slots), probes = 0; probes < l->n_slots;
       i = (i + 1) & (l->n_slots - 1), ++probes) {
    if (l->slots[i].ptr == p) return &l->slots[i];
    if (!l->slots[i].ptr) return NULL;
  }
  return NULL;
}

/* Places r in a table known to have an empty slot. */
static void place(record *slots, size_t n_slots, const record *r) {
  size_t i = hash_of(r->ptr, n_slots);
  while (slots[i].ptr && slots[i].ptr != &tombstone) i = (i + 1) & (n_slots - 1);
  slots[i] = *r;
}

/* Room for one more record: the table rebuilt (larger when live records
 * fill a quarter of it) when live and removed records would fill half. */
static tp_rc reserve_slot(tp_alloc_ledger *l) {
  if ((l->n_live + l->n_tombs + 1) * 2 <= l->n_slots) return TP_OK;
  size_t n = l->n_slots ? l->n_slots : FIRST_SLOTS;
  while ((l->n_live + 1) * 4 > n) n *= 2;
  record *slots = calloc(n, sizeof *slots);
  if (!slots) return TP_FAIL(TP_EOOM, "no host memory for %zu ledger slots", n);
  for (size_t i = 0; i < l->n_slots; ++i)
    if (l->slots[i].ptr && l->slots[i].ptr != &tombstone) place(slots, n, &l->slots[i]);
  free(l->slots);
  l->slots = slots;
  l->n_slots = n;
  l->n_tombs = 0;
  return TP_OK;
}

/* ---- owners ------------------------------------------------------------------------------- */

static account *find_account(tp_alloc_ledger *l, tp_alloc_owner o) {
  for (int i = 0; i < l->n_accounts; ++i)
    if (same_owner(l->accounts[i].owner, o)) return &l->accounts[i];
  return NULL;
}

static tp_rc account_of(tp_alloc_ledger *l, tp_alloc_owner o, account **out) {
  *out = find_account(l, o);
  if (*out) return TP_OK;
  if (l->n_accounts == l->cap_accounts) {
    int cap = l->cap_accounts ? 2 * l->cap_accounts : FIRST_ACCOUNTS;
    account *a = realloc(l->accounts, (size_t)cap * sizeof *a);
    if (!a) return TP_FAIL(TP_EOOM, "no host memory for %d ledger owners", cap);
    l->accounts = a;
    l->cap_accounts = cap;
  }
  account *a = &l->accounts[l->n_accounts++];
  memset(a, 0, sizeof *a);
  a->owner = o;
  *out = a;
  return TP_OK;
}

static int64_t claimed(const account *a) {
  int64_t sum = 0;
  for (int s = 0; s < TP_SHARED_COUNT; ++s) sum += a->claims[s];
  return sum;
}

static int64_t held(const account *a) { return a->live_bytes + claimed(a); }

static int watched(const watch *w, tp_alloc_owner o) {
  for (int i = 0; w->active && i < w->n; ++i)
    if (same_owner(w->owners[i], o)) return 1;
  return 0;
}

/* After a's held bytes changed by delta: its peak, and the watch's. */
static void note_change(tp_alloc_ledger *l, account *a, int64_t delta) {
  const int64_t now = held(a);
  if (now > a->peak) a->peak = now;
  if (!watched(&l->watch, a->owner)) return;
  l->watch.held += delta;
  if (l->watch.held > l->watch.peak) l->watch.peak = l->watch.held;
}

/* ---- allocate, free, claim ------------------------------------------------------------------ */

/* Places r (room reserved) and charges its owner's account a. */
static void charge_record(tp_alloc_ledger *l, account *a, const record *r) {
  place(l->slots, l->n_slots, r);
  l->n_live++;
  a->live_bytes += (int64_t)r->bytes;
  a->live_count++;
  note_change(l, a, (int64_t)r->bytes);
}

/* Live bytes and allocations over every owner; the caller holds the lock. */
static void totals_locked(const tp_alloc_ledger *l, int64_t *live_bytes, int64_t *live_count) {
  *live_bytes = *live_count = 0;
  for (int i = 0; i < l->n_accounts; ++i) {
    *live_bytes += l->accounts[i].live_bytes;
    *live_count += l->accounts[i].live_count;
  }
}

static tp_rc check_limit_locked(const tp_alloc_ledger *l, size_t bytes) {
  if (l->limit <= 0) return TP_OK;
  int64_t live = 0, count = 0;
  totals_locked(l, &live, &count);
  const int64_t after = live + (int64_t)bytes;
  if (after <= l->limit) return TP_OK;
  const double mib = 1024.0 * 1024.0;
  return TP_FAIL(TP_EREJECT,
                 "%s: %zu more bytes would bring this process's device memory to %.1f MiB, over "
                 "its share of %.1f MiB",
                 l->limit_why, bytes, (double)after / mib, (double)l->limit / mib);
}

void tp_alloc_set_limit(tp_alloc_ledger *l, int64_t limit_bytes, const char *why) {
  pthread_mutex_lock(&l->lock);
  l->limit = limit_bytes > 0 ? limit_bytes : 0;
  snprintf(l->limit_why, sizeof l->limit_why, "%s", why ? why : "device memory limit");
  pthread_mutex_unlock(&l->lock);
}

int64_t tp_alloc_limit(tp_alloc_ledger *l) {
  pthread_mutex_lock(&l->lock);
  const int64_t limit = l->limit;
  pthread_mutex_unlock(&l->lock);
  return limit;
}

static tp_rc malloc_locked(tp_alloc_ledger *l, tp_alloc_owner owner, void **out, size_t bytes) {
  TP_TRY(check_limit_locked(l, bytes));
  account *a = NULL;
  /* host bookkeeping first: a device allocation is never left unrecorded */
  TP_TRY(account_of(l, owner, &a));
  TP_TRY(reserve_slot(l));
  void *p = NULL;
  TP_TRY(l->backend.alloc(l->backend.ctx, &p, bytes));
  if (!p) return TP_FAIL(TP_EINTERNAL, "the allocator gave NULL for %zu bytes", bytes);
  if (find_record(l, p)) {
    tp_rc rc = l->backend.free(l->backend.ctx, p);
    if (rc != TP_OK) return rc;
    return TP_FAIL(TP_EINTERNAL,
                   "the allocator gave %p, which the ledger holds as live: it was freed "
                   "outside the ledger",
                   p);
  }
  charge_record(l, a, &(record){p, bytes, owner, 0});
  *out = p;
  return TP_OK;
}

tp_rc tp_alloc_malloc(tp_alloc_ledger *l, tp_alloc_owner owner, void **out, size_t bytes) {
  *out = NULL;
  if (bytes == 0) return TP_OK;
  pthread_mutex_lock(&l->lock);
  tp_rc rc = malloc_locked(l, owner, out, bytes);
  pthread_mutex_unlock(&l->lock);
  return rc;
}

/* Removes r from the table and uncharges its owner. */
static void uncharge_record(tp_alloc_ledger *l, record *r) {
  account *a = find_account(l, r->owner);
  const int64_t bytes = (int64_t)r->bytes;
  r->ptr = &tombstone;
  l->n_live--;
  l->n_tombs++;
  if (a) {
    a->live_bytes -= bytes;
    a->live_count--;
    note_change(l, a, -bytes);
  }
}

static tp_rc free_locked(tp_alloc_ledger *l, void *ptr) {
  record *r = find_record(l, ptr);
  if (!r)
    return TP_FAIL(TP_EINTERNAL,
                   "free of %p: the ledger holds no such allocation (not allocated through it, "
                   "or freed already)",
                   ptr);
  if (r->adopted)
    return TP_FAIL(TP_EINTERNAL,
                   "free of %p: another allocator made it (adopted): disown it and free it there",
                   ptr);
  uncharge_record(l, r);
  return l->backend.free(l->backend.ctx, ptr);
}

tp_rc tp_alloc_free(tp_alloc_ledger *l, void *ptr) {
  if (!ptr) return TP_OK;
  pthread_mutex_lock(&l->lock);
  tp_rc rc = free_locked(l, ptr);
  pthread_mutex_unlock(&l->lock);
  return rc;
}

static tp_rc adopt_locked(tp_alloc_ledger *l, tp_alloc_owner owner, void *ptr, size_t bytes) {
  if (find_record(l, ptr))
    return TP_FAIL(TP_EINTERNAL, "adoption of %p (%zu bytes): the ledger holds it already", ptr,
                   bytes);
  account *a = NULL;
  TP_TRY(account_of(l, owner, &a));
  TP_TRY(reserve_slot(l));
  charge_record(l, a, &(record){ptr, bytes, owner, 1});
  return TP_OK;
}

tp_rc tp_alloc_adopt(tp_alloc_ledger *l, tp_alloc_owner owner, void *ptr, size_t bytes) {
  if (!ptr || bytes == 0)
    return TP_FAIL(TP_EINTERNAL, "adoption of %p with %zu bytes (a pointer and bytes > 0)", ptr,
                   bytes);
  pthread_mutex_lock(&l->lock);
  tp_rc rc = adopt_locked(l, owner, ptr, bytes);
  pthread_mutex_unlock(&l->lock);
  return rc;
}

static tp_rc disown_locked(tp_alloc_ledger *l, void *ptr) {
  record *r = find_record(l, ptr);
  if (!r || !r->adopted)
    return TP_FAIL(TP_EINTERNAL, "disown of %p: %s", ptr,
                   r ? "the ledger allocated it itself (free it through the ledger)"
                     : "the ledger holds no such adopted allocation (never adopted, or "
                       "disowned already)");
  uncharge_record(l, r);
  return TP_OK;
}

tp_rc tp_alloc_disown(tp_alloc_ledger *l, void *ptr) {
  pthread_mutex_lock(&l->lock);
  tp_rc rc = disown_locked(l, ptr);
  pthread_mutex_unlock(&l->lock);
  return rc;
}

static tp_rc claim_locked(tp_alloc_ledger *l, tp_alloc_owner owner, tp_alloc_shared shared,
                          int64_t bytes) {
  account *a = NULL;
  TP_TRY(account_of(l, owner, &a));
  if (bytes <= a->claims[shared]) return TP_OK;
  const int64_t delta = bytes - a->claims[shared];
  a->claims[shared] = bytes;
  note_change(l, a, delta);
  return TP_OK;
}

tp_rc tp_alloc_claim(tp_alloc_ledger *l, tp_alloc_owner owner, tp_alloc_shared shared,
                     size_t bytes) {
  if ((unsigned)shared >= TP_SHARED_COUNT)
    return TP_FAIL(TP_EINTERNAL, "claim on shared buffer %d (0..%d)", (int)shared,
                   TP_SHARED_COUNT - 1);
  if (bytes == 0) return TP_OK;
  pthread_mutex_lock(&l->lock);
  tp_rc rc = claim_locked(l, owner, shared, (int64_t)bytes);
  pthread_mutex_unlock(&l->lock);
  return rc;
}

/* ---- scopes, figures, release --------------------------------------------------------------- */

tp_alloc_owner tp_alloc_enter(tp_alloc_ledger *l, tp_alloc_owner owner) {
  pthread_mutex_lock(&l->lock);
  const tp_alloc_owner previous = l->current;
  l->current = owner;
  pthread_mutex_unlock(&l->lock);
  return previous;
}

void tp_alloc_leave(tp_alloc_ledger *l, tp_alloc_owner previous) {
  pthread_mutex_lock(&l->lock);
  l->current = previous;
  pthread_mutex_unlock(&l->lock);
}

tp_alloc_owner tp_alloc_current(tp_alloc_ledger *l) {
  pthread_mutex_lock(&l->lock);
  const tp_alloc_owner current = l->current;
  pthread_mutex_unlock(&l->lock);
  return current;
}

void tp_alloc_stats_of(tp_alloc_ledger *l, tp_alloc_owner owner, tp_alloc_stats *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&l->lock);
  const account *a = find_account(l, owner);
  if (a) {
    out->live_bytes = a->live_bytes;
    out->live_count = a->live_count;
    out->claimed_bytes = claimed(a);
    out->held_bytes = held(a);
    out->peak_bytes = a->peak;
  }
  pthread_mutex_unlock(&l->lock);
}

void tp_alloc_totals(tp_alloc_ledger *l, int64_t *live_bytes, int64_t *live_count) {
  pthread_mutex_lock(&l->lock);
  totals_locked(l, live_bytes, live_count);
  pthread_mutex_unlock(&l->lock);
}

void tp_alloc_reset_peak(tp_alloc_ledger *l, tp_alloc_owner owner) {
  pthread_mutex_lock(&l->lock);
  account *a = find_account(l, owner);
  if (a) a->peak = held(a);
  pthread_mutex_unlock(&l->lock);
}

static tp_rc release_locked(tp_alloc_ledger *l, tp_alloc_owner owner) {
  account *a = find_account(l, owner);
  if (!a) return TP_OK;
  if (a->live_count > 0) {
    char name[48];
    tp_alloc_owner_name(owner, name, sizeof name);
    return TP_FAIL(TP_EINTERNAL,
                   "%s still holds %" PRId64 " device allocations (%" PRId64 " bytes)", name,
                   a->live_count, a->live_bytes);
  }
  note_change(l, a, -claimed(a));
  *a = l->accounts[--l->n_accounts];
  return TP_OK;
}

tp_rc tp_alloc_release(tp_alloc_ledger *l, tp_alloc_owner owner) {
  pthread_mutex_lock(&l->lock);
  tp_rc rc = release_locked(l, owner);
  pthread_mutex_unlock(&l->lock);
  return rc;
}

/* ---- the watch --------------------------------------------------------------------------- */

static tp_rc watch_begin_locked(tp_alloc_ledger *l, const tp_alloc_owner *owners, int n) {
  if (l->watch.active) return TP_FAIL(TP_EINTERNAL, "a ledger watch is running already");
  if (n < 1 || n > TP_ALLOC_WATCH_MAX)
    return TP_FAIL(TP_EINTERNAL, "a watch of %d owners (1..%d)", n, TP_ALLOC_WATCH_MAX);
  watch w;
  memset(&w, 0, sizeof w);
  w.active = 1;
  w.n = n;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < i; ++j)
      if (same_owner(owners[i], owners[j]))
        return TP_FAIL(TP_EINTERNAL, "a watch names one owner twice");
    w.owners[i] = owners[i];
    const account *a = find_account(l, owners[i]);
    if (a) w.held += held(a);
  }
  w.peak = w.held;
  l->watch = w;
  return TP_OK;
}

tp_rc tp_alloc_watch_begin(tp_alloc_ledger *l, const tp_alloc_owner *owners, int n) {
  pthread_mutex_lock(&l->lock);
  tp_rc rc = watch_begin_locked(l, owners, n);
  pthread_mutex_unlock(&l->lock);
  return rc;
}

tp_rc tp_alloc_watch_end(tp_alloc_ledger *l, int64_t *peak) {
  pthread_mutex_lock(&l->lock);
  const watch w = l->watch;
  memset(&l->watch, 0, sizeof l->watch);
  pthread_mutex_unlock(&l->lock);
  *peak = w.peak;
  if (!w.active) return TP_FAIL(TP_EINTERNAL, "a ledger watch ended that never began");
  return TP_OK;
}
