"""--progress: a status line on a terminal for runs over a second, nothing in pipes or CI unless
asked for."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import ROOT

import ckptlint.progress
from ckptlint.cli import main

CONFIRM = ["fixtures/cifar_checkpointed.py", "--confirm", "--no-cache", "--select", "CKPT001", "--color", "never"]
STATUS = "ckptlint: confirming 0/1: fixtures/cifar_checkpointed.py::CIFAR10Model ("


def in_terminal(*args: str, env: dict[str, str] | None = None) -> str:
    """Run ckptlint with stdout and stderr on a pseudo-terminal; everything it wrote."""
    controller, terminal = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if k != "CI"} | (env or {})
    process = subprocess.Popen([sys.executable, "-m", "ckptlint", *args], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal, env=environment)
    os.close(terminal)
    chunks = []
    while True:
        try:
            data = os.read(controller, 65536)
        except OSError:  # the terminal closed: the process is done
            break
        if not data:
            break
        chunks.append(data)
    process.wait()
    os.close(controller)
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
def test_a_terminal_shows_the_running_confirm_target_then_clears_it():
    pytest.importorskip("torch")
    out = in_terminal(*CONFIRM)
    assert "\r\x1b[K" + STATUS in out
    # Cleared before the report is printed.
    assert out.index("\r\x1b[K" + STATUS) < out.rindex("\r\x1b[K") < out.index("fixtures/cifar_checkpointed.py:36:13: CKPT001")
    assert STATUS not in in_terminal(*CONFIRM, "--no-progress")
    assert STATUS not in in_terminal(*CONFIRM, env={"CI": "true"})


@pytest.mark.slow
def test_pipes_get_whole_lines_only_when_asked():
    pytest.importorskip("torch")
    quiet = subprocess.run([sys.executable, "-m", "ckptlint", *CONFIRM], cwd=ROOT, capture_output=True, text=True)
    assert "ckptlint: confirming" not in quiet.stderr
    asked = subprocess.run([sys.executable, "-m", "ckptlint", *CONFIRM, "--progress"], cwd=ROOT, capture_output=True, text=True)
    assert STATUS in asked.stderr and "\r" not in asked.stderr
    assert "ckptlint: confirming" not in asked.stdout


def test_lint_phases_count_files(project, monkeypatch):
    monkeypatch.setattr(ckptlint.progress, "DELAY", 0.0)
    project({f"m{i}.py": "from torch.utils.checkpoint import checkpoint\n\n\ndef f(b, x):\n    return checkpoint(b, x)\n" for i in range(3)} | {"plain.py": "x = 1\n"})
    result = CliRunner().invoke(main, [".", "--no-cache", "-j", "1", "--progress"])
    assert "ckptlint: indexing 4/4 files\n" in result.stderr
    assert "ckptlint: analysing 3/3 files\n" in result.stderr
    assert "ckptlint:" not in result.stdout
    assert "ckptlint: indexing" not in CliRunner().invoke(main, [".", "--no-cache", "-j", "1"]).stderr
