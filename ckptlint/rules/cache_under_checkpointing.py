"""CKPT004: caching that fights recomputation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ckptlint.findings import Severity
from ckptlint.fixes import no_cache
from ckptlint.model.sites import ApiKind
from ckptlint.rules import Diagnostic, Rule, callee_name, spelled
from ckptlint.rules.side_effect_escapes import CHECKPOINTED, is_cache, recompute_stops_before_last_effect
from ckptlint.versions import generation_loses_context

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel


HF_NULLED_CACHES = frozenset({"past_key_values", "past_key_value", "layer_past"})


class CacheUnderCheckpointing(Rule):
    code = "CKPT004"
    name = "cache-under-checkpointing"
    severity = Severity.ERROR
    summary = "KV caches under gradient checkpointing: `use_cache=True`, `past_key_values=` in training, `generate()` in train mode, caches mutated in a checkpoint"

    def check(self, model: FileModel) -> Iterator[Diagnostic]:
        import libcst as cst

        for use in model.cache_uses:
            if use.kind == "use_cache":
                # A call: a project function that returns the model built with caching on; an argument
                # other than `use_cache=`: the config the model is built from.
                if isinstance(use.node, cst.Call):
                    by = f" (`{spelled(use.node.func)}` returns it built with caching on)"
                elif isinstance(use.node, cst.Arg) and (use.node.keyword is None or use.node.keyword.value != "use_cache"):
                    by = f" (built from `{spelled(use.node.value)}`, a config that sets `use_cache=True`)"
                else:
                    by = ""
                by += f" ({use.handed_by})" if use.handed_by else ""
                yield Diagnostic(
                    use.node,
                    f"`use_cache=True` for `{use.model}`{by}, whose gradient checkpointing is on in this training code: transformers "
                    "silently turns caching off while checkpointing (\"`use_cache=True` is incompatible with gradient "
                    "checkpointing. Setting `use_cache=False`\"), so `outputs.past_key_values` is None",
                    "pass `use_cache=False` while training with checkpointing; cache only in eval()/generation",
                    severity=Severity.WARNING,
                    fixes=no_cache(use),
                )
            elif use.kind == "generate":
                version = model.versions.transformers
                if generation_loses_context(version):
                    consequence, severity = (
                        "so each step after the first sees only the newest token (measured on a tiny Llama with transformers "
                        "4.53.3, 4.57.1 and 5.23: the first token matches, later tokens differ from eval())",
                        Severity.ERROR,
                    )
                else:
                    consequence, severity = (
                        "so every step re-runs the whole sequence through checkpointed layers (measured on a tiny Llama with "
                        "transformers 4.40 and 4.48: the same tokens as eval(), without the cache)",
                        Severity.WARNING,
                    )
                why = " (a Trainer's `train()` returns with the model still in train mode and checkpointing on)" if use.after_trainer else f" ({use.handed_by})" if use.handed_by else ""
                yield Diagnostic(
                    use.node,
                    f"`{use.model}.generate(...)` while `{use.model}` is in train() mode with gradient checkpointing on{why}: "
                    f"transformers {version.text} (assumed from {version.source}) checkpoints its layers whenever the model "
                    "is training (under generate's no_grad too) and drops the cache (\"`use_cache=True` is incompatible with "
                    f"gradient checkpointing\"), {consequence}",
                    f"call `{use.model}.eval()` before generating and `{use.model}.train()` after it",
                    severity=severity,
                )
            else:
                yield Diagnostic(
                    use.node,
                    f"`past_key_values=` passed to `{use.model}`{f' ({use.handed_by})' if use.handed_by else ''} while training with gradient checkpointing: the checkpointed "
                    "layers drop the cache (\"Caching is incompatible with gradient checkpointing ... Setting "
                    "`past_key_values=None`\") and the attention shapes no longer match (measured: \"The size of tensor a (4) "
                    "must match the size of tensor b (12)\")",
                    "train on the full sequence (prefix included), or disable gradient checkpointing for this step",
                )
        for site in model.sites:
            if site.kind not in CHECKPOINTED or site.function is None:
                continue
            # transformers' layer wrapper sets past_key_values=None while checkpointing.
            nulled = HF_NULLED_CACHES if site.kind in (ApiKind.HF_LAYER_CALL, ApiKind.HF_FUNC) else frozenset()
            region = model.region(site)
            stops_early = recompute_stops_before_last_effect(model, site)
            for part in region.parts:
                for mutation in part.facts.mutations:
                    if mutation.method in ("", "inplace") or mutation.container in nulled:
                        continue
                    if stops_early and part is region.parts[0] and mutation.last and not mutation.also_read:
                        # Every tensor the function saves is saved before the update, so the recompute
                        # has stopped when it would reach it (measured: the cache keeps its length).
                        # A cache it also reads is not exempt: a later chunk's update reaches an
                        # earlier chunk's recompute.
                        continue
                    if mutation.owner == "param":
                        # A cache parameter matters only if the checkpoint call passes one in.
                        if part.passed is None or mutation.container not in part.passed or mutation.method == "item" and not is_cache(mutation.container):
                            continue
                    elif not is_cache(mutation.container):
                        continue
                    if mutation.also_read:
                        consequence = (
                            "the function also reads it, so the recompute sees the grown cache (measured: \"Trying to backward "
                            "through the graph a second time\" or a CheckpointError shape mismatch)"
                        )
                    else:
                        consequence = "the recompute during backward appends again, so the cache ends up with duplicate entries"
                    yield Diagnostic(
                        mutation.node,
                        f"`{part.facts.qualname}` updates `{mutation.container}` inside the region checkpointed by "
                        f"`{callee_name(site)}`: {consequence}",
                        "pass past keys/values in as positional inputs and return the new ones; update the cache outside the "
                        "checkpointed function",
                        path=part.model.path,
                        severity=Severity.ERROR if mutation.also_read else Severity.WARNING,
                    )

