"""CKPT004 at runtime: caching under gradient checkpointing.

FINDINGS 4K1: a cache appended inside a checkpointed function is appended again by the recompute
(length 2 after backward, reference 1). 4K2: when the function also reads the cache, the recompute
sees the grown cache (non-reentrant: CheckpointError on the recomputed metadata). 4K3: past keys and
values as positional inputs, appended outside: identical. 4H1: under transformers' checkpointing,
`use_cache=True` in training is silently turned off and `past_key_values` comes back None. 4H3:
training on a continuation with `past_key_values=` fails with a shape error; it works without
checkpointing, and in eval() mode.
"""

import copy

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import (  # noqa: E402
    assert_same_grads,
    grads,
    load_fixture,
    no_checkpointing,
    transformers_impl,  # noqa: F401
    real_transformers,  # noqa: F401
)

pytestmark = pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning")

fx = load_fixture("kv_cache_chunks")


def run_both(model_class, num_chunks):
    torch.manual_seed(0)
    model = getattr(fx, model_class)()
    model_ref = copy.deepcopy(model)
    chunks, labels = fx.make_chunks(num_chunks)
    with no_checkpointing(fx):
        loss_ref, cache_ref = fx.training_step(model_ref, chunks, labels)
    return model, model_ref, chunks, labels, loss_ref, cache_ref


@pytest.mark.parametrize("num_chunks", [1, 2])
def test_cache_appended_inside_region_is_appended_twice(num_chunks):
    model, model_ref, chunks, labels, loss_ref, cache_ref = run_both("ChunkedEncoder", num_chunks)
    loss, cache = fx.training_step(model, chunks, labels)
    assert len(cache_ref) == num_chunks
    assert len(cache) == 2 * num_chunks  # the backward recompute appended once more per chunk
    # The gradients themselves are right: only the container is corrupted.
    assert torch.equal(loss, loss_ref)
    assert_same_grads(grads(model), grads(model_ref))


def test_cache_read_and_appended_inside_region_fails_at_backward():
    model, model_ref, chunks, labels, loss_ref, cache_ref = run_both("MemoryEncoder", 2)
    assert len(cache_ref) == 2
    with pytest.raises(torch.utils.checkpoint.CheckpointError, match="Recomputed values for the following tensors have different metadata"):
        fx.training_step(model, chunks, labels)


def test_cache_read_and_appended_inside_region_reentrant(monkeypatch):
    """The same function under reentrant checkpointing (FINDINGS 4K2: "...backward through the graph a second time")."""
    model, model_ref, chunks, labels, loss_ref, cache_ref = run_both("MemoryEncoder", 2)
    real = torch.utils.checkpoint.checkpoint
    monkeypatch.setattr(fx, "checkpoint", lambda fn, *a, use_reentrant=None, **kw: real(fn, *a, use_reentrant=True, **kw))
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        fx.training_step(model, chunks, labels)


@pytest.mark.parametrize("num_chunks", [1, 2])
def test_cache_appended_after_the_last_saving_operation_is_not_appended_again(num_chunks):
    """Non-reentrant early stop: the recompute ends once the last tensor saved in forward is
    recomputed, before the append (rules/CKPT004.md, "Early stop")."""
    model, model_ref, chunks, labels, loss_ref, cache_ref = run_both("LastCachedEncoder", num_chunks)
    loss, cache = fx.training_step(model, chunks, labels)
    assert len(cache) == len(cache_ref) == num_chunks
    assert torch.equal(loss, loss_ref)
    assert_same_grads(grads(model), grads(model_ref))


@pytest.mark.parametrize("mode", ["reentrant", "early stop off"])
def test_cache_appended_after_the_last_saving_operation_without_early_stop_is_appended_twice(mode, monkeypatch):
    model, model_ref, chunks, labels, loss_ref, cache_ref = run_both("LastCachedEncoder", 2)
    if mode == "reentrant":
        real = torch.utils.checkpoint.checkpoint
        monkeypatch.setattr(fx, "checkpoint", lambda fn, *a, use_reentrant=None, **kw: real(fn, *a, use_reentrant=True, **kw))
        loss, cache = fx.training_step(model, chunks, labels)
    else:
        with torch.utils.checkpoint.set_checkpoint_early_stop(False):
            loss, cache = fx.training_step(model, chunks, labels)
    assert len(cache_ref) == 2
    assert len(cache) == 4


@pytest.mark.parametrize("where, repeated", [("after", False), ("before", True)])
def test_dynamic_cache_update_repeats_only_before_the_last_saving_operation(where, repeated):
    """transformers' DynamicCache.update inside a non-reentrant checkpoint (torch's default early stop)."""
    cache_utils = pytest.importorskip("transformers.cache_utils")
    torch.manual_seed(0)
    kv, out = torch.nn.Linear(8, 16), torch.nn.Linear(8, 8)
    cache = cache_utils.DynamicCache()

    def step(x):
        k, v = kv(x).chunk(2, dim=-1)
        if where == "before":
            cache.update(k.unsqueeze(1), v.unsqueeze(1), 0)
            return torch.tanh(out(k * v))
        h = torch.tanh(out(k * v))
        cache.update(k.unsqueeze(1), v.unsqueeze(1), 0)
        return h

    x = torch.randn(2, 3, 8, requires_grad=True)
    torch.utils.checkpoint.checkpoint(step, x, use_reentrant=False).sum().backward()
    assert cache.get_seq_length() == (6 if repeated else 3)


