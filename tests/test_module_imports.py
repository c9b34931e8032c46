"""A project class reached as an attribute of an imported module (`import backbone as bb;
bb.Net(...)`) is the same class as one imported by name: its calls, and the constructor arguments
that decide its freezing and checkpointing, are found from either spelling."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ckptlint.cli import main

BACKBONE = """\
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, c, with_cp=False):
        super().__init__()
        self.with_cp = with_cp
        self.fc = nn.Linear(c, c)

    def forward(self, x):
        if self.with_cp:
            return checkpoint(self.fc, x, use_reentrant=True)
        return self.fc(x)


class Net(nn.Module):
    def __init__(self, with_cp=False, frozen_stages=-1):
        super().__init__()
        self.stem = nn.Linear(4, 8)
        self.layer = nn.Sequential(Block(8, with_cp), Block(8, with_cp))
        if frozen_stages >= 0:
            self.stem.requires_grad_(False)

    def forward(self, x):
        return self.layer(self.stem(x))
"""

DETECTOR = """\
import torch
import torch.nn as nn

{imported}


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = {net}(with_cp=True, frozen_stages=0)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.body(x))


if __name__ == "__main__":
    model = Detector()
    model(torch.randn(2, 4)).sum().backward()
"""


@pytest.mark.parametrize(("imported", "net"), [("import backbone as bb", "bb.Net"), ("import backbone", "backbone.Net"), ("from backbone import Net", "Net")])
def test_a_class_built_through_its_module_keeps_its_arguments(project, imported, net):
    project({"backbone.py": BACKBONE, "detector.py": DETECTOR.format(imported=imported, net=net)})
    result = CliRunner().invoke(main, [".", "--format", "json", "--no-cache"])
    findings = {(f["path"], f["line"], f["code"]) for f in json.loads(result.stdout)["findings"]}
    assert findings == {("backbone.py", 13, "CKPT005")}
