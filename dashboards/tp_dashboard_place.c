/*
 * tp_dashboard_place.c — a dashboard generation staged beside its folder and
 * renamed into place whole (see tp_dashboard_place.h).
 */
#include "dashboards/tp_dashboard_place.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dashboards/tp_dashboard_files.h"

/* tp_output's temporary of a file NAME: ".NAME.XXXXXX" (report/tp_output.c). */
static int is_temporary_of(const char *entry, int (*owned)(const char *)) {
  size_t len = strlen(entry);
  if (entry[0] != '.' || len < 9 || entry[len - 7] != '.') return 0;
  char name[256];
  if (len - 8 >= sizeof name) return 0;
  memcpy(name, entry + 1, len - 8);
  name[len - 8] = '\0';
  return owned(name);
}

static int is_page_name(const char *name) {
  return !strcmp(name, "index.html") || !strcmp(name, TP_DASHBOARD_TRACE_DIR);
}

static int owned_in_folder(const char *name) {
  return is_page_name(name) || is_temporary_of(name, is_page_name);
}

static int owned_in_traces(const char *name) {
  return tp_dashboard_is_trace_file_name(name) ||
         is_temporary_of(name, tp_dashboard_is_trace_file_name);
}

static int is_dot(const char *name) { return !strcmp(name, ".") || !strcmp(name, ".."); }

/* The first entry of folder that owned() refuses, into *foreign (a copy; "" when none). */
static tp_rc first_foreign(const char *folder, int (*owned)(const char *), char *foreign,
                           size_t cap) {
  foreign[0] = '\0';
  DIR *d = opendir(folder);
  if (!d) return TP_FAIL(TP_EIO, "%s: cannot read the folder: %s", folder, strerror(errno));
  for (struct dirent *e = readdir(d); e && !foreign[0]; e = readdir(d))
    if (!is_dot(e->d_name) && !owned(e->d_name)) snprintf(foreign, cap, "%s", e->d_name);
  closedir(d);
  return TP_OK;
}

static int is_folder(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* NULL when the file at path opens with a dashboard page's mark (a page of that name that
 * another tool or the user wrote is not the dashboard's to replace), else why it is not
 * known to be ours, into why. */
static const char *page_not_ours(const char *path, char *why, size_t cap) {
  char head[TP_DASHBOARD_PAGE_MARK_WITHIN + 1];
  struct stat st;
  if (stat(path, &st) != 0) {
    snprintf(why, cap, "it cannot be followed (%s: a link to nothing?)", strerror(errno));
    return why;
  }
  if (!S_ISREG(st.st_mode)) return "it is not a plain file"; /* a FIFO would block the read */
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(why, cap, "it cannot be read (%s), so its mark cannot be checked", strerror(errno));
    return why;
  }
  const size_t n = fread(head, 1, sizeof head - 1, f);
  const int read_failed = ferror(f);
  if (fclose(f) != 0 || read_failed) return "reading it failed, so its mark cannot be checked";
  head[n] = '\0';
  if (strstr(head, TP_DASHBOARD_PAGE_MARK)) return NULL;
  snprintf(why, cap, "it lacks the page's mark, \"%s\"", TP_DASHBOARD_PAGE_MARK);
  return why;
}

/* dir/index.html, when there is one, is a page a dashboard wrote. */
static tp_rc check_page_is_ours(const char *dir) {
  char page[4200], why_buf[512];
  struct stat st;
  snprintf(page, sizeof page, "%s/index.html", dir);
  if (lstat(page, &st) != 0 && errno == ENOENT) return TP_OK;
  const char *why = page_not_ours(page, why_buf, sizeof why_buf);
  if (!why) return TP_OK;
  return TP_FAIL(TP_EUSAGE,
                 "%s holds index.html, which is not known to be a dashboard's (%s): the "
                 "dashboard replaces its folder whole, so give a new or empty folder (or move "
                 "that file out)",
                 dir, why);
}

tp_rc tp_dashboard_check_replaceable(const char *dir) {
  if (!is_folder(dir)) return TP_OK; /* missing (or not a folder: the caller refuses that) */
  char foreign[256], traces[4200];
  const char *where = "";
  TP_TRY(first_foreign(dir, owned_in_folder, foreign, sizeof foreign));
  if (!foreign[0]) TP_TRY(check_page_is_ours(dir));
  snprintf(traces, sizeof traces, "%s/" TP_DASHBOARD_TRACE_DIR, dir);
  if (!foreign[0] && is_folder(traces)) {
    TP_TRY(first_foreign(traces, owned_in_traces, foreign, sizeof foreign));
    where = TP_DASHBOARD_TRACE_DIR "/";
  }
  if (!foreign[0]) return TP_OK;
  return TP_FAIL(TP_EUSAGE,
                 "%s holds %s%s, which a dashboard did not write: the dashboard replaces its "
                 "folder whole, so give a new or empty folder (or move that file out)",
                 dir, where, foreign);
}

