/*
 * tp_keys.h — short names for configuration keys. A canonical config key
 * ("kind=op;model=llama3-8b;...", store/tp_store.h) is long; its short key is
 * the first TP_SHORT_KEY_LEN hex digits of its SHA-256, the same in every
 * database and on every machine (`printf %s KEY | sha256sum | cut -c1-10`).
 * Reports print it beside the configuration id; `history` and `trace` take a
 * unique prefix of it wherever they take a key.
 */
#ifndef TP_KEYS_H
#define TP_KEYS_H

#include <stddef.h>

#include "store/tp_store.h"

enum {
  TP_SHORT_KEY_LEN = 10,  /* hex digits a report prints */
  TP_KEY_DIGEST_HEX = 64, /* hex digits of the whole digest */
  TP_KEY_PREFIX_MIN = 4   /* the shortest prefix accepted */
};

/* The hex digits of SHA-256(config_key) into out (at most cap - 1 of the 64,
 * always terminated; nothing when cap is 0). TP_SHORT_KEY_LEN + 1 bytes give
 * the short key. A NULL key gives "". */
void tp_short_key(const char *config_key, char *out, size_t cap);

/* The canonical key that text names, in a malloc'd *key (free() it): text
 * itself when some configuration of the database has that key; otherwise
 * text read as a prefix (TP_KEY_PREFIX_MIN to 64 hex digits, any case) of
 * the SHA-256 of exactly one key of the database. TP_EUSAGE, *key NULL,
 * when nothing matches, when the prefix matches several keys (the message
 * counts them and names two), or when text is neither a key of the database
 * nor a hex prefix long enough. */
TP_MUST_CHECK tp_rc tp_config_key_resolve(tp_store *store, const char *text, char **key);

#endif /* TP_KEYS_H */
