"""Built-in knowledge of the checkpointing APIs people call, by qualified name."""

from __future__ import annotations

import re

from dataclasses import dataclass
from typing import Optional

from ckptlint.model.sites import ApiKind

# Keyword arguments torch.utils.checkpoint consumes itself; any other keyword reaches the function.
CONTROL_KEYWORDS = frozenset({"use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug", "early_stop"})


@dataclass(frozen=True)
class CheckpointApi:
    qualname: str
    kind: ApiKind
    # Accepts `use_reentrant`; only these can miss the flag (CKPT006).
    takes_flag: bool = False
    # The mode when the call does not spell it: "torch" = torch's version-dependent default.
    default_reentrant: Optional[bool] = None
    default_source: str = "torch"
    # Where the checkpointed callable and its first input sit among the positional arguments.
    function_index: int = 0
    inputs_from: int = 1
    # False for a hand-written checkpoint whose backward re-runs the function without restoring
    # torch's RNG state (as if `preserve_rng_state=False`).
    restores_rng: bool = True

    @property
    def short_name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


def _apis(*apis: CheckpointApi) -> dict[str, CheckpointApi]:
    return {api.qualname: api for api in apis}


_DIST = "torch.distributed.algorithms._checkpoint.checkpoint_wrapper"
# checkpoint_wrapper(module, checkpoint_impl, checkpoint_fn=None, **checkpoint_fn_kwargs): the extra
# keywords go to torch's checkpoint, or unchanged to `checkpoint_fn` (then checkpoint_impl is ignored).
CHECKPOINT_WRAPPER = f"{_DIST}.checkpoint_wrapper"
APPLY_ACTIVATION_CHECKPOINTING = f"{_DIST}.apply_activation_checkpointing"
# What decides which submodules apply_activation_checkpointing wraps (auto_wrap_policy wins).
WRAP_POLICY_CLASSES = {
    "torch.distributed.fsdp.wrap.ModuleWrapPolicy": 0,  # ModuleWrapPolicy({Block})
    "torch.distributed.fsdp.wrap.transformer_auto_wrap_policy": "transformer_layer_cls",  # partial(..., transformer_layer_cls={Block})
}
_DEEPSPEED = ("deepspeed.checkpointing", "deepspeed.runtime.activation_checkpointing.checkpointing")
_TIMM = ("timm.models", "timm.models._manipulate", "timm.models.helpers")

KNOWN_APIS: dict[str, CheckpointApi] = _apis(
    CheckpointApi("torch.utils.checkpoint.checkpoint", ApiKind.CHECKPOINT, takes_flag=True),
    CheckpointApi("torch.utils.checkpoint.checkpoint_sequential", ApiKind.SEQUENTIAL, takes_flag=True, inputs_from=2),
    # checkpoint_wrapper defaults to CheckpointImpl.NO_REENTRANT (torch >= 2.0).
    CheckpointApi(CHECKPOINT_WRAPPER, ApiKind.MODULE_WRAPPER, default_reentrant=False, default_source="checkpoint_wrapper default CheckpointImpl.NO_REENTRANT"),
    CheckpointApi(APPLY_ACTIVATION_CHECKPOINTING, ApiKind.APPLY_WRAPPER, default_reentrant=False, default_source="apply_activation_checkpointing default wrapper (CheckpointImpl.NO_REENTRANT)"),
    CheckpointApi("torch.distributed._composable.checkpoint_activation.checkpoint", ApiKind.MODULE_WRAPPER, default_reentrant=False, default_source="composable checkpoint is always non-reentrant"),
    CheckpointApi("torch.distributed._composable.checkpoint", ApiKind.MODULE_WRAPPER, default_reentrant=False, default_source="composable checkpoint is always non-reentrant"),
    *(CheckpointApi(f"{m}.checkpoint", ApiKind.CHECKPOINT, default_reentrant=True, default_source="deepspeed's checkpoint is always reentrant") for m in _DEEPSPEED),
    *(CheckpointApi(f"{m}.non_reentrant_checkpoint", ApiKind.CHECKPOINT, default_reentrant=False, default_source="deepspeed non_reentrant_checkpoint") for m in _DEEPSPEED),
    # timm passes the flag itself; its default comes from timm.layers.use_reentrant_ckpt() (False unless overridden).
    *(CheckpointApi(f"{m}.checkpoint", ApiKind.CHECKPOINT, default_reentrant=False, default_source="timm default (use_reentrant_ckpt() is False unless TIMM_REENTRANT_CKPT is set)") for m in _TIMM[1:]),
    *(CheckpointApi(f"{m}.checkpoint_seq", ApiKind.SEQUENTIAL, default_reentrant=False, default_source="timm default (use_reentrant_ckpt() is False unless TIMM_REENTRANT_CKPT is set)", inputs_from=1) for m in _TIMM),
)

