/*
 * tp_text.c — the classification of outside text's characters (see
 * tp_text.h).
 */
#include "common/tp_text.h"

#include <string.h>

static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */

/* Whether s[0..len) is c followed by len - 1 continuation bytes. */
static int continuation_bytes(const unsigned char *s, size_t len) {
  for (size_t i = 1; i < len; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  return 1;
}

size_t tp_utf8_sequence(const unsigned char *s, size_t n) {
  if (n == 0) return 0;
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len = c >= 0xC2 && c <= 0xDF   ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
  if (len == 0 || len > n || !continuation_bytes(s, len)) return 0;
  /* The second byte's range rules out overlong forms, surrogates
   * (U+D800..U+DFFF) and code points above U+10FFFF. */
  unsigned char second = s[1];
  if (c == 0xE0 && second < 0xA0) return 0;
  if (c == 0xED && second > 0x9F) return 0;
  if (c == 0xF0 && second < 0x90) return 0;
  if (c == 0xF4 && second > 0x8F) return 0;
  return len;
}

size_t tp_text_char(const unsigned char *s, size_t n, tp_char_class *cls) {
  if (n == 0) return 0;
  size_t len = tp_utf8_sequence(s, n);
  if (len == 0) {
    *cls = TP_CHAR_ILL_FORMED;
    return 1;
  }
  const unsigned char c = s[0];
  if (c == '\n' || c == '\r') *cls = TP_CHAR_LINE_BREAK;
  else if (c == '\t') *cls = TP_CHAR_TAB;
  /* C1 controls are two bytes, 0xC2 0x80..0x9F: a terminal in UTF-8 mode may take U+009B as
   * CSI, as it takes ESC [ */
  else if (c < 0x20 || c == 0x7f || (c == 0xC2 && s[1] < 0xA0)) *cls = TP_CHAR_CONTROL;
  else *cls = TP_CHAR_PLAIN;
  return len;
}

const char *tp_safe_copy(char *buf, size_t cap, const char *text) {
  size_t used = 0;
  const unsigned char *s = (const unsigned char *)(text ? text : "");
  size_t n = strlen((const char *)s);
  tp_char_class cls = TP_CHAR_PLAIN;
  for (size_t len; (len = tp_text_char(s, n, &cls)) > 0; s += len, n -= len) {
    const char *piece = cls == TP_CHAR_PLAIN ? (const char *)s : replacement;
    size_t piece_len = cls == TP_CHAR_PLAIN ? len : sizeof replacement - 1;
    if (used + piece_len + 1 > cap) break;
    memcpy(buf + used, piece, piece_len);
    used += piece_len;
  }
  buf[used] = '\0';
  return buf;
}

void tp_text_neutralise(char *s) {
  size_t n = strlen(s), kept = 0;
  const unsigned char *p = (const unsigned char *)s;
  tp_char_class cls = TP_CHAR_PLAIN;
  for (size_t len; (len = tp_text_char(p, n, &cls)) > 0; p += len, n -= len) {
    if (cls == TP_CHAR_CONTROL || cls == TP_CHAR_ILL_FORMED) s[kept++] = '?';
    else {
      memmove(s + kept, p, len); /* kept <= the read offset: moves left or stays */
      kept += len;
    }
  }
  s[kept] = '\0';
}
