"""CKPT008 where autograd is off: the checkpoint's own call, and the model calls that reach one."""

from __future__ import annotations

import textwrap

import pytest
from conftest import TOWER_SOURCE, lint_folder, lint_text

LIGHTNING = '''
from lightning import LightningModule
from torch import nn
from torch.utils.checkpoint import checkpoint


class Lit(LightningModule):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(8, 8)

    def {step}(self, batch, batch_idx):
        return checkpoint(self.block, batch, use_reentrant=False)
'''


@pytest.mark.parametrize(
    "step, context",
    [
        ("validation_step", "torch.no_grad() inside `Trainer.fit`, torch.inference_mode() in `trainer.validate`"),
        ("test_step", "torch.inference_mode(); torch.no_grad() with `Trainer(inference_mode=False)`"),
        ("predict_step", "torch.inference_mode(); torch.no_grad() with `Trainer(inference_mode=False)`"),
    ],
)
def test_lightning_steps_name_the_context_lightning_runs_them_in(step, context):
    report = lint_text(LIGHTNING.format(step=step))
    [finding] = [f for f in report.findings if f.code == "CKPT008"]
    assert f"Lightning `{step}` (runs under {context})" in finding.message


LIGHTNING_FORWARD = '''
import torch
from lightning import LightningModule
from torch import nn
from torch.utils.checkpoint import checkpoint


class Lit(LightningModule):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(8, 8)
        self.use_checkpoint = True

    def forward(self, x):
        if {gate}:
            return checkpoint(self.block, x, use_reentrant=False)
        return self.block(x)

    def validation_step(self, batch, batch_idx):
        return self(batch).sum()

    def score(self, x):
        with torch.no_grad():
            return self.forward(x)
'''


@pytest.mark.parametrize(
    "gate, expected",
    [("self.use_checkpoint", {20, 24}), ("self.use_checkpoint and self.training", set()), ("self.use_checkpoint and torch.is_grad_enabled()", set())],
)
def test_a_module_calling_itself_without_grad_reaches_its_own_checkpoint(gate, expected):
    """Lightning switches the module to eval() before its validation loop (lightning 2.6
    `on_validation_model_eval`): only a checkpoint nothing gates on the mode still runs there."""
    report = lint_text(LIGHTNING_FORWARD.format(gate=gate))
    assert {f.line for f in report.findings if f.code == "CKPT008"} == expected


STACK = '''
import copy

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.gradient_checkpointing = True

    def forward(self, x):
        for block in self.blocks:
            if {gate}:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return x
'''
TRAINING_GATE = "self.gradient_checkpointing and self.training"
PRELUDE_LINES = STACK.count("\n")


def grad_free(body: str, gate: str = TRAINING_GATE) -> set[tuple[int, str]]:
    report = lint_text(STACK.format(gate=gate) + textwrap.dedent(body))
    assert report.errors == []
    return {(f.line - PRELUDE_LINES, f.code) for f in report.findings if f.code == "CKPT008"}


@pytest.mark.parametrize(
    "body, expected",
    [
        # A freshly built module is in train mode.
        ("model = Stack()\nwith torch.no_grad():\n    out = model(torch.ones(2, 8))\n", {(3, "CKPT008")}),
        ("model = Stack()\nmodel.train()\nwith torch.inference_mode():\n    out = model.forward(torch.ones(2, 8))\n", {(4, "CKPT008")}),
        # eval() before the call: the training gate is closed.
        ("model = Stack()\nmodel.eval()\nwith torch.no_grad():\n    out = model(torch.ones(2, 8))\n", set()),
        ("model = Stack().eval()\nwith torch.no_grad():\n    out = model(torch.ones(2, 8))\n", set()),
        ("model = Stack()\nmodel.train(False)\nwith torch.no_grad():\n    out = model(torch.ones(2, 8))\n", set()),
        # train() after eval() brings it back.
        ("model = Stack()\nmodel.eval()\nmodel.train()\nwith torch.no_grad():\n    out = model(torch.ones(2, 8))\n", {(5, "CKPT008")}),
        # Grad is on again inside enable_grad().
        ("model = Stack()\nwith torch.no_grad():\n    with torch.enable_grad():\n        out = model(torch.ones(2, 8))\n", set()),
        # A deep copy keeps the mode: a frozen teacher for distillation.
        (
            "def distill(student, x):\n    teacher = copy.deepcopy(student)\n    with torch.no_grad():\n        target = teacher(x)\n"
            "    return (student(x) - target).pow(2).mean()\n\n\ndistill(Stack(), torch.ones(2, 8))\n",
            {(4, "CKPT008")},
        ),
        ("def distill(student, x):\n    teacher = copy.deepcopy(student).eval()\n    with torch.no_grad():\n        target = teacher(x)\n    return target\n\n\ndistill(Stack(), torch.ones(2, 8))\n", set()),
        # A model handed to an evaluation function by a training loop that left it in train mode.
        (
            "def evaluate(model, x):\n    with torch.no_grad():\n        return model(x)\n\n\ndef fit(x):\n    model = Stack()\n"
            "    model.train()\n    loss = model(x).sum()\n    loss.backward()\n    return evaluate(model, x)\n",
            {(3, "CKPT008")},
        ),
        (
            "def evaluate(model, x):\n    with torch.no_grad():\n        return model(x)\n\n\ndef fit(x):\n    model = Stack()\n"
            "    loss = model(x).sum()\n    loss.backward()\n    model.eval()\n    return evaluate(model, x)\n",
            set(),
        ),
        # The evaluation function switches to eval itself.
        ("def evaluate(model, x):\n    model.eval()\n    with torch.no_grad():\n        return model(x)\n\n\nevaluate(Stack(), torch.ones(2, 8))\n", set()),
        # Nothing shows the mode of a parameter whose callers are unknown.
        ("def evaluate(model, x):\n    with torch.no_grad():\n        return model(x)\n", set()),
    ],
)
def test_model_calls_under_no_grad_that_reach_a_training_checkpoint(body, expected):
    assert grad_free(body) == expected


