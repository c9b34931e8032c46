"""Jupyter notebooks, linted as ruff lints them: the code cells joined into one module, IPython
magics and shell escapes blanked out, positions reported per cell (`nb.ipynb:cell 3:2:5`, cells
numbered from 1 among all cells), fixes written back into the cells' sources without touching
outputs or metadata."""

from __future__ import annotations

import json
import os
import re
from bisect import bisect_right
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Optional

from ckptlint.findings import Confirmation, Edit, Finding, Fix
from ckptlint.lines import lines_of, lines_with_ends

SUFFIX = ".ipynb"
# Cell magics whose body is Python: the cell is linted without its `%%` line; other cell magics
# (%%bash, %%html, %%writefile, ...) make the cell something else, and it is skipped.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
# `%magic`, `!shell`, `?obj`, `obj?` at the start of a logical line; and `x = !cmd`, `x = %magic`.
_ESCAPE = re.compile(r"\s*(?:[%!]|\?{1,2}[\w.]|[\w.]+\?{1,2}\s*$)")
_CAPTURE = re.compile(r"(\s*[\w.]+\s*=\s*)([%!])")


class NotebookError(ValueError):
    """Not a notebook ckptlint can read; the message is user-facing."""


def is_notebook(path: str) -> bool:
    return path.endswith(SUFFIX)


def python_source(data: bytes) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The joined code of the notebook's Python cells and, per cell kept, (cell number, first line
    in the joined text)."""
    notebook = _load(data)
    if _language(notebook) not in ("python", ""):
        return "", ()
    parts: list[str] = []
    cells: list[tuple[int, int]] = []
    line = 1
    for number, cell in enumerate(notebook["cells"], start=1):
        code = _cell_code(cell)
        if code is None:
            continue
        cells.append((number, line))
        parts.append(code)
        line += code.count("\n")
    return "".join(parts), tuple(cells)


def cell_lines(data: bytes, cell: int) -> Optional[list[str]]:
    """The source lines of cell `cell` (1-based), as the notebook holds them."""
    cells = _load(data)["cells"]
    return lines_of(_text(cells[cell - 1].get("source", ""))) if 0 < cell <= len(cells) else None


def relocate(finding: Finding, cells: tuple[tuple[int, int], ...]) -> Finding:
    """A finding positioned in the joined text, moved to its cell."""
    cell, first = _cell_at(finding.line, cells)
    return replace(
        finding,
        cell=cell,
        line=finding.line - first + 1,
        end_line=finding.end_line - first + 1,
        fixes=tuple(Fix(f.applicability, f.message, tuple(relocate_edit(e, cells) for e in f.edits)) for f in finding.fixes),
    )


def relocate_edit(edit: Edit, cells: tuple[tuple[int, int], ...]) -> Edit:
    cell, first = _cell_at(edit.line, cells)
    return replace(edit, cell=cell, line=edit.line - first + 1, end_line=edit.end_line - first + 1)


def _cell_at(line: int, cells: tuple[tuple[int, int], ...]) -> tuple[int, int]:
    return cells[max(0, bisect_right([first for _, first in cells], line) - 1)]


def apply(data: bytes, edits: Iterable[Edit]) -> bytes:
    """The notebook with `edits` applied to its cells' sources; outputs, metadata, key order and
    the JSON layout stay as they were."""
    from ckptlint.fixes import apply_edits

    notebook = _load(data)
    by_cell: dict[int, list[Edit]] = {}
    for edit in edits:
        by_cell.setdefault(edit.cell or 0, []).append(edit)
    for number, cell_edits in by_cell.items():
        cell = notebook["cells"][number - 1]
        source = cell.get("source", "")
        fixed = apply_edits(_text(source), cell_edits)
        cell["source"] = lines_with_ends(fixed) if isinstance(source, list) else fixed
    return _dump(notebook, data.decode("utf-8"))


def unified_diffs(path: str, before: bytes, after: bytes) -> str:
    """A diff per changed cell, headed `path:cell N` as ruff writes them."""
    import difflib

    old, new = _load(before)["cells"], _load(after)["cells"]
    out = []
    for number, (a, b) in enumerate(zip(old, new), start=1):
        a_text, b_text = _text(a.get("source", "")), _text(b.get("source", ""))
        if a_text != b_text:
            name = f"{path}:cell {number}"
            lines = difflib.unified_diff(_ended(a_text), _ended(b_text), fromfile=name, tofile=name)
            out.append("".join(lines))
    return "".join(out)


def _ended(text: str) -> list[str]:
    lines = lines_with_ends(text)
    return [line if line.endswith("\n") else line + "\n" for line in lines]


# --- reading the JSON ----------------------------------------------------------------------------


def _load(data: bytes) -> dict[str, Any]:
    try:
        notebook = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        raise NotebookError(f"not a notebook: cannot decode as UTF-8 (byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise NotebookError(f"not a notebook: invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise NotebookError("not a notebook: no `cells` list (nbformat 4 is supported)")
    if not all(isinstance(c, dict) and isinstance(c.get("source", ""), (str, list)) for c in notebook["cells"]):
        raise NotebookError("not a notebook: a cell is not an object with a `source`")
    return notebook


def _language(notebook: dict[str, Any]) -> str:
    metadata = notebook.get("metadata") or {}
    for key in ("language_info", "kernelspec"):
        info = metadata.get(key)
        if isinstance(info, dict) and isinstance(info.get("name" if key == "language_info" else "language"), str):
            return info["name" if key == "language_info" else "language"].lower()
    return ""


def _text(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else source


def _cell_code(cell: dict[str, Any]) -> Optional[str]:
    """The cell's code with every IPython escape line replaced by `pass`, and `x = !cmd` by
    `x = []` (`x = %magic`: `x = None`), so that positions map one to one and `--confirm` can run
    it; None for cells that are not Python."""
    if cell.get("cell_type") != "code":
        return None
    text = _text(cell.get("source", ""))
    if not text.strip():
        return None
    lines = lines_of(text)
    if lines[-1] == "":
        lines.pop()
    if lines[0].startswith("%%"):
        if lines[0][2:].split(" ", 1)[0].strip() not in _PYTHON_CELL_MAGICS:
            return None
        lines[0] = "pass"
    return "\n".join(_blank_escapes(lines)) + "\n"


def _blank_escapes(lines: list[str]) -> list[str]:
    """Escapes count only where a logical line starts: not inside brackets, strings or after a
    backslash (a line starting with `%` there is Python's modulo)."""
    scanner = _Scanner()
    out = []
    for line in lines:
        if scanner.at_statement_start() and not line.lstrip().startswith("#"):
            capture = _CAPTURE.match(line)
            if capture is not None:
                out.append(capture.group(1) + ("[]" if capture.group(2) == "!" else "None"))
                continue
            if _ESCAPE.match(line):
                out.append(line[: len(line) - len(line.lstrip())] + "pass")
                continue
        scanner.feed(line)
        out.append(line)
    return out


class _Scanner:
    """Bracket depth, open triple-quoted strings and backslash continuations, line by line."""

    def __init__(self) -> None:
        self.depth = 0
        self.string: Optional[str] = None  # the open triple quote
        self.continued = False

    def at_statement_start(self) -> bool:
        return self.depth == 0 and self.string is None and not self.continued

    def feed(self, line: str) -> None:
        i, n = 0, len(line)
        while i < n:
            if self.string is not None:
                end = line.find(self.string, i)
                while end > 0 and line[end - 1] == "\\":
                    end = line.find(self.string, end + 1)
                if end < 0:
                    break
                i, self.string = end + 3, None
                continue
            char = line[i]
            if char == "#":
                break
            if char in "\"'":
                if line.startswith(char * 3, i):
                    self.string, i = char * 3, i + 3
                    continue
                i += 1
                while i < n and line[i] != char:
                    i += 2 if line[i] == "\\" else 1
            elif char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            i += 1
        self.continued = self.string is None and line.rstrip().endswith("\\")


def _dump(notebook: dict[str, Any], original: str) -> bytes:
    """JSON in the layout the notebook had: nbformat writes indent=1, keys as found, non-ASCII kept."""
    indent_match = re.search(r"\n( +)\"", original)
    indent = len(indent_match.group(1)) if indent_match else None
    text = json.dumps(notebook, indent=indent, ensure_ascii="\\u" in original and not re.search(r"[^\x00-\x7f]", original))
    return (text + ("\n" if original.endswith("\n") else "")).encode("utf-8")


# --- --confirm: a notebook runs as the module of its joined code ---------------------------------


@dataclass
class Runs:
    """Notebook findings as `--confirm` runs them."""

    moved: dict[Finding, Finding] = field(default_factory=dict)  # as reported -> in the joined code
    cells: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)  # path -> its cells


