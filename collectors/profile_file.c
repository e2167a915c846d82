/*
 * profile_file.c — writes and reads the per-process event file of
 * `tpbench profile` (format in tp_profile_file.h). Pure C: the injection
 * library writes it, the CPU side and its tests read it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectors/tp_profile_file.h"

static const char MAGIC[] = "tpbench-profile 1";

/* A line of what a file holds, to the first newline, its control characters
 * (a binary file's too) as spaces: it is stored and printed as text. */
static void blank_controls(char *text) {
  text[strcspn(text, "\n")] = '\0';
  for (unsigned char *p = (unsigned char *)text; *p; ++p)
    if (*p < 0x20 || *p == 0x7f) *p = ' ';
}

/* A name on one line: tabs, newlines and carriage returns become spaces. */
static int write_name(FILE *f, const char *name) {
  for (const char *p = name ? name : ""; *p; ++p) {
    int blank = *p == '\n' || *p == '\r' || *p == '\t';
    if (fputc(blank ? ' ' : (unsigned char)*p, f) == EOF) return 0;
  }
  return fputc('\n', f) != EOF;
}

static int write_event(FILE *f, const tp_event *e) {
  int n =
      fprintf(f,
              "ev %d %d %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %d %d %" PRIu32
              " %" PRIu32 " %d ",
              (int)e->type, (int)e->category, (int)e->copy_kind, e->start_ns, e->end_ns, e->bytes,
              e->launch_ns, e->rank, e->device, e->stream, e->correlation, e->peer_device);
  return n > 0 && write_name(f, e->name);
}

tp_rc tp_profile_file_write(FILE *f, const tp_profile_meta *meta, const tp_event *events,
                            size_t n) {
  if (!f || !meta || (!events && n > 0))
    return TP_FAIL(TP_EUSAGE, "tp_profile_file_write: NULL argument");
  /* every number fits in int64_t: times stay below 2^63 (the store's limit too) */
  if (fprintf(f, "%s\nmeta %" PRId64 " %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId64 " %d\n",
              MAGIC, meta->pid, meta->rank, meta->start_ns, meta->end_ns, meta->dropped,
              meta->clock_offset_ns, meta->complete) < 0)
    return TP_FAIL(TP_EIO, "profile file: writing the header failed");
  if (meta->gpu_name[0] && (fputs("gpu ", f) == EOF || !write_name(f, meta->gpu_name)))
    return TP_FAIL(TP_EIO, "profile file: writing the GPU name failed");
  for (size_t i = 0; i < n; ++i)
    if (!write_event(f, &events[i]))
      return TP_FAIL(TP_EIO, "profile file: writing event %zu failed", i);
  if (fflush(f) != 0) return TP_FAIL(TP_EIO, "profile file: flushing failed");
  return TP_OK;
}

void tp_profile_data_free(tp_profile_data *data) {
  if (!data) return;
  for (size_t i = 0; i < data->n_events; ++i) free(data->names[i]);
  free(data->names);
  free(data->events);
  memset(data, 0, sizeof *data);
}

/* The next space-separated decimal number at *p into *v (strtoll: a
 * conversion error or a value out of range fails); *p moves past it. */
static int next_i64(const char **p, int64_t *v) {
  if (**p != ' ') return 0;
  char *end = NULL;
  errno = 0;
  long long x = strtoll(*p + 1, &end, 10);
  if (errno != 0 || end == *p + 1 || (*end != ' ' && *end != '\0')) return 0;
  *v = x;
  *p = end;
  return 1;
}

/* n numbers into v; 1 when all were read. */
static int next_numbers(const char **p, int64_t *v, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!next_i64(p, &v[i])) return 0;
  return 1;
}

static int in_range(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }

