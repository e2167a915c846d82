/*
 * test_collector.c — GPU test of the CUPTI collector (collectors/cupti_collector.c).
 *
 * One process, device 0: start the collector before any CUDA or NVTX call,
 * open a window, and inside an NVTX range launch a small kernel, a
 * device-to-device cudaMemcpyAsync and a memset, then synchronise the
 * stream. The window must come back with each of them as an event with a
 * sane interval inside the window, the right type, category, device, stream,
 * byte count and name; the range must enclose the launches on the host
 * timeline; no record may be dropped and the NVTX injection must be live.
 * Each kernel and copy carries the host time of its launch, inside the
 * range it was launched from. Then: work done between windows (an untraced
 * window with the collector attached) must reach CUPTI not at all — no
 * record buffered, no NVTX range recorded — while a traced window right
 * after still records kernels and ranges; a
 * peer copy (only with two or more devices) must come back as PtoP
 * communication, both from cudaMemcpyPeerAsync and, as the "ce" schedule
 * does it, from a cudaMemcpyAsync into memory another process exported over
 * CUDA IPC (the exporter is this binary re-executed with --ipc-exporter);
 * and the collector must restart cleanly in the same process.
 *
 * Devices are counted in a forked child so this process meets CUDA only
 * after the collector is running. Exit 77 (skipped) without a device.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <errno.h>

#include "collectors/tp_collector.h"
#include "collectors/tp_nvtx.h"
#include "kernels/tp_group.h"

cudaError_t collector_test_launch_fill(float *buf, size_t n, float value, cudaStream_t stream);

enum { ELEMS = 1 << 20, SKIP = 77 };
static const size_t BYTES = (size_t)ELEMS * sizeof(float);

#define CHECK_CUDA(call)                                                                           \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) fail_msg("%s: %s", #call, cudaGetErrorString(err_));                  \
  } while (0)

#define CHECK_TP(call)                                                                             \
  do {                                                                                             \
    tp_rc rc_ = (call);                                                                            \
    if (rc_ != TP_OK) fail_msg("%s: %s: %s", #call, tp_rc_name(rc_), tp_last_error());             \
  } while (0)

static int device_count;
static tp_collector *collector;
static float *buf_a, *buf_b;
static cudaStream_t stream;

/* Counts devices in a child so that this process's first CUDA call comes later. */

static const tp_event *find_event(const tp_event *ev, size_t n, tp_event_type type,
                                  const char *name_part) {
  for (size_t i = 0; i < n; ++i)
    if (ev[i].type == type && (!name_part || strstr(ev[i].name, name_part))) return &ev[i];
  return NULL;
}

static void print_events(const tp_event *ev, size_t n, uint64_t ws) {
  for (size_t i = 0; i < n; ++i)
    printf("  %-6s %-11s dev %2d stream %10u +%9llu ns %8llu ns %9llu B corr %u copy %s  %.70s\n",
           tp_event_type_name(ev[i].type), tp_category_name(ev[i].category), ev[i].device,
           ev[i].stream, (unsigned long long)(ev[i].start_ns - ws),
           (unsigned long long)(ev[i].end_ns - ev[i].start_ns), (unsigned long long)ev[i].bytes,
           ev[i].correlation, tp_copy_kind_name(ev[i].copy_kind), ev[i].name);
}

/* Every event lies in the window, is well formed and the list is sorted. */
static void assert_sane(const tp_event *ev, size_t n, uint64_t ws, uint64_t we) {
  for (size_t i = 0; i < n; ++i) {
    const tp_event *e = &ev[i];
    assert_non_null(e->name);
    assert_int_equal(e->rank, 3);
    assert_true(e->start_ns <= e->end_ns);
    assert_true(e->end_ns >= ws && e->start_ns <= we);
    assert_true(e->end_ns - e->start_ns < 10000000000ull); /* nothing here takes 10 s */
    assert_int_equal(e->type == TP_EV_RANGE, e->category == TP_CAT_RANGE);
    if (i > 0) assert_true(ev[i - 1].start_ns <= e->start_ns);
  }
}

/* A closed window: its events (the collector's) and bounds. */
typedef struct closed_window {
  tp_event *ev;
  size_t n;
  uint64_t ws, we;
} closed_window;

/* Waits for the stream's work, then closes the open window. */
static closed_window close_window(void) {
  CHECK_CUDA(cudaStreamSynchronize(stream));
  closed_window w = {NULL, 0, 0, 0};
  CHECK_TP(tp_collector_window_end(collector, &w.ev, &w.n));
  tp_collector_window_bounds(collector, &w.ws, &w.we);
  return w;
}

