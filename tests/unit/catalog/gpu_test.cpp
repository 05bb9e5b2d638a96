#include "lib/catalog/gpu.hpp"

#include <gtest/gtest.h>

#include <regex>

#include "scout/config.hpp"

namespace scout::catalog {
namespace {

TEST(CatalogGpu, WithoutAGpuTheKernelIsUnavailableNotACrash) {
  const GpuInfo gpu = query_gpu();
  if (gpu.present) GTEST_SKIP() << "a GPU is present: tests/gpu/catalog_kernel_test.cpp runs the kernel";
  EXPECT_FALSE(gpu.why_absent.empty());
  EXPECT_EQ(gpu.sm_count, 0);
  std::vector<std::int64_t> rows{31};
  auto run = run_instrumented_grouped_gemm(KernelConfig{}, rows, 1);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.error().code, ExitCode::unavailable);
}

TEST(CatalogGpu, VersionsAreDottedOrAbsent) {
  const std::string nccl = nccl_header_version();
  if (SCOUT_WITH_NCCL)
    EXPECT_TRUE(std::regex_match(nccl, std::regex(R"(\d+\.\d+\.\d+)"))) << nccl;
  else
    EXPECT_TRUE(nccl.empty());
  const GpuInfo gpu = query_gpu();
  if (!gpu.cuda_runtime.empty())
    EXPECT_TRUE(std::regex_match(gpu.cuda_runtime, std::regex(R"(\d+\.\d+)"))) << gpu.cuda_runtime;
  if (!gpu.driver.empty()) EXPECT_TRUE(std::regex_match(gpu.driver, std::regex(R"(\d+\.\d+)"))) << gpu.driver;
}

}  // namespace
}  // namespace scout::catalog
