/*
 * profile_spawn.h — how `tpbench profile` runs its command: fork, exec with
 * the injection variables set, wait, and the exit status tpbench gives back
 * (the command's own; 127 when it cannot be run; 128 + N when signal N
 * killed it, as a shell says). No CUDA here: the CPU tests run it.
 */
#ifndef TP_PROFILE_SPAWN_H
#define TP_PROFILE_SPAWN_H

#include "common/tp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The exit status a shell would report for a waitpid() status. */
int tp_profile_exit_status(int wait_status);

/* Runs argv[0] (looked up in PATH) with argv, its environment extended by
 * the NULL-terminated "NAME=value" strings of `env` (which replace variables
 * of the same name), waits for it and sets *exit_status as
 * tp_profile_exit_status does (127 when it could not be executed). While
 * the child runs, SIGINT and SIGTERM are ignored by tpbench, so a Ctrl-C
 * reaches the child and tpbench still stores what it wrote. TP_EUSAGE for
 * an empty argv, TP_EIO when fork or waitpid fails. */
TP_MUST_CHECK tp_rc tp_profile_spawn(char *const argv[], const char *const env[], int *exit_status);

#ifdef __cplusplus
}
#endif

#endif /* TP_PROFILE_SPAWN_H */
