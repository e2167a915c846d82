#!/usr/bin/env bash
# gen-cli-docs.sh [TPBENCH] — writes docs/cli.md, the command-line reference, from
# the binary's own option tables (`tpbench --help-markdown`, hidden: each
# command's table prints its section, bench/cli/cli.c). Run it after changing a
# command's options, usage or summary; tests/cpu/cli_docs.sh (ctest
# test_cli_docs) fails while docs/cli.md differs from what the binary prints.
# TPBENCH: the binary to ask (default build/tpbench).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(tp_repo_root)"

exe=${1:-build/tpbench}
[ -x "$exe" ] || { echo "gen-cli-docs: no binary at $exe (build it first)" >&2; exit 2; }
"$exe" --help-markdown >docs/cli.md.tmp
mv docs/cli.md.tmp docs/cli.md
echo "gen-cli-docs: wrote docs/cli.md ($(wc -l <docs/cli.md) lines)"
