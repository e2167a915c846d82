/*
 * tp_error.c — per-thread last-error buffer behind tp_fail() (see tp_error.h).
 */
#include "common/tp_error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tp_text.h"

enum { TP_ERROR_MSG_MAX = 2048 };

/* The message with its source location (for logs), and without (for
 * records and users). */
static _Thread_local char last_error[TP_ERROR_MSG_MAX];
static _Thread_local char last_message[TP_ERROR_MSG_MAX];

tp_rc tp_fail(tp_rc code, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_message, sizeof last_message, fmt, ap);
  va_end(ap);
  /* messages quote outside text (a stored host name, a commit string, a file's bytes): none
   * of it reaches a terminal or a stored reason as an escape sequence */
  tp_text_neutralise(last_message);
  const char *base = strrchr(file, '/');
  /* a message longer than the buffer is cut: that is what the buffer is for */
  if (snprintf(last_error, sizeof last_error, "%s:%d: %s", base ? base + 1 : file, line,
               last_message) >= (int)sizeof last_error)
    last_error[sizeof last_error - 1] = '\0';
  return code;
}

/* buf = prefix ": " buf (cut to the buffer). */
static void prepend(char *buf, size_t cap, const char *prefix) {
  char cause[TP_ERROR_MSG_MAX];
  snprintf(cause, sizeof cause, "%s", buf);
  if (snprintf(buf, cap, "%s: %s", prefix, cause) >= (int)cap) buf[cap - 1] = '\0'; /* cut */
}

tp_rc tp_fail_context(tp_rc code, const char *fmt, ...) {
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  tp_text_neutralise(prefix);
  prepend(last_error, sizeof last_error, prefix);
  prepend(last_message, sizeof last_message, prefix);
  return code;
}

const char *tp_last_error(void) { return last_error; }

void tp_expect_ok(tp_rc rc, const char *call, const char *file, int line) {
  if (rc == TP_OK) return;
  fprintf(stderr, "tpbench: internal error at %s:%d: %s failed: %s\n", file, line, call,
          last_error);
  abort();
}

const char *tp_last_message(void) { return last_message; }

void tp_clear_error(void) {
  last_error[0] = '\0';
  last_message[0] = '\0';
}

tp_rc tp_rc_for_path_errno(int err) {
  switch (err) {
  case ENOENT:
  case ENOTDIR:
  case EISDIR:
  case EACCES:
  case EPERM:
  case ELOOP:
  case ENAMETOOLONG:
  case EROFS: return TP_EUSAGE;
  default: return TP_EIO;
  }
}

const char *tp_rc_name(tp_rc code) {
  switch (code) {
  case TP_OK: return "ok";
  case TP_EUSAGE: return "usage";
  case TP_EREJECT: return "rejected";
  case TP_ENODEV: return "no-device";
  case TP_ECUDA: return "cuda";
  case TP_ENCCL: return "nccl";
  case TP_ECUBLAS: return "cublas";
  case TP_ECUPTI: return "cupti";
  case TP_ESQLITE: return "sqlite";
  case TP_EFOREIGN: return "foreign-database";
  case TP_EIO: return "io";
  case TP_EOOM: return "oom";
  case TP_ETIMEOUT: return "timeout";
  case TP_ENUMERICS: return "numerics";
  case TP_EINTERNAL: return "internal";
  }
  return "unknown";
}
