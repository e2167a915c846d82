/*
 * rendezvous_server.c — rank 0's side of the rendezvous: accept every rank,
 * then answer collectives round by round (see rendezvous.h for the contract,
 * rendezvous_wire.h for the messages).
 *
 * The server is one thread polling every socket. It never waits on one rank
 * while another could report trouble: a rank that closes its socket, sends an
 * out-of-step or disagreeing request, or keeps the others waiting beyond the
 * timeout ends the job, and every rank still connected is told why, with the
 * culprit's rank in the message. Rank 0's own client stops it through a pipe.
 *
 * Joining is where strangers can knock, so nothing a connection does before
 * it has proven the job's secret can end or stall the job: each new
 * connection gets a challenge at once and has HELLO_MS to answer it in
 * full; its bytes are collected without blocking, a bounded number of such
 * connections wait at a time (the oldest is dropped to make room), and a
 * malformed, unauthenticated, late, other-world or duplicate hello only
 * closes that connection, with a warning in the log.
 */
#include "bench/launch/rendezvous_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/launch/rendezvous_auth.h"
#include "bench/launch/rendezvous_wire.h"
#include "common/tp_log.h"

enum { MAX_PENDING = 64, ERROR_SEND_MS = 1000, HELLO_MS = 2000 };

/* A connection that has not yet proven itself. */
typedef struct rdzv_pending {
  int fd;
  int64_t deadline; /* for its whole hello */
  size_t got;
  unsigned char nonce[RDZV_NONCE_BYTES]; /* the challenge it was sent */
  unsigned char hello[RDZV_HELLO_BYTES];
} rdzv_pending;

typedef struct rdzv_peer {
  rdzv_channel ch; /* ch.fd is -1 until the rank has joined, and after it left */
  int left;        /* closed its connection */
  int arrived;     /* its request of the current round is in */
  rdzv_header req;
  unsigned char *payload;
  char name[24]; /* "rank 2" */
} rdzv_peer;

struct rdzv_server {
  int listen_fd;
  int wake[2]; /* rank 0's client writes here to stop the thread */
  int world;
  int timeout_ms;
  int hello_ms; /* a connection's time to send its whole hello */
  int stopping;
  tp_rdzv_secret secret;
  int64_t join_deadline;
  int64_t round_deadline; /* 0 while no request of the current round is in */
  uint64_t seq;
  rdzv_peer *peers;
  const void **gather_parts; /* world entries, for allgather answers */
  size_t *gather_sizes;
  pthread_t thread;
};

/* ---- listening -------------------------------------------------------- */

static int bind_and_listen(const struct addrinfo *ai, int backlog, int *err) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, backlog) == 0) return fd;
  *err = errno;
  close(fd);
  return -1;
}

/* Binds the first address of host (NULL: every interface) that works. */
static int listen_on_host(const char *host, int port, int backlog, int *err) {
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
  struct addrinfo *list = NULL;
  int gai = getaddrinfo(host, service, &hints, &list);
  if (gai != 0) {
    *err = EADDRNOTAVAIL;
    return -1;
  }
  int fd = -1;
  for (const struct addrinfo *ai = list; ai && fd < 0; ai = ai->ai_next)
    fd = bind_and_listen(ai, backlog, err);
  freeaddrinfo(list);
  return fd;
}

/* Listens on the address given, never on every interface unless that is
 * what it says: a rendezvous reachable from everywhere invites everyone. */
static tp_rc listen_on(const char *addr, int port, int backlog, int *out_fd) {
  int err = 0;
  int fd = listen_on_host(addr, port, backlog, &err);
  if (fd < 0 && err == EADDRNOTAVAIL)
    return TP_FAIL(TP_EIO,
                   "rank 0 cannot listen on %s:%d: that address is not one of this host's; set "
                   "TPBENCH_RDZV_BIND to the local address to listen on (0.0.0.0 for every "
                   "interface)",
                   addr, port);
  if (fd < 0)
    return TP_FAIL(TP_EIO, "rank 0 cannot listen on %s:%d: %s", addr, port, strerror(err));
  *out_fd = fd;
  return TP_OK;
}

