/*
 * tp_kernel_names.h — a kernel's name as tables show it. CUPTI hands over
 * some kernel names mangled ("_ZN2at6native29vectorized_elementwise_...")
 * and others already demangled ("void at::native::vectorized_...<4, ...>
 * (int, ...)"), as the program's compiler and libraries made them; a table
 * that printed both as given read as two vocabularies. Every name goes
 * through one rule here instead.
 */
#ifndef TP_KERNEL_NAMES_H
#define TP_KERNEL_NAMES_H

#include <stddef.h>

/* The name as a table shows it, written into buf (cap >= 1), cut to cap - 1
 * bytes; returns buf. A mangled (Itanium "_Z...") name is demangled by
 * libiberty's cplus_demangle; then any C++ function name, demangled here or
 * as it came, is shown the same way: its qualified name, each template
 * argument list as "<...>", its parameters as "(...)" ("()" for none), no
 * return type ("void at::native::f<4>(int)" and "_ZN2at6native1fILi4EEvi"
 * both read "at::native::f<...>(...)"). A name that is neither (cuBLAS's
 * "nvjet_...", a mangled name libiberty cannot read) is shown as given. */
const char *tp_kernel_display_name(const char *name, char *buf, size_t cap);

#endif /* TP_KERNEL_NAMES_H */
