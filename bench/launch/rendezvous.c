/*
 * rendezvous.c — the client side of the rendezvous every rank runs, and the
 * free-port helper (contract in rendezvous.h).
 *
 * A client holds one TCP connection to the server rank 0 runs (see
 * rendezvous_server.c). Each collective is one request and one answer; the
 * answer is either the result or an error the server composed, which names
 * the rank at fault. The client's own deadline is the timeout plus a short
 * grace, so that the server's more informative answer normally wins.
 *
 * Joining is a handshake (rendezvous_auth.h): the client answers the
 * server's challenge and sends nothing more until the server's first sealed
 * message proves that it holds the job's secret too. An attempt that fails
 * short of a sealed verdict (the connection dropped, a silent or impostor
 * server) is retried until the deadline: a busy server may have dropped it.
 */
#include "bench/launch/rendezvous.h"

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

#include "bench/launch/rendezvous_auth.h"
#include "bench/launch/rendezvous_server.h"
#include "bench/launch/rendezvous_wire.h"
#include "common/tp_log.h"

enum {
  GRACE_MS = 500,       /* extra wait for the server's verdict past the timeout */
  RETRY_MS = 50,        /* pause between connection attempts */
  ATTEMPT_MS = 1000,    /* one connection attempt at most */
  VERDICT_MS = 200,     /* wait for the server's error after a failed send */
  HANDSHAKE_MS = 3000,  /* one join attempt's challenge and verdict at most */
  MAX_ERROR_TEXT = 4096 /* longest error text accepted from the server */
};

struct tp_rdzv {
  int rank, world, timeout_ms;
  rdzv_channel ch; /* ch.fd is -1 while not connected */
  tp_rdzv_secret secret;
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
  TP_TRY(rdzv_channel_recv_body(&rdzv->ch, text, (size_t)h->len, deadline));
  TP_TRY(rdzv_channel_recv_end(&rdzv->ch, deadline));
  text[h->len] = '\0';
  tp_rc code = h->arg > TP_OK && h->arg <= TP_EINTERNAL ? (tp_rc)h->arg : TP_EIO;
  return TP_FAIL(code, "rank %d: rendezvous failed: %s", rdzv->rank, text);
}

/* Waits for the answer of type `expect` to request seq; its payload, which
 * must be reply_len bytes, goes to reply. */
static tp_rc await_answer(tp_rdzv *rdzv, uint32_t expect, uint64_t seq, void *reply,
                          size_t reply_len, int64_t deadline, const char *what) {
  rdzv_header h;
  tp_rc rc = rdzv_channel_recv_header(&rdzv->ch, &h, deadline);
  if (rc == TP_ETIMEOUT)
    return TP_FAIL(TP_ETIMEOUT, "rank %d: %s timed out after %d ms waiting for the other ranks",
                   rdzv->rank, what, rdzv->timeout_ms);
  if (rc != TP_OK) return tp_fail_context(rc, "rank %d: %s", rdzv->rank, what);
  if (h.type == RDZV_ERROR) return server_error(rdzv, &h, deadline);
  if (h.type != expect || h.seq != seq || h.len != reply_len)
    return TP_FAIL(TP_EIO, "rank %d: %s: %s answered a %s #%llu of %llu bytes", rdzv->rank, what,
                   rdzv->server, rdzv_type_name(h.type), (unsigned long long)h.seq,
                   (unsigned long long)h.len);
  TP_TRY(rdzv_channel_recv_body(&rdzv->ch, reply, reply_len, deadline));
  tp_rc sealed = rdzv_channel_recv_end(&rdzv->ch, deadline);
  /* Bytes that fail the check are nobody's answer: leave none behind. */
  if (sealed != TP_OK && reply_len > 0) memset(reply, 0, reply_len);
  return sealed;
}

/* A request could not be sent: the server may have given up on the job and
 * said why before closing. Its verdict names the rank at fault, so it beats
 * the bare send error when it is there to read. */
