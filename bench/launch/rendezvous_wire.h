/*
 * rendezvous_wire.h — internal to the rendezvous (rendezvous*.c): the message
 * format its client and server share, the pure parsers of the bytes a
 * stranger can send, and socket I/O bounded by deadlines.
 *
 * A message is a 40-byte header (big-endian fields: magic, type, arg, arg2,
 * seq, count, len) followed by len bytes of payload. The handshake
 * (challenge, hello) travels in the clear; every later message is sealed by
 * rendezvous_auth.h (a tag follows the payload). Every I/O function waits
 * with poll() on non-blocking sockets and gives up at an absolute deadline on
 * the monotonic clock (milliseconds, rdzv_now_ms()).
 *
 * The parsers (rdzv_header_decode, rdzv_parse_challenge, rdzv_parse_hello)
 * are pure: bytes in, struct out, no I/O and no state, so they can be fed
 * anything (fuzzing). They check framing only; the hello's MAC is verified
 * by the caller.
 */
#ifndef TP_RENDEZVOUS_WIRE_H
#define TP_RENDEZVOUS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"

#define RDZV_MAGIC 0x54505232u /* "TPR2": the authenticated protocol */
#define RDZV_VERSION 2u
#define RDZV_HEADER_BYTES 40
#define RDZV_MAX_PAYLOAD (1ull << 30)
#define RDZV_NONCE_BYTES 32
#define RDZV_MAC_BYTES 32
#define RDZV_MAX_WORLD (1u << 20)
/* Whole handshake messages: header plus body. */
#define RDZV_CHALLENGE_BYTES (RDZV_HEADER_BYTES + RDZV_NONCE_BYTES)
#define RDZV_HELLO_BYTES (RDZV_HEADER_BYTES + RDZV_NONCE_BYTES + RDZV_MAC_BYTES)

enum rdzv_type {
  RDZV_HELLO = 1, /* client → server: arg = rank, arg2 = world, count = version */
  RDZV_WELCOME,   /* server → client: every rank has joined */
  RDZV_ALLGATHER, /* count = bytes per rank; payload = this rank's bytes */
  RDZV_BROADCAST, /* arg = root; count = bytes; payload only from the root */
  RDZV_BARRIER,
  RDZV_REPLY,     /* server → client: the collective's result */
  RDZV_ERROR,     /* server → client: arg = tp_rc; payload = the message text */
  RDZV_CHALLENGE, /* server → client on connecting: arg = version; payload = nonce */
  RDZV_ACCEPT     /* server → client: the hello was good; arg = rank */
};

typedef struct rdzv_header {
  uint32_t type, arg, arg2;
  uint64_t seq;   /* collective number, from 0, the same on every rank */
  uint64_t count; /* the caller's byte count (agreement is checked) */
  uint64_t len;   /* payload bytes that follow */
} rdzv_header;

typedef struct rdzv_challenge {
  unsigned char nonce[RDZV_NONCE_BYTES];
} rdzv_challenge;

typedef struct rdzv_hello {
  uint32_t rank, world;
  unsigned char nonce[RDZV_NONCE_BYTES]; /* the client's */
  unsigned char mac[RDZV_MAC_BYTES];     /* over both nonces, rank, world, version */
} rdzv_hello;

/* Milliseconds on the monotonic clock. */
int64_t rdzv_now_ms(void);

/* "allgather", "broadcast", ... for messages. */
const char *rdzv_type_name(uint32_t type);

/* The text of this thread's last error without its "file:line: " prefix. */
const char *rdzv_error_text(void);

/* Writes h (with RDZV_MAGIC) as the 40 wire bytes. */
void rdzv_header_encode(const rdzv_header *h, unsigned char raw[RDZV_HEADER_BYTES]);

/* Parses untrusted bytes: len must be RDZV_HEADER_BYTES. TP_EFOREIGN for a
 * wrong length or magic, an unknown type or a len beyond RDZV_MAX_PAYLOAD. */
TP_MUST_CHECK tp_rc rdzv_header_decode(const unsigned char *raw, size_t len, rdzv_header *h);

/* The whole challenge and hello messages, as sent. */
void rdzv_build_challenge(const rdzv_challenge *c, unsigned char out[RDZV_CHALLENGE_BYTES]);
void rdzv_build_hello(const rdzv_hello *hello, unsigned char out[RDZV_HELLO_BYTES]);

/* Parse untrusted bytes (len must be the message's whole size): TP_EFOREIGN
 * unless the header is a well-formed challenge (hello) of protocol
 * RDZV_VERSION with the right payload length, and, for a hello, a world in
 * 1..RDZV_MAX_WORLD with the rank inside it. */
TP_MUST_CHECK tp_rc rdzv_parse_challenge(const unsigned char *msg, size_t len, rdzv_challenge *out);
TP_MUST_CHECK tp_rc rdzv_parse_hello(const unsigned char *msg, size_t len, rdzv_hello *out);

/* Makes a socket non-blocking and close-on-exec, and disables Nagle's delay. */
TP_MUST_CHECK tp_rc rdzv_socket_options(int fd);

/* Sends or receives exactly len bytes by the deadline. peer names the other
 * end in messages ("rank 2"). A closed connection is TP_EIO, the deadline
 * TP_ETIMEOUT. */
TP_MUST_CHECK tp_rc rdzv_send_all(int fd, const void *buf, size_t len, int64_t deadline,
                                  const char *peer);
TP_MUST_CHECK tp_rc rdzv_recv_all(int fd, void *buf, size_t len, int64_t deadline,
                                  const char *peer);

#endif /* TP_RENDEZVOUS_WIRE_H */