@pytest.mark.parametrize(
    "gate, expected",
    [
        ("self.training", {(3, "CKPT008")}),
        ("self.training and torch.is_grad_enabled()", set()),
        ("torch.is_grad_enabled()", set()),
        ("x.requires_grad", set()),
    ],
)
def test_a_checkpoint_gated_on_grad_is_not_reached_under_no_grad(gate, expected):
    assert grad_free("model = Stack()\nwith torch.no_grad():\n    out = model(torch.ones(2, 8))\n", gate) == expected


CALL = "with torch.no_grad():\n    out = model(torch.ones(2, 8))\n"


@pytest.mark.parametrize(
    "flag, body, expected",
    [
        # The checkpointing flag is off unless something switches it on.
        ("False", f"model = Stack()\n{CALL}", set()),
        ("False", f"model = Stack()\nmodel.gradient_checkpointing = True\n{CALL}", {(4, "CKPT008")}),
        # Set from a constructor argument: what the construction passes, or the default.
        ("use_checkpoint", f"model = Stack()\n{CALL}", set()),
        ("use_checkpoint", f"model = Stack(use_checkpoint=True)\n{CALL}", {(3, "CKPT008")}),
        ("use_checkpoint", f"model = Stack(True)\n{CALL}", {(3, "CKPT008")}),
        ("use_checkpoint", f"model = Stack(use_checkpoint=len([]) == 0)\n{CALL}", set()),
        ("use_checkpoint=True", f"model = Stack()\n{CALL}", {(3, "CKPT008")}),
        ("use_checkpoint=True", f"model = Stack(use_checkpoint=False)\n{CALL}", set()),
        ("use_checkpoint=True", f"def evaluate(model):\n    {CALL.replace(chr(10) + '    ', chr(10) + '        ')}\nevaluate(Stack())\n", {(3, "CKPT008")}),
    ],
)
def test_the_checkpointing_flag_must_be_on(flag, body, expected):
    source = STACK.replace("self.gradient_checkpointing = True", f"self.gradient_checkpointing = {flag.split('=')[0]}")
    if flag.startswith("use_checkpoint"):
        default = flag.partition("=")[2] or "False"
        source = source.replace("def __init__(self):", f"def __init__(self, use_checkpoint={default}):")
    report = lint_text(source.format(gate=TRAINING_GATE) + body)
    assert {(f.line - PRELUDE_LINES, f.code) for f in report.findings if f.code == "CKPT008"} == expected


def test_a_checkpoint_under_another_condition_is_not_known_to_run():
    assert grad_free(f"model = Stack()\n{CALL}", "self.training and x.shape[0] > 1") == set()


HF = '''
import torch
from transformers import AutoModelForCausalLM


def score(batch):
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={{"use_reentrant": False}})
{body}'''


@pytest.mark.parametrize(
    "body, expected",
    [
        ("    model.train()\n    with torch.no_grad():\n        return model(**batch).logits\n", {9}),
        ("    model.train()\n    ref = copy.deepcopy(model)\n    with torch.no_grad():\n        return ref(**batch).logits\n", {10}),
        # from_pretrained returns the model in eval mode.
        ("    with torch.no_grad():\n        return model(**batch).logits\n", set()),
        ("    model.train()\n    model.eval()\n    with torch.no_grad():\n        return model(**batch).logits\n", set()),
    ],
)
def test_transformers_models_with_checkpointing_enabled(body, expected):
    report = lint_text("import copy\n" + HF.format(body=body))
    assert report.errors == []
    assert {f.line - 3 for f in report.findings if f.code == "CKPT008"} == expected


def test_the_message_names_the_checkpoint_reached_and_the_mode():
    [finding] = lint_text(STACK.format(gate=TRAINING_GATE) + "model = Stack()\nwith torch.no_grad():\n    out = model(torch.ones(2, 8))\n").findings
    assert finding.code == "CKPT008"
    assert "`model` is in train mode" in finding.message and "torch.no_grad()" in finding.message
    assert "`checkpoint(...)` in `Stack.forward`" in finding.message


@pytest.mark.parametrize(
    "body",
    [
        # A helper may switch it to eval().
        f"def prepare(model):\n    model.eval()\n\n\nmodel = Stack()\nprepare(model)\n{CALL}",
        # train() only on one branch.
        f"model = Stack()\nmodel.eval()\nif torch.cuda.is_available():\n    model.train()\n{CALL}",
    ],
)
def test_a_mode_that_may_have_changed_is_unknown(body):
    assert grad_free(body) == set()


