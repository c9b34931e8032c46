"""CKPT003 through closures another file's factories make (fixtures/crossfile/closure_factories):
the encoder memory a reentrant checkpoint's closure captures is not a checkpoint input, so the
recompute backpropagates into its graph a second time and the step fails. Passed positionally, it
gives the gradients of the model without checkpointing."""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, grads, load_fixture_package, no_checkpointing, twin  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture
def fx():
    return load_fixture_package("crossfile/closure_factories", "model")[0]


@pytest.mark.parametrize("decoder", ["Decoder", "ConditionedDecoder"])
def test_a_captured_memory_is_backpropagated_twice(fx, decoder):
    model, reference = twin(getattr(fx, decoder))
    with no_checkpointing(fx):
        fx.training_step(reference, fx.make_batch())  # trains without checkpointing
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        fx.training_step(model, fx.make_batch())


def test_a_positional_memory_gives_exact_gradients(fx):
    model, reference = twin(fx.PositionalDecoder)
    with no_checkpointing(fx):
        fx.training_step(reference, fx.make_batch())
    fx.training_step(model, fx.make_batch())
    assert_same_grads(grads(model), grads(reference))
