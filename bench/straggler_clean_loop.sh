#!/usr/bin/env bash
# The clean-run straggler test N times in a row beside two busy loops (issue 40: no false alarm on a busy machine).
# Each run is a fresh dp=2 x tp=2 job (tests/integration/test_straggler.py's
# test_clean_run_names_no_one_and_bench_places_probes_like_the_ranks) with a random seed, printed; a run's
# evidence and verdict are kept under KEEP_DIR (STRAGGLER_KEEP) so that a false alarm can be recorded as a case.
#   usage: bench/straggler_clean_loop.sh N [KEEP_DIR]     (SCOUT_BIN: a copy of the scout binary, with its modules)
# Rerun one run: STRAGGLER_SEED=<seed> with the same unittest line below.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
n="${1:?usage: straggler_clean_loop.sh N [KEEP_DIR]}"
keep="${2:-$(mktemp -d /tmp/scout-clean-loop-XXXXXX)}"
mkdir -p "$keep"
export SCOUT_BIN="${SCOUT_BIN:-$root/build/bin/scout}" SCOUT_BUILD_DIR="${SCOUT_BUILD_DIR:-$root/build}" \
  SCOUT_SOURCE_DIR="$root" STRAGGLER_KEEP="$keep"
python3 -c "while True: pass" & h1=$!
python3 -c "while True: pass" & h2=$!
trap 'kill $h1 $h2 2>/dev/null' EXIT
pass=0 fail=0
cd "$root/tests/integration"
for i in $(seq 1 "$n"); do
  seed=$(( (RANDOM << 15 | RANDOM) ))
  load=$(cut -d' ' -f1 /proc/loadavg)
  if STRAGGLER_SEED=$seed timeout 300 python3 -m unittest \
      test_straggler.StragglerOnRealJobs.test_clean_run_names_no_one_and_bench_places_probes_like_the_ranks \
      > "$keep/run-$seed.log" 2>&1; then
    pass=$((pass + 1)); echo "run $i seed $seed load $load ok"
  else
    fail=$((fail + 1)); echo "run $i seed $seed load $load FAIL (log and evidence in $keep)"
  fi
done
echo "clean runs: $pass of $n named no one ($fail false alarms); busy loops 2, SCOUT_BIN $SCOUT_BIN"
[ "$fail" -eq 0 ]
