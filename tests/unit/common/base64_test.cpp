// base64 (RFC 4648) as etcd's JSON gateway writes it: the RFC's vectors, every byte, bad input.
#include "lib/common/base64.hpp"

#include <gtest/gtest.h>

namespace scout {
namespace {

TEST(Base64, RfcVectorsRoundTrip) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    EXPECT_EQ(base64_encode(plain), coded);
    EXPECT_EQ(base64_decode(coded), std::optional<std::string>(plain));
  }
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  EXPECT_EQ(base64_decode(base64_encode(all)), std::optional<std::string>(all));
}

TEST(Base64, RejectsWhatIsNotBase64) {
  for (const char* bad : {"Zg=", "Z===", "Zg=a", "Zm9v!A==", "=Zm9", "Zm=v"}) EXPECT_FALSE(base64_decode(bad)) << bad;
}

}  // namespace
}  // namespace scout
