#!/usr/bin/env bash
# pack-build.sh — packs what a lent GPU machine needs of a CPU-built build folder into one
# xz archive (about 3 MB: the GPU tests' fat binaries compress some 15-fold), to carry instead
# of the folder (a device call carries 64 MiB at most, and the folder is over 40).
# Holds: tpbench, the profiler's injection library, lib/ (the cmocka the tests link), the
# GPU tests and ctest's files; debug info stripped. On the device, from the repository root:
#   tar xJf build-carry/NAME.tar.xz   (an absolute build path outside the checkout: add -C /)
#
# usage: scripts/pack-build.sh BUILD_DIR [OUT_FILE]   (default build-carry/build.tar.xz)
set -euo pipefail
build=${1:?usage: pack-build.sh BUILD_DIR [OUT_FILE]}
out=${2:-build-carry/build.tar.xz}
[ -x "$build/tpbench" ] || { echo "pack-build.sh: no tpbench in $build" >&2; exit 2; }
if [ -e "$out" ] && [ ! -f "$out" ]; then
  echo "pack-build.sh: $out exists and is not a plain file" >&2
  exit 2
fi
# A binary built before the last commit records the commit before it, marked dirty: every run it
# makes would be filed under the wrong commit. One of an older commit would run beside scripts
# and examples (the checkout a device call carries) of another. Both refused unless
# PACK_ANY_BUILD=1. The binary itself
# says what it records (`tpbench --version`): generated/tp_buildinfo.h is rewritten before the
# binary is linked, so after a cut or failed build, or `--target tp_buildinfo` alone, it names
# HEAD while the binary still records the commit before.
version=$(timeout 20 "$build/tpbench" --version 2> /dev/null | head -n 1 || true)
built=$(sed -n 's/^tpbench [^ ]* (commit \([^,)]*\)\(, with uncommitted changes\)\{0,1\})$/\1/p' <<< "$version")
dirty=
if [ -n "$built" ]; then
  case $version in *", with uncommitted changes)") dirty=1 ;; *) dirty=0 ;; esac
fi
head=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse HEAD 2> /dev/null || echo unknown)
if [ "${PACK_ANY_BUILD:-0}" != 1 ] && { [ "$built" != "$head" ] || [ "$dirty" != 0 ]; }; then
  if [ -z "$built" ]; then
    what="does not say what it was built from (\`$build/tpbench --version\`: ${version:-nothing})"
  else
    what="was built from $built$([ "$dirty" = 0 ] || echo " with uncommitted changes")"
  fi
  echo "pack-build.sh: $build/tpbench $what," \
    "not from HEAD $head with a clean tree: commit, rebuild (cmake --build $build), then pack" \
    "(PACK_ANY_BUILD=1 packs it all the same)" >&2
  exit 2
fi
abs=$(cd "$build" && pwd)
# an absolute build folder is packed from /, a relative one from here; one above here (..) is
# neither: staged at $stage/.. it would land outside the stage (over a folder of that name beside
# it, its binaries stripped), and tar would drop the ../ from the archive's names
if [[ $build = /* ]]; then rel=${abs#/}; else rel=$build; fi
case /$rel/ in
  */../*)
    echo "pack-build.sh: $build is above this folder: give it as an absolute path ($abs)" >&2
    exit 2
    ;;
esac
mkdir -p "$(dirname "$out")"
parts=(tpbench lib tests/gpu CMakeCache.txt CTestTestfile.cmake tests/CTestTestfile.cmake
  tests/cpu/CTestTestfile.cmake)
[ -e "$build/libtpbench_inject.so" ] && parts+=(libtpbench_inject.so)
# a copy is stripped, never the build folder itself (a binary may be running)
stage=$(mktemp -d)
trap 'rm -rf "$stage" "$stage.xz"' EXIT
mkdir -p "$stage/$rel"
(cd "$abs" && tar cf - --exclude=CMakeFiles --exclude='*.a' "${parts[@]}") | tar xf - -C "$stage/$rel"
strip --strip-debug "$stage/$rel/tpbench" "$stage/$rel"/tests/gpu/gpu_* \
  "$stage/$rel/tests/gpu/profile_target"
# written beside the target and renamed: a cut run never leaves a half archive under its name
tar cf - -C "$stage" "$rel" | xz -T0 -6 > "$stage.xz" && mv -f "$stage.xz" "$out"
echo "$out: $(du -h "$out" | cut -f1)"
