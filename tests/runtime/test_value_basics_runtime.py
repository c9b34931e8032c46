"""The value facts behind fixtures/vit_blocks.py, measured: tensors split off a projection with
`.chunk` / `.unbind` (after a `.permute`) or computed from an `nn.Parameter` and bound into two
reentrant checkpoints break backward (FINDINGS 3B); the parameter itself bound the same way, and the
split tensors passed positionally, give the reference gradients; Dropout in blocks assigned as a
tuple in `__init__` draws new masks under `preserve_rng_state=False` (FINDINGS 2).
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import SECOND_BACKWARD, assert_same_grads, differing, grads, load_fixture, referenced  # noqa: E402

fx = load_fixture("vit_blocks")


def run(model_class):
    batch = fx.make_batch()
    return (*referenced(fx, getattr(fx, model_class), fx.training_step, (batch,), seed=5), batch)


@pytest.mark.parametrize("model_class", ["PromptedViT", "UnbindPromptedViT", "ScaledBiasViT"])
def test_split_or_derived_tensor_bound_into_two_checkpoints_breaks_backward(model_class):
    model, model_ref, batch = run(model_class)
    assert model_ref.prompt_proj.weight.grad is not None and model_ref.rel_bias.grad is not None
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
        fx.training_step(model, batch)


def test_positional_split_tensors_and_a_bound_parameter_are_exact():
    model, model_ref, batch = run("PositionalPromptViT")
    fx.training_step(model, batch)
    assert_same_grads(grads(model), grads(model_ref))


def test_dropout_in_tuple_assigned_submodules_draws_new_masks_without_rng_state():
    model, model_ref, batch = run("FastPromptViT")
    fx.training_step(model, batch)
    assert differing(grads(model), grads(model_ref))
