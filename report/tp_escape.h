/*
 * tp_escape.h — stored text written into the machine-read formats of CI
 * tools: XML (compare's JUnit file) and OpenMetrics label values (the run
 * export). Labels, hosts and failure reasons come from the database and may
 * hold any bytes; each writer makes them valid for its format, whatever
 * they hold, so one odd label cannot make a CI tool drop the whole file.
 *
 * Both formats need UTF-8: a byte that does not start a well-formed UTF-8
 * sequence (RFC 3629: no overlong forms, no surrogates, nothing above
 * U+10FFFF) is written as U+FFFD, the replacement character. NULL text
 * writes nothing.
 */
#ifndef TP_ESCAPE_H
#define TP_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* The length (1 to 4) of the well-formed UTF-8 sequence at s[0..n), or 0
 * when s does not start one (n == 0 included). */
size_t tp_utf8_sequence(const unsigned char *s, size_t n);

/* Text as XML 1.0 character data: '&', '<' and '>' as entities; tab and
 * line feed kept, carriage return as "&#13;" (a parser would otherwise fold
 * CR LF into LF); the other control characters, U+FFFE and U+FFFF (which
 * XML 1.0 cannot hold at all) as U+FFFD. */
void tp_xml_text(FILE *out, const char *text);

/* Text for an XML attribute value in double quotes: as tp_xml_text, and
 * '"' and '\'' as entities, tab, line feed and carriage return as character
 * references (a parser normalises them to spaces otherwise). */
void tp_xml_attr(FILE *out, const char *text);

/* Text for an OpenMetrics label value (inside double quotes): '\\' as
 * "\\\\", '"' as "\\\"" and line feed as "\\n", as the exposition format
 * requires; the other characters as they are (ill-formed UTF-8 as U+FFFD). */
void tp_openmetrics_label(FILE *out, const char *text);

#endif /* TP_ESCAPE_H */
