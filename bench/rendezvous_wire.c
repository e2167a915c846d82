/*
 * rendezvous_wire.c — header encoding and deadline-bounded socket I/O of the
 * rendezvous (see rendezvous_wire.h).
 */
#include "rendezvous_wire.h"

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

tp_rc rdzv_send_header(int fd, const rdzv_header *h, int64_t deadline, const char *peer) {
  unsigned char raw[RDZV_HEADER_BYTES];
  put_u32(raw, RDZV_MAGIC);
  put_u32(raw + 4, h->type);
  put_u32(raw + 8, h->arg);
  put_u32(raw + 12, h->arg2);
  put_u64(raw + 16, h->seq);
  put_u64(raw + 24, h->count);
  put_u64(raw + 32, h->len);
  return rdzv_send_all(fd, raw, sizeof raw, deadline, peer);
}

tp_rc rdzv_send_msg(int fd, const rdzv_header *h, const void *payload, int64_t deadline,
                    const char *peer) {
  TP_TRY(rdzv_send_header(fd, h, deadline, peer));
  /* No payload: the header announces a body the caller streams itself. */
  if (h->len == 0 || payload == NULL) return TP_OK;
  return rdzv_send_all(fd, payload, (size_t)h->len, deadline, peer);
}

tp_rc rdzv_recv_header(int fd, rdzv_header *h, int64_t deadline, const char *peer) {
  unsigned char raw[RDZV_HEADER_BYTES];
  TP_TRY(rdzv_recv_all(fd, raw, sizeof raw, deadline, peer));
  if (get_u32(raw) != RDZV_MAGIC)
    return TP_FAIL(TP_EFOREIGN, "%s sent something that is not a tpbench rendezvous message", peer);
  h->type = get_u32(raw + 4);
  h->arg = get_u32(raw + 8);
  h->arg2 = get_u32(raw + 12);
  h->seq = get_u64(raw + 16);
  h->count = get_u64(raw + 24);
  h->len = get_u64(raw + 32);
  if (h->type < RDZV_HELLO || h->type > RDZV_ERROR)
    return TP_FAIL(TP_EFOREIGN, "%s sent an unknown message type %u", peer, h->type);
  if (h->len > RDZV_MAX_PAYLOAD)
    return TP_FAIL(TP_EFOREIGN, "%s announced %llu bytes, more than the %llu accepted", peer,
                   (unsigned long long)h->len, (unsigned long long)RDZV_MAX_PAYLOAD);
  return TP_OK;
}
