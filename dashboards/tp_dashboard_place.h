/*
 * tp_dashboard_place.h — the dashboard's folder put in place whole.
 *
 * A page is index.html and the trace files it names in traces/: a folder
 * holding one generation's page and another's traces is broken (the page
 * loads traces that are gone, or carries files nothing names). So a new
 * generation is written into a fresh folder beside the target (".NAME.new-
 * XXXXXX", same file system) and renamed onto the target's name only when
 * complete: onto a missing target by rename(2), onto an existing one by
 * renameat2(RENAME_EXCHANGE), after which the old generation, now under the
 * staging name, is removed. A process killed at any point leaves the old
 * folder whole (or none, when there was none) and, at worst, its staging
 * folder beside it (a hidden name; removing it is safe). On a file system
 * without RENAME_EXCHANGE the old folder is first renamed aside: a kill
 * between the two renames leaves no folder at the target, never half of one.
 *
 * Because the whole folder is replaced, a folder may be replaced only when
 * it holds nothing but a dashboard's files (index.html, traces/ with trace
 * files, tp_output's temporaries of those): anything else in it is the
 * user's, and is refused (TP_EUSAGE) rather than lost. Its index.html must
 * be a dashboard's too, not a page of the same name: it must carry
 * TP_DASHBOARD_PAGE_MARK in its first TP_DASHBOARD_PAGE_MARK_WITHIN bytes,
 * which every page tpbench has written opens with. A target that is a
 * symbolic link to a folder is replaced where the link points (the link
 * stays).
 */
#ifndef TP_DASHBOARD_PLACE_H
#define TP_DASHBOARD_PLACE_H

#include "common/tp_error.h"

/* The provenance mark of index.html: the template's opening comment says it (dashboards/assets/
 * index.html, which has said it since the first dashboard), and the page is refused when its
 * template lacks it, so that a page tpbench writes can always be replaced by the next one. */
#define TP_DASHBOARD_PAGE_MARK "index.html \xe2\x80\x94 the page tpbench dashboard writes."
#define TP_DASHBOARD_PAGE_MARK_WITHIN 256

typedef struct tp_dashboard_staging {
  char target[4096];  /* the folder to replace: the path given, links resolved when it exists */
  char staging[4096]; /* the fresh folder beside it, with traces/ made inside */
} tp_dashboard_staging;

/* TP_OK when dir does not exist, or is a folder (through links) holding
 * only what a dashboard writes; TP_EUSAGE naming the first other entry
 * ("DIR holds NAME, which a dashboard did not write: give a new or empty
 * folder"), or an index.html without the page's mark (or unreadable);
 * TP_EIO when the folder cannot be read. Creates nothing. */
TP_MUST_CHECK tp_rc tp_dashboard_check_replaceable(const char *dir);

/* Makes st->staging (and its traces/) beside dir, with the permissions a
 * new folder gets (0777 less the umask). TP_EUSAGE when the folder that
 * holds dir cannot take it (missing, not writable), TP_EIO otherwise. */
TP_MUST_CHECK tp_rc tp_dashboard_stage(const char *dir, tp_dashboard_staging *st);

/* Renames the complete staging folder onto the target (see above) and
 * removes the generation it replaced. TP_EIO when no rename could be made
 * (the staging folder is then discarded and the target left as it was). */
TP_MUST_CHECK tp_rc tp_dashboard_put_in_place(const tp_dashboard_staging *st);

/* Removes the staging folder of a generation that failed (best effort:
 * only a dashboard's files are removed). */
void tp_dashboard_discard(const tp_dashboard_staging *st);

#endif /* TP_DASHBOARD_PLACE_H */
