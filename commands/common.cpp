#include "commands/common.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>

namespace scout {

OutputFormat resolve_format(const std::string& format) {
  if (format == "json") return OutputFormat::json;
  if (format == "text") return OutputFormat::text;
  return isatty(STDOUT_FILENO) ? OutputFormat::text : OutputFormat::json;
}

Status flush_stdout() {
  errno = 0;
  std::cout.flush();  // CLI11 prints --help through std::cout
  const bool failed = std::cout.bad() || std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  if (!failed) return Ok{};
  const int err = errno;
  return unavailable_error("cannot write the output to standard output",
                           err != 0 ? std::strerror(err) : "a write failed",
                           "check the file, disk or pipe standard output goes to (free space, a reader that stays)");
}

void write_stdout(std::string_view text) {
  errno = 0;
  const std::size_t n = std::fwrite(text.data(), 1, text.size(), stdout);
  if (n != text.size() || std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    const int err = errno;
    throw FatalError(unavailable_error(
        "cannot write the verdict to standard output", err != 0 ? std::strerror(err) : "a write failed",
        "check the file, disk or pipe standard output goes to (free space, a reader that stays)"));
  }
}

int emit_verdict(const Verdict& verdict, OutputFormat format) {
  write_stdout(format == OutputFormat::json ? to_json(verdict).dump(2) + "\n" : render_text(verdict));
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
