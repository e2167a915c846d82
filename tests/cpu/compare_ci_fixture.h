/*
 * compare_ci_fixture.h — the comparison the CI-format tests read
 * (test_compare_ci.c, test_compare_junit.c). Header-only.
 *
 * A synthetic database (fixture_db.h's machine, SYNTHESISED, not measured):
 * base commit b0 and head commit e0, three rounds each, every fused
 * dist_gemm configuration of head 10 % slower (a measured regression), the
 * 70b w2 dist_gemm ce configuration failed in head (ok in base: a failure
 * regression), and the 8b qkv case's model renamed on both sides to
 * CI_HOSTILE_MODEL, so its labels hold markup, quotes, a backslash, a line
 * break, a control character and a byte that is not UTF-8.
 */
#ifndef TP_COMPARE_CI_FIXTURE_H
#define TP_COMPARE_CI_FIXTURE_H

#include "tests/cpu/fixture_db.h"

#define CI_BASE "b0"
#define CI_HEAD "e0"
/* SQL text of the hostile model name, and what it reads as in C. */
#define CI_HOSTILE_MODEL_SQL                                                                       \
  "'8b <a href=\"x\">&amp;''q''</a> \\ ' || char(10) || 'line2' || char(1) || 'x' || "             \
  "cast(x'ff' as text) || 'é'"
#define CI_HOSTILE_MODEL "8b <a href=\"x\">&amp;'q'</a> \\ \nline2\001x\377\xc3\xa9"
/* What an XML parser reads back: the control byte and the byte that is not
 * UTF-8 as U+FFFD. */
#define CI_HOSTILE_MODEL_XML                                                                       \
  "8b <a href=\"x\">&amp;'q'</a> \\ \nline2\xef\xbf\xbdx\xef\xbf\xbd\xc3\xa9"

static double ci_fused_slower(const fx_synth_config *c, void *ctx) {
  (void)ctx;
  return !strcmp(c->axes.backend, "dist_gemm") && c->fused == 1 ? 1.10 : 1.0;
}

/* Builds the database at path; 0 on success. */
static inline int ci_build_db(const char *path) {
  fx_synth_config configs[FX_SYNTH_MAX_CONFIGS];
  size_t n = fx_synth_standard_cases(configs);
  tp_store *s = NULL;
  if (tp_store_open(path, 1, &s) != TP_OK) return -1;
  fx_synth_run base = {.commit = CI_BASE "00000000000000000000000000000000000001",
                       .started_at = "2026-12-01T10:00:00Z",
                       .seed = 7001};
  fx_synth_run head = {.commit = CI_HEAD "00000000000000000000000000000000000002",
                       .started_at = "2026-12-01T10:20:00Z",
                       .seed = 7002,
                       .factor = ci_fused_slower};
  int64_t b = fx_put_synth_run(s, &base, configs, n), h = fx_put_synth_run(s, &head, configs, n);
  char sql[1024];
  snprintf(sql, sizeof sql,
           "UPDATE configs SET status = 'failed', reason = 'numerics: rel err 3e-1 <vs> stock' "
           "WHERE run_id = %lld AND model = 'llama3-70b' AND layer = 'linear_rs' AND backend = "
           "'dist_gemm' AND schedule = 'ce'",
           (long long)h);
  int rc = b > 0 && h > 0 ? fx_exec(s, sql) : -1;
  snprintf(sql, sizeof sql,
           "UPDATE configs SET model = " CI_HOSTILE_MODEL_SQL
           " WHERE model = 'llama3-8b' AND proj = 'qkv'");
  if (rc == 0) rc = fx_exec(s, sql);
  tp_store_close(s);
  return rc;
}

#endif /* TP_COMPARE_CI_FIXTURE_H */
