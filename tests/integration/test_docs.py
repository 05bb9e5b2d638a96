"""Man pages and completions stay in step with the command table and --help."""
import os
import re
import subprocess

from scoutlib import SOURCE_DIR, ScoutTestCase, run

SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "OUTPUT", "EXIT STATUS", "EXAMPLES", "SEE ALSO"]


def table_commands():
    with open(os.path.join(SOURCE_DIR, "cli", "commands.def")) as f:
        return re.findall(r'^SCOUT_COMMAND\(\w+, "([^"]+)"', f.read(), re.M)


def read(*parts):
    with open(os.path.join(SOURCE_DIR, *parts)) as f:
        return f.read()


def roff_text(page):
    """Man page text with roff escapes for '-' undone, so flags read as typed."""
    return page.replace("\\-", "-")


def help_flags(args):
    r = run(args + ["--help"], fmt=None)
    assert r.rc == 0, r
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", r.stdout))
    subs = []
    m = re.search(r"^Subcommands:\n((?:\s+.*\n?)*)", r.stdout, re.M)
    if m:
        subs = re.findall(r"^\s+([a-z][a-z0-9-]*)\s", m.group(1), re.M)
    return flags - {"--help"}, subs


class Docs(ScoutTestCase):
    def test_every_command_has_a_complete_man_page_listed_in_the_index(self):
        index = roff_text(read("man", "scout.1"))
        for name in table_commands():
            with self.subTest(command=name):
                page = read("man", f"scout-{name}.1")
                for section in SECTIONS:
                    self.assertIn(f".SH {section}", page, f"man/scout-{name}.1 lacks {section}")
                self.assertIn(f"scout-{name}", index)

    def test_every_help_flag_is_documented_and_completes(self):
        bash = read("completions", "scout.bash")
        zsh = read("completions", "_scout")
        fish = read("completions", "scout.fish")
        for name in table_commands():
            page = roff_text(read("man", f"scout-{name}.1"))
            flags, subs = help_flags([name])
            for sub in subs:
                more, _ = help_flags([name, sub])
                flags |= more
            for flag in sorted(flags):
                with self.subTest(command=name, flag=flag):
                    self.assertIn(flag, page, f"man/scout-{name}.1 does not document {flag}")
                    self.assertRegex(bash, re.escape(flag) + r"\b")
                    self.assertIn(f"'{flag}[", zsh)
                    self.assertIn(f"-l {flag[2:]}", fish)
            self.assertIn(name, bash)

    def test_committed_completions_are_the_generated_ones(self):
        for shell, path in [("bash", "scout.bash"), ("zsh", "_scout"), ("fish", "scout.fish")]:
            with self.subTest(shell=shell):
                r = run(["completion", shell], fmt=None)
                self.assertEqual(r.rc, 0, r)
                self.assertEqual(r.stdout, read("completions", path),
                                 f"completions/{path} is stale: regenerate it with `scout completion {shell}`")

    def test_bash_completion_is_valid_and_completes_commands(self):
        script = os.path.join(SOURCE_DIR, "completions", "scout.bash")
        probe = f"""source {script}
COMP_WORDS=(scout gr); COMP_CWORD=1; _scout; echo "${{COMPREPLY[@]}}"
COMP_WORDS=(scout consensus --mo); COMP_CWORD=2; _scout; echo "${{COMPREPLY[@]}}"
"""
        out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0], "groups")
        self.assertEqual(lines[1], "--mode")
