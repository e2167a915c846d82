/*
 * raw_markup.h — what a rendered page or a terminal would act on in text a
 * command printed: an HTML tag that no backslash escapes (markdown drops the
 * backslash of "\<" and shows the '<'), a terminal escape sequence (ESC or a
 * C1 control). Header-only, for the CPU tests of the writers that print
 * stored text.
 */
#ifndef TP_RAW_MARKUP_H
#define TP_RAW_MARKUP_H

#include <string.h>

/* The first occurrence of tag ("<script") in text that no backslash escapes,
 * or NULL. Not inlined: GCC's -Wdangling-pointer misreads the scan when it is
 * inlined beside a free() of the caller's buffer. */
__attribute__((noinline, unused)) static const char *raw_tag(const char *text, const char *tag) {
  for (const char *at = strstr(text, tag); at; at = strstr(at + 1, tag))
    if (at == text || at[-1] != '\\') return at;
  return NULL;
}

/* The first byte of text[0..len) a terminal would take as the start of an
 * escape sequence (ESC, or a C1 control U+0080..U+009F in UTF-8), or NULL. */
static inline const char *raw_escape(const char *text, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)text[i];
    if (c == 0x1b) return text + i;
    if (c == 0xc2 && i + 1 < len && (unsigned char)text[i + 1] >= 0x80 &&
        (unsigned char)text[i + 1] < 0xa0)
      return text + i;
  }
  return NULL;
}

#endif /* TP_RAW_MARKUP_H */
