// Fuzz target: mesh specs (--mesh, SCOUT_MESH, a manifest's mesh) with an
// optional --order on the second line, and the groups derived from them.
#include "lib/topology/mesh.hpp"

#include <set>

#include "fuzz/targets/fuzz_support.hpp"

using namespace scout;

namespace {

// Groups that must cover every rank exactly once.
void check_partition(const std::vector<std::vector<std::int64_t>>& groups, std::int64_t world) {
  std::vector<int> seen(static_cast<std::size_t>(world), 0);
  for (const auto& g : groups)
    for (auto r : g) {
      SCOUT_FUZZ_CHECK(r >= 0 && r < world);
      ++seen[static_cast<std::size_t>(r)];
    }
  for (int s : seen) SCOUT_FUZZ_CHECK(s == 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::size_t nl = text.find('\n');
  std::string_view spec = text.substr(0, nl);
  std::string_view order = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  auto m = Mesh::parse(spec, order);
  if (!m) {
    SCOUT_FUZZ_CHECK(m.error().code == ExitCode::usage || m.error().code == ExitCode::bad_input);
    return 0;
  }
  std::int64_t world = 1;
  for (auto s : m->sizes()) {
    SCOUT_FUZZ_CHECK(s >= 1);
    world *= s;
  }
  SCOUT_FUZZ_CHECK(world == m->world_size() && world < k_max_world_size);
  auto again = Mesh::parse(m->spec());
  SCOUT_FUZZ_CHECK(again.ok() && again->sizes() == m->sizes() && again->spec() == m->spec());
  if (world > 512) return 0;  // the group checks below are quadratic
  for (std::int64_t r = 0; r < world; ++r) SCOUT_FUZZ_CHECK(m->rank(m->coords(r)) == r);
  check_partition(m->peer_groups(), world);
  for (Dim d : k_all_dims) check_partition(m->process_groups(d), world);
  for (std::int64_t per_node : {std::int64_t{1}, std::int64_t{3}, world}) {
    auto nodes = NodeMap::by_ranks_per_node(world, per_node);
    if (nodes) SCOUT_FUZZ_CHECK(nodes->world_size() == world);
  }
  return 0;
}
