"""`--confirm` on the command line: options, the output formats, exit codes, configuration."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ckptlint.cli import main
from ckptlint.config import ConfigError, load_settings

MODEL = """\
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(8, 8)
        self.block = nn.Sequential(nn.Linear(8, 8), nn.ReLU())

    def forward(self, x):
        return checkpoint(self.block, self.stem(x))
"""

FIXED = MODEL.replace("self.stem(x))", "self.stem(x), use_reentrant=False)")


def run(*args):
    return CliRunner().invoke(main, [*args, "--no-cache", "--torch-version", "2.13"])


def test_help_says_that_confirm_runs_the_projects_code():
    out = CliRunner().invoke(main, ["check", "--help"]).output
    assert "--confirm" in out and "executes the project's code" in out
    assert "--confirm-timeout SECONDS" in out and "--device [auto|cpu|cuda]" in out


def test_invalid_confirm_options_are_usage_errors(project):
    project({"net.py": MODEL})
    assert run("net.py", "--confirm", "--device", "tpu").exit_code == 2
    assert run("net.py", "--confirm", "--confirm-timeout", "0").exit_code == 2


def test_without_confirm_nothing_runs_and_json_is_unchanged(project):
    project({"net.py": MODEL})
    (entry,) = json.loads(run("net.py", "--format", "json").stdout)["findings"]
    assert "confirmation" not in entry
    assert list(entry) == ["code", "severity", "path", "line", "column", "end_line", "end_column", "message", "help", "fix"]


def test_every_format_carries_the_verdict(project):
    pytest.importorskip("torch")
    project({"net.py": MODEL})
    text = run("net.py", "--confirm")
    assert text.exit_code == 1  # findings: exit code unchanged
    lines = text.output.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("   = confirmed: "))
    assert lines[verdict - 2].startswith("   = help: ") and lines[verdict - 1].startswith("   = fix: ")
    assert "checkpoint at net.py:13 ran with use_reentrant omitted: effective use_reentrant=True (reentrant)" in lines[verdict]
    assert "ran Net() on x=float32[2, 8]" in lines[verdict]

    (entry,) = json.loads(run("net.py", "--confirm", "--format", "json").stdout)["findings"]
    assert entry["confirmation"]["verdict"] == "confirmed"
    assert entry["confirmation"]["target"] == "net.py::Net" and entry["confirmation"]["device"] == "cpu"

    sarif = json.loads(run("net.py", "--confirm", "--format", "sarif").stdout)
    assert sarif["runs"][0]["results"][0]["properties"]["confirmation"]["verdict"] == "confirmed"
    github = run("net.py", "--confirm", "--format", "github").stdout
    assert "%0A= confirmed: checkpoint at net.py:13" in github
    quiet = run("net.py", "--confirm", "--no-show-source", "--exit-zero")
    assert quiet.exit_code == 0 and "\n    = confirmed: " in quiet.output


def test_no_finding_means_nothing_to_confirm(project):
    pytest.importorskip("torch")
    project({"net.py": FIXED.replace("use_reentrant=False", "use_reentrant=False, preserve_rng_state=False")})
    # No finding, nothing to confirm: the exit code and output are the static ones.
    result = run("net.py", "--confirm")
    assert result.exit_code == 0 and "All checks passed!" in result.output


def test_cuda_requested_without_cuda_cannot_run(project):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    project({"net.py": MODEL})
    (entry,) = json.loads(run("net.py", "--confirm", "--device", "cuda", "--format", "json").stdout)["findings"]
    assert entry["confirmation"] == {"verdict": "could not run", "evidence": ["--device cuda was requested but CUDA is not available"], "target": "net.py::Net", "device": "", "cause": "crashed", "example": None}


def test_examples_come_from_the_configuration(project, tmp_path):
    pytest.importorskip("torch")
    needy = MODEL.replace("def __init__(self):", "def __init__(self, width):").replace("nn.Linear(8, 8)", "nn.Linear(width, width)")
    examples = "import torch\nimport ckptlint\n\n\n@ckptlint.example('net.Net')\ndef net():\n    from net import Net\n    return Net(3), (torch.randn(2, 3),), {}\n"
    config = '[tool.ckptlint.confirm]\nexamples = ["tools/examples.py"]\n'
    project({"net.py": needy, "tools/examples.py": examples, "pyproject.toml": config})
    assert load_settings(tmp_path / "pyproject.toml").confirm_examples == (str(tmp_path / "tools/examples.py"),)
    (entry,) = json.loads(run("net.py", "--confirm", "--format", "json").stdout)["findings"]
    assert entry["confirmation"]["verdict"] == "confirmed", entry
    assert entry["confirmation"]["evidence"][-1] == "ran Net with example net()"


def test_confirm_table_accepts_only_examples(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.ckptlint.confirm]\nexample = ["x.py"]\n')
    with pytest.raises(ConfigError, match=r"unknown key 'example' .*did you mean 'examples'"):
        load_settings(tmp_path / "pyproject.toml")
    (tmp_path / "pyproject.toml").write_text('[tool.ckptlint.confirm]\nexamples = "x.py"\n')
    with pytest.raises(ConfigError, match="must be an array of strings"):
        load_settings(tmp_path / "pyproject.toml")


def test_importing_ckptlint_and_the_confirm_package_does_not_import_torch():
    code = (
        "import sys, ckptlint, ckptlint.confirm\n"
        "@ckptlint.example('m.Net')\ndef f():\n    pass\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"]
