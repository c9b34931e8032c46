"""The library-style layers of `component_layers.py` (a checkpointing switch, nothing in the project
builds them) are components: built by a model that embeds first, they train identically with and
without checkpointing, so their inputs must not be taken for data (no CKPT001 without evidence).
"""

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import assert_same_grads, grads, load_fixture, no_checkpointing  # noqa: E402


def test_library_layers_built_after_an_embedding_train_as_without_checkpointing():
    fx = load_fixture("component_layers")

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(20, 8)
            self.mlp = fx.SwitchableMlpLayer(8)
            self.mlp.gradient_checkpointing = True
            self.conv = fx.UseCheckpointConvBlock(8, use_checkpoint=True)

        def forward(self, ids):
            h = self.mlp(self.embed(ids))
            return self.conv(h.transpose(1, 2).unsqueeze(-1)).mean()

    torch.manual_seed(0)
    model, reference = Model(), Model()
    reference.load_state_dict(model.state_dict())
    ids = torch.randint(0, 20, (2, 5))
    model(ids).backward()
    with no_checkpointing(fx):
        reference(ids).backward()
    got = grads(model)
    assert got["mlp.mlp.0.weight"] is not None and got["conv.conv.0.weight"] is not None
    assert_same_grads(got, grads(reference))
