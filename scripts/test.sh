#!/usr/bin/env bash
# Sets up (packages), builds and runs every test. This is the README's test
# command and what CI runs. GPU tests skip with a reason where no GPU exists.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SCOUT_BUILD_DIR:-$root/build}"
# Where the time goes, printed at the end (also when a step fails).
steps=()
mark_start=$(date +%s)
mark() {
  local now
  now=$(date +%s)
  steps+=("$1 $((now - mark_start)) s")
  mark_start=$now
}
report() {
  local joined
  joined=$(printf '%s; ' "${steps[@]}")
  echo "test.sh: where the time went: ${joined%; }" >&2
}
trap report EXIT
"$root/scripts/install-deps.sh"
mark "installing dependencies"
rc=0
# Every tracked C/C++/CUDA file follows .clang-format (scripts/check-format.sh --fix applies it).
"$root/scripts/check-format.sh" || rc=1
mark "format check"
"$root/scripts/build.sh"
mark "building"
(cd "$build" && ctest --output-on-failure -j "${SCOUT_TEST_JOBS:-2}" "$@") || rc=$?
mark "the tests (ctest)"
# The fuzz targets, briefly, over their committed corpora (clang, build-fuzz/;
# SCOUT_SKIP_FUZZ=1 skips them).
if [ "${SCOUT_SKIP_FUZZ:-0}" != 1 ]; then
  fuzz_build="${SCOUT_FUZZ_BUILD_DIR:-$root/build-fuzz}"
  if SCOUT_FUZZ_BUILD_DIR="$fuzz_build" "$root/scripts/build-fuzz.sh"; then
    mark "building the fuzz targets"
    (cd "$fuzz_build" && ctest --output-on-failure -j "${SCOUT_TEST_JOBS:-2}" -L fuzz) || rc=$?
    mark "fuzzing"
  else
    echo "test.sh: the fuzz build failed" >&2
    rc=1
  fi
fi
exit $rc
