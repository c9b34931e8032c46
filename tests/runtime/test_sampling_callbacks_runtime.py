"""Samples generated from a Trainer callback while training with gradient checkpointing (CKPT004),
with real transformers: fixtures/sampling_callbacks.py.

Measured with transformers 5.23 on a tiny 2-layer Llama and learning rate 0 (the weights stay the
initial ones): the Trainer calls `on_step_end` and `on_epoch_begin` with its model in train mode and
checkpointing on, so the sample decodes without the cache (14 of the 16 new tokens of 2 prompts
differ from the same model in eval mode). A callback that switches to eval() first, and
`on_evaluate` (after the Trainer's evaluation put the model in eval mode), decode like eval mode.
A held-out loss computed in `on_step_end` under `no_grad` runs both decoder layers through a
checkpoint with grad off (CKPT008: overhead only); after `model.eval()` no layer is checkpointed.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture, real_transformers  # noqa: E402,F401

pytestmark = [
    pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

PROMPT = 6


@pytest.fixture
def fx(real_transformers):  # noqa: F811
    pytest.importorskip("accelerate")
    return load_fixture("sampling_callbacks")


def samples(fx, train, tmp_path):
    """(what the callback sampled, what the untrained model samples in eval mode)."""
    prompts = torch.randint(3, 64, (2, PROMPT), generator=torch.Generator().manual_seed(2))
    torch.manual_seed(0)
    reference = fx.build_model().eval()
    with torch.no_grad():
        expected = reference.generate(prompts, max_new_tokens=8, do_sample=False)
    torch.manual_seed(0)
    return train(prompts, str(tmp_path)), expected


@pytest.mark.parametrize("train", ["train_logging_samples", "train_logging_epoch_samples"])
def test_a_sample_from_a_train_time_event_decodes_without_the_cache(fx, train, tmp_path):
    [tokens], expected = samples(fx, getattr(fx, train), tmp_path)
    assert tokens.shape == expected.shape == (2, PROMPT + 8)
    assert torch.equal(tokens[:, : PROMPT + 1], expected[:, : PROMPT + 1])  # same weights: the first new token matches
    assert (tokens[:, PROMPT + 1 :] != expected[:, PROMPT + 1 :]).any()


@pytest.mark.parametrize("train", ["train_logging_samples_in_eval_mode", "train_logging_evaluation_samples"])
def test_a_sample_in_eval_mode_decodes_like_the_model_without_checkpointing(fx, train, tmp_path):
    [tokens], expected = samples(fx, getattr(fx, train), tmp_path)
    assert torch.equal(tokens, expected)


def checkpoint_calls_without_grad(fx, train, tmp_path, monkeypatch):
    """How many checkpoint calls ran with grad off while `train` trained (transformers binds its layers'
    checkpoint function to `modeling_utils.checkpoint` when the Trainer switches checkpointing on)."""
    import transformers.modeling_utils as modeling_utils

    calls = []
    original = modeling_utils.checkpoint

    def counting(function, *args, **kwargs):
        calls.append(torch.is_grad_enabled())
        return original(function, *args, **kwargs)

    monkeypatch.setattr(modeling_utils, "checkpoint", counting)
    ids = torch.randint(3, 64, (2, 8), generator=torch.Generator().manual_seed(3))
    torch.manual_seed(0)
    losses = train({"input_ids": ids, "labels": ids}, str(tmp_path))
    return calls.count(False), calls.count(True), losses


def test_a_held_out_loss_under_no_grad_runs_every_layer_through_a_checkpoint(fx, tmp_path, monkeypatch):
    """`on_step_end` gets the model in train mode: its 2 decoder layers are checkpointed under no_grad."""
    without_grad, with_grad, [loss] = checkpoint_calls_without_grad(fx, fx.train_logging_held_out_loss, tmp_path, monkeypatch)
    assert without_grad == 2 and with_grad >= 2
    assert not loss.requires_grad


def test_a_held_out_loss_in_eval_mode_runs_no_checkpoint(fx, tmp_path, monkeypatch):
    without_grad, with_grad, [loss] = checkpoint_calls_without_grad(fx, fx.train_logging_held_out_loss_in_eval_mode, tmp_path, monkeypatch)
    assert without_grad == 0 and with_grad >= 2
