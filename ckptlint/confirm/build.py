"""Building what a target runs: import the user's file, find an example factory or construct the
model, and synthesise an input batch from the model's first layers.

Runs in the confirm child process only (it imports torch and executes the project's code).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch
from torch import nn

from ckptlint.confirm import ab, command_line, constructors, functions, hf, inputs, lightning_fit, registry, script, usage
from ckptlint.confirm import switches as flag_switches
from ckptlint.confirm.failures import EXAMPLE_HINT, CannotRun, skeleton, stop_on_user_failure
from ckptlint.findings import CRASHED, NEEDS_EXAMPLE
from ckptlint.names import module_name_for

# Code found running a checkpoint without grad: the run must reach it, past the training steps before it.
GRAD_FREE_CODE = "CKPT008"

# Lightning runs these with grad disabled (torch.no_grad() in fit's validation loop); --confirm calls
# them under torch.no_grad().
NO_GRAD_METHODS = ("validation_step", "test_step", "predict_step")


# --- importing user code -------------------------------------------------------------------------


def import_file(path: str, source: Optional[str] = None, *, definitions_only: bool = False) -> types.ModuleType:
    """Import `path` under its dotted name (packages stay importable, relative imports work).
    `source`: the text to run instead of the file's (what was linted from stdin);
    `definitions_only`: run only its imports and definitions (a flat script would train)."""
    file = Path(path).resolve()
    name, is_package = module_name_for(file)
    depth = name.count(".") + (1 if is_package else 0)
    root = file.parent
    for _ in range(depth):
        root = root.parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    if definitions_only:
        text = file.read_text(encoding="utf-8") if source is None else source
        code = compile(usage.definitions(ast.parse(text, filename=str(file))), str(file), "exec")
        return _import_source(file, name, is_package, text, code)
    if source is not None:
        return _import_source(file, name, is_package, source)
    existing = sys.modules.get(name)
    if existing is not None:
        if _same_file(getattr(existing, "__file__", None), file):
            return existing
        return _import_by_path(file, f"ckptlint_confirm_{abs(hash(str(file)))}")
    module = importlib.import_module(name)
    if not _same_file(getattr(module, "__file__", None), file):
        return _import_by_path(file, f"ckptlint_confirm_{abs(hash(str(file)))}")
    return module


def _same_file(a: Optional[str], b: Path) -> bool:
    return a is not None and Path(a).resolve() == b


def _import_by_path(file: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _import_source(file: Path, name: str, is_package: bool, source: str, code: Optional[types.CodeType] = None) -> types.ModuleType:
    """Run `source` (or `code`, compiled from part of it) as the module `name` at `file`: frames,
    tracebacks and `inspect.getsource` point at `file`, whose lines are the given text's."""
    import linecache

    if name.rpartition(".")[0]:
        importlib.import_module(name.rpartition(".")[0])  # the parent package, for relative imports
    linecache.cache[str(file)] = (len(source), None, source.splitlines(keepends=True), str(file))
    module = types.ModuleType(name)
    module.__file__ = str(file)
    module.__package__ = name if is_package else name.rpartition(".")[0]
    if is_package:
        module.__path__ = [str(file.parent)]  # type: ignore[attr-defined]
    module.__spec__ = importlib.util.spec_from_loader(name, loader=None, origin=str(file), is_package=is_package)
    sys.modules[name] = module
    exec(code if code is not None else compile(source, str(file), "exec"), module.__dict__)
    return module


def load_examples(paths: Sequence[str]) -> list[str]:
    """Import the configured example files; the failures, as messages."""
    errors = []
    for path in paths:
        try:
            import_file(path)
        except BaseException as error:  # user code: anything can happen
            if isinstance(error, KeyboardInterrupt):
                raise
            errors.append(f"example file {path} failed to import: {type(error).__name__}: {error}")
    return errors


