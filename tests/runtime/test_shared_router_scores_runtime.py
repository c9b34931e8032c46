"""Routing scores set as an attribute on the blocks after the router, inside reentrant
checkpoints (CKPT007): fixtures/shared_router_scores.py.

Measured on torch 2.13: with every block checkpointed reentrantly, `blk.scores = scores` stores a
tensor computed under no_grad, so the router's weights get `.grad = None` (no warning, no error)
while every other parameter still trains. Scores returned and handed on positionally keep the
router's gradient equal to the run without checkpointing.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture  # noqa: E402


def router_gradient(net_class: str, checkpointed: bool, router: str):
    fx = load_fixture("shared_router_scores")
    torch.manual_seed(0)
    net = getattr(fx, net_class)().train()
    if not checkpointed:
        fx.maybe_checkpoint.__kwdefaults__ = {"enabled": False}
    try:
        torch.manual_seed(1)
        net(torch.randn(5, 4)).sum().backward()
    finally:
        fx.maybe_checkpoint.__kwdefaults__ = {"enabled": True}
    return net.get_submodule(router).weight.grad


def test_scores_set_on_other_blocks_leave_the_router_without_a_gradient():
    assert router_gradient("RoutedNet", True, "blocks.0.router") is None
    assert router_gradient("RoutedNet", False, "blocks.0.router") is not None


def test_scores_returned_and_passed_on_train_the_router():
    checkpointed = router_gradient("PassedScoresNet", True, "router.router")
    plain = router_gradient("PassedScoresNet", False, "router.router")
    assert checkpointed is not None and torch.allclose(checkpointed, plain, atol=1e-6)
