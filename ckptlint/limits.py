"""Valid Python beyond the default limits: deep nesting and LibCST's parser limits.

Python compiles expressions nested a few thousand levels deep (a 3,000-term `+` chain, a 350-branch
`elif`, 100,000 operands of `and`, any number of adjacent string literals). LibCST's parser (native
code, on the calling thread's stack) and every recursive walk over its trees descend once per level:
on a main thread's 8 MB stack and Python's default recursion limit that was a RecursionError, or a
segmentation fault inside the parser. The analysis therefore runs on a thread with a large stack
and a recursion limit to match.
"""

from __future__ import annotations

import ctypes
import io
import sys
import threading
import tokenize
from typing import Any, Callable, TypeVar

T = TypeVar("T")

# Address space only: pages are touched as deep as a file really goes.
_STACK_BYTES = 1 << 30
# Per Python frame, even a frame that recurses through C stays far inside the stack above.
_RECURSION_LIMIT = 1_000_000
# LibCST nests adjacent string literals one level per literal and rejects a few thousand.
_STRING_RUN_LIMIT = 1_000


_M_ARENA_MAX = -8

try:
    _LIBC: Any = ctypes.CDLL(None)
except OSError:  # pragma: no cover - no C library to load symbols from
    _LIBC = None


def _malloc_arenas(most: int) -> None:
    """glibc gives a new thread its own malloc arena: the trees built there and freed stayed in it
    (measured: +20 % peak RSS). While the deep thread runs, the caller only waits: one arena is
    enough; 0 restores glibc's default for threads created later (torch's, under --confirm)."""
    try:
        _LIBC.mallopt(_M_ARENA_MAX, most)
    except AttributeError:  # not glibc
        pass


def run_deep(func: Callable[..., T], *args: Any) -> T:
    """`func(*args)` on a thread with room for deep recursion; the caller waits for it."""
    outcome: list = []

    def target() -> None:
        try:
            outcome.append((True, func(*args)))
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller
            outcome.append((False, error))

    limit = sys.getrecursionlimit()
    try:
        previous = threading.stack_size(_STACK_BYTES)
    except (ValueError, RuntimeError):  # a platform without settable stacks: as deep as it goes
        return func(*args)
    try:
        # A daemon: Ctrl-C in the caller must not wait for a parse to finish.
        thread = threading.Thread(target=target, name="ckptlint-deep", daemon=True)
        sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
        _malloc_arenas(1)
        try:
            thread.start()
        except RuntimeError:  # no address space left for the stack
            sys.setrecursionlimit(limit)
            return func(*args)
        thread.join()
    finally:
        threading.stack_size(previous)
        sys.setrecursionlimit(limit)
        _malloc_arenas(0)
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return value


def without_long_string_runs(text: str) -> str:
    """`text` with each run of more than a thousand adjacent string literals cut to its first
    literal, the others blanked to spaces (one-line literals only), so that every other token keeps
    its line and column. Only for text LibCST rejected and `ast` accepted: the concatenated value
    is lost, and nothing else."""
    lines = io.StringIO(text).readlines()  # the lines tokenize numbers
    runs: list[list[tokenize.TokenInfo]] = [[]]
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING:
                runs[-1].append(token)
            elif token.type not in (tokenize.NL, tokenize.COMMENT) and runs[-1]:
                runs.append([])
    except (tokenize.TokenError, SyntaxError):
        return text
    for run in runs:
        if len(run) <= _STRING_RUN_LIMIT:
            continue
        for token in run[1:]:
            (row, start), (end_row, end) = token.start, token.end
            if row == end_row:
                line = lines[row - 1]
                lines[row - 1] = line[:start] + " " * (end - start) + line[end:]
    return "".join(lines)


def describe(error: BaseException, limit: int = 300) -> str:
    """`Type: message` for a report, even when the message itself cannot be rendered."""
    try:
        message = str(error)
    except Exception:  # noqa: BLE001 - a message that recurses or fails is still reported
        message = "(the message could not be rendered)"
    if len(message) > limit:
        message = message[: limit - 3] + "..."
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def too_deep(error: BaseException) -> bool:
    """A RecursionError, or an error raised while one unwound (LibCST's metadata turns some into KeyError)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, RecursionError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
