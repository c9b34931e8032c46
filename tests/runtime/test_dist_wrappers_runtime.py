"""torch.distributed's checkpoint wrappers at runtime (CKPT002, CKPT006).

Measured on torch 2.13 (CPU): `checkpoint_wrapper` hands `preserve_rng_state=False` to
torch.utils.checkpoint, so the LoRA dropout inside the wrapped blocks draws a different mask on
recompute (worst relative gradient error 1.09; the global RNG stream shifts), whether the blocks are
wrapped one by one or by `apply_activation_checkpointing` (check_fn or ModuleWrapPolicy). With a
`checkpoint_fn` and no `use_reentrant`, checkpoint_wrapper passes its keywords unchanged, so torch
warns about the omitted flag and runs reentrant. Default wrappers, and wrappers around the Linear
layers only (the dropout runs outside), are exact.
"""

import warnings

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, load_fixture, worst_relative_diff  # noqa: E402

fx = load_fixture("fsdp_wrappers")
WRAPPED = "_checkpoint_wrapped_module."


def unwrapped_grads(model) -> dict:
    return {name.replace(WRAPPED, ""): (None if p.grad is None else p.grad.detach().clone()) for name, p in model.named_parameters()}


def step_both(build):
    """`build`: a builder's name in the fixture, or a function that builds the model."""
    model = getattr(fx, build)() if isinstance(build, str) else build()
    model_ref = fx.LoraGPT()
    model_ref.load_state_dict({name.replace(WRAPPED, ""): value for name, value in model.state_dict().items()})
    batch = fx.make_batch()
    torch.manual_seed(1)
    fx.training_step(model_ref, batch)
    rng_ref = torch.get_rng_state()
    torch.manual_seed(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fx.training_step(model, batch)
    wrappers = sum(type(m).__name__ == "CheckpointWrapper" for m in model.modules())
    omitted = any("use_reentrant parameter should be passed explicitly" in str(w.message) for w in caught)
    return unwrapped_grads(model), unwrapped_grads(model_ref), torch.equal(torch.get_rng_state(), rng_ref), wrappers, omitted


@pytest.mark.parametrize("build", ["build_wrapped_blocks", "build_applied", "build_by_policy"])
def test_preserve_rng_state_false_through_the_wrapper_changes_gradients(build):
    got, ref, same_rng, wrappers, omitted = step_both(build)
    assert wrappers == 2 and not omitted  # the two blocks, non-reentrant
    worst, name = worst_relative_diff(got, ref)
    assert worst > 0.1, (worst, name)
    assert not same_rng  # the recompute drew new masks from the global stream


def test_checkpoint_fn_without_use_reentrant_runs_reentrant_with_the_warning():
    got, ref, same_rng, wrappers, omitted = step_both("build_with_checkpoint_fn")
    assert wrappers == 2
    assert omitted
    assert_same_grads(got, ref)  # reentrant with default preserve_rng_state: the dropout replays


@pytest.mark.parametrize("build", ["build_wrapped_blocks_replaying", "build_applied_to_linears", "build_with_explicit_checkpoint_fn"])
def test_replaying_or_dropout_free_wrappers_are_exact(build):
    got, ref, same_rng, wrappers, omitted = step_both(build)
    assert wrappers >= 2
    assert_same_grads(got, ref)
    assert same_rng and not omitted


def test_lightning_fsdp_strategy_wraps_with_the_replaying_default():
    """Lightning 2.6's FSDPStrategy(activation_checkpointing_policy={Block}) (Fabric's and the
    Trainer's share the code) applies torch's default checkpoint_wrapper: CheckpointImpl.NO_REENTRANT,
    `partial(checkpoint, use_reentrant=False)`, preserve_rng_state left True, so LoRA dropout inside
    the blocks replays exactly: nothing for CKPT002 (or the reentrant rules) to report."""
    pytest.importorskip("lightning")
    from lightning.fabric.strategies import FSDPStrategy
    from lightning.fabric.strategies.fsdp import _setup_activation_checkpointing
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl

    def build():
        torch.manual_seed(0)
        model = fx.LoraGPT()
        _setup_activation_checkpointing(model, FSDPStrategy(activation_checkpointing_policy={fx.Block})._activation_checkpointing_kwargs)
        return model

    wrapper = build().blocks[0]
    assert type(wrapper).__name__ == "CheckpointWrapper" and wrapper.checkpoint_impl is CheckpointImpl.NO_REENTRANT
    assert wrapper.checkpoint_fn.keywords == {"use_reentrant": False}  # preserve_rng_state keeps its default True
    got, ref, same_rng, wrappers, omitted = step_both(build)
    assert wrappers == 2 and not omitted
    assert_same_grads(got, ref)
    assert same_rng