@pytest.mark.parametrize(
    "gate, body, expected",
    [
        # Not gated on the mode: it checkpoints in eval mode too, so `.eval()` does not avoid it.
        ("self.gradient_checkpointing", f"model = Stack()\nmodel.eval()\n{CALL}", {(4, "CKPT008")}),
        ("self.gradient_checkpointing", f"model = Stack().eval()\n{CALL}", {(3, "CKPT008")}),
        # A model handed in by callers whose mode nothing shows.
        ("self.gradient_checkpointing", "def evaluate(model, x):\n    model.eval()\n    with torch.no_grad():\n        return model(x)\n", set()),
        ("self.gradient_checkpointing", "def evaluate(model, x):\n    model.eval()\n    with torch.no_grad():\n        return model(x)\n\n\nevaluate(Stack(), torch.ones(2, 8))\n", {(4, "CKPT008")}),
        # Gated on the mode: eval() closes it.
        (TRAINING_GATE, f"model = Stack()\nmodel.eval()\n{CALL}", set()),
        ("self.training and self.gradient_checkpointing", f"model = Stack()\nmodel.eval()\n{CALL}", set()),
    ],
)
def test_a_checkpoint_not_gated_on_the_mode_runs_in_eval_mode_too(gate, body, expected):
    assert grad_free(body, gate) == expected


def test_a_flag_in_a_conditional_expression_gates_the_checkpoint():
    source = STACK.replace(
        """            if {gate}:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)""",
        """            x = checkpoint(block, x, use_reentrant=False) if self.use_checkpoint else block(x)""",
    ).replace("self.gradient_checkpointing = True", "self.use_checkpoint = {flag}")
    for flag, expected in (("False", set()), ("True", {(len(source.splitlines()) + 3, "CKPT008")})):
        report = lint_text(source.format(flag=flag) + f"model = Stack()\n{CALL}")
        assert {(f.line, f.code) for f in report.findings if f.code == "CKPT008"} == expected


# `no_grad` carried into the functions a model is handed to: the call written under no_grad counts
# when the function (or one it hands the model on to) runs the model as the caller left it.
RUNS = "def logits(model, x):\n    return model(x)\n\n\n"
HANDED = f"{RUNS}model = Stack()\nwith torch.no_grad():\n    out = logits(model, torch.ones(2, 8))\n"


@pytest.mark.parametrize(
    "body, expected",
    [
        (HANDED, {(7, "CKPT008")}),
        # By keyword, and through `model.forward`.
        ("def logits(x, model):\n    return model.forward(x)\n\n\nmodel = Stack()\nwith torch.no_grad():\n    out = logits(model=model, x=torch.ones(2, 8))\n", {(7, "CKPT008")}),
        # Handed on to a second helper.
        (f"{RUNS}def score(model, x):\n    return logits(model, x).sum()\n\n\nmodel = Stack()\nwith torch.inference_mode():\n    out = score(model, torch.ones(2, 8))\n", {(11, "CKPT008")}),
        # A method that receives the model.
        (
            "class Scorer:\n    def _forward(self, model, x):\n        return model(x)\n\n    def step(self, model, x):\n        with torch.no_grad():\n"
            "            return self._forward(model, x)\n\n\nmodel = Stack()\nScorer().step(model, torch.ones(2, 8))\n",
            {(7, "CKPT008")},
        ),
        # An `@torch.no_grad()` function handing the model it receives to the helper: reported inside it.
        (f"{RUNS}@torch.no_grad()\ndef reference(model, x):\n    return logits(model, x)\n\n\nreference(Stack(), torch.ones(2, 8))\n", {(7, "CKPT008")}),
        # eval() first, before the call or inside the helper.
        (f"{RUNS}model = Stack()\nmodel.eval()\nwith torch.no_grad():\n    out = logits(model, torch.ones(2, 8))\n", set()),
        ("def logits(model, x):\n    model.eval()\n    return model(x)\n\n\nmodel = Stack()\nwith torch.no_grad():\n    out = logits(model, torch.ones(2, 8))\n", set()),
        # The helper does not run the model, runs it only on one branch, or with grad switched back on.
        ("def width(model, x):\n    return model.blocks[0].in_features\n\n\nmodel = Stack()\nwith torch.no_grad():\n    out = width(model, torch.ones(2, 8))\n", set()),
        ("def logits(model, x, run=False):\n    if run:\n        return model(x)\n    return x\n\n\nmodel = Stack()\nwith torch.no_grad():\n    out = logits(model, torch.ones(2, 8))\n", set()),
        ("def logits(model, x):\n    with torch.enable_grad():\n        return model(x)\n\n\nmodel = Stack()\nwith torch.no_grad():\n    out = logits(model, torch.ones(2, 8))\n", set()),
        # The helper has its own no_grad: the finding is there, once.
        ("def logits(model, x):\n    with torch.no_grad():\n        return model(x)\n\n\nmodel = Stack()\nwith torch.no_grad():\n    out = logits(model, torch.ones(2, 8))\n", {(3, "CKPT008")}),
        # No no_grad around the call.
        (f"{RUNS}model = Stack()\nout = logits(model, torch.ones(2, 8))\n", set()),
        # A method a subclass defines again: the call may run either, and each must run the model.
        (
            "class Scorer:\n    def _forward(self, model, x):\n        return model(x)\n\n    def step(self, model, x):\n        with torch.no_grad():\n"
            "            return self._forward(model, x)\n\n\nclass Cached(Scorer):\n    def _forward(self, model, x):\n        return x\n\n\n"
            "model = Stack()\nScorer().step(model, torch.ones(2, 8))\n",
            set(),
        ),
        (
            "class Scorer:\n    def _forward(self, model, x):\n        return model(x)\n\n    def step(self, model, x):\n        with torch.no_grad():\n"
            "            return self._forward(model, x)\n\n\nclass Scaled(Scorer):\n    def _forward(self, model, x):\n        return model(x) * 2\n\n\n"
            "model = Stack()\nScorer().step(model, torch.ones(2, 8))\n",
            {(7, "CKPT008")},
        ),
        # A helper whose callers are unknown, handed a model whose mode is unknown.
        (f"{RUNS}def evaluate(model, x):\n    with torch.no_grad():\n        return logits(model, x)\n", set()),
    ],
)
def test_no_grad_is_carried_into_the_function_the_model_is_handed_to(body, expected):
    assert grad_free(body) == expected


