from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

import pytest

from ckptlint.config import Settings
from ckptlint.engine import lint
from ckptlint.findings import LintReport
from ckptlint.versions import resolve_versions

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>[A-Z0-9, ]+)")


# A model that checkpoints each of its two blocks (non-reentrant), for scripts the tests write.
TOWER_SOURCE = """import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return x
"""


def lint_text(source: str, filename: str = "example.py", *, torch: str = "2.13", transformers: str = "5.23", settings: Optional[Settings] = None) -> LintReport:
    """Lint one in-memory file the way `ckptlint - --stdin-filename NAME` does."""
    settings = settings or Settings()
    versions = resolve_versions(settings, None, torch, transformers)
    return lint([], settings, versions, jobs=1, stdin=(filename, source))


def lint_folder(root: Path) -> LintReport:
    """Lint a project folder the way `ckptlint ROOT` does, for torch 2.13 and transformers 5.23."""
    settings = Settings()
    return lint([str(root)], settings, resolve_versions(settings, None, "2.13", "5.23"), jobs=1)


def readme_block(marker: str, language: str = "text") -> str:
    """The first ```language block after `marker` in README.md (example outputs are checked)."""
    readme = (ROOT / "README.md").read_text()
    assert marker in readme, marker
    match = re.search(rf"```{language}\n(.*?)```", readme.split(marker, 1)[1], re.DOTALL)
    assert match, f"no {language} block after {marker!r}"
    return match.group(1)


def codes(report: LintReport) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in report.findings]


def expected_marks(paths) -> set[tuple[str, object, str]]:
    """(path, line, code) per mark; in a notebook the line is (cell, line in the cell)."""
    marks = set()
    for path in paths:
        for where, line in _numbered_lines(Path(path)):
            match = EXPECT.search(line)
            if match:
                for code in match.group("codes").replace(",", " ").split():
                    marks.add((str(path), where, code))
    return marks


def _numbered_lines(path: Path):
    if path.suffix != ".ipynb":
        yield from enumerate(path.read_text().splitlines(), start=1)
        return
    for cell, data in enumerate(json.loads(path.read_text())["cells"], start=1):
        source = data["source"] if isinstance(data["source"], str) else "".join(data["source"])
        for number, line in enumerate(source.splitlines(), start=1):
            yield (cell, number), line


@pytest.fixture
def project(tmp_path, monkeypatch):
    """Write files into a temporary project and chdir there."""

    def write(files: dict[str, str]) -> Path:
        for name, text in files.items():
            target = tmp_path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        return tmp_path

    monkeypatch.chdir(tmp_path)
    return write
