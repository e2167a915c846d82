/*
 * rendezvous_wire.c — header encoding, the pure parsers of handshake bytes
 * and deadline-bounded socket I/O of the rendezvous (see rendezvous_wire.h).
 */
#include "bench/launch/rendezvous_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

int64_t rdzv_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *rdzv_type_name(uint32_t type) {
  switch (type) {
  case RDZV_HELLO: return "hello";
  case RDZV_WELCOME: return "welcome";
  case RDZV_ALLGATHER: return "allgather";
  case RDZV_BROADCAST: return "broadcast";
  case RDZV_BARRIER: return "barrier";
  case RDZV_REPLY: return "reply";
  case RDZV_ERROR: return "error";
  case RDZV_CHALLENGE: return "challenge";
  case RDZV_ACCEPT: return "accept";
  default: return "unknown message";
  }
}

const char *rdzv_error_text(void) {
  const char *msg = tp_last_error();
  const char *sep = strstr(msg, ": ");
  return sep ? sep + 2 : msg;
}

tp_rc rdzv_socket_options(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
    return TP_FAIL(TP_EIO, "fcntl on a rendezvous socket: %s", strerror(errno));
  int one = 1;
  /* Fails harmlessly on non-TCP sockets; messages are small and latency-bound. */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return TP_OK;
}

/* Waits until fd is ready for events or the deadline passes. */
static tp_rc wait_ready(int fd, short events, int64_t deadline, const char *peer,
                        const char *doing) {
  for (;;) {
    int64_t left = deadline - rdzv_now_ms();
    if (left <= 0) return TP_FAIL(TP_ETIMEOUT, "timed out %s %s", doing, peer);
    struct pollfd p = {.fd = fd, .events = events};
    int n = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
    if (n > 0) return TP_OK; /* ready, or an error/hang-up the next call reports */
    if (n < 0 && errno != EINTR) return TP_FAIL(TP_EIO, "poll: %s", strerror(errno));
  }
}

tp_rc rdzv_send_all(int fd, const void *buf, size_t len, int64_t deadline, const char *peer) {
  const unsigned char *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      TP_TRY(wait_ready(fd, POLLOUT, deadline, peer, "sending to"));
    } else if (n < 0 && errno != EINTR) {
      return TP_FAIL(TP_EIO, "%s closed the connection (send: %s)", peer, strerror(errno));
    }
  }
  return TP_OK;
}

tp_rc rdzv_recv_all(int fd, void *buf, size_t len, int64_t deadline, const char *peer) {
  unsigned char *p = buf;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
    } else if (n == 0) {
      return TP_FAIL(TP_EIO, "%s closed the connection", peer);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      TP_TRY(wait_ready(fd, POLLIN, deadline, peer, "waiting for"));
    } else if (errno != EINTR) {
      return TP_FAIL(TP_EIO, "%s closed the connection (recv: %s)", peer, strerror(errno));
    }
  }
  return TP_OK;
}

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static void put_u64(unsigned char *p, uint64_t v) {
  put_u32(p, (uint32_t)(v >> 32));
  put_u32(p + 4, (uint32_t)v);
}

