"""CKPT008 through a timm-style factory (fixtures/model_factories.py): `create_model("mixer_b",
grad_checkpointing=True)` hands the keyword through `**kwargs` to the constructor, over the table's
entries, so the teacher checkpoints in train mode; scored under `no_grad`, each checkpoint runs with
grad off. Created without the keyword, the teacher runs no checkpoint."""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture, recording_grad_modes  # noqa: E402


@pytest.fixture
def fx(monkeypatch):
    return recording_grad_modes(monkeypatch, load_fixture("model_factories"))


def test_the_factory_passes_the_keyword_over_the_table(fx):
    teacher = fx.create_model("mixer_b", grad_checkpointing=True)
    assert teacher.grad_checkpointing and len(teacher.blocks) == 4  # the table's depth, the caller's flag
    assert not fx.create_model("mixer_b").grad_checkpointing


def test_the_teacher_checkpoints_with_grad_off(fx):
    torch.manual_seed(0)
    student = fx.create_model("mixer_s")
    teacher = fx.create_model("mixer_b", grad_checkpointing=True).requires_grad_(False)
    fx.distill_step(student, teacher, fx.make_batch(), torch.optim.SGD(student.parameters(), lr=0.1))
    assert fx.recorded == [False] * 4  # one per teacher block, all with grad disabled


def test_a_teacher_created_without_the_keyword_runs_no_checkpoint(fx):
    torch.manual_seed(0)
    student = fx.create_model("mixer_s")
    teacher = fx.create_model("mixer_b").requires_grad_(False)
    fx.distill_plain_teacher_step(student, teacher, fx.make_batch(), torch.optim.SGD(student.parameters(), lr=0.1))
    assert fx.recorded == []
