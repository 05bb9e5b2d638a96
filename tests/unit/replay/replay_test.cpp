// Pure parts of replay: injection parsing, bit flips, packs, battery
// generation and sharding, the decision over peers' evidence, and the checks
// of recipe files sent between nodes.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "lib/replay/battery.hpp"
#include "lib/replay/evidence.hpp"
#include "lib/replay/exported.hpp"
#include "lib/replay/inject.hpp"
#include "lib/replay/pack.hpp"
#include "lib/replay/recipe_share.hpp"
#include "lib/replay/runner.hpp"

namespace scout::replay {
namespace {

TEST(ReplayInject, ParsesEveryForm) {
  auto a = parse_injection("sdc:peer=2,tensor=param_grad,word=5,bit=63");
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_EQ(a->kind, Injection::Kind::sdc);
  EXPECT_EQ(a->peer, 2);
  EXPECT_EQ(a->tensor, Quantity::param_grad);
  EXPECT_EQ(a->word, 5u);
  EXPECT_EQ(a->bit, 63);
  auto r = parse_injection("sdc:random");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, Injection::Kind::sdc_random);
  auto rs = parse_injection("sdc:random,seed=7");
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->seed, 7u);
  auto s = parse_injection("slow:peer=1,factor=4.5");
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->factor, 4.5);
  auto c = parse_injection("contract:peer=3");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kind, Injection::Kind::contract);
  auto rec = parse_injection("sdc:peer=0,tensor=output,word=0,bit=0,recipe=adamw_step");
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->recipe, "adamw_step");
}

TEST(ReplayInject, RejectsBadSpecsWithUsageErrors) {
  for (const char* bad :
       {"", "sdc", "sdc:peer=1", "sdc:peer=1,tensor=weights,word=0,bit=0", "sdc:peer=1,tensor=output,word=0,bit=64",
        "sdc:peer=-1,tensor=output,word=0,bit=1", "sdc:peer=1,tensor=output,word=x,bit=1", "slow:peer=1",
        "slow:peer=1,factor=1", "slow:peer=1,factor=nan", "slow:peer=1,factor=2,bit=3", "boom:peer=1",
        "sdc:peer=1,peer=2,tensor=output,word=0,bit=0", "sdc:random,peer=1", "slow:random",
        "sdc:peer=1,,tensor=output"}) {
    auto r = parse_injection(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, ExitCode::usage) << bad;
    EXPECT_NE(r.error().message().find("--inject"), std::string::npos);
  }
  auto in = parse_injection("slow:peer=4,factor=2");
  ASSERT_TRUE(in.ok());
  EXPECT_FALSE(validate_injections({*in}, 4).ok());
  EXPECT_TRUE(validate_injections({*in}, 5).ok());
}

TEST(ReplayInject, FlipChangesExactlyOneBitAcrossTensors) {
  std::vector<std::uint8_t> a(16, 0), b(12, 0);  // 2 words + 2 words (the last half)
  std::vector<std::vector<std::uint8_t>*> ts = {&a, &b};
  auto p = flip_bit(ts, 3, 63);  // word 3 = b's second word, bits past 4 bytes fold into the real ones
  ASSERT_TRUE(p);
  EXPECT_EQ(p->tensor, 1u);
  EXPECT_EQ(p->tensor_word, 1u);
  int set = 0;
  for (auto x : a) set += __builtin_popcount(x);
  for (auto x : b) set += __builtin_popcount(x);
  EXPECT_EQ(set, 1);
  auto q = flip_bit(ts, 4, 7);  // wraps to word 0
  ASSERT_TRUE(q);
  EXPECT_EQ(q->word, 0u);
  EXPECT_EQ(a[0], 0x80);
}

TEST(ReplayInject, RandomResolutionIsReproducible) {
  std::vector<RecipeQuantities> rq = {{"a", {Quantity::output, Quantity::param}}, {"b", {Quantity::param_grad}}};
  Injection r;
  r.kind = Injection::Kind::sdc_random;
  r.seed = 42;
  auto x = resolve_random(r, 4, rq), y = resolve_random(r, 4, rq);
  EXPECT_EQ(x.peer, y.peer);
  EXPECT_EQ(x.word, y.word);
  EXPECT_EQ(x.bit, y.bit);
  EXPECT_EQ(x.recipe, y.recipe);
  EXPECT_LT(x.peer, 4);
}

