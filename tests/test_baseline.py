"""--baseline / --update-baseline through the command line."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner
from test_notebooks import notebook

from ckptlint.cli import main

MODEL = '''import torch
from torch.utils.checkpoint import checkpoint


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = checkpoint(self.block, x)
        return checkpoint(self.block, h)


def step(block, x):
    return checkpoint(block, x)
'''


def run(*args: str):
    return CliRunner().invoke(main, [*args, "--no-cache", "--torch-version", "2.13"])


def test_update_then_only_new_findings_are_reported(project):
    root = project({"model.py": MODEL, "train.py": "from model import Net\n\nmodel = Net()\n"})  # Net's input is data
    assert run(".", "--baseline", "base.json").exit_code == 2  # no such baseline yet
    written = run(".", "--baseline", "base.json", "--update-baseline")
    assert (written.exit_code, written.stderr) == (0, "Wrote 5 finding(s) to the baseline base.json.\n")
    document = json.loads((root / "base.json").read_text())
    assert document["version"] == 1
    assert {(e["code"], e["path"], e["line"]) for e in document["findings"]} == {
        ("CKPT001", "model.py", 11), ("CKPT006", "model.py", 11), ("CKPT001", "model.py", 12), ("CKPT006", "model.py", 12),
        ("CKPT006", "model.py", 16),
    }  # fmt: skip
    quiet = run(".", "--baseline", "base.json")
    assert quiet.exit_code == 0 and "5 finding(s) in the baseline not shown." in quiet.output

    # Lines moved by an unrelated edit above, a comment added: still baselined. A new call: reported.
    moved = "import os\n\n" + MODEL.replace("h = checkpoint(self.block, x)", "h = checkpoint(self.block, x)  # legacy") + "\n\ndef other(block, x):\n    return checkpoint(block, x)\n"
    project({"model.py": moved})
    result = run(".", "--baseline", "base.json", "--format", "json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1
    assert [(f["line"], f["code"]) for f in report["findings"]] == [(22, "CKPT006")]
    assert report["baseline"] == {"hidden": 5, "stale": []}


def test_edited_code_is_new_and_its_entry_is_stale(project):
    project({"model.py": MODEL})
    run(".", "--baseline", "base.json", "--update-baseline")
    project({"model.py": MODEL.replace("return checkpoint(block, x)", "return checkpoint(block, x * 2)")})
    stats = run(".", "--baseline", "base.json", "--statistics")
    assert stats.exit_code == 1
    assert "   1  CKPT006  [*] implicit-reentrant-mode" in stats.output
    assert "1 baseline entries match no finding any more (fixed or changed; --update-baseline drops them):\n  model.py:16: CKPT006\n" in stats.output


def test_identical_lines_are_counted(project):
    twice = MODEL + "\n\ndef step2(block, x):\n    return checkpoint(block, x)\n"
    project({"model.py": twice.replace("def step2", "def step")})  # same header, same line: one key, counted
    run(".", "--baseline", "base.json", "--update-baseline")
    project({"model.py": twice.replace("def step2", "def step") + "\n\ndef step(block, x):\n    return checkpoint(block, x)\n"})
    result = run(".", "--baseline", "base.json", "--format", "json")
    assert [f["line"] for f in json.loads(result.stdout)["findings"]] == [24]


def test_paths_are_relative_to_the_baseline_file(project):
    root = project({"src/model.py": MODEL, "ci/base.json": ""})
    run("src", "--baseline", "ci/base.json", "--update-baseline")
    assert json.loads((root / "ci" / "base.json").read_text())["findings"][0]["path"] == "../src/model.py"
    os.chdir(root / "src")
    assert run("model.py", "--baseline", "../ci/base.json").exit_code == 0


def test_bad_baselines_and_usage_are_errors(project):
    project({"model.py": MODEL, "bad.json": "{", "other.json": '{"version": 7, "findings": []}'})
    for name in ("bad.json", "other.json"):
        result = run(".", "--baseline", name)
        assert result.exit_code == 2 and "ckptlint: error:" in result.output
    assert run(".", "--update-baseline").exit_code == 2
    assert run(".", "--baseline", "b.json", "--update-baseline", "--fix").exit_code == 2


def test_notebook_cells_can_move(project):
    cells = ["from torch.utils.checkpoint import checkpoint\n", "def step(block, x):\n    return checkpoint(block, x)\n"]
    project({"nb.ipynb": notebook(*cells)})
    run(".", "--baseline", "base.json", "--update-baseline")
    project({"nb.ipynb": notebook("# setup\n", *cells)})
    assert run(".", "--baseline", "base.json").exit_code == 0
