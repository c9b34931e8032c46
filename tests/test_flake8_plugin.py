"""The flake8 extension: the same findings at the same positions as ckptlint, flake8's noqa and
selection on top, and nothing loaded for files that cannot matter."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from importlib.metadata import entry_points

import pytest
from click.testing import CliRunner
from conftest import ROOT

from ckptlint.cli import main

pytest.importorskip("flake8")
FLAKE8_LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<column>\d+): (?P<code>CKPT\d{3}) (?P<message>.*)$")


def flake8(*args: str, cwd=ROOT, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8", *args], cwd=cwd, capture_output=True, text=True, input=input)


def test_the_extension_is_registered():
    (plugin,) = [e for e in entry_points(group="flake8.extension") if e.value.startswith("ckptlint")]
    # flake8 >= 6 accepts at most three letters as a plugin's prefix; the codes stay CKPTnnn.
    assert (plugin.name, plugin.value) == ("CKP", "ckptlint.flake8_plugin:CkptlintChecker")
    assert "ckptlint: " in flake8("--version").stdout


def test_flake8_reports_what_ckptlint_reports_on_the_fixtures(tmp_path, monkeypatch):
    """flake8 hands over one file at a time: each is analysed against the whole project, as
    `ckptlint FILE` does, so findings that come from another file's checkpoint arrive too."""
    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'fixtures'\n")
    result = flake8("--select", "CKPT", "fixtures/", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    found = {tuple(m.group("path", "line", "column", "code", "message")) for m in map(FLAKE8_LINE.match, result.stdout.splitlines())}
    monkeypatch.chdir(tmp_path)
    ckptlint = json.loads(CliRunner().invoke(main, ["fixtures/", "--format", "json", "--no-cache"]).stdout)
    expected = {(f["path"], str(f["line"]), str(f["column"]), f["code"], f["message"]) for f in ckptlint["findings"] if f["path"].endswith(".py")}
    assert len(expected) >= 55
    assert found == expected


def test_noqa_selection_and_stdin(tmp_path):
    source = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return checkpoint(block, x)\n"
    (tmp_path / "a.py").write_text(source)
    (tmp_path / "b.py").write_text(source.replace("x)\n", "x)  # noqa: CKPT006\n"))
    result = flake8("--select", "CKPT", "a.py", "b.py", cwd=tmp_path)
    assert result.stdout.startswith("a.py:5:12: CKPT006 `checkpoint` called without `use_reentrant`")
    assert "b.py" not in result.stdout and result.returncode == 1
    assert flake8("--select", "CKPT", "--extend-ignore", "CKPT006", "a.py", cwd=tmp_path).returncode == 0
    piped = flake8("--select", "CKPT", "-", cwd=tmp_path, input=source)
    assert piped.stdout.startswith("stdin:5:12: CKPT006")


def test_files_that_cannot_matter_load_nothing(tmp_path):
    (tmp_path / "plain.py").write_text("import torch\n\n\ndef f(x):\n    return torch.relu(x)\n")
    script = (
        "import sys\n"
        "from flake8.main.cli import main\n"
        "code = main(['--select', 'CKPT', 'plain.py'])\n"
        "print(code, 'ckptlint.engine' in sys.modules, 'libcst' in sys.modules, 'ckptlint.flake8_plugin' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert result.stdout.split() == ["0", "False", "False", "True"], result.stderr
