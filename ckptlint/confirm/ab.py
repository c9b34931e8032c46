"""The A/B run behind `--confirm` and `ckptlint.confirm.compare()`, its diff and the verdicts.

Run A executes the code as written, with every checkpoint call recorded. Run B (the reference)
replaces every checkpoint call by a direct call — in `torch.utils.checkpoint`, in every loaded
module that bound the function by name, in `functools.partial`s of it (module globals and module
attributes, e.g. transformers' `_gradient_checkpointing_func`) — and switches transformers'
gradient checkpointing flags off. Both runs start from the same weights, inputs and RNG seeds;
then gradients, buffers, RNG streams, tensor attributes and containers are diffed.

This module imports torch: only the confirm child process and `compare()` load it.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import dataclasses
import functools
import inspect
import math
import os
import random
import sys
import textwrap
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Sequence

import torch
import torch.utils.checkpoint as _torch_checkpoint

from ckptlint.findings import CONFIRMED, COULD_NOT_RUN, NOT_REPRODUCED
from ckptlint.index import recompute_layout

REAL_CHECKPOINT = _torch_checkpoint.checkpoint
REAL_SEQUENTIAL = _torch_checkpoint.checkpoint_sequential
HAND_WRITTEN = "hand-written checkpoint"  # the api of a recorded torch.autograd.Function that recomputes
CONTROL_KEYWORDS = ("use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug", "early_stop")
SEED = 0

# Tolerances for "the same gradient". On CPU both runs execute the same kernels in the same order;
# the only legitimate difference is float reassociation when the recompute fuses differently.
# Measured (shared/truth/FINDINGS.md): every correct case was bit-identical or within 1e-8, while
# every bug changed some gradient by 2 % to 900 % relative. rtol 1e-5 / atol 1e-7 sits three
# orders of magnitude above the noise and three below the smallest signal. On CUDA some backward
# kernels (atomics in index_add/scatter, cuDNN algorithm choice) are not deterministic, so the
# relative tolerance is 1e-3, still 20x below the smallest measured bug.
TOLERANCES = {"cpu": (1e-5, 1e-7), "cuda": (1e-3, 1e-5)}

_SKIP_FRAME_DIRS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (torch.__file__, __file__, os.__file__)  # torch, ckptlint's runner, the standard library
)
_SKIP_FRAME_FILES = (functools.__file__, contextlib.__file__)
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()).keys())
_THIS_MODULE = sys.modules[__name__]


# --- what a run records ----------------------------------------------------------------------------


@dataclass
class CallRecord:
    """One checkpoint call in run A."""

    api: str  # "checkpoint", "checkpoint_sequential" or HAND_WRITTEN
    function: str
    path: Optional[str]
    line: Optional[int]
    use_reentrant: Optional[bool]  # as passed; None: omitted
    effective_reentrant: bool
    preserve_rng_state: bool
    grad_enabled: bool
    positional_tensors: int
    positional_requires_grad: bool
    tensor_kwargs: list[str] = field(default_factory=list)
    bound_tensors: list[str] = field(default_factory=list)  # partial / closure / module attribute
    output_type: str = ""
    warnings: list[str] = field(default_factory=list)
    error: Optional[str] = None
    module: Optional[str] = None  # the checkpointed submodule's name in the model, when it is one
    # The user code that called the code that called checkpoint, outwards: (file, line).
    through: list[tuple[str, int]] = field(default_factory=list)
    # Library code (transformers' layers, torch's checkpoint_wrapper, ...) made the call: checkpointing
    # was switched on elsewhere, e.g. by `gradient_checkpointing_enable()`.
    by_library: bool = False
    # The lines of user code the checkpointed function ran in forward: (real path, line).
    reached: set[tuple[str, int]] = field(default_factory=set)

    def where(self) -> str:
        return f"{os.path.basename(self.path)}:{self.line}" if self.path else "?"


@dataclass
class RunOutcome:
    error: Optional[str] = None  # "phase: Type: message"
    grads: dict[str, Optional[torch.Tensor]] = field(default_factory=dict)
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)
    rng: dict[str, Any] = field(default_factory=dict)
    generators: dict[str, torch.Tensor] = field(default_factory=dict)
    attributes: dict[str, bool] = field(default_factory=dict)  # requires_grad at the end of forward
    containers: dict[str, str] = field(default_factory=dict)  # lengths / structure after backward
    # What the run added to the tensors in module-level dicts of the project's modules (a log summed into).
    global_tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    backward: list[bool] = field(default_factory=list)  # per step: did we backpropagate a loss
    steps: int = 0
    initial: Optional[dict[str, torch.Tensor]] = None  # state_dict before the first step


# --- patching: record (A) or bypass (B) every checkpoint call -------------------------------------


def _library_dirs() -> tuple[str, ...]:
    """Frames in these folders are library code between the user's call and the checkpoint."""
    dirs = list(_SKIP_FRAME_DIRS)
    for name in ("transformers", "accelerate", "peft"):
        module = sys.modules.get(name)
        if getattr(module, "__file__", None):
            dirs.append(os.path.dirname(os.path.abspath(module.__file__)) + os.sep)
    return tuple(dirs)


def _user_frames(limit: int = 8) -> list[tuple[str, int]]:
    """File and line of the user code that (maybe through library code) called checkpoint, then of
    the user code that called that, outwards."""
    skip_dirs = _library_dirs()
    frame = sys._getframe(2)
    frames: list[tuple[str, int]] = []
    while frame is not None and len(frames) < limit:
        filename = os.path.abspath(frame.f_code.co_filename)
        generated = frame.f_code.co_filename.startswith("<")  # code generated by exec, e.g. dataclasses
        if not (generated or filename.startswith(skip_dirs) or filename in _SKIP_FRAME_FILES):
            frames.append((filename, frame.f_lineno))
        frame = frame.f_back
    return frames


def _describe_function(function: Any) -> str:
    if isinstance(function, functools.partial):
        return f"partial({_describe_function(function.func)})"
    if isinstance(function, torch.nn.Module):
        return type(function).__name__
    owner = getattr(function, "__self__", None)
    if isinstance(owner, torch.nn.Module):
        return f"{type(owner).__name__}.{getattr(function, '__name__', '?')}"
    return getattr(function, "__qualname__", type(function).__name__)


def _tensor_note(tensor: torch.Tensor) -> str:
    if not tensor.requires_grad:
        return "no grad"
    return "requires grad, leaf" if tensor.grad_fn is None else "requires grad, non-leaf"


def _bound_tensors(function: Any) -> list[str]:
    """Tensors that need grad and reach `function` other than as arguments."""
    found: list[str] = []
    while isinstance(function, functools.partial):
        for i, value in enumerate(function.args):
            if isinstance(value, torch.Tensor) and value.requires_grad:
                found.append(f"partial argument {i} ({_tensor_note(value)})")
        for key, value in function.keywords.items():
            if isinstance(value, torch.Tensor) and value.requires_grad:
                found.append(f"partial keyword `{key}` ({_tensor_note(value)})")
        function = function.func
    code = getattr(function, "__code__", None)
    for name, cell in zip(getattr(code, "co_freevars", ()), getattr(function, "__closure__", None) or ()):
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, torch.Tensor) and value.requires_grad:
            found.append(f"closure variable `{name}` ({_tensor_note(value)})")
    module = function if isinstance(function, torch.nn.Module) else getattr(function, "__self__", None)
    if isinstance(module, torch.nn.Module):
        for prefix, sub in module.named_modules():
            for key, value in vars(sub).items():
                if key in _MODULE_INTERNALS or not isinstance(value, torch.Tensor):
                    continue
                if value.requires_grad and value.grad_fn is not None:
                    where = f"{prefix}.{key}" if prefix else key
                    found.append(f"module attribute `{where}` ({_tensor_note(value)})")
    return found


