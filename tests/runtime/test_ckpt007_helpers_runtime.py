"""CKPT007 at runtime when the escape sits in a helper the checkpointed forward calls
(fixtures/moe_aux_helpers.py): a method handed the router probabilities that stores the aux loss
on the block (Megatron's `aux_loss_load_balancing`), a method's result kept on the block, a
module-level function appending to a list, and one adding the detached loss into a log
(Megatron's `save_to_aux_losses_tracker`). Measured on torch 2.13 CPU, reentrant mode: the stored
tensors have `requires_grad=False` when the forward ends, the aux gradient is missing (the grads
equal a run with aux coefficient 0), and the list gets the recompute's entries and breaks the next
step ("Trying to backward through the graph a second time"); the log holds twice the value of a
run without checkpointing (grads identical). The look-alikes (the helper's result
returned from the checkpoint, the list filled outside it) give the reference gradients.
"""

import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import SECOND_BACKWARD, assert_same_grads, differing, grads, load_fixture, no_checkpointing  # noqa: E402

fx = load_fixture("moe_aux_helpers")


def pair(model_class):
    torch.manual_seed(0)
    model = getattr(fx, model_class)()
    return model, copy.deepcopy(model)


@pytest.mark.parametrize("model_class, attr", [("BalancingLanguageModel", "aux_loss"), ("RoutedLanguageModel", "router_probs")])
def test_tensor_stored_by_a_helper_method_loses_its_gradient(model_class, attr):
    model, model_ref = pair(model_class)
    model_no_aux = copy.deepcopy(model)
    batch = fx.make_batch()
    with no_checkpointing(fx):
        loss_ref = fx.training_step(model_ref, batch)
        fx.training_step(model_no_aux, batch, aux_coef=0.0)
        assert getattr(model_ref.blocks[0], attr).requires_grad

    model(batch)  # the attribute as the root forward leaves it, before backward's recompute
    assert [getattr(block, attr).requires_grad for block in model.blocks] == [False, False]
    model.zero_grad(set_to_none=True)

    loss = fx.training_step(model, batch)
    torch.testing.assert_close(loss, loss_ref, rtol=1e-6, atol=0)
    got, ref, no_aux = grads(model), grads(model_ref), grads(model_no_aux)
    assert "blocks.0.router.weight" in differing(got, ref)
    assert_same_grads(got, no_aux)


def test_list_filled_by_a_helper_function_is_refilled_by_the_recompute():
    model, model_ref = pair("RecordingLanguageModel")
    batches = [fx.make_batch(seed=s) for s in range(2)]
    with no_checkpointing(fx):
        fx.train(model_ref, batches)
    assert fx.ROUTER_LOGITS == []

    model(batches[0])
    assert [t.requires_grad for t in fx.ROUTER_LOGITS] == [False, False]
    fx.ROUTER_LOGITS.clear()
    model.zero_grad()
    fx.training_step(model, batches[0])
    assert len(fx.ROUTER_LOGITS) == 2  # appended again by the recompute during backward
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
        fx.training_step(model, batches[1])
    fx.ROUTER_LOGITS.clear()


def test_detached_loss_added_into_a_log_by_a_helper_is_counted_twice():
    model, model_ref = pair("LoggingLanguageModel")
    batch = fx.make_batch()
    with no_checkpointing(fx):
        fx.training_step(model_ref, batch)
    logged_ref = fx.AUX_LOSS_LOG.pop("load_balancing")
    fx.training_step(model, batch)
    logged = fx.AUX_LOSS_LOG.pop("load_balancing")
    torch.testing.assert_close(logged, 2 * logged_ref)  # the recompute logs every layer again
    assert_same_grads(grads(model), grads(model_ref))


@pytest.mark.parametrize("model_class", ["ReturningBalancingLanguageModel", "CollectingLanguageModel"])
def test_helper_results_returned_from_the_checkpoint_are_correct(model_class):
    model, model_ref = pair(model_class)
    batches = [fx.make_batch(seed=s) for s in range(2)]
    with no_checkpointing(fx):
        loss_ref = fx.train(model_ref, batches)
    loss = fx.train(model, batches)  # two steps: a stale entry would break the second one
    assert torch.equal(loss, loss_ref)
    assert_same_grads(grads(model), grads(model_ref))
    assert fx.OUTSIDE_ROUTER_LOGITS == []
