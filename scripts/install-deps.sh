#!/usr/bin/env bash
# Installs every Debian package scout's build, tests, benchmarks and demo need.
# Idempotent and fast when everything is already there (no apt-get update then).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libboost-dev libssl-dev
  libgloo-dev libtorch-dev python3-torch python3-numpy
  googletest libgtest-dev libgmock-dev libbenchmark-dev libvalijson-dev python3-jsonschema
  libxxhash-dev xxhash iproute2 procps
)
# The fuzz targets (fuzz/, scripts/build-fuzz.sh): clang 14 and its libFuzzer,
# ASan and UBSan runtimes (libclang-rt-14-dev).
packages+=(clang libclang-rt-14-dev)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present" >&2
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
