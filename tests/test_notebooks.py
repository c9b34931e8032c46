"""Jupyter notebooks through the command line: discovery, cells, magics, reporting, fixes."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner
from conftest import FIXTURES

from ckptlint.cli import main

NOTEBOOK = FIXTURES / "cifar_notebook.ipynb"


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(main, [*args, "--no-cache", "--torch-version", "2.13", "--transformers-version", "5.23"], input=input)


def notebook(*cells: str, language: str = "python", cell_type: str = "code") -> str:
    document = {
        "cells": [{"cell_type": cell_type, "execution_count": None, "id": str(i), "metadata": {}, "outputs": [], "source": source.splitlines(keepends=True)} for i, source in enumerate(cells)],
        "metadata": {"kernelspec": {"display_name": language, "language": language, "name": language}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(document, indent=1) + "\n"


IMPORT = "from torch.utils.checkpoint import checkpoint\n"
CALL = "def step(block, x):\n    return checkpoint(block, x)\n"


def test_findings_are_reported_per_cell(tmp_path, monkeypatch):
    monkeypatch.chdir(FIXTURES.parent)
    result = run("fixtures/cifar_notebook.ipynb")
    assert result.exit_code == 1
    assert "fixtures/cifar_notebook.ipynb:cell 3:29:13: CKPT001 reentrant checkpoint of `self.cnn_block_1`" in result.output
    assert "29 |         X = torch.utils.checkpoint.checkpoint(self.cnn_block_1, X)  # expect: CKPT001, CKPT006\n" in result.output
    findings = json.loads(run("fixtures/cifar_notebook.ipynb", "--format", "json").stdout)["findings"]
    assert [(f["cell"], f["line"], f["column"], f["code"]) for f in findings] == [
        (3, 29, 13, "CKPT001"), (3, 29, 13, "CKPT006"), (3, 31, 13, "CKPT001"), (3, 31, 13, "CKPT006"),
    ]  # fmt: skip
    assert findings[1]["fix"]["edits"][0]["cell"] == 3
    github = run("fixtures/cifar_notebook.ipynb", "--format", "github").stdout
    assert "::fixtures/cifar_notebook.ipynb:cell 3:29:13: CKPT001" in github
    sarif = json.loads(run("fixtures/cifar_notebook.ipynb", "--format", "sarif").stdout)
    assert sarif["runs"][0]["results"][0]["properties"]["cell"] == 3


def test_default_discovery_includes_notebooks(project):
    project({"train.ipynb": notebook(IMPORT, CALL), "model.py": "x = 1\n"})
    result = run(".", "--statistics")
    assert result.exit_code == 1 and "1  CKPT006" in result.output
    assert "train.ipynb:cell 2:2:12: CKPT006" in run(".").output


def test_magics_shell_escapes_and_foreign_cells_are_skipped(project):
    source = notebook(
        "%matplotlib inline\n!pip install torch\n" + IMPORT,
        "%%bash\ncheckpoint(block, x)\n",
        "files = !ls\nfor name in files:\n    !echo {name}\ncheckpoint?\n??checkpoint\n",
        "%%time\ndef step(block, x):\n    return checkpoint(block, x,\n        use_reentrant=False) % 2\n",
        # `%` that continues an expression is Python's modulo, not a magic.
        "y = (1\n% 2)\n" + CALL,
    )
    project({"nb.ipynb": source})
    result = run("nb.ipynb", "--format", "json")
    assert json.loads(result.stdout)["errors"] == []
    assert [(f["cell"], f["line"]) for f in json.loads(result.stdout)["findings"]] == [(5, 4)]
    project({"r.ipynb": notebook(IMPORT, CALL, language="R"), "md.ipynb": notebook(IMPORT + CALL, cell_type="markdown")})
    assert run("r.ipynb", "md.ipynb").exit_code == 0


def test_noqa_in_a_cell(project):
    project({"nb.ipynb": notebook(IMPORT, CALL.replace("x)\n", "x)  # noqa: CKPT006\n"))})
    assert run("nb.ipynb").exit_code == 0


def test_fix_writes_cells_back_without_touching_outputs_or_metadata(tmp_path, monkeypatch):
    shutil.copy(NOTEBOOK, tmp_path / "nb.ipynb")
    monkeypatch.chdir(tmp_path)
    diff = run("nb.ipynb", "--diff", "--unsafe-fixes")
    assert diff.exit_code == 1
    assert diff.stdout.startswith("--- nb.ipynb:cell 3\n+++ nb.ipynb:cell 3\n")
    assert "+        X = torch.utils.checkpoint.checkpoint(self.cnn_block_1, X, use_reentrant=False)  # expect: CKPT001, CKPT006\n" in diff.stdout
    result = run("nb.ipynb", "--fix", "--unsafe-fixes")
    assert result.exit_code == 0 and "(4 fixed, 0 remaining)" in result.output
    before, after = NOTEBOOK.read_text(), (tmp_path / "nb.ipynb").read_text()
    # Byte for byte the same file but for the two fixed lines of cell 3.
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(before.splitlines()) == len(after.splitlines()) and len(changed) == 2
    assert all(b == a.replace(", X)", ", X, use_reentrant=False)") for a, b in changed)
    old, new = json.loads(before), json.loads(after)
    assert old["metadata"] == new["metadata"]
    assert [(c.get("outputs"), c["metadata"], c.get("execution_count")) for c in old["cells"]] == [
        (c.get("outputs"), c["metadata"], c.get("execution_count")) for c in new["cells"]
    ]
    assert run("nb.ipynb", "--diff", "--unsafe-fixes").stdout == ""


def test_add_noqa_and_stdin_in_notebooks(project):
    root = project({"nb.ipynb": notebook(IMPORT, CALL)})
    result = run("-", "--stdin-filename", "nb.ipynb", input=(root / "nb.ipynb").read_text())
    assert "nb.ipynb:cell 2:2:12: CKPT006" in result.output
    fixed = run("-", "--stdin-filename", "nb.ipynb", "--fix", input=(root / "nb.ipynb").read_text())
    assert "checkpoint(block, x, use_reentrant=True)" in "".join(json.loads(fixed.stdout)["cells"][1]["source"])


def test_a_broken_notebook_is_a_file_error(project):
    project({"bad.ipynb": '{"cells": [', "worse.ipynb": '{"nbformat": 4}', "ok.py": IMPORT + CALL})
    result = run(".")
    assert result.exit_code == 2
    assert "bad.ipynb: error: not a notebook: invalid JSON at line 1, column 12" in result.output
    assert "worse.ipynb: error: not a notebook: no `cells` list" in result.output
    assert "ok.py:3:12: CKPT006" in result.output


def test_pre_commit_hook_covers_notebooks():
    import yaml

    (hook,) = yaml.safe_load((FIXTURES.parent / ".pre-commit-hooks.yaml").read_text())
    assert "jupyter" in hook["types_or"]


def test_confirm_runs_the_notebook_and_names_cells(monkeypatch):
    import pytest

    pytest.importorskip("torch")
    monkeypatch.chdir(FIXTURES.parent)
    findings = json.loads(run("fixtures/cifar_notebook.ipynb", "--confirm", "--format", "json").stdout)["findings"]
    assert [(f["cell"], f["line"], f["code"], f["confirmation"]["verdict"]) for f in findings] == [
        (3, 29, "CKPT001", "confirmed"), (3, 29, "CKPT006", "confirmed"), (3, 31, "CKPT001", "confirmed"), (3, 31, "CKPT006", "confirmed"),
    ]  # fmt: skip
    assert "checkpoint at cifar_notebook.ipynb:cell 3:29 ran with use_reentrant omitted" in " ".join(findings[1]["confirmation"]["evidence"])
    assert findings[0]["confirmation"]["target"] == "fixtures/cifar_notebook.ipynb::CIFAR10Model"


def test_a_form_feed_in_a_cell_is_not_a_line_break(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    document = json.loads(notebook(IMPORT, "x = 1\n"))
    document["cells"][1]["source"] = ["page = '\x0c'  # \x1e\n", "\n", "\n", *CALL.splitlines(keepends=True)]
    (tmp_path / "nb.ipynb").write_text(json.dumps(document))
    result = run("nb.ipynb", "--format", "json")
    assert json.loads(result.stdout)["errors"] == [], result.output
    assert [(f["cell"], f["line"], f["code"]) for f in json.loads(result.stdout)["findings"]] == [(2, 5, "CKPT006")]
    run("nb.ipynb", "--fix")
    assert json.loads((tmp_path / "nb.ipynb").read_text())["cells"][1]["source"][0] == "page = '\x0c'  # \x1e\n"
