#!/usr/bin/env python3
"""Benchmark ckptlint on real corpora, side by side with TorchFix and ruff.

    python bench/run.py [--quick] [--repeat N] [--skip-torchfix] [--full-torchfix]
                        [--skip-profile] [--corpus-dir DIR] [--output FILE]

Fetches the corpora with `pip download --no-deps` (pinned versions) into the cache folder
(default bench/.cache/), unzips them once, installs TorchFix and ruff into side virtualenvs there,
times every tool as a separate process (wall, CPU, peak RSS of the whole process tree) and
writes docs/benchmarks.md.  Standard library only; run it with the interpreter in which ckptlint
is installed.  See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import pstats
import re
import pickle
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = REPO / "bench" / ".cache"
DEFAULT_OUTPUT = REPO / "docs" / "benchmarks.md"

# name, version: the wheels `pip download --no-deps` fetches (the reference corpus of issue 5).
CORPORA = (
    ("transformers", "5.23.0"),
    ("diffusers", "0.42.1"),
    ("timm", "1.0.31"),
    ("peft", "0.21.2"),
    ("accelerate", "1.15.0"),
)
MAIN_CORPUS = "transformers"
TORCHFIX_REQUIREMENT = "torchfix==0.7.0"
RUFF_REQUIREMENT = "ruff==0.17.6"

# The scaling series: the code outside transformers/models/ plus a fraction of the model packages.
# Whole packages, because a model's checkpoint sites resolve only with the files beside it: a sample
# of single files leaves most of them unresolved, and the work per line then grows with the sample.
SCALING_FULL = (0.10, 0.25, 0.50)
SCALING_QUICK = (0.10, 0.25)
MODELS_DIR = "transformers/models"
# TorchFix takes minutes even on a tenth of transformers: its side-by-side tree is a sample of files.
TORCHFIX_FRACTION_FULL = 0.10
TORCHFIX_FRACTION_QUICK = 0.05

SAMPLE_INTERVAL = 0.05  # seconds between /proc samples of the process tree's RSS
PSS_EVERY = 5  # PSS (smaps_rollup, ~2 ms per 300 MB process) only every 5th sample: 250 ms

# Issue 5 targets (2-core machine, all rules on).
TARGET_TORCHFIX_RATIO = 20.0
ANCHOR_TORCHFIX_SECONDS = 2268.7  # TorchFix 0.7.0 on transformers 5.23.0, same kind of machine
TARGET_COLD_SECONDS = 120.0
AIM_COLD_SECONDS = 30.0
TARGET_WARM_SECONDS = 2.0
TARGET_SINGLE_FILE_SECONDS = 0.5
TARGET_PEAK_RSS_MB = 1024.0
TARGET_LINEAR_R2 = 0.98
TARGET_LINEAR_SLOPE_DRIFT = 1.25
TARGET_INCREMENTAL_SHARE = 0.10

DOMINATES_BEGIN = "<!-- what-dominates:begin (kept when the file is regenerated) -->"
DOMINATES_END = "<!-- what-dominates:end -->"
DOMINATES_PLACEHOLDER = (
    "_To be written from the profile tables below: which functions and which phase "
    "(parsing, index, semantic model, rules, I/O) take the time, and what that implies._"
)


def log(message: str) -> None:
    stamp = datetime.datetime.now().strftime("%H:%M:%S")
    print(f"[{stamp}] {message}", file=sys.stderr, flush=True)


# -- measuring one process ---------------------------------------------------------------------


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, rss pages) for every process visible in /proc."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue  # exited meanwhile
        fields = data[data.rindex(b")") + 2 :].split()
        # fields[0] is field 3 of proc(5) (state): ppid is field 4, rss field 24
        table[int(entry.name)] = (int(fields[1]), int(fields[21]))
    return table


def _pss_kib(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def tree_memory(root: int, page_size: int, with_pss: bool = True) -> tuple[int, Optional[int]]:
    """(RSS, PSS) in bytes summed over `root` and all its descendants.  RSS counts the pages that
    forked workers share once per process; PSS splits shared pages between their users (None
    when not asked for or not available)."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    rss, pss, stack = 0, 0, [root]
    pss_known = with_pss
    while stack:
        pid = stack.pop()
        if pid in table:
            rss += table[pid][1] * page_size
            kib = _pss_kib(pid) if pss_known else None
            if kib is None:
                pss_known = False
            else:
                pss += kib * 1024
        stack.extend(children.get(pid, ()))
    return rss, (pss if pss_known else None)


class TreeRssSampler(threading.Thread):
    """Samples the summed RSS and PSS of a process tree every SAMPLE_INTERVAL seconds; keeps the peaks."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.peak_pss: Optional[int] = None
        self.available = os.path.isdir("/proc/self")
        self._stop_event = threading.Event()
        self._page_size = os.sysconf("SC_PAGE_SIZE") if self.available else 0

    def run(self) -> None:
        count = 0
        while self.available:
            try:
                rss, pss = tree_memory(self.pid, self._page_size, with_pss=count % PSS_EVERY == 0)
            except (OSError, ValueError, IndexError):
                rss, pss = 0, None
            self.peak = max(self.peak, rss)
            if pss is not None:
                self.peak_pss = max(self.peak_pss or 0, pss)
            count += 1
            if self._stop_event.wait(SAMPLE_INTERVAL):
                return

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


@dataclass
class Sample:
    wall: float  # seconds, process start to exit
    cpu: float  # user + system seconds of the process and its reaped children
    rss_tree_mb: Optional[float]  # peak of the summed RSS over the process tree (/proc sampler)
    pss_tree_mb: Optional[float]  # peak of the summed PSS over the process tree
    rss_proc_mb: float  # ru_maxrss: the largest single process of the tree
    returncode: int
    load: float  # 1-minute load average when the run started
    digest: Optional[str] = None  # of the normalised JSON findings (ckptlint JSON runs)
    failure: Optional[str] = None  # why the run does not count (crash, unreadable report)


def run_measured(cmd: Sequence[str], cwd: Path, out: Path, env: Optional[dict[str, str]] = None,
                 timeout: Optional[float] = None) -> Sample:
    """Run `cmd` with stdout/stderr to files; wall time, CPU time and peak memory of its tree.
    After `timeout` seconds the tool and its workers are killed and the sample says so."""
    out.parent.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with open(out, "wb") as stdout, open(out.with_suffix(out.suffix + ".err"), "wb") as stderr:
        start = time.perf_counter()
        # Own session, so that an interrupted bench can kill the tool with its workers.
        proc = subprocess.Popen(list(cmd), cwd=cwd, stdout=stdout, stderr=stderr, env=env,
                                start_new_session=True)
        sampler = TreeRssSampler(proc.pid)
        sampler.start()
        timer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL)) if timeout else None
        if timer:
            timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            sampler.stop()
            if timer:
                timer.cancel()
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4 already
    return Sample(
        wall=wall,
        cpu=usage.ru_utime + usage.ru_stime,
        rss_tree_mb=sampler.peak / 2**20 if sampler.available else None,
        pss_tree_mb=sampler.peak_pss / 2**20 if sampler.peak_pss is not None else None,
        rss_proc_mb=usage.ru_maxrss / 1024,  # KiB on Linux
        returncode=proc.returncode,
        load=load,
        failure=f"timed out after {timeout:.0f} s (killed)" if timeout and wall >= timeout else None,
    )


def findings_digest(path: Path) -> Optional[str]:
    """Digest of what a ckptlint JSON report says (files, findings in order, errors), or None."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    core = {k: report.get(k) for k in ("files_checked", "findings", "errors")}
    return hashlib.sha256(json.dumps(core, sort_keys=True).encode()).hexdigest()[:16]


