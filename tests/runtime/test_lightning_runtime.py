"""Lightning at runtime: what a real `Trainer.fit` hands the steps of fixtures/lightning_steps.py.

Measured with lightning 2.6.6 on torch 2.13 (CPU): `training_step` gets the DataLoader's batch with
nothing requiring grad, so a reentrant checkpoint on it leaves the block's parameters without
gradients (CKPT001); `validation_step` runs with grad disabled (CKPT008): under `torch.no_grad()` in fit's validation loop
(built with `inference_mode=False`), under `torch.inference_mode()` in `trainer.validate` (and test /
predict, with the default `Trainer(inference_mode=True)`). The correct
look-alikes train every parameter.
"""

import pytest

torch = pytest.importorskip("torch")
lightning = pytest.importorskip("lightning")
pytorch_lightning = pytest.importorskip("pytorch_lightning")

from ckpt_runtime import load_fixture  # noqa: E402

fx = load_fixture("lightning_steps")


def fit(module, batches, *, validate=False, only_validate=False, callbacks=(), epochs=0):
    """One fit step on `batches` (one validation batch too with `validate`; `trainer.validate` alone
    with `only_validate`), recording what each step sees; with `epochs`, that many epochs, the
    gradients of each epoch's first step under "grads by epoch"."""
    seen = {"grads by epoch": {}}

    def spy(name, step):
        def run(batch, batch_idx):
            seen[name] = {
                "batch requires grad": any(t.requires_grad for t in _tensors(batch)),
                "grad enabled": torch.is_grad_enabled(),
                "inference mode": torch.is_inference_mode_enabled(),
            }
            result = step(batch, batch_idx)
            if name == "training_step":
                seen["grads"] = {}
                result.backward(retain_graph=True)
                seen["grads"] = {n: None if p.grad is None else p.grad.clone() for n, p in module.named_parameters()}
                seen["grads by epoch"].setdefault(module.current_epoch, seen["grads"])
                module.zero_grad()
            return result

        return run

    module.training_step = spy("training_step", module.training_step)
    module.validation_step = spy("validation_step", module.validation_step)
    # `pytorch_lightning` and `lightning.pytorch` are separate class trees: each needs its own Trainer.
    package = pytorch_lightning if isinstance(module, pytorch_lightning.LightningModule) else lightning
    trainer = package.Trainer(
        **({"max_epochs": epochs} if epochs else {"max_steps": 1}), callbacks=list(callbacks), accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=1,
    )
    loader = torch.utils.data.DataLoader(batches, batch_size=4)
    if only_validate:
        trainer.validate(module, loader, verbose=False)
    else:
        trainer.fit(module, loader, loader if validate else None)
    return seen


def _tensors(batch):
    if isinstance(batch, torch.Tensor):
        return [batch]
    values = batch.values() if isinstance(batch, dict) else batch
    return [t for value in values for t in _tensors(value)]


def pairs(n=4):
    generator = torch.Generator().manual_seed(0)
    return list(zip(torch.randn(n, 8, generator=generator), torch.randint(0, 2, (n,), generator=generator)))


def test_lightning_version_measured():
    assert lightning.__version__.startswith("2.6")


def test_training_step_batch_is_loader_data_and_the_reentrant_block_gets_no_grad():
    torch.manual_seed(0)
    seen = fit(fx.LitPairs(), pairs(), validate=True)
    assert seen["training_step"] == {"batch requires grad": False, "grad enabled": True, "inference mode": False}
    grads = seen["grads"]
    assert grads["block.0.weight"] is None and grads["block.0.bias"] is None
    assert grads["head.weight"] is not None and grads["head.weight"].abs().sum() > 0


def test_validation_step_runs_without_grad_in_fit_and_under_inference_mode_in_validate():
    torch.manual_seed(0)
    # fit's own validation loop is built with inference_mode=False: torch.no_grad()
    seen = fit(fx.LitPairs(), pairs(), validate=True)
    assert seen["validation_step"] == {"batch requires grad": False, "grad enabled": False, "inference mode": False}
    # trainer.validate / test / predict honour Trainer(inference_mode=True), the default
    seen = fit(fx.LitPairs(), pairs(), only_validate=True)
    assert seen["validation_step"] == {"batch requires grad": False, "grad enabled": False, "inference mode": True}


def test_dict_batch_is_loader_data_too():
    torch.manual_seed(0)
    batches = [{"features": x, "labels": y} for x, y in pairs()]
    seen = fit(fx.LitTokens(), batches)
    assert seen["training_step"]["batch requires grad"] is False
    assert seen["grads"]["block.0.weight"] is None


