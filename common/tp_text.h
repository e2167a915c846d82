/*
 * tp_text.h — what a character of outside text is, for every writer that
 * shows it: stored text (host names, reasons, commit strings, kernel names)
 * may hold any bytes, and none of them may reach a terminal as an escape
 * sequence or break a format that needs UTF-8. The report's writers
 * (report/tp_escape.h, report/tp_report_util.h) and the error messages
 * (tp_error.h) classify through this one function.
 */
#ifndef TP_TEXT_H
#define TP_TEXT_H

#include <stddef.h>

/* The length (1 to 4) of the well-formed UTF-8 sequence at s[0..n), or 0
 * when s does not start one (n == 0 included). */
size_t tp_utf8_sequence(const unsigned char *s, size_t n);

/* What one character of stored text is, for a writer that shows it. */
typedef enum {
  TP_CHAR_PLAIN,      /* printable: shown as it is */
  TP_CHAR_LINE_BREAK, /* '\n' or '\r' */
  TP_CHAR_TAB,        /* '\t' */
  TP_CHAR_CONTROL,    /* another C0 control (ESC ...), DEL or a C1 control (U+0080..U+009F,
                         CSI and OSC among them): a terminal may act on it */
  TP_CHAR_ILL_FORMED  /* a byte that starts no well-formed UTF-8 sequence */
} tp_char_class;

/* The length (>= 1 while n > 0) of the character at s[0..n) and its class;
 * an ill-formed byte is one character of length 1. 0 when n == 0. */
size_t tp_text_char(const unsigned char *s, size_t n, tp_char_class *cls);

/* Every control character but line breaks and tabs, and every ill-formed
 * byte, of the NUL-terminated s replaced in place by '?' (a C1 control's two
 * bytes by one). For messages: whatever they quote reaches a terminal
 * harmless. */
void tp_text_neutralise(char *s);

/* s with every control character (line breaks too) and ill-formed byte
 * written as U+FFFD, into buf, cut to fit cap (cap >= 1;
 * a character is never cut in half); returns buf. For messages that quote
 * stored text. */
const char *tp_safe_copy(char *buf, size_t cap, const char *text);

#endif /* TP_TEXT_H */
