"""A forward decorated with a checkpointing decorator (fixtures/checkpointing_decorators.py): the
decorator's wrapper runs `checkpoint(forward, self, *args, use_reentrant=True)` in training, so a
block fed the raw images gets no gradient (and torch warns "None of the inputs have
requires_grad=True"); decorated with the non-reentrant version it trains like the model without
checkpointing."""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import NO_INPUT_GRAD_WARNING, assert_same_grads, capture_warnings, grads, load_fixture, no_checkpointing, none_only_in, twin, warning_texts  # noqa: E402,F401

fx = load_fixture("checkpointing_decorators")


def step_both(build):
    model, model_ref = twin(getattr(fx, build))
    with no_checkpointing(fx):
        fx.training_step(model_ref, fx.make_batch())
    fx.training_step(model, fx.make_batch())
    return grads(model), grads(model_ref)


def test_a_reentrant_decorated_block_on_raw_images_gets_no_gradient(capture_warnings):
    got, ref = step_both("Encoder")
    assert none_only_in(got, ref) == ["down.conv.bias", "down.conv.weight"]
    assert got["head.weight"] is not None
    assert NO_INPUT_GRAD_WARNING in warning_texts(capture_warnings)


def test_a_non_reentrant_decorated_block_trains_like_the_plain_model(capture_warnings):
    got, ref = step_both("SafeEncoder")
    assert_same_grads(got, ref)
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)
