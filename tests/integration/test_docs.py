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


def bash_complete(words, cword=None):
    """COMPREPLY of the committed bash completion for `words` (the last one being completed)."""
    script = os.path.join(SOURCE_DIR, "completions", "scout.bash")
    cword = len(words) - 1 if cword is None else cword
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    probe = f"source {script}\nCOMP_WORDS=({quoted}); COMP_CWORD={cword}; _scout; printf '%s\\n' \"${{COMPREPLY[@]}}\"\n"
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if line]


class Completions(ScoutTestCase):
    def test_nested_subcommands_and_shells(self):
        self.assertEqual(sorted(bash_complete(["scout", "completion", ""])), ["bash", "fish", "zsh"])
        self.assertEqual(sorted(bash_complete(["scout", "verify-ckpt", "manifest", ""])), ["check", "write"])
        self.assertEqual(sorted(bash_complete(["scout", "records", ""])), ["gc", "list", "trace"])
        self.assertIn("--dry-run", bash_complete(["scout", "records", "gc", "--"]))
        self.assertNotIn("--dry-run", bash_complete(["scout", "records", "list", "--"]))
        self.assertEqual(bash_complete(["scout", "he"]), ["help"])
        self.assertEqual(bash_complete(["scout", "help", "gr"]), ["groups"])

    def test_enumerated_values(self):
        self.assertEqual(sorted(bash_complete(["scout", "consensus", "--mode", ""])), ["exact", "statistical"])
        self.assertEqual(sorted(bash_complete(["scout", "consensus", "--direction", ""])), ["both", "high", "low"])
        self.assertIn("machine-lost", bash_complete(["scout", "verify-ckpt", "select", "--failure", ""]))
        self.assertEqual(sorted(bash_complete(["scout", "groups", "--format", ""])), ["auto", "json", "text"])
        self.assertEqual(bash_complete(["scout", "groups", "--mesh", "dp=4", "--format", "te"]), ["text"])

    def test_file_arguments_complete_file_names(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "model_rank0.safetensors")
            open(f, "w").close()
            prefix = os.path.join(d, "model_")
            self.assertEqual(bash_complete(["scout", "hash", prefix]), [f])
            self.assertEqual(bash_complete(["scout", "verify-ckpt", "--ledger", prefix]), [f])
            self.assertEqual(bash_complete(["scout", "catalog", "build", "-o", prefix]), [f])
            self.assertEqual(bash_complete(["scout", "verify-ckpt", "manifest", "write", prefix]), [f])
            self.assertEqual(bash_complete(["scout", "groups", "--mesh", prefix]), [])  # not a file argument

    def test_zsh_and_fish_offer_values_and_nested_subcommands(self):
        zsh = read("completions", "_scout")
        fish = read("completions", "scout.fish")
        self.assertIn("'--mode[", zsh)
        self.assertIn(":value:(exact statistical)", zsh)
        self.assertIn(":file:_files", zsh)
        self.assertIn("'write:", zsh)
        self.assertIn("-l mode -r -f -a 'exact statistical'", fish)
        self.assertIn("__fish_seen_subcommand_from verify-ckpt; and __fish_seen_subcommand_from manifest", fish)
        self.assertIn("-a 'bash zsh fish'", fish)
        self.assertRegex(fish, r"-l ledger -r -F")
        for shell in ["zsh", "fish"]:
            exe = subprocess.run(["bash", "-c", f"command -v {shell}"], capture_output=True, text=True).stdout.strip()
            if exe:
                path = os.path.join(SOURCE_DIR, "completions", "_scout" if shell == "zsh" else "scout.fish")
                r = subprocess.run([exe, "-n", path], capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr)


