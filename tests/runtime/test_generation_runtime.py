"""Generation on a model in train() mode with gradient checkpointing on (CKPT004), with real transformers.

Measured on a tiny 2-layer Llama (fixtures/rl_rollouts.py) with transformers 5.23 (4.57.1 and 4.53.3
give the same tokens; 4.48.3 and 4.40.0 re-run the whole sequence each step and decode like eval
mode, rules/CKPT004.md): in train mode every decoder layer is checkpointed, under generate()'s no_grad too, and
drops the cache ("Caching is incompatible with gradient checkpointing in LlamaDecoderLayer. Setting
`past_key_values=None`."), so every step after the first attends over the newest token only. The
first generated token matches eval mode, the later ones differ. In eval() (or train(False)) mode the
layers run plainly and the rollout matches the model without checkpointing.
"""

import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture, real_transformers  # noqa: E402,F401

pytestmark = pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning")

PROMPT = 6
NEW = 8


@pytest.fixture
def fx(real_transformers):  # noqa: F811
    return load_fixture("rl_rollouts")


def rollouts(fx, step):
    """(tokens sampled by `step` on the policy, tokens of the same policy without checkpointing in
    eval mode, what the first layer's attention saw per step: (query length, cache passed))."""
    torch.manual_seed(0)
    policy = fx.build_policy()
    reference = copy.deepcopy(policy).eval()
    prompts = torch.randint(3, 64, (2, PROMPT))
    with torch.no_grad():
        expected = reference.generate(prompts, max_new_tokens=NEW, do_sample=False)
    seen = []
    hook = policy.model.layers[0].self_attn.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append((kwargs["hidden_states"].shape[1], kwargs.get("past_key_values") is not None)), with_kwargs=True
    )
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)
    tokens = step(policy, prompts, optimizer)
    hook.remove()
    return tokens, expected, seen[: NEW]


def test_rollouts_in_train_mode_decode_without_the_cache(fx):
    tokens, expected, seen = rollouts(fx, fx.rollout_step)
    assert tokens.shape == expected.shape == (2, PROMPT + NEW)
    assert torch.equal(tokens[:, : PROMPT + 1], expected[:, : PROMPT + 1])  # the first new token still sees the prompt
    assert (tokens[:, PROMPT + 1 :] != expected[:, PROMPT + 1 :]).any()
    # After the first step each layer sees one token and no cache.
    assert seen[0] == (PROMPT, False) and all(entry == (1, False) for entry in seen[1:])


@pytest.mark.parametrize("step", ["rollout_step_in_eval_mode", "rollout_step_train_false"])
def test_rollouts_in_eval_mode_match_the_model_without_checkpointing(fx, step):
    tokens, expected, seen = rollouts(fx, getattr(fx, step))
    assert torch.equal(tokens, expected)
    assert seen[0] == (PROMPT, True) and all(entry == (1, True) for entry in seen[1:])


def test_a_cached_forward_in_train_mode_returns_no_cache_under_no_grad(fx):
    torch.manual_seed(0)
    policy = fx.build_policy()
    prompts = torch.randint(3, 64, (2, PROMPT))
    assert fx.prompt_cache(policy, prompts) is None
    policy.eval()
    with torch.no_grad():
        assert policy(prompts, use_cache=True).past_key_values is not None


def test_sampling_right_after_the_trainer_decodes_without_the_cache(fx, tmp_path):
    """The Trainer's `train()` returns with the policy in train mode and checkpointing on: the rollout
    that follows decodes like `rollout_step`'s (measured with 5.23 and 4.57.1 on this policy, learning
    rate 0: 12 of 16 sampled tokens differ from eval mode). The same warm-up followed by eval() does not."""
    pytest.importorskip("accelerate")
    prompts = torch.randint(3, 64, (2, PROMPT), generator=torch.Generator().manual_seed(2))
    torch.manual_seed(0)
    tokens = fx.warm_up_then_sample(fx.warm_up_dataset(), prompts, str(tmp_path))
    torch.manual_seed(0)
    expected = fx.warm_up_then_sample_in_eval_mode(fx.warm_up_dataset(), prompts, str(tmp_path))
    assert tokens.shape == expected.shape == (2, PROMPT + NEW)
    assert torch.equal(tokens[:, : PROMPT + 1], expected[:, : PROMPT + 1])  # same weights: the first new token matches
    assert (tokens[:, PROMPT + 1 :] != expected[:, PROMPT + 1 :]).any()


def test_sampling_through_a_helper_decodes_like_the_caller_hands_the_policy_over(fx):
    """`rollout_through_helper` hands the policy to `sample_rollouts` in train mode with checkpointing
    on: the helper's rollout decodes without the cache, unlike the same helper after eval()."""
    prompts = torch.randint(3, 64, (2, PROMPT), generator=torch.Generator().manual_seed(2))
    torch.manual_seed(0)
    tokens = fx.rollout_through_helper(prompts)
    torch.manual_seed(0)
    expected = fx.rollout_through_helper_in_eval_mode(prompts)
    assert tokens.shape == expected.shape == (2, PROMPT + NEW)
    assert torch.equal(tokens[:, : PROMPT + 1], expected[:, : PROMPT + 1])  # same weights: the first new token matches
    assert (tokens[:, PROMPT + 1 :] != expected[:, PROMPT + 1 :]).any()