def test_the_message_names_the_function_that_runs_the_model():
    [finding] = lint_text(STACK.format(gate=TRAINING_GATE) + HANDED).findings
    assert "`logits(...)` runs inside torch.no_grad() while `model` is in train mode" in finding.message
    assert "`example.logits` runs it (`model(x)`)" in finding.message
    assert "`checkpoint(...)` in `Stack.forward`" in finding.message


@pytest.mark.parametrize(
    "helper",
    [
        # The function may switch the mode before the call: the caller's mode no longer holds.
        "def logits(model, x, evaluating=True):\n    if evaluating:\n        model.eval()\n    return model(x)\n",
        "def logits(model, x, mode=False):\n    model.train(mode)\n    return model(x)\n",
        "def prepare(model):\n    model.eval()\n\n\ndef logits(model, x):\n    prepare(model)\n    return model(x)\n",
    ],
)
def test_a_mode_the_function_may_have_switched_is_not_the_callers(helper):
    handed = f"{helper}\n\nmodel = Stack()\nwith torch.no_grad():\n    out = logits(model, torch.ones(2, 8))\n"
    direct = helper.replace("    return model(x)\n", "    with torch.no_grad():\n        return model(x)\n") + "\n\nlogits(Stack(), torch.ones(2, 8))\n"
    assert grad_free(handed) == set()
    assert grad_free(direct) == set()


def test_two_models_handed_to_one_call_make_one_finding():
    body = "def gap(a, b, x):\n    return a(x) - b(x)\n\n\npolicy = Stack()\nreference = Stack()\nwith torch.no_grad():\n    out = gap(policy, reference, torch.ones(2, 8))\n"
    assert grad_free(body) == {(8, "CKPT008")}
    assert len(lint_text(STACK.format(gate=TRAINING_GATE) + body).findings) == 1


# diffusers' pattern: the checkpoint sits in a method that checkpoints the callable it is handed,
# and the forward's call of that method is what the gates guard.
METHOD_WRAPPER = '''
import torch
import torch.nn as nn


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.gradient_checkpointing = True

    def _gradient_checkpointing_func(self, fn, *args):
        return torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)

    def forward(self, x):
        for block in self.blocks:
            if {gate}:
                x = self._gradient_checkpointing_func(block, x)
            else:
                x = block(x)
        return x


model = UNet()
with torch.no_grad():
    out = model(torch.ones(2, 8))
'''


@pytest.mark.parametrize(
    "gate, expected",
    [
        ("torch.is_grad_enabled() and self.gradient_checkpointing", set()),
        ("self.gradient_checkpointing and torch.is_grad_enabled()", set()),
        ("self.gradient_checkpointing", {26}),
        ("self.gradient_checkpointing and self.training", {26}),
        ("self.gradient_checkpointing and len(x) > 1", set()),
    ],
)
def test_the_gates_around_a_call_of_a_checkpointing_method_apply_to_its_checkpoint(gate, expected):
    report = lint_text(METHOD_WRAPPER.format(gate=gate))
    assert report.errors == []
    assert {f.line for f in report.findings if f.code == "CKPT008"} == expected


def test_the_gates_around_a_call_of_a_checkpointing_method_apply_once_the_model_is_eval():
    source = METHOD_WRAPPER.format(gate="self.gradient_checkpointing and self.training").replace("model = UNet()\n", "model = UNet()\nmodel.eval()\n")
    assert [f for f in lint_text(source).findings if f.code == "CKPT008"] == []


# What a project function does to the mode of the model it is handed (ckptlint/mode_effects.py):
# the caller's mode holds after a call that never switches it, the mode a helper sets on every
# path holds after it, anything else is not known.
SAMPLE = "def sample(model, x):\n    with torch.no_grad():\n        return model(x).argmax(-1)\n\n\n"
AFTER = "with torch.no_grad():\n    out = model(torch.ones(2, 8))\n"


