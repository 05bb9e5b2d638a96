#!/usr/bin/env bash
# Runs every fuzz target for a while, one after another, and prints per
# target the seconds, executions, coverage (edges), corpus size and findings:
#   scripts/fuzz-long.sh [SECONDS_PER_TARGET] [TARGET...]
# SECONDS_PER_TARGET defaults to 300. Builds build-fuzz (or $SCOUT_FUZZ_BUILD_DIR)
# first. Findings (crash, leak, timeout, out-of-memory, sanitizer report) are
# saved under $BUILD/fuzz-long/<target>/artifacts; new inputs under
# .../new (copy the interesting ones to fuzz/corpus/<target>/ by hand). Runs on
# one core at low priority (nice 10); a shared machine keeps working.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SCOUT_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${1:-300}"
shift || true
"$root/scripts/build-fuzz.sh" >&2 || { echo "fuzz-long: the fuzz build failed" >&2; exit 1; }
if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(find "$build/fuzz/bin" -maxdepth 1 -type f -executable -printf '%f\n' | sort)
fi
total_findings=0
printf '%-20s %8s %12s %8s %8s %9s  %s\n' target seconds execs cov corpus findings note
for t in "${targets[@]}"; do
  work="$build/fuzz-long/$t"
  log="$work/log.txt"
  mkdir -p "$work"
  start=$(date +%s)
  nice -n 10 "$root/fuzz/run-target.sh" "$build/fuzz/bin/$t" "$root/fuzz/corpus/$t" "$seconds" "$work" > "$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  corpus=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  findings=$(find "$work/artifacts" -type f ! -name 'slow-unit-*' 2>/dev/null | wc -l)
  slow=$(find "$work/artifacts" -type f -name 'slow-unit-*' 2>/dev/null | wc -l)
  note="ok"
  [ "$slow" -gt 0 ] && note="ok, $slow slow input(s) under $work/artifacts (not findings: under the -timeout)"
  if [ $rc -ne 0 ] || [ "$findings" -gt 0 ]; then
    note="FINDING (exit $rc): $(grep -m1 -E 'ERROR: |runtime error|fuzz check failed|Timeout|out-of-memory' "$log" | cut -c1-100)"
    total_findings=$(( total_findings + (findings > 0 ? findings : 1) ))
  fi
  printf '%-20s %8s %12s %8s %8s %9s  %s\n' "$t" "$took" "${execs:-?}" "${cov:-?}" "${corpus:-?}" "$findings" "$note"
done
echo "fuzz-long: ${#targets[@]} targets, ${seconds}s each, findings: $total_findings (logs and inputs under $build/fuzz-long/)"
[ "$total_findings" -eq 0 ]
