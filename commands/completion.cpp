// `scout completion SHELL`: bash, zsh and fish scripts generated from the
// command tree that cli/commands.def builds, so they can never drift from it
// (tests/integration/test_docs.py keeps the committed completions/ in step).
// Offered: commands and nested subcommands, every option, the values of
// enumerated options and positionals (CLI::IsMember), file names for file and
// directory arguments, and `scout help COMMAND`.
#include "commands/completion.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <set>

namespace scout {

namespace {

struct ArgInfo {
  std::vector<std::string> names;  // "--mesh", "-o"; empty for a positional
  std::string description;
  bool takes_value = false;
  bool is_path = false;              // complete file names
  std::vector<std::string> choices;  // enumerated values
};

struct CommandInfo {
  std::string name;
  std::string description;
  std::vector<ArgInfo> options;
  std::vector<ArgInfo> positionals;
  std::vector<CommandInfo> subcommands;
};

// Values of a CLI::IsMember check: its description reads "{a,b,c}".
std::vector<std::string> choices_of(const CLI::Option* opt) {
  auto* o = const_cast<CLI::Option*>(opt);
  try {
    for (int i = 0;; ++i) {
      CLI::Validator* v = o->get_validator(i);
      std::string d = v->get_description();
      if (d.size() >= 2 && d.front() == '{' && d.back() == '}') {
        std::vector<std::string> out;
        std::string cur;
        for (char c : d.substr(1, d.size() - 2)) {
          if (c == ',') {
            out.push_back(cur);
            cur.clear();
          } else {
            cur += c;
          }
        }
        if (!cur.empty()) out.push_back(cur);
        return out;
      }
    }
  } catch (const CLI::OptionNotFound&) {
  }
  return {};
}

// File and directory arguments, by the last word of their name.
bool path_name(const std::string& name) {
  static const std::set<std::string> k_words = {"file",       "files",    "dir",   "dirs",         "ledger",
                                                "prometheus", "replay",   "sweep", "observations", "output",
                                                "catalog",    "replicas", "store"};
  std::string n = name;
  while (!n.empty() && n.front() == '-') n.erase(n.begin());
  auto dash = n.rfind('-');
  return k_words.count(dash == std::string::npos ? n : n.substr(dash + 1)) > 0;
}

ArgInfo arg_of(const CLI::Option* opt) {
  ArgInfo info;
  for (const auto& l : opt->get_lnames()) info.names.push_back("--" + l);
  for (const auto& s : opt->get_snames()) info.names.push_back("-" + s);
  info.description = opt->get_description();
  info.takes_value = opt->get_expected_max() > 0;
  info.choices = choices_of(opt);
  if (info.takes_value && info.choices.empty()) {
    if (info.names.empty()) info.is_path = path_name(opt->get_name());
    for (const auto& n : info.names) info.is_path |= path_name(n);
  }
  return info;
}

CommandInfo describe(const CLI::App& app) {
  CommandInfo c{app.get_name(), app.get_description(), {}, {}, {}};
  for (const CLI::Option* opt : app.get_options()) {
    ArgInfo a = arg_of(opt);
    (a.names.empty() ? c.positionals : c.options).push_back(std::move(a));
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    c.subcommands.push_back(describe(*sub));
  return c;
}

std::string escape_single(std::string s) {
  std::string out;
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out;
}

// Visits every command path: ("", root), ("records", records), ("records list", list)...
template <typename F>
void walk(const CommandInfo& c, const std::string& path, F&& f) {
  f(path, c);
  for (const auto& s : c.subcommands) walk(s, path.empty() ? s.name : path + " " + s.name, f);
}

std::vector<std::string> sub_names(const CommandInfo& c) {
  std::vector<std::string> out;
  for (const auto& s : c.subcommands) out.push_back(s.name);
  return out;
}

// ---------------------------------------------------------------------- bash

std::string bash_script(const CommandInfo& root) {
  std::vector<std::string> subs, opts, valued, choices, files, posvals;
  // Keys are command paths from the root: "scout", "scout records", "scout verify-ckpt manifest"
  // (bash refuses an empty key in an associative array).
  walk(root, "", [&](const std::string& rel, const CommandInfo& c) {
    const std::string path = rel.empty() ? "scout" : "scout " + rel;
    std::vector<std::string> s = sub_names(c);
    if (rel.empty()) s.push_back("help");
    subs.push_back(fmt::format("  [\"{}\"]=\"{}\"", path, fmt::join(s, " ")));
    std::vector<std::string> o, v;
    auto add = [&](const ArgInfo& a, const std::string& owner) {
      for (const auto& n : a.names) {
        o.push_back(n);
        if (!a.takes_value) continue;
        v.push_back(n);
        if (!a.choices.empty())
          choices.push_back(fmt::format("  [\"{}|{}\"]=\"{}\"", owner, n, fmt::join(a.choices, " ")));
        if (a.is_path) files.push_back(fmt::format("  [\"{}|{}\"]=1", owner, n));
      }
    };
    for (const auto& a : c.options) add(a, path);
    if (!rel.empty())
      for (const auto& a : root.options) {
        for (const auto& n : a.names) o.push_back(n);
        if (a.takes_value)
          for (const auto& n : a.names) v.push_back(n);
      }
    opts.push_back(fmt::format("  [\"{}\"]=\"{}\"", path, fmt::join(o, " ")));
    valued.push_back(fmt::format("  [\"{}\"]=\"{}\"", path, fmt::join(v, " ")));
    for (const auto& p : c.positionals) {
      if (!p.choices.empty()) posvals.push_back(fmt::format("  [\"{}\"]=\"{}\"", path, fmt::join(p.choices, " ")));
      if (p.is_path) files.push_back(fmt::format("  [\"{}|\"]=1", path));
    }
  });
  {
    std::vector<std::string> names = sub_names(root);
    subs.push_back(fmt::format("  [\"scout help\"]=\"{}\"", fmt::join(names, " ")));
  }
  std::string out = "# bash completion for scout; generated by `scout completion bash` from the command table.\n";
  out += "declare -gA _scout_subs=(\n" + fmt::format("{}", fmt::join(subs, "\n")) + "\n)\n";
  out += "declare -gA _scout_opts=(\n" + fmt::format("{}", fmt::join(opts, "\n")) + "\n)\n";
  out += "declare -gA _scout_valued=(\n" + fmt::format("{}", fmt::join(valued, "\n")) + "\n)\n";
  out += "declare -gA _scout_choices=(\n" + fmt::format("{}", fmt::join(choices, "\n")) + "\n)\n";
  out += "declare -gA _scout_files=(\n" + fmt::format("{}", fmt::join(files, "\n")) + "\n)\n";
  out += "declare -gA _scout_posvals=(\n" + fmt::format("{}", fmt::join(posvals, "\n")) + "\n)\n";
  out += R"(_scout() {
  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" path="scout" i w key
  COMPREPLY=()
  for ((i=1; i<COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]}"
    if [[ "$w" == -* ]]; then
      [[ "$w" != *=* && " ${_scout_valued[$path]} " == *" $w "* ]] && ((i++))
    elif [[ " ${_scout_subs[$path]} " == *" $w "* ]]; then
      path="$path $w"
    fi
  done
  if [[ "$prev" == -* && " ${_scout_valued[$path]} " == *" $prev "* ]]; then
    key="$path|$prev"
    [[ -z "${_scout_choices[$key]+x}" && -z "${_scout_files[$key]+x}" ]] && key="scout|$prev"
    if [[ -n "${_scout_choices[$key]+x}" ]]; then
      COMPREPLY=($(compgen -W "${_scout_choices[$key]}" -- "$cur"))
    elif [[ -n "${_scout_files[$key]+x}" ]]; then
      compopt -o filenames 2>/dev/null
      COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "${_scout_opts[$path]}" -- "$cur"))
    return
  fi
  COMPREPLY=($(compgen -W "${_scout_subs[$path]} ${_scout_posvals[$path]}" -- "$cur"))
  if [[ -n "${_scout_files[$path|]+x}" ]]; then
    compopt -o filenames 2>/dev/null
    COMPREPLY+=($(compgen -f -- "$cur"))
  fi
}
complete -F _scout scout
)";
  return out;
}