def runnable_findings(findings: Iterable[Finding], texts: dict[str, str]) -> Runs:
    """Each notebook finding moved into the joined code, whose text goes into `texts` (absolute
    path -> the code `--confirm` runs instead of the file)."""
    from ckptlint.source import SourceError, read_source

    runs = Runs()
    for finding in findings:
        if finding.cell is None:
            continue
        path = os.path.abspath(finding.path)
        if path not in runs.cells:
            try:
                source = read_source(finding.path)
            except SourceError:
                continue
            texts.setdefault(path, source.text)
            runs.cells[path] = source.cells or ()
        first = dict(runs.cells[path]).get(finding.cell)
        if first is not None:
            runs.moved[finding] = replace(finding, cell=None, line=finding.line + first - 1, end_line=finding.end_line + first - 1)
    return runs


def confirmations_in_cells(confirmations: dict[Finding, Confirmation], runs: Runs) -> dict[Finding, Confirmation]:
    """Verdicts keyed by the findings as reported; `nb.ipynb:LINE` in the evidence (a line of the
    joined code) spelled `nb.ipynb:cell N:LINE`."""
    back = {run: original for original, run in runs.moved.items()}
    out = {}
    for finding, confirmation in confirmations.items():
        original = back.get(finding, finding)
        if original is not finding:
            cells = runs.cells[os.path.abspath(original.path)]
            name = re.escape(os.path.basename(original.path))

            def in_cell(match: re.Match[str], cells: tuple[tuple[int, int], ...] = cells) -> str:
                cell, first = _cell_at(int(match.group(2)), cells)
                return f"{match.group(1)}:cell {cell}:{int(match.group(2)) - first + 1}"

            evidence = tuple(re.sub(rf"({name}):(\d+)", in_cell, item) for item in confirmation.evidence)
            confirmation = replace(confirmation, evidence=evidence)
        out[original] = confirmation
    return out