def _packed_tensors(positional: Sequence[Any]) -> list[str]:
    """Tensors that need grad inside a list, tuple or dict argument: reentrant mode does not track them."""
    return [
        f"packed in argument {i} ({_tensor_note(tensor)})"
        for i, value in enumerate(positional)
        if not isinstance(value, torch.Tensor)
        for tensor in iter_tensors(value)
        if tensor.requires_grad
    ]


class _Recorder:
    """Run A's stand-ins: call the real function, record the call."""

    def __init__(self, outcome: RunOutcome) -> None:
        self.outcome = outcome
        self.modules: list[Optional[int]] = []  # per record: id() of the checkpointed module
        self.library: tuple[str, ...] = ()  # _library_dirs() when the outermost running checkpoint started
        self.running: list[CallRecord] = []  # the checkpoint calls whose forward is running, outermost first
        self.user_code: dict[Any, Optional[str]] = {}  # code object -> its real path, None for library code

    def __deepcopy__(self, memo: dict) -> "_Recorder":
        # A model deep-copied during the run (a frozen reference of the policy) holds its stand-ins
        # as bound methods: its calls belong to this run too.
        return self

    def name_modules(self, model: Any) -> None:
        if not isinstance(model, torch.nn.Module):
            return
        names = {id(m): name for name, m in model.named_modules()}
        for record, module_id in zip(self.outcome.calls, self.modules):
            if module_id is not None and module_id in names:
                record.module = names[module_id]

    def _record(self, api: str, function: Any, positional: Sequence[Any], kwargs: dict, use_reentrant: Optional[bool]) -> CallRecord:
        frames = _user_frames()
        caller = sys._getframe(2).f_code.co_filename  # 0: here, 1: the stand-in, 2: who called checkpoint
        path, line = frames[0] if frames else (None, None)
        tensors = [a for a in positional if isinstance(a, torch.Tensor)]
        record = CallRecord(
            api=api,
            function=_describe_function(function),
            path=path,
            line=line,
            use_reentrant=use_reentrant,
            # torch 2.x: an omitted use_reentrant warns and then means True.
            effective_reentrant=True if use_reentrant is None else bool(use_reentrant),
            preserve_rng_state=bool(kwargs.get("preserve_rng_state", True)),
            grad_enabled=torch.is_grad_enabled(),
            positional_tensors=len(tensors),
            positional_requires_grad=any(t.requires_grad for t in tensors),
            tensor_kwargs=[
                f"`{k}` ({_tensor_note(v)})"
                for k, v in kwargs.items()
                if k not in CONTROL_KEYWORDS and isinstance(v, torch.Tensor)
            ],
            bound_tensors=_bound_tensors(function) + _packed_tensors(positional),
            through=frames[1:],
            by_library=os.path.abspath(caller).startswith(_library_dirs()) and not caller.startswith("<"),
        )
        self.outcome.calls.append(record)
        self.modules.append(_module_id(function, positional))
        return record

    def _path_of(self, code: Any) -> Optional[str]:
        if code not in self.user_code:
            name = code.co_filename
            library = name.startswith("<") or os.path.abspath(name).startswith(self.library) or name in _SKIP_FRAME_FILES
            self.user_code[code] = None if library else os.path.realpath(name)
        return self.user_code[code]

    def _enter_code(self, frame: Any, event: str, arg: Any) -> Any:
        """The tracer of a running checkpoint: follows the lines of user code only."""
        return self._note_line if self._path_of(frame.f_code) is not None else None

    def _note_line(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            where = (self.user_code[frame.f_code], frame.f_lineno)
            for record in self.running:
                record.reached.add(where)
        return self._note_line

    @contextlib.contextmanager
    def _reaching(self, record: CallRecord) -> Iterator[None]:
        """Note the user lines the checkpointed function runs: a finding inside it belongs to this call.
        Another tracer (a debugger, coverage) keeps its place; then the lines stay unknown."""
        outer = sys.gettrace()
        if outer is not None and outer != self._enter_code:
            yield
            return
        if outer is None and self.library != _library_dirs():  # transformers imported since
            self.library, self.user_code = _library_dirs(), {}
        self.running.append(record)
        sys.settrace(self._enter_code)
        try:
            yield
        finally:
            self.running.pop()
            sys.settrace(outer)

    def _call(self, record: CallRecord, real: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings(record=True) as caught, self._reaching(record):
            warnings.simplefilter("always")
            try:
                result = real(*args, **kwargs)
            except BaseException as error:
                record.error = f"{type(error).__name__}: {error}"
                raise
            finally:
                for w in caught:
                    text = str(w.message)
                    if text not in record.warnings:
                        record.warnings.append(text)
                    self.outcome.warnings.append(text)
        record.output_type = type(result).__name__
        return result

    def checkpoint(self, function: Any, *args: Any, use_reentrant: Optional[bool] = None, **kwargs: Any) -> Any:
        record = self._record("checkpoint", function, args, kwargs, use_reentrant)
        return self._call(record, REAL_CHECKPOINT, function, *args, use_reentrant=use_reentrant, **kwargs)

    def checkpoint_sequential(self, functions: Any, segments: Any, input: Any, use_reentrant: Optional[bool] = None, **kwargs: Any) -> Any:
        record = self._record("checkpoint_sequential", functions, [input], kwargs, use_reentrant)
        return self._call(record, REAL_SEQUENTIAL, functions, segments, input, use_reentrant=use_reentrant, **kwargs)

    def hand_written(self, function_class: type) -> Callable[..., Any]:
        """The `apply` of a hand-written checkpoint, recorded. Its backward re-runs the function under
        enable_grad like reentrant mode, which is what the record says."""
        original = function_class.apply

        def apply(*args: Any) -> Any:
            record = self._record(HAND_WRITTEN, function_class, [a for a in args if isinstance(a, torch.Tensor)], {}, True)
            return self._call(record, original, *args)

        return apply


def _module_id(function: Any, positional: Sequence[Any]) -> Optional[int]:
    """id() of the module a checkpoint call runs: the function itself, the module it is a bound
    method of, or the module handed first to a plain function (`checkpoint(forward, self, *args)`
    in a decorator of `forward`)."""
    while isinstance(function, functools.partial):
        function = function.func
    if isinstance(function, torch.nn.Module):
        return id(function)
    owner = getattr(function, "__self__", None)
    if owner is None and inspect.isfunction(function) and positional and isinstance(positional[0], torch.nn.Module):
        owner = positional[0]
    return id(owner) if isinstance(owner, torch.nn.Module) else None


def direct_checkpoint(function: Any, *args: Any, **kwargs: Any) -> Any:
    """`checkpoint(fn, *a, **kw)` without checkpointing: `fn(*a, **kw)`."""
    for key in CONTROL_KEYWORDS:
        kwargs.pop(key, None)
    return function(*args, **kwargs)


def direct_checkpoint_sequential(functions: Any, segments: Any, input: Any, use_reentrant: Optional[bool] = None, **kwargs: Any) -> Any:
    if isinstance(functions, torch.nn.Sequential):
        functions = list(functions.children())
    for function in functions:
        input = function(input)
    return input


def _rebound(value: Any, replacements: dict[int, Callable[..., Any]]) -> Any:
    """The replacement for `value` if it is (a partial of) a real checkpoint function, else None."""
    if id(value) in replacements:
        return replacements[id(value)]
    if isinstance(value, functools.partial) and id(value.func) in replacements:
        return functools.partial(replacements[id(value.func)], *value.args, **value.keywords)
    return None


# --- hand-written checkpoints: autograd.Functions that re-run a callable in backward ---------------


class _PlainContext:
    """The `ctx` a hand-written checkpoint's forward gets when run B calls it as a plain function."""

    needs_input_grad = ()

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *outputs: Any) -> None:
        pass

    def mark_dirty(self, *tensors: Any) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        pass


def _qualifier(namespace: dict) -> Callable[[ast.expr], Optional[str]]:
    """Names what an expression in a loaded module refers to, as the static analysis qualifies it
    (`th.no_grad` -> `torch.autograd.grad_mode.no_grad`)."""

    def qualify(node: ast.expr) -> Optional[str]:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        value = namespace.get(node.id, getattr(builtins, node.id, None))
        for part in reversed(parts):
            value = getattr(value, part, None)
        module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
        return f"{module}.{name}" if value is not None and module and name else None

    return qualify


def _checkpoints_by_hand(function_class: type, namespace: dict) -> bool:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function_class)))
    except (OSError, TypeError, SyntaxError):
        return False
    node = tree.body[0] if tree.body else None
    return isinstance(node, ast.ClassDef) and recompute_layout(node, _qualifier(namespace)) is not None