static void test_window_events(void **state) {
  (void)state;
  CHECK_TP(tp_collector_start(3, &collector));
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaMalloc((void **)&buf_a, BYTES));
  CHECK_CUDA(cudaMalloc((void **)&buf_b, BYTES));
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDA(collector_test_launch_fill(buf_a, ELEMS, 1.0f, stream)); /* load the module first */
  CHECK_CUDA(cudaStreamSynchronize(stream));

  CHECK_TP(tp_collector_window_begin(collector));
  tp_nvtx_push("test-iteration");
  CHECK_CUDA(collector_test_launch_fill(buf_a, ELEMS, 2.0f, stream));
  CHECK_CUDA(cudaMemcpyAsync(buf_b, buf_a, BYTES, cudaMemcpyDeviceToDevice, stream));
  CHECK_CUDA(cudaMemsetAsync(buf_a, 0, BYTES / 2, stream));
  tp_nvtx_pop();
  closed_window w = close_window();
  printf("window 1: %zu events over %llu ns\n", w.n, (unsigned long long)(w.we - w.ws));
  print_events(w.ev, w.n, w.ws);
  assert_true(w.we > w.ws);
  assert_sane(w.ev, w.n, w.ws, w.we);

  const tp_event *k = find_event(w.ev, w.n, TP_EV_KERNEL, "collector_test_fill_kernel");
  const tp_event *m = find_event(w.ev, w.n, TP_EV_MEMCPY, NULL);
  const tp_event *s = find_event(w.ev, w.n, TP_EV_MEMSET, NULL);
  const tp_event *r = find_event(w.ev, w.n, TP_EV_RANGE, "test-iteration");
  const tp_event *y = find_event(w.ev, w.n, TP_EV_SYNC, NULL);
  assert_non_null(k);
  assert_non_null(m);
  assert_non_null(s);
  assert_non_null(r);
  assert_non_null(y);
  assert_int_equal(k->category, TP_CAT_ELEMENTWISE);
  assert_int_equal(k->device, 0);
  assert_true(k->end_ns - k->start_ns >= 10000); /* it spins 20 us */
  assert_true(k->correlation != 0);
  assert_int_equal(m->copy_kind, TP_COPY_DTOD);
  assert_int_equal(m->category, TP_CAT_OTHER);
  assert_int_equal(m->bytes, BYTES);
  assert_int_equal(m->stream, k->stream);
  assert_true(m->start_ns >= k->end_ns); /* one stream: in order */
  assert_true(m->correlation != 0 && m->correlation != k->correlation);
  assert_int_equal(s->bytes, BYTES / 2);
  assert_true(s->start_ns >= m->end_ns);
  assert_string_equal(r->name, "test-iteration");
  assert_int_equal(r->device, -1);
  assert_true(r->start_ns <= k->start_ns); /* launched inside the range, ran after the push */
  assert_true(r->end_ns <= y->end_ns);     /* popped before the synchronise returned */
  /* the launches are placed in the range by their API calls' host times */
  assert_true(k->launch_ns >= r->start_ns && k->launch_ns < r->end_ns);
  assert_true(m->launch_ns >= k->launch_ns && m->launch_ns < r->end_ns);
  assert_true(k->launch_ns <= k->start_ns);
  assert_int_equal(y->category, TP_CAT_SYNC);

  tp_overlap o;
  CHECK_TP(tp_overlap_compute(w.ev, w.n, 3, w.ws, w.we, &o));
  assert_int_equal(o.comm_ns, 0);
  assert_true(o.compute_ns >= k->end_ns - k->start_ns);

  tp_collector_stats st;
  tp_collector_get_stats(collector, &st);
  printf("stats: records %llu dropped %llu untimed %llu unknown %llu buffers %zu nvtx %d; "
         "CUPTI clock - CLOCK_REALTIME = %lld ns +- %llu ns\n",
         (unsigned long long)st.records, (unsigned long long)st.dropped,
         (unsigned long long)st.untimed_records, (unsigned long long)st.unknown_records, st.buffers,
         st.nvtx_injected, (long long)st.clock.offset_ns,
         (unsigned long long)st.clock.uncertainty_ns);
  assert_int_equal(st.dropped, 0);
  assert_int_equal(st.dropped_window, 0);
  assert_int_equal(st.nvtx_injected, 1);
  assert_true(st.buffers >= 1);
  assert_true(st.clock.uncertainty_ns < 1000000);
  /* Linux CUPTI stamps with CLOCK_REALTIME unless a tool registered another clock */
  assert_true(st.clock.offset_ns < 10000000 && st.clock.offset_ns > -10000000);
}

