/*
 * tp_array.c — growing a malloc'd array by doubling (see tp_array.h).
 */
#include "common/tp_array.h"

#include <stdlib.h>

void *tp_grow_array(void *items, size_t *cap, size_t n, size_t size) {
  if (n < *cap) return items;
  size_t room = *cap ? 2 * *cap : 16;
  void *grown = realloc(items, room * size);
  if (grown) *cap = room;
  return grown;
}
