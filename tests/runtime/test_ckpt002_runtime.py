"""CKPT002 at runtime: randomness in a checkpointed region that the recompute does not replay.

FINDINGS 2: with the default preserve_rng_state=True, Dropout / F.dropout / torch.rand* inside the
region give bit-identical gradients. preserve_rng_state=False with RNG inside, a user
torch.Generator, Python's random and numpy's global RNG all change the gradients silently
(rel 0.1-9.3); stochastic depth with Python's random under reentrant mode drops a branch's grads.
"""

import random

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import (  # noqa: E402
    assert_same_grads,
    capture_warnings,  # noqa: F401
    differing,
    grads,
    load_fixture,
    no_checkpointing,
    none_only_in,
    twin,
    worst_relative_diff,
)

fx = load_fixture("rng_replay")


def step_both(module, model_class, *, torch_seed=7, python_seed=11):
    """One training step with checkpointing and one without, from identical weights and RNG states."""
    model, model_ref = twin(getattr(module, model_class))
    batch = module.make_batch() if hasattr(module, "make_batch") else fx.make_batch()
    with no_checkpointing(module):
        torch.manual_seed(torch_seed)
        random.seed(python_seed)
        loss_ref = module.training_step(model_ref, batch)
        rng_ref = (torch.get_rng_state(), random.getstate())
    torch.manual_seed(torch_seed)
    random.seed(python_seed)
    loss = module.training_step(model, batch)
    rng = (torch.get_rng_state(), random.getstate())
    return grads(model), grads(model_ref), (loss, loss_ref), (rng, rng_ref)


@pytest.mark.parametrize(
    "model_class",
    [
        "Tagger", "FunctionalTagger", "FastDeterministicTagger", "FastZeroDropoutTagger", "FastModuleZeroDropoutTagger",
        "FastDefaultDropoutTagger", "FastConfiguredZeroTagger", "NoiseOutsideEncoder", "LayerDropTagger", "SkipOutsideTagger",
    ],
)  # fmt: skip
def test_replayed_or_absent_randomness_gives_identical_gradients(model_class):
    got, ref, (loss, loss_ref), (rng, rng_ref) = step_both(fx, model_class)
    assert_same_grads(got, ref)
    assert torch.equal(loss, loss_ref)
    # The step consumed exactly the randomness of the un-checkpointed step.
    assert torch.equal(rng[0], rng_ref[0]) and rng[1] == rng_ref[1]


@pytest.mark.parametrize("model_class", ["FastTagger", "FastFunctionalTagger", "FastConfiguredDropoutTagger"])
def test_preserve_rng_state_false_with_dropout_changes_gradients(model_class):
    got, ref, (loss, loss_ref), (rng, rng_ref) = step_both(fx, model_class)
    assert torch.equal(loss, loss_ref)  # the forward is the same; only the recompute differs
    worst, name = worst_relative_diff(got, ref)
    assert worst > 0.05, (worst, name)
    assert any(n.startswith("blocks.") for n in differing(got, ref))
    # The recompute drew new masks from the global generator: every later mask shifts too.
    assert not torch.equal(rng[0], rng_ref[0])


@pytest.mark.parametrize(
    "draw",
    [
        lambda x: torch.nn.Dropout(p=0.0).train()(x),
        lambda x: torch.nn.Dropout(0.0).train()(x),
        lambda x: torch.nn.functional.dropout(x, p=0.0, training=True),
        lambda x: torch.nn.Dropout(0.1).eval()(x),
    ],
    ids=["Dropout(p=0.0)", "Dropout(0.0)", "F.dropout(p=0.0)", "Dropout(0.1).eval()"],
)
def test_dropout_that_draws_nothing_leaves_the_generator_alone(draw):
    x = torch.randn(4, 8, requires_grad=True)
    before = torch.get_rng_state()
    out = draw(x)
    out.sum().backward()
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(out, x)


def test_dropout_with_p_draws():
    before = torch.get_rng_state()
    torch.nn.Dropout(0.1).train()(torch.randn(4, 8))
    assert not torch.equal(torch.get_rng_state(), before)


def test_user_generator_inside_region_changes_gradients():
    got, ref, (loss, loss_ref), _ = step_both(fx, "NoisyEncoder")
    assert torch.equal(loss, loss_ref)
    worst, name = worst_relative_diff(got, ref)
    assert worst > 0.05, (worst, name)
    assert {"blocks.0.lin.weight", "blocks.1.lin.weight"} <= set(differing(got, ref))


def test_user_generator_is_advanced_twice():
    torch.manual_seed(0)
    model = fx.NoisyEncoder()
    start = [block.generator.get_state() for block in model.blocks]
    fx.training_step(model, fx.make_batch())
    twice = torch.Generator().set_state(start[0])
    torch.randn(4, 16, generator=twice)
    torch.randn(4, 16, generator=twice)
    assert torch.equal(model.blocks[0].generator.get_state(), twice.get_state())


def test_python_random_inside_region_changes_gradients():
    got, ref, (loss, loss_ref), (rng, rng_ref) = step_both(fx, "JitterEncoder")
    assert torch.equal(loss, loss_ref)
    worst, name = worst_relative_diff(got, ref)
    assert worst > 0.05, (worst, name)
    assert rng[1] != rng_ref[1]  # Python's stream advanced by the recompute


def _draws_disagree(seed, p=0.5):
    """Forward draws for blocks 0 and 1, then the recompute draws (block 1 first, then block 0)."""
    rng = random.Random(seed)
    fwd0, fwd1, re1, re0 = (rng.random() for _ in range(4))
    return fwd0 >= p and re0 < p and fwd1 >= p and re1 >= p


def test_stochastic_depth_with_python_random_drops_branch_gradients():
    seed = next(s for s in range(1000) if _draws_disagree(s))
    got, ref, _, _ = step_both(fx, "DeepTagger", python_seed=seed)
    # Block 0 took its branch in the forward, skipped it in the recompute: lin_b gets no gradient.
    assert none_only_in(got, ref) == ["blocks.0.lin_b.bias", "blocks.0.lin_b.weight"]
    assert "blocks.0.lin_a.weight" in differing(got, ref)


def test_numpy_random_inside_region_changes_gradients():
    np = pytest.importorskip("numpy")
    nfx = load_fixture("rng_numpy_mixing")
    model, model_ref = twin(nfx.MixEncoder)
    batch = fx.make_batch()
    with no_checkpointing(nfx):
        np.random.seed(3)
        nfx.training_step(model_ref, batch)
        next_ref = np.random.random()
    np.random.seed(3)
    nfx.training_step(model, batch)
    worst, name = worst_relative_diff(grads(model), grads(model_ref))
    assert worst > 0.05, (worst, name)
    assert np.random.random() != next_ref  # numpy's stream advanced by the recompute


def test_numpy_random_outside_region_is_correct():
    np = pytest.importorskip("numpy")
    nfx = load_fixture("rng_numpy_mixing")
    model, model_ref = twin(nfx.MixOutsideEncoder)
    batch = fx.make_batch()
    with no_checkpointing(nfx):
        np.random.seed(3)
        nfx.training_step(model_ref, batch)
    np.random.seed(3)
    nfx.training_step(model, batch)
    assert_same_grads(grads(model), grads(model_ref))
