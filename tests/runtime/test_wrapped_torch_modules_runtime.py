"""fixtures/wrapped_torch_modules.py at runtime (CKPT001): a model's first stage held wrapped by
`checkpoint_wrapper(..., checkpoint_impl=CheckpointImpl.REENTRANT)` — an `nn.Sequential`, an
`nn.Linear`, or a project block wrapped behind a flag through a local name — and fed the raw batch.
Measured on torch 2.13 CPU: the stage's parameters end with `.grad = None` (torch only warns "None
of the inputs have requires_grad=True"); the head's gradients equal the unwrapped model's. A
trainable projection in front, or the default NO_REENTRANT impl, gives the unwrapped gradients.
"""

import copy
import warnings

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import NO_INPUT_GRAD_WARNING, assert_same_grads, load_fixture, none_only_in  # noqa: E402

fx = load_fixture("wrapped_torch_modules")
WRAPPED = "_checkpoint_wrapped_module."


def unwrapped(model):
    plain = copy.deepcopy(model)
    for parent in list(plain.modules()):
        for name, child in list(parent.named_children()):
            if type(child).__name__ == "CheckpointWrapper":
                setattr(parent, name, child._checkpoint_wrapped_module)
    return plain


def step_both(model_class):
    torch.manual_seed(0)
    model = getattr(fx, model_class)()
    reference = unwrapped(model)
    assert sum(type(m).__name__ == "CheckpointWrapper" for m in model.modules()) == 1
    fx.training_step(reference, fx.make_batch())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fx.training_step(model, fx.make_batch())
    grads = {name.replace(WRAPPED, ""): (None if p.grad is None else p.grad.detach().clone()) for name, p in model.named_parameters()}
    reference_grads = {name: (None if p.grad is None else p.grad.detach().clone()) for name, p in reference.named_parameters()}
    return grads, reference_grads, [str(w.message) for w in caught]


@pytest.mark.parametrize("model_class", ["SequentialStemNet", "LinearStemNet", "OptionalCheckpointNet"])
def test_reentrant_wrapped_first_stage_fed_raw_input_gets_no_gradient(model_class):
    grads, reference, warned = step_both(model_class)
    lost = none_only_in(grads, reference)
    assert lost and all(name.startswith("stem.") for name in lost)
    assert len(lost) == sum(name.startswith("stem.") for name in reference)
    assert_same_grads({k: v for k, v in grads.items() if k.startswith("head.")}, {k: v for k, v in reference.items() if k.startswith("head.")})
    assert any(NO_INPUT_GRAD_WARNING in w for w in warned)


@pytest.mark.parametrize("model_class", ["ProjectedSequentialNet", "NonReentrantLinearStemNet"])
def test_projection_first_or_non_reentrant_wrapper_is_exact(model_class):
    grads, reference, _ = step_both(model_class)
    assert_same_grads(grads, reference)
