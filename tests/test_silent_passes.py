"""Nothing turns ckptlint off by mistake: a mistyped code is an error, default excludes always apply."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ckptlint.cli import main

BAD = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return checkpoint(block, x)\n"


def run(*args: str):
    return CliRunner().invoke(main, [*args, "--no-cache", "--torch-version", "2.13", "--transformers-version", "5.23"])


@pytest.mark.parametrize(
    ("option", "code", "hint"),
    [
        ("--select", "CKPT0006", "did you mean 'CKPT006'?"),
        ("--select", "CKPT999", "no rule code starts with 'CKPT999'"),
        ("--extend-select", "CKPT9", "no rule code starts with 'CKPT9'"),
        ("--ignore", "CKPT0O6", "invalid rule code"),
        ("--ignore", "CKPT0066", "did you mean 'CKPT006'?"),
    ],
)
def test_a_code_that_matches_no_rule_is_a_usage_error(project, option, code, hint):
    project({"bad.py": BAD})
    result = run("bad.py", option, code)
    assert result.exit_code == 2, result.output
    assert hint in result.output
    assert "All checks passed" not in result.output


@pytest.mark.parametrize(
    "body",
    ['select = ["CKPT0006"]', 'ignore = ["CKPT999"]', 'per-file-ignores = { "*.py" = ["CKPT01"] }', 'severity = { CKPT0061 = "error" }'],
)
def test_a_configured_code_that_matches_no_rule_is_an_error(project, body):
    project({"bad.py": BAD, "ckptlint.toml": body + "\n"})
    result = run("bad.py")
    assert result.exit_code == 2, result.output
    assert "ckptlint.toml" in result.output and "matches no rule" in result.output


@pytest.mark.parametrize("code", ["CKPT", "CKPT0", "CKPT00", "CKPT006", "ALL"])
def test_real_codes_and_prefixes_are_accepted(project, code):
    project({"bad.py": BAD})
    assert run("bad.py", "--select", code).exit_code == 1


def test_force_exclude_applies_the_default_excludes_without_a_config(project):
    """What the pre-commit hook passes: every staged file by name, `--force-exclude`, no config."""
    names = ["build/gen.py", ".venv/lib/site.py", "dist/pkg.py", "node_modules/x/tool.py", "pkg.egg-info/m.py", "src/model.py"]
    project({name: BAD for name in names})
    result = run("--force-exclude", "--format", "json", *names)
    assert [f["path"] for f in json.loads(result.stdout)["findings"]] == ["src/model.py"]
    # Without --force-exclude, a file named on the command line is linted (ruff semantics).
    assert len(json.loads(run("--format", "json", *names).stdout)["findings"]) == len(names)
