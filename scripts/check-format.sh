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
bad=0
checked=0
while IFS= read -r f; do
  checked=$((checked + 1))
  if ! "$clang_format" --style=file "$f" | cmp -s - "$f"; then
    echo "$f"
    bad=$((bad + 1))
  fi
done < <(files)
if [ "$bad" -gt 0 ]; then
  echo "check-format: $bad of $checked files differ from .clang-format; run scripts/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: $checked files follow .clang-format" >&2
