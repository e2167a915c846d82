/*
 * tp_escape.c — stored text into XML, OpenMetrics, CSV and terminal
 * messages (see tp_escape.h).
 *
 * Written by hand rather than through libxml2's writer: the JUnit file is a
 * few element types whose only hard part is this escaping, and linking
 * libxml2 statically drags ICU and compression libraries into the binary.
 */
#include "report/tp_escape.h"

#include <string.h>

static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */

void tp_safe_text(FILE *out, const char *text, int keep_breaks) {
  if (!text) return;
  const unsigned char *s = (const unsigned char *)text;
  size_t n = strlen(text);
  tp_char_class cls = TP_CHAR_PLAIN;
  for (size_t len; (len = tp_text_char(s, n, &cls)) > 0; s += len, n -= len) {
    int shown =
        cls == TP_CHAR_PLAIN || (keep_breaks && (cls == TP_CHAR_LINE_BREAK || cls == TP_CHAR_TAB));
    if (shown) fwrite(s, 1, len, out);
    else fputs(replacement, out);
  }
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
    /* a C1 control (0xC2 0x80..0x9F) is legal XML but a terminal showing the file acts on it */
    else if (len == 0 || xml_noncharacter(s, len) || (len == 2 && s[0] == 0xC2 && s[1] < 0xA0))
      fputs(replacement, out);
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
  tp_char_class cls = TP_CHAR_PLAIN;
  for (size_t len; (len = tp_text_char(s, n, &cls)) > 0; s += len, n -= len) {
    if (s[0] == '\\') fputs("\\\\", out);
    else if (s[0] == '"') fputs("\\\"", out);
    else if (s[0] == '\n') fputs("\\n", out);
    else if (cls != TP_CHAR_PLAIN && cls != TP_CHAR_TAB) fputs(replacement, out);
    else fwrite(s, 1, len, out);
  }
}
