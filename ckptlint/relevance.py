"""What of a file can matter, decided from text and the `ast` index before any LibCST parse.

Two cuts: a file that cannot hold a checkpoint site is not parsed at all, and in a file that can,
only the top-level statements a checkpoint can reach are: the definitions that hold a site or
build transformers checkpointing layers, and everything they refer to (callees, submodule classes,
bases, registries), transitively. In transformers modeling files that leaves out the heads and output
classes. The statements left out are cut whole, so the rest parses alone; findings map their lines
back through `SourceSlice.original_line`.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Iterator, Optional

from ckptlint.config import Settings
from ckptlint.index import Block, Member, ModuleSummary, ProjectIndex
from ckptlint.model.apis import HF_GC_LAYER, HF_TRAINER_CALLBACKS, HF_TRAINERS, HF_TRAINING_ARGUMENTS, KNOWN_APIS, LIGHTNING_MODULES, LIGHTNING_NO_GRAD_STEPS, TRAIN_MODE_EVENTS, TRAINER_STEP_METHODS
from ckptlint.site_text import SITE_TEXT, at_word_start

# Where autograd may be switched off: a model called there may run a checkpoint for nothing (CKPT008),
# so in a file that can hold a site these statements are kept too: `with torch.no_grad():` blocks and
# module-level functions decorated with it (an `evaluate(model, loader)`). Methods decorated with it
# are left out: in library code they are rotary embeddings, weight initialisers and generation
# helpers, whose parsing cost 8 % of a cold run on transformers, and CKPT008 does not follow the
# model attributes (`self.teacher(x)`) such methods would call.
# `with` starts its line (a statement): the same words in docstrings' examples (`>>> with torch.no_grad():`)
# and comments are no code, and made 16 of transformers' files without checkpoint text matter.
GRAD_OFF_TEXT = re.compile(
    r"(?:^|(?<=\r))[ \t]*(?:async[ \t]+)?with\b[^\n:]*\b(?:no_grad|inference_mode|set_grad_enabled)\b|^@[\w.]*\b(?:no_grad|inference_mode)\b", re.MULTILINE
)
# A method decorated with it: counted only in a plain class (`class Evaluator:`, no bases), whose
# methods are script code handed models, as module-level functions are.
METHOD_GRAD_OFF_TEXT = re.compile(r"^[ \t]+@[\w.]*\b(?:no_grad|inference_mode)\b", re.MULTILINE)
# Sampling from a model (CKPT004 when it trains with checkpointing on).
GENERATE_TEXT = ".generate("
# The definition of a step Lightning runs without grad (searched with `at_word_start`).
LIGHTNING_STEP_TEXT = re.compile(rf"def\s+(?:{'|'.join(LIGHTNING_NO_GRAD_STEPS)})\s*\(")
# Every match of GRAD_OFF_TEXT holds one of these on its line: the pattern runs on those lines only
# (over whole files, a pattern that starts with no literal to search for was 4 % of a cold run).
GRAD_OFF_WORDS = ("no_grad", "inference_mode", "set_grad_enabled")
# Checkpointing switched on in a class for a model other than itself (one it may keep on an
# attribute): every method of that class may sample from the model, call it where autograd is off
# (CKPT004, CKPT008 through `self.policy`) or switch its mode, so none is cut.
HELD_MODEL_TEXT = re.compile(r"(?:\bself\.\w+|\b(?!self\b)\w+)\.(?:gradient|activation)_checkpointing_enable[\s)]*\(")
# Text every match of HELD_MODEL_TEXT holds: a file without it is not searched with the pattern.
HELD_MODEL_WORD = "_checkpointing_enable"
# In such a file, code that switches an attribute's mode (`trainer.policy.eval()`) is kept too.
HELD_MODE_TEXT = re.compile(r"\.\w+\.(?:train|eval)[\s)]*\(")
# A module hook registered here: the statement that registers it (and so the hook) is kept, since a
# region of this file's checkpoints may run the hook (only searched in files the index saw register one).
HOOK_TEXT = re.compile(r"register_(?:module_)?forward_(?:pre_)?hook\b")
# Line ends as `ast` counts them, so that index line numbers address these lines.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


@dataclass(frozen=True)
class SourceSlice:
    text: str
    # Line in the file of each line of `text`; None when nothing was cut.
    lines: Optional[tuple[int, ...]] = None
    # Line of `text` where each top-level statement starts (decorators included), so that
    # positions can be computed per statement; None when unknown.
    starts: Optional[tuple[int, ...]] = None

    def original_line(self, line: int) -> int:
        return self.lines[line - 1] if self.lines else line


def whole_source(text: str, summary: ModuleSummary) -> SourceSlice:
    return SourceSlice(text, None, _statement_starts(summary.blocks))


def _statement_starts(blocks: list[Block], kept: Optional[tuple[int, ...]] = None) -> tuple[int, ...]:
    """Where each LibCST statement starts in the (cut) text: `a = 1; b = 2` is two `ast`
    statements but one LibCST line."""
    starts: list[int] = []
    end = 0
    for block in blocks:
        if block.start > end:
            starts.append(block.start if kept is None else bisect_left(kept, block.start) + 1)
        end = max(end, block.end)
    return tuple(starts)


def can_matter(text: str, summary: ModuleSummary, index: ProjectIndex, settings: Settings) -> bool:
    """Can this file hold a checkpoint site at all, call a model where autograd is off whose class
    (from a project module it imports, directly or through others) may checkpoint, or run or sample
    from a model a module with checkpoint text hands it?"""
    if _site_text(settings).search(text) is not None or checkpoint_names(summary, index, settings):
        return True
    grad_off = may_switch_grad_off(text) or bool(_plain_class_grad_off_lines(text, summary, index)) or bool(_grad_off_decorator_names(summary, index))
    if grad_off and index.imports_checkpoint_text(summary.name):
        return True
    # A helper handed a model by a module that switches checkpointing on may run it without grad,
    # or sample from it (`def sample(policy, ids): return policy.generate(ids)`).
    # So may a Trainer's callback or subclass, handed the model it trains (`compute_loss(model, inputs)`).
    handed = grad_off or GENERATE_TEXT in text or (_CACHE_WORDS.search(text) is not None and bool(_handed_model_members(summary, index)))
    return handed and index.imported_by_checkpoint_text(summary.name)


def may_switch_grad_off(text: str) -> bool:
    """A `with torch.no_grad():` block, a function decorated with it, or a Lightning step run without grad."""
    return next(_grad_off_offsets(text), None) is not None or at_word_start(LIGHTNING_STEP_TEXT, text) is not None


def checkpoint_names(summary: ModuleSummary, index: ProjectIndex, settings: Settings) -> set[str]:
    """Module-level names bound to a checkpoint API, a project wrapper (declared or inferred),
    transformers training arguments, a checkpointing layer class (or a registry of classes holding
    one), a hand-written checkpoint (an autograd.Function whose `apply` checkpoints), or a project function that switches
    transformers checkpointing on for the model it is handed (its callers build and freeze that model)."""
    wrappers = dict(settings.checkpoint_functions)
    bindings = {**{name: target for name, target in summary.imports.items()}, **{name: f"{summary.name}.{name}" for name in summary.aliases}}
    bindings.update((name, f"{summary.name}.{name}") for name in summary.classes)
    names = {
        name for name in summary.functions
        if index.enables_hf_checkpointing(f"{summary.name}.{name}") or index.wrapper_parameter(f"{summary.name}.{name}")
    }  # fmt: skip
    for name, target in bindings.items():
        canonical = index.canonical(target)
        alias = index.alias(canonical)
        if alias is not None:
            canonical = alias.target
        if canonical in KNOWN_APIS or canonical in HF_TRAINING_ARGUMENTS or canonical in wrappers or index.wrapper_parameter(canonical):
            names.add(name)
        elif index.enables_hf_checkpointing(canonical):
            names.add(name)
        elif _checkpointing_class_or_autograd(index, canonical):
            names.add(name)
        elif any(_checkpointing_class_or_autograd(index, cls) for cls in index.registry(canonical) or ()):
            names.add(name)  # a registry of classes (`MODELS[name](...)`) holding one
    return names


def _checkpointing_class_or_autograd(index: ProjectIndex, qualname: str) -> bool:
    summary = index.class_(qualname)
    return summary is not None and (summary.recompute is not None or _checkpointing_class(index, qualname))


def _checkpointing_class(index: ProjectIndex, qualname: str) -> bool:
    """Calling an instance is a checkpoint site: a transformers checkpointing layer, a module whose
    `__call__`/`forward` checkpoints itself or a module handed to it, or one a checkpoint wrapper wraps."""
    return index.is_subclass(qualname, HF_GC_LAYER) or index.checkpointing_method(qualname) is not None or bool(index.activation_wraps(qualname))


def relevant_source(text: str, summary: ModuleSummary, index: ProjectIndex, settings: Settings) -> SourceSlice:
    """The file without the top-level definitions and methods no checkpoint can reach."""
    blocks = summary.blocks
    if not any(block.definition for block in blocks):
        return whole_source(text, summary)
    matches = list(_LINE.finditer(text))
    starts = [match.start() for match in matches]
    # A Trainer enables checkpointing on the model it is handed when its TrainingArguments say so.
    triggers = checkpoint_names(summary, index, settings) | {
        name for name, target in summary.imports.items() if index.canonical(target) in HF_TRAINERS or index.is_subclass(index.canonical(target), HF_TRAINERS)
    }  # a project's own Trainer subclass too
    holder_lines = [bisect_right(starts, match.start()) for match in HELD_MODEL_TEXT.finditer(text)] if HELD_MODEL_WORD in text else []
    patterns = (_site_text(settings), HELD_MODE_TEXT) if holder_lines else (_site_text(settings),)
    if summary.hook_registrars:
        patterns = (*patterns, HOOK_TEXT)
    site_lines = [bisect_right(starts, match.start()) for pattern in patterns for match in pattern.finditer(text)]
    grad_off_lines = [bisect_right(starts, offset) for offset in _grad_off_offsets(text)]
    if not site_lines and not triggers:
        # The file matters only for the models it calls where autograd is off (`can_matter`): CKPT008
        # follows the models of functions and script code, not those a class keeps on attributes
        # (`self.model(x)`), so grad-off code in methods seeds nothing (in transformers it is weight
        # initialisation and generation, whose classes pulled in half of such files); but for the
        # decorated methods of plain classes, handed a model (`Evaluator(...).run(model)`).
        grad_off_lines = [line for line in grad_off_lines if not _in_class(summary.blocks, line)]
    site_lines.extend(grad_off_lines)
    site_lines.extend(_plain_class_grad_off_lines(text, summary, index))
    site_lines.extend(_callback_event_lines(text, summary, index, starts))
    if GENERATE_TEXT in text:
        site_lines.extend(_sampling_helper_lines(text, summary.blocks, starts))
    site_lines.extend(bisect_right(starts, offset) for offset in _word_offsets(text, _grad_off_decorator_names(summary, index)))
    needed = _needed_blocks(summary, index, triggers, site_lines)
    # Inside a class, a checkpoint name is spotted by its text.
    site_lines.extend(bisect_right(starts, offset) for offset in _word_offsets(text, triggers))
    return _cut(text, summary, matches, needed, _unreached_members(summary, index, needed, site_lines, holder_lines))


def _grad_off_decorator_names(summary: ModuleSummary, index: ProjectIndex) -> set[str]:
    """The names this module binds to project decorators that run what they wrap with grad off."""
    names = {name for name, target in summary.imports.items() if index.runs_without_grad(target)}
    return names | set(summary.grad_off_decorators)


def _plain_class_grad_off_lines(text: str, summary: ModuleSummary, index: ProjectIndex) -> list[int]:
    """The lines of METHOD_GRAD_OFF_TEXT in the plain classes of the module that no class derives
    from (a mixin's methods run on the model it is mixed into: `self`, which CKPT008 leaves alone)."""
    plain = [
        b for b in summary.blocks
        if b.members and (cls := summary.classes.get(b.binds)) is not None and not cls.bases and not index.subclasses(cls.qualname)
    ]  # fmt: skip
    if not plain or not any(word in text for word in GRAD_OFF_WORDS):
        return []
    lines = [text.count("\n", 0, match.start()) + 1 for match in METHOD_GRAD_OFF_TEXT.finditer(text)]
    return [line for line in lines if any(b.start <= line <= b.end for b in plain)]


# `policy.generate(` in code: a name's call at the start of an expression, not a docstring's `>>> `.
_SAMPLING_CALL = re.compile(r"^[ \t]+(?!>>>)[^#\n]*?\b(\w+)\.generate\(", re.MULTILINE)
# Cache keywords a forward call may pass (CKPT004).
_CACHE_WORDS = re.compile(r"\b(?:use_cache|past_key_values?)\s*=")


def _handed_model_members(summary: ModuleSummary, index: ProjectIndex) -> list[Member]:
    """Methods a Trainer calls with the model it trains: a callback's train-time events, a subclass's
    steps (of a class deriving from transformers' own: the Trainer's own steps are library code)."""
    found = []
    for block in summary.blocks:
        events = [m for m in block.members if m.name in TRAIN_MODE_EVENTS or m.name in TRAINER_STEP_METHODS]
        if events and block.definition and _derives_from_trainer_api(index, f"{summary.name}.{block.binds}"):
            found.extend(events)
    return found


def _derives_from_trainer_api(index: ProjectIndex, qualname: str) -> bool:
    bases = HF_TRAINERS | HF_TRAINER_CALLBACKS
    return qualname not in bases and index.is_subclass(qualname, bases)


def _callback_event_lines(text: str, summary: ModuleSummary, index: ProjectIndex, starts: list[int]) -> list[int]:
    """Lines sampling from a model, passing it cache keywords, or switching grad off, in a method a
    Trainer calls with the model it trains (`on_step_end`, `compute_loss`), in train mode
    (`caller_modes.handed_generates`, `grad_free.grad_free_checkpoints`)."""
    events = _handed_model_members(summary, index)
    if not events:
        return []
    offsets = [match.start() for match in re.finditer(re.escape(GENERATE_TEXT), text)] + list(_grad_off_offsets(text))
    offsets += [match.start() for match in _CACHE_WORDS.finditer(text)]
    lines = [bisect_right(starts, offset) for offset in offsets]
    return [line for line in lines if any(member.start <= line <= member.end for member in events)]


def _sampling_helper_lines(text: str, blocks: list[Block], starts: list[int]) -> Iterator[int]:
    """Lines of a top-level function sampling from a model it is handed (`def sample(policy, ids):
    return policy.generate(ids)`): the `.generate(` of one of its parameters, as its header spells
    them (not the examples in docstrings, nor a library's own generation code)."""
    for match in _SAMPLING_CALL.finditer(text):
        line = bisect_right(starts, match.start(1))
        block = next((b for b in blocks if b.definition and not b.members and b.start <= line <= b.end), None)
        if block is None:
            continue
        header = text[starts[block.start - 1] : text.find(":\n", starts[block.start - 1])]
        if re.search(rf"[(,\s]{match.group(1)}\s*[,:=)]", header):
            yield line


def _in_class(blocks: list[Block], line: int) -> bool:
    return any(block.members and block.start <= line <= block.end for block in blocks)


def _grad_off_offsets(text: str) -> Iterator[int]:
    """Where GRAD_OFF_TEXT matches, searched only on the lines (as its `^` counts them: after a
    newline) that hold one of GRAD_OFF_WORDS; no match spans a newline, so these are all its matches."""
    lines: set[int] = set()
    for word in GRAD_OFF_WORDS:
        at = text.find(word)
        while at != -1:
            lines.add(text.rfind("\n", 0, at) + 1)
            at = text.find(word, at + len(word))
    for start in sorted(lines):
        end = text.find("\n", start)
        for match in GRAD_OFF_TEXT.finditer(text, start, len(text) if end == -1 else end):
            yield match.start()


def _word_offsets(text: str, words: set[str]) -> Iterator[int]:
    """Where each of `words` occurs as a whole word (`str.find`: an alternation of words in a regex
    was a third of the cut)."""
    for word in words:
        at = text.find(word)
        while at != -1:
            end = at + len(word)
            if not (at and _is_word_char(text[at - 1])) and not (end < len(text) and _is_word_char(text[end])):
                yield at
            at = text.find(word, end)


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def definitions_source(text: str, summary: ModuleSummary, names: frozenset[str]) -> SourceSlice:
    """The file cut to the top-level definitions of `names`, whole, and everything they refer to:
    what another file's checkpointed callees need of it."""
    blocks = summary.blocks
    seeds = [number for number, block in enumerate(blocks) if names.intersection(block.binds.split())]
    return _cut(text, summary, list(_LINE.finditer(text)), _closure(blocks, seeds), [])


def _cut(text: str, summary: ModuleSummary, matches: list[re.Match[str]], needed: set[int], members: list[Member]) -> SourceSlice:
    """The file without the definitions not `needed` and without `members`."""
    blocks = summary.blocks
    dropped: set[int] = set()
    for number, block in enumerate(blocks):
        if block.definition and number not in needed:
            dropped.update(range(block.start, block.end + 1))
    for member in members:
        dropped.update(range(member.start, member.end + 1))
    if not dropped:
        return whole_source(text, summary)
    kept = tuple(number for number in range(1, len(matches) + 1) if number not in dropped)
    remaining = [block for number, block in enumerate(blocks) if not block.definition or number in needed]
    return SourceSlice("".join(matches[number - 1].group() for number in kept), kept, _statement_starts(remaining, kept))


def _needed_blocks(summary: ModuleSummary, index: ProjectIndex, triggers: set[str], site_lines: list[int]) -> set[int]:
    """Top-level statements that hold a site, read a checkpoint name, store state on a module or
    build checkpointing layers, and every statement they refer to, transitively."""
    blocks = summary.blocks
    seeds = [
        number
        for number, block in enumerate(blocks)
        if any(block.start <= line <= block.end for line in site_lines)
        or triggers.intersection(block.refs.split())
        or (block.stashes and not block.members)  # a script storing state on a module
        or (block.definition and _checkpointing_layer_attrs(summary, index, block.binds.split()))
        or _runs_steps_without_grad(summary, index, block)  # its `self(x)` there may reach a submodule's checkpoint
    ]
    return _closure(blocks, seeds)


def _closure(blocks: list[Block], seeds: list[int]) -> set[int]:
    """The statements `seeds` and every statement they refer to, transitively."""
    binders: dict[str, list[int]] = {}
    for number, block in enumerate(blocks):
        for name in block.binds.split():
            binders.setdefault(name, []).append(number)
    needed, work = set(seeds), list(seeds)
    while work:
        for name in blocks[work.pop()].refs.split():
            for number in binders.get(name, ()):
                if number not in needed:
                    needed.add(number)
                    work.append(number)
    return needed


def _unreached_members(summary: ModuleSummary, index: ProjectIndex, needed: set[int], site_lines: list[int], holder_lines: list[int]) -> list[Member]:
    """Methods of the classes kept that nothing reaches: not forward, not called or read as an
    attribute by kept code, no site or checkpoint name in them, no state stored that kept code
    reads, not reading the attributes that hold checkpointing layers; in a class that switches
    checkpointing on for a model it holds (`holder_lines`), none."""
    read = {attr for number in needed for part in (summary.blocks[number], *summary.blocks[number].members) for attr in part.attrs.split()}
    read.discard("__init__")
    unreached_all = []
    for number in needed:
        block = summary.blocks[number]
        if any(block.start <= line <= block.end for line in holder_lines):
            continue
        layers = _checkpointing_layer_attrs(summary, index, block.binds.split()) if block.members else set()
        # Lightning runs these steps without grad: what they call (the module itself) may checkpoint there.
        kept = ("forward", "__call__", *LIGHTNING_NO_GRAD_STEPS) if _is_lightning(summary, index, block) else ("forward", "__call__")
        unreached = [
            member
            for member in block.members
            if member.name not in kept
            and member.name not in read
            and not member.stashes
            and not (member.name != "__init__" and read.intersection(member.self_stores.split()))
            and not layers.intersection(member.attrs.split())
            and not any(member.start <= line <= member.end for line in site_lines)
        ]
        if len(unreached) < len(block.members):  # a class body cannot be left empty
            unreached_all.extend(unreached)
    return unreached_all


def _runs_steps_without_grad(summary: ModuleSummary, index: ProjectIndex, block: Block) -> bool:
    """A Lightning module with a step Lightning runs without grad (`validation_step`, ...)."""
    return any(member.name in LIGHTNING_NO_GRAD_STEPS for member in block.members) and _is_lightning(summary, index, block)


def _is_lightning(summary: ModuleSummary, index: ProjectIndex, block: Block) -> bool:
    return bool(block.members) and index.is_subclass(f"{summary.name}.{block.binds}", LIGHTNING_MODULES)


def _site_text(settings: Settings) -> re.Pattern[str]:
    wrappers = [name.rsplit(".", 1)[-1] for name, _ in settings.checkpoint_functions]
    if not wrappers:
        return SITE_TEXT
    return _or_words(SITE_TEXT, wrappers)


def _or_words(pattern: re.Pattern[str], words: list[str]) -> re.Pattern[str]:
    return re.compile(f"{pattern.pattern}|\\b(?:{'|'.join(map(re.escape, words))})\\b")


def _checkpointing_layer_attrs(summary: ModuleSummary, index: ProjectIndex, names: list[str]) -> set[str]:
    """Attributes (its own or inherited) holding transformers checkpointing layers, for a module
    class among `names`: calling them is a checkpoint site."""
    found = set()
    for name in names:
        if name not in summary.classes:
            continue
        for ancestor in index.ancestors(f"{summary.name}.{name}"):
            owner = index.class_(ancestor)
            for attr, binding in owner.attrs.items() if owner else ():
                for ctor in binding.constructors:
                    canonical = index.canonical(ctor)
                    if index.class_(canonical) is not None and _checkpointing_class(index, canonical):
                        found.add(attr)
    return found
