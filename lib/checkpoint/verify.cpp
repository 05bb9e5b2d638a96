#include "lib/checkpoint/verify.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

namespace scout::checkpoint {

Result<std::vector<FileDigest>> digest_files(const std::vector<std::string>& paths, unsigned jobs,
                                             const VerifyProgressFn& progress) {
  const std::size_t n = paths.size();
  // Default: 4 files at once even on fewer cores, so that the last files of
  // a set never leave a core idle (3 files on 2 cores finish together).
  if (jobs == 0) jobs = std::max<unsigned>(std::thread::hardware_concurrency(), 4);
  jobs = static_cast<unsigned>(std::min<std::size_t>(jobs, std::max<std::size_t>(n, 1)));
  std::uint64_t total = 0;
  for (const auto& p : paths) {
    std::error_code ec;
    auto s = std::filesystem::file_size(p, ec);
    if (!ec) total += s;
  }
  // Cores shared among the files in flight: no file's hashers oversubscribe the machine.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned per_file = std::max(1u, cores / jobs);
  std::vector<std::optional<Result<FileDigest>>> results(n);
  std::atomic<std::uint64_t> done_total{0};
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex progress_mutex;
  auto worker = [&] {
    while (!failed.load()) {
      std::size_t i = next.fetch_add(1);
      if (i >= n) return;
      std::uint64_t last = 0;  // this file's bytes already counted; touched by this thread only
      auto r = digest_file(
          paths[i],
          [&](std::uint64_t d) {
            std::uint64_t sum = done_total.fetch_add(d - last, std::memory_order_relaxed) + (d - last);
            last = d;
            if (!progress) return;
            std::lock_guard lock(progress_mutex);
            progress(sum, total);
          },
          per_file);
      if (!r) failed.store(true);
      results[i] = std::move(r);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < jobs; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  std::vector<FileDigest> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!results[i]) continue;  // not started because another file failed
    if (!*results[i]) return results[i]->error();
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!results[i]) return internal_error("a file was skipped without an error");
    out.push_back(std::move(results[i]->value()));
  }
  return out;
}

Result<VerifyReport> verify_layout(const CheckpointLayout& layout, const VerifyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  VerifyReport report;
  report.layout = layout;
  std::vector<std::string> paths;
  for (const auto& set : layout.sets)
    for (const auto& f : set.files) paths.push_back(f.path);
  auto digests = digest_files(paths, options.jobs, options.progress);
  if (!digests) return digests.error();
  report.digests = std::move(*digests);
  for (const auto& d : report.digests) report.bytes_read += d.size;
  std::size_t k = 0;
  for (const auto& set : layout.sets) {
    std::vector<FileDigest> mine(report.digests.begin() + static_cast<std::ptrdiff_t>(k),
                                 report.digests.begin() + static_cast<std::ptrdiff_t>(k + set.files.size()));
    k += set.files.size();
    auto shard = compare_replicas(set, mine);
    if (!shard) return shard.error();
    report.shards.push_back(std::move(*shard));
  }
  if (options.manifest) {
    auto mm = compare_with_manifest(*options.manifest, report.digests);
    if (!mm) return mm.error();
    report.manifest_checked = true;
    report.manifest_mismatches = std::move(*mm);
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace scout::checkpoint
