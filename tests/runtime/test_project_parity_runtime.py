"""What a file linted alone must not claim, and what it must still report, at runtime.

`crossfile/text/layers.py` linted alone holds a layer that checkpoints its own input in reentrant
mode: the project's `TextEncoder` hands it embeddings, so its parameters train exactly as without
checkpointing (the old guess "nothing here builds it, so it is a top-level model fed data" gave a
false CKPT001). Its `Attention` appends the attention maps that `TextEncoder.attention_maps()`
collects: checkpointed by `encoder.py`, every map is appended twice (CKPT007, reported in
layers.py, whatever file is named).
"""

import importlib.util
import itertools
import sys

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import FIXTURES, assert_same_grads, grads, no_checkpointing  # noqa: E402

_counter = itertools.count()


def load_text_package():
    """fixtures/crossfile/text as a fresh package (its modules import each other relatively)."""
    name = f"ckptlint_runtime_text_{next(_counter)}"
    folder = FIXTURES / "crossfile" / "text"
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py", submodule_search_locations=[str(folder)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.layers"), importlib.import_module(f"{name}.encoder"), importlib.import_module(f"{name}.train")


def test_the_layer_checkpointing_its_input_trains_as_without_checkpointing():
    layers, encoder, train = load_text_package()
    torch.manual_seed(0)
    model = encoder.TextEncoder()
    reference = encoder.TextEncoder()
    reference.load_state_dict(model.state_dict())
    batch = train.make_batch()

    def step(m):
        logits = m(batch)
        torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.reshape(-1)).backward()

    step(model)
    with no_checkpointing(layers, encoder):
        step(reference)
    got = grads(model)
    assert got["layers.0.ff.up.weight"] is not None
    assert_same_grads(got, grads(reference))


def test_attention_maps_collected_inside_the_checkpoint_are_collected_twice():
    layers, encoder, train = load_text_package()
    torch.manual_seed(0)
    model = encoder.TextEncoder()
    batch = train.make_batch()
    model(batch).sum().backward()
    assert len(model.attention_maps()) == 4  # two layers, each map appended again by the recompute
    with no_checkpointing(layers, encoder):
        model(batch).sum().backward()
    assert len(model.attention_maps()) == 2