static tp_rc pending_verdict(tp_rdzv *rdzv, tp_rc send_rc, const char *what) {
  char send_error[1024];
  snprintf(send_error, sizeof send_error, "%s", rdzv_error_text());
  rdzv_header h;
  int64_t deadline = rdzv_now_ms() + VERDICT_MS;
  if (rdzv_channel_recv_header(&rdzv->ch, &h, deadline) == TP_OK && h.type == RDZV_ERROR)
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
  tp_rc rc = rdzv_channel_send(&rdzv->ch, req, payload, deadline);
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

/* Answers the server's challenge on fd: the hello, then a channel. */
static tp_rc answer_challenge(tp_rdzv *rdzv, int fd, int64_t deadline) {
  unsigned char
      raw[RDZV_HELLO_BYTES > RDZV_CHALLENGE_BYTES ? RDZV_HELLO_BYTES : RDZV_CHALLENGE_BYTES];
  rdzv_challenge challenge;
  TP_TRY(rdzv_recv_all(fd, raw, RDZV_CHALLENGE_BYTES, deadline, rdzv->server));
  if (rdzv_parse_challenge(raw, RDZV_CHALLENGE_BYTES, &challenge) != TP_OK)
    return tp_fail_context(TP_EFOREIGN, "%s sent a malformed challenge", rdzv->server);
  rdzv_hello hello = {.rank = (uint32_t)rdzv->rank, .world = (uint32_t)rdzv->world};
  TP_TRY(rdzv_random(hello.nonce, sizeof hello.nonce));
  rdzv_hello_mac(&rdzv->secret, challenge.nonce, &hello, hello.mac);
  rdzv_build_hello(&hello, raw);
  TP_TRY(rdzv_send_all(fd, raw, RDZV_HELLO_BYTES, deadline, rdzv->server));
  rdzv_channel_init(&rdzv->ch, fd, &rdzv->secret, challenge.nonce, &hello, 0, rdzv->server);
  return TP_OK;
}

/* Waits for the server's sealed verdict on the hello. *final is set when it
 * is a refusal the server proved to be its own: trying again cannot help. */
static tp_rc await_accept(tp_rdzv *rdzv, int64_t deadline, int *final) {
  rdzv_header h;
  TP_TRY(rdzv_channel_recv_header(&rdzv->ch, &h, deadline));
  if (h.type == RDZV_ERROR) {
    tp_rc rc = server_error(rdzv, &h, deadline);
    /* The server refuses with TP_EUSAGE, sealed; anything else (a failed
     * check, a broken connection) may be anyone's doing: not final. */
    *final = rc == TP_EUSAGE;
    return rc;
  }
  if (h.type != RDZV_ACCEPT || h.len != 0 || h.arg != (uint32_t)rdzv->rank)
    return TP_FAIL(TP_EFOREIGN, "%s answered the hello with a %s", rdzv->server,
                   rdzv_type_name(h.type));
  if (rdzv_channel_recv_end(&rdzv->ch, deadline) != TP_OK)
    return TP_FAIL(TP_EFOREIGN, "%s could not prove that it holds the job's secret", rdzv->server);
  return TP_OK;
}

/* One attempt to join, up to the server's acceptance. */
static tp_rc try_join(tp_rdzv *rdzv, int fd, int64_t deadline, int *final) {
  int64_t attempt = rdzv_now_ms() + HANDSHAKE_MS;
  if (attempt > deadline) attempt = deadline;
  TP_TRY(answer_challenge(rdzv, fd, attempt));
  return await_accept(rdzv, attempt, final);
}

static void disconnect(tp_rdzv *rdzv, int fd) {
  rdzv_channel_wipe(&rdzv->ch);
  rdzv->ch.fd = -1;
  close(fd);
}

static tp_rc join(tp_rdzv *rdzv, const char *addr, const char *bind_addr, int port,
                  int64_t deadline) {
  if (rdzv->rank == 0)
    TP_TRY(rdzv_server_start(bind_addr, port, rdzv->world, rdzv->timeout_ms, &rdzv->secret,
                             &rdzv->server_thread));
  /* Why an attempt failed, a server's failed proof kept over a mere timeout:
   * it says more about what went on. */
  char why[1024] = "";
  for (;;) {
    int fd = -1, final = 0;
    tp_rc rc = connect_until(addr, port, deadline, rdzv->timeout_ms, rdzv->server, &fd);
    if (rc != TP_OK && (rc != TP_ETIMEOUT || !why[0])) return rc;
    if (rc == TP_OK) {
      rc = try_join(rdzv, fd, deadline, &final);
      if (rc == TP_OK) break;
      disconnect(rdzv, fd);
      if (final) return rc;
    }
    if (rc == TP_EFOREIGN || !why[0]) snprintf(why, sizeof why, "%s", rdzv_error_text());
    if (rdzv_now_ms() >= deadline)
      return TP_FAIL(TP_ETIMEOUT, "rank %d could not join %s within %d ms (%s)", rdzv->rank,
                     rdzv->server, rdzv->timeout_ms, why);
    TP_LOGD("rdzv", "rank %d: join attempt failed, trying again: %s", rdzv->rank,
            rdzv_error_text());
    sleep_ms(RETRY_MS);
  }
  return await_answer(rdzv, RDZV_WELCOME, 0, NULL, 0, deadline + GRACE_MS, "joining");
}

tp_rc tp_rdzv_connect_secret(const char *addr, int port, int rank, int world, int timeout_ms,
                             const tp_rdzv_secret *secret, tp_rdzv **out) {
  *out = NULL;
  TP_TRY(check_args(addr, port, rank, world, timeout_ms));
  if (!secret || secret->len < TP_RDZV_SECRET_MIN || secret->len > TP_RDZV_SECRET_MAX)
    return TP_FAIL(TP_EUSAGE, "no valid job secret for the rendezvous");
  /* Every interface only when the user says so. */
  const char *bind_addr = getenv("TPBENCH_RDZV_BIND");
  if (!bind_addr || !bind_addr[0]) bind_addr = addr;
  tp_rdzv *rdzv = calloc(1, sizeof *rdzv);
  if (!rdzv) return TP_FAIL(TP_EOOM, "no memory for the rendezvous");
  *rdzv = (tp_rdzv){.rank = rank, .world = world, .timeout_ms = timeout_ms, .secret = *secret};
  rdzv->ch.fd = -1;
  snprintf(rdzv->server, sizeof rdzv->server, "the rendezvous server (rank 0 at %s:%d)", addr,
           port);
  tp_rc rc = join(rdzv, addr, bind_addr, port, rdzv_now_ms() + timeout_ms);
  if (rc != TP_OK) {
    tp_rdzv_close(rdzv);
    return rc;
  }
  *out = rdzv;
  return TP_OK;
}

tp_rc tp_rdzv_connect(const char *addr, int port, int rank, int world, int timeout_ms,
                      tp_rdzv **out) {
  *out = NULL;
  const tp_rdzv_secret *secret = tp_rdzv_job_secret();
  if (!secret) {
    TP_TRY(check_args(addr, port, rank, world, timeout_ms));
    return TP_FAIL(TP_EUSAGE,
                   "no job secret: the rendezvous admits only processes that hold the job's "
                   "secret; under an external launcher set TPBENCH_JOB_SECRET to the same 64 hex "
                   "digits on every rank (e.g. from `openssl rand -hex 32`) or "
                   "TPBENCH_JOB_SECRET_FILE to a file only its owner can read");
  }
  return tp_rdzv_connect_secret(addr, port, rank, world, timeout_ms, secret, out);
}

void tp_rdzv_close(tp_rdzv *rdzv) {
  if (!rdzv) return;
  if (rdzv->ch.fd >= 0) close(rdzv->ch.fd);
  rdzv_server_stop(rdzv->server_thread);
  rdzv_channel_wipe(&rdzv->ch);
  sodium_memzero(&rdzv->secret, sizeof rdzv->secret);
  free(rdzv);
}

tp_rc tp_find_free_port(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return TP_FAIL(TP_EIO, "socket: %s", strerror(errno));
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  tp_rc rc = TP_OK;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
    rc = TP_FAIL(TP_EIO, "finding a free port: %s", strerror(errno));
  close(fd);
  if (rc == TP_OK) *port = ntohs(sa.sin_port);
  return rc;
}
