"""Models handed to helpers before a call under no_grad, and checkpoints behind a method (CKPT008).

fixtures/mode_helpers.py: a helper that only runs the model leaves it in train mode (`model.training`
is still True after it), so a `Tower` called under `torch.no_grad()` afterwards still checkpoints
(counted here with `torch.is_grad_enabled()` at each call); a helper that calls `.eval()` /
`.train()` on every path sets the mode its caller sees, also when it returns the model. A checkpoint
in a method called under `if torch.is_grad_enabled() and self.gradient_checkpointing:` (diffusers'
gate) does not run without grad; under the flag alone it runs in eval mode too. A gate on the
flag of the config the model is built from (`self.config.gradient_checkpointing and self.training`)
runs when that config switches it on.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture, recording_grad_modes  # noqa: E402


@pytest.fixture
def fx(monkeypatch):
    return recording_grad_modes(monkeypatch, load_fixture("mode_helpers"), everywhere=True)


def batch():
    torch.manual_seed(0)
    return torch.randn(4, 16), torch.tensor([0, 1, 2, 3])


def test_a_helper_that_only_runs_the_model_leaves_it_training(fx):
    model = fx.Tower()
    fx.sample(model, batch()[0])
    assert model.training and fx.recorded == [True, True, True]


def test_scoring_after_sampling_checkpoints_without_grad(fx):
    loss, _ = fx.score_after_sampling(*batch())
    assert fx.recorded == [True, True, True, False, False, False]  # sampling with grad, then scoring without
    assert not loss.requires_grad


def test_a_helper_that_switches_to_eval_stops_the_checkpoints(fx):
    fx.score_after_set_eval(*batch())
    assert fx.recorded == []


def test_a_teacher_prepared_for_training_checkpoints_for_its_targets(fx):
    targets = fx.teacher_targets(batch()[0])
    assert fx.recorded == [False, False, False] and not targets.requires_grad
    fx.recorded.clear()
    fx.teacher_targets_in_eval_mode(batch()[0])
    assert fx.recorded == []


def test_a_method_checkpoint_under_the_flag_alone_runs_without_grad_in_eval_mode(fx):
    fx.denoise(batch()[0], steps=2)
    assert fx.recorded == [False] * 6


def test_the_grad_gate_around_the_method_call_stops_it_without_grad_only(fx):
    torch.manual_seed(0)
    noisy = batch()[0]
    out = fx.denoise_gated(noisy, steps=2)
    assert fx.recorded == []
    torch.manual_seed(0)
    unet = fx.GatedUNet(gradient_checkpointing=True)
    unet(noisy).sum().backward()
    assert fx.recorded == [True, True, True]  # with grad on, the same model checkpoints every block
    assert out.shape == noisy.shape


def test_a_config_that_switches_checkpointing_on_makes_the_policy_checkpoint_without_grad(fx):
    inputs = batch()[0]
    torch.manual_seed(0)
    values = fx.old_values(inputs)
    assert fx.recorded == [False, False, False] and not values.requires_grad
    fx.recorded.clear()
    torch.manual_seed(0)
    assert torch.equal(fx.old_values_without_checkpointing(inputs), values)  # same weights, same values
    assert fx.recorded == []
