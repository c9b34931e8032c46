"""CKPT003 at runtime: a grad-carrying tensor reaches a reentrant checkpoint other than positionally.

FINDINGS 3A: a keyword raises `ValueError: Unexpected keyword arguments`. 3B/3C/3D: a non-leaf tensor
captured by functools.partial, a lambda, or a module attribute (the seed MoE's router scores) and read
by two checkpointed blocks raises "Trying to backward through the graph a second time" at backward.
3b: an HF GradientCheckpointingLayer called with `encoder_hidden_states=` by keyword does the same.
Positional inputs, captured parameters and masks, and non-reentrant mode give identical gradients.
"""

import functools

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import (  # noqa: E402
    SECOND_BACKWARD,
    assert_same_grads,
    grads,
    load_fixture,
    no_checkpointing,
    none_only_in,
    transformers_impl,  # noqa: F401
)

pytestmark = pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning")

fx = load_fixture("context_capture")


def reference_and_model(model_class, step):
    torch.manual_seed(0)
    model = getattr(fx, model_class)()
    model_ref = getattr(fx, model_class)()
    model_ref.load_state_dict(model.state_dict())
    batch = fx.make_batch()
    with no_checkpointing(fx):
        step(model_ref, batch)
    return model, model_ref, batch


def test_keyword_tensor_is_rejected():
    model, model_ref, batch = reference_and_model("KeywordContextDecoder", fx.training_step)
    assert model_ref.layers[0].q.weight.grad is not None
    with pytest.raises(ValueError, match="^Unexpected keyword arguments: context$"):
        fx.training_step(model, batch)


@pytest.mark.parametrize("model_class", ["PartialContextDecoder", "LambdaContextDecoder", "CustomForwardContextDecoder", "FactoryContextDecoder"])
def test_captured_context_breaks_backward(model_class):
    model, model_ref, batch = reference_and_model(model_class, fx.training_step)
    assert model_ref.context_encoder[0].weight.grad is not None  # the same code runs without checkpointing
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
        fx.training_step(model, batch)


def test_seed_moe_scores_attribute_breaks_backward():
    model, model_ref, batch = reference_and_model("ScoresAttributeMoE", fx.moe_training_step)
    assert model_ref.router_block.router.weight.grad is not None
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
        fx.moe_training_step(model, batch)


def test_tensors_packed_in_a_dict_lose_their_grads():
    """Measured: reentrant mode tracks only top-level tensor arguments; with none of them requiring
    grad, the output does not either, silently (no exception: the head trains)."""
    model, model_ref, batch = reference_and_model("PackedContextDecoder", fx.training_step)
    fx.training_step(model, batch)
    lost = none_only_in(grads(model), grads(model_ref))
    assert {"embed.weight", "context_encoder.0.weight", "layers.0.q.weight", "layers.1.q.weight"} <= set(lost)
    assert model.head.weight.grad is not None


def test_tensor_packed_in_a_list_read_by_two_layers_breaks_backward():
    model, model_ref, batch = reference_and_model("ListedContextDecoder", fx.training_step)
    assert model_ref.context_encoder[0].weight.grad is not None
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
        fx.training_step(model, batch)


@pytest.mark.parametrize(
    "model_class, step",
    [
        ("PackedContextDecoderNonReentrant", "training_step"),
        ("MaskOptionsDecoder", "training_step"),
        ("ConditionedDecoder", "training_step"),
        ("KeywordContextDecoderNonReentrant", "training_step"),
        ("MaskedContextDecoder", "training_step"),
        ("LearnedMemoryDecoder", "training_step"),
        ("ScoresAttributeMoENonReentrant", "moe_training_step"),
        ("ScoresPositionalMoE", "moe_training_step"),
        ("CustomForwardPositionalDecoder", "training_step"),
        ("FactoryPositionalDecoder", "training_step"),
    ],
)
def test_positional_leaf_or_non_reentrant_inputs_are_correct(model_class, step):
    step = getattr(fx, step)
    model, model_ref, batch = reference_and_model(model_class, step)
    step(model, batch)
    assert_same_grads(grads(model), grads(model_ref))
    if model_class == "LearnedMemoryDecoder":
        assert model.memory.grad is not None and model.memory.grad.abs().sum() > 0


# --- transformers' GradientCheckpointingLayer (GPT-2-style decoder with cross-attention) -----------


def gpt2_pair(hf, build):
    gfx = load_fixture("gpt2_cross_attention", transformers_module=hf)
    config = gfx.TinyGpt2Config()
    torch.manual_seed(0)
    model_ref = getattr(gfx, build)(config, gradient_checkpointing=False)
    model = getattr(gfx, build)(config)
    model.load_state_dict(model_ref.state_dict())
    return gfx, model, model_ref, gfx.make_batch(config)


def test_gpt2_encoder_hidden_states_by_keyword_breaks_backward(transformers_impl):
    gfx, model, model_ref, batch = gpt2_pair(transformers_impl, "build_keyword_decoder")
    gfx.training_step(model_ref, batch)
    assert model_ref.source_proj[0].weight.grad is not None
    assert model.h[0]._gradient_checkpointing_func.keywords == {"use_reentrant": True}
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
        gfx.training_step(model, batch)


def test_gpt2_encoder_hidden_states_positional_is_correct(transformers_impl):
    gfx, model, model_ref, batch = gpt2_pair(transformers_impl, "build_decoder")
    loss_ref = gfx.training_step(model_ref, batch)
    loss = gfx.training_step(model, batch)
    assert torch.equal(loss, loss_ref)
    assert_same_grads(grads(model), grads(model_ref))