TEST(ReplayPack, RoundTripsAndRejectsDamage) {
  PackedTensor t{"x", DType::f32, {2, 3}, std::vector<std::uint8_t>(24, 7)};
  PackedTensor u{"rng", DType::u64, {2}, std::vector<std::uint8_t>(16, 1)};
  auto bytes = encode_pack({t, u});
  auto back = decode_pack(bytes);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].shape, t.shape);
  EXPECT_EQ((*back)[1].data, u.data);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    auto d = decode_pack(std::span(bytes.data(), cut));
    EXPECT_FALSE(d.ok()) << cut;
  }
  auto extra = bytes;
  extra.push_back(0);
  EXPECT_FALSE(decode_pack(extra).ok());
}

TEST(ReplayBattery, GenerationIsDeterministicAndShardsReassemble) {
  for (const char* id : k_battery_recipes) {
    auto r = battery_recipe(id, "tiny");
    ASSERT_TRUE(r.ok()) << id;
    auto a = generate_inputs(*r, 5), b = generate_inputs(*r, 5), c = generate_inputs(*r, 6);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].data, b[i].data);
    if (a.size() > 1) {
      EXPECT_NE(a[0].data, c[0].data);
    }
    for (std::int64_t peers : {1, 2, 3, 4, 7}) {
      std::vector<std::vector<std::uint8_t>> shards;
      for (std::int64_t p = 0; p < peers; ++p) shards.push_back(param_shard(*r, 5, p, peers));
      auto params = assemble_params(*r, shards);
      ASSERT_TRUE(params.ok()) << id << " " << peers;
      ASSERT_EQ(params->size(), r->params.size());
      for (std::size_t i = 0; i < params->size(); ++i)
        EXPECT_EQ((*params)[i].data, generate_tensor(r->params[i], 5, i).data);
    }
  }
  EXPECT_FALSE(battery_recipe("nope", "tiny").ok());
  EXPECT_FALSE(battery_recipe("adamw_step", "huge").ok());
}

// Evidence of `n` healthy peers for two recipes.
std::vector<std::optional<PeerEvidence>> healthy(int n) {
  std::vector<std::optional<PeerEvidence>> out;
  for (int p = 0; p < n; ++p) {
    PeerEvidence e;
    e.peer = p;
    e.rank = p;
    for (const char* id : {"r1", "r2"}) {
      RecipeEvidence r;
      r.recipe = id;
      r.contract = {{"recipe", id}, {"threads", 1}, {"torch", "1.13"}};
      r.input_hash = 11;
      r.hashes = {{Quantity::output, 100}, {Quantity::param_grad, 200}};
      r.gather_s = 0.010 + 0.0001 * p;
      r.forward_s = 0.020 + 0.0001 * p;
      r.backward_s = 0.030;
      e.recipes.push_back(r);
    }
    out.emplace_back(e);
  }
  return out;
}

TEST(ReplayDecide, CleanPeersAreHealthy) {
  auto v = decide_replay(healthy(4), {});
  EXPECT_EQ(v.status, VerdictStatus::healthy);
  EXPECT_TRUE(v.suspects.empty());
  EXPECT_EQ(v.details["numerics"], "clean");
  EXPECT_TRUE(v.details["cycle"].is_null());
}

TEST(ReplayDecide, OneFlippedQuantityNamesItsPeerWithSdc) {
  auto ev = healthy(4);
  ev[2]->recipes[1].hashes[Quantity::param_grad] = 201;
  DecideOptions o;
  o.cycle = 7;
  o.checkpoint = "step-100";
  auto v = decide_replay(ev, o);
  ASSERT_EQ(v.status, VerdictStatus::attributed);
  ASSERT_EQ(v.suspects.size(), 1u);
  EXPECT_EQ(v.suspects[0].rank, 2);
  EXPECT_EQ(v.suspects[0].reason, "sdc");
  EXPECT_EQ(v.suspects[0].evidence["where"][0]["quantity"], "param_grad");
  EXPECT_EQ(v.details["numerics"], "sdc");
  EXPECT_EQ(v.details["cycle"], 7);
  EXPECT_EQ(v.details["checkpoint"], "step-100");
  EXPECT_EQ(v.details["sweep"], "periodic");
}

TEST(ReplayDecide, TwoOfFourCorruptedDifferentlyIsInconclusive) {
  auto ev = healthy(4);
  ev[1]->recipes[0].hashes[Quantity::output] = 101;
  ev[3]->recipes[0].hashes[Quantity::output] = 102;
  auto v = decide_replay(ev, {});
  EXPECT_EQ(v.status, VerdictStatus::inconclusive);
  EXPECT_TRUE(v.suspects.empty());
  EXPECT_EQ(v.details["numerics"], "unclear");
}

