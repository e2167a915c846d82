/*
 * matrix_file.c — the matrix file of `tpbench run`, `ops` and `matrix`
 * (format in matrix_file.h), read with jansson.
 *
 * Every axis value is turned back into the comma text an --axis flag would
 * carry and handed to the command's set_axis, so a file and a command line are
 * checked by the same code and give the same messages. A string value is
 * one value: a comma in it, an empty one or one longer than any axis value
 * is refused, never cut. Only a regular file of at most 1 MiB is read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "bench/matrix/matrix_file.h"

#include "bench/cli/cli.h"

/* A value longer than any axis value is a mistake, said as such (it was once
 * cut to fit and planned as something else); the file is read whole, so its
 * size is capped. */
enum { AXIS_TEXT = 512, ITEM_MAX = 127, FILE_MAX = 1 << 20 };

/* A string value as written, or why it cannot be one axis value. */
static tp_rc check_string(const char *path, const char *axis, const char *s) {
  size_t len = strlen(s);
  if (len == 0) return TP_FAIL(TP_EUSAGE, "%s: axes.%s: an empty string", path, axis);
  if (len > ITEM_MAX)
    return TP_FAIL(TP_EUSAGE,
                   "%s: axes.%s: the value \"%.20s...\" is %zu characters long, at most %d", path,
                   axis, s, len, ITEM_MAX);
  if (strchr(s, ','))
    return TP_FAIL(TP_EUSAGE,
                   "%s: axes.%s: \"%s\" holds a comma; give one value per string (an array for "
                   "several)",
                   path, axis, s);
  return TP_OK;
}

/* Appends one scalar to text as the --axis flag would spell it. */
static tp_rc append_scalar(const char *path, const char *axis, const json_t *v, char *text,
                           size_t *used) {
  char item[ITEM_MAX + 1];
  if (json_is_string(v)) {
    TP_TRY(check_string(path, axis, json_string_value(v)));
    snprintf(item, sizeof item, "%s", json_string_value(v));
  } else if (json_is_integer(v)) {
    snprintf(item, sizeof item, "%lld", (long long)json_integer_value(v));
  } else if (json_is_boolean(v)) {
    snprintf(item, sizeof item, "%s", json_is_true(v) ? "on" : "off");
  } else {
    return TP_FAIL(TP_EUSAGE,
                   "%s: axes.%s: expected a string, a whole number, a boolean or an array of them",
                   path, axis);
  }
  int n = snprintf(text + *used, AXIS_TEXT - *used, "%s%s", *used ? "," : "", item);
  if (n < 0 || (size_t)n >= AXIS_TEXT - *used)
    return TP_FAIL(TP_EUSAGE, "%s: axes.%s: the list is too long", path, axis);
  *used += (size_t)n;
  return TP_OK;
}

static tp_rc apply_axis(const char *path, const char *axis, const json_t *value,
                        const tp_matrix_file_target *t) {
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
  if (t->set_axis(t->spec, axis, text) != TP_OK) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
    return TP_FAIL(TP_EUSAGE, "%s: %s", path, msg);
  }
  return TP_OK;
}

/* ---- models ------------------------------------------------------------------------------ */

typedef struct model_field {
  const char *key;
  size_t offset; /* of its int in tp_model_preset */
  int required;
} model_field;

static const model_field model_fields[] = {
    {"dim", offsetof(tp_model_preset, dim), 1},
    {"n_heads", offsetof(tp_model_preset, n_heads), 1},
    {"n_kv_heads", offsetof(tp_model_preset, n_kv_heads), 1},
    {"head_dim", offsetof(tp_model_preset, head_dim), 0},
    {"ffn_hidden", offsetof(tp_model_preset, ffn_hidden), 1},
    {"vocab", offsetof(tp_model_preset, vocab), 0},
    {"n_layers", offsetof(tp_model_preset, n_layers), 0},
};
enum { N_MODEL_FIELDS = sizeof model_fields / sizeof model_fields[0] };
#define MODEL_FIELD_NAMES "dim, n_heads, n_kv_heads, head_dim, ffn_hidden, vocab, n_layers"

static const model_field *find_model_field(const char *key) {
  for (int i = 0; i < N_MODEL_FIELDS; i++)
    if (strcmp(model_fields[i].key, key) == 0) return &model_fields[i];
  return NULL;
}

