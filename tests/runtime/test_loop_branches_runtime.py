"""fixtures/loop_branches.py at runtime (torch 2.13, CPU): a negated checkpointing switch puts the
reentrant checkpoint in the else branch, which the first block (or the stem) reaches with the raw
input: its parameters get no gradient (`.grad` None) while the same weights without checkpointing
get one. The look-alikes that skip the first block (`i == 0`, `i > 0`, a `first` flag) give the
gradients of their non-checkpointed runs.
"""

import contextlib
import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, grads, load_fixture, no_checkpointing, none_only_in  # noqa: E402

fx = load_fixture("loop_branches")


def _step(model):
    x, y = fx.make_batch()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    return grads(model)


def _pair(model_class):
    torch.manual_seed(0)
    model = getattr(fx, model_class)()
    reference = copy.deepcopy(model)
    with no_checkpointing(fx):
        expected = _step(reference)
    raw_input = model_class in ("NegatedSwitchNet", "NegatedSwitchStem")
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True") if raw_input else contextlib.nullcontext():
        got = _step(model)
    return got, expected


@pytest.mark.parametrize("model_class, first", [("NegatedSwitchNet", "blocks.0.0.weight"), ("NegatedSwitchStem", "stem.0.weight")])
def test_the_else_branch_of_a_negated_switch_gets_raw_input(model_class, first):
    got, expected = _pair(model_class)
    assert first in none_only_in(got, expected)


@pytest.mark.parametrize("model_class", ["SkipFirstBlockNet", "LaterBlocksNet", "FirstFlagNet"])
def test_skipping_the_first_block_keeps_every_gradient(model_class):
    got, expected = _pair(model_class)
    assert_same_grads(got, expected)
