"""Dataflow decisions behind the semantic rules, one small program each.

Each case lists exactly the (line, code) findings expected (CKPT006 excluded: every case passes
use_reentrant explicitly or is about it), so both misses and false positives fail.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, lint_folder, lint_text

from ckptlint.cli import main

from ckptlint.config import Settings
from ckptlint.engine import lint
from ckptlint.versions import resolve_versions

HEADER = "import functools\nimport random\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch.utils.checkpoint import checkpoint\n"


def findings(body: str, transformers: str = "5.23") -> set[tuple[int, str]]:
    report = lint_text(HEADER + textwrap.dedent(body), transformers=transformers)
    assert report.errors == []
    offset = HEADER.count("\n")
    return {(f.line - offset, f.code) for f in report.findings if f.code != "CKPT006"}


CASES = {
    "a tensor that requires grad on one path only is not data (CKPT001), but is captured (CKPT003)": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
                self.b = nn.Bilinear(4, 4, 4)
            def forward(self, x, ctx=None, project=True):
                h = self.a(x) if project else x
                if ctx is None:
                    ctx = torch.tanh(self.a(x))
                h = checkpoint(self.a, h, use_reentrant=True)
                return checkpoint(functools.partial(self.b, input2=ctx), h, use_reentrant=True)
        model = Net()
        """,
        {(12, "CKPT003")},
    ),
    "an else branch sees the values from before the if, not those its if branch assigned (CKPT001)": (
        """
        class Net(nn.Module):
            def __init__(self, use_cp=True):
                super().__init__()
                self.layer = nn.Linear(4, 4)
                self.use_cp = use_cp
            def forward(self, x):
                if not self.use_cp:
                    x = self.layer(x)
                else:
                    x = checkpoint(self.layer, x, use_reentrant=True)
                return x
        model = Net()
        """,
        {(11, "CKPT001")},
    ),
    "after an if/else a name holds either branch's value (no CKPT001 downstream)": (
        """
        class Net(nn.Module):
            def __init__(self, project=True):
                super().__init__()
                self.a = nn.Linear(4, 4)
                self.b = nn.Linear(4, 4)
                self.project = project
            def forward(self, x):
                if self.project:
                    h = self.a(x)
                else:
                    h = x
                return checkpoint(self.b, h, use_reentrant=True)
        model = Net()
        """,
        set(),
    ),
    "a loop whose first iteration takes the plain branch checkpoints only later blocks' outputs": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
            def forward(self, x):
                for i, layer in enumerate(self.layers):
                    if i == 0:
                        x = layer(x)
                    else:
                        x = checkpoint(layer, x, use_reentrant=True)
                return x
            def later_first(self, x):
                for i in range(len(self.layers)):
                    if i > 0 and self.training:
                        x = checkpoint(self.layers[i], x, use_reentrant=True)
                    else:
                        x = self.layers[i](x)
                return x
            def flagged_first(self, x):
                first = True
                for layer in self.layers:
                    if first:
                        x = layer(x)
                        first = False
                    else:
                        x = checkpoint(layer, x, use_reentrant=True)
                return x
        model = Net()
        model.later_first(torch.randn(2, 4))
        model.flagged_first(torch.randn(2, 4))
        """,
        set(),
    ),
    "a loop whose first iteration may take the checkpoint branch feeds it raw input (CKPT001)": (
        """
        class Net(nn.Module):
            def __init__(self, allow_first):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
                self.allow_first = allow_first
            def forward(self, x):
                for i in range(len(self.layers)):
                    if i == 0 and not self.allow_first:
                        x = self.layers[i](x)
                    else:
                        x = checkpoint(self.layers[i], x, use_reentrant=True)
                return x
        import sys
        model = Net(len(sys.argv) > 1)
        """,
        {(12, "CKPT001")},
    ),
    "a name that is None before a loop and a tensor after an iteration reaches later checkpoints (CKPT003)": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Linear(4, 4)
                self.blocks = nn.ModuleList([nn.Bilinear(4, 4, 4) for _ in range(3)])
                self.gate = nn.Linear(4, 4)
            def forward(self, x):
                h = self.embed(x)
                gate = None
                for i, block in enumerate(self.blocks):
                    h = checkpoint(functools.partial(block, input2=gate), h, use_reentrant=True)
                    if i == 1:
                        gate = self.gate(h)
                return h
            def counted(self, x):
                h = self.embed(x)
                steps = None
                for block in self.blocks:
                    h = checkpoint(functools.partial(block, input2=h), h, use_reentrant=True)
                    steps = 1
                return h
        model = Net()
        """,
        {(12, "CKPT003"), (20, "CKPT003")},
    ),
    "models built in the literal tuple a script loops over are whole models": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
            def forward(self, x):
                return checkpoint(self.a, x, use_reentrant=True)
        class Wide(Net):
            pass
        for model in (Net(), Wide()):
            model(torch.randn(2, 4)).sum().backward()
        """,
        {(7, "CKPT001")},
    ),
    "raw input cascades through a parameter-free op to the next block": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
                self.b = nn.Linear(4, 4)
            def forward(self, x):
                h = checkpoint(self.a, x, use_reentrant=True)
                h = F.relu(h).view(-1, 4)
                return checkpoint(self.b, h, use_reentrant=True)
        model = Net()  # script code: Net is the whole model
        """,
        {(8, "CKPT001"), (10, "CKPT001")},
    ),
    "requires_grad_ on the input clears it": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
            def forward(self, x):
                x.requires_grad_()
                return checkpoint(self.a, x, use_reentrant=True)
        """,
        set(),
    ),
    "a submodule's forward inputs are not data": (
        """
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
            def forward(self, x):
                return checkpoint(self.a, x, use_reentrant=True)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.block = Block()
            def forward(self, x):
                return self.block(self.stem(x))
        """,
        set(),
    ),
    "parameter-free callee loses nothing": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.Sequential(nn.ReLU(), nn.Dropout(0.1))
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                return self.head(checkpoint(self.act, x, use_reentrant=True))
        """,
        set(),
    ),
    "a loader batch in a training function": (
        """
        def fit(model, train_loader):
            for images, labels in train_loader:
                out = checkpoint(model, images, use_reentrant=True)
                F.cross_entropy(out, labels).backward()
        """,
        {(4, "CKPT001")},
    ),
    "frozen embedding in front of reentrant layers is CKPT005, not CKPT001": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.embed.requires_grad_(False)
                self.layer = nn.Linear(4, 4)
            def forward(self, ids):
                return checkpoint(self.layer, self.embed(ids), use_reentrant=True)
        model = Net()
        """,
        {(9, "CKPT005")},
    ),
    "a tuple element returned by a router needs grad; a mask does not": (
        """
        class Router(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
            def forward(self, x):
                scores = self.proj(x).softmax(-1)
                mask = (scores > 0.5).detach()
                return scores, mask
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.router = Router()
                self.block = nn.Bilinear(4, 4, 4)
            def forward(self, x):
                h = self.stem(x)
                scores, mask = self.router(h)
                h = checkpoint(functools.partial(self.block, input2=mask), h, use_reentrant=True)
                return checkpoint(functools.partial(self.block, input2=scores), h, use_reentrant=True)
        """,
        {(20, "CKPT003")},
    ),
    "captured parameter is fine, captured activation is not": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.w = nn.Parameter(torch.ones(4))
                self.block = nn.Linear(4, 4)
            def forward(self, x):
                h = self.stem(x)
                ctx = torch.tanh(self.stem(x))
                h = checkpoint(lambda t: self.block(t) * self.w, h, use_reentrant=True)
                return checkpoint(lambda t: self.block(t) * ctx, h, use_reentrant=True)
        """,
        {(12, "CKPT003")},
    ),
    "chunk, unbind and permute unpacking keep the tensor's facts": (
        """
        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = nn.Linear(4, 12)
                self.attend = nn.Linear(4, 4)
            def forward(self, h):
                q, k, v = self.qkv(h).chunk(3, dim=-1)
                a = checkpoint(functools.partial(self.attend, k), q, use_reentrant=True)
                q2, k2, v2 = self.qkv(h).reshape(2, 3, 4).permute(1, 0, 2)
                b = checkpoint(lambda t: self.attend(t) * v2, q2, use_reentrant=True)
                q3, k3, v3 = torch.unbind(self.qkv(h).view(2, 3, 4), dim=1)
                c = checkpoint(functools.partial(self.attend, bias=k3), q3, use_reentrant=True)
                return a + b + c
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.attn = Attention()
            def forward(self, x):
                return self.attn(self.stem(x))
        """,
        {(9, "CKPT003"), (11, "CKPT003"), (13, "CKPT003")},
    ),
    "unpacking a module's output stays unknown": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.router = nn.Linear(4, 4)
                self.block = nn.Linear(4, 4)
                self.split = Split()
            def forward(self, x):
                h = self.block(x)
                scores, mask = self.router(h)
                h = checkpoint(functools.partial(self.block, mask=mask), h, use_reentrant=True)
                h, mask = self.split(h)
                return checkpoint(functools.partial(self.block, mask=mask), h, use_reentrant=True)
        class Split(nn.Module):
            def forward(self, h):
                return h, (h > 0).detach()
        """,
        set(),
    ),
    "an nn.Parameter is a leaf that requires grad; an activation built from it is not": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.pos = nn.Parameter(torch.zeros(4))
                self.fixed = nn.Parameter(torch.zeros(4), requires_grad=False)
                self.block = nn.Linear(4, 4)
            def forward(self, x):
                pos = self.pos
                h = checkpoint(lambda t: self.block(t) + pos, x + self.pos, use_reentrant=True)
                ctx = self.pos * 2
                h = checkpoint(lambda t: self.block(t) + ctx, h, use_reentrant=True)
                return checkpoint(self.block, self.fixed, use_reentrant=True)
        """,
        {(12, "CKPT003"), (13, "CKPT001")},
    ),
    "submodules assigned as a tuple or from a generator in __init__ are known": (
        """
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj, self.drop = nn.Linear(4, 4), nn.Dropout(0.1)
                self.q, self.k = (nn.Linear(4, 4) for _ in range(2))
            def forward(self, h):
                return self.drop(self.proj(h)) + self.q(h) + self.k(h)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.block = Block()
            def forward(self, x):
                return checkpoint(self.block, self.stem(x), use_reentrant=False, preserve_rng_state=False)
        """,
        {(15, "CKPT002")},
    ),
    "a training function receives the batch from its caller": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.block = nn.Linear(4, 4)
            def forward(self, x):
                return self.block(self.stem(x))
        def train_step(model, images):
            return checkpoint(model.block, images, use_reentrant=True).sum()
        def finetune_step(model, features):
            return checkpoint(model.block, features, use_reentrant=True).sum()
        def main():
            model = Net()
            loader = torch.utils.data.DataLoader([])
            for images, labels in loader:
                train_step(model, images).backward()
                finetune_step(model, model.stem(images)).backward()
        """,
        {(10, "CKPT001")},
    ),
    "a top-level model's raw input reaches a submodule that checkpoints it": (
        """
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv1d(4, 4, 3)
            def forward(self, features, scale=1.0):
                return checkpoint(self.conv, features * scale, use_reentrant=True)
        class Stem(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv1d(4, 4, 3)
            def forward(self, features):
                return checkpoint(self.conv, features, use_reentrant=True)
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = Encoder()
                self.stem = Stem()
                self.proj = nn.Conv1d(4, 4, 1)
            def forward(self, input_features):
                return self.encoder(features=input_features) + self.stem(self.proj(input_features))
        model = Model()
        """,
        {(7, "CKPT001")},
    ),
    "callers that disagree leave the parameter unknown": (
        """
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv1d(4, 4, 3)
            def forward(self, features):
                return checkpoint(self.conv, features, use_reentrant=True)
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = Encoder()
                self.proj = nn.Conv1d(4, 4, 1)
            def forward(self, input_features):
                return self.encoder(input_features) + self.encoder(self.proj(input_features))
        def run(block, x):
            return checkpoint(block, x, use_reentrant=True)
        """,
        set(),
    ),
    "a loop over a parameter holding a ModuleList, and over zip(blocks, caches)": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                self.drops = nn.ModuleList([nn.Dropout(0.1) for _ in range(2)])
            def forward(self, x):
                return run_blocks(self.blocks, self.drops, x)
        def run_blocks(blocks, drops, h):
            for block, drop in zip(blocks, drops):
                h = checkpoint(block, h, use_reentrant=True)
                h = checkpoint(drop, h, use_reentrant=False, preserve_rng_state=False)
            return h
        model = Net()
        """,
        {(11, "CKPT001"), (12, "CKPT002")},
    ),
    "dropout that draws nothing (p literal 0, training False) next to one that draws": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.lin = nn.Linear(4, 4)
            def still(self, h):
                h = F.dropout(self.lin(h), 0.0, self.training)
                return torch.dropout(F.dropout(h, p=0.5, training=False), 0, True)
            def noisy(self, h):
                return F.dropout(self.lin(h), 0.1, self.training)
            def forward(self, x):
                h = checkpoint(self.still, self.stem(x), use_reentrant=False, preserve_rng_state=False)
                return checkpoint(self.noisy, h, use_reentrant=False, preserve_rng_state=False)
        """,
        {(14, "CKPT002")},
    ),
    "python random inside the region, numpy outside": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.lin = nn.Linear(4, 4)
            def noisy(self, h):
                return self.lin(h) * random.random()
            def forward(self, x):
                scale = random.random()
                return checkpoint(self.noisy, self.stem(x), use_reentrant=False) * scale
        """,
        {(8, "CKPT002")},
    ),
    "a generator reseeded with an explicit seed inside the region is replayed": (
        """
        import numpy as np
        class Sparse(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
                self.seed = 3
            def forward(self, x):
                np.random.seed(self.seed)
                order = np.random.permutation(4)
                return self.proj(x)[:, order]
        class Unseeded(Sparse):
            def forward(self, x):
                return self.proj(x)[:, np.random.permutation(4)]
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.sparse = Sparse()
                self.unseeded = Unseeded()
            def forward(self, x):
                h = checkpoint(self.sparse, self.stem(x), use_reentrant=False)
                return checkpoint(self.unseeded, h, use_reentrant=False)
        """,
        {(14, "CKPT002")},
    ),
    "eval-only cache updates are not training hazards": (
        """
        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
                self.cache = {}
            def biases(self, key):
                if self.training:
                    return self.proj.weight
                self.cache[key] = self.proj.weight
                return self.cache[key]
            def forward(self, x):
                return self.proj(x) + self.biases("k").sum()
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.attn = Attention()
            def forward(self, x):
                return checkpoint(self.attn, self.stem(x), use_reentrant=False)
        """,
        set(),
    ),
    "a cache parameter the checkpoint call never passes": (
        """
        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
            def forward(self, x, cache=None):
                if cache is not None:
                    cache.append(x)
                return self.proj(x)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.layer = Layer()
            def forward(self, x, cache):
                h = checkpoint(self.layer, self.stem(x), use_reentrant=False)
                return checkpoint(self.layer, h, cache, use_reentrant=False)
        """,
        {(8, "CKPT004")},
    ),
    "non-tensor module state is not an escaping tensor": (
        """
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
            def forward(self, x):
                self.shape = x.shape
                self.calls = 1
                self.last = self.proj(x)
                return self.last
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.block = Block()
            def forward(self, x):
                return checkpoint(self.block, self.stem(x), use_reentrant=True)
            def features(self):
                return self.block.last
        """,
        {(9, "CKPT007")},
    ),
    "a scratch attribute stored and read back within the same forward is not an escape": (
        """
        class Modulation(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 12)
                self.out = nn.Linear(4, 4)
            def forward(self, x):
                q, ctx, self.gates = torch.split(self.proj(x), (4, 4, 4), -1)
                self.modulator = self.out(ctx * self.gates)
                self.total = self.total + q.sum()
                return q * self.modulator
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.block = Modulation()
            def forward(self, x):
                return checkpoint(self.block, self.stem(x), use_reentrant=True)
        """,
        {(10, "CKPT007")},
    ),
    "an attribute read back within forward and also read elsewhere is an escape": (
        """
        class Modulation(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
            def forward(self, x):
                self.modulator = torch.sigmoid(self.proj(x))
                return x * self.modulator
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.block = Modulation()
            def forward(self, x):
                return checkpoint(self.block, self.stem(x), use_reentrant=True)
            def modulation_map(self):
                return self.block.modulator
        """,
        {(7, "CKPT007")},
    ),
    "freezing in a method __init__ calls, and in a submodule's method another method calls": (
        """
        class Tower(nn.Module):
            def __init__(self):
                super().__init__()
                self.patch = nn.Linear(4, 4)
                self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
            def lock(self):
                for p in self.parameters():
                    p.requires_grad = False
            def forward(self, x):
                return self.patch(x)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.tower = Tower()
                self.layer = nn.Linear(4, 4)
                self.freeze_embeddings()
            def freeze_embeddings(self):
                self.embed.weight.requires_grad_(False)
            def forward(self, ids):
                return checkpoint(self.layer, self.embed(ids), use_reentrant=True)
        class TowerNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.tower = Tower()
                self.layer = nn.Linear(4, 4)
            def lock_tower(self):
                self.tower.lock()
            def forward(self, x):
                return checkpoint(self.layer, self.tower(x), use_reentrant=True)
        def build():
            model = TowerNet()
            model.lock_tower()
            return model
        net = Net()
        """,
        {(22, "CKPT005"), (31, "CKPT005")},
    ),
    "a store that only overwrites with a value that cannot require grad is no escape": (
        """
        class Attn(nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = nn.Linear(4, 12)
                self.probs = None
            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                probs = (q @ k.transpose(-2, -1)).softmax(-1)
                self.probs = probs.detach().cpu()
                self.kept = probs
                return probs @ v
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.attn = Attn()
            def forward(self, x):
                return checkpoint(self.attn, self.stem(x), use_reentrant=False)
        """,
        {(11, "CKPT007")},
    ),
    "a module handed to the checkpointed function as an input is no tensor that requires grad": (
        """
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.embed.weight.requires_grad = False
                self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                self.stem = nn.Linear(4, 4)
            def step(self, layer, h, scale):
                return layer(h) * scale
            def forward(self, ids):
                h = self.embed(ids)
                for layer in self.layers:
                    h = checkpoint(self.step, layer, h, 2.0, use_reentrant=True)
                return checkpoint(self.step, self.layers[0], self.stem(h), 2.0, use_reentrant=True)
        class Runner(nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = nn.Linear(4, 4)
            def apply(self, layer):
                return layer.weight.sum()
            def forward(self, x):
                return checkpoint(self.apply, self.layer, use_reentrant=True)
        def train():
            Decoder()(torch.randint(0, 10, (2, 3))).sum().backward()
        """,
        {(14, "CKPT005")},
    ),
    "what is computed under no_grad requires no grad, whatever it is computed from": (
        """
        class Probe(nn.Module):
            def __init__(self, backbone):
                super().__init__()
                self.backbone = backbone
                self.adapter = nn.Linear(4, 4)
                self.stem = nn.Linear(4, 4)
            def forward(self, x):
                with torch.no_grad():
                    feats = self.backbone(x)
                    scaled = self.stem(x) * 2
                    kept = x
                    made = torch.zeros(2, 4, requires_grad=True)
                a = checkpoint(self.adapter, feats, use_reentrant=True)
                b = checkpoint(self.adapter, scaled, use_reentrant=True)
                c = checkpoint(self.adapter, kept, use_reentrant=True)
                d = checkpoint(self.adapter, made, use_reentrant=True)
                with torch.no_grad():
                    with torch.enable_grad():
                        regained = self.stem(x)
                e = checkpoint(self.adapter, regained, use_reentrant=True)
                return a + b + c + d + e
        def train(x):
            Probe(nn.Linear(4, 4))(x).sum().backward()
        """,
        {(14, "CKPT001"), (15, "CKPT001"), (16, "CKPT001")},
    ),
    "nn.Embedding.from_pretrained freezes the table unless told freeze=False (`not tune`: the construction's default decides)": (
        """
        class Tagger(nn.Module):
            def __init__(self, weights, tune=False):
                super().__init__()
                self.embed = nn.Embedding.from_pretrained(weights)
                self.tuned = nn.Embedding.from_pretrained(weights, freeze=False)
                self.maybe = nn.Embedding.from_pretrained(weights, freeze=not tune)
                self.block = nn.Linear(4, 4)
            def forward(self, ids):
                a = checkpoint(self.block, self.embed(ids), use_reentrant=True)
                b = checkpoint(self.block, self.tuned(ids), use_reentrant=True)
                c = checkpoint(self.block, self.maybe(ids), use_reentrant=True)
                return a + b + c
        def train(ids):
            Tagger(torch.randn(10, 4))(ids).sum().backward()
        """,
        {(10, "CKPT005"), (12, "CKPT005")},
    ),
    "tensors escaping through setattr, list extension and +=": (
        """
        class Router(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate = nn.Linear(4, 4)
                self.aux = []
                self.steps = 0
            def forward(self, x):
                probs = self.gate(x).softmax(-1)
                setattr(self, "balance", probs.var())
                self.aux += [probs.sum()]
                self.aux.extend([probs.mean(), probs.max()])
                self.aux += [1.0]
                setattr(self, "steps", self.steps + 1)
                return x * probs
        class MoE(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.router = Router()
            def forward(self, x):
                return checkpoint(self.router, self.stem(x), use_reentrant=True)
        """,
        {(10, "CKPT007"), (11, "CKPT007"), (12, "CKPT007")},
    ),
    "a closure returned by a local factory (create_custom_forward) captures what the factory does not bind": (
        """
        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, h, enc=None):
                return self.fc(h) if enc is None else self.fc(h) + enc
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([Layer() for _ in range(2)])
            def forward(self, h, enc):
                for layer_module in self.layers:
                    def create_custom_forward(module):
                        def custom_forward(*inputs):
                            return module(*inputs, enc)
                        return custom_forward
                    def create_plain_forward(module):
                        def custom_forward(*inputs):
                            return module(*inputs)
                        return custom_forward
                    h = checkpoint(create_custom_forward(layer_module), h, use_reentrant=True)
                    h = checkpoint(create_plain_forward(layer_module), h, use_reentrant=True)
                return h
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(4, 4)
                self.stem = nn.Linear(4, 4)
                self.decoder = Decoder()
            def forward(self, src, tgt):
                return self.decoder(self.stem(tgt), self.encoder(src))
        """,
        {(22, "CKPT003")},
    ),
    "a *args spread of a tuple the code shows is its elements, in place": (
        """
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x, mask):
                return self.fc(x) * mask
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
                self.stem = nn.Linear(4, 4)
            def forward(self, x, mask):
                inputs = (x, mask)
                raw = checkpoint(self.block, *inputs, use_reentrant=True)
                stemmed = checkpoint(self.block, *[self.stem(x), mask], use_reentrant=True)
                unknown = checkpoint(self.block, *self.pack(x), use_reentrant=True)
                return raw + stemmed + unknown
        def train():
            net = Net()
            net(torch.randn(2, 4), torch.ones(2, 4)).sum().backward()
        """,
        {(15, "CKPT001")},
    ),
    "Lightning runs its setup hooks on the module before the first training_step": (
        """
        import lightning as L
        class Lit(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.layer = nn.Linear(4, 4)
            def on_train_start(self):
                self.embed.requires_grad_(False)
            def forward(self, ids):
                return checkpoint(self.layer, self.embed(ids), use_reentrant=True)
            def training_step(self, batch, batch_idx):
                return self(batch).sum()
        class Thawed(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.layer = nn.Linear(4, 4)
            def configure_model(self):
                self.embed.requires_grad_(False)
            def on_train_start(self):
                self.embed.requires_grad_(True)
            def forward(self, ids):
                return checkpoint(self.layer, self.embed(ids), use_reentrant=True)
        class NotLightning(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.layer = nn.Linear(4, 4)
            def on_train_start(self):
                self.embed.requires_grad_(False)
            def forward(self, ids):
                return checkpoint(self.layer, self.embed(ids), use_reentrant=True)
        """,
        {(11, "CKPT005")},
    ),
    "a submodule handed to a freezing helper, or to a freezing method of the class": (
        """
        def freeze(module):
            for p in module.parameters():
                p.requires_grad = False
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.layer = nn.Linear(4, 4)
                self.head = nn.Linear(4, 4)
                self._freeze(self.embed)
            def _freeze(self, module):
                module.requires_grad_(False)
            def forward(self, ids):
                return self.head(checkpoint(self.layer, self.embed(ids), use_reentrant=True))
        class HeadNet(Net):
            def __init__(self):
                nn.Module.__init__(self)
                self.embed = nn.Embedding(10, 4)
                self.layer = nn.Linear(4, 4)
                self.head = nn.Linear(4, 4)
                self._freeze(self.head)
            def forward(self, ids):
                return self.head(checkpoint(self.layer, self.embed(ids), use_reentrant=True))
        class ScriptNet(HeadNet):
            def forward(self, ids):
                return self.head(checkpoint(self.layer, self.embed(ids), use_reentrant=True))
        def build():
            model = ScriptNet()
            freeze(model.embed)
            return model
        """,
        {(15, "CKPT005"), (27, "CKPT005")},
    ),
    "name predicates: any() of substrings and skipping with continue freeze; an unknown condition or value does not": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.norm = nn.LayerNorm(4)
                self.layer = nn.Linear(4, 4)
            def forward(self, ids):
                return checkpoint(self.layer, self.norm(self.embed(ids)), use_reentrant=True)
        class SkipNet(Net):
            def forward(self, ids):
                return checkpoint(self.layer, self.norm(self.embed(ids)), use_reentrant=True)
        class UnknownNet(Net):
            def forward(self, ids):
                return checkpoint(self.layer, self.norm(self.embed(ids)), use_reentrant=True)
        class ValueNet(Net):
            def forward(self, ids):
                return checkpoint(self.layer, self.norm(self.embed(ids)), use_reentrant=True)
        def build():
            model = Net()
            for n, p in model.named_parameters():
                if any(k in n for k in ("embed", "norm")):
                    p.requires_grad = False
            return model
        def build_skip():
            model = SkipNet()
            for n, p in model.named_parameters():
                if n.startswith("layer."):
                    continue
                p.requires_grad_(False)
            return model
        def build_unknown():
            model = UnknownNet()
            for p in model.parameters():
                if p.ndim > 1:
                    p.requires_grad = False
            return model
        def build_value(train_embeddings):
            model = ValueNet()
            for n, p in model.named_parameters():
                p.requires_grad = train_embeddings or "layer" in n
            return model
        """,
        {(9, "CKPT005"), (12, "CKPT005")},
    ),
    "a helper handed the model by another helper; unfrozen again by a third": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.layer = nn.Linear(4, 4)
            def forward(self, ids):
                return checkpoint(self.layer, self.embed(ids), use_reentrant=True)
        class ThawedNet(Net):
            def forward(self, ids):
                return checkpoint(self.layer, self.embed(ids), use_reentrant=True)
        def freeze_module(module):
            module.requires_grad_(False)
        def freeze_embeddings(model):
            freeze_module(model.embed)
            for p in model.embed.parameters():
                p.requires_grad = False
            return model
        def prepare(model, thaw=False):
            model = freeze_embeddings(model)
            return model
        def unfreeze_embeddings(model):
            model.embed.requires_grad_(True)
        def build():
            model = Net()
            return prepare(model)
        def build_thawed():
            model = prepare(ThawedNet().eval())
            unfreeze_embeddings(model=model)
            return model
        """,
        {(8, "CKPT005")},
    ),
    "use_cache switched on in the config for generation in eval() mode is kept; in train() mode it is dropped (CKPT004)": (
        """
        from transformers import AutoModelForCausalLM

        def finetune(name, batches):
            model = AutoModelForCausalLM.from_pretrained(name)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.train()
            for batch in batches:
                model(**batch).loss.backward()
            return model

        def finetune_then_generate(name, batches, prompt):
            model = finetune(name, batches)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.eval()
            model.config.use_cache = True
            return model.generate(**prompt)

        def finetune_with_cache(name, batches):
            model = AutoModelForCausalLM.from_pretrained(name)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.train()
            model.config.use_cache = True
            for batch in batches:
                model(**batch).loss.backward()
        """,
        {(23, "CKPT004")},
    ),
    "a top-level model's input is data unless a caller visibly makes it require grad (CKPT001)": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
                self.b = nn.Linear(4, 4)
            def forward(self, x):
                return checkpoint(self.b, checkpoint(self.a, x, use_reentrant=True), use_reentrant=True)
        class Probe(Net):
            def forward(self, x):
                return checkpoint(self.b, checkpoint(self.a, x, use_reentrant=True), use_reentrant=True)
        def load():
            return torch.load("batch.pt")
        net, probe = Net(), Probe()
        net(load()).sum().backward()
        net(torch.randn(2, 4)).sum().backward()
        x = torch.randn(2, 4)
        x.requires_grad_()
        probe(x).sum().backward()
        probe(torch.randn(2, 4)).sum().backward()
        """,
        # Net: data from every caller (one unknown); Probe: one caller passes a tensor that requires
        # grad, so its input requires grad on some calls only.
        {(8, "CKPT001")},
    ),
    "a model built right in the call of a training function is a whole model (CKPT001)": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
                self.b = nn.Linear(4, 4)
            def forward(self, x):
                return self.b(checkpoint(self.a, x, use_reentrant=True))
        def train(model, batches):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in batches:
                model(x).sum().backward()
                optimizer.step()
        train(Net().train(), [torch.randn(2, 4)])
        """,
        {(8, "CKPT001")},
    ),
    "a reduction of a tensor is a tensor: appending it escapes the checkpoint (CKPT007)": (
        """
        class Router(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate = nn.Linear(4, 2)
                self.balance, self.z = [], []
            def forward(self, x):
                logits = self.gate(x)
                self.balance.append(logits.softmax(-1).var())
                self.z.append(logits.logsumexp(-1).square().mean())
                return x * logits.softmax(-1)[:, :1]
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.inp = nn.Linear(4, 4)
                self.router = Router()
            def forward(self, x):
                return checkpoint(self.router, self.inp(x), use_reentrant=False)
        """,
        {(9, "CKPT007"), (10, "CKPT007")},
    ),
    "freezing a part of a held submodule freezes that part, not the whole submodule (CKPT005)": (
        """
        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.stages = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
            def forward(self, x):
                x = self.stem(x)
                for stage in self.stages:
                    x = checkpoint(stage, x, use_reentrant=True)
                return x
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = Backbone()
                self.neck = nn.Linear(4, 4)
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                return checkpoint(self.head, self.neck(self.backbone(x)), use_reentrant=True)
        model = Classifier()
        model.backbone.stem.requires_grad_(False)
        for p in model.neck.weight, model.neck.bias:
            p.requires_grad = False
        """,
        # `backbone.stem` frozen: the stages get data (CKPT005); the neck's input still requires grad
        # through the trainable stages, so the head's checkpoint is fine.
        {(10, "CKPT005")},
    ),
    "a holder object handed the model freezes a part of it in a method (CKPT005)": (
        """
        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.stages = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
            def forward(self, x):
                x = self.stem(x)
                for stage in self.stages:
                    x = checkpoint(stage, x, use_reentrant=True)
                return x
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = Backbone()
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                return self.head(self.backbone(x))
        class Runner:
            def __init__(self, model, lr=0.1):
                self.model = model
                self.lr = lr
            def freeze_stem(self):
                for p in self.model.backbone.stem.parameters():
                    p.requires_grad = False
            def step(self, x):
                self.model(x).sum().backward()
        def main():
            model = Classifier()
            runner = Runner(model)
            runner.freeze_stem()
            runner.step(torch.randn(2, 4))
        """,
        {(10, "CKPT005")},
    ),
    "a model built in a runner's construction is whole; the runner's freezes reach it (CKPT005)": (
        """
        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.stages = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
            def forward(self, x):
                x = self.stem(x)
                for stage in self.stages:
                    x = checkpoint(stage, x, use_reentrant=True)
                return x
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = Backbone()
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                return self.head(self.backbone(x))
        class Runner:
            def __init__(self, model):
                self.model = model
            def freeze_stem(self):
                self.model.backbone.stem.requires_grad_(False)
            def step(self, x):
                self.model(x).sum().backward()
        runner = Runner(Classifier())
        runner.freeze_stem()
        runner.step(torch.randn(2, 4))
        """,
        {(10, "CKPT005")},
    ),
    "a config object's field is what it was built with, not the class default (CKPT005)": (
        """
        from dataclasses import dataclass
        @dataclass
        class Config:
            dim: int = 4
            reentrant: bool = False
        class Encoder(nn.Module):
            def __init__(self, cfg: Config):
                super().__init__()
                self.cfg = cfg
                self.embed = nn.Embedding(10, cfg.dim)
                self.layer = nn.Linear(cfg.dim, cfg.dim)
            def forward(self, ids):
                return checkpoint(self.layer, self.embed(ids), use_reentrant=self.cfg.reentrant)
        class Decoder(nn.Module):
            def __init__(self, cfg: Config):
                super().__init__()
                self.cfg = cfg
                self.embed = nn.Embedding(10, cfg.dim)
                self.layer = nn.Linear(cfg.dim, cfg.dim)
            def forward(self, ids):
                return checkpoint(self.layer, self.embed(ids), use_reentrant=self.cfg.reentrant)
        def train(reentrant):
            encoder = Encoder(Config(dim=8, reentrant=True))
            encoder.embed.requires_grad_(False)
            decoder = Decoder(Config(reentrant=reentrant))
            decoder.embed.requires_grad_(False)
            default = Decoder(Config())
            default.embed.requires_grad_(False)
        """,
        # Decoder: one construction passes a value the analysis cannot read, so its mode is unknown.
        {(14, "CKPT005")},
    ),
    "a nested config's fields: a default_factory object's defaults, or the object passed in its place (CKPT002)": (
        """
        from dataclasses import dataclass, field
        @dataclass
        class CkptConfig:
            enabled: bool = True
            preserve_rng_state: bool = False
        @dataclass
        class NetConfig:
            drop: float = field(default=0.1)
            ckpt: CkptConfig = field(default_factory=CkptConfig)
        class Net(nn.Module):
            def __init__(self, cfg: NetConfig):
                super().__init__()
                self.cfg = cfg
                self.block = nn.Sequential(nn.Linear(8, 8), nn.Dropout(cfg.drop))
            def forward(self, x):
                if self.cfg.ckpt.enabled:
                    return checkpoint(self.block, x, use_reentrant=False, preserve_rng_state=self.cfg.ckpt.preserve_rng_state)
                return self.block(x)
        class Replaying(Net):
            pass
        Net(NetConfig())(torch.randn(2, 8))
        Replaying(NetConfig(ckpt=CkptConfig(preserve_rng_state=True)))(torch.randn(2, 8))
        """,
        {(18, "CKPT002")},
    ),
    "a config object's method returns its own fields, as that object was built (CKPT002)": (
        """
        from dataclasses import dataclass, field
        @dataclass
        class CkptConfig:
            preserve_rng_state: bool = False
            def kwargs(self):
                return {"use_reentrant": False, "preserve_rng_state": self.preserve_rng_state}
        @dataclass
        class NetConfig:
            ckpt: CkptConfig = field(default_factory=CkptConfig)
        class Net(nn.Module):
            def __init__(self, cfg: NetConfig):
                super().__init__()
                self.cfg = cfg
                self.block = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))
            def forward(self, x):
                return checkpoint(self.block, x, **self.cfg.ckpt.kwargs())
        class Replaying(Net):
            pass
        Net(NetConfig())(torch.randn(2, 8))
        Replaying(NetConfig(ckpt=CkptConfig(preserve_rng_state=True)))(torch.randn(2, 8))
        """,
        {(17, "CKPT002")},
    ),
    "a flag from_pretrained is handed that the constructions do not decide leaves the table unknown": (
        """
        class Tagger(nn.Module):
            def __init__(self, weights, tune=False):
                super().__init__()
                self.maybe = nn.Embedding.from_pretrained(weights, freeze=not tune)
                self.block = nn.Linear(4, 4)
            def forward(self, ids):
                return checkpoint(self.block, self.maybe(ids), use_reentrant=True)
        def train(ids, tune):
            Tagger(torch.randn(10, 4), tune=tune)(ids).sum().backward()
            Tagger(torch.randn(10, 4), tune=True)(ids).sum().backward()
        """,
        set(),
    ),
    "a config's dict field spreads its default, a lambda factory or a class-level dict (CKPT005)": (
        """
        from dataclasses import dataclass, field
        @dataclass
        class TaggerConfig:
            ckpt_kwargs: dict = field(default_factory=lambda: {"use_reentrant": True})
            plain_kwargs: dict = field(default_factory=dict)
        class Settings:
            ckpt_kwargs = dict(use_reentrant=False)
        class Tagger(nn.Module):
            def __init__(self, cfg: TaggerConfig):
                super().__init__()
                self.cfg = cfg
                self.embed = nn.Embedding(10, 8)
                self.embed.weight.requires_grad = False
                self.block = nn.Linear(8, 8)
            def forward(self, ids):
                h = self.embed(ids)
                a = checkpoint(self.block, h, **self.cfg.ckpt_kwargs)
                b = checkpoint(self.block, h, **self.cfg.plain_kwargs)
                return a + b + checkpoint(self.block, h, **Settings.ckpt_kwargs)
        Tagger(TaggerConfig())(torch.zeros(2, 3, dtype=torch.long))
        """,
        {(18, "CKPT005"), (19, "CKPT005")},
    ),
    "the blocks a builder function returns hold what its container holds (CKPT002)": (
        """
        def make_block(dim, p):
            return nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Dropout(p))
        def make_plain_block(dim):
            return nn.Sequential(nn.Linear(dim, dim), nn.GELU())
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([make_block(8, 0.1) for _ in range(2)])
                self.plain = nn.ModuleList([make_plain_block(8) for _ in range(2)])
            def forward(self, x):
                for block in self.blocks:
                    x = checkpoint(block, x, use_reentrant=False, preserve_rng_state=False)
                for block in self.plain:
                    x = checkpoint(block, x, use_reentrant=False, preserve_rng_state=False)
                return x
        Net()(torch.randn(2, 8))
        """,
        {(13, "CKPT002")},
    ),
    "a container the checkpoint call hands in and the function fills escapes; one it builds does not (CKPT007)": (
        """
        def record(stats, key, value):
            stats[key] = value
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)
            def forward(self, x, stats, idx):
                h = self.fc(x)
                stats[idx] = h.pow(2).mean()
                local = {}
                record(local, idx, h.mean())
                return h + len(local)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
            def forward(self, x):
                stats = {}
                for i, block in enumerate(self.blocks):
                    x = checkpoint(block, x, stats, i, use_reentrant=False)
                return x, sum(stats.values())
        """,
        {(10, "CKPT007")},
    ),
    "the parts of a built-in layer's tuple output are its tensors (CKPT007)": (
        """
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
                self.rnn = nn.LSTM(8, 8, batch_first=True)
            def forward(self, x, stats):
                out, weights = self.attn(x, x, x)
                seq, (h, c) = self.rnn(out)
                stats["attn"] = weights.mean()
                stats["state"] = c.mean()
                return seq
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
            def forward(self, x):
                stats = {}
                return checkpoint(self.block, x, stats, use_reentrant=True), stats
        """,
        {(10, "CKPT007"), (11, "CKPT007")},
    ),
    "what a shared `__init__` stored on self is what constructions of that class passed (CKPT005)": (
        """
        class Encoder(nn.Module):
            def __init__(self, reentrant=False):
                super().__init__()
                self.reentrant = reentrant
                self.embed = nn.Embedding(10, 4)
                self.layer = nn.Linear(4, 4)
            def forward(self, ids):
                return checkpoint(self.layer, self.embed(ids), use_reentrant=self.reentrant)
        class Decoder(Encoder):
            def forward(self, ids):
                return checkpoint(self.layer, self.embed(ids), use_reentrant=self.reentrant)
        def train():
            encoder = Encoder(reentrant=False)
            encoder.embed.requires_grad_(False)
            decoder = Decoder(reentrant=True)
            decoder.embed.requires_grad_(False)
        """,
        # Encoder.forward: constructions of Encoder pass False (the Decoder's True is another class's).
        {(12, "CKPT005")},
    ),
    "an `if __name__ == '__main__':` block is the script, run unconditionally (CKPT008)": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
                self.b = nn.Linear(4, 4)
            def forward(self, x):
                return self.b(checkpoint(self.a, self.b(x), use_reentrant=False))
        def score(model, batch):
            with torch.no_grad():
                return model(batch)
        if "__main__" == __name__:
            model = Net()
            score(model, torch.randn(2, 4))
        if __name__ == "__main__":
            held_out = Net()
            held_out.eval()
            score(held_out, torch.randn(2, 4))
        """,
        {(11, "CKPT008")},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_semantics(name):
    body, expected = CASES[name]
    assert findings(body) == expected


def test_transformers_layer_keyword_depends_on_the_enabled_mode():
    body = """
        from transformers.modeling_layers import GradientCheckpointingLayer
        class Layer(GradientCheckpointingLayer):
            pass
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([Layer() for _ in range(2)])
            def forward(self, h, encoder_hidden_states):
                for layer in self.layers:
                    h = layer(h, encoder_hidden_states=encoder_hidden_states)
                return h
        class Seq2Seq(nn.Module):
            def __init__(self):
                super().__init__()
                self.decoder = Decoder()
        """
    assert findings(body, transformers="5.23") == set()  # 5.x default: non-reentrant
    assert findings(body, transformers="4.57") == {(11, "CKPT003")}  # 4.x default: use_reentrant=True
    enabled = textwrap.dedent(body) + "\ndef train(model):\n    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': True})\n"
    assert findings(enabled, transformers="5.23") == {(11, "CKPT003")}
    # Through the Trainer's arguments (trl's configs are TrainingArguments too).
    for arguments in ("TrainingArguments", "SFTConfig"):
        trained = textwrap.dedent(body) + (
            f"\ndef train(model, data):\n    args = {arguments}('out', gradient_checkpointing=True, gradient_checkpointing_kwargs={{'use_reentrant': True}})\n"
            "    Trainer(model=model, args=args, train_dataset=data).train()\n"
        )
        assert findings(trained, transformers="5.23") == {(11, "CKPT003")}, arguments
    unswitched = textwrap.dedent(body) + "\nargs = TrainingArguments('out', gradient_checkpointing=False, gradient_checkpointing_kwargs={'use_reentrant': True})\n"
    assert findings(unswitched, transformers="5.23") == set()
    # A switch the analysis cannot evaluate may be on, as for the Trainer's own site (probe: a
    # command-line option compared with a threshold).
    for switch in ("cli.gc", "cli.batch_size_multiplier > 4", "bool(cli.gc)"):
        maybe = textwrap.dedent(body) + (
            f"\ndef train(model, cli):\n    args = TrainingArguments('out', gradient_checkpointing={switch}, gradient_checkpointing_kwargs={{'use_reentrant': True}})\n"
        )
        assert findings(maybe, transformers="5.23") == {(11, "CKPT003")}, switch
    for off in ("None", "0"):
        never = textwrap.dedent(body) + f"\nargs = TrainingArguments('out', gradient_checkpointing={off}, gradient_checkpointing_kwargs={{'use_reentrant': True}})\n"
        assert findings(never, transformers="5.23") == set(), off


def test_layer_keyword_computed_afresh_for_each_layer_is_read_once():
    """A learned bias made once per layer from leaves only (data2vec-vision's relative position bias,
    a module called on sizes): each tensor is read by one checkpointed call, so the reentrant
    recompute walks its graph once and gradients are exact (tests/runtime/test_ckpt003_runtime.py).
    A tensor shared by every layer, or made from one, is walked once per layer: "Trying to backward
    through the graph a second time"."""
    body = """
        from transformers.modeling_layers import GradientCheckpointingLayer
        class Layer(GradientCheckpointingLayer):
            pass
        class Encoder(nn.Module):
            def __init__(self, project):
                super().__init__()
                self.bias_table = nn.Linear(1, 4)
                self.source = nn.Linear(4, 4)
                self.layers = nn.ModuleList([Layer() for _ in range(2)])
                self.project = project
            def forward(self, h, source):
                context = self.source(source)
                for layer in self.layers:
                    if self.project:
                        bias = self.bias_table(torch.ones(1))
                    else:
                        bias = None
                    from_context = self.source(context)
                    shared = context
                    h = layer(h, position_bias=bias)
                    h = layer(h, position_bias=from_context)
                    h = layer(h, position_bias=shared)
                return h
        model = Encoder(project=True)
        """
    assert findings(body, transformers="4.57") == {(22, "CKPT003"), (23, "CKPT003")}


