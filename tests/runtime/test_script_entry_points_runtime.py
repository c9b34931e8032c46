"""fixtures/script_entry_points.py run as a script, the way its `__main__` block runs it.

The deep-copied teacher is handed over in train mode from `__main__`, so its checkpoints run with
grad disabled (CKPT008: nothing is recorded, pure overhead, FINDINGS 7A). The reproduction that
makes its input require grad trains every block through its reentrant checkpoints (FINDINGS 1D),
while the same blocks fed plain data leave the first block without gradients (1A).
"""

import runpy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import FIXTURES  # noqa: E402

SCRIPT = FIXTURES / "script_entry_points.py"


@pytest.fixture
def ran(monkeypatch):
    real = torch.utils.checkpoint.checkpoint
    grad_enabled = []

    def recording(function, *args, **kwargs):
        grad_enabled.append(torch.is_grad_enabled())
        return real(function, *args, **kwargs)

    monkeypatch.setattr(torch.utils.checkpoint, "checkpoint", recording)  # the script imports it from there
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        namespace = runpy.run_path(str(SCRIPT), run_name="__main__")
    return namespace, grad_enabled


def test_the_teacher_handed_over_from_main_checkpoints_with_grad_disabled(ran):
    _, grad_enabled = ran
    # Per batch: the teacher's two checkpoints under no_grad, then the student's two with grad;
    # then the reproduction's two.
    assert grad_enabled == [False, False, True, True] * 2 + [True, True]


def test_an_input_that_requires_grad_trains_every_block(ran):
    namespace, _ = ran
    probe = namespace["probe"]
    assert all(p.grad is not None for p in probe.parameters())
    plain = namespace["Encoder"]()
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        plain(torch.randn(4, 16)).sum().backward()
    assert plain.blocks[0][0].weight.grad is None
    assert plain.head.weight.grad is not None
