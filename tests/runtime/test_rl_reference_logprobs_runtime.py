"""no_grad carried into a helper that runs the model (fixtures/rl_reference_logprobs.py), measured.

A helper called inside `torch.no_grad()` (or from an `@torch.no_grad()` function) runs the model it
is handed with grad disabled: a model still in train mode checkpoints every gated block there, for
nothing (each checkpoint call is counted with `torch.is_grad_enabled()` at it). `.eval()` first, a
helper that does not run the model, or no `no_grad` around the call, make no grad-free checkpoint
call. The same holds for a tiny Llama with `gradient_checkpointing_enable()`.
"""

import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture, real_transformers, recording_grad_modes  # noqa: E402,F401

pytestmark = pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning")


@pytest.fixture
def fx(real_transformers, monkeypatch):  # noqa: F811
    return recording_grad_modes(monkeypatch, load_fixture("rl_reference_logprobs"))


def ids():
    return torch.randint(3, 32, (2, 6), generator=torch.Generator().manual_seed(0))


def policy_and_reference(fx):
    torch.manual_seed(0)
    policy = fx.TinyLM()
    return policy, copy.deepcopy(policy), torch.optim.SGD(policy.parameters(), lr=0.1)


@pytest.mark.parametrize(
    "step, reference_calls",
    [
        ("dpo_step", [False, False]),  # one grad-free checkpoint per block: the reference in train mode
        ("dpo_step_eval_reference", []),
        ("dpo_step_detached", [True, True]),  # with grad: the checkpoint has a backward to serve
    ],
)
def test_a_helper_under_no_grad_runs_the_train_mode_reference_checkpointed(fx, step, reference_calls):
    policy, reference, optimizer = policy_and_reference(fx)
    getattr(fx, step)(policy, reference, ids(), optimizer)
    assert fx.recorded == reference_calls + [True, True]  # then the policy's own forward, with grad


def test_the_grad_free_checkpoint_is_pure_overhead(fx):
    policy, reference, _ = policy_and_reference(fx)
    with torch.no_grad():
        train_mode = fx.sequence_logprobs(reference, ids())
    assert fx.recorded == [False, False] and not train_mode.requires_grad
    reference.eval()
    with torch.no_grad():
        assert torch.equal(train_mode, fx.sequence_logprobs(reference, ids()))


def test_a_decorated_function_carries_no_grad_into_the_helper(fx):
    policy, _, _ = policy_and_reference(fx)
    fx.reference_logprobs(policy, ids())
    assert fx.recorded == [False, False]


def test_the_method_spelling_and_its_look_alikes(fx):
    policy, reference, optimizer = policy_and_reference(fx)
    scorer = fx.ReferenceScorer()
    scorer.step(policy, reference, ids(), optimizer)
    assert fx.recorded == [False, False, True, True]
    fx.recorded.clear()
    scorer.eval_step(policy, ids())
    assert fx.recorded == []
    policy.train()
    fx.log_vocabulary(policy)
    assert fx.recorded == []


def test_a_tiny_llama_checkpoints_each_layer_under_the_helper(fx):
    torch.manual_seed(0)
    policy = fx.LlamaForCausalLM(fx.llama_config())  # a new module: train mode
    policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    reference = copy.deepcopy(policy)
    grad_on = []
    for layer in reference.model.layers:
        real = layer._gradient_checkpointing_func
        layer._gradient_checkpointing_func = lambda *a, _real=real, **k: (grad_on.append(torch.is_grad_enabled()), _real(*a, **k))[1]
    with torch.no_grad():
        train_mode = fx.llama_logprobs(reference, ids())
    assert grad_on == [False, False]
    reference.eval()
    with torch.no_grad():
        eval_mode = fx.llama_logprobs(reference, ids())
    assert grad_on == [False, False]  # eval(): no further checkpoint call
    assert torch.allclose(train_mode, eval_mode)
    assert fx.fine_tune_llama(ids()).requires_grad  # the fixture's own step runs: the policy's half has grad
