#!/usr/bin/env bash
# Installs every Debian package scout's build, tests, benchmarks and demo need,
# then torch 2.x from PyPI into a project-local virtual environment
# ($SCOUT_VENV, default <repo>/.venv): scout's LibTorch module is built against
# it and the trainers of the tests and the demo run on it. Idempotent and fast
# when everything is already there (no apt-get update, no pip run then). SCOUT_SKIP_TORCH2=1 skips the venv.
# --demo: only what scripts/demo.sh needs (the build's packages and torch 2.x; not the fuzz, format, deploy,
# etcd and Debian torch packages of the tests, nor the venv's etcd and framework packages). Run without it later
# for the tests: it installs the rest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
demo=0
case "${1:-}" in
  "") ;;
  --demo) demo=1 ;;
  -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "install-deps: error: unknown argument '$1' (expected --demo or nothing)" >&2; exit 2 ;;
esac

# What the build needs (all scripts/demo.sh installs: --demo).
packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libboost-dev libssl-dev
  libgloo-dev googletest libgtest-dev libgmock-dev libbenchmark-dev libvalijson-dev libxxhash-dev python3-venv
)
if [ "$demo" != 1 ]; then
  # The tests' and benchmarks' tools: numpy and jsonschema under /usr/bin/python3, xxhsum, ip/tc, ps.
  packages+=(python3-numpy python3-jsonschema xxhash iproute2 procps)
  # The fuzz targets (fuzz/, scripts/build-fuzz.sh): clang 14 and its libFuzzer,
  # ASan and UBSan runtimes (libclang-rt-14-dev).
  packages+=(clang libclang-rt-14-dev)
  # The format check (scripts/check-format.sh, run by scripts/test.sh): clang-format 14.
  packages+=(clang-format)
  # The deployment examples' test (tests/integration/test_deploy.py): YAML parsing of
  # docs/deploy/k8s-sidecar.yaml, systemd-analyze verify of docs/deploy/scout-observe@.service.
  packages+=(python3-yaml systemd)
  # The replicated rendezvous store (--store etcd://, lib/transport/etcd_store.cpp): the tests start
  # their own etcd clusters (tests/integration/test_etcd_store.py) and ask etcdctl who leads.
  packages+=(etcd-server etcd-client)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present" >&2
else
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# --- torch 2.x (PyPI) in an isolated venv -----------------------------------
# The pin is the newest torch 2.x that scout is tested with. Which wheel
# (SCOUT_TORCH_WHEEL=auto|cpu|cuda, default auto): the CUDA wheel (PyPI's
# default) where an NVIDIA driver is present, else the CPU wheel from
# download.pytorch.org (about a sixth of the size); where that index cannot be
# reached, PyPI's CUDA wheel, which also runs without a GPU (gloo on CPU).
# pip's cache (~/.cache/pip) is kept so that a fresh clone reinstalls from it.
TORCH2_PIN="2.15.0"
TORCH_CPU_INDEX="https://download.pytorch.org/whl/cpu"
venv="${SCOUT_VENV:-$root/.venv}"
if [ "${SCOUT_SKIP_TORCH2:-0}" = "1" ]; then
  echo "install-deps: SCOUT_SKIP_TORCH2=1: no torch $TORCH2_PIN venv (torch 2.x tests will skip)" >&2
  exit 0
fi
# Without SCOUT_VENV, <repo>/.venv is a link to one venv per torch pin under ~/.cache/scout (SCOUT_VENV_CACHE), shared
# by every clone on this machine: a fresh clone spent ~100 s unpacking the same 5 GB of torch again. The steps below
# install what it lacks, one clone at a time (a lock). SCOUT_VENV=<dir> keeps a venv of its own.
if [ -z "${SCOUT_VENV:-}" ] && [ ! -e "$venv" ]; then
  shared="${SCOUT_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/scout}/venv-torch-$TORCH2_PIN"
  mkdir -p "$shared"
  [ -L "$venv" ] && rm -f "$venv"  # a link whose venv was removed
  ln -s "$shared" "$venv"
  echo "install-deps: $venv -> $shared (shared by this machine's clones; SCOUT_VENV=<dir> for a venv of its own)" >&2
fi
if [ -L "$venv" ]; then
  exec 9>"$(readlink -f "$venv").lock"
  flock -w 1800 9 || { echo "install-deps: error: another install into $venv held its lock for 30 min" >&2; exit 1; }
fi
have_pin() {
  # importlib.metadata reads the installed version without importing torch (fast).
  [ -x "$venv/bin/python" ] && "$venv/bin/python" - "$TORCH2_PIN" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
sys.exit(0 if m.version("torch").split("+")[0] == sys.argv[1] else 1)
PY
}
if have_pin; then
  echo "install-deps: torch $TORCH2_PIN present in $venv" >&2