def _hand_written_checkpoints() -> list[type]:
    """Loaded project classes that the static analysis takes for hand-written checkpoints."""
    skip = _library_dirs()
    found = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or os.path.abspath(path).startswith(skip) or module is _THIS_MODULE:
            continue
        namespace = vars(module)
        for value in list(namespace.values()):
            if (
                isinstance(value, type) and issubclass(value, torch.autograd.Function) and value.__module__ == module.__name__
                and _checkpoints_by_hand(value, namespace)
            ):  # fmt: skip
                found.append(value)
    return found


@contextlib.contextmanager
def _grad_recorded() -> Iterator[None]:
    """`with torch.no_grad():` records anyway: run B's plain call of what a checkpoint stands for."""
    no_grad = torch.autograd.grad_mode.no_grad
    enter, exit_ = no_grad.__enter__, no_grad.__exit__
    no_grad.__enter__ = lambda self: None  # type: ignore[method-assign]
    no_grad.__exit__ = lambda self, *exc: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        no_grad.__enter__, no_grad.__exit__ = enter, exit_  # type: ignore[method-assign]


def _direct_apply(function_class: type) -> Callable[..., Any]:
    """`Function.apply(...)` without the checkpoint: its forward, recording the graph."""

    def apply(*args: Any) -> Any:
        with _grad_recorded():
            return function_class.forward(_PlainContext(), *args)

    return apply


_INHERITED = object()  # `apply` came from torch.autograd.Function: restored by deleting ours


class _Patches:
    """Swap every binding of the real checkpoint functions; undo on exit."""

    def __init__(self, replacements: dict[int, Callable[..., Any]]) -> None:
        self.replacements = replacements
        self.undo: list[tuple[Any, str, Any]] = []

    def patch_namespace(self, owner: Any, namespace: dict) -> None:
        ids, partial = self.replacements, functools.partial
        # A fast scan first: most namespaces hold no binding at all (torch alone has ~200k names).
        hits = [
            (key, value)
            for key, value in namespace.items()
            if id(value) in ids or (type(value) is partial and id(value.func) in ids)
        ]
        for key, value in hits:
            new = _rebound(value, self.replacements)
            if new is None:
                continue
            try:
                setattr(owner, key, new)
            except (AttributeError, TypeError):  # read-only namespaces: nothing to patch there
                continue
            self.undo.append((owner, key, value))

    def patch_modules(self) -> None:
        for module in list(sys.modules.values()):
            if module is _THIS_MODULE:
                continue  # keeps REAL_CHECKPOINT, which the recorder calls
            try:
                namespace = vars(module)
            except TypeError:
                continue
            self.patch_namespace(module, namespace)

    def patch_model(self, model: Any) -> None:
        if isinstance(model, torch.nn.Module):
            for sub in model.modules():
                self.patch_namespace(sub, vars(sub))

    def patch_hand_written(self, replace: Callable[[type], Callable[..., Any]]) -> None:
        """The `apply` of every hand-written checkpoint becomes `replace(its class)`: a plain call in
        run B, a recorded call in run A."""
        for function_class in _hand_written_checkpoints():
            if any(owner is function_class for owner, _, _ in self.undo):
                continue  # patched for an earlier root module
            self.undo.append((function_class, "apply", function_class.__dict__.get("apply", _INHERITED)))
            function_class.apply = staticmethod(replace(function_class))

    def restore(self) -> None:
        for owner, key, value in reversed(self.undo):
            try:
                if value is _INHERITED:
                    delattr(owner, key)
                else:
                    setattr(owner, key, value)
            except Exception:
                pass
        self.undo.clear()


def _disable_hf_checkpointing(model: Any) -> None:
    """transformers checks `self.gradient_checkpointing` (and forces use_cache=False); turn it off."""
    if not isinstance(model, torch.nn.Module):
        return
    for sub in model.modules():
        if getattr(sub, "gradient_checkpointing", None) is True and hasattr(sub, "_gradient_checkpointing_func"):
            sub.gradient_checkpointing = False


