"""Backbones frozen stage by stage or whole, around reentrant checkpoints (fixtures/frozen_stages.py).

Measured on torch 2.13 (CPU): a stem frozen through a loop over a list of its modules (or a tuple
variable, or a literal slice of a list) and a frozen first stage leave the reentrantly checkpointed
second stage with `.grad = None` (CKPT005), while the head still trains; a stem whose BatchNorm the
loop leaves trainable trains exactly like the model without checkpointing. A trainable backbone
checkpointed on raw features by `checkpoint_sequential` gets `.grad = None` in every segment
but the last (which torch runs outside the checkpoint) (CKPT001); frozen whole, the probe trains exactly like
the model without checkpointing (torch still warns: the warning alone is no symptom).
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

fx = load_fixture("frozen_stages")


def run_both(build, make_batch):
    torch.manual_seed(0)
    model = build()
    model_ref = copy.deepcopy(model)
    loader = [make_batch(seed=s) for s in range(2)]
    with no_checkpointing(fx):
        fx.train(model_ref, loader)
    fx.train(model, loader)
    return grads(model), grads(model_ref)


@pytest.mark.parametrize("name", ["ListFrozenStem", "TupleFrozenStem", "SliceFrozenStem"])
def test_stage_behind_a_stem_frozen_in_a_loop_gets_no_gradient(name, capture_warnings):
    got, ref = run_both(getattr(fx, name), fx.make_image_batch)
    assert none_only_in(got, ref) == ["layer2.0.bias", "layer2.0.weight"]
    assert got["head.weight"] is not None
    assert warning_texts(capture_warnings).count(NO_INPUT_GRAD_WARNING) == 2  # one per step


def test_stem_norm_left_trainable_trains_like_the_model_without_checkpointing(capture_warnings):
    got, ref = run_both(fx.ConvFrozenStem, fx.make_image_batch)
    assert_same_grads(got, ref)
    assert got["layer2.0.weight"] is not None and got["bn1.weight"] is not None
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)


def test_trainable_backbone_checkpointed_on_raw_features_gets_no_gradient(capture_warnings):
    got, ref = run_both(fx.build_trainable_probe, fx.make_feature_batch)
    # checkpoint_sequential runs its last segment outside the checkpoint: only the first one loses.
    assert none_only_in(got, ref) == sorted(name for name in ref if name.startswith(("backbone.0.", "backbone.1.")))
    assert got["backbone.2.0.weight"] is not None
    assert got["head.weight"] is not None


def test_probe_on_a_backbone_frozen_whole_trains_like_the_model_without_checkpointing(capture_warnings):
    got, ref = run_both(fx.build_frozen_probe, fx.make_feature_batch)
    assert_same_grads(got, ref)
    assert [name for name, grad in got.items() if grad is not None] == ["head.weight", "head.bias"]
    # torch warns all the same (no input requires grad): the warning is not the symptom.
    assert NO_INPUT_GRAD_WARNING in warning_texts(capture_warnings)


def test_blocks_thawed_after_freezing_everything_get_no_gradient_behind_the_frozen_stem():
    """Everything frozen, the last blocks thawed (`for block in self.blocks[-2:]`), each block
    checkpointed reentrantly: the thawed blocks get `.grad = None`; without checkpointing they train."""
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    class Net(nn.Module):
        def __init__(self, checkpointed):
            super().__init__()
            self.checkpointed = checkpointed
            self.stem = nn.Linear(8, 8)
            self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(4))
            self.head = nn.Linear(8, 2)
            self.requires_grad_(False)
            for module in [*self.blocks[-2:], self.head]:
                module.requires_grad_(True)

        def forward(self, x):
            x = self.stem(x)
            for block in self.blocks:
                x = checkpoint(block, x, use_reentrant=True) if self.checkpointed else block(x)
            return self.head(x)

    result = {}
    for checkpointed in (True, False):
        torch.manual_seed(0)
        model = Net(checkpointed)
        model(torch.randn(2, 8)).sum().backward()
        result[checkpointed] = [block.weight.grad is not None for block in model.blocks[-2:]] + [model.head.weight.grad is not None]
    assert result == {True: [False, False, True], False: [True, True, True]}
