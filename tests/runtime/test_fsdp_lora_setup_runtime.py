"""fixtures/fsdp_lora_setup.py at runtime (CKPT002, CKPT005).

Measured on torch 2.13 (CPU), one training step against the same weights without checkpointing:
- LoRA blocks whose dropout p comes from `LoRAConfig.lora_dropout` (0.05 by default, 0.1 when set),
  checkpointed with `preserve_rng_state=False` — wrapped one by one by a setup function handed the
  model, by `apply_activation_checkpointing` with a `def` check_fn or a `functools.partial` of one,
  or by the model's own `checkpoint(...)` — get different gradients and the global RNG stream moves.
- The same blocks built from `LoRAConfig(lora_dropout=0.0)` are exact and draw nothing, as are the
  default replaying wrapper and a check_fn that selects only the Linear layers.
- Adapters wrapped with `CheckpointImpl.REENTRANT` by a setup function, behind a frozen embedding,
  get `.grad = None`; wrapped with NO_REENTRANT they are exact.
"""

import copy
import warnings

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import NO_INPUT_GRAD_WARNING, assert_same_grads, grads, load_fixture, no_checkpointing, none_only_in, worst_relative_diff  # noqa: E402

fx = load_fixture("fsdp_lora_setup")
WRAPPED = "_checkpoint_wrapped_module."


def unwrapped(model):
    """A copy of `model` with every checkpoint wrapper replaced by the module it wraps."""
    plain = copy.deepcopy(model)
    for parent in list(plain.modules()):
        for name, child in list(parent.named_children()):
            if type(child).__name__ == "CheckpointWrapper":
                setattr(parent, name, child._checkpoint_wrapped_module)
    return plain


def step_both(build):
    """(grads, reference grads, same RNG state after the step, warnings) for one step of `build()`'s
    model and of the same weights run without any checkpoint."""
    model = getattr(fx, build)()
    reference = unwrapped(model)
    batch = fx.make_batch()
    with no_checkpointing(fx):
        torch.manual_seed(1)
        fx.training_step(reference, batch)
        rng_ref = torch.get_rng_state()
    torch.manual_seed(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fx.training_step(model, batch)
    got = {name.replace(WRAPPED, ""): g for name, g in grads(model).items()}
    return got, grads(reference), torch.equal(torch.get_rng_state(), rng_ref), [str(w.message) for w in caught]


@pytest.mark.parametrize("build", ["build_wrapped_by_setup", "build_applied_by_def", "build_applied_by_partial", "build_self_checkpointed"])
def test_lora_dropout_without_rng_replay_changes_gradients(build):
    got, ref, same_rng, _ = step_both(build)
    worst, name = worst_relative_diff(got, ref)
    assert worst > 0.05, (worst, name)
    assert not same_rng  # the recompute drew new masks from the global stream


@pytest.mark.parametrize("build", ["build_wrapped_by_setup_replaying", "build_applied_to_linears_by_def", "build_dropout_free"])
def test_replayed_or_zero_dropout_is_exact(build):
    got, ref, same_rng, _ = step_both(build)
    assert_same_grads(got, ref)
    assert same_rng


def test_dropout_with_p_zero_from_the_config_draws_nothing():
    model = fx.DropoutFreeLoRAGPT(fx.LoRAConfig(lora_dropout=0.0)).train()
    before = torch.get_rng_state()
    fx.training_step(model, fx.make_batch())
    assert torch.equal(torch.get_rng_state(), before)
    drawing = fx.DropoutFreeLoRAGPT(fx.LoRAConfig()).train()
    fx.training_step(drawing, fx.make_batch())
    assert not torch.equal(torch.get_rng_state(), before)


def test_adapters_wrapped_reentrantly_by_a_setup_function_get_no_gradient():
    got, ref, _, warned = step_both("build_adapter_lm")
    lost = none_only_in(got, ref)
    assert sorted(lost) == sorted(name for name in ref if name.startswith("adapters."))
    assert any(NO_INPUT_GRAD_WARNING in text for text in warned)


def test_adapters_wrapped_non_reentrantly_by_a_setup_function_are_exact():
    got, ref, _, warned = step_both("build_residual_adapter_lm")
    assert_same_grads(got, ref)
    assert not any(NO_INPUT_GRAD_WARNING in text for text in warned)
