"""Why a target cannot run, and failures of the user's code that are named for what they are.

No torch here: the parent imports this too.
"""

from __future__ import annotations

from typing import Optional, Sequence

from ckptlint.findings import CRASHED, NEEDS_EXAMPLE

EXAMPLE_HINT = (
    "add a factory decorated `@ckptlint.example({name})` returning (model, args, kwargs), in the same "
    "file or in a file listed in [tool.ckptlint.confirm] examples"
)


class StandardInputRead(BaseException):
    """Raised by `input()` in a confirm child: there is no terminal to answer it. A BaseException,
    so that the user's `except Exception` does not swallow it."""


class CannotRun(Exception):
    """The target cannot be built or fed; the message says why (and what the user can do).
    `cause`: one of findings.CAUSES; `example`: a factory skeleton for NEEDS_EXAMPLE."""

    def __init__(self, message: str, cause: str = NEEDS_EXAMPLE, example: str = "") -> None:
        super().__init__(message)
        self.cause = cause
        self.example = example


# Set by the runner from --confirm-memory, for the messages of failed allocations.
memory_cap_gb: Optional[float] = None


def user_failure(where: str, error: BaseException) -> Optional[str]:
    """What the user's code did, when it is no failure to build or feed it: it exited, asked for
    input or ran out of memory. None for anything else."""
    if isinstance(error, SystemExit):
        return f"{where} called sys.exit({error.code!r})"
    if isinstance(error, StandardInputRead):
        return f"{where} called input(): --confirm runs without standard input"
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if isinstance(error, MemoryError) or (isinstance(error, RuntimeError) and any(m in text for m in _ALLOCATION_FAILURES)):
        shown = f"{type(error).__name__}: {text[:200]}"
        if memory_cap_gb:
            return f"{where} exceeded the --confirm-memory cap of {memory_cap_gb:g} GB: {shown}"
        return f"{where} could not allocate memory: {shown}"
    return None


def stop_on_user_failure(where: str, error: BaseException) -> None:
    """Re-raise KeyboardInterrupt; raise CannotRun (crashed) when the code exited, asked for input
    or ran out of memory: trying other constructors or inputs would only hide that."""
    if isinstance(error, KeyboardInterrupt):
        raise error
    named = user_failure(where, error)
    if named:
        raise CannotRun(named, CRASHED) from None


_ALLOCATION_FAILURES = ("can't allocate memory", "out of memory", "DefaultCPUAllocator", "std::bad_alloc")


def skeleton(module: str, qualname: str, kind: str, *, constructor: str = "", arguments: Sequence[str] = (), inputs: str = "") -> str:
    """A factory to paste and complete: what could be inferred is filled in, the rest is `...`."""
    name = qualname.split(".")[-1]
    lines = ["import torch", "import ckptlint", "", "", f'@ckptlint.example("{module}.{qualname}")', f"def example_{name.lower()}():", f"    from {module} import {qualname.split('.')[0]}", ""]
    if kind == "class":
        lines.append(f"    model = {constructor or qualname + '(...)'}")
        lines.append(f"    return model, ({inputs or ', '.join('...' for _ in arguments) or '...'},), {{}}  # one forward pass: model(*args, **kwargs)")
    else:
        lines.append("    model = ...  # the module whose gradients are compared")
        lines.append(f"    return model, ({', '.join('...' for _ in arguments)}{',' if len(arguments) == 1 else ''}), {{}}  # one call: {name}({', '.join(arguments)})")
    return "\n".join(lines)
