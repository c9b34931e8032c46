"""CKPT005 at runtime: reentrant checkpointing with frozen parameters upstream and no input-grad hook.

FINDINGS 5P1: a frozen embedding in front of reentrant checkpoints leaves every checkpointed
parameter with `.grad = None` (silently; the head still trains). 5P2/5T4: when only adapters inside
the checkpointed layers train, backward raises "element 0 of tensors does not require grad". 5P3/5T5:
an input-grad hook (`enable_input_require_grads()`) fixes it; non-reentrant mode (transformers'
default for `None`) is correct; 5T1: a text model (main_input_name "input_ids") gets the hook
automatically. `{}` falls back to reentrant mode, like `{"use_reentrant": True}`.
"""

import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import (  # noqa: E402
    ELEMENT_0,
    NO_INPUT_GRAD_WARNING,
    assert_same_grads,
    capture_warnings,  # noqa: F401
    grads,
    load_fixture,
    no_checkpointing,
    none_only_in,
    real_transformers,  # noqa: F401
    transformers_impl,  # noqa: F401
    warning_texts,
)

pytestmark = pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning")

fx = load_fixture("frozen_upstream")


def run_both(build):
    torch.manual_seed(0)
    model = build()
    model_ref = copy.deepcopy(model)
    loader = [fx.make_batch(seed=s) for s in range(2)]
    with no_checkpointing(fx):
        fx.finetune(model_ref, loader)
    return model, model_ref, loader


def test_frozen_embedding_leaves_checkpointed_blocks_without_gradients(capture_warnings):
    model, model_ref, loader = run_both(fx.FrozenEmbeddingClassifier)
    before = copy.deepcopy(model.blocks.state_dict())
    fx.finetune(model, loader)
    got, ref = grads(model), grads(model_ref)
    assert none_only_in(got, ref) == sorted(name for name in ref if name.startswith("blocks.") and ref[name] is not None)
    assert len(none_only_in(got, ref)) == 2 * 2 * 4 + 2 * 2  # per block: two LoRALinear (base w/b, A, B) + norm w/b
    assert got["head.weight"] is not None
    # Two AdamW steps later the blocks have not moved at all.
    for key, value in model.blocks.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert warning_texts(capture_warnings).count(NO_INPUT_GRAD_WARNING) == 4  # 2 blocks x 2 steps


def test_pretrained_word_vectors_are_frozen_by_default_and_starve_the_blocks(capture_warnings):
    model, model_ref, loader = run_both(fx.PretrainedEmbeddingClassifier)
    assert not model.embed.weight.requires_grad  # nn.Embedding.from_pretrained(..., freeze=True) by default
    fx.finetune(model, loader)
    got, ref = grads(model), grads(model_ref)
    assert none_only_in(got, ref) == sorted(name for name in ref if name.startswith("blocks.") and ref[name] is not None)
    tuned, tuned_ref, loader = run_both(fx.TunedPretrainedEmbeddingClassifier)
    fx.finetune(tuned, loader)
    assert_same_grads(grads(tuned), grads(tuned_ref))


def test_a_block_handed_to_a_checkpointed_method_gets_no_gradients_either(capture_warnings):
    model, model_ref, loader = run_both(fx.FrozenEmbeddingStepClassifier)
    fx.finetune(model, loader)
    got, ref = grads(model), grads(model_ref)
    assert none_only_in(got, ref) == sorted(name for name in ref if name.startswith("blocks.") and ref[name] is not None)
    assert got["head.weight"] is not None
    assert warning_texts(capture_warnings).count(NO_INPUT_GRAD_WARNING) == 4


@pytest.mark.parametrize("build", ["FrozenEmbeddingClassifierNonReentrant", "FrozenHeadClassifier", "build_hooked_lora_classifier"])
def test_non_reentrant_downstream_freeze_or_input_hook_is_correct(build, capture_warnings):
    model, model_ref, loader = run_both(getattr(fx, build))
    fx.finetune(model, loader)
    got, ref = grads(model), grads(model_ref)
    assert_same_grads(got, ref)
    assert any(name.startswith("blocks.") and g is not None for name, g in got.items())
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)


