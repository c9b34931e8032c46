"""CKPT008 where autograd is off: the checkpoint's own call, and the model calls that reach one."""

from __future__ import annotations

import textwrap

import pytest
from conftest import lint_text

LIGHTNING = '''
from lightning import LightningModule
from torch import nn
from torch.utils.checkpoint import checkpoint


class Lit(LightningModule):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(8, 8)

    def {step}(self, batch, batch_idx):
        return checkpoint(self.block, batch, use_reentrant=False)
'''


@pytest.mark.parametrize(
    "step, context",
    [
        ("validation_step", "torch.no_grad() inside `Trainer.fit`, torch.inference_mode() in `trainer.validate`"),
        ("test_step", "torch.inference_mode(); torch.no_grad() with `Trainer(inference_mode=False)`"),
        ("predict_step", "torch.inference_mode(); torch.no_grad() with `Trainer(inference_mode=False)`"),
    ],
)
def test_lightning_steps_name_the_context_lightning_runs_them_in(step, context):
    report = lint_text(LIGHTNING.format(step=step))
    [finding] = [f for f in report.findings if f.code == "CKPT008"]
    assert f"Lightning `{step}` (runs under {context})" in finding.message