static void test_between_windows_is_not_traced(void **state) {
  (void)state;
  assert_non_null(collector);
  tp_collector_stats before;
  tp_collector_get_stats(collector, &before);
  /* untraced work with the collector attached: every kind is off and
   * tpbench's NVTX calls stop before NVTX, so nothing of it reaches CUPTI */
  assert_int_equal(tp_nvtx_recording(), 0);
  tp_nvtx_push("between-windows");
  assert_int_equal(tp_nvtx_open_ranges(), 0); /* the push made no NVTX call */
  CHECK_CUDA(collector_test_launch_fill(buf_a, ELEMS, 5.0f, stream));
  CHECK_CUDA(cudaMemcpyAsync(buf_b, buf_a, BYTES, cudaMemcpyDeviceToDevice, stream));
  tp_nvtx_pop();
  CHECK_CUDA(cudaStreamSynchronize(stream));

  CHECK_TP(tp_collector_window_begin(collector));
  assert_int_equal(tp_collector_window_begin(collector), TP_EUSAGE); /* already open */
  assert_int_equal(tp_nvtx_recording(), 1);
  tp_nvtx_push("traced-after");
  CHECK_CUDA(collector_test_launch_fill(buf_a, ELEMS, 3.0f, stream));
  tp_nvtx_pop();
  closed_window w = close_window();
  printf("window 2: %zu events\n", w.n);
  print_events(w.ev, w.n, w.ws);
  assert_sane(w.ev, w.n, w.ws, w.we);
  const tp_event *k = find_event(w.ev, w.n, TP_EV_KERNEL, "collector_test_fill_kernel");
  const tp_event *r = find_event(w.ev, w.n, TP_EV_RANGE, "traced-after");
  assert_non_null(k);
  assert_non_null(r);
  assert_true(k->launch_ns >= r->start_ns && k->launch_ns < r->end_ns);
  assert_null(find_event(w.ev, w.n, TP_EV_MEMCPY, NULL));
  assert_null(find_event(w.ev, w.n, TP_EV_RANGE, "between-windows"));
  tp_collector_stats after;
  tp_collector_get_stats(collector, &after);
  /* Nothing was buffered outside the window: every record CUPTI handed over
   * at this window's flush lay inside it (before, the untraced range was
   * recorded and discarded here, and cost the untraced window its time). */
  assert_int_equal(after.outside_window, before.outside_window);
  assert_int_equal(after.unpaired_markers, before.unpaired_markers);
  assert_int_equal(tp_collector_window_end(collector, &w.ev, &w.n), TP_EUSAGE); /* none open */
}

