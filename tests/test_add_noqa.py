"""--add-noqa: a directive on the line each finding reports, merged into the noqa already there."""

from __future__ import annotations

import json

from click.testing import CliRunner
from test_notebooks import notebook

from ckptlint.cli import main

SOURCE = '''import torch
from torch.utils.checkpoint import checkpoint


def step(block, x):
    h = checkpoint(block, x)  # noqa: E501
    y = checkpoint(block, torch.randn(2, 2), use_reentrant=True)  # raw data
    z = checkpoint(block, x)  # noqa
    return checkpoint(
        block, h) + y + z
'''


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(main, [*args, "--no-cache", "--torch-version", "2.13"], input=input)


def test_directives_are_added_merged_and_silence_the_findings(project):
    root = project({"a.py": SOURCE})
    result = run("a.py", "--add-noqa")
    assert (result.exit_code, result.stderr) == (0, "Added 3 noqa directive(s).\n")
    assert (root / "a.py").read_text() == (
        SOURCE.replace("# noqa: E501", "# noqa: E501, CKPT006")
        .replace("# raw data", "# raw data  # noqa: CKPT001")
        .replace("return checkpoint(\n", "return checkpoint(  # noqa: CKPT006\n")
    )
    assert run("a.py").exit_code == 0
    again = run("a.py", "--add-noqa")
    assert again.stderr == "Added 0 noqa directive(s).\n" and (root / "a.py").read_text().count("noqa") == 4


def test_several_codes_on_one_line_and_lines_that_cannot_take_a_comment(project):
    source = (
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
        "def f(block):\n"
        "    return checkpoint(block, torch.randn(2, 2))\n\n\n"
        "def g(block, x):\n"
        "    return [checkpoint(block, x), '''\n"
        "    ''', checkpoint(block, x)]\n"
    )
    root = project({"b.py": source})
    result = run("b.py", "--add-noqa")
    assert result.exit_code == 0
    text = (root / "b.py").read_text()
    assert "    return checkpoint(block, torch.randn(2, 2))  # noqa: CKPT001, CKPT006\n" in text
    # The first finding of g's line ends inside a string literal: left alone and said so.
    assert "b.py:10: warning: no noqa comment added" in result.stderr
    assert "''', checkpoint(block, x)]  # noqa: CKPT006\n" in text


def test_notebook_cells_and_usage_errors(project):
    root = project({"nb.ipynb": notebook("from torch.utils.checkpoint import checkpoint\n", "def step(block, x):\n    return checkpoint(block, x)\n")})
    assert run("nb.ipynb", "--add-noqa").exit_code == 0
    cells = json.loads((root / "nb.ipynb").read_text())["cells"]
    assert cells[1]["source"] == ["def step(block, x):\n", "    return checkpoint(block, x)  # noqa: CKPT006\n"]
    assert run("nb.ipynb").exit_code == 0
    assert run("nb.ipynb", "--add-noqa", "--fix").exit_code == 2
    assert run("-", "--add-noqa", input="x = 1\n").exit_code == 2
