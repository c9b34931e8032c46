"""CKPT007 at runtime through module hooks (fixtures/feature_hooks.py, rules/CKPT007.md).

A forward hook (or pre-hook) runs inside the call of its module, so inside a checkpoint that runs
the module and again in the recompute during backward: a list it appends to gets every entry twice.
Under reentrant mode what a submodule's hook keeps was computed under no_grad (a loss on it has no
gradient); what a hook on the checkpointed module itself keeps is the checkpoint's output, which
does require grad. Under non-reentrant mode with torch's early stop, a forward hook on the
checkpointed module itself runs after its last operation and is not run again; a hook on a
submodule followed by more operations is. Full backward hooks fire once per backward in every mode.
"""

import copy
import contextlib

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop  # noqa: E402

from ckpt_runtime import differing, grads, load_fixture, no_checkpointing  # noqa: E402

fx = load_fixture("feature_hooks")


def step(model, x):
    out = model(x)
    out.sum().backward()
    return out


def batch():
    torch.manual_seed(1)
    return torch.randn(2, 16)


def test_block_hook_list_gets_every_entry_twice_under_reentrant():
    torch.manual_seed(0)
    model = fx.PerceptualBackbone()
    reference = copy.deepcopy(model)
    with no_checkpointing(fx):
        step(reference, batch())
    assert len(reference.features) == 4
    model(batch())
    # The block's own output is the checkpoint's output: it requires grad even under reentrant mode.
    assert [f.requires_grad for f in model.features] == [True] * 4
    step(model, batch())
    assert len(model.features) == 8  # the recompute ran every hook again


def test_submodule_hook_runs_again_under_non_reentrant():
    torch.manual_seed(0)
    model = fx.AttentionMapBackbone()
    step(model, batch())
    assert len(model.attention_maps) == 8


def test_submodule_hook_keeps_tensors_without_grad_under_reentrant():
    torch.manual_seed(0)
    model = fx.DistilledStudent()
    reference = copy.deepcopy(model)
    target = torch.randn(2, 16)

    def distill(m):
        m(batch())
        loss = sum(((a - target) ** 2).mean() for a in m.attention.values())
        if loss.requires_grad:
            loss.backward()
        return loss

    with no_checkpointing(fx):
        distill(reference)
    model(batch())
    assert [a.requires_grad for a in model.attention.values()] == [False] * 4
    model.zero_grad(set_to_none=True)
    distill(model)
    assert reference.blocks[0].attn.weight.grad is not None
    assert "blocks.0.attn.weight" in differing(grads(model), grads(reference))  # the distillation gradient is missing


def test_block_hook_under_non_reentrant_early_stop_runs_once():
    torch.manual_seed(0)
    model = fx.NonReentrantTapBackbone()
    step(model, batch())
    assert len(model.features) == 4
    with set_checkpoint_early_stop(False):
        step(model, batch())
    assert len(model.features) == 8  # without the early stop the recompute reaches the hook


def test_hook_on_the_head_outside_the_region_runs_once():
    torch.manual_seed(0)
    model = fx.HeadTapBackbone()
    step(model, batch())
    assert len(model.features) == 1


def test_hooks_registered_over_named_modules_keep_block_outputs_without_grad_under_reentrant():
    """fixtures/activation_penalty.py: one closure per Linear, picked by a type test in a
    `named_modules()` loop; the penalty on what the hooks inside the blocks keep trains nothing."""
    penalty = load_fixture("activation_penalty")

    def kept(checkpointed):
        model = penalty.SparseMLP()
        penalty.ACTIVATIONS.clear()
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear):
                module.register_forward_hook(penalty.save_activation(name))
        with contextlib.nullcontext() if checkpointed else no_checkpointing(penalty):
            model(torch.randn(4, 16))
        return {name: output.requires_grad for name, output in penalty.ACTIVATIONS.items()}

    inside = ("blocks.0.up", "blocks.0.down", "blocks.1.up", "blocks.1.down", "blocks.2.up", "blocks.2.down")
    assert kept(True) == {"stem": True, **dict.fromkeys(inside, False), "head": True}
    assert kept(False) == {"stem": True, **dict.fromkeys(inside, True), "head": True}


def test_removed_hooks_leave_training_untouched():
    torch.manual_seed(0)
    model = fx.Distiller()
    assert len(fx.extract_features(model, batch())) == 4
    assert all(not block._forward_hooks for block in model.blocks)


# --- the measurement table of rules/CKPT007.md ---------------------------------------------------


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc(x)))


def measure(kind, on, mode):
    """(entries after forward, entries after backward, requires_grad of the forward entries) for a
    hook of `kind` on each of 4 checkpointed blocks (`on="block"`) or on their first layer (`"fc"`)."""
    torch.manual_seed(0)
    blocks = nn.ModuleList(TwoLayer() for _ in range(4))
    targets = [block if on == "block" else block.fc for block in blocks]
    store = []
    handles = []
    if kind == "forward":
        handles = [t.register_forward_hook(lambda m, i, o: store.append(o)) for t in targets]
    elif kind == "forward_pre":
        handles = [t.register_forward_pre_hook(lambda m, i: store.append(i[0])) for t in targets]
    elif kind == "full_backward":
        handles = [t.register_full_backward_hook(lambda m, gi, go: store.append(go[0])) for t in targets]
    elif kind == "global":
        handles = [torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: store.append(o) if any(m is t for t in targets) else None)]
    reentrant = mode == "reentrant"
    switch = contextlib.nullcontext() if reentrant else set_checkpoint_early_stop(mode == "early stop")
    try:
        with switch:
            h = torch.randn(2, 8, requires_grad=True)
            for block in blocks:
                h = checkpoint(block, h, use_reentrant=reentrant)
            after_forward = len(store)
            required = [t.requires_grad for t in store]
            h.sum().backward()
    finally:
        for handle in handles:
            handle.remove()
    return after_forward, len(store), required


TABLE = {
    # kind, on, mode: entries after forward, after backward, forward entries requiring grad
    ("forward", "block", "reentrant"): (4, 8, True),
    ("forward", "block", "early stop"): (4, 4, True),
    ("forward", "block", "no early stop"): (4, 8, True),
    ("forward", "fc", "reentrant"): (4, 8, False),
    ("forward", "fc", "early stop"): (4, 8, True),
    ("forward_pre", "block", "reentrant"): (4, 8, True),
    ("forward_pre", "block", "early stop"): (4, 8, True),
    ("forward_pre", "fc", "reentrant"): (4, 8, True),
    ("forward_pre", "fc", "early stop"): (4, 8, True),
    ("full_backward", "block", "reentrant"): (0, 4, None),
    ("full_backward", "block", "early stop"): (0, 4, None),
    ("full_backward", "fc", "reentrant"): (0, 4, None),
    ("full_backward", "fc", "early stop"): (0, 4, None),
    ("global", "block", "reentrant"): (4, 8, True),
    ("global", "block", "early stop"): (4, 4, True),
    ("global", "fc", "reentrant"): (4, 8, False),
    ("global", "fc", "early stop"): (4, 8, True),
}


@pytest.mark.parametrize("key", list(TABLE), ids=lambda k: "-".join(k).replace(" ", "_"))
def test_hook_measurements(key):
    after_forward, after_backward, required = measure(*key)
    expected_forward, expected_backward, expected_grad = TABLE[key]
    assert (after_forward, after_backward) == (expected_forward, expected_backward)
    if expected_grad is not None:
        assert required == [expected_grad] * after_forward
