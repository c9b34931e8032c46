"""Models frozen with `requires_grad_(False)`, inline or by a helper that returns the model, then
switched to reentrant transformers checkpointing (CKPT005).

`module.requires_grad_(False)` returns the module itself: the variable still holds the model (it did
not become a tensor), and a helper that ends with `return model` hands back what it was given, so
`enable(freeze(model))` enables checkpointing on the frozen model. Measured in
tests/runtime/test_hf_frozen_helpers_runtime.py (fixtures/hf_frozen_helpers.py).
"""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner
from conftest import lint_text

from ckptlint.cli import main

PRELUDE = '''
from transformers import ViTConfig, ViTForImageClassification

REENTRANT = {"use_reentrant": True}


def vit_config():
    return ViTConfig(image_size=8, patch_size=4, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, num_labels=3)


def freeze(model):
    model.requires_grad_(False)
    return model


def freeze_embeddings(model):
    model.vit.embeddings.requires_grad_(False)
    return model


def enable_reentrant(model):
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})


def build():
    model = ViTForImageClassification(vit_config())
'''


def findings(body: str) -> set[tuple[int, str]]:
    """(line counted from the first line of `body`, code) of every CKPT005 finding."""
    report = lint_text(PRELUDE + textwrap.indent(textwrap.dedent(body), "    "))
    assert report.errors == []
    return {(f.line - PRELUDE.count("\n"), f.code) for f in report.findings if f.code == "CKPT005"}


@pytest.mark.parametrize(
    "body, expected",
    [
        # Frozen inline: the variable still holds the model.
        ("model.requires_grad_(False)\nmodel.gradient_checkpointing_enable(gradient_checkpointing_kwargs=REENTRANT)\n", {(2, "CKPT005")}),
        ("model.requires_grad_(False)\nenable_reentrant(model)\n", {(2, "CKPT005")}),
        # Frozen by a helper that returns the model it froze.
        ("enable_reentrant(freeze(model))\n", {(1, "CKPT005")}),
        ("model = freeze(model)\nenable_reentrant(model)\n", {(2, "CKPT005")}),
        # Correct: non-reentrant, or nothing frozen, or an input-grad hook.
        ("model.requires_grad_(False)\nmodel.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})\n", set()),
        ("model.requires_grad_(True)\nenable_reentrant(model)\n", set()),
        ("model = freeze(model)\nmodel.enable_input_require_grads()\nenable_reentrant(model)\n", set()),
    ],
)
def test_frozen_with_requires_grad_then_reentrant(body, expected):
    assert findings(body) == expected


def test_a_tensor_made_to_require_grad_still_counts_as_one():
    source = '''
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def step(block, x):
    x.requires_grad_()
    return checkpoint(block, x, use_reentrant=True)


step(nn.Linear(4, 4), torch.ones(2, 4))
'''
    assert {f.code for f in lint_text(source).findings} == set()


HELPERS = '''
def freeze(model):
    model.requires_grad_(False)
    return model


def enable_reentrant(model):
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
'''
TRAIN = '''
from transformers import ViTConfig, ViTForImageClassification

from .helpers import enable_reentrant, freeze


def build():
    model = ViTForImageClassification(ViTConfig(image_size=8, patch_size=4, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32))
    enable_reentrant(freeze(model))
    return model


def build_hooked():
    model = freeze(ViTForImageClassification(ViTConfig(image_size=8, patch_size=4, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)))
    model.enable_input_require_grads()
    enable_reentrant(model)
    return model
'''


@pytest.mark.parametrize("paths", [["."], ["pkg/train.py"]])
def test_helpers_imported_from_another_module_of_the_project(project, paths):
    project({"pyproject.toml": '[project]\nname = "pkg"\n', "pkg/__init__.py": "", "pkg/helpers.py": HELPERS, "pkg/train.py": TRAIN})
    result = CliRunner().invoke(main, [*paths, "--format", "json", "--no-cache", "--transformers-version", "5.23"])
    findings = json.loads(result.stdout)["findings"]
    assert {(f["path"], f["line"], f["code"]) for f in findings} == {("pkg/train.py", 9, "CKPT005")}
    # The freezing is written in the helper's file: the message says which file.
    assert "are frozen (pkg/helpers.py:" in findings[0]["message"], findings[0]["message"]