TEST(ReplayDecide, ContractMismatchIsInconclusiveNeverSdc) {
  auto ev = healthy(4);
  for (auto& r : ev[3]->recipes) {
    r.contract["threads"] = 2;
    r.hashes[Quantity::output] = 999;  // would look like SDC if compared
  }
  auto v = decide_replay(ev, {});
  EXPECT_EQ(v.status, VerdictStatus::inconclusive);
  EXPECT_TRUE(v.suspects.empty());
  EXPECT_EQ(v.details["recipes"][0]["reason"], "contract_mismatch");
  ASSERT_FALSE(v.details["uncomparable"].empty());
  EXPECT_EQ(v.details["uncomparable"][0]["peer"], 3);
  EXPECT_EQ(v.details["uncomparable"][0]["differs"][0]["field"], "threads");
}

TEST(ReplayDecide, InputMismatchIsNamedAndNotCountedAsSdc) {
  auto ev = healthy(5);
  ev[4]->recipes[0].input_hash = 12;
  ev[4]->recipes[0].hashes[Quantity::output] = 555;
  auto v = decide_replay(ev, {});
  ASSERT_EQ(v.status, VerdictStatus::attributed);
  ASSERT_EQ(v.suspects.size(), 1u);
  EXPECT_EQ(v.suspects[0].reason, "input_mismatch");
}

TEST(ReplayDecide, SlowModuleCallIsComputeStragglerSlowGatherIsGatherStraggler) {
  auto ev = healthy(4);
  for (auto& r : ev[1]->recipes) r.forward_s = 0.5;
  for (auto& r : ev[3]->recipes) r.gather_s = 0.9;
  auto v = decide_replay(ev, {});
  ASSERT_EQ(v.status, VerdictStatus::attributed);
  ASSERT_EQ(v.suspects.size(), 2u);
  EXPECT_EQ(v.suspects[0].rank, 1);
  EXPECT_EQ(v.suspects[0].reason, "compute_straggler");
  EXPECT_EQ(v.suspects[1].rank, 3);
  EXPECT_EQ(v.suspects[1].reason, "gather_straggler");
  EXPECT_EQ(v.details["numerics"], "clean");
}

TEST(ReplayDecide, OneSlowSampleNamesNobody) {
  auto ev = healthy(4);
  ev[1]->recipes[0].forward_s = 0.5;  // slow in one recipe of two: noise, not a slow device
  auto v = decide_replay(ev, {});
  EXPECT_EQ(v.status, VerdictStatus::healthy);
  EXPECT_EQ(v.details["slow_but_not_consistently"].size(), 1u);
}

TEST(ReplayDecide, SmallTimingNoiseNamesNobody) {
  std::mt19937_64 rng(3);
  auto ev = healthy(6);
  for (auto& e : ev)
    for (auto& r : e->recipes) r.forward_s *= 1.0 + 0.5 * static_cast<double>(rng() % 100) / 100.0;  // up to 1.5x
  auto v = decide_replay(ev, {});
  EXPECT_EQ(v.status, VerdictStatus::healthy);
}

TEST(ReplayDecide, MissingPeersAreNeverHealthy) {
  auto ev = healthy(4);
  ev[0].reset();
  ev[1].reset();
  EXPECT_EQ(decide_replay(ev, {}).status, VerdictStatus::inconclusive);
  // One missing of four: the three that reported agree, yet the missing peer may be the one at fault.
  auto one = healthy(4);
  one[2].reset();
  const auto v = decide_replay(one, {});
  EXPECT_EQ(v.status, VerdictStatus::inconclusive);
  EXPECT_TRUE(v.suspects.empty());
  EXPECT_NE(v.summary.find("rank(s) 2 did not report"), std::string::npos) << v.summary;
  EXPECT_EQ(v.details["missing_peers"], nlohmann::json::array({2}));
}

TEST(ReplayDecide, EvidenceRoundTripsThroughJson) {
  auto ev = healthy(1);
  ev[0]->recipes[0].hashes[Quantity::output] = 0xfedcba9876543210ULL;
  auto j = to_json(*ev[0]);
  EXPECT_EQ(j["recipes"][0]["hashes"]["output"], "0xfedcba9876543210");
  auto back = peer_evidence_from_json(j);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->recipes[0].hashes.at(Quantity::output), 0xfedcba9876543210ULL);
  j["recipes"][0]["gather_s"] = -1;
  EXPECT_FALSE(peer_evidence_from_json(j).ok());
}