/* One `ev` line (without its newline) into *e and its name (malloc'd). */
static int parse_event(const char *line, tp_event *e, char **name) {
  int64_t v[12];
  const char *p = line + 2;
  if (strncmp(line, "ev ", 3) != 0 || !next_numbers(&p, v, 12) || *p != ' ') return 0;
  if (!in_range(v[0], TP_EV_KERNEL, TP_EV_RANGE) || !in_range(v[1], 0, TP_CAT_COUNT - 1) ||
      !in_range(v[2], TP_COPY_NONE, TP_COPY_PTOP) || v[3] < 0 || v[4] < v[3] || v[5] < 0 ||
      v[6] < 0 || !in_range(v[7], INT_MIN, INT_MAX) || !in_range(v[8], INT_MIN, INT_MAX) ||
      !in_range(v[9], 0, UINT32_MAX) || !in_range(v[10], 0, UINT32_MAX) ||
      !in_range(v[11], INT_MIN, INT_MAX))
    return 0;
  *e = (tp_event){.type = (tp_event_type)v[0],
                  .category = (tp_event_category)v[1],
                  .copy_kind = (tp_copy_kind)v[2],
                  .start_ns = (uint64_t)v[3],
                  .end_ns = (uint64_t)v[4],
                  .bytes = (uint64_t)v[5],
                  .launch_ns = (uint64_t)v[6],
                  .rank = (int)v[7],
                  .device = (int)v[8],
                  .stream = (uint32_t)v[9],
                  .correlation = (uint32_t)v[10],
                  .peer_device = (int)v[11]};
  *name = strdup(p + 1);
  return *name != NULL;
}

/* The `meta` line into *m. */
static int parse_meta(const char *line, tp_profile_meta *m) {
  int64_t v[7];
  const char *p = line + 4;
  if (strncmp(line, "meta ", 5) != 0 || !next_numbers(&p, v, 7) || *p != '\0') return 0;
  if (!in_range(v[1], INT_MIN, INT_MAX) || v[2] < 0 || v[3] < 0 || v[4] < 0 ||
      !in_range(v[6], 0, 1))
    return 0;
  *m = (tp_profile_meta){.pid = v[0],
                         .rank = (int)v[1],
                         .start_ns = (uint64_t)v[2],
                         .end_ns = (uint64_t)v[3],
                         .dropped = (uint64_t)v[4],
                         .clock_offset_ns = v[5],
                         .complete = (int)v[6]};
  return 1;
}

static tp_rc append_event(tp_profile_data *d, size_t *cap, const tp_event *e, char *name) {
  if (d->n_events == *cap) {
    size_t grown = *cap ? *cap * 2 : 256;
    tp_event *events = realloc(d->events, grown * sizeof *events);
    if (events) d->events = events;
    char **names = events ? realloc(d->names, grown * sizeof *names) : NULL;
    if (!names) {
      free(name);
      return TP_FAIL(TP_EOOM, "profile file: out of memory");
    }
    d->names = names;
    *cap = grown;
  }
  d->events[d->n_events] = *e;
  d->events[d->n_events].name = name;
  d->names[d->n_events++] = name;
  return TP_OK;
}

/* Reads the lines after the header; a malformed last line without its
 * newline is a cut-off write, any other malformed line an error. */
static tp_rc read_lines(FILE *f, const char *path, tp_profile_data *d) {
  char *line = NULL;
  size_t line_cap = 0, cap = 0, lineno = 1;
  ssize_t len;
  int have_meta = 0;
  tp_rc rc = TP_OK;
  while (rc == TP_OK && (len = getline(&line, &line_cap, f)) > 0) {
    ++lineno;
    int whole = line[len - 1] == '\n';
    if (whole) line[len - 1] = '\0';
    tp_event e;
    char *name = NULL;
    if (!have_meta && parse_meta(line, &d->meta)) have_meta = 1;
    else if (have_meta && whole && strncmp(line, "gpu ", 4) == 0)
      snprintf(d->meta.gpu_name, sizeof d->meta.gpu_name, "%s", line + 4);
    else if (have_meta && parse_event(line, &e, &name)) rc = append_event(d, &cap, &e, name);
    else if (!whole) d->truncated = 1;
    else rc = TP_FAIL(TP_EIO, "%s:%zu: not a line of a tpbench profile file", path, lineno);
  }
  free(line);
  if (rc == TP_OK && !have_meta)
    rc = TP_FAIL(TP_EIO, "%s: the profile file has no meta line", path);
  return rc;
}