def resolve(module: types.ModuleType, qualname: str) -> Any:
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def find_example(target: Any, module: types.ModuleType, qualname: str) -> Optional[Callable[..., Any]]:
    """The factory registered for `target` (by object, by `module.qualname` string, or by an object
    with the same qualname from the same file, imported under another module name)."""
    file = Path(module.__file__).resolve() if getattr(module, "__file__", None) else None
    for registered, factory in reversed(registry.EXAMPLES):
        if registered is target:
            return factory
        if isinstance(registered, str):
            spelled = registered.replace(":", ".")
            if spelled == f"{module.__name__}.{qualname}":
                return factory
            if spelled == qualname and getattr(factory, "__module__", None) == module.__name__:
                return factory
            continue
        if getattr(registered, "__qualname__", None) != qualname or file is None:
            continue
        owner = sys.modules.get(getattr(registered, "__module__", "") or "")
        if owner is not None and _same_file(getattr(owner, "__file__", None), file):
            return factory
    return None


# --- plans -----------------------------------------------------------------------------------------


@dataclass
class Plan:
    make: ab.Make
    description: str
    # A plan that may not reach the finding (a script that stops before it, or fails on its own):
    # then the next plan is tried.
    fallible: bool = False
    # It runs a model directly, not the code around the findings: it says nothing about a finding
    # none of whose checkpoints ran (a function of the main it never calls).
    runs_model_only: bool = False


def plans_for(job: dict[str, Any], module: types.ModuleType, device: str, example_errors: Sequence[str]) -> list[Callable[[], Plan]]:
    """The ways to run the target, best evidence first; each is built when it is tried (building
    one may raise CannotRun). An example factory is the only plan when there is one."""
    qualname = job["qualname"]
    if job["kind"] == "script":
        return [lambda: _script_plan(job, module), lambda: _main_model_plan(job, module, device)]
    try:
        target = resolve(module, qualname)
    except AttributeError:
        raise CannotRun(f"`{qualname}` is not defined when {os.path.basename(job['path'])} is imported", CRASHED) from None
    factory = find_example(target, module, qualname)
    if factory is not None:
        return [lambda: _example_plan(target, factory, job.get("method"), device, function=job["kind"] == "function")]
    usage = job.get("usage") or {}
    plans: list[Callable[[], Plan]] = []
    if usage.get("main") and not job.get("method"):
        plans.append(lambda: _script_plan(job, module))
        if job["kind"] == "class" or not usage.get("main_path"):
            plans.append(lambda: _main_model_plan(job, module, device))
    if job["kind"] == "function" and job.get("trains"):
        plans.append(lambda: Plan(*script.make_function_run(module, job["path"], qualname, job.get("steps", 1)), fallible=True))
        return plans
    if job["kind"] == "function":
        constructs = job.get("constructs", ())
        if _builder_kwargs(module, target, constructs) is not None:
            plans.append(lambda: _builder_function_plan(module, target, qualname, constructs, usage, device, example_errors))
        else:
            plans.append(lambda: Plan(*functions.function_plan(module, target, qualname, usage, device)))
        return plans
    if not (isinstance(target, type) and issubclass(target, nn.Module)):
        if plans:
            return plans  # a class that holds the model (`Finetuner().model`): only its main can run it
        raise CannotRun(f"`{qualname}` is not an nn.Module subclass")
    switches = flag_switches.switches(job)
    # A transformers model of the project's own, switched on where it is trained (a Trainer's
    # arguments): built bare, it checkpoints nothing; the next plan switches it on that way.
    hf_switch = job.get("hf_checkpointing") if hf.is_pretrained_class(target) and getattr(target, "supports_gradient_checkpointing", False) else None
    plans.append(lambda: _class_plan(job, module, target, usage, device, example_errors, switches=switches, more_to_try=hf_switch is not None))
    if switches:
        plans.append(lambda: _class_plan(job, module, target, usage, device, example_errors, switched_on=switches))
    if hf_switch is not None:
        plans.append(lambda: _class_plan(job, module, target, usage, device, example_errors, hf_switch=hf_switch))
    return plans