/* ---- telling the ranks -------------------------------------------------- */

static void send_error(rdzv_channel *ch, tp_rc code, const char *text) {
  rdzv_header h = {.type = RDZV_ERROR, .arg = (uint32_t)code, .len = strlen(text)};
  /* Best effort: the peer may be gone too, so a failed send is only logged. */
  if (rdzv_channel_send(ch, &h, text, rdzv_now_ms() + ERROR_SEND_MS) != TP_OK)
    TP_LOGD("rdzv", "could not tell a rank '%s': %s", text, tp_last_error());
}

static void send_error_to_all(rdzv_server *s, tp_rc code, const char *text) {
  char copy[2048];
  snprintf(copy, sizeof copy, "%s", text);
  TP_LOGD("rdzv", "server gives up: %s", copy);
  for (int r = 0; r < s->world; r++)
    if (s->peers[r].ch.fd >= 0) send_error(&s->peers[r].ch, code, copy);
}

static void drop_peer(rdzv_peer *peer) {
  if (peer->ch.fd >= 0) close(peer->ch.fd);
  peer->ch.fd = -1;
  free(peer->payload);
  peer->payload = NULL;
  peer->arrived = 0;
}

/* ---- joining ------------------------------------------------------------ */

/* "2, 3" for the ranks that have not joined. */
static void missing_ranks(const rdzv_server *s, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int r = 0; r < s->world && used < cap; r++)
    if (s->peers[r].ch.fd < 0)
      used += (size_t)snprintf(buf + used, cap - used, "%s%d", used ? ", " : "", r);
}

static void drop_pending(rdzv_pending *pending, int *n_pending, int i, const char *why) {
  if (why) TP_LOGW("rdzv", "dropped a connection to the rendezvous: %s", why);
  close(pending[i].fd);
  pending[i] = pending[--*n_pending];
}

/* An authenticated joiner that cannot join is told why (sealed, so it knows
 * the answer is the server's) and closed; the job goes on. */
static void refuse_joiner(rdzv_channel *ch, tp_rc code, const char *why) {
  TP_LOGW("rdzv", "refused a joiner: %s", why);
  send_error(ch, code, why);
  rdzv_channel_wipe(ch);
  close(ch->fd);
}

/* A whole hello has arrived on pending[i]: admit the rank or drop it. */
static void take_hello(rdzv_server *s, rdzv_pending *pending, int *n_pending, int i) {
  rdzv_pending *p = &pending[i];
  rdzv_hello hello;
  if (rdzv_parse_hello(p->hello, sizeof p->hello, &hello) != TP_OK) {
    drop_pending(pending, n_pending, i, rdzv_error_text());
    return;
  }
  if (!rdzv_hello_mac_ok(&s->secret, p->nonce, &hello)) {
    char why[96];
    snprintf(why, sizeof why, "a joiner claiming rank %u failed authentication (wrong job secret)",
             hello.rank);
    drop_pending(pending, n_pending, i, why);
    return;
  }
  rdzv_channel ch;
  char name[24], why[160];
  snprintf(name, sizeof name, "rank %u", hello.rank);
  rdzv_channel_init(&ch, p->fd, &s->secret, p->nonce, &hello, 1, name);
  pending[i] = pending[--*n_pending]; /* the fd now belongs to ch */
  if ((int)hello.world != s->world) {
    snprintf(why, sizeof why, "rank %u was started with world size %u, rank 0 with %d", hello.rank,
             hello.world, s->world);
    refuse_joiner(&ch, TP_EUSAGE, why);
    return;
  }
  rdzv_peer *peer = &s->peers[hello.rank];
  if (peer->ch.fd >= 0) {
    snprintf(why, sizeof why, "rank %u has already joined; a second process claiming it is refused",
             hello.rank);
    refuse_joiner(&ch, TP_EUSAGE, why);
    return;
  }
  rdzv_header accept = {.type = RDZV_ACCEPT, .arg = hello.rank};
  if (rdzv_channel_send(&ch, &accept, NULL, rdzv_now_ms() + ERROR_SEND_MS) != TP_OK) {
    TP_LOGW("rdzv", "rank %u left while joining: %s", hello.rank, rdzv_error_text());
    rdzv_channel_wipe(&ch);
    close(ch.fd);
    return;
  }
  peer->ch = ch;
  TP_LOGD("rdzv", "rank %u joined", hello.rank);
}