TEST(ReplayResults, InjectionAppliesOnlyToItsPeerRecipeAndQuantity) {
  auto make = [] {
    std::vector<PackedTensor> r;
    r.push_back({"output/0", DType::f32, {4}, std::vector<std::uint8_t>(16, 3)});
    r.push_back({"param/0", DType::f32, {2}, std::vector<std::uint8_t>(8, 5)});
    return r;
  };
  auto in = parse_injection("sdc:peer=1,tensor=param,word=0,bit=62,recipe=adamw_step");
  ASSERT_TRUE(in.ok());
  nlohmann::json inj = nlohmann::json::array();
  auto a = make(), b = make(), c = make();
  auto clean = hash_results(a, "adamw_step", 0, {*in}, inj);
  EXPECT_TRUE(inj.empty());
  auto other_recipe = hash_results(c, "expert_gemm", 1, {*in}, inj);
  EXPECT_TRUE(inj.empty());
  auto hit = hash_results(b, "adamw_step", 1, {*in}, inj);
  ASSERT_EQ(inj.size(), 1u);
  EXPECT_EQ(inj[0]["element"], 1);  // bit 62 of word 0: the top exponent bit of element 1
  EXPECT_EQ(clean.at(Quantity::output), hit.at(Quantity::output));
  EXPECT_NE(clean.at(Quantity::param), hit.at(Quantity::param));
  EXPECT_EQ(clean, other_recipe);
}

PackedTensor file_tensor(const std::string& name, const std::string& content) {
  return {name,
          DType::u8,
          {static_cast<std::int64_t>(content.size())},
          std::vector<std::uint8_t>(content.begin(), content.end())};
}

std::vector<PackedTensor> two_recipes() {
  std::vector<PackedTensor> fs;
  for (const char* r : {"r0", "r1"})
    for (const char* f : k_recipe_files) fs.push_back(file_tensor(std::string(r) + "/" + f, std::string(r) + f));
  return fs;
}

TEST(ReplayRecipeShare, FilesRoundTripThroughADirectoryWithTheirDigest) {
  auto dir = PrivateDir::create("scout-unit-");
  ASSERT_TRUE(dir.ok());
  const std::string path = (*dir)->path();
  const auto files = two_recipes();
  ASSERT_TRUE(write_recipe_files(path, files).ok());
  auto dirs = find_recipe_dirs(path);
  ASSERT_TRUE(dirs.ok());
  ASSERT_EQ(dirs->size(), 2u);
  auto back = read_recipe_files(*dirs);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(recipe_files_digest(*back), recipe_files_digest(files));
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  dir->reset();
  EXPECT_FALSE(std::filesystem::exists(path));
  // An absent directory holds no recipe; that is not an error here.
  auto none = find_recipe_dirs(path);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(ReplayRecipeShare, DigestSeesEveryByteAndName) {
  const auto files = two_recipes();
  const auto d = recipe_files_digest(files);
  auto flipped = files;
  flipped[5].data[0] ^= 0x01;
  EXPECT_NE(recipe_files_digest(flipped), d);
  auto renamed = files;
  renamed[0].name = "r9/manifest.json";
  EXPECT_NE(recipe_files_digest(renamed), d);
  auto swapped = files;
  std::swap(swapped[0], swapped[4]);
  EXPECT_NE(recipe_files_digest(swapped), d);
}

TEST(ReplayRecipeShare, ArrivalsOutsideTheRecipeFilesAreRefusedAndNothingIsWritten) {
  auto dir = PrivateDir::create("scout-unit-");
  ASSERT_TRUE(dir.ok());
  const std::string path = (*dir)->path();
  for (const char* name : {"../evil/manifest.json", "r0/../../x", "/abs/module.pt", "r0/other.txt", "module.pt",
                           "./manifest.json", "r 0/module.pt", "r0/sub/module.pt"}) {
    auto fs = two_recipes();
    fs.push_back(file_tensor(name, "x"));
    auto w = write_recipe_files(path, fs);
    ASSERT_FALSE(w.ok()) << name;
    EXPECT_EQ(w.error().code, ExitCode::bad_input) << name;
  }
  auto twice = two_recipes();
  twice.push_back(twice[0]);
  EXPECT_FALSE(write_recipe_files(path, twice).ok());
  auto wide = two_recipes();
  wide[1].dtype = DType::f32;
  EXPECT_FALSE(write_recipe_files(path, wide).ok());
  std::vector<PackedTensor> many;
  for (int i = 0; i < 65; ++i) many.push_back(file_tensor("r" + std::to_string(i) + "/manifest.json", "{}"));
  EXPECT_FALSE(write_recipe_files(path, many).ok());
  EXPECT_TRUE(std::filesystem::is_empty(path));
}

}  // namespace
}  // namespace scout::replay
