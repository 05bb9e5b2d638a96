#include "lib/common/parse.hpp"

#include <gtest/gtest.h>

namespace scout {
namespace {

TEST(Parse, Doubles) {
  EXPECT_DOUBLE_EQ(*parse_double(" 2.5 ", "x"), 2.5);
  EXPECT_DOUBLE_EQ(*parse_double("+3", "x"), 3.0);
  for (const char* bad : {"", "nan", "inf", "-inf", "1x", "x", "1e999"})
    EXPECT_FALSE(parse_double(bad, "x").ok()) << bad;
}

TEST(Parse, DoubleListRejectsEmptyFields) {
  EXPECT_EQ(parse_double_list("1,2,3", "v")->size(), 3u);
  auto bad = parse_double_list("1,,x", "v");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ExitCode::bad_input);
  EXPECT_NE(bad.error().what.find("field 2"), std::string::npos);
}

TEST(Parse, IntListWithRanges) {
  auto v = parse_int_list("0,2,4-6", "r");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<std::int64_t>{0, 2, 4, 5, 6}));
  EXPECT_FALSE(parse_int_list("3-1", "r").ok());
  EXPECT_FALSE(parse_int_list("-1", "r").ok());
  EXPECT_FALSE(parse_int_list("1,", "r").ok());
}

TEST(Error, MessageJoinsParts) {
  Error e = usage_error("bad flag", "it is wrong", "fix it");
  EXPECT_EQ(e.message(), "bad flag; it is wrong; fix it");
  EXPECT_EQ(usage_error("only").message(), "only");
}

// Found by fuzzing (fuzz/corpus/number_lists/seed-big): "0-99999999" made a
// flag allocate 800 MB, and more fields more; a list expands to at most 10^7 values.
TEST(Parse, IntListIsBounded) {
  auto one = parse_int_list("0-99999999", "r");
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.error().code, ExitCode::bad_input);
  EXPECT_FALSE(parse_int_list("0-6000000,0-6000000", "r").ok());
  auto small = parse_int_list("0-999,5", "r");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->size(), 1001u);
}

}  // namespace
}  // namespace scout
