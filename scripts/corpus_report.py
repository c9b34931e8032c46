"""Lint large bodies of real Python and write docs/corpus-report.md: the running interpreter's
standard library, torch's own Python sources (from this environment) and the triaged corpora
(scripts/triage_corpus.py: the benchmark's transformers, diffusers, timm, peft and accelerate, and
the further ones), fetched by bench/run.py's fetch_corpus. Per tree: files, lines, crashes
(internal errors, tracebacks, exit codes other than 0/1/2: must be 0), the files ckptlint could
not parse next to the files `compile()` rejects on the same Python (must be the same files), wall
time and peak memory.

    python scripts/corpus_report.py                 # all trees; writes docs/corpus-report.md
    python scripts/corpus_report.py --skip-corpora  # stdlib and torch only (nothing downloaded)

Exits 1 when a tree had a crash or the parse errors differ from compile()'s.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "corpus-report.md"


def _corpora() -> tuple[object, list[tuple[str, str]]]:
    """bench/run.py (its fetch_corpus) and the triaged corpora: the benchmark's and the further ones."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import triage_corpus

    bench = triage_corpus.load_bench()
    return bench, [*bench.CORPORA, *triage_corpus.FURTHER_CORPORA]


# Each tree is linted as it is: every file (no default excludes but caches), no .gitignore.
CONFIG = 'exclude = ["__pycache__"]\nrespect-gitignore = false\n'
# Alone in an empty folder: the configuration's folder is the project ckptlint indexes besides
# the named tree, and it must hold nothing else.
CONFIG_NAME = "ckptlint.toml"
# Run as a child so that its peak RSS (and its workers') is ours to read alone.
MEASURE = """
import resource, subprocess, sys, time
started = time.monotonic()
done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
seconds = time.monotonic() - started
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.stdout.buffer.write(b"%d %.3f %d\\n" % (done.returncode, seconds, peak_kb) + done.stdout)
sys.stderr.buffer.write(done.stderr)
"""


@dataclass
class Tree:
    name: str
    root: Path
    excluded: tuple[str, ...] = ()  # folder names left out, besides __pycache__
    files: int = 0
    lines: int = 0
    checked: int = 0
    exit_code: int = 0
    seconds: float = 0.0
    peak_mb: float = 0.0
    crashes: list[str] = field(default_factory=list)
    not_parsed: dict[str, str] = field(default_factory=dict)  # path -> ckptlint's message
    rejected: dict[str, str] = field(default_factory=dict)  # path -> compile()'s error
    not_analysed: dict[str, str] = field(default_factory=dict)  # valid Python the analysis could not follow
    other_errors: dict[str, str] = field(default_factory=dict)
    command: str = ""


def python_files(tree: Tree) -> list[Path]:
    skipped = {"__pycache__", *tree.excluded}
    found = []
    for directory, dirnames, filenames in os.walk(tree.root):
        dirnames[:] = sorted(d for d in dirnames if d not in skipped)
        found.extend(Path(directory, f) for f in sorted(filenames) if f.endswith((".py", ".pyi")))
    return found


def compile_errors(files: list[Path]) -> dict[str, str]:
    """What this Python's compile() rejects, as ckptlint reads the file (bytes: coding cookies)."""
    rejected = {}
    for path in files:
        try:
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as error:
            rejected[str(path)] = f"{type(error).__name__}: {error}"
    return rejected


def lint(tree: Tree, config: Path) -> None:
    files = python_files(tree)
    tree.files = len(files)
    tree.lines = sum(p.read_bytes().count(b"\n") for p in files)
    command = ["ckptlint", str(tree.root), "--config", str(config), "--no-cache", "--format", "json", "--exit-zero", "--no-progress"]
    if tree.excluded:
        command += ["--extend-exclude", ",".join(tree.excluded)]
    tree.command = shlex.join([_short(part) for part in command]).replace(str(config.parent), "EMPTY")
    executable = str(Path(sys.executable).with_name("ckptlint"))
    done = subprocess.run([sys.executable, "-c", MEASURE, executable, *command[1:]], capture_output=True)
    head, _, report = done.stdout.partition(b"\n")
    code, seconds, peak_kb = head.split()
    tree.exit_code, tree.seconds, tree.peak_mb = int(code), float(seconds), int(peak_kb) / 1024
    stderr = done.stderr.decode(errors="replace")
    if tree.exit_code not in (0, 1, 2) or "Traceback" in stderr:
        tree.crashes.append(f"exit code {tree.exit_code}: {stderr[-2000:]}")
        return
    data = json.loads(report)
    tree.checked = data["files_checked"]
    for error in data["errors"]:
        path, message = os.path.abspath(error["path"]), error["message"]
        if "internal error" in message:
            tree.crashes.append(f"{path}: {message}")
        elif message.startswith(("syntax error", "cannot parse", "cannot decode", "bad encoding declaration", "unknown encoding")):
            tree.not_parsed[path] = message
        elif message.startswith("cannot analyse"):
            tree.not_analysed[path] = message
        else:
            tree.other_errors[path] = message
    tree.rejected = compile_errors(files)


def trees(skip_corpora: bool, corpus_dir: Path) -> list[Tree]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    found = [Tree(f"Python {platform.python_version()} standard library", stdlib, ("site-packages", "dist-packages"))]
    torch = importlib.util.find_spec("torch")  # found, not imported
    if torch is not None and torch.origin:
        found.append(Tree(f"torch {_version('torch')} (Python sources)", Path(torch.origin).parent))
    if not skip_corpora:
        bench, corpora = _corpora()
        for name, version in corpora:
            found.append(Tree(f"{name} {version}", bench.fetch_corpus(corpus_dir, name, version)))  # type: ignore[attr-defined]
    return found