def test_frozen_text_model_is_hooked_by_transformers_5_unless_the_hook_is_undone():
    body = """
        from transformers import AutoModelForCausalLM
        def train(name):
            model = AutoModelForCausalLM.from_pretrained(name)
            for p in model.parameters():
                p.requires_grad = False
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        def train_swapped(name, embeddings):
            model = AutoModelForCausalLM.from_pretrained(name)
            for p in model.parameters():
                p.requires_grad = False
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            model.set_input_embeddings(embeddings)
        """
    assert findings(body, transformers="5.23") == {(12, "CKPT005")}
    assert findings(body, transformers="4.57") == {(7, "CKPT005"), (12, "CKPT005")}


def test_peft_hooks_the_inputs_only_of_a_model_already_checkpointed_when_it_wraps():
    body = """
        from peft import LoraConfig, PeftModel, get_peft_model, prepare_model_for_kbit_training
        from transformers import AutoModelForCausalLM, ViTForImageClassification
        def wrapped_then_enabled(name):
            model = AutoModelForCausalLM.from_pretrained(name)
            model = get_peft_model(model, LoraConfig())
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        def enabled_on_the_base_afterwards(name):
            base = AutoModelForCausalLM.from_pretrained(name)
            model = get_peft_model(base, LoraConfig())
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            return model
        def vision_wrapped_inline(config, path):
            model = PeftModel.from_pretrained(ViTForImageClassification(config), path)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        def enabled_then_wrapped(name):
            model = ViTForImageClassification.from_pretrained(name)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            return get_peft_model(model, LoraConfig())
        def wrapped_then_hooked(name):
            model = get_peft_model(ViTForImageClassification.from_pretrained(name), LoraConfig())
            model.enable_input_require_grads()
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        def prepared_for_kbit(name):
            model = prepare_model_for_kbit_training(AutoModelForCausalLM.from_pretrained(name))
            model = get_peft_model(model, LoraConfig())
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        def wrapped_then_default(name):
            model = get_peft_model(ViTForImageClassification.from_pretrained(name), LoraConfig())
            model.gradient_checkpointing_enable()
        def prepared_unquantized(config):
            model = AutoModelForCausalLM.from_config(config)
            model = prepare_model_for_kbit_training(model)
            model = get_peft_model(model, LoraConfig())
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        """
    # prepare_model_for_kbit_training hooks a quantized model only: one loaded with from_pretrained
    # may be (prepared_for_kbit), one built from a config is not (prepared_unquantized)
    assert findings(body, transformers="5.23") == {(15, "CKPT005")}  # 5.x hooks input_ids models itself; default non-reentrant
    # 4.x hooks nothing for a PEFT wrapper, and its default is reentrant
    assert findings(body, transformers="4.57") == {(7, "CKPT005"), (11, "CKPT005"), (15, "CKPT005"), (30, "CKPT005"), (35, "CKPT005")}



