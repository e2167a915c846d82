/*
 * help_notes.h — what every command's --help ends with: its exit statuses
 * and one example, kept in one table (help_notes.c) rather than typed into
 * each command's option table. tp_cli_print_help (cli.h) prints them.
 */
#ifndef TP_HELP_NOTES_H
#define TP_HELP_NOTES_H

#include <stdio.h>

/* Prints "Exit status: ..." and, when the command has one, "Example: ..."
 * for the command named (the common statuses for a name the table lacks). */
void tp_help_notes_print(const char *command, FILE *out);

/* The example of the command, NULL when it has none. */
const char *tp_help_example(const char *command);

#endif /* TP_HELP_NOTES_H */
