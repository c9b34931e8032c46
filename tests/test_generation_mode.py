"""CKPT004 for generation: `generate()` and cached forwards on a model in train() mode with
gradient checkpointing on (transformers drops the cache; measured in tests/runtime/test_generation_runtime.py)."""

from __future__ import annotations

import textwrap

import pytest
from conftest import lint_folder, lint_text

ENABLE = 'model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})'


def findings(body: str) -> set[tuple[int, str]]:
    source = "import torch\n\n\ndef rollout(model, prompts):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    report = lint_text(source)
    assert report.errors == []
    return {(f.line - 4, f.code) for f in report.findings}


@pytest.mark.parametrize(
    "body, expected",
    [
        (f"{ENABLE}\nmodel.train()\nreturn model.generate(prompts, max_new_tokens=8)\n", {(3, "CKPT004")}),
        (f"{ENABLE}\nmodel.train()\nwith torch.no_grad():\n    return model.generate(prompts)\n", {(4, "CKPT004")}),
        (f"model.train()\n{ENABLE}\nreturn model.generate(prompts)\n", {(3, "CKPT004")}),
        (f"{ENABLE}\nmodel.train(True)\nreturn model.generate(prompts)\n", {(3, "CKPT004")}),
        # Back in train mode after an evaluation.
        (f"{ENABLE}\nmodel.eval()\nmodel.generate(prompts)\nmodel.train()\nreturn model.generate(prompts)\n", {(5, "CKPT004")}),
        # A cached forward in train mode drops the cache under no_grad too (and checkpoints for nothing).
        (f"{ENABLE}\nmodel.train()\nwith torch.no_grad():\n    return model(prompts, use_cache=True).past_key_values\n", {(4, "CKPT004"), (4, "CKPT008")}),
        # Correct: eval() (or train(False)) before generating.
        (f"{ENABLE}\nmodel.train()\nmodel.eval()\nreturn model.generate(prompts)\n", set()),
        (f"{ENABLE}\nmodel.train()\nmodel.train(False)\nreturn model.generate(prompts)\n", set()),
        (f"{ENABLE}\nmodel.train(mode=False)\nreturn model.generate(prompts)\n", set()),
        # from_pretrained returns the model in eval mode: nothing shows train() here.
        (f"{ENABLE}\nreturn model.generate(prompts)\n", set()),
        # Checkpointing switched on only after generating.
        (f"model.train()\nout = model.generate(prompts)\n{ENABLE}\nreturn out\n", set()),
        # Without checkpointing, train mode only changes dropout.
        ("model.train()\nreturn model.generate(prompts)\n", set()),
        # A cached forward under no_grad whose mode is not known here stays unflagged.
        (f"{ENABLE}\nwith torch.no_grad():\n    return model(prompts, use_cache=True).past_key_values\n", set()),
    ],
)
def test_generation_in_train_mode(body, expected):
    assert findings(body) == expected


def test_the_message_says_what_generation_does():
    [finding] = lint_text(f"def rollout(model, prompts):\n    {ENABLE}\n    model.train()\n    return model.generate(prompts)\n").findings
    assert finding.code == "CKPT004" and finding.severity.value == "error"
    assert "`model.generate(...)` while `model` is in train() mode with gradient checkpointing on" in finding.message
    assert "later tokens differ from eval()" in finding.message


@pytest.mark.parametrize(
    "version, severity, consequence",
    [
        ("5.23", "error", "later tokens differ from eval()"),
        ("4.53", "error", "later tokens differ from eval()"),
        ("4.48", "warning", "the same tokens as eval(), without the cache"),
    ],
)
def test_what_generation_loses_depends_on_the_transformers_version(version, severity, consequence):
    source = f"def rollout(model, prompts):\n    {ENABLE}\n    model.train()\n    return model.generate(prompts)\n"
    [finding] = [f for f in lint_text(source, transformers=version).findings if f.code == "CKPT004"]
    assert finding.severity.value == severity and consequence in finding.message
    assert f"transformers {version} (assumed from --transformers-version)" in finding.message


# `generate()` on a model the function is handed: the callers say its mode and checkpointing.
SAMPLER = '''import torch
from transformers import AutoModelForCausalLM


def sample(policy, ids):
    with torch.no_grad():
        return policy.generate(input_ids=ids, max_new_tokens=4)


def rollout(policy, ids):
{rollout}

def main(ids):
    policy = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
{main}'''
TRAINED = f"    policy.{ENABLE[len('model.'):]}\n    policy.train()\n"


