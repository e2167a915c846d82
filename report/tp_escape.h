/*
 * tp_escape.h — stored text written where it could do harm: the machine-read
 * formats of CI tools (XML for compare's JUnit file, OpenMetrics label
 * values), CSV and messages that reach a terminal. Labels, hosts and failure
 * reasons come from the database and may hold any bytes; each writer makes
 * them valid for its format, whatever they hold, so one odd label cannot make
 * a CI tool drop the whole file, and no stored escape sequence reaches a
 * terminal (markdown's writers, report/tp_report_util.h, use the same rule).
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

#include "common/tp_text.h"

/* Text with every control character and ill-formed byte written as U+FFFD
 * (keep_breaks: line breaks and tabs kept as they are), the rest as it is:
 * no terminal escape sequence survives it. NULL writes nothing. */
void tp_safe_text(FILE *out, const char *text, int keep_breaks);

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
 * requires; the other control characters but tab, and ill-formed UTF-8,
 * as U+FFFD (a label is read in terminals too), the rest as it is. */
void tp_openmetrics_label(FILE *out, const char *text);

#endif /* TP_ESCAPE_H */
