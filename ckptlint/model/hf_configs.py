"""transformers configs: which attributes set the dropout a model's checkpointed layers draw,
measured per model family, and what a config (or a model built from one) visibly sets.

Measured with transformers 5.23.0 and 4.57.1 on torch 2.13 (tests/runtime/test_hf_dropout_runtime.py):
with `gradient_checkpointing_kwargs={"preserve_rng_state": False}` and only the attribute below
non-zero, the gradients differ from the un-checkpointed model (relative 0.6-2.5) and the global RNG
stream moves; with every one of them at 0.0 they are identical. GPT-2's `embd_pdrop` is not listed:
it drops the embeddings, before the first checkpointed block (alone, the gradients are identical).
A family missing here is unknown, and so is a setting the code does not show.

Whatever the family, a config also carries `use_cache`, which every transformers model reads:
a config with `use_cache=True` handed to a model (`from_pretrained(name, config=config)`,
`LlamaForCausalLM(config)`, `AutoModelForCausalLM.from_config(config)`) is a model that caches
(CKPT004). Only a setting the code spells counts: a class default or a checkpoint's value is unknown.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Optional

from ckptlint.model.values import UNKNOWN, Const, DictLit, HfConfig, Instance, Value, merge

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
# Model classes of any family: `AutoModelForCausalLM`, `GPTNeoXForCausalLM`, `T5EncoderModel`.
_MODEL_CLASS = re.compile(r"^(AutoModel[A-Za-z]*|[A-Z][A-Za-z0-9]*(Model|For[A-Z][A-Za-z]*))$")
CACHE = "use_cache"


def _named_class(qualname: str) -> tuple[str, Optional[str]]:
    """(class name, constructor method) of `transformers.BertConfig` or `transformers.BertModel.from_pretrained`."""
    parts = qualname.split(".")
    return (parts[-2], parts[-1]) if parts[-1] in _CONSTRUCTORS and len(parts) > 2 else (parts[-1], None)


def built_config(evaluate: Callable[[cst.BaseExpression], Value], qualname: str, node: cst.Call) -> Optional[HfConfig]:
    """The config a transformers call builds or builds its model from: `BertConfig(...)`,
    `AutoConfig.from_pretrained(name, use_cache=True)`, `BertForMaskedLM(config)`,
    `AutoModel.from_config(config)`, `BertModel.from_pretrained(name, hidden_dropout_prob=0.0)`
    (None: not a config or model, or built from a config the code does not show)."""
    if not qualname.startswith("transformers."):
        return None
    name, method = _named_class(qualname)
    matched = _FAMILY_CLASS.match(name)
    family = matched.group("family") if matched else None
    keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
    if name.endswith("Config"):
        # A checkpoint's config, or one `**kwargs` may change, keeps no visible default; a literal
        # table spread into it (`GPT2Config(**RUN["model"])`) is as good as its keywords.
        spread = [evaluate(a.value) if a.star == "**" else None for a in node.args if a.star]
        tables = [t for t in spread if isinstance(t, DictLit) and t.complete]
        found = _settings(evaluate, family, keywords, defaults=family is not None and method is None and len(tables) == len(spread))
        attributes = _tracked(family)
        given = tuple((k, v) for t in tables for k, v in t.entries.items() if k in attributes and k not in keywords)
        return replace(found, settings=(*given, *found.settings)) if given else found
    if not _MODEL_CLASS.match(name):
        return None
    if method == "from_pretrained" and "config" not in keywords:
        return _settings(evaluate, family, keywords, defaults=False)
    handed = config_argument(node, method)
    config = evaluate(handed.value) if handed is not None else None
    if not (isinstance(config, Instance) and config.config is not None):
        return None
    if family is None and name.startswith("Auto") or family == config.config.family:
        return config.config
    # A model class the table does not know builds its layers its own way: only the cache is known.
    return HfConfig(None, tuple((k, v) for k, v in config.config.settings if k == CACHE), defaults=False)


def built_elsewhere(ctor: str, caches: bool) -> Optional[HfConfig]:
    """What the code shows of the transformers config a project function in another file builds and
    returns: whether its `use_cache` is visibly True (the index's literal reading of that function),
    nothing else. (A model such a function returns stays the function's object: what the project does
    to it is keyed on the function.)"""
    name, _ = _named_class(ctor)
    if not (ctor.startswith("transformers.") and name.endswith("Config")):
        return None
    matched = _FAMILY_CLASS.match(name)
    return HfConfig(matched.group("family") if matched else None, ((CACHE, Const(True)),) if caches else (), defaults=False)


def config_argument(node: cst.Call, method: Optional[str]) -> Optional[cst.Arg]:
    """The argument handing a model its config: `config=` or, but for `from_pretrained`, the first positional."""
    keyword = next((a for a in node.args if a.keyword is not None and a.keyword.value == "config"), None)
    if keyword is not None or method == "from_pretrained":
        return keyword
    return next((a for a in node.args if a.keyword is None and not a.star), None)


def _tracked(family: Optional[str]) -> frozenset[str]:
    return frozenset({*LAYER_DROPOUT.get(family or "", {}), CACHE})


def tracked_settings(value: Optional[Value]) -> frozenset[str]:
    """The attributes of a transformers config the analysis follows (empty: not a config)."""
    return _tracked(value.config.family) if is_config(value) else frozenset()  # type: ignore[union-attr]


def _settings(evaluate: Callable[[cst.BaseExpression], Value], family: Optional[str], keywords: dict[str, cst.BaseExpression], defaults: bool) -> HfConfig:
    attributes = _tracked(family)
    return HfConfig(family, tuple((k, evaluate(v)) for k, v in keywords.items() if k in attributes), defaults)


def is_config(value: Optional[Value]) -> bool:
    """A transformers config (`LlamaConfig(...)`, `AutoConfig.from_pretrained(...)`), not a model built from one."""
    return isinstance(value, Instance) and value.config is not None and _named_class(value.ctor)[0].endswith("Config")


def is_transformers_model(value: Optional[Value]) -> bool:
    """A transformers model (`AutoModel.from_config(...)` too) built from a config the code shows."""
    return isinstance(value, Instance) and value.config is not None and not is_config(value)


def caches(value: Optional[Value]) -> bool:
    """A transformers model whose config visibly sets `use_cache=True`."""
    return is_transformers_model(value) and dict(value.config.settings).get(CACHE) == Const(True)  # type: ignore[union-attr]


def with_setting(value: Optional[Value], attr: str, setting: Value, conditional: bool) -> Optional[Instance]:
    """`config.<attr> = setting` (`setattr`, `config.update(...)`) on a config: the config with it (None: nothing to record);
    `conditional`: under an `if`, so either value may hold after it. Setting a model's attribute or
    its `model.config` changes nothing: its layers copied the values when built."""
    if not is_config(value) or attr not in _tracked(value.config.family):  # type: ignore[union-attr]
        return None
    settings = dict(value.config.settings)
    if conditional:
        default = LAYER_DROPOUT.get(value.config.family or "", {}).get(attr)
        before = settings.get(attr, Const(default) if value.config.defaults and default is not None else UNKNOWN)
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
    for attr, default in LAYER_DROPOUT.get(config.family or "", {}).items():
        if attr in settings:
            setting, spelled = settings[attr], f"{attr}={getattr(settings[attr], 'value', None)!r}"
        elif config.defaults:
            setting, spelled = Const(default), f"{attr}={default!r} (the {config.family}Config default)"
        else:
            continue  # a checkpoint's value: unknown
        if isinstance(setting, Const) and isinstance(setting.value, (int, float)) and not isinstance(setting.value, bool) and setting.value > 0:
            drawn.append(spelled)
    return drawn
