/*
 * help_notes.c — each command's exit statuses and example (help_notes.h).
 *
 * The statuses follow one rule (commands.h, tp_exit_for): 0 success, 1 the
 * command ran and something failed that is not the input, 2 the input is
 * wrong. A command says here only what its 1 means when that is more than
 * the rule's words (a regression for compare, a missing trace for trace),
 * or, for profile, that the program's own status is passed on. Examples that
 * read a database name the sample databases under examples/, so they run as
 * shown from the repository's root on any machine.
 */
#include "bench/cli/help_notes.h"

#include <string.h>

typedef struct {
  const char *command;
  const char *failure; /* what exit status 1 means; NULL: the common words */
  const char *whole;   /* the whole exit-status text instead, or NULL */
  const char *example;
} help_note;

#define NEEDS_GPU_FAILURE                                                                          \
  "a configuration failed, timed out or ran out of memory, the workers died, or there is no GPU "  \
  "(every finished result is kept)"

static const help_note notes[] = {
    {"ops", NEEDS_GPU_FAILURE, NULL, "tpbench ops --models 8b --tokens 4096 --db tpbench.db"},
    {"run", NEEDS_GPU_FAILURE, NULL, "tpbench run --preset quick --db tpbench.db"},
    {"link", "the probe failed or there is no GPU", NULL, "tpbench link --db tpbench.db"},
    {"drift",
     "a configuration failed, no stock configuration trained or a value is not finite (0 "
     "whatever the drift)",
     NULL, "tpbench drift --show 6 --db examples/tpbench-h200-tp1-composition.db"},
    {"matrix", NULL, NULL, "tpbench matrix --for ops --models 8b --projs qkv --tokens 4096"},
    {"runs", NULL, NULL, "tpbench runs --db examples/tpbench-h200-sample.db"},
    {"report", NULL, NULL, "tpbench report --db examples/tpbench-h200-sample.db --run 5"},
    {"compare",
     "a configuration regressed (a gated measure got slower, or it was ok in BASE and failed in "
     "HEAD)",
     NULL, "tpbench compare e92c4c5 a06011f --db examples/tpbench-h200-sample.db"},
    {"history", NULL, NULL,
     "tpbench history --key dcb6b17090 --db examples/tpbench-h200-sample.db"},
    {"trace", "the configuration has no trace (the message says why) or writing it failed", NULL,
     "tpbench trace --config 450 --db examples/tpbench-h200-sample.db --out trace.json"},
    {"import", NULL, NULL, "tpbench import examples/tpbench-h200-tp1-gemm.db --db merged.db"},
    {"dashboard", NULL, NULL,
     "tpbench dashboard --db examples/tpbench-h200-sample.db --out tpbench-dashboard"},
    {"migrate", NULL, NULL, "tpbench migrate --db old.db"},
    {"profile", NULL,
     "the program's own exit status (127: it could not be run; 128 + N: it was killed by signal "
     "N); 1 when this build has no CUDA or the collector could not start; 2 the input is wrong",
     "tpbench profile --db profile.db --steps 2:10 -- python3 train.py"},
    {"project", NULL, NULL, "tpbench project --db examples/tpbench-h200-sample.db --tp 2,4,8"},
};

static const help_note *note_of(const char *command) {
  for (size_t i = 0; command && i < sizeof notes / sizeof notes[0]; i++)
    if (!strcmp(notes[i].command, command)) return &notes[i];
  return NULL;
}

const char *tp_help_example(const char *command) {
  const help_note *n = note_of(command);
  return n ? n->example : NULL;
}

void tp_help_notes_print(const char *command, FILE *out) {
  const help_note *n = note_of(command);
  fputs("\nExit status: ", out);
  if (n && n->whole) fputs(n->whole, out);
  else
    fprintf(out,
            "0 success; 1 %s; 2 the input is wrong (an unknown option or value, a path that is "
            "not a usable tpbench database, an output that cannot be written as asked)",
            n && n->failure ? n->failure
                            : "something failed that is not the input (an I/O error, a database "
                              "another program holds locked)");
  fputs(".\n", out);
  if (n && n->example) fprintf(out, "\nExample:\n  %s\n", n->example);
}