def test_peft_wraps_a_model_a_builder_returns(project):
    """`get_peft_model(build_backbone(), ...)`: the wrapped class is what the builder (of another file)
    returns; a ViT gets no input hook from transformers 5.x, a Llama does."""
    factory = (
        "from transformers import LlamaConfig, LlamaForCausalLM, ViTConfig, ViTForImageClassification\n\n\n"
        "def build_backbone():\n    return ViTForImageClassification(ViTConfig())\n\n\n"
        "def build_text_model():\n    return LlamaForCausalLM(LlamaConfig())\n"
    )
    train = (
        "from peft import LoraConfig, get_peft_model\nfrom model_factory import {builder}\n\n\n"
        "def build():\n    model = get_peft_model({builder}(), LoraConfig(target_modules=['q_proj']))\n"
        "    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={{'use_reentrant': True}})\n    return model\n"
    )
    for builder, expected in (("build_backbone", {7}), ("build_text_model", set())):
        root = project({"model_factory.py": factory, "train.py": train.format(builder=builder)})
        report = lint_folder(root)
        assert report.errors == []
        assert {f.line for f in report.findings if f.code == "CKPT005"} == expected, builder


def test_adapter_libraries_that_freeze_the_model_they_are_handed():
    body = """
        import torch.nn as nn
        import loralib as lora
        from peft import LoraConfig, inject_adapter_in_model
        from torch.utils.checkpoint import checkpoint
        from transformers import ViTForImageClassification
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 8)
                self.block = lora.Linear(8, 8, r=2)
            def forward(self, ids):
                return checkpoint(self.block, self.embed(ids), use_reentrant=True)
        def loralib_marked():
            model = Net()
            lora.mark_only_lora_as_trainable(model)
            return model
        def loralib_biases_back_on():
            model = Net()
            lora.mark_only_lora_as_trainable(model, bias="all")
            return model
        def injected(name):
            model = ViTForImageClassification.from_pretrained(name)
            model = inject_adapter_in_model(LoraConfig(target_modules=["query"]), model)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        def injected_in_place(name):
            model = ViTForImageClassification.from_pretrained(name)
            inject_adapter_in_model(LoraConfig(target_modules=["query"]), model=model)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        def injected_and_hooked(name):
            model = inject_adapter_in_model(LoraConfig(target_modules=["query"]), ViTForImageClassification.from_pretrained(name))
            model.enable_input_require_grads()
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        """
    # loralib freezes every parameter whose name lacks `lora_` (`bias="all"` turns biases back on:
    # the embedding has none, so it stays frozen); inject_adapter_in_model freezes all but the
    # adapters and, unlike get_peft_model, never hooks the inputs
    assert findings(body) == {(13, "CKPT005"), (25, "CKPT005"), (29, "CKPT005")}


