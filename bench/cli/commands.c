/*
 * commands.c — what every subcommand shares at its edges (commands.h): the
 * rule that turns an outcome into an exit status, the check that stdout
 * got everything, the check of an output file's folder, and opening the
 * database of a reading command.
 */
#include "bench/cli/commands.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/cli/cli.h"

int tp_exit_for(tp_rc rc) {
  switch (rc) {
  case TP_OK: return TP_EXIT_OK;
  case TP_EUSAGE:
  case TP_EFOREIGN: return TP_EXIT_USAGE;
  default: return TP_EXIT_FAILURE;
  }
}

int tp_exit_after_stdout(const char *cmd, int status) {
  errno = 0;
  int flush_failed = fflush(stdout) != 0;
  int err = errno;
  if (!flush_failed && !ferror(stdout)) return status;
  if (status != TP_EXIT_OK) return status;
  /* A failed write whose buffer was dropped leaves no errno to report. */
  fprintf(stderr, "tpbench%s%s: writing the output failed: %s\n", cmd ? " " : "", cmd ? cmd : "",
          flush_failed && err ? strerror(err) : "an earlier write to standard output failed");
  return TP_EXIT_FAILURE;
}

tp_rc tp_check_output_folder(const char *path) {
  char *copy = strdup(path); /* dirname may write into its argument */
  if (!copy) return TP_FAIL(TP_EOOM, "%s: out of memory", path);
  const char *folder = dirname(copy);
  struct stat st;
  tp_rc rc = TP_OK;
  if (stat(folder, &st) != 0)
    rc = TP_FAIL(TP_EUSAGE, "%s: cannot write here: folder %s: %s", path, folder, strerror(errno));
  else if (!S_ISDIR(st.st_mode))
    rc = TP_FAIL(TP_EUSAGE, "%s: cannot write here: %s is not a folder", path, folder);
  else if (access(folder, W_OK | X_OK) != 0)
    rc = TP_FAIL(TP_EUSAGE, "%s: cannot write here: folder %s: %s", path, folder, strerror(errno));
  free(copy);
  return rc;
}

tp_rc tp_open_for_reading(const char *cmd, const char *path, tp_store **store) {
  *store = NULL;
  if (access(path, F_OK) != 0 && errno == ENOENT) {
    fprintf(stderr, "tpbench %s: no database at '%s' (run 'tpbench ops' first, or pass --db)\n",
            cmd, path);
    return TP_FAIL(TP_EUSAGE, "%s: no such database", path);
  }
  tp_rc rc = tp_store_open_readonly(path, store);
  if (rc != TP_OK)
    fprintf(stderr, "tpbench %s: cannot open '%s': %s\n", cmd, path, tp_cli_last_message());
  return rc;
}

void tp_print_error(const char *cmd) {
  const char *msg = tp_cli_last_message();
  const size_t n = strlen(cmd);
  if (strncmp(msg, cmd, n) == 0 && strncmp(msg + n, ": ", 2) == 0) msg += n + 2;
  fprintf(stderr, "tpbench %s: %s\n", cmd, msg);
}
