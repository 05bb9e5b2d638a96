// What scout says when a command line does not parse: the parser's own
// wording never reaches the user. Every message names what is wrong, the
// closest known spelling ("did you mean"), and what to run for help.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace scout {

// Levenshtein distance, for "did you mean".
std::size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `word` when it is close enough to be a likely
// typo (or a prefix of exactly one candidate), else "".
std::string closest(const std::string& word, const std::vector<std::string>& candidates);

struct Diagnosis {
  std::string command;  // "records list", "" for the top level
  std::string message;  // "what; why; what to do"
};

// Explains why `args` (argv without argv[0]) failed to parse against `root`,
// given the parser's exception.
Diagnosis diagnose(const CLI::App& root, const std::vector<std::string>& args, const CLI::ParseError& error);

// `scout help [CMD [SUB]]` rewritten as `scout [CMD [SUB]] --help`; other
// command lines unchanged.
std::vector<std::string> rewrite_help(const std::vector<std::string>& args);

// For `scout help WORDS...`: a diagnosis when a word is not a (sub)command,
// so that a mistyped name is a usage error, not the top-level help.
bool check_help_words(const CLI::App& root, const std::vector<std::string>& args, Diagnosis* out);

}  // namespace scout