/* Opens path for reading only when it is a regular file, not through a
 * link: the folder is the profiled program's to write, and a FIFO placed
 * there would block the reader forever. NULL (errno set) otherwise. */
static FILE *open_regular(const char *path) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0) return NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    errno = EINVAL;
    return NULL;
  }
  FILE *f = fdopen(fd, "r");
  if (!f) close(fd);
  return f;
}

tp_rc tp_profile_file_read(const char *path, tp_profile_data *out) {
  if (!path || !out) return TP_FAIL(TP_EUSAGE, "tp_profile_file_read: NULL argument");
  FILE *f = open_regular(path);
  if (!f)
    return TP_FAIL(TP_EIO, "cannot open the profile file %s (%s)", path,
                   errno == EINVAL || errno == ELOOP ? "not a regular file" : strerror(errno));
  char header[64] = "";
  tp_profile_data d;
  memset(&d, 0, sizeof d);
  tp_rc rc = TP_OK;
  if (!fgets(header, sizeof header, f) || strncmp(header, MAGIC, sizeof MAGIC - 1) != 0) {
    blank_controls(header);
    rc = TP_FAIL(TP_EIO, "%s is not a tpbench profile file (first line: %.40s)", path, header);
  } else {
    rc = read_lines(f, path, &d);
  }
  fclose(f);
  if (rc != TP_OK) {
    tp_profile_data_free(&d);
    return rc;
  }
  *out = d;
  return TP_OK;
}

/* Appends one file's events to *all (names change owner), frees the rest of it. */
static tp_rc merge_into(tp_profile_data *all, tp_profile_data *one, int first) {
  size_t n = all->n_events + one->n_events;
  if (one->n_events) {
    tp_event *events = realloc(all->events, n * sizeof *events);
    if (!events) return TP_FAIL(TP_EOOM, "profile files: out of memory");
    all->events = events;
    char **names = realloc(all->names, n * sizeof *names);
    if (!names) return TP_FAIL(TP_EOOM, "profile files: out of memory");
    all->names = names;
    memcpy(all->events + all->n_events, one->events, one->n_events * sizeof *events);
    memcpy(all->names + all->n_events, one->names, one->n_events * sizeof *names);
  }
  all->n_events = n;
  if (first) {
    all->meta = one->meta;
  } else {
    if (one->meta.start_ns < all->meta.start_ns) all->meta.start_ns = one->meta.start_ns;
    if (one->meta.end_ns > all->meta.end_ns) all->meta.end_ns = one->meta.end_ns;
    all->meta.dropped += one->meta.dropped;
    all->meta.complete = all->meta.complete && one->meta.complete;
    /* a launcher's own process (torchrun's agent) may come first and use no GPU */
    if (!all->meta.gpu_name[0])
      memcpy(all->meta.gpu_name, one->meta.gpu_name, sizeof all->meta.gpu_name);
  }
  all->truncated |= one->truncated;
  free(one->events);
  free(one->names);
  memset(one, 0, sizeof *one);
  return TP_OK;
}