# -- trees and corpora ---------------------------------------------------------------------------


@dataclass
class Tree:
    name: str
    root: Path
    files: int
    lines: int


def python_files(root: Path) -> list[Path]:
    found = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        found.extend(Path(directory, f) for f in sorted(filenames) if f.endswith((".py", ".pyi")))
    return found


def count_lines(path: Path) -> int:
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def make_tree(name: str, root: Path) -> Tree:
    write_corpus_config(root)
    files = python_files(root)
    return Tree(name, root, len(files), sum(count_lines(f) for f in files))


def fetch_corpus(cache: Path, name: str, version: str) -> Path:
    """`pip download --no-deps` the release (once; the wheel, or the sdist of a project that
    publishes none) and unpack it (once); the unpacked folder."""
    dest = cache / "src" / f"{name}-{version}"
    marker = dest / ".bench-unpacked"
    if marker.is_file():
        return dest
    downloads = cache / "wheels"
    stem = f"{name.replace('-', '_')}-{version}"
    if not _downloaded(downloads, stem):
        log(f"pip download {name}=={version}")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps",
             "--dest", str(downloads), f"{name}=={version}"],
            check=True,
        )
    archive_path = _downloaded(downloads, stem)[0]
    log(f"unpack {archive_path.name}")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if archive_path.suffix == ".whl":
        with zipfile.ZipFile(archive_path) as archive:
            archive.extractall(tmp)
    else:
        with tarfile.open(archive_path) as archive:
            archive.extractall(tmp, filter="data")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    marker.write_text(archive_path.name + "\n")
    return dest


def _downloaded(downloads: Path, stem: str) -> list[Path]:
    return sorted(downloads.glob(f"{stem}-*.whl")) + sorted(downloads.glob(f"{stem}.tar.gz"))


def make_subset(cache: Path, source: Tree, fraction: float) -> Tree:
    """A copy of a deterministic `fraction` of `source`'s files (nested: 5% is inside 10%)."""
    relative = [p.relative_to(source.root).as_posix() for p in python_files(source.root)]
    ranked = sorted(relative, key=_sha1)
    return _copy_subset(cache, source, ranked[: max(1, round(fraction * len(ranked)))], f"{fraction * 100:g}%", f"{fraction * 100:g}pct")


def make_model_subset(cache: Path, source: Tree, fraction: float) -> Tree:
    """Everything outside transformers/models/ plus a deterministic `fraction` of the model
    packages, whole (nested: 10% is inside 25%)."""
    relative = [p.relative_to(source.root).as_posix() for p in python_files(source.root)]
    packages = sorted({r[len(MODELS_DIR) + 1:].split("/")[0] for r in relative if r.startswith(MODELS_DIR + "/") and r.count("/") > 2})
    ranked = sorted(packages, key=_sha1)
    taken = set(ranked[: max(1, round(fraction * len(ranked)))])
    chosen = [r for r in relative if not r.startswith(MODELS_DIR + "/") or r.count("/") == 2 or r.split("/")[2] in taken]
    return _copy_subset(cache, source, chosen, f"core + {fraction * 100:g}% of models", f"{fraction * 100:g}pct-models")


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def _copy_subset(cache: Path, source: Tree, chosen: list[str], label: str, slug: str) -> Tree:
    chosen = sorted(chosen)
    dest = cache / "subsets" / f"{source.root.name}-{slug}"
    stamp = hashlib.sha256("\n".join(chosen).encode()).hexdigest()
    marker = dest / ".bench-subset"
    if not (marker.is_file() and marker.read_text().strip() == stamp):
        log(f"creating subset {label} of {source.name} ({len(chosen)} files)")
        shutil.rmtree(dest, ignore_errors=True)
        for rel in chosen:
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source.root / rel, target)
        marker.write_text(stamp + "\n")
    return make_tree(f"{source.name} {label}", dest)


def write_corpus_config(root: Path) -> None:
    """A ckptlint.toml at the root of each tree: the tree is linted as a project of its own (its
    root bounds the project index a single-file run reads), with default settings instead of this
    repository's pyproject.toml, and this repository's .gitignore (which ignores bench/.cache/)
    does not hide the corpora.  The wheels have no .gitignore."""
    config = root / "ckptlint.toml"
    if not config.is_file():
        config.write_text(
            "# written by bench/run.py: lint the corpora as projects of their own\n"
            "respect-gitignore = false\n"
        )


# -- tools ---------------------------------------------------------------------------------------


def ensure_venv(cache: Path, requirement: str, executable: str) -> Path:
    """A side virtualenv with `requirement` installed (once); the path of its `executable`."""
    venv = cache / "venvs" / requirement.replace("==", "-")
    exe = venv / "bin" / executable
    marker = venv / ".bench-ready"
    if marker.is_file() and marker.read_text().strip() == requirement and exe.exists():
        return exe
    log(f"creating side virtualenv for {requirement}")
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", requirement], check=True)
    marker.write_text(requirement + "\n")
    return exe


def tool_version(cmd: Sequence[str], env: Optional[dict[str, str]] = None) -> str:
    result = subprocess.run([*cmd, "--version"], capture_output=True, text=True, env=env)
    text = (result.stdout or result.stderr).strip().splitlines()
    return text[0] if text else "?"


def ckptlint_command() -> list[str]:
    """The console script next to this interpreter (what users run), else `python -m ckptlint`."""
    script = Path(sys.executable).parent / "ckptlint"
    return [str(script)] if script.exists() else [sys.executable, "-m", "ckptlint"]


