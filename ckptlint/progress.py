"""Feedback on long runs: a status line on stderr saying what is being done, files done/total, and
for `--confirm` the target running and for how long.

Shown once a run has taken a second, on a terminal, outside CI; never in pipes or CI logs unless
asked for (`--progress`), where it prints whole lines now and then instead of redrawing one.
Work reports through `phase()` and `running()` wherever it is; with no reporter installed (the
library, tests, flake8) they do nothing.
"""

from __future__ import annotations

import os
import shutil
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional, TextIO

# Quiet runs stay quiet: nothing until the run has taken this long.
DELAY = 1.0
_REDRAW = 0.1  # seconds between redraws of the status line
_LOG_EVERY = 5.0  # seconds between lines when it is not a terminal


def wanted(stream: TextIO, flag: Optional[bool]) -> bool:
    """--progress / --no-progress; by default only on a terminal, outside CI."""
    if flag is not None:
        return flag
    return stream.isatty() and not os.environ.get("CI") and os.environ.get("TERM") != "dumb"


class Reporter:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.redraw = stream.isatty()
        self.started = time.monotonic()
        self.shown = 0.0
        self.dirty = False

    def show(self, text: str, final: bool = False) -> None:
        now = time.monotonic()
        if now - self.started < DELAY:
            return
        if self.redraw:
            if final or now - self.shown >= _REDRAW:
                width = shutil.get_terminal_size().columns - 1
                self.stream.write("\r\x1b[K" + text[:width])
                self.stream.flush()
                self.shown, self.dirty = now, True
        elif final or now - self.shown >= _LOG_EVERY:
            self.stream.write(text + "\n")
            self.stream.flush()
            self.shown = now

    def clear(self) -> None:
        if self.dirty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.dirty = False


_REPORTER: Optional[Reporter] = None


@contextmanager
def reporting(stream: TextIO, enabled: bool) -> Iterator[None]:
    """Install a reporter on `stream` for the length of the block (nothing when not enabled)."""
    global _REPORTER
    previous, _REPORTER = _REPORTER, Reporter(stream) if enabled else None
    try:
        yield
    finally:
        if _REPORTER is not None:
            _REPORTER.clear()
        _REPORTER = previous


def phase(action: str, total: int, unit: str = "files") -> Callable[[], None]:
    """Start counting `total` items; call the result once per item done."""
    reporter = _REPORTER
    if reporter is None or total == 0:
        return _nothing
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        reporter.show(f"ckptlint: {action} {done:,}/{total:,} {unit}", final=done == total)

    reporter.show(f"ckptlint: {action} 0/{total:,} {unit}")
    return tick


def running(action: str, done: int, total: int, current: str, since: float) -> None:
    """`--confirm`: targets done/total, the one running and how long it has run (monotonic `since`)."""
    if _REPORTER is not None:
        _REPORTER.show(f"ckptlint: {action} {done}/{total}: {current} ({time.monotonic() - since:.0f} s)")


def _nothing() -> None:
    pass
