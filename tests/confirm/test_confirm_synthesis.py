"""Joint input synthesis and constructor guessing on forward signatures with several roles, and
the static reading of the project's own usage (no example factories anywhere)."""

from __future__ import annotations

import ast
import re
import textwrap

import pytest
from confirm_helpers import confirm_all, finding, line_in

from ckptlint.confirm import usage

SHAPES = """\
import math
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


class PairBias(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, dist, mask):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads) - dist[:, None]
        scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        return x + self.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d))


class ContactNet(nn.Module):
    def __init__(self, dim, heads, depth):
        super().__init__()
        self.embed = nn.Linear(21, dim)
        self.layers = nn.ModuleList([PairBias(dim, heads) for _ in range(depth)])

    def forward(self, seq_onehot, dist, mask):
        h = self.embed(seq_onehot)
        for layer in self.layers:
            h = checkpoint(layer, h, dist, mask)
        return h


class TembBlock(nn.Module):
    def __init__(self, channels, temb_channels, groups=8):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.time_emb_proj = nn.Linear(temb_channels, channels)

    def inner(self, hidden_states, temb):
        h = self.conv(F.silu(self.norm(hidden_states)))
        return hidden_states + h + self.time_emb_proj(temb)[:, :, None, None]

    def forward(self, hidden_states, temb):
        return checkpoint(self.inner, hidden_states, temb)


class PaddedEncoder(nn.Module):
    def __init__(self, vocab_size, dim, heads):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def block(self, h, pad_mask):
        return h + self.attn(h, h, h, key_padding_mask=pad_mask, need_weights=False)[0]

    def forward(self, ids, pad_mask):
        return checkpoint(self.block, self.embed(ids), pad_mask)


class MelDenoiser(nn.Module):
    def __init__(self, n_mels, dim):
        super().__init__()
        self.inp = nn.Linear(n_mels, dim)
        self.time = nn.Linear(1, dim)
        self.ff = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, n_mels))

    def forward(self, mel, time, mask):
        h = self.inp(mel) + self.time(time[:, None, None].float())
        h = checkpoint(self.ff, h) * mask[:, :, None]
        return h
"""

# class -> what must have run: the guessed constructor and inputs whose shapes agree.
EXPECTED = {
    "ContactNet": r"ran ContactNet\(dim=32, heads=2, depth=2\) \(sizes guessed from the parameter names\) on seq_onehot=float32\[2, 6, 21\], dist=float32\[2, 6, 6\], mask=bool\[2, 6\]; input found on try \d+ \(dist as pairwise, mask as mask\)",
    "TembBlock": r"ran TembBlock\(channels=32, temb_channels=32\) .* on hidden_states=float32\[2, 32, 32, 32\], temb=float32\[2, 32\]",
    "PaddedEncoder": r"ran PaddedEncoder\(vocab_size=100, dim=32, heads=2\) .* on ids=int64\[2, 6\], pad_mask=bool\[2, 6\]",
    "MelDenoiser": r"ran MelDenoiser\(n_mels=80, dim=32\) .* on mel=float32\[2, 6, 80\], time=int64\[2\], mask=bool\[2, 6\]; input found on try \d+ \(time as timesteps, mask as mask\)",
}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    pytest.importorskip("torch")
    path = tmp_path_factory.mktemp("synthesis") / "shapes.py"
    path.write_text(SHAPES)
    findings = {name: finding(path, line_in(path, name, "checkpoint("), "CKPT006") for name in EXPECTED}
    results = confirm_all(findings.values(), examples=[])
    return {name: results[f] for name, f in findings.items()}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_arguments_with_roles_are_synthesised_together(verdicts, name):
    confirmation = verdicts[name]
    assert confirmation.verdict == "confirmed", confirmation
    assert re.search(EXPECTED[name], confirmation.evidence[-1]), confirmation.evidence[-1]


PROJECT = {
    "model.py": """\
        class Decoder:
            def __init__(self, vocab_size, dim):
                pass
    """,
    "train.py": """\
        import torch
        from model import Decoder

        VOCAB = 256


        def fit(net, optimizer, loader):
            for ids in loader:
                net(ids, use_cache=True, labels=ids).loss.backward()


        def main():
            width = 8 * 8
            decoder = Decoder(vocab_size=VOCAB, dim=width)
            optimizer = torch.optim.SGD(decoder.parameters(), lr=0.1)
            fit(decoder, optimizer, [])
            logits = decoder(torch.zeros(2, 3), use_cache=True, past_key_values=None)


        if __name__ == "__main__":
            main()
    """,
    "unrelated.py": """\
        class Decoder:
            pass

        Decoder(vocab_size=1, dim=1)
    """,
}