@pytest.mark.parametrize(
    "module_class, validation_calls",
    [("LitFlaggedForward", [(False, False)]), ("LitTrainingFlaggedForward", []), ("LitFlaggedEncoder", [(False, False)]), ("LitTrainingFlaggedEncoder", [])],
)
def test_a_forward_checkpointing_on_its_flag_alone_checkpoints_in_the_validation_loop(module_class, validation_calls, monkeypatch):
    """Lightning calls `.eval()` and disables grad for validation: a checkpoint gated on the mode
    stops, one gated on a flag alone runs there for nothing (grad enabled, train mode recorded per
    call), also in a submodule the module's forward calls (`LitFlaggedEncoder`'s encoder)."""
    calls = []
    real = fx.checkpoint

    def recording(function, *args, **kwargs):
        calls.append((torch.is_grad_enabled(), function.training))
        return real(function, *args, **kwargs)

    monkeypatch.setattr(fx, "checkpoint", recording)
    torch.manual_seed(0)
    fit(getattr(fx, module_class)(), pairs(), validate=True)
    assert calls[0] == (True, True)  # the training step
    assert calls[1:] == validation_calls


def test_a_stem_frozen_in_a_setup_hook_leaves_the_reentrant_block_without_grad():
    torch.manual_seed(0)
    grads = fit(fx.LitFrozenStem(), pairs())["grads"]
    assert grads["stem.weight"] is None and grads["block.0.weight"] is None
    assert grads["head.weight"] is not None and grads["head.weight"].abs().sum() > 0


@pytest.mark.parametrize("look_alike", [fx.LitStem, fx.LitNonReentrant, fx.LitThawedStem])
def test_look_alikes_train_every_parameter(look_alike):
    torch.manual_seed(0)
    seen = fit(look_alike(), pairs(), validate=True)
    assert all(g is not None and g.abs().sum() > 0 for g in seen["grads"].values()), seen["grads"]


# --- callbacks that freeze the module they train (fixtures/lightning_finetuning.py) ---------------
#
# Lightning 2.6 runs, before the first training_step: callbacks' `setup` (BaseFinetuning's calls
# `freeze_before_training(pl_module)`), the module's `setup` / `configure_model` /
# `configure_optimizers`, then callbacks' and the module's `on_fit_start`, `on_train_start` and
# `on_train_epoch_start` (BaseFinetuning's calls `finetune_function(pl_module, current_epoch,
# optimizer)` there, every epoch).

ft = load_fixture("lightning_finetuning")

CHECKPOINTED = ("block.0.weight", "block.0.bias")


def _trained(grads, names):
    return all(grads[n] is not None and grads[n].abs().sum() > 0 for n in names)


def test_finetuning_callback_leaves_the_checkpointed_block_without_grad_until_it_unfreezes():
    torch.manual_seed(0)
    seen = fit(ft.LitFeatures(), pairs(), callbacks=[ft.FeatureExtractorFreezeUnfreeze(2)], epochs=3)
    by_epoch = seen["grads by epoch"]
    for epoch in (0, 1):  # frozen until epoch 2: the block behind the extractor gets no gradient
        assert all(by_epoch[epoch][n] is None for n in CHECKPOINTED), by_epoch[epoch]
        assert by_epoch[epoch]["feature_extractor.weight"] is None
        assert _trained(by_epoch[epoch], ["head.weight"])
    assert _trained(by_epoch[2], CHECKPOINTED + ("feature_extractor.weight",))


def test_finetuning_callback_unfreezing_at_the_first_epoch_trains_everything():
    torch.manual_seed(0)
    seen = fit(ft.LitFeaturesAtOnce(), pairs(), callbacks=[ft.FeatureExtractorFreezeUnfreeze(unfreeze_at_epoch=0)], epochs=1)
    assert _trained(seen["grads by epoch"][0], list(seen["grads"]))


@pytest.mark.parametrize(
    "module, callback, frozen",
    [(ft.LitBackbone, ft.FreezeBackbone, "backbone.weight"), (ft.LitEncoder, ft.FreezeEncoder, "encoder.weight")],
)
def test_plain_callbacks_freezing_in_setup_or_on_fit_start_leave_the_block_without_grad(module, callback, frozen):
    torch.manual_seed(0)
    grads = fit(module(), pairs(), callbacks=[callback()])["grads"]
    assert grads[frozen] is None and all(grads[n] is None for n in CHECKPOINTED), grads
    assert _trained(grads, ["head.weight"])


@pytest.mark.parametrize(
    "module, callback",
    [
        (ft.LitBackboneThawed, ft.FreezeThenThaw),  # unfrozen in on_train_start, before the first step
        (ft.LitBackboneNonReentrant, ft.FreezeBackbone),  # non-reentrant: the block trains behind it
        (ft.LitNormed, ft.FreezeNorm),  # BaseFinetuning.freeze keeps BatchNorm trainable
    ],
)
def test_callback_look_alikes_train_the_checkpointed_block(module, callback):
    torch.manual_seed(0)
    grads = fit(module(), pairs(), callbacks=[callback()])["grads"]
    assert _trained(grads, CHECKPOINTED), grads
