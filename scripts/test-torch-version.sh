#!/usr/bin/env bash
# Runs the publisher's torch 2.x tests under another torch 2.x from PyPI (issue 38: say which torch 2.x the
# publisher supports, and test the oldest and the newest that install here).
#
#   scripts/test-torch-version.sh 2.0.1            # a venv for it in /tmp/scout-torch-2.0.1 (kept, reused)
#   SCOUT_TORCH_VENV=/path scripts/test-torch-version.sh 2.0.1
#
# torch 2.15 and later: the publisher captures through ProcessGroup hooks; 2.0 to 2.14 (and 1.13) through
# wrapped torch.distributed functions. The trainers of the torch 2.x matrix (test_probe_hang.FaultLocalization,
# test_records.CleanJob, test_records.FaultRecords) and the straggler's torch 2.x and clean-run tests run under
# that venv's python (SCOUT_VENV, SCOUT_TEST_TORCH=2); scout itself is the build's (scripts/build.sh first).
# Several GB of download the first time (the wheel and its CUDA libraries); exit 0 only when every test passed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SCOUT_BUILD_DIR:-$root/build}"
version="${1:-}"
if [[ ! "$version" =~ ^2\.[0-9]+(\.[0-9]+)?$ ]]; then
  echo "usage: scripts/test-torch-version.sh 2.X[.Y]   (a torch 2.x version on PyPI, e.g. 2.0.1)" >&2
  exit 2
fi
if [ ! -x "$build/bin/scout" ]; then
  echo "test-torch-version: no $build/bin/scout; run scripts/build.sh first" >&2
  exit 5
fi
venv="${SCOUT_TORCH_VENV:-/tmp/scout-torch-$version}"
start=$(date +%s)
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('torch').split('+')[0] != '$version')" 2>/dev/null; then
  echo "test-torch-version: installing torch $version into $venv (minutes, several GB)" >&2
  python3 -m venv "$venv"
  # numpy 1.x: torch before 2.3 was built against it.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==$version" "numpy<2" >&2
fi
echo "test-torch-version: torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') in $venv" \
  "($(( $(date +%s) - start )) s to set up)" >&2
cd "$root/tests/integration"
SCOUT_VENV="$venv" SCOUT_TEST_TORCH=2 SCOUT_BIN="$build/bin/scout" SCOUT_BUILD_DIR="$build" SCOUT_SOURCE_DIR="$root" \
  timeout 1800 /usr/bin/python3 -m unittest -v test_probe_hang.FaultLocalization test_records.CleanJob \
  test_records.FaultRecords test_straggler.StragglerOnRealJobs.test_compute_straggler_slowed_by_the_trainer \
  test_straggler.StragglerOnRealJobs.test_clean_run_names_no_one_and_bench_places_probes_like_the_ranks
