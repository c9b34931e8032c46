"""CKPT005: reentrant checkpointing behind frozen parameters, with no input-grad hook."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator, Optional

from ckptlint.findings import Severity
from ckptlint.fixes import input_require_grads, non_reentrant
from ckptlint.index import Freeze
from ckptlint.model.hf_frozen_inputs import inputs_frozen
from ckptlint.model.hf_upstream import CLASSES
from ckptlint.model.sites import ApiKind
from ckptlint.model.values import Instance, ModuleObject, Value, loaded_checkpoint
from ckptlint.rules import Diagnostic, Rule, callee_name, non_reentrant_advice
from ckptlint.rules.inputs_cannot_require_grad import no_grad_inputs
from ckptlint.versions import transformers_default_reentrant

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel

# A module object held by the class whose method enables checkpointing on it.
HELD = re.compile(r"self\.(\w+(?:\.\w+)*)")
# Model classes whose main input is not `input_ids` (pixel_values, input_features, ...).
VISION_OR_AUDIO = ("Image", "Vision", "Vit", "ViT", "Detection", "Segmentation", "Depth", "Audio", "Speech", "CTC", "Video", "Whisper", "Wav2Vec")


class FrozenUpstreamReentrant(Rule):
    code = "CKPT005"
    name = "frozen-upstream-reentrant"
    severity = Severity.ERROR
    summary = "reentrant checkpointing behind frozen parameters (PEFT/LoRA, frozen embeddings) with no input-grad hook"

    def check(self, model: FileModel) -> Iterator[Diagnostic]:
        for site in model.sites:
            inputs = no_grad_inputs(site)
            if inputs and any(t.frozen for t in inputs):
                yield Diagnostic(
                    site.call,
                    f"reentrant checkpoint of `{callee_name(site)}` gets no input that can require grad because upstream "
                    f"parameters are frozen: {inputs[0].origin}. Trainable parameters inside get no gradient, or backward "
                    f"fails with \"element 0 of tensors does not require grad\"; {site.mode.reason}",
                    f"{non_reentrant_advice(site)}, or make the frozen layer's output require grad "
                    "(`enable_input_require_grads()` or a forward hook calling `output.requires_grad_(True)`)",
                    fixes=non_reentrant(site),
                )
            elif site.kind in (ApiKind.HF_ENABLE, ApiKind.HF_TRAINING_ARGS) and site.reentrant:
                function = site.trainer_function if site.kind is ApiKind.HF_TRAINING_ARGS else site.enclosing_function
                freeze = self.frozen_model(model, site.receiver, function, site.enclosing_class, site.receiver_holder)
                if freeze is not None:
                    frozen = (
                        f"parameters are frozen but for its adapters by PEFT ({freeze.where(model.path)}), which hooks the embedding "
                        f"output only when checkpointing is enabled before it wraps,"
                        if freeze.adapter_wrap
                        else f"embeddings (everything its first checkpointed layer reads) are frozen ({freeze.where(model.path)})"
                    )
                    by = f" (by `{site.wrapper.rsplit('.', 1)[-1]}`)" if site.wrapper else ""
                    loaded = loaded_checkpoint(site.receiver) if site.receiver is not None else None
                    enabled = (
                        "the Trainer handed these TrainingArguments enables reentrant gradient checkpointing on the model it trains,"
                        if site.kind is ApiKind.HF_TRAINING_ARGS
                        else f"reentrant gradient checkpointing is enabled{by} on a model" + (f" loaded from `{loaded}`" if loaded else "")
                    )
                    yield Diagnostic(
                        site.flag_node or site.call,
                        f"{enabled} whose {frozen} "
                        f"and nothing makes the embedding output require grad: the checkpointed layers get no gradient or "
                        f"backward fails with \"element 0 of tensors does not require grad\"; {site.mode.reason}",
                        "pass `gradient_checkpointing_kwargs={\"use_reentrant\": False}`, or call "
                        "`model.enable_input_require_grads()` after freezing"
                        + (" (or enable checkpointing before `get_peft_model`)" if freeze.adapter_wrap else ""),
                        # A hook added right after enabling is lost if the code drops it later (`set_input_embeddings`).
                        fixes=input_require_grads(model, site) if not freeze.hook_undone else (),
                    )

    @staticmethod
    def frozen_model(
        model: FileModel, receiver: Optional[Value], enclosing_function: Optional[str], enclosing_class: Optional[str],
        receiver_holder: Optional[tuple[Value, str]] = None,
    ) -> Optional[Freeze]:
        ctor = _constructor(receiver)
        if ctor is None:
            return None
        held = HELD.fullmatch(receiver.origin) if isinstance(receiver, ModuleObject) and enclosing_class else None
        # The top-level function the code is in ("Class.method" for a method); "" for module-level
        # code (a `__main__` block).
        inside = enclosing_function or ""
        path = inside[len(model.module) + 1 :].split(".") if inside.startswith(model.module + ".") else []
        function = ".".join(path[:2]) if len(path) > 1 and model.index.class_(f"{model.module}.{path[0]}") else path[0] if path else ""
        holder_ctor = _constructor(receiver_holder[0]) if receiver_holder else None
        freezes: list[Optional[Freeze]]
        if held:
            # A model the class holds (`self.model`, a LightningModule's): frozen by the class's code.
            freezes, holder = [model.index.freeze_of(enclosing_class)], held.group(1)
        elif receiver_holder and holder_ctor:
            # `model.bert.gradient_checkpointing_enable()`: frozen through the object built here.
            freezes, holder = [model.index.instance_freeze(model.module, function, holder_ctor)], receiver_holder[1]
        else:
            # Enabled in a loader that returns the model: each caller may freeze it afterwards.
            freezes, holder = [model.index.instance_freeze(model.module, function, ctor), *model.index.freezes_after(f"{model.module}.{function}", ctor)], ""
        ctor = model.index.builds(ctor) or ctor  # `model = build_model()`: the model it builds
        return next((f for f in freezes if f is not None and _reaches_layers(model, f, ctor, holder, receiver)), None)


def _reaches_layers(model: FileModel, freeze: Freeze, ctor: str, holder: str, receiver: Value) -> bool:
    """Whether, after `freeze`, the first checkpointed layer of the model (built by `ctor`, at
    `holder` in the frozen object) gets an input that cannot require grad and no hook fixes it."""
    # Under a PEFT wrapper, the class of the model it holds (through a builder: `get_peft_model(build_backbone(), ...)`).
    wrapped = (model.index.builds(freeze.wrapped) or freeze.wrapped) if freeze.wrapped else ""
    if freeze.input_grad_hook or not inputs_frozen(
        freeze, _library_class(model, wrapped or ctor), holder, loaded_checkpoint(receiver) if not wrapped else None
    ):
        return False
    if transformers_default_reentrant(model.versions.transformers) or freeze.hook_undone:
        return True  # 4.x adds the hook only with PEFT; disabling it or swapping embeddings drops it
    # 5.x hooks models whose main input is `input_ids`; vision and audio models get nothing.
    ctor = wrapped or ctor
    main_input = model.index.attribute(ctor, "main_input_name")
    if main_input is not None and main_input.has_constant:
        return main_input.constant != "input_ids"
    return any(marker in ctor for marker in VISION_OR_AUDIO)


def _constructor(value: Optional[Value]) -> Optional[str]:
    if isinstance(value, Instance):
        return value.ctor
    if isinstance(value, ModuleObject) and len(value.classes) == 1:
        return value.classes[0]
    return None


def _library_class(model: FileModel, ctor: str) -> Optional[str]:
    """The transformers class a model is built as (`LlamaForCausalLM(config)`, `.from_pretrained`, a
    project subclass of it); an Auto class as such; None when unknown."""
    name = ctor.removesuffix(".from_pretrained").removesuffix(".from_config")
    if not name:
        return None
    for ancestor in (name, *model.index.ancestors(name)):
        if ancestor.rsplit(".", 1)[-1] in CLASSES:
            return ancestor
    return name
