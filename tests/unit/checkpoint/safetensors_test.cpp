#include "lib/checkpoint/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "lib/checkpoint/checkpoint_file.hpp"
#include "lib/hash/tensor_hash.hpp"
#include "tests/unit/test_seed.hpp"

namespace scout::checkpoint {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("scout_st_" + std::to_string(::getpid()) + "_" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  // Writes a file with the given header JSON text and data bytes.
  std::string write(const std::string& name, const std::string& header, const std::string& data,
                    std::optional<std::uint64_t> length = {}) {
    std::string path = (m_dir / name).string();
    std::ofstream out(path, std::ios::binary);
    std::uint64_t n = length.value_or(header.size());
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xFF));
    out << header << data;
    return path;
  }

  fs::path m_dir;
};

TEST_F(SafetensorsTest, ReadsValidFileAndHashesLikeOneShot) {
  std::string data(24, '\0');
  std::mt19937 rng(1);
  for (auto& c : data) c = static_cast<char>(rng());
  std::string header =
      R"({"b":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]},"a":{"dtype":"I16","shape":[4],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}})";
  auto h = read_safetensors_header(write("ok.safetensors", header, data));
  ASSERT_TRUE(h.ok()) << h.error().message();
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->tensors[0].name, "a");
  EXPECT_EQ(h->metadata.at("format"), "pt");
  auto digests = hash_safetensors(*h);
  ASSERT_TRUE(digests.ok());
  std::vector<std::int64_t> shape{2, 2};
  auto bytes = std::as_bytes(std::span(data.data() + 8, 16));
  EXPECT_EQ((*digests)[1].name, "b");
  EXPECT_EQ((*digests)[1].hash, hash::hash_tensor(DType::f32, shape, bytes));
}

TEST_F(SafetensorsTest, RejectsMalformedFiles) {
  std::string data(16, 'x');
  struct Case {
    const char* name;
    std::string header;
    std::string data;
    std::optional<std::uint64_t> length;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"huge_length", "{}", "", std::uint64_t{1} << 40, "header length"},
      {"length_past_end", "{}", "", 100, "exceeds the file"},
      {"not_json", "{not json", data, {}, "not a JSON object"},
      {"unknown_dtype", R"({"t":{"dtype":"F99","shape":[4],"data_offsets":[0,16]}})", data, {}, "unknown dtype"},
      {"lying_offsets", R"({"t":{"dtype":"F32","shape":[8],"data_offsets":[0,16]}})", data, {}, "needs 32"},
      {"truncated", R"({"t":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", data, {}, "truncated"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       data,
       {},
       "overlap"},
      {"negative_shape", R"({"t":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", data, {}, "negative"},
      {"reversed", R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})", data, {}, "before begin"},
  };
  for (const auto& c : cases) {
    auto h = read_safetensors_header(write(std::string(c.name) + ".safetensors", c.header, c.data, c.length));
    ASSERT_FALSE(h.ok()) << c.name;
    EXPECT_EQ(h.error().code, ExitCode::bad_input) << c.name;
    EXPECT_NE(h.error().message().find(c.expect), std::string::npos) << c.name << ": " << h.error().message();
  }
  auto missing = read_safetensors_header((m_dir / "absent").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ExitCode::bad_input);
}

}  // namespace
}  // namespace scout::checkpoint

namespace scout::checkpoint {
namespace {

// The pipelined reader (reader thread + buffers) must give exactly the hashes
// of the plain streaming reader, for chunk sizes that split tensors anywhere.
// Found by fuzzing (fuzz/corpus/safetensors_header/regress-deep-data-offsets):
// deeply nested JSON overflowed the stack (the value was copied recursively).
TEST_F(SafetensorsTest, DeeplyNestedHeaderIsBadInput) {
  std::string deep = std::string(20000, '[') + std::string(20000, ']');
  auto h = read_safetensors_header(
      write("deep.safetensors", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":)" + deep + "}}", "x"));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().code, ExitCode::bad_input);
}

TEST_F(SafetensorsTest, PipelinedHashesEqualStreamingHashes) {
  unsigned seed = test_support::test_seed32();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  std::string header = "{";
  std::string data;
  for (int t = 0; t < 7; ++t) {
    std::size_t n = 1 + rng() % 5000;
    std::size_t begin = data.size();
    for (std::size_t i = 0; i < n; ++i) data.push_back(static_cast<char>(rng()));
    header += (t ? "," : "") + std::string("\"t") + std::to_string(t) + R"(":{"dtype":"U8","shape":[)" +
              std::to_string(n) + R"(],"data_offsets":[)" + std::to_string(begin) + "," + std::to_string(data.size()) +
              "]}";
  }
  header += "}";
  auto h = read_safetensors_header(write("p.safetensors", header, data));
  ASSERT_TRUE(h.ok()) << h.error().message();
  auto plain = hash_safetensors(*h);
  ASSERT_TRUE(plain.ok());
  for (std::size_t chunk : {4096u, 8192u, 65536u}) {
    auto piped = hash_safetensors_pipelined(*h, {}, chunk, 2);
    ASSERT_TRUE(piped.ok()) << piped.error().message();
    ASSERT_EQ(piped->size(), plain->size());
    for (std::size_t i = 0; i < plain->size(); ++i) {
      EXPECT_EQ((*piped)[i].name, (*plain)[i].name);
      EXPECT_EQ((*piped)[i].hash, (*plain)[i].hash) << (*plain)[i].name << " chunk " << chunk;
    }
  }
}

}  // namespace
}  // namespace scout::checkpoint
