#include "lib/topology/mesh.hpp"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "tests/unit/test_seed.hpp"

namespace scout {
namespace {

using Groups = std::vector<std::vector<std::int64_t>>;

TEST(Mesh, PaperExampleReplicaGroups) {
  auto mesh = Mesh::parse("dp=4,tp=2");
  ASSERT_TRUE(mesh.ok()) << mesh.error().message();
  EXPECT_EQ(mesh->world_size(), 8);
  EXPECT_EQ(mesh->peer_kind(), PeerKind::replica);
  EXPECT_EQ(mesh->peer_groups(), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(mesh->process_groups(Dim::tp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
}

TEST(Mesh, NoReplicationGivesStateShardGroups) {
  auto mesh = Mesh::parse("dp=1,fsdp=4,tp=2");
  ASSERT_TRUE(mesh.ok());
  EXPECT_EQ(mesh->peer_kind(), PeerKind::state_shard);
  EXPECT_EQ(mesh->peer_groups(), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(mesh->process_groups(Dim::fsdp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
}

TEST(Mesh, WrittenOrderIsPlacementOrder) {
  auto mesh = Mesh::parse("tp=2,dp=4");  // dp varies fastest now
  ASSERT_TRUE(mesh.ok());
  EXPECT_EQ(mesh->peer_groups(), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  auto reordered = Mesh::parse("dp=4,tp=2", "tp,dp");
  ASSERT_TRUE(reordered.ok());
  EXPECT_EQ(reordered->peer_groups(), mesh->peer_groups());
}

TEST(Mesh, RankCoordinateRoundTripOnRandomMeshes) {
  unsigned seed = test_support::test_seed32();
  std::mt19937 rng(seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  for (int trial = 0; trial < 50; ++trial) {
    Coords sizes;
    for (auto& s : sizes) s = 1 + static_cast<std::int64_t>(rng() % 3);
    std::vector<Dim> order(k_all_dims.begin(), k_all_dims.end());
    std::shuffle(order.begin(), order.end(), rng);
    auto mesh = Mesh::make(sizes, order);
    ASSERT_TRUE(mesh.ok());
    std::set<std::int64_t> covered;
    for (std::int64_t r = 0; r < mesh->world_size(); ++r) {
      EXPECT_EQ(mesh->rank(mesh->coords(r)), r);
      // Every rank's peer group contains it and has the replication size.
      auto g = mesh->peer_group(r);
      EXPECT_TRUE(std::binary_search(g.begin(), g.end(), r));
      std::int64_t expect = mesh->size(Dim::dp) > 1 ? mesh->size(Dim::dp) : mesh->size(Dim::fsdp);
      EXPECT_EQ(static_cast<std::int64_t>(g.size()), expect);
      for (auto m : g) {
        auto a = mesh->coords(r), b = mesh->coords(m);
        for (Dim d : {Dim::tp, Dim::pp, Dim::cp, Dim::ep}) EXPECT_EQ(a[static_cast<int>(d)], b[static_cast<int>(d)]);
        if (mesh->size(Dim::dp) > 1) EXPECT_EQ(a[static_cast<int>(Dim::fsdp)], b[static_cast<int>(Dim::fsdp)]);
      }
    }
    for (const auto& g : mesh->peer_groups()) covered.insert(g.begin(), g.end());
    EXPECT_EQ(static_cast<std::int64_t>(covered.size()), mesh->world_size());
  }
}

TEST(Mesh, PlacementIsFoundFromRankCoordinatesInAnyOrder) {
  // Every written order of up to four dims: the recorded coordinates give back a mesh that places
  // every rank where it is, and a coordinate table that fits no row-major order gives none.
  const auto seed = test_support::test_seed();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  const std::vector<std::string> specs = {"dp=2,pp=2,tp=2", "dp=2,tp=2,pp=2",      "pp=2,dp=3,tp=2",
                                          "tp=4,dp=2",      "dp=2,cp=2,tp=2,pp=2", "ep=2,dp=3"};
  for (const auto& spec : specs) {
    auto written = *Mesh::parse(spec);
    std::vector<Coords> coords;
    for (std::int64_t r = 0; r < written.world_size(); ++r) coords.push_back(written.coords(r));
    auto found = mesh_from_coordinates(written.sizes(), [&](const Mesh& m) {
      for (std::int64_t r = 0; r < written.world_size(); ++r)
        if (m.rank(coords[static_cast<std::size_t>(r)]) != r) return false;
      return true;
    });
    ASSERT_TRUE(found) << spec;
    for (std::int64_t r = 0; r < written.world_size(); ++r) EXPECT_EQ(found->coords(r), written.coords(r)) << spec;
    // Two ranks' coordinates swapped: no placement order fits.
    std::uniform_int_distribution<std::int64_t> pick(1, written.world_size() - 1);
    const auto a = pick(rng);
    std::swap(coords[0], coords[static_cast<std::size_t>(a)]);
    EXPECT_FALSE(mesh_from_coordinates(written.sizes(),
                                       [&](const Mesh& m) {
                                         for (std::int64_t r = 0; r < written.world_size(); ++r)
                                           if (m.rank(coords[static_cast<std::size_t>(r)]) != r) return false;
                                         return true;
                                       }))
        << spec << " swapped 0 and " << a;
  }
}

TEST(Mesh, RejectsBadSpecs) {
  for (const char* bad : {"", "dp=0", "dp=-1", "xx=2", "dp=2,dp=2", "dp", "dp=two", "dp=4,,tp=2", "dp=65536,tp=65536",
                          "dp=99999999999999999999"}) {
    auto mesh = Mesh::parse(bad);
    EXPECT_FALSE(mesh.ok()) << bad;
    if (!mesh.ok()) {
      EXPECT_EQ(mesh.error().code, ExitCode::usage) << bad;
      EXPECT_FALSE(mesh.error().what.empty());
    }
  }
  EXPECT_FALSE(Mesh::parse("dp=2", "dp,zz").ok());
  EXPECT_FALSE(Mesh::parse("dp=2", "dp,dp").ok());
}

TEST(NodeMap, RanksPerNodeAndHosts) {
  auto by_count = NodeMap::by_ranks_per_node(8, 4);
  ASSERT_TRUE(by_count.ok());
  EXPECT_EQ(by_count->node_name(3), "node0");
  EXPECT_EQ(by_count->node_name(4), "node1");
  EXPECT_FALSE(NodeMap::by_ranks_per_node(8, 3).ok());
  EXPECT_FALSE(NodeMap::by_ranks_per_node(8, 0).ok());

  auto per_node = NodeMap::from_hosts(8, {"a", "b"});
  ASSERT_TRUE(per_node.ok());
  EXPECT_EQ(per_node->node_name(5), "b");
  auto per_rank = NodeMap::from_hosts(4, {"a", "b", "a", "b"});
  ASSERT_TRUE(per_rank.ok());
  EXPECT_EQ(per_rank->node_count(), 2);
  EXPECT_EQ(per_rank->node_index(2), 0);
  EXPECT_FALSE(NodeMap::from_hosts(8, {"a", "b", "c"}).ok());
  EXPECT_FALSE(NodeMap::from_hosts(2, {"a", ""}).ok());
}

}  // namespace
}  // namespace scout
