"""CKPT004 through transformers configs: a config that sets `use_cache=True` handed to a model
trained with gradient checkpointing (measured in tests/runtime/test_hf_config_cache_runtime.py), and
what undoes it or leaves it unknown."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner
from conftest import lint_text

from ckptlint.cli import main

ENABLE = 'model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})'
LOAD = "model = AutoModelForCausalLM.from_pretrained(name, config=config)"


def findings(body: str, transformers: str = "5.23") -> set[tuple[int, str]]:
    source = "from transformers import AutoConfig, AutoModelForCausalLM, GPTNeoXConfig, GPTNeoXForCausalLM\n\n\ndef finetune(name, flag, other):\n"
    report = lint_text(source + textwrap.indent(textwrap.dedent(body), "    "), transformers=transformers)
    assert report.errors == []
    return {(f.line - 4, f.code) for f in report.findings}


@pytest.mark.parametrize(
    "body, expected",
    [
        (f"config = AutoConfig.from_pretrained(name, use_cache=True)\n{LOAD}\n{ENABLE}\n", {(2, "CKPT004")}),
        (f"config = AutoConfig.from_pretrained(name)\nconfig.update(use_cache=True)\n{LOAD}\n{ENABLE}\n", {(3, "CKPT004")}),
        # A family the dropout table does not know still reads `use_cache`.
        (f"config = GPTNeoXConfig(use_cache=True)\nmodel = GPTNeoXForCausalLM(config)\n{ENABLE}\n", {(2, "CKPT004")}),
        (f"model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(name, use_cache=True))\n{ENABLE}\n", {(1, "CKPT004")}),
        (f"config = AutoConfig.from_pretrained(name, use_cache=True)\nmodel = AutoModelForCausalLM.from_config(config).to('cpu').train()\n{ENABLE}\n", {(2, "CKPT004")}),
        # Checkpointing switched on after the model is built, `use_cache` set later: still on while training.
        (f"{ENABLE.replace('model.', 'other.')}\nconfig = AutoConfig.from_pretrained(name)\nsetattr(config, 'use_cache', True)\n{LOAD}\n{ENABLE}\n", {(4, "CKPT004")}),
        # Undone before training, or not known to be True.
        (f"config = AutoConfig.from_pretrained(name, use_cache=True)\nconfig.use_cache = False\n{LOAD}\n{ENABLE}\n", set()),
        (f"config = AutoConfig.from_pretrained(name, use_cache=True)\nconfig.update(other)\n{LOAD}\n{ENABLE}\n", set()),
        (f"config = AutoConfig.from_pretrained(name, use_cache=True)\nsetattr(config, other, False)\n{LOAD}\n{ENABLE}\n", set()),
        (f"config = AutoConfig.from_pretrained(name)\nif flag:\n    config.use_cache = True\n{LOAD}\n{ENABLE}\n", set()),
        (f"config = AutoConfig.from_pretrained(name, use_cache=True)\n{LOAD}\n{ENABLE}\nmodel.config.update({{'use_cache': False}})\n", set()),
        (f"model = AutoModelForCausalLM.from_pretrained(name, use_cache=True)\n{ENABLE}\nmodel.config.use_cache = flag\n", set()),
        (f"config = AutoConfig.from_pretrained(name, use_cache=True)\nmodel = AutoModelForCausalLM.from_pretrained(name, config=other)\n{ENABLE}\n", set()),
        # A config from elsewhere: its `use_cache` is the checkpoint's, unknown here.
        (f"config = AutoConfig.from_pretrained(name)\n{LOAD}\n{ENABLE}\n", set()),
        # No checkpointing: the cache is kept.
        (f"config = AutoConfig.from_pretrained(name, use_cache=True)\n{LOAD}\nmodel.train()\n", set()),
    ],
)
def test_config_cache(body, expected):
    assert findings(body) == expected


def test_config_cache_points_at_the_config_handed_over():
    """Not at a method chained on the model (`.to(...)`), which returns the same model."""
    source = f"from transformers import AutoConfig, AutoModelForCausalLM\n\n\ndef finetune(name):\n    config = AutoConfig.from_pretrained(name, use_cache=True)\n    model = AutoModelForCausalLM.from_config(config).to('cpu')\n    {ENABLE}\n"
    (finding,) = lint_text(source).findings
    assert (finding.line, finding.column) == (6, 46) and "built from `config`" in finding.message


def test_config_cache_under_4x_semantics():
    """transformers 4.57.6 turns the cache off the same way (measured)."""
    assert findings(f"config = AutoConfig.from_pretrained(name, use_cache=True)\n{LOAD}\n{ENABLE}\n", "4.57") == {(2, "CKPT004")}


CONFIGS = '''
from transformers import LlamaConfig


def cached_llama():
    return LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, use_cache=True)


def uncached_llama():
    config = LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4)
    config.use_cache = False
    return config
'''
TRAIN = '''
from transformers import LlamaForCausalLM

from .configs import cached_llama, uncached_llama


def train(ids):
    model = LlamaForCausalLM(cached_llama())
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    model(input_ids=ids, labels=ids).loss.backward()


def train_uncached(ids):
    model = LlamaForCausalLM(uncached_llama())
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    model(input_ids=ids, labels=ids).loss.backward()
'''


@pytest.mark.parametrize("paths", [["."], ["pkg/train.py"]])
def test_a_config_a_helper_in_another_module_builds_with_caching_on(project, paths):
    project({"pyproject.toml": '[project]\nname = "pkg"\n', "pkg/__init__.py": "", "pkg/configs.py": CONFIGS, "pkg/train.py": TRAIN})
    result = CliRunner().invoke(main, [*paths, "--format", "json", "--no-cache", "--transformers-version", "5.23"])
    findings = json.loads(result.stdout)["findings"]
    assert {(f["path"], f["line"], f["code"]) for f in findings} == {("pkg/train.py", 8, "CKPT004")}
