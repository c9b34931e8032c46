"""`ckptlint.confirm.compare()`: the in-process A/B helper for a project's own tests."""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")
import torch.utils.checkpoint  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import ckptlint  # noqa: E402
from ckptlint.confirm import compare, compare_call  # noqa: E402


class RawInputNet(nn.Module):
    """The seed bug in miniature: a reentrant checkpoint straight on the data."""

    def __init__(self, reentrant=True):
        super().__init__()
        self.reentrant = reentrant
        self.block = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
        self.head = nn.Linear(8, 3)

    def forward(self, x, scale=1.0):
        return self.head(checkpoint(self.block, x * scale, use_reentrant=self.reentrant))


class AuxLossNet(nn.Module):
    """Stores an aux loss inside the checkpointed block; the training step adds it to the loss."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.router = nn.Linear(4, 2)
        self.aux = None

    def block(self, h):
        probs = self.router(h).softmax(-1)
        self.aux = probs.pow(2).mean()
        return h * probs[..., :1]

    def forward(self, x):
        return checkpoint(self.block, self.stem(x), use_reentrant=True)


def train_step(model, x):
    (model(x).pow(2).mean() + model.aux).backward()


def batch(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def test_reentrant_checkpoint_on_raw_input_is_reported():
    report = compare(RawInputNet(), batch(2, 6))
    assert not report.identical
    assert [name for name, _ in report.grad_none_with] == ["block.0.weight", "block.0.bias"]
    assert report.error_with is None and report.grad_differences == []
    (call,) = report.calls
    assert call.use_reentrant is True and call.effective_reentrant and not call.positional_requires_grad
    assert call.path == __file__ and call.module == "block" and call.output_type == "Tensor"
    assert any("None of the inputs have requires_grad=True" in w for w in report.warnings)
    with pytest.raises(AssertionError, match=r"block\.0\.weight: grad None with checkpointing; \|grad\| [0-9.e-]+ without"):
        report.assert_identical()


def test_non_reentrant_twin_is_identical():
    report = compare(RawInputNet(reentrant=False), batch(2, 6), scale=2.0)
    assert report.identical, report
    report.assert_identical()
    assert report.params_compared == 4
    assert str(report).startswith("identical: same exceptions (none), 4 parameter gradients")


def test_the_users_model_and_torch_are_left_untouched():
    model = RawInputNet()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    compare(model, batch(2, 6))
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.utils.checkpoint.checkpoint is checkpoint
    assert globals()["checkpoint"] is checkpoint


def test_training_function_over_two_steps_finds_the_lost_aux_gradient():
    model = AuxLossNet()
    report = compare_call(model, (model, batch(3, 4)), call=train_step, steps=2)
    assert not report.identical
    assert ("aux", False, True) in report.attribute_differences
    assert any(name.startswith("router.") for name, _, _ in report.grad_differences)


def test_partial_bound_checkpoint_attributes_are_bypassed_too():
    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Linear(5, 5)
            self.checkpoint_fn = functools.partial(checkpoint, use_reentrant=True)

        def forward(self, x):
            return self.checkpoint_fn(self.block, x)

    report = compare(Wrapped(), batch(2, 5))
    assert [name for name, _ in report.grad_none_with] == ["block.weight", "block.bias"]
    assert report.calls and report.calls[0].use_reentrant is True


def test_exception_only_with_checkpointing_is_reported():
    class KeywordInput(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Bilinear(3, 3, 3)

        def forward(self, x):
            return checkpoint(self.block, x, input2=x * 2, use_reentrant=True)

    report = compare(KeywordInput(), batch(2, 3))
    assert report.error_with == "forward: ValueError: Unexpected keyword arguments: input2"
    assert report.error_without is None
    assert report.calls[0].tensor_kwargs == ["`input2` (no grad)"]
    assert report.exception_evidence() == ["forward: ValueError: Unexpected keyword arguments: input2 with checkpointing; no exception without"]


def test_example_decorator_registers_and_returns_the_factory():
    from ckptlint.confirm import registry

    @ckptlint.example(RawInputNet)
    def factory():
        return RawInputNet(), (batch(2, 6),), {}

    assert registry.EXAMPLES[-1] == (RawInputNet, factory)
    assert factory.__ckptlint_example__ is RawInputNet
    registry.EXAMPLES.pop()
