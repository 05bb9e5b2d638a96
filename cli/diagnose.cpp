#include "cli/diagnose.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>

namespace scout {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      // adjacent transposition ("hnag" for "hang") counts as one edit
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev[j - 1]);
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::string::npos;
  std::vector<std::string> prefixed;
  for (const auto& c : candidates) {
    if (c.rfind(word, 0) == 0 && word.size() >= 2) prefixed.push_back(c);
    std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  const std::size_t allowed = std::max<std::size_t>(1, std::min(word.size(), best.size()) / 3);
  if (best_d <= allowed) return best;
  if (prefixed.size() == 1) return prefixed.front();
  return {};
}

namespace {

std::string path_of(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* a = app; a != nullptr && a->get_parent() != nullptr; a = a->get_parent())
    names.push_back(a->get_name());
  std::reverse(names.begin(), names.end());
  return fmt::format("{}", fmt::join(names, " "));
}

// The top-level command of `app` ("verify-ckpt" for verify-ckpt manifest
// write): error lines start "scout <command>: error:" as every runtime error does.
std::string command_of(const CLI::App* app) {
  std::string p = path_of(app);
  return p.substr(0, p.find(' '));
}

std::string help_hint(const CLI::App* app) {
  std::string p = path_of(app);
  return p.empty() ? "run 'scout --help'" : fmt::format("run 'scout {} --help'", p);
}

std::vector<const CLI::App*> subcommands_of(const CLI::App* app) {
  auto subs = const_cast<CLI::App*>(app)->get_subcommands([](const CLI::App*) { return true; });
  return {subs.begin(), subs.end()};
}

std::vector<std::string> subcommand_names(const CLI::App* app) {
  std::vector<std::string> out;
  for (const CLI::App* s : subcommands_of(app)) out.push_back(s->get_name());
  return out;
}

const CLI::Option* find_option(const CLI::App* app, const std::string& flag) {
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* o : a->get_options()) {
      if (flag.rfind("--", 0) == 0) {
        for (const auto& l : o->get_lnames())
          if ("--" + l == flag) return o;
      } else {
        for (const auto& s : o->get_snames())
          if ("-" + s == flag) return o;
      }
    }
  }
  return nullptr;
}

std::vector<std::string> option_names(const CLI::App* app) {
  std::vector<std::string> out;
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent())
    for (const CLI::Option* o : a->get_options()) {
      for (const auto& l : o->get_lnames()) out.push_back("--" + l);
      for (const auto& s : o->get_snames()) out.push_back("-" + s);
    }
  return out;
}

bool has_positionals(const CLI::App* app) {
  for (const CLI::Option* o : app->get_options())
    if (o->get_lnames().empty() && o->get_snames().empty()) return true;
  return false;
}

std::string with_suggestion(const std::string& what, const std::string& word,
                            const std::vector<std::string>& candidates, const std::string& hint) {
  std::string near = closest(word, candidates);
  if (!near.empty()) return fmt::format("{}; did you mean '{}'? {}", what, near, hint);
  return fmt::format("{}; {}", what, hint);
}

// Strips CLI11's "--name: " prefix and rewords its phrases.
std::string reword(std::string text) {
  auto replace = [&](const std::string& from, const std::string& to) {
    for (std::size_t p = text.find(from); p != std::string::npos; p = text.find(from, p + to.size()))
      text.replace(p, from.size(), to);
  };
  if (text.rfind("Could not convert: ", 0) == 0) {  // "Could not convert: --rank = x"
    std::string rest = text.substr(19);
    auto eq = rest.find(" = ");
    if (eq != std::string::npos)
      text = fmt::format("{}: '{}' is not a valid value", rest.substr(0, eq), rest.substr(eq + 3));
  }
  replace("Value ", "value ");
  replace(" not in ", " is not one of ");
  replace("could not be converted", "is not a valid value");
  replace("1 required TEXT missing", "needs a value");
  replace("1 required FLOAT missing", "needs a number");
  replace("1 required INT missing", "needs a whole number");
  replace("1 required UINT missing", "needs a whole number");
  replace(" is required", " is required but was not given");
  replace("The following arguments were not expected:", "unexpected arguments:");
  replace("The following argument was not expected:", "unexpected argument:");
  replace("A subcommand is required", "a subcommand is required");
  replace("Run with --help for more information.", "");
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '.')) text.pop_back();
  return text;
}

}  // namespace

