/*
 * tp_dashboard_assets.h — the files of dashboards/assets/ (the page
 * template, its CSS and JavaScript), embedded into the binary at build time
 * by cmake/embed.cmake, so `tpbench dashboard` works wherever
 * the binary is copied.
 */
#ifndef TP_DASHBOARD_ASSETS_H
#define TP_DASHBOARD_ASSETS_H

#include <stddef.h>

typedef struct {
  const char *name; /* file name: "index.html", "dashboard.js", ... */
  const char *data; /* the file's bytes, NUL-terminated */
  size_t size;      /* without the NUL */
} tp_dashboard_asset;

extern const tp_dashboard_asset tp_dashboard_assets[];
extern const int tp_n_dashboard_assets;

#endif /* TP_DASHBOARD_ASSETS_H */
