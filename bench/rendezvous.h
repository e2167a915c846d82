/*
 * rendezvous.h — a small TCP store that lets the ranks of one job find each
 * other and exchange bytes (NCCL's unique id, CUDA IPC handles) before any
 * GPU communicator exists.
 *
 * Rank 0 listens on MASTER_ADDR:MASTER_PORT; every rank (rank 0 included)
 * connects to it. Collective calls must be made by every rank in the same
 * order. Every blocking step has a deadline: a peer that dies or never comes
 * gives TP_ETIMEOUT or TP_EIO with the rank named, never a hang.
 *
 * How it works: rank 0 runs the server on a thread of its own; every rank,
 * rank 0 included, is a client of it over TCP. Messages are length-prefixed
 * (a fixed 40-byte header, then the payload). For each collective the server
 * waits for every rank's request, checks that they agree (same collective,
 * same byte count, same root), and answers each rank. A rank that closes its
 * socket (it exited or crashed) or is late by more than timeout_ms makes the
 * server answer every other rank with an error naming it; clients wait
 * timeout_ms plus a short grace for that answer before timing out on their
 * own. After any error a tp_rdzv only fails: close it.
 */
#ifndef TP_RENDEZVOUS_H
#define TP_RENDEZVOUS_H

#include <stddef.h>

#include "../common/tp_error.h"

typedef struct tp_rdzv tp_rdzv;

/* Joins the job: rank (0 <= rank < world) of world. Rank 0 starts the server
 * on addr:port (SO_REUSEADDR; the address addr resolves to, or every
 * interface if that address is not local); every rank connects, retrying
 * until the deadline, so rank 0 may start after the others. Returns once all
 * world ranks have joined. timeout_ms (> 0) bounds that wait and, from then
 * on, every collective. TP_EUSAGE for bad arguments, TP_ETIMEOUT naming the
 * ranks that never joined, TP_EIO for socket errors (port in use, ...). */
tp_rc tp_rdzv_connect(const char *addr, int port, int rank, int world, int timeout_ms,
                      tp_rdzv **out);

/* Every rank contributes bytes; recv (world * bytes) receives them in rank order. */
tp_rc tp_rdzv_allgather(tp_rdzv *rdzv, const void *send, size_t bytes, void *recv);

/* Rank root's bytes reach every rank. */
tp_rc tp_rdzv_broadcast(tp_rdzv *rdzv, int root, void *buf, size_t bytes);

/* Returns once every rank has entered the barrier. */
tp_rc tp_rdzv_barrier(tp_rdzv *rdzv);

int tp_rdzv_rank(const tp_rdzv *rdzv);
int tp_rdzv_world(const tp_rdzv *rdzv);

/* Leaves the job and frees rdzv (NULL is a no-op). On rank 0 this stops the
 * server: call it after the last collective, whose answers have then reached
 * every rank; ranks still asking for more get an error naming rank 0. */
void tp_rdzv_close(tp_rdzv *rdzv);

/* A TCP port that was free a moment ago (bind port 0 on every interface,
 * read the port back, close). Another process may take it before it is
 * used; the launcher accepts that small race. TP_EIO on socket errors. */
tp_rc tp_find_free_port(int *port);

#endif /* TP_RENDEZVOUS_H */
