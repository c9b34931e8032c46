"""fixtures/crossfile/hf_builder at runtime: a ViT that a builder of another file froze but for its
attention queries and classifier, checkpointed reentrantly, trains no query; the builder that also
hooks the input-embedding output trains them all."""

import importlib
import importlib.util
import itertools
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ckpt_runtime import FIXTURES  # noqa: E402

_counter = itertools.count()


def load_train():
    name = f"ckptlint_runtime_hf_builder_{next(_counter)}"
    folder = FIXTURES / "crossfile" / "hf_builder"
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py", submodule_search_locations=[str(folder)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.train")


@pytest.mark.parametrize(("fine_tune", "trains"), [("fine_tune", False), ("fine_tune_hooked", True)])
def test_queries_inside_checkpointed_layers_train_only_with_the_hook(fine_tune, trains):
    torch.manual_seed(0)
    model = getattr(load_train(), fine_tune)().train()
    model(pixel_values=torch.randn(2, 3, 8, 8), labels=torch.tensor([0, 2])).loss.backward()
    queries = [p for n, p in model.named_parameters() if ".q_proj." in n]
    assert queries and all((p.grad is not None) == trains for p in queries)
    assert model.classifier.weight.grad is not None
