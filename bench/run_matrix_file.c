/*
 * run_matrix_file.c — the matrix file of `tpbench run` and `tpbench
 * matrix` (format in run_matrix.h), read with jansson.
 *
 * Every axis value is turned back into the comma text an --axis flag would
 * carry and handed to tp_run_spec_set_axis, so a file and a command line are
 * checked by the same code and give the same messages.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "run_matrix.h"

enum { AXIS_TEXT = 512 };

/* Appends one scalar to text as the --axis flag would spell it. */
static tp_rc append_scalar(const char *path, const char *axis, const json_t *v, char *text,
                           size_t *used) {
  char item[128];
  if (json_is_string(v)) snprintf(item, sizeof item, "%s", json_string_value(v));
  else if (json_is_integer(v))
    snprintf(item, sizeof item, "%lld", (long long)json_integer_value(v));
  else if (json_is_boolean(v)) snprintf(item, sizeof item, "%s", json_is_true(v) ? "on" : "off");
  else
    return TP_FAIL(TP_EUSAGE,
                   "%s: axes.%s: expected a string, a whole number, a boolean or an array of them",
                   path, axis);
  int n = snprintf(text + *used, AXIS_TEXT - *used, "%s%s", *used ? "," : "", item);
  if (n < 0 || (size_t)n >= AXIS_TEXT - *used)
    return TP_FAIL(TP_EUSAGE, "%s: axes.%s: the list is too long", path, axis);
  *used += (size_t)n;
  return TP_OK;
}

static tp_rc apply_axis(const char *path, const char *axis, const json_t *value,
                        tp_run_spec *spec) {
  char text[AXIS_TEXT] = "";
  size_t used = 0;
  if (json_is_array(value)) {
    if (json_array_size(value) == 0)
      return TP_FAIL(TP_EUSAGE, "%s: axes.%s: an empty list", path, axis);
    for (size_t i = 0; i < json_array_size(value); ++i)
      TP_TRY(append_scalar(path, axis, json_array_get(value, i), text, &used));
  } else {
    TP_TRY(append_scalar(path, axis, value, text, &used));
  }
  if (tp_run_spec_set_axis(spec, axis, text) != TP_OK) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
    return TP_FAIL(TP_EUSAGE, "%s: %s", path, msg);
  }
  return TP_OK;
}

static tp_rc check_keys(const char *path, const json_t *root) {
  const char *key = NULL;
  const json_t *value = NULL;
  json_object_foreach((json_t *)root, key, value) {
    if (strcmp(key, "preset") == 0 && !json_is_string(value))
      return TP_FAIL(TP_EUSAGE, "%s: \"preset\" must be a string", path);
    if (strcmp(key, "axes") == 0 && !json_is_object(value))
      return TP_FAIL(TP_EUSAGE, "%s: \"axes\" must be an object of axis lists", path);
    if (strcmp(key, "preset") != 0 && strcmp(key, "axes") != 0 && strcmp(key, "description") != 0)
      return TP_FAIL(TP_EUSAGE, "%s: unknown key \"%s\" (valid: preset, axes, description)", path,
                     key);
  }
  return TP_OK;
}

static tp_rc apply_file(const char *path, const json_t *root, const char *preset,
                        tp_run_spec *spec) {
  if (!json_is_object(root))
    return TP_FAIL(TP_EUSAGE, "%s: the matrix file must hold one JSON object", path);
  TP_TRY(check_keys(path, root));
  const json_t *named = json_object_get(root, "preset");
  const char *base = preset ? preset : named ? json_string_value(named) : "quick";
  if (tp_run_spec_preset(base, spec) != TP_OK) {
    char msg[300];
    snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
    return TP_FAIL(TP_EUSAGE, "%s: %s", path, msg);
  }
  const json_t *axes = json_object_get(root, "axes");
  const char *axis = NULL;
  const json_t *value = NULL;
  if (axes)
    json_object_foreach((json_t *)axes, axis, value) TP_TRY(apply_axis(path, axis, value, spec));
  return TP_OK;
}

tp_rc tp_run_spec_load(const char *path, const char *preset, tp_run_spec *spec) {
  FILE *f = fopen(path, "r");
  if (!f) return TP_FAIL(TP_EIO, "cannot read the matrix file %s", path);
  json_error_t err;
  json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
  fclose(f);
  if (!root) return TP_FAIL(TP_EUSAGE, "%s:%d:%d: %s", path, err.line, err.column, err.text);
  tp_run_spec loaded;
  tp_rc rc = apply_file(path, root, preset, &loaded);
  json_decref(root);
  if (rc == TP_OK) *spec = loaded;
  return rc;
}