def test_peft_style_freeze_loop_fails_at_backward(capture_warnings):
    model, model_ref, loader = run_both(fx.build_lora_classifier)
    assert model_ref.blocks[0].up.lora_B.grad is not None  # trains fine without checkpointing
    with pytest.raises(RuntimeError, match=ELEMENT_0):
        fx.finetune(model, loader)
    assert warning_texts(capture_warnings).count(NO_INPUT_GRAD_WARNING) == 2


# --- transformers: vision model (pixel_values: no automatic input-grad hook) -----------------------


def vision_pair(hf, build):
    vfx = load_fixture("hf_vision_adapters", transformers_module=hf)
    config = vfx.TinyViTConfig()
    torch.manual_seed(0)
    model_ref = vfx.build_without_checkpointing(config)
    model = getattr(vfx, build)(config)
    model.load_state_dict(model_ref.state_dict())
    batch = vfx.make_batch(config)
    vfx.training_step(model_ref, batch)
    return vfx, model, model_ref, batch


@pytest.mark.parametrize("build", ["build_reentrant", "build_empty_kwargs", "build_helper_enabled"])
def test_vision_adapters_under_reentrant_checkpointing_fail(build, transformers_impl, capture_warnings):
    vfx, model, model_ref, batch = vision_pair(transformers_impl, build)
    assert model_ref.layers[0].q_proj.weight.grad is not None
    with pytest.raises(RuntimeError, match=ELEMENT_0):
        vfx.training_step(model, batch)
    texts = warning_texts(capture_warnings)
    assert texts.count(NO_INPUT_GRAD_WARNING) == 2
    if build == "build_empty_kwargs":  # {} reaches torch without use_reentrant: torch warns and uses reentrant
        assert sum("use_reentrant parameter should be passed explicitly" in t for t in texts) == 2


@pytest.mark.parametrize("build", ["build_default", "build_none", "build_reentrant_with_input_grads", "build_helper_enabled_with_input_grads"])
def test_vision_adapters_default_or_with_input_grads_are_correct(build, transformers_impl, capture_warnings):
    vfx, model, model_ref, batch = vision_pair(transformers_impl, build)
    vfx.training_step(model, batch)
    got, ref = grads(model), grads(model_ref)
    assert_same_grads(got, ref)
    assert got["layers.0.q_proj.weight"] is not None
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)


# --- transformers: text model (input_ids: transformers hooks the embeddings itself) ---------------


def test_text_model_adapters_under_reentrant_checkpointing_are_correct(transformers_impl, capture_warnings):
    gfx = load_fixture("gpt2_cross_attention", transformers_module=transformers_impl)
    config = gfx.TinyGpt2Config()
    torch.manual_seed(0)
    model_ref = gfx.build_adapter_decoder(config, gradient_checkpointing=False)
    model = gfx.build_adapter_decoder(config)
    model.load_state_dict(model_ref.state_dict())
    assert model.h[0]._gradient_checkpointing_func.keywords == {"use_reentrant": True}
    batch = gfx.make_batch(config)
    gfx.training_step(model_ref, batch)
    gfx.training_step(model, batch)
    got, ref = grads(model), grads(model_ref)
    assert_same_grads(got, ref)
    assert got["h.0.attn.c_attn.weight"] is not None
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)


# --- transformers ViT with part of it frozen: what the first checkpointed layer reads decides ----------


def vit_layers(model):
    return [m for m in model.modules() if type(m).__name__ == "ViTLayer"]


def frozen_parts_step(hf, build):
    parts = load_fixture("hf_frozen_parts", transformers_module=hf)
    torch.manual_seed(0)
    model = getattr(parts, build)()
    model.train()
    pixel_values = torch.randn(2, 3, 8, 8)
    labels = torch.tensor([0, 2])
    model(pixel_values=pixel_values, labels=labels).loss.backward()
    return model


@pytest.mark.parametrize("build", ["embeddings_frozen_by_path", "embeddings_frozen_through_base_model"])
def test_vit_with_its_embeddings_block_frozen_trains_no_layer(build, real_transformers, capture_warnings):
    model = frozen_parts_step(real_transformers, build)
    layer = dict(vit_layers(model)[0].named_parameters())
    assert layer and all(p.grad is None for p in layer.values())
    assert model.classifier.weight.grad is not None
    assert warning_texts(capture_warnings).count(NO_INPUT_GRAD_WARNING) == 2


