/*
 * fuzz_store_open.c — libFuzzer target: opening a database file (store/),
 * then reading it back as `tpbench report` does (report/tp_report.c).
 *
 * The input is the file's bytes, written to a private scratch file. It is
 * vetted with tp_store_probe (what `import` does to a source), opened as the
 * read-only commands open it (tp_store_open_readonly, where the store has
 * it), then as the writing commands open it (tp_store_open without create,
 * which migrates an older schema); each time it opens, the latest run's
 * throughput table is written in every format into /dev/null, so hostile
 * schemas, rows and strings reach the readers. The property checked beyond
 * "no crash, leak, undefined behaviour or hang": a file the probe calls
 * foreign is never opened.
 */
#include <stdint.h>
#include <stdlib.h>

#include "report/tp_report.h"
#include "store/tp_store.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void report_every_format(tp_store *store) {
  const tp_report_format formats[] = {TP_FMT_MARKDOWN, TP_FMT_CSV, TP_FMT_JSON};
  const tp_report_filter latest = {0};
  for (size_t i = 0; i < sizeof formats / sizeof formats[0]; ++i)
    (void)tp_report_throughput(store, &latest, formats[i], fuzz_sink());
}

/* Opens with open_fn (read-only or read-write) and reports; with
 * probe_binds, aborts if a file the probe refused as foreign opens. Only the
 * read-only open is bound: the read-write one makes a new database of an
 * empty file or a SQLite file without tables by contract (tp_store.h), which
 * the probe, a reader, refuses. */
static void open_and_report(const char *path, tp_rc probed, int probe_binds,
                            tp_rc (*open_fn)(const char *, tp_store **)) {
  tp_store *store = NULL;
  tp_rc opened = open_fn(path, &store);
  if (probe_binds && opened == TP_OK && probed == TP_EFOREIGN) abort();
  if (opened == TP_OK) report_every_format(store);
  tp_store_close(store);
}

static tp_rc open_existing(const char *path, tp_store **store) {
  return tp_store_open(path, 0, store);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_scratch_path("store.db");
  fuzz_write_file(path, data, size);
  int version = 0;
  tp_rc probed = tp_store_probe(path, &version);
#ifdef TP_FUZZ_HAVE_OPEN_READONLY
  open_and_report(path, probed, 1, tp_store_open_readonly);
#endif
  open_and_report(path, probed, 0, open_existing);
  return 0;
}