def _script_plan(job: dict[str, Any], module: types.ModuleType) -> Plan:
    class_name = job["qualname"] if job["kind"] == "class" else ""
    grad_free = tuple(
        (os.path.realpath(f.get("path", job["path"])), f["line"], f.get("end_line") or f["line"]) for f in job["findings"] if f["code"] == GRAD_FREE_CODE
    )
    module, path, source, switches = _main_of(job, module)
    shown = os.path.basename(path) if path != job["path"] else "the file"
    found = script.make_script_run(module, path, source, class_name, job.get("steps", 1), shown, grad_free, switches)
    if found is None:
        raise CannotRun("the file has no main to run")
    make, description = found
    return Plan(make, description, fallible=True)


def _main_of(job: dict[str, Any], module: types.ModuleType) -> tuple[types.ModuleType, str, Optional[str], tuple[str, ...]]:
    """(module, path, source) of the file whose main runs the target, and the command-line switches
    that main needs: the target's own file, or another project file (imported for its definitions)."""
    main_path = (job.get("usage") or {}).get("main_path")
    if main_path:
        return import_file(main_path, definitions_only=usage.flat_script(main_path)), main_path, None, _switches_to_findings(job, main_path, None)
    return module, job["path"], job.get("source"), _switches_to_findings(job, job["path"], job.get("source"))


def _switches_to_findings(job: dict[str, Any], path: str, source: Optional[str]) -> tuple[str, ...]:
    """The command-line switches the main of `path` must be given for the findings in that file to
    run (`if args.gradient_checkpointing:` around them)."""
    if source is None:
        try:
            source = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ()
    lines = [f["line"] for f in job["findings"] if os.path.realpath(f.get("path", job["path"])) == os.path.realpath(path)]
    return tuple(command_line.switches_reaching(source, lines)) if lines else ()


def _main_model_plan(job: dict[str, Any], module: types.ModuleType, device: str) -> Plan:
    """The main stops on its own before a backward (its data is not there): the model it built and
    set up by then, run on synthesised inputs."""
    main, path, source, switches = _main_of(job, module)
    left = script.model_left_by_main(main, path, source, job["qualname"] if job["kind"] == "class" else "", switches)
    if left is None:
        raise CannotRun("the file has no main to run")
    ab.seed_everything()
    model, variable, stopped = left()
    if model is None:
        raise CannotRun(f"the file's main built no model before it stopped ({stopped})")

    def construct() -> nn.Module:
        built = left()[0]
        if built is None:
            raise CannotRun("the file's main built no model on a second run")
        return built.to(device)

    usage_keywords = (job.get("usage") or {}).get("keyword_names", ())
    method = _lightning_entry(type(model))
    found = inputs.search_inputs(construct, method, device, (job.get("usage") or {}).get("call_keywords"), [*usage_keywords, "labels"])

    def make() -> tuple[Any, Callable[[], Any]]:
        model = construct()
        model.train()
        args, kwargs = found.make()
        return model, _calling(model, method, args, kwargs)

    entry = f".{method}({found.shown})" if method else f" on {found.shown}"
    shown = f"ran `{variable}` ({type(model).__name__}) as the file's main left it, where it stopped ({stopped}){entry}"
    # Fallible: the finding may be in code of the main that only its data reaches (a function it calls).
    return Plan(make, shown + (f"; {found.tried}" if found.tried else ""), fallible=True, runs_model_only=True)


