"""Messages say what happened and where: positions, the parsing Python, colour on request."""

from __future__ import annotations

import json
import platform
import sys

import pytest
from click.testing import CliRunner

from ckptlint.cli import main

BAD = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return checkpoint(block, x)\n"
HOST = platform.python_version()


def errors(*args: str) -> dict[str, str]:
    result = CliRunner().invoke(main, [*args, "--no-cache", "--format", "json", "--torch-version", "2.13"])
    assert result.exit_code == 2, result.output
    return {e["path"]: e["message"] for e in json.loads(result.stdout)["errors"]}


def test_a_nul_byte_is_reported_at_its_position(project):
    root = project({})
    (root / "nul.py").write_bytes(b"x = 1\ny = 'a\x00b'\n")
    message = errors("nul.py")["nul.py"]
    assert message.startswith("syntax error at line 2, column 7: ") and "null bytes" in message


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the host parses it")
@pytest.mark.parametrize(
    ("source", "feature", "version"),
    [
        ("type Vector = list[float]\n", "a type statement", "3.12"),
        ("def first[T](items: list[T]) -> T:\n    return items[0]\n", "type parameters", "3.12"),
        ("name = 'x'\ngreeting = t'hello {name}'\n", "a template string", "3.14"),
    ],
)
def test_newer_syntax_names_the_python_it_needs(project, source, feature, version):
    project({"new.py": source})
    message = errors("new.py")["new.py"]
    assert message.startswith("syntax error at line ")
    assert f"Python {HOST} cannot parse {feature}, which needs Python {version} or newer: run ckptlint on a newer Python" in message


def test_a_plain_syntax_error_names_no_version(project):
    project({"broken.py": "def broken(:\n"})
    assert "needs Python" not in errors("broken.py")["broken.py"]


def test_color_always_colours_through_a_pipe(project):
    project({"bad.py": BAD})
    coloured = CliRunner().invoke(main, ["bad.py", "--no-cache", "--color", "always"]).stdout
    assert "\x1b[" in coloured
    plain = CliRunner().invoke(main, ["bad.py", "--no-cache"]).stdout
    assert "\x1b[" not in plain


def test_no_all_checks_passed_when_a_file_could_not_be_checked(project):
    project({"broken.py": "def broken(:\n", "good.py": "x = 1\n"})
    output = CliRunner().invoke(main, [".", "--no-cache"]).output
    assert "All checks passed" not in output
    assert output.endswith("No findings in the files checked.\n1 file(s) could not be checked.\n")


# compile() rejects these; ast.parse and LibCST accept them (found by scripts/corpus_report.py in
# the standard library's test/test_future_stmt/).
@pytest.mark.parametrize(
    "source",
    [
        '"""doc"""\nimport os\nfrom __future__ import annotations\n',
        "from __future__ import annotations\nx = 1\n\ndef f():\n    from __future__ import division\n",
        "from __future__ import rested_snopes\n",
        "from __future__ import braces\n",
        "import os; from __future__ import annotations\n",
    ],
)
def test_misplaced_or_unknown_future_imports_are_syntax_errors_as_compile_says(project, source):
    project({"future.py": source, "other.py": BAD})
    with pytest.raises(SyntaxError) as expected:
        compile(source, "future.py", "exec")
    found = errors("future.py", "other.py")
    assert found == {"future.py": f"syntax error at line {expected.value.lineno}, column {expected.value.offset}: {expected.value.msg}"}


@pytest.mark.parametrize(
    "source",
    [
        '"""doc"""\nfrom __future__ import annotations\nfrom __future__ import division, generator_stop\nimport os\n',
        "from __future__ import annotations; from __future__ import division\nx = 1\n",
        "# __future__ in a comment\nx = '__future__'\n",
        "",
    ],
)
def test_future_imports_that_compile_accepts_are_no_error(project, source):
    project({"future.py": source + BAD})
    compile(source + BAD, "future.py", "exec")
    result = CliRunner().invoke(main, ["future.py", "--no-cache", "--format", "json", "--torch-version", "2.13"])
    assert (result.exit_code, json.loads(result.stdout)["errors"]) == (1, []), result.output
