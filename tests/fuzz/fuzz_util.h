/*
 * fuzz_util.h — what the libFuzzer targets of tests/fuzz share: a private
 * scratch folder for inputs that the code under test only takes as a path
 * (matrix files, databases), and a sink for the text it prints.
 *
 * The scratch folder is made once per process (mkdtemp under $TMPDIR or
 * /tmp) and removed at exit, so parallel fuzzing jobs never share a file.
 */
#ifndef TP_FUZZ_UTIL_H
#define TP_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The path of `name` inside this process's scratch folder (made on the first
 * call; aborts if it cannot be made: the target cannot run without it). The
 * string is the module's and lives until exit. */
const char *fuzz_scratch_path(const char *name);

/* Replaces the file at path with exactly the len bytes of data (no
 * -wal/-shm/-journal companions are left from an earlier input); aborts on
 * an I/O error, which is the machine's fault, not the input's. */
void fuzz_write_file(const char *path, const uint8_t *data, size_t len);

/* A stream that discards what is written to it (/dev/null, opened once). */
FILE *fuzz_sink(void);

#endif /* TP_FUZZ_UTIL_H */
