"""CKPT005 at runtime, adapter libraries that freeze the model they are handed
(fixtures/adapter_libraries.py): loralib 0.1.2, peft 0.21.2's `inject_adapter_in_model`, and a
transformers backbone held by a project module, on torch 2.13 and transformers 5.23.

Every bad build leaves the trainable parameters inside reentrant-checkpointed layers behind a frozen
input: with only adapters trainable, backward fails ("element 0 of tensors does not require
grad"); with a trainable head after the layers, the layers' parameters silently get no gradient.
"""

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("loralib")

from ckpt_runtime import (  # noqa: E402
    ELEMENT_0,
    NO_INPUT_GRAD_WARNING,
    assert_same_grads,
    capture_warnings,  # noqa: F401
    grads,
    load_fixture,
    no_checkpointing,
    none_only_in,
    real_transformers,  # noqa: F401
    warning_texts,
)

pytestmark = pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning")


def test_loralib_marks_the_embedding_frozen_and_the_adapters_get_nothing(real_transformers, capture_warnings):
    fx = load_fixture("adapter_libraries", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = fx.loralib_tagger()
    assert not model.embed.weight.requires_grad and model.blocks[0].fc1.lora_A.requires_grad
    with pytest.raises(RuntimeError, match=ELEMENT_0):
        fx.tagger_step(model, fx.tagger_batch())
    assert NO_INPUT_GRAD_WARNING in warning_texts(capture_warnings)


def test_loralib_adapters_train_under_non_reentrant_checkpointing(real_transformers):
    fx = load_fixture("adapter_libraries", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = fx.loralib_tagger_non_reentrant()
    reference = copy.deepcopy(model)
    fx.tagger_step(model, fx.tagger_batch())
    with no_checkpointing(fx):
        fx.tagger_step(reference, fx.tagger_batch())
    lora_grads = [g for name, g in grads(model).items() if "lora_" in name]
    assert len(lora_grads) == 8 and all(g is not None for g in lora_grads)
    assert_same_grads(grads(model), grads(reference))


def test_injected_adapters_get_no_hook_and_backward_fails(real_transformers, capture_warnings):
    fx = load_fixture("adapter_libraries", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = fx.vit_injected()
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)  # the model itself, all else frozen
    with pytest.raises(RuntimeError, match=ELEMENT_0):
        fx.vit_step(model, fx.image_batch())


def test_injected_adapters_train_with_the_input_grad_hook(real_transformers):
    fx = load_fixture("adapter_libraries", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = fx.vit_injected_with_input_grads()
    reference = copy.deepcopy(model)
    reference.gradient_checkpointing_disable()
    fx.vit_step(model, fx.image_batch())
    fx.vit_step(reference, fx.image_batch())
    assert all(g is not None for name, g in grads(model).items() if "lora_" in name)
    assert_same_grads(grads(model), grads(reference))


def test_add_adapter_after_enabling_leaves_the_inputs_unhooked(real_transformers, capture_warnings):
    fx = load_fixture("adapter_libraries", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = fx.vit_enabled_then_adapter_added()
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    with pytest.raises(RuntimeError, match=ELEMENT_0):
        fx.vit_step(model, fx.image_batch())


def test_enabling_after_add_adapter_hooks_the_inputs(real_transformers):
    fx = load_fixture("adapter_libraries", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = fx.vit_adapter_added_then_enabled()
    reference = copy.deepcopy(model)
    reference.gradient_checkpointing_disable()
    fx.vit_step(model, fx.image_batch())
    fx.vit_step(reference, fx.image_batch())
    assert all(g is not None for name, g in grads(model).items() if "lora_" in name)
    assert_same_grads(grads(model), grads(reference))


@pytest.mark.parametrize("build, starved", [("held_backbone_frozen", True), ("held_backbone_head_frozen", False)])
def test_a_held_backbone_frozen_through_its_holder(build, starved, real_transformers, capture_warnings):
    fx = load_fixture("adapter_libraries", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = getattr(fx, build)()
    reference = copy.deepcopy(model)
    reference.backbone.gradient_checkpointing_disable()
    fx.image_tagger_step(model, fx.image_batch())
    fx.image_tagger_step(reference, fx.image_batch())
    lost = none_only_in(grads(model), grads(reference))
    if starved:
        # every encoder layer's parameters: the head still trains, so nothing fails
        assert lost and all(name.startswith("backbone.layers.") for name in lost)
        assert NO_INPUT_GRAD_WARNING in warning_texts(capture_warnings)
    else:
        assert_same_grads(grads(model), grads(reference))
