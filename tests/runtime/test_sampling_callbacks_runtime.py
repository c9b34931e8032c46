"""Samples generated from a Trainer callback while training with gradient checkpointing (CKPT004),
with real transformers: fixtures/sampling_callbacks.py.

Measured with transformers 5.23 on a tiny 2-layer Llama and learning rate 0 (the weights stay the
initial ones): the Trainer calls `on_step_end` and `on_epoch_begin` with its model in train mode and
checkpointing on, so the sample decodes without the cache (14 of the 16 new tokens of 2 prompts
differ from the same model in eval mode). A callback that switches to eval() first, and
`on_evaluate` (after the Trainer's evaluation put the model in eval mode), decode like eval mode.
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
