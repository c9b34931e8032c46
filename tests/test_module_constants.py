"""Constants another module of the project defines: `use_reentrant=settings.USE_REENTRANT`,
`checkpoint(block, x, **CKPT_KWARGS)` with the dict imported. A module-level name bound once to a
literal that nothing changes is that literal wherever it is read; one that code assigns
(`settings.USE_REENTRANT = args.reentrant`) or rebinds (`global`) is not a constant."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ckptlint.cli import main

MODEL = """\
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

import settings
from settings import CKPT_KWARGS


class FlagNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=settings.USE_REENTRANT)
        return x


class SpreadNet(FlagNet):
    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, **CKPT_KWARGS)
        return x


if __name__ == "__main__":
    for model in (FlagNet(), SpreadNet()):
        model(torch.randn(2, 8)).sum().backward()
"""


def lint(project, settings: str, extra: str = "") -> set[tuple[str, int, str]]:
    project({"settings.py": settings, "model.py": MODEL + extra})
    result = CliRunner().invoke(main, [".", "--format", "json", "--no-cache"])
    assert result.exit_code in (0, 1), result.output
    return {(f["path"], f["line"], f["code"]) for f in json.loads(result.stdout)["findings"]}


def test_constants_of_another_module_are_their_literals(project):
    found = lint(project, 'USE_REENTRANT = True\nCKPT_KWARGS = {"use_reentrant": True}\n')
    assert found == {("model.py", 16, "CKPT001"), ("model.py", 23, "CKPT001")}


def test_constants_that_say_non_reentrant_clear_the_blocks(project):
    assert lint(project, 'USE_REENTRANT = False\nCKPT_KWARGS = {"use_reentrant": False}\n') == set()


@pytest.mark.parametrize(
    "changed",
    [
        ("USE_REENTRANT = True\nUSE_REENTRANT = False\n", ""),  # bound twice
        ("USE_REENTRANT = True\n\ndef configure(flag):\n    global USE_REENTRANT\n    USE_REENTRANT = flag\n", ""),
        ("USE_REENTRANT = True\n", "\nsettings.USE_REENTRANT = bool(torch.cuda.device_count())\n"),  # assigned by another module
    ],
)
def test_a_name_something_rebinds_is_not_a_constant(project, changed):
    settings, extra = changed
    found = lint(project, settings + 'CKPT_KWARGS = {"use_reentrant": False}\n', extra)
    assert ("model.py", 16, "CKPT001") not in found
