// The observer flags every session command shares: parsed by CLI11 as a user
// types them, validated in one place with usage errors naming the flag.
#include "commands/observer_flags.hpp"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

namespace scout {
namespace {

ObserverSettings parse(std::vector<std::string> args) {
  CLI::App app;
  ObserverFlags f;
  add_observer_flags(app, f);
  std::reverse(args.begin(), args.end());
  app.parse(args);
  return to_observer_settings(f);
}

void expect_usage(std::vector<std::string> args, const std::string& names) {
  try {
    parse(args);
    ADD_FAILURE() << "accepted " << names;
  } catch (const FatalError& e) {
    EXPECT_EQ(e.error().code, ExitCode::usage) << e.what();
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
  }
}

TEST(ObserverFlags, ValidFlagsBecomeSettings) {
  auto s = parse({"--job", "J", "--attempt", "3", "--store", "tcp://10.0.0.1:29600", "--store-host", "--nodes", "4",
                  "--node-index", "2", "--timeout", "2.5", "--token-file", "/t", "--listen", "10.0.0.2"});
  EXPECT_EQ(s.job, "J");
  EXPECT_EQ(s.attempt, "3");
  ASSERT_TRUE(s.store.has_value());
  EXPECT_EQ(s.store->port, 29600);
  EXPECT_EQ(s.host_store, session::HostStore::always);
  EXPECT_EQ(s.nodes, 4);
  EXPECT_EQ(s.node_index, 2);
  EXPECT_EQ(s.timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(s.token_file, "/t");
  EXPECT_EQ(s.listen_address, "10.0.0.2");
  auto d = parse({"--job", "J"});
  EXPECT_FALSE(d.store.has_value());
  EXPECT_FALSE(d.node_index.has_value());
  EXPECT_EQ(d.host_store, session::HostStore::auto_observer0);
  EXPECT_EQ(d.nodes, 1);
}

TEST(ObserverFlags, BadValuesAreUsageErrorsNamingTheFlag) {
  expect_usage({"--job", ""}, "--job");
  expect_usage({"--job", "J", "--nodes", "0"}, "--nodes");
  expect_usage({"--job", "J", "--nodes", "100001"}, "--nodes");
  expect_usage({"--job", "J", "--nodes", "2", "--node-index", "2"}, "--node-index");
  expect_usage({"--job", "J", "--timeout", "0"}, "--timeout");
  expect_usage({"--job", "J", "--store", "redis://x:1"}, "--store");
  expect_usage({"--job", "J", "--store-host"}, "--store-host");
  expect_usage({"--job", "J", "--store", "tcp://h:1", "--store-host", "--no-store-host"}, "--no-store-host");
}

}  // namespace
}  // namespace scout