/* Reads what pending[i] has sent so far, without waiting. */
static void read_pending(rdzv_server *s, rdzv_pending *pending, int *n_pending, int i) {
  rdzv_pending *p = &pending[i];
  ssize_t n = recv(p->fd, p->hello + p->got, sizeof p->hello - p->got, 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    drop_pending(pending, n_pending, i,
                 n == 0 ? "closed before its hello was complete"
                        : "the connection failed before its hello");
    return;
  }
  p->got += (size_t)n;
  if (p->got == sizeof p->hello) take_hello(s, pending, n_pending, i);
}

/* Challenges a new connection and makes room for it among the pending ones. */
static void admit_connection(rdzv_server *s, int fd, rdzv_pending *pending, int *n_pending) {
  rdzv_challenge c;
  unsigned char raw[RDZV_CHALLENGE_BYTES];
  if (rdzv_socket_options(fd) != TP_OK || rdzv_random(c.nonce, sizeof c.nonce) != TP_OK) {
    close(fd);
    return;
  }
  rdzv_build_challenge(&c, raw);
  /* A fresh socket's send buffer is empty: this cannot block. */
  if (send(fd, raw, sizeof raw, MSG_NOSIGNAL) != (ssize_t)sizeof raw) {
    close(fd);
    return;
  }
  if (*n_pending == MAX_PENDING) {
    int oldest = 0;
    for (int i = 1; i < *n_pending; i++)
      if (pending[i].deadline < pending[oldest].deadline) oldest = i;
    drop_pending(pending, n_pending, oldest, "too many connections waiting; the oldest goes");
  }
  rdzv_pending *p = &pending[(*n_pending)++];
  *p = (rdzv_pending){.fd = fd, .deadline = rdzv_now_ms() + s->hello_ms};
  memcpy(p->nonce, c.nonce, sizeof c.nonce);
}

static void accept_pending(rdzv_server *s, rdzv_pending *pending, int *n_pending) {
  /* Bounded: a flood cannot keep the loop here. */
  for (int i = 0; i < 4 * MAX_PENDING; i++) {
    int fd = accept(s->listen_fd, NULL, NULL);
    if (fd < 0) return; /* EAGAIN: nothing more; other errors: retried by poll */
    admit_connection(s, fd, pending, n_pending);
  }
}

/* Drops the pending connections whose hello is late; returns the soonest
 * remaining deadline (or the join deadline). */
static int64_t expire_pending(const rdzv_server *s, rdzv_pending *pending, int *n_pending) {
  int64_t now = rdzv_now_ms(), next = s->join_deadline;
  for (int i = *n_pending - 1; i >= 0; i--) {
    if (pending[i].deadline <= now) {
      char why[96];
      snprintf(why, sizeof why, "no complete hello within %d ms (%zu of %d bytes)", s->hello_ms,
               pending[i].got, RDZV_HELLO_BYTES);
      drop_pending(pending, n_pending, i, why);
    } else if (pending[i].deadline < next) {
      next = pending[i].deadline;
    }
  }
  return next;
}

static int count_joined(const rdzv_server *s) {
  int n = 0;
  for (int r = 0; r < s->world; r++) n += s->peers[r].ch.fd >= 0;
  return n;
}