static int is_process_file(const char *name) {
  size_t len = strlen(name), ext = sizeof ".tpprof" - 1;
  return strncmp(name, "process-", 8) == 0 && len > ext && !strcmp(name + len - ext, ".tpprof");
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The process files of `folder`, sorted, malloc'd (NULL and 0 when none). */
static tp_rc list_files(const char *folder, char ***files, size_t *n) {
  *files = NULL;
  *n = 0;
  DIR *dir = opendir(folder);
  if (!dir) return TP_OK; /* no process wrote anything */
  size_t cap = 0;
  tp_rc rc = TP_OK;
  struct dirent *ent;
  while (rc == TP_OK && (ent = readdir(dir)) != NULL) {
    if (!is_process_file(ent->d_name)) continue;
    if (*n == cap) {
      cap = cap ? cap * 2 : 8;
      char **grown = realloc(*files, cap * sizeof *grown);
      if (!grown) {
        rc = TP_FAIL(TP_EOOM, "profile files: out of memory");
        break;
      }
      *files = grown;
    }
    size_t len = strlen(folder) + strlen(ent->d_name) + 2;
    char *path = malloc(len);
    if (!path) rc = TP_FAIL(TP_EOOM, "profile files: out of memory");
    else snprintf(path, len, "%s/%s", folder, ent->d_name);
    if (path) (*files)[(*n)++] = path;
  }
  closedir(dir);
  if (*n > 1) qsort(*files, *n, sizeof **files, by_name);
  return rc;
}

/* A process started by no launcher says rank -1. When no process of the
 * command has a launcher's rank (one program, or a tool's own workers), the
 * processes are numbered 0, 1, ... in file-name order; when some have one,
 * the others (torchrun's agent, say) keep -1, apart from the real ranks. */
static void number_unranked(tp_profile_data *all, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (all[i].meta.rank >= 0) return;
  for (size_t i = 0; i < n; ++i) {
    all[i].meta.rank = (int)i;
    for (size_t k = 0; k < all[i].n_events; ++k) all[i].events[k].rank = (int)i;
  }
}

tp_rc tp_profile_folder_read(const char *folder, tp_profile_data *out, size_t *n_files) {
  if (!folder || !out || !n_files)
    return TP_FAIL(TP_EUSAGE, "tp_profile_folder_read: NULL argument");
  memset(out, 0, sizeof *out);
  *n_files = 0;
  char **files = NULL;
  size_t n = 0;
  tp_rc rc = list_files(folder, &files, &n);
  tp_profile_data *each = rc == TP_OK && n ? calloc(n, sizeof *each) : NULL;
  if (rc == TP_OK && n && !each) rc = TP_FAIL(TP_EOOM, "profile files: out of memory");
  size_t read = 0;
  for (; rc == TP_OK && read < n; ++read) rc = tp_profile_file_read(files[read], &each[read]);
  if (rc == TP_OK) number_unranked(each, n);
  for (size_t i = 0; rc == TP_OK && i < n; ++i) rc = merge_into(out, &each[i], i == 0);
  for (size_t i = 0; i < read && each; ++i) tp_profile_data_free(&each[i]);
  free(each);
  for (size_t i = 0; i < n; ++i) free(files[i]);
  free(files);
  if (rc != TP_OK) tp_profile_data_free(out);
  else *n_files = n;
  return rc;
}

static int is_error_file(const char *name) {
  size_t len = strlen(name), ext = sizeof ".error" - 1;
  return strncmp(name, "process-", 8) == 0 && len > ext && !strcmp(name + len - ext, ".error");
}

tp_rc tp_profile_folder_errors(const char *folder, char *first, size_t cap, size_t *n_errors) {
  if (!folder || !first || cap == 0 || !n_errors)
    return TP_FAIL(TP_EUSAGE, "tp_profile_folder_errors: NULL argument");
  first[0] = '\0';
  *n_errors = 0;
  DIR *dir = opendir(folder);
  if (!dir) return TP_OK;
  struct dirent *ent;
  while ((ent = readdir(dir)) != NULL) {
    if (!is_error_file(ent->d_name)) continue;
    if ((*n_errors)++ > 0) continue;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", folder, ent->d_name);
    FILE *f = open_regular(path);
    if (f && fgets(first, (int)cap, f)) blank_controls(first);
    else snprintf(first, cap, "%s could not be read", path);
    if (f) fclose(f);
  }
  closedir(dir);
  return TP_OK;
}
