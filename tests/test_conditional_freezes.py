"""Freezing under an `if` on a constructor parameter or on the flag `__init__` stores from one
(`if freeze_embed:`, `if self.frozen_stages >= 0:` in mmdet's `_freeze_stages`): it happens
only for the constructions whose arguments (or the defaults) make the test true (CKPT005).

Measured in tests/runtime/test_freezes_anywhere_runtime.py (fixtures/freezes_anywhere.py):
built with the flag off, the embedding stays trainable and the checkpointed layers get gradients.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import lint_text

TAGGER = '''
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Tagger(nn.Module):
    def __init__(self, vocab=100, dim=16, freeze_embed=False, frozen_stages=-1):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.frozen_stages = frozen_stages
        {freeze}
        self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])
        self._freeze_stages()

    def _freeze_stages(self):
        {stages}

    def forward(self, ids):
        h = self.embed(ids)
        for layer in self.layers:
            h = checkpoint(layer, h, use_reentrant=True)
        return h
'''

ON_FLAG = "if freeze_embed:\n            self.embed.requires_grad_(False)"
UNLESS_FLAG = "if not freeze_embed:\n            pass\n        else:\n            self.embed.weight.requires_grad = False"
ON_STAGES = "if self.frozen_stages >= 0:\n            self.embed.eval()\n            for p in self.embed.parameters():\n                p.requires_grad = False"


def ckpt005(freeze: str, stages: str, script: str) -> bool:
    source = TAGGER.format(freeze=freeze, stages=stages) + textwrap.dedent(script)
    report = lint_text(source)
    assert report.errors == []
    return any(f.code == "CKPT005" for f in report.findings)


@pytest.mark.parametrize(
    "freeze, stages, script, expected",
    [
        # The flag's default leaves the embedding trainable, and no construction turns it on.
        (ON_FLAG, "pass", "model = Tagger()\n", False),
        (UNLESS_FLAG, "pass", "model = Tagger()\n", False),
        (ON_FLAG, "pass", "model = Tagger(freeze_embed=True)\n", True),
        (UNLESS_FLAG, "pass", "model = Tagger(100, 16, True)\n", True),
        # Constructions that disagree: it is frozen in one of them.
        (ON_FLAG, "pass", "model = Tagger()\nother = Tagger(freeze_embed=True)\n", True),
        # mmdet's `_freeze_stages`, called by `__init__`, reads the flag `__init__` stored.
        ("pass", ON_STAGES, "model = Tagger()\n", False),
        ("pass", ON_STAGES, "model = Tagger(frozen_stages=0)\n", True),
        ("pass", ON_STAGES, "model = Tagger(frozen_stages=2)\n", True),
        # Built as a submodule: the holder's construction decides.
        (
            "pass", ON_STAGES,
            "class Detector(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.backbone = Tagger(frozen_stages=-1)\n\n"
            "    def forward(self, ids):\n        return self.backbone(ids)\n\n\nmodel = Detector()\n",
            False,
        ),
        (
            "pass", ON_STAGES,
            "class Detector(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.backbone = Tagger(frozen_stages=1)\n\n"
            "    def forward(self, ids):\n        return self.backbone(ids)\n\n\nmodel = Detector()\n",
            True,
        ),
        # A value the code does not show: as before, the freeze counts.
        (ON_FLAG, "pass", "import sys\nmodel = Tagger(freeze_embed=len(sys.argv) > 1)\n", True),
    ],
)
def test_freezing_under_a_test_on_the_constructor_arguments(freeze, stages, script, expected):
    assert ckpt005(freeze, stages, script) is expected


FLAG_VALUES = [
    "self.embed.weight.requires_grad = train_embed",
    "self.embed.requires_grad_(train_embed)",
    "self.embed.requires_grad_(not freeze_embed)",
]


@pytest.mark.parametrize("statement", FLAG_VALUES)
@pytest.mark.parametrize(
    "script, expected",
    [
        # `train_embed=False` / `freeze_embed=False` by default: only the first two freeze by default.
        ("model = Tagger()\n", None),
        ("model = Tagger(train_embed=True, freeze_embed=False)\n", False),
        ("model = Tagger(train_embed=False, freeze_embed=True)\n", True),
        ("import sys\nmodel = Tagger(train_embed=len(sys.argv) > 1, freeze_embed=len(sys.argv) > 1)\n", False),
    ],
)
def test_requires_grad_set_from_a_constructor_argument(statement, script, expected):
    """`requires_grad` set to a constructor parameter (or its negation): frozen exactly for the
    constructions that pass (or default to) a false value; unknown values freeze nothing known."""
    source = TAGGER.replace("freeze_embed=False, frozen_stages=-1", "train_embed=False, freeze_embed=False, frozen_stages=-1")
    if expected is None:
        expected = "not freeze_embed" not in statement  # the defaults: train_embed=False freezes
    report = lint_text(source.format(freeze=statement, stages="pass") + script)
    assert report.errors == []
    assert any(f.code == "CKPT005" for f in report.findings) is expected


BUILDER = '''
import numpy as np
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


def pretrained_embedding(vocab=100, dim=16, trainable=False):
    emb = nn.Embedding(vocab, dim)
    {freeze}
    return emb


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = {build}
        self.layers = nn.ModuleList([nn.Linear(16, 16) for _ in range(2)])

    def forward(self, ids):
        h = self.embed(ids)
        for layer in self.layers:
            h = checkpoint(layer, h, use_reentrant=True)
        return h


model = Tagger()
'''

BUILDER_FREEZES = [
    "emb.weight = nn.Parameter(torch.randn(vocab, dim), requires_grad=trainable)",
    "emb.weight.requires_grad = trainable",
    "if not trainable:\n        emb.requires_grad_(False)",
]


@pytest.mark.parametrize("freeze", BUILDER_FREEZES)
@pytest.mark.parametrize(
    "build, expected",
    [
        ("pretrained_embedding()", True),  # the default: frozen
        ("pretrained_embedding(100, 16)", True),
        ("pretrained_embedding(trainable=True)", False),
        ("pretrained_embedding(100, 16, True)", False),
        ("pretrained_embedding(trainable=False)", True),
    ],
)
def test_a_builder_freezes_by_a_flag_its_call_decides(freeze, build, expected):
    """`requires_grad=trainable` (or `if not trainable:`) in a builder that returns the layer: the
    call's arguments, or the builder's defaults, decide whether the submodule is frozen."""
    report = lint_text(BUILDER.format(freeze=freeze, build=build))
    assert report.errors == []
    assert any(f.code == "CKPT005" for f in report.findings) is expected