static tp_rc join_loop(rdzv_server *s, rdzv_pending *pending, int *n_pending) {
  while (count_joined(s) < s->world) {
    int64_t next = expire_pending(s, pending, n_pending);
    int64_t left = s->join_deadline - rdzv_now_ms();
    if (left <= 0) {
      char missing[256];
      missing_ranks(s, missing, sizeof missing);
      return TP_FAIL(TP_ETIMEOUT, "timed out after %d ms waiting for rank(s) %s to join",
                     s->timeout_ms, missing);
    }
    int64_t wait = next - rdzv_now_ms();
    struct pollfd fds[2 + MAX_PENDING];
    fds[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
    fds[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
    for (int i = 0; i < *n_pending; i++)
      fds[2 + i] = (struct pollfd){.fd = pending[i].fd, .events = POLLIN};
    int n_fds = 2 + *n_pending;
    if (poll(fds, (nfds_t)n_fds, wait > 0 ? (int)wait : 0) < 0) continue; /* EINTR */
    if (fds[0].revents) {
      s->stopping = 1;
      return TP_OK;
    }
    /* Newest first, so removing one does not move an unvisited entry. */
    for (int i = n_fds - 3; i >= 0; i--)
      if (fds[2 + i].revents) read_pending(s, pending, n_pending, i);
    if (fds[1].revents) accept_pending(s, pending, n_pending);
  }
  return TP_OK;
}

static tp_rc join_all(rdzv_server *s) {
  rdzv_pending pending[MAX_PENDING];
  int n_pending = 0;
  tp_rc rc = join_loop(s, pending, &n_pending);
  for (int i = 0; i < n_pending; i++) close(pending[i].fd);
  if (rc != TP_OK || s->stopping) return rc;
  /* Nobody else may join from now on. */
  close(s->listen_fd);
  s->listen_fd = -1;
  for (int r = 0; r < s->world; r++) {
    rdzv_header h = {.type = RDZV_WELCOME};
    TP_TRY(rdzv_channel_send(&s->peers[r].ch, &h, NULL, rdzv_now_ms() + s->timeout_ms));
  }
  return TP_OK;
}

/* ---- collectives -------------------------------------------------------- */

static int round_started(const rdzv_server *s) {
  for (int r = 0; r < s->world; r++)
    if (s->peers[r].arrived) return 1;
  return 0;
}

static void describe_request(const rdzv_header *h, char *buf, size_t cap) {
  if (h->type == RDZV_BROADCAST)
    snprintf(buf, cap, "broadcast of %llu bytes from rank %u", (unsigned long long)h->count,
             h->arg);
  else if (h->type == RDZV_ALLGATHER)
    snprintf(buf, cap, "allgather of %llu bytes", (unsigned long long)h->count);
  else snprintf(buf, cap, "%s", rdzv_type_name(h->type));
}

/* The collective the server waits on, for messages: "allgather #3". */
static void current_round(const rdzv_server *s, char *buf, size_t cap) {
  for (int r = 0; r < s->world; r++)
    if (s->peers[r].arrived) {
      snprintf(buf, cap, "%s #%llu", rdzv_type_name(s->peers[r].req.type),
               (unsigned long long)s->seq);
      return;
    }
  snprintf(buf, cap, "collective #%llu", (unsigned long long)s->seq);
}

static tp_rc check_request(const rdzv_server *s, int rank, const rdzv_header *h) {
  if (h->type < RDZV_ALLGATHER || h->type > RDZV_BARRIER)
    return TP_FAIL(TP_EIO, "rank %d sent a %s outside the join", rank, rdzv_type_name(h->type));
  if (h->seq != s->seq)
    return TP_FAIL(TP_EIO,
                   "rank %d is out of step: it called collective #%llu, the job is at #%llu", rank,
                   (unsigned long long)h->seq, (unsigned long long)s->seq);
  uint64_t expected = h->type == RDZV_ALLGATHER ? h->count : 0;
  if (h->type == RDZV_BROADCAST) {
    if ((int)h->arg >= s->world)
      return TP_FAIL(TP_EUSAGE, "rank %d broadcast from root %u, outside world size %d", rank,
                     h->arg, s->world);
    expected = (int)h->arg == rank ? h->count : 0;
  }
  if (h->len != expected)
    return TP_FAIL(TP_EIO, "rank %d sent %llu bytes for a %s of %llu", rank,
                   (unsigned long long)h->len, rdzv_type_name(h->type),
                   (unsigned long long)h->count);
  return TP_OK;
}

static tp_rc first_departed(const rdzv_server *s, int *rank) {
  for (int r = 0; r < s->world; r++)
    if (s->peers[r].left) {
      *rank = r;
      return TP_OK;
    }
  return TP_EINTERNAL;
}

/* Reads rank r's request (or notices that it left). */
static tp_rc take_request(rdzv_server *s, int r) {
  rdzv_peer *p = &s->peers[r];
  char round[64];
  rdzv_header h;
  int64_t deadline = rdzv_now_ms() + s->timeout_ms;
  tp_rc rc = rdzv_channel_recv_header(&p->ch, &h, deadline);
  if (rc == TP_EIO) {
    current_round(s, round, sizeof round);
    int waiting = round_started(s);
    drop_peer(p);
    p->left = 1;
    TP_LOGD("rdzv", "rank %d left", r);
    if (!waiting) return TP_OK;
    return TP_FAIL(TP_EIO,
                   "rank %d closed its connection (exited or crashed?) while the others "
                   "waited in %s",
                   r, round);
  }
  TP_TRY(rc);
  int gone = -1;
  if (first_departed(s, &gone) == TP_OK)
    return TP_FAIL(TP_EIO, "rank %d has left the job: %s #%llu cannot complete", gone,
                   rdzv_type_name(h.type), (unsigned long long)h.seq);
  TP_TRY(check_request(s, r, &h));
  if (h.len > 0) {
    p->payload = malloc((size_t)h.len);
    if (!p->payload) return TP_FAIL(TP_EOOM, "no memory for %llu bytes", (unsigned long long)h.len);
    TP_TRY(rdzv_channel_recv_body(&p->ch, p->payload, (size_t)h.len, deadline));
  }
  /* Only a request sealed by this rank's key counts. */
  TP_TRY(rdzv_channel_recv_end(&p->ch, deadline));
  p->req = h;
  p->arrived = 1;
  if (s->round_deadline == 0) s->round_deadline = rdzv_now_ms() + s->timeout_ms;
  return TP_OK;
}

static int all_arrived(const rdzv_server *s) {
  for (int r = 0; r < s->world; r++)
    if (!s->peers[r].arrived) return 0;
  return 1;
}

static tp_rc check_agreement(const rdzv_server *s) {
  const rdzv_header *first = &s->peers[0].req;
  for (int r = 1; r < s->world; r++) {
    const rdzv_header *h = &s->peers[r].req;
    int same_root = h->type != RDZV_BROADCAST || h->arg == first->arg;
    if (h->type == first->type && h->count == first->count && same_root) continue;
    char a[80], b[80];
    describe_request(first, a, sizeof a);
    describe_request(h, b, sizeof b);
    return TP_FAIL(TP_EUSAGE, "ranks disagree at collective #%llu: rank 0 called %s, rank %d %s",
                   (unsigned long long)s->seq, a, r, b);
  }
  return TP_OK;
}

static tp_rc send_reply(rdzv_server *s, int r) {
  const rdzv_header *req = &s->peers[r].req;
  int64_t deadline = rdzv_now_ms() + s->timeout_ms;
  rdzv_header h = {.type = RDZV_REPLY, .seq = s->seq, .count = req->count};
  rdzv_channel *ch = &s->peers[r].ch;
  if (req->type == RDZV_BROADCAST) {
    h.len = req->count;
    return rdzv_channel_send(ch, &h, s->peers[req->arg].payload, deadline);
  }
  if (req->type == RDZV_BARRIER) return rdzv_channel_send(ch, &h, NULL, deadline);
  /* allgather: one message holding every rank's bytes in rank order. */
  h.len = req->count * (uint64_t)s->world;
  TP_TRY(rdzv_channel_send_parts(ch, &h, s->gather_parts, s->gather_sizes, s->world, deadline));
  return TP_OK;
}

/* The pieces of an allgather's answer, for every rank's reply. */
static void gather_parts(rdzv_server *s) {
  for (int r = 0; r < s->world; r++) {
    s->gather_parts[r] = s->peers[r].payload;
    s->gather_sizes[r] = s->peers[r].payload ? (size_t)s->peers[r].req.len : 0;
  }
}

static tp_rc answer_round(rdzv_server *s) {
  TP_TRY(check_agreement(s));
  gather_parts(s);
  for (int r = 0; r < s->world; r++) TP_TRY(send_reply(s, r));
  for (int r = 0; r < s->world; r++) {
    free(s->peers[r].payload);
    s->peers[r].payload = NULL;
    s->peers[r].arrived = 0;
  }
  s->seq++;
  s->round_deadline = 0;
  return TP_OK;
}

static tp_rc round_timeout(const rdzv_server *s) {
  char round[64], missing[256];
  current_round(s, round, sizeof round);
  size_t used = 0;
  missing[0] = '\0';
  for (int r = 0; r < s->world && used < sizeof missing; r++)
    if (!s->peers[r].arrived)
      used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "", r);
  return TP_FAIL(TP_ETIMEOUT, "%s timed out after %d ms waiting for rank(s) %s", round,
                 s->timeout_ms, missing);
}

/* Polls the ranks still owing a request; the first fds[0] is the wake pipe. */
static int poll_waiting(rdzv_server *s, struct pollfd *fds, int *ranks, int timeout) {
  int n = 1;
  fds[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
  for (int r = 0; r < s->world; r++) {
    if (s->peers[r].ch.fd < 0 || s->peers[r].arrived) continue;
    ranks[n] = r;
    fds[n++] = (struct pollfd){.fd = s->peers[r].ch.fd, .events = POLLIN};
  }
  return poll(fds, (nfds_t)n, timeout) < 0 ? -1 : n;
}

static tp_rc serve_rounds(rdzv_server *s) {
  struct pollfd *fds = calloc((size_t)s->world + 1, sizeof *fds);
  int *ranks = calloc((size_t)s->world + 1, sizeof *ranks);
  if (!fds || !ranks) {
    free(fds);
    free(ranks);
    return TP_FAIL(TP_EOOM, "no memory for %d ranks", s->world);
  }
  tp_rc rc = TP_OK;
  while (rc == TP_OK && count_joined(s) > 0) {
    int timeout = -1;
    if (s->round_deadline) {
      int64_t left = s->round_deadline - rdzv_now_ms();
      if (left <= 0) {
        rc = round_timeout(s);
        break;
      }
      timeout = left > 1000000 ? 1000000 : (int)left;
    }
    int n = poll_waiting(s, fds, ranks, timeout);
    if (n < 0 && errno != EINTR) rc = TP_FAIL(TP_EIO, "poll: %s", strerror(errno));
    if (n < 0) continue;
    if (fds[0].revents) {
      s->stopping = 1;
      if (round_started(s))
        rc = TP_FAIL(TP_EIO, "rank 0 closed the rendezvous while other ranks waited");
      break;
    }
    for (int i = 1; i < n && rc == TP_OK; i++)
      if (fds[i].revents) rc = take_request(s, ranks[i]);
    if (rc == TP_OK && all_arrived(s)) rc = answer_round(s);
  }
  free(fds);
  free(ranks);
  return rc;
}

/* ---- the thread ----------------------------------------------------------- */

/* After an error: stop sending, then read and discard what the ranks still
 * send until they close or ERROR_SEND_MS pass. Closing a socket with unread
 * data would reset the connection, and a reset can destroy the error
 * message on its way to a rank that was sending a request just then. */
static void drain_peers(rdzv_server *s) {
  struct pollfd fds[64];
  int64_t deadline = rdzv_now_ms() + ERROR_SEND_MS;
  for (int r = 0; r < s->world; r++)
    if (s->peers[r].ch.fd >= 0) shutdown(s->peers[r].ch.fd, SHUT_WR);
  for (int first = 0; first < s->world; first += 64) {
    int n = 0, ranks[64];
    for (int r = first; r < s->world && r < first + 64; r++)
      if (s->peers[r].ch.fd >= 0) {
        ranks[n] = r;
        fds[n++] = (struct pollfd){.fd = s->peers[r].ch.fd, .events = POLLIN};
      }
    int open = n;
    while (open > 0) {
      int64_t left = deadline - rdzv_now_ms();
      if (left <= 0 || poll(fds, (nfds_t)n, (int)left) < 0) break;
      for (int i = 0; i < n; i++) {
        if (fds[i].fd < 0 || !fds[i].revents) continue;
        char discard[4096];
        ssize_t got = recv(fds[i].fd, discard, sizeof discard, 0);
        if (got > 0 || (got < 0 && (errno == EAGAIN || errno == EINTR))) continue;
        drop_peer(&s->peers[ranks[i]]);
        fds[i].fd = -1;
        open--;
      }
    }
  }
}

static void *server_main(void *arg) {
  rdzv_server *s = arg;
  tp_rc rc = join_all(s);
  if (rc == TP_OK && !s->stopping) rc = serve_rounds(s);
  if (rc != TP_OK) {
    send_error_to_all(s, rc, rdzv_error_text());
    drain_peers(s);
  }
  for (int r = 0; r < s->world; r++) {
    drop_peer(&s->peers[r]);
    rdzv_channel_wipe(&s->peers[r].ch);
  }
  return NULL;
}

static void free_server(rdzv_server *s) {
  sodium_memzero(&s->secret, sizeof s->secret);
  free(s->gather_parts);
  free(s->gather_sizes);
  if (s->listen_fd >= 0) close(s->listen_fd);
  if (s->wake[0] >= 0) close(s->wake[0]);
  if (s->wake[1] >= 0) close(s->wake[1]);
  free(s->peers);
  free(s);
}

tp_rc rdzv_server_start(const char *addr, int port, int world, int timeout_ms,
                        const tp_rdzv_secret *secret, rdzv_server **out) {
  rdzv_server *s = calloc(1, sizeof *s);
  if (!s) return TP_FAIL(TP_EOOM, "no memory for the rendezvous server");
  s->listen_fd = s->wake[0] = s->wake[1] = -1;
  s->world = world;
  s->timeout_ms = timeout_ms;
  s->hello_ms = timeout_ms < HELLO_MS ? timeout_ms : HELLO_MS;
  s->secret = *secret;
  s->join_deadline = rdzv_now_ms() + timeout_ms;
  s->peers = calloc((size_t)world, sizeof *s->peers);
  s->gather_parts = calloc((size_t)world, sizeof *s->gather_parts);
  s->gather_sizes = calloc((size_t)world, sizeof *s->gather_sizes);
  if (!s->peers || !s->gather_parts || !s->gather_sizes) {
    free_server(s);
    return TP_FAIL(TP_EOOM, "no memory for %d ranks", world);
  }
  tp_rc rc = TP_OK;
  for (int r = 0; r < world; r++) {
    s->peers[r].ch.fd = -1;
    snprintf(s->peers[r].name, sizeof s->peers[r].name, "rank %d", r);
  }
  if (rc == TP_OK) rc = listen_on(addr, port, world + MAX_PENDING + 16, &s->listen_fd);
  if (rc == TP_OK && pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0)
    rc = TP_FAIL(TP_EIO, "pipe: %s", strerror(errno));
  if (rc == TP_OK) {
    int err = pthread_create(&s->thread, NULL, server_main, s);
    if (err != 0) rc = TP_FAIL(TP_EIO, "cannot start the rendezvous thread: %s", strerror(err));
  }
  if (rc != TP_OK) {
    free_server(s);
    return rc;
  }
  *out = s;
  return TP_OK;
}

void rdzv_server_stop(rdzv_server *s) {
  if (!s) return;
  char byte = 1;
  /* The pipe is empty and non-blocking: this write cannot block. */
  if (write(s->wake[1], &byte, 1) < 0)
    TP_LOGW("rdzv", "cannot wake the server: %s", strerror(errno));
  pthread_join(s->thread, NULL);
  free_server(s);
}
