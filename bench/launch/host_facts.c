/*
 * host_facts.c — a rank's host and GPU facts on the wire, nvidia-smi's query
 * line, the recorded environment (contracts in host_facts.h).
 */
#include "bench/launch/host_facts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char MAGIC[4] = {'T', 'P', 'H', 'F'};
enum { WIRE_VERSION = 1, N_INTS = 5 };
static const size_t HEADER = 8, INT_BYTES = 4;

static void put_i32(unsigned char *p, int32_t v) {
  const uint32_t u = (uint32_t)v;
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(u >> (8 * i));
}

static int32_t get_i32(const unsigned char *p) {
  uint32_t u = 0;
  for (int i = 0; i < 4; i++) u |= (uint32_t)p[i] << (8 * i);
  return (int32_t)u;
}

void tp_host_facts_pack(const tp_host_facts *f, unsigned char buf[TP_HOST_FACTS_WIRE]) {
  memset(buf, 0, TP_HOST_FACTS_WIRE);
  memcpy(buf, MAGIC, sizeof MAGIC);
  buf[4] = WIRE_VERSION;
  const int32_t ints[N_INTS] = {f->rank, f->local_rank, f->sm_clock_mhz, f->max_sm_clock_mhz,
                                f->power_limit_mw};
  for (size_t i = 0; i < N_INTS; i++) put_i32(buf + HEADER + INT_BYTES * i, ints[i]);
  unsigned char *p = buf + HEADER + INT_BYTES * N_INTS;
  /* strnlen: a field always fits, and its NUL padding comes from the memset */
  memcpy(p, f->host, strnlen(f->host, sizeof f->host - 1));
  p += sizeof f->host;
  memcpy(p, f->gpu_uuid, strnlen(f->gpu_uuid, sizeof f->gpu_uuid - 1));
  p += sizeof f->gpu_uuid;
  memcpy(p, f->pci_bus_id, strnlen(f->pci_bus_id, sizeof f->pci_bus_id - 1));
}

/* A string field: NUL-terminated inside its width, printable characters only. */
static tp_rc take_string(const unsigned char *p, size_t width, char *out, const char *what) {
  const unsigned char *nul = memchr(p, '\0', width);
  if (!nul) return TP_FAIL(TP_EIO, "host facts: the %s has no end", what);
  for (const unsigned char *c = p; c < nul; c++)
    if (*c < 0x20 || *c == 0x7f)
      return TP_FAIL(TP_EIO, "host facts: the %s holds a control character", what);
  memcpy(out, p, (size_t)(nul - p) + 1);
  return TP_OK;
}

tp_rc tp_host_facts_unpack(const unsigned char *buf, size_t len, tp_host_facts *out) {
  memset(out, 0, sizeof *out);
  if (len != TP_HOST_FACTS_WIRE)
    return TP_FAIL(TP_EIO, "host facts: %zu bytes, not %d", len, TP_HOST_FACTS_WIRE);
  if (memcmp(buf, MAGIC, sizeof MAGIC) != 0 || buf[4] != WIRE_VERSION)
    return TP_FAIL(TP_EIO, "host facts: not a version %d message", WIRE_VERSION);
  int32_t ints[N_INTS];
  for (size_t i = 0; i < N_INTS; i++) {
    ints[i] = get_i32(buf + HEADER + INT_BYTES * i);
    if (ints[i] < 0) return TP_FAIL(TP_EIO, "host facts: a negative number (%d)", (int)ints[i]);
  }
  out->rank = ints[0];
  out->local_rank = ints[1];
  out->sm_clock_mhz = ints[2];
  out->max_sm_clock_mhz = ints[3];
  out->power_limit_mw = ints[4];
  const unsigned char *p = buf + HEADER + INT_BYTES * N_INTS;
  TP_TRY(take_string(p, sizeof out->host, out->host, "host name"));
  p += sizeof out->host;
  TP_TRY(take_string(p, sizeof out->gpu_uuid, out->gpu_uuid, "GPU UUID"));
  p += sizeof out->gpu_uuid;
  return take_string(p, sizeof out->pci_bus_id, out->pci_bus_id, "PCI bus id");
}

/* ---- nvidia-smi's query line ---------------------------------------------------- */

