"""CKPT005 at runtime, PEFT order (fixtures/peft_order.py), with real transformers and peft 0.21.2.

peft registers the input-grad hook only when checkpointing is already enabled on the model it
wraps. Enabled afterwards in reentrant mode, the LoRA adapters (the only trainable parameters, all
inside checkpointed layers) get no input that requires grad: backward fails, unless transformers
hooks the embeddings itself, which 5.23 does for `input_ids` models (the Llama) and not for a ViT.
(4.57.1, measured by hand with the same fixture: the wrapped-then-enabled Llama fails too.)
"""

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from ckpt_runtime import (  # noqa: E402
    ELEMENT_0,
    NO_INPUT_GRAD_WARNING,
    assert_same_grads,
    capture_warnings,  # noqa: F401
    grads,
    load_fixture,
    real_transformers,  # noqa: F401
    warning_texts,
)

pytestmark = pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning")


def without_checkpointing(model):
    reference = copy.deepcopy(model)
    reference.base_model.model.gradient_checkpointing_disable()
    return reference


def lora_grads(model):
    return {name: grad for name, grad in grads(model).items() if "lora_" in name}


@pytest.mark.parametrize(
    "build, batch",
    [
        ("llama_wrapped_then_enabled", "llama_batch"),  # 5.23 hooks input_ids models itself
        ("llama_enabled_then_wrapped", "llama_batch"),
        ("vit_enabled_then_wrapped", "vit_batch"),
        ("vit_wrapped_then_enabled_with_input_grads", "vit_batch"),
        ("vit_prepared_unquantized_non_reentrant", "vit_batch"),
        ("vit_factory_hooked_then_enabled", "vit_batch"),
        ("vit_enabled_then_wrapped_by_a_helper", "vit_batch"),
    ],
)
def test_adapters_train_when_something_hooks_the_inputs(build, batch, real_transformers, capture_warnings):
    fx = load_fixture("peft_order", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = getattr(fx, build)()
    reference = without_checkpointing(model)
    data = getattr(fx, batch)()
    fx.training_step(model, data)
    fx.training_step(reference, data)
    got = lora_grads(model)
    assert len(got) == 8 and all(g is not None for g in got.values())  # 2 layers x (q, v) x (A, B)
    assert_same_grads(grads(model), grads(reference))
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)


@pytest.mark.parametrize(
    "build", ["vit_wrapped_then_enabled", "vit_prepared_unquantized_then_enabled", "vit_factory_built_then_enabled", "vit_wrapped_by_a_helper_then_enabled"]
)
def test_vit_wrapped_then_enabled_fails_at_backward(build, real_transformers, capture_warnings):
    """`prepare_model_for_kbit_training` on a model that is not quantized registers no hook either."""
    fx = load_fixture("peft_order", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = getattr(fx, build)()
    reference = without_checkpointing(model)
    fx.training_step(reference, fx.vit_batch())
    assert all(g is not None for g in lora_grads(reference).values())  # trains without checkpointing
    with pytest.raises(RuntimeError, match=ELEMENT_0):
        fx.training_step(model, fx.vit_batch())
    assert warning_texts(capture_warnings).count(NO_INPUT_GRAD_WARNING) == 2  # one per checkpointed layer
