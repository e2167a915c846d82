/*
 * tp_error.c — per-thread last-error buffer behind tp_fail() (see tp_error.h).
 */
#include "tp_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { TP_ERROR_MSG_MAX = 2048 };

static _Thread_local char last_error[TP_ERROR_MSG_MAX];

tp_rc tp_fail(tp_rc code, const char *file, int line, const char *fmt, ...) {
  const char *base = strrchr(file, '/');
  int used = snprintf(last_error, sizeof last_error, "%s:%d: ", base ? base + 1 : file, line);
  if (used < 0 || (size_t)used >= sizeof last_error) used = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error + used, sizeof last_error - (size_t)used, fmt, ap);
  va_end(ap);
  return code;
}

tp_rc tp_fail_context(tp_rc code, const char *fmt, ...) {
  char cause[TP_ERROR_MSG_MAX];
  snprintf(cause, sizeof cause, "%s", last_error);
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  size_t used = strlen(prefix);
  memcpy(last_error, prefix, used);
  size_t room = sizeof last_error - used - 1;
  size_t cause_len = strnlen(cause, room > 2 ? room - 2 : 0);
  if (room > 2) {
    memcpy(last_error + used, ": ", 2);
    memcpy(last_error + used + 2, cause, cause_len);
    used += 2 + cause_len;
  }
  last_error[used] = '\0';
  return code;
}

const char *tp_last_error(void) { return last_error; }

void tp_clear_error(void) { last_error[0] = '\0'; }

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
