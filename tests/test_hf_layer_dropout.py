"""CKPT002 for transformers' own checkpointing: `preserve_rng_state=False` in its kwargs is reported
when the model's layers visibly draw dropout, from the measured table in ckptlint/model/hf_configs.py
(tests/runtime/test_hf_dropout_runtime.py), and stays silent when the dropout is zero or unknown."""

from __future__ import annotations

import textwrap

import pytest
from conftest import lint_folder, lint_text

IMPORTS = (
    "from transformers import (AutoModelForCausalLM, BertConfig, BertModel, GPT2Config, GPT2Model, LlamaConfig, LlamaForCausalLM,"
    " OPTConfig, OPTForCausalLM, T5Config, T5Model, Trainer, TrainingArguments)\n"
)
NO_REPLAY = '{"use_reentrant": False, "preserve_rng_state": False}'
ENABLE = f"model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={NO_REPLAY})"


def ckpt002_lines(body: str, prelude: str = "") -> set[int]:
    """Lines (counted in `body`) of the CKPT002 findings of `body`, run as a function after `prelude`."""
    head = IMPORTS + textwrap.dedent(prelude) + "\n\ndef build(flag):\n"
    report = lint_text(head + textwrap.indent(textwrap.dedent(body), "    "))
    assert report.errors == []
    return {f.line - head.count("\n") for f in report.findings if f.code == "CKPT002"}


@pytest.mark.parametrize(
    "body, expected",
    [
        (f"model = BertModel(BertConfig())\n{ENABLE}\n", {2}),
        (f"model = GPT2Model(GPT2Config(attn_pdrop=0.0))\n{ENABLE}\n", {2}),
        (f"model = BertModel(BertConfig()).to('cpu')\nmodel = model.train()\n{ENABLE}\n", {3}),  # resid_pdrop keeps its 0.1
        (f"model = T5Model(T5Config())\n{ENABLE}\n", {2}),
        (f"config = LlamaConfig()\nconfig.attention_dropout = 0.1\nmodel = LlamaForCausalLM(config)\n{ENABLE}\n", {4}),
        (f"model = AutoModelForCausalLM.from_config(LlamaConfig(attention_dropout=0.05))\n{ENABLE}\n", {2}),
        (f"model = AutoModelForCausalLM.from_pretrained('x', config=BertConfig())\n{ENABLE}\n", {2}),
        (f"model = BertModel.from_pretrained('bert-base-uncased', attention_probs_dropout_prob=0.1)\n{ENABLE}\n", {2}),
        (f"config = BertConfig.from_pretrained('bert-base-uncased', hidden_dropout_prob=0.3)\nmodel = BertModel(config)\n{ENABLE}\n", {3}),
        # Zero: defaults of 0.0, every layer attribute set to zero, only GPT-2's embedding dropout.
        (f"model = LlamaForCausalLM(LlamaConfig())\n{ENABLE}\n", set()),
        (f"model = BertModel(BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0))\n{ENABLE}\n", set()),
        (f"model = GPT2Model(GPT2Config(resid_pdrop=0.0, attn_pdrop=0.0, embd_pdrop=0.1))\n{ENABLE}\n", set()),
        # Changing the config of a built model changes nothing: its layers copied the values.
        (f"model = LlamaForCausalLM(LlamaConfig())\nmodel.config.attention_dropout = 0.1\n{ENABLE}\n", set()),
        # Unknown: a checkpoint's config, a value set on one branch only, a value from elsewhere, a family outside the table.
        (f"model = AutoModelForCausalLM.from_pretrained('gpt2')\n{ENABLE}\n", set()),
        (f"model = BertModel.from_pretrained('bert-base-uncased', hidden_dropout_prob=0.0)\n{ENABLE}\n", set()),
        (f"config = LlamaConfig()\nif flag:\n    config.attention_dropout = 0.1\nmodel = LlamaForCausalLM(config)\n{ENABLE}\n", set()),
        (f"model = BertModel(BertConfig(hidden_dropout_prob=flag, attention_probs_dropout_prob=0.0))\n{ENABLE}\n", set()),
        (f"model = BertModel(BertConfig(**flag))\n{ENABLE}\n", set()),
        (f"model = OPTForCausalLM(OPTConfig(dropout=0.1))\n{ENABLE}\n", set()),
        (f"model = BertModel(GPT2Config())\n{ENABLE}\n", set()),
        # The default preserve_rng_state=True replays the masks.
        ('model = BertModel(BertConfig())\nmodel.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})\n', set()),
    ],
)
def test_layer_dropout_with_preserve_rng_state_false(body, expected):
    assert ckpt002_lines(body) == expected