/* One field's value: a whole number that fits an int (the range is tp_model_set_add's). */
static tp_rc read_model_field(const char *path, const char *name, const model_field *f,
                              const json_t *value, tp_model_preset *m) {
  if (!json_is_integer(value))
    return TP_FAIL(TP_EUSAGE, "%s: models.%s.%s: expected a whole number", path, name, f->key);
  json_int_t v = json_integer_value(value);
  if (v < 1 || v > INT32_MAX)
    return TP_FAIL(TP_EUSAGE, "%s: models.%s.%s: %lld is not a positive whole number", path, name,
                   f->key, (long long)v);
  *(int *)((char *)m + f->offset) = (int)v;
  return TP_OK;
}

/* head_dim, when not given, as config.json readers derive it: dim / n_heads. */
static tp_rc derive_head_dim(const char *path, tp_model_preset *m) {
  if (m->head_dim != 0 || m->n_heads < 1 || m->dim < 1) return TP_OK;
  if (m->dim % m->n_heads != 0)
    return TP_FAIL(TP_EUSAGE,
                   "%s: models.%s: head_dim is not given and dim %d is not a multiple of n_heads "
                   "%d; give head_dim",
                   path, m->name, m->dim, m->n_heads);
  m->head_dim = m->dim / m->n_heads;
  return TP_OK;
}

static tp_rc read_model(const char *path, const char *name, const json_t *def, tp_model_set *set) {
  if (!json_is_object(def))
    return TP_FAIL(TP_EUSAGE, "%s: models.%s: expected an object of fields (%s)", path, name,
                   MODEL_FIELD_NAMES);
  tp_model_preset m;
  memset(&m, 0, sizeof m);
  snprintf(m.name, sizeof m.name, "%s", name);
  if (strlen(name) >= sizeof m.name)
    return TP_FAIL(TP_EUSAGE, "%s: models: the name \"%.20s...\" is longer than %d characters",
                   path, name, TP_MODEL_NAME_MAX - 1);
  const char *key = NULL;
  const json_t *value = NULL;
  json_object_foreach((json_t *)def, key, value) {
    const model_field *f = find_model_field(key);
    if (!f)
      return TP_FAIL(TP_EUSAGE, "%s: models.%s: unknown field \"%s\" (valid: %s)", path, name, key,
                     MODEL_FIELD_NAMES);
    TP_TRY(read_model_field(path, name, f, value, &m));
  }
  for (int i = 0; i < N_MODEL_FIELDS; i++)
    if (model_fields[i].required && !json_object_get(def, model_fields[i].key))
      return TP_FAIL(TP_EUSAGE,
                     "%s: models.%s: \"%s\" is missing (required: dim, n_heads, "
                     "n_kv_heads, ffn_hidden)",
                     path, name, model_fields[i].key);
  TP_TRY(derive_head_dim(path, &m));
  if (tp_model_set_add(set, &m) != TP_OK) {
    char msg[400];
    snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
    return TP_FAIL(TP_EUSAGE, "%s: models.%s: %s", path, name, msg);
  }
  return TP_OK;
}

static tp_rc read_models(const char *path, const json_t *models, tp_model_set *set) {
  const char *name = NULL;
  const json_t *def = NULL;
  json_object_foreach((json_t *)models, name, def) TP_TRY(read_model(path, name, def, set));
  return TP_OK;
}

/* ---- the file ----------------------------------------------------------------------------- */

static tp_rc check_keys(const char *path, const json_t *root, const tp_matrix_file_target *t) {
  const char *key = NULL;
  const json_t *value = NULL;
  json_object_foreach((json_t *)root, key, value) {
    if (strcmp(key, "preset") == 0 && !t->apply_preset)
      return TP_FAIL(TP_EUSAGE, "%s: \"preset\": tpbench %s has no presets (remove the key)", path,
                     t->command);
    if (strcmp(key, "preset") == 0 && !json_is_string(value))
      return TP_FAIL(TP_EUSAGE, "%s: \"preset\" must be a string", path);
    if (strcmp(key, "axes") == 0 && !json_is_object(value))
      return TP_FAIL(TP_EUSAGE, "%s: \"axes\" must be an object of axis lists", path);
    if (strcmp(key, "models") == 0 && !json_is_object(value))
      return TP_FAIL(TP_EUSAGE, "%s: \"models\" must be an object of model definitions", path);
    if (strcmp(key, "preset") != 0 && strcmp(key, "axes") != 0 && strcmp(key, "models") != 0 &&
        strcmp(key, "description") != 0)
      return TP_FAIL(TP_EUSAGE, "%s: unknown key \"%s\" (valid: preset, axes, models, description)",
                     path, key);
  }
  return TP_OK;
}

