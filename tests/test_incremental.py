"""The cache re-analyses exactly what an edit affects, and a cached run equals a cold one."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import ckptlint.engine
import ckptlint.index
import ckptlint.relevance
from ckptlint.cli import main

BLOCKS = """from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x)
"""
NET = """from torch import nn
from torch.utils.checkpoint import checkpoint

from pkg.blocks import Block


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
"""
OTHER = """from torch.utils.checkpoint import checkpoint


def step(block, x):
    return checkpoint(block, x)
"""
LAYERS = """import torch
from torch import nn
from transformers import PreTrainedModel


class Encoder(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, hidden):
        for layer in self.layers:
            hidden = self._gradient_checkpointing_func(layer.__call__, torch.zeros(4, 4))
        return hidden
"""
TRAIN = """from pkg.layers import Encoder

model = Encoder(None)
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
"""


@pytest.fixture
def analysed(monkeypatch):
    """The files each run parses with LibCST (serial runs: the analysis happens in this process)."""
    paths: list[str] = []
    real = ckptlint.engine._analyze_file

    def counting(unit, summary):
        paths.append(unit.source.path)
        return real(unit, summary)

    monkeypatch.setattr(ckptlint.engine, "_analyze_file", counting)
    return paths


def check(cache: bool = True) -> dict:
    args = [".", "--format", "json", "-j", "1", "--torch-version", "2.13", "--transformers-version", "5.23"]
    return json.loads(CliRunner().invoke(main, args + ([] if cache else ["--no-cache"])).stdout)


def findings(document: dict) -> list[tuple[str, int, str]]:
    return [(f["path"], f["line"], f["code"]) for f in document["findings"]]


def test_editing_a_callee_body_re_analyses_its_caller(project, analysed):
    root = project({"pkg/__init__.py": "", "pkg/blocks.py": BLOCKS, "pkg/net.py": NET, "other.py": OTHER})
    assert findings(check()) == [("other.py", 5, "CKPT006")]
    analysed.clear()
    # A body edit leaves every declaration as it was; only the checkpointed region changed.
    (root / "pkg/blocks.py").write_text(BLOCKS.replace("return self.proj(x)", "self.last = self.proj(x)\n        return self.proj(x) + 1"))
    warm = check()
    assert analysed == ["pkg/net.py"]
    assert findings(warm) == [("other.py", 5, "CKPT006"), ("pkg/blocks.py", 10, "CKPT007")]
    assert warm == check(cache=False)


def test_moving_lines_keeps_unrelated_results_cached(project, analysed):
    root = project({"pkg/__init__.py": "", "pkg/blocks.py": BLOCKS, "pkg/net.py": NET, "other.py": OTHER})
    check()
    analysed.clear()
    (root / "pkg/blocks.py").write_text("# a comment\n\n" + BLOCKS)
    check()
    assert analysed == ["pkg/net.py"]  # it read blocks.py; other.py did not
    analysed.clear()
    assert check()["findings"] and analysed == []


def test_a_result_citing_another_files_line_follows_that_line(project):
    root = project({"pkg/__init__.py": "", "pkg/layers.py": LAYERS, "train.py": TRAIN})
    first = check()
    assert "the project enables reentrant checkpointing at train.py:4" in first["findings"][0]["message"]
    (root / "train.py").write_text("import os\n\n" + TRAIN)
    moved = check()
    assert "the project enables reentrant checkpointing at train.py:6" in moved["findings"][0]["message"]
    assert moved == check(cache=False)


def test_a_warm_run_reads_no_summary_and_parses_nothing(project, monkeypatch):
    project({"pkg/__init__.py": "", "pkg/blocks.py": BLOCKS, "pkg/net.py": NET, "other.py": OTHER, "util.py": "X = 1\n"})
    cold = check()

    def forbidden(*args, **kwargs):
        raise AssertionError("a warm run with nothing changed needs only the cached verdicts")

    for module, name in ((ckptlint.index, "summarize"), (ckptlint.relevance, "can_matter"), (ckptlint.engine, "_parse")):
        monkeypatch.setattr(module, name, forbidden)
    monkeypatch.setattr(ckptlint.index.ModuleSummary, "from_json", forbidden)
    assert check() == cold


def test_reverting_an_edit_finds_the_results_from_before(project, analysed):
    root = project({"pkg/__init__.py": "", "pkg/blocks.py": BLOCKS, "pkg/net.py": NET, "other.py": OTHER})
    before = check()
    edited = BLOCKS.replace("return self.proj(x)", "self.last = self.proj(x)\n        return self.proj(x) + 1")
    (root / "pkg/blocks.py").write_text(edited)
    check()
    (root / "pkg/blocks.py").write_text(BLOCKS)  # back, as after `git checkout`
    analysed.clear()
    assert check() == before
    assert analysed == []
    (root / "pkg/blocks.py").write_text(edited)
    assert check()["findings"] != before["findings"] and analysed == []


ENCODER = """from torch import nn
from torch.utils.checkpoint import checkpoint


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 4, 3)

    def forward(self, features):
        return checkpoint(self.conv, features, use_reentrant=True)
