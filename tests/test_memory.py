"""Forked workers start with every page the parent holds: what the parent keeps alive when the
analysis starts is paid again by each worker."""

from __future__ import annotations

import json
import weakref

from click.testing import CliRunner

import ckptlint.engine
from ckptlint.cli import main

NET = """from torch import nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return checkpoint(self.proj, x, use_reentrant=False)
"""


def test_when_the_analysis_starts_only_the_texts_of_the_files_it_analyses_are_held(project, monkeypatch):
    project({"pkg/__init__.py": "", "pkg/net.py": NET, "pkg/util.py": "X = 1\n", "other.py": "import os\n"})
    sources: list[weakref.ref] = []
    real_read, real_map = ckptlint.engine.read_source, ckptlint.engine._map

    def tracked(*args, **kwargs):
        source = real_read(*args, **kwargs)
        sources.append(weakref.ref(source))
        return source

    held: list[set[str]] = []

    def mapping(func, units, jobs, state, action, crashed):
        if action == "analysing":
            held.append({source.path for ref in sources if (source := ref()) is not None})
            assert held[-1] == {unit.path for unit, _ in units}
        return real_map(func, units, jobs, state, action, crashed)

    monkeypatch.setattr(ckptlint.engine, "read_source", tracked)
    monkeypatch.setattr(ckptlint.engine, "_map", mapping)
    result = CliRunner().invoke(main, [".", "--format", "json", "-j", "1", "--no-cache"])
    assert json.loads(result.stdout)["files_checked"] == 4
    assert held == [{"pkg/net.py"}]
