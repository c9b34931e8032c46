"""Models held on a trainer's attributes, in train mode with gradient checkpointing on (CKPT004, CKPT008).

fixtures/policy_trainers.py builds a tiny Llama policy in `__init__` (a new module is in train mode),
switches checkpointing on and deep-copies it as the reference. Measured with transformers 5.23:
`accelerator.unwrap_model(m)` and `DataParallel(m).module` return `m` itself, so sampling through
them is sampling from the train-mode policy: the first new token matches eval mode, later ones do
not (the layers drop the cache, as in tests/runtime/test_generation_runtime.py). The reference keeps
the policy's mode and checkpointing, so its forward under no_grad runs every layer's checkpoint with
grad disabled. The look-alikes (eval() around sampling, a reference switched to eval(), no
checkpointing) sample like eval mode and run no checkpoint under no_grad.
"""

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from ckpt_runtime import load_fixture, real_transformers  # noqa: E402,F401

pytestmark = [
    pytest.mark.filterwarnings(f"ignore:`{name}` is deprecated:FutureWarning")
    for name in ("gradient_checkpointing_enable", "gradient_checkpointing_disable", "is_gradient_checkpointing")
]

PROMPT = 6


@pytest.fixture
def fx(real_transformers, monkeypatch):  # noqa: F811
    """The fixture module, with transformers' checkpoint recording whether grad was on at each call."""
    import transformers.modeling_utils

    module = load_fixture("policy_trainers")
    module.recorded = []
    real = transformers.modeling_utils.checkpoint

    def recording(function, *args, **kwargs):
        module.recorded.append(torch.is_grad_enabled())
        return real(function, *args, **kwargs)

    monkeypatch.setattr(transformers.modeling_utils, "checkpoint", recording)
    return module


def trainer_and_expected(fx, name):
    """A trainer and what its policy samples in eval mode without checkpointing."""
    torch.manual_seed(0)
    trainer = getattr(fx, name)(fx.tiny_config())
    reference = copy.deepcopy(trainer.policy).eval()
    reference.gradient_checkpointing_disable()
    prompts = torch.randint(3, 64, (2, PROMPT))
    with torch.no_grad():
        expected = reference.generate(prompts, max_new_tokens=8, do_sample=False)
    return trainer, prompts, expected


@pytest.mark.parametrize("method", ["rollout", "unwrapped_rollout", "parallel_rollout"])
def test_sampling_through_an_attribute_or_a_wrapper_runs_the_train_mode_policy(fx, method):
    trainer, prompts, expected = trainer_and_expected(fx, "RolloutTrainer")
    assert trainer.policy.training and trainer.policy.is_gradient_checkpointing
    assert trainer.accelerator.unwrap_model(trainer.policy) is trainer.policy and trainer.parallel.module is trainer.policy
    tokens = getattr(trainer, method)(prompts)
    assert torch.equal(tokens[:, : PROMPT + 1], expected[:, : PROMPT + 1])  # the first new token still sees the prompt
    assert (tokens[:, PROMPT + 1 :] != expected[:, PROMPT + 1 :]).any()
    assert fx.recorded and not any(fx.recorded)  # every layer checkpointed, under generate's no_grad


def test_a_deep_copied_reference_checkpoints_under_no_grad(fx):
    trainer, prompts, _ = trainer_and_expected(fx, "RolloutTrainer")
    assert trainer.reference.training and trainer.reference.is_gradient_checkpointing
    logprobs = trainer.reference_logprobs(torch.randint(3, 64, (2, 10)))
    assert fx.recorded == [False, False]  # one per layer, nothing recorded for a backward
    assert not logprobs.requires_grad


def test_eval_mode_sampling_and_an_eval_reference_run_no_checkpoint(fx):
    trainer, prompts, expected = trainer_and_expected(fx, "EvalModeRolloutTrainer")
    assert torch.equal(trainer.rollout(prompts), expected)
    trainer.reference_logprobs(torch.randint(3, 64, (2, 10)))
    assert fx.recorded == [] and trainer.policy.training and not trainer.reference.training


def test_without_checkpointing_train_mode_samples_like_eval_mode(fx):
    trainer, prompts, expected = trainer_and_expected(fx, "PlainRolloutTrainer")
    assert trainer.policy.training
    assert torch.equal(trainer.rollout(prompts), expected)
    trainer.reference_logprobs(torch.randint(3, 64, (2, 10)))
    assert fx.recorded == []
