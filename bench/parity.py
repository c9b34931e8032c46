#!/usr/bin/env python3
"""Same answer whatever you name, on real code: `ckptlint FILE` must report for FILE exactly what
`ckptlint .` reports for it, on a corpus tree (tests/test_parity.py proves it on the fixtures).

    python bench/parity.py TREE [--files N] [--cold N] [--work DIR]

TREE is a project of its own (e.g. the transformers 5.23.0 wheel unzipped, with the ckptlint.toml
bench/run.py writes at its root). One whole-tree run fills a cache; then N of its `modeling_*.py`
files (those with findings first, then others spread by size) are linted one at a time with that
cache (warm: the pre-commit hook's usual case), and the first `--cold` of them with an empty cache
(a fresh clone's first hook run). Exit 1 on any difference. Standard library only; run it with the
interpreter in which ckptlint is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def check(tree: Path, cache: Path, *paths: str) -> dict:
    command = [sys.executable, "-m", "ckptlint", "check", "--force-exclude", "--select", "ALL", "--format", "json", "--cache-dir", str(cache), *paths]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout)


def by_file(report: dict) -> dict[str, list[tuple]]:
    found: dict[str, list[tuple]] = {}
    for f in report["findings"]:
        found.setdefault(f["path"], []).append((f.get("cell"), f["line"], f["column"], f["code"], f["message"]))
    return {path: sorted(rows) for path, rows in found.items()}


def chosen(tree: Path, expected: dict[str, list[tuple]], count: int) -> list[str]:
    """Modeling files with findings first, then the others spread evenly by size."""
    modeling = sorted((p.relative_to(tree).as_posix() for p in tree.rglob("modeling_*.py")), key=lambda rel: ((tree / rel).stat().st_size, rel))
    flagged = [rel for rel in modeling if rel in expected][: count // 2]
    rest = [rel for rel in modeling if rel not in flagged]
    step = max(1, len(rest) // max(1, count - len(flagged)))
    return flagged + rest[::step][: count - len(flagged)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--cold", type=int, default=2, help="how many of the files to lint with an empty cache too")
    parser.add_argument("--work", type=Path, help="folder for the caches (default: a temporary one, removed)")
    args = parser.parse_args()
    tree = args.tree.resolve()
    work = Path(args.work or tempfile.mkdtemp(prefix="ckptlint-parity-"))
    warm, cold = work / "warm", work / "cold"
    try:
        start = time.perf_counter()
        whole = check(tree, warm, ".")
        expected = by_file(whole)
        print(f"whole tree: {sum(map(len, expected.values()))} findings in {len(expected)} files ({time.perf_counter() - start:.0f} s)")
        failures = 0
        for number, rel in enumerate(chosen(tree, expected, args.files)):
            runs = [("warm", warm)] + ([("cold", cold)] if number < args.cold else [])
            for label, cache in runs:
                shutil.rmtree(cold, ignore_errors=True)
                start = time.perf_counter()
                alone = check(tree, cache, rel)
                same = by_file(alone) == ({rel: expected[rel]} if rel in expected else {})
                failures += not same
                print(f"{'same' if same else 'DIFFERENT'}  {label:4s} {time.perf_counter() - start:6.1f} s  {len(expected.get(rel, []))} findings  {rel}")
        return 1 if failures else 0
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
