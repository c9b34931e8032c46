"""Helpers for the runtime tests: load fixture modules by path and run them with and without checkpointing.

Each runtime test runs a fixture's model once with the real `torch.utils.checkpoint` and once as a
reference in which every checkpoint call is replaced by a direct call (same weights, data and seeds),
then asserts the symptom measured in shared/truth/FINDINGS.md for a bad fixture and its absence
(gradients equal within rtol 1e-5 / atol 1e-7) for the correct look-alike.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import importlib.util
import itertools
import sys
import types
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.utils.checkpoint  # noqa: E402

# One intra-op thread: the tiny models run in microseconds instead of tens of milliseconds per op on a
# 2-core machine (OpenMP hand-off dominates), and reductions run in one fixed order, so "identical"
# really means identical.
torch.set_num_threads(1)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RTOL = 1e-5
ATOL = 1e-7

_REAL_CHECKPOINT = torch.utils.checkpoint.checkpoint
_REAL_SEQUENTIAL = torch.utils.checkpoint.checkpoint_sequential
_CONTROL_KEYWORDS = ("use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug", "early_stop")
_counter = itertools.count()


# --- loading fixtures ---------------------------------------------------------------------------


def load_fixture_package(folder: str, *modules: str) -> list[types.ModuleType]:
    """fixtures/<folder> as a fresh package (its modules import each other relatively), and its
    `modules` imported from it."""
    name = f"ckptlint_runtime_{folder.replace('/', '_')}_{next(_counter)}"
    path = FIXTURES / folder
    spec = importlib.util.spec_from_file_location(name, path / "__init__.py", submodule_search_locations=[str(path)])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return [importlib.import_module(f"{name}.{module}") for module in modules]


def load_fixture(name: str, transformers_module=None) -> types.ModuleType:
    """Import fixtures/<name>.py as a fresh module (a new module object per call).

    `transformers_module`: a module object to serve as `transformers` while the fixture is imported
    (the pure-torch shim below, or the real package).
    """
    path = FIXTURES / f"{name}.py"
    module_name = f"ckptlint_runtime_fixture_{name}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    saved = {key: sys.modules.get(key) for key in _SHIM_MODULE_NAMES}
    try:
        if transformers_module is not None and getattr(transformers_module, "IS_CKPTLINT_SHIM", False):
            sys.modules.update(transformers_module.modules)
        spec.loader.exec_module(module)
    finally:
        if transformers_module is not None and getattr(transformers_module, "IS_CKPTLINT_SHIM", False):
            for key, value in saved.items():
                if value is None:
                    sys.modules.pop(key, None)
                else:
                    sys.modules[key] = value
    return module


def recording_grad_modes(monkeypatch, module: types.ModuleType, *, everywhere: bool = False) -> types.ModuleType:
    """`module` with its `checkpoint` recording `torch.is_grad_enabled()` at each call in
    `module.recorded` before running torch's; `everywhere`: torch's own name too (for checkpoints
    called as `torch.utils.checkpoint.checkpoint`)."""
    calls = module.recorded = []
    real = torch.utils.checkpoint.checkpoint

    def recording(function, *args, **kwargs):
        calls.append(torch.is_grad_enabled())
        return real(function, *args, **kwargs)

    monkeypatch.setattr(module, "checkpoint", recording)
    if everywhere:
        monkeypatch.setattr(torch.utils.checkpoint, "checkpoint", recording)
    return module


# --- the reference run: checkpoint replaced by a direct call ------------------------------------


def direct_checkpoint(function, *args, **kwargs):
    """What the checkpointed code computes without checkpointing."""
    for key in _CONTROL_KEYWORDS:
        kwargs.pop(key, None)
    return function(*args, **kwargs)


def direct_checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    if isinstance(functions, torch.nn.Sequential):
        functions = list(functions.children())
    for function in functions:
        input = function(input)
    return input


@contextlib.contextmanager
def no_checkpointing(*modules):
    """Replace torch's checkpoint functions by direct calls in torch and in the given fixture modules."""
    replacements = {_REAL_CHECKPOINT: direct_checkpoint, _REAL_SEQUENTIAL: direct_checkpoint_sequential}
    patched = [(torch.utils.checkpoint, "checkpoint", _REAL_CHECKPOINT), (torch.utils.checkpoint, "checkpoint_sequential", _REAL_SEQUENTIAL)]
    for module in modules:
        for key, value in list(vars(module).items()):
            if callable(value) and value in replacements:
                patched.append((module, key, value))
    try:
        for owner, key, value in patched:
            setattr(owner, key, replacements[value])
        yield
    finally:
        for owner, key, value in patched:
            setattr(owner, key, value)


# --- comparing runs -------------------------------------------------------------------------------


def grads(model) -> dict:
    return {name: (None if p.grad is None else p.grad.detach().clone()) for name, p in model.named_parameters()}