@pytest.mark.parametrize(
    "helpers, setup, expected",
    [
        # A helper that only runs the model (under its own no_grad: reported there too) leaves its mode.
        (SAMPLE, "model = Stack()\nsample(model, torch.ones(2, 8))\n", {(3, "CKPT008"), (9, "CKPT008")}),
        ("def width(model):\n    return model.blocks[0].in_features\n\n\n", "model = Stack()\nwidth(model)\n", {(8, "CKPT008")}),
        ("def show(model):\n    print(model)\n    return isinstance(model, torch.nn.Module)\n\n\n", "model = Stack()\nshow(model)\n", {(9, "CKPT008")}),
        # One that hands it on to a helper that leaves it (whose no_grad call gets the train-mode model
        # through both hand-offs: reported there too), or to a library function.
        (f"{SAMPLE}def rollout(model, x):\n    return sample(model, x)\n\n\n", "model = Stack()\nrollout(model, torch.ones(2, 8))\n", {(3, "CKPT008"), (13, "CKPT008")}),
        ("def save(model):\n    torch.save(model.state_dict(), 'm.pt')\n\n\n", "model = Stack()\nsave(model)\n", {(8, "CKPT008")}),
        # A helper that sets the mode on every path: its mode holds.
        ("def prepare(model):\n    model.train()\n    return model\n\n\n", "model = Stack()\nmodel.eval()\nprepare(model)\n", {(10, "CKPT008")}),
        ("def prepare(model):\n    model.eval()\n\n\n", "model = Stack()\nprepare(model)\n", set()),
        ("def prepare(model):\n    with torch.no_grad():\n        model.train(False)\n\n\n", "model = Stack()\nprepare(model)\n", set()),
        ("def inner(model):\n    model.train()\n\n\ndef prepare(model):\n    inner(model)\n\n\n", "model = Stack()\nmodel.eval()\nprepare(model)\n", {(13, "CKPT008")}),
        # Returned unchanged: the name bound to the result is the same model.
        ("def prepare(model):\n    model.train()\n    return model\n\n\n", "teacher = Stack().eval()\nmodel = prepare(teacher)\n", {(9, "CKPT008")}),
        ("def prepare(model):\n    model.train()\n    return model\n\n\n", "model = Stack().eval()\nmodel = prepare(model=model)\n", {(9, "CKPT008")}),
        # A mode set on some paths only, by a name bound from the parameter, by a flag, or by code
        # the analysis cannot follow: not known (the caller's train mode no longer holds).
        ("def prepare(model, evaluating):\n    if evaluating:\n        model.eval()\n\n\n", "model = Stack()\nprepare(model, True)\n", set()),
        ("def prepare(model):\n    if model is None:\n        return None\n    model.eval()\n\n\n", "model = Stack()\nprepare(model)\n", set()),
        ("def prepare(model):\n    inner = model.module if hasattr(model, 'module') else model\n    inner.eval()\n\n\n", "model = Stack()\nprepare(model)\n", set()),
        ("def prepare(model, mode):\n    model.train(mode)\n\n\n", "model = Stack()\nprepare(model, False)\n", set()),
        ("def prepare(model):\n    switch = model.eval\n    switch()\n\n\n", "model = Stack()\nprepare(model)\n", set()),
        ("def prepare(model, hook):\n    hook(model)\n\n\n", "model = Stack()\nprepare(model, print)\n", set()),
        ("def prepare(models):\n    for m in models:\n        m.eval()\n\n\n", "model = Stack()\nprepare([model])\n", {(9, "CKPT008")}),
        ("def prepare(*models):\n    for m in models:\n        m.eval()\n\n\n", "model = Stack()\nprepare(model)\n", set()),
        ("def prepare(model):\n    model.apply(lambda m: m.eval())\n\n\n", "model = Stack()\nprepare(model)\n", set()),
        ("def prepare(model):\n    def switch():\n        model.eval()\n    return switch\n\n\n", "model = Stack()\nprepare(model)()\n", set()),
    ],
)
def test_the_mode_a_function_leaves_its_model_in(helpers, setup, expected):
    assert grad_free(helpers + setup + AFTER) == expected


HELPERS = (
    "import torch\n\n\ndef sample(model, x):\n    return model(x).argmax(-1)\n\n\ndef prepare(model):\n    model.train()\n    return model\n\n\n"
    "def freeze(model):\n    model.requires_grad_(False)\n    set_eval(model)\n\n\ndef set_eval(model):\n    model.eval()\n"
)


@pytest.mark.parametrize(
    "steps, reported",
    [
        ("model = prepare(Stack().eval())\n    sample(model, torch.ones(2, 8))\n", True),
        ("model = Stack()\n    sample(model, torch.ones(2, 8))\n", True),
        ("model = Stack()\n    freeze(model)\n", False),
        ("model = Stack()\n    model = prepare(model)\n    freeze(model)\n", False),
    ],
)
def test_the_mode_a_function_in_another_file_leaves_its_model_in(project, steps, reported):
    prelude = STACK.format(gate=TRAINING_GATE) + "from helpers import freeze, prepare, sample\n\n\ndef main():\n    "
    root = project({"helpers.py": HELPERS, "train.py": prelude + steps + "    with torch.no_grad():\n        return model(torch.ones(2, 8))\n"})
    report = lint_folder(root)
    assert report.errors == []
    last = len((prelude + steps).splitlines()) + 2 - PRELUDE_LINES
    assert {f.line - PRELUDE_LINES for f in report.findings if f.code == "CKPT008"} == ({last} if reported else set())


