"""Freezing outside `__init__` (helpers, `lock()`, name predicates, chained constructors) at runtime.

FINDINGS 5P1: a frozen embedding in front of reentrant checkpoints leaves the checkpointed blocks
with `.grad = None` while the head still trains. It does not matter where the freezing happened,
or that a test on the constructor's arguments decides it (mmdet's `frozen_stages`):
the look-alikes (a frozen head, a predicate that matches only the head, an input-grad hook,
non-reentrant mode, unfreezing before training) train exactly like the model without checkpointing.
"""

import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import (  # noqa: E402
    NO_INPUT_GRAD_WARNING,
    assert_same_grads,
    capture_warnings,  # noqa: F401
    grads,
    load_fixture,
    no_checkpointing,
    none_only_in,
    warning_texts,
)

fx = load_fixture("freezes_anywhere")


def run_both(build):
    torch.manual_seed(0)
    model = getattr(fx, build)()
    model_ref = copy.deepcopy(model)
    loader = [fx.make_batch(seed=s) for s in range(2)]
    with no_checkpointing(fx):
        fx.finetune(model_ref, loader)
    fx.finetune(model, loader)
    return grads(model), grads(model_ref)


@pytest.mark.parametrize(
    "build",
    ["build_helper_frozen", "build_locked", "build_adapter_only", "build_embed_predicate", "build_chained", "build_submodule_frozen", "build_bare_helper_frozen",
     "build_pretrained_table", "build_pattern_frozen", "build_frozen_stem",
     "build_default_frozen_table", "build_fixed_vectors", "build_loaded_table"],
)
def test_blocks_behind_an_embedding_frozen_anywhere_get_no_gradient(build, capture_warnings):
    got, ref = run_both(build)
    trainable_blocks = sorted(name for name, grad in ref.items() if name.startswith("blocks.") and grad is not None)
    assert trainable_blocks  # without checkpointing the blocks train
    assert none_only_in(got, ref) == trainable_blocks
    assert got["head.weight"] is not None
    assert warning_texts(capture_warnings).count(NO_INPUT_GRAD_WARNING) == 4  # 2 blocks x 2 steps


@pytest.mark.parametrize(
    "build",
    [
        "build_head_frozen", "build_thawed", "build_hooked", "build_locked_non_reentrant", "build_head_predicate", "build_submodule_head_frozen",
        "build_bare_helper_head_frozen", "build_trainable_table", "build_pattern_head_frozen", "build_trainable_stem",
        "build_passed_trainable_table", "build_trained_vectors", "build_tuned_loaded_table",
    ],  # fmt: skip
)
def test_look_alikes_train_like_the_model_without_checkpointing(build, capture_warnings):
    got, ref = run_both(build)
    assert_same_grads(got, ref)
    assert got["blocks.0.lora_A"] is not None
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)
