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
 */
#include "collectors/tp_nvtx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#ifndef TP_NVTX_DISABLED
#include <nvtx3/nvToolsExt.h>
#endif

static pthread_once_t domain_once = PTHREAD_ONCE_INIT;
static atomic_int nvtx_used;

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
  nvtxEventAttributes_t attr = {0};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = name ? name : "";
  nvtxDomainRangePushEx(domain, &attr);
}

void tp_nvtx_pop(void) {
  pthread_once(&domain_once, create_domain);
  nvtxDomainRangePop(domain);
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
}

void tp_nvtx_pop(void) { pthread_once(&domain_once, create_domain); }

int tp_nvtx_attach(void) {
  pthread_once(&domain_once, create_domain);
  return 0;
}

#endif

int tp_nvtx_used(void) { return atomic_load(&nvtx_used); }
