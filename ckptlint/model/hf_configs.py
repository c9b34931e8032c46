"""transformers configs: which attributes set the dropout a model's checkpointed layers draw,
measured per model family, and what a config (or a model built from one) visibly sets.

Measured with transformers 5.23.0 and 4.57.1 on torch 2.13 (tests/runtime/test_hf_dropout_runtime.py):
with `gradient_checkpointing_kwargs={"preserve_rng_state": False}` and only the attribute below
non-zero, the gradients differ from the un-checkpointed model (relative 0.6-2.5) and the global RNG
stream moves; with every one of them at 0.0 they are identical. GPT-2's `embd_pdrop` is not listed:
it drops the embeddings, before the first checkpointed block (alone, the gradients are identical).
A family missing here is unknown, and so is a setting the code does not show.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Optional

from ckptlint.model.values import UNKNOWN, Const, HfConfig, Instance, Value, merge

if TYPE_CHECKING:
    import libcst as cst

# family -> {attribute the layers' dropout reads: default of the family's config class}
LAYER_DROPOUT: dict[str, dict[str, float]] = {
    "Bert": {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1},
    "GPT2": {"resid_pdrop": 0.1, "attn_pdrop": 0.1},
    "T5": {"dropout_rate": 0.1},
    "Llama": {"attention_dropout": 0.0},
    "Mistral": {"attention_dropout": 0.0},
    "Qwen2": {"attention_dropout": 0.0},
    "ViT": {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
}
MEASURED_ON = "transformers 5.23.0 and 4.57.1"
# The model classes of a family: its base model and heads (`BertModel`, `BertForMaskedLM`,
# `GPT2LMHeadModel`, `T5EncoderModel`); `Qwen2MoeForCausalLM` or `Llama4Model` are other families.
_FAMILY_CLASS = re.compile(r"^(?P<family>{})(?P<kind>Config|Model|LMHeadModel|EncoderModel|For[A-Z][A-Za-z]*)$".format("|".join(LAYER_DROPOUT)))
_CONSTRUCTORS = ("from_pretrained", "from_config")


def _named_class(qualname: str) -> tuple[str, Optional[str]]:
    """(class name, constructor method) of `transformers.BertConfig` or `transformers.BertModel.from_pretrained`."""
    parts = qualname.split(".")
    return (parts[-2], parts[-1]) if parts[-1] in _CONSTRUCTORS and len(parts) > 2 else (parts[-1], None)


def built_config(evaluate: Callable[[cst.BaseExpression], Value], qualname: str, node: cst.Call) -> Optional[HfConfig]:
    """The config a transformers call builds or builds its model from: `BertConfig(...)`,
    `BertConfig.from_pretrained(name, ...)`, `BertForMaskedLM(config)`, `AutoModel.from_config(config)`,
    `BertModel.from_pretrained(name, hidden_dropout_prob=0.0)` (None: not one the table knows)."""
    if not qualname.startswith("transformers."):
        return None
    name, method = _named_class(qualname)
    matched = _FAMILY_CLASS.match(name)
    family = matched.group("family") if matched else None
    positional = [a.value for a in node.args if a.keyword is None and not a.star]
    keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
    spread = any(a.star for a in node.args)
    if matched and matched.group("kind") == "Config":
        # A checkpoint's config, or one `**kwargs` may change, keeps no visible default.
        return _settings(evaluate, family, keywords, defaults=method is None and not spread)
    if method == "from_pretrained" and "config" not in keywords:
        return _settings(evaluate, family, keywords, defaults=False)
    if family is None and not name.startswith("Auto"):
        return None  # a model class the table does not know builds its layers its own way
    config_arg = keywords.get("config", positional[0] if positional and method != "from_pretrained" else None)
    config = evaluate(config_arg) if config_arg is not None else None
    if not (isinstance(config, Instance) and config.config is not None) or family not in (None, config.config.family):
        return None
    return config.config


def _settings(evaluate: Callable[[cst.BaseExpression], Value], family: Optional[str], keywords: dict[str, cst.BaseExpression], defaults: bool) -> Optional[HfConfig]:
    if family is None:
        return None
    attributes = LAYER_DROPOUT[family]
    return HfConfig(family, tuple((k, evaluate(v)) for k, v in keywords.items() if k in attributes), defaults)


def _is_config(instance: Instance) -> bool:
    matched = _FAMILY_CLASS.match(_named_class(instance.ctor)[0])
    return matched is not None and matched.group("kind") == "Config"


def is_transformers_model(value: Optional[Value]) -> bool:
    """A model of a family the table knows (`AutoModel.from_config(...)` too), built from a config the code shows."""
    return isinstance(value, Instance) and value.config is not None and not _is_config(value)


def with_setting(value: Optional[Value], attr: str, setting: Value, conditional: bool) -> Optional[Instance]:
    """`config.<attr> = setting` on a config the table knows: the config with it (None: nothing to record);
    `conditional`: under an `if`, so either value may hold after it. Setting a model's attribute or
    its `model.config` changes nothing: its layers copied the values when built."""
    if not isinstance(value, Instance) or value.config is None or attr not in LAYER_DROPOUT[value.config.family] or not _is_config(value):
        return None
    settings = dict(value.config.settings)
    if conditional:
        before = settings.get(attr, Const(LAYER_DROPOUT[value.config.family][attr]) if value.config.defaults else UNKNOWN)
        setting = merge(before, setting)
    kept = tuple((k, v) for k, v in settings.items() if k != attr)
    return replace(value, config=replace(value.config, settings=(*kept, (attr, setting))))


def layer_dropout(value: Optional[Value]) -> list[str]:
    """The dropout a transformers model's checkpointed layers visibly draw, one description per
    attribute (`hidden_dropout_prob=0.1 (the BertConfig default)`); empty when none is visibly non-zero."""
    if not isinstance(value, Instance) or value.config is None:
        return []
    config = value.config
    settings = dict(config.settings)
    drawn = []
    for attr, default in LAYER_DROPOUT[config.family].items():
        if attr in settings:
            setting, spelled = settings[attr], f"{attr}={getattr(settings[attr], 'value', None)!r}"
        elif config.defaults:
            setting, spelled = Const(default), f"{attr}={default!r} (the {config.family}Config default)"
        else:
            continue  # a checkpoint's value: unknown
        if isinstance(setting, Const) and isinstance(setting.value, (int, float)) and not isinstance(setting.value, bool) and setting.value > 0:
            drawn.append(spelled)
    return drawn
