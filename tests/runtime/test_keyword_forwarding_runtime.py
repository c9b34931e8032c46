"""CKPT003 at runtime through wrappers that hand `**kwargs` on to a reentrant checkpoint
(fixtures/keyword_forwarding_wrappers.py), torch 2.13: a keyword the wrapper is given reaches
torch's checkpoint, which raises in reentrant mode; the look-alikes train like the direct call."""

import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, grads, load_fixture, no_checkpointing  # noqa: E402


@pytest.mark.parametrize("model_class", ["FunctionFusion", "ModuleFusion", "RunnerFusion", "StackFusion"])
def test_a_keyword_handed_on_to_a_reentrant_checkpoint_raises(model_class):
    fx = load_fixture("keyword_forwarding_wrappers")
    torch.manual_seed(0)
    model = getattr(fx, model_class)()
    with pytest.raises(ValueError, match="Unexpected keyword arguments: gate"):
        fx.step(model, *fx.batch())


@pytest.mark.parametrize("model_class", ["PoppedFusion", "NonReentrantFusion", "PositionalFusion", "UngatedStackFusion"])
def test_look_alikes_train_as_without_checkpointing(model_class):
    fx = load_fixture("keyword_forwarding_wrappers")
    torch.manual_seed(0)
    model = getattr(fx, model_class)()
    reference = copy.deepcopy(model)
    fx.step(model, *fx.batch())
    with no_checkpointing(fx):
        fx.step(reference, *fx.batch())
    trained = [name for name, g in grads(reference).items() if g is not None]
    assert any(name.startswith(("mix.", "stack.")) for name in trained)
    assert all(grads(model)[name] is not None for name in trained)
    assert_same_grads(grads(model), grads(reference))
