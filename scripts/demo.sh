#!/usr/bin/env bash
# Sets up, builds and runs the hang demo: a local 4-rank PyTorch DDP job
# (gloo, CPU) on torch 2.x (the project venv, $SCOUT_VENV or <repo>/.venv)
# with the scout publisher; one random rank (seed printed; set
# SCOUT_DEMO_SEED to repeat) stops itself before a collective, the others wait
# inside it; `scout probe-hang` names the stopped rank. Everything it starts
# is stopped and removed on exit.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Where the time goes, printed at the end: installing, building (only what the demo runs: the scout binary,
# its network module and the publisher), the job until it hangs, and the verdict.
t0=$(date +%s.%N)
"$root/scripts/install-deps.sh" --demo  # the tests need more: scripts/install-deps.sh without --demo
t_deps=$(date +%s.%N)
# A build of its own (build-demo/, or $SCOUT_BUILD_DIR), compiled for a quick first verdict: -O1 without debug
# information, and without the CUDA kernels where no NVIDIA driver is present. Measured on scout_core's largest batch:
# 35 s of CPU at the tests' -O2 -g1, 23 s so. scripts/test.sh builds build/ as before.
build="${SCOUT_BUILD_DIR:-$root/build-demo}"
demo_flags=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG")
if ! command -v nvidia-smi >/dev/null 2>&1; then demo_flags+=(-DSCOUT_WITH_CUDA=OFF); fi
configure=()
[ -f "$build/CMakeCache.txt" ] || configure=("${demo_flags[@]}")
SCOUT_BUILD_DIR="$build" SCOUT_BUILD_TARGETS="${SCOUT_BUILD_TARGETS:-scout scout_publisher}" \
  "$root/scripts/build.sh" "${configure[@]}"
t_build=$(date +%s.%N)
scout="$build/bin/scout"
say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
venv="${SCOUT_VENV:-$root/.venv}"
if [ -x "$venv/bin/python" ]; then
  python="$venv/bin/python"
else
  echo "demo: error: no torch 2.x venv at $venv; run scripts/install-deps.sh (or set SCOUT_VENV)" >&2
  exit 5
fi
torch_version="$("$python" -c 'import importlib.metadata as m; print(m.version("torch"))')"

world=4
seed="${SCOUT_DEMO_SEED:-$(( (RANDOM << 15) | RANDOM ))}"
fault_rank=$(( seed % world ))
fault_step=$(( 2 + (seed / world) % 3 ))
job="demo-$$-$seed"
port="$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
logdir="$(mktemp -d /tmp/scout-demo-XXXXXX)"
pids=()

cleanup() {
  exec 2>/dev/null  # bash would report each killed trainer as "Killed"
  for pid in "${pids[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -f /dev/shm/scout."$job".*
  rm -rf "$logdir"
}
trap cleanup EXIT INT TERM

say "seed $seed: starting a $world-rank DDP job '$job' on torch $torch_version; rank $fault_rank will stop before its collective at step $fault_step"
for rank in $(seq 0 $((world - 1))); do
  RANK=$rank WORLD_SIZE=$world LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port SCOUT_JOB="$job" \
  SCOUT_PUBLISHER_LIB="$build/lib/libscout_publisher.so" PYTHONPATH="$root/integrations/python" OMP_NUM_THREADS=1 \
    "$python" "$root/tests/integration/trainers/ddp_trainer.py" --steps 8 --fault stop-before-collective \
      --fault-rank "$fault_rank" --fault-step "$fault_step" --pg-timeout 300 >"$logdir/rank$rank.log" 2>&1 &
  pids+=($!)
done

t_job=$(date +%s.%N)
say "waiting for the job to hang (probing every second until progress has been silent for 3 s)"
threshold=3
rc=0
for _ in $(seq 1 180); do
  sleep 1
  rc=0
  "$scout" probe-hang --job "$job" --threshold "$threshold" --format json >"$logdir/verdict.json" 2>"$logdir/probe.err" || rc=$?
  # 0: still training (or starting up); 5: no record yet. Anything else is a verdict.
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then break; fi
done

t_hung=$(date +%s.%N)
say "\$ scout probe-hang --job $job --threshold $threshold --format text"
"$scout" probe-hang --job "$job" --threshold "$threshold" --format text || true
t_verdict=$(date +%s.%N)
named="$(/usr/bin/python3 -c 'import json, sys; print(",".join(str(s["rank"]) for s in json.load(open(sys.argv[1]))["suspects"]))' "$logdir/verdict.json")"
say "injected: rank $fault_rank at step $fault_step; scout named: rank ${named:-none} (exit $rc)"
/usr/bin/python3 - "$t0" "$t_deps" "$t_build" "$t_job" "$t_hung" "$t_verdict" <<'PY'
import sys
t = [float(x) for x in sys.argv[1:]]
parts = ("installing dependencies", "building scout and the publisher", "starting the job",
         "the job training until it hangs, probed every second", "the verdict")
print("demo: where the time went: " + "; ".join(f"{p} {b - a:.1f} s" for p, a, b in zip(parts, t, t[1:])) +
      f"; in all {t[-1] - t[0]:.1f} s")
PY
[ "$named" = "$fault_rank" ]
