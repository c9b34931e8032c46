"""What a file linted alone must not claim, and what it must still report, at runtime.

`crossfile/text/layers.py` linted alone holds a layer that checkpoints its own input in reentrant
mode: the project's `TextEncoder` hands it embeddings, so its parameters train exactly as without
checkpointing (the old guess "nothing here builds it, so it is a top-level model fed data" gave a
false CKPT001). Its `Attention` appends the attention maps that `TextEncoder.attention_maps()`
collects: checkpointed by `encoder.py`, every map is appended twice (CKPT007, reported in
layers.py, whatever file is named).
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, grads, load_fixture_package, no_checkpointing  # noqa: E402


def load_text_package():
    """fixtures/crossfile/text: its layers, encoder and training script."""
    return load_fixture_package("crossfile/text", "layers", "encoder", "train")


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
