"""fixtures/crossfile/reentrant_settings at runtime (torch 2.13, CPU): the package's settings module
chooses reentrant checkpointing (`USE_REENTRANT = True`, `CHECKPOINT_KWARGS`), and the encoders feed
their first block the raw features. Its output, and so the residual sum each later block gets, does
not require grad: no block's parameters get a gradient, read either way, the head trains and torch
only warns. Behind the look-alike's trainable stem every block trains.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import NO_INPUT_GRAD_WARNING, capture_warnings, load_fixture_package, warning_texts  # noqa: E402,F401

(model_module,) = load_fixture_package("crossfile/reentrant_settings", "model")


def trained(name):
    torch.manual_seed(0)
    model = getattr(model_module, name)()
    features, targets = torch.randn(8, 16), torch.randn(8)
    torch.nn.functional.mse_loss(model(features).squeeze(-1), targets).backward()
    return model


@pytest.mark.parametrize("name", ["FeatureEncoder", "SpreadFeatureEncoder"])
def test_no_block_gets_a_gradient_under_the_settings_mode(name, capture_warnings):
    assert model_module.settings.USE_REENTRANT and model_module.CHECKPOINT_KWARGS == {"use_reentrant": True}
    model = trained(name)
    assert all(p.grad is None for p in model.blocks.parameters())
    assert all(p.grad is not None for p in model.head.parameters())
    assert NO_INPUT_GRAD_WARNING in warning_texts(capture_warnings)


def test_behind_a_trainable_stem_every_block_trains(capture_warnings):
    model = trained("StemFeatureEncoder")
    assert all(p.grad is not None for p in model.parameters())
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)