def none_only_in(checkpointed: dict, reference: dict) -> list[str]:
    """Parameters whose .grad is None with checkpointing but set in the reference run."""
    return sorted(name for name, g in checkpointed.items() if g is None and reference[name] is not None)


def assert_same_grads(checkpointed: dict, reference: dict) -> None:
    assert checkpointed.keys() == reference.keys()
    for name, ref in reference.items():
        got = checkpointed[name]
        assert (got is None) == (ref is None), f"{name}: .grad is {got is None and 'None' or 'set'} with checkpointing, {ref is None and 'None' or 'set'} without"
        if ref is not None:
            torch.testing.assert_close(got, ref, rtol=RTOL, atol=ATOL, msg=lambda m, name=name: f"{name}: {m}")


def worst_relative_diff(checkpointed: dict, reference: dict) -> tuple[float, str]:
    """Largest max|a-b| / max|b| over parameters that have a gradient in both runs."""
    worst, worst_name = 0.0, ""
    for name, ref in reference.items():
        got = checkpointed[name]
        if got is None or ref is None:
            continue
        scale = ref.abs().max().item() or 1.0
        rel = (got - ref).abs().max().item() / scale
        if rel > worst:
            worst, worst_name = rel, name
    return worst, worst_name


def differing(checkpointed: dict, reference: dict) -> list[str]:
    out = []
    for name, ref in reference.items():
        got = checkpointed[name]
        if (got is None) != (ref is None) or (got is not None and not torch.allclose(got, ref, rtol=RTOL, atol=ATOL)):
            out.append(name)
    return out


def twin(build, *args, seed=0, **kwargs):
    """Build the same model twice from one seed; the second copy gets the first one's exact weights."""
    torch.manual_seed(seed)
    first = build(*args, **kwargs)
    second = copy.deepcopy(first)
    return first, second


def referenced(fixture, build, step, batch, seed=3):
    """A model in train mode and its twin, the twin already through `step(twin, *batch)` with every
    checkpoint made a direct call; the RNG is reseeded so that the model's own step draws the same."""
    model, model_ref = twin(build)
    model.train(), model_ref.train()
    with no_checkpointing(fixture):
        torch.manual_seed(seed)
        step(model_ref, *batch)
    torch.manual_seed(seed)
    return model, model_ref


@pytest.fixture
def capture_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def warning_texts(caught) -> list[str]:
    return [str(w.message) for w in caught]


NO_INPUT_GRAD_WARNING = "None of the inputs have requires_grad=True. Gradients will be None"
SECOND_BACKWARD = "Trying to backward through the graph a second time"
ELEMENT_0 = "element 0 of tensors does not require grad and does not have a grad_fn"


# --- transformers: the real package when installed, otherwise a pure-torch shim -------------------
#
# CI installs torch only. The shim reproduces, line for line, the parts of transformers 5.23 that the
# HF fixtures rely on (modeling_layers.GradientCheckpointingLayer.__init_subclass__, and
# PreTrainedModel.gradient_checkpointing_enable / _set_gradient_checkpointing /
# enable_input_require_grads). When transformers is installed, the HF tests run against both and
# must see the same outcome.

_SHIM_MODULE_NAMES = ("transformers", "transformers.modeling_layers", "transformers.modeling_utils")


