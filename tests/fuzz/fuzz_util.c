/*
 * fuzz_util.c — the scratch folder and the output sink of the fuzz targets
 * (fuzz_util.h). Failures here are the machine's, so they abort with a
 * message rather than return: libFuzzer then stops and shows it.
 */
#include "tests/fuzz/fuzz_util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SCRATCH_NAMES = 8, SCRATCH_PATH = 512 };

/* This process's scratch folder and the paths handed out inside it. */
static char scratch_dir[SCRATCH_PATH];
static char scratch_paths[SCRATCH_NAMES][SCRATCH_PATH];
static int scratch_count;

static void die(const char *what, const char *path) {
  fprintf(stderr, "fuzz: %s %s failed\n", what, path);
  abort();
}

static void remove_scratch(void) {
  for (int i = 0; i < scratch_count; ++i) {
    const char *suffixes[] = {"", "-wal", "-shm", "-journal"};
    for (size_t s = 0; s < sizeof suffixes / sizeof suffixes[0]; ++s) {
      char path[SCRATCH_PATH + 16];
      snprintf(path, sizeof path, "%s%s", scratch_paths[i], suffixes[s]);
      unlink(path);
    }
  }
  rmdir(scratch_dir);
}

static void make_scratch_dir(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(scratch_dir, sizeof scratch_dir, "%s/tpbench-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(scratch_dir)) die("mkdtemp", scratch_dir);
  atexit(remove_scratch);
}

const char *fuzz_scratch_path(const char *name) {
  if (!scratch_dir[0]) make_scratch_dir();
  for (int i = 0; i < scratch_count; ++i) {
    const char *slash = strrchr(scratch_paths[i], '/');
    if (strcmp(slash + 1, name) == 0) return scratch_paths[i];
  }
  if (scratch_count == SCRATCH_NAMES) die("too many scratch names at", name);
  char *path = scratch_paths[scratch_count++];
  snprintf(path, SCRATCH_PATH, "%s/%s", scratch_dir, name);
  return path;
}

/* Removes a leftover companion of an SQLite file (path + suffix). */
static void unlink_companion(const char *path, const char *suffix) {
  char companion[SCRATCH_PATH + 16];
  snprintf(companion, sizeof companion, "%s%s", path, suffix);
  if (unlink(companion) != 0 && access(companion, F_OK) == 0) die("unlink", companion);
}

void fuzz_write_file(const char *path, const uint8_t *data, size_t len) {
  unlink_companion(path, "-wal");
  unlink_companion(path, "-shm");
  unlink_companion(path, "-journal");
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) die("open", path);
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, data + done, len - done);
    if (n <= 0) die("write", path);
    done += (size_t)n;
  }
  if (close(fd) != 0) die("close", path);
}

FILE *fuzz_sink(void) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "we");
  if (!sink) die("fopen", "/dev/null");
  return sink;
}
