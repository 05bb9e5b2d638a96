// The LibTorch module's tensor hash (lib/hash/torch_hash.hpp), run with real
// LibTorch tensors inside the module. Skips where the module is not built.
#include "lib/hash/torch_hash.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "lib/plugin/module_loader.hpp"

namespace scout::hash {
namespace {

TEST(TorchTensorHash, ViewsHashLikeContiguousCopies) {
  // The unit test binary lives in build/tests; the module in build/bin.
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto module = exe.parent_path().parent_path() / "bin" / "libscout_torch.so";
  if (!ec && !std::getenv("SCOUT_TORCH_MODULE") && std::filesystem::exists(module))
    setenv("SCOUT_TORCH_MODULE", module.c_str(), 0);
  auto symbol = torch_module_symbol(k_torch_hash_selftest_symbol);
  if (!symbol) GTEST_SKIP() << "LibTorch module unavailable: " << symbol.error().message();
  auto selftest = reinterpret_cast<TorchHashSelftestFn>(*symbol);
  char message[512] = {};
  EXPECT_EQ(selftest(message, sizeof message), 0) << message;
  ASSERT_TRUE(torch_module_symbol(k_torch_hash_symbol));
}

}  // namespace
}  // namespace scout::hash
