/*
 * test_bench_cli.c — bench/cli: both value forms, flags, whole numbers and
 * their ranges, string choices, comma lists (replacing the default, empty
 * items, too many), positional arguments and `--`, unknown options, missing
 * and empty values, and --help printing every option with its default.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "bench/cli/cli.h"
#include "bench/cli/link_args.h"

typedef struct parsed {
  int iters;
  long long seed;
  const char *db;
  const char *format;
  int quiet;
  tp_str_list models;
  tp_int_list tokens;
} parsed;

static void defaults(parsed *p) {
  memset(p, 0, sizeof *p);
  p->iters = 50;
  p->seed = -1;
  p->db = "tpbench.db";
  p->format = "md";
  assert_int_equal(tp_str_list_set(&p->models, "8b,70b"), TP_OK);
  assert_int_equal(tp_int_list_set(&p->tokens, "4096", 1, 1 << 30), TP_OK);
}

/* Parses a NULL-terminated argument list (after the command name). */
static tp_rc parse(parsed *p, const char **positional, int max_pos, int *n_pos, int *help, ...) {
  const tp_option options[] = {
      {"iters", TP_OPT_INT, &p->iters, "N", "timed iterations", 1, 1000, NULL},
      {"seed", TP_OPT_INT64, &p->seed, "N", "random seed", 0, 0, NULL},
      {"db", TP_OPT_STRING, &p->db, "PATH", "database", 0, 0, NULL},
      {"format", TP_OPT_STRING, &p->format, "FMT", "table format", 0, 0, "md|csv|json"},
      {"quiet", TP_OPT_FLAG, &p->quiet, NULL, "fewer lines", 0, 0, NULL},
      {"models", TP_OPT_STR_LIST, &p->models, NULL, "models", 0, 0, NULL},
      {"tokens", TP_OPT_INT_LIST, &p->tokens, NULL, "tokens per step", 1, 1 << 30, NULL},
  };
  const tp_command cmd = {"demo", "tpbench demo [options]", "A command for tests.", options,
                          (int)(sizeof options / sizeof options[0])};
  char *argv[32] = {"demo"};
  int argc = 1;
  va_list ap;
  va_start(ap, help);
  for (const char *a; (a = va_arg(ap, const char *)) != NULL;) argv[argc++] = (char *)a;
  va_end(ap);
  int unused_help = 0;
  return tp_cli_parse(&cmd, argc, argv, positional, max_pos, n_pos, help ? help : &unused_help);
}

/* parse() of the arguments that follow (no positionals) must fail as a
 * usage error whose message holds needle, where one is given. */
#define EXPECT_USAGE(p, needle, ...)                                                               \
  expect_usage(parse((p), NULL, 0, NULL, NULL, __VA_ARGS__, NULL), (needle))

static void expect_usage(tp_rc rc, const char *needle) {
  assert_int_equal(rc, TP_EUSAGE);
  if (needle && !strstr(tp_last_error(), needle))
    fail_msg("'%s' not in '%s'", needle, tp_last_error());
}

static void test_value_forms(void **state) {
  (void)state;
  parsed p;
  defaults(&p);
  assert_int_equal(parse(&p, NULL, 0, NULL, NULL, "--iters", "7", "--db=x.db", "--quiet",
                         "--format=json", "--seed", "-3", NULL),
                   TP_OK);
  assert_int_equal(p.iters, 7);
  assert_string_equal(p.db, "x.db");
  assert_string_equal(p.format, "json");
  assert_int_equal(p.quiet, 1);
  assert_int_equal(p.seed, -3);
  /* --name=value with an '=' inside the value keeps the rest whole */
  assert_int_equal(parse(&p, NULL, 0, NULL, NULL, "--db=a=b", "--iters=9", NULL), TP_OK);
  assert_string_equal(p.db, "a=b");
  assert_int_equal(p.iters, 9);
}

static void test_whole_numbers(void **state) {
  (void)state;
  parsed p;
  defaults(&p);
  EXPECT_USAGE(&p, "--iters: 'abc' is not a whole number", "--iters", "abc");
  EXPECT_USAGE(&p, NULL, "--iters", "12x");
  EXPECT_USAGE(&p, NULL, "--iters", "1e3");
  EXPECT_USAGE(&p, NULL, "--iters", "");
  EXPECT_USAGE(&p, NULL, "--iters", " 5");
  EXPECT_USAGE(&p, "--iters: 0 is out of range [1, 1000]", "--iters", "0");
  EXPECT_USAGE(&p, "out of range", "--seed", "99999999999999999999");
  assert_int_equal(p.iters, 50); /* untouched by the failures */
  long long v = 0;
  assert_int_equal(tp_parse_int("N", "+12", 0, 20, &v), TP_OK);
  assert_int_equal(v, 12);
}