BUILDERS = '''
from transformers import Trainer, TrainingArguments, ViTConfig, ViTForImageClassification


def build_frozen():
    model = ViTForImageClassification(ViTConfig(image_size=8, patch_size=4, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32))
    model.vit.embeddings.requires_grad_(False)
    return model


def build_hooked():
    model = ViTForImageClassification(ViTConfig(image_size=8, patch_size=4, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32))
    model.vit.embeddings.requires_grad_(False)
    model.enable_input_require_grads()
    return model


def main():
{body}
'''


@pytest.mark.parametrize(
    "body, expected",
    [
        # The caller does nothing but use what the builder froze.
        ("model = build_frozen()\nmodel.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': True})\n", {(2, "CKPT005")}),
        ("model = build_frozen()\nargs = TrainingArguments('out', gradient_checkpointing=True)\nTrainer(model=model, args=args).train()\n", {(2, "CKPT005")}),
        ("args = TrainingArguments('out', gradient_checkpointing=True)\nTrainer(model=build_frozen(), args=args).train()\n", {(1, "CKPT005")}),
        # The builder hooked the embedding output; or checkpointing is not reentrant.
        ("args = TrainingArguments('out', gradient_checkpointing=True)\nTrainer(model=build_hooked(), args=args).train()\n", set()),
        ("model = build_hooked()\nmodel.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': True})\n", set()),
        ("model = build_frozen()\nmodel.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})\n", set()),
    ],
)
def test_a_builder_freezes_the_model_its_caller_only_trains(body, expected):
    source = BUILDERS.format(body=textwrap.indent(body, "    "))
    start = source.count("\n", 0, source.index("def main():")) + 1
    report = lint_text(source, transformers="4.57")
    assert report.errors == []
    assert {(f.line - start, f.code) for f in report.findings if f.code == "CKPT005"} == expected


SUBMODULE_BUILDERS = '''
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def frozen_table(n, d):
    table = nn.Embedding(n, d)
    {freeze}
    return table


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = frozen_table(100, 16)
        self.blocks = nn.ModuleList([nn.Linear(16, 16) for _ in range(2)])

    def forward(self, ids):
        h = self.embed(ids)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=True)
        return h


Tagger()(torch.zeros(2, 3, dtype=torch.long)).sum().backward()
'''


@pytest.mark.parametrize(
    "freeze, expected",
    [
        ("table.weight.requires_grad = False", {"CKPT005"}),
        ("table.requires_grad_(False)", {"CKPT005"}),
        ("table.weight = nn.Parameter(torch.randn(n, d), requires_grad=False)", {"CKPT005"}),
        # Correct: the table the builder returns trains.
        ("table.weight.requires_grad = True", set()),
        ("table.weight = nn.Parameter(torch.randn(n, d))", set()),
    ],
)
def test_a_submodule_its_builder_froze(freeze, expected):
    report = lint_text(SUBMODULE_BUILDERS.replace("{freeze}", freeze))
    assert report.errors == []
    assert {f.code for f in report.findings} == expected