std::vector<std::string> rewrite_help(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "help") return args;
  std::vector<std::string> out(args.begin() + 1, args.end());
  out.push_back("--help");
  return out;
}

bool check_help_words(const CLI::App& root, const std::vector<std::string>& args, Diagnosis* out) {
  if (args.empty() || args[0] != "help") return true;
  const CLI::App* cur = &root;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (!args[i].empty() && args[i][0] == '-') continue;
    const CLI::App* next = nullptr;
    for (const CLI::App* s : subcommands_of(cur))
      if (s->get_name() == args[i]) next = s;
    if (next == nullptr) {
      std::string what = cur == &root ? fmt::format("unknown command '{}'", args[i])
                                      : fmt::format("unknown subcommand '{}' of 'scout {}'", args[i], path_of(cur));
      *out = {command_of(cur), with_suggestion(what, args[i], subcommand_names(cur), help_hint(cur))};
      return false;
    }
    cur = next;
  }
  return true;
}

Diagnosis diagnose(const CLI::App& root, const std::vector<std::string>& args, const CLI::ParseError& error) {
  const CLI::App* cur = &root;
  bool positional_seen = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& tok = args[i];
    if (tok == "--") break;
    if (tok.size() > 1 && tok[0] == '-' &&
        !(tok.size() > 1 && (std::isdigit(static_cast<unsigned char>(tok[1])) || tok[1] == '.'))) {
      std::string flag = tok.substr(0, tok.find('='));
      if (tok.rfind("--", 0) != 0 && flag.size() > 2) flag = flag.substr(0, 2);  // -ofile
      const CLI::Option* o = find_option(cur, flag);
      if (o == nullptr)
        return {command_of(cur),
                with_suggestion(fmt::format("unknown option '{}'", flag), flag, option_names(cur), help_hint(cur))};
      if (o->get_expected_max() > 0 && tok.find('=') == std::string::npos &&
          (tok.rfind("--", 0) == 0 || tok.size() == 2)) {
        if (i + 1 >= args.size())
          return {command_of(cur), fmt::format("option '{}' needs a value; {}", flag, help_hint(cur))};
        ++i;
      }
      continue;
    }
    // A word: a subcommand of the current command, or one of its positionals.
    bool descended = false;
    for (const CLI::App* s : subcommands_of(cur))
      if (s->get_name() == tok) {
        cur = s;
        descended = true;
        positional_seen = false;
        break;
      }
    if (descended) continue;
    if (!subcommands_of(cur).empty() && !positional_seen &&
        (!has_positionals(cur) || cur->get_require_subcommand_min() > 0)) {
      std::string what = cur == &root ? fmt::format("unknown command '{}'", tok)
                                      : fmt::format("unknown subcommand '{}' of 'scout {}'", tok, path_of(cur));
      return {command_of(cur), with_suggestion(what, tok, subcommand_names(cur), help_hint(cur))};
    }
    if (!has_positionals(cur))
      return {command_of(cur), fmt::format("unexpected argument '{}'; {}", tok, help_hint(cur))};
    positional_seen = true;
  }
  // Every word is known: a subcommand or a value is missing, or a value is bad.
  if (!subcommands_of(cur).empty() && cur->get_require_subcommand_min() > 0) {
    auto names = subcommand_names(cur);
    std::string what = cur == &root ? "no command given" : fmt::format("'scout {}' needs a subcommand", path_of(cur));
    return {command_of(cur), fmt::format("{}: one of {}; {}", what, fmt::join(names, ", "), help_hint(cur))};
  }
  return {command_of(cur), fmt::format("{}; {}", reword(error.what()), help_hint(cur))};
}

}  // namespace scout
