"""fixtures/wrapped_model_eval.py at runtime (CKPT008): a model whose blocks
`apply_activation_checkpointing` wraps with a reentrant `checkpoint_wrapper`, evaluated after
`model.eval()` under `torch.no_grad()`. Measured on torch 2.13 CPU: the wrapper calls torch's
checkpoint for every block call, in eval mode and with grad disabled (`torch.is_grad_enabled()`
False at each), for the same loss as the unwrapped model: nothing is recorded, so nothing is
recomputed, pure overhead. The unwrapped look-alike makes no checkpoint call.
"""

import pytest

torch = pytest.importorskip("torch")
wrapper_module = pytest.importorskip("torch.distributed.algorithms._checkpoint.checkpoint_wrapper")

from ckpt_runtime import load_fixture  # noqa: E402


@pytest.fixture
def recorded(monkeypatch):
    """The grad mode at every checkpoint the wrappers run (they bind torch's checkpoint when built)."""
    calls = []
    real = wrapper_module.torch_utils_checkpoint

    def recording(function, *args, **kwargs):
        calls.append(torch.is_grad_enabled())
        return real(function, *args, **kwargs)

    monkeypatch.setattr(wrapper_module, "torch_utils_checkpoint", recording)
    return calls


def test_wrapped_blocks_checkpoint_under_no_grad_in_eval_mode(recorded):
    fx = load_fixture("wrapped_model_eval")
    torch.manual_seed(0)
    loss = fx.validate_wrapped()
    assert recorded == [False, False, False, False]  # 2 blocks x 2 batches, all with grad disabled
    torch.manual_seed(0)
    assert loss == fx.evaluate(fx.TinyLM(), fx.make_batches())  # the unwrapped model: the same loss


def test_unwrapped_model_makes_no_checkpoint_call(recorded):
    fx = load_fixture("wrapped_model_eval")
    fx.validate_plain()
    assert recorded == []
