"""The file's own `if __name__ == "__main__":` block (or its `main()`, or the whole file when it is
a script written flat at module level) as a target.

The project's script makes exactly the calls that matter (constructor arguments, `use_cache=True`,
its optimizer and data). It runs A/B like any target, and stops right after its first complete
backward (its `steps`-th, for rules whose symptom shows at the second step): a patched
`torch.autograd.backward` ends the run by raising `EndOfRun` once the gradients are in. The
model compared is the root module the script called (the one whose class is the target, else the
first one), found by global forward hooks, which also snapshot its tensor attributes at the end of
each of its forward passes.

Runs in the confirm child only.
"""

from __future__ import annotations

import ast
import os
import sys
import types
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from ckptlint.confirm import ab
from ckptlint.confirm.usage import main_entry


class EndOfRun(BaseException):
    """Raised after the last backward the comparison needs; a BaseException so that the script's
    own `except Exception` does not catch it."""


class ScriptModel(ab.DeferredModel):
    """Stands for the model while the script has not built it yet (see ab.run)."""

    def __init__(self, class_name: str) -> None:
        self.class_name = class_name
        self.roots: list[torch.nn.Module] = []
        self.snapshots: dict[int, dict[str, bool]] = {}
        self.namespace: dict[str, Any] = {}  # the script's globals, once it runs
        self.outputs: dict[int, Any] = {}  # each root's output of its last call
        self.holders: list[torch.nn.Module] = []  # modules of the running functions' locals holding a root
        self.trained: set[int] = set()  # roots called with grad enabled
        # Where code reported as running without grad is: (real path, first line, last line).
        self.grad_free_lines: tuple[tuple[str, int, int], ...] = ()
        self.grad_free_ran = False  # a root was called from there with grad disabled
        self._depth = 0

    def resolve(self) -> Optional[torch.nn.Module]:
        # The model the script trains comes first: a frozen copy of it scored under no_grad
        # (a distillation teacher) may have been called before it.
        roots = sorted(self.roots, key=lambda r: id(r) not in self.trained)
        for root in roots:
            if type(root).__qualname__ == self.class_name:
                return root
        for root in roots:
            if any(type(m).__qualname__ == self.class_name for m in root.modules()):
                return root
        return self._holding(roots[0]) if roots else None

    def _holding(self, root: torch.nn.Module) -> torch.nn.Module:
        """The script's model that holds `root`: `checkpoint_sequential(model, ...)` calls the
        segments of `model`, never `model` itself."""
        for value in [*self.namespace.values(), *self.holders]:
            if isinstance(value, torch.nn.Module) and value is not root and any(m is root for m in value.modules()):
                return value
        return root

    def _note_holders(self, root: torch.nn.Module) -> None:
        """A training function that calls its model's parts one by one (`checkpoint(model.stem, x)`,
        then `model.head(...)`) keeps the model in a local variable: remember it, so that the
        comparison covers every part and not only the first one called."""
        frame = sys._getframe(2)
        while frame is not None:
            for value in frame.f_locals.values():
                if isinstance(value, torch.nn.Module) and value is not root and all(value is not h for h in self.holders) and any(m is root for m in value.modules()):
                    self.holders.append(value)
            frame = frame.f_back

    def snapshot(self) -> dict[str, bool]:
        model = self.resolve()
        return self.snapshots.get(id(model), {}) if model is not None else {}

    def output(self) -> Any:
        return self.outputs.get(id(self.resolve()))

    def hooks(self) -> Any:
        def before(module: torch.nn.Module, args: Any) -> None:
            if self._depth == 0 and all(module is not r for r in self.roots):
                self.roots.append(module)
                self._note_holders(module)
                if self.on_root is not None:
                    self.on_root(module)
            if self._depth == 0 and torch.is_grad_enabled():
                self.trained.add(id(module))
            elif self._depth == 0 and self.grad_free_lines and not self.grad_free_ran:
                self.grad_free_ran = _called_from(self.grad_free_lines)
            self._depth += 1

        def after(module: torch.nn.Module, args: Any, output: Any) -> None:
            self._depth = max(0, self._depth - 1)
            if self._depth == 0:
                self.snapshots[id(module)] = ab.attribute_grads(module)
                self.outputs[id(module)] = output

        return (
            torch.nn.modules.module.register_module_forward_pre_hook(before),
            torch.nn.modules.module.register_module_forward_hook(after, always_call=True),
        )


