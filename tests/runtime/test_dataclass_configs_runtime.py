"""CKPT002 through nested dataclass configs (fixtures/dataclass_configs.py): `ViTConfig().ckpt` is a
`CheckpointConfig()` whose `kwargs()` hands `preserve_rng_state=False` to each checkpoint of blocks
holding Dropout. The recompute draws new masks: the forward is the same, the gradients are not, and
the global RNG stream shifts. Built with `CheckpointConfig(preserve_rng_state=True)`, the same blocks
give the gradients of the model without checkpointing."""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, differing, grads, load_fixture, no_checkpointing, twin, worst_relative_diff  # noqa: E402

fx = load_fixture("dataclass_configs")


def step_both(build):
    model, model_ref = twin(getattr(fx, build))
    batch = fx.make_batch()
    with no_checkpointing(fx):
        torch.manual_seed(7)
        loss_ref = fx.training_step(model_ref, batch)
        rng_ref = torch.get_rng_state()
    torch.manual_seed(7)
    loss = fx.training_step(model, batch)
    return grads(model), grads(model_ref), (loss, loss_ref), (torch.get_rng_state(), rng_ref)


def test_the_default_factory_config_hands_preserve_rng_state_false():
    assert fx.ViTConfig().ckpt.kwargs() == {"use_reentrant": False, "preserve_rng_state": False}
    assert fx.KwargsViTConfig().ckpt_kwargs == {"use_reentrant": False, "preserve_rng_state": False}


@pytest.mark.parametrize("build", ["build_configured", "build_kwargs"])
def test_unreplayed_dropout_changes_the_gradients(build):
    got, ref, (loss, loss_ref), (rng, rng_ref) = step_both(build)
    assert torch.equal(loss, loss_ref)  # same forward; only the recompute differs
    worst, name = worst_relative_diff(got, ref)
    assert worst > 0.05, (worst, name)
    assert any(n.startswith("blocks.") for n in differing(got, ref))
    assert not torch.equal(rng, rng_ref)


@pytest.mark.parametrize("build", ["build_replaying", "build_kwargs_replaying"])
def test_a_config_that_replays_the_rng_gives_identical_gradients(build):
    got, ref, (loss, loss_ref), (rng, rng_ref) = step_both(build)
    assert_same_grads(got, ref)
    assert torch.equal(loss, loss_ref) and torch.equal(rng, rng_ref)
