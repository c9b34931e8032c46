"""What Lightning 2.6 does with the callbacks a `Trainer` is handed before the first `training_step`.

Read in lightning 2.6's source (`trainer/trainer.py` `_run`, `trainer/call.py`, `loops/fit_loop.py`,
`callbacks/finetuning.py`) and measured with a real Trainer (tests/runtime/test_lightning_runtime.py):
for each hook, the callbacks' (in list order) run first, then the LightningModule's own:
`setup` (callbacks, then the module), the module's `configure_model` and `configure_optimizers`,
then `on_fit_start`, `on_train_start`, `on_train_epoch_start` and `on_train_batch_start`.
`BaseFinetuning.setup` calls `freeze_before_training(pl_module)`; its `on_train_epoch_start` calls
`finetune_function(pl_module, trainer.current_epoch, optimizer)` at every epoch (epoch 0 first).
`BaseFinetuning.freeze(modules, train_bn=True)` switches off `requires_grad` of every parameter of
`modules` but keeps BatchNorm layers trainable (with `train_bn=True`); `make_trainable(modules)` and
`unfreeze_and_add_param_group(modules, optimizer, ...)` switch every one back on.
"""

from __future__ import annotations

import ast
from typing import Optional

TRAINERS = frozenset({"lightning.Trainer", "lightning.pytorch.Trainer", "pytorch_lightning.Trainer"})

BASE_FINETUNING = frozenset(
    f"{package}.callbacks{module}.BaseFinetuning"
    for package in ("lightning.pytorch", "pytorch_lightning")
    for module in ("", ".finetuning")
)

# The hooks Lightning's fit runs on the module before its first `training_step`, in that order
# (lightning 2.6 `_run_stage` / `_FitLoop`): what they freeze is frozen when it trains.
MODULE_HOOKS = ("setup", "configure_model", "configure_optimizers", "on_fit_start", "on_train_start", "on_train_epoch_start", "on_train_batch_start")
# The callbacks' hooks among them: each runs for every callback just before the module's own.
CALLBACK_HOOKS = ("setup", "on_fit_start", "on_train_start", "on_train_epoch_start", "on_train_batch_start")
# Before the first training step, in order: ("callback" | "module", hook). A callback's hooks take
# `(trainer, pl_module, ...)`: the module is their second parameter after `self`.
PRE_TRAINING_HOOKS = tuple((who, hook) for hook in MODULE_HOOKS for who in ("callback", "module") if who == "module" or hook in CALLBACK_HOOKS)
CALLBACK_MODULE_POSITION = 2

# What BaseFinetuning's own hooks run, when a subclass leaves them alone: the method they call, with
# the module as its first parameter after `self`.
FINETUNING_HOOKS = {"setup": "freeze_before_training", "on_train_epoch_start": "finetune_function"}
FINETUNING_MODULE_POSITION = 1

# BaseFinetuning's static methods that change `requires_grad`: whether they freeze, and the keyword
# (and position) of their `train_bn` argument when BatchNorm layers may stay trainable.
FINETUNING_METHODS = {"freeze": (True, "train_bn", 1), "make_trainable": (False, "", 0), "unfreeze_and_add_param_group": (False, "", 0)}

_FLIPPED = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: ">", ast.LtE: ">=", ast.Gt: "<", ast.GtE: "<="}
_OPERATORS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def modules_argument(call: ast.Call) -> Optional[ast.expr]:
    """The `modules` a BaseFinetuning method is handed (first argument, or `modules=`)."""
    return call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "modules"), None)


def epoch_guard(test: ast.expr, epoch_names: frozenset[str]) -> Optional[list]:
    """`epoch == 5`, `current_epoch >= self.unfreeze_at`, `trainer.current_epoch < 3` as
    [operator with the epoch on the left, operand]: ["const", literal] or ["self", attribute];
    None for any other test. `epoch_names`: the parameters holding the epoch."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPERATORS):
        return None
    left, right, op = test.left, test.comparators[0], type(test.ops[0])
    if _is_epoch(right, epoch_names) and not _is_epoch(left, epoch_names):
        left, right, operator = right, left, _FLIPPED[op]
    else:
        operator = _OPERATORS[op]
    if not _is_epoch(left, epoch_names):
        return None
    if isinstance(right, ast.Constant) and type(right.value) is int:
        return [operator, ["const", right.value]]
    if isinstance(right, ast.Attribute) and isinstance(right.value, ast.Name) and right.value.id == "self":
        return [operator, ["self", right.attr]]
    return [operator, ["?"]]


def _is_epoch(node: ast.expr, epoch_names: frozenset[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in epoch_names or isinstance(node, ast.Attribute) and node.attr == "current_epoch"


def holds_at_first_epoch(guard: list, operand: Optional[int]) -> Optional[bool]:
    """Whether a guard holds when training starts (epoch 0); None when its operand is not known."""
    if operand is None:
        return None
    if guard[0] == "not":
        inner = holds_at_first_epoch(guard[1], operand)
        return None if inner is None else not inner
    return {"==": 0 == operand, "!=": 0 != operand, "<": 0 < operand, "<=": 0 <= operand, ">": 0 > operand, ">=": 0 >= operand}[guard[0]]


def first_epoch_holding(guard: list, operand: int) -> Optional[int]:
    """The first epoch at which a guard holds (None: never, or not of that shape)."""
    if guard[0] == "not":
        return None
    return {"==": operand, ">=": operand, ">": operand + 1}.get(guard[0])


def guard_operand(guard: list) -> list:
    """The operand description of a guard (through a negation)."""
    return guard_operand(guard[1]) if guard[0] == "not" else guard[1]
