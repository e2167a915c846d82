/*
 * rendezvous.c — the client side of the rendezvous every rank runs, and the
 * free-port helper (contract in rendezvous.h).
 *
 * A client holds one TCP connection to the server rank 0 runs (see
 * rendezvous_server.c). Each collective is one request and one answer; the
 * answer is either the result or an error the server composed, which names
 * the rank at fault. The client's own deadline is the timeout plus a short
 * grace, so that the server's more informative answer normally wins.
 */
#include "rendezvous.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common/tp_log.h"
#include "rendezvous_server.h"
#include "rendezvous_wire.h"

enum {
  GRACE_MS = 500,       /* extra wait for the server's verdict past the timeout */
  RETRY_MS = 50,        /* pause between connection attempts */
  ATTEMPT_MS = 1000,    /* one connection attempt at most */
  VERDICT_MS = 200,     /* wait for the server's error after a failed send */
  MAX_ERROR_TEXT = 4096 /* longest error text accepted from the server */
};

struct tp_rdzv {
  int rank, world, timeout_ms;
  int fd;
  int broken; /* a collective failed: the connection's state is unknown */
  uint64_t seq;
  char server[160];           /* "the rendezvous server (rank 0 at host:port)" */
  rdzv_server *server_thread; /* rank 0 only */
};

int tp_rdzv_rank(const tp_rdzv *rdzv) { return rdzv->rank; }
int tp_rdzv_world(const tp_rdzv *rdzv) { return rdzv->world; }

/* ---- connecting --------------------------------------------------------- */

static void sleep_ms(int64_t ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* True if a connection ended at its own port: a client retrying a local port
 * nobody listens on can be given that very port and "connect" to itself. */
static int connected_to_itself(int fd) {
  struct sockaddr_storage self, peer;
  socklen_t self_len = sizeof self, peer_len = sizeof peer;
  if (getsockname(fd, (struct sockaddr *)&self, &self_len) != 0 ||
      getpeername(fd, (struct sockaddr *)&peer, &peer_len) != 0)
    return 0;
  return self_len == peer_len && memcmp(&self, &peer, self_len) == 0;
}

/* One attempt at one address; returns the socket or -1 with why in last. */
static int try_connect(const struct addrinfo *ai, int64_t deadline, char *last, size_t cap) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) {
    snprintf(last, cap, "socket: %s", strerror(errno));
    return -1;
  }
  int err = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int64_t left = deadline - rdzv_now_ms();
    int ready = poll(&p, 1, left > 0 ? (int)left : 0);
    socklen_t len = sizeof err;
    if (ready <= 0) err = ETIMEDOUT;
    else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  }
  if (err == 0 && connected_to_itself(fd)) err = ECONNREFUSED;
  if (err == 0 && rdzv_socket_options(fd) == TP_OK) return fd;
  snprintf(last, cap, "%s", err ? strerror(err) : rdzv_error_text());
  close(fd);
  return -1;
}

/* Connects to addr:port, retrying until the deadline: rank 0 may not be
 * listening yet. */
static tp_rc connect_until(const char *addr, int port, int64_t deadline, int timeout_ms,
                           const char *server, int *out_fd) {
  char service[16], last[160] = "no attempt made";
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
  for (;;) {
    struct addrinfo *list = NULL;
    int gai = getaddrinfo(addr, service, &hints, &list);
    if (gai != 0 && gai != EAI_AGAIN)
      return TP_FAIL(TP_EIO, "cannot resolve the rendezvous address '%s': %s", addr,
                     gai_strerror(gai));
    if (gai != 0) snprintf(last, sizeof last, "resolving '%s': %s", addr, gai_strerror(gai));
    int fd = -1;
    for (const struct addrinfo *ai = list; ai && fd < 0; ai = ai->ai_next) {
      int64_t attempt = rdzv_now_ms() + ATTEMPT_MS;
      fd = try_connect(ai, attempt < deadline ? attempt : deadline, last, sizeof last);
    }
    if (list) freeaddrinfo(list);
    if (fd >= 0) {
      *out_fd = fd;
      return TP_OK;
    }
    int64_t left = deadline - rdzv_now_ms();
    if (left <= 0)
      return TP_FAIL(TP_ETIMEOUT, "could not reach %s within %d ms (last attempt: %s)", server,
                     timeout_ms, last);
    sleep_ms(left < RETRY_MS ? left : RETRY_MS);
  }
}