def _class_plan(
    job: dict[str, Any], module: types.ModuleType, target: type, usage: dict[str, Any], device: str, example_errors: Sequence[str],
    *, switches: Sequence[str] = (), switched_on: Sequence[str] = (), more_to_try: bool = False, hf_switch: Optional[tuple[dict[str, bool], str]] = None,
) -> Plan:
    """`switches`: flags the findings' checkpoints are gated on; when the model as built leaves one
    off, a run that never reaches the checkpoint says nothing (the next plan switches them on).
    `hf_switch`: the `gradient_checkpointing_kwargs` the project enables transformers checkpointing
    with, and where."""
    method = job.get("method") or _lightning_entry(target)
    construct, how, found = _constructor(module, target, job.get("builders", ()), usage, method, device, example_errors)
    entry_name = method or "forward"
    if switched_on and not _switch_on(construct(), switched_on):
        raise CannotRun(f"no module of {how} has {_flag_names(switched_on)} to switch on")
    fallible = bool(switches) and _switch_on(construct(), switches) or more_to_try
    callbacks = lightning_fit.FittedCallbacks(module, usage.get("callbacks") or ())
    if callbacks:
        callbacks.apply(construct())  # once, to say in the evidence which hooks fail here
        how += callbacks.shown()

    setup = job.get("setup")
    holders = _fed_by_earlier_layers(job, usage)

    def make() -> tuple[Any, Callable[[], Any]]:
        model = construct()
        _switch_on(model, switched_on)
        if setup:
            getattr(model, setup)()
        if hf_switch is not None:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=dict(hf_switch[0]))
        callbacks.apply(model)
        model.train()
        args, kwargs = found.make()
        if holders:
            args, kwargs = inputs.requiring_grad(args), inputs.requiring_grad(kwargs)
        return model, _calling(model, method, args, kwargs)

    shown = f"ran {how}.{entry_name}({found.shown})" if method else f"ran {how} on {found.shown}"
    if holders:
        shown += f"; its floating-point inputs require grad, as {' and '.join(holders[:2])} hands the layer the output of its earlier layers"
    if setup:
        shown += f" after its {setup}()"
    if switched_on:
        shown += f" with {_flag_names(switched_on)} switched on (the checkpoint runs only then, and the model as built leaves it off)"
    if hf_switch is not None:
        shown += f" after gradient_checkpointing_enable(gradient_checkpointing_kwargs={hf_switch[0]}), as the project switches it on at {hf_switch[1]}"
    return Plan(make, shown + (f"; {found.tried}" if found.tried else ""), fallible=fallible)


# Findings whose claim is that the target's inputs carry no grad: their runs keep data inputs as built.
_DATA_INPUT_CODES = frozenset({"CKPT001", "CKPT005"})


def _fed_by_earlier_layers(job: dict[str, Any], usage: dict[str, Any]) -> list[str]:
    """The module classes that build the target as a part (`Usage.built_into`), when its `forward` is
    run and no finding claims its inputs carry no grad: inputs synthesised for a part then require
    grad, as an upstream layer's output does (without, a reentrant checkpoint in it fails on every
    backward, "element 0 of tensors does not require grad", and shows nothing of the finding)."""
    if job.get("method") or any(f["code"] in _DATA_INPUT_CODES for f in job.get("findings", ())):
        return []
    return list(usage.get("built_into") or ())


def _switch_on(model: nn.Module, flags: Sequence[str]) -> bool:
    """Set each boolean flag that is off on the model's modules; whether any was."""
    switched = False
    for submodule in model.modules():
        for flag in flags:
            if getattr(submodule, flag, None) is False:
                setattr(submodule, flag, True)
                switched = True
    return switched


def _flag_names(flags: Sequence[str]) -> str:
    return ", ".join(f"`{flag}`" for flag in flags)


def _calling(model: nn.Module, method: Optional[str], args: Sequence[Any], kwargs: dict[str, Any]) -> Callable[[], Any]:
    """`model(...)` or `model.method(...)`, without grad for the steps Lightning runs that way; a
    Lightning module's own setup hooks run first for `training_step`, as its fit loop runs them."""
    entry = getattr(model, method) if method else model
    if method in NO_GRAD_METHODS:
        if _lightning_base(model) is not None:
            model.eval()  # Lightning's evaluation loops call `.eval()` first (`on_validation_model_eval`)
        return lambda: _without_grad(entry, args, kwargs)
    if method == "training_step":
        _lightning_setup(model, args[0] if args else None)
    return lambda: entry(*args, **kwargs)


