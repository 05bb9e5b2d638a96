#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs into .gpu-carry/ (git-ignored) for the
# device machine, whose `run` tool carries at most 64 MiB and whose image has
# neither Debian's libraries nor this build's venv:
#   .gpu-carry/build/{bin,lib,tests,bench}/...  stripped copies of the programs (a
#                                              RelWithDebInfo scout alone is ~160 MB)
#   .gpu-carry/libs/                           the Debian shared libraries they link
#                                              (fmt, spdlog, Gloo, ...) but no glibc,
#                                              libstdc++, LibTorch or CUDA driver library
# Then:  run(command="scripts/gpu-check.sh --build .gpu-carry/build", carry=[".gpu-carry"], timeout_s=540)
# The LibTorch modules are packed too but cannot load there without their
# LibTorch (the venv's torch 2.x wheel, far over 64 MiB):
# the replay checks then fail with the loader's reason.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${SCOUT_BUILD_DIR:-$root/build}"
dest="$root/.gpu-carry"
programs=(bin/scout bin/libscout_net.so bin/libscout_torch.so lib/libscout_publisher.so
  lib/libscout_torch_hooks.so tests/scout_gpu_tests bench/tensor_hash_bench)
rm -rf "$dest"
mkdir -p "$dest/build" "$dest/libs"
for p in "${programs[@]}"; do
  if [ ! -e "$build/$p" ]; then
    echo "gpu-check-pack.sh: error: $build/$p is missing; it is not built; run scripts/build.sh first" >&2
    exit 4
  fi
  mkdir -p "$dest/build/$(dirname "$p")"
  strip --strip-debug -o "$dest/build/$p" "$build/$p"
done
# The libraries the programs link, as this machine resolves them, minus those every image has or that are too large.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libstdc\+\+|libgcc_s|libtorch|libc10|libcuda\.so|libnvidia|libcudart|libnccl|libgomp|libcaffe2|libshm)'
# Only the programs that can run there: the LibTorch modules' closure (Debian's LibTorch pulls OpenCV, GDAL,
# ...) is hundreds of MiB and useless without LibTorch itself.
for p in bin/scout bin/libscout_net.so lib/libscout_publisher.so tests/scout_gpu_tests bench/tensor_hash_bench; do
  ldd "$build/$p" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ ! "$name" =~ $skip ]]; then cp -L "$path" "$dest/libs/$name"; fi
done
du -sh "$dest" >&2
size=$(du -sb "$dest" | cut -f1)
if [ "$size" -gt $((60 * 1024 * 1024)) ]; then
  echo "gpu-check-pack.sh: error: .gpu-carry is $((size >> 20)) MiB; the run tool carries 64 MiB with the working tree; leave out the LibTorch modules or the largest libraries" >&2
  exit 5
fi
