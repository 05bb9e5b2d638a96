// CRC-32 then tensor word sum over the same block (verify-ckpt's walk_piece)
// against the fused one-pass kernel (crc32_and_partial_sum), single thread, at
// block sizes from 4 KiB to 256 KiB, cache-hot (one block, over and over) and
// streaming (a buffer much larger than the last-level cache walked block by
// block), with a memory-stream reference (a read of the same large buffer,
// 64-byte loads XORed together) measured in the same run. Prints GB/s (the
// median of --repeat runs) and the ratio to the stream reference. Not a
// Google Benchmark: run it directly.
//
//   build/bench/crc_hash_fuse_bench [--repeat 7] [--mib 512]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lib/hash/crc32.hpp"
#include "lib/hash/tensor_hash.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using scout::hash::CrcAndSum;
using scout::hash::FusedKernel;

volatile std::uint64_t g_sink;

double seconds_of(auto&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Rate {
  double gbps;   // median GB/s
  double best;   // fastest run's GB/s
  double ratio;  // median over the runs of (this run's GB/s / the reference's GB/s in the run just before)
};

// GB/s of `bytes` per run of `fn`, `repeat` runs (after one warm-up), each
// right after a run of the reference `ref` over `ref_bytes`: the pairs' ratios
// move less with the machine's load than the two medians.
Rate rate(int repeat, std::size_t bytes, auto&& fn, std::size_t ref_bytes, auto&& ref) {
  fn();
  std::vector<double> g, r;
  for (int i = 0; i < repeat; ++i) {
    const double tr = seconds_of(ref), t = seconds_of(fn);
    g.push_back(static_cast<double>(bytes) / t / 1e9);
    r.push_back((static_cast<double>(bytes) / t) / (static_cast<double>(ref_bytes) / tr));
  }
  const double best = *std::max_element(g.begin(), g.end());
  return {median(g), best, median(r)};
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) std::uint64_t read_stream(const std::byte* p, std::size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a;
  for (std::size_t i = 0; i + 64 <= n; i += 64) {
    a = _mm256_xor_si256(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_xor_si256(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
  }
  a = _mm256_xor_si256(a, b);
  return static_cast<std::uint64_t>(_mm256_extract_epi64(a, 0) ^ _mm256_extract_epi64(a, 3));
}
#else
std::uint64_t read_stream(const std::byte* p, std::size_t n) {
  std::uint64_t a = 0;
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    a ^= w;
  }
  return a;
}
#endif

// The walk over `n` bytes at `p` in blocks of `block`, as walk_piece does with one slice covering the piece.
std::uint64_t walk(const std::byte* p, std::size_t n, std::size_t block, int mode) {
  std::uint32_t crc = 0;
  std::uint64_t sum = 0;
  for (std::size_t b = 0; b < n; b += block) {
    const std::span<const std::byte> s(p + b, std::min(block, n - b));
    switch (mode) {
      case 0:
        crc = scout::hash::crc32(s, crc);
        break;
      case 1:
        sum ^= scout::hash::partial_sum(s, b / 8);
        break;
      case 2:
        crc = scout::hash::crc32(s, crc);
        sum ^= scout::hash::partial_sum(s, b / 8);
        break;
      default: {
        const CrcAndSum r = scout::hash::crc32_and_partial_sum_with(FusedKernel::vpclmul512, s, crc, b / 8);
        crc = r.crc;
        sum ^= r.sum;
      }
    }
  }
  return sum ^ crc;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 7;
  std::size_t mib = 512;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--repeat") repeat = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--mib") mib = std::strtoul(argv[i + 1], nullptr, 10);
  }
  const std::size_t big = mib << 20;
  std::vector<std::byte> buf(big);
  std::mt19937_64 rng(1);
  for (std::size_t i = 0; i + 8 <= big; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(buf.data() + i, &v, 8);
  }
  const bool fused = scout::hash::fused_kernel_available(FusedKernel::vpclmul512);
  std::printf("hash kernel %s, fused kernel %s, repeat %d, stream buffer %zu MiB\n",
              std::string(scout::hash::kernel_name(scout::hash::active_kernel())).c_str(),
              fused ? "vpclmul512" : "absent (the fused rows run the separate calls)", repeat, mib);
  // The reference: a read of 64 MiB of the big buffer, each run the next 64 MiB (so no run finds it cached).
  const std::size_t ref_bytes = std::size_t{64} << 20;
  std::size_t ref_at = 0;
  auto ref = [&] {
    g_sink = read_stream(buf.data() + ref_at, ref_bytes);
    ref_at = (ref_at + ref_bytes) % (big - ref_bytes + 1);
  };
  const Rate alone = rate(repeat, ref_bytes, ref, ref_bytes, ref);
  std::printf("memory-stream reference (a read of 64 MiB, 64-byte lines XORed): median %.1f GB/s, best %.1f\n",
              alone.gbps, alone.best);
  std::printf(
      "each row: median GB/s [best], and median of (GB/s / the reference's, measured just before each run)\n\n");
  const char* names[] = {"crc only", "hash only", "crc then hash", "fused"};
  std::printf("%-7s %-14s %18s %8s %18s %8s\n", "block", "pass", "hot GB/s [best]", "hot/ref", "stream GB/s [best]",
              "strm/ref");
  const std::size_t walked = big;
  for (std::size_t block : {std::size_t{4} << 10, std::size_t{16} << 10, std::size_t{32} << 10, std::size_t{64} << 10,
                            std::size_t{256} << 10}) {
    for (int mode = 0; mode < 4; ++mode) {
      // Hot: the same block, over and over, 32 MiB of work per run.
      const std::size_t reps = std::max<std::size_t>(1, (std::size_t{32} << 20) / block);
      const Rate hot = rate(
          repeat, reps * block,
          [&] {
            std::uint64_t x = 0;
            for (std::size_t r = 0; r < reps; ++r) x ^= walk(buf.data(), block, block, mode);
            g_sink = x;
          },
          ref_bytes, ref);
      const Rate stream = rate(
          repeat, walked, [&] { g_sink = walk(buf.data(), walked, block, mode); }, ref_bytes, ref);
      std::printf("%-7s %-14s %8.1f [%6.1f] %8.2f %8.1f [%6.1f] %8.2f\n", (std::to_string(block >> 10) + "KiB").c_str(),
                  names[mode], hot.gbps, hot.best, hot.ratio, stream.gbps, stream.best, stream.ratio);
    }
  }
  return 0;
}
