"""fixtures/data_from_callers.py measured: what a checkpoint gets is decided by its callers.

The speech model's raw features reach its encoder's reentrant checkpoints: the encoder's
convolutions get `.grad = None` (FINDINGS 1A/1B); a trainable projection first gives the reference
gradients. The training step checkpoints the loader batch it receives: the stem gets no gradient.
The stages a helper receives hold Dropout: with `preserve_rng_state=False` the gradients differ
(FINDINGS 2); replayed, and with the stem run first, they are exact.
"""

import contextlib

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, differing, grads, load_fixture, no_checkpointing, none_only_in, referenced, twin  # noqa: E402

fx = load_fixture("data_from_callers")
pytestmark = pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad=True:UserWarning")


def speech_grads(model_class):
    model, model_ref = twin(getattr(fx, model_class))
    features, labels = fx.make_speech_batch()
    for m, patched in ((model_ref, True), (model, False)):
        with no_checkpointing(fx) if patched else contextlib.nullcontext():
            torch.nn.functional.cross_entropy(m(features), labels).backward()
    return grads(model), grads(model_ref)


def test_raw_features_passed_to_the_encoder_leave_its_convolutions_without_grad():
    got, ref = speech_grads("SpeechClassifier")
    assert none_only_in(got, ref) == sorted(n for n in ref if n.startswith(("encoder.mel_conv.", "encoder.blocks.")))


def test_projected_features_train_the_encoder():
    got, ref = speech_grads("ProjectedSpeechClassifier")
    assert_same_grads(got, ref)


def step_grads(step):
    batch = fx.make_batch()  # seeds the RNG itself: made before the runs
    model, model_ref = referenced(fx, fx.Tagger, step, batch, seed=4)
    step(model, *batch)
    return grads(model), grads(model_ref)


def test_training_step_checkpointing_the_batch_leaves_the_stem_without_grad_and_redraws_dropout():
    got, ref = step_grads(fx.train_step)
    assert none_only_in(got, ref) == ["stem.0.bias", "stem.0.weight"]
    assert set(differing(got, ref)) & {n for n in ref if n.startswith("stages.")}


def test_fixed_training_step_is_exact():
    got, ref = step_grads(fx.train_step_fixed)
    assert_same_grads(got, ref)