LAYERS = '''import torch.nn as nn
import torch.utils.checkpoint as cp


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Linear(8, 8)

    def forward(self, x):
        if self.training:
            return cp.checkpoint(self.conv, x, use_reentrant=False)
        return self.conv(x)
'''
NET = "import torch.nn as nn\n\nfrom layers import Layer\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.layer = Layer()\n\n    def forward(self, x):\n        return self.layer(x)\n"


@pytest.mark.parametrize(
    "script, reported",
    [
        # A file with no checkpoint text of its own, calling under no_grad a model whose class (from
        # another file, or through one) checkpoints in training.
        ("import torch\n\nfrom layers import Layer\n\n\ndef main():\n    model = Layer()\n    with torch.no_grad():\n        return model(torch.ones(2, 8))\n", True),
        ("import torch\n\nfrom net import Net\n\n\ndef main():\n    model = Net()\n    with torch.no_grad():\n        return model(torch.ones(2, 8))\n", True),
        ("import torch\n\nfrom net import Net\n\n\n@torch.no_grad()\ndef main():\n    model = Net()\n    return model(torch.ones(2, 8))\n", True),
        ("import torch\n\nfrom net import Net\n\n\ndef main():\n    model = Net().eval()\n    with torch.no_grad():\n        return model(torch.ones(2, 8))\n", False),
    ],
)
def test_a_model_class_from_another_file_reaches_its_checkpoint_under_no_grad(project, script, reported):
    root = project({"layers.py": LAYERS, "net.py": NET, "p.py": script})
    report = lint_folder(root)
    assert report.errors == []
    found = {(f.path.rsplit("/", 1)[-1], f.code) for f in report.findings}
    assert found == ({("p.py", "CKPT008")} if reported else set())


LIGHTNING_SUBMODULE = '''
from lightning import LightningModule
from torch import nn
from torch.utils.checkpoint import checkpoint


class Encoder(nn.Module):
    def __init__(self, use_checkpoint=False):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(8, 8), nn.GELU())
        self.use_checkpoint = use_checkpoint

    def forward(self, h):
        if self.use_checkpoint:
            return checkpoint(self.layers, h, use_reentrant=False)
        return self.layers(h)


class Lit(LightningModule):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder(use_checkpoint={flag})

    def forward(self, x):
        return self.encoder(x)

    def validation_step(self, batch, batch_idx):
        return self(batch).sum()
'''


@pytest.mark.parametrize("flag, expected", [("True", {28}), ("False", set())])
def test_a_lightning_step_reaches_a_submodule_checkpointing_on_its_own_flag(flag, expected):
    """Lightning calls `.eval()` before its validation loop: a submodule that checkpoints on its flag
    alone still checkpoints there (tests/runtime/test_lightning_runtime.py)."""
    report = lint_text(LIGHTNING_SUBMODULE.format(flag=flag))
    assert {f.line for f in report.findings if f.code == "CKPT008"} == expected


CONFIG_GATED = '''
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


@dataclass
class GPTConfig:
    width: int = 8
    gradient_checkpointing: bool = {default}


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.blocks = nn.ModuleList([nn.Linear(config.width, config.width) for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            if self.config.gradient_checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return x


def main(flag):
    policy = GPT({config})
    with torch.no_grad():
        return policy(torch.ones(2, 8))
'''


@pytest.mark.parametrize(
    "default, config, expected",
    [
        # The flag of the config object the model is built from, as its construction shows it.
        ("False", "GPTConfig(gradient_checkpointing=True)", {33}),
        ("True", "GPTConfig()", {33}),
        ("True", "GPTConfig(width=8)", {33}),
        ("False", "GPTConfig()", set()),
        ("True", "GPTConfig(gradient_checkpointing=False)", set()),
        # Not known: a flag, or a config built elsewhere.
        ("False", "GPTConfig(gradient_checkpointing=flag)", set()),
        ("False", "flag", set()),
    ],
)
def test_a_gate_on_the_models_config_reads_the_config_it_was_built_from(default, config, expected):
    report = lint_text(CONFIG_GATED.format(default=default, config=config))
    assert report.errors == []
    assert {f.line for f in report.findings if f.code == "CKPT008"} == expected


LIGHTNING_OWN_PARAMETER = LIGHTNING_SUBMODULE.replace(
    "    def __init__(self):\n        super().__init__()\n        self.encoder = Encoder(use_checkpoint={flag})",
    "    def __init__(self, use_checkpoint={default}):\n        super().__init__()\n        self.encoder = Encoder(use_checkpoint=use_checkpoint)",
)


