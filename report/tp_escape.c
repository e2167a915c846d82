/*
 * tp_escape.c — stored text into XML and OpenMetrics (see tp_escape.h).
 *
 * Written by hand rather than through libxml2's writer: the JUnit file is a
 * few element types whose only hard part is this escaping, and linking
 * libxml2 statically drags ICU and compression libraries into the binary.
 */
#include "report/tp_escape.h"

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

/* U+FFFE and U+FFFF: well-formed UTF-8 that XML 1.0 refuses. */
static int xml_noncharacter(const unsigned char *s, size_t len) {
  return len == 3 && s[0] == 0xEF && s[1] == 0xBF && (s[2] == 0xBE || s[2] == 0xBF);
}

/* One ASCII character for XML; attr: inside a double-quoted attribute. */
static void xml_ascii(FILE *out, unsigned char c, int attr) {
  switch (c) {
  case '&': fputs("&amp;", out); return;
  case '<': fputs("&lt;", out); return;
  case '>': fputs("&gt;", out); return;
  case '\r': fputs("&#13;", out); return;
  default: break;
  }
  if (attr && (c == '"' || c == '\'' || c == '\t' || c == '\n')) {
    fputs(c == '"' ? "&quot;" : c == '\'' ? "&apos;" : c == '\t' ? "&#9;" : "&#10;", out);
    return;
  }
  if (c < 0x20 && c != '\t' && c != '\n') fputs(replacement, out);
  else fputc(c, out);
}

static void write_xml(FILE *out, const char *text, int attr) {
  if (!text) return;
  const unsigned char *s = (const unsigned char *)text;
  size_t n = strlen(text);
  while (n > 0) {
    size_t len = tp_utf8_sequence(s, n);
    if (len == 1) xml_ascii(out, s[0], attr);
    else if (len == 0 || xml_noncharacter(s, len)) fputs(replacement, out);
    else fwrite(s, 1, len, out);
    len = len ? len : 1;
    s += len;
    n -= len;
  }
}

void tp_xml_text(FILE *out, const char *text) { write_xml(out, text, 0); }

void tp_xml_attr(FILE *out, const char *text) { write_xml(out, text, 1); }

void tp_openmetrics_label(FILE *out, const char *text) {
  if (!text) return;
  const unsigned char *s = (const unsigned char *)text;
  size_t n = strlen(text);
  while (n > 0) {
    size_t len = tp_utf8_sequence(s, n);
    if (len == 0) fputs(replacement, out);
    else if (s[0] == '\\') fputs("\\\\", out);
    else if (s[0] == '"') fputs("\\\"", out);
    else if (s[0] == '\n') fputs("\\n", out);
    else fwrite(s, 1, len, out);
    len = len ? len : 1;
    s += len;
    n -= len;
  }
}