def _build_transformers_shim() -> types.ModuleType:
    import logging
    from functools import partial, wraps

    from torch import nn
    from torch.utils.checkpoint import checkpoint

    logger = logging.getLogger("transformers_shim")

    class PreTrainedConfig:
        model_type = ""

        def __init__(self, **kwargs):
            for key, value in kwargs.items():
                setattr(self, key, value)

    class PreTrainedModel(nn.Module):
        main_input_name = "input_ids"
        supports_gradient_checkpointing = False
        config_class = None

        def __init__(self, config, *inputs, **kwargs):
            super().__init__()
            self.config = config

        def post_init(self):
            self.apply(self._init_weights)

        def _init_weights(self, module):
            pass

        def get_input_embeddings(self):
            raise NotImplementedError

        # modeling_utils.py:3191-3206
        def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
            warnings.warn(
                "`gradient_checkpointing_enable` is deprecated and will be removed in v6. Use "
                "`activation_checkpointing_enable` instead.",
                FutureWarning,
            )
            self.activation_checkpointing_enable(activation_checkpointing_kwargs=gradient_checkpointing_kwargs, **kwargs)

        # modeling_utils.py:3143-3189 (offload and the pre-4.35 format left out)
        def activation_checkpointing_enable(self, activation_checkpointing_kwargs=None, every_n_layers=1):
            if not self.supports_gradient_checkpointing:
                raise ValueError(f"{self.__class__.__name__} does not support activation checkpointing.")
            if activation_checkpointing_kwargs is None:
                activation_checkpointing_kwargs = {"use_reentrant": False}
            gradient_checkpointing_func = functools.partial(checkpoint, **activation_checkpointing_kwargs)
            self._set_gradient_checkpointing(enable=True, gradient_checkpointing_func=gradient_checkpointing_func, every_n_layers=every_n_layers)
            needs_embedding_grads = self.main_input_name == "input_ids"
            if needs_embedding_grads or getattr(self, "_hf_peft_config_loaded", False):
                self.enable_input_require_grads()

        # modeling_utils.py:3212-3247
        def _set_gradient_checkpointing(self, enable=True, gradient_checkpointing_func=checkpoint, every_n_layers=1):
            is_set = False
            layer_index = 0
            if hasattr(self, "gradient_checkpointing"):
                self._gradient_checkpointing_func = gradient_checkpointing_func
                self.gradient_checkpointing = enable
                is_set = True
            for module in self.modules():
                if hasattr(module, "gradient_checkpointing"):
                    setattr(module, "_gradient_checkpointing_func", gradient_checkpointing_func)
                    if enable and isinstance(module, GradientCheckpointingLayer):
                        setattr(module, "gradient_checkpointing", layer_index % every_n_layers == 0)
                        layer_index += 1
                    else:
                        setattr(module, "gradient_checkpointing", enable)
                    is_set = True
            if not is_set:
                raise ValueError(f"{self.__class__.__name__} is not compatible with gradient checkpointing.")

        def gradient_checkpointing_disable(self):
            self._set_gradient_checkpointing(enable=False)

        # modeling_utils.py:2137-2179
        def enable_input_require_grads(self):
            def make_inputs_require_grads(module, input, output):
                output.requires_grad_(True)

            hooks, seen = [], set()
            for module in self.modules():
                if not (isinstance(module, PreTrainedModel) and hasattr(module, "get_input_embeddings")):
                    continue
                try:
                    embeddings = module.get_input_embeddings()
                except NotImplementedError:
                    continue
                if embeddings is None or not hasattr(embeddings, "register_forward_hook") or id(embeddings) in seen:
                    continue
                seen.add(id(embeddings))
                hooks.append(embeddings.register_forward_hook(make_inputs_require_grads))
            self._require_grads_hooks = hooks

        def disable_input_require_grads(self):
            for hook in getattr(self, "_require_grads_hooks", []):
                hook.remove()
            self._require_grads_hooks = []

    # modeling_layers.py:54-123
    class GradientCheckpointingLayer(nn.Module):
        gradient_checkpointing = False
        _can_checkpoint_with_cache = False

        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)
            forward = cls.forward

            @wraps(forward)
            def forward_with_checkpointing(self, *args, **kwargs):
                is_outermost = type(self).forward is forward_with_checkpointing
                if self.gradient_checkpointing and self.training and is_outermost:
                    do_warn = False
                    message = f"Caching is incompatible with gradient checkpointing in {self.__class__.__name__}. Setting"
                    if "use_cache" in kwargs and kwargs["use_cache"]:
                        kwargs["use_cache"] = False
                        message += " `use_cache=False`,"
                        do_warn = True
                    if not self._can_checkpoint_with_cache:
                        if "past_key_values" in kwargs and kwargs["past_key_values"] is not None:
                            kwargs["past_key_values"] = None
                            message += " `past_key_values=None`,"
                            do_warn = True
                        if "layer_past" in kwargs and kwargs["layer_past"] is not None:
                            kwargs["layer_past"] = None
                            message += " `layer_past=None`,"
                            do_warn = True
                    if do_warn:
                        logger.warning(message.rstrip(",") + ".")
                    return self._gradient_checkpointing_func(partial(forward, self, **kwargs), *args)
                return forward(self, *args, **kwargs)

            cls.forward = forward_with_checkpointing

    package = types.ModuleType("transformers")
    modeling_utils = types.ModuleType("transformers.modeling_utils")
    modeling_layers = types.ModuleType("transformers.modeling_layers")
    package.PreTrainedConfig = package.PretrainedConfig = PreTrainedConfig
    package.PreTrainedModel = modeling_utils.PreTrainedModel = PreTrainedModel
    package.GradientCheckpointingLayer = modeling_layers.GradientCheckpointingLayer = GradientCheckpointingLayer
    package.modeling_utils = modeling_utils
    package.modeling_layers = modeling_layers
    package.__path__ = []
    package.__version__ = "5.23.0-ckptlint-shim"
    package.IS_CKPTLINT_SHIM = True
    package.modules = {"transformers": package, "transformers.modeling_utils": modeling_utils, "transformers.modeling_layers": modeling_layers}
    return package


def _real_transformers():
    try:
        import transformers
        import transformers.modeling_layers  # noqa: F401
    except ImportError:
        pytest.skip("transformers is not installed (CI installs torch only); the shim variant runs instead")
    return transformers


@pytest.fixture(params=["shim", "transformers"])
def transformers_impl(request):
    """The transformers implementation an HF fixture runs on: the pure-torch shim, and the real one if installed."""
    if request.param == "shim":
        return _build_transformers_shim()
    return _real_transformers()


@pytest.fixture
def real_transformers():
    return _real_transformers()
