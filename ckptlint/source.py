"""Reading source files: bytes, content hash and text decoded the way Python would."""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import tokenize
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Optional

from ckptlint.notebooks import NotebookError, is_notebook, python_source


class SourceError(Exception):
    """A file that cannot be read or decoded; the message is user-facing."""


@dataclass(frozen=True)
class Source:
    path: str
    text: str
    digest: str
    # A notebook's code cells: (cell number, first line in `text`) each; None for a Python file.
    cells: Optional[tuple[tuple[int, int], ...]] = None


def digest_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def decode(path: str, data: bytes) -> Source:
    if is_notebook(path):
        try:
            text, cells = python_source(data)
        except NotebookError as error:
            raise SourceError(str(error)) from None
        return Source(path, text, digest_of(data), cells)
    try:
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as error:
            # detect_encoding also rejects plain invalid UTF-8; say which byte is wrong.
            data.decode("utf-8")
            raise SourceError(f"bad encoding declaration: {error}") from None
        text = data.decode(encoding)
    except LookupError as error:
        raise SourceError(f"unknown encoding: {error}") from None
    except UnicodeDecodeError as error:
        raise SourceError(f"cannot decode as {error.encoding} (byte {error.start}): {error.reason}") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return Source(path, text, digest_of(data))


# Contents that replace files on disk for the length of an `overlay()` (by absolute path).
_OVERLAY: dict[str, bytes] = {}


@contextmanager
def overlay(contents: dict[str, bytes]) -> Iterator[None]:
    """Read these contents instead of the files: `--fix` and `--diff` lint fixed code before (or
    without) writing it. Forked workers inherit it."""
    saved = dict(_OVERLAY)
    _OVERLAY.update((os.path.abspath(path), data) for path, data in contents.items())
    try:
        yield
    finally:
        _OVERLAY.clear()
        _OVERLAY.update(saved)


DEFAULT_MAX_FILE_SIZE = 10_000_000
_SIZE_UNITS = {"B": 1, "KB": 1_000, "MB": 1_000_000, "GB": 1_000_000_000}


def format_size(size: int) -> str:
    """10 MB, 12.5 MB, 3.1 KB: whole sizes stay whole."""
    for name in ("GB", "MB", "KB"):
        unit = _SIZE_UNITS[name]
        if size >= unit:
            return f"{size // unit} {name}" if size % unit == 0 else f"{size / unit:.1f} {name}"
    return f"{size} B"


def parse_size(text: str) -> Optional[int]:
    """'10 MB', '4KB', '2.5MB', '1000' (bytes); None if not a positive size."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?B)?\s*", text, re.IGNORECASE)
    if match is None:
        return None
    size = int(float(match.group(1)) * _SIZE_UNITS[(match.group(2) or "B").upper()])
    return size if size > 0 else None


def read_bytes(path: str, max_size: Optional[int] = None) -> bytes:
    """The file's bytes, or what an overlay holds for it. A regular file only (a FIFO would block,
    a device never end), of at most `max_size` bytes: SourceError otherwise, OSError if unreadable."""
    data = _OVERLAY.get(os.path.abspath(path)) if _OVERLAY else None
    if data is not None:
        return data
    # Non-blocking: opening a FIFO must not wait for a writer; regular files ignore the flag.
    with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SourceError("not a regular file")
        if max_size is not None and info.st_size > max_size:
            raise SourceError(_too_big(info.st_size, max_size))
        data = handle.read() if max_size is None else handle.read(max_size + 1)
    if max_size is not None and len(data) > max_size:  # grew since the stat
        raise SourceError(_too_big(len(data), max_size))
    return data


def _too_big(size: int, limit: int) -> str:
    return f"skipped: {format_size(size)} is over the {format_size(limit)} limit (max-file-size)"


def read_source(path: str, max_size: Optional[int] = None) -> Source:
    try:
        data = read_bytes(path, max_size)
    except OSError as error:
        raise SourceError(f"cannot read file: {error.strerror or error}") from None
    return decode(path, data)
