"""fixtures/held_part_freezes.py at runtime: a part of a held submodule frozen by the script.

FINDINGS 5P1: the backbone's stem frozen in front of reentrant checkpointed stages leaves the
stages with `.grad = None` while the head still trains; the backbone's norm frozen after them
changes nothing but the norm itself.
"""

import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, capture_warnings, grads, load_fixture, no_checkpointing, none_only_in  # noqa: E402,F401

fx = load_fixture("held_part_freezes")


def run_both(build):
    torch.manual_seed(0)
    model = getattr(fx, build)()
    reference = copy.deepcopy(model)
    features, labels = torch.randn(4, 8), torch.tensor([0, 1, 2, 0])
    with no_checkpointing(fx):
        fx.step(reference, features, labels)
    fx.step(model, features, labels)
    return grads(model), grads(reference)


def test_a_frozen_stem_leaves_the_checkpointed_stages_without_gradients(capture_warnings):
    got, reference = run_both("build_stem_frozen")
    stages = sorted(name for name in reference if name.startswith("backbone.stages."))
    assert all(reference[name] is not None for name in stages)
    assert none_only_in(got, reference) == stages
    assert got["head.weight"] is not None


def test_a_frozen_norm_after_the_stages_trains_like_the_reference(capture_warnings):
    got, reference = run_both("build_tail_frozen")
    assert_same_grads(got, reference)
    assert got["backbone.norm.weight"] is None and got["backbone.stages.0.0.weight"] is not None
