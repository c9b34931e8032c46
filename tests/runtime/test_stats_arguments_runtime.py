"""CKPT007 through a container the checkpoint call hands in (fixtures/stats_arguments.py): under
reentrant checkpointing the block's forward runs under no_grad, so the entropy it puts into the
caller's `stats` dict does not require grad and the regulariser adds nothing to the gradients.
Returned from the block instead, the entropy keeps its graph and the gradients match the model
without checkpointing."""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, differing, grads, load_fixture, no_checkpointing, twin  # noqa: E402

fx = load_fixture("stats_arguments")


def step_both(build):
    model, model_ref = twin(getattr(fx, build))
    with no_checkpointing(fx):
        entropy_ref = fx.training_step(model_ref, fx.make_batch())
    entropy = fx.training_step(model, fx.make_batch())
    return grads(model), grads(model_ref), entropy, entropy_ref


def test_the_entropy_put_into_the_dict_has_no_gradient():
    got, ref, entropy, entropy_ref = step_both("StatsViT")
    assert entropy_ref.requires_grad and not entropy.requires_grad
    assert torch.allclose(entropy, entropy_ref)  # same value, no graph
    assert any(name.startswith("blocks.") for name in differing(got, ref))


def test_a_returned_entropy_keeps_its_gradient():
    got, ref, entropy, entropy_ref = step_both("ReturningViT")
    assert entropy.requires_grad
    assert_same_grads(got, ref)