@pytest.mark.parametrize("build", ["patch_projection_frozen", "classifier_frozen"])
def test_vit_with_the_class_token_or_positions_trainable_trains_every_layer(build, real_transformers, capture_warnings):
    model = frozen_parts_step(real_transformers, build)
    assert all(p.grad is not None for layer in vit_layers(model) for p in layer.parameters())
    assert model.vit.embeddings.position_embeddings.grad is not None
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)


@pytest.mark.parametrize(("holder", "trains"), [("FrozenEmbeddingsTuner", False), ("HookedEmbeddingsTuner", True)])
def test_a_held_vit_frozen_by_its_holder(holder, trains, real_transformers):
    parts = load_fixture("hf_frozen_parts", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = getattr(parts, holder)().train()
    model(torch.randn(2, 3, 8, 8)).sum().backward()
    layer = list(vit_layers(model)[0].parameters())
    assert all((p.grad is not None) == trains for p in layer)


@pytest.mark.parametrize(("build", "trains"), [("enabled_on_a_holder_frozen_in_its_init", False), ("enabled_on_a_holder_with_its_classifier_frozen", True)])
def test_checkpointing_enabled_from_outside_on_a_vit_its_holder_froze(build, trains, real_transformers, capture_warnings):
    """The holder's `__init__` froze the embeddings block; `model.backbone.gradient_checkpointing_enable(...)`
    from outside switches the ViT to reentrant checkpointing all the same."""
    parts = load_fixture("hf_frozen_parts", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = getattr(parts, build)().train()
    assert model.backbone.is_gradient_checkpointing
    model(torch.randn(2, 3, 8, 8)).sum().backward()
    assert all((p.grad is not None) == trains for layer in vit_layers(model) for p in layer.parameters())
    assert model.backbone.classifier.weight.grad is None if trains else model.backbone.classifier.weight.grad is not None
    assert (NO_INPUT_GRAD_WARNING in warning_texts(capture_warnings)) != trains


@pytest.mark.parametrize(("build", "trains"), [("tune_queries", False), ("tune_queries_hooked", True), ("tune_queries_non_reentrant", True)])
def test_a_loader_enables_checkpointing_and_the_caller_freezes(build, trains, real_transformers, capture_warnings):
    """`load_with_vectors` switches a Llama to reentrant checkpointing, then swaps its embedding (the
    5.x input-grad hook sat on the old one); its caller freezes all but the queries: backward fails.
    Keeping the hooked embedding, or non-reentrant checkpointing, trains the queries."""
    loaders = load_fixture("hf_loaders", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = getattr(loaders, build)().train()
    ids = torch.randint(0, 64, (2, 5))
    if not trains:
        with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
            model(input_ids=ids, labels=ids).loss.backward()
        assert NO_INPUT_GRAD_WARNING in warning_texts(capture_warnings)
        return
    model(input_ids=ids, labels=ids).loss.backward()
    queries = [p for name, p in model.named_parameters() if "q_proj" in name]
    assert queries and all(p.grad is not None for p in queries)
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)


@pytest.mark.parametrize(("build", "trains"), [("tune_with_frozen_vectors", False), ("tune_with_trainable_vectors", True)])
def test_a_loader_swaps_in_pretrained_vectors(build, trains, real_transformers, capture_warnings):
    """`set_input_embeddings(nn.Embedding.from_pretrained(vectors))` after reentrant checkpointing was
    enabled: the table is frozen (`freeze=True` by default) and the 5.x hook sat on the old one, so
    the layers get no gradient while the head trains; `freeze=False` keeps the layers training."""
    loaders = load_fixture("hf_loaders", transformers_module=real_transformers)
    torch.manual_seed(0)
    model = getattr(loaders, build)().train()
    ids = torch.randint(0, 64, (2, 5))
    model(input_ids=ids, labels=ids).loss.backward()
    layers = [p for name, p in model.named_parameters() if ".layers." in name]
    assert layers and all((p.grad is not None) == trains for p in layers)
    assert model.lm_head.weight.grad is not None
    assert (NO_INPUT_GRAD_WARNING in warning_texts(capture_warnings)) != trains

