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


def test_a_partial_of_checkpoint_imported_from_another_module_is_reported_where_it_is_called(project):
    """`fast_checkpoint = partial(checkpoint, use_reentrant=False, preserve_rng_state=False)` in
    `ckpt.py`, called in `model.py` on blocks that draw dropout: CKPT002 at the name in `model.py`
    (its keyword is spelled in the other file; locating it there crashed the file's analysis)."""
    project({
        "ckpt.py": "import functools\nfrom torch.utils.checkpoint import checkpoint\n\n"
        "fast_checkpoint = functools.partial(checkpoint, use_reentrant=False, preserve_rng_state=False)\n",
        "model.py": "import torch.nn as nn\nfrom ckpt import fast_checkpoint\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1)) for _ in range(2)])\n\n"
        "    def forward(self, h):\n"
        "        for block in self.blocks:\n"
        "            h = fast_checkpoint(block, h)\n"
        "        return h\n",
    })  # fmt: skip
    result = CliRunner().invoke(main, [".", "--format", "json", "--no-cache"])
    document = json.loads(result.stdout)
    assert document["errors"] == [], document["errors"]
    assert {(f["path"], f["line"], f["column"], f["code"]) for f in document["findings"]} == {("model.py", 12, 17, "CKPT002")}


@pytest.mark.parametrize(
    "flag, spelled, expected",
    [
        ("True", "settings.CHECKPOINT_REENTRANT", {("model.py", 12, "CKPT003")}),
        ("True", "CHECKPOINT_REENTRANT", {("model.py", 12, "CKPT003")}),  # `from settings import CHECKPOINT_REENTRANT`
        ("False", "settings.CHECKPOINT_REENTRANT", set()),
        ("True\nCHECKPOINT_REENTRANT = False", "settings.CHECKPOINT_REENTRANT", set()),  # bound twice: not a constant
    ],
)
def test_a_partial_of_checkpoint_bound_to_another_modules_constant_takes_its_value(project, flag, spelled, expected):
    """`checkpoint = partial(torch.utils.checkpoint.checkpoint, use_reentrant=settings.CHECKPOINT_REENTRANT)`
    in `ckpt.py`: the keyword is the constant's literal wherever the partial is called."""
    project({
        "settings.py": f"CHECKPOINT_REENTRANT = {flag}\n",
        "ckpt.py": "from functools import partial\n\nimport torch.utils.checkpoint\n\nimport settings\n"
        "from settings import CHECKPOINT_REENTRANT\n\n"
        f"checkpoint = partial(torch.utils.checkpoint.checkpoint, use_reentrant={spelled})\n",
        "model.py": "import torch.nn as nn\nfrom ckpt import checkpoint\n\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(8, 8)\n\n"
        "    def forward(self, x, context=None):\n"
        "        if self.training:\n"
        "            return checkpoint(self._forward, x, context=context)\n"
        "        return self._forward(x, context=context)\n\n"
        "    def _forward(self, x, context=None):\n"
        "        return self.fc(x) + context\n",
    })  # fmt: skip
    result = CliRunner().invoke(main, [".", "--format", "json", "--no-cache", "--select", "ALL", "--ignore", "CKPT006"])
    document = json.loads(result.stdout)
    assert document["errors"] == [], document["errors"]
    assert {(f["path"], f["line"], f["code"]) for f in document["findings"]} == expected