def test_gpt2_keyword_under_default_non_reentrant_is_correct(transformers_impl):
    gfx, model, model_ref, batch = gpt2_pair(transformers_impl, "build_keyword_decoder")
    model.gradient_checkpointing_enable()  # transformers' default: {"use_reentrant": False}
    assert model.h[0]._gradient_checkpointing_func.keywords == {"use_reentrant": False}
    gfx.training_step(model_ref, batch)
    gfx.training_step(model, batch)
    assert_same_grads(grads(model), grads(model_ref))


# Source states either passed in (`encoder_outputs=`) or projected by the model itself: the
# projected path, the usual one, brings a non-leaf tensor by keyword (what Autoformer does).


def test_optional_source_states_by_keyword_break_backward_when_projected(transformers_impl):
    gfx, model, model_ref, batch = gpt2_pair(transformers_impl, "build_reusable_source_decoder")
    gfx.training_step(model_ref, batch)
    assert model_ref.source_proj[0].weight.grad is not None
    with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
        gfx.training_step(model, batch)


def test_optional_source_states_by_keyword_are_harmless_when_passed_in_as_data(transformers_impl):
    """The other path: precomputed states that do not require grad are only read, never backpropagated."""
    gfx, model, model_ref, batch = gpt2_pair(transformers_impl, "build_reusable_source_decoder")
    states = torch.randn(2, 5, gfx.TinyGpt2Config().n_embd)
    out_ref = model_ref(**batch, labels=batch["input_ids"], encoder_outputs=states)
    out = model(**batch, labels=batch["input_ids"], encoder_outputs=states)
    out_ref.loss.backward()
    out.loss.backward()
    assert_same_grads(grads(model), grads(model_ref))


def test_optional_source_states_positional_are_correct(transformers_impl):
    gfx, model, model_ref, batch = gpt2_pair(transformers_impl, "build_positional_reusable_source_decoder")
    gfx.training_step(model_ref, batch)
    gfx.training_step(model, batch)
    assert_same_grads(grads(model), grads(model_ref))


# --- transformers 4.x modeling code: `self._gradient_checkpointing_func(layer.__call__, ..., rel_pos=t)` ---


def relpos_pair(hf, build):
    rfx = load_fixture("hf_relative_position", transformers_module=hf)
    model_ref = getattr(rfx, build)(gradient_checkpointing=False)
    model = getattr(rfx, build)()
    model.load_state_dict(model_ref.state_dict())
    return rfx, model, model_ref, rfx.make_batch()


def test_hf_checkpointing_func_keyword_is_rejected(transformers_impl):
    """Measured with transformers 4.57.6 (default enable: {"use_reentrant": True}) and 5.23
    ({"use_reentrant": True} asked for): `ValueError: Unexpected keyword arguments: rel_pos`."""
    rfx, model, model_ref, batch = relpos_pair(transformers_impl, "build_encoder")
    rfx.training_step(model_ref, batch)
    assert model_ref.rel_pos_bias.weight.grad is not None
    assert model._gradient_checkpointing_func.keywords == {"use_reentrant": True}
    with pytest.raises(ValueError, match="^Unexpected keyword arguments: rel_pos$"):
        rfx.training_step(model, batch)


def test_hf_checkpointing_func_positional_is_correct(transformers_impl):
    rfx, model, model_ref, batch = relpos_pair(transformers_impl, "build_positional_encoder")
    rfx.training_step(model_ref, batch)
    rfx.training_step(model, batch)
    assert_same_grads(grads(model), grads(model_ref))


def test_hf_checkpointing_func_keyword_under_non_reentrant_is_correct(transformers_impl):
    rfx, model, model_ref, batch = relpos_pair(transformers_impl, "build_encoder")
    model.gradient_checkpointing_enable()  # transformers 5.x default: {"use_reentrant": False}
    assert model._gradient_checkpointing_func.keywords == {"use_reentrant": False}
    rfx.training_step(model_ref, batch)
    rfx.training_step(model, batch)
    assert_same_grads(grads(model), grads(model_ref))


# --- a keyword tensor made afresh for each layer from leaves only (data2vec-vision's relative position
# bias): GradientCheckpointingLayer binds it with functools.partial, as here. Read by one checkpointed
# call, its graph is walked once, in the recompute: exact. Shared by every layer: walked once per layer.


class _BiasedLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, h, position_bias=None):
        return torch.tanh(self.proj(h) + position_bias)


class _BiasedEncoder(torch.nn.Module):
    def __init__(self, shared):
        super().__init__()
        self.embed = torch.nn.Linear(4, 4)
        self.bias_table = torch.nn.Parameter(torch.randn(10, 4))
        self.layers = torch.nn.ModuleList([_BiasedLayer() for _ in range(3)])
        self.shared = shared
        self.register_buffer("index", torch.tensor([1, 3, 5]))

    def forward(self, x, checkpointed):
        h = self.embed(x)
        shared_bias = self.bias_table[self.index] * 2
        for layer in self.layers:
            bias = shared_bias if self.shared else self.bias_table[self.index] * 2
            bound = functools.partial(layer, position_bias=bias)
            h = torch.utils.checkpoint.checkpoint(bound, h, use_reentrant=True) if checkpointed else bound(h)
        return h.sum()


@pytest.mark.parametrize("shared", [False, True])
def test_keyword_bias_made_per_layer_is_exact_and_a_shared_one_breaks_backward(shared):
    torch.manual_seed(0)
    model = _BiasedEncoder(shared)
    x = torch.randn(3, 4)
    model(x, checkpointed=False).backward()
    reference = grads(model)
    model.zero_grad()
    if shared:
        with pytest.raises(RuntimeError, match=SECOND_BACKWARD):
            model(x, checkpointed=True).backward()
        return
    model(x, checkpointed=True).backward()
    assert_same_grads(grads(model), reference)
    assert model.bias_table.grad is not None and model.bias_table.grad.abs().sum() > 0
