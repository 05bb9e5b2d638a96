#!/usr/bin/env bash
# Sets up (packages), builds and runs every test. This is the README's test
# command and what CI runs. GPU tests skip with a reason where no GPU exists.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SCOUT_BUILD_DIR:-$root/build}"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "${SCOUT_TEST_JOBS:-2}" "$@"
