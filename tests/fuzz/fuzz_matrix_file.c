/*
 * fuzz_matrix_file.c — libFuzzer target: the JSON matrix file of `tpbench
 * run|ops --matrix FILE` and `tpbench matrix --matrix FILE`
 * (bench/matrix/matrix_file.c).
 *
 * The input is the file's bytes. It is read through the public entry point
 * (tp_layer_spec_load, by path, so the file checks run as for a user), and a
 * file that loads is expanded into its configurations and printed, as
 * `tpbench matrix` would, into /dev/null. The property checked beyond "no
 * crash, leak, undefined behaviour or hang": a failed load leaves the spec
 * untouched and names a reason.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/matrix/layer_matrix.h"
#include "tests/fuzz/fuzz_util.h"

/* The TP degree `tpbench matrix` assumes (bench/cli/run_args.h). */
enum { MATRIX_TP = 2, PRINT_AT_MOST = 2000 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void expand_and_print(const tp_layer_spec *spec) {
  tp_layer_matrix matrix;
  if (tp_layer_expand(spec, MATRIX_TP, &matrix) != TP_OK) return;
  /* Printing 200,000 configurations would only slow the search down. */
  if (matrix.n_configs <= PRINT_AT_MOST) tp_layer_matrix_print(&matrix, 2, fuzz_sink());
  tp_layer_matrix_free(&matrix);
}

/* The spec as bytes, so a failed load can be checked to leave every byte,
 * padding included, as it was. */
typedef union spec_bytes {
  tp_layer_spec spec;
  unsigned char bytes[sizeof(tp_layer_spec)];
} spec_bytes;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_scratch_path("matrix.json");
  fuzz_write_file(path, data, size);
  static spec_bytes loaded, before;
  memset(loaded.bytes, 0xA5, sizeof loaded.bytes);
  memcpy(before.bytes, loaded.bytes, sizeof before.bytes);
  if (tp_layer_spec_load(path, NULL, &loaded.spec) == TP_OK) {
    expand_and_print(&loaded.spec);
    return 0;
  }
  if (memcmp(loaded.bytes, before.bytes, sizeof loaded.bytes) != 0 || !tp_last_error()[0]) abort();
  return 0;
}
