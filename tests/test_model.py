"""The semantic model: every spelling of a checkpoint site, its callee and its effective mode."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from ckptlint.config import Settings, WrapperSpec
from ckptlint.index import ProjectIndex, summarize
from ckptlint.model import ApiKind, FlagStatus, build_file_model
from ckptlint.model.values import ModuleObject, Partial
from ckptlint.names import module_name_for
from ckptlint.versions import resolve_versions


def build(project_files: dict[str, str], tmp_path: Path, target: str, settings: Settings = Settings(), transformers: str = "5.23"):
    summaries = {}
    for name, text in project_files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        module, is_package = module_name_for(path)
        summaries[name] = summarize(text, str(path), module, is_package)
    index = ProjectIndex({s.name: s for s in summaries.values()})
    versions = resolve_versions(settings, None, "2.13", transformers)
    tree = cst.parse_module(project_files[target])
    return build_file_model(tree, str(tmp_path / target), summaries[target], index, versions, settings)


def sites_of(source: str, tmp_path: Path, **kwargs):
    return build({"mod.py": source}, tmp_path, "mod.py", **kwargs).sites


@pytest.mark.parametrize(
    "imports, call",
    [
        ("import torch", "torch.utils.checkpoint.checkpoint(f, x)"),
        ("import torch.utils.checkpoint", "torch.utils.checkpoint.checkpoint(f, x)"),
        ("import torch.utils.checkpoint as cp", "cp.checkpoint(f, x)"),
        ("from torch.utils.checkpoint import checkpoint as ckpt", "ckpt(f, x)"),
        ("from torch.utils import checkpoint", "checkpoint.checkpoint(f, x)"),
        ("from torch.utils import checkpoint as ck", "ck.checkpoint(f, x)"),
    ],
)
def test_import_aliases_resolve_to_torch_checkpoint(tmp_path, imports, call):
    (site,) = sites_of(f"{imports}\n\ndef step(f, x):\n    return {call}\n", tmp_path)
    assert site.kind is ApiKind.CHECKPOINT
    assert site.api_name == "torch.utils.checkpoint.checkpoint"
    assert site.mode.flag is FlagStatus.ABSENT and site.mode.reentrant is True
    assert site.mode.assumed is not None and site.mode.assumed.text == "2.13"


def test_unrelated_checkpoint_names_are_not_sites(tmp_path):
    source = (
        "from mylib import checkpoint\n"
        "import deepspeed\n\n"
        "def save(model, checkpoint_dir):\n"
        "    checkpoint(model, checkpoint_dir)\n"
        "    model.save_checkpoint(checkpoint_dir)\n"
    )
    assert sites_of(source, tmp_path) == []


def test_partial_bound_flag_and_rng_state(tmp_path):
    source = (
        "import functools\nfrom torch.utils.checkpoint import checkpoint\n\n"
        "ckpt = functools.partial(checkpoint, use_reentrant=False)\n\n"
        "def step(block, x):\n"
        "    local = functools.partial(checkpoint, use_reentrant=True, preserve_rng_state=False)\n"
        "    a = ckpt(block, x)\n"
        "    return local(block, a)\n"
    )
    module_level, local = sites_of(source, tmp_path)
    assert (module_level.mode.reentrant, module_level.mode.flag) == (False, FlagStatus.BOUND)
    assert (local.mode.reentrant, local.mode.flag) == (True, FlagStatus.BOUND)
    assert local.preserve_rng_state is False and module_level.preserve_rng_state is True


def test_kwargs_dicts_resolved_or_left_unknown(tmp_path):
    source = (
        "from torch.utils.checkpoint import checkpoint\n\n"
        "KW = {'use_reentrant': False}\n\n"
        "def a(f, x):\n    return checkpoint(f, x, **KW)\n\n"
        "def b(f, x, **kwargs):\n    return checkpoint(f, x, **kwargs)\n\n"
        "def c(f, x, ok):\n    kw = {'use_reentrant': False} if ok else {}\n    return checkpoint(f, x, **kw)\n\n"
        "def d(f, x):\n    kw = dict(preserve_rng_state=False)\n    return checkpoint(f, x, **kw)\n"
    )
    a, b, c, d = sites_of(source, tmp_path)
    assert (a.mode.reentrant, a.mode.flag) == (False, FlagStatus.IN_KWARGS)
    assert (b.mode.reentrant, b.mode.flag) == (None, FlagStatus.MAYBE)
    assert (c.mode.reentrant, c.mode.flag) == (None, FlagStatus.MAYBE)
    assert (d.mode.reentrant, d.mode.flag) == (True, FlagStatus.ABSENT)
    assert d.preserve_rng_state is False


def test_flag_from_variable_and_attribute(tmp_path):
    source = (
        "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.reentrant = False\n        self.block = nn.Linear(2, 2)\n\n"
        "    def forward(self, x, flag):\n"
        "        mode = True\n"
        "        x = checkpoint(self.block, x, use_reentrant=mode)\n"
        "        x = checkpoint(self.block, x, use_reentrant=self.reentrant)\n"
        "        return checkpoint(self.block, x, use_reentrant=flag)\n"
    )
    local, attribute, parameter = sites_of(source, tmp_path)
    assert local.mode.reentrant is True
    assert attribute.mode.reentrant is False
    assert parameter.mode.reentrant is None and parameter.mode.flag is FlagStatus.EXPLICIT
    assert isinstance(local.function, ModuleObject) and local.function.classes == ("torch.nn.Linear",)


def test_callee_resolution_sequential_modulelist_loops_lambda_and_partial(tmp_path):
    source = (
        "import functools\nimport torch.nn as nn\nimport torch.utils.checkpoint as cp\n\n"
        "class Block(nn.Module):\n    pass\n\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.seq = nn.Sequential(nn.Conv2d(3, 3, 3), nn.Dropout(0.1))\n"
        "        layers = []\n        for _ in range(3):\n            layers.append(Block())\n"
        "        self.layers = nn.ModuleList(layers)\n\n"
        "    def forward(self, x, mask):\n"
        "        x = cp.checkpoint(self.seq, x, use_reentrant=False)\n"
        "        for i, layer in enumerate(self.layers):\n"
        "            x = cp.checkpoint(layer, x, use_reentrant=False)\n"
        "        x = cp.checkpoint(lambda t: self.seq(t), x, use_reentrant=False)\n"
        "        return cp.checkpoint(functools.partial(self.layers[0], mask=mask), x, use_reentrant=False)\n"
    )
    seq, loop, lam, part = sites_of(source, tmp_path)
    assert seq.function == ModuleObject(("torch.nn.Conv2d", "torch.nn.Dropout"), "self.seq", "torch.nn.Sequential")
    assert isinstance(loop.function, ModuleObject) and loop.function.classes == ("mod.Block",)
    assert type(lam.function).__name__ == "Lambda"
    assert isinstance(part.function, Partial) and set(part.function.keywords) == {"mask"}
    assert [cst.Module(body=[]).code_for_node(a.value) for a in part.inputs] == ["x"]


def test_cross_file_module_class_resolves_through_package_reexport(tmp_path):
    files = {
        "pkg/__init__.py": "from .blocks import Block\n",
        "pkg/blocks.py": "import torch.nn as nn\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.drop = nn.Dropout(0.1)\n",
        "pkg/model.py": (
            "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\nfrom . import Block\n\n"
            "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.block = Block()\n\n"
            "    def forward(self, x):\n        return checkpoint(self.block, x, use_reentrant=False)\n"
        ),
    }
    model = build(files, tmp_path, "pkg/model.py")
    (site,) = model.sites
    assert site.function == ModuleObject(("pkg.blocks.Block",), "self.block")
    assert model.index.attribute("pkg.blocks.Block", "drop").constructors == ("torch.nn.Dropout",)


def test_cross_file_checkpoint_reexport_and_partial_alias(tmp_path):
    files = {
        "tools/__init__.py": "",
        "tools/ckpt.py": (
            "import functools\nfrom torch.utils.checkpoint import checkpoint\n"
            "safe_checkpoint = functools.partial(checkpoint, use_reentrant=False)\n"
        ),
        "train.py": "from tools.ckpt import checkpoint, safe_checkpoint\n\ndef f(b, x):\n    checkpoint(b, x)\n    safe_checkpoint(b, x)\n",
    }
    plain, safe = build(files, tmp_path, "train.py").sites
    assert plain.api_name == safe.api_name == "torch.utils.checkpoint.checkpoint"
    assert plain.mode.flag is FlagStatus.ABSENT
    assert (safe.mode.reentrant, safe.mode.flag) == (False, FlagStatus.BOUND)


def test_deepspeed_distributed_and_timm_wrappers(tmp_path):
    source = (
        "import deepspeed\nfrom functools import partial\n"
        "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (\n"
        "    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)\n"
        "from timm.models import checkpoint_seq\n\n"
        "def wrap(model, block, x, layers):\n"
        "    deepspeed.checkpointing.checkpoint(block, x)\n"
        "    checkpoint_wrapper(block)\n"
        "    checkpoint_wrapper(block, checkpoint_impl=CheckpointImpl.REENTRANT)\n"
        "    apply_activation_checkpointing(model, checkpoint_wrapper_fn=partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT))\n"
        "    apply_activation_checkpointing(model)\n"
        "    checkpoint_seq(layers, x)\n"
    )
    ds, wrapper_default, wrapper_reentrant, apply_reentrant, apply_default, timm = sites_of(source, tmp_path)
    assert (ds.mode.reentrant, ds.mode.flag) == (True, FlagStatus.FIXED)
    assert wrapper_default.mode.reentrant is False and wrapper_reentrant.mode.reentrant is True
    assert apply_reentrant.mode.reentrant is True and apply_default.mode.reentrant is False
    assert timm.kind is ApiKind.SEQUENTIAL and timm.mode.reentrant is False and timm.mode.flag is FlagStatus.FIXED


def test_project_wrapper_from_settings(tmp_path):
    settings = Settings(checkpoint_functions=(("mypkg.utils.ckpt", WrapperSpec(reentrant=True)),))
    source = "from mypkg.utils import ckpt\n\ndef f(b, x):\n    return ckpt(b, x)\n"
    (site,) = sites_of(source, tmp_path, settings=settings)
    assert site.kind is ApiKind.PROJECT_WRAPPER and site.mode.reentrant is True


@pytest.mark.parametrize(
    "kwargs, transformers, reentrant, flag",
    [
        ("", "5.23", False, FlagStatus.FIXED),
        ("gradient_checkpointing_kwargs=None", "5.23", False, FlagStatus.FIXED),
        ("", "4.57", True, FlagStatus.FIXED),
        ("gradient_checkpointing_kwargs={}", "5.23", True, FlagStatus.ABSENT),
        ("gradient_checkpointing_kwargs={'preserve_rng_state': True}", "5.23", True, FlagStatus.ABSENT),
        ("gradient_checkpointing_kwargs={'use_reentrant': True}", "5.23", True, FlagStatus.IN_KWARGS),
        ("gradient_checkpointing_kwargs=cfg.kwargs", "5.23", None, FlagStatus.MAYBE),
        ("{'use_reentrant': False}", "4.57", False, FlagStatus.IN_KWARGS),
    ],
)
def test_transformers_enable_modes(tmp_path, kwargs, transformers, reentrant, flag):
    source = f"def enable(model, cfg):\n    model.gradient_checkpointing_enable({kwargs})\n"
    (site,) = sites_of(source, tmp_path, transformers=transformers)
    assert site.kind is ApiKind.HF_ENABLE
    assert (site.mode.reentrant, site.mode.flag) == (reentrant, flag)


@pytest.mark.parametrize("transformers, flag", [("5.23", FlagStatus.FIXED), ("4.57", FlagStatus.ABSENT)])
def test_training_arguments_empty_dict_depends_on_version(tmp_path, transformers, flag):
    source = (
        "from transformers import TrainingArguments\n\n"
        "args = TrainingArguments('out', gradient_checkpointing=True, gradient_checkpointing_kwargs={})\n"
        "off = TrainingArguments('out', gradient_checkpointing=False, gradient_checkpointing_kwargs={})\n"
    )
    (site,) = sites_of(source, tmp_path, transformers=transformers)
    assert site.kind is ApiKind.HF_TRAINING_ARGS and site.mode.flag is flag


def test_transformers_layer_and_checkpointing_func_sites(tmp_path):
    source = (
        "from torch import nn\nfrom transformers.modeling_layers import GradientCheckpointingLayer\n\n"
        "class Layer(GradientCheckpointingLayer):\n    pass\n\n"
        "class Decoder(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.layers = nn.ModuleList([Layer() for _ in range(2)])\n\n"
        "    def forward(self, h, enc):\n"
        "        for layer in self.layers:\n"
        "            h = layer(h, encoder_hidden_states=enc)\n"
        "        return self._gradient_checkpointing_func(self.layers[0].__call__, h)\n"
    )
    layer, func = sites_of(source, tmp_path)
    assert layer.kind is ApiKind.HF_LAYER_CALL and [a.keyword.value for a in layer.keywords] == ["encoder_hidden_states"]
    assert func.kind is ApiKind.HF_FUNC and func.mode.reentrant is False


def test_grad_contexts(tmp_path):
    source = (
        "import torch\nimport torch.utils.checkpoint as cp\nfrom lightning.pytorch import LightningModule\n\n"
        "class Lit(LightningModule):\n"
        "    def validation_step(self, batch, i):\n        return cp.checkpoint(self.net, batch, use_reentrant=False)\n\n"
        "    def training_step(self, batch, i):\n        return cp.checkpoint(self.net, batch, use_reentrant=False)\n\n"
        "def f(b, x):\n"
        "    with torch.no_grad():\n"
        "        cp.checkpoint(b, x, use_reentrant=False)\n"
        "        with torch.enable_grad():\n            cp.checkpoint(b, x, use_reentrant=False)\n"
        "        g = lambda t: cp.checkpoint(b, t, use_reentrant=False)\n"
    )
    validation, training, in_no_grad, re_enabled, in_lambda = sites_of(source, tmp_path)
    assert validation.grad_disabled is not None and "validation_step" in validation.grad_disabled.kind
    assert training.grad_disabled is None
    assert in_no_grad.grad_disabled is not None and in_no_grad.grad_disabled.kind == "torch.no_grad()"
    assert re_enabled.grad_disabled is None and in_lambda.grad_disabled is None


def test_shadowed_name_is_not_a_site(tmp_path):
    source = (
        "from torch.utils.checkpoint import checkpoint\n\n"
        "def f(block, x):\n    checkpoint = lambda fn, *a: fn(*a)\n    return checkpoint(block, x)\n"
    )
    assert sites_of(source, tmp_path) == []


def test_reexport_cycle_that_grows_a_name_terminates():
    from ckptlint.index import ProjectIndex, summarize

    # `a` re-exports `b` from itself under a longer path: each hop appends a segment.
    a = summarize("from a.b import b\n", "a/__init__.py", "a", True)
    index = ProjectIndex({"a": a})
    assert index.canonical("a.b.x") == "a.b.x"
