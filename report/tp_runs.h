/*
 * tp_runs.h — the list of runs in a tpbench database (`tpbench runs`): one
 * line per run with what finds it again (id, commit, time, host), what it
 * was (command, kinds of configuration) and how it went (configurations ok,
 * failed, rejected; finished or not), in markdown, CSV or JSON.
 */
#ifndef TP_RUNS_H
#define TP_RUNS_H

#include <stdio.h>

#include "report/tp_report.h"
#include "store/tp_store.h"

/* Writes every run of the database, oldest (lowest id) first.
 *
 * Per run: id; commit (markdown: its first 10 digits, " (dirty)" when built
 * from a changed tree; CSV and JSON: the whole sha and a dirty field);
 * start time (UTC) and, in CSV and JSON, finish time; host, GPU and GPU
 * count; command (ops, run, link); the kinds of its configurations in the
 * order op, layer, gemm, comm, link; how many configurations are ok,
 * failed (failed, oom or timeout) and rejected; status "finished" or "not
 * finished" (no finish time: interrupted or still running). CSV: RFC 4180,
 * one header line. JSON: {"runs": [...]}. An empty database writes a table
 * with no rows ("no runs" in markdown). TP_EIO when out cannot be
 * written, TP_ESQLITE when reading fails. */
TP_MUST_CHECK tp_rc tp_report_runs(tp_store *store, tp_report_format fmt, FILE *out);

#endif /* TP_RUNS_H */
