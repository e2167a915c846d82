/*
 * plan_info.c — the name of a plan's engine as a record's (see plan_info.h).
 */
#include "bench/gpu/plan_info.h"

const char *tp_plan_engine(const tp_linear_plan *p) { return p->engine ? p->engine : "none"; }
