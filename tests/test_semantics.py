"""Dataflow decisions behind the semantic rules, one small program each.

Each case lists exactly the (line, code) findings expected (CKPT006 excluded: every case passes
use_reentrant explicitly or is about it), so both misses and false positives fail.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import lint_text

HEADER = "import functools\nimport random\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch.utils.checkpoint import checkpoint\n"


def findings(body: str, transformers: str = "5.23") -> set[tuple[int, str]]:
    report = lint_text(HEADER + textwrap.dedent(body), transformers=transformers)
    assert report.errors == []
    offset = HEADER.count("\n")
    return {(f.line - offset, f.code) for f in report.findings if f.code != "CKPT006"}


CASES = {
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
            def forward(self, x):
                h = self.block(x)
                scores, mask = self.router(h)
                return checkpoint(functools.partial(self.block, mask=mask), h, use_reentrant=True)
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
        """,
        {(9, "CKPT007")},
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
