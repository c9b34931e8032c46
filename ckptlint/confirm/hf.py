"""transformers models without the Hub: tiny configs, `from_pretrained` offline (tokenizers too),
and their inputs.

Runs in the confirm child only. `from_pretrained(name, **kwargs)` cannot download anything there;
`offline_from_pretrained()` makes it build the same class from a tiny instance of its
`config_class` (for an Auto class, the config whose model type the name spells), or from a copy
of the config object passed as `config=`, with the keyword arguments that are config fields applied (`use_cache=True`, `num_labels=3`), and records
what it built for the evidence.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
from typing import Any, Iterator, Optional

import torch

from ckptlint.confirm import absent_packages

# Small values for the width fields of a transformers config whose defaults are large. The depth
# stays the family's default (12 ViT or BERT layers, 32 Llama layers, all narrow): code written for
# the real checkpoint names its layers by index (`"encoder.layer.11" not in name`), and a 2-layer
# stand-in would freeze a different set of them.
TINY_CONFIG = {
    "hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2,
    "num_key_value_heads": 2, "head_dim": 8, "n_embd": 16, "n_head": 2, "n_inner": 32,
    "d_model": 16, "d_ff": 32, "num_heads": 2, "encoder_attention_heads": 2, "decoder_attention_heads": 2,
    "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "vocab_size": 128, "max_position_embeddings": 64,
    "n_positions": 64, "image_size": 32, "patch_size": 8,
}  # fmt: skip
# from_pretrained keywords that load or place weights: meaningless for a tiny random model.
_LOADING_KEYWORDS = frozenset({
    "torch_dtype", "dtype", "device_map", "low_cpu_mem_usage", "trust_remote_code", "revision", "cache_dir",
    "token", "use_auth_token", "local_files_only", "force_download", "attn_implementation", "quantization_config",
    "load_in_8bit", "load_in_4bit", "max_memory", "offload_folder", "subfolder", "variant", "use_safetensors",
    "ignore_mismatched_sizes", "output_loading_info", "from_tf", "from_flax", "state_dict", "config",
})  # fmt: skip
SEQUENCE = 8


# Token ids a script makes up for a Hub model (`torch.randint(0, 1000, ...)`, a special token's id)
# index the real vocabulary, and its tokenizer pads to the real length (CLIP's 77): a stand-in for a
# named checkpoint keeps those sizes, up to these.
_HUB_SIZE_CAPS = {"vocab_size": 65536, "max_position_embeddings": 4096, "n_positions": 4096}


def _hub_sizes(default: Any) -> dict[str, int]:
    kept = {key: getattr(default, key, None) for key in _HUB_SIZE_CAPS}
    return {key: min(size, _HUB_SIZE_CAPS[key]) for key, size in kept.items() if isinstance(size, int) and not isinstance(size, bool) and size > 0}


def tiny_config(config_class: type, **overrides: Any) -> Any:
    """`config_class()`, with size fields whose defaults are large shrunk (a 7B config stays tiny),
    then `overrides` applied."""
    default = config_class()
    small = {
        key: value
        for key, value in TINY_CONFIG.items()
        if isinstance(getattr(default, key, None), int) and not isinstance(getattr(default, key), bool) and getattr(default, key) > value
    }
    return config_class(**{**small, **overrides}) if small or overrides else default


def is_pretrained(model: Any) -> bool:
    base = getattr(sys.modules.get("transformers.modeling_utils"), "PreTrainedModel", None)
    return base is not None and isinstance(model, base)


def is_pretrained_class(cls: type) -> bool:
    base = getattr(sys.modules.get("transformers.modeling_utils"), "PreTrainedModel", None)
    return base is not None and issubclass(cls, base) and cls is not base


def _pretrained_inside(model: Any) -> Optional[Any]:
    """The transformers model itself, or the one a PEFT wrapper (`get_peft_model`) holds."""
    if is_pretrained(model):
        return model
    get_base_model = getattr(model, "get_base_model", None)
    base = get_base_model() if callable(get_base_model) else None
    return base if is_pretrained(base) else None


def _config_class_for(cls: type, name: Any) -> Optional[type]:
    config_class = getattr(cls, "config_class", None)
    if isinstance(config_class, type):
        return config_class
    # An Auto class: the model type spelled in the checkpoint name ("meta-llama/Llama-3.2-1B" -> llama).
    from transformers import CONFIG_MAPPING

    spelled = str(name).lower().replace("-", "").replace("_", "")
    types = sorted(CONFIG_MAPPING.keys(), key=len, reverse=True)
    model_type = next((t for t in types if t.replace("-", "").replace("_", "") in spelled), None)
    return CONFIG_MAPPING[model_type] if model_type else None


@contextlib.contextmanager
def offline_from_pretrained(built: list[str]) -> Iterator[None]:
    """While active, `SomeModel.from_pretrained(name, **kwargs)` returns `SomeModel` built from a
    tiny config; `built` receives one description per model built this way."""
    if "transformers" not in sys.modules or absent_packages.is_placeholder(sys.modules["transformers"]):
        yield
        return
    # transformers imports lazily (`from transformers import AutoModel` loads neither
    # modeling_utils nor the tokenizer base), and each Auto class carries its own copy of
    # from_pretrained (auto_class_update), so every one of them is patched.
    import transformers.modeling_utils as modeling_utils
    import transformers.models.auto.auto_factory as auto
    import transformers.models.auto.modeling_auto  # noqa: F401  (defines the Auto classes)
    import transformers.models.auto.tokenization_auto  # noqa: F401  (patched in _offline_tokenizers, even if the code imports it later)
    import transformers.tokenization_utils_base  # noqa: F401  (patched in _offline_tokenizers)

    base = modeling_utils.PreTrainedModel
    config_base = sys.modules["transformers"].PretrainedConfig
    auto_base = getattr(auto, "_BaseAutoModelClass", None)
    owners = [base, *(_subclasses(auto_base) if auto_base is not None else ())]
    originals = [(owner, owner.__dict__["from_pretrained"]) for owner in owners if "from_pretrained" in owner.__dict__]

    saved = dict(originals)

    def from_pretrained(cls: type, name: Any = None, *args: Any, **kwargs: Any) -> Any:
        given = kwargs.get("config")
        if not isinstance(given, config_base) and isinstance(name, (str, os.PathLike)) and os.path.isfile(os.path.join(name, "config.json")):
            # A checkpoint on this machine (saved by the project or an example): nothing to download.
            original = next(saved[owner] for owner in cls.__mro__ if owner in saved)
            return original.__func__(cls, name, *args, **kwargs)
        if isinstance(given, config_base):
            # A config object the code built (`config=config`): its settings are the ones it trains with.
            config = copy.deepcopy(given)
            applied = {k: v for k, v in kwargs.items() if k not in _LOADING_KEYWORDS and hasattr(config, k)}
            for key, value in applied.items():
                setattr(config, key, value)
            config_class = type(config)
        else:
            config_class = _config_class_for(cls, name)
            if config_class is None:
                raise OSError(f"--confirm cannot download {name!r} and cannot tell its model type from the name")
            fields = config_class()
            applied = {k: v for k, v in kwargs.items() if k not in _LOADING_KEYWORDS and hasattr(fields, k)}
            config = tiny_config(config_class, **{**_hub_sizes(fields), **applied})
        if auto_base is not None and issubclass(cls, auto_base):
            model = cls.from_config(config)
        else:
            model = cls(config)
        model.eval()  # as from_pretrained leaves it
        shown = ", ".join(f"{k}={v!r}" for k, v in applied.items())
        source = f"the {config_class.__name__} passed as config=" if isinstance(given, config_base) else f"a tiny {config_class.__name__}"
        built.append(
            f"{cls.__name__}.from_pretrained({name!r}) built {type(model).__name__} from {source}" + (f" with {shown}" if shown else "") + " (no download)"
        )
        return model

    for owner, _ in originals:
        owner.from_pretrained = classmethod(from_pretrained)
    originals += _offline_tokenizers(built)
    try:
        yield
    finally:
        for owner, original in originals:
            owner.from_pretrained = original


def _subclasses(cls: type) -> list[type]:
    """`cls` and every subclass of it defined so far."""
    found, stack = [], [cls]
    while stack:
        current = stack.pop()
        if current not in found:
            found.append(current)
            stack.extend(current.__subclasses__())
    return found


def _offline_tokenizers(built: list[str]) -> list[tuple[type, Any]]:
    """Make the tokenizer classes' `from_pretrained` return a character-level tokenizer (below the
    tiny vocabulary); the (class, original) pairs to restore."""
    patched: list[tuple[type, Any]] = []
    for module_name, class_name in (
        ("transformers.tokenization_utils_base", "PreTrainedTokenizerBase"),
        ("transformers.models.auto.tokenization_auto", "AutoTokenizer"),
    ):
        owner = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(owner, type) and "from_pretrained" in owner.__dict__:
            patched.append((owner, owner.__dict__["from_pretrained"]))

    def from_pretrained(cls: type, name: Any = None, *args: Any, **kwargs: Any) -> Any:
        built.append(f"{cls.__name__}.from_pretrained({name!r}) built a character-level tokenizer of {len(CHARACTERS)} tokens (no download)")
        return character_tokenizer()

    for owner, _ in patched:
        owner.from_pretrained = classmethod(from_pretrained)
    return patched


_SPECIAL_TOKENS = {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}
CHARACTERS = [*_SPECIAL_TOKENS.values(), *(chr(code) for code in range(32, 127))]


def character_tokenizer() -> Any:
    """A tokenizer with one token per printable ASCII character (and four special tokens): ids stay
    below TINY_CONFIG's vocabulary, so the tiny models embed whatever text a script tokenizes."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(vocab={token: i for i, token in enumerate(CHARACTERS)}, merges=[], unk_token="<unk>"))
    tokenizer.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, **_SPECIAL_TOKENS)


