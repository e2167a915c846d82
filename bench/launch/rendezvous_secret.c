/*
 * rendezvous_secret.c — the job's shared secret: made fresh, read from hex,
 * from an owner-only file or from the environment, and the one copy this
 * process's rendezvous uses (contract in rendezvous.h).
 *
 * tpbench's own launcher forks its workers without exec, so it hands them
 * the secret through the memory they inherit (tp_rdzv_set_job_secret in each
 * child): it never appears in an environment (/proc/PID/environ), a file or
 * a command line. Under an external launcher the processes are not ours to
 * fork, so the user passes it by environment or, better, by a file only its
 * owner can read.
 */
#include "bench/launch/rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

enum { MAX_SECRET_FILE = 4096 };

/* The one copy tp_rdzv_connect uses; owned by this module. */
static tp_rdzv_secret job_secret;
static int job_secret_set;

tp_rc tp_rdzv_secret_generate(tp_rdzv_secret *out) {
  size_t got = 0;
  while (got < TP_RDZV_SECRET_GENERATED) {
    ssize_t n = getrandom(out->bytes + got, TP_RDZV_SECRET_GENERATED - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return TP_FAIL(TP_EIO, "getrandom: %s", strerror(errno));
    got += (size_t)n;
  }
  out->len = TP_RDZV_SECRET_GENERATED;
  return TP_OK;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

tp_rc tp_rdzv_secret_from_hex(const char *text, tp_rdzv_secret *out) {
  while (is_space(*text)) text++;
  size_t n = strlen(text);
  while (n > 0 && is_space(text[n - 1])) n--;
  const size_t min_digits = 2 * (size_t)TP_RDZV_SECRET_MIN;
  const size_t max_digits = 2 * (size_t)TP_RDZV_SECRET_MAX;
  if (n % 2 != 0 || n < min_digits || n > max_digits)
    return TP_FAIL(TP_EUSAGE,
                   "the job secret must be %zu to %zu hex digits (an even count); it has %zu "
                   "characters",
                   min_digits, max_digits, n);
  for (size_t i = 0; i < n; i += 2) {
    int hi = hex_value(text[i]), lo = hex_value(text[i + 1]);
    if (hi < 0 || lo < 0) {
      sodium_memzero(out, sizeof *out);
      return TP_FAIL(TP_EUSAGE, "the job secret holds a character that is not a hex digit");
    }
    out->bytes[i / 2] = (unsigned char)(hi << 4 | lo);
  }
  out->len = n / 2;
  return TP_OK;
}

/* Refuses a file that someone other than its owner (this user) could read
 * or change. */
static tp_rc check_private(const char *path, const struct stat *st) {
  if (!S_ISREG(st->st_mode))
    return TP_FAIL(TP_EUSAGE, "job secret file %s is not a regular file", path);
  if (st->st_uid != geteuid())
    return TP_FAIL(TP_EUSAGE, "job secret file %s belongs to another user (uid %u)", path,
                   (unsigned)st->st_uid);
  if (st->st_mode & (S_IRWXG | S_IRWXO))
    return TP_FAIL(TP_EUSAGE,
                   "job secret file %s has mode %04o: others could read it; make it readable by "
                   "its owner only (chmod 600 %s)",
                   path, (unsigned)(st->st_mode & 07777), path);
  return TP_OK;
}

static tp_rc read_secret_text(int fd, const char *path, char *text, size_t cap) {
  size_t got = 0;
  for (;;) {
    ssize_t n = read(fd, text + got, cap - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return TP_FAIL(TP_EIO, "reading job secret file %s: %s", path, strerror(errno));
    if (n == 0) break;
    got += (size_t)n;
    if (got == cap - 1)
      return TP_FAIL(TP_EUSAGE, "job secret file %s is longer than %zu bytes", path, cap - 1);
  }
  text[got] = '\0';
  return TP_OK;
}

tp_rc tp_rdzv_secret_from_file(const char *path, tp_rdzv_secret *out) {
  /* O_NOFOLLOW: the checks below must be about the file itself. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return TP_FAIL(TP_EUSAGE, "cannot open job secret file %s: %s", path, strerror(errno));
  struct stat st;
  tp_rc rc = TP_OK;
  if (fstat(fd, &st) != 0) rc = TP_FAIL(TP_EIO, "fstat %s: %s", path, strerror(errno));
  if (rc == TP_OK) rc = check_private(path, &st);
  char text[MAX_SECRET_FILE];
  if (rc == TP_OK) rc = read_secret_text(fd, path, text, sizeof text);
  close(fd);
  if (rc == TP_OK) {
    rc = tp_rdzv_secret_from_hex(text, out);
    if (rc != TP_OK) rc = tp_fail_context(rc, "job secret file %s", path);
  }
  sodium_memzero(text, sizeof text);
  return rc;
}

tp_rc tp_rdzv_secret_from_environment(tp_rdzv_secret *out, int *present) {
  const char *hex = getenv("TPBENCH_JOB_SECRET"), *file = getenv("TPBENCH_JOB_SECRET_FILE");
  *present = 0;
  if (hex && file)
    return TP_FAIL(TP_EUSAGE,
                   "both TPBENCH_JOB_SECRET and TPBENCH_JOB_SECRET_FILE are set: set only one");
  if (!hex && !file) return TP_OK;
  if (file) TP_TRY(tp_rdzv_secret_from_file(file, out));
  else if (tp_rdzv_secret_from_hex(hex, out) != TP_OK)
    return tp_fail_context(TP_EUSAGE, "TPBENCH_JOB_SECRET");
  *present = 1;
  return TP_OK;
}

void tp_rdzv_set_job_secret(const tp_rdzv_secret *secret) {
  sodium_memzero(&job_secret, sizeof job_secret);
  job_secret_set = secret != NULL;
  if (secret) job_secret = *secret;
}

const tp_rdzv_secret *tp_rdzv_job_secret(void) { return job_secret_set ? &job_secret : NULL; }
