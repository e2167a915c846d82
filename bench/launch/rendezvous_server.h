/*
 * rendezvous_server.h — internal to the rendezvous: the server rank 0 runs on
 * a thread of its own (protocol in rendezvous_wire.h, contract in
 * rendezvous.h).
 */
#ifndef TP_RENDEZVOUS_SERVER_H
#define TP_RENDEZVOUS_SERVER_H

#include "bench/launch/rendezvous.h"
#include "common/tp_error.h"

typedef struct rdzv_server rdzv_server;

/* Listens on addr:port (that address only) and starts serving world ranks
 * on a new thread, admitting only joiners that prove they hold secret (the
 * server keeps a copy). The ranks must all join within timeout_ms; each
 * collective must be complete within timeout_ms of its first request.
 * TP_EIO if the port cannot be bound or the thread not started. */
TP_MUST_CHECK tp_rc rdzv_server_start(const char *addr, int port, int world, int timeout_ms,
                                      const tp_rdzv_secret *secret, rdzv_server **out);

/* Stops the server thread, closes its sockets and frees it (NULL: no-op).
 * Answers already sent stay deliverable. */
void rdzv_server_stop(rdzv_server *server);

#endif /* TP_RENDEZVOUS_SERVER_H */
