#!/usr/bin/env bash
# Configures and builds scout into build/ (or $SCOUT_BUILD_DIR). Extra
# arguments go to cmake's configure step, e.g. -DSCOUT_WITH_CUDA=OFF;
# SCOUT_BUILD_TARGETS limits what is built.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SCOUT_BUILD_DIR:-$root/build}"
jobs="${SCOUT_JOBS:-$(nproc)}"
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
if [ ! -f "$build/CMakeCache.txt" ] || [ $# -gt 0 ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >&2
fi
# SCOUT_BUILD_TARGETS (space-separated) builds only those, e.g. "scout scout_publisher" (scripts/demo.sh).
targets=()
for t in ${SCOUT_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$jobs" "${targets[@]}" >&2
