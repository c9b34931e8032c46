"""fixtures/checkpoint_helpers.py measured: calls of a project's own checkpoint helpers behave as
the checkpoint inside them, with the caller's arguments.

The helper fed the raw patches leaves every block without gradients (FINDINGS 1B); a memory tensor
handed to it by keyword is bound by partial and breaks backward once two blocks read it (3B); the
wrapper module's `preserve_rng_state=False` redraws its blocks' Dropout masks (2). A stem first, and
the helper that only checkpoints inputs requiring grad, give the reference gradients.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import SECOND_BACKWARD, assert_same_grads, differing, grads, load_fixture, none_only_in, referenced  # noqa: E402

fx = load_fixture("checkpoint_helpers")
pytestmark = pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad=True:UserWarning")


def run(model_class):
    batch = fx.make_batch()
    return (*referenced(fx, getattr(fx, model_class), fx.training_step, (batch,)), batch)


def test_helper_fed_raw_patches_leaves_the_blocks_without_grad():
    model, model_ref, batch = run("PatchClassifier")
    fx.training_step(model, batch)
    got, ref = grads(model), grads(model_ref)
    assert none_only_in(got, ref) == sorted(n for n in ref if n.startswith("blocks."))


def test_memory_handed_by_keyword_breaks_backward():
    model, model_ref, batch = run("MemoryPatchClassifier")
    assert model_ref.memory_encoder.weight.grad is not None
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
        fx.training_step(model, batch)


@pytest.mark.parametrize("model_class", ["WrappedPatchClassifier", "FastPatchClassifier"])
def test_wrapper_module_without_rng_state_redraws_dropout(model_class):
    model, model_ref, batch = run(model_class)
    fx.training_step(model, batch)
    assert differing(grads(model), grads(model_ref))


@pytest.mark.parametrize("model_class", ["StemPatchClassifier", "GuardedPatchClassifier", "ReplayingFastPatchClassifier"])
def test_stem_first_or_guarded_helper_is_exact(model_class):
    model, model_ref, batch = run(model_class)
    fx.training_step(model, batch)
    assert_same_grads(grads(model), grads(model_ref))
