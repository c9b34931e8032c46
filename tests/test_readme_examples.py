"""README's example outputs are what the commands it names print: each is run here and compared."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, ROOT
from conftest import readme_block as block_after

from ckptlint.cli import main


def run(*args: str):
    return CliRunner().invoke(main, [*args, "--no-cache"])


def test_example_output(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = run("fixtures/cifar_checkpointed.py")
    assert result.exit_code == 1
    assert block_after("Example output (one of the four findings") in result.stdout


def test_diff_example(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = run("fixtures/cifar_checkpointed.py", "--diff")
    assert result.exit_code == 1
    assert result.stdout + result.stderr == block_after("`--diff` on the seed report's model")


def test_fix_example(tmp_path, monkeypatch):
    for name in ("cifar_checkpointed.py", "rng_replay.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    result = run(".", "--fix", "--show-fixes", "--no-show-source")
    assert result.exit_code == 1
    head, tail = block_after("`ckptlint . --fix --show-fixes --no-show-source`").split("...\n")
    assert (result.stdout + result.stderr).startswith(head), result.output
    assert (result.stdout + result.stderr).endswith(tail), result.output


def test_notebook_examples(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = run("fixtures/cifar_notebook.ipynb")
    assert result.stdout.startswith(block_after("`fixtures/cifar_notebook.ipynb` is the seed report's CIFAR model")), result.stdout
    diff = run("fixtures/cifar_notebook.ipynb", "--diff", "--unsafe-fixes")
    assert diff.stdout.startswith(block_after("`ckptlint fixtures/cifar_notebook.ipynb --diff --unsafe-fixes`")), diff.stdout


def test_baseline_example(tmp_path, monkeypatch):
    for name in ("cifar_checkpointed.py", "rng_replay.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    assert run(".", "--baseline", "ckptlint-baseline.json", "--update-baseline").exit_code == 0
    model = tmp_path / "cifar_checkpointed.py"
    lines = model.read_text().splitlines(keepends=True)
    lines.insert(0, "import os\n")  # every line moves
    call = "checkpoint(self.cnn_block_2, X)"  # on line 38 before the insert
    assert call in lines[38]
    lines[38] = lines[38].replace(call, call[:-1] + ", use_reentrant=False)")
    lines.append("\n\ndef new_step(block, x):\n    return torch.utils.checkpoint.checkpoint(block, x)\n")
    model.write_text("".join(lines))
    result = run(".", "--baseline", "ckptlint-baseline.json", "--statistics")
    assert result.exit_code == 1
    assert result.stdout + result.stderr == block_after("(`ckptlint . --baseline ckptlint-baseline.json --statistics`"), result.output


def test_flake8_example(tmp_path):
    pytest.importorskip("flake8")
    source = block_after("(`flake8 train.py`, in a folder holding the file below", "python")
    (tmp_path / "train.py").write_text(source)
    result = subprocess.run([sys.executable, "-m", "flake8", "train.py"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stdout == block_after("(`flake8 train.py`, in a folder holding the file below"), result.stdout