class Tree(ScoutTestCase):
    def test_include_graph_follows_architecture(self):
        r = subprocess.run(["/usr/bin/python3", os.path.join(SOURCE_DIR, "scripts", "check-includes.py")],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_man_pages_carry_the_project_version(self):
        version = re.search(r"project\(scout VERSION (\d+\.\d+\.\d+)", read("CMakeLists.txt")).group(1)
        out = run(["--version"], fmt=None).stdout
        self.assertIn(f"scout {version}", out)
        for page in sorted(os.listdir(os.path.join(SOURCE_DIR, "man"))):
            with self.subTest(page=page):
                th = read("man", page).splitlines()[0]
                self.assertRegex(th, r'^\.TH \S+ 1 "[^"]+" "scout ' + re.escape(version) + r'" "scout manual"$',
                                 f"man/{page}: .TH must name scout {version} (CMakeLists.txt's project version)")

    def test_contracts_live_in_the_repository(self):
        contracts = read("docs", "contracts.md")
        sections = set(re.findall(r"^## (.+)$", contracts, re.M))
        files = subprocess.run(["git", "-C", SOURCE_DIR, "ls-files"], capture_output=True, text=True).stdout.split()
        for f in files:
            if not f.endswith((".cpp", ".hpp", ".h", ".cu", ".py", ".sh", ".md", ".1")) or f.startswith("docs/"):
                continue
            if f == "tests/integration/test_docs.py":
                continue
            text = read(f)
            with self.subTest(file=f):
                self.assertFalse("DESIGN.md" in text, f"{f} cites a DESIGN.md that is not in the repository")
                for cited in re.findall(r'docs/contracts\.md "([^"]+)"', text):
                    self.assertIn(cited, sections, f"{f} cites a section docs/contracts.md lacks")

    def test_64_bit_ids_are_spelled_by_hex64_only(self):
        """docs/contracts.md "JSON conventions": a 64-bit id or hash is "0x" and 16 hex digits
        (lib/common/hex.hpp's hex64). A hand-written 64-bit hex format ({:x}, {:016x}, %llx,
        PRIx64...) in lib/, commands/ or cli/ prints ids another way (bare, short, or without the
        prefix), as `pg {:x}` and the straggler's `{:016x}` ids did. The two forms that give
        hex64's spelling ("0x{:016x}", "{:#018x}") are not flagged; byte formats ({:02x}) neither."""
        allowed = {
            ("lib/common/file.cpp", "{:x}"),  # not an id: a temporary file name's random suffix
        }
        spec = re.compile(r'(?<!0x)\{:(?!#018)#?(?:0?1[68])?[xX]\}|%#?(?:0?1[68])?(?:ll|l|j)[xX]|PRIx64')
        files = subprocess.run(["git", "-C", SOURCE_DIR, "ls-files", "lib", "commands", "cli"], capture_output=True,
                               text=True).stdout.split()
        bad = []
        for f in files:
            if not f.endswith((".cpp", ".hpp", ".h", ".cu")):
                continue
            for n, line in enumerate(read(f).splitlines(), 1):
                for m in spec.finditer(line):
                    if (f, m.group(0)) not in allowed:
                        bad.append(f"{f}:{n}: {m.group(0)} in {line.strip()}")
        self.assertEqual(bad, [], "spell 64-bit ids with hex64 (lib/common/hex.hpp)")
        # The schemas accept only that spelling: no pattern for a bare 16-digit id.
        for f in sorted(os.listdir(os.path.join(SOURCE_DIR, "schemas"))):
            if f.endswith(".json"):
                self.assertNotIn('"^[0-9a-f]{16}$"', read("schemas", f), f"schemas/{f}: a 64-bit id is ^0x[0-9a-f]{{16}}$")

    def test_no_command_is_offered_before_it_exists(self):
        names = set(table_commands()) | {"help"}
        texts = {f"man/{p}": read("man", p) for p in os.listdir(os.path.join(SOURCE_DIR, "man"))}
        texts["README.md"] = read("README.md")
        texts["ARCHITECTURE.md"] = read("ARCHITECTURE.md")
        for path, text in texts.items():
            plain = roff_text(text)
            # The forms that name a command: `scout X` in Markdown, 'scout X' or "scout X" quoted,
            # (scout X) in prose, and man-page references scout-X(1).
            pattern = (r"`scout ([a-z][a-z-]*[a-z])\b|['\"(]scout ([a-z][a-z-]*[a-z])\b|"
                       r"\bscout-([a-z][a-z-]*[a-z]) ?\(1\)")
            for m in re.finditer(pattern, plain):
                word = next(g for g in m.groups() if g)
                line = plain[plain.rfind("\n", 0, m.start()) + 1:plain.find("\n", m.end())]
                if word in names or word == "manual" or "planned" in line or "planned" in plain[m.end():m.end() + 80]:
                    continue
                with self.subTest(file=path, word=word):
                    self.fail(f"{path}: 'scout {word}' is not a command (mark it planned or remove it): {line.strip()}")

    def test_phase_and_collective_codes_agree_in_c_cpp_and_python(self):
        header = read("integrations", "publisher", "scout_publisher.h")
        snapshot_hpp = read("lib", "records", "snapshot.hpp")
        snapshot_cpp = read("lib", "records", "snapshot.cpp")
        python = read("integrations", "python", "scout_publisher", "_lib.py")

        def c_enum(prefix):
            return {m.group(1).lower(): int(m.group(2)) for m in re.finditer(prefix + r"([A-Z0-9_]+) = (\d+)", header)}

        def cpp_enum(name):
            body = re.search(r"enum class " + name + r"\s*:[^{]*\{([^}]*)\}", snapshot_hpp).group(1)
            out = {}
            for m in re.finditer(r"(\w+)\s*=\s*(\d+)", body):
                out[m.group(1)] = int(m.group(2))
            return out

        def cpp_names(enum):
            return dict(re.findall(r"case " + enum + r"::(\w+):\s*return \"(\w+)\";", snapshot_cpp))

        def py_dict(name):
            body = re.search(name + r"\s*=\s*\{([^}]*)\}", python, re.S).group(1)
            return {k: int(v) for k, v in re.findall(r'"(\w+)":\s*(\d+)', body)}

        for c_prefix, cpp, py in [("SCOUT_PHASE_", "Phase", "PHASES"), ("SCOUT_COLL_", "CollectiveType", "COLLECTIVES"),
                                  ("SCOUT_EXIT_", "ExitKind", "EXIT_KINDS")]:
            with self.subTest(table=cpp):
                c = c_enum(c_prefix)
                cc = cpp_enum(cpp)
                names = cpp_names(cpp)
                p = py_dict(py)
                self.assertGreaterEqual(len(c), 5)
                self.assertEqual(c, cc, "scout_publisher.h and snapshot.hpp disagree")
                self.assertEqual({names[k]: v for k, v in cc.items()}, c, "snapshot.cpp's names differ from the codes")
                self.assertEqual(p, c, "_lib.py disagrees with scout_publisher.h")
