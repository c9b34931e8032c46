"""The command line as users and CI see it: exit codes, formats, suppressions, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import ROOT

import ckptlint.source
from ckptlint.cli import main

BAD = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return checkpoint(block, x)\n"
GOOD = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return checkpoint(block, x, use_reentrant=False)\n"
NO_GRAD = "import torch\nfrom torch.utils.checkpoint import checkpoint\n\n\ndef ev(block, x):\n    with torch.no_grad():\n        return checkpoint(block, x)\n"


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(main, [*args, "--no-cache", "--torch-version", "2.13", "--transformers-version", "5.23"], input=input)


def test_exit_codes_clean_findings_and_exit_zero(project):
    project({"good.py": GOOD, "bad.py": BAD})
    assert run("good.py").exit_code == 0
    result = run("bad.py")
    assert result.exit_code == 1
    assert "bad.py:5:12: CKPT006" in result.output
    assert run("bad.py", "--exit-zero").exit_code == 0
    assert run(".", "--quiet").exit_code == 1


def test_text_output_has_excerpt_caret_and_help(project):
    project({"bad.py": BAD})
    out = run("bad.py").output
    assert "5 |     return checkpoint(block, x)\n" in out
    assert "  |            ^^^^^^^^^^^^^^^^^^^^\n" in out
    assert "= help: pass `use_reentrant=False`" in out
    assert "\x1b[" not in out
    assert "return checkpoint" not in run("bad.py", "--no-show-source").output


def test_bad_files_exit_2_and_the_others_are_still_reported(project, monkeypatch):
    root = project({"a_syntax.py": "def broken(:\n", "c_bad.py": BAD, "d_unreadable.py": GOOD})
    (root / "b_latin1.py").write_bytes(b"x = '\xff\xfe'\n")
    real_open = os.open

    def failing_open(path, *args, **kwargs):
        if str(path).endswith("d_unreadable.py"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(ckptlint.source.os, "open", failing_open)
    result = run(".", "--format", "json")
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    errors = {e["path"]: e["message"] for e in document["errors"]}
    assert "syntax error at line 1" in errors["a_syntax.py"]
    assert "cannot decode" in errors["b_latin1.py"]
    assert "Permission denied" in errors["d_unreadable.py"]
    assert [(f["path"], f["code"]) for f in document["findings"]] == [("c_bad.py", "CKPT006")]
    assert document["files_checked"] == 1


def test_missing_path_is_an_error(project):
    project({"bad.py": BAD})
    result = run("bad.py", "nope.py")
    assert result.exit_code == 2
    assert "nope.py: error: no such file or directory" in result.output
    assert "CKPT006" in result.output


def test_json_and_sarif_carry_the_same_findings(project):
    project({"bad.py": BAD, "eval.py": NO_GRAD})
    document = json.loads(run(".", "--format", "json").stdout)
    assert set(document) == {"version", "files_checked", "findings", "errors"}
    rows = {(f["path"], f["line"], f["column"], f["code"]) for f in document["findings"]}
    assert rows == {("bad.py", 5, 12, "CKPT006"), ("eval.py", 7, 16, "CKPT006"), ("eval.py", 7, 16, "CKPT008")}
    sarif = json.loads(run(".", "--format", "sarif").stdout)
    assert sarif["version"] == "2.1.0"
    results = sarif["runs"][0]["results"]
    located = {
        (r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], r["locations"][0]["physicalLocation"]["region"]["startLine"], r["locations"][0]["physicalLocation"]["region"]["startColumn"], r["ruleId"])
        for r in results
    }
    assert located == rows
    assert {rule["id"] for rule in sarif["runs"][0]["tool"]["driver"]["rules"]} >= {"CKPT006", "CKPT008"}


def test_github_annotations(project):
    project({"bad.py": BAD})
    out = run("bad.py", "--format", "github").output
    assert out.startswith("::warning title=ckptlint (CKPT006),file=bad.py,line=5,col=12,")


def test_output_file_and_statistics(project, tmp_path):
    project({"bad.py": BAD, "eval.py": NO_GRAD})
    result = run(".", "--format", "json", "--output-file", "report.json")
    assert result.exit_code == 1 and result.stdout == ""
    assert len(json.loads((tmp_path / "report.json").read_text())["findings"]) == 3
    stats = run(".", "--statistics").output
    assert "   2  CKPT006" in stats and "   1  CKPT008" in stats


def test_select_and_ignore(project):
    project({"eval.py": NO_GRAD})
    assert {line.split()[1] for line in run("eval.py", "--select", "CKPT008", "-q", "--no-show-source").output.splitlines() if ": CKPT" in line} == {"CKPT008"}
    assert run("eval.py", "--ignore", "CKPT006,CKPT008").exit_code == 0
    assert run("eval.py", "--select", "CKPT00", "--ignore", "CKPT006", "-q").output.count("CKPT006") == 0


def test_suppression_comments(project):
    project(
        {
            "noqa_code.py": BAD.replace("checkpoint(block, x)\n", "checkpoint(block, x)  # noqa: CKPT006\n"),
            "noqa_other.py": BAD.replace("checkpoint(block, x)\n", "checkpoint(block, x)  # noqa: CKPT001\n"),
            "noqa_bare.py": BAD.replace("checkpoint(block, x)\n", "checkpoint(block, x)  # noqa\n"),
            "disable.py": BAD.replace("checkpoint(block, x)\n", "checkpoint(block, x)  # ckptlint: disable=CKPT001,CKPT006\n"),
            "disable_file.py": "# ckptlint: disable-file\n" + BAD,
        }
    )
    result = run(".", "--format", "json")
    assert [f["path"] for f in json.loads(result.stdout)["findings"]] == ["noqa_other.py"]


def test_per_file_ignores_and_unknown_config_key(project):
    root = project({"scripts/bad.py": BAD, "src/bad.py": BAD, "pyproject.toml": '[tool.ckptlint]\nper-file-ignores = { "scripts/*" = ["CKPT006"] }\n'})
    findings = json.loads(run(".", "--format", "json").stdout)["findings"]
    assert [f["path"] for f in findings] == [os.path.join("src", "bad.py")]
    (root / "pyproject.toml").write_text("[tool.ckptlint]\nselct = ['CKPT006']\n")
    result = run(".")
    assert result.exit_code == 2
    assert "selct" in result.output and "Traceback" not in result.output


def test_stdin_with_filename(project):
    result = run("-", "--stdin-filename", "model.py", input=BAD)
    assert result.exit_code == 1
    assert "model.py:5:12: CKPT006" in result.output


def test_unknown_option_is_a_usage_error(project):
    project({"bad.py": BAD})
    assert run("bad.py", "--formatt", "json").exit_code == 2


def test_rule_and_rules_commands():
    runner = CliRunner()
    document = runner.invoke(main, ["rule", "CKPT006"])
    assert document.exit_code == 0
    assert document.output.startswith("# CKPT006 implicit-reentrant-mode")
    assert "## Why is this bad?" in document.output
    assert runner.invoke(main, ["rule", "CKPT999"]).exit_code == 2
    table = runner.invoke(main, ["rules"]).output
    assert "CKPT006  implicit-reentrant-mode" in table and "CKPT008  checkpoint-without-grad" in table
    assert runner.invoke(main, ["--version"]).output.startswith("ckptlint, version ")


def test_cache_gives_identical_findings_and_clean_removes_it(project, tmp_path):
    project({"bad.py": BAD, "eval.py": NO_GRAD})
    runner = CliRunner()
    args = [".", "--format", "json", "--torch-version", "2.13"]
    cold = json.loads(runner.invoke(main, args).stdout)
    assert (tmp_path / ".ckptlint_cache").is_dir()
    warm = json.loads(runner.invoke(main, args).stdout)
    assert cold == warm and len(cold["findings"]) == 3
    assert "removed" in runner.invoke(main, ["clean"]).output
    assert not (tmp_path / ".ckptlint_cache").exists()


def test_static_linting_never_imports_torch(project):
    project({"bad.py": BAD})
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom ckptlint.cli import main\n"
        "r = CliRunner().invoke(main, ['.', '--no-cache'])\n"
        "print(r.exit_code, 'torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "False", "False"]


def test_a_run_that_parses_nothing_never_imports_libcst(project):
    """Importing LibCST is 0.2 s: a commit touching no checkpoint, or a warm run, does not pay it."""
    project({"util.py": "def double(x):\n    return 2 * x\n", "bad.py": BAD})
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom ckptlint.cli import main\n"
        "runs = [CliRunner().invoke(main, args).exit_code for args in (['util.py', '--no-cache'], ['bad.py'])]\n"
        "print(*runs, 'libcst' in sys.modules)\n"
    )
    run = [sys.executable, "-c", code]
    assert subprocess.run(run, capture_output=True, text=True, check=True).stdout.split() == ["0", "1", "True"]
    # bad.py's result is cached now.
    assert subprocess.run(run, capture_output=True, text=True, check=True).stdout.split() == ["0", "1", "False"]


def test_python_dash_m_entry_point(project):
    project({"bad.py": BAD})
    result = subprocess.run([sys.executable, "-m", "ckptlint", "bad.py", "--no-cache"], capture_output=True, text=True)
    assert result.returncode == 1 and "CKPT006" in result.stdout


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_parallel_and_serial_runs_agree(jobs, monkeypatch):
    monkeypatch.chdir(ROOT)
    # A tiny threshold forces the process pool even on the small fixture tree.
    monkeypatch.setattr("ckptlint.engine._PARALLEL_MIN_BYTES", 0)
    document = json.loads(CliRunner().invoke(main, ["fixtures", "--format", "json", "--no-cache", "-j", jobs, "--torch-version", "2.13"]).stdout)
    serial = json.loads(CliRunner().invoke(main, ["fixtures", "--format", "json", "--no-cache", "-j", "1", "--torch-version", "2.13"]).stdout)
    assert document == serial and document["findings"]


# Python ends lines at \n, \r\n and \r only; str.splitlines() also splits at form feeds (old
# files have them as page breaks), \x1c-\x1e, \x85 and \u2028/\u2029, which shifted every line after one.
@pytest.mark.parametrize("separator", ["\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\x0b"])
def test_characters_that_str_splitlines_breaks_at_do_not_shift_lines(project, separator):
    header = f"from torch.utils.checkpoint import checkpoint\n#{separator} page break\nx = '{separator}'\n"
    project({"quiet.py": header + "\n\ndef step(block, x):\n    return checkpoint(block, x)  # noqa: CKPT006\n", "loud.py": header + BAD})
    assert run("quiet.py").exit_code == 0  # the noqa is on the finding's line
    out = run("loud.py").output
    assert "loud.py:8:12: CKPT006" in out and "8 |     return checkpoint(block, x)\n" in out, out
    diff = run("loud.py", "--diff").output
    assert "@@ -5,4 +5,4 @@" in diff and "+    return checkpoint(block, x, use_reentrant=True)\n" in diff, diff
