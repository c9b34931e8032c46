"""Whether freezing leaves the first checkpointed layer of a transformers model with an input that
cannot require grad: what CKPT005 needs for a library model. It depends on the architecture: a
Llama's layers are fed by `embed_tokens` alone, GPT-2's by `wte` plus the position table `wpe`,
BERT's and ViT's by their whole `embeddings` block (positions, LayerNorm, class token). Freezing the
head, the final norm or some layers never does it.

The facts come from scripts/measure_hf_upstream.py (model/hf_upstream.py). For an Auto class or an
unknown one, every measured architecture that has all the paths the code freezes must agree. A
project's own subclass of PreTrainedModel is not measured: freezing it whole or in part counts.
"""

from __future__ import annotations

import re
from typing import Optional

from ckptlint.index import INPUT_EMBEDDINGS_CALL, Freeze, names_match, within
from ckptlint.model.hf_upstream import CLASSES, FAMILIES

BASE_MODEL = "base_model"
# What a class name adds to its architecture's name: `Llama` of `LlamaForCausalLM`, `GPT2` of `GPT2LMHeadModel`.
_HEAD = re.compile(r"(LMHeadModel|Model|For[A-Z][A-Za-z]*)$")
_NAME_WORDS = re.compile(r"[/\-_\s]+")


def inputs_frozen(freeze: Freeze, model_class: Optional[str], holder: str = "", checkpoint: Optional[str] = None) -> bool:
    """Whether, after `freeze`, no parameter that feeds the first checkpointed layer of a model of
    `model_class` (a class name; None or an Auto class: unknown) can require grad. `holder`: the
    model is the submodule at that path of the object `freeze` applies to (`self.model`).
    `checkpoint`: the name an Auto class loaded it from, which may spell its architecture."""
    if holder:
        freeze = _below(freeze, holder)
        if freeze is None:
            return False
    name = (model_class or "").rsplit(".", 1)[-1]
    named = _architecture_classes(name, checkpoint) if name.startswith("Auto") and checkpoint else []
    if name in CLASSES or named:
        families = [FAMILIES[CLASSES[c]] for c in named or [name]]
    elif name and not name.startswith("Auto"):
        return freeze.everything or bool(freeze.attrs)  # a project's own model: its parts are not measured
    else:
        families = [f for f in FAMILIES if all(_has_path(f[3], _resolved(path, f)) for path in (*freeze.paths, *freeze.unfrozen_paths))]
    return bool(families) and all(_family_inputs_frozen(freeze, family) for family in families)


def _architecture_classes(auto_class: str, checkpoint: str) -> list[str]:
    """The measured classes an Auto class builds for `checkpoint` when the name spells their
    architecture as a word of its own, as hub names do ("meta-llama/Llama-3.2-1B": Llama,
    "Qwen/Qwen2.5-0.5B": Qwen2), narrowed to the Auto class's head when measured; none for
    "TinyLlama/TinyLlama-1.1B" or "EleutherAI/pythia-70m" (their config alone would say)."""
    words = [w for w in _NAME_WORDS.split(checkpoint.lower()) if w]
    spelled = lambda arch: any(w == arch or w.startswith(arch + ".") for w in words)  # noqa: E731
    classes = [c for c in CLASSES if spelled(_HEAD.sub("", c).lower())]
    head = auto_class.removeprefix("AutoModel")
    return [c for c in classes if head and c.endswith(head)] or classes


def _below(freeze: Freeze, holder: str) -> Optional[Freeze]:
    """The freezing of the submodule at `holder` as seen from it; None when name predicates decide
    it (they read names from the object, not from the submodule)."""
    if freeze.by_name:
        return None
    whole = freeze.everything or within(holder, freeze.paths)
    inside = lambda paths: tuple(p[len(holder) + 1 :] for p in paths if p.startswith(holder + "."))  # noqa: E731
    return Freeze(everything=whole and not within(holder, freeze.unfrozen_paths), paths=inside(freeze.paths), unfrozen_paths=inside(freeze.unfrozen_paths))


def _resolved(path: str, family: tuple) -> str:
    """`path` with `get_input_embeddings()` and `base_model` replaced by where they are in `family`."""
    head, _, rest = path.partition(".")
    aliases = {INPUT_EMBEDDINGS_CALL: family[1], BASE_MODEL: family[2]}
    return ".".join(filter(None, [aliases[head], rest])) if head in aliases else path


def _has_path(paths: tuple[str, ...], path: str) -> bool:
    """Whether a module or parameter path written in code can exist in a model whose module paths
    (to depth 3) are `paths`: one of them, or below one that is 3 deep or has no submodules."""
    normal = ".".join("N" if part.isdigit() else part for part in path.split("."))
    return any(normal == p or within(normal, (p,)) and (p.count(".") == 2 or not any(q.startswith(p + ".") for q in paths)) for p in paths)


def _family_inputs_frozen(freeze: Freeze, family: tuple) -> bool:
    frozen_paths = [_resolved(p, family) for p in freeze.paths]
    unfrozen_paths = [_resolved(p, family) for p in freeze.unfrozen_paths]
    # A weight tied under several names (GPT-2's `wte` and `lm_head`) is one parameter: turning any
    # name back on turns it on.
    return all(
        any(_frozen(freeze, name, frozen_paths, unfrozen_paths) for name in names) and not any(within(name, unfrozen_paths) for name in names)
        for names in family[0]
    )


def _frozen(freeze: Freeze, name: str, frozen_paths: list[str], unfrozen_paths: list[str]) -> bool:
    """Whether the parameter `name` ends up frozen: by the whole model or a path above it (and no
    path above it turned back on), then by the name predicates in order."""
    state: Optional[bool] = (freeze.everything or within(name, frozen_paths)) and not within(name, unfrozen_paths)
    first, _, rest = name.partition(".")
    for predicate, becomes in freeze.by_name:
        matches = names_match(predicate, first, (rest,))
        if matches is None and becomes != state:
            state = None
        elif matches and becomes != state:
            state = becomes
    return state is True