static uint32_t get_u32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint64_t get_u64(const unsigned char *p) {
  return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

void rdzv_header_encode(const rdzv_header *h, unsigned char raw[RDZV_HEADER_BYTES]) {
  put_u32(raw, RDZV_MAGIC);
  put_u32(raw + 4, h->type);
  put_u32(raw + 8, h->arg);
  put_u32(raw + 12, h->arg2);
  put_u64(raw + 16, h->seq);
  put_u64(raw + 24, h->count);
  put_u64(raw + 32, h->len);
}

tp_rc rdzv_header_decode(const unsigned char *raw, size_t len, rdzv_header *h) {
  if (len != RDZV_HEADER_BYTES)
    return TP_FAIL(TP_EFOREIGN, "a rendezvous header of %zu bytes, not %d", len, RDZV_HEADER_BYTES);
  if (get_u32(raw) != RDZV_MAGIC)
    return TP_FAIL(TP_EFOREIGN, "not a tpbench rendezvous message (magic 0x%08x)", get_u32(raw));
  h->type = get_u32(raw + 4);
  h->arg = get_u32(raw + 8);
  h->arg2 = get_u32(raw + 12);
  h->seq = get_u64(raw + 16);
  h->count = get_u64(raw + 24);
  h->len = get_u64(raw + 32);
  if (h->type < RDZV_HELLO || h->type > RDZV_ACCEPT)
    return TP_FAIL(TP_EFOREIGN, "an unknown rendezvous message type %u", h->type);
  if (h->len > RDZV_MAX_PAYLOAD)
    return TP_FAIL(TP_EFOREIGN,
                   "a rendezvous message announcing %llu bytes, more than the %llu "
                   "accepted",
                   (unsigned long long)h->len, (unsigned long long)RDZV_MAX_PAYLOAD);
  return TP_OK;
}

void rdzv_build_challenge(const rdzv_challenge *c, unsigned char out[RDZV_CHALLENGE_BYTES]) {
  rdzv_header h = {.type = RDZV_CHALLENGE, .arg = RDZV_VERSION, .len = RDZV_NONCE_BYTES};
  rdzv_header_encode(&h, out);
  memcpy(out + RDZV_HEADER_BYTES, c->nonce, RDZV_NONCE_BYTES);
}

void rdzv_build_hello(const rdzv_hello *hello, unsigned char out[RDZV_HELLO_BYTES]) {
  rdzv_header h = {.type = RDZV_HELLO,
                   .arg = hello->rank,
                   .arg2 = hello->world,
                   .count = RDZV_VERSION,
                   .len = RDZV_NONCE_BYTES + RDZV_MAC_BYTES};
  rdzv_header_encode(&h, out);
  memcpy(out + RDZV_HEADER_BYTES, hello->nonce, RDZV_NONCE_BYTES);
  memcpy(out + RDZV_HEADER_BYTES + RDZV_NONCE_BYTES, hello->mac, RDZV_MAC_BYTES);
}

/* The header of a handshake message of type `type` and `bytes` in all. */
static tp_rc parse_handshake_header(const unsigned char *msg, size_t len, uint32_t type,
                                    size_t bytes, rdzv_header *h) {
  if (len != bytes)
    return TP_FAIL(TP_EFOREIGN, "a rendezvous %s of %zu bytes, not %zu", rdzv_type_name(type), len,
                   bytes);
  TP_TRY(rdzv_header_decode(msg, RDZV_HEADER_BYTES, h));
  if (h->type != type)
    return TP_FAIL(TP_EFOREIGN, "a rendezvous %s where a %s was due", rdzv_type_name(h->type),
                   rdzv_type_name(type));
  if (h->len != bytes - RDZV_HEADER_BYTES)
    return TP_FAIL(TP_EFOREIGN, "a rendezvous %s announcing %llu bytes, not %zu",
                   rdzv_type_name(type), (unsigned long long)h->len, bytes - RDZV_HEADER_BYTES);
  return TP_OK;
}

tp_rc rdzv_parse_challenge(const unsigned char *msg, size_t len, rdzv_challenge *out) {
  rdzv_header h;
  TP_TRY(parse_handshake_header(msg, len, RDZV_CHALLENGE, RDZV_CHALLENGE_BYTES, &h));
  if (h.arg != RDZV_VERSION)
    return TP_FAIL(TP_EFOREIGN, "the rendezvous server speaks protocol version %u, this build %u",
                   h.arg, RDZV_VERSION);
  memcpy(out->nonce, msg + RDZV_HEADER_BYTES, RDZV_NONCE_BYTES);
  return TP_OK;
}

tp_rc rdzv_parse_hello(const unsigned char *msg, size_t len, rdzv_hello *out) {
  rdzv_header h;
  TP_TRY(parse_handshake_header(msg, len, RDZV_HELLO, RDZV_HELLO_BYTES, &h));
  if (h.count != RDZV_VERSION)
    return TP_FAIL(TP_EFOREIGN, "a joiner speaking protocol version %llu, this build %u",
                   (unsigned long long)h.count, RDZV_VERSION);
  if (h.arg2 < 1 || h.arg2 > RDZV_MAX_WORLD || h.arg >= h.arg2)
    return TP_FAIL(TP_EFOREIGN, "a joiner claiming rank %u of world size %u", h.arg, h.arg2);
  out->rank = h.arg;
  out->world = h.arg2;
  memcpy(out->nonce, msg + RDZV_HEADER_BYTES, RDZV_NONCE_BYTES);
  memcpy(out->mac, msg + RDZV_HEADER_BYTES + RDZV_NONCE_BYTES, RDZV_MAC_BYTES);
  return TP_OK;
}
