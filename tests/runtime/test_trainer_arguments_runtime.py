"""CKPT005 through TrainingArguments a helper of another module builds
(fixtures/crossfile/hf_trainer_arguments): the Trainer switches on the reentrant checkpointing they
ask for, and a ViT tuned only in its query projections fails its step with "element 0 of tensors
does not require grad". Hooking the embedding output, or arguments without checkpointing, train."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from ckpt_runtime import ELEMENT_0, load_fixture_package  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


@pytest.fixture
def train():
    return load_fixture_package("crossfile/hf_trainer_arguments", "train")[0]


def test_the_helpers_arguments_make_the_trainer_fail(train):
    torch.manual_seed(0)
    with pytest.raises(RuntimeError, match=ELEMENT_0):
        train.fine_tune()


@pytest.mark.parametrize("fine_tune", ["fine_tune_hooked", "fine_tune_without_checkpointing"])
def test_a_hook_or_no_checkpointing_trains_the_queries(train, fine_tune):
    torch.manual_seed(0)
    before = train.query_tuned_vit().vit.layers[0].attention.q_proj.weight.detach().clone()
    torch.manual_seed(0)
    model = getattr(train, fine_tune)()
    assert not torch.equal(model.vit.layers[0].attention.q_proj.weight.detach(), before)