/* The next comma-separated field of *p, trimmed, into out. 0 at the end. */
static int next_field(const char **p, char *out, size_t cap) {
  if (!*p) return 0;
  const char *s = *p, *comma = strchr(s, ',');
  const char *end = comma ? comma : s + strcspn(s, "\r\n");
  while (s < end && (*s == ' ' || *s == '\t')) s++;
  const char *e = end;
  while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
  size_t n = (size_t)(e - s) < cap - 1 ? (size_t)(e - s) : cap - 1;
  memcpy(out, s, n);
  out[n] = '\0';
  *p = comma ? comma + 1 : NULL;
  return 1;
}

static int unknown(const char *v) { return !v[0] || v[0] == '['; }

/* src cut to fit cap bytes. */
static void copy_cut(char *dst, size_t cap, const char *src) {
  size_t n = strnlen(src, cap - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* A number nvidia-smi wrote, scaled; 0 for "[N/A]" and the like. */
static tp_rc number_field(const char *v, double scale, int32_t *out, const char *what) {
  *out = 0;
  if (unknown(v)) return TP_OK;
  char *end = NULL;
  double x = strtod(v, &end);
  if (end == v || *end || !isfinite(x) || x < 0 || x * scale > 2e9)
    return TP_FAIL(TP_EUSAGE, "nvidia-smi: %s '%s' is not a number", what, v);
  *out = (int32_t)lround(x * scale);
  return TP_OK;
}

tp_rc tp_host_facts_parse_smi(const char *line, tp_host_facts *f) {
  char v[5][96];
  const char *p = line;
  for (int i = 0; i < 5; i++)
    if (!next_field(&p, v[i], sizeof v[i]))
      return TP_FAIL(TP_EUSAGE, "nvidia-smi: '%s' has %d fields, not 5", line, i);
  if (p) return TP_FAIL(TP_EUSAGE, "nvidia-smi: '%s' has more than 5 fields", line);
  if (!unknown(v[0])) copy_cut(f->gpu_uuid, sizeof f->gpu_uuid, v[0]);
  /* "00000000:19:00.0": CUDA writes the domain with four digits */
  const char *bus = v[1];
  if (strlen(bus) == 16 && strncmp(bus, "0000", 4) == 0) bus += 4;
  if (!unknown(bus)) {
    copy_cut(f->pci_bus_id, sizeof f->pci_bus_id, bus);
    for (char *c = f->pci_bus_id; *c; c++)
      if (*c >= 'A' && *c <= 'F') *c = (char)(*c - 'A' + 'a');
  }
  TP_TRY(number_field(v[2], 1.0, &f->sm_clock_mhz, "clocks.sm"));
  TP_TRY(number_field(v[3], 1.0, &f->max_sm_clock_mhz, "clocks.max.sm"));
  return number_field(v[4], 1000.0, &f->power_limit_mw, "power.limit");
}

/* ---- the environment worth recording --------------------------------------------- */

static int recorded_name(const char *entry) {
  static const char *const prefixes[] = {"NCCL_", "CUDA_", "TORCH_"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (strncmp(entry, prefixes[i], strlen(prefixes[i])) == 0 && strchr(entry, '=')) return 1;
  return 0;
}

static int by_text(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *tp_host_facts_environment(char *const *env) {
  size_t n = 0, bytes = 1;
  for (size_t i = 0; env && env[i]; i++)
    if (recorded_name(env[i])) {
      n++;
      bytes += strlen(env[i]) + 1;
    }
  const char **picked = calloc(n ? n : 1, sizeof *picked);
  char *text = malloc(bytes);
  if (!picked || !text) {
    free(picked);
    free(text);
    return NULL;
  }
  n = 0;
  for (size_t i = 0; env && env[i]; i++)
    if (recorded_name(env[i])) picked[n++] = env[i];
  qsort(picked, n, sizeof *picked, by_text);
  char *w = text;
  for (size_t i = 0; i < n; i++) {
    for (const char *c = picked[i]; *c; c++) {
      char ch = *c;
      if ((unsigned char)ch < 0x20 || ch == 0x7f) ch = '?';
      *w++ = ch;
    }
    *w++ = '\n';
  }
  *w = '\0';
  free(picked);
  return text;
}