static void test_peer_copy(void **state) {
  (void)state;
  if (device_count < 2) {
    printf("peer copy: one device only, not exercised\n");
    skip();
  }
  /* Without peer access CUDA stages the copy through the host, and CUPTI
   * (rightly) reports a DtoH and an HtoD: enable it, as NCCL and IPC do. */
  int can = 0;
  CHECK_CUDA(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) {
    printf("peer copy: device 0 cannot access device 1, not exercised\n");
    skip();
  }
  float *peer = NULL;
  CHECK_CUDA(cudaSetDevice(1));
  CHECK_CUDA(cudaMalloc((void **)&peer, BYTES));
  CHECK_CUDA(cudaSetDevice(0));
  cudaError_t pe = cudaDeviceEnablePeerAccess(1, 0);
  if (pe == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
  else CHECK_CUDA(pe);
  CHECK_TP(tp_collector_window_begin(collector));
  CHECK_CUDA(cudaMemcpyPeerAsync(peer, 1, buf_a, 0, BYTES, stream));
  closed_window w = close_window();
  print_events(w.ev, w.n, w.ws);
  const tp_event *p = find_event(w.ev, w.n, TP_EV_MEMCPY, NULL);
  assert_non_null(p);
  assert_int_equal(p->copy_kind, TP_COPY_PTOP);
  assert_int_equal(p->category, TP_CAT_COMM);
  assert_int_equal(p->bytes, BYTES);
  assert_int_equal(p->peer_device, 1);
  tp_evidence e;
  CHECK_TP(tp_schedule_evidence(w.ev, w.n, w.ws, w.we + 1, "ce", 1, 1, &e));
  CHECK_CUDA(cudaDeviceDisablePeerAccess(1));
  CHECK_CUDA(cudaFree(peer));
}

/* --ipc-exporter mode: device 1 memory, its IPC handle written to stdout;
 * held until stdin closes (the importer is done with it). */
static int run_ipc_exporter(void) {
  float *p = NULL;
  cudaIpcMemHandle_t h;
  if (cudaSetDevice(1) != cudaSuccess || cudaMalloc((void **)&p, BYTES) != cudaSuccess ||
      cudaIpcGetMemHandle(&h, p) != cudaSuccess)
    return 1;
  if (write(1, &h, sizeof h) != (ssize_t)sizeof h) return 1;
  char b;
  while (read(0, &b, 1) > 0) {}
  cudaFree(p);
  return 0;
}

/* Starts the exporter (fork + exec, so the child starts CUDA afresh). */
static pid_t spawn_exporter(int *to_child, cudaIpcMemHandle_t *h) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    execl("/proc/self/exe", "gpu_collector", "--ipc-exporter", (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  size_t got = 0;
  while (got < sizeof *h) {
    ssize_t r = read(out[0], (char *)h + got, sizeof *h - got);
    if (r <= 0 && errno != EINTR) break;
    if (r > 0) got += (size_t)r;
  }
  close(out[0]);
  *to_child = in[1];
  return got == sizeof *h ? pid : -1;
}

static void test_ipc_peer_copy(void **state) {
  (void)state;
  if (device_count < 2) {
    printf("IPC peer copy: one device only, not exercised\n");
    skip();
  }
  cudaIpcMemHandle_t h;
  int to_child = -1;
  pid_t pid = spawn_exporter(&to_child, &h);
  assert_true(pid > 0);
  float *peer = NULL;
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaIpcOpenMemHandle((void **)&peer, h, cudaIpcMemLazyEnablePeerAccess));
  CHECK_TP(tp_collector_window_begin(collector));
  CHECK_CUDA(cudaMemcpyAsync(peer, buf_a, BYTES, cudaMemcpyDeviceToDevice, stream));
  closed_window w = close_window();
  printf("IPC copy window:\n");
  print_events(w.ev, w.n, w.ws);
  CHECK_CUDA(cudaIpcCloseMemHandle(peer));
  close(to_child);
  int status = 0;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const tp_event *p = find_event(w.ev, w.n, TP_EV_MEMCPY, NULL);
  assert_non_null(p);
  printf("IPC copy reported as %s, category %s, peer device %d\n", tp_copy_kind_name(p->copy_kind),
         tp_category_name(p->category), p->peer_device);
  assert_int_equal(p->copy_kind, TP_COPY_PTOP);
  assert_int_equal(p->category, TP_CAT_COMM);
}

static void test_restart(void **state) {
  (void)state;
  tp_collector *second = NULL;
  assert_int_equal(tp_collector_start(0, &second), TP_EUSAGE); /* one per process */
  tp_collector_stop(collector);
  collector = NULL;
  CHECK_TP(tp_collector_start(3, &collector)); /* NVTX was set up by this process's collector */
  CHECK_TP(tp_collector_window_begin(collector));
  tp_nvtx_push("after-restart");
  CHECK_CUDA(collector_test_launch_fill(buf_a, ELEMS, 4.0f, stream));
  tp_nvtx_pop();
  closed_window w = close_window();
  assert_non_null(find_event(w.ev, w.n, TP_EV_KERNEL, "collector_test_fill_kernel"));
  assert_non_null(find_event(w.ev, w.n, TP_EV_RANGE, "after-restart"));
  tp_collector_stop(collector);
  collector = NULL;
  CHECK_CUDA(cudaFree(buf_a));
  CHECK_CUDA(cudaFree(buf_b));
  CHECK_CUDA(cudaStreamDestroy(stream));
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--ipc-exporter") == 0) return run_ipc_exporter();
  device_count = tp_count_devices_in_child();
  if (device_count == 0) {
    printf("gpu_collector: no CUDA device, skipping\n");
    return SKIP;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_window_events), cmocka_unit_test(test_between_windows_is_not_traced),
      cmocka_unit_test(test_peer_copy),     cmocka_unit_test(test_ipc_peer_copy),
      cmocka_unit_test(test_restart),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