def model_inputs(model: Any, keywords: list[str], device: str) -> Optional[tuple[dict[str, Any], str]]:
    """Keyword inputs for a transformers model (or a PEFT wrapper of one): its main input (token ids below the vocabulary,
    or pixel values of the configured size), plus the keywords the project passes that can be
    synthesised (`attention_mask`, `labels`). None when the model is not a transformers model."""
    pretrained = _pretrained_inside(model)
    if pretrained is None:
        return None
    config = pretrained.config
    generator = torch.Generator().manual_seed(1234)
    main = getattr(pretrained, "main_input_name", "input_ids")
    batch: dict[str, Any] = {}
    if main == "pixel_values":
        channels, size = getattr(config, "num_channels", 3), getattr(config, "image_size", 32)
        batch[main] = torch.randn(2, channels, size, size, generator=generator)
    elif main == "input_ids":
        batch[main] = torch.randint(0, getattr(config, "vocab_size", 100), (2, SEQUENCE), generator=generator)
    else:
        return None
    if "attention_mask" in keywords and main == "input_ids":
        batch["attention_mask"] = torch.ones(2, SEQUENCE, dtype=torch.long)
    if "labels" in keywords:
        if main == "input_ids":
            batch["labels"] = batch[main].clone()
        else:
            batch["labels"] = torch.randint(0, max(1, getattr(config, "num_labels", 2)), (2,), generator=generator)
    batch = {k: v.to(device) for k, v in batch.items()}
    shown = ", ".join(f"{k}={str(v.dtype).replace('torch.', '')}{list(v.shape)}" for k, v in batch.items())
    return batch, shown