static tp_rc apply_preset(const char *path, const json_t *root, const char *preset,
                          const tp_matrix_file_target *t) {
  if (!t->apply_preset) return TP_OK;
  const json_t *named = json_object_get(root, "preset");
  const char *base = preset ? preset : named ? json_string_value(named) : t->default_preset;
  if (t->apply_preset(t->spec, base) != TP_OK) {
    char msg[300];
    snprintf(msg, sizeof msg, "%s", tp_cli_last_message());
    return TP_FAIL(TP_EUSAGE, "%s: %s", path, msg);
  }
  return TP_OK;
}

static tp_rc apply_file(const char *path, const json_t *root, const char *preset,
                        const tp_matrix_file_target *t) {
  if (!json_is_object(root))
    return TP_FAIL(TP_EUSAGE, "%s: the matrix file must hold one JSON object", path);
  TP_TRY(check_keys(path, root, t));
  TP_TRY(apply_preset(path, root, preset, t));
  const json_t *models = json_object_get(root, "models");
  if (models) TP_TRY(read_models(path, models, t->models));
  const json_t *axes = json_object_get(root, "axes");
  const char *axis = NULL;
  const json_t *value = NULL;
  if (axes)
    json_object_foreach((json_t *)axes, axis, value) TP_TRY(apply_axis(path, axis, value, t));
  return TP_OK;
}

/* Opens path for reading only if it is a regular file: a FIFO would block
 * the open (and the read) forever, a device would never end. Checked before
 * the open, and again on what was opened (O_NONBLOCK: a FIFO swapped in
 * between does not block either). */
static tp_rc open_regular(const char *path, int *fd) {
  struct stat st;
  if (stat(path, &st) != 0)
    return TP_FAIL(TP_EIO, "cannot read the matrix file %s: %s", path, strerror(errno));
  if (!S_ISREG(st.st_mode))
    return TP_FAIL(TP_EUSAGE, "the matrix file %s is not a regular file", path);
  *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (*fd < 0) return TP_FAIL(TP_EIO, "cannot read the matrix file %s: %s", path, strerror(errno));
  if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(*fd);
    return TP_FAIL(TP_EUSAGE, "the matrix file %s is not a regular file", path);
  }
  return TP_OK;
}

/* The whole file, at most FILE_MAX bytes, in a malloc'd buffer. */
static tp_rc read_file(const char *path, char **text, size_t *len) {
  int fd = -1;
  TP_TRY(open_regular(path, &fd));
  char *buf = malloc(FILE_MAX + 1);
  size_t got = 0;
  tp_rc rc = buf ? TP_OK : TP_FAIL(TP_EOOM, "no memory to read the matrix file %s", path);
  while (rc == TP_OK && got <= FILE_MAX) {
    ssize_t n = read(fd, buf + got, FILE_MAX + 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) rc = TP_FAIL(TP_EIO, "cannot read the matrix file %s: %s", path, strerror(errno));
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  if (rc == TP_OK && got > FILE_MAX)
    rc = TP_FAIL(TP_EUSAGE, "the matrix file %s is larger than %d bytes", path, FILE_MAX);
  if (rc != TP_OK) {
    free(buf);
    return rc;
  }
  *text = buf;
  *len = got;
  return TP_OK;
}

tp_rc tp_matrix_file_load(const char *path, const char *preset,
                          const tp_matrix_file_target *target) {
  char *text = NULL;
  size_t len = 0;
  TP_TRY(read_file(path, &text, &len));
  json_error_t err;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
  free(text);
  if (!root) return TP_FAIL(TP_EUSAGE, "%s:%d:%d: %s", path, err.line, err.column, err.text);
  tp_rc rc = apply_file(path, root, preset, target);
  json_decref(root);
  return rc;
}
