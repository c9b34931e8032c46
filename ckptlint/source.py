"""Reading source files: bytes, content hash and text decoded the way Python would."""

from __future__ import annotations

import hashlib
import io
import os
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


def read_bytes(path: str) -> bytes:
    """The file's bytes, or what an overlay holds for it."""
    data = _OVERLAY.get(os.path.abspath(path)) if _OVERLAY else None
    if data is not None:
        return data
    with open(path, "rb") as handle:
        return handle.read()


def read_source(path: str) -> Source:
    try:
        data = read_bytes(path)
    except OSError as error:
        raise SourceError(f"cannot read file: {error.strerror or error}") from None
    return decode(path, data)
