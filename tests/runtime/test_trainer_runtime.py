"""CKPT004/CKPT005 at runtime through transformers' Trainer (fixtures/hf_trainer.py), real
transformers 5.23 on CPU.

The Trainer switches checkpointing on from its TrainingArguments when it trains. With
`{"use_reentrant": True}` and a frozen vision model (only the query projections train, all inside
the checkpointed layers) nothing requires grad at the layers' inputs: the step fails with
"element 0 of tensors does not require grad". The 5.23 default (kwargs None: non-reentrant), an
input-grad hook, or a model with nothing frozen train.
"""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from ckpt_runtime import ELEMENT_0, load_fixture  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")

fx = load_fixture("hf_trainer")


def query_weight(model):
    return model.vit.layers[0].attention.q_proj.weight


@pytest.mark.parametrize("fine_tune", ["fine_tune_reentrant", "fine_tune_built_reentrant"])
def test_reentrant_trainer_on_frozen_vision_model_fails(fine_tune, tmp_path):
    """Frozen where the Trainer is built, or by the builder that returns the model."""
    torch.manual_seed(0)
    with pytest.raises(RuntimeError, match=ELEMENT_0):
        getattr(fx, fine_tune)(fx.make_dataset(), str(tmp_path))


@pytest.mark.parametrize(
    "fine_tune",
    ["fine_tune_without_checkpointing", "fine_tune_default", "fine_tune_reentrant_with_input_grads", "fine_tune_reentrant_unfrozen", "fine_tune_built_with_input_grads"],
)
def test_default_hooked_or_unfrozen_trainer_trains(fine_tune, tmp_path):
    torch.manual_seed(0)
    model = fx.ViTForImageClassification(fx.vit_config())
    before = query_weight(model).detach().clone()
    torch.manual_seed(0)
    trained = getattr(fx, fine_tune)(fx.make_dataset(), str(tmp_path))
    assert trained.is_gradient_checkpointing == (fine_tune != "fine_tune_without_checkpointing")
    assert not torch.equal(query_weight(trained).detach(), before)  # the optimizer step moved the queries


def test_trainer_default_is_non_reentrant_in_5_23(tmp_path):
    """What the Trainer hands the checkpoint function: `{"use_reentrant": False}` from kwargs None."""
    model = fx.fine_tune_default(fx.make_dataset(), str(tmp_path))
    assert model.vit.layers[0]._gradient_checkpointing_func.keywords == {"use_reentrant": False}


def test_trainer_leaves_the_model_in_train_mode_with_checkpointing_on(tmp_path):
    """After `train()` returns the model is still in train mode with checkpointing on: code that
    switches caching back on for generation must also call `eval()` (or checkpointing stays in force)."""
    model = fx.fine_tune_reentrant_unfrozen(fx.make_dataset(), str(tmp_path))
    assert model.training and model.is_gradient_checkpointing


@pytest.mark.parametrize("arguments, cached", [({}, False), ({"use_cache": True}, True)])
def test_building_a_trainer_sets_caching_from_its_arguments_in_5_x(arguments, cached, tmp_path):
    """transformers 5.23: `Trainer(...)` sets `model.config.use_cache = args.use_cache` (default
    False) when it is built, whatever the model was built with (rules/CKPT004.md)."""
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, use_cache=True)
    model = LlamaForCausalLM(config)
    args = TrainingArguments(output_dir=str(tmp_path), gradient_checkpointing=True, report_to=[], **arguments)
    Trainer(model=model, args=args)
    assert model.config.use_cache is cached
