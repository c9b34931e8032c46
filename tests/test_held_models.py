"""Models held on `self` and reached through identity wrappers: the train/eval mode and checkpointing
facts behind CKPT004 (generate() in train mode) and CKPT008 (a train-mode forward under no_grad).

A class's other methods see what `__init__` left (a module it builds is in train mode, checkpointing
it switches on stays on) only while nothing else in the class or file can change that mode: no other
`.eval()` / `.train(...)`, no hand-off of the model or of `self`, no reassignment, and a holder that is
not itself a module (whose mode its own callers set). Measured in
tests/runtime/test_policy_trainers_runtime.py.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import lint_text

PRELUDE = '''
import copy

import torch
from accelerate import Accelerator
from torch import nn
from transformers import LlamaForCausalLM

ENABLE = {"use_reentrant": False}


class Trainer:
    def __init__(self, config, policy=None):
        self.accelerator = Accelerator()
        self.policy = LlamaForCausalLM(config)
        self.policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs=ENABLE)
'''


def findings(body: str, after: str = "", prelude: str = PRELUDE) -> set[tuple[int, str]]:
    """(line counted from the first line of `body`, code) of every CKPT004 / CKPT008 finding."""
    source = prelude + textwrap.indent(textwrap.dedent(body), "    ") + textwrap.dedent(after)
    report = lint_text(source)
    assert report.errors == []
    return {(f.line - prelude.count("\n"), f.code) for f in report.findings if f.code in ("CKPT004", "CKPT008")}


GENERATE = "def rollout(self, prompts):\n    return {}.generate(prompts, max_new_tokens=8)\n"
REFERENCE = "def score(self, ids):\n    with torch.no_grad():\n        return {}(ids).logits\n"


@pytest.mark.parametrize(
    "body, expected",
    [
        # Built in `__init__` (train mode), checkpointing switched on there.
        (GENERATE.format("self.policy"), {(2, "CKPT004")}),
        # Identity wrappers: accelerate's unwrap_model, DataParallel / DistributedDataParallel `.module`.
        ("def rollout(self, prompts):\n    policy = self.accelerator.unwrap_model(self.policy)\n    return policy.generate(prompts)\n", {(3, "CKPT004")}),
        (GENERATE.format("self.accelerator.unwrap_model(self.policy)"), {(2, "CKPT004")}),
        ("def rollout(self, prompts):\n    wrapped = nn.DataParallel(self.policy)\n    return wrapped.module.generate(prompts)\n", {(3, "CKPT004")}),
        (
            "def rollout(self, prompts):\n    wrapped = nn.parallel.DistributedDataParallel(self.policy)\n    return wrapped.module.generate(prompts)\n",
            {(3, "CKPT004")},
        ),
        # A deep copy keeps the mode and the checkpointing.
        ("def score(self, ids):\n    reference = copy.deepcopy(self.policy)\n    with torch.no_grad():\n        return reference(ids).logits\n", {(4, "CKPT008")}),
        (REFERENCE.format("self.policy"), {(3, "CKPT008")}),
        # Back in train mode in this method.
        ("def rollout(self, prompts):\n    self.policy.eval()\n    self.policy.train()\n    return self.policy.generate(prompts)\n", {(4, "CKPT004")}),
        # Correct: eval() first in this method (also through the wrapper, which is the same model).
        ("def rollout(self, prompts):\n    self.policy.eval()\n    return self.policy.generate(prompts)\n", set()),
        ("def rollout(self, prompts):\n    policy = self.accelerator.unwrap_model(self.policy)\n    policy.eval()\n    return self.policy.generate(prompts)\n", set()),
        ("def rollout(self, prompts):\n    wrapped = nn.DataParallel(self.policy)\n    wrapped.eval()\n    return self.policy.generate(prompts)\n", set()),
        ("def rollout(self, prompts):\n    self.policy.train(False)\n    return self.accelerator.unwrap_model(self.policy).generate(prompts)\n", set()),
        # `.module` of something not known to be a wrapper is a submodule, not the model.
        ("def rollout(self, prompts):\n    return self.policy.module.generate(prompts)\n", set()),
        # Another method may switch it to eval() first: the mode on entry is unknown.
        (GENERATE.format("self.policy") + "\ndef evaluate(self):\n    self.policy.eval()\n", set()),
        (GENERATE.format("self.policy") + "\ndef evaluate(self):\n    self.policy.train(mode=False)\n", set()),
        # A method that only calls train() leaves it as `__init__` did.
        (GENERATE.format("self.policy") + "\ndef fit(self):\n    self.policy.train()\n", {(2, "CKPT004")}),
        # Handed to other code (the model, a wrapper of it, or the trainer itself), or rebuilt elsewhere.
        (GENERATE.format("self.policy") + "\ndef prepare(self):\n    freeze(self.policy)\n", set()),
        (GENERATE.format("self.policy") + "\ndef prepare(self):\n    self.wrapped = nn.DataParallel(self.policy)\n    self.wrapped.eval()\n", set()),
        (GENERATE.format("self.policy") + "\ndef attach(self, callback):\n    callback.on_start(self)\n", set()),
        (GENERATE.format("self.policy") + "\ndef reload(self, path):\n    self.policy = LlamaForCausalLM.from_pretrained(path)\n", set()),
        # A context manager's result is not the model as far as the analysis knows (trl's
        # unwrap_model_for_generation switches checkpointing off while generating).
        ("def rollout(self, prompts):\n    with unwrap_model_for_generation(self.policy, self.accelerator) as policy:\n        return policy.generate(prompts)\n", set()),
    ],
)
def test_models_held_on_self(body, expected):
    assert findings(body) == expected


def test_mode_changes_on_the_attribute_elsewhere_in_the_file_make_it_unknown():
    after = "\n\ndef evaluate(trainer):\n    trainer.policy.eval()\n"
    assert findings(GENERATE.format("self.policy"), after) == set()


def test_a_module_holder_trains_and_evaluates_with_its_own_callers():
    prelude = PRELUDE.replace("class Trainer:", "class Trainer(nn.Module):").replace("def __init__(self, config, policy=None):\n", "def __init__(self, config, policy=None):\n        super().__init__()\n")
    assert findings(GENERATE.format("self.policy"), prelude=prelude) == set()


INIT = "self.policy = LlamaForCausalLM(config)\n        self.policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs=ENABLE)"
ENABLE_IT = "\n        self.policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs=ENABLE)"


@pytest.mark.parametrize(
    "init, expected",
    [
        (INIT, {(2, "CKPT004")}),
        ("policy = LlamaForCausalLM(config)\n        policy.gradient_checkpointing_enable()\n        self.policy = policy", {(2, "CKPT004")}),
        ("self.policy = AutoModelForCausalLM.from_config(config)" + ENABLE_IT, {(2, "CKPT004")}),
        # Checkpointing off again, or never on: train mode only changes dropout.
        (INIT + "\n        self.policy.gradient_checkpointing_disable()", set()),
        ("self.policy = LlamaForCausalLM(config)", set()),
        # from_pretrained returns the model in eval mode.
        ("self.policy = LlamaForCausalLM.from_pretrained('gpt2')" + ENABLE_IT, set()),
        (INIT + "\n        self.policy.eval()", set()),
        # A handed-in model: its mode comes from the callers, not known here.
        ("self.policy = policy" + ENABLE_IT, set()),
        # Handed to a Trainer that may switch its mode later.
        (INIT + "\n        self.trainer = make_trainer(self.policy)", set()),
    ],
)
def test_what_init_leaves(init, expected):
    prelude = PRELUDE.replace(INIT, init).replace("from transformers import", "from transformers import AutoModelForCausalLM,")
    assert findings(GENERATE.format("self.policy"), prelude=prelude) == expected


HANDED = '''
import copy

import torch
from transformers import LlamaForCausalLM

ENABLE = {"use_reentrant": False}


class Scorer:
    def __init__(self, reference):
        self.reference = reference

    def score(self, ids):
        with torch.no_grad():
            return self.reference(ids).logits


def build(config):
    policy = LlamaForCausalLM(config)
    policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs=ENABLE)
    return Scorer(ARGUMENT)
'''


@pytest.mark.parametrize(
    "argument, expected",
    [
        ("copy.deepcopy(policy)", {16}),
        ("policy", {16}),
        ("reference=copy.deepcopy(policy)", {16}),
        # Correct: switched to eval() before it is handed over.
        ("copy.deepcopy(policy).eval()", set()),
        # Correct: nothing shows the mode of what it gets.
        ("LlamaForCausalLM.from_pretrained('gpt2')", set()),
    ],
)
def test_a_model_handed_to_the_constructor_carries_the_callers_state(argument, expected):
    report = lint_text(HANDED.replace("ARGUMENT", argument))
    assert report.errors == []
    assert {f.line for f in report.findings if f.code == "CKPT008"} == expected


def test_the_message_names_the_attribute():
    source = PRELUDE + textwrap.indent(GENERATE.format("self.accelerator.unwrap_model(self.policy)"), "    ")
    [finding] = [f for f in lint_text(source).findings if f.code == "CKPT004"]
    assert "`self.policy` is in train() mode with gradient checkpointing on" in finding.message