"""
MODEL = """from torch import nn

from pkg.encoder import Encoder


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv1d(4, 4, 1)
        self.encoder = Encoder()

    def forward(self, x):
        return self.encoder(self.proj(x))
"""


def test_editing_what_a_caller_passes_re_analyses_the_callee(project, analysed):
    train = "from pkg.model import Model\n\nmodel = Model()\n"  # Model is the whole model: its input is data
    root = project({"pkg/__init__.py": "", "pkg/encoder.py": ENCODER, "pkg/model.py": MODEL, "pkg/train.py": train})
    assert findings(check()) == []
    analysed.clear()
    # A body edit in the caller: declarations unchanged, but the encoder now gets the raw input.
    (root / "pkg/model.py").write_text(MODEL.replace("self.encoder(self.proj(x))", "self.encoder(x)"))
    warm = check()
    assert "pkg/encoder.py" in analysed
    assert findings(warm) == [("pkg/encoder.py", 11, "CKPT001")]
    assert warm == check(cache=False)


MODE_HELPER = """def prepare(model):
    model.train()
    return model
"""
MODE_CALLER = """import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from pkg.helpers import prepare


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)

    def forward(self, x):
        if self.training:
            return checkpoint(self.block, x, use_reentrant=False)
        return self.block(x)


def main():
    model = prepare(Net())
    with torch.no_grad():
        return model(torch.ones(2, 4))
"""


def test_a_helpers_mode_summary_ties_its_callers_to_its_declarations_not_its_lines(project, analysed):
    """What a helper does to the mode of the model it is handed is part of its summary (the project
    fingerprint): a comment in it re-analyses only itself; making it leave eval mode re-analyses its caller."""
    root = project({"pkg/__init__.py": "", "pkg/helpers.py": MODE_HELPER, "pkg/main.py": MODE_CALLER})
    assert findings(check()) == [("pkg/main.py", 22, "CKPT008")]
    analysed.clear()
    (root / "pkg/helpers.py").write_text("# prepares the model\n" + MODE_HELPER)
    assert findings(check()) == [("pkg/main.py", 22, "CKPT008")]
    assert analysed == []  # helpers.py holds no checkpoint text: it cannot matter
    (root / "pkg/helpers.py").write_text(MODE_HELPER.replace("model.train()", "model.eval()"))
    warm = check()
    assert findings(warm) == [] and analysed == ["pkg/main.py"]
    assert warm == check(cache=False)


def test_a_summarys_digest_covers_declarations_not_positions():
    import json

    from ckptlint.index import summarize

    source = "from peft import get_peft_model\n\n\ndef build(model, config):\n    model.requires_grad_(False)\n    return get_peft_model(model, config)\n"

    def digest(text: str) -> str:
        return json.loads(summarize(text, "pkg/m.py", "pkg.m", False).to_json_text())["digest"]

    assert '"line": 5' in summarize(source, "pkg/m.py", "pkg.m", False).to_json_text()
    assert digest(source) == digest("\n\n" + source)
    assert digest(source) != digest(source.replace("requires_grad_(False)", "requires_grad_(True)"))
    # Decorated forwards and checkpointing decorators (wrapped_modules) keep their lines out of it too.
    decorated = (
        "from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
        "def checkpointed(forward):\n    def wrapper(self, *args):\n        return checkpoint(forward, self, *args, use_reentrant=True)\n\n    return wrapper\n\n\n"
        "class Block(nn.Module):\n    @checkpointed\n    def forward(self, x):\n        return x\n"
    )
    assert digest(decorated) == digest("\n\n" + decorated)
    assert digest(decorated) != digest(decorated.replace("use_reentrant=True", "use_reentrant=False"))