@pytest.mark.parametrize(
    "rollout, main, expected",
    [
        # Handed over training with checkpointing on: reported at the generate call, naming the caller.
        ("    return sample(policy, ids)\n", f"{TRAINED}    return sample(policy, ids)\n", {7}),
        ("    return sample(policy, ids)\n", f"{TRAINED}    return sample(ids=ids, policy=policy)\n", {7}),
        # Correct: eval() first, no train(), no checkpointing, or the helper switches to eval itself.
        ("    return sample(policy, ids)\n", f"{TRAINED}    policy.eval()\n    return sample(policy, ids)\n", set()),
        ("    return sample(policy, ids)\n", f"    policy.{ENABLE[len('model.'):]}\n    return sample(policy, ids)\n", set()),
        ("    return sample(policy, ids)\n", "    policy.train()\n    return sample(policy, ids)\n", set()),
        ("    policy.eval()\n    return policy.generate(ids)\n", f"{TRAINED}    return rollout(policy, ids)\n", set()),
        # The helper's own train() with checkpointing its callers switched on: the inline rule's case.
        ("    policy.train()\n    return policy.generate(ids)\n", f"{TRAINED}    return rollout(policy, ids)\n", set()),
        # Callers unknown: nothing is known.
        ("    return sample(policy, ids)\n", "    return policy\n", set()),
    ],
)
def test_generation_on_a_model_handed_over_in_train_mode(rollout, main, expected):
    report = lint_text(SAMPLER.format(rollout=rollout, main=main))
    assert report.errors == []
    assert {f.line for f in report.findings if f.code == "CKPT004"} == expected


def test_the_message_names_the_caller_that_hands_the_model_over():
    [finding] = [f for f in lint_text(SAMPLER.format(rollout="    return None\n", main=f"{TRAINED}    return sample(policy, ids)\n")).findings if f.code == "CKPT004"]
    assert "`policy.generate(...)` while `policy` is in train() mode with gradient checkpointing on (`example.main` hands it over so: `sample(policy, ids)`)" in finding.message


def test_a_sampling_helper_in_a_file_of_its_own(project):
    """The helper's file has no checkpoint text: the training script that imports it does."""
    rollout = "import torch\n\n\ndef sample(policy, ids):\n    with torch.no_grad():\n        return policy.generate(input_ids=ids, max_new_tokens=4)\n"
    train = SAMPLER.split("\n\ndef sample")[0] + "\nfrom rollout import sample\n\n\ndef main(ids):\n    policy = AutoModelForCausalLM.from_pretrained(\"meta-llama/Llama-3.2-1B\")\n{main}"
    for main, expected in ((f"{TRAINED}    return sample(policy, ids)\n", {("rollout.py", 6)}), (f"{TRAINED}    policy.eval()\n    return sample(policy, ids)\n", set())):
        root = project({"rollout.py": rollout, "train.py": train.format(main=main)})
        report = lint_folder(root)
        assert report.errors == []
        assert {(f.path.rsplit("/", 1)[-1], f.line) for f in report.findings if f.code == "CKPT004"} == expected


# A TrainerCallback's train-time events get the Trainer's model in train mode with checkpointing on
# (measured in tests/runtime/test_sampling_callbacks_runtime.py).
CALLBACKS = '''import torch
from transformers import AutoModelForCausalLM, Trainer, TrainerCallback, TrainingArguments


class Sampler(TrainerCallback):
    def __init__(self, prompts):
        self.prompts = prompts

{events}

def main(prompts, data):
    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
{main}'''
ARGS = 'TrainingArguments("out", gradient_checkpointing=True)'
STEP_END = "    def on_step_end(self, args, state, control, model=None, **kwargs):\n        return model.generate(self.prompts)\n"


