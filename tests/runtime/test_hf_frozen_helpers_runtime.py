"""A transformers ViT frozen with `requires_grad_(False)` but for its attention queries, under reentrant
gradient checkpointing (CKPT005), with transformers 5.23.

The ViT takes `pixel_values`, so transformers hooks no input: every layer's input is the output of the
frozen embeddings, the reentrant checkpoint records nothing, and backward fails with "element 0 of
tensors does not require grad" (torch warns "None of the inputs have requires_grad=True"). An input-grad
hook or non-reentrant checkpointing gives the queries the gradients of the model without checkpointing.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture, real_transformers  # noqa: E402,F401

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore:None of the inputs have requires_grad=True:UserWarning")


@pytest.fixture
def fx(real_transformers):  # noqa: F811
    return load_fixture("hf_frozen_helpers")


def step(model):
    torch.manual_seed(1)
    pixel_values, labels = torch.randn(2, 3, 8, 8), torch.tensor([0, 2])
    model.train()
    model(pixel_values=pixel_values, labels=labels).loss.backward()
    return {name: p.grad for name, p in model.named_parameters() if p.requires_grad}


def built(fx, name):
    torch.manual_seed(0)
    return getattr(fx, name)()


def reference(fx, model):
    """The same frozen model, same weights, without checkpointing."""
    plain = fx.freeze_all_but_queries(fx.ViTForImageClassification(fx.vit_config()))
    plain.load_state_dict(model.state_dict())
    return plain


@pytest.mark.parametrize("name", ["build_frozen_by_helper", "build_frozen_inline"])
def test_reentrant_checkpointing_of_a_frozen_vit_fails(fx, name):
    model = built(fx, name)
    assert model.is_gradient_checkpointing and not any(p.requires_grad for p in model.vit.embeddings.parameters())
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        step(model)
    step(reference(fx, model))  # trains without checkpointing


@pytest.mark.parametrize("name", ["build_frozen_with_input_grads", "build_frozen_non_reentrant"])
def test_an_input_grad_hook_or_non_reentrant_mode_trains_the_queries(fx, name):
    model = built(fx, name)
    got, expected = step(model), step(reference(fx, model))
    assert set(got) == set(expected) == {f"vit.layers.{i}.attention.q_proj.{p}" for i in range(2) for p in ("weight", "bias")}
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], rtol=1e-5, atol=1e-7)