@pytest.mark.parametrize(
    "default, script, expected",
    [
        ("True", "Lit()", {28}),  # every construction leaves the default
        ("False", "Lit(use_checkpoint=True)", {28}),
        ("True", "Lit(use_checkpoint=False)", set()),
        ("True", "Lit(use_checkpoint=flag)", set()),  # not known
        ("True", "Lit() if flag else Lit(use_checkpoint=False)", set()),  # the constructions disagree
        ("True", "None", set()),  # built nowhere in the project: its arguments are not known
    ],
)
def test_a_model_built_in_the_project_passes_its_own_parameters_to_its_submodules(project, default, script, expected):
    """A model whose arguments the call does not show (`self(x)` in a Lightning step) holds what
    every construction of its class in the project agrees on, defaults filled in: here a flag of its
    `__init__` handed to a submodule that checkpoints on it (probe b/16, from Lightning reports)."""
    source = LIGHTNING_OWN_PARAMETER.format(default=default)
    root = project({"lit.py": source, "main.py": f"from lightning import Trainer\n\nfrom lit import Lit\n\nflag = True\nTrainer().fit({script})\n"})
    report = lint_folder(root)
    assert {f.line for f in report.findings if f.code == "CKPT008" and f.path.endswith("lit.py")} == expected


FLAG_METHOD = '''import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.grad_checkpointing = False

    def set_grad_checkpointing(self, enable=True):
        self.grad_checkpointing = enable

    def forward(self, x):
        for blk in self.blocks:
            if self.grad_checkpointing:
                x = checkpoint(blk, x, use_reentrant=False)
            else:
                x = blk(x)
        return x


def main(flag):
    model = Tower()
    {switch}
    with torch.no_grad():
        return model(torch.ones(2, 8))
'''


@pytest.mark.parametrize(
    "switch, reported",
    [
        ("model.set_grad_checkpointing()", True),  # timm / open_clip's switch, its default
        ("model.set_grad_checkpointing(enable=True)", True),
        ("model.grad_checkpointing = True", True),
        ("model.set_grad_checkpointing(False)", False),
        ("model.set_grad_checkpointing(flag)", False),  # not known
        ("model.set_grad_checkpointing()\n    model.set_grad_checkpointing(False)", False),
        ("if flag:\n        model.set_grad_checkpointing()", False),  # may or may not be on
        ("pass", False),
    ],
)
def test_a_flag_a_method_switches_on_gates_the_checkpoint_of_that_model(switch, reported):
    """A model's own method that sets the flag its checkpoint is gated on (`set_grad_checkpointing`,
    as timm and open_clip spell it), called on the model before it runs without grad (CKPT008)."""
    report = lint_text(FLAG_METHOD.format(switch=switch))
    assert bool([f for f in report.findings if f.code == "CKPT008"]) is reported


EVALUATOR = '''
import torch


class {evaluator}:
    def __init__(self, batches):
        self.batches = batches

    @torch.no_grad()
    def run(self, model):
        return sum(model(**batch).loss.item() for batch in self.batches)
'''

TRAINING = '''
import torch
from transformers import AutoModelForCausalLM

from evaluator import Evaluator


def main(batches):
    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    for batch in batches:
        model(**batch).loss.backward()
    print(Evaluator(batches).run(model))
'''


@pytest.mark.parametrize(("evaluator", "expected"), [("Evaluator", {("evaluator.py", 11, "CKPT008")}), ("Evaluator(Base)", set())])
def test_a_plain_class_method_decorated_no_grad_runs_the_model_it_is_handed(project, evaluator, expected):
    """`Evaluator(batches).run(model)` with `@torch.no_grad()` on the method, handed the training
    model in train mode with checkpointing on: transformers checkpoints its layers for nothing
    (CKPT008). A plain class's methods are script code; the methods of classes derived from others
    (modules, mixins of models) are not searched for grad-free code unless a checkpoint is in view."""
    import json

    from click.testing import CliRunner

    from ckptlint.cli import main

    base = "\n\nclass Base:\n    pass\n" if "Base" in evaluator else ""
    project({"evaluator.py": EVALUATOR.format(evaluator=evaluator) + base, "train.py": TRAINING})
    result = CliRunner().invoke(main, [".", "--format", "json", "--no-cache"])
    assert {(f["path"], f["line"], f["code"]) for f in json.loads(result.stdout)["findings"]} == expected


DECORATORS = '''
import functools

import torch


def no_grad_eval(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with torch.no_grad():
            return fn(*args, **kwargs)

    return wrapper


def timed(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper
'''

DECORATED_EVALUATION = TOWER_SOURCE + '''
from utils import {decorator}


@{decorator}
def evaluate(model, batches):
    return [model(x).sum().item() for x in batches]


def main(batches):
    model = Tower()
    model(batches[0]).sum().backward()
    return evaluate(model, batches)
'''


@pytest.mark.parametrize(("decorator", "expected"), [("no_grad_eval", {("train.py", 21, "CKPT008")}), ("timed", set())])
def test_a_project_decorator_that_runs_the_function_without_grad(project, decorator, expected):
    """`@no_grad_eval` from the project's utils wraps the evaluation in `with torch.no_grad():`: the
    model's unconditional checkpoints run there for nothing (CKPT008); `@timed` leaves grad on."""
    import json

    from click.testing import CliRunner

    from ckptlint.cli import main

    project({"utils.py": DECORATORS, "train.py": DECORATED_EVALUATION.format(decorator=decorator)})
    result = CliRunner().invoke(main, [".", "--format", "json", "--no-cache"])
    assert {(f["path"], f["line"], f["code"]) for f in json.loads(result.stdout)["findings"]} == expected


