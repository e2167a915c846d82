/*
 * tp_dashboard_files.h — the dashboard's trace files (internal to
 * dashboards/): each traced configuration's Chrome trace written beside
 * index.html as DIR/traces/<config-id>-<crc32>.js, loaded by the page only
 * when that timeline is shown.
 *
 * Why a script and not a .json next to the page: browsers refuse fetch() of
 * file:// URLs, but a <script src> loads from file:// everywhere. The file
 * is one call, tpTraceLoaded(<config-id>, "<base64>"), where the base64 is
 * the trace's JSON compressed in zlib format (RFC 1950), which the page
 * inflates with the browser's DecompressionStream("deflate"). The CRC-32 of
 * the compressed bytes is part of the name, so a page never picks up a
 * trace of another database or an older generation under the same name.
 */
#ifndef TP_DASHBOARD_FILES_H
#define TP_DASHBOARD_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "common/tp_error.h"

/* The folder under the output folder that holds the trace files. */
#define TP_DASHBOARD_TRACE_DIR "traces"

/* The longest file name tp_dashboard_trace_file_write gives (with NUL). */
#define TP_DASHBOARD_TRACE_NAME_MAX 48

/*
 * Compresses json (len bytes) and writes dir/traces/<config_id>-<crc>.js
 * through report/tp_output.h (a temporary renamed into place; db is the
 * database, which the target may not be). dir/traces must exist. name gets
 * the file's name relative to dir ("traces/12-0a1b2c3d.js"), *bytes the
 * file's size. TP_EIO when it cannot be written, TP_EOOM, TP_EINTERNAL when
 * zlib fails.
 */
TP_MUST_CHECK tp_rc tp_dashboard_trace_file_write(const char *dir, const char *db,
                                                  int64_t config_id, const char *json, size_t len,
                                                  char name[TP_DASHBOARD_TRACE_NAME_MAX],
                                                  size_t *bytes);

/* Whether name (without a folder) has the shape of a trace file's name. */
int tp_dashboard_is_trace_file_name(const char *name);

#endif /* TP_DASHBOARD_FILES_H */
