/*
 * fuzz_rdzv_wire.c — libFuzzer target: the bytes a stranger can send the
 * rendezvous (bench/launch/rendezvous_wire.c, bench/launch/rendezvous_auth.c) and the job
 * secret taken from the environment (bench/launch/rendezvous_secret.c).
 *
 * Every input goes, whole, to each parser: the 40-byte header, the challenge
 * and hello messages, and the hex secret. It is then streamed into the
 * server's end of a sealed channel (over a socketpair) as a joiner would
 * send it after the handshake, and finally sealed by a client holding the
 * job's secret as one message's payload and received by the server.
 * Properties checked beyond "no crash, leak, undefined behaviour or hang": a
 * header that decodes encodes back to the same 40 bytes; an accepted hello
 * names a rank inside its world; raw bytes never pass the server's tag
 * check (nobody here holds the key); a sealed message is received whole,
 * byte for byte.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/launch/rendezvous_auth.h"
#include "bench/launch/rendezvous_wire.h"

/* Bytes one message may carry here: what fits a socketpair's buffer. */
enum { MAX_BODY = 8192, DEADLINE_MS = 1000 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok) {
  if (!ok) abort();
}

static void parse_messages(const uint8_t *data, size_t size) {
  rdzv_header h;
  if (rdzv_header_decode(data, size, &h) == TP_OK) {
    unsigned char again[RDZV_HEADER_BYTES];
    rdzv_header_encode(&h, again);
    check(memcmp(again, data, RDZV_HEADER_BYTES) == 0);
  }
  rdzv_challenge challenge;
  (void)rdzv_parse_challenge(data, size, &challenge);
  rdzv_hello hello;
  if (rdzv_parse_hello(data, size, &hello) == TP_OK)
    check(hello.world >= 1 && hello.world <= RDZV_MAX_WORLD && hello.rank < hello.world);
}

static void parse_secret(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return;
  memcpy(text, data, size);
  text[size] = '\0';
  tp_rdzv_secret secret;
  if (tp_rdzv_secret_from_hex(text, &secret) == TP_OK)
    check(secret.len >= TP_RDZV_SECRET_MIN && secret.len <= TP_RDZV_SECRET_MAX);
  free(text);
}

/* The two ends of a channel after a handshake with fixed nonces. */
typedef struct channel_pair {
  int fds[2];
  rdzv_channel server, client;
} channel_pair;

static int open_pair(channel_pair *p) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p->fds) != 0) return 0;
  tp_rdzv_secret secret = {.len = TP_RDZV_SECRET_MIN};
  memset(secret.bytes, 0x5A, secret.len);
  unsigned char server_nonce[RDZV_NONCE_BYTES];
  memset(server_nonce, 0x11, sizeof server_nonce);
  rdzv_hello hello = {.rank = 1, .world = 2};
  memset(hello.nonce, 0x22, sizeof hello.nonce);
  rdzv_channel_init(&p->server, p->fds[0], &secret, server_nonce, &hello, 1, "rank 1");
  rdzv_channel_init(&p->client, p->fds[1], &secret, server_nonce, &hello, 0, "the server");
  return 1;
}

static void close_pair(channel_pair *p) {
  rdzv_channel_wipe(&p->server);
  rdzv_channel_wipe(&p->client);
  close(p->fds[0]);
  close(p->fds[1]);
}

/* Receives one message on the server's end; TP_OK only if its tag checks. */
static tp_rc receive(rdzv_channel *ch, unsigned char *body, rdzv_header *h) {
  int64_t deadline = rdzv_now_ms() + DEADLINE_MS;
  TP_TRY(rdzv_channel_recv_header(ch, h, deadline));
  if (h->len > MAX_BODY) return TP_EFOREIGN;
  TP_TRY(rdzv_channel_recv_body(ch, body, (size_t)h->len, deadline));
  return rdzv_channel_recv_end(ch, deadline);
}

/* The input as a joiner's raw bytes, then the stream closed. */
static void receive_raw(const uint8_t *data, size_t size) {
  channel_pair p;
  if (size > MAX_BODY || !open_pair(&p)) return;
  if (write(p.fds[1], data, size) == (ssize_t)size && shutdown(p.fds[1], SHUT_WR) == 0) {
    static unsigned char body[MAX_BODY];
    rdzv_header h;
    check(receive(&p.server, body, &h) != TP_OK);
  }
  close_pair(&p);
}

/* The input as the payload of a message sealed by the client. */
static void round_trip(const uint8_t *data, size_t size) {
  channel_pair p;
  if (size > MAX_BODY || !open_pair(&p)) return;
  rdzv_header sent = {.type = RDZV_ALLGATHER, .arg = 1, .seq = 7, .count = size, .len = size};
  check(rdzv_channel_send(&p.client, &sent, data, rdzv_now_ms() + DEADLINE_MS) == TP_OK);
  static unsigned char body[MAX_BODY];
  rdzv_header got;
  check(receive(&p.server, body, &got) == TP_OK);
  check(got.type == sent.type && got.seq == sent.seq && got.len == size);
  check(size == 0 || memcmp(body, data, size) == 0);
  close_pair(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  parse_messages(data, size);
  parse_secret(data, size);
  receive_raw(data, size);
  round_trip(data, size);
  return 0;
}