@pytest.mark.parametrize("num_chunks", [1, 3])
def test_past_as_positional_inputs_is_correct(num_chunks):
    model, model_ref, chunks, labels, loss_ref, cache_ref = run_both("PastInputEncoder", num_chunks)
    loss, cache = fx.training_step(model, chunks, labels)
    assert len(cache) == len(cache_ref) == num_chunks
    assert torch.equal(loss, loss_ref)
    assert_same_grads(grads(model), grads(model_ref))


# --- transformers: GPT-2-style decoder (shim and real) -------------------------------------------


def gpt2(hf):
    gfx = load_fixture("gpt2_cross_attention", transformers_module=hf)
    config = gfx.TinyGpt2Config()
    torch.manual_seed(0)
    model = gfx.Gpt2CrossDecoder(config)
    return gfx, config, model, copy.deepcopy(model)


def test_use_cache_true_under_checkpointing_returns_no_cache(transformers_impl):
    gfx, config, model, model_ref = gpt2(transformers_impl)
    batches = [gfx.make_batch(config, seed=s) for s in range(2)]
    caches_ref = gfx.finetune_streaming(model_ref, batches, gradient_checkpointing=False)
    caches = gfx.finetune_streaming(model, batches)
    assert all(c is not None and len(c) == config.n_layer for c in caches_ref)
    assert caches == [None, None]
    # Training itself is unaffected: same weights after two steps.
    for (name, p), p_ref in zip(model.named_parameters(), model_ref.parameters()):
        torch.testing.assert_close(p, p_ref, rtol=1e-5, atol=1e-7, msg=name)


def test_use_cache_false_or_no_checkpointing_is_consistent(transformers_impl):
    gfx, config, model, model_ref = gpt2(transformers_impl)
    batches = [gfx.make_batch(config, seed=s) for s in range(2)]
    assert gfx.finetune(model, batches) == [None, None]
    caches = gfx.finetune_without_checkpointing(model_ref, batches)
    assert all(len(c) == config.n_layer for c in caches)
    for (name, p), p_ref in zip(model.named_parameters(), model_ref.parameters()):
        torch.testing.assert_close(p, p_ref, rtol=1e-5, atol=1e-7, msg=name)


def gpt2_prefix(gfx, config, model):
    prompt = gfx.make_batch(config, seed=10)
    model.eval()
    with torch.no_grad():
        return model(**prompt, use_cache=True).past_key_values


def test_past_key_values_in_checkpointed_training_fails(transformers_impl):
    gfx, config, model, model_ref = gpt2(transformers_impl)
    prefix = gpt2_prefix(gfx, config, model_ref)
    batch = gfx.make_batch(config, seed=11)
    loss_ref = gfx.train_on_continuation(model_ref, prefix, batch, gradient_checkpointing=False)
    assert torch.isfinite(loss_ref) and model_ref.h[0].attn.c_attn.weight.grad is not None
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(6\) must match the size of tensor b \(12\) at non-singleton dimension 3"):
        gfx.train_on_continuation(model, prefix, batch)


def test_past_key_values_in_eval_mode_works_with_checkpointing_enabled(transformers_impl):
    gfx, config, model, model_ref = gpt2(transformers_impl)
    prefix = gpt2_prefix(gfx, config, model_ref)
    batch = gfx.make_batch(config, seed=11)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    torch.testing.assert_close(gfx.score_continuation(model, prefix, batch), gfx.score_continuation(model_ref, prefix, batch), rtol=1e-6, atol=0)


# --- transformers: a real tiny Llama (only when transformers is installed) ------------------------


def tiny_llama(transformers):
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    return model, copy.deepcopy(model)


def test_real_llama_use_cache_true_returns_no_cache(real_transformers):
    gfx = load_fixture("gpt2_cross_attention", transformers_module=real_transformers)
    model, model_ref = tiny_llama(real_transformers)
    batches = [{"input_ids": torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(s))} for s in range(2)]
    caches_ref = gfx.finetune_streaming(model_ref, batches, gradient_checkpointing=False)
    caches = gfx.finetune_streaming(model, batches)
    assert all(type(c).__name__ == "DynamicCache" for c in caches_ref)
    assert caches == [None, None]


def test_real_llama_past_key_values_in_checkpointed_training_fails(real_transformers):
    gfx = load_fixture("gpt2_cross_attention", transformers_module=real_transformers)
    model, model_ref = tiny_llama(real_transformers)

    def prefix():
        model_ref.eval()
        with torch.no_grad():
            return model_ref(torch.arange(8).unsqueeze(0).repeat(2, 1), use_cache=True).past_key_values

    batch = {"input_ids": torch.randint(0, 64, (2, 4), generator=torch.Generator().manual_seed(1))}
    loss_ref = gfx.train_on_continuation(model_ref, prefix(), batch, gradient_checkpointing=False)
    assert torch.isfinite(loss_ref)
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(4\) must match the size of tensor b \(12\) at non-singleton dimension 3"):
        gfx.train_on_continuation(model, prefix(), batch)