@pytest.mark.parametrize(
    "events, main, expected",
    [
        (STEP_END, f"    Trainer(model=model, args={ARGS}, train_dataset=data, callbacks=[Sampler(prompts)]).train()\n", {10}),
        (STEP_END, f"    sampler = Sampler(prompts)\n    trainer = Trainer(model, {ARGS}, callbacks=(sampler,))\n    trainer.train()\n", {10}),
        (STEP_END, f"    trainer = Trainer(model=model, args={ARGS})\n    trainer.add_callback(Sampler(prompts))\n    trainer.train()\n", {10}),
        # Checkpointing switched on on the model before the Trainer is built.
        (STEP_END, '    model.gradient_checkpointing_enable()\n    Trainer(model=model, args=TrainingArguments("out"), callbacks=[Sampler(prompts)]).train()\n', {10}),
        # The model taken from the keywords the Trainer passes.
        ("    def on_epoch_begin(self, args, state, control, **kwargs):\n        model = kwargs['model']\n        return model.generate(self.prompts)\n",
         f"    Trainer(model=model, args={ARGS}, callbacks=[Sampler(prompts)]).train()\n", {11}),
        ("    def on_train_begin(self, args, state, control, **kwargs):\n        model = kwargs.get('model')\n        return model.generate(self.prompts)\n",
         f"    Trainer(model=model, args={ARGS}, callbacks=[Sampler(prompts)]).train()\n", {11}),
        # Correct: eval() first; an event that may follow an evaluation (eval mode); no checkpointing.
        ("    def on_step_end(self, args, state, control, model=None, **kwargs):\n        model.eval()\n        out = model.generate(self.prompts)\n        model.train()\n        return out\n",
         f"    Trainer(model=model, args={ARGS}, callbacks=[Sampler(prompts)]).train()\n", set()),
        ("    def on_evaluate(self, args, state, control, model=None, **kwargs):\n        return model.generate(self.prompts)\n",
         f"    Trainer(model=model, args={ARGS}, callbacks=[Sampler(prompts)]).train()\n", set()),
        (STEP_END, '    Trainer(model=model, args=TrainingArguments("out"), callbacks=[Sampler(prompts)]).train()\n', set()),
        (STEP_END, '    Trainer(model=model, args=TrainingArguments("out", gradient_checkpointing=False), callbacks=[Sampler(prompts)]).train()\n', set()),
        # A callback never handed to a Trainer: its caller is unknown.
        (STEP_END, "    return Sampler(prompts)\n", set()),
    ],
)
def test_generation_in_a_trainer_callback(events, main, expected):
    report = lint_text(CALLBACKS.format(events=events, main=main))
    assert report.errors == []
    assert {f.line for f in report.findings if f.code == "CKPT004"} == expected


def test_the_message_names_the_trainer_event():
    main = f"    Trainer(model=model, args={ARGS}, callbacks=[Sampler(prompts)]).train()\n"
    [finding] = [f for f in lint_text(CALLBACKS.format(events=STEP_END, main=main)).findings if f.code == "CKPT004"]
    assert "(`example.main` hands `Sampler(prompts)` to a Trainer that trains with checkpointing on and calls its `on_step_end` with the model in train mode)" in finding.message


def test_a_callback_in_a_file_of_its_own(project):
    """The callback's file names neither checkpointing nor the Trainer's arguments; the training script does."""
    callbacks = "from transformers import TrainerCallback\n\n\nclass Sampler(TrainerCallback):\n    def __init__(self, prompts):\n        self.prompts = prompts\n\n" + STEP_END
    head = CALLBACKS.split("\n\nclass Sampler")[0] + "\nfrom callbacks import Sampler\n\n\ndef main(prompts, data):\n    model = AutoModelForCausalLM.from_pretrained(\"meta-llama/Llama-3.2-1B\")\n"
    for arguments, expected in ((ARGS, {("callbacks.py", 9)}), ('TrainingArguments("out")', set())):
        root = project({"callbacks.py": callbacks, "train.py": head + f"    Trainer(model=model, args={arguments}, callbacks=[Sampler(prompts)]).train()\n"})
        report = lint_folder(root)
        assert report.errors == []
        assert {(f.path.rsplit("/", 1)[-1], f.line) for f in report.findings if f.code == "CKPT004"} == expected


