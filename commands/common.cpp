#include "commands/common.hpp"

#include <cstdio>
#include <fmt/format.h>
#include <iostream>
#include <iterator>
#include <unistd.h>

namespace scout {

OutputFormat resolve_format(const std::string& format) {
  if (format == "json") return OutputFormat::json;
  if (format == "text") return OutputFormat::text;
  return isatty(STDOUT_FILENO) ? OutputFormat::text : OutputFormat::json;
}

int emit_verdict(const Verdict& verdict, OutputFormat format) {
  std::string out = format == OutputFormat::json ? to_json(verdict).dump(2) + "\n" : render_text(verdict);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return to_int(exit_code_for(verdict));
}

std::string read_stdin(std::size_t limit) {
  std::string data;
  char buf[65536];
  while (true) {
    std::size_t n = std::fread(buf, 1, sizeof buf, stdin);
    data.append(buf, n);
    if (data.size() > limit)
      throw FatalError(input_error("standard input is too large", fmt::format("more than {} bytes", limit)));
    if (n < sizeof buf) break;
  }
  return data;
}

}  // namespace scout
