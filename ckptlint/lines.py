"""Lines as Python counts them: ended by \\n, \\r\\n or \\r only. `str.splitlines()` also ends lines
at form feeds, \\x1c-\\x1e, \\x85 and \\u2028/\\u2029, which may stand in comments and strings: every
line after one would be numbered differently from the parser's positions."""

from __future__ import annotations

import re

LINE_BREAK = re.compile(r"\r\n|\r|\n")


def lines_of(text: str) -> list[str]:
    """The lines without their ends (a text ending with a line break ends with an empty line)."""
    return LINE_BREAK.split(text)


def lines_with_ends(text: str) -> list[str]:
    """The lines with their ends, as `splitlines(keepends=True)` gives them for plain line breaks."""
    starts = [0, *(match.end() for match in LINE_BREAK.finditer(text))]
    return [text[start:end] for start, end in zip(starts, [*starts[1:], len(text)]) if start < end]


def newline_of(text: str) -> str:
    """The file's first line break, or \\n."""
    match = LINE_BREAK.search(text)
    return match.group() if match else "\n"
