"""fixtures/crossfile/evaluation at runtime: `evaluate.py` calls a model of `model.py` under no_grad.

A new `Net` is in train mode, so its layers (gated on `self.training`) checkpoint under
`torch.no_grad()`, once per layer, with `torch.is_grad_enabled()` False, returning exactly what eval
mode returns (CKPT008); after `.eval()` no checkpoint runs.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture_package  # noqa: E402


@pytest.fixture
def modules(monkeypatch):
    evaluate, model = load_fixture_package("crossfile/evaluation", "evaluate", "model")
    calls = []
    real = model.cp.checkpoint

    def recording(function, *args, **kwargs):
        calls.append(torch.is_grad_enabled())
        return real(function, *args, **kwargs)

    monkeypatch.setattr(model.cp, "checkpoint", recording)
    return evaluate, calls


def test_a_new_model_scored_under_no_grad_checkpoints_for_nothing(modules):
    evaluate, calls = modules
    inputs = torch.randn(4, 16)
    torch.manual_seed(0)
    score = evaluate.score(inputs)
    assert calls == [False, False] and not score.requires_grad
    calls.clear()
    torch.manual_seed(0)
    assert torch.equal(evaluate.score_in_eval_mode(inputs), score)  # same weights and result, no checkpoint
    assert calls == []