def _version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)


def render(all_trees: list[Tree], command: str, load: tuple[float, float]) -> str:
    from ckptlint import __version__

    total = Tree("all", Path("."))
    for tree in all_trees:
        total.files += tree.files
        total.lines += tree.lines
        total.checked += tree.checked
        total.seconds += tree.seconds
        total.peak_mb = max(total.peak_mb, tree.peak_mb)
        total.crashes += tree.crashes
        total.not_parsed.update(tree.not_parsed)
        total.rejected.update(tree.rejected)
        total.not_analysed.update(tree.not_analysed)
        total.other_errors.update(tree.other_errors)
    out = [
        "# Corpus report",
        "",
        f"Generated by `{command}` (ckptlint {__version__} at commit {_commit()}, Python {platform.python_version()}, {os.cpu_count()} cores; all rules, no cache, default jobs).",
        "Every `.py`/`.pyi` file of each tree is linted as it is (no default excludes but `__pycache__`, no `.gitignore`).",
        "*Crashes* are internal errors, tracebacks and exit codes other than 0, 1 and 2; *not parsed* are the files ckptlint",
        "reports as syntax errors or cannot decode (encoding), next to the files `compile()` rejects on the same Python; *not analysed* are",
        "valid files the analysis could not follow (reported as `cannot analyse`, exit code 2, the other files still linted).",
        "Peak memory is the largest resident set of one process (ckptlint or one of its workers).",
        f"Load average (1 min) when the run started: {load[0]:.1f}, when it ended: {load[1]:.1f} (the machine was shared: wall times are not benchmarks, see benchmarks.md).",
        f"`EMPTY/{CONFIG_NAME}` is alone in an empty folder (the project ckptlint indexes besides the tree) and holds `{'`, `'.join(CONFIG.strip().splitlines())}`.",
        "",
        "| tree | files | lines | checked | crashes | not parsed | compile() rejects | same files | not analysed | other errors | wall time | peak memory |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for tree in [*all_trees, total]:
        same = "yes" if set(tree.not_parsed) == set(tree.rejected) else "**no**"
        name = f"**{tree.name}**" if tree is total else tree.name
        out.append(
            f"| {name} | {tree.files:,} | {tree.lines:,} | {tree.checked:,} | {len(tree.crashes)} | {len(tree.not_parsed)} | {len(tree.rejected)} | {same} |"
            f" {len(tree.not_analysed)} | {len(tree.other_errors)} | {tree.seconds:.1f} s | {tree.peak_mb:,.0f} MB |"
        )
    out += ["", "Commands (from the repository root, each in a wrapper process that measures time and peak memory):", ""]
    out += [f"- {tree.name}: `{tree.command}`" for tree in all_trees]
    for title, entries in (
        ("Crashes", [c for t in all_trees for c in t.crashes]),
        ("Not parsed by ckptlint", [f"`{_short(p)}`: {m}" for t in all_trees for p, m in sorted(t.not_parsed.items())]),
        ("Rejected by compile()", [f"`{_short(p)}`: {m}" for t in all_trees for p, m in sorted(t.rejected.items())]),
        ("Not analysed", [f"`{_short(p)}`: {m}" for t in all_trees for p, m in sorted(t.not_analysed.items())]),
        ("Other errors", [f"`{_short(p)}`: {m}" for t in all_trees for p, m in sorted(t.other_errors.items())]),
    ):
        out += ["", f"## {title}", ""]
        out += [f"- {entry}" for entry in entries] or ["None."]
    return "\n".join(out) + "\n"


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "ckptlint"], capture_output=True, text=True).stdout
    return (done.stdout.strip() or "unknown") + (" with local changes to ckptlint/" if dirty.strip() else "")


def _short(path: str) -> str:
    stdlib = sysconfig.get_paths()["stdlib"]
    if path.startswith(str(ROOT) + os.sep):
        return os.path.relpath(path, ROOT)
    if path.startswith(stdlib + os.sep):
        return os.path.relpath(path, stdlib)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-corpora", action="store_true", help="only the standard library and torch (no download)")
    parser.add_argument("--corpus-dir", type=Path, default=ROOT / "bench" / ".cache", help="where bench/run.py keeps the corpora")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    options = parser.parse_args()
    command = shlex.join(["python", "scripts/corpus_report.py", *sys.argv[1:]])
    all_trees = trees(options.skip_corpora, options.corpus_dir.resolve())
    load_before = os.getloadavg()[0]
    for tree in all_trees:
        print(f"linting {tree.name} ({tree.root})", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="ckptlint-corpus-") as empty:
            config = Path(empty) / CONFIG_NAME
            config.write_text(CONFIG)
            lint(tree, config)
        print(f"  {tree.files:,} files, {tree.seconds:.1f} s, {len(tree.crashes)} crashes, {len(tree.not_parsed)} not parsed, {len(tree.rejected)} rejected by compile()", file=sys.stderr, flush=True)
    options.output.write_text(render(all_trees, command, (load_before, os.getloadavg()[0])))
    print(f"wrote {options.output}", file=sys.stderr)
    bad = any(t.crashes or set(t.not_parsed) != set(t.rejected) for t in all_trees)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
