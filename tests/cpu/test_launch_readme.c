/*
 * test_launch_readme.c — the Slurm batch scripts of docs/clusters.md ("Slurm"),
 * taken out of the page as a user would copy them: each is
 * valid bash (`bash -n`), and where Slurm's client is installed, sbatch
 * reads every #SBATCH option without complaint (`sbatch --test-only`
 * against a scratch slurm.conf: with no controller reachable here it can
 * only fail when it asks for one, which the test accepts and says). Slurm's
 * own host list expansion (`scontrol show hostnames`) agrees with
 * bench/launch/hostlist on the forms the launcher reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/launch/hostlist.h"
#include "tests/cpu/run_program.h"

#define README TP_TEST_DATA_DIR "/../../docs/clusters.md"

typedef struct scratch {
  char dir[64];
  char conf[128];
} scratch;

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  return rp_slurp(f);
}

/* The ```bash blocks of the page that hold #SBATCH lines, in order; each
 * a malloc'd string. Returns how many (at most max). */
static int batch_scripts(const char *readme, char **out, int max) {
  int n = 0;
  for (const char *p = readme; (p = strstr(p, "\n```bash\n")) && n < max;) {
    const char *start = p + strlen("\n```bash\n");
    const char *end = strstr(start, "\n```");
    if (!end) break;
    char *script = strndup(start, (size_t)(end - start) + 1);
    if (script && strstr(script, "#SBATCH")) out[n++] = script;
    else free(script);
    p = end + 4;
  }
  return n;
}

static int have(const char *tool) {
  char *argv[] = {"/bin/sh", "-c", NULL, NULL};
  char cmd[96];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null", tool);
  argv[2] = cmd;
  rp_result r = rp_run(argv, 10);
  int ok = r.status == 0;
  rp_free(&r);
  return ok;
}

static int setup(void **state) {
  scratch *s = calloc(1, sizeof *s);
  snprintf(s->dir, sizeof s->dir, "/tmp/tp_launch_readme.XXXXXX");
  if (!mkdtemp(s->dir)) return -1;
  /* A cluster of its own for sbatch to parse against; nothing listens on its port. */
  snprintf(s->conf, sizeof s->conf, "%s/slurm.conf", s->dir);
  FILE *f = fopen(s->conf, "w");
  if (!f) return -1;
  fputs("ClusterName=tpbenchcheck\nSlurmctldHost=localhost\nSlurmctldPort=1\nTCPTimeout=1\n"
        "MessageTimeout=1\nNodeName=node[01-02] CPUs=1 Gres=gpu:8 State=UNKNOWN\n"
        "GresTypes=gpu\nPartitionName=gpu Nodes=node[01-02] Default=YES\n",
        f);
  fclose(f);
  *state = s;
  return 0;
}

static int teardown(void **state) {
  scratch *s = *state;
  char cmd[96];
  snprintf(cmd, sizeof cmd, "rm -rf %s", s->dir);
  int rc = system(cmd);
  free(s);
  return rc == 0 ? 0 : -1;
}

static void test_batch_scripts(void **state) {
  scratch *s = *state;
  char *readme = read_file(README);
  assert_non_null(readme);
  char *scripts[8] = {NULL};
  int n = batch_scripts(readme, scripts, 8);
  free(readme);
  if (n != 2 || !scripts[0] || !scripts[1]) { /* the two-node job and the array job */
    for (int i = 0; i < n && i < 8; i++) free(scripts[i]);
    fail_msg("%d batch scripts in the page, expected 2", n);
    return;
  }
  assert_non_null(strstr(scripts[0], "#SBATCH --nodes=2 --ntasks-per-node="));
  assert_non_null(strstr(scripts[0], "srun "));
  assert_non_null(strstr(scripts[1], "#SBATCH --array="));
  const int sbatch = have("sbatch");
  if (!sbatch)
    printf("sbatch --test-only skipped: Slurm's client (slurm-client) is not installed\n");
  for (int i = 0; i < n; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s/script%d.sh", s->dir, i);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(scripts[i], f);
    fclose(f);
    char *bash[] = {"/bin/bash", "-n", path, NULL};
    rp_result r = rp_run(bash, 30);
    if (r.status != 0) fail_msg("bash -n on docs/clusters.md script %d: %s", i, r.err);
    rp_free(&r);
    if (sbatch) {
      char cmd[512];
      snprintf(cmd, sizeof cmd, "SLURM_CONF=%s exec sbatch --test-only %s", s->conf, path);
      char *sh[] = {"/bin/sh", "-c", cmd, NULL};
      r = rp_run(sh, 60);
      /* Options sbatch did not take end it before it looks for a controller. */
      if (strstr(r.err, "unrecognized option") || strstr(r.err, "invalid") ||
          strstr(r.err, "Invalid"))
        fail_msg("sbatch refused docs/clusters.md script %d: %s", i, r.err);
      if (r.status != 0 && !strstr(r.err, "Unable to contact slurm controller"))
        fail_msg("sbatch --test-only on docs/clusters.md script %d: exit %d: %s", i, r.status,
                 r.err);
      printf("script %d: sbatch read every #SBATCH option; %s", i,
             r.status == 0 ? "a controller accepted it\n"
                           : "no controller runs here to test the allocation itself (skipped)\n");
      rp_free(&r);
    }
    free(scripts[i]);
  }
}

typedef struct joined {
  char text[2048];
} joined;

static int join_host(const char *host, void *ctx) {
  joined *j = ctx;
  size_t used = strlen(j->text);
  snprintf(j->text + used, sizeof j->text - used, "%s\n", host);
  return 0;
}

static void test_hostlist_matches_scontrol(void **state) {
  scratch *s = *state;
  if (!have("scontrol")) {
    printf("skipped: Slurm's client (scontrol) is not installed\n");
    skip();
  }
  /* the forms Slurm writes (it refuses text after a lone bracket, "n[1-2]-ib",
   * which hostlist.c takes) */
  const char *lists[] = {"node[01-04,07]", "a1,b[2-3]", "gpu[8-10]", "node[001-003],gpu[7,9-10],a",
                         "r[1-2]-g[01-02]"};
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "SLURM_CONF=%s exec scontrol show hostnames '%s'", s->conf, lists[i]);
    char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    rp_result r = rp_run(sh, 30);
    const char *said = r.out ? r.out : "";
    if (r.status != 0 || strstr(said, "Invalid"))
      fail_msg("scontrol on '%s': %s%s", lists[i], said, r.err ? r.err : "");
    joined mine = {{0}};
    assert_int_equal(tp_hostlist_each(lists[i], join_host, &mine), TP_OK);
    if (strcmp(mine.text, said) != 0)
      fail_msg("'%s': scontrol says\n%s\nhostlist says\n%s", lists[i], said, mine.text);
    rp_free(&r);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_batch_scripts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hostlist_matches_scontrol, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