def main_statements(path: str, source: Optional[str]) -> Optional[tuple[str, list[ast.stmt]]]:
    text = Path(path).read_text(encoding="utf-8") if source is None else source
    tree = ast.parse(text, filename=path)
    kind, body = main_entry(tree)
    if not kind or body is None:
        return None
    if kind == "function":
        body = ast.parse("main()").body
    elif kind == "module":
        body = tree.body  # a flat script: the whole file, its definitions included, in order
    return kind, body


# A script run for code that runs without grad (an evaluation after training steps, a pure inference
# script): it goes on past this many backward passes only to its end, unless that code has run.
GRAD_FREE_BACKWARDS = 16


def make_script_run(
    module: types.ModuleType, path: str, source: Optional[str], class_name: str, steps: int, file: str = "the file",
    grad_free: tuple[tuple[str, int, int], ...] = (), switches: tuple[str, ...] = (),
) -> Optional[tuple[ab.Make, str]]:
    """A `make` that runs the main of `path` (shown as `file`) up to its `steps`-th backward, and its
    description. `grad_free`: where code to reach runs without grad ((path, first line, last line)),
    maybe after training steps (a validation loop) or in a script that never runs a backward: up to
    the first backward after a model was called from there without grad (once `steps` are done),
    its end, or its GRAD_FREE_BACKWARDS-th backward. `switches`: its command line after the path."""
    found = main_statements(path, source)
    if found is None:
        return None
    kind, body = found
    code = compile(ast.Module(body=body, type_ignores=[]), path, "exec")
    shown = {"block": f'{file}\'s `if __name__ == "__main__":` block', "function": f"{file}'s `main()`", "module": f"{file} as a script"}[kind]
    if switches:
        shown += f" with `{' '.join(switches)}` on its command line (the flagged code runs only then)"
    return _run_to_backward(code, module, path, class_name, steps, shown, grad_free, switches)


def make_function_run(module: types.ModuleType, path: str, function: str, steps: int) -> tuple[ab.Make, str]:
    """A `make` that calls a module-level function that takes nothing and trains on its own (a
    training script's loop in a function) up to its `steps`-th backward, and its description."""
    code = compile(ast.parse(f"{function}()"), path, "exec")
    return _run_to_backward(code, module, path, "", steps, f"`{function}()`")


def _run_to_backward(
    code: Any, module: types.ModuleType, path: str, class_name: str, steps: int, shown: str, grad_free: tuple[tuple[str, int, int], ...] = (),
    switches: tuple[str, ...] = (),
) -> tuple[ab.Make, str]:
    def make() -> tuple[Any, Callable[[], Any]]:
        holder = ScriptModel(class_name)
        holder.grad_free_lines = grad_free
        done = [False]

        def step() -> Any:
            if done[0]:
                return None  # the whole script was one step
            done[0] = True
            run_until_backward(code, module, path, steps, holder, needs_backward=not grad_free, switches=switches)
            return None

        return holder, step

    if not grad_free:
        return make, f"ran {shown} up to " + ("its first backward" if steps == 1 else f"its backward number {steps}")
    lines = ", ".join(f"{os.path.basename(p)}:{first}" for p, first, _ in grad_free)
    done = "" if steps == 1 else f" (and its backward number {steps})"
    return make, f"ran {shown} up to the first backward after {lines} ran without grad{done}, its backward number {max(steps, GRAD_FREE_BACKWARDS)} or its end"


def _called_from(places: tuple[tuple[str, int, int], ...]) -> bool:
    """Whether a frame of the running code is at one of `places` ((real path, first, last line))."""
    frame = sys._getframe(2)
    while frame is not None:
        line = frame.f_lineno
        if any(first <= line <= last and os.path.realpath(frame.f_code.co_filename) == path for path, first, last in places):
            return True
        frame = frame.f_back
    return False