// ----------------------------------------------------------------------- zsh

std::string zsh_clean(std::string s) {
  s = escape_single(s);
  for (auto& ch : s)
    if (ch == '[' || ch == ']' || ch == ':') ch = ' ';
  return s;
}

std::string zsh_action(const ArgInfo& a) {
  if (!a.takes_value) return "";
  if (!a.choices.empty()) return fmt::format(":value:({})", fmt::join(a.choices, " "));
  if (a.is_path) return ":file:_files";
  return ":value:";
}

std::string zsh_args(const std::vector<ArgInfo>& options) {
  std::string out;
  for (const auto& o : options)
    for (const auto& n : o.names) out += fmt::format("    '{}[{}]{}' \\\n", n, zsh_clean(o.description), zsh_action(o));
  return out;
}

std::string zsh_fn(const std::string& path) {
  std::string n = "_scout_cmd";
  for (char c : path) n += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return n;
}

std::string zsh_script(const CommandInfo& root) {
  std::string out =
      "#compdef scout\n# zsh completion for scout; generated by `scout completion zsh` from the command table.\n";
  walk(root, "", [&](const std::string& path, const CommandInfo& c) {
    if (path.empty()) return;
    out += fmt::format("{}() {{\n  local depth=$1\n", zsh_fn(path));
    if (!c.subcommands.empty()) {
      out += "  local -a subs\n  subs=(\n";
      for (const auto& s : c.subcommands) out += fmt::format("    '{}:{}'\n", s.name, zsh_clean(s.description));
      out += "  )\n";
      out +=
          "  if (( CURRENT == depth + 1 )) && [[ \"$words[CURRENT]\" != -* ]]; then\n    _describe 'subcommand' subs\n "
          "   return\n  fi\n";
      out += "  case \"$words[depth+1]\" in\n";
      for (const auto& s : c.subcommands)
        out += fmt::format("    {}) {} $((depth + 1)); return ;;\n", s.name, zsh_fn(path + " " + s.name));
      out += "  esac\n";
    }
    out += "  _arguments \\\n";
    out += zsh_args(c.options);
    out += zsh_args(root.options);
    for (const auto& p : c.positionals) {
      if (!p.choices.empty())
        out += fmt::format("    '*:{}:({})' \\\n", zsh_clean(p.description), fmt::join(p.choices, " "));
      else if (p.is_path)
        out += fmt::format("    '*:{}:_files' \\\n", zsh_clean(p.description));
    }
    out += "    && return 0\n}\n";
  });
  out += "_scout() {\n  local -a subcommands\n  subcommands=(\n";
  for (const auto& s : root.subcommands) out += fmt::format("    '{}:{}'\n", s.name, zsh_clean(s.description));
  out += "    'help:Show the help of a command'\n  )\n";
  out += "  if (( CURRENT == 2 )); then\n    _describe 'command' subcommands\n    return\n  fi\n";
  out += "  case \"$words[2]\" in\n";
  out += "    help) _describe 'command' subcommands ;;\n";
  for (const auto& s : root.subcommands) out += fmt::format("    {}) {} 2 ;;\n", s.name, zsh_fn(s.name));
  out += "  esac\n}\n_scout \"$@\"\n";
  return out;
}

