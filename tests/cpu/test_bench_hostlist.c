/*
 * test_bench_hostlist.c — bench/launch/hostlist: Slurm's compressed host
 * lists expand in Slurm's order with zero padding kept (single hosts,
 * ranges and lists in one bracket, several terms, several brackets in one
 * term, suffixes), the first host comes alone, and malformed lists are
 * refused with the reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "bench/launch/hostlist.h"

typedef struct joined {
  char text[1024];
  int count;
  int stop_after; /* 0: never */
} joined;

static int join_host(const char *host, void *ctx) {
  joined *j = ctx;
  size_t used = strlen(j->text);
  snprintf(j->text + used, sizeof j->text - used, "%s%s", j->count ? " " : "", host);
  j->count++;
  return j->stop_after && j->count >= j->stop_after;
}

/* The hosts of list joined by spaces. */
static void expect_hosts(const char *list, const char *want) {
  joined j = {{0}, 0, 0};
  assert_int_equal(tp_hostlist_each(list, join_host, &j), TP_OK);
  assert_string_equal(j.text, want);
}

static void expect_refused(const char *list, const char *needle) {
  joined j = {{0}, 0, 0};
  assert_int_equal(tp_hostlist_each(list, join_host, &j), TP_EUSAGE);
  if (!strstr(tp_last_error(), needle))
    fail_msg("'%s': '%s' lacks '%s'", list, tp_last_error(), needle);
}

static void test_expands_common_forms(void **state) {
  (void)state;
  expect_hosts("node17", "node17");
  expect_hosts("node[01-04,07]", "node01 node02 node03 node04 node07");
  expect_hosts("a1,b[2-3]", "a1 b2 b3");
  expect_hosts("gpu[8-10]", "gpu8 gpu9 gpu10");         /* width of the low end: 1 */
  expect_hosts("gpu[08-10]", "gpu08 gpu09 gpu10");      /* padded to 2 */
  expect_hosts("n[1-2]-ib,login", "n1-ib n2-ib login"); /* text after the bracket */
  expect_hosts("r[1-2]-g[01-02]", "r1-g01 r1-g02 r2-g01 r2-g02");
  expect_hosts("[3-4]x", "3x 4x");
  expect_hosts("h-1.example.org,h[5]", "h-1.example.org h5");
}

static void test_first_host(void **state) {
  (void)state;
  char first[64];
  assert_int_equal(tp_hostlist_first("node[07-09,01],other", first, sizeof first), TP_OK);
  assert_string_equal(first, "node07");
  assert_int_equal(tp_hostlist_first("a1,b[2-3]", first, sizeof first), TP_OK);
  assert_string_equal(first, "a1");
  /* The walk stops at the first host: a huge range costs nothing. */
  assert_int_equal(tp_hostlist_first("big[1-999999]", first, sizeof first), TP_OK);
  assert_string_equal(first, "big1");
  char tiny[4];
  assert_int_equal(tp_hostlist_first("node1", tiny, sizeof tiny), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "longer than 3 characters"));
}

static void test_stops_when_asked(void **state) {
  (void)state;
  joined j = {{0}, 0, 2};
  assert_int_equal(tp_hostlist_each("x[1-5],y", join_host, &j), TP_OK);
  assert_string_equal(j.text, "x1 x2");
}

static void test_malformed_refused(void **state) {
  (void)state;
  expect_refused("", "it is empty");
  expect_refused("a,,b", "an empty host name");
  expect_refused("a,", "an empty host name");
  expect_refused("node[1-3", "without its ']'");
  expect_refused("node]1", "without its '['");
  expect_refused("node[]", "an empty bracket");
  expect_refused("node[a-b]", "non-number");
  expect_refused("node[1-]", "a range has no end");
  expect_refused("node[5-2]", "runs backwards");
  expect_refused("node[1;2]", "non-number");
  expect_refused("node[0-2000000]", "more than a million hosts");
  char longname[400];
  memset(longname, 'h', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  expect_refused(longname, "too long");
  /* a list far longer than a message still gets its reason, after a cut quote */
  static char huge[100001];
  memset(huge, 'h', sizeof huge - 1);
  expect_refused(huge, "...': a host name is too long");
  char first[64];
  assert_int_equal(tp_hostlist_first(huge + sizeof huge - 101, first, sizeof first), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "...': its first host is longer than 63 characters"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expands_common_forms),
      cmocka_unit_test(test_first_host),
      cmocka_unit_test(test_stops_when_asked),
      cmocka_unit_test(test_malformed_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
