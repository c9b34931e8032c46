"""fixtures/method_returns.py at runtime: blocks fed through a helper method (or behind a stem an
inherited `__init__` froze) by reentrant checkpoints whose input cannot require grad get no
gradient; the look-alikes feed them through a trainable layer and train every block."""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture  # noqa: E402

fx = load_fixture("method_returns")


def block_grads(model, *inputs):
    torch.manual_seed(0)
    model(*inputs).sum().backward()
    return [p.grad for block in model.blocks for p in block.parameters()]


def ids():
    return torch.randint(0, 50, (2, 5))


def features():
    return torch.randn(4, 12)


@pytest.mark.parametrize(("name", "make"), [("FrozenEncoderTagger", ids), ("RawFeatureNet", features), ("CheckpointedChild", features)])
def test_blocks_fed_by_a_frozen_or_data_only_helper_get_no_gradient(name, make):
    assert all(g is None for g in block_grads(getattr(fx, name)(), make()))


@pytest.mark.parametrize(("name", "make"), [("TrainableEncoderTagger", ids), ("ProjectedFeatureNet", features), ("LearnedNormNet", features)])
def test_blocks_fed_through_a_trainable_layer_train(name, make):
    assert all(g is not None for g in block_grads(getattr(fx, name)(), make()))
