// Fuzz target: the hash manifest reader (DIR/scout-ckpt.json), the layout it
// implies, and the comparison of the manifest with its own digests.
#include "lib/checkpoint/manifest.hpp"

#include <set>

#include "fuzz/targets/fuzz_support.hpp"

using namespace scout;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::write_scratch(checkpoint::k_manifest_file_name, data, size);
  auto m = checkpoint::read_manifest(fuzz::scratch_dir());
  if (!m) {
    SCOUT_FUZZ_CHECK(m.error().code == ExitCode::bad_input);
    return 0;
  }
  SCOUT_FUZZ_CHECK(!m->files.empty());
  auto layout = checkpoint::layout_from_manifest(*m);
  std::size_t files = 0;
  for (const auto& set : layout.sets) files += set.files.size();
  SCOUT_FUZZ_CHECK(files == m->files.size());
  std::vector<checkpoint::FileDigest> digests;
  for (const auto& f : m->files) digests.push_back(f.digest);
  auto same = checkpoint::compare_with_manifest(*m, digests);
  // A manifest compared with its own digests agrees (where no path repeats:
  // then one file's digests would stand for another's).
  std::set<std::string> paths;
  for (const auto& f : m->files) paths.insert(f.digest.path);
  if (paths.size() == m->files.size()) SCOUT_FUZZ_CHECK(same.ok() && same->empty());
  return 0;
}
