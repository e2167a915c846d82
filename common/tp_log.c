/*
 * tp_log.c — level/subsystem filtered logging to stderr (see tp_log.h).
 * The level and subsystem list are read from the environment once; the tag is
 * owned here and set by the launcher when a process learns its rank.
 */
#include "common/tp_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char log_tag[64];
static int log_level = -1;
static char log_subsys[256];

static void log_init_once(void) {
  if (log_level >= 0) return;
  log_level = TP_LOG_WARN;
  const char *lvl = getenv("TPBENCH_LOG");
  if (lvl) {
    if (!strcasecmp(lvl, "error")) log_level = TP_LOG_ERROR;
    else if (!strcasecmp(lvl, "warn")) log_level = TP_LOG_WARN;
    else if (!strcasecmp(lvl, "info")) log_level = TP_LOG_INFO;
    else if (!strcasecmp(lvl, "debug")) log_level = TP_LOG_DEBUG;
  }
  const char *sub = getenv("TPBENCH_LOG_SUBSYS");
  snprintf(log_subsys, sizeof log_subsys, "%s", sub ? sub : "");
}

void tp_log_set_tag(const char *tag) { snprintf(log_tag, sizeof log_tag, "%s", tag ? tag : ""); }

static int subsys_listed(const char *subsys) {
  if (log_subsys[0] == '\0' || !subsys) return 1;
  size_t len = strlen(subsys);
  for (const char *p = log_subsys; (p = strstr(p, subsys)) != NULL; p += len) {
    int starts = p == log_subsys || p[-1] == ',';
    int ends = p[len] == '\0' || p[len] == ',';
    if (starts && ends) return 1;
  }
  return 0;
}

int tp_log_enabled(tp_log_level level, const char *subsys) {
  log_init_once();
  if ((int)level > log_level) return 0;
  return level == TP_LOG_ERROR || subsys_listed(subsys);
}

void tp_log(tp_log_level level, const char *subsys, const char *fmt, ...) {
  if (!tp_log_enabled(level, subsys)) return;
  static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
  char line[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "tpbench%s%s%s %s %s: %s\n", log_tag[0] ? " [" : "", log_tag,
          log_tag[0] ? "]" : "", names[level], subsys ? subsys : "-", line);
}
