"""CKPT007 through a method of an object the checkpointed code holds (fixtures/aux_loss_collectors.py):
the router hands its load-balancing loss to `collector.add(...)`, which appends it to the
collector's list. Under reentrant checkpointing the router runs under no_grad, so the collected
loss has no graph and the balancing term adds nothing to the routers' gradients. Returned through
the checkpoint instead, it keeps its graph and the gradients match the model without checkpointing.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, differing, grads, load_fixture, no_checkpointing, twin  # noqa: E402

fx = load_fixture("aux_loss_collectors")


def step_both(build):
    model, model_ref = twin(getattr(fx, build))
    with no_checkpointing(fx):
        balance_ref = fx.training_step(model_ref, fx.make_batch())
    balance = fx.training_step(model, fx.make_batch())
    return grads(model), grads(model_ref), balance, balance_ref


def test_the_collected_loss_has_no_gradient():
    got, ref, balance, balance_ref = step_both("CollectedMoE")
    assert balance_ref.requires_grad and not balance.requires_grad
    assert torch.allclose(balance, balance_ref)  # same value, no graph
    assert any(".router.gate." in name for name in differing(got, ref))


def test_a_returned_loss_keeps_its_gradient():
    got, ref, balance, balance_ref = step_both("ReturningMoE")
    assert balance.requires_grad
    assert_same_grads(got, ref)