static void test_unknown_and_missing(void **state) {
  (void)state;
  parsed p;
  defaults(&p);
  EXPECT_USAGE(&p, "unknown option '--bogus'", "--bogus", "1");
  EXPECT_USAGE(&p, NULL, "--iter", "1");
  EXPECT_USAGE(&p, NULL, "-x");
  EXPECT_USAGE(&p, "--iters needs a value", "--iters");
  EXPECT_USAGE(&p, "takes no value", "--quiet=1");
  EXPECT_USAGE(&p, "'xml' is not one of md|csv|json", "--format", "xml");
  /* An empty string is a usage error in both forms, the default kept
   * (`--db ''` once reached the store and failed with exit 1). */
  EXPECT_USAGE(&p, "--db: the value is empty (give a PATH)", "--db", "");
  EXPECT_USAGE(&p, NULL, "--db=");
  EXPECT_USAGE(&p, NULL, "--format=");
  assert_string_equal(p.db, "tpbench.db");
}

static void test_lists(void **state) {
  (void)state;
  parsed p;
  defaults(&p);
  assert_int_equal(p.models.count, 2);
  assert_int_equal(
      parse(&p, NULL, 0, NULL, NULL, "--models", "debug,1b,405b", "--tokens=8,16", NULL), TP_OK);
  assert_int_equal(p.models.count, 3); /* replaced, not appended */
  assert_string_equal(tp_str_list_at(&p.models, 0), "debug");
  assert_string_equal(tp_str_list_at(&p.models, 2), "405b");
  assert_int_equal(p.tokens.count, 2);
  assert_int_equal(p.tokens.items[1], 16);
  /* A list survives being copied by assignment. */
  tp_str_list copy = p.models;
  memset(&p.models, 0, sizeof p.models);
  assert_string_equal(tp_str_list_at(&copy, 1), "1b");

  EXPECT_USAGE(&p, "--models: empty item in list '8b,,70b'", "--models", "8b,,70b");
  EXPECT_USAGE(&p, NULL, "--models", "8b,");
  EXPECT_USAGE(&p, "--tokens: 'x' is not a whole number", "--tokens", "8,x");
  EXPECT_USAGE(&p, NULL, "--tokens", "8,0");
  assert_int_equal(p.tokens.count, 2); /* untouched by the failures */
  char many[256] = "1";
  for (int i = 0; i < TP_LIST_MAX; i++) strcat(many, ",1");
  EXPECT_USAGE(&p, "at most", "--tokens", many);
}

static void test_positional(void **state) {
  (void)state;
  parsed p;
  defaults(&p);
  const char *pos[2] = {0};
  int n = -1;
  assert_int_equal(parse(&p, NULL, 0, &n, NULL, "stray", NULL), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "unexpected argument 'stray'"));
  assert_non_null(strstr(tp_last_error(), "takes options only"));
  assert_int_equal(parse(&p, pos, 2, &n, NULL, "a", "b", "c", NULL), TP_EUSAGE);
  assert_non_null(strstr(tp_last_error(), "unexpected argument 'c' (demo takes at most 2)"));
  assert_int_equal(parse(&p, pos, 2, &n, NULL, "a", "--iters", "3", "--", "--b", NULL), TP_OK);
  assert_int_equal(n, 2);
  assert_string_equal(pos[0], "a");
  assert_string_equal(pos[1], "--b");
  assert_int_equal(p.iters, 3);
}

