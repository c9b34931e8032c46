"""Hand-written checkpoint Functions at runtime (CKPT002).

Measured on torch 2.13 (CPU): guided-diffusion's `CheckpointFunction` re-runs the block in backward
without restoring torch's RNG state, so the dropout inside the UNet's residual blocks draws a new
mask (worst relative gradient error 1.24, the RNG stream shifts). The same Function saving
`torch.get_rng_state()` and restoring it around the re-run is exact, and so is a block without
randomness checkpointed by the non-restoring Function.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, grads, load_fixture, worst_relative_diff  # noqa: E402

fx = load_fixture("diffusion_checkpoint")


def step_both(model_class):
    torch.manual_seed(0)
    model = getattr(fx, model_class)()
    model_ref = getattr(fx, model_class)(use_checkpoint=False)
    model_ref.load_state_dict(model.state_dict())
    batch = fx.make_batch()
    torch.manual_seed(5)
    fx.training_step(model_ref, batch)
    rng_ref = torch.get_rng_state()
    torch.manual_seed(5)
    fx.training_step(model, batch)
    return grads(model), grads(model_ref), torch.equal(torch.get_rng_state(), rng_ref)


def test_function_without_rng_restore_changes_gradients():
    got, ref, same_rng = step_both("TinyUNet")
    worst, name = worst_relative_diff(got, ref)
    assert worst > 0.1, (worst, name)
    assert not same_rng
    # The attention block draws nothing: its re-run is exact.
    assert_same_grads({k: v for k, v in got.items() if k.startswith("attention.")}, {k: v for k, v in ref.items() if k.startswith("attention.")})


def test_function_restoring_the_rng_state_is_exact():
    got, ref, same_rng = step_both("ReplayingTinyUNet")
    assert_same_grads(got, ref)
    assert same_rng
