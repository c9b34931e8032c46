"""CKPT004 and torch's early stop: a non-reentrant recompute ends once the last tensor saved in
forward is recomputed, so a cache update that is the checkpointed function's last effect is not
repeated (measured on torch 2.13, rules/CKPT004.md; tests/runtime/test_ckpt004_runtime.py asserts
it at runtime). Every other spelling still repeats the update and stays flagged."""

from __future__ import annotations

import textwrap

import pytest
from conftest import lint_text

HEADER = "import torch\nimport torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop\n"

LAST = """\
k, v = self.kv(x).chunk(2, dim=-1)
h = torch.tanh(self.out(k * v))
cache.append((k, v))
return h
"""
LAST_UNDER_IF = """\
k, v = self.kv(x).chunk(2, dim=-1)
h = torch.tanh(self.out(k * v))
if self.training:
    cache.append((k, v))
result = h
return result
"""
LAST_ITEM = """\
k, v = self.kv(x).chunk(2, dim=-1)
h = torch.tanh(self.out(k * v))
cache["last"] = (k, v)
return h
"""
# The update's argument saves the last tensors: the recompute stops while computing it.
SAVED_IN_ARGUMENT = """\
k, v = self.kv(x).chunk(2, dim=-1)
h = k * v
cache.append(self.out(h))
return h
"""
BEFORE_LAST_SAVE = """\
k, v = self.kv(x).chunk(2, dim=-1)
cache.append((k, v))
return torch.tanh(self.out(k * v))
"""
IN_A_LOOP = """\
h = x
for _ in range(2):
    h = torch.tanh(self.out(h))
    cache.append(h)
return h
"""
# Also read: a later chunk's update reaches an earlier chunk's recompute.
READ_AND_LAST = """\
k, v = self.kv(x).chunk(2, dim=-1)
keys = torch.cat([past for past, _ in cache] + [k], dim=1)
h = torch.tanh(self.out(keys.sum(dim=1, keepdim=True) * v))
cache.append((k, v))
return h
"""

NON_REENTRANT = "return checkpoint(self.chunk, x, cache, use_reentrant=False)"
CALLS = {
    "non-reentrant": NON_REENTRANT,
    "non-reentrant, early_stop=True": "return checkpoint(self.chunk, x, cache, use_reentrant=False, early_stop=True)",
    "reentrant": "return checkpoint(self.chunk, x, cache, use_reentrant=True)",
    "use_reentrant omitted (reentrant on torch 2.13)": "return checkpoint(self.chunk, x, cache)",
    "non-reentrant, early_stop=False": "return checkpoint(self.chunk, x, cache, use_reentrant=False, early_stop=False)",
    "non-reentrant under set_checkpoint_early_stop(False)": "with set_checkpoint_early_stop(False):\n    return checkpoint(self.chunk, x, cache, use_reentrant=False)",
}
REPEATS = {"reentrant", "use_reentrant omitted (reentrant on torch 2.13)", "non-reentrant, early_stop=False", "non-reentrant under set_checkpoint_early_stop(False)"}


def program(body: str, call: str) -> str:
    return HEADER + textwrap.dedent("""\
        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.kv = nn.Linear(4, 8)
                self.out = nn.Linear(4, 4)
            def chunk(self, x, cache):
        {body}
            def forward(self, x, cache):
        {call}
        """).format(body=textwrap.indent(body, " " * 8), call=textwrap.indent(call, " " * 8))


def cache_findings(source: str, torch: str = "2.13") -> list[int]:
    report = lint_text(source, torch=torch)
    assert report.errors == []
    return [f.line for f in report.findings if f.code == "CKPT004"]


def update_line(source: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if "cache.append(" in line or 'cache["last"]' in line)


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("body", ["LAST", "LAST_UNDER_IF", "LAST_ITEM", "SAVED_IN_ARGUMENT"])
def test_an_update_after_the_last_saving_operation_repeats_only_without_early_stop(body, call):
    source = program(globals()[body], CALLS[call])
    expected = [update_line(source)] if call in REPEATS else []
    assert cache_findings(source) == expected


@pytest.mark.parametrize("body", ["BEFORE_LAST_SAVE", "IN_A_LOOP", "READ_AND_LAST"])
def test_an_update_that_is_not_the_last_effect_is_flagged_under_early_stop_too(body):
    source = program(globals()[body], NON_REENTRANT)
    assert cache_findings(source) == [update_line(source)]


def test_an_update_last_in_a_callee_is_not_last_in_the_region():
    """The submodule's update is its forward's last effect, but the checkpointed layer saves tensors after it."""
    source = HEADER + textwrap.dedent("""\
        class Inner(nn.Module):
            def __init__(self):
                super().__init__()
                self.kv = nn.Linear(4, 4)
                self.cache = []
            def forward(self, x):
                h = torch.tanh(self.kv(x))
                self.cache.append(h)
                return h
        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Inner()
                self.out = nn.Linear(4, 4)
            def chunk(self, x):
                return torch.tanh(self.out(self.inner(x)))
            def forward(self, x):
                return checkpoint(self.chunk, x, use_reentrant=False)
        """)
    assert cache_findings(source) == [update_line(source)]


def test_torch_releases_before_early_stop_repeat_the_update():
    """Early stop came with torch 2.1's non-reentrant implementation; 2.0 recomputes the whole function."""
    source = program(LAST, NON_REENTRANT)
    assert cache_findings(source, torch="2.0") == [update_line(source)]