def test_checkpointing_switched_on_by_a_helper_of_a_third_file(project):
    """Neither the training script nor the sampling helper names checkpointing: a helper of
    policy.py switches it on for the model it is handed and returns."""
    policy = (
        "from transformers import LlamaConfig, LlamaForCausalLM\n\n\ndef build_policy():\n    return LlamaForCausalLM(LlamaConfig())\n\n\n"
        "def enable_memory_savings(model):\n    model.gradient_checkpointing_enable()\n    return model\n"
    )
    rollout = "def sample(policy, prompts, **overrides):\n    return policy.generate(prompts, **overrides)\n"
    train = "from policy import build_policy, enable_memory_savings\nfrom rollout import sample\n\n\ndef train(prompts):\n{build}    policy.train()\n{mode}    return sample(policy, prompts)\n"
    chained = "    policy = enable_memory_savings(build_policy())\n"
    named = "    policy = build_policy()\n    enable_memory_savings(policy)\n"
    for build, mode, expected in ((chained, "", {("rollout.py", 2)}), (named, "", {("rollout.py", 2)}), (chained, "    policy.eval()\n", set()), ("    policy = build_policy()\n", "", set())):
        root = project({"policy.py": policy, "rollout.py": rollout, "train.py": train.format(build=build, mode=mode)})
        report = lint_folder(root)
        assert report.errors == []
        assert {(f.path.rsplit("/", 1)[-1], f.line) for f in report.findings if f.code == "CKPT004"} == expected, (build, mode)


PREPARE = '''from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


def prepare_for_training(model):
    model.config.use_cache = False
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={{"use_reentrant": False}})
    return model


def prepare_for_inference(model):
{inference}    model.config.use_cache = True
    return model


def main(data, prompt):
    model = prepare_for_training(AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B"))
    Trainer(model=model, args=TrainingArguments("out"), train_dataset=data).train()
    model = prepare_for_inference(model)
    model.train()
    return model.generate(prompt, use_cache=True)
'''


@pytest.mark.parametrize(
    "inference, expected",
    [
        # The helper switches checkpointing off again: caching and generation are fine.
        ("    model.gradient_checkpointing_disable()\n", set()),
        ("    model.activation_checkpointing_disable()\n", set()),
        # It only turns caching back on: checkpointing is still on.
        ("", {18, 20}),
    ],
)
def test_a_helper_that_switches_checkpointing_off_again(inference, expected):
    report = lint_text(PREPARE.format(inference=inference))
    assert report.errors == []
    assert {f.line for f in report.findings if f.code == "CKPT004"} == expected


STEPS = '''from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


class SegmentedTrainer(Trainer):
    def {method}(self, model, inputs, *rest, **options):
{body}

def main(data):
    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
    SegmentedTrainer(model=model, args=TrainingArguments("out", {flag}), train_dataset=data).train()
'''
CACHED = "        head = model(input_ids=inputs['input_ids'], use_cache=True)\n        return model(input_ids=inputs['input_ids'], past_key_values=head.past_key_values).loss\n"


@pytest.mark.parametrize(
    "method, body, flag, expected",
    [
        # The Trainer calls its subclass's steps with the model it trains, in train mode.
        ("compute_loss", CACHED, "gradient_checkpointing=True", {6, 7}),
        ("training_step", CACHED, "activation_checkpointing=True", {6, 7}),
        ("training_step", "        return model.generate(inputs['input_ids'])\n", "gradient_checkpointing=True", {6}),
        # Correct: no checkpointing, or caching off.
        ("compute_loss", CACHED, "gradient_checkpointing=False", set()),
        ("compute_loss", "        return model(input_ids=inputs['input_ids'], use_cache=False).loss\n", "gradient_checkpointing=True", set()),
        # A method the Trainer does not call with its model.
        ("prediction_step", CACHED, "gradient_checkpointing=True", set()),
    ],
)
def test_a_trainer_subclass_step_gets_the_model_it_trains(method, body, flag, expected):
    report = lint_text(STEPS.format(method=method, body=body, flag=flag))
    assert report.errors == []
    assert {f.line for f in report.findings if f.code == "CKPT004"} == expected
    for finding in (f for f in report.findings if f.code == "CKPT004"):
        assert f"a Trainer that trains with checkpointing on and calls its `{method}` with the model in train mode" in finding.message


def test_the_model_taken_from_the_keywords_under_any_local_name():
    """`policy = kwargs["model"]`: the local's name does not matter (a renamed local found nothing)."""
    events = "    def on_epoch_begin(self, args, state, control, **kwargs):\n        policy = kwargs['model']\n        return policy.generate(self.prompts)\n"
    main = f"    Trainer(model=model, args={ARGS}, callbacks=[Sampler(prompts)]).train()\n"
    report = lint_text(CALLBACKS.format(events=events, main=main))
    assert [f.line for f in report.findings if f.code == "CKPT004"] == [11]
