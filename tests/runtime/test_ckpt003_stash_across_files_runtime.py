"""fixtures/crossfile/moe_scores at runtime: expert blocks of one module read routing scores from
`self.scores`, which the model of another module stores on each block before checkpointing it
(CKPT003). Measured on torch 2.13 CPU: reentrant, the second block's recompute walks the scores'
graph again and backward raises "Trying to backward through the graph a second time" (FINDINGS 3D);
non-reentrant with the same stash, and reentrant with the scores passed positionally, give the
gradients of a run without checkpointing.
"""

import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import SECOND_BACKWARD, assert_same_grads, grads, load_fixture_package, no_checkpointing  # noqa: E402

(model,) = load_fixture_package("crossfile/moe_scores", "model")


def pair(model_class):
    torch.manual_seed(0)
    net = getattr(model, model_class)()
    return net, copy.deepcopy(net)


def batch():
    return torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(0))


def test_scores_stashed_on_reentrant_blocks_by_another_module_break_backward():
    net, net_ref = pair("StashingMoE")
    with no_checkpointing(model):
        model.training_step(net_ref, batch())
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
        model.training_step(net, batch())


@pytest.mark.parametrize("model_class", ["NonReentrantStashingMoE", "ScoredMoE"])
def test_non_reentrant_stash_or_positional_scores_are_correct(model_class):
    net, net_ref = pair(model_class)
    with no_checkpointing(model):
        loss_ref = model.training_step(net_ref, batch())
    loss = model.training_step(net, batch())
    assert torch.equal(loss, loss_ref)
    assert_same_grads(grads(net), grads(net_ref))
