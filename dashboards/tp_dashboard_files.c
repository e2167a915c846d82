/*
 * tp_dashboard_files.c — the dashboard's trace files (see
 * tp_dashboard_files.h): zlib compresses, libsodium writes the base64.
 */
#include "dashboards/tp_dashboard_files.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>
#include <zlib.h>

#include "report/tp_output.h"

static tp_rc out_of_memory(void) { return TP_FAIL(TP_EOOM, "dashboard: out of memory"); }

/* json compressed at zlib's default level into a new buffer *out (*out_len bytes): the best
 * level took a sixth of the dashboard's time for files 2 % smaller. */
static tp_rc deflate_all(const char *json, size_t len, unsigned char **out, size_t *out_len) {
  uLongf cap = compressBound((uLong)len);
  *out = malloc(cap);
  if (!*out) return out_of_memory();
  int z = compress2(*out, &cap, (const Bytef *)json, (uLong)len, Z_DEFAULT_COMPRESSION);
  if (z != Z_OK) {
    free(*out);
    *out = NULL;
    return TP_FAIL(TP_EINTERNAL, "dashboard: zlib compress2 failed: %s", zError(z));
  }
  *out_len = cap;
  return TP_OK;
}

/* The file's text: tpTraceLoaded(<id>,"<base64>");\n, in a new string. */
static tp_rc script_text(int64_t config_id, const unsigned char *z, size_t z_len, char **text,
                         size_t *text_len) {
  size_t b64_cap = sodium_base64_ENCODED_LEN(z_len, sodium_base64_VARIANT_ORIGINAL);
  size_t cap = b64_cap + 64;
  char *buf = malloc(cap);
  if (!buf) return out_of_memory();
  int head = snprintf(buf, cap, "tpTraceLoaded(%" PRId64 ",\"", config_id);
  sodium_bin2base64(buf + head, b64_cap, z, z_len, sodium_base64_VARIANT_ORIGINAL);
  size_t used = (size_t)head + strlen(buf + head);
  memcpy(buf + used, "\");\n", 5);
  *text = buf;
  *text_len = used + 4;
  return TP_OK;
}

static tp_rc write_text(const char *path, const char *db, const char *text, size_t len) {
  tp_output out;
  TP_TRY(tp_output_open(path, db, &out));
  if (fwrite(text, 1, len, out.file) != len) {
    tp_output_abort(&out);
    return TP_FAIL(TP_EIO, "%s: cannot write the trace file", path);
  }
  return tp_output_commit(&out, db);
}

tp_rc tp_dashboard_trace_file_write(const char *dir, const char *db, int64_t config_id,
                                    const char *json, size_t len,
                                    char name[TP_DASHBOARD_TRACE_NAME_MAX], size_t *bytes) {
  unsigned char *z = NULL;
  size_t z_len = 0;
  TP_TRY(deflate_all(json, len, &z, &z_len));
  unsigned long crc = crc32(0L, z, (uInt)z_len);
  snprintf(name, TP_DASHBOARD_TRACE_NAME_MAX, TP_DASHBOARD_TRACE_DIR "/%" PRId64 "-%08lx.js",
           config_id, crc & 0xffffffffUL);
  char *text = NULL;
  size_t text_len = 0;
  tp_rc rc = script_text(config_id, z, z_len, &text, &text_len);
  free(z);
  if (rc != TP_OK) return rc;
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
    rc = TP_FAIL(TP_EUSAGE, "%s: path too long", dir);
  if (rc == TP_OK) rc = write_text(path, db, text, text_len);
  free(text);
  if (rc == TP_OK) *bytes = text_len;
  return rc;
}

int tp_dashboard_is_trace_file_name(const char *name) {
  const char *p = name;
  if (!isdigit((unsigned char)*p)) return 0;
  while (isdigit((unsigned char)*p)) p++;
  if (*p++ != '-') return 0;
  for (int i = 0; i < 8; i++, p++)
    if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f')) return 0;
  return !strcmp(p, ".js");
}