# The hooks lightning 2.6's `Trainer.fit` runs before the first `training_step`, in order, with
# their arguments (the batch for `on_train_batch_start`).
_LIGHTNING_SETUP_HOOKS = (("setup", ("fit",)), ("configure_model", ()), ("on_fit_start", ()), ("on_train_start", ()), ("on_train_epoch_start", ()))


def _lightning_base(model: nn.Module) -> Optional[type]:
    return _lightning_class(type(model))


def _lightning_class(cls: type) -> Optional[type]:
    return next((c for c in cls.__mro__ if c.__name__ == "LightningModule" and "lightning" in c.__module__), None)


def _lightning_entry(cls: type) -> Optional[str]:
    """"training_step" for a LightningModule that trains through it and defines no `forward` of its
    own (Lightning's fit loop calls `training_step`; its `forward` raises)."""
    base = _lightning_class(cls)
    own = {name for c in cls.__mro__[: cls.__mro__.index(base)] for name in vars(c)} if base is not None else set()
    return "training_step" if "training_step" in own and "forward" not in own else None


def _lightning_setup(model: nn.Module, batch: Any) -> None:
    """Run the setup hooks a LightningModule overrides (the base class's are no-ops)."""
    base = _lightning_base(model)
    if base is None:
        return
    for hook, hook_args in (*_LIGHTNING_SETUP_HOOKS, ("on_train_batch_start", (batch, 0))):
        if getattr(type(model), hook, None) is not getattr(base, hook, None):
            getattr(model, hook)(*hook_args)


