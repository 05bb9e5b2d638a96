#!/usr/bin/env bash
# Checks (default) or applies (--fix) .clang-format on every C, C++ and CUDA
# source file git tracks. Prints the files that differ and exits 1 when any
# does; scripts/test.sh (CI) runs it before the build. `cmake --build build
# --target format` runs it with --fix, `--target format-check` without.
#   scripts/check-format.sh            list files that differ, exit 1 if any
#   scripts/check-format.sh --fix      rewrite them in place
#   scripts/check-format.sh --list     print the files that are checked
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
clang_format="${CLANG_FORMAT:-$(command -v clang-format || command -v clang-format-14 || true)}"
mode="${1:-check}"

# The files under the format rule: every tracked C/C++/CUDA source and header.
files() {
  git ls-files -- '*.c' '*.h' '*.cc' '*.cpp' '*.hpp' '*.cu' '*.cuh'
}

if [ "$mode" = "--list" ]; then
  files
  exit 0
fi
if [ -z "$clang_format" ]; then
  echo "check-format: clang-format not found; install it (scripts/install-deps.sh) or set CLANG_FORMAT" >&2
  exit 2
fi
if [ "$mode" = "--fix" ]; then
  files | xargs -r "$clang_format" -i --style=file
  exit 0
fi
if [ "$mode" != "check" ]; then
  echo "usage: scripts/check-format.sh [--fix | --list]" >&2
  exit 2
fi
# One clang-format per batch of 64 files, a batch per CPU at a time (a process per file, serially: 29 s of
# scripts/test.sh at load ~4 on 2 cores, most of it process start-up). --dry-run --Werror names each file whose
# formatted text differs ("FILE:LINE:COL: error: code should be clang-formatted") and fails.
checked=$(files | wc -l)
out=$(files | xargs -r -n 64 -P "$(nproc)" "$clang_format" --style=file --dry-run --Werror 2>&1 >/dev/null) && rc=0 || rc=$?
differ=$(printf '%s\n' "$out" | sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ -n "$differ" ]; then
  printf '%s\n' "$differ"
  echo "check-format: $(printf '%s\n' "$differ" | wc -l) of $checked files differ from .clang-format; run scripts/check-format.sh --fix" >&2
  exit 1
fi
if [ "$rc" -ne 0 ]; then
  # clang-format itself failed (not a formatting difference): say how.
  printf '%s\n' "$out" | tail -n 20 >&2
  echo "check-format: clang-format failed (exit $rc)" >&2
  exit 1
fi
echo "check-format: $checked files follow .clang-format" >&2