/* ---- requests ------------------------------------------------------------- */

/* Reads the server's error text and turns it into this rank's error. */
static tp_rc server_error(tp_rdzv *rdzv, const rdzv_header *h, int64_t deadline) {
  if (h->len > MAX_ERROR_TEXT)
    return TP_FAIL(TP_EIO, "rank %d: %s sent an error of %llu bytes", rdzv->rank, rdzv->server,
                   (unsigned long long)h->len);
  char text[MAX_ERROR_TEXT + 1];
  TP_TRY(rdzv_recv_all(rdzv->fd, text, (size_t)h->len, deadline, rdzv->server));
  text[h->len] = '\0';
  tp_rc code = h->arg > TP_OK && h->arg <= TP_EINTERNAL ? (tp_rc)h->arg : TP_EIO;
  return TP_FAIL(code, "rank %d: rendezvous failed: %s", rdzv->rank, text);
}

/* Waits for the answer of type `expect` to request seq; its payload, which
 * must be reply_len bytes, goes to reply. */
static tp_rc await_answer(tp_rdzv *rdzv, uint32_t expect, uint64_t seq, void *reply,
                          size_t reply_len, int64_t deadline, const char *what) {
  rdzv_header h;
  tp_rc rc = rdzv_recv_header(rdzv->fd, &h, deadline, rdzv->server);
  if (rc == TP_ETIMEOUT)
    return TP_FAIL(TP_ETIMEOUT, "rank %d: %s timed out after %d ms waiting for the other ranks",
                   rdzv->rank, what, rdzv->timeout_ms);
  if (rc != TP_OK) return tp_fail_context(rc, "rank %d: %s", rdzv->rank, what);
  if (h.type == RDZV_ERROR) return server_error(rdzv, &h, deadline);
  if (h.type != expect || h.seq != seq || h.len != reply_len)
    return TP_FAIL(TP_EIO, "rank %d: %s: %s answered a %s #%llu of %llu bytes", rdzv->rank, what,
                   rdzv->server, rdzv_type_name(h.type), (unsigned long long)h.seq,
                   (unsigned long long)h.len);
  if (reply_len == 0) return TP_OK;
  return rdzv_recv_all(rdzv->fd, reply, reply_len, deadline, rdzv->server);
}

/* A request could not be sent: the server may have given up on the job and
 * said why before closing. Its verdict names the rank at fault, so it beats
 * the bare send error when it is there to read. */
static tp_rc pending_verdict(tp_rdzv *rdzv, tp_rc send_rc, const char *what) {
  char send_error[1024];
  snprintf(send_error, sizeof send_error, "%s", rdzv_error_text());
  rdzv_header h;
  int64_t deadline = rdzv_now_ms() + VERDICT_MS;
  if (rdzv_recv_header(rdzv->fd, &h, deadline, rdzv->server) == TP_OK && h.type == RDZV_ERROR)
    return server_error(rdzv, &h, deadline);
  return TP_FAIL(send_rc, "rank %d: %s: %s", rdzv->rank, what, send_error);
}

/* One collective: send the request, wait for the answer. */
static tp_rc request(tp_rdzv *rdzv, const rdzv_header *req, const void *payload, void *reply,
                     size_t reply_len) {
  if (rdzv->broken)
    return TP_FAIL(TP_EIO, "rank %d: the rendezvous already failed; no more collectives",
                   rdzv->rank);
  char what[64];
  snprintf(what, sizeof what, "%s #%llu", rdzv_type_name(req->type), (unsigned long long)req->seq);
  int64_t deadline = rdzv_now_ms() + rdzv->timeout_ms;
  tp_rc rc = rdzv_send_msg(rdzv->fd, req, payload, deadline, rdzv->server);
  if (rc != TP_OK) rc = pending_verdict(rdzv, rc, what);
  if (rc == TP_OK)
    rc = await_answer(rdzv, RDZV_REPLY, req->seq, reply, reply_len, deadline + GRACE_MS, what);
  if (rc != TP_OK) {
    rdzv->broken = 1;
    return rc;
  }
  rdzv->seq++;
  return TP_OK;
}

tp_rc tp_rdzv_allgather(tp_rdzv *rdzv, const void *send, size_t bytes, void *recv) {
  if (bytes > RDZV_MAX_PAYLOAD / (uint64_t)rdzv->world)
    return TP_FAIL(TP_EUSAGE, "allgather of %zu bytes x %d ranks is too large", bytes, rdzv->world);
  rdzv_header h = {.type = RDZV_ALLGATHER, .seq = rdzv->seq, .count = bytes, .len = bytes};
  return request(rdzv, &h, send, recv, bytes * (size_t)rdzv->world);
}

