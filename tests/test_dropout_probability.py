"""CKPT002 resolves a dropout module's probability before counting it as a draw under
`preserve_rng_state=False`: from a project config object handed down the module tree
(`nn.Dropout(config.dropout)` in blocks built from `GPTConfig(dropout=0.0)`), and from the
`__init__` parameters of the model every known construction passes (`Net(dropout=0.0)`). Visibly
zero is silent (p=0 draws nothing: tests/runtime/test_ckpt002_runtime.py); visibly non-zero, or a
probability the analysis cannot see, is a draw, as before."""

from __future__ import annotations

import textwrap

import pytest
from conftest import lint_text

CONFIG_MODEL = '''\
from dataclasses import dataclass

import torch.nn as nn
from torch.utils.checkpoint import checkpoint


@dataclass
class GPTConfig:
    dim: int = 8
    dropout: float = {default}


class PlainConfig:
    def __init__(self, dim=8, dropout={default}):
        self.dim = dim
        self.dropout = dropout


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.fc = nn.Linear(config.dim, config.dim)
        self.drop = nn.Dropout({spelled})

    def forward(self, x):
        return self.drop(self.fc(x))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.mlp = MLP(config)

    def forward(self, x):
        return x + self.mlp(x)


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.stem = nn.Linear(config.dim, config.dim)
        self.blocks = nn.ModuleList([Block(config) for _ in range(2)])

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=False, preserve_rng_state=False)  # the site
        return h


def train(args):
{build}
'''


def ckpt002(build: str, default: str = "0.1", spelled: str = "config.dropout") -> bool:
    source = CONFIG_MODEL.format(default=default, spelled=spelled, build=textwrap.indent(build, "    "))
    report = lint_text(source)
    assert report.errors == []
    site = next(n for n, line in enumerate(source.splitlines(), 1) if line.endswith("# the site"))
    found = {f.line for f in report.findings if f.code == "CKPT002"}
    assert found <= {site}
    return bool(found)


ZERO = {
    "keyword at construction": ("model = GPT(GPTConfig(dropout=0.0))", "0.1"),
    "dataclass default": ("model = GPT(GPTConfig())", "0.0"),
    "config bound to a name": ("config = GPTConfig(dim=8, dropout=0)\nmodel = GPT(config)", "0.1"),
    "assigned after construction": ("config = GPTConfig()\nconfig.dropout = 0.0\nmodel = GPT(config)", "0.1"),
    "plain class default": ("model = GPT(PlainConfig())", "0.0"),
    "plain class keyword": ("model = GPT(PlainConfig(dropout=0.0))", "0.1"),
    "plain class positional": ("model = GPT(PlainConfig(8, 0.0))", "0.1"),
    "every construction agrees": ("model = GPT(GPTConfig(dropout=0.0))\nother = GPT(GPTConfig(dropout=0.0))", "0.1"),
}

DRAWS = {
    "dataclass default": ("model = GPT(GPTConfig())", "0.1"),
    "keyword at construction": ("model = GPT(GPTConfig(dropout=0.2))", "0.0"),
    "assigned after construction": ("config = GPTConfig(dropout=0.0)\nconfig.dropout = 0.2\nmodel = GPT(config)", "0.0"),
    # Unknown: still a draw, as before.
    "assigned on one branch": ("config = GPTConfig()\nif args.eval:\n    config.dropout = 0.2\nmodel = GPT(config)", "0.0"),
    "a value from elsewhere": ("model = GPT(GPTConfig(dropout=args.dropout))", "0.0"),
    "positional dataclass fields": ("model = GPT(GPTConfig(8, 0.0))", "0.1"),
    "constructions disagree": ("model = GPT(GPTConfig(dropout=0.0))\nother = GPT(GPTConfig(dropout=0.1))", "0.0"),
    # Constructions spelled differently are not compared field by field: unknown.
    "constructions spelled differently": ("model = GPT(GPTConfig(dropout=0.0))\nother = GPT(GPTConfig(dim=8, dropout=0.0))", "0.1"),
    "a config from a helper": ("model = GPT(load_config(args))", "0.0"),
    "spread keywords": ("model = GPT(GPTConfig(**args.overrides))", "0.0"),
}


@pytest.mark.parametrize("build, default", ZERO.values(), ids=ZERO.keys())
@pytest.mark.parametrize("spelled", ["config.dropout", "p=config.dropout"])
def test_dropout_visibly_zero_through_a_config_draws_nothing(build, default, spelled):
    assert not ckpt002(build, default, spelled)


@pytest.mark.parametrize("build, default", DRAWS.values(), ids=DRAWS.keys())
def test_dropout_non_zero_or_unknown_through_a_config_is_a_draw(build, default):
    assert ckpt002(build, default)


def test_a_config_class_with_post_init_is_unknown():
    source_build = "model = GPT(GPTConfig(dropout=0.0))"
    assert not ckpt002(source_build)
    with_post_init = CONFIG_MODEL.replace("    dropout: float = {default}\n", "    dropout: float = {default}\n\n    def __post_init__(self):\n        self.dropout = 0.3\n")
    source = with_post_init.format(default="0.0", spelled="config.dropout", build="    " + source_build)
    assert [f.code for f in lint_text(source).findings] == ["CKPT002"]


PARAM_MODEL = '''\
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim, dropout):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.fc(x))


class Net(nn.Module):
    def __init__(self, dim=8, dropout=0.1):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim, dropout) for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False, preserve_rng_state=False)
        return x


{build}
'''


@pytest.mark.parametrize(
    "build, draws",
    [
        ("model = Net(dropout=0.0)", False),
        ("model = Net(8, 0.0)", False),
        ("def main():\n    return Net(16, dropout=0)", False),
        ("model = Net()", True),  # the default 0.1
        ("model = Net(dropout=0.0)\nother = Net()", True),  # the constructions disagree
        ("", True),  # no construction visible: unknown, a draw
    ],
)
def test_dropout_from_the_models_init_parameters(build, draws):
    report = lint_text(PARAM_MODEL.format(build=build))
    assert report.errors == []
    assert [f.code for f in report.findings] == (["CKPT002"] if draws else [])


def test_only_the_init_that_runs_maps_parameters_to_config_attributes():
    """A subclass's own `__init__` decides what reaches the base's `self.dropout = dropout`."""
    configs = '''

class BaseConfig:
    def __init__(self, dim=8, dropout=0.0):
        self.dim = dim
        self.dropout = dropout


class NoisyConfig(BaseConfig):
    def __init__(self, dropout=0.0):
        super().__init__(dropout=0.2)
'''
    zero = CONFIG_MODEL.format(default="0.1", spelled="config.dropout", build="    model = GPT(BaseConfig())") + configs
    assert [f.code for f in lint_text(zero).findings] == []
    noisy = CONFIG_MODEL.format(default="0.1", spelled="config.dropout", build="    model = GPT(NoisyConfig())") + configs
    assert [f.code for f in lint_text(noisy).findings] == ["CKPT002"]