def test_transformers_add_adapter_freezes_all_but_the_adapters_and_arms_the_next_enable():
    """Measured on transformers 5.23 / peft 0.21.2: `model.add_adapter(config)` freezes every
    parameter but the adapters and marks PEFT loaded; `gradient_checkpointing_enable()` hooks the
    inputs of such a model (4.x and 5.x), but only when it runs after `add_adapter`."""
    body = """
        from peft import LoraConfig
        from transformers import AutoModelForCausalLM, ViTForImageClassification
        REENTRANT = {"use_reentrant": True}
        def llama_enabled_then_adapter():
            model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=REENTRANT)
            model.add_adapter(LoraConfig(target_modules=["q_proj"]))
        def llama_adapter_then_enabled():
            model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
            model.add_adapter(LoraConfig(target_modules=["q_proj"]))
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=REENTRANT)
        def vit_enabled_then_adapter(name):
            model = ViTForImageClassification.from_pretrained(name)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=REENTRANT)
            model.add_adapter(LoraConfig(target_modules=["q_proj"]))
        def vit_adapter_then_enabled(name):
            model = ViTForImageClassification.from_pretrained(name)
            model.add_adapter(LoraConfig(target_modules=["q_proj"]))
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=REENTRANT)
        """
    assert findings(body, transformers="4.57") == {(7, "CKPT005"), (15, "CKPT005")}
    assert findings(body) == {(15, "CKPT005")}  # 5.x hooks token-id models whatever the order


def test_enable_on_a_library_model_held_by_a_project_object_sees_its_freezing():
    body = """
        import torch
        from transformers import BertModel
        class Classifier(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.bert = BertModel.from_pretrained("bert-base-uncased")
                self.head = torch.nn.Linear(768, 2)
            def forward(self, input_ids):
                return self.head(self.bert(input_ids=input_ids).pooler_output)
        def freeze_bottom(model):
            for param in model.bert.embeddings.parameters():
                param.requires_grad = False
        def train():
            model = Classifier()
            freeze_bottom(model)
            model.bert.gradient_checkpointing_enable()
        def train_head_frozen():
            model = Classifier()
            model.head.requires_grad_(False)
            model.bert.gradient_checkpointing_enable()
        def train_hooked():
            model = Classifier()
            freeze_bottom(model)
            model.bert.enable_input_require_grads()
            model.bert.gradient_checkpointing_enable()
        """
    assert findings(body, transformers="4.57") == {(17, "CKPT005")}
    assert findings(body, transformers="5.23") == set()  # 5.x hooks BERT's input_ids itself


def test_keywords_a_wrapper_hands_on_through_its_kwargs_reach_a_reentrant_checkpoint():
    body = """
        import torch.nn as nn
        from torch.utils.checkpoint import checkpoint
        def run(fn, *args, **kwargs):
            return checkpoint(fn, *args, use_reentrant=True, **kwargs)
        def run_deleted(fn, *args, **kwargs):
            del kwargs["mask"]
            return checkpoint(fn, *args, use_reentrant=True, **kwargs)
        def run_cleared(fn, *args, **kwargs):
            kwargs.clear()
            return checkpoint(fn, *args, use_reentrant=True, **kwargs)
        class Runner:
            def __init__(self, block):
                self.block = block
            def __call__(self, *args, **kwargs):
                return checkpoint(self.block, *args, use_reentrant=True, **kwargs)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.runner = Runner(self.fc)
            def forward(self, x):
                h = self.fc(x)
                a = run(self.fc, h, mask=h)
                b = run(self.fc, h, preserve_rng_state=False)
                c = run_deleted(self.fc, h, mask=h)
                d = run_cleared(self.fc, h, mask=h)
                return a + b + c + d + self.runner(h, mask=h)
        """
    assert findings(body) == {(24, "CKPT003"), (28, "CKPT003")}


def test_keywords_a_module_forward_receives_in_its_kwargs_reach_the_checkpoint_it_spreads_them_into():
    body = """
        import torch.nn as nn
        from torch.utils.checkpoint import checkpoint
        class Cross(nn.Module):
            def __init__(self):
                super().__init__()
                self.q = nn.Linear(4, 4)
            def forward(self, x, context=None, scale=1.0):
                return self.q(x) * scale
        class Stack(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([Cross() for _ in range(2)])
            def forward(self, x, **kwargs):
                for block in self.blocks:
                    x = checkpoint(block, x, use_reentrant=True, **kwargs)
                return x
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.text = nn.Linear(4, 4)
                self.stem = nn.Linear(4, 4)
                self.stack = Stack()
                self.plain = Stack()
            def forward(self, x, tokens):
                return self.stack(self.stem(x), context=self.text(tokens)) + self.plain(self.stem(x))
        """
    assert findings(body) == {(16, "CKPT003")}


def test_a_model_a_helper_returns_with_caching_on_is_cached_under_checkpointing():
    body = """
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
        def load(name):
            return AutoModelForCausalLM.from_pretrained(name, use_cache=True)
        def load_configured(name):
            model = AutoModelForCausalLM.from_pretrained(name)
            model.config.use_cache = True
            return model
        def load_plain(name):
            return AutoModelForCausalLM.from_pretrained(name, use_cache=False)
        def train(name, data):
            model = load(name)
            Trainer(model=model, args=TrainingArguments("out", gradient_checkpointing=True), train_dataset=data).train()
        def train_configured(name):
            model = load_configured(name)
            model.gradient_checkpointing_enable()
        def train_plain(name, data):
            model = load_plain(name)
            Trainer(model=model, args=TrainingArguments("out", gradient_checkpointing=True), train_dataset=data).train()
        def sample(name, prompt):
            model = load(name)
            return model.generate(prompt)
        """
    # Since transformers 5.0 the Trainer sets `model.config.use_cache` from its arguments when it is built.
    assert findings(body, transformers="4.57") == {(12, "CKPT004"), (15, "CKPT004")}
    assert findings(body) == {(15, "CKPT004")}


def test_a_helper_that_sets_caching_and_enables_checkpointing_itself_is_reported_there_only():
    body = """
        from transformers import AutoModelForCausalLM
        def optimize_model_memory(model):
            model.train()
            model.config.use_cache = True
            model.gradient_checkpointing_enable()
            return model
        def main(name):
            model = AutoModelForCausalLM.from_pretrained(name)
            model = optimize_model_memory(model)
            model(**batch).loss.backward()
        """
    assert findings(body) == {(5, "CKPT004")}

def test_a_helper_that_enables_checkpointing_on_the_model_it_is_handed_switches_it_on_there():
    body = """
        from transformers import AutoModelForCausalLM
        def prepare(model, other=None):
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        def prepare_other(model, other):
            other.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        def fine_tune(name, ids):
            model = AutoModelForCausalLM.from_pretrained(name, use_cache=True)
            prepare(model)
            model.train()
            model(input_ids=ids, labels=ids).loss.backward()
        def fine_tune_by_keyword(name, ids):
            model = AutoModelForCausalLM.from_pretrained(name, use_cache=True)
            prepare(other=None, model=model)
            model.train()
            model(input_ids=ids, labels=ids).loss.backward()
        def fine_tune_other(name, ids, spare):
            model = AutoModelForCausalLM.from_pretrained(name, use_cache=True)
            prepare_other(model, spare)
            model.train()
            model(input_ids=ids, labels=ids).loss.backward()
        """
    assert findings(body) == {(8, "CKPT004"), (13, "CKPT004")}


WRAPPERS = """
def run_ckpt(fn, *args, **kwargs):
    return checkpoint(functools.partial(fn, **kwargs), *args, use_reentrant=True)
def run_if_grad(fn, x):
    if x.requires_grad:
        return checkpoint(fn, x, use_reentrant=True)
    return fn(x)
def run_when_training(fn, x):
    if torch.is_grad_enabled():
        return checkpoint(fn, x, use_reentrant=False)
    return fn(x)
def run_masked(fn, x, mask=None):
    return checkpoint(fn, x, mask, use_reentrant=True)
def run_nested(block, x):
    return run_ckpt(block, x)
class CheckpointWrapper(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module
    def forward(self, *args):
        return checkpoint(self.module, *args, use_reentrant=False, preserve_rng_state=False)
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.1)
    def forward(self, x, ctx=None):
        return self.drop(self.lin(x))
"""


def test_inferred_wrappers_are_sites_at_each_call():
    body = WRAPPERS + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.block = Block()
        self.wrapped = CheckpointWrapper(Block())
    def forward(self, x):
        h = self.stem(x)
        a = run_ckpt(self.block, x)
        b = run_ckpt(self.block, h)
        c = run_ckpt(self.block, h, ctx=torch.tanh(h))
        d = run_if_grad(self.block, x)
        e = run_masked(self.block, h, mask=x)
        f = run_nested(self.block, x)
        g = self.wrapped(h)
        with torch.no_grad():
            run_when_training(self.block, h)
            run_ckpt(self.block, h)
        return a + b + c + d + e + f + g
model = Net()
"""
    lines = (HEADER + body).splitlines()
    at = lambda text: next(i for i, line in enumerate(lines, 1) if text in line) - HEADER.count("\n")  # noqa: E731
    assert findings(body) == {
        (at("a = run_ckpt"), "CKPT001"),
        (at("c = run_ckpt"), "CKPT003"),
        (at("f = run_nested"), "CKPT001"),
        (at("g = self.wrapped"), "CKPT002"),
        (at("            run_ckpt(self.block, h)"), "CKPT008"),
    }


def test_a_wrappers_flags_bound_at_each_call_decide_its_mode_and_rng():
    body = """
        import torch.nn as nn
        from torch.utils.checkpoint import checkpoint
        def ckpt(fn, *args, preserve=False, reentrant=False):
            return checkpoint(fn, *args, use_reentrant=reentrant, preserve_rng_state=preserve)
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.drop = nn.Dropout(0.2)
            def forward(self, x, mask=None):
                return self.drop(self.fc(x))
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.block = Block()
            def forward(self, x):
                h = self.stem(x)
                a = ckpt(self.block, h)
                b = ckpt(self.block, h, preserve=True)
                c = ckpt(self.block, h, h, preserve=True, reentrant=True)
                return a + b + c
        """
    assert findings(body) == {(20, "CKPT002")}


def test_checkpoint_functions_setting_overrides_inference(tmp_path):
    from ckptlint.config import Settings, WrapperSpec

    body = WRAPPERS + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.block = Block()
    def forward(self, x):
        h = run_ckpt(self.block, x)
        return run_masked(self.block, self.stem(h))
"""
    declared = (("example.run_ckpt", WrapperSpec(reentrant=False)), ("example.run_masked", WrapperSpec(reentrant=True, preserve_rng_state=False)))
    report = lint_text(HEADER + body, settings=Settings(checkpoint_functions=declared))
    offset = HEADER.count("\n")
    got = {(f.line - offset, f.code) for f in report.findings if f.code != "CKPT006"}
    lines = body.splitlines()
    assert got == {(next(i for i, line in enumerate(lines, 1) if "return run_masked" in line), "CKPT002")}


