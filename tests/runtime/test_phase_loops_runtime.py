"""CKPT008 in a train/val phase loop (fixtures/phase_loops.py): `torch.set_grad_enabled(phase ==
"train")` turns grad off in the "val" phase, where `model.eval()` was called.

A forward that checkpoints whenever its `memory_efficient` flag is on still checkpoints there, with
grad off: the checkpoints record nothing and only add a forward. Gating on `self.training` lets
`eval()` close the gate. Counted here with `torch.is_grad_enabled()` at each checkpoint call.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture, recording_grad_modes  # noqa: E402


@pytest.fixture
def fx(monkeypatch):
    return recording_grad_modes(monkeypatch, load_fixture("phase_loops"))


def test_the_val_phase_checkpoints_with_grad_off(fx):
    torch.manual_seed(0)
    model = fx.train_model(fx.DenseStack(), fx.make_loaders())
    # 2 batches x 3 layers per phase: the train phase's with grad on, the val phase's with it off.
    assert fx.recorded == [True] * 6 + [False] * 6
    assert not model.training


def test_a_mode_gate_checkpoints_only_in_the_train_phase(fx):
    torch.manual_seed(0)
    fx.train_gated(fx.GatedDenseStack(), fx.make_loaders())
    assert fx.recorded == [True] * 6


def test_the_val_phase_checkpoints_change_nothing_but_cost(fx):
    """Same weights, same val outputs with and without the grad-free checkpoints: pure overhead."""
    torch.manual_seed(0)
    model = fx.DenseStack().eval()
    inputs = fx.make_loaders()["val"][0][0]
    with torch.no_grad():
        checkpointed = model(inputs)
        model.memory_efficient = False
        plain = model(inputs)
    assert torch.equal(checkpointed, plain)