/* Removes a generation's folder: its dashboard files, traces/, then the
 * folder. Anything else stays (and so does the folder then). */
static void remove_generation(const char *folder) {
  char traces[4200], path[4600];
  snprintf(traces, sizeof traces, "%s/" TP_DASHBOARD_TRACE_DIR, folder);
  const char *levels[] = {traces, folder};
  int (*owned[])(const char *) = {owned_in_traces, owned_in_folder};
  for (int k = 0; k < 2; k++) {
    DIR *d = opendir(levels[k]);
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
      if (is_dot(e->d_name) || !owned[k](e->d_name)) continue;
      snprintf(path, sizeof path, "%s/%s", levels[k], e->d_name);
      if (unlink(path) != 0 && errno == EISDIR) rmdir(path);
    }
    if (d) closedir(d);
    rmdir(levels[k]);
  }
}

/* The target: the path given, or where its links lead when it exists. */
static tp_rc resolve_target(const char *dir, char *target, size_t cap) {
  char resolved[PATH_MAX];
  const char *path = realpath(dir, resolved) ? resolved : dir;
  if (snprintf(target, cap, "%s", path) >= (int)cap)
    return TP_FAIL(TP_EUSAGE, "%s: path too long", dir);
  size_t len = strlen(target);
  while (len > 1 && target[len - 1] == '/') target[--len] = '\0';
  return TP_OK;
}

/* 0777 less the process's umask: what mkdir(dir, 0777) would have given. */
static mode_t new_folder_mode(void) {
  mode_t mask = umask(0);
  umask(mask);
  return 0777 & ~mask;
}

tp_rc tp_dashboard_stage(const char *dir, tp_dashboard_staging *st) {
  TP_TRY(resolve_target(dir, st->target, sizeof st->target));
  char copy[4096], copy2[4096];
  snprintf(copy, sizeof copy, "%s", st->target);
  snprintf(copy2, sizeof copy2, "%s", st->target);
  const char *parent = dirname(copy), *name = basename(copy2);
  if (snprintf(st->staging, sizeof st->staging, "%s/.%s.new-XXXXXX", parent, name) >=
      (int)sizeof st->staging)
    return TP_FAIL(TP_EUSAGE, "%s: path too long", dir);
  if (!mkdtemp(st->staging))
    return TP_FAIL(tp_rc_for_path_errno(errno), "%s: cannot make a folder beside it: %s", dir,
                   strerror(errno));
  char traces[4200];
  snprintf(traces, sizeof traces, "%s/" TP_DASHBOARD_TRACE_DIR, st->staging);
  if (chmod(st->staging, new_folder_mode()) != 0 || mkdir(traces, 0777) != 0) {
    const int err = errno;
    remove_generation(st->staging);
    return TP_FAIL(TP_EIO, "%s: cannot prepare the new folder: %s", st->staging, strerror(err));
  }
  return TP_OK;
}

/* The target renamed aside, the staging folder onto its name: for a file
 * system without RENAME_EXCHANGE. Between the two, no folder is there. */
static tp_rc swap_by_two_renames(const tp_dashboard_staging *st) {
  char aside[4200];
  snprintf(aside, sizeof aside, "%s.old", st->staging);
  if (rename(st->target, aside) != 0)
    return TP_FAIL(TP_EIO, "%s: cannot move the old dashboard aside: %s", st->target,
                   strerror(errno));
  if (rename(st->staging, st->target) != 0) {
    const int err = errno;
    if (rename(aside, st->target) != 0) { /* the old one back; failing that, say where it is */
      return TP_FAIL(TP_EIO, "%s: cannot put the new dashboard in place (%s); the old one is at %s",
                     st->target, strerror(err), aside);
    }
    return TP_FAIL(TP_EIO, "%s: cannot put the new dashboard in place: %s", st->target,
                   strerror(err));
  }
  remove_generation(aside);
  return TP_OK;
}

tp_rc tp_dashboard_put_in_place(const tp_dashboard_staging *st) {
  if (rename(st->staging, st->target) == 0) return TP_OK; /* no folder, or an empty one */
  tp_rc rc = TP_OK;
  if (errno != ENOTEMPTY && errno != EEXIST)
    rc = TP_FAIL(TP_EIO, "%s: cannot put the new dashboard in place: %s", st->target,
                 strerror(errno));
  else if (renameat2(AT_FDCWD, st->staging, AT_FDCWD, st->target, RENAME_EXCHANGE) == 0)
    remove_generation(st->staging); /* the old generation, now under the staging name */
  else if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) rc = swap_by_two_renames(st);
  else
    rc = TP_FAIL(TP_EIO, "%s: cannot put the new dashboard in place: %s", st->target,
                 strerror(errno));
  if (rc != TP_OK) remove_generation(st->staging);
  return rc;
}

void tp_dashboard_discard(const tp_dashboard_staging *st) { remove_generation(st->staging); }
