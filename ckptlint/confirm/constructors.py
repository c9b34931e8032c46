"""Constructor arguments nobody gave: from the project's own construction sites first, then guessed
from the parameter names (`dim`/`hidden_size`/`channels` a small multiple of the heads, `heads` 2,
`depth`/`num_layers` 2, `vocab_size` 100, `dropout` as written), in a few consistent profiles.
A config object (`cfg`, `args`, `hparams`, `config`) is its annotated class built from its own
defaults (`cfg: EncoderConfig`, a dataclass), else a `GuessedConfig` whose attributes are guessed
the same way as the constructor reads them (`cfg.d_model`, `args.num_layers`).

No torch here: the guesses are plain values.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable, Iterator

# Sizes that agree with each other: dims divisible by the heads and by GroupNorm's groups.
PROFILES = ({"dim": 32, "heads": 2}, {"dim": 64, "heads": 4}, {"dim": 16, "heads": 2})
_UNSET = object()


def guess(parameter: str, profile: dict[str, int]) -> Any:
    """A plausible value for a constructor parameter named `parameter`; _UNSET for `config`-like
    parameters (built elsewhere) and names that say nothing about a size."""
    name = parameter.lower()
    dim, heads = profile["dim"], profile["heads"]
    if name in ("config", "cfg", "args", "hparams", "opt", "opts", "params", "conf") or name.endswith(("_config", "_cfg", "_args", "_hparams")):
        return _UNSET
    if "vocab" in name or name in ("num_tokens", "n_tokens", "ntoken", "ntokens", "num_embeddings", "n_vocab"):
        return 100
    if "class" in name or name in ("num_labels", "n_labels", "num_outputs", "n_outputs", "out_dim_classes"):
        return 10
    if name in ("in_channels", "in_ch", "in_chans", "input_channels", "channels_in", "image_channels", "img_channels", "num_channels", "c_in", "in_c"):
        return 3
    if "mel" in name:
        return 80
    if name in ("head_dim", "dim_head", "d_head", "head_size", "d_k", "d_v"):
        return dim // heads
    if name in ("heads", "nhead", "nheads", "n_head", "n_heads", "num_heads", "num_attention_heads", "attention_heads", "n_heads_attn"):
        return heads
    if any(word in name for word in ("depth", "layers", "num_blocks", "n_blocks", "res_blocks", "n_layer")):
        return 2
    if "group" in name:
        return 8
    if name in ("idx", "index", "layer_id", "block_id") or name.endswith(("_idx", "_index", "_number", "_num", "_no")):
        # A layer's position in its stack (`layer_number`): 1 is valid counted from 0 or from 1 in a depth-2 stack.
        return 1
    if "dropout" in name or "drop" in name or name in ("p", "p_drop"):
        return 0.1
    if "kernel" in name:
        return 3
    if "stride" in name:
        return 1
    if name in ("padding", "pad"):
        return 1
    if "patch" in name:
        return 4
    if name in ("image_size", "img_size", "resolution", "input_size", "image_res"):
        return 32
    if "expert" in name:
        return 4
    if name in ("top_k", "topk", "k"):
        return 2
    if any(word in name for word in ("ratio", "mult", "expansion")):
        return 4
    if any(word in name for word in ("max_len", "max_seq", "block_size", "seq_len", "context_length", "max_position", "n_positions", "max_length", "n_ctx")):
        return 64
    if any(word in name for word in ("ff", "intermediate", "mlp_dim", "inner", "hidden_dim")):
        return 2 * dim
    if "eps" in name:
        return 1e-5
    if name in ("lr", "learning_rate"):
        return 1e-3
    if name.startswith(("use_", "is_", "with_", "enable_")) or name in ("bias", "causal", "batch_first", "bidirectional"):
        return False
    return dim  # dim, d_model, hidden, channels, width, features, embed_dim, n_embd, ...


class GuessedConfig:
    """A config object nobody gave: each attribute (or key) read gets the value `guess` gives its
    name in this profile; `get(key, default)` keeps the project's default. Its repr lists what was
    read, so the evidence shows the sizes the model was built with."""

    def __init__(self, profile: dict[str, int]) -> None:
        object.__setattr__(self, "_profile", profile)
        object.__setattr__(self, "_read", {})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        read = object.__getattribute__(self, "_read")
        if name not in read:
            value = guess(name, object.__getattribute__(self, "_profile"))
            read[name] = GuessedConfig(object.__getattribute__(self, "_profile")) if value is _UNSET else value
        return read[name]

    def __getitem__(self, key: str) -> Any:
        return self.__getattr__(key)

    def get(self, key: str, default: Any = None) -> Any:
        read = object.__getattribute__(self, "_read")
        return read[key] if key in read else default

    def __repr__(self) -> str:
        read = object.__getattribute__(self, "_read")
        return "config(" + ", ".join(f"{k}={v!r}" for k, v in read.items()) + ")"


def _config_object(parameter: inspect.Parameter, hints: dict[str, Any], profile: dict[str, int]) -> Any:
    """The annotated config class built from its defaults, else a GuessedConfig."""
    annotation = hints.get(parameter.name)
    if isinstance(annotation, type) and annotation.__module__ not in ("builtins", "typing"):
        try:
            return annotation()
        except Exception:  # user code: a config class that needs arguments
            pass
    return GuessedConfig(profile)


def reads_a_guessed_config(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a constructor call gets a GuessedConfig (no code to show in a factory skeleton)."""
    return any(isinstance(v, GuessedConfig) for v in (*args, *kwargs.values()))


def shown_after_build(shown: str, cls: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """`shown` again once the model is built: a GuessedConfig lists only then what was read."""
    if not reads_a_guessed_config(args, kwargs):
        return shown
    how = shown.rsplit(" (", 1)[1] if " (" in shown else ""
    return _call_text(cls, args, kwargs) + (f" ({how}" if how else "")


def candidates(cls: Callable[..., Any], calls: list[dict[str, Any]]) -> Iterator[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """(shown, args, kwargs) to try for `cls(...)`: each of the project's construction sites, its
    missing required parameters guessed; then every required parameter guessed, per profile."""
    try:
        parameters = [p for p in inspect.signature(cls).parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):
        return
    try:
        hints = typing.get_type_hints(getattr(cls, "__init__", cls))
    except Exception:  # user annotations that do not evaluate
        hints = {}
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for call in calls:
        args, kwargs = tuple(call.get("args", ())), dict(call.get("kwargs", {}))
        filled = _fill(parameters, args, kwargs, PROFILES[0], hints)
        if (args, filled) not in seen:
            seen.append((args, filled))
            yield f"{_call_text(cls, args, filled)} (as the project builds it)", args, filled
    for profile in PROFILES:
        filled = _fill(parameters, (), {}, profile, hints)
        if ((), filled) not in seen:
            seen.append(((), filled))
            yield f"{_call_text(cls, (), filled)} (sizes guessed from the parameter names)", (), filled


def _fill(parameters: list[inspect.Parameter], args: tuple[Any, ...], kwargs: dict[str, Any], profile: dict[str, int], hints: dict[str, Any]) -> dict[str, Any]:
    filled = dict(kwargs)
    for index, parameter in enumerate(parameters):
        if index < len(args) and parameter.kind is not parameter.KEYWORD_ONLY:
            continue
        if parameter.name in filled or parameter.default is not parameter.empty:
            continue
        value = guess(parameter.name, profile)
        filled[parameter.name] = _config_object(parameter, hints, profile) if value is _UNSET else value
    return filled


def _call_text(cls: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"{getattr(cls, '__qualname__', cls)}({', '.join(parts)})"