def test_usage_reads_construction_sites_keywords_and_calls(tmp_path):
    for name, text in PROJECT.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    files = usage.project_files(str(tmp_path / "model.py"), str(tmp_path))
    decoder = usage.usage_of("Decoder", str(tmp_path / "model.py"), files)
    # Names bound to literals are followed; a file that does not import `model` is not the project's use.
    assert decoder.constructor_calls == [{"args": [], "kwargs": {"vocab_size": 256, "dim": 64}}]
    assert decoder.call_keywords == {"use_cache": True, "past_key_values": None}
    fit = usage.usage_of("fit", str(tmp_path / "train.py"), files)
    assert fit.function_arguments["0"] == {"class": "Decoder", "kwargs": {"vocab_size": 256, "dim": 64}}
    assert fit.main == "block"  # main() calls fit, which runs a backward


def test_usage_names_the_module_classes_that_build_a_layer_as_a_part(tmp_path):
    (tmp_path / "layers.py").write_text("import torch.nn as nn\n\nclass Block(nn.Module):\n    def forward(self, x):\n        return x\n")
    (tmp_path / "model.py").write_text(textwrap.dedent("""\
        import torch.nn as nn
        from layers import Block

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
            def forward(self, x):
                return self.blocks[1](self.blocks[0](x))

        class Runner:  # holds a whole model: no forward of its own
            def __init__(self):
                self.model = Block()
        """))
    files = usage.project_files(str(tmp_path / "layers.py"), str(tmp_path))
    assert usage.usage_of("Block", str(tmp_path / "layers.py"), files).built_into == ["Net (model.py)"]
    assert usage.usage_of("Net", str(tmp_path / "model.py"), files).built_into == []


def test_a_main_without_backward_is_no_target():
    tree = ast.parse("def f(model):\n    return model(1)\n\nif __name__ == '__main__':\n    f(None)\n")
    assert usage.main_entry(tree)[0] == "block"
    assert usage.main_reaching(tree, "f") == ""


GATED = """\
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class GatedStem(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        self.head = nn.Linear(8, 2)
        self.grad_checkpointing = False

    def set_grad_checkpointing(self, enable=True):
        self.grad_checkpointing = enable

    def forward(self, x):
        if self.grad_checkpointing and self.training:
            x = checkpoint(self.stem, x, use_reentrant=True)
        else:
            x = self.stem(x)
        return self.head(x)


class GatedByExpression(GatedStem):
    def forward(self, x):
        x = checkpoint(self.stem, x, use_reentrant=True) if self.grad_checkpointing else self.stem(x)
        return self.head(x)
"""


@pytest.mark.parametrize("name", ["GatedStem", "GatedByExpression"])
def test_a_checkpoint_behind_a_switch_nothing_runnable_turns_on_runs_with_the_switch_on(tmp_path, name):
    """The project switches checkpointing on where --confirm cannot run it (a training function
    handed the model); the flags the checkpoint's `if` requires are turned on instead."""
    pytest.importorskip("torch")
    path = tmp_path / "gated.py"
    path.write_text(GATED)
    found = finding(path, line_in(path, name, "checkpoint("), "CKPT001")
    confirmation = confirm_all([found], examples=[])[found]
    assert confirmation.verdict == "confirmed", confirmation
    assert any("with `grad_checkpointing` switched on" in e for e in confirmation.evidence), confirmation.evidence


def test_the_flags_a_finding_needs_include_those_an_else_branch_requires():
    pytest.importorskip("torch")
    from ckptlint.confirm.switches import switches as _switches

    source = textwrap.dedent("""\
        class Model:
            def forward(self, x):
                for i in range(self.n):
                    if not self.use_cp or (i == 0 and not self.allow_first):
                        x = self.layers[i](x)
                    else:
                        x = checkpoint(self.layers[i], x, use_reentrant=True)
                if self.gradient_checkpointing and self.training:
                    x = checkpoint(self.head, x, use_reentrant=True)
                return x
        """)
    job = {"path": "/nonexistent/model.py", "source": source, "findings": [{"code": "CKPT001", "path": "/nonexistent/model.py", "line": 7}]}
    assert _switches(job) == ("use_cp",)
    job["findings"].append({"code": "CKPT001", "path": "/nonexistent/model.py", "line": 9})
    assert set(_switches(job)) == {"use_cp", "gradient_checkpointing"}


def test_labels_an_optional_argument_the_loss_cannot_do_without_are_synthesised():
    """A custom model for transformers' Trainer takes `labels=None` and computes its loss whatever
    it gets: with only the required input every try fails, so its labels are synthesised too
    (class indices)."""
    torch = pytest.importorskip("torch")
    from torch import nn

    from ckptlint.confirm import inputs

    class PatchClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
            self.head = nn.Linear(8, 2)

        def forward(self, pixel_values, labels=None, return_dict=True):
            logits = self.head(self.stem(pixel_values).mean((2, 3)))
            return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}

    found = inputs.search_inputs(PatchClassifier, None, "cpu")
    args, kwargs = found.make()
    assert [tuple(a.shape) for a in args] == [(2, 3, 32, 32), (2,)] and args[1].dtype == torch.int64 and kwargs == {}
    assert found.shown == "pixel_values=float32[2, 3, 32, 32], labels=int64[2]" and "(labels as labels)" in found.tried
