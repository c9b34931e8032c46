"""CKPT007 at runtime: a tensor escapes a checkpointed function as a side effect.

FINDINGS 6S1: `self.aux_loss = ...` inside a reentrant checkpoint is computed under no_grad
(`requires_grad=False` when the forward ends); the loss value is unchanged, but the gradients equal
those of a run with aux coefficient 0: the load-balancing gradient is silently missing. 6S2: a list
appended inside the region gets the recompute's entries (length 2 after backward), and the next step
fails with "Trying to backward through the graph a second time". A buffer accumulated inside the
region counts every token twice (like BatchNorm's statistics, 7G). 6S3: returning the aux loss, or
computing it outside the region, gives identical gradients; so do scratch attributes stored and read
back within one forward (the FocalNet modulation shape).
"""

import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import (  # noqa: E402
    SECOND_BACKWARD,
    assert_same_grads,
    differing,
    grads,
    load_fixture,
    no_checkpointing,
)

fx = load_fixture("moe_aux_loss")


def pair(model_class):
    torch.manual_seed(0)
    model = getattr(fx, model_class)()
    return model, copy.deepcopy(model)


def test_seed_aux_loss_attribute_loses_its_gradient():
    model, model_ref = pair("MoELanguageModel")
    model_no_aux = copy.deepcopy(model)
    batch = fx.make_batch()
    with no_checkpointing(fx):
        loss_ref = fx.training_step(model_ref, batch)
        fx.training_step(model_no_aux, batch, aux_coef=0.0)
        assert model_ref.blocks[0].aux_loss.requires_grad

    # Snapshot the attribute when the root forward ends, before backward's recompute overwrites it.
    model(batch)
    assert [block.aux_loss.requires_grad for block in model.blocks] == [False, False]
    model.zero_grad(set_to_none=True)

    loss = fx.training_step(model, batch)
    torch.testing.assert_close(loss, loss_ref, rtol=1e-6, atol=0)  # same loss value...
    got, ref, no_aux = grads(model), grads(model_ref), grads(model_no_aux)
    assert "blocks.0.router.weight" in differing(got, ref)  # ...different gradients
    assert_same_grads(got, no_aux)  # exactly the gradients of a run without the aux loss


@pytest.mark.parametrize("model_class", ["ZLossLanguageModel", "ExtendingZLossLanguageModel"])
def test_router_logits_list_is_refilled_by_recompute_and_breaks_the_next_step(model_class):
    model, model_ref = pair(model_class)
    batches = [fx.make_batch(seed=s) for s in range(2)]
    with no_checkpointing(fx):
        fx.train(model_ref, batches)
    assert [len(block.router_logits) for block in model_ref.blocks] == [0, 0]

    fx.training_step(model, batches[0])
    assert [len(block.router_logits) for block in model.blocks] == [1, 1]  # appended by the recompute
    model.zero_grad()
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
        fx.training_step(model, batches[1])


def test_buffer_accumulated_inside_region_counts_twice():
    model, model_ref = pair("CountingLanguageModel")
    batch = fx.make_batch()
    with no_checkpointing(fx):
        fx.training_step(model_ref, batch)
    fx.training_step(model, batch)
    for block, block_ref in zip(model.blocks, model_ref.blocks):
        assert block_ref.tokens_per_expert.sum() == batch.numel()
        assert torch.equal(block.tokens_per_expert, 2 * block_ref.tokens_per_expert)
    assert_same_grads(grads(model), grads(model_ref))


@pytest.mark.parametrize("model_class", ["ReturningLanguageModel", "LogitsReturningLanguageModel", "RouterOutsideLanguageModel", "GatedLanguageModel"])
def test_returned_or_outside_aux_loss_is_correct(model_class):
    model, model_ref = pair(model_class)
    batches = [fx.make_batch(seed=s) for s in range(2)]
    with no_checkpointing(fx):
        loss_ref = fx.train(model_ref, batches)
    loss = fx.train(model, batches)  # two steps: a stale entry would break the second one
    assert torch.equal(loss, loss_ref)
    assert_same_grads(grads(model), grads(model_ref))
    for name, p in model.named_parameters():
        torch.testing.assert_close(p, dict(model_ref.named_parameters())[name], rtol=1e-5, atol=1e-7)
    if model_class == "RouterOutsideLanguageModel":
        for block, block_ref in zip(model.blocks, model_ref.blocks):
            assert torch.equal(block.tokens_per_expert, block_ref.tokens_per_expert)