@contextlib.contextmanager
def _hf_enable_disabled() -> Iterator[None]:
    """In run B, `gradient_checkpointing_enable()` still runs (its hooks, its warnings) but leaves
    checkpointing off."""
    modeling_utils = sys.modules.get("transformers.modeling_utils")
    base = getattr(modeling_utils, "PreTrainedModel", None)
    originals = []
    for name in ("gradient_checkpointing_enable", "activation_checkpointing_enable"):
        original = getattr(base, name, None) if base is not None else None
        if original is None:
            continue

        def enable_then_disable(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            result = _original(self, *args, **kwargs)
            _disable_hf_checkpointing(self)
            return result

        originals.append((name, original))
        setattr(base, name, enable_then_disable)
    try:
        yield
    finally:
        for name, original in originals:
            setattr(base, name, original)


@contextlib.contextmanager
def direct_calls(model: Any = None) -> Iterator[None]:
    """Run B's patches alone (checkpoint calls made direct, transformers' checkpointing off)."""
    patches = _Patches({id(REAL_CHECKPOINT): direct_checkpoint, id(REAL_SEQUENTIAL): direct_checkpoint_sequential})
    try:
        with _hf_enable_disabled():
            patches.patch_modules()
            patches.patch_model(model)
            _disable_hf_checkpointing(model)
            patches.patch_hand_written(_direct_apply)
            yield
    finally:
        patches.restore()


class _BackwardCounter:
    """Counts autograd passes started by the code under test (a training function's own backward)."""

    def __init__(self) -> None:
        self.count = 0
        self._backward = torch.autograd.backward
        self._grad = torch.autograd.grad

    def __enter__(self) -> "_BackwardCounter":
        original_backward, original_grad = self._backward, self._grad

        def backward(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original_backward(*args, **kwargs)

        def grad(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original_grad(*args, **kwargs)

        torch.autograd.backward, torch.autograd.grad = backward, grad
        return self

    def __exit__(self, *exc: Any) -> None:
        torch.autograd.backward, torch.autograd.grad = self._backward, self._grad


# --- one run --------------------------------------------------------------------------------------


# make() -> (model or None, step) where step() runs one forward (or one training step) and returns its output.
Make = Callable[[], tuple[Any, Callable[[], Any]]]


class DeferredModel:
    """What make() returns for the model when the code under test builds it itself (a script):
    `on_root` is called with each root module as it is first called, `resolve()` gives the model
    after the steps, `snapshot()` its tensor attributes at the end of its last forward and
    `output()` what that forward returned (the steps themselves return nothing)."""

    on_root: Optional[Callable[[Any], None]] = None

    def resolve(self) -> Any:
        raise NotImplementedError

    def snapshot(self) -> dict[str, bool]:
        raise NotImplementedError

    def output(self) -> Any:
        raise NotImplementedError


def seed_everything(seed: int = SEED) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed)


def _error_text(phase: str, error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    message = lines[0].strip() if lines else ""
    cut = message.find(". ", 60)
    if len(message) > 160 and cut != -1:  # torch's long errors: the first sentence says it
        message = message[: cut + 1] + " ..."
    elif len(message) > 240:
        message = message[:240] + "..."
    elif len(lines) > 1:
        message += " ..."
    return f"{phase}: {type(error).__name__}: {message}" if message else f"{phase}: {type(error).__name__}"


def iter_tensors(value: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    if depth > 4:
        return
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from iter_tensors(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from iter_tensors(item, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from iter_tensors(getattr(value, f.name, None), depth + 1)


def _loss_tensors(output: Any) -> list[torch.Tensor]:
    """The tensors a loss is built from: the output's own `loss` if it has one, else every float tensor."""
    loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.is_floating_point():
        return [loss]
    return [t for t in iter_tensors(output) if t.is_floating_point()]


def _needs_backward(output: Any) -> bool:
    return any(t.requires_grad for t in _loss_tensors(output))


def loss_of(output: Any) -> torch.Tensor:
    """A scalar that depends on every float output: each tensor projected on fixed random weights
    (a plain sum would have zero gradient through a softmax output)."""
    total: Optional[torch.Tensor] = None
    for i, tensor in enumerate(_loss_tensors(output)):
        generator = torch.Generator().manual_seed(1000 + i)
        weights = torch.randn(tensor.shape, generator=generator).to(tensor.device)
        term = (tensor.float() * weights).mean()
        total = term if total is None else total + term
    return total if total is not None else torch.zeros(())


_IDS_SHOWN = 64


def _structure(value: Any, path: str, out: dict[str, str], depth: int = 0) -> None:
    """Container shapes of a step's return value (None, lengths) and the integer tensors in it (token
    ids: a rollout decoded without its cache picks other tokens), not floating-point values."""
    if depth > 3 or len(out) > 64:
        return
    if value is None:
        out[path] = "None"
    elif isinstance(value, (list, tuple, dict)):
        out[path] = f"{type(value).__name__} of {len(value)}"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in list(items)[:16]:
            _structure(item, f"{path}[{key!r}]" if isinstance(value, dict) else f"{path}[{key}]", out, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out[path] = type(value).__name__
        for f in dataclasses.fields(value):
            _structure(getattr(value, f.name, None), f"{path}.{f.name}", out, depth + 1)
    elif type(value).__name__.endswith("Cache") and hasattr(value, "__len__"):
        out[path] = f"{type(value).__name__} of {len(value)}"
    elif isinstance(value, torch.Tensor) and not (value.is_floating_point() or value.is_complex() or value.dtype is torch.bool):
        ids = value.detach().flatten().tolist()
        shown = ids if len(ids) <= _IDS_SHOWN else [*ids[:_IDS_SHOWN], f"... {len(ids) - _IDS_SHOWN} more, sum {sum(ids)}"]
        out[path] = f"{str(value.dtype).replace('torch.', '')}{list(value.shape)} {shown}"


def _module_containers(model: Any, out: dict[str, str]) -> None:
    if not isinstance(model, torch.nn.Module):
        return
    for prefix, sub in model.named_modules():
        for key, value in vars(sub).items():
            if key in _MODULE_INTERNALS or key.startswith("__"):
                continue
            if isinstance(value, (list, dict, set)) or (type(value).__name__ == "deque"):
                name = f"{prefix}.{key}" if prefix else key
                out[name] = f"{type(value).__name__} of {len(value)}"


def _module_globals(model: Any) -> dict[str, tuple[str, int, dict[Any, torch.Tensor]]]:
    """The lists, dicts and sets kept at module level by the project modules that define the model's
    classes (libraries left out): name -> (type, length, tensors a dict holds by key, copied)."""
    found: dict[str, tuple[str, int, dict[Any, torch.Tensor]]] = {}
    if not isinstance(model, torch.nn.Module):
        return found
    libraries = _library_dirs()
    for name in sorted({type(m).__module__ for m in model.modules()}):
        module = sys.modules.get(name)
        where = os.path.abspath(getattr(module, "__file__", None) or os.sep)
        if module is None or where.startswith(libraries) or f"{os.sep}site-packages{os.sep}" in where:
            continue
        for key, value in vars(module).items():
            if key.startswith("__") or not isinstance(value, (list, dict, set)):
                continue
            tensors = {k: v.detach().clone() for k, v in list(value.items())[:8] if isinstance(v, torch.Tensor)} if isinstance(value, dict) else {}
            found[f"global {name}.{key}"] = (type(value).__name__, len(value), tensors)
    return found


def _global_changes(before: dict[str, tuple[str, int, dict[Any, torch.Tensor]]], after: dict[str, tuple[str, int, dict[Any, torch.Tensor]]], outcome: RunOutcome) -> None:
    """What one run did to module-level containers: how much each grew, and what it added to the
    tensors a dict holds (runs A and B share the module, so only their own changes compare)."""
    for name, (kind, length, tensors) in after.items():
        _, length_before, tensors_before = before.get(name, (kind, 0, {}))
        outcome.containers[name] = f"{kind} grown by {length - length_before}"
        for key, tensor in tensors.items():
            previous = tensors_before.get(key)
            added = tensor - previous if previous is not None and previous.shape == tensor.shape else tensor
            outcome.global_tensors[f"{name}[{key!r}]"] = added


def attribute_grads(model: Any) -> dict[str, bool]:
    """requires_grad of the tensors that modules hold as plain attributes (or in lists/dicts)."""
    found: dict[str, bool] = {}
    if not isinstance(model, torch.nn.Module):
        return found
    for prefix, sub in model.named_modules():
        for key, value in vars(sub).items():
            if key in _MODULE_INTERNALS:
                continue
            name = f"{prefix}.{key}" if prefix else key
            if isinstance(value, torch.Tensor):
                found[name] = value.requires_grad
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value[:8]):
                    if isinstance(item, torch.Tensor):
                        found[f"{name}[{i}]"] = item.requires_grad
            elif isinstance(value, dict):
                for k, item in list(value.items())[:8]:
                    if isinstance(item, torch.Tensor):
                        found[f"{name}[{k!r}]"] = item.requires_grad
    return found


def _generators(model: Any) -> dict[str, torch.Tensor]:
    found: dict[str, torch.Tensor] = {}
    if isinstance(model, torch.nn.Module):
        for prefix, sub in model.named_modules():
            for key, value in vars(sub).items():
                if isinstance(value, torch.Generator):
                    found[f"{prefix}.{key}" if prefix else key] = value.get_state().clone()
    return found


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state().clone(), "Python random": random.getstate()}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        kind, keys, pos, has_gauss, cached = numpy.random.get_state()
        state["numpy"] = (kind, bytes(keys.tobytes()), pos, has_gauss, cached)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["torch.cuda"] = [s.clone() for s in torch.cuda.get_rng_state_all()]
    return state


def _same_rng(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same_rng(x, y) for x, y in zip(a, b))
    return a == b


def run(make: Make, *, reference: bool, steps: int, plan: Optional[list[bool]] = None,
        initial_state: Optional[dict[str, torch.Tensor]] = None) -> tuple[RunOutcome, Any]:
    """One run. `plan`: run B's per-step backward decisions, which run A follows.
    Returns the outcome and the model (for the caller to snapshot or discard)."""
    outcome = RunOutcome()
    recorder = _Recorder(outcome)
    if reference:
        replacements = {id(REAL_CHECKPOINT): direct_checkpoint, id(REAL_SEQUENTIAL): direct_checkpoint_sequential}
    else:
        replacements = {id(REAL_CHECKPOINT): recorder.checkpoint, id(REAL_SEQUENTIAL): recorder.checkpoint_sequential}
    patches = _Patches(replacements)
    hand_written = _direct_apply if reference else recorder.hand_written
    model = None
    snapshot: dict[str, bool] = {}
    hf = _hf_enable_disabled() if reference else contextlib.nullcontext()
    with warnings.catch_warnings(record=True) as caught, hf:
        warnings.simplefilter("always")
        patches.patch_modules()
        try:
            seed_everything()
            try:
                model, step = make()
            except BaseException as error:
                if isinstance(error, KeyboardInterrupt):
                    raise
                outcome.error = _error_text("building the model", error)
                return outcome, None
            deferred = model if isinstance(model, DeferredModel) else None
            if deferred is not None:
                def adopt(root: Any) -> None:
                    patches.patch_model(root)
                    patches.patch_hand_written(hand_written)
                    if reference:
                        _disable_hf_checkpointing(root)

                deferred.on_root = adopt
                model = None
            patches.patch_model(model)
            patches.patch_hand_written(hand_written)
            if reference:
                _disable_hf_checkpointing(model)
            if initial_state is not None and isinstance(model, torch.nn.Module):
                _align(model, initial_state)
            outcome.initial = _state_of(model)
            hook = None
            if isinstance(model, torch.nn.Module):
                def take_snapshot(module: Any, inputs: Any, output: Any) -> None:
                    snapshot.clear()
                    snapshot.update(attribute_grads(module))

                hook = model.register_forward_hook(take_snapshot)
            seed_everything()
            output = None
            before = _module_globals(model)
            try:
                for index in range(steps):
                    phase = f"step {index + 1}" if steps > 1 else "forward"
                    try:
                        with _BackwardCounter() as counter:
                            output = step()
                    except BaseException as error:
                        if isinstance(error, KeyboardInterrupt):
                            raise
                        outcome.error = _error_text(phase, error)
                        break
                    if plan is not None:
                        do_backward = plan[index] if index < len(plan) else False
                    else:
                        do_backward = counter.count == 0 and _needs_backward(output)
                    outcome.backward.append(do_backward)
                    if do_backward:
                        try:
                            loss_of(output).backward()
                        except BaseException as error:
                            if isinstance(error, KeyboardInterrupt):
                                raise
                            outcome.error = _error_text(f"{phase} backward" if steps > 1 else "backward", error)
                            break
                    outcome.steps = index + 1
            finally:
                if hook is not None:
                    hook.remove()
            _global_changes(before, _module_globals(model), outcome)
            if deferred is not None:
                model = deferred.resolve()
                snapshot = deferred.snapshot()
                output = deferred.output()
            _collect(outcome, model, output, snapshot)
            recorder.name_modules(model)
        finally:
            patches.restore()
    for w in caught:
        outcome.warnings.append(str(w.message))
    return outcome, model


def _align(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Start from exactly the reference weights (constructors that are not deterministic)."""
    current = model.state_dict()
    if current.keys() == state.keys() and all(torch.equal(current[k], state[k]) for k in state):
        return
    model.load_state_dict(state)


def _state_of(model: Any) -> Optional[dict[str, torch.Tensor]]:
    if not isinstance(model, torch.nn.Module):
        return None
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _collect(outcome: RunOutcome, model: Any, output: Any, snapshot: dict[str, bool]) -> None:
    if isinstance(model, torch.nn.Module):
        outcome.grads = {
            name: None if p.grad is None else p.grad.detach().clone()
            for name, p in model.named_parameters()
            if p.requires_grad
        }
        outcome.buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
        outcome.generators = _generators(model)
        _module_containers(model, outcome.containers)
    outcome.attributes = dict(snapshot)
    _structure(output, "return value", outcome.containers)
    outcome.rng = _rng_state()


# --- the comparison --------------------------------------------------------------------------------


@dataclass
class ComparisonReport:
    """Run A (checkpointing as written) against run B (every checkpoint call made direct)."""

    steps: int
    device: str
    rtol: float
    atol: float
    error_with: Optional[str] = None  # the exception of run A (checkpointing as written)
    error_without: Optional[str] = None  # the exception of run B (direct calls)
    grad_none_with: list[tuple[str, float]] = field(default_factory=list)  # (param, |grad| in B)
    grad_unexpected_with: list[str] = field(default_factory=list)
    grad_differences: list[tuple[str, float, float]] = field(default_factory=list)  # (param, rel, max |Δ|)
    params_compared: int = 0
    buffer_differences: list[tuple[str, float]] = field(default_factory=list)
    buffers_compared: int = 0
    global_differences: list[tuple[str, float]] = field(default_factory=list)  # tensors in module-level dicts
    rng_drift: list[str] = field(default_factory=list)
    rng_compared: list[str] = field(default_factory=list)
    attribute_differences: list[tuple[str, bool, Optional[bool]]] = field(default_factory=list)
    attributes_compared: int = 0
    container_differences: list[tuple[str, str, str]] = field(default_factory=list)
    containers_compared: int = 0
    calls: list[CallRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        """True when the checkpointed run trains exactly like its direct twin."""
        return not (
            self.error_with or self.error_without or self.grad_none_with or self.grad_unexpected_with
            or self.grad_differences or self.buffer_differences or self.global_differences or self.rng_drift
            or self.attribute_differences or self.container_differences
        )

    # Evidence strings, grouped by kind, for verdicts and messages.

    def exception_evidence(self) -> list[str]:
        if self.error_with and not self.error_without:
            return [f"{self.error_with} with checkpointing; no exception without"]
        return []

    # `within(name)` keeps the differences of the parameters, buffers, attributes and containers a
    # verdict can lay at the door of the checkpoints it judges (their modules); default: all.

    def none_grad_evidence(self, prefer: Sequence[str] = (), within: Callable[[str], bool] = lambda name: True) -> list[str]:
        """Parameters without gradient only with checkpointing; those under `prefer` (module names) first."""
        def preferred(item: tuple[str, float]) -> bool:
            return any(p == "" or item[0].startswith(p + ".") for p in prefer)

        ordered = sorted((item for item in self.grad_none_with if within(item[0])), key=lambda item: not preferred(item))
        lines = [f"{name}: grad None with checkpointing; |grad| {norm:.3g} without" for name, norm in ordered[:4]]
        if len(ordered) > 4:
            lines.append(f"{len(ordered) - 4} more parameters: grad None with checkpointing only")
        lines += [f"{name}: grad set with checkpointing; None without" for name in self.grad_unexpected_with if within(name)][:4]
        return lines

    def grad_difference_evidence(self, within: Callable[[str], bool] = lambda name: True) -> list[str]:
        worst = sorted((d for d in self.grad_differences if within(d[0])), key=lambda d: -d[1])
        if not worst:
            return []
        lines = [f"{name}: gradient differs, relative {rel:.3g} (max |Δ| {diff:.3g})" for name, rel, diff in worst[:3]]
        lines.append(f"{len(worst)} of {self.params_compared} parameter gradients differ beyond rtol {self.rtol:g}, atol {self.atol:g}")
        return lines

    def buffer_evidence(self, within: Callable[[str], bool] = lambda name: True) -> list[str]:
        lines = [f"buffer {name}: differs after the step (max |Δ| {diff:.3g})" for name, diff in self.buffer_differences if within(name)][:4]
        return lines + [f"{name}: the run added a different amount (max |Δ| {diff:.3g})" for name, diff in self.global_differences if within(name)][:4]

    def rng_evidence(self) -> list[str]:
        return [f"{name} stream differs after the step: the recompute drew again" for name in self.rng_drift]

    def attribute_evidence(self, within: Callable[[str], bool] = lambda name: True) -> list[str]:
        lines = []
        for name, with_, without in [d for d in self.attribute_differences if within(d[0])][:4]:
            if without is None:
                lines.append(f"{name}: tensor attribute only with checkpointing")
            else:
                lines.append(f"{name}: requires_grad {with_} with checkpointing at the end of forward; {without} without")
        return lines

    def container_evidence(self, within: Callable[[str], bool] = lambda name: True) -> list[str]:
        return [f"{name}: {a} with checkpointing after backward; {b} without" for name, a, b in self.container_differences if within(name)][:4]

    def evidence(self) -> list[str]:
        """Every difference, most telling first."""
        if self.error_without:
            return [f"{self.error_without} without checkpointing too"]
        lines = self.exception_evidence()
        if self.error_with:
            return lines
        return (
            lines + self.none_grad_evidence() + self.grad_difference_evidence() + self.buffer_evidence()
            + self.rng_evidence() + self.attribute_evidence() + self.container_evidence()
        )

    def compared(self) -> str:
        """What was compared, for a "not reproduced" verdict."""
        parts = [
            f"{self.params_compared} parameter gradients (rtol {self.rtol:g}, atol {self.atol:g})",
            f"{self.buffers_compared} buffers",
            f"RNG streams ({', '.join(self.rng_compared)})",
            f"{self.attributes_compared} tensor attributes",
            f"{self.containers_compared} containers",
        ]
        return f"same exceptions (none), {', '.join(parts)} after {self.steps} step(s) on {self.device}: all equal"

    def assert_identical(self) -> None:
        if not self.identical:
            raise AssertionError("checkpointed run differs from its direct twin:\n  " + "\n  ".join(self.evidence()))

    def __str__(self) -> str:
        if self.identical:
            return f"identical: {self.compared()}"
        return "differs:\n  " + "\n  ".join(self.evidence())

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for call in data["calls"]:
            del call["reached"]  # every line a checkpointed function ran: for verdicts, not for reading
        data["identical"] = self.identical
        return data


def _relative(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    diff = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
    scale = b.double().abs().max().item() if b.numel() else 0.0
    return (diff / scale if scale else math.inf if diff else 0.0), diff


def diff(a: RunOutcome, b: RunOutcome, *, steps: int, device: str, rtol: float, atol: float) -> ComparisonReport:
    report = ComparisonReport(steps=steps, device=device, rtol=rtol, atol=atol, calls=a.calls, warnings=list(dict.fromkeys(a.warnings)))
    report.error_with, report.error_without = a.error, b.error
    for name, ref in b.grads.items():
        got = a.grads.get(name)
        if ref is not None and got is None:
            report.grad_none_with.append((name, ref.double().norm().item()))
        elif ref is None and got is not None:
            report.grad_unexpected_with.append(name)
        elif ref is not None and got is not None:
            report.params_compared += 1
            if got.shape != ref.shape or not torch.allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True):
                report.grad_differences.append((name, *_relative(got, ref)))
    for name, ref in b.buffers.items():
        got = a.buffers.get(name)
        if got is None:
            continue
        report.buffers_compared += 1
        exact = not (ref.is_floating_point() or ref.is_complex())
        same = got.shape == ref.shape and (torch.equal(got, ref) if exact else torch.allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True))
        if not same:
            report.buffer_differences.append((name, _relative(got, ref)[1] if got.shape == ref.shape else math.inf))
    for name, ref in b.global_tensors.items():
        got = a.global_tensors.get(name)
        if got is None:
            continue
        if got.shape != ref.shape or not torch.allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True):
            report.global_differences.append((name, _relative(got, ref)[1] if got.shape == ref.shape else math.inf))
    report.rng_compared = list(b.rng)
    report.rng_drift = [name for name in b.rng if name in a.rng and not _same_rng(a.rng[name], b.rng[name])]
    for name, state in b.generators.items():
        report.rng_compared.append(f"generator {name}")
        if name in a.generators and not torch.equal(a.generators[name], state):
            report.rng_drift.append(f"generator {name}")
    report.attributes_compared = len(b.attributes)
    for name, with_ in a.attributes.items():
        without = b.attributes.get(name)
        if without is not None and with_ != without:
            report.attribute_differences.append((name, with_, without))
    report.containers_compared = len(b.containers)
    for name, without in b.containers.items():
        with_ = a.containers.get(name, "missing")
        inside_reported = any(name.startswith((d[0] + "[", d[0] + ".")) for d in report.container_differences)
        if with_ != without and not inside_reported:
            report.container_differences.append((name, with_, without))
    return report


# --- the public helper -----------------------------------------------------------------------------


def compare(model: Any, *args: Any, **kwargs: Any) -> ComparisonReport:
    """Run `model(*args, **kwargs)` forward and backward with checkpointing as written and with
    every checkpoint call made direct, from the same weights, inputs and seeds; diff the two."""
    return compare_call(model, args, kwargs)


def compare_call(
    model: Any,
    args: Sequence[Any] = (),
    kwargs: Optional[dict[str, Any]] = None,
    *,
    call: Optional[Callable[..., Any]] = None,
    steps: int = 1,
    rtol: Optional[float] = None,
    atol: Optional[float] = None,
) -> ComparisonReport:
    """`compare()` with options. `call(*args, **kwargs)` replaces `model(*args, **kwargs)` for a
    training function (then `model` is only the module whose state is compared; `args` usually
    contain it). `steps`: forward/backward passes (2 shows side effects that grow per step)."""
    kwargs = dict(kwargs or {})
    pristine = _safe_deepcopy((model, tuple(args), kwargs))

    def make() -> tuple[Any, Callable[[], Any]]:
        m, a, kw = _safe_deepcopy(pristine)
        if isinstance(m, torch.nn.Module) and call is None:
            m.train()
        if call is None:
            return m, lambda: m(*a, **kw)
        # The call's arguments refer to the copied model wherever they referred to the original.
        return m, lambda: call(*a, **kw)

    device = _device_of(model)
    default_rtol, default_atol = TOLERANCES["cuda" if device.startswith("cuda") else "cpu"]
    return compare_runs(make, steps=steps, device=device, rtol=default_rtol if rtol is None else rtol,
                        atol=default_atol if atol is None else atol)


def compare_runs(make: Make, *, steps: int, device: str, rtol: float, atol: float) -> ComparisonReport:
    """Run B (reference), then A from B's starting weights, following B's backward plan; diff."""
    b, _ = run(make, reference=True, steps=steps)
    a, _ = run(make, reference=False, steps=steps, plan=b.backward, initial_state=b.initial)
    return diff(a, b, steps=steps, device=device, rtol=rtol, atol=atol)


def _device_of(model: Any) -> str:
    if isinstance(model, torch.nn.Module):
        for tensor in list(model.parameters()) + list(model.buffers()):
            return tensor.device.type
    return "cpu"


def _safe_deepcopy(value: Any) -> Any:
    """deepcopy that survives non-leaf tensors left on modules by an earlier forward."""
    memo: dict[int, Any] = {}
    for tensor in _non_leaf_tensors(value):
        memo[id(tensor)] = tensor.detach().clone()
    return copy.deepcopy(value, memo)


def _non_leaf_tensors(value: Any) -> Iterator[torch.Tensor]:
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            if item.grad_fn is not None:
                yield item
        elif isinstance(item, torch.nn.Module):
            for sub in item.modules():
                stack.extend(v for k, v in vars(sub).items() if k not in _MODULE_INTERNALS)
        elif isinstance(item, (list, tuple, set)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())


# --- verdicts ----------------------------------------------------------------------------------------

_NO_INPUT_GRAD = "None of the inputs have requires_grad=True"
_OMITTED_WARNING = "use_reentrant parameter should be passed explicitly"


def calls_at(report: ComparisonReport, path: str, line: int, end_line: int) -> list[CallRecord]:
    path = os.path.realpath(path)
    return [c for c in report.calls if c.path and os.path.realpath(c.path) == path and line <= (c.line or 0) <= end_line]


def calls_through(report: ComparisonReport, path: str, line: int, end_line: int) -> list[CallRecord]:
    """The checkpoint calls made, further in, by the code at these lines (a model's forward)."""
    path = os.path.realpath(path)
    return [c for c in report.calls if any(os.path.realpath(p) == path and line <= n <= end_line for p, n in c.through)]


def calls_reaching(report: ComparisonReport, path: str, line: int, end_line: int) -> list[CallRecord]:
    """The checkpoint calls whose function ran these lines (a finding inside a checkpointed function)."""
    path = os.path.realpath(path)
    return [c for c in report.calls if any((path, n) in c.reached for n in range(line, end_line + 1))]


@functools.lru_cache(maxsize=64)
def _parsed(path: str) -> Optional[ast.Module]:
    try:
        with open(path, encoding="utf-8") as file:
            return ast.parse(file.read())
    except (OSError, SyntaxError, ValueError):
        return None


def _statement_at(tree: ast.Module, line: int) -> tuple[Optional[ast.stmt], Optional[ast.AST]]:
    """The innermost statement spanning `line`, and the function (or module) it runs in."""
    statement: Optional[ast.stmt] = None
    scope: Optional[ast.AST] = tree
    nodes: list[tuple[ast.AST, ast.AST]] = [(child, tree) for child in ast.iter_child_nodes(tree)]
    while nodes:
        node, owner = nodes.pop()
        if not isinstance(node, ast.stmt) or not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        statement, scope = node, owner
        inner = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else owner
        nodes = [(child, inner) for child in ast.iter_child_nodes(node)]
    return statement, scope


def _assigned(statement: ast.stmt) -> set[str]:
    targets: list[ast.AST] = []
    if isinstance(statement, ast.Assign):
        targets = list(statement.targets)
    elif isinstance(statement, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        targets = [statement.target]
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in statement.items if item.optional_vars is not None]
    return {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}


def calls_fed(report: ComparisonReport, path: str, line: int) -> list[CallRecord]:
    """The checkpoint calls whose statement reads a name that the statement at `line` assigns, in the
    same function: `kwargs = {...}` or `step = partial(block, ...)`, then `checkpoint(step, h, **kwargs)`;
    a name assigned at module level (`CKPT_KWARGS = dict(...)`) is read by any function of the file."""
    tree = _parsed(os.path.realpath(path))
    statement, scope = _statement_at(tree, line) if tree is not None else (None, None)
    names = _assigned(statement) if statement is not None else set()
    if not names:
        return []
    found = []
    for call in calls_at(report, path, 1, sys.maxsize):
        user, user_scope = _statement_at(tree, call.line or 0)
        if user is not None and (user_scope is scope or scope is tree) and any(
            isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names for n in ast.walk(user)
        ):
            found.append(call)
    return found


def _site(call: CallRecord) -> tuple[Any, ...]:
    return (call.api, call.path, call.line, call.function, call.module)


@dataclass
class CheckpointScope:
    """The checkpoint calls a finding's code ran, and which of the run's differences are theirs."""

    calls: list[CallRecord]
    notes: list[str]
    others: list[CallRecord]  # checkpoint calls of the run at other sites

    def owns(self, name: str) -> bool:
        """A difference named by module path (parameter, buffer, tensor attribute, container) is the
        scope's when no other checkpoint ran, or when it lies in a module these calls checkpointed."""
        if not self.others:
            return True
        return any(c.module is not None and (c.module == "" or name.startswith(c.module + ".")) for c in self.calls)

    def owns_run(self, premise: Sequence[str]) -> bool:
        """A run-wide symptom (an exception, RNG drift) is the scope's when no other checkpoint ran,
        when one of these calls raised it, or when these calls carry the premise that predicts it."""
        return not self.others or bool(premise) or any(c.error for c in self.calls)


def checkpoint_scope(report: ComparisonReport, path: str, line: int, end_line: int) -> CheckpointScope:
    """The calls at the finding's lines, those whose function ran them and those the code there made
    further in; when there are none, the calls its statement sets up in the same function; else the
    calls library code made (the line switched checkpointing on: `gradient_checkpointing_enable()`,
    `TrainingArguments(gradient_checkpointing=True)`, `checkpoint_wrapper(...)`: the checkpoints it
    causes run inside the library)."""
    calls: list[CallRecord] = []
    for call in calls_at(report, path, line, end_line) + calls_reaching(report, path, line, end_line) + calls_through(report, path, line, end_line):
        if all(call is not seen for seen in calls):
            calls.append(call)
    notes = []
    if not calls:
        calls = calls_fed(report, path, line)
        if calls:
            notes.append(f"line {line} sets up the checkpoint call at {calls[0].where()}")
    if not calls:
        calls = [c for c in report.calls if c.by_library]
        if calls:
            notes.append(f"no checkpoint call at line {line} itself, nor inside the code it calls: judged on the checkpoints library code ran")
    sites = {_site(c) for c in calls}
    return CheckpointScope(calls, notes, [c for c in report.calls if _site(c) not in sites])


def verdict(code: str, report: ComparisonReport, path: str, line: int, end_line: Optional[int] = None) -> tuple[str, list[str]]:
    """The verdict for one finding and its evidence: each rule is confirmed only by the symptom it
    predicts (shared/truth/FINDINGS.md, "What a runtime confirmation must do"), and only by one the
    checkpoints that the flagged code ran can have caused: another checkpoint of the same run does
    not confirm it."""
    if report.error_without:
        return COULD_NOT_RUN, [f"{report.error_without} even without checkpointing, so there is nothing to compare"]
    scope = checkpoint_scope(report, path, line, end_line or line)
    if not scope.calls:
        elsewhere = sorted({c.where() for c in report.calls})
        ran = f"the run's checkpoints ({', '.join(elsewhere[:4])}) belong to other code" if elsewhere else "no checkpoint call ran at all"
        outcome = report.compared() if report.identical else f"the run differs elsewhere: {report.evidence()[0]}"
        return NOT_REPRODUCED, [f"no checkpoint call ran at line {line}, nor in the code it calls, nor around it: {ran}", outcome]
    calls = _unique(scope.calls)
    exception = report.exception_evidence()
    symptoms: list[str]
    premise: list[str] = list(scope.notes)
    if code in ("CKPT001", "CKPT005"):
        cause = [
            f"checkpoint at {c.where()}: reentrant, no positional tensor input requires grad"
            for c in calls
            if c.effective_reentrant and not c.positional_requires_grad
        ][:2]
        symptoms = [e for e in exception if "does not require grad" in e] if scope.owns_run(cause) else []
        if not report.error_with:
            prefer = [c.module for c in scope.calls if c.module is not None]
            symptoms += [e for e in report.none_grad_evidence(prefer, scope.owns) if "None with checkpointing" in e]
        premise += cause
        if any(_NO_INPUT_GRAD in w for c in scope.calls for w in c.warnings):
            premise.append(f"torch warned: {_NO_INPUT_GRAD}. Gradients will be None")
    elif code == "CKPT002":
        cause = [f"checkpoint at {c.where()}: preserve_rng_state=False" for c in calls if not c.preserve_rng_state][:2]
        symptoms = exception if scope.owns_run(cause) else []
        if not report.error_with:
            symptoms = (
                report.none_grad_evidence(within=scope.owns) + report.grad_difference_evidence(scope.owns)
                + (report.rng_evidence() if scope.owns_run(cause) else [])
            )
        premise += cause
    elif code == "CKPT003":
        cause = []
        for c in calls:
            mode = "reentrant" if c.effective_reentrant else "non-reentrant"
            if c.tensor_kwargs:
                cause.append(f"checkpoint at {c.where()} ({mode}): tensor keyword arguments {', '.join(c.tensor_kwargs)}")
            if c.bound_tensors:
                cause.append(f"checkpoint at {c.where()} ({mode}): tensors not passed as inputs: {', '.join(c.bound_tensors[:3])}")
        symptoms = exception if scope.owns_run(cause) else []
        if not report.error_with:
            symptoms = report.none_grad_evidence(within=scope.owns) + report.grad_difference_evidence(scope.owns)
        premise += cause[:3]
    elif code == "CKPT004":
        # Library layers checkpointed under the call at this line (generate(), a forward under no_grad
        # or a training forward, in train mode): transformers' checkpointed layers drop the cache.
        uncached = [c for c in calls_at(report, path, line, end_line or line) if c.by_library]
        grad = " with grad disabled" if not any(c.grad_enabled for c in uncached) else ""
        cause = [
            f"{len(uncached)} checkpoint calls of {uncached[0].function} ran inside the call at line {line}{grad}: "
            "the layers were checkpointed there, which drops their cache"
        ] if uncached else []
        symptoms = exception if scope.owns_run(cause) else []
        if not report.error_with:
            symptoms = report.container_evidence(lambda name: scope.owns(name) or bool(cause) and name.startswith("return value"))
        premise += cause
    elif code == "CKPT006":
        omitted = [c for c in calls if c.use_reentrant is None]
        symptoms = [f"{c.api} at {c.where()} ran with use_reentrant omitted: effective use_reentrant=True (reentrant)" for c in omitted]
        warned = [w for c in omitted for w in c.warnings if _OMITTED_WARNING in w]
        if symptoms and warned:
            symptoms.append(f"torch warned: {warned[0].split('. ')[0]}")
        premise += [f"{c.api} at {c.where()} ran with use_reentrant={c.use_reentrant}" for c in calls if c.use_reentrant is not None and c.api != HAND_WRITTEN][:3]
    elif code == "CKPT007":
        # "element 0 of tensors does not require grad" from reentrant checkpoints none of whose
        # inputs required grad is what their inputs cause (CKPT001's premise), not an escape.
        explained = all(c.effective_reentrant and not c.positional_requires_grad for c in calls)
        # The flagged store ran inside one of these checkpoints: a crash of the run is its doing,
        # even while other calls of the same loop (blocks that store nothing) checkpoint too.
        inside = [f"the checkpoint at {c.where()} ran line {line} inside its region" for c in _unique(calls_reaching(report, path, line, end_line or line))][:1]
        symptoms = [e for e in exception if not (explained and "does not require grad" in e)] if scope.owns_run(inside) else []
        premise += inside if symptoms else []
        if not report.error_with:
            symptoms = (
                report.attribute_evidence(scope.owns) + report.none_grad_evidence(within=scope.owns)
                + report.grad_difference_evidence(scope.owns) + report.buffer_evidence(scope.owns) + report.container_evidence(scope.owns)
            )
    elif code == "CKPT008":
        if not calls_at(report, path, line, end_line or line) and calls_through(report, path, line, end_line or line):
            premise.append(f"the checkpoint calls of the model called at line {line}")
        symptoms = [
            f"{c.api} at {c.where()} ran with grad disabled (torch.is_grad_enabled() False): nothing is recorded, so nothing is recomputed"
            for c in calls
            if not c.grad_enabled
        ]
        premise += [f"{c.api} at {c.where()} ran with grad enabled" for c in calls if c.grad_enabled]
    else:
        symptoms = report.evidence() if not scope.others else []
    # checkpoint_sequential records its own call and the checkpoints it makes, at one line.
    premise = list(dict.fromkeys(premise))
    if symptoms:
        return CONFIRMED, symptoms + premise
    if code in ("CKPT006", "CKPT008"):  # judged on the recorded calls, not on the training step
        return NOT_REPRODUCED, premise
    if scope.others and not report.identical:
        elsewhere = ", ".join(sorted({c.where() for c in scope.others})[:4])
        return NOT_REPRODUCED, [
            f"the run differs ({report.evidence()[0]}), but not where the checkpoints of this code can cause it: "
            f"other checkpoints ran too ({elsewhere})"
        ] + premise
    compared = report.compared()
    if report.error_with:
        compared = f"checkpointing raised a different failure than this rule predicts: {report.error_with}"
    return NOT_REPRODUCED, [compared] + premise


def _unique(calls: Sequence[CallRecord]) -> list[CallRecord]:
    """One record per call site (loops call the same site many times)."""
    seen: dict[tuple[Any, ...], CallRecord] = {}
    for call in calls:
        seen.setdefault((call.api, call.path, call.line, call.use_reentrant, call.grad_enabled, call.preserve_rng_state), call)
    return list(seen.values())
