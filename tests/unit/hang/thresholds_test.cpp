// The hang decision's thresholds table (lib/hang/thresholds.hpp) and its copy
// in lib/hang/README.md ("Hang decision: stages and thresholds") agree row for
// row, so the document cannot keep a value or a reason the code no longer has.
#include "lib/hang/thresholds.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

namespace scout::hang {
namespace {

// A row as lib/hang/README.md writes it: each name in backticks.
std::string markdown_row(const ThresholdRow& row) {
  std::string names;
  std::stringstream in(row.name);
  for (std::string name; std::getline(in, name, ',');) {
    const auto start = name.find_first_not_of(' ');
    if (!names.empty()) names += ", ";
    names += "`" + name.substr(start) + "`";
  }
  return "| " + names + " | " + row.value + " | " + row.stage + " | " + row.reason + " |";
}

std::string architecture_section() {
  std::ifstream f(std::string(SCOUT_SOURCE_DIR) + "/lib/hang/README.md");
  std::stringstream text;
  text << f.rdbuf();
  const std::string all = text.str();
  const auto start = all.find("## Hang decision: stages and thresholds");
  if (start == std::string::npos) return {};
  const auto end = all.find("\n## ", start + 1);
  return all.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

TEST(HangThresholds, EveryRowIsNamedOnceWithAStageAndAReason) {
  std::set<std::string> names;
  for (const auto& row : hang_thresholds()) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    EXPECT_FALSE(row.value.empty()) << row.name;
    EXPECT_FALSE(row.stage.empty()) << row.name;
    EXPECT_GT(row.reason.size(), 40u) << row.name;
  }
  EXPECT_FALSE(strict_majority(1, 2));
  EXPECT_TRUE(strict_majority(2, 3));
  EXPECT_FALSE(strict_minority(1, 2));
  EXPECT_TRUE(strict_minority(1, 3));
}

TEST(HangThresholds, ArchitectureListsEveryRowAsTheCodeHasIt) {
  const std::string section = architecture_section();
  ASSERT_FALSE(section.empty()) << "lib/hang/README.md has no section 'Hang decision: stages and thresholds'";
  for (const auto& row : hang_thresholds()) {
    const std::string line = markdown_row(row);
    EXPECT_NE(section.find(line + "\n"), std::string::npos) << "lib/hang/README.md should have the row\n" << line;
  }
}

}  // namespace
}  // namespace scout::hang