@pytest.mark.parametrize(
    "builder, call, expected",
    [
        # `from_pretrained` freezes the table unless told not to: the default, the builder's own default, the caller's literal.
        ("    return nn.Embedding.from_pretrained(torch.randn(n, d))", "frozen_table(100, 16)", {"CKPT005"}),
        ("    table = nn.EmbeddingBag.from_pretrained(torch.randn(n, d), freeze=True)\n    return table", "frozen_table(100, 16)", {"CKPT005"}),
        ("    return nn.Embedding.from_pretrained(torch.randn(n, d), freeze=freeze)", "frozen_table(100, 16)", {"CKPT005"}),
        ("    return nn.Embedding.from_pretrained(torch.randn(n, d), freeze)", "frozen_table(100, 16, True)", {"CKPT005"}),
        # Correct: `freeze=False`, in the builder or passed by the caller; a flag nothing decides stays unknown.
        ("    return nn.Embedding.from_pretrained(torch.randn(n, d), freeze=False)", "frozen_table(100, 16)", set()),
        ("    return nn.Embedding.from_pretrained(torch.randn(n, d), freeze=freeze)", "frozen_table(100, 16, freeze=False)", set()),
        ("    return nn.Embedding.from_pretrained(torch.randn(n, d), freeze)", "frozen_table(100, 16, False)", set()),
        ("    return nn.Embedding.from_pretrained(torch.randn(n, d), freeze=freeze)", "frozen_table(100, 16, freeze=FLAGS.freeze)", set()),
    ],
)
def test_a_pretrained_table_its_builder_returns(builder, call, expected):
    source = SUBMODULE_BUILDERS.replace("    table = nn.Embedding(n, d)\n    {freeze}\n    return table", builder)
    source = source.replace("def frozen_table(n, d):", "def frozen_table(n, d, freeze=True):").replace("frozen_table(100, 16)", call)
    report = lint_text(source)
    assert report.errors == []
    assert {f.code for f in report.findings} == expected


FACTORY_CLASS = '''
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


class ModelFactory:
    def __init__(self, name):
        self.name = name

    def build(self):
        base = AutoModelForCausalLM.from_pretrained(self.name)
        {build}


def train(model):
    model.gradient_checkpointing_enable()


factory = ModelFactory("meta-llama/Llama-3.2-1B")
train(factory.build())
'''


@pytest.mark.parametrize(
    "build, expected",
    [
        # A factory's method wraps the model in PEFT; the caller enables (reentrant, 4.57) checkpointing after.
        ("return get_peft_model(base, LoraConfig(r=8, target_modules=['q_proj']))", True),
        ("model = get_peft_model(base, LoraConfig(r=8, target_modules=['q_proj']))\n        return model", True),
        # Correct: the method hooks the embedding output first.
        ("base.enable_input_require_grads()\n        return get_peft_model(base, LoraConfig(r=8, target_modules=['q_proj']))", False),
    ],
)
def test_a_factory_method_wraps_the_model_its_caller_checkpoints(build, expected):
    report = lint_text(FACTORY_CLASS.replace("{build}", build), transformers="4.57")
    assert report.errors == []
    lines = FACTORY_CLASS.replace("{build}", build).split("\n")
    enable = next(i for i, line in enumerate(lines, 1) if line.startswith("train("))  # the helper enables it there
    assert {(f.line, f.code) for f in report.findings if f.code == "CKPT005"} == ({(enable, "CKPT005")} if expected else set())


def test_the_caller_of_a_factory_method_hooks_the_inputs_first():
    source = FACTORY_CLASS.replace("{build}", "return get_peft_model(base, LoraConfig(r=8, target_modules=['q_proj']))").replace(
        "train(factory.build())", "model = factory.build()\nmodel.enable_input_require_grads()\ntrain(model)"
    )
    report = lint_text(source, transformers="4.57")
    assert report.errors == [] and [f.code for f in report.findings if f.code == "CKPT005"] == []
    unhooked = lint_text(source.replace("model.enable_input_require_grads()\n", ""), transformers="4.57")
    assert [f.code for f in unhooked.findings if f.code == "CKPT005"] == ["CKPT005"]


PATTERN_HELPER = '''
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

FROZEN = ["embed"]


def freeze_params(model, patterns):
    for name, param in model.named_parameters():
        {test}
            param.requires_grad = False
    return model


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.head = nn.Linear(8, 2)

    def forward(self, ids):
        h = self.embed(ids)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=True)
        return self.head(h)


model = Tagger()
freeze_params(model, {patterns})
'''


