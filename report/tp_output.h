/*
 * tp_output.h — writing an output file the safe way: every file tpbench
 * writes for the user (trace --out, the dashboard's index.html) goes
 * through here.
 *
 * The content goes to a private temporary in the target's folder, created
 * exclusively (a name nobody can predict, never following a link planted
 * there, mode 0600 while written), given its mode, flushed and fsync'd and
 * renamed over the target. The mode is the replaced file's permission bits
 * (0600 stays 0600; set-id and sticky bits are dropped) or, for a new
 * file, the usual 0644 less the umask. The owner and group are the
 * writer's: keeping another owner's would take privileges tpbench does not
 * have. So a reader sees the old file or the whole new one, two writers of
 * the same target leave one writer's complete file, and a failure leaves
 * the target untouched.
 *
 * Refused before anything is created (TP_EUSAGE, with a sentence): an empty
 * path; a target that exists and is not a regular file, through a link too
 * (a device, a FIFO, a folder, a socket); the database the command reads or
 * one of its -wal, -shm or -journal files, by identity rather than
 * spelling: the same inode; the side file's name beside the database with
 * its symbolic links resolved (or as given); "X-wal", "X-shm" or
 * "X-journal" where X is a hard link to the database.
 */
#ifndef TP_OUTPUT_H
#define TP_OUTPUT_H

#include <stdio.h>

#include "common/tp_error.h"

typedef struct tp_output {
  FILE *file; /* write the content here; NULL once committed or aborted */
  char *path; /* the target */
  char *tmp;  /* the temporary's path */
} tp_output;

/*
 * The checks of tp_output_open without creating anything, for a caller
 * that should refuse a target before long work: TP_OK, TP_EUSAGE with a
 * sentence for a refused target, or TP_EOOM. tp_output_commit checks again.
 */
TP_MUST_CHECK tp_rc tp_output_check(const char *path, const char *protect_db);

/*
 * Checks that path may be written and opens a temporary beside it in
 * out->file. protect_db (may be NULL) names the database the command
 * reads: the target may not be it or one of its side files. TP_EUSAGE for
 * a refused target, TP_EIO when the temporary cannot be made, TP_EOOM.
 * On failure nothing is left to clean up.
 */
TP_MUST_CHECK tp_rc tp_output_open(const char *path, const char *protect_db, tp_output *out);

/*
 * Finishes the file: gives it its mode (the replaced file's permission
 * bits, see above), flushes and fsyncs it, checks the target again (it may
 * have changed since tp_output_open) and renames the temporary over it. On any failure (a write
 * error, a full disk) the temporary is removed and the target is left as it was. out is released
 * either way.
 */
TP_MUST_CHECK tp_rc tp_output_commit(tp_output *out, const char *protect_db);

/* Gives up: closes and removes the temporary, releases out. Safe to call
 * on a released or zeroed out. */
void tp_output_abort(tp_output *out);

#endif /* TP_OUTPUT_H */
