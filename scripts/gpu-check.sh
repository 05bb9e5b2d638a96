#!/usr/bin/env bash
# The prepared device check: every GPU check of scout in one run of at most
# 8 minutes on one GPU, over an existing build (it builds nothing).
#
#   scripts/gpu-check.sh [--out DIR] [--dry] [--build DIR] [--seed N] [--budget S]
#
# Writes DIR/gpu-check.json (schemas/gpu-check.schema.json), gpu-check.txt,
# gpu-check.log (every command it ran, with its output) and gpu-check-work.tar.gz
# (gtest JSON, NCCL timings, Flight Recorder dumps); DIR defaults to $OUT, else
# ./gpu-check-out. Without a
# GPU (no /dev/nvidia*, nvidia-smi fails, or --dry) only the CPU references
# run and each GPU check says why it was skipped. Exit 0: no check failed;
# 1: a check failed; 2: usage; 124: the 8-minute limit was hit (the summary
# holds every check finished by then).
#
# On the device machine (the `run` tool, 64 MiB carried at most): build here
# (scripts/build.sh), pack stripped programs and the Debian libraries they
# link (scripts/gpu-check-pack.sh -> .gpu-carry/, git-ignored), then
#   run(command="scripts/gpu-check.sh --build .gpu-carry/build", carry=[".gpu-carry"], timeout_s=540)
# .gpu-carry/libs goes on LD_LIBRARY_PATH here when present. The torch parts
# use $SCOUT_GPU_PYTHON, else <repo>/.venv/bin/python, else python3 (the device
# image's python3 holds a CUDA torch; the 5 GB venv cannot be carried).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -d "$root/.gpu-carry/libs" ]; then
  export LD_LIBRARY_PATH="$root/.gpu-carry/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
py=/usr/bin/python3
[ -x "$py" ] || py="$(command -v python3)"
if [ -z "$py" ]; then
  echo "gpu-check.sh: error: no python3; the check's driver is a Python 3 script; install python3" >&2
  exit 2
fi
exec timeout -k 10 480 "$py" "$root/scripts/gpu_check.py" "$@"
