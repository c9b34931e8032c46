"""A Trainer subclass's `compute_loss` gets the model it trains in train mode with checkpointing on
(CKPT004 through fixtures/hf_trainer_steps.py), with real transformers.

Measured with transformers 5.23 on a tiny Llama: with `TrainingArguments(gradient_checkpointing=True)`
the first segment's `use_cache=True` forward returns `past_key_values=None`, so the second segment
trains without its context; with checkpointing off it returns a DynamicCache and the second segment's
loss is another one.
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import load_fixture, real_transformers  # noqa: E402,F401

pytestmark = [pytest.mark.filterwarnings("ignore::FutureWarning"), pytest.mark.filterwarnings("ignore::UserWarning")]


@pytest.fixture
def fx(real_transformers):  # noqa: F811
    pytest.importorskip("accelerate")
    return load_fixture("hf_trainer_steps")


def test_the_segments_lose_their_cache_under_checkpointing(fx, tmp_path):
    torch.manual_seed(0)
    assert fx.train_segmented(str(tmp_path)) == [None]
    # The same Trainer with checkpointing off: the first segment's cache reaches the second.
    from transformers import TrainingArguments

    fx.SegmentedTrainer.caches = []
    args = TrainingArguments(output_dir=str(tmp_path), learning_rate=0.0, max_steps=1, per_device_train_batch_size=2, remove_unused_columns=False, save_strategy="no", report_to=[])
    torch.manual_seed(0)
    fx.SegmentedTrainer(model=fx.build_model(), args=args, train_dataset=fx.documents()).train()
    [cache] = fx.SegmentedTrainer.caches
    assert cache is not None and type(cache).__name__ == "DynamicCache"


def test_the_whole_document_trains_alike_with_and_without_checkpointing(fx, tmp_path):
    from transformers import TrainingArguments

    torch.manual_seed(0)
    with_checkpointing = fx.train_whole_documents(str(tmp_path))
    args = TrainingArguments(output_dir=str(tmp_path), learning_rate=0.0, max_steps=1, per_device_train_batch_size=2, remove_unused_columns=False, save_strategy="no", report_to=[])
    torch.manual_seed(0)
    without = fx.WholeDocumentTrainer(model=fx.build_model(), args=args, train_dataset=fx.documents()).train().training_loss
    assert with_checkpointing == pytest.approx(without, rel=1e-6)
