"""CKPT002 through transformers' own checkpointing (fixtures/hf_dropout_rng.py), real transformers on CPU.

`gradient_checkpointing_kwargs={"preserve_rng_state": False}` reaches torch's checkpoint: when the
layers draw dropout masks, the recompute draws new ones, so the gradients belong to masks the
forward never used and the global RNG stream moves on. Measured with transformers 5.23 (and 4.57.1,
same verdicts; worst relative gradient error per family, reentrant and non-reentrant alike): Bert
0.94, GPT-2 1.08, T5 1.54 with their default dropout; GPT-2's `embd_pdrop` alone 0 (it drops the
embeddings, outside every block); Llama / Mistral / Qwen2 (`attention_dropout` 0.0) and ViT (0.0)
0, and 0.86 with `attention_dropout=0.1`.
"""

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from ckpt_runtime import assert_same_grads, grads, load_fixture, no_checkpointing, real_transformers, worst_relative_diff  # noqa: E402,F401

from ckptlint.confirm.hf import offline_from_pretrained  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")

BAD = ["bert_default_dropout", "gpt2_attention_dropout_reentrant", "llama_attention_dropout_set", "bert_pretrained_with_dropout"]
LOOK_ALIKES = ["llama_default", "llama_config_changed_after_build", "bert_without_dropout", "gpt2_embedding_dropout_only", "bert_rng_replayed", "pretrained_llama"]


@pytest.fixture
def fx(real_transformers):  # noqa: F811
    return load_fixture("hf_dropout_rng")


def step(model, seed=5):
    """One training step's gradients and the torch RNG state after it."""
    model.train()
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 64, (2, 8), generator=generator)
    labels = torch.tensor([0, 2]) if type(model).__name__.endswith("SequenceClassification") else ids
    torch.manual_seed(seed)
    model(input_ids=ids, labels=labels).loss.backward()
    return grads(model), torch.get_rng_state()


def both_runs(fx, builder):
    """The builder's model with its checkpointing, and the same weights without checkpointing."""
    torch.manual_seed(0)
    with offline_from_pretrained([]):
        model = getattr(fx, builder)()
    reference = copy.deepcopy(model)
    reference.gradient_checkpointing_disable()
    assert model.is_gradient_checkpointing and not reference.is_gradient_checkpointing
    return step(model), step(reference)


@pytest.mark.parametrize("builder", BAD)
def test_dropout_without_rng_replay_changes_gradients(fx, builder):
    (got, rng), (ref, rng_ref) = both_runs(fx, builder)
    worst, name = worst_relative_diff(got, ref)
    assert worst > 0.05, (worst, name)
    assert not torch.equal(rng, rng_ref)  # the recompute drew again: every later mask shifts


@pytest.mark.parametrize("builder", LOOK_ALIKES)
def test_no_dropout_or_replayed_rng_gives_identical_gradients(fx, builder):
    (got, rng), (ref, rng_ref) = both_runs(fx, builder)
    assert_same_grads(got, ref)
    assert torch.equal(rng, rng_ref)


def test_preserve_rng_state_reaches_the_layers(fx):
    model = fx.bert_default_dropout()
    assert model.bert.encoder.layer[0]._gradient_checkpointing_func.keywords == {"use_reentrant": False, "preserve_rng_state": False}


def trained_both_ways(fx, fine_tune, tmp_path):
    """The weights after the Trainer's one step, with the checkpointing the TrainingArguments ask for
    and with every checkpoint a direct call (the Trainer seeds its own step; the models start equal)."""
    import transformers.modeling_utils

    torch.manual_seed(0)
    model = getattr(fx, fine_tune)(fx.make_dataset(), str(tmp_path))
    with no_checkpointing(transformers.modeling_utils):
        torch.manual_seed(0)
        reference = getattr(fx, fine_tune)(fx.make_dataset(), str(tmp_path))
    assert model.is_gradient_checkpointing
    return dict(model.named_parameters()), dict(reference.named_parameters())


def test_trainer_without_rng_replay_trains_other_weights(fx, tmp_path):
    weights, reference = trained_both_ways(fx, "fine_tune_bert", tmp_path)
    moved = [name for name in weights if not torch.equal(weights[name], reference[name])]
    assert any(".layer." in name for name in moved), moved


def test_trainer_without_rng_replay_on_a_model_without_dropout_trains_the_same(fx, tmp_path):
    weights, reference = trained_both_ways(fx, "fine_tune_llama", tmp_path)
    assert all(torch.equal(weights[name], reference[name]) for name in weights)
