"""CKPT004 at runtime for fixtures/hf_config_cache.py: a config with `use_cache=True` handed to a
transformers model trained with gradient checkpointing (real transformers 5.23, a 2-layer Llama with
hidden size 32 on CPU; the same measured with 4.57.6).

However the config gets `use_cache=True` (its constructor, `AutoConfig.from_pretrained(...,
use_cache=True)`, `config.use_cache = True`, `setattr`, `config.update`, a helper that returns it)
and however the model is built from it (`from_pretrained(name, config=config)`, `LlamaForCausalLM(config)`,
`AutoModelForCausalLM.from_config(config)`), training with checkpointing on logs "`use_cache=True` is
incompatible with gradient checkpointing. Setting `use_cache=False`." and returns
`past_key_values=None` every step; the same function without checkpointing returns a
`DynamicCache`. The look-alikes switch caching off before training and log nothing.
"""

import logging

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ckpt_runtime import load_fixture  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")

fx = load_fixture("hf_config_cache")
INCOMPATIBLE = "`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`."

BAD = ["finetune_pretrained_config", "finetune_auto_config", "finetune_helper_config", "finetune_setattr_config", "finetune_updated_config", "finetune_prepared_by_helper"]
LOOK_ALIKES = ["finetune_cache_switched_off", "finetune_pretrained_switched_off"]


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    """A tiny Llama saved with caching off, so only what the fixture spells turns it on."""
    return fx.save_tiny_checkpoint(str(tmp_path_factory.mktemp("tiny_llama")))


@pytest.fixture
def transformers_log():
    """What transformers logs (its `warning_once` memo cleared, so each test sees its own warnings)."""
    from transformers.utils.logging import warning_once

    warning_once.cache_clear()
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)
    warning_once.cache_clear()


def make_dataset(size=4):
    ids = torch.randint(0, 64, (size, 6), generator=torch.Generator().manual_seed(0))
    return [{"input_ids": row, "labels": row} for row in ids]


def run(function, checkpoint_dir, **kwargs):
    arguments = () if function == "finetune_from_scratch" else (checkpoint_dir,)
    torch.manual_seed(0)
    return getattr(fx, function)(*arguments, fx.make_batches(), **kwargs)


@pytest.mark.parametrize("function", [*BAD, "finetune_from_scratch"])
def test_cache_config_under_checkpointing_returns_no_cache(function, checkpoint_dir, transformers_log):
    caches = run(function, checkpoint_dir)
    assert caches == [None, None]
    assert INCOMPATIBLE in [r.getMessage() for r in transformers_log]
    reference = run(function, checkpoint_dir, gradient_checkpointing=False)
    assert [type(c).__name__ for c in reference] == ["DynamicCache", "DynamicCache"]


@pytest.mark.parametrize("function", LOOK_ALIKES)
def test_cache_switched_off_before_training_is_what_runs(function, checkpoint_dir, transformers_log):
    assert run(function, checkpoint_dir) == [None, None]
    assert INCOMPATIBLE not in [r.getMessage() for r in transformers_log]


def test_config_switched_off_before_building(transformers_log):
    torch.manual_seed(0)
    assert fx.finetune_config_switched_off(fx.make_batches()) == [None, None]
    assert INCOMPATIBLE not in [r.getMessage() for r in transformers_log]


def test_cache_after_training_and_without_checkpointing_is_kept(checkpoint_dir, transformers_log, tmp_path):
    pytest.importorskip("accelerate")
    model = fx.finetune_then_cache(checkpoint_dir, make_dataset(), str(tmp_path))
    with torch.no_grad():
        assert type(model(fx.make_batches(1)[0]["input_ids"]).past_key_values).__name__ == "DynamicCache"
    caches = fx.finetune_without_checkpointing(checkpoint_dir, fx.make_batches())
    assert [type(c).__name__ for c in caches] == ["DynamicCache", "DynamicCache"]
    assert INCOMPATIBLE not in [r.getMessage() for r in transformers_log]
