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
