"""Calls of modules wrapped by `checkpoint_wrapper(..., CheckpointImpl.REENTRANT)` at runtime (CKPT001, CKPT005).

Measured on torch 2.13 (CPU): a wrapped block runs `checkpoint(block, *args, use_reentrant=True)`
on every call, so fed the raw features (wrapped in `__init__`, by a comprehension over the model's
list, by `apply_activation_checkpointing` with a check_fn) or the output of a frozen embedding
(wrapped by an indexed loop, or by a ModuleWrapPolicy; or by a helper wrapping the layer class its
caller names) every block parameter ends with `.grad =
None` and torch only warns "None of the inputs have requires_grad=True". Blocks behind a trainable
projection, blocks whose grad-carrying gate comes by keyword (checkpoint_wrapper packs keywords into
positional checkpoint inputs under REENTRANT), and NO_REENTRANT wrappers are exact. With
`checkpoint_fn=checkpoint, use_reentrant=True` and no checkpoint_impl the keywords reach torch's
checkpoint unpacked: `ValueError: Unexpected keyword arguments: mask` (CKPT003); adding
`checkpoint_impl=CheckpointImpl.REENTRANT` packs them again, and the gradients are exact.
"""

import copy
import warnings

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import NO_INPUT_GRAD_WARNING, assert_same_grads, load_fixture, none_only_in  # noqa: E402

fx = load_fixture("reentrant_wrapped_blocks")
WRAPPED = "_checkpoint_wrapped_module."


def unwrapped(model):
    """A copy of `model` with every checkpoint wrapper replaced by the module it wraps."""
    plain = copy.deepcopy(model)
    for parent in list(plain.modules()):
        for name, child in list(parent.named_children()):
            if type(child).__name__ == "CheckpointWrapper":
                setattr(parent, name, child._checkpoint_wrapped_module)
    return plain


def step_both(build, batch):
    model = getattr(fx, build)()
    reference = unwrapped(model)
    assert sum(type(m).__name__ == "CheckpointWrapper" for m in model.modules()) >= 1
    fx.training_step(reference, batch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fx.training_step(model, batch)
    grads = {name.replace(WRAPPED, ""): (None if p.grad is None else p.grad.detach().clone()) for name, p in model.named_parameters()}
    reference_grads = {name: (None if p.grad is None else p.grad.detach().clone()) for name, p in reference.named_parameters()}
    return grads, reference_grads, [str(w.message) for w in caught]


@pytest.mark.parametrize(
    "build, batch, frozen_prefix",
    [
        ("build_stem_net", fx.make_batch(), "stem."),
        ("build_by_comprehension", fx.make_batch(), "blocks."),
        ("build_by_check_fn", fx.make_batch(), "blocks."),
        ("build_sequential", fx.make_batch(), "blocks."),
        ("build_by_indexed_loop", fx.make_tokens(), "layers."),
        ("build_by_policy", fx.make_tokens(), "layers."),
        ("build_by_helper", fx.make_batch(), "blocks."),
    ],
)
def test_reentrant_wrapped_blocks_on_inputs_without_grad_get_no_gradient(build, batch, frozen_prefix):
    got, ref, warned = step_both(build, batch)
    lost = none_only_in(got, ref)
    assert lost and all(name.startswith(frozen_prefix) for name in lost), lost
    assert sorted(lost) == sorted(name for name in ref if name.startswith(frozen_prefix))
    assert any(NO_INPUT_GRAD_WARNING in text for text in warned)


@pytest.mark.parametrize(
    "build, batch",
    [
        ("build_projected", fx.make_batch()), ("build_gated", fx.make_batch()), ("build_non_reentrant", fx.make_batch()),
        ("build_projected_sequential", fx.make_batch()), ("build_projected_by_helper", fx.make_batch()),
    ],  # fmt: skip
)
def test_wrapped_blocks_with_an_input_that_requires_grad_or_non_reentrant_are_exact(build, batch):
    got, ref, warned = step_both(build, batch)
    assert_same_grads(got, ref)
    assert not any(NO_INPUT_GRAD_WARNING in text for text in warned)


def test_a_tensor_keyword_reaches_a_reentrant_wrapper_as_a_packed_positional_input():
    """The gate comes by keyword only and is read by every block: no "backward through the graph a
    second time", and the gate's own layer gets its gradient."""
    got, ref, _ = step_both("build_gated", fx.make_batch())
    assert got["gate.weight"] is not None
    assert_same_grads(got, ref)


def test_keywords_reach_torchs_checkpoint_with_a_reentrant_checkpoint_fn_and_raise():
    model = fx.build_with_checkpoint_fn()
    fx.training_step(unwrapped(model), fx.make_batch())  # the same step runs without the wrappers
    with pytest.raises(ValueError, match="Unexpected keyword arguments: mask"):
        fx.training_step(model, fx.make_batch())


def test_a_reentrant_impl_packs_the_keywords_for_a_checkpoint_fn_too():
    got, ref, _ = step_both("build_packed_with_checkpoint_fn", fx.make_batch())
    assert_same_grads(got, ref)
