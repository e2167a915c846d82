/*
 * rendezvous_auth.c — the handshake MAC and the sealed channel of the
 * rendezvous (see rendezvous_auth.h).
 */
#include "bench/launch/rendezvous_auth.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

static const char HELLO_LABEL[] = "tpbench rendezvous v2 hello";
static const char SESSION_LABEL[] = "tpbench rendezvous v2 session";

enum { TO_SERVER = 'C', TO_CLIENT = 'S' };

tp_rc rdzv_random(void *buf, size_t len) {
  unsigned char *p = buf;
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return TP_FAIL(TP_EIO, "getrandom: %s", strerror(errno));
    p += n;
    len -= (size_t)n;
  }
  return TP_OK;
}

static void put_be32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (24 - 8 * i));
}

/* HMAC(secret, label || server nonce || joiner nonce || rank || world || version). */
static void handshake_mac(const tp_rdzv_secret *secret, const char *label,
                          const unsigned char server_nonce[RDZV_NONCE_BYTES],
                          const rdzv_hello *hello, unsigned char out[RDZV_MAC_BYTES]) {
  unsigned char fields[12];
  put_be32(fields, hello->rank);
  put_be32(fields + 4, hello->world);
  put_be32(fields + 8, RDZV_VERSION);
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, secret->bytes, secret->len);
  crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, strlen(label) + 1);
  crypto_auth_hmacsha256_update(&st, server_nonce, RDZV_NONCE_BYTES);
  crypto_auth_hmacsha256_update(&st, hello->nonce, RDZV_NONCE_BYTES);
  crypto_auth_hmacsha256_update(&st, fields, sizeof fields);
  crypto_auth_hmacsha256_final(&st, out);
  sodium_memzero(&st, sizeof st);
}

void rdzv_hello_mac(const tp_rdzv_secret *secret,
                    const unsigned char server_nonce[RDZV_NONCE_BYTES], const rdzv_hello *hello,
                    unsigned char mac[RDZV_MAC_BYTES]) {
  handshake_mac(secret, HELLO_LABEL, server_nonce, hello, mac);
}

int rdzv_hello_mac_ok(const tp_rdzv_secret *secret,
                      const unsigned char server_nonce[RDZV_NONCE_BYTES], const rdzv_hello *hello) {
  unsigned char expected[RDZV_MAC_BYTES];
  handshake_mac(secret, HELLO_LABEL, server_nonce, hello, expected);
  int ok = sodium_memcmp(expected, hello->mac, RDZV_MAC_BYTES) == 0;
  sodium_memzero(expected, sizeof expected);
  return ok;
}

void rdzv_channel_init(rdzv_channel *ch, int fd, const tp_rdzv_secret *secret,
                       const unsigned char server_nonce[RDZV_NONCE_BYTES], const rdzv_hello *hello,
                       int is_server, const char *peer) {
  memset(ch, 0, sizeof *ch);
  ch->fd = fd;
  handshake_mac(secret, SESSION_LABEL, server_nonce, hello, ch->key);
  ch->send_dir = is_server ? TO_CLIENT : TO_SERVER;
  ch->recv_dir = is_server ? TO_SERVER : TO_CLIENT;
  snprintf(ch->peer, sizeof ch->peer, "%s", peer);
}

void rdzv_channel_wipe(rdzv_channel *ch) {
  sodium_memzero(ch->key, sizeof ch->key);
  sodium_memzero(&ch->rx, sizeof ch->rx);
}

/* Starts the tag of message number counter in direction dir over its header. */
static void tag_begin(const rdzv_channel *ch, crypto_auth_hmacsha256_state *st, unsigned char dir,
                      uint64_t counter, const unsigned char raw[RDZV_HEADER_BYTES]) {
  unsigned char prefix[9];
  prefix[0] = dir;
  put_be32(prefix + 1, (uint32_t)(counter >> 32));
  put_be32(prefix + 5, (uint32_t)counter);
  crypto_auth_hmacsha256_init(st, ch->key, sizeof ch->key);
  crypto_auth_hmacsha256_update(st, prefix, sizeof prefix);
  crypto_auth_hmacsha256_update(st, raw, RDZV_HEADER_BYTES);
}

tp_rc rdzv_channel_send_parts(rdzv_channel *ch, const rdzv_header *h, const void *const *parts,
                              const size_t *sizes, int n, int64_t deadline) {
  unsigned char raw[RDZV_HEADER_BYTES], tag[RDZV_MAC_BYTES];
  rdzv_header_encode(h, raw);
  crypto_auth_hmacsha256_state st;
  tag_begin(ch, &st, ch->send_dir, ch->sent++, raw);
  for (int i = 0; i < n; i++)
    if (sizes[i] > 0) crypto_auth_hmacsha256_update(&st, parts[i], sizes[i]);
  crypto_auth_hmacsha256_final(&st, tag);
  TP_TRY(rdzv_send_all(ch->fd, raw, sizeof raw, deadline, ch->peer));
  for (int i = 0; i < n; i++)
    if (sizes[i] > 0) TP_TRY(rdzv_send_all(ch->fd, parts[i], sizes[i], deadline, ch->peer));
  return rdzv_send_all(ch->fd, tag, sizeof tag, deadline, ch->peer);
}

tp_rc rdzv_channel_send(rdzv_channel *ch, const rdzv_header *h, const void *payload,
                        int64_t deadline) {
  const void *parts[1] = {payload};
  size_t sizes[1] = {payload ? (size_t)h->len : 0};
  return rdzv_channel_send_parts(ch, h, parts, sizes, 1, deadline);
}

tp_rc rdzv_channel_recv_header(rdzv_channel *ch, rdzv_header *h, int64_t deadline) {
  unsigned char raw[RDZV_HEADER_BYTES];
  TP_TRY(rdzv_recv_all(ch->fd, raw, sizeof raw, deadline, ch->peer));
  if (rdzv_header_decode(raw, sizeof raw, h) != TP_OK)
    return tp_fail_context(TP_EFOREIGN, "%s sent a malformed message", ch->peer);
  tag_begin(ch, &ch->rx, ch->recv_dir, ch->received++, raw);
  return TP_OK;
}

tp_rc rdzv_channel_recv_body(rdzv_channel *ch, void *buf, size_t len, int64_t deadline) {
  TP_TRY(rdzv_recv_all(ch->fd, buf, len, deadline, ch->peer));
  if (len > 0) crypto_auth_hmacsha256_update(&ch->rx, buf, len);
  return TP_OK;
}

tp_rc rdzv_channel_recv_end(rdzv_channel *ch, int64_t deadline) {
  unsigned char tag[RDZV_MAC_BYTES], expected[RDZV_MAC_BYTES];
  TP_TRY(rdzv_recv_all(ch->fd, tag, sizeof tag, deadline, ch->peer));
  crypto_auth_hmacsha256_final(&ch->rx, expected);
  if (sodium_memcmp(tag, expected, sizeof tag) != 0)
    return TP_FAIL(TP_EFOREIGN,
                   "a message from %s failed authentication (not sealed with the job's secret)",
                   ch->peer);
  return TP_OK;
}
