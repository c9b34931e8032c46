"""fixtures/crossfile/moe_recompute at runtime (torch 2.13, CPU): a layer that checkpoints its own
experts reentrantly while its router stores the load-balancing loss on itself, built after an
embedding by a language model. The stored loss has no grad_fn when the forward ends, so the
router gets no gradient from it: its weight's grad equals that of a run whose aux coefficient is
0. With `recompute=False` the same weights give the reference gradient. The look-alike returns the
loss out of the checkpoint and matches its own non-checkpointed run.
"""

import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, differing, grads, load_fixture_package  # noqa: E402

(model_module,) = load_fixture_package("crossfile/moe_recompute", "model")


def _trained(model_class, recompute, aux_coef=0.01):
    torch.manual_seed(0)
    model = getattr(model_module, model_class)(recompute=recompute)
    model_module.training_loss(model, model_module.make_batch(), aux_coef).backward()
    return model


def test_the_stored_aux_loss_has_no_graph_and_the_router_misses_its_gradient():
    torch.manual_seed(0)
    model = model_module.RecomputedMoELanguageModel()
    model(model_module.make_batch())
    assert [layer.router.l_aux.requires_grad for layer in model.layers] == [False, False]

    checkpointed = grads(_trained("RecomputedMoELanguageModel", recompute=True))
    reference = grads(_trained("RecomputedMoELanguageModel", recompute=False))
    without_aux = grads(_trained("RecomputedMoELanguageModel", recompute=False, aux_coef=0.0))
    assert "layers.0.router.weight" in differing(checkpointed, reference)
    assert_same_grads(checkpointed, without_aux)


def test_the_returned_aux_loss_keeps_the_reference_gradient():
    assert_same_grads(grads(_trained("ReturningMoELanguageModel", recompute=True)), grads(_trained("ReturningMoELanguageModel", recompute=False)))
