#!/usr/bin/env bash
# Sets up, builds and runs a worked example of scout on an embedded default job:
# a dp=4,tp=2 mesh, its peer groups, and C3 over per-rank evidence.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
scout="${SCOUT_BUILD_DIR:-$root/build}/bin/scout"
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
say scout groups --mesh dp=4,tp=2 --ranks-per-node 4 --format text
"$scout" groups --mesh dp=4,tp=2 --ranks-per-node 4 --format text
say "scout consensus --ranks 0,2,4,6 --values 0x9e37,0x9e37,0x51ab,0x9e37 --format text   # weight hashes of replica group {0,2,4,6}"
"$scout" consensus --ranks 0,2,4,6 --values 0x9e37,0x9e37,0x51ab,0x9e37 --format text || echo "(exit $?: fault attributed)"
say "scout consensus --mode statistical --values 1.02,1.01,1.03,1.02,1.01,1.71,1.02,1.02 --format text   # step times"
"$scout" consensus --mode statistical --values 1.02,1.01,1.03,1.02,1.01,1.71,1.02,1.02 --format text || echo "(exit $?: fault attributed)"