def test_a_projects_own_copy_of_the_checkpointing_layer_is_a_wrapper():
    body = """
        class GradientCheckpointingLayer(nn.Module):
            gradient_checkpointing = False
            def __call__(self, *args, **kwargs):
                if self.gradient_checkpointing and self.training:
                    return self._gradient_checkpointing_func(functools.partial(super().__call__, **kwargs), *args)
                return super().__call__(*args, **kwargs)
        class Layer(GradientCheckpointingLayer):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)
            def forward(self, h, encoder_hidden_states=None):
                return self.lin(h) + encoder_hidden_states
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 4)
                self.layers = nn.ModuleList([Layer() for _ in range(2)])
            def forward(self, x, src):
                enc = torch.tanh(self.enc(src))
                h = self.enc(x)
                for layer in self.layers:
                    h = layer(h, encoder_hidden_states=enc)
                return h
        """
    assert findings(body, transformers="5.23") == set()
    assert findings(body, transformers="4.57") == {(23, "CKPT003")}


def test_kwargs_defaulted_in_a_helper_and_forwarded_kwargs_follow_their_callers():
    """Issue 10 pattern 4: `{}` standing in for None reaches transformers (CKPT006); `**kwargs`
    forwarded to checkpoint lack the flag when every project call omits it."""
    body = textwrap.dedent(
        """
        def enable_ifexp(model, kw=None):
            kw = {} if kw is None else kw
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
        def enable_told(model, kw=None):
            kw = kw or {}
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
        def enable_never_called(model, kw=None):
            kw = kw or {}
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
        def enable_kept(model, kw=None):
            if kw is not None:
                kw = {}
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
        def forward_all(fn, x, **kwargs):
            return checkpoint(fn, x, **kwargs)
        def forward_mixed(fn, x, **kwargs):
            return checkpoint(fn, x, **kwargs)
        def setup(model, block, x):
            enable_ifexp(model)
            enable_ifexp(model, None)
            enable_told(model, {"use_reentrant": False})
            enable_told(model, kw={"use_reentrant": False})
            enable_kept(model)
            forward_all(block, x)
            forward_all(block, x, preserve_rng_state=False)
            forward_mixed(block, x)
            forward_mixed(block, x, use_reentrant=False)
        """
    )
    report = lint_text(HEADER + body, transformers="5.23")
    assert report.errors == []
    offset = HEADER.count("\n")
    # enable_kept replaces only a dict its caller passed: None (transformers' default) reaches it, and
    # forward_mixed's callers disagree; enable_never_called's callers are unknown.
    assert {(f.line - offset, f.code) for f in report.findings} == {(4, "CKPT006"), (16, "CKPT006")}

TOP_LEVEL = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
    def forward(self, x):
        return checkpoint(self.a, x, use_reentrant=True)
