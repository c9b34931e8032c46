"""README's --confirm and compare() example outputs are what the runs print."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import re

import pytest
from click.testing import CliRunner
from conftest import ROOT
from conftest import readme_block as block_after

from ckptlint.cli import main

pytest.importorskip("torch")



def test_confirm_text_and_json_examples(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["fixtures/cifar_checkpointed.py", "--confirm", "--no-cache"])
    assert result.exit_code == 1
    assert result.stdout.startswith(block_after("The seed report's CIFAR model, exactly as its author wrote it")), result.stdout
    result = CliRunner().invoke(main, ["fixtures/moe_aux_loss.py", "--confirm", "--no-cache", "--format", "json"])
    shown = json.loads(block_after("In JSON (`fixtures/moe_aux_loss.py`):", "json"))
    found = [f for f in json.loads(result.stdout)["findings"] if (f["code"], f["line"]) == (shown["code"], shown["line"])]
    assert found == [shown], found


def test_compare_example(tmp_path, monkeypatch):
    # A module of its own, as in a test file: compare() patches `checkpoint` where modules imported it.
    (tmp_path / "readme_compare_example.py").write_text(block_after("### In your own tests", "python"))
    monkeypatch.syspath_prepend(str(tmp_path))
    example = importlib.import_module("readme_compare_example")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(AssertionError) as raised:
        example.test_checkpointing_does_not_change_training()
    shown = block_after("    compare(Net(reentrant=True), x).assert_identical()\n```").splitlines()
    assert printed.getvalue().splitlines() == shown[:1]
    error = [re.sub(r"^E {11}", "", line) for line in shown[1:]]
    assert f"AssertionError: {raised.value}".splitlines()[: len(error)] == error, str(raised.value)