else
  start=$(date +%s)
  echo "install-deps: installing torch $TORCH2_PIN into $venv (minutes, several GB)" >&2
  if [ ! -x "$venv/bin/python" ]; then
    /usr/bin/python3 -m venv "$(readlink -f "$venv")"
  fi
  wheel="${SCOUT_TORCH_WHEEL:-auto}"
  case "$wheel" in
    auto) if [ -e /dev/nvidiactl ] || nvidia-smi -L >/dev/null 2>&1; then wheel=cuda; else wheel=cpu; fi ;;
    cpu|cuda) ;;
    *) echo "install-deps: error: SCOUT_TORCH_WHEEL=$wheel: expected auto, cpu or cuda" >&2; exit 2 ;;
  esac
  if [ "$wheel" = cpu ]; then
    echo "install-deps: no NVIDIA driver here: the CPU wheel from $TORCH_CPU_INDEX (SCOUT_TORCH_WHEEL=cuda for the other)" >&2
    if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check --timeout 15 --retries 1 \
        --index-url "$TORCH_CPU_INDEX" "torch==$TORCH2_PIN" >&2; then
      echo "install-deps: $TORCH_CPU_INDEX could not be used (see pip above): PyPI's CUDA wheel instead (it runs" \
        "without a GPU too, several GB more)" >&2
      wheel=cuda
    fi
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==$TORCH2_PIN" numpy >&2
  have_pin || { echo "install-deps: error: torch $TORCH2_PIN did not install into $venv; see pip's output above" >&2; exit 1; }
  echo "install-deps: torch $TORCH2_PIN installed in $(( $(date +%s) - start )) s, $(du -sh "$venv/" | cut -f1) in $venv" >&2
fi

if [ "$demo" = 1 ]; then exit 0; fi

# --- python-etcd (PyPI) in the same venv ---------------------------------------
# torchrun's etcd rendezvous (--rdzv-backend etcd-v2) imports it: the multi-node
# tests run torchrun on the etcd cluster they start (tests/integration/
# multinode_job.py, observer store "etcd-v2"). Pinned, --no-deps so pip never
# touches the pinned torch; about 1 MB.
etcd_pins=(python-etcd==0.4.5 dnspython==2.9.2 urllib3==2.8.0)
if "$venv/bin/python" -c "import etcd" 2>/dev/null; then
  echo "install-deps: python-etcd present in $venv" >&2
elif ! "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "${etcd_pins[@]}" >&2; then
  echo "install-deps: error: python-etcd did not install into $venv (torchrun's etcd-v2 rendezvous needs it); see pip's output above" >&2
  exit 1
fi

# --- Megatron-Core and DeepSpeed (PyPI) in the same venv --------------------
# For tests/integration/test_torch2_frameworks.py (the publisher finds the mesh
# from their parallel state). Pure Python, pinned, installed with --no-deps so
# pip never replaces the pinned torch: the packages they import are listed
# here. DeepSpeed is an sdist: built without its C++/CUDA ops (DS_BUILD_OPS=0)
# against the venv's torch (--no-build-isolation). About 15 s and 45 MB. A
# failure here is a warning, not an error: those tests then skip with the
# reason. SCOUT_SKIP_FRAMEWORKS=1 skips this step.
frameworks=(
  megatron-core==0.16.1 packaging==26.4
  deepspeed==0.19.8 einops==0.8.2 hjson==3.1.0 msgpack==1.2.4 psutil==7.2.2 py-cpuinfo==9.0.0
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 tqdm==4.70.1
)
if [ "${SCOUT_SKIP_FRAMEWORKS:-0}" = "1" ]; then
  echo "install-deps: SCOUT_SKIP_FRAMEWORKS=1: no Megatron-Core / DeepSpeed (their tests will skip)" >&2
  exit 0
fi
missing_pins() {
  "$venv/bin/python" - "${frameworks[@]}" <<'PY'
import importlib.metadata as m, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    try:
        if m.version(name) == version:
            continue
    except m.PackageNotFoundError:
        pass
    print(pin)
PY
}
mapfile -t want < <(missing_pins)
if [ ${#want[@]} -eq 0 ]; then
  echo "install-deps: Megatron-Core and DeepSpeed present in $venv" >&2
  exit 0
fi
start=$(date +%s)
before=$(du -sk "$venv/" | cut -f1)
echo "install-deps: installing ${want[*]} into $venv" >&2
if ! DS_BUILD_OPS=0 DS_ACCELERATOR=cpu "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
    --no-build-isolation "${want[@]}" >&2; then
  echo "install-deps: warning: Megatron-Core / DeepSpeed did not install (see pip above); test_torch2_frameworks will skip" >&2
  exit 0
fi
mapfile -t left < <(missing_pins)
if [ ${#left[@]} -ne 0 ]; then
  echo "install-deps: warning: still missing after pip: ${left[*]}; test_torch2_frameworks will skip" >&2
  exit 0
fi
echo "install-deps: Megatron-Core and DeepSpeed installed in $(( $(date +%s) - start )) s," \
  "$(( ($(du -sk "$venv/" | cut -f1) - before) / 1024 )) MB in $venv" >&2
