/*
 * rendezvous_auth.h — internal to the rendezvous: the handshake's MAC and the
 * sealed channel every message after it travels on (HMAC-SHA256, libsodium).
 *
 * Handshake: the server sends a random nonce (challenge); the joiner answers
 * with its own nonce and HMAC(secret, "hello" label || server nonce || joiner
 * nonce || rank || world || version). Both ends then derive a session key,
 * HMAC(secret, "session" label || both nonces || rank || world), and seal
 * every message: header, payload, then a 32-byte tag HMAC(session key,
 * direction || message counter || header || payload). The server's first
 * sealed message (accept or error) is its proof that it knows the secret.
 * Fresh nonces on both sides make every tag single-use: nothing recorded
 * from one connection is accepted on another, and the counters reject
 * replayed, dropped or reordered messages within one.
 */
#ifndef TP_RENDEZVOUS_AUTH_H
#define TP_RENDEZVOUS_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

#include "bench/launch/rendezvous.h"
#include "bench/launch/rendezvous_wire.h"

/* Fills buf with random bytes (getrandom(2)); TP_EIO if none came. */
TP_MUST_CHECK tp_rc rdzv_random(void *buf, size_t len);

/* The MAC a joiner sends in its hello over the server's challenge. */
void rdzv_hello_mac(const tp_rdzv_secret *secret,
                    const unsigned char server_nonce[RDZV_NONCE_BYTES], const rdzv_hello *hello,
                    unsigned char mac[RDZV_MAC_BYTES]);

/* 1 if hello->mac is the right one, compared in constant time. */
int rdzv_hello_mac_ok(const tp_rdzv_secret *secret,
                      const unsigned char server_nonce[RDZV_NONCE_BYTES], const rdzv_hello *hello);

/* One end of an authenticated connection. */
typedef struct rdzv_channel {
  int fd; /* owned by whoever owns the channel; -1 when closed */
  unsigned char key[crypto_auth_hmacsha256_KEYBYTES];
  uint64_t sent, received; /* message counters */
  unsigned char send_dir, recv_dir;
  crypto_auth_hmacsha256_state rx; /* the message being received */
  char peer[48];                   /* "rank 2", "the rendezvous server" */
} rdzv_channel;

/* Sets up ch over fd after a hello (the server's side if is_server). */
void rdzv_channel_init(rdzv_channel *ch, int fd, const tp_rdzv_secret *secret,
                       const unsigned char server_nonce[RDZV_NONCE_BYTES], const rdzv_hello *hello,
                       int is_server, const char *peer);

/* Forgets the key (the fd is left alone). */
void rdzv_channel_wipe(rdzv_channel *ch);

/* Sends h, then the n parts (their sizes must add up to h->len), then the
 * tag. */
TP_MUST_CHECK tp_rc rdzv_channel_send_parts(rdzv_channel *ch, const rdzv_header *h,
                                            const void *const *parts, const size_t *sizes, int n,
                                            int64_t deadline);

/* Sends h and its h->len payload bytes (payload may be NULL when h->len is 0). */
TP_MUST_CHECK tp_rc rdzv_channel_send(rdzv_channel *ch, const rdzv_header *h, const void *payload,
                                      int64_t deadline);

/* Receiving one message: the header, then its payload in any pieces, then
 * rdzv_channel_recv_end, which checks the tag. Nothing received may be acted
 * on (beyond bounding its length) until recv_end returned TP_OK; a wrong tag
 * is TP_EFOREIGN. */
TP_MUST_CHECK tp_rc rdzv_channel_recv_header(rdzv_channel *ch, rdzv_header *h, int64_t deadline);
TP_MUST_CHECK tp_rc rdzv_channel_recv_body(rdzv_channel *ch, void *buf, size_t len,
                                           int64_t deadline);
TP_MUST_CHECK tp_rc rdzv_channel_recv_end(rdzv_channel *ch, int64_t deadline);

#endif /* TP_RENDEZVOUS_AUTH_H */
