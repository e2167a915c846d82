/*
 * hostlist.h — Slurm's compressed host lists ("node[01-04,07]",
 * "a1,b[2-3]", "rack[1-2]-gpu[01-02]") expanded into host names, in order.
 *
 * Under srun the master of a job is the first host of its node list
 * (SLURM_STEP_NODELIST / SLURM_NODELIST), which Slurm writes compressed.
 * Written here rather than taken from libslurm, whose ABI changes with each
 * Slurm release, for one parse of one string.
 *
 * The grammar: comma-separated terms; a term is text with zero or more
 * bracket groups; a group holds comma-separated numbers or ranges "lo-hi"
 * (lo <= hi), each number padded with zeros to the width lo is written in
 * ("[08-10]" gives 08, 09, 10). Several groups in one term expand as their
 * product, the leftmost varying slowest, as Slurm does. Text after a lone
 * bracket ("n[1-2]-ib") is taken too, though Slurm's parser refuses it (it
 * never writes such a list); tests/cpu/test_launch_readme.c compares the
 * forms Slurm writes with `scontrol show hostnames`.
 */
#ifndef TP_HOSTLIST_H
#define TP_HOSTLIST_H

#include <stddef.h>

#include "common/tp_error.h"

/* Longest host name kept (a DNS name is at most 253 characters). */
enum { TP_HOSTLIST_NAME_MAX = 256 };

/* Calls fn(host, ctx) for each host of list in order until fn returns
 * non-zero (then *stopped, when given, is 1). TP_EUSAGE naming the problem
 * for a malformed list: an empty term, an unclosed or empty bracket, a
 * range that is not numbers or runs backwards, a host longer than
 * TP_HOSTLIST_NAME_MAX - 1 characters, more than a million hosts. */
TP_MUST_CHECK tp_rc tp_hostlist_each(const char *list, int (*fn)(const char *host, void *ctx),
                                     void *ctx);

/* The first host of list into out (cap bytes); TP_EUSAGE as above, or when
 * it does not fit. */
TP_MUST_CHECK tp_rc tp_hostlist_first(const char *list, char *out, size_t cap);

#endif /* TP_HOSTLIST_H */