tp_rc tp_rdzv_broadcast(tp_rdzv *rdzv, int root, void *buf, size_t bytes) {
  if (root < 0 || root >= rdzv->world)
    return TP_FAIL(TP_EUSAGE, "broadcast root %d outside world size %d", root, rdzv->world);
  if (bytes > RDZV_MAX_PAYLOAD)
    return TP_FAIL(TP_EUSAGE, "broadcast of %zu bytes is too large", bytes);
  rdzv_header h = {.type = RDZV_BROADCAST, .arg = (uint32_t)root, .seq = rdzv->seq, .count = bytes};
  h.len = root == rdzv->rank ? bytes : 0;
  return request(rdzv, &h, buf, buf, bytes);
}

tp_rc tp_rdzv_barrier(tp_rdzv *rdzv) {
  rdzv_header h = {.type = RDZV_BARRIER, .seq = rdzv->seq};
  return request(rdzv, &h, NULL, NULL, 0);
}

/* ---- joining and leaving ---------------------------------------------------- */

static tp_rc check_args(const char *addr, int port, int rank, int world, int timeout_ms) {
  if (!addr || !addr[0]) return TP_FAIL(TP_EUSAGE, "no rendezvous address (MASTER_ADDR)");
  if (port < 1 || port > 65535)
    return TP_FAIL(TP_EUSAGE, "rendezvous port %d outside 1..65535", port);
  if (world < 1 || rank < 0 || rank >= world)
    return TP_FAIL(TP_EUSAGE, "rank %d outside world size %d", rank, world);
  if (timeout_ms < 1) return TP_FAIL(TP_EUSAGE, "rendezvous timeout %d ms", timeout_ms);
  return TP_OK;
}

static tp_rc join(tp_rdzv *rdzv, const char *addr, int port, int64_t deadline) {
  if (rdzv->rank == 0)
    TP_TRY(rdzv_server_start(addr, port, rdzv->world, rdzv->timeout_ms, &rdzv->server_thread));
  TP_TRY(connect_until(addr, port, deadline, rdzv->timeout_ms, rdzv->server, &rdzv->fd));
  TP_LOGD("rdzv", "rank %d connected to %s:%d", rdzv->rank, addr, port);
  rdzv_header hello = {
      .type = RDZV_HELLO, .arg = (uint32_t)rdzv->rank, .arg2 = (uint32_t)rdzv->world};
  TP_TRY(rdzv_send_msg(rdzv->fd, &hello, NULL, deadline, rdzv->server));
  return await_answer(rdzv, RDZV_WELCOME, 0, NULL, 0, deadline + GRACE_MS, "joining");
}

tp_rc tp_rdzv_connect(const char *addr, int port, int rank, int world, int timeout_ms,
                      tp_rdzv **out) {
  *out = NULL;
  TP_TRY(check_args(addr, port, rank, world, timeout_ms));
  tp_rdzv *rdzv = calloc(1, sizeof *rdzv);
  if (!rdzv) return TP_FAIL(TP_EOOM, "no memory for the rendezvous");
  *rdzv = (tp_rdzv){.rank = rank, .world = world, .timeout_ms = timeout_ms, .fd = -1};
  snprintf(rdzv->server, sizeof rdzv->server, "the rendezvous server (rank 0 at %s:%d)", addr,
           port);
  tp_rc rc = join(rdzv, addr, port, rdzv_now_ms() + timeout_ms);
  if (rc != TP_OK) {
    tp_rdzv_close(rdzv);
    return rc;
  }
  *out = rdzv;
  return TP_OK;
}

void tp_rdzv_close(tp_rdzv *rdzv) {
  if (!rdzv) return;
  if (rdzv->fd >= 0) close(rdzv->fd);
  rdzv_server_stop(rdzv->server_thread);
  free(rdzv);
}

tp_rc tp_find_free_port(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return TP_FAIL(TP_EIO, "socket: %s", strerror(errno));
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof sa;
  tp_rc rc = TP_OK;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
    rc = TP_FAIL(TP_EIO, "finding a free port: %s", strerror(errno));
  close(fd);
  if (rc == TP_OK) *port = ntohs(sa.sin_port);
  return rc;
}
