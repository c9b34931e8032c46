"""Freezing written as loops over lists of modules, and checkpoints of modules frozen whole.

`for m in [self.conv1, self.bn1]: for p in m.parameters(): p.requires_grad = False` (mmdet / timm
`_freeze_stages`) freezes each module the list holds; a slice whose bounds are not literal may stop
anywhere, so what it reaches is not known (no finding). A reentrant checkpoint of a module whose
parameters are all frozen loses nothing: no CKPT001 nor CKPT005 however its input was computed.
Measured in tests/runtime/test_frozen_stages_runtime.py (fixtures/frozen_stages.py).
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import lint_text

PRELUDE = '''
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint, checkpoint_sequential


class Net(nn.Module):
    def __init__(self, frozen=1):
        super().__init__()
        self.frozen = frozen
        self.embed = nn.Embedding(10, 8)
        self.norm = nn.LayerNorm(8)
        self.stage = nn.Linear(8, 8)
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.head = nn.Linear(8, 2)
'''

FORWARD = '''
    def forward(self, ids):
        h = self.stage(self.norm(self.embed(ids)))
        h = checkpoint(self.blocks[0], h, use_reentrant=True)
        return self.head(h)


def train(model, batches):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for ids, labels in batches:
        torch.nn.functional.cross_entropy(model(ids), labels).backward()
        optimizer.step()


def main():
    model = Net()
    train(model, [])
'''


def findings(freeze: str, forward: str = FORWARD) -> set[str]:
    source = PRELUDE + textwrap.indent(textwrap.dedent(freeze), "        ") + forward
    report = lint_text(source)
    assert report.errors == []
    return {f.code for f in report.findings}


@pytest.mark.parametrize(
    "freeze, expected",
    [
        # Every module before the checkpoint frozen, spelled as loops over lists of modules.
        ("for m in [self.embed, self.norm, self.stage]:\n    for p in m.parameters():\n        p.requires_grad = False", {"CKPT005"}),
        ("for m in (self.embed, self.norm, self.stage):\n    m.requires_grad_(False)", {"CKPT005"}),
        ("stem = [self.embed, self.norm]\nfor m in stem:\n    m.requires_grad_(False)\nself.stage.requires_grad_(False)", {"CKPT005"}),
        ("groups = [self.embed, self.norm, self.stage, self.head]\nfor g in groups[:3]:\n    g.requires_grad_(False)", {"CKPT005"}),
        ("groups = [self.embed, self.norm, self.stage, self.head]\nfor g in groups[0:3]:\n    for p in g.parameters():\n        p.requires_grad = False", {"CKPT005"}),
        # The loop leaves the norm trainable: the stage's output requires grad.
        ("for m in [self.embed, self.stage]:\n    m.requires_grad_(False)", set()),
        # A slice of unknown length may stop anywhere: not known, no finding.
        ("groups = [self.embed, self.norm, self.stage, self.head]\nfor g in groups[: self.frozen]:\n    g.requires_grad_(False)", set()),
        # Frozen, then thawed by a second loop.
        ("for m in [self.embed, self.norm, self.stage]:\n    m.requires_grad_(False)\nfor m in [self.norm]:\n    m.requires_grad_(True)", set()),
        # The name is rebound before the loop: it no longer holds the list.
        ("stem = [self.embed, self.norm, self.stage]\nstem = []\nfor m in stem:\n    m.requires_grad_(False)", set()),
    ],
)
def test_freeze_loops_over_lists_of_modules(freeze, expected):
    assert findings(freeze) == expected


@pytest.mark.parametrize("thaw", ["for block in self.blocks[-self.frozen:]:\n    block.requires_grad_(True)", "for block in self.blocks[1:]:\n    for p in block.parameters():\n        p.requires_grad = True"])
def test_thawing_some_elements_of_a_container_counts_the_container_as_trainable(thaw):
    """Freeze everything, then thaw the last blocks (`layers[-n:]`, n from the constructor): the
    blocks may train, the embedding in front of them certainly does not (CKPT005, measured: the
    backward fails with "element 0 of tensors does not require grad" when the head is frozen too)."""
    forward = PROBE_FORWARD.replace("{checkpoint}", "for block in self.blocks:\n            h = checkpoint(block, h, use_reentrant=True)")
    assert findings("self.requires_grad_(False)\n" + thaw, forward) == {"CKPT005"}


PROBE_FORWARD = '''
    def forward(self, ids):
        h = self.embed(ids)
        {checkpoint}
        return self.head(h)


def train(model, batches):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for ids, labels in batches:
        torch.nn.functional.cross_entropy(model(ids), labels).backward()
        optimizer.step()


def main():
    model = Net()
    train(model, [])
'''


@pytest.mark.parametrize(
    "checkpoint",
    [
        "h = checkpoint(self.stage, h, use_reentrant=True)",
        "h = checkpoint_sequential(self.blocks, 2, h, use_reentrant=True)",
        "for block in self.blocks:\n            h = checkpoint(block, h, use_reentrant=True)",
    ],
)
@pytest.mark.parametrize(
    "freeze, upstream_frozen",
    [
        ("self.stage.requires_grad_(False)\nself.blocks.requires_grad_(False)", False),
        ("for m in [self.stage, self.blocks]:\n    for p in m.parameters():\n        p.requires_grad = False", False),
        ("self.requires_grad_(False)\nself.head.requires_grad_(True)", True),
        ("for m in [self.embed, self.stage, self.blocks]:\n    m.requires_grad_(False)", True),
    ],
)
def test_checkpointed_module_frozen_whole_loses_nothing(checkpoint, freeze, upstream_frozen):
    """Raw ids through a trainable embedding would be fine anyway; the frozen embedding (or raw data)
    in front of a checkpointed module that is itself frozen is quiet too."""
    forward = PROBE_FORWARD.replace("{checkpoint}", checkpoint)
    assert findings(freeze, forward) == set()
    if upstream_frozen:
        # The same shape with the checkpointed module trainable is CKPT005.
        thawed = freeze + "\nself.stage.requires_grad_(True)\nself.blocks.requires_grad_(True)"
        assert findings(thawed, forward) == {"CKPT005"}
