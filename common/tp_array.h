/*
 * tp_array.h — growing a malloc'd array by doubling, shared by the store and
 * the reports.
 */
#ifndef TP_ARRAY_H
#define TP_ARRAY_H

#include <stddef.h>

/* Makes room for element n of an array of *cap elements of size bytes:
 * returns items itself while n < *cap, else items reallocated to twice *cap
 * (16 the first time) with *cap updated. NULL when out of memory, items and
 * *cap then unchanged (the caller still owns and frees items). */
void *tp_grow_array(void *items, size_t *cap, size_t n, size_t size);

#endif /* TP_ARRAY_H */
