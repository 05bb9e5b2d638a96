#include "lib/common/parse.hpp"

#include <gtest/gtest.h>

namespace scout {
namespace {

TEST(Parse, Doubles) {
  EXPECT_DOUBLE_EQ(*parse_double(" 2.5 ", "x"), 2.5);
  EXPECT_DOUBLE_EQ(*parse_double("+3", "x"), 3.0);
  for (const char* bad : {"", "nan", "inf", "-inf", "1x", "x", "1e999"}) EXPECT_FALSE(parse_double(bad, "x").ok()) << bad;
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

}  // namespace
}  // namespace scout