static void test_help(void **state) {
  (void)state;
  parsed p;
  defaults(&p);
  int help = 0;
  assert_int_equal(parse(&p, NULL, 0, NULL, &help, "--iters", "5", "--help", "--bogus", NULL),
                   TP_OK);
  assert_int_equal(help, 1);
  const tp_option options[] = {
      {"iters", TP_OPT_INT, &p.iters, "N", "timed iterations", 1, 1000, NULL},
      {"models", TP_OPT_STR_LIST, &p.models, NULL, "models", 0, 0, NULL},
      {"format", TP_OPT_STRING, &p.format, "FMT", "table format", 0, 0, "md|csv|json"},
      {"quiet", TP_OPT_FLAG, &p.quiet, NULL, "fewer lines", 0, 0, NULL},
  };
  const tp_command cmd = {"demo", "tpbench demo [options]", "A command for tests.", options, 4};
  FILE *f = tmpfile();
  assert_non_null(f);
  tp_cli_print_help(&cmd, f);
  char text[4096] = {0};
  rewind(f);
  assert_true(fread(text, 1, sizeof text - 1, f) > 0);
  fclose(f);
  assert_non_null(strstr(text, "Usage: tpbench demo [options]"));
  assert_non_null(strstr(text, "--iters N"));
  assert_non_null(strstr(text, "[default: 5]")); /* the current value is the default shown */
  assert_non_null(strstr(text, "[default: 8b,70b]"));
  assert_non_null(strstr(text, "(one of md|csv|json) [default: md]"));
  assert_non_null(strstr(text, "--quiet"));
  assert_non_null(strstr(text, "--help"));
}

/* The reference page's section of a command: heading, usage, a row per option
 * with its default and accepted values, and every `|` of a help text escaped
 * so a row keeps its five cells. */
static void test_help_markdown(void **state) {
  (void)state;
  parsed p;
  defaults(&p);
  const tp_option options[] = {
      {"iters", TP_OPT_INT, &p.iters, "N", "timed iterations", 1, 1000, NULL},
      {"format", TP_OPT_STRING, &p.format, "FMT", "table format (a|b)", 0, 0, "md|csv|json"},
      {"quiet", TP_OPT_FLAG, &p.quiet, NULL, "fewer lines", 0, 0, NULL},
  };
  const tp_command cmd = {"demo", "tpbench demo --for ops [options]", "A command for tests.",
                          options, 3};
  FILE *f = tmpfile();
  assert_non_null(f);
  tp_cli_print_markdown(&cmd, f);
  char text[4096] = {0};
  rewind(f);
  assert_true(fread(text, 1, sizeof text - 1, f) > 0);
  fclose(f);
  assert_non_null(strstr(text, "## tpbench demo --for ops\n"));
  assert_non_null(strstr(text, "```text\nUsage: tpbench demo --for ops [options]\n\nA command"));
  assert_non_null(strstr(text, "| `--iters` | `N` |  | `50` | timed iterations |\n"));
  assert_non_null(
      strstr(text, "| `--format` | `FMT` | `md`, `csv`, `json` | `md` | table format (a\\|b) |\n"));
  assert_non_null(strstr(text, "| `--quiet` |  |  |  | fewer lines |\n"));
  /* --help-markdown is parsed like --help: nothing after it is looked at */
  int help = 0;
  assert_int_equal(parse(&p, NULL, 0, NULL, &help, "--help-markdown", "--bogus", NULL), TP_OK);
  assert_int_equal(help, 1);
}

/* link's GEMMs between gaps: a phase covers the settle time, at least --iters calls and never
 * more than the probe holds events and samples for (--iters goes to 10000, the probe holds
 * 4096: more was written past its arrays). */
static void test_link_pacing_calls(void **state) {
  (void)state;
  assert_int_equal(tp_link_pacing_calls(300.0, 1000.0, 20, 4096), 300);
  assert_int_equal(tp_link_pacing_calls(300.0, 1e6, 20, 4096), 20);
  assert_int_equal(tp_link_pacing_calls(300.0, 1.0, 20, 4096), 4096);
  assert_int_equal(tp_link_pacing_calls(300.0, 1e6, 5000, 4096), 4096);
  assert_int_equal(tp_link_pacing_calls(300.0, 1e6, 10000, 4096), 4096);
  assert_int_equal(tp_link_pacing_calls(300.0, 0.0, 20, 4096), 4096);
  assert_int_equal(tp_link_pacing_calls(300.0, -1.0, 20, 4096), 4096);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_value_forms),         cmocka_unit_test(test_whole_numbers),
      cmocka_unit_test(test_unknown_and_missing), cmocka_unit_test(test_lists),
      cmocka_unit_test(test_positional),          cmocka_unit_test(test_help),
      cmocka_unit_test(test_help_markdown),       cmocka_unit_test(test_link_pacing_calls),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
