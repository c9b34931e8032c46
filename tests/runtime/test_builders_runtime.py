"""fixtures/crossfile/hf_builder at runtime: a ViT that a builder of another file froze but for its
attention queries and classifier, checkpointed reentrantly, trains no query; the builder that also
hooks the input-embedding output trains them all."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ckpt_runtime import load_fixture_package  # noqa: E402


def load_train():
    return load_fixture_package("crossfile/hf_builder", "train")[0]


@pytest.mark.parametrize(("fine_tune", "trains"), [("fine_tune", False), ("fine_tune_hooked", True)])
def test_queries_inside_checkpointed_layers_train_only_with_the_hook(fine_tune, trains):
    torch.manual_seed(0)
    model = getattr(load_train(), fine_tune)().train()
    model(pixel_values=torch.randn(2, 3, 8, 8), labels=torch.tensor([0, 2])).loss.backward()
    queries = [p for n, p in model.named_parameters() if ".q_proj." in n]
    assert queries and all((p.grad is not None) == trains for p in queries)
    assert model.classifier.weight.grad is not None