# transformers: the model method and the Trainer arguments that turn checkpointing on.
HF_ENABLE_METHODS = {
    "gradient_checkpointing_enable": "gradient_checkpointing_kwargs",
    "activation_checkpointing_enable": "activation_checkpointing_kwargs",
}
HF_CHECKPOINT_FUNC_ATTR = "_gradient_checkpointing_func"
HF_TRAINING_ARGUMENTS = frozenset(
    {
        "transformers.TrainingArguments",
        "transformers.training_args.TrainingArguments",
        "transformers.Seq2SeqTrainingArguments",
        "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
    }
)
HF_TRAINERS = frozenset({"transformers.Trainer", "transformers.Seq2SeqTrainer", "transformers.trainer.Trainer", "trl.SFTTrainer"})
HF_TRAINER_CALLBACKS = frozenset({"transformers.TrainerCallback", "transformers.trainer_callback.TrainerCallback"})
# The TrainerCallback events a Trainer calls with its model in train mode, checkpointing on when its
# arguments switch it on, whatever the evaluation strategy (measured with transformers 5.23; the
# others may follow an evaluation, which leaves the model in eval mode).
TRAIN_MODE_EVENTS = ("on_train_begin", "on_epoch_begin", "on_step_end", "on_substep_end", "on_pre_optimizer_step", "on_optimizer_step")
# The Trainer methods a subclass overrides that get the model being trained, in train mode (5.23's
# `training_step` calls `model.train()` first, then `compute_loss(model, inputs, ...)`).
TRAINER_STEP_METHODS = ("training_step", "compute_loss")
HF_TRAINING_FLAGS = {"gradient_checkpointing": "gradient_checkpointing_kwargs", "activation_checkpointing": "activation_checkpointing_kwargs"}
# transformers models built from a config start in train mode like any new nn.Module (measured:
# `LlamaForCausalLM(config)`, `AutoModelForCausalLM.from_config(config)`); `from_pretrained` switches
# the model it loads to eval().
HF_MODEL_CONSTRUCTOR = re.compile(r"transformers\.(?:[A-Z]\w*(?:Model|For[A-Z]\w*)|Auto\w+\.from_config)")
HF_GC_LAYER = frozenset({"transformers.modeling_layers.GradientCheckpointingLayer", "transformers.GradientCheckpointingLayer"})

CHECKPOINT_IMPL_REENTRANT = {f"{_DIST}.CheckpointImpl.REENTRANT": True, f"{_DIST}.CheckpointImpl.NO_REENTRANT": False}

# Contexts in which autograd records nothing, so a checkpoint has nothing to recompute.
NO_GRAD_CONTEXTS = frozenset(
    {"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}
)
INFERENCE_CONTEXTS = frozenset(
    {"torch.inference_mode", "torch.autograd.inference_mode", "torch.autograd.grad_mode.inference_mode"}
)
SET_GRAD_ENABLED = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled", "torch.autograd.grad_mode.set_grad_enabled"})
# torch's global switch of the non-reentrant early stop (a context manager).
SET_EARLY_STOP = "torch.utils.checkpoint.set_checkpoint_early_stop"
ENABLE_GRAD = frozenset({"torch.enable_grad", "torch.autograd.enable_grad", "torch.autograd.grad_mode.enable_grad"})
AUTOGRAD_FUNCTIONS = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
# Calls that put torch's RNG back to a saved state (or scope a change to it).
RNG_RESTORERS = frozenset(
    {"torch.set_rng_state", "torch.random.set_rng_state", "torch.random.fork_rng", "torch.cuda.set_rng_state", "torch.cuda.random.set_rng_state"}
)
LIGHTNING_MODULES = frozenset(
    {
        "pytorch_lightning.LightningModule",
        "pytorch_lightning.core.LightningModule",
        "pytorch_lightning.core.module.LightningModule",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "lightning.pytorch.core.LightningModule",
        "lightning.pytorch.core.module.LightningModule",
    }
)
# The hooks Lightning 2.6 runs with grad disabled, and how (measured: tests/runtime/test_lightning_runtime.py).
LIGHTNING_NO_GRAD_STEPS = {
    "validation_step": "torch.no_grad() inside `Trainer.fit`, torch.inference_mode() in `trainer.validate`",
    "test_step": "torch.inference_mode(); torch.no_grad() with `Trainer(inference_mode=False)`",
    "predict_step": "torch.inference_mode(); torch.no_grad() with `Trainer(inference_mode=False)`",
}
# Lightning's fit loop passes the DataLoader's batch, moved to the device, as the first argument.
LIGHTNING_TRAINING_STEP = "training_step"

# Module hooks that run as part of the module's call, so inside a checkpoint that runs the module and
# again in its recompute: registration method -> kind. Backward hooks are not here: they fire once per
# backward with checkpointing too (measured, rules/CKPT007.md).
HOOK_REGISTRATIONS = {"register_forward_hook": "forward", "register_forward_pre_hook": "forward_pre"}
# torch's global registrations: the hook runs for every module's call.
GLOBAL_HOOK_REGISTRATIONS = {
    f"torch.nn.modules{module}.register_module_forward_hook": "forward" for module in ("", ".module")
} | {f"torch.nn.modules{module}.register_module_forward_pre_hook": "forward_pre" for module in ("", ".module")}


# peft's calls that wrap the model they are handed (frozen but for the adapters); the wrapper holds it.
PEFT_WRAPPERS = frozenset({"peft.get_peft_model", "peft.mapping.get_peft_model", "peft.mapping_func.get_peft_model"})
PEFT_MODEL_CLASSES = ("peft.PeftModel", "peft.peft_model.PeftModel")  # and `.from_pretrained`, the task subclasses

# Copies of a module: a module of the same class, with the same flags and train/eval mode.
DEEP_COPIES = frozenset({"copy.deepcopy"})
