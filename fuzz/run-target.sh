#!/usr/bin/env bash
# Runs one fuzz target over its committed corpus for a while (the ctest entry
# of scout_fuzz_target, and scripts/fuzz-long.sh):
#   run-target.sh BINARY CORPUS_DIR SECONDS WORK_DIR [libFuzzer flags...]
# Every corpus input runs first (seeds and regression inputs), then mutations
# for SECONDS. New inputs go to WORK_DIR/new, crash/leak/timeout/oom inputs to
# WORK_DIR/artifacts; the source tree is never written. Exits non-zero on any
# finding (libFuzzer's own exit status), naming the saved input.
set -uo pipefail
if [ $# -lt 4 ]; then
  echo "usage: run-target.sh BINARY CORPUS_DIR SECONDS WORK_DIR [libFuzzer flags...]" >&2
  exit 2
fi
bin="$1" corpus="$2" seconds="$3" work="$4"
shift 4
rm -rf "$work/new" "$work/artifacts"
mkdir -p "$work/new" "$work/artifacts"
# Sanitizer reports abort the run (UBSan is built without recovery); leaks count.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# One input running longer than SCOUT_FUZZ_INPUT_TIMEOUT seconds (default 60:
# generous, a loaded CI machine must not make it flaky) is a finding (a hang).
"$bin" -max_total_time="$seconds" -timeout="${SCOUT_FUZZ_INPUT_TIMEOUT:-60}" -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$@" "$work/new" "$corpus"
rc=$?
# A slow unit (libFuzzer's slow-unit-*, over -report_slow_units seconds) is
# reported with its reproduction command but is not a finding by itself: the
# -timeout above is the hang criterion, and machine load alone can slow an
# input past the report threshold. Crashes, leaks, timeouts and OOMs fail.
for f in $(find "$work/artifacts" -type f -name 'slow-unit-*' | sort); do
  echo "run-target: $(basename "$bin"): warning: slow input $f; time it with: $bin $f" >&2
done
found=$(find "$work/artifacts" -type f ! -name 'slow-unit-*' | sort)
if [ $rc -ne 0 ] || [ -n "$found" ]; then
  echo "run-target: $(basename "$bin"): FINDING (exit $rc)" >&2
  for f in $found; do
    echo "run-target: saved input $f; reproduce with: $bin $f" >&2
  done
  exit $(( rc != 0 ? rc : 1 ))
fi
echo "run-target: $(basename "$bin"): no finding in ${seconds}s" >&2
