#include "lib/pickle/pickle.hpp"

#include <gtest/gtest.h>

#include <string>

namespace scout::pickle {
namespace {

std::span<const std::byte> bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// Bytes from hex digits (pickles are written as hex: C++ hex escapes swallow the letters that follow them).
std::string hex(std::string_view h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2)
    out += static_cast<char>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16));
  return out;
}

Policy allow(std::initializer_list<const char*> globals) {
  Policy p;
  for (const char* g : globals) p.allowed_globals.insert(g);
  return p;
}

// pickle.dumps({'a': [1, 2.5, None, True], 'b': (b'xy', 'z')}, protocol=2), by hand.
const std::string k_dict =
    hex("80027d71002858010000006171015d7102284b014740040000000000004e8865580100000062710343027879710458010000007a710586"
        "7106752e");

TEST(Pickle, ReadsContainersAndScalars) {
  auto doc = parse(bytes(k_dict), Policy{});
  ASSERT_TRUE(doc) << doc.error().message();
  const Value* root = doc->root;
  ASSERT_EQ(root->kind, Kind::dict);
  const Value* a = root->get("a");
  ASSERT_TRUE(a && a->kind == Kind::list);
  ASSERT_EQ(a->items.size(), 4u);
  EXPECT_EQ(a->items[0]->integer, 1);
  EXPECT_DOUBLE_EQ(a->items[1]->floating, 2.5);
  EXPECT_EQ(a->items[2]->kind, Kind::none);
  EXPECT_TRUE(a->items[3]->boolean);
  const Value* b = root->get("b");
  ASSERT_TRUE(b && b->kind == Kind::tuple);
  EXPECT_EQ(b->items[0]->kind, Kind::bytes);
  EXPECT_EQ(b->items[0]->text, "xy");
  EXPECT_EQ(render(*root), "{'a': [1, 2.5, None, True], 'b': (<2 bytes>, 'z')}");
}

TEST(Pickle, GlobalsOutsideTheAllowListAreNamed) {
  // pickle.dumps(os.system) in protocol 2 spelling: GLOBAL 'posix system' then REDUCE.
  const std::string evil = hex("800263706f7369780a73797374656d0a710058040000007472756571018571025271032e");
  auto doc = parse(bytes(evil), Policy{});
  ASSERT_FALSE(doc);
  EXPECT_NE(doc.error().what.find("posix.system"), std::string::npos) << doc.error().what;
  EXPECT_EQ(doc.error().code, ExitCode::bad_input);
}

TEST(Pickle, OrderedDictBecomesADictAndObjectsStayOpaque) {
  const std::string od =
      hex("800263636f6c6c656374696f6e730a4f726465726564446963740a71002952710158010000006b71026361726770617273650a4e616d"
          "65737061"
          "63650a7103298171047d710558020000006c7271064b077362732e");
  auto doc = parse(bytes(od), allow({"collections.OrderedDict", "argparse.Namespace"}));
  ASSERT_TRUE(doc) << doc.error().message();
  ASSERT_EQ(doc->root->kind, Kind::dict);
  const Value* ns = doc->root->get("k");
  ASSERT_TRUE(ns && ns->kind == Kind::object);
  EXPECT_EQ(ns->class_name(), "argparse.Namespace");
  ASSERT_TRUE(ns->state && ns->state->get("lr"));
  EXPECT_EQ(ns->state->get("lr")->integer, 7);
}

TEST(Pickle, LimitsAndTruncationAreErrorsNotCrashes) {
  for (std::size_t n = 0; n < k_dict.size() - 1; ++n) EXPECT_FALSE(parse(bytes(k_dict.substr(0, n)), Policy{})) << n;
  Policy tight;
  tight.max_items = 3;
  EXPECT_FALSE(parse(bytes(k_dict), tight));
  Policy shallow;
  shallow.max_depth = 0;
  EXPECT_FALSE(parse(bytes(k_dict), shallow));
  EXPECT_FALSE(parse(bytes(hex("80026807"
                               "2e")),
                     Policy{}));  // memo never stored
  EXPECT_FALSE(parse(bytes(hex("8002"
                               "61"
                               "2e")),
                     Policy{}));  // APPEND on an empty stack
  EXPECT_FALSE(parse(bytes(hex("80024b014b02"
                               "2e")),
                     Policy{}));  // two values at STOP
  EXPECT_FALSE(parse(bytes(hex("80028201"
                               "2e")),
                     Policy{}));  // EXT1
}

TEST(Pickle, CyclesAreRepresentableAndRenderBounded) {
  // l = []; l.append(l)
  const std::string cyc = hex("80025d71006800612e");
  auto doc = parse(bytes(cyc), Policy{});
  ASSERT_TRUE(doc) << doc.error().message();
  EXPECT_EQ(doc->root->items[0], doc->root);
  EXPECT_LE(render(*doc->root, 60).size(), 60u);
}

TEST(Pickle, LargeIntegersKeepTheirBytes) {
  // LONG1 of 9 bytes: 2^64 - 1 needs a sign byte.
  const std::string big = hex("80028a09ffffffffffffffff002e");
  auto doc = parse(bytes(big), Policy{});
  ASSERT_TRUE(doc) << doc.error().message();
  EXPECT_EQ(doc->root->kind, Kind::big_integer);
  const std::string neg = hex("80028a01ff2e");
  auto n = parse(bytes(neg), Policy{});
  ASSERT_TRUE(n);
  EXPECT_EQ(n->root->integer, -1);
}

}  // namespace
}  // namespace scout::pickle