PHASES = '''
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = {call}
        return x


def run(model, loaders):
    for phase in ["train", "val"]:
        if phase == "train":
            model.train()
        else:
            model.eval()
        for x in loaders[phase]:
            with torch.set_grad_enabled({switch}):
                out = model(x)
                if phase == "train":
                    out.sum().backward()


run(Net(), {{"train": [], "val": []}})
'''


@pytest.mark.parametrize(
    "call, switch, expected",
    [
        # The evaluation phase runs the checkpoint with grad off: nothing gates it on the mode.
        ("checkpoint(block, x, use_reentrant=False)", 'phase == "train"', {(26, "CKPT008")}),
        # Gated on the mode, which eval() turns off there, or grad on in every phase.
        ("checkpoint(block, x, use_reentrant=False) if self.training else block(x)", 'phase == "train"', set()),
        ("checkpoint(block, x, use_reentrant=False)", "True", set()),
    ],
)
def test_a_phase_that_may_switch_grad_off(call, switch, expected):
    report = lint_text(PHASES.format(call=call, switch=switch))
    assert report.errors == []
    assert {(f.line, f.code) for f in report.findings if f.code == "CKPT008"} == expected


def test_a_checkpoint_itself_under_a_switch_not_known_is_not_flagged():
    source = '''
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def step(block, x, train):
    with torch.set_grad_enabled(train):
        return checkpoint(block, x, use_reentrant=False)
'''
    assert [f.code for f in lint_text(source).findings if f.code == "CKPT008"] == []


CALLBACK_PROBE = '''import torch
from transformers import AutoModelForCausalLM, Trainer, TrainerCallback, TrainingArguments


class HeldOutLoss(TrainerCallback):
    def __init__(self, batch):
        self.batch = batch

    def {event}(self, args, state, control, model=None, **kwargs):
{body}

def main(batch, data):
    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
    Trainer(model=model, args=TrainingArguments("out", {flag}), train_dataset=data, callbacks=[HeldOutLoss(batch)]).train()
'''
NO_GRAD_LOSS = "        with torch.no_grad():\n            return model(**self.batch).loss\n"


@pytest.mark.parametrize(
    "event, body, flag, expected",
    [
        # The Trainer calls the event with its model in train mode, checkpointing on.
        ("on_step_end", NO_GRAD_LOSS, "gradient_checkpointing=True", {11}),
        ("on_optimizer_step", NO_GRAD_LOSS, "activation_checkpointing=True", {11}),
        # Correct: eval() first, an event that follows evaluation, no checkpointing.
        ("on_step_end", "        model.eval()\n" + NO_GRAD_LOSS, "gradient_checkpointing=True", set()),
        ("on_evaluate", NO_GRAD_LOSS, "gradient_checkpointing=True", set()),
        ("on_step_end", NO_GRAD_LOSS, "gradient_checkpointing=False", set()),
    ],
)
def test_a_trainer_callback_calls_the_model_it_trains_without_grad(event, body, flag, expected):
    report = lint_text(CALLBACK_PROBE.format(event=event, body=body, flag=flag))
    assert report.errors == []
    assert {f.line for f in report.findings if f.code == "CKPT008"} == expected
    for finding in (f for f in report.findings if f.code == "CKPT008"):
        assert f"hands `HeldOutLoss(batch)` to a Trainer that trains with checkpointing on and calls its `{event}` with the model in train mode" in finding.message


def test_a_rollout_helper_of_its_own_file_handed_a_policy_that_checkpoints_in_training(project):
    """PPO's shape: the policy's class checkpoints in `policy.py`; `rollout.py` runs whatever it is
    handed under no_grad; `ppo.py` builds the policy (train mode) and names no checkpoint itself."""
    policy = (
        "import torch\nfrom torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\n\nclass ActorCritic(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.trunk = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))\n\n"
        "    def features(self, obs):\n        for blk in self.trunk:\n            obs = checkpoint(blk, obs, use_reentrant=False) if self.training else blk(obs)\n        return obs\n\n"
        "    def forward(self, obs):\n        return self.features(obs)\n"
    )
    rollout = "import torch\n\n\ndef collect(policy, obs):\n    with torch.no_grad():\n        return policy(obs)\n"
    ppo = "from policy import ActorCritic\nfrom rollout import collect\n\n\ndef main(obs):\n    policy = ActorCritic()\n{mode}    return collect(policy, obs)\n"
    for mode, expected in (("", {("rollout.py", 6)}), ("    policy.eval()\n", set())):
        root = project({"policy.py": policy, "rollout.py": rollout, "ppo.py": ppo.format(mode=mode)})
        report = lint_folder(root)
        assert report.errors == []
        assert {(f.path.rsplit("/", 1)[-1], f.line) for f in report.findings if f.code == "CKPT008"} == expected, mode