def run_until_backward(
    code: Any, module: types.ModuleType, path: str, steps: int, holder: ScriptModel, needs_backward: bool = True, switches: tuple[str, ...] = (),
) -> None:
    namespace = dict(vars(module))
    namespace["__name__"] = "__main__"
    holder.namespace = namespace
    original = torch.autograd.backward
    count = [0]
    depth = [0]
    limit = max(steps, GRAD_FREE_BACKWARDS) if holder.grad_free_lines else steps

    def backward(*args: Any, **kwargs: Any) -> Any:
        # A reentrant checkpoint's backward calls torch.autograd.backward itself, inside the
        # script's: ending the run there would cut the script's backward short of the layers
        # before the checkpoint (their gradients would look lost), so only the outermost counts.
        depth[0] += 1
        try:
            result = original(*args, **kwargs)
        finally:
            depth[0] -= 1
        if depth[0] == 0:
            count[0] += 1
            if count[0] >= limit or holder.grad_free_ran and count[0] >= steps:
                raise EndOfRun()
        return result

    argv = sys.argv
    sys.argv = [path, *switches]
    torch.autograd.backward = backward
    hooks = holder.hooks()
    try:
        exec(code, namespace)
    except EndOfRun:
        pass
    finally:
        torch.autograd.backward = original
        sys.argv = argv
        for hook in hooks:
            hook.remove()
    if count[0] == 0 and needs_backward:
        raise RuntimeError("the script ended without a backward pass")


def model_left_by_main(
    module: types.ModuleType, path: str, source: Optional[str], class_name: str, switches: tuple[str, ...] = (),
) -> Optional[Callable[[], tuple[Optional[torch.nn.Module], str, str]]]:
    """A function that runs the main of `path` until it stops on its own (a data file that is not
    there, a dataset it would download) or reaches its first backward, and returns the model it had
    built by then (set up as the project sets it up: frozen parts, checkpointing switched on, config
    flags), that model's variable, and why the main stopped. None when the file has no main."""
    found = main_statements(path, source)
    if found is None:
        return None
    code = compile(ast.Module(body=found[1], type_ignores=[]), path, "exec")

    def left() -> tuple[Optional[torch.nn.Module], str, str]:
        namespace = dict(vars(module))
        namespace["__name__"] = "__main__"
        scopes: list[dict[str, Any]] = []
        stopped = "it ended"

        def stop(*args: Any, **kwargs: Any) -> None:
            raise EndOfRun()

        returned: list[dict[str, Any]] = []

        def keep_locals(frame: types.FrameType, event: str, arg: Any) -> None:
            # A `main()` that returns normally (its data loop was empty) takes its model with it.
            if event == "return" and frame.f_back is not None and frame.f_back.f_code is code:
                returned.append(dict(frame.f_locals))

        argv, original, profile = sys.argv, torch.autograd.backward, sys.getprofile()
        sys.argv, torch.autograd.backward = [path, *switches], stop
        sys.setprofile(keep_locals)
        try:
            exec(code, namespace)
        except BaseException as error:
            if isinstance(error, KeyboardInterrupt):
                raise
            lines = str(error).strip().splitlines()
            stopped = "its first backward" if isinstance(error, EndOfRun) else f"{type(error).__name__}: {lines[0] if lines else ''}"
            trace = error.__traceback__
            while trace is not None:  # the main's own frames, outermost first: `main()`'s locals
                if trace.tb_frame.f_code.co_filename == path:
                    scopes.append(dict(trace.tb_frame.f_locals))
                trace = trace.tb_next
        finally:
            sys.setprofile(profile)
            sys.argv, torch.autograd.backward = argv, original
        model, variable = _model_in([*reversed(scopes), namespace, *reversed(returned)], class_name)
        return model, variable, stopped

    return left


def _model_in(scopes: list[dict[str, Any]], class_name: str) -> tuple[Optional[torch.nn.Module], str]:
    """The model among the variables of `scopes` (innermost first): one that is or holds a
    `class_name`, else the first that no other holds. (None, "") when there is no module."""
    found: list[tuple[str, torch.nn.Module]] = []
    for scope in scopes:
        for name, value in scope.items():
            if name.startswith("__"):
                continue
            # A plain object of the project holding the model (`ft = Finetuner()`, then `ft.model`).
            held = vars(value).items() if not isinstance(value, (torch.nn.Module, type, types.ModuleType)) and hasattr(value, "__dict__") else ()
            for spelled, module in [(name, value), *((f"{name}.{attr}", v) for attr, v in held if not attr.startswith("_"))]:
                if isinstance(module, torch.nn.Module) and all(module is not m for _, m in found):
                    found.append((spelled, module))
    roots = [(n, m) for n, m in found if not any(m is not other and any(s is m for s in other.modules()) for _, other in found)]
    for name, model in roots:
        if class_name and any(type(m).__qualname__ == class_name for m in model.modules()):
            return model, name
    return (roots[0][1], roots[0][0]) if roots else (None, "")
