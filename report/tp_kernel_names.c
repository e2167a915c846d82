/*
 * tp_kernel_names.c — kernel names for tables (see tp_kernel_names.h):
 * libiberty demangles, then one abbreviation reads every C++ name alike.
 */
#include "report/tp_kernel_names.h"

#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

typedef struct {
  char *buf;
  size_t cap, len;
} out_text;

static void put(out_text *o, const char *s, size_t n) {
  for (size_t i = 0; i < n && o->len + 1 < o->cap; i++) o->buf[o->len++] = s[i];
}

static void put_str(out_text *o, const char *s) { put(o, s, strlen(s)); }

/* The index just past the '>' that closes the '<' at s[at], or 0 when none does. */
static size_t past_closing_angle(const char *s, size_t at) {
  int depth = 0;
  for (size_t i = at; s[i]; i++) {
    if (s[i] == '<') depth++;
    else if (s[i] == '>' && --depth == 0) return i + 1;
  }
  return 0;
}

/* Where the parameter list of a demangled function name starts: the '(' that
 * opens the name's last, top-level group when the name ends with ')', or
 * (size_t)-1. "(anonymous namespace)" opens no parameter list: a group that
 * "::" follows is part of the name. */
static size_t parameters_at(const char *s, size_t len) {
  if (len == 0 || s[len - 1] != ')') return (size_t)-1;
  int depth = 0;
  for (size_t i = len; i-- > 0;) {
    if (s[i] == ')') depth++;
    else if (s[i] == '(' && --depth == 0) return i;
  }
  return (size_t)-1;
}

/* A demangled function name with templates and parameters abbreviated. */
static void put_abbreviated(out_text *o, const char *s) {
  if (!strncmp(s, "void ", 5)) s += 5; /* a kernel returns nothing: its return type says nothing */
  const size_t len = strlen(s), params = parameters_at(s, len);
  const size_t name_end = params == (size_t)-1 ? len : params;
  for (size_t i = 0; i < name_end;) {
    size_t past = s[i] == '<' ? past_closing_angle(s, i) : 0;
    if (past && past <= name_end) {
      put_str(o, "<...>");
      i = past;
    } else put(o, s + i++, 1);
  }
  if (params != (size_t)-1) put_str(o, len - params == 2 ? "()" : "(...)");
}

/* A name that reads as C++ (demangled, or handed over demangled): a
 * parameter list at its end. */
static int is_cpp_function(const char *s) { return parameters_at(s, strlen(s)) != (size_t)-1; }

const char *tp_kernel_display_name(const char *name, char *buf, size_t cap) {
  if (!buf || cap == 0) return buf;
  out_text o = {buf, cap, 0};
  if (!name) name = "";
  char *plain = !strncmp(name, "_Z", 2) ? cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI) : NULL;
  const char *readable = plain ? plain : name;
  if (is_cpp_function(readable)) put_abbreviated(&o, readable);
  else put_str(&o, readable);
  free(plain);
  buf[o.len] = '\0';
  return buf;
}
