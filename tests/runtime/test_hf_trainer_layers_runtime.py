"""CKPT003 at runtime for fixtures/hf_trainer_layers.py: a project's own transformers model whose
GradientCheckpointingLayer blocks get a grad-carrying mask by keyword, trained by the Trainer with
`gradient_checkpointing_kwargs={"use_reentrant": True}` in its arguments (real transformers 5.23 on
CPU). transformers binds the keyword with functools.partial, so the mask is no input of the reentrant
checkpoint: the Trainer's backward fails with "Trying to backward through the graph a second time".
The same arguments with the mask passed positionally train.
"""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ckpt_runtime import load_fixture  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")

fx = load_fixture("hf_trainer_layers")


def test_a_keyword_mask_fails_the_trainers_reentrant_backward(tmp_path):
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        fx.train_bytes(str(tmp_path))


def test_the_mask_passed_positionally_trains(tmp_path):
    fx.train_bytes(str(tmp_path), fx.PositionalByteModel)