@pytest.mark.parametrize(
    "test, patterns, expected",
    [
        # The names the caller hands the helper select the embedding.
        ("if any(p in name for p in patterns):", '["embed"]', True),
        ("if any(p in name for p in patterns):", "FROZEN", True),
        ("if name.startswith(tuple(patterns)):", '("embed",)', True),
        ("if name.startswith(tuple(patterns)):", "patterns=('embed.',)", True),
        # Only the head, or names the analysis cannot see.
        ("if any(p in name for p in patterns):", '["head"]', False),
        ("if any(p in name for p in patterns):", "load_patterns()", False),
    ],
)
def test_a_helper_freezes_the_names_its_caller_hands_it(test, patterns, expected):
    source = PATTERN_HELPER.replace("{test}", test).replace("{patterns}", patterns)
    report = lint_text(source)
    assert report.errors == []
    assert [f.code for f in report.findings if f.code == "CKPT005"] == (["CKPT005"] if expected else [])


ARGUMENTS_MODULE = '''
from transformers import TrainingArguments


def make_training_args(output_dir, checkpointing=True):
    return TrainingArguments(output_dir=output_dir, gradient_checkpointing=checkpointing{kwargs})
'''
TRAINING_SCRIPT = '''
from transformers import Trainer, ViTConfig, ViTForImageClassification

from pkg.arguments import make_training_args


def main():
    model = ViTForImageClassification(ViTConfig(image_size=8, patch_size=4, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32))
    model.vit.embeddings.requires_grad_(False)
    Trainer(model=model, args={arguments}).train()
'''


@pytest.mark.parametrize(
    "kwargs, arguments, expected",
    [
        # TrainingArguments built by a helper of another module: its checkpointing reaches the Trainer.
        ("", 'make_training_args("out")', [("pkg/train.py", 10, "CKPT005")]),
        (', gradient_checkpointing_kwargs={"use_reentrant": True}', 'make_training_args("out")', [("pkg/train.py", 10, "CKPT005")]),
        # Off for this call, or non-reentrant.
        ("", 'make_training_args("out", checkpointing=False)', []),
        (', gradient_checkpointing_kwargs={"use_reentrant": False}', 'make_training_args("out")', []),
    ],
)
def test_training_arguments_built_in_another_module(project, kwargs, arguments, expected):
    project({
        "pyproject.toml": '[project]\nname = "pkg"\n', "pkg/__init__.py": "",
        "pkg/arguments.py": ARGUMENTS_MODULE.replace("{kwargs}", kwargs), "pkg/train.py": TRAINING_SCRIPT.replace("{arguments}", arguments),
    })  # fmt: skip
    result = CliRunner().invoke(main, [".", "--format", "json", "--no-cache", "--transformers-version", "4.57"])
    found = [(f["path"], f["line"], f["code"]) for f in json.loads(result.stdout)["findings"] if f["code"] == "CKPT005"]
    assert found == expected


HOOKED_FRONT_END = '''
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


def freeze_front_end(model):
    model.front.requires_grad_(False)


def outputs_require_grad(module):
    def _hook(mod, inputs, output):
        output.requires_grad_(True)

    return module.register_forward_hook(_hook)


class Spotter(nn.Module):
    def __init__(self):
        super().__init__()
        self.front = nn.Linear(4, 4)
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

    def forward(self, wav):
        h = self.front(wav)
        for layer in self.layers:
            h = checkpoint(layer, h, use_reentrant=True)
        return h


def build():
    model = Spotter()
    freeze_front_end(model)
{hook}    return model
'''


@pytest.mark.parametrize(
    "hook, expected",
    [
        ("", {26}),
        # A helper handed the frozen part registers a forward hook on it: its output may require grad.
        ("    outputs_require_grad(model.front)\n", set()),
        ("    model.front.register_forward_hook(lambda m, i, o: o.requires_grad_(True))\n", set()),
    ],
)
def test_a_hook_a_helper_registers_on_the_frozen_part_it_is_handed(hook, expected):
    report = lint_text(HOOKED_FRONT_END.format(hook=hook))
    assert report.errors == []
    assert {f.line for f in report.findings if f.code == "CKPT005"} == expected
