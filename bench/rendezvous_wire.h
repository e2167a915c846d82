/*
 * rendezvous_wire.h — internal to the rendezvous (rendezvous*.c): the message
 * format its client and server share, and socket I/O bounded by deadlines.
 *
 * A message is a 40-byte header (big-endian fields: magic, type, arg, arg2,
 * seq, count, len) followed by len bytes of payload. Every function here
 * waits with poll() on non-blocking sockets and gives up at an absolute
 * deadline on the monotonic clock (milliseconds, rdzv_now_ms()).
 */
#ifndef TP_RENDEZVOUS_WIRE_H
#define TP_RENDEZVOUS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/tp_error.h"

#define RDZV_MAGIC 0x54505244u /* "TPRD" */
#define RDZV_HEADER_BYTES 40
#define RDZV_MAX_PAYLOAD (1ull << 30)

enum rdzv_type {
  RDZV_HELLO = 1, /* client → server: arg = rank, arg2 = world */
  RDZV_WELCOME,   /* server → client: every rank has joined */
  RDZV_ALLGATHER, /* count = bytes per rank; payload = this rank's bytes */
  RDZV_BROADCAST, /* arg = root; count = bytes; payload only from the root */
  RDZV_BARRIER,
  RDZV_REPLY, /* server → client: the collective's result */
  RDZV_ERROR  /* server → client: arg = tp_rc; payload = the message text */
};

typedef struct rdzv_header {
  uint32_t type, arg, arg2;
  uint64_t seq;   /* collective number, from 0, the same on every rank */
  uint64_t count; /* the caller's byte count (agreement is checked) */
  uint64_t len;   /* payload bytes that follow */
} rdzv_header;

/* Milliseconds on the monotonic clock. */
int64_t rdzv_now_ms(void);

/* "allgather", "broadcast", ... for messages. */
const char *rdzv_type_name(uint32_t type);

/* The text of this thread's last error without its "file:line: " prefix. */
const char *rdzv_error_text(void);

/* Makes a socket non-blocking and close-on-exec, and disables Nagle's delay. */
tp_rc rdzv_socket_options(int fd);

/* Sends or receives exactly len bytes by the deadline. peer names the other
 * end in messages ("rank 2"). A closed connection is TP_EIO, the deadline
 * TP_ETIMEOUT. */
tp_rc rdzv_send_all(int fd, const void *buf, size_t len, int64_t deadline, const char *peer);
tp_rc rdzv_recv_all(int fd, void *buf, size_t len, int64_t deadline, const char *peer);

/* Sends a header alone; the h->len payload bytes must follow. */
tp_rc rdzv_send_header(int fd, const rdzv_header *h, int64_t deadline, const char *peer);

/* Sends a header (h->len gives the payload size) and its payload; with
 * payload NULL only the header, and the caller streams the h->len bytes. */
tp_rc rdzv_send_msg(int fd, const rdzv_header *h, const void *payload, int64_t deadline,
                    const char *peer);

/* Receives and checks a header: a closed connection is TP_EIO; a bad magic,
 * an unknown type or a len beyond bounds is TP_EFOREIGN (not our protocol). */
tp_rc rdzv_recv_header(int fd, rdzv_header *h, int64_t deadline, const char *peer);

#endif /* TP_RENDEZVOUS_WIRE_H */
