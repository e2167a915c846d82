/*
 * tp_keys.c — short keys: SHA-256 of the canonical key through libsodium,
 * and the lookup of a key or a prefix of its digest (see tp_keys.h).
 */
#include "report/tp_keys.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>
#include <sqlite3.h>

void tp_short_key(const char *config_key, char *out, size_t cap) {
  if (cap == 0) return;
  out[0] = '\0';
  /* SHA-256 needs nothing sodium_init sets up, but libsodium asks for it
   * before any call; it is idempotent and thread-safe. */
  if (!config_key || sodium_init() < 0) return;
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, (const unsigned char *)config_key, strlen(config_key));
  char hex[TP_KEY_DIGEST_HEX + 1];
  sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
  snprintf(out, cap, "%s", hex);
}

static tp_rc sql_fail(tp_store *store, const char *what) {
  return TP_FAIL(TP_ESQLITE, "%s: %s: %s", tp_store_path(store), what,
                 sqlite3_errmsg(tp_store_db(store)));
}

/* Whether some configuration has exactly this key. */
static tp_rc key_exists(tp_store *store, const char *key, int *exists) {
  sqlite3_stmt *st = NULL;
  *exists = 0;
  if (sqlite3_prepare_v2(tp_store_db(store), "SELECT 1 FROM configs WHERE config_key = ? LIMIT 1",
                         -1, &st, NULL) != SQLITE_OK)
    return sql_fail(store, "preparing the key lookup");
  tp_rc rc = TP_OK;
  if (sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
    rc = sql_fail(store, "binding a key");
  } else {
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) *exists = 1;
    else if (step != SQLITE_DONE) rc = sql_fail(store, "looking a key up");
  }
  sqlite3_finalize(st);
  return rc;
}

static int is_hex_prefix(const char *text) {
  size_t n = strlen(text);
  if (n < TP_KEY_PREFIX_MIN || n > TP_KEY_DIGEST_HEX) return 0;
  for (const char *p = text; *p; p++)
    if (!isxdigit((unsigned char)*p)) return 0;
  return 1;
}

/* What a prefix matched: how many keys, and the first two of them. */
typedef struct {
  size_t count;
  char *first, *second;
} prefix_matches;

static tp_rc note_match(prefix_matches *m, const char *key) {
  char **slot = m->count == 0 ? &m->first : m->count == 1 ? &m->second : NULL;
  m->count++;
  if (!slot) return TP_OK;
  *slot = strdup(key);
  return *slot ? TP_OK : TP_FAIL(TP_EOOM, "resolving a key: out of memory");
}

/* Every distinct key whose digest starts with prefix (case ignored). */
static tp_rc match_prefix(tp_store *store, const char *prefix, prefix_matches *m) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(tp_store_db(store), "SELECT DISTINCT config_key FROM configs", -1, &st,
                         NULL) != SQLITE_OK)
    return sql_fail(store, "preparing the key scan");
  size_t len = strlen(prefix);
  tp_rc rc = TP_OK;
  int step = SQLITE_DONE;
  while (rc == TP_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    const char *key = (const char *)sqlite3_column_text(st, 0);
    char digest[TP_KEY_DIGEST_HEX + 1];
    tp_short_key(key, digest, sizeof digest);
    if (key && strncasecmp(digest, prefix, len) == 0) rc = note_match(m, key);
  }
  if (rc == TP_OK && step != SQLITE_DONE) rc = sql_fail(store, "scanning the keys");
  sqlite3_finalize(st);
  return rc;
}

tp_rc tp_config_key_resolve(tp_store *store, const char *text, char **key) {
  *key = NULL;
  if (!store || !text || !*text) return TP_FAIL(TP_EUSAGE, "no configuration key given");
  int exists = 0;
  TP_TRY(key_exists(store, text, &exists));
  if (exists) {
    *key = strdup(text);
    return *key ? TP_OK : TP_FAIL(TP_EOOM, "resolving a key: out of memory");
  }
  if (!is_hex_prefix(text))
    return TP_FAIL(TP_EUSAGE,
                   "%s: no configuration has the key \"%s\" (give a whole key, or %d to %d hex "
                   "digits of a short key as the reports print it)",
                   tp_store_path(store), text, TP_KEY_PREFIX_MIN, TP_KEY_DIGEST_HEX);
  prefix_matches m = {0};
  tp_rc rc = match_prefix(store, text, &m);
  if (rc == TP_OK && m.count == 0)
    rc = TP_FAIL(TP_EUSAGE, "%s: no configuration's short key starts with \"%s\"",
                 tp_store_path(store), text);
  else if (rc == TP_OK && m.count > 1)
    rc = TP_FAIL(TP_EUSAGE,
                 "%s: the short key \"%s\" is ambiguous: %zu configuration keys start with it "
                 "(%s, %s, ...); give more digits",
                 tp_store_path(store), text, m.count, m.first, m.second);
  if (rc == TP_OK) {
    *key = m.first;
    m.first = NULL;
  }
  free(m.first);
  free(m.second);
  return rc;
}
