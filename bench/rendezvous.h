/*
 * rendezvous.h — a small TCP store that lets the ranks of one job find each
 * other and exchange bytes (NCCL's unique id, CUDA IPC handles) before any
 * GPU communicator exists.
 *
 * Rank 0 listens on MASTER_ADDR:MASTER_PORT; every rank (rank 0 included)
 * connects to it. Collective calls must be made by every rank in the same
 * order. Every blocking step has a deadline: a peer that dies or never comes
 * gives TP_ETIMEOUT or TP_EIO with the rank named, never a hang.
 */
#ifndef TP_RENDEZVOUS_H
#define TP_RENDEZVOUS_H

#include <stddef.h>

#include "../common/tp_error.h"

typedef struct tp_rdzv tp_rdzv;

/* Joins the job. timeout_ms bounds the wait for every rank to arrive. */
tp_rc tp_rdzv_connect(const char *addr, int port, int rank, int world, int timeout_ms,
                      tp_rdzv **out);

/* Every rank contributes bytes; recv (world * bytes) receives them in rank order. */
tp_rc tp_rdzv_allgather(tp_rdzv *rdzv, const void *send, size_t bytes, void *recv);

/* Rank root's bytes reach every rank. */
tp_rc tp_rdzv_broadcast(tp_rdzv *rdzv, int root, void *buf, size_t bytes);

tp_rc tp_rdzv_barrier(tp_rdzv *rdzv);

int tp_rdzv_rank(const tp_rdzv *rdzv);
int tp_rdzv_world(const tp_rdzv *rdzv);

void tp_rdzv_close(tp_rdzv *rdzv);

#endif /* TP_RENDEZVOUS_H */
