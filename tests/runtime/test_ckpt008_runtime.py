"""CKPT008's second form at runtime: a model in train mode, called under no_grad, still checkpoints.

FINDINGS 7A: a checkpoint under `no_grad` works, its output has no grad, and it only adds overhead.
A forward that gates checkpointing on `self.training` (fixtures/distillation_eval.py, transformers'
layers) runs it whenever the model is in train mode, grad or not: here the calls are counted with
`torch.is_grad_enabled()` at each. eval() closes the gate, and so does a gate on
`torch.is_grad_enabled()`; a deep copy keeps the mode of the model it copies. A forward gated on
a flag alone checkpoints in eval mode too.
"""

import warnings

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture, real_transformers, recording_grad_modes  # noqa: E402,F401

pytestmark = pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning")


@pytest.fixture
def fx(monkeypatch):
    return recording_grad_modes(monkeypatch, load_fixture("distillation_eval"))


def batch():
    torch.manual_seed(0)
    return torch.randn(4, 16), torch.tensor([0, 1, 2, 3])


def test_train_mode_model_checkpoints_under_no_grad(fx):
    torch.manual_seed(0)
    model = fx.Tower()
    inputs, labels = batch()
    loss = fx.evaluate(model, inputs, labels)
    assert fx.recorded == [False, False, False]  # one per block, all with grad disabled
    assert not loss.requires_grad
    model.eval()
    with torch.no_grad():
        assert torch.equal(loss, torch.nn.functional.cross_entropy(model(inputs), labels))  # same result, pure overhead


@pytest.mark.parametrize("step, tower", [("evaluate_in_eval_mode", "Tower"), ("evaluate_gated", "GradGatedTower")])
def test_eval_mode_or_a_grad_gate_runs_no_checkpoint(fx, step, tower):
    torch.manual_seed(0)
    model = getattr(fx, tower)()
    getattr(fx, step)(model, *batch())
    assert fx.recorded == []
    assert model.training


@pytest.mark.parametrize(
    "step, calls",
    [("evaluate_flagged", [False, False, False]), ("evaluate_flagged_with_grad_gate", []), ("evaluate_switched", [False, False, False]), ("evaluate_switched_off", [])],
)
def test_a_checkpoint_not_gated_on_the_mode_runs_in_eval_mode(fx, step, calls):
    loss = getattr(fx, step)(*batch())
    assert fx.recorded == calls
    assert not loss.requires_grad


@pytest.mark.parametrize("step, teacher_calls", [("distill_step", [False, False, False]), ("distill_step_eval_teacher", [])])
def test_a_deep_copy_keeps_the_mode(fx, step, teacher_calls):
    torch.manual_seed(0)
    student = fx.Tower()
    inputs, _ = batch()
    getattr(fx, step)(student, inputs, torch.optim.SGD(student.parameters(), lr=0.1))
    # The teacher's calls come first, then the student's (with grad).
    assert fx.recorded == teacher_calls + [True, True, True]


@pytest.mark.parametrize("reentrant", [False, True])
def test_transformers_layers_checkpoint_in_train_mode_under_no_grad(real_transformers, monkeypatch, reentrant):  # noqa: F811
    """A tiny Llama with checkpointing on, in train mode, under no_grad (fixtures/rl_rollouts.py):
    each decoder layer goes through the checkpoint; the logits equal eval mode's. Under reentrant
    mode torch also warns that no input requires grad."""
    rfx = load_fixture("rl_rollouts")
    torch.manual_seed(0)
    model = rfx.build_policy()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    model.train()
    grad_on = []
    for layer in model.model.layers:
        real = layer._gradient_checkpointing_func
        layer._gradient_checkpointing_func = lambda *a, _real=real, **k: (grad_on.append(torch.is_grad_enabled()), _real(*a, **k))[1]
    ids = torch.randint(3, 64, (2, 6))
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        logits = model(ids).logits
    assert grad_on == [False, False]
    no_input_grad = [w for w in caught if "None of the inputs have requires_grad=True" in str(w.message)]
    assert bool(no_input_grad) is reentrant
    model.eval()
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, logits)
