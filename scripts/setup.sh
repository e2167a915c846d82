#!/usr/bin/env bash
# setup.sh — installs the Debian packages tpbench is built and checked with,
# only those missing (a second run installs nothing), as root or through
# sudo. The CUDA toolkit (with NCCL and CUPTI inside it) is not installed
# here: it is expected at /usr/local/cuda; without nvcc the build is
# configured with -DTPBENCH_WITH_CUDA=OFF, and this script says so.
#
# chromium (Debian's package) is installed too: the dashboard's CPU test loads
# the generated page in headless Chromium (tests/cpu/test_dashboard.c, which
# skips itself where /usr/bin/chromium is missing). TPBENCH_SETUP_CHROMIUM=0
# leaves it out on machines that cannot take it.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

packages=(cmake gcc g++ make git libsqlite3-dev libcmocka-dev libjansson-dev libsodium-dev zlib1g-dev clang-format clang-tidy)
# libiberty-dev: cplus_demangle for the Kineto trace export's kernel names (report/tp_trace_kineto.c).
packages+=(libiberty-dev)
# clang and its compiler-rt (libFuzzer, the sanitizers) build the fuzz targets (scripts/fuzz.sh).
packages+=(clang libclang-rt-dev)
# python3-junitparser reads compare's JUnit file back and xmllint (libxml2-utils)
# checks it (tests/cpu/test_compare_junit.c, skipped without junitparser).
packages+=(python3 python3-junitparser libxml2-utils)
# slurm-client: sbatch --test-only reads README's batch scripts and scontrol checks the host
# list expansion (tests/cpu/test_launch_readme.c; those parts skipped without it).
packages+=(slurm-client)
if [ "${TPBENCH_SETUP_CHROMIUM:-1}" = 1 ]; then packages+=(chromium); fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: the build's packages are installed"
else
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "setup: installing ${missing[*]} needs root (or sudo)" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update
  "${as_root[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

if nvcc=$(tp_nvcc); then
  echo "setup: CUDA compiler $nvcc ($("$nvcc" --version | tail -n 1))"
else
  echo "setup: nvcc not found (PATH, /usr/local/cuda/bin): building with -DTPBENCH_WITH_CUDA=OFF," \
       "so tpbench ops cannot run and the GPU tests are not built"
fi
