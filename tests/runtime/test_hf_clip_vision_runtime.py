"""CKPT005 at runtime for fixtures/hf_clip_vision.py (real transformers 5.23 on CPU): a CLIP vision
tower tuned on its last layer only, picked by a name test, with reentrant checkpointing. The first
checkpointed layer reads the frozen embeddings and pre-layernorm, so every checkpointed layer gets
no gradient (the trainable post-layernorm after them still does); making the embedding output
require grad first restores them. Without the trainable post-layernorm, the backward fails with
"element 0 of tensors does not require grad"."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ckpt_runtime import load_fixture  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")

fx = load_fixture("hf_clip_vision")


def last_layer_grads(model):
    model.train()
    model(pixel_values=torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))).pooler_output.sum().backward()
    return {n: p.grad is not None for n, p in model.named_parameters() if p.requires_grad}


def test_the_last_layer_gets_no_gradient_under_reentrant_checkpointing():
    grads = last_layer_grads(fx.build_last_layer_tuning())
    assert not any(has for name, has in grads.items() if "layers.3" in name) and grads["post_layernorm.weight"]


def test_input_grads_restore_the_last_layers_gradient():
    assert all(last_layer_grads(fx.build_last_layer_tuning_with_input_grads()).values())


def test_without_a_trainable_parameter_after_the_layers_the_backward_fails():
    model = fx.build_last_layer_tuning()
    model.post_layernorm.requires_grad_(False)
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        last_layer_grads(model)