def source_digest(package: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def snapshot_ckptlint(cache: Path) -> tuple[Path, str]:
    """Copy the importable ckptlint package (and the rule documents of a checkout) into the cache,
    byte-compiled like an installed wheel, so that edits to an editable install during a long run
    cannot mix versions.  Returns (directory for PYTHONPATH, source digest)."""
    import compileall

    import ckptlint

    package = Path(ckptlint.__file__).resolve().parent
    digest = source_digest(package)
    dest = cache / "snapshot" / digest
    marker = dest / ".bench-snapshot"
    if not marker.is_file():
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(package, dest / "ckptlint", ignore=shutil.ignore_patterns("__pycache__"))
        if (package.parent / "rules").is_dir():  # rule documents of a checkout (see ckptlint/docs.py)
            shutil.copytree(package.parent / "rules", dest / "rules")
        compileall.compile_dir(str(dest / "ckptlint"), quiet=1)
        marker.write_text(str(package) + "\n")
    return dest, digest


@dataclass
class Tools:
    ckptlint: list[str]
    ckptlint_env: Optional[dict[str, str]]  # PYTHONPATH to the snapshot, or None
    ruff: Optional[Path]
    torchfix: Optional[Path]
    jobs_all: int

    def env_for(self, cmd: Sequence[str]) -> Optional[dict[str, str]]:
        """The environment for `cmd`: ckptlint runs import the snapshot (if any)."""
        return self.ckptlint_env if list(cmd[: len(self.ckptlint)]) == self.ckptlint else None

    def ck_cold(self, jobs: int) -> list[str]:
        return [*self.ckptlint, "check", ".", "--select", "ALL", "--format", "json", "--no-cache",
                "--jobs", str(jobs)]

    def ck_cached(self, jobs: int, cache_dir: Path) -> list[str]:
        return [*self.ckptlint, "check", ".", "--select", "ALL", "--format", "json",
                "--cache-dir", str(cache_dir), "--jobs", str(jobs)]

    def ck_single(self, relpath: str, cache_dir: Path) -> list[str]:
        # What the pre-commit hook runs (`ckptlint --force-exclude FILE`, with its result cache),
        # with the settings of the whole-tree runs that filled that cache.
        return [*self.ckptlint, "check", "--force-exclude", "--select", "ALL", "--cache-dir", str(cache_dir), relpath]

    def ruff_cmd(self, select_all: bool) -> list[str]:
        assert self.ruff is not None
        select = ["--select", "ALL"] if select_all else []
        return [str(self.ruff), "check", "--no-cache", "--isolated", *select,
                "--output-format", "concise", "--exit-zero", "."]

    def torchfix_cmd(self) -> list[str]:
        assert self.torchfix is not None
        return [str(self.torchfix), "."]  # default rules, default -j (all cores)


# -- measurements --------------------------------------------------------------------------------


@dataclass
class Measurement:
    key: str  # e.g. "ckptlint cold j1"
    tree: Tree
    command: list[str]
    samples: list[Sample] = field(default_factory=list)
    files: Optional[int] = None  # override (single-file runs)
    lines: Optional[int] = None

    @property
    def n_files(self) -> int:
        return self.files if self.files is not None else self.tree.files

    @property
    def n_lines(self) -> int:
        return self.lines if self.lines is not None else self.tree.lines

    @property
    def wall(self) -> float:
        return statistics.median(s.wall for s in self.samples)

    @property
    def cpu(self) -> float:
        return statistics.median(s.cpu for s in self.samples)

    @property
    def wall_range(self) -> tuple[float, float]:
        walls = [s.wall for s in self.samples]
        return min(walls), max(walls)

    @property
    def rss_tree_mb(self) -> Optional[float]:
        values = [s.rss_tree_mb for s in self.samples if s.rss_tree_mb is not None]
        return max(values) if values else None

    @property
    def pss_tree_mb(self) -> Optional[float]:
        values = [s.pss_tree_mb for s in self.samples if s.pss_tree_mb is not None]
        return max(values) if values else None

    @property
    def load(self) -> float:
        return statistics.median(s.load for s in self.samples)

    @property
    def rss_proc_mb(self) -> float:
        return max(s.rss_proc_mb for s in self.samples)

    @property
    def lines_per_second(self) -> float:
        return self.n_lines / self.wall if self.wall > 0 else float("inf")


@dataclass
class Job:
    key: str
    command: list[str]
    rounds: int  # at most this many repeats
    json_report: bool = False
    before: Optional[Callable[[int], None]] = None  # called with the round before each timed run
    after: Optional[Callable[[int], None]] = None
    files: Optional[int] = None
    lines: Optional[int] = None


class Bench:
    def __init__(self, args: argparse.Namespace, cache: Path, tools: Tools) -> None:
        self.args = args
        self.cache = cache
        self.tools = tools
        self.results: dict[str, Measurement] = {}  # "tree name :: key" -> measurement
        self.commands: list[tuple[str, str, str]] = []  # (tree, key, shown command)
        self.failures: list[tuple[str, str, str]] = []  # (tree, key, why)

    def shown(self, cmd: Sequence[str]) -> str:
        """A command as printed in the report: tool names instead of venv paths, $CACHE."""
        names = {str(self.tools.ruff): "ruff", str(self.tools.torchfix): "torchfix"}
        if len(self.tools.ckptlint) == 1:
            names[self.tools.ckptlint[0]] = "ckptlint"
        parts = []
        for part in cmd:
            part = names.get(part, part)
            part = part.replace(str(self.cache), "$CACHE")
            parts.append(part if re.fullmatch(r"[\w@%+=:,./$-]+", part) else f"'{part}'")
        text = " ".join(parts)
        return text.replace(f"{sys.executable} -m ckptlint", "ckptlint").replace(sys.executable, "python")

    def run_block(self, tree: Tree, jobs: Sequence[Job]) -> None:
        """Run `jobs` round-robin (so that noise hits every tool alike), each up to its rounds."""
        measurements = {
            job.key: self.results.setdefault(
                f"{tree.name} :: {job.key}",
                Measurement(job.key, tree, job.command, files=job.files, lines=job.lines),
            )
            for job in jobs
        }
        for job in jobs:
            self.commands.append((tree.name, job.key, self.shown(job.command)))
        timed_out: set[str] = set()  # a run that hung once is not repeated
        for round_ in range(max(job.rounds for job in jobs)):
            for job in jobs:
                if round_ >= job.rounds or job.key in timed_out:
                    continue
                if job.before:
                    job.before(round_)
                out = self.cache / "runs" / _slug(f"{tree.name}-{job.key}")
                try:
                    sample = run_measured(job.command, tree.root, out, self.tools.env_for(job.command),
                                          None if job.key == "torchfix" else self.args.timeout)
                finally:
                    if job.after:
                        job.after(round_)
                err = out.with_suffix(out.suffix + ".err").read_text(errors="replace")
                if job.json_report:
                    sample.digest = findings_digest(out)
                    if sample.digest is None:
                        sample.failure = "no JSON report"
                if sample.returncode not in (0, 1) and not sample.failure:
                    sample.failure = f"exit code {sample.returncode}"
                if "Traceback (most recent call last)" in err:
                    sample.failure = "crashed: " + err.strip().splitlines()[-1][:200]
                if sample.failure and sample.failure.startswith("timed out"):
                    timed_out.add(job.key)
                if sample.failure:
                    log(f"WARNING: {job.key} on {tree.name} does not count ({sample.failure}):\n{err[-2000:]}")
                    self.failures.append((tree.name, job.key, sample.failure))
                else:
                    measurements[job.key].samples.append(sample)
                rss = f"{sample.rss_tree_mb:.0f}" if sample.rss_tree_mb is not None else "n/a"
                log(f"{tree.name:<24} {job.key:<30} round {round_ + 1}: {sample.wall:8.2f} s wall "
                    f"{sample.cpu:8.2f} s cpu {rss:>6} MB rc={sample.returncode} load {sample.load:.1f}")

    def get(self, tree: Tree, key: str) -> Optional[Measurement]:
        m = self.results.get(f"{tree.name} :: {key}")
        return m if m and m.samples else None


def _slug(text: str) -> str:
    return re.sub(r"[^\w.-]+", "_", text).strip("_") + ".out"


def cold_jobs(bench: Bench, rounds: int, with_ruff: bool, with_torchfix: int) -> list[Job]:
    tools = bench.tools
    jobs = [
        Job("ckptlint cold j1", tools.ck_cold(1), rounds, json_report=True),
        Job(f"ckptlint cold j{tools.jobs_all}", tools.ck_cold(tools.jobs_all), rounds, json_report=True),
    ]
    if with_ruff and tools.ruff:
        jobs.append(Job("ruff --select ALL", tools.ruff_cmd(True), rounds))
        jobs.append(Job("ruff (default rules)", tools.ruff_cmd(False), rounds))
    if with_torchfix and tools.torchfix:
        jobs.append(Job("torchfix", tools.torchfix_cmd(), with_torchfix))
    return jobs


def warm_and_incremental(bench: Bench, tree: Tree, rounds: int, edit_file: Path) -> Path:
    """Fill a cache (timed: cold with cache writes), then time warm runs; with all cores, also
    runs after editing or touching one file."""
    tools = bench.tools
    for jobs in (1, tools.jobs_all):
        cache_dir = bench.cache / "ckptlint-cache" / _slug(f"{tree.name}-j{jobs}")[: -len(".out")]
        shutil.rmtree(cache_dir, ignore_errors=True)
        cmd = tools.ck_cached(jobs, cache_dir)
        bench.run_block(tree, [Job(f"ckptlint fill cache j{jobs}", cmd, 1, json_report=True)])
        bench.run_block(tree, [Job(f"ckptlint warm j{jobs}", cmd, rounds, json_report=True)])
        if jobs == tools.jobs_all:
            incremental(bench, tree, rounds, edit_file, cmd, f"j{jobs}")
    return cache_dir  # filled, with all cores

def incremental(bench: Bench, tree: Tree, rounds: int, edit_file: Path, cmd: list[str], suffix: str) -> None:
    """Time runs on a filled cache after one file's content changed, and after only its mtime did."""
    original = edit_file.read_bytes()
    stat = edit_file.stat()

    def edit(round_: int) -> None:  # new content each round: always a cache miss
        edit_file.write_bytes(original + f"# bench edit {round_} {time.time_ns()}\n".encode())

    def restore(_: int) -> None:
        edit_file.write_bytes(original)
        os.utime(edit_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    def insert(round_: int) -> None:  # a line at the top: every line below it moves
        edit_file.write_bytes(f"# bench edit {round_} {time.time_ns()}\n".encode() + original)

    def touch(_: int) -> None:
        os.utime(edit_file)

    rel = edit_file.relative_to(tree.root).as_posix()
    bench.commands.append((tree.name, "(incremental)", f"append a comment line to {rel} (or insert one at its top), run, restore"))
    bench.run_block(tree, [
        Job(f"ckptlint edit 1 file {suffix}", cmd, rounds, json_report=True, before=edit, after=restore),
        Job(f"ckptlint edit 1 file, lines moved {suffix}", cmd, rounds, json_report=True, before=insert, after=restore),
        Job(f"ckptlint touch 1 file {suffix}", cmd, rounds, json_report=True, before=touch, after=restore),
    ])
    bench.run_block(tree, [Job(f"ckptlint warm after edits {suffix}", cmd, 1, json_report=True)])


def single_file_jobs(bench: Bench, tree: Tree, files: Sequence[Path], rounds: int, warm_cache: Path) -> list[Job]:
    """The pre-commit hook's command on one file: *warm* with the cache a whole-tree run filled
    (the project's index comes from it), *cold* (the first file only) with an emptied cache."""
    jobs = []
    cold_cache = bench.cache / "ckptlint-cache" / "single-cold"

    def empty_cold_cache(_: int) -> None:
        shutil.rmtree(cold_cache, ignore_errors=True)

    for number, path in enumerate(files):
        rel = path.relative_to(tree.root).as_posix()
        jobs.append(Job(f"single file {path.name}", bench.tools.ck_single(rel, warm_cache), rounds,
                        files=1, lines=count_lines(path)))
        if number == 0:
            jobs.append(Job(f"single file cold cache {path.name}", bench.tools.ck_single(rel, cold_cache), rounds,
                            before=empty_cold_cache, files=1, lines=count_lines(path)))
    return jobs


def modeling_files_by_size(tree: Tree) -> list[Path]:
    """transformers' `modeling_*.py` files, smallest first."""
    candidates = (tree.root / "transformers" / "models").glob("*/modeling_*.py")
    return sorted(candidates, key=lambda p: (count_lines(p), p.as_posix()))


# -- profile -------------------------------------------------------------------------------------


def run_profile(bench: Bench, tree: Tree) -> dict:
    out = bench.cache / "profile" / "ckptlint.pstats"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "ckptlint", "check", ".",
           "--select", "ALL", "--format", "json", "--no-cache", "--jobs", "1"]
    log(f"profiling ckptlint --jobs 1 --no-cache on {tree.name}")
    sample = run_measured(cmd, tree.root, bench.cache / "runs" / "profile.out", bench.tools.ckptlint_env)
    if sample.returncode not in (0, 1) or not out.is_file():
        raise SystemExit(f"the profiled run failed (exit code {sample.returncode}); see {bench.cache / 'runs' / 'profile.out.err'}")
    stats = pstats.Stats(str(out))
    rows = []
    areas: dict[str, float] = {}
    for (filename, line, func), (cc, nc, tt, ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
        area = _area(filename, func)
        rows.append({"function": _function_name(filename, line, func), "area": area,
                     "ncalls": nc if nc == cc else f"{nc}/{cc}", "tottime": tt, "cumtime": ct})
        if area == "built-ins":
            # isinstance, getattr, ...: charge their time to the area of each caller
            for (cfile, _cline, cfunc), caller_stats in callers.items():
                caller_area = _area(cfile, cfunc)
                areas[caller_area] = areas.get(caller_area, 0.0) + caller_stats[2]
        else:
            areas[area] = areas.get(area, 0.0) + tt
    total = stats.total_tt  # type: ignore[attr-defined]
    program = max((r["cumtime"] for r in rows), default=total)  # the outermost frame: the whole run
    informative = [r for r in rows if not WRAPPER_FRAMES.search(r["function"])]
    return {
        "tree": tree.name, "files": tree.files, "lines": tree.lines,
        "command": bench.shown(cmd).replace(str(out), "$CACHE/profile/ckptlint.pstats"),
        "wall": sample.wall, "total_tt": total, "program": program,
        "by_cumtime": sorted(informative, key=lambda r: -r["cumtime"])[:15],
        "by_tottime": sorted(rows, key=lambda r: -r["tottime"])[:15],
        "areas": sorted(areas.items(), key=lambda kv: -kv[1]),
    }


# Frames every run passes through (interpreter start, runpy, click dispatch): left out of the
# cumulative table, which would otherwise start with ten rows at 100%.
WRAPPER_FRAMES = re.compile(r"runpy|^<string>:|builtins\.exec>|^click/|^ckptlint/__main__\.py")


def _short_path(filename: str) -> str:
    if "/ckptlint/" in filename:  # the checkout, an installed package or the bench snapshot
        return "ckptlint/" + filename.rsplit("/ckptlint/", 1)[1]
    if filename.startswith(str(REPO)):
        return os.path.relpath(filename, REPO)
    for marker in ("site-packages/", f"python{sys.version_info[0]}.{sys.version_info[1]}/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def _function_name(filename: str, line: int, func: str) -> str:
    if filename == "~":
        return func  # a built-in, e.g. <built-in method builtins.compile>
    return f"{_short_path(filename)}:{line}({func})"


def _area(filename: str, func: str) -> str:
    """Which part of the work a function belongs to, for the breakdown of own time."""
    if filename == "~":
        if "libcst" in func:
            return "libcst native parser"
        if "builtins.compile" in func:
            return "ast.parse (compile)"
        return "built-ins"
    short = _short_path(filename)
    if short.startswith("ckptlint/"):
        parts = short[: -len(".py")].split("/")
        return "ckptlint." + ".".join(parts[1:3] if parts[1] in ("model", "rules", "reporters") else parts[1:2])
    if "/libcst/" in filename or short.startswith("libcst/"):
        return "libcst (Python)"
    if short.startswith(("click/", "tomli")):
        return "click / tomli"
    module = short.split("/")[0].split(":")[0].removesuffix(".py")
    return "stdlib " + re.sub(r"^<frozen (.*)>$", r"\1", module)


# -- the report ----------------------------------------------------------------------------------


def machine_info(tools: Tools, bench: Bench) -> list[tuple[str, str]]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or "?"
    ram = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    info = [
        ("date", datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")),
        ("cores (nproc)", str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())),
        ("CPU", cpu),
        ("RAM", ram),
        ("OS", f"{platform.system()} {platform.release()}"),
        ("Python", f"{platform.python_version()} ({sys.executable})"),
        ("ckptlint", f"{tool_version(tools.ckptlint, tools.ckptlint_env)} — {bench.args.ckptlint_state}"),
        ("libcst", _dist_version("libcst")),
        ("ruff", tool_version([str(tools.ruff)]) if tools.ruff else "not run"),
        ("torchfix", f"{TORCHFIX_REQUIREMENT} ({tool_version([str(tools.torchfix)])})" if tools.torchfix else "not run"),
        ("corpora", ", ".join(f"{name} {version}" for name, version in CORPORA)),
        ("load average at start / end", f"{bench.args.load_start} / {_loadavg()}"),
    ]
    return info


def _dist_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


def _git_state() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "ckptlint"],
                               capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    if not dirty:
        return f"git {head}, clean"
    return f"git {head} + uncommitted changes in {len(dirty)} file(s) under ckptlint/"


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def fmt_int(n: int) -> str:
    return f"{n:,}"


def fmt_s(seconds: float) -> str:
    return f"{seconds:.2f}" if seconds < 100 else f"{seconds:.0f}"


def fmt_mb(mb: Optional[float]) -> str:
    return "n/a" if mb is None else f"{mb:.0f}"


def measurement_table(rows: Iterable[Measurement], show_tree: bool = False) -> list[str]:
    head = ("| " + ("tree | " if show_tree else "") + "run | files | lines | wall s (median) | wall range | "
            "CPU s | lines/s | peak MB: RSS tree / PSS tree / largest proc | load | n |")
    lines = [head, "|" + ("---|" if show_tree else "") + "---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in rows:
        lo, hi = m.wall_range
        lines.append(
            "| " + (f"{m.tree.name} | " if show_tree else "")
            + f"{m.key} | {fmt_int(m.n_files)} | {fmt_int(m.n_lines)} | **{fmt_s(m.wall)}** | "
            f"{fmt_s(lo)}–{fmt_s(hi)} | {fmt_s(m.cpu)} | {fmt_int(round(m.lines_per_second))} | "
            f"{fmt_mb(m.rss_tree_mb)} / {fmt_mb(m.pss_tree_mb)} / {fmt_mb(m.rss_proc_mb)} | "
            f"{m.load:.1f} | {len(m.samples)} |"
        )
    return lines


def linear_fit(points: Sequence[tuple[float, float]]) -> tuple[float, float, float]:
    """Least squares y = a + b x; (a, b, r²)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    b = sxy / sxx if sxx else 0.0
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for _, y in points)
    ss_res = sum((y - a - b * x) ** 2 for x, y in points)
    return a, b, (1 - ss_res / ss_tot) if ss_tot else 1.0


@dataclass
class Report:
    bench: Bench
    main: Tree
    corpus_trees: list[Tree]
    subsets: list[Tree]
    torchfix_tree: Tree
    single_files: list[Path]
    edit_file: Path
    profile: Optional[dict]
    info: list[tuple[str, str]]
    argv: list[str]

    def render(self, previous: str) -> str:
        b, j = self.bench, self.bench.tools.jobs_all
        out: list[str] = []
        add = out.extend
        mode = "quick" if b.args.quick else "full"
        add([
            "# ckptlint benchmarks", "",
            f"Generated by `python bench/run.py {' '.join(self.argv)}` ({mode} mode, median of "
            f"{b.args.repeat} run(s) unless `n` says otherwise). Regenerate with the same command; "
            "only the *What dominates* paragraph is written by hand and kept between its markers. "
            "How the numbers are taken: [bench/README.md](../bench/README.md).", "",
            "Every run is a separate process timed from start to exit. *Peak MB*: the peak of the RSS "
            "summed over the process and all its children (sampled from /proc every 50 ms; pages "
            "shared by forked workers count once per process, so it over-states), the same for PSS "
            "(shared pages split between processes), and `ru_maxrss` of the largest single process. "
            "*CPU s* is user+system of the whole tree; *load* the median 1-minute load average when "
            "the runs started (above the core count, something else competed for CPU). The machine "
            "is shared and noisy: runs inside a table were interleaved round-robin, so ratios "
            "measured side by side are what count.", "",
            "## Machine", "", "| | |", "|---|---|",
        ])
        add(f"| {k} | {v} |" for k, v in self.info)
        add(["", "## Corpora", "",
             "Wheels fetched with `pip download --no-deps NAME==VERSION` and unzipped; every `.py` "
             "file counts (lines = newline count).", "",
             "| package | files | lines |", "|---|---:|---:|"])
        add(f"| {t.name} | {fmt_int(t.files)} | {fmt_int(t.lines)} |" for t in self.corpus_trees)
        add(["", "Subsets of transformers, deterministic: for the side-by-side run with TorchFix, files "
             "ranked by the SHA-1 of their path and the first N% taken; for scaling, every file outside "
             f"`{MODELS_DIR}/` (*core*) plus the first N% of the model packages ranked by the SHA-1 of "
             "their name, whole, so that a model's checkpoint sites resolve as they do in the full "
             "package. Smaller subsets of a kind are inside larger ones.", "",
             "| subset | files | lines |", "|---|---:|---:|"])
        add(f"| {t.name} | {fmt_int(t.files)} | {fmt_int(t.lines)} |" for t in [self.torchfix_tree, *self.subsets])
        add([""])
        add(self.targets())
        add(["", "## Whole transformers package, cold (no cache)", ""])
        add(measurement_table(m for m in self._rows(self.main) if not m.key.startswith(("ckptlint warm", "ckptlint fill", "ckptlint edit", "ckptlint touch", "single"))))
        add(["", self._ruff_sentence(self.main)])
        add(["", "## Warm cache and incremental runs (transformers)", "",
             f"The cache is emptied, filled by one timed run (*fill*), then timed unchanged (*warm*). "
             f"*edit 1 file*: a comment line with fresh content is appended to "
             f"`{self.edit_file.relative_to(self.main.root).as_posix()}` before each run and removed "
             f"after it (a real cache miss for that file and whatever depends on it); *lines moved*: the "
             f"comment line is inserted at the top instead, so every line below it moves; *touch 1 file*: "
             f"only its mtime changes (the cache is keyed by content).", ""])
        add(measurement_table(m for m in self._rows(self.main) if m.key.startswith(("ckptlint fill", "ckptlint warm", "ckptlint edit", "ckptlint touch"))))
        add(["", "## Pre-commit case: one large file, process start to exit", "",
             "`ckptlint check --force-exclude --select ALL --cache-dir DIR FILE` (what the pre-commit "
             "hook runs, with the settings of the whole-tree runs), "
             "from the root of the transformers tree: the project's index covers the whole tree "
             "whatever is named. Warm: `DIR` is the cache the whole-tree runs above filled; *cold "
             "cache*: `DIR` is emptied before each run (the first run in a fresh clone).", ""])
        add(measurement_table(m for m in self._rows(self.main) if m.key.startswith("single")))
        add(["", f"## Side by side with TorchFix: {self.torchfix_tree.name}", ""])
        tf_rows = self._rows(self.torchfix_tree)
        if any(m.key == "torchfix" for m in tf_rows):
            add(["TorchFix is slow (~38 min on the whole transformers package in issue 5's reference "
                 "measurement), so "
                 "the default ratio tree is this subset; `--full-torchfix` adds TorchFix on the "
                 "whole package. TorchFix parses only files containing the text `torch`, but the "
                 "lines/s column uses the same input lines for every tool.", ""])
        else:
            add(["TorchFix was not run (`--skip-torchfix`).", ""])
        add(measurement_table(tf_rows))
        add(["", *self.ratio_table(), ""])
        add(["## Scaling: time vs lines (core + growing shares of the model packages, cold)", ""])
        add(self.scaling())
        others = [t for t in self.corpus_trees if t.name != self.main.name]
        if any(b.get(t, f"ckptlint cold j{j}") for t in others):
            add(["", "## The other packages (cold)", ""])
            add(measurement_table((m for t in others for m in self._rows(t)), show_tree=True))
        add(["", "## Consistency of findings", "",
             "Each ckptlint JSON report is reduced to its files count, findings (in order) and "
             "errors; every run on a tree must give the same digest (cold/warm, 1 job/all cores, "
             "before and after the incremental edits — runs with an edited file are excluded).", ""])
        add(self.consistency_lines())
        if b.failures:
            add(["", "Runs that failed and are not counted in any table:", ""])
            add(f"- {key} on {tree}: {why}" for tree, key, why in b.failures)
        add(["", "## What dominates", "", DOMINATES_BEGIN, _kept_paragraph(previous), DOMINATES_END, ""])
        add(self.profile_section())
        add(["", "## Exact commands", "",
             "`$CACHE` is the cache folder (default `bench/.cache/`); each command runs with the "
             "tree's root as working directory (`.` is the tree). A `ckptlint.toml` at each tree's root sets "
             "`respect-gitignore = false` so that this repository's `.gitignore` (which lists "
             "`bench/.cache/`) and `pyproject.toml` do not apply to the corpora.", "",
             "| tree | run | command |", "|---|---|---|"])
        seen = set()
        for tree, key, cmd in self.bench.commands:
            if (tree, key) not in seen:
                seen.add((tree, key))
                add([f"| {tree} | {key} | `{cmd}` |"])
        return "\n".join(out) + "\n"

    def _rows(self, tree: Tree) -> list[Measurement]:
        return [m for m in self.bench.results.values() if m.tree.name == tree.name and m.samples]

    def _ruff_sentence(self, tree: Tree) -> str:
        b, j = self.bench, self.bench.tools.jobs_all
        ck, ruff = b.get(tree, f"ckptlint cold j{j}"), b.get(tree, "ruff --select ALL")
        if not (ck and ruff):
            return ""
        return (f"ckptlint cold with {j} jobs takes {ck.wall / ruff.wall:.1f}× the wall time of "
                f"`ruff --select ALL` on the same tree ({ck.cpu / ruff.cpu:.1f}× its CPU time).")

    def ratio_table(self) -> list[str]:
        b, j = self.bench, self.bench.tools.jobs_all
        lines = ["| tree | ckptlint run | vs TorchFix: × faster (wall / CPU) | vs ruff --select ALL: × slower (wall / CPU) | vs ruff default: × slower (wall / CPU) |",
                 "|---|---|---:|---:|---:|"]
        for tree in (self.torchfix_tree, self.main):
            tf, ra, rd = b.get(tree, "torchfix"), b.get(tree, "ruff --select ALL"), b.get(tree, "ruff (default rules)")
            for key in (f"ckptlint cold j{j}", "ckptlint cold j1"):
                ck = b.get(tree, key)
                if not ck or not (tf or ra):
                    continue
                cells = [
                    f"**{tf.wall / ck.wall:.1f}×** / {tf.cpu / ck.cpu:.1f}×" if tf else "—",
                    f"{ck.wall / ra.wall:.1f}× / {ck.cpu / ra.cpu:.1f}×" if ra else "—",
                    f"{ck.wall / rd.wall:.1f}× / {ck.cpu / rd.cpu:.1f}×" if rd else "—",
                ]
                lines.append(f"| {tree.name} | {key} | " + " | ".join(cells) + " |")
        return lines

    def scaling_points(self, key: str) -> list[tuple[Tree, Measurement]]:
        points = []
        for tree in [*self.subsets, self.main]:
            m = self.bench.get(tree, key)
            if m:
                points.append((tree, m))
        return points

    def scaling(self) -> list[str]:
        j = self.bench.tools.jobs_all
        lines = ["| tree | files | lines | wall s j1 | lines/s j1 | "
                 f"wall s j{j} | lines/s j{j} | peak RSS MB j{j} (tree) |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for tree in [*self.subsets, self.main]:
            m1, mj = self.bench.get(tree, "ckptlint cold j1"), self.bench.get(tree, f"ckptlint cold j{j}")
            if not (m1 or mj):
                continue
            cells = [f"{fmt_s(m.wall)} | {fmt_int(round(m.lines_per_second))}" if m else "— | —" for m in (m1, mj)]
            lines.append(f"| {tree.name} | {fmt_int(tree.files)} | {fmt_int(tree.lines)} | "
                         + " | ".join(cells) + f" | {fmt_mb(mj.rss_tree_mb if mj else None)} |")
        lines.append("")
        for key in ("ckptlint cold j1", f"ckptlint cold j{j}"):
            fit = self.linearity(key)
            if fit:
                a, b_, r2, drift = fit
                lines.append(f"- `{key}`: least-squares fit wall = {a:.2f} s + {b_ * 1e6:.1f} µs × lines, "
                             f"R² = {r2:.4f}; the last segment costs {drift:.2f}× the fitted µs/line.")
        return lines

    def linearity(self, key: str) -> Optional[tuple[float, float, float, float]]:
        points = self.scaling_points(key)
        if len(points) < 3:
            return None
        xy = [(t.lines, m.wall) for t, m in points]
        a, b_, r2 = linear_fit(xy)
        (x1, y1), (x2, y2) = xy[-2], xy[-1]
        drift = ((y2 - y1) / (x2 - x1)) / b_ if b_ > 0 and x2 != x1 else float("nan")
        return a, b_, r2, drift

    def targets(self) -> list[str]:
        b, j, main = self.bench, self.bench.tools.jobs_all, self.main
        rows: list[tuple[str, str, str]] = []

        def verdict(ok: Optional[bool]) -> str:
            return "n/a" if ok is None else ("**met**" if ok else "**not met**")

        cold_j = b.get(main, f"ckptlint cold j{j}")
        cold_1 = b.get(main, "ckptlint cold j1")
        tf_full = b.get(main, "torchfix")
        tf_tree = self.torchfix_tree if b.get(self.torchfix_tree, "torchfix") else None
        if tf_full and cold_j:
            ratio = tf_full.wall / cold_j.wall
            rows.append((f"cold, whole transformers: ≥ {TARGET_TORCHFIX_RATIO:.0f}× faster than TorchFix (same run)",
                         f"{ratio:.1f}× (TorchFix {fmt_s(tf_full.wall)} s vs ckptlint j{j} {fmt_s(cold_j.wall)} s)",
                         verdict(ratio >= TARGET_TORCHFIX_RATIO)))
        elif tf_tree:
            tf, ck = b.get(tf_tree, "torchfix"), b.get(tf_tree, f"ckptlint cold j{j}")
            if tf and ck:
                ratio = tf.wall / ck.wall
                rows.append((f"cold: ≥ {TARGET_TORCHFIX_RATIO:.0f}× faster than TorchFix (same run; measured on {tf_tree.name})",
                             f"{ratio:.1f}× (TorchFix {fmt_s(tf.wall)} s vs ckptlint j{j} {fmt_s(ck.wall)} s)",
                             verdict(ratio >= TARGET_TORCHFIX_RATIO)))
        else:
            rows.append(("cold: ≥ 20× faster than TorchFix (same run)", "TorchFix not run", "n/a"))
        if not tf_full and cold_j:
            rows.append(("(reference, not side by side) whole transformers vs the "
                         f"{ANCHOR_TORCHFIX_SECONDS:,.0f} s TorchFix took in issue 5's reference measurement",
                         f"{ANCHOR_TORCHFIX_SECONDS / cold_j.wall:.1f}× (ckptlint j{j} {fmt_s(cold_j.wall)} s)",
                         "info"))
        if cold_j:
            rows.append((f"cold, whole transformers: ≤ {TARGET_COLD_SECONDS:.0f} s (aim {AIM_COLD_SECONDS:.0f} s)",
                         f"{fmt_s(cold_j.wall)} s with {j} jobs" + (f", {fmt_s(cold_1.wall)} s with 1 job" if cold_1 else "")
                         + (" (aim met)" if cold_j.wall <= AIM_COLD_SECONDS else ""),
                         verdict(cold_j.wall <= TARGET_COLD_SECONDS)))
        warm = [m for m in (b.get(main, "ckptlint warm j1"), b.get(main, f"ckptlint warm j{j}")) if m]
        if warm:
            rows.append((f"warm, nothing changed: < {TARGET_WARM_SECONDS:.0f} s",
                         ", ".join(f"{fmt_s(m.wall)} s ({m.key.split()[-1]})" for m in warm),
                         verdict(all(m.wall < TARGET_WARM_SECONDS for m in warm))))
        edits = [m for m in (b.get(main, f"ckptlint edit 1 file j{j}"), b.get(main, f"ckptlint edit 1 file, lines moved j{j}")) if m]
        edit, warm_j = max(edits, key=lambda m: m.wall, default=None), b.get(main, f"ckptlint warm j{j}")
        if edit and warm_j and cold_j:
            share = (edit.wall - warm_j.wall) / max(cold_j.wall - warm_j.wall, 1e-9)
            rows.append((f"one file edited: re-analyses only what it affects (proxy: extra time over warm "
                         f"≤ {TARGET_INCREMENTAL_SHARE:.0%} of cold − warm)",
                         f"{fmt_s(edit.wall)} s ({edit.key.removeprefix('ckptlint ')}) vs warm {fmt_s(warm_j.wall)} s, "
                         f"cold {fmt_s(cold_j.wall)} s ({max(share, 0):.1%})", verdict(share <= TARGET_INCREMENTAL_SHARE)))
        singles = [m for m in self._rows(main) if m.key.startswith("single") and "cold cache" not in m.key]
        if singles:
            rows.append((f"one large file, process start to exit: < {TARGET_SINGLE_FILE_SECONDS} s",
                         ", ".join(f"{fmt_s(m.wall)} s ({m.key.split()[-1]}, {fmt_int(m.n_lines)} lines)" for m in singles),
                         verdict(all(m.wall < TARGET_SINGLE_FILE_SECONDS for m in singles))))
        whole = [m for m in self._rows(main) if m.key.startswith("ckptlint") and not m.key.startswith("single")
                 and m.rss_tree_mb is not None]
        if whole:
            peak = max(whole, key=lambda m: m.rss_tree_mb or 0)
            pss = [m.pss_tree_mb for m in whole if m.pss_tree_mb is not None]
            rows.append((f"peak memory on the whole tree: < {TARGET_PEAK_RSS_MB:.0f} MB (RSS summed over the process tree)",
                         f"{fmt_mb(peak.rss_tree_mb)} MB RSS summed over the process tree ({peak.key}); "
                         + (f"PSS {fmt_mb(max(pss))} MB; " if pss else "")
                         + f"largest single process {fmt_mb(max(m.rss_proc_mb for m in whole))} MB",
                         verdict((peak.rss_tree_mb or 0) < TARGET_PEAK_RSS_MB)))
        for key in ("ckptlint cold j1", f"ckptlint cold j{j}"):
            fit = self.linearity(key)
            if fit:
                _, slope, r2, drift = fit
                rows.append((f"linear in lines ({key}): R² ≥ {TARGET_LINEAR_R2} and last segment ≤ "
                             f"{TARGET_LINEAR_SLOPE_DRIFT}× the fitted cost per line",
                             f"R² = {r2:.4f}, {slope * 1e6:.1f} µs/line, last segment {drift:.2f}×",
                             verdict(r2 >= TARGET_LINEAR_R2 and drift <= TARGET_LINEAR_SLOPE_DRIFT)))
        lines = ["## Targets (issue 5)", "", "| target | measured | verdict |", "|---|---|---|"]
        lines.extend(f"| {t} | {m} | {v} |" for t, m, v in rows)
        return lines

    def consistency(self) -> list[tuple[str, str, bool, int]]:
        """(tree, digests summary, ok, runs) for every tree with ckptlint JSON runs."""
        by_tree: dict[str, dict[str, list[str]]] = {}
        for m in self.bench.results.values():
            if m.key.startswith("ckptlint edit"):
                continue
            for s in m.samples:
                if s.digest is not None:
                    by_tree.setdefault(m.tree.name, {}).setdefault(s.digest, []).append(m.key)
        out = []
        for tree, digests in by_tree.items():
            runs = sum(len(v) for v in digests.values())
            summary = "; ".join(f"`{d}`: {', '.join(sorted(set(keys)))}" for d, keys in digests.items())
            out.append((tree, summary, len(digests) == 1, runs))
        return out

    def consistency_lines(self) -> list[str]:
        lines = ["| tree | runs | result | digests |", "|---|---:|---|---|"]
        for tree, summary, ok, runs in self.consistency():
            lines.append(f"| {tree} | {runs} | {'OK' if ok else '**MISMATCH**'} | {summary} |")
        return lines

    def profile_section(self) -> list[str]:
        p = self.profile
        if not p:
            return ["_No profile in this run (`--skip-profile`)._"]
        lines = [
            f"Profile: `{p['command']}` on {p['tree']} ({fmt_int(p['files'])} files, {fmt_int(p['lines'])} "
            f"lines): {fmt_s(p['wall'])} s wall under cProfile, {fmt_s(p.get('program', p['total_tt']))} s in "
            f"the profiled program, {fmt_s(p['total_tt'])} s summed own time (cProfile adds overhead to every "
            "Python call, so compare shares, not seconds; *cum share* is of the whole program).", "",
            "Own time (tottime) by area:", "", "| area | own time s | share |", "|---|---:|---:|",
        ]
        lines += [f"| {area} | {fmt_s(tt)} | {tt / p['total_tt']:.1%} |" for area, tt in p["areas"][:12]]
        for title, key in (("Top 15 functions by cumulative time", "by_cumtime"),
                           ("Top 15 functions by own time", "by_tottime")):
            lines += ["", f"{title}:", "", "| function | ncalls | tottime s | cumtime s | cum share |",
                      "|---|---:|---:|---:|---:|"]
            lines += [f"| `{r['function']}` | {r['ncalls']} | {fmt_s(r['tottime'])} | {fmt_s(r['cumtime'])} | "
                      f"{r['cumtime'] / p.get('program', p['total_tt']):.1%} |" for r in p[key]]
        return lines


def _kept_paragraph(previous: str) -> str:
    start, end = previous.find(DOMINATES_BEGIN), previous.find(DOMINATES_END)
    if start != -1 and end > start:
        kept = previous[start + len(DOMINATES_BEGIN) : end].strip()
        if kept:
            return kept
    return DOMINATES_PLACEHOLDER


# -- main ----------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="1 repeat, scaling on core + 10/25%% of the models, TorchFix on 5%% of the files, "
                             "profile on the 10%% subset")
    parser.add_argument("--repeat", type=int, default=None, help="timed repeats per run (median; default 3, 1 with --quick)")
    parser.add_argument("--skip-torchfix", action="store_true", help="do not install or run TorchFix")
    parser.add_argument("--full-torchfix", action="store_true",
                        help="also run TorchFix once on the whole transformers package (~40 min)")
    parser.add_argument("--torchfix-repeat", type=int, default=1,
                        help="repeats for TorchFix on its subset (default 1: it takes minutes)")
    parser.add_argument("--skip-profile", action="store_true", help="no cProfile run")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="kill a ckptlint or ruff run after this many seconds, count it as failed and "
                             "do not repeat it (default 900; TorchFix runs have no limit)")
    parser.add_argument("--skip-others", action="store_true", help="do not time the four smaller packages")
    parser.add_argument("--no-snapshot", action="store_true",
                        help="run the installed ckptlint in place instead of a byte-compiled snapshot "
                             "copied at start (the snapshot keeps a long run on one version while an "
                             "editable checkout is being edited)")
    parser.add_argument("--corpus-dir", type=Path, default=DEFAULT_CACHE,
                        help="cache folder for wheels, unpacked trees, side virtualenvs and raw runs "
                             "(default: bench/.cache/)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="report path (default: docs/benchmarks.md)")
    parser.add_argument("--render-only", action="store_true",
                        help="measure nothing: rewrite the report from the last run saved in the cache folder")
    args = parser.parse_args(argv)
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.repeat < 1 or args.torchfix_repeat < 1:
        parser.error("--repeat and --torchfix-repeat must be at least 1")
    if args.skip_torchfix and args.full_torchfix:
        parser.error("--skip-torchfix and --full-torchfix contradict each other")
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: kill the tool, restore files
    if args.render_only:
        state = args.corpus_dir.resolve() / "last-run.pickle"
        if not state.is_file():
            sys.exit(f"no saved run in {state}: run the benchmark first")
        with open(state, "rb") as f:
            report = pickle.load(f)
        return write_report(report, args.output.resolve())
    args.load_start = _loadavg()
    try:
        import ckptlint  # noqa: F401  (the bench must run where ckptlint is installed)
    except ImportError:
        sys.exit(f"ckptlint is not importable from {sys.executable}: run bench/run.py with the "
                 "interpreter of the virtualenv where ckptlint is installed")
    cache = args.corpus_dir.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    stale = cache / "ckptlint.toml"  # older runs wrote one config above all trees
    if stale.is_file() and stale.read_text().startswith("# written by bench/run.py"):
        stale.unlink()

    trees = {name: make_tree(f"{name} {version}", fetch_corpus(cache, name, version)) for name, version in CORPORA}
    main_tree = trees[MAIN_CORPUS]
    subsets = [make_model_subset(cache, main_tree, f) for f in (SCALING_QUICK if args.quick else SCALING_FULL)]
    tf_tree = make_subset(cache, main_tree, TORCHFIX_FRACTION_QUICK if args.quick else TORCHFIX_FRACTION_FULL)

    jobs_all = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    package = Path(ckptlint.__file__).resolve().parent
    args.ckptlint_state = f"{package} ({_git_state()})"
    digest = None
    if args.no_snapshot:
        ck_cmd, ck_env = ckptlint_command(), None
        args.ckptlint_state += f", source {source_digest(package)}, run in place"
    else:
        snapshot, digest = snapshot_ckptlint(cache)
        ck_cmd = [sys.executable, "-m", "ckptlint"]
        ck_env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(snapshot), os.environ.get("PYTHONPATH")]))}
        args.ckptlint_state += f", measured from snapshot {digest} taken at start"
    tools = Tools(
        ckptlint=ck_cmd,
        ckptlint_env=ck_env,
        ruff=ensure_venv(cache, RUFF_REQUIREMENT, "ruff"),
        torchfix=None if args.skip_torchfix else ensure_venv(cache, TORCHFIX_REQUIREMENT, "torchfix"),
        jobs_all=jobs_all,
    )
    bench = Bench(args, cache, tools)
    check_ckptlint_works(bench, trees["accelerate"])
    rounds = args.repeat
    llama = main_tree.root / "transformers" / "models" / "llama" / "modeling_llama.py"
    # A typical modeling file, one larger than 90% of them, and the largest.
    by_size = modeling_files_by_size(main_tree)
    single_files = list(dict.fromkeys([llama, by_size[int(0.9 * (len(by_size) - 1))], by_size[-1]]))

    # 1. Whole transformers, cold, interleaved with ruff (and TorchFix once with --full-torchfix).
    bench.run_block(main_tree, cold_jobs(bench, rounds, with_ruff=True, with_torchfix=1 if args.full_torchfix else 0))
    # 2. Warm cache, incremental edit/touch.
    warm_cache = warm_and_incremental(bench, main_tree, rounds, llama)
    # 3. Pre-commit case.
    bench.run_block(main_tree, single_file_jobs(bench, main_tree, single_files, max(rounds, 3), warm_cache))
    # 4. Side by side with TorchFix and ruff on a sample of files; the scaling subsets.
    bench.run_block(tf_tree, cold_jobs(bench, rounds, with_ruff=True, with_torchfix=min(args.torchfix_repeat, rounds)))
    for subset in subsets:
        bench.run_block(subset, cold_jobs(bench, rounds, with_ruff=False, with_torchfix=0))
    # 5. The other packages.
    if not args.skip_others:
        for name, tree in trees.items():
            if name != MAIN_CORPUS:
                bench.run_block(tree, [Job(f"ckptlint cold j{jobs_all}", tools.ck_cold(jobs_all), rounds, json_report=True),
                                       Job("ruff --select ALL", tools.ruff_cmd(True), rounds)])
    # 6. Profile.
    profile = None
    if not args.skip_profile:
        profile = run_profile(bench, tf_tree if args.quick else main_tree)

    info = machine_info(tools, bench)
    if digest and source_digest(package) != digest:
        print(f"note: {package} changed during the run; the numbers are for snapshot {digest}")
        info.append(("note", f"the checkout changed during the run; all runs used snapshot {digest}"))
    report = Report(bench, main_tree, list(trees.values()), subsets, tf_tree, single_files, llama,
                    profile, info, list(argv))
    (cache / "results.json").write_text(json.dumps(_raw_results(bench, profile), indent=1, default=str))
    with open(cache / "last-run.pickle", "wb") as f:  # for --render-only
        pickle.dump(report, f)
    return write_report(report, args.output.resolve())


def write_report(report: Report, output: Path) -> int:
    """Write the Markdown report (keeping the hand-written paragraph) and print the verdicts."""
    previous = output.read_text(encoding="utf-8") if output.is_file() else ""
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(report.render(previous), encoding="utf-8")
    print("\n".join(report.targets()))
    for tree, _summary, ok, runs in report.consistency():
        print(f"findings consistency on {tree} ({runs} runs): {'OK' if ok else 'MISMATCH'}")
    for tree, key, why in report.bench.failures:
        print(f"FAILED run (not counted): {key} on {tree}: {why}")
    print(f"\nwrote {output}")
    return 0 if all(ok for _, _, ok, _ in report.consistency()) and not report.bench.failures else 1


def check_ckptlint_works(bench: Bench, tree: Tree) -> None:
    """Refuse to measure a ckptlint that cannot lint (e.g. a checkout caught in the middle of an edit)."""
    out = bench.cache / "runs" / "sanity-check.out"
    cmd = bench.tools.ck_cold(1)
    sample = run_measured(cmd, tree.root, out, bench.tools.env_for(cmd))
    err = out.with_suffix(".out.err").read_text(errors="replace")
    if sample.returncode not in (0, 1) or findings_digest(out) is None or "Traceback" in err:
        sys.exit(f"ckptlint does not work on {tree.name} (exit code {sample.returncode}):\n{err[-3000:]}")


def _raw_results(bench: Bench, profile: Optional[dict]) -> dict:
    return {
        "measurements": [
            {"tree": m.tree.name, "key": m.key, "files": m.n_files, "lines": m.n_lines,
             "command": bench.shown(m.command), "samples": [vars(s) for s in m.samples]}
            for m in bench.results.values()
        ],
        "profile": profile,
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