def _without_grad(entry: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    with torch.no_grad():
        return entry(*args, **kwargs)


def _example_plan(target: Any, factory: Callable[..., Any], method: Optional[str], device: str, *, function: bool) -> Plan:
    name = getattr(factory, "__name__", "factory")

    def make() -> tuple[Any, Callable[[], Any]]:
        produced = factory()
        if not (isinstance(produced, tuple) and len(produced) == 3):
            raise TypeError(f"example {name}() must return (model, args, kwargs), got {type(produced).__name__}")
        model, args, kwargs = produced
        if isinstance(model, nn.Module):
            model.to(device)
        args, kwargs = _to_device(tuple(args), device), _to_device(dict(kwargs or {}), device)
        if function:
            return model, lambda: target(*args, **kwargs)
        if not isinstance(model, nn.Module):
            raise TypeError(f"example {name}() must return an nn.Module first, got {type(model).__name__}")
        model.train()
        return model, _calling(model, method, args, kwargs)

    shown = getattr(target, "__qualname__", str(target))
    return Plan(make, f"ran {shown} with example {name}()")


def _builder_function_plan(module: types.ModuleType, function: Any, qualname: str, constructs: Sequence[str], usage: dict[str, Any], device: str, example_errors: Sequence[str]) -> Plan:
    """A function that builds and returns a model from nothing (or a `config`): run the model."""
    kwargs_source = _builder_kwargs(module, function, constructs)
    assert kwargs_source is not None

    def construct() -> nn.Module:
        result = function(**kwargs_source())
        if not isinstance(result, nn.Module):
            raise CannotRun(f"`{qualname}(...)` does not return an nn.Module; " + EXAMPLE_HINT.format(name=qualname))
        return result.to(device)

    ab.seed_everything()
    try:
        construct()
    except CannotRun:
        raise
    except BaseException as error:
        stop_on_user_failure(f"`{qualname}(...)`", error)
        raise CannotRun(f"calling `{qualname}(...)` failed: {type(error).__name__}: {error}", CRASHED) from None
    found = inputs.search_inputs(construct, None, device, usage.get("call_keywords"), usage.get("keyword_names", ()))

    def make() -> tuple[Any, Callable[[], Any]]:
        model = construct()
        model.train()
        args, kwargs = found.make()
        return model, lambda: model(*args, **kwargs)

    return Plan(make, f"ran the model built by {qualname}() on {found.shown}")


def _builder_kwargs(module: types.ModuleType, function: Any, constructs: Sequence[str]) -> Optional[Callable[[], dict[str, Any]]]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    required = [p.name for p in signature.parameters.values() if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if any(name != "config" for name in required):
        return None
    if not required:
        return dict
    for name in constructs:
        config_class = getattr(getattr(module, name, None), "config_class", None)
        if isinstance(config_class, type):
            return lambda: {"config": hf.tiny_config(config_class)}
    return None


def _constructor(
    module: types.ModuleType, cls: type, builders: Sequence[str], usage: dict[str, Any], method: Optional[str], device: str,
    example_errors: Sequence[str],
) -> tuple[Callable[[], nn.Module], str, inputs.Inputs]:
    """How to build `cls` with no user help, and inputs it accepts: a builder function of its file
    (it may freeze parameters or enable checkpointing), the project's own construction sites, its
    zero-argument constructor, its `config_class`, or sizes guessed from the parameter names."""
    reasons = []
    # (shown, build, the constructor's arguments when it is called directly: shown again after the build)
    attempts: list[tuple[str, Callable[[], nn.Module], Optional[tuple[tuple[Any, ...], dict[str, Any]]]]] = []
    for name in builders:
        function = getattr(module, name, None)
        kwargs_source = _builder_kwargs(module, function, [cls.__name__]) if function is not None else None
        if kwargs_source is not None:
            attempts.append((f"{cls.__qualname__} built by {name}()", lambda f=function, k=kwargs_source: f(**k()), None))
    calls = usage.get("constructor_calls", [])
    site_attempts = list(constructors.candidates(cls, calls))
    attempts += [(shown, lambda a=args, k=kwargs: cls(*a, **k), (args, kwargs)) for shown, args, kwargs in site_attempts if "as the project builds it" in shown]
    attempts.append((f"{cls.__qualname__}()", lambda: cls(), None))
    config_class = getattr(cls, "config_class", None)
    if isinstance(config_class, type):
        attempts.append((f"{cls.__qualname__}({config_class.__name__}())", lambda: cls(hf.tiny_config(config_class)), None))
    attempts += [(shown, lambda a=args, k=kwargs: cls(*a, **k), (args, kwargs)) for shown, args, kwargs in site_attempts if "as the project builds it" not in shown]
    setup = usage.get("setup") or {}
    for index, (shown, build, arguments) in enumerate(attempts):
        ab.seed_everything()
        try:
            model = build()
        except CannotRun:
            raise
        except BaseException as error:
            stop_on_user_failure(f"`{shown}`", error)
            reasons.append(f"{shown} raised {type(error).__name__}: {_first_line(error)}")
            continue
        if not isinstance(model, cls):
            continue
        # A builder function of the file sets the model up itself; any other build gets the
        # project's own setup of a fresh instance replayed.
        replay = _SetupReplay(_setup_module(module, setup), setup) if index >= len(builders) and setup else None

        def construct(build: Callable[[], nn.Module] = build, replay: Optional[_SetupReplay] = replay) -> nn.Module:
            return (replay.apply(build()) if replay else build()).to(device)

        try:
            found = inputs.search_inputs(construct, method, device, usage.get("call_keywords"), usage.get("keyword_names", ()))
        except CannotRun as error:
            if error.cause != NEEDS_EXAMPLE:
                raise
            reasons.append(f"{shown}: {str(error).split('; add a factory')[0]}")
            continue
        if arguments is not None:
            shown = constructors.shown_after_build(shown, cls, *arguments)
        return construct, shown + (replay.shown() if replay else ""), found
    reason = f"cannot build and feed `{cls.__qualname__}`: " + "; ".join(reasons[:4]) + "; " + EXAMPLE_HINT.format(name=cls.__qualname__)
    guessed = next((shown.split(" (")[0] for shown, args, kwargs in site_attempts if not constructors.reads_a_guessed_config(args, kwargs)), "")
    example = skeleton(module.__name__, cls.__qualname__, "class", constructor=guessed, arguments=_forward_parameters(cls, method))
    raise CannotRun(_with_errors(reason, example_errors), NEEDS_EXAMPLE, example)


def _setup_module(module: types.ModuleType, setup: dict[str, Any]) -> types.ModuleType:
    """The module whose namespace the setup statements read: the target's, or the other file's that
    runs them (only its definitions, when it is a flat script)."""
    path = setup.get("path")
    if not path:
        return module
    try:
        return import_file(path, definitions_only=usage.flat_script(path))
    except CannotRun:
        raise
    except BaseException as error:  # its imports fail here: its statements fail too, and are named as skipped
        stop_on_user_failure(f"importing {os.path.basename(path)}", error)
        return module


class _SetupReplay:
    """The statements the target's file (or another file) runs on a fresh instance (usage.Usage.setup),
    run again on the model --confirm builds, in that file's namespace. A statement that fails here (it loads a
    checkpoint file) is skipped, and the evidence says so."""

    def __init__(self, module: types.ModuleType, setup: dict[str, Any]) -> None:
        self.module, self.variable, self.statements = module, setup["variable"], setup["statements"]
        self.by = f"{os.path.basename(setup['path'])}'s" if setup.get("path") else "the project's"
        self.failed: dict[int, str] = {}  # line -> why its statement was skipped

    def apply(self, model: nn.Module) -> nn.Module:
        namespace = dict(vars(self.module))
        namespace[self.variable] = model
        for statement in self.statements:
            try:
                exec(compile(statement["code"], self.module.__file__ or "<setup>", "exec"), namespace)
            except BaseException as error:
                stop_on_user_failure(f"`{statement['code']}`", error)
                self.failed[statement["line"]] = f"{type(error).__name__}: {_first_line(error)}"
        result = namespace.get(self.variable)
        return result if isinstance(result, nn.Module) else model

    def shown(self) -> str:
        ran = [f"`{s['code']}` (line {s['line']})" for s in self.statements if s["line"] not in self.failed]
        skipped = [f"`{s['code']}` (line {s['line']}: {self.failed[s['line']]})" for s in self.statements if s["line"] in self.failed]
        text = f", then {self.by} setup of `{self.variable}`: " + ", ".join(ran) if ran else ""
        return text + ("; skipped, failing here: " + ", ".join(skipped) if skipped else "")


def _forward_parameters(cls: type, method: Optional[str]) -> list[str]:
    try:
        parameters = list(inspect.signature(getattr(cls, method or "forward")).parameters.values())[1:]
    except (TypeError, ValueError, AttributeError):
        return []
    return [p.name for p in parameters if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def _with_errors(reason: str, example_errors: Sequence[str]) -> str:
    return reason + ("" if not example_errors else " (" + "; ".join(example_errors) + ")")


def _to_device(value: Any, device: str) -> Any:
    if device == "cpu":
        return value
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(_to_device(v, device) for v in value)
    if isinstance(value, list):
        return [_to_device(v, device) for v in value]
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    return value


# --- device -------------------------------------------------------------------------------------


def resolve_device(requested: str) -> str:
    if requested == "cpu":
        return "cpu"
    available = torch.cuda.is_available()
    if requested == "cuda" and not available:
        raise CannotRun("--device cuda was requested but CUDA is not available", CRASHED)
    return "cuda" if available else "cpu"
