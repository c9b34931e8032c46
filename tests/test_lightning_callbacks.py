"""Lightning callbacks freezing the module a Trainer fits (CKPT005): the spellings of the linkage and
the order semantics of the hooks, beyond fixtures/lightning_finetuning.py. Lightning 2.6 runs, before
the first training step, each hook of the callbacks and then the module's own (setup, on_fit_start,
on_train_start, on_train_epoch_start, on_train_batch_start); tests/runtime/test_lightning_runtime.py
measures what a freeze there does."""

from __future__ import annotations

import pytest
from conftest import lint_text

MODULE = '''
import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import BaseFinetuning, Callback
from torch import nn
from torch.utils.checkpoint import checkpoint


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(8, 8)
        self.block = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(checkpoint(self.block, self.backbone(x), use_reentrant=True))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)
{module_hooks}

{callbacks}
'''

FREEZE_ON_FIT_START = '''
class Freeze(Callback):
    def on_fit_start(self, trainer, pl_module):
        pl_module.backbone.requires_grad_(False)
'''

FINETUNING = '''
class Finetune(BaseFinetuning):
    def __init__(self, unfreeze_at=3):
        super().__init__()
        self.unfreeze_at = unfreeze_at

    def freeze_before_training(self, pl_module):
        self.freeze([pl_module.backbone], train_bn=False)

    def finetune_function(self, pl_module, epoch, optimizer):
        if epoch {comparison}:
            self.unfreeze_and_add_param_group(pl_module.backbone, optimizer)
'''


def ckpt005_lines(source: str) -> list[int]:
    return [f.line for f in lint_text(source).findings if f.code == "CKPT005"]


def lit(callbacks: str, training: str, module_hooks: str = "") -> str:
    return MODULE.format(module_hooks=module_hooks, callbacks=callbacks) + training


@pytest.mark.parametrize(
    "training",
    [
        "def train(loader):\n    trainer = L.Trainer(callbacks=Freeze())\n    trainer.fit(Lit(), loader)\n",
        "def train(loader):\n    callbacks = []\n    callbacks.append(Freeze())\n    L.Trainer(callbacks=callbacks).fit(model=Lit())\n",
        "def train(loader):\n    freeze = Freeze()\n    model = Lit()\n    trainer = L.Trainer(callbacks=[freeze])\n    trainer.fit(model, loader)\n",
        "def make():\n    found = [Freeze()]\n    return found\n\n\ndef train(loader):\n    model = Lit()\n    L.Trainer(callbacks=make()).fit(model)\n",
    ],
    ids=["single callback", "appended, fit(model=)", "callback bound to a name", "helper returning a list variable"],
)
def test_every_spelling_of_the_linkage_is_followed(training):
    assert len(ckpt005_lines(lit(FREEZE_ON_FIT_START, training))) == 1


@pytest.mark.parametrize(
    "training",
    [
        "def train(loader, callbacks):\n    L.Trainer(callbacks=callbacks).fit(Lit())\n",
        "def train(loader):\n    callbacks = [Freeze()]\n    callbacks += extra_callbacks()\n    L.Trainer(callbacks=callbacks).fit(Lit())\n",
        "def train(loader, model):\n    L.Trainer(callbacks=[Freeze()]).fit(model)\n",
        "def train(loader):\n    L.Trainer(callbacks=[Freeze()] + plugins.callbacks()).fit(Lit())\n",
    ],
    ids=["callbacks handed in", "a list extended by +=", "a model of unknown class", "a list expression"],
)
def test_linkage_not_visible_stays_unknown(training):
    assert ckpt005_lines(lit(FREEZE_ON_FIT_START, training)) == []


def test_the_module_unfreezing_in_a_later_hook_of_its_own_clears_the_callback_freeze():
    thaw = "\n    def on_train_start(self):\n        self.backbone.requires_grad_(True)\n"
    training = "def train(loader):\n    L.Trainer(callbacks=[Freeze()]).fit(Lit())\n"
    assert ckpt005_lines(lit(FREEZE_ON_FIT_START, training, thaw)) == []
    # Lightning runs a hook's callbacks before the module's: the module's own `on_fit_start` thaw
    # runs after the callback froze in the same hook.
    thaw_same_hook = "\n    def on_fit_start(self):\n        self.backbone.requires_grad_(True)\n"
    assert ckpt005_lines(lit(FREEZE_ON_FIT_START, training, thaw_same_hook)) == []


@pytest.mark.parametrize(
    "comparison, arguments, reported",
    [
        ("== self.unfreeze_at", "", True),  # the default: epoch 3
        ("== self.unfreeze_at", "unfreeze_at=0", False),
        (">= self.unfreeze_at", "2", True),
        (">= 0", "", False),
        ("> 0", "", True),
        ("== self.unfreeze_at", "unfreeze_at=EPOCHS", False),  # not a literal: unknown
        ("== self.missing", "", False),
    ],
)
def test_finetune_function_guards_are_read_at_epoch_zero(comparison, arguments, reported):
    source = lit(FINETUNING.format(comparison=comparison), f"def train(loader):\n    L.Trainer(callbacks=[Finetune({arguments})]).fit(Lit())\n")
    assert bool(ckpt005_lines(source)) is reported


def test_the_message_says_until_which_epoch():
    source = lit(FINETUNING.format(comparison="== self.unfreeze_at"), "def train(loader):\n    L.Trainer(callbacks=[Finetune(unfreeze_at=4)]).fit(Lit())\n")
    [finding] = [f for f in lint_text(source).findings if f.code == "CKPT005"]
    assert "by the callback `Finetune` while training starts, unfrozen only from epoch 4 on" in finding.message