def test_a_config_built_by_a_helper_is_followed():
    prelude = """
        def tiny_config():
            return BertConfig(num_hidden_layers=2)
    """
    assert ckpt002_lines(f"model = BertModel(tiny_config())\n{ENABLE}\n", prelude) == {2}


def test_trainer_arguments_report_the_kwargs_entry():
    body = f"""
        model = BertModel(BertConfig())
        args = TrainingArguments(
            output_dir="out",
            gradient_checkpointing=True,
            gradient_checkpointing_kwargs={NO_REPLAY},
        )
        Trainer(model=model, args=args).train()
    """
    assert ckpt002_lines(body) == {6}
    assert ckpt002_lines(body.replace("BertConfig()", "LlamaConfig()").replace("BertModel", "LlamaForCausalLM")) == set()


def test_a_shared_kwargs_dict_is_reported_at_the_call_and_not_fixed():
    report = lint_text(IMPORTS + f"KWARGS = {NO_REPLAY}\n\n\ndef build():\n    model = BertModel(BertConfig())\n    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=KWARGS)\n")
    (finding,) = [f for f in report.findings if f.code == "CKPT002"]
    assert finding.line == 7 and not finding.fixes


RUN_TABLE = """
RUN = {
    "model": {"n_embd": 32, "n_layer": 2, "resid_pdrop": %s, "attn_pdrop": %s, "embd_pdrop": 0.1},
    "train": {"activation_checkpointing": True, "activation_checkpointing_kwargs": {"use_reentrant": False, "preserve_rng_state": False}},
}
"""


@pytest.mark.parametrize(
    "dropout, body, expected",
    [
        # A run table spread into the config and into the TrainingArguments (`**RUN["model"]`, `**RUN["train"]`):
        # reported at the table's entry, spelled in this file 4 lines above the function.
        ("0.1", "args = TrainingArguments(output_dir='out', **RUN['train'])\nTrainer(model=GPT2Model(GPT2Config(**RUN['model'])), args=args).train()\n", {-4}),
        ("0.1", f"model = GPT2Model(GPT2Config(**RUN['model']))\n{ENABLE}\n", {2}),
        # Zero layer dropout in the table; a table that is no literal says nothing.
        ("0.0", "args = TrainingArguments(output_dir='out', **RUN['train'])\nTrainer(model=GPT2Model(GPT2Config(**RUN['model'])), args=args).train()\n", set()),
        ("0.1", f"model = GPT2Model(GPT2Config(**flag))\n{ENABLE}\n", set()),
    ],
)
def test_a_literal_run_table_spread_into_config_and_arguments(dropout, body, expected):
    assert ckpt002_lines(body, RUN_TABLE % (dropout, dropout)) == expected


def test_a_run_table_of_another_module(project):
    """config.py holds the table; the finding is at the `**` that spreads it, with no fix (the table
    configures more than this call)."""
    sft = (
        IMPORTS + "from config import RUN\n\n\ndef build_trainer(out_dir, data):\n"
        "    args = TrainingArguments(output_dir=out_dir, **RUN['train'])\n"
        "    return Trainer(model=GPT2Model(GPT2Config(**RUN['model'])), args=args, train_dataset=data)\n"
    )
    root = project({"config.py": RUN_TABLE % ("0.1", "0.1"), "sft.py": sft})
    report = lint_folder(root)
    assert report.errors == []
    [finding] = [f for f in report.findings if f.code == "CKPT002"]
    assert (finding.path.rsplit("/", 1)[-1], finding.line, finding.fixes) == ("sft.py", 6, ())
