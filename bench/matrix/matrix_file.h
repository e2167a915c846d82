/*
 * matrix_file.h — the JSON matrix file that `tpbench run`, `tpbench ops` and
 * `tpbench matrix` read with --matrix FILE: one format for every command.
 *
 *   {"preset": "quick",                                  (run only)
 *    "models": {"mymodel": {"dim": 4096, "n_heads": 32, "n_kv_heads": 8,
 *                           "head_dim": 128, "ffn_hidden": 14336,
 *                           "vocab": 128256, "n_layers": 32}},
 *    "axes": {"model": ["mymodel", "8b"], "seqlen": [2048, 4096],
 *             "sp": "on", "graph": [false, true]},
 *    "description": "anything"}
 *
 * "models" defines models the axes may then name (presets.h,
 * tp_model_set_add, says what is checked): dim, n_heads, n_kv_heads and
 * ffn_hidden are required; head_dim defaults to dim / n_heads (refused when
 * that does not divide); vocab and n_layers are optional. An axis value is a
 * string, a whole number, a boolean (true "on", false "off") or an array of
 * them; which axes exist is the command's (its set_axis refuses the others,
 * naming its axes). The order applied: the preset (the caller's, else the
 * file's, else the command's default), then the models, then the axes.
 */
#ifndef TP_MATRIX_FILE_H
#define TP_MATRIX_FILE_H

#include "bench/matrix/presets.h"
#include "common/tp_error.h"

/* What a command does with the parts of a file; spec is the command's own. */
typedef struct tp_matrix_file_target {
  const char *command; /* "run", "ops": named in messages */
  void *spec;
  /* Resets spec to preset name. NULL: the command has no presets and a
   * "preset" key is refused. */
  tp_rc (*apply_preset)(void *spec, const char *name);
  const char *default_preset; /* when neither the caller nor the file names one */
  /* Replaces one axis's list with comma-separated values (TP_EUSAGE naming the
   * command's axes for one it does not have). */
  tp_rc (*set_axis)(void *spec, const char *axis, const char *values);
  tp_model_set *models; /* inside spec: where "models" go */
} tp_matrix_file_target;

/*
 * Reads the matrix file at path into target->spec (preset: the caller's
 * preset, overriding the file's; NULL for none). TP_EIO when the file cannot
 * be read; TP_EUSAGE (with the line and column for a JSON syntax error, the
 * key's path, such as models.mymodel.dim, for anything else) for: not an
 * object, an unknown key, axis or model field, a value of another type, a
 * model that tp_model_set_add refuses, a string that is empty, holds a comma
 * or is over 127 characters, a path that is not a regular file (a FIFO is
 * refused without blocking), over 1 MiB. On an error the spec may be half
 * written: load into a copy.
 */
TP_MUST_CHECK tp_rc tp_matrix_file_load(const char *path, const char *preset,
                                        const tp_matrix_file_target *target);

#endif /* TP_MATRIX_FILE_H */
