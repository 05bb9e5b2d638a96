#!/usr/bin/env bash
# Configures and builds the fuzz targets (fuzz/) into build-fuzz/ (or
# $SCOUT_FUZZ_BUILD_DIR) with Debian's clang: libFuzzer, ASan and UBSan. Only
# the parsers are compiled; the normal build (build/, gcc) is not touched.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SCOUT_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${SCOUT_JOBS:-$(nproc)}"
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DSCOUT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSCOUT_WITH_TORCH=OFF -DSCOUT_WITH_CUDA=OFF >&2
fi
cmake --build "$build" -j "$jobs" >&2
