/*
 * composition.h — the supported-composition table: what composes, generated
 * from the matrix's own rules rather than written by hand.
 *
 * It expands one matrix per command over every value of every composition
 * axis (`run`: layer × backend × schedule × tp × dp × dtype, the fp8
 * recipes included, × sp × pass × graph × save_gathered × ac on Llama 3 8B,
 * × fsdp_traffic (one expansion per value) on Llama 3 8B, batch 2, seqlen 4096; `ops`:
 * projection × backend × schedule × tp × dtype, the fp8 recipes included,
 * × pass × save_gathered on 8B at 4096 tokens), plans it against a host of
 * N GPUs and gives each configuration its verdict: run, rejected with the
 * rule's text, or planned with why. Configurations of one verdict are then
 * merged into as few rows as cover them exactly: a row is a product of
 * value sets, one per axis ("*": every value), so each row reads "these
 * combinations get this verdict" and no combination appears twice.
 * README's table is this output (`tpbench matrix --composition`), and a CPU
 * test fails when the two differ. Pure C, no CUDA.
 */
#ifndef TP_COMPOSITION_H
#define TP_COMPOSITION_H

#include <stdio.h>

#include "common/tp_error.h"

/* Writes both tables (markdown) for a host of gpus GPUs (>= 1). TP_EOOM, or
 * the expansion's error (a bug: the axes are literals). */
TP_MUST_CHECK tp_rc tp_composition_table_print(int gpus, FILE *out);

#endif /* TP_COMPOSITION_H */
