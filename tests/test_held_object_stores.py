"""CKPT007 through a method of an object the checkpointed code holds: `self.collector.add(loss)`
where `AuxLossCollector.add` appends its argument to `self.losses` (or stores it on `self`). The
collector is built by the model and handed down through constructors (`MoEBlock(d, collector)`,
`Router(d, collector)`). Measured in tests/runtime/test_held_object_stores_runtime.py
(fixtures/aux_loss_collectors.py): under reentrant checkpointing the collected loss does not
require grad, so the router's weights get no gradient from it.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import lint_text

COLLECTOR = '''
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class AuxLossCollector:
    def __init__(self):
        self.losses = []
        self.last = None

    def add(self, loss):
        self.losses.append(loss)

    def remember(self, loss):
        self.last = loss

    def count(self, loss):
        self.seen = len(self.losses)

    def pop_total(self):
        total = sum(self.losses)
        self.losses.clear()
        return total


class Router(nn.Module):
    def __init__(self, d, collector):
        super().__init__()
        self.gate = nn.Linear(d, 4)
        self.collector = collector

    def forward(self, x):
        probs = torch.softmax(self.gate(x), -1)
        {call}
        return x * probs.sum(-1, keepdim=True)


class Block(nn.Module):
    def __init__(self, d, collector):
        super().__init__()
        self.router = Router(d, collector)

    def forward(self, x):
        return self.router(x)


class Model(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.aux = AuxLossCollector()
        self.blocks = nn.ModuleList([Block(d, self.aux) for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant={reentrant})
        return x, self.aux.pop_total()


model = Model()
'''


def ckpt007_lines(call: str, reentrant: bool = True) -> list[int]:
    source = COLLECTOR.format(call=call, reentrant=reentrant)
    report = lint_text(source)
    assert report.errors == []
    return [f.line for f in report.findings if f.code == "CKPT007"]


@pytest.mark.parametrize(
    "call, escapes",
    [
        ("self.collector.add(probs.mean(0).pow(2).sum())", True),  # appended to `self.losses`
        ("self.collector.remember(probs.mean())", True),  # stored on the collector
        ("self.collector.count(probs.mean())", False),  # the argument goes nowhere
        ("self.collector.add(len(probs))", False),  # not a tensor
    ],
)
def test_a_tensor_handed_to_a_method_that_keeps_it(call, escapes):
    line = COLLECTOR.splitlines().index("        {call}") + 1
    assert ckpt007_lines(call) == ([line] if escapes else [])


def test_non_reentrant_mode_is_reported_too():
    line = COLLECTOR.splitlines().index("        {call}") + 1
    assert ckpt007_lines("self.collector.add(probs.mean())", reentrant=False) == [line]


def test_a_collector_of_another_module(tmp_path):
    """The collector class lives in another file of the project."""
    from click.testing import CliRunner

    from ckptlint.cli import main

    head, _, rest = COLLECTOR.partition("class Router")
    collector = head
    model = "import torch\nimport torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n\nfrom collectors import AuxLossCollector\n\n\nclass Router" + rest
    (tmp_path / "collectors.py").write_text(textwrap.dedent(collector))
    (tmp_path / "model.py").write_text(model.format(call="self.collector.add(probs.mean())", reentrant=True))
    (tmp_path / "pyproject.toml").write_text("[tool.ckptlint]\n")
    result = CliRunner().invoke(main, [str(tmp_path), "--no-cache", "--select", "CKPT007", "--format", "json"], catch_exceptions=False)
    assert '"code": "CKPT007"' in result.output and "AuxLossCollector.add" in result.output, result.output