// ---------------------------------------------------------------------- fish

std::string fish_flags(const ArgInfo& a) {
  std::string flags;
  for (const auto& n : a.names)
    flags += n.rfind("--", 0) == 0 ? fmt::format(" -l {}", n.substr(2)) : fmt::format(" -s {}", n.substr(1));
  if (!a.takes_value) return flags;
  if (!a.choices.empty()) return flags + fmt::format(" -r -f -a '{}'", fmt::join(a.choices, " "));
  return flags + (a.is_path ? " -r -F" : " -r");
}

std::string fish_script(const CommandInfo& root) {
  std::string out = "# fish completion for scout; generated by `scout completion fish` from the command table.\n";
  out += "complete -c scout -f\n";
  std::vector<std::string> top = sub_names(root);
  for (const auto& s : root.subcommands)
    out += fmt::format("complete -c scout -n '__fish_use_subcommand' -a {} -d '{}'\n", s.name,
                       escape_single(s.description));
  out += "complete -c scout -n '__fish_use_subcommand' -a help -d 'Show the help of a command'\n";
  out += fmt::format("complete -c scout -n '__fish_seen_subcommand_from help' -a '{}'\n", fmt::join(top, " "));
  walk(root, "", [&](const std::string& path, const CommandInfo& c) {
    if (path.empty()) return;
    std::vector<std::string> parts;
    for (std::size_t p = 0, q; p <= path.size(); p = q + 1) {
      q = path.find(' ', p);
      if (q == std::string::npos) q = path.size();
      parts.push_back(path.substr(p, q - p));
    }
    std::string cond;
    for (const auto& p : parts)
      cond += fmt::format("{}__fish_seen_subcommand_from {}", cond.empty() ? "" : "; and ", p);
    if (!c.subcommands.empty()) {
      auto names = sub_names(c);
      for (const auto& s : c.subcommands)
        out += fmt::format("complete -c scout -n '{}; and not __fish_seen_subcommand_from {}' -a {} -d '{}'\n", cond,
                           fmt::join(names, " "), s.name, escape_single(s.description));
    }
    for (const auto& o : c.options)
      out += fmt::format("complete -c scout -n '{}'{} -d '{}'\n", cond, fish_flags(o), escape_single(o.description));
    for (const auto& p : c.positionals) {
      if (!p.choices.empty())
        out += fmt::format("complete -c scout -n '{}' -a '{}'\n", cond, fmt::join(p.choices, " "));
      else if (p.is_path)
        out += fmt::format("complete -c scout -n '{}' -F\n", cond);
    }
  });
  for (const auto& o : root.options)
    out += fmt::format("complete -c scout{} -d '{}'\n", fish_flags(o), escape_single(o.description));
  return out;
}

}  // namespace

std::string completion_script(const CLI::App& root, const std::string& shell) {
  CommandInfo info = describe(root);
  if (shell == "bash") return bash_script(info);
  if (shell == "zsh") return zsh_script(info);
  return fish_script(info);
}

CommandRunner register_completion(CLI::App& cmd, const GlobalOptions&) {
  auto shell = std::make_shared<std::string>();
  cmd.add_option("shell", *shell, "bash, zsh or fish")->required()->check(CLI::IsMember({"bash", "zsh", "fish"}));
  cmd.footer("Example: scout completion bash > /etc/bash_completion.d/scout");
  const CLI::App* root = cmd.get_parent();
  return [shell, root]() {
    write_stdout(completion_script(*root, *shell));
    return 0;
  };
}

}  // namespace scout