"""


@pytest.mark.parametrize(
    "evidence, expected",
    [
        ("", set()),  # nothing shows Net is the model: its input may come from a parent elsewhere
        ("model = Net()\n", {(7, "CKPT001")}),
        ("def main():\n    model = Net().to('cpu')\n    return model\n", {(7, "CKPT001")}),
        ("model = Net.from_pretrained('checkpoints/net')\n", {(7, "CKPT001")}),
        ("def freeze(model):\n    return model\nmodel = freeze(Net().train())\n", {(7, "CKPT001")}),
        ("def step(model, x):\n    model(x).sum().backward()\n", {(7, "CKPT001")}),
        ("def fit(model, loader):\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    return optimizer\n", {(7, "CKPT001")}),
        # A type check names the class without building or handing it on (transformers' _init_weights).
        (
            "class Init(nn.Module):\n    def _init_weights(self, module):\n        if isinstance(module, (Net, nn.Linear)):\n"
            "            return issubclass(type(module), Net)\nmodel = Net.from_pretrained('checkpoints/net')\n",
            {(7, "CKPT001")},
        ),
        # A factory hands the block on: a submodule of whatever takes it.
        ("def make_block():\n    return Net()\n", set()),
        # Built as a submodule of the model the script builds: its input is the model's activation.
        (
            "class Outer(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.stem = nn.Linear(4, 4)\n"
            "        self.net = Net()\n    def forward(self, x):\n        return self.net(self.stem(x))\nmodel = Outer()\n",
            set(),
        ),
    ],
)
def test_a_top_level_model_is_known_by_evidence(evidence, expected):
    assert findings(TOP_LEVEL + evidence) == expected


def test_a_subclass_built_by_a_script_makes_its_inherited_forward_a_model_input():
    assert findings(TOP_LEVEL + "class Wider(Net):\n    pass\nmodel = Wider()\n") == {(7, "CKPT001")}


def test_trainer_enables_checkpointing_from_its_arguments_keyed_on_the_transformers_version():
    """transformers 5.23's Trainer passes `gradient_checkpointing_kwargs or None` (None: non-reentrant);
    4.57 passes them as given and None becomes {"use_reentrant": True}. A text model is hooked by 5.x
    itself, never by 4.x."""
    body = """
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
        def freeze(model):
            for p in model.parameters():
                p.requires_grad = False
        def arguments(kwargs=None):
            return TrainingArguments(output_dir="out", gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": True})
        def train_default(name, data):
            model = AutoModelForCausalLM.from_pretrained(name)
            freeze(model)
            args = TrainingArguments(output_dir="out", gradient_checkpointing=True)
            Trainer(model=model, args=args, train_dataset=data).train()
        def train_built(name, data):
            model = AutoModelForCausalLM.from_pretrained(name)
            freeze(model)
            trainer = Trainer(model, arguments(), train_dataset=data)
            trainer.train()
        def train_hooked(name, data):
            model = AutoModelForCausalLM.from_pretrained(name)
            freeze(model)
            model.enable_input_require_grads()
            Trainer(model=model, args=TrainingArguments(output_dir="out", gradient_checkpointing=True)).train()
        def train_unfrozen(name, data):
            model = AutoModelForCausalLM.from_pretrained(name)
            Trainer(model=model, args=TrainingArguments(output_dir="out", gradient_checkpointing=True)).train()
        def train_handed(model, data):
            Trainer(model=model, args=TrainingArguments(output_dir="out", gradient_checkpointing=True)).train()
        """
    assert findings(body, transformers="5.23") == set()
    assert findings(body, transformers="4.57") == {(7, "CKPT005"), (11, "CKPT005")}


def test_use_cache_turned_back_on_after_the_trainer_returns_is_generation():
    body = """
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
        def train(name, data):
            model = AutoModelForCausalLM.from_pretrained(name)
            model.config.use_cache = True
            Trainer(model=model, args=TrainingArguments(output_dir="out", gradient_checkpointing=True), train_dataset=data).train()
            model.config.use_cache = True
        def train_then_generate(name, data, prompt):
            model = AutoModelForCausalLM.from_pretrained(name, use_cache=False)
            trainer = Trainer(model, TrainingArguments(output_dir="out", gradient_checkpointing=True), train_dataset=data)
            trainer.train()
            model.config.use_cache = True
        def train_without_checkpointing(name, data):
            model = AutoModelForCausalLM.from_pretrained(name, use_cache=True)
            Trainer(model=model, args=TrainingArguments(output_dir="out"), train_dataset=data).train()
        """
    assert findings(body, transformers="4.57") == {(5, "CKPT004")}
    assert findings(body) == set()  # 5.x: building the Trainer set `use_cache` from its arguments


def test_a_trainer_built_since_transformers_5_sets_caching_from_its_arguments():
    """Measured on 5.23 and 4.57.6 (rules/CKPT004.md): since 5.0 `Trainer(...)` sets
    `model.config.use_cache = args.use_cache` (default False) when it is built."""
    body = """
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
        def cached_before(name, data):
            model = AutoModelForCausalLM.from_pretrained(name, use_cache=True)
            Trainer(model=model, args=TrainingArguments(output_dir="out", gradient_checkpointing=True), train_dataset=data).train()
        def cached_after_building(name, data):
            model = AutoModelForCausalLM.from_pretrained(name)
            trainer = Trainer(model=model, args=TrainingArguments(output_dir="out", gradient_checkpointing=True), train_dataset=data)
            model.config.use_cache = True
            trainer.train()
        def cached_by_the_arguments(name, data):
            model = AutoModelForCausalLM.from_pretrained(name)
            args = TrainingArguments(output_dir="out", gradient_checkpointing=True, use_cache=True)
            Trainer(model=model, args=args, train_dataset=data).train()
        """
    assert findings(body, transformers="4.57") == {(4, "CKPT004"), (9, "CKPT004")}
    assert findings(body) == {(9, "CKPT004"), (13, "CKPT004")}


def test_a_transformers_model_counts_as_frozen_upstream_only_when_everything_its_first_layer_reads_is():
    """Measured on transformers 5.23 (scripts/measure_hf_upstream.py): a Llama's layers read
    `embed_tokens` only, GPT-2's `wte` plus `wpe`, BERT's the whole `embeddings` block; freezing a
    head, a final norm or a layer leaves the layers' input requiring grad. An Auto class counts when
    every architecture that has the paths the code freezes agrees."""
    body = """
        from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, LlamaForCausalLM
        def llama_input_embeddings(config):
            model = LlamaForCausalLM(config)
            model.get_input_embeddings().requires_grad_(False)
            model.gradient_checkpointing_enable()
        def llama_head_and_norm(config):
            model = LlamaForCausalLM(config)
            model.lm_head.requires_grad_(False)
            model.model.norm.requires_grad_(False)
            model.gradient_checkpointing_enable()
        def auto_input_embeddings(name):
            model = AutoModelForCausalLM.from_pretrained(name)
            for p in model.get_input_embeddings().parameters():
                p.requires_grad = False
            model.gradient_checkpointing_enable()
        def auto_llama_path(name):
            model = AutoModelForCausalLM.from_pretrained(name)
            model.model.embed_tokens.weight.requires_grad = False
            model.gradient_checkpointing_enable()
        def auto_gpt2_tables(name):
            model = AutoModelForCausalLM.from_pretrained(name)
            model.transformer.wte.requires_grad_(False)
            model.transformer.wpe.requires_grad_(False)
            model.gradient_checkpointing_enable()
        def auto_gpt2_tokens_only(name):
            model = AutoModelForCausalLM.from_pretrained(name)
            model.transformer.wte.requires_grad_(False)
            model.gradient_checkpointing_enable()
        def bert_word_embeddings(name):
            model = AutoModelForSequenceClassification.from_pretrained(name)
            model.bert.embeddings.word_embeddings.requires_grad_(False)
            model.gradient_checkpointing_enable()
        def bert_embeddings_block(name):
            model = AutoModelForSequenceClassification.from_pretrained(name)
            model.bert.embeddings.requires_grad_(False)
            model.gradient_checkpointing_enable()
        def classifier_only(name):
            model = AutoModelForSequenceClassification.from_pretrained(name)
            model.classifier.requires_grad_(False)
            model.gradient_checkpointing_enable()
        def all_but_adapters(name):
            model = AutoModelForCausalLM.from_pretrained(name)
            for n, p in model.named_parameters():
                if "lora_" not in n:
                    p.requires_grad = False
            model.gradient_checkpointing_enable()
        """
    # auto_input_embeddings: a Llama's layers read the embeddings alone, GPT-2's also `wpe`: not known.
    # (`base_model.embeddings` would not do either: ELECTRA's layers also read `embeddings_project`.)
    assert findings(body, transformers="4.57") == {(6, "CKPT005"), (20, "CKPT005"), (25, "CKPT005"), (37, "CKPT005"), (47, "CKPT005")}
    assert findings(body, transformers="5.23") == set()  # 5.x hooks the inputs of `input_ids` models itself


def test_an_auto_model_is_of_the_architecture_its_checkpoint_name_spells():
    """`AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")` builds a Llama (the hub
    config says so; confirm builds the stand-in the same way): freezing its input embeddings freezes
    everything its layers read. A name spelling no measured architecture, or one naming an
    architecture whose layers read more (GPT-2's `wpe`), stays unknown."""
    body = """
        from transformers import AutoModelForCausalLM
        MODEL = "Qwen/Qwen2.5-0.5B"
        def llama_literal():
            model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
            model.get_input_embeddings().requires_grad_(False)
            model.gradient_checkpointing_enable()
        def qwen_constant():
            model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype="auto")
            model.get_input_embeddings().weight.requires_grad = False
            model.gradient_checkpointing_enable()
        def gpt2_name():
            model = AutoModelForCausalLM.from_pretrained("gpt2-medium")
            model.get_input_embeddings().requires_grad_(False)
            model.gradient_checkpointing_enable()
        def unknown_name():
            model = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-70m")
            model.get_input_embeddings().requires_grad_(False)
            model.gradient_checkpointing_enable()
        def spelled_inside_a_word():
            model = AutoModelForCausalLM.from_pretrained("TinyLlama/TinyLlama-1.1B")
            model.get_input_embeddings().requires_grad_(False)
            model.gradient_checkpointing_enable()
        def load(name, frozen=True):
            model = AutoModelForCausalLM.from_pretrained(name)
            model.get_input_embeddings().requires_grad_(False)
            return model
        def named_to_a_builder():
            model = load("meta-llama/Llama-3.2-1B")
            model.gradient_checkpointing_enable()
        def named_by_keyword_to_a_builder():
            model = load(frozen=True, name="gpt2")
            model.gradient_checkpointing_enable()
        """
    assert findings(body, transformers="4.57") == {(7, "CKPT005"), (11, "CKPT005"), (30, "CKPT005")}


def test_a_transformers_model_a_class_holds_is_frozen_by_the_class_code():
    body = """
        from transformers import AutoModelForCausalLM
        class Tuner:
            def __init__(self, name):
                self.model = AutoModelForCausalLM.from_pretrained(name)
                self.model.model.embed_tokens.requires_grad_(False)
                self.model.gradient_checkpointing_enable()
        class HookedTuner:
            def __init__(self, name):
                self.model = AutoModelForCausalLM.from_pretrained(name)
                self.model.model.embed_tokens.requires_grad_(False)
                self.model.enable_input_require_grads()
                self.model.gradient_checkpointing_enable()
        class HeadTuner:
            def __init__(self, name):
                self.model = AutoModelForCausalLM.from_pretrained(name)
                self.model.lm_head.requires_grad_(False)
                self.model.gradient_checkpointing_enable()
        class OtherPartTuner:
            def __init__(self, name):
                self.model = AutoModelForCausalLM.from_pretrained(name)
                self.encoder = AutoModelForCausalLM.from_pretrained(name)
                self.encoder.requires_grad_(False)
                self.model.gradient_checkpointing_enable()
        """
    assert findings(body, transformers="4.57") == {(7, "CKPT005")}


def test_what_a_method_returns_reaches_the_checkpoint_unless_a_subclass_defines_it_again():
    body = """
        class Prepared(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Linear(4, 4)])
            def forward(self, x):
                h = self.prepare(x)
                return checkpoint(self.blocks[0], h, use_reentrant=True)
            def prepare(self, x):
                return x.float() * 2
        class Overridable(Prepared):
            def forward(self, x):
                h = self.lift(x)
                return checkpoint(self.blocks[0], h, use_reentrant=True)
            def lift(self, x):
                return x * 2
        class Lifted(Overridable):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
            def lift(self, x):
                return self.proj(x)
        def main():
            x = torch.randn(2, 4)
            Prepared()(x).sum().backward()
            Lifted()(x).sum().backward()
        """
    assert findings(body) == {(8, "CKPT001")}


def test_a_model_a_builder_function_returns_carries_what_the_builder_froze():
    body = """
        from transformers import Trainer, TrainingArguments, ViTForImageClassification
        def build(config):
            model = ViTForImageClassification(config)
            model.vit.embeddings.requires_grad_(False)
            return model
        def build_hooked(config):
            model = build(config)
            model.enable_input_require_grads()
            return model
        def fine_tune(config, dataset):
            model = build(config)
            args = TrainingArguments(output_dir="out", gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": True})
            Trainer(model=model, args=args, train_dataset=dataset).train()
        def fine_tune_hooked(config):
            model = build_hooked(config)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        """
    assert findings(body) == {(13, "CKPT005")}


def test_a_builder_returning_its_wrapped_model_directly_is_a_builder():
    """`return get_peft_model(model, config)` is `model = get_peft_model(...); return model`: under
    4.57 semantics PEFT hooks nothing when it wraps before checkpointing is on (peft_order.py)."""
    body = """
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
        def build(name):
            model = AutoModelForCausalLM.from_pretrained(name)
            return get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj"]))
        def build_checkpointed(name):
            model = AutoModelForCausalLM.from_pretrained(name)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            return get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj"]))
        def fine_tune(name, dataset):
            model = build(name)
            args = TrainingArguments(output_dir="out", gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": True})
            Trainer(model=model, args=args, train_dataset=dataset).train()
        def fine_tune_checkpointed(name, dataset):
            model = build_checkpointed(name)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        """
    assert findings(body, transformers="4.57") == {(13, "CKPT005")}


def test_layers_of_a_model_that_does_not_support_checkpointing_never_checkpoint():
    """`gradient_checkpointing_enable()` raises on a transformers model whose
    `supports_gradient_checkpointing` is not True, so its GradientCheckpointingLayers never
    checkpoint (transformers 5.23's SAM 2 mask decoder passes its tensors by keyword)."""
    body = """
        from transformers import PreTrainedModel
        from transformers.modeling_layers import GradientCheckpointingLayer
        class Block(GradientCheckpointingLayer):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
            def forward(self, queries, keys):
                return self.proj(queries) + keys
        class TwoWay(nn.Module):
            def __init__(self):
                super().__init__()
                self.query = nn.Linear(4, 4)
                self.layers = nn.ModuleList([Block(), Block()])
            def forward(self, x, keys):
                queries = self.query(x)
                for layer in self.layers:
                    queries = layer(queries=queries, keys=keys)
                return queries
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.transformer = TwoWay()
        class Unsupported(PreTrainedModel):
            def __init__(self, config):
                super().__init__(config)
                self.decoder = Decoder()
        class Supported(PreTrainedModel):
            supports_gradient_checkpointing = True
            def __init__(self, config):
                super().__init__(config)
                self.two_way = TwoWay2()
        class TwoWay2(nn.Module):
            def __init__(self):
                super().__init__()
                self.query = nn.Linear(4, 4)
                self.layers = nn.ModuleList([Block(), Block()])
            def forward(self, x, keys):
                queries = self.query(x)
                for layer in self.layers:
                    queries = layer(queries=queries, keys=keys)
                return queries
        """
    assert findings(body, transformers="4.57") == {(41, "CKPT003")}


def test_turning_a_tied_head_back_on_turns_the_embeddings_on():
    body = """
        from transformers import AutoModelForCausalLM, LlamaForCausalLM
        def head_only(name):
            model = AutoModelForCausalLM.from_pretrained(name)
            model.requires_grad_(False)
            model.lm_head.requires_grad_(True)
            model.gradient_checkpointing_enable()
        def llama_head_only(config):
            model = LlamaForCausalLM(config)
            model.requires_grad_(False)
            model.lm_head.requires_grad_(True)
            model.gradient_checkpointing_enable()
        """
    # GPT-2 ties `lm_head` to `wte` (measured): an Auto model may be one, a Llama is not.
    assert findings(body, transformers="4.57") == {(12, "CKPT005")}


def test_builders_calling_builders_are_followed_and_a_builder_calling_itself_ends():
    body = """
        from transformers import LlamaForCausalLM
        def build_base(config):
            model = LlamaForCausalLM(config)
            model.lm_head.requires_grad_(False)
            return model
        def build_chain(config):
            model = build_base(config)
            model.model.embed_tokens.requires_grad_(False)
            return model
        def build_again(config):
            model = build_again(config)
            return model
        def train(config):
            model = build_chain(config)
            model.gradient_checkpointing_enable()
            other = build_again(config)
            other.gradient_checkpointing_enable()
        """
    assert findings(body, transformers="4.57") == {(16, "CKPT005")}


_SCRATCH_MODEL = HEADER + textwrap.dedent(
    """
    class Modulation(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 12)
        def forward(self, x):
            q, ctx, self.gates = torch.split(self.proj(x), (4, 4, 4), -1)
            return q * torch.sigmoid(self.gates) + ctx
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Linear(4, 4)
            self.block = Modulation()
        def forward(self, x):
            return checkpoint(self.block, self.stem(x), use_reentrant=True)
    """
)


@pytest.mark.parametrize(
    "files, expected",
    [
        # Code that cannot hold the model (nothing imports it together with the model) reading an
        # attribute of the same name, e.g. a linter's own `site.gates`: still a scratch attribute.
        ({"tools/report.py": "def describe(site):\n    return site.gates\n"}, set()),
        # A helper importing nothing, handed the model by a script that imports both: a reader.
        (
            {
                "pkg/inspect_gates.py": "def gate_map(model):\n    return model.block.gates\n",
                "pkg/train.py": "import torch\nfrom pkg.inspect_gates import gate_map\nfrom pkg.model import Net\n\nmodel = Net()\nmodel(torch.randn(2, 4))\nprint(gate_map(model))\n",
            },
            {("pkg/model.py", 13, "CKPT007")},
        ),
        # The model's own package reading it, through `import pkg.model` spelled in full.
        ({"pkg/probe.py": "import pkg.model\n\ndef probe():\n    return pkg.model.Net().block.gates\n"}, {("pkg/model.py", 13, "CKPT007")}),
    ],
)
def test_an_attribute_is_read_elsewhere_only_by_code_that_can_hold_the_object(project, files, expected):
    project({"pyproject.toml": "", "pkg/__init__.py": "", "pkg/model.py": _SCRATCH_MODEL, **files})
    settings = Settings()
    report = lint(["."], settings, resolve_versions(settings, None, "2.13", "5.23"), jobs=1)
    assert report.errors == []
    assert {(f.path, f.line, f.code) for f in report.findings if f.code != "CKPT006"} == expected


SWAPPED_EMBEDDINGS = """
    import argparse
    from transformers import AutoModelForCausalLM


    def load(name):
        model = AutoModelForCausalLM.from_pretrained(name)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={{"use_reentrant": True}})
        model.set_input_embeddings(nn.Embedding.from_pretrained(torch.load("table.pt")))
        return model


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--model-name", {option})
        parser.add_argument("--steps", type=int, default=2)
        args = parser.parse_args()
        model = {load}
        model.train()
"""


@pytest.mark.parametrize("load", ["load(args.model_name)", "load(name=args.model_name)"])
def test_a_command_line_default_names_the_checkpoint_a_helper_loads(load):
    """The script's defaults are what it runs as written: `--model-name` defaulting to a Llama
    checkpoint tells the architecture (a Llama's layers read `embed_tokens` alone, so the swapped,
    frozen table leaves them no input that requires grad: CKPT005). A default that names nothing,
    or an option the user must pass, says nothing about the architecture (GPT-2's layers also read
    the trainable position table)."""
    for option, expected in (
        ('default="meta-llama/Llama-2-7b-hf"', {(8, "CKPT005")}),
        ('dest="model_name", default="meta-llama/Llama-2-7b-hf"', {(8, "CKPT005")}),
        ("required=True", set()),
        ("default=None", set()),
        ('default="gpt2"', set()),
    ):
        assert findings(SWAPPED_EMBEDDINGS.format(option=option, load=load)) == expected, option


def test_command_line_options_handed_to_a_helper_keep_their_defaults():
    """`train(args)` reading `args.model_name`: the namespace the script parsed, with its defaults
    (an option group adds to it too)."""
    body = """
        import argparse
        from transformers import AutoModelForCausalLM


        def train(args):
            model = AutoModelForCausalLM.from_pretrained(args.model_name)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={{"use_reentrant": True}})
            model.set_input_embeddings(nn.Embedding.from_pretrained(torch.load("table.pt")))
            model.train()


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            group = parser.add_argument_group("model")
            group.add_argument("--model_name", default={default})
            train(parser.parse_known_args()[0])
    """
    assert findings(body.format(default='"meta-llama/Llama-3.2-1B"')) == {(8, "CKPT005")}
    assert findings(body.format(default='"openai-community/gpt2"')) == set()


def test_a_library_model_rebound_to_what_a_freezing_helper_returns_keeps_its_freeze():
    """`model = inject_lora(model)`: the helper freezes all but the adapters by name and hands back
    the same transformers model, so its embedding stays frozen (was a new object, nothing frozen).
    transformers 4.x hooks the inputs only for PEFT models: CKPT005 at the enable call."""
    body = """
        from transformers import AutoModelForCausalLM


        def inject_lora(model):
            for n, p in model.named_parameters():
                p.requires_grad = "lora_" in n
            return model


        def build(name="meta-llama/Llama-3.2-1B"):
            model = AutoModelForCausalLM.from_pretrained(name)
            model = inject_lora(model)
            model.gradient_checkpointing_enable()
            return model
    """
    assert findings(body, transformers="4.57") == {(14, "CKPT005")}
    assert findings(body, transformers="5.23") == set()  # 5.x hooks a token-id model's embedding output


def test_module_level_code_freezing_what_a_builder_returns_is_the_scripts_own():
    """A `__main__` block (module-level code, not a function named after the module) freezes the
    model a loader returns, then a helper enables reentrant checkpointing on it (4.x: no hook)."""
    body = """
        from transformers import AutoModelForCausalLM


        def load(name):
            return AutoModelForCausalLM.from_pretrained(name)


        def enable(model):
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})


        if __name__ == "__main__":
            m = load("meta-llama/Llama-3.2-1B")
            m.model.embed_tokens.requires_grad_(False)
            enable(m)
    """
    assert findings(body, transformers="4.57") == {(16, "CKPT005")}


@pytest.mark.parametrize(("loaded", "built"), [("name", 'Tuner("{}")'), ('"{}"', "Tuner(None)")])
def test_a_held_models_checkpoint_name_comes_from_its_init_or_its_constructions(loaded, built):
    """`self.model = AutoModelForCausalLM.from_pretrained(...)` frozen through
    `get_input_embeddings()` in another method: the name (a literal there, or the `__init__`
    parameter every construction fills) says which architecture, so whether its layers read
    anything else (GPT-2's position table)."""
    body = """
        from transformers import AutoModelForCausalLM


        class Tuner:
            def __init__(self, name):
                self.model = AutoModelForCausalLM.from_pretrained({loaded})
                self.freeze()
                self.model.gradient_checkpointing_enable()

            def freeze(self):
                self.model.get_input_embeddings().weight.requires_grad = False


        tuner = {built}
    """
    for checkpoint, expected in (("meta-llama/Llama-3.2-1B", {(9, "CKPT005")}), ("openai-community/gpt2", set())):
        source = body.format(loaded=loaded.format(checkpoint), built=built.format(checkpoint))
        assert findings(source, transformers="4.57") == expected, checkpoint


def test_a_freezing_helper_that_returns_the_model_in_a_tuple_hands_back_the_same_model():
    """`model, n = freeze_all_but_attention(model)`: the helper switches the whole model off with
    `model.requires_grad_(False)` (which returns the model itself), turns the attention blocks back
    on and returns `model, count`. The Trainer then enables reentrant checkpointing (4.x: no hook)."""
    body = """
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


        def freeze_all_but_attention(model):
            model.requires_grad_(False)
            count = 0
            for name, module in model.named_modules():
                if name.endswith("self_attn"):
                    module.requires_grad_(True)
                    count += sum(p.numel() for p in module.parameters())
            return model, count


        def main():
            model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
            model, trainable = freeze_all_but_attention(model)
            args = TrainingArguments("out", gradient_checkpointing=True)
            Trainer(model=model, args=args).train()
    """
    assert findings(body, transformers="4.57") == {(18, "CKPT005")}
    assert findings(body, transformers="5.23") == set()


@pytest.mark.parametrize(("preserve", "expected"), [("False", {(17, "CKPT002")}), ("True", set())])
def test_blocks_a_script_builds_and_hands_to_a_checkpointing_function(preserve, expected):
    """`run(nn.ModuleList([Block() ...]), x)`: the function checkpoints each block it is handed with
    the RNG state not replayed by default, and a helper each block calls draws noise (CKPT002). The
    container built in the script holds `Block`s: its elements are the regions."""
    body = f"""
        def noisy(x, scale):
            return x + scale * torch.randn_like(x)


        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                return noisy(F.gelu(self.fc(x)), 0.1)


        def run(blocks, x, preserve={preserve}):
            for block in blocks:
                x = checkpoint(block, x, use_reentrant=False, preserve_rng_state=preserve)
            return x


        if __name__ == "__main__":
            run(nn.ModuleList([Block() for _ in range(2)]), torch.randn(2, 8, requires_grad=True)).sum().backward()
    """
    assert findings(body) == expected


def test_a_projects_own_trainer_subclass_enables_checkpointing_like_the_trainer():
    """`class LoraTrainer(Trainer): ...` built with the TrainingArguments: its `train()` is the
    Trainer's, which switches checkpointing on from the arguments (4.x: reentrant, no hook for the
    PEFT-less frozen model)."""
    body = """
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


        class LoggingTrainer(Trainer):
            def log(self, logs, *args, **kwargs):
                super().log(logs, *args, **kwargs)


        def train(data):
            model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
            model.get_input_embeddings().requires_grad_(False)
            args = TrainingArguments(output_dir="out", gradient_checkpointing=True)
            LoggingTrainer(model=model, args=args, train_dataset=data).train()
    """
    assert findings(body, transformers="4.57") == {(13, "CKPT005")}
    assert findings(body.replace("gradient_checkpointing=True", 'gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False}'), transformers="4.57") == set()


@pytest.mark.parametrize("encode", [
    "@torch.no_grad()\n            def encode(self, img):\n                return self.vae(img) * 0.18",
    "def encode(self, img):\n                with torch.no_grad():\n                    return self.vae(img) * 0.18",
])
def test_a_method_that_computes_without_grad_returns_what_requires_no_grad(encode):
    """A latent-diffusion model encodes images with its VAE under no_grad in a method of its own:
    the latents it returns feed a reentrant checkpoint that gets no input requiring grad (CKPT001)."""
    body = f"""
        class LatentDiffusion(nn.Module):
            def __init__(self):
                super().__init__()
                self.vae = nn.Conv2d(3, 4, 4, 4)
                self.denoiser = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.SiLU())

            {encode}

            def forward(self, img):
                z = self.encode(img)
                return checkpoint(self.denoiser, z + torch.randn_like(z), use_reentrant=True)


        model = LatentDiffusion()
        model(torch.randn(2, 3, 8, 8)).sum().backward()
    """
    assert findings(body) == {(14, "CKPT001")}


def test_a_model_built_right_in_the_trainers_call_is_the_whole_model():
    """`Trainer(model=PatchNet(), args=...)`: the Trainer trains it on its dataset's batches, so its
    forward gets data; built inline, it is no part of anything (CKPT001 on the raw pixels)."""
    body = """
        from transformers import Trainer, TrainingArguments


        class PatchNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Conv2d(3, 8, 4, 4)
                self.head = nn.Linear(8, 2)

            def forward(self, pixel_values, labels=None):
                h = checkpoint(self.stem, pixel_values, use_reentrant=True)
                return self.head(h.mean((2, 3)))


        def main(data):
            Trainer(model=PatchNet(), args=TrainingArguments("out"), train_dataset=data).train()
    """
    assert findings(body) == {(12, "CKPT001")}


def test_what_a_method_does_to_the_model_it_builds_counts_like_a_functions():
    """A builder class whose method loads a model, freezes its embeddings and switches on reentrant
    checkpointing: the same facts as in a function (4.x: no input-grad hook, CKPT005 there); 5.x
    hooks a token-id model's embedding output itself."""
    body = """
        from transformers import AutoModelForCausalLM


        class Builder:
            def build(self):
                model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
                model.model.embed_tokens.requires_grad_(False)
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
                return model

            def build_hooked(self):
                model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
                model.model.embed_tokens.requires_grad_(False)
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
                model.enable_input_require_grads()
                return model
    """
    assert findings(body, transformers="4.57") == {(9, "CKPT005")}
    assert findings(body, transformers="5.23") == set()


def test_caching_spelled_for_a_model_held_on_self():
    """`self.model = from_pretrained(name, use_cache=True)` then checkpointing switched on for
    `self.model` in the same `__init__`: as for a local variable (CKPT004 at the keyword)."""
    body = """
        from transformers import AutoModelForCausalLM


        class Finetuner:
            def __init__(self, name="Qwen/Qwen2.5-0.5B"):
                self.model = AutoModelForCausalLM.from_pretrained(name, use_cache=True)
                self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    """
    assert findings(body) == {(7, "CKPT004")}
    assert findings(body.replace("use_cache=True", "use_cache=False")) == set()


@pytest.mark.parametrize("attach", ["block.set_memory(feats)", "block.memory = feats"])
def test_a_tensor_stashed_through_a_setter_method_reaches_the_reentrant_checkpoint(attach):
    """A cross-attention block reads `self.memory`, which its own `set_memory(memory)` stores: the
    caller's image features (which need grad) reach the reentrant checkpoint as an attribute, by
    the setter or directly (the setter's own store, whose value is its callers', hid both)."""
    body = f"""
        class CrossBlock(nn.Module):
            def __init__(self):
                super().__init__()
                self.q = nn.Linear(8, 8)
                self.memory = None

            def set_memory(self, memory):
                self.memory = memory

            def forward(self, x):
                return x + self.q(x) * self.memory


        class Captioner(nn.Module):
            def __init__(self):
                super().__init__()
                self.vision = nn.Linear(8, 8)
                self.blocks = nn.ModuleList([CrossBlock() for _ in range(2)])

            def attach(self, feats):
                for block in self.blocks:
                    {attach}

            def forward(self, pixels, h):
                self.attach(self.vision(pixels))
                for block in self.blocks:
                    h = checkpoint(block, h, use_reentrant=True)
                return h
    """
    assert findings(body) == {(28, "CKPT003")}


@pytest.mark.parametrize(("built", "expected"), [("build_model(grad_ckpt=True)", {(24, "CKPT008")}), ("build_model()", set())])
def test_a_builder_hands_its_arguments_to_the_constructor_it_calls(built, expected):
    """`teacher = build_model(grad_ckpt=True)` of `def build_model(grad_ckpt=False): return
    Mixer(grad_ckpt=grad_ckpt)`: the teacher is built with checkpointing on, so scoring it under
    no_grad in train mode runs its checkpoints for nothing (CKPT008); the default leaves them off."""
    body = f"""
        class Mixer(nn.Module):
            def __init__(self, grad_ckpt=False):
                super().__init__()
                self.grad_ckpt = grad_ckpt
                self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])

            def forward(self, x):
                for block in self.blocks:
                    if self.grad_ckpt and self.training:
                        x = checkpoint(block, x, use_reentrant=False)
                    else:
                        x = block(x)
                return x


        def build_model(grad_ckpt=False):
            return Mixer(grad_ckpt=grad_ckpt)


        def distill(student, x):
            teacher = {built}
            with torch.no_grad():
                target = teacher(x)
            return (student(x) - target).pow(2).mean()
    """
    assert findings(body) == expected


@pytest.mark.parametrize(
    ("builder", "built", "expected"),
    [
        # The call's keywords the builder does not name travel in its `**kwargs` to the constructor.
        ("return Mixer(**kwargs)", 'build_model("s", grad_ckpt=True)', {(24, "CKPT008")}),
        ("return Mixer(**{**SIZES[name], **kwargs})", 'build_model("s", grad_ckpt=True)', {(24, "CKPT008")}),
        ("return Mixer(**dict(SIZES[name], **kwargs))", 'build_model("s", grad_ckpt=True)', {(24, "CKPT008")}),
        ("return Mixer(depth=2, **kwargs)", 'build_model("s", grad_ckpt=True)', {(24, "CKPT008")}),
        # Not passed: the table may set it, so nothing is known; or the table's entries win.
        ("return Mixer(**{**SIZES[name], **kwargs})", 'build_model("s")', set()),
        ("return Mixer(**{**kwargs, **SIZES[name]})", 'build_model("s", grad_ckpt=True)', set()),
        ("return Mixer(**kwargs)", 'build_model("s", grad_ckpt=False)', set()),
    ],
)
def test_a_builder_forwards_its_keyword_arguments_to_the_constructor(builder, built, expected):
    """timm-style factories: `def build_model(name, **kwargs): return Mixer(**{**SIZES[name], **kwargs})`."""
    body = f"""
        class Mixer(nn.Module):
            def __init__(self, depth=2, grad_ckpt=False):
                super().__init__()
                self.grad_ckpt = grad_ckpt
                self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(depth)])

            def forward(self, x):
                for block in self.blocks:
                    if self.grad_ckpt and self.training:
                        x = checkpoint(block, x, use_reentrant=False)
                    else:
                        x = block(x)
                return x


        def build_model(name, **kwargs):
            {builder}


        def distill(student, x):
            teacher = {built}
            with torch.no_grad():
                target = teacher(x)
            return (student(x) - target).pow(2).mean()


        SIZES = {{"s": dict(depth=2), "b": dict(depth=4)}}
    """
    assert findings(body) == expected


@pytest.mark.parametrize(("flag", "expected"), [("requires_grad=False", {(12, "CKPT005")}), ("requires_grad=True", set())])
def test_an_embedding_weight_replaced_by_a_frozen_parameter_is_frozen(flag, expected):
    """`self.embed.weight = nn.Parameter(vectors, requires_grad=False)`: pretrained vectors kept
    fixed; the reentrant checkpoints behind the embedding get no input that requires grad."""
    body = f"""
        class TextCNN(nn.Module):
            def __init__(self, vectors):
                super().__init__()
                self.embed = nn.Embedding(100, 8)
                self.embed.weight = nn.Parameter(vectors, {flag})
                self.convs = nn.ModuleList([nn.Conv1d(8, 8, 3, padding=1) for _ in range(2)])

            def forward(self, ids):
                h = self.embed(ids).transpose(1, 2)
                for conv in self.convs:
                    h = checkpoint(conv, h, use_reentrant=True)
                return h


        model = TextCNN(torch.randn(100, 8))
    """
    assert findings(body) == expected


def test_checkpoint_options_stored_from_a_parameter_or_a_default_dict():
    """`self.ckpt_kwargs = ckpt_kwargs or {...}`: what each construction leaves it holding decides
    whether `use_reentrant` reaches the checkpoint (CKPT006 when it does not)."""
    body = """
        class Net(nn.Module):
            def __init__(self, ckpt_kwargs=None):
                super().__init__()
                self.ckpt_kwargs = ckpt_kwargs or {"preserve_rng_state": True}
                self.layer = nn.Linear(8, 8)
            def forward(self, x):
                return checkpoint(self.layer, x, **self.ckpt_kwargs)
        class ExplicitNet(nn.Module):
            def __init__(self, ckpt_kwargs=None):
                super().__init__()
                self.ckpt_kwargs = {"use_reentrant": False} if ckpt_kwargs is None else ckpt_kwargs
                self.layer = nn.Linear(8, 8)
            def forward(self, x):
                return checkpoint(self.layer, x, **self.ckpt_kwargs)
        class PassedNet(nn.Module):
            def __init__(self, ckpt_kwargs=None):
                super().__init__()
                self.ckpt_kwargs = ckpt_kwargs or {}
                self.layer = nn.Linear(8, 8)
            def forward(self, x):
                return checkpoint(self.layer, x, **self.ckpt_kwargs)
        Net()(torch.randn(2, 8))
        ExplicitNet()(torch.randn(2, 8))
        PassedNet({"use_reentrant": False})(torch.randn(2, 8))
        """
    report = lint_text(HEADER + textwrap.dedent(body))
    assert report.errors == []
    # Net keeps torch's reentrant default, with data as the input (CKPT001 too).
    assert {(f.line - HEADER.count("\n"), f.code) for f in report.findings} == {(8, "CKPT006"), (8, "CKPT001")}


# The closure factories of fixtures/crossfile/closure_factories.
FACTORY = (FIXTURES / "crossfile" / "closure_factories" / "factories.py").read_text()
LAYERS = """
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from {factories} import conditioned, create_custom_forward


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, memory=None):
        return self.fc(x) + (memory if memory is not None else 0)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.layers = nn.ModuleList([Layer() for _ in range(2)])

    def forward(self, src, h):
        memory = self.encoder(src)
        for layer in self.layers:
            h = checkpoint({closure}, h, use_reentrant=True)
        return h
"""


@pytest.mark.parametrize(
    "closure, expected",
    [
        # Keywords a factory binds through `**extra`, or positional arguments it closes over.
        ("create_custom_forward(layer, memory=memory)", True),
        ("conditioned(layer, memory)", True),
        # What the closure captures needs no grad.
        ("create_custom_forward(layer)", False),
        ("conditioned(layer, None)", False),
    ],
)
@pytest.mark.parametrize("factories", ["same file", "another file"])
def test_closure_factories_capture_what_their_calls_pass(project, closure, expected, factories):
    """`create_custom_forward(layer, memory=memory)` closes over the grad-carrying memory: under
    reentrant checkpointing it is not a checkpoint input (CKPT003), wherever the factory lives."""
    if factories == "same file":
        files = {"pkg/__init__.py": "", "pkg/model.py": LAYERS.replace("from {factories} import conditioned, create_custom_forward\n", FACTORY)}
    else:
        files = {"pkg/__init__.py": "", "pkg/factories.py": FACTORY, "pkg/model.py": LAYERS.replace("{factories}", "pkg.factories")}
    files["pkg/model.py"] = files["pkg/model.py"].replace("{closure}", closure)
    project({"pyproject.toml": '[project]\nname = "pkg"\n', **files})
    report = CliRunner().invoke(main, [".", "--format", "json", "--no-cache", "--select", "CKPT003"])
    assert [f["code"] for f in json.loads(report.stdout)["findings"]] == (["CKPT003"] if expected else [])


def test_a_model_script_code_builds_through_a_builder_is_a_whole_model(project):
    """`model = build_model(cfg)` in a training script, where `build_model` (in the model's package)
    returns `Net(...)`: Net is the whole model, its forward's inputs are data. The same builder
    called to make a part (`self.trunk = build_model(cfg)`) keeps it a part."""
    model = (
        "import torch.utils.checkpoint as cp\nfrom torch import nn\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self, use_ckpt=False):\n"
        "        super().__init__()\n"
        "        self.use_ckpt = use_ckpt\n"
        "        self.block = nn.Linear(4, 4)\n\n"
        "    def _run(self, block, x):\n"
        "        if self.use_ckpt:\n"
        "            return cp.checkpoint(block, x, use_reentrant=True)\n"
        "        return block(x)\n\n"
        "    def forward(self, images):\n"
        "        return self._run(self.block, images)\n\n\n"
        "def build_model(cfg):\n"
        "    return Net(use_ckpt=cfg.use_ckpt)\n"
    )
    train = (
        "import torch\n\nfrom models import build_model\n\n\n"
        "def main(cfg):\n"
        "    model = build_model(cfg)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    return model, opt\n"
    )
    root = project({"models/__init__.py": "from .net import Net, build_model\n", "models/net.py": model, "train.py": train})
    report = lint_folder(root)
    assert report.errors == []
    assert {(Path(f.path).name, f.line, f.code) for f in report.findings if f.code != "CKPT006"} == {("net.py", 17, "CKPT001")}
    wrapper = "from torch import nn\n\nfrom models import build_model\n\n\nclass Wrapper(nn.Module):\n    def __init__(self, cfg):\n        super().__init__()\n        self.trunk = build_model(cfg)\n\n    def forward(self, x):\n        return self.trunk(x)\n"
    root = project({"models/__init__.py": "from .net import Net, build_model\n", "models/net.py": model, "train.py": train, "wrapper.py": wrapper})
    assert {f.code for f in lint_folder(root).findings} <= {"CKPT006"}


def test_a_model_script_code_builds_through_a_registry_builder_is_a_whole_model(project):
    """`create_model(args.model)` returning `MODELS[name](**kwargs)` builds one of the registry's
    classes as the whole model (timm's `create_model` shape); a parameter that shadows the
    registry's name is no registry."""
    net = (
        "from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self, dim=4):\n"
        "        super().__init__()\n"
        "        self.stem = nn.Linear(dim, dim)\n\n"
        "    def forward(self, x):\n"
        "        return checkpoint(self.stem, x, use_reentrant=True)\n"
    )
    init = "from .net import Net\n\nMODELS = {{'net': Net}}\n\n\ndef create_model({params}, **kwargs):\n    return MODELS[name](**kwargs)\n"
    train = "from models import create_model\n\n\ndef main(args):\n    model = create_model(args.model, dim=4)\n    return model\n"
    for params, expected in (("name", {("net.py", 11, "CKPT001")}), ("name, MODELS=None", set())):
        root = project({"models/__init__.py": init.format(params=params), "models/net.py": net, "train.py": train})
        report = lint_folder(root)
        assert report.errors == []
        assert {(Path(f.path).name, f.line, f.code) for f in report.findings if f.code != "CKPT006"} == expected, params


def test_a_checkpoint_function_a_module_holds_as_an_attribute_is_a_checkpoint():
    """`self._ckpt = partial(checkpoint, use_reentrant=True)` (or the function itself) in `__init__`,
    called in `forward` or in a helper method (then each call of the helper is the site): a checkpoint
    with the partial's keywords."""
    body = """
        from torch.utils.checkpoint import checkpoint as ckpt

        class Net(nn.Module):
            def __init__(self, reentrant=True):
                super().__init__()
                self.stem = nn.Linear(4, 4)
                self.block = nn.Linear(4, 4)
                self._ckpt = functools.partial(ckpt, use_reentrant=True)
                self._plain = ckpt
                self._kept = functools.partial(ckpt, use_reentrant=False)

            def _run(self, fn, *args):
                return self._ckpt(fn, *args)

            def forward(self, x):
                h = self._run(self.stem, x)
                h = self._plain(self.block, x, use_reentrant=True)
                return self._kept(self.block, x) + h

        model = Net()
    """
    assert findings(body) == {(17, "CKPT001"), (18, "CKPT001")}


# A module that checkpoints its blocks in training once its flag is on.
GATED_ENCODER = """
class Encoder(nn.Module):
    def __init__(self, dim=4, use_checkpoint=False):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(dim, dim) for _ in range(2))
        self.use_checkpoint = use_checkpoint

    def forward(self, x):
        for blk in self.blocks:
            if self.use_checkpoint and self.training:
                x = checkpoint(blk, x, use_reentrant=False)
            else:
                x = blk(x)
        return x
"""


def _line_of(body: str, text: str) -> int:
    """The line of `text` in `body` as `findings` numbers them."""
    dedented = textwrap.dedent(body)
    return dedented[: dedented.index(text)].count("\n") + 1


def test_a_deep_copy_of_a_constructor_argument_holds_a_module_of_the_same_class():
    """`self.teacher = copy.deepcopy(student)` in `__init__`: the teacher is a model of the class
    handed in, with its flags and train mode, so calling it under `no_grad` runs its checkpoints
    for nothing (CKPT008); kept apart from the student, whose call records grad."""
    body = GATED_ENCODER + textwrap.dedent("""
        import copy

        class SelfDistill(nn.Module):
            def __init__(self, student):
                super().__init__()
                self.student = student
                self.teacher = copy.deepcopy(student)

            def loss(self, view):
                s = self.student(view)
                with torch.no_grad():
                    t = self.teacher(view)
                return (s - t).pow(2).mean()

        model = SelfDistill(Encoder(use_checkpoint=True))
        model.train()
        model.loss(torch.randn(2, 4)).backward()
    """)
    assert findings(body) == {(_line_of(body, "t = self.teacher(view)"), "CKPT008")}


SPREAD_CONFIG = GATED_ENCODER + textwrap.dedent("""
    CONFIG = {"encoder": {"dim": 4, "use_checkpoint": FLAG}, "lr": 0.1}
    ARGS = {"dim": 4, "use_checkpoint": FLAG}

    def main():
        model = BUILD
        model.train()
        with torch.no_grad():
            model(torch.randn(2, 4))

    if __name__ == "__main__":
        main()
""")


@pytest.mark.parametrize("build", ['Encoder(**CONFIG["encoder"])', "Encoder(**ARGS)", 'Encoder(**{**ARGS, "dim": 4})'])
@pytest.mark.parametrize("flag, expected", [("True", {23}), ("False", set())])
def test_a_construction_spreading_a_table_of_settings_passes_its_entries(build, flag, expected):
    """`Encoder(**CONFIG["encoder"])`, `Encoder(**ARGS)`: the entries of a module-level dict are the
    keywords the construction passes, so a flag the table switches on gates the checkpoint that runs
    under `no_grad` (CKPT008). (A `cfg` parameter defaulting to the table is not followed yet.)"""
    body = SPREAD_CONFIG.replace("BUILD", build).replace("FLAG", flag)
    assert {line for line, code in findings(body) if code == "CKPT008"} == expected


@pytest.mark.parametrize(
    "builder_tail, flagged",
    [
        ("    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})\n    return model\n", True),
        ("    if cfg.grad_ckpt:\n        model.gradient_checkpointing_enable()\n    return model\n", True),
        # Switched off again, or never on: the call under inference_mode checkpoints nothing.
        ("    model.gradient_checkpointing_enable()\n    model.gradient_checkpointing_disable()\n    return model\n", False),
        ("    return model\n", False),
    ],
)
def test_a_builder_that_switches_checkpointing_on_hands_back_a_checkpointed_model(builder_tail, flagged):
    """`model = build_model(cfg)` where the builder enables transformers checkpointing before it
    returns the model: evaluating it under `inference_mode` in train mode runs the checkpoints for nothing."""
    body = (
        "from transformers import GPT2Config, GPT2LMHeadModel\n\n"
        "def build_model(cfg):\n"
        "    model = GPT2LMHeadModel(GPT2Config(n_layer=2))\n"
        + builder_tail +
        "\n\ndef main(cfg):\n"
        "    model = build_model(cfg)\n"
        "    model.train()\n"
        "    with torch.inference_mode():\n"
        "        model(input_ids=torch.zeros(2, 4, dtype=torch.long))\n"
    )
    call_line = body[: body.index("        model(input_ids")].count("\n") + 1
    assert {line for line, code in findings(body) if code == "CKPT008"} == ({call_line} if flagged else set()), body


@pytest.mark.parametrize("mask", ["input_ids.eq(0)", "input_ids.ne(0).long()", "x.abs().argmax(-1)", "(x > 0)", "x.isnan()"])
def test_a_mask_computed_from_the_inputs_never_requires_grad(mask):
    """A boolean or integer tensor (`ids.eq(0)`, `.argmax()`, `x > 0`) handed to a reentrant
    checkpoint beside raw data does not make any input require grad (CKPT001)."""
    body = f"""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = nn.Linear(4, 4)

            def forward(self, x, input_ids):
                pad = {mask}
                return checkpoint(self.layer, x, pad, use_reentrant=True)

        model = Net()
    """
    assert findings(body) == {(9, "CKPT001")}


@pytest.mark.parametrize("kwargs", ['CFG["kw"]', 'cfg["kw"]', 'cfg.get("kw")', 'CFG.get("kw")', 'cfg.get("kw", {})'])
@pytest.mark.parametrize("preserve, flagged", [("False", True), ("True", False)])
def test_checkpointing_kwargs_looked_up_in_a_table_of_settings(kwargs, preserve, flagged):
    """`gradient_checkpointing_kwargs=cfg["kw"]` (or `.get("kw")`) of a module-level table, read
    directly or through a parameter that defaults to it: its `preserve_rng_state` is known (CKPT002
    on a model whose dropout draws)."""
    body = f"""
        from transformers import BertConfig, BertForSequenceClassification

        CFG = {{"kw": {{"use_reentrant": False, "preserve_rng_state": {preserve}}}, "lr": 0.1}}

        def main(cfg=CFG):
            model = BertForSequenceClassification(BertConfig(hidden_dropout_prob=0.1))
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={kwargs})

        if __name__ == "__main__":
            main()
    """
    assert {code for _, code in findings(body)} == ({"CKPT002"} if flagged else set())


@pytest.mark.parametrize("masker_class, call", [("Masker(nn.Module)", "forward"), ("Masker", "__call__")])
def test_a_part_built_for_some_layers_only_runs_in_their_regions(masker_class, call):
    """`Layer(d, masker if i == 1 else None)`: the layer that holds the masker calls it in its
    checkpointed forward (`if self.masker is not None:`), so the masker's draws from its own
    generator are inside that region (CKPT002); a plain object with `__call__` runs that."""
    body = f"""
        class {masker_class}:
            def __init__(self):
                super().__init__()
                self.gen = torch.Generator().manual_seed(0)

            def {call}(self, x):
                return x * (torch.rand(x.shape, generator=self.gen) > 0.1)

        class Layer(nn.Module):
            def __init__(self, masker=None):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.masker = masker

            def forward(self, x):
                if self.training and self.masker is not None:
                    x = self.masker(x)
                return self.fc(x)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                masker = Masker()
                self.layers = nn.ModuleList(Layer(masker if i == 1 else None) for i in range(3))

            def forward(self, x):
                for layer in self.layers:
                    x = checkpoint(layer, x, use_reentrant=False)
                return x

        model = Net()
    """
    assert findings(body) == {(8, "CKPT002")}


@pytest.mark.parametrize("stages", ["nn.ModuleList(nn.Linear(4, 4) for _ in range(2))", "nn.ModuleList(stage() for _ in range(2))"])
def test_a_closure_in_forward_reads_the_methods_self(stages):
    """`def run_stage(inp, i): out = self.stages[i](inp); pyramid.append(out)` checkpointed: the
    closure's `self` is the method's, so its output is a tensor that leaves the region through the
    list (CKPT007), also when each stage is a builder's `nn.Sequential` of layers with and without
    parameters."""
    body = f"""
        def stage():
            return nn.Sequential(nn.Linear(4, 4), nn.ReLU())

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stages = {stages}

            def forward(self, x):
                pyramid = []

                def run_stage(inp, i):
                    out = self.stages[i](inp)
                    pyramid.append(out)
                    return out

                for i in range(len(self.stages)):
                    x = checkpoint(run_stage, x, i, use_reentrant=True)
                return x, pyramid
    """
    assert findings(body) == {(15, "CKPT007")}


LATE_MODEL = """
    def freeze_by_module(model):
        model.wte.requires_grad_(False)
        return model

    def freeze_by_name(model):
        for name, p in model.named_parameters():
            if name.startswith(("wte.", "wpe.")):
                p.requires_grad = False
        return model

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(16, 4)
            self.wpe = nn.Embedding(8, 4)
            self.h = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for blk in self.h:
                x = checkpoint(blk, x, use_reentrant=True)
            return x

    class Runner(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = None

        def configure_model(self):
            BUILD

        def forward(self, idx):
            return self.model(idx)

    runner = Runner()
    runner.configure_model()
"""


@pytest.mark.parametrize(
    "build, expected",
    [
        ("self.model = freeze_by_name(GPT())", {(22, "CKPT005")}),
        ("self.model = GPT()\n            freeze_by_name(self.model)", {(22, "CKPT005")}),
        ("self.model = GPT()\n            freeze_by_module(self.model)", set()),  # `wpe` still trains: its output requires grad
        ("self.model = GPT()\n            self.model.wte.requires_grad_(False)\n            self.model.wpe.requires_grad_(False)", {(22, "CKPT005")}),
        ("self.model = GPT()", set()),
    ],
)
def test_a_model_built_and_frozen_outside_init_into_an_attribute(build, expected):
    """`self.model = None` in `__init__`, built in a setup method (Lightning's `configure_model`)
    and frozen there, directly, by a helper handed it, or by a helper that freezes by parameter
    name: the frozen embeddings feed the reentrant checkpoints (CKPT005)."""
    assert findings(LATE_MODEL.replace("BUILD", build)) == expected


@pytest.mark.parametrize("wrap", ["Wrapper(layer)", "wrap(layer)"])
def test_layers_wrapped_one_by_one_from_a_list_a_comprehension_built(wrap):
    """`layers = [Layer() for _ in range(n)]`, then `layers = [Wrapper(l) for l in layers]` (or a
    helper returning the wrapper, fairseq's `checkpoint_wrapper`): each wrapper checkpoints a Layer,
    whose draw from Python's `random` the recompute repeats differently (CKPT002)."""
    helper = "def wrap(module):\n            return Wrapper(module)\n" if wrap.startswith("wrap") else ""
    body = f"""
        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                if self.training and random.random() < 0.3:
                    return x
                return self.fc(x)

        class Wrapper(nn.Module):
            def __init__(self, module):
                super().__init__()
                self.module = module

            def forward(self, *args):
                return checkpoint(self.module, *args, use_reentrant=False)

        {helper}
        class Net(nn.Module):
            def __init__(self, checkpointing=True):
                super().__init__()
                layers = [Layer() for _ in range(2)]
                if checkpointing:
                    layers = [{wrap} for layer in layers]
                self.layers = nn.ModuleList(layers)

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x

        model = Net()
    """
    assert findings(body) == {(8, "CKPT002")}


@pytest.mark.parametrize("mode, expected", [("model.train()", {(14, "CKPT008")}), ("model.eval()", set())])
def test_a_model_handed_through_two_functions_to_a_no_grad_call(mode, expected):
    """`main` trains the model, `loss_of(model, x)` hands it to `reference(model, x)`, which runs it
    under `no_grad`: the train mode main hands it over in reaches the call two hand-offs away."""
    body = f"""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = nn.Linear(4, 4)

            def forward(self, x):
                if self.training:
                    return checkpoint(self.block, x, use_reentrant=False)
                return self.block(x)

        def reference(model, x):
            with torch.no_grad():
                return model(x)

        def loss_of(model, x):
            ref = reference(model, x)
            return (model(x) - ref).pow(2).mean()

        def main():
            model = Encoder()
            {mode}
            loss_of(model, torch.randn(2, 4)).backward()
    """
    assert findings(body) == expected


@pytest.mark.parametrize("reentrant, expected", [("True", {(11, "CKPT005")}), ("False", set())])
def test_training_arguments_a_builder_fills_from_a_config_object(reentrant, expected):
    """`make_args(rargs)` builds `TrainingArguments(..., gradient_checkpointing_kwargs={"use_reentrant":
    rargs.reentrant})` from a dataclass its caller defaults (`rargs or RunArgs()`): the field's
    default decides the mode the Trainer checkpoints the PEFT model in (CKPT005)."""
    body = f"""
        from dataclasses import dataclass
        from peft import LoraConfig, get_peft_model
        from transformers import Trainer, TrainingArguments, ViTConfig, ViTForImageClassification

        @dataclass
        class RunArgs:
            reentrant: bool = {reentrant}

        def make_args(rargs):
            return TrainingArguments(output_dir="out", gradient_checkpointing=True, gradient_checkpointing_kwargs={{"use_reentrant": rargs.reentrant}})

        def build(rargs=None):
            rargs = rargs or RunArgs()
            model = get_peft_model(ViTForImageClassification(ViTConfig()), LoraConfig(target_modules=["query"]))
            return Trainer(model=model, args=make_args(rargs))

        def main():
            build().train()
    """
    assert findings(body) == expected
