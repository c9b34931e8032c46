"""--confirm judges a finding on the checkpoints its code ran: a symptom that another checkpoint of
the same run produced does not confirm it, and code that ran no checkpoint is not confirmed.

`TwoPaths` checkpoints two blocks. `left` gets the raw input under reentrant checkpointing, so its
weights get no gradient (a CKPT001 symptom); `right` gets the stem's output and draws no random
numbers, so checkpointing it changes nothing (with `preserve_rng_state=False` too).
"""

from __future__ import annotations

import pytest
from confirm_helpers import confirm_all, finding, line_in

pytest.importorskip("torch")

TWO_PATHS = """\
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(self.fc(x))


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x) * 2


def run_checkpointed(block, x):
    return checkpoint(block, x, use_reentrant=True)


class TwoPaths(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(8, 8)
        self.left = Block()
        self.right = Scaled()

    def forward(self, x):
        a = run_checkpointed(self.left, x)
        h = self.stem(x)
        b = checkpoint(self.right, h, use_reentrant=True, preserve_rng_state=False)
        return a + b


def checkpointed(forward):
    def wrapper(self, *args):
        return checkpoint(forward, self, *args, use_reentrant=True)

    return wrapper


class DecoratedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    @checkpointed
    def forward(self, x):
        return torch.tanh(self.fc(x))


class DecoratedScaled(DecoratedBlock):
    @checkpointed
    def forward(self, x):
        return self.fc(x) * 2


class Decorated(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = DecoratedBlock()
        self.second = DecoratedScaled()
        self.head = nn.Linear(8, 8)

    def forward(self, x):
        h = self.first(x)
        return self.head(self.second(h))
"""

CASES = {
    # (scope, needle, code): the verdict and a piece of its evidence
    ("TwoPaths", "run_checkpointed(self.left", "CKPT001"): ("confirmed", "left.fc.weight: grad None with checkpointing"),
    ("TwoPaths", "checkpoint(self.right", "CKPT001"): ("not reproduced", "not where the checkpoints of this code can cause it"),
    ("TwoPaths", "checkpoint(self.right", "CKPT002"): ("not reproduced", "not where the checkpoints of this code can cause it"),
    ("Scaled", "return self.fc(x) * 2", "CKPT002"): ("not reproduced", "not where the checkpoints of this code can cause it"),
    ("TwoPaths", "h = self.stem(x)", "CKPT001"): ("not reproduced", "not where the checkpoints of this code can cause it"),
    ("TwoPaths", "return a + b", "CKPT001"): ("not reproduced", "no checkpoint call ran at line"),
    # `checkpoint(forward, self, *args)` in a decorator checkpoints the module handed first.
    ("Decorated", "h = self.first(x)", "CKPT001"): ("confirmed", "first.fc.weight: grad None with checkpointing"),
}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    path = tmp_path_factory.mktemp("scope") / "two_paths.py"
    path.write_text(TWO_PATHS)
    findings = {case: finding(path, line_in(path, case[0], case[1]), case[2]) for case in CASES}
    results = confirm_all(findings.values(), examples=[])
    return {case: results[f] for case, f in findings.items()}


@pytest.mark.parametrize("case", sorted(CASES), ids=lambda case: f"{case[2]}-{case[1]}")
def test_a_finding_is_judged_on_the_checkpoints_its_code_ran(verdicts, case):
    confirmation = verdicts[case]
    expected, evidence = CASES[case]
    assert confirmation.verdict == expected, confirmation
    assert any(evidence in line for line in confirmation.evidence), confirmation
