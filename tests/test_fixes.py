"""--fix, --unsafe-fixes, --diff, --fix-only, --show-fixes, end to end through the command line."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, ROOT
from test_rule_docs import rule_examples

from ckptlint.cli import main

BAD = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return checkpoint(block, x)\n"


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(main, [*args, "--no-cache", "--torch-version", "2.13", "--transformers-version", "5.23"], input=input)


def findings(*args: str) -> list[dict]:
    return json.loads(run(*args, "--format", "json", "--exit-zero").stdout)["findings"]


def fixed_text(project, source: str, *flags: str, name: str = "example.py") -> str:
    project({name: source})
    result = run(name, "--fix", *flags)
    assert result.exit_code in (0, 1), result.output
    return (project({}) / name).read_text()


# --- every rule's bad examples: apply, re-lint, compile, apply again -----------------------------


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("code, source", list(rule_examples("## Example")))
def test_fixing_a_bad_example_removes_what_it_fixes_and_is_idempotent(project, code, source, unsafe):
    flags = ("--unsafe-fixes",) if unsafe else ()
    project({"example.py": source})
    before = findings("example.py", *flags)
    fixable = [f for f in before if f["fix"] and (unsafe or f["fix"]["applicability"] == "safe")]
    result = run("example.py", "--fix", "--show-fixes", *flags)
    fixed = (project({}) / "example.py").read_text()
    compile(fixed, "example.py", "exec")
    after = findings("example.py", *flags)
    # What was fixed is gone (at its line: fixes only add lines below the finding), nothing
    # offered as fixable is left, and the findings without a fix are still reported.
    assert not {(f["code"], f["line"]) for f in fixable} & {(f["code"], f["line"]) for f in after}
    assert not [f for f in after if f["fix"] and (unsafe or f["fix"]["applicability"] == "safe")]
    assert {(f["code"], f["line"]) for f in before if not f["fix"]} <= {(f["code"], f["line"]) for f in after}
    assert result.exit_code == (1 if after else 0)
    if fixable:
        assert f"Fixed {len(fixable)} finding(s):" in result.output
    # Idempotent: a second --fix changes nothing and --diff has nothing to show.
    again = run("example.py", "--fix", *flags)
    assert (project({}) / "example.py").read_text() == fixed
    assert "fixed" not in again.output
    diff = run("example.py", "--diff", *flags)
    assert (diff.exit_code, diff.stdout) == (0, "")


def test_the_rule_documents_exercise_every_fix():
    """Safe fixes for CKPT002/004/006, unsafe ones for CKPT001/003/005/006: the examples above
    reach each of them (else the test above could pass on examples without fixes)."""
    from conftest import lint_text

    offered = set()
    for param in rule_examples("## Example"):
        code, source = param.values
        for finding in lint_text(source).findings:
            offered.update((finding.code, fix.applicability) for fix in finding.fixes)
    assert offered >= {("CKPT002", "safe"), ("CKPT004", "safe"), ("CKPT006", "safe"), ("CKPT006", "unsafe"),
                       ("CKPT001", "unsafe"), ("CKPT003", "unsafe"), ("CKPT005", "unsafe")}  # fmt: skip
    assert not {code for code, _ in offered} & {"CKPT007", "CKPT008"}


# --- what the fixes write ------------------------------------------------------------------------


def test_ckpt006_safe_fix_spells_todays_mode_and_unsafe_the_recommended_one(project):
    assert fixed_text(project, BAD) == BAD.replace("checkpoint(block, x)", "checkpoint(block, x, use_reentrant=True)")
    assert fixed_text(project, BAD, "--unsafe-fixes") == BAD.replace("checkpoint(block, x)", "checkpoint(block, x, use_reentrant=False)")


def test_fixes_keep_layout_comments_and_trailing_commas(project):
    source = (
        "import torch\n\n\n"
        "def step(layer, h):\n"
        "    h = torch.utils.checkpoint.checkpoint(  # the block\n"
        "        layer,\n"
        "        h,\n"
        "    )\n"
        "    return torch.utils.checkpoint.checkpoint(layer,  # one\n"
        "                                             h)  # two\n"
    )
    assert fixed_text(project, source) == (
        "import torch\n\n\n"
        "def step(layer, h):\n"
        "    h = torch.utils.checkpoint.checkpoint(  # the block\n"
        "        layer,\n"
        "        h,\n"
        "        use_reentrant=True,\n"
        "    )\n"
        "    return torch.utils.checkpoint.checkpoint(layer,  # one\n"
        "                                             h,\n"
        "                                             use_reentrant=True)  # two\n"
    )


def test_transformers_dicts_and_checkpoint_sequential(project):
    source = (
        "from torch.utils.checkpoint import checkpoint_sequential\n\n\n"
        "def enable(model, layers, x):\n"
        "    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'preserve_rng_state': True})\n"
        "    return checkpoint_sequential(layers, 2, x)\n"
    )
    assert fixed_text(project, source) == source.replace("True})", "True, 'use_reentrant': True})").replace("2, x)", "2, x, use_reentrant=True)")
    assert fixed_text(project, source, "--unsafe-fixes") == source.replace("True})", "True, 'use_reentrant': False})").replace("2, x)", "2, x, use_reentrant=False)")


def test_a_shared_kwargs_dict_gets_no_fix(project):
    source = (
        "def enable(model):\n"
        "    kwargs = {'preserve_rng_state': True}\n"
        "    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)\n"
    )
    project({"example.py": source})
    [finding] = findings("example.py", "--unsafe-fixes")
    assert (finding["code"], finding["fix"]) == ("CKPT006", None)


def test_a_spread_table_of_another_module_is_never_deleted(project):
    """`**CKPT` carries `use_reentrant=False` too: deleting it to drop `preserve_rng_state=False`
    would switch the checkpoint to reentrant mode. The flag is not spelled here: no fix."""
    project({
        "pyproject.toml": "",
        "settings.py": 'CKPT = {"use_reentrant": False, "preserve_rng_state": False}\n',
        "example.py": (
            "from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\nfrom settings import CKPT\n\n\n"
            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.block = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))\n\n"
            "    def forward(self, x):\n        return checkpoint(self.block, x, **CKPT)\n"
        ),
    })
    [finding] = findings("example.py", "--unsafe-fixes")
    assert (finding["code"], finding["fix"]) == ("CKPT002", None)
    before = (project({}) / "example.py").read_text()
    run("example.py", "--fix", "--unsafe-fixes")
    assert (project({}) / "example.py").read_text() == before


def test_ckpt002_removes_the_flag_from_call_partial_and_dict(project):
    source = (
        "import functools\n\n"
        "import torch.nn as nn\n"
        "from torch.utils.checkpoint import checkpoint\n\n"
        "ckpt = functools.partial(checkpoint, use_reentrant=False, preserve_rng_state=False)\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.drop = nn.Dropout(0.1)\n\n"
        "    def a(self, x):\n"
        "        return checkpoint(self.drop, x, preserve_rng_state=False, use_reentrant=False)\n\n"
        "    def b(self, x):\n"
        "        return ckpt(self.drop, x)\n\n"
        "    def c(self, x):\n"
        "        kwargs = {\"use_reentrant\": False, \"preserve_rng_state\": False}\n"
        "        return checkpoint(self.drop, x, **kwargs)\n"
    )
    project({"example.py": source})
    assert sorted(f["code"] for f in findings("example.py")) == ["CKPT002"] * 3
    assert fixed_text(project, source) == (
        source.replace(", preserve_rng_state=False", "").replace(', "preserve_rng_state": False', "")
    )


def test_ckpt004_and_ckpt005_fixes(project):
    source = (
        "from transformers import ViTForImageClassification\n\n\n"
        "def train(config, batches):\n"
        "    model = ViTForImageClassification(config)\n"
        "    for param in model.vit.embeddings.parameters():\n"
        "        param.requires_grad = False\n"
        "    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={\"use_reentrant\": True})  # on\n"
        "    model.train()\n"
        "    for batch in batches:\n"
        "        model(**batch, use_cache=True).loss.backward()\n"
    )
    safe = fixed_text(project, source)
    assert safe == source.replace("use_cache=True", "use_cache=False")
    unsafe = fixed_text(project, source, "--unsafe-fixes")
    assert unsafe == safe.replace("True})  # on\n", "True})  # on\n    model.enable_input_require_grads()\n")


def test_non_reentrant_switch_only_where_the_call_decides_the_mode(project):
    source = (
        "import functools\n\n"
        "import torch\n"
        "from torch.utils.checkpoint import checkpoint\n\n"
        "reentrant = functools.partial(checkpoint, use_reentrant=True)\n\n\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.a = torch.nn.Linear(4, 4)\n"
        "        self.b = torch.nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n"
        "        h = checkpoint(self.a, x, use_reentrant=True)\n"
        "        return reentrant(self.b, x)\n\n\n"
        "model = Net()\n"  # Net is the whole model: `x` is data
    )
    project({"example.py": source})
    by_line = {f["line"]: f for f in findings("example.py", "--unsafe-fixes")}
    assert by_line[16]["code"] == by_line[17]["code"] == "CKPT001"
    assert by_line[16]["fix"]["applicability"] == "unsafe" and by_line[17]["fix"] is None
    assert fixed_text(project, source, "--unsafe-fixes") == source.replace("x, use_reentrant=True)", "x, use_reentrant=False)")


def test_crlf_and_encoding_declarations_survive(project, tmp_path):
    source = "# -*- coding: latin-1 -*-\r\n" + BAD.replace("\n", "\r\n").replace("def step", "# \xe9t\xe9\r\ndef step")
    (tmp_path / "example.py").write_bytes(source.encode("latin-1"))
    assert run("example.py", "--fix").exit_code == 0
    assert (tmp_path / "example.py").read_bytes() == source.replace("checkpoint(block, x)", "checkpoint(block, x, use_reentrant=True)").encode("latin-1")


# --- the modes -------------------------------------------------------------------------------------


def test_diff_writes_nothing_and_exits_1_when_there_would_be_changes(project):
    root = project({"bad.py": BAD, "good.py": BAD.replace("checkpoint(block, x)", "checkpoint(block, x, use_reentrant=False)")})
    result = run(".", "--diff")
    assert result.exit_code == 1
    assert result.stdout == (
        "--- a/bad.py\n+++ b/bad.py\n@@ -2,4 +2,4 @@\n \n \n def step(block, x):\n"
        "-    return checkpoint(block, x)\n+    return checkpoint(block, x, use_reentrant=True)\n"
    )
    assert "Would fix 1 finding(s)." in result.stderr
    assert (root / "bad.py").read_text() == BAD
    assert run("good.py", "--diff").exit_code == 0


def test_fix_exit_codes_and_fix_only(project):
    root = project({"bad.py": BAD, "random_draw.py": "import random\nfrom torch.utils.checkpoint import checkpoint\n\n\ndef f(x):\n    return x * random.random()\n\n\ndef g(x):\n    return checkpoint(f, x, use_reentrant=False)\n"})
    result = run("bad.py", "--fix")
    assert result.exit_code == 0 and "Found 1 finding(s) (1 fixed, 0 remaining)." in result.output
    assert run("random_draw.py", "--fix").exit_code == 1  # CKPT002 on `random` has no fix: it remains
    only = run("random_draw.py", "--fix-only")
    assert only.exit_code == 0 and "CKPT002" not in only.output and "No fixes available." in only.output
    assert "use_reentrant=True" in (root / "bad.py").read_text()


def test_fix_from_stdin_prints_the_fixed_code(project):
    result = run("-", "--stdin-filename", "model.py", "--fix", input=BAD)
    assert result.exit_code == 0
    assert result.stdout == BAD.replace("checkpoint(block, x)", "checkpoint(block, x, use_reentrant=True)")
    assert "1 fixed" in result.stderr
    diff = run("-", "--stdin-filename", "model.py", "--diff", "--unsafe-fixes", input=BAD)
    assert diff.exit_code == 1 and "+    return checkpoint(block, x, use_reentrant=False)" in diff.stdout


def test_fix_settings_from_pyproject(project):
    root = project({"bad.py": BAD, "pyproject.toml": "[tool.ckptlint]\nfix = true\nunsafe-fixes = true\nshow-fixes = true\n"})
    result = run("bad.py")
    assert "Fixed 1 finding(s):" in result.output and result.exit_code == 0
    assert "use_reentrant=False" in (root / "bad.py").read_text()
    project({"pyproject.toml": "[tool.ckptlint]\nfix = 1\n"})
    assert run("bad.py").exit_code == 2


# --- how findings report their fixes ------------------------------------------------------------


def test_text_marks_fixable_findings_and_counts_hidden_fixes(project):
    project({"bad.py": BAD, "raw.py": "import torch\nfrom torch.utils.checkpoint import checkpoint\n\n\ndef f(block):\n    return checkpoint(block, torch.randn(2, 2), use_reentrant=True)\n"})
    out = run(".").output
    assert "bad.py:5:12: CKPT006 [*] `checkpoint`" in out
    assert "  = fix: Pass `use_reentrant=True` (safe)" in out
    assert "raw.py:6:12: CKPT001 `checkpoint`" not in out  # the marker is absent, the finding is not
    assert "  = fix: Pass `use_reentrant=False` (unsafe: apply with --unsafe-fixes)" in out
    assert "[*] 1 fixable with the `--fix` option (1 hidden fix(es) can be enabled with the `--unsafe-fixes` option)." in out
    unsafe = run(".", "--unsafe-fixes").output
    assert "[*] 2 fixable with the `--fix --unsafe-fixes` option." in unsafe
    assert "   1  CKPT001  [*] inputs-cannot-require-grad" in run(".", "--statistics", "--unsafe-fixes").output


def test_json_and_sarif_carry_the_fix(project):
    project({"bad.py": BAD})
    [finding] = findings("bad.py")
    assert finding["fix"] == {
        "applicability": "safe",
        "message": "Pass `use_reentrant=True`",
        "edits": [{"line": 5, "column": 31, "end_line": 5, "end_column": 31, "content": ", use_reentrant=True"}],
    }
    assert findings("bad.py", "--unsafe-fixes")[0]["fix"]["applicability"] == "unsafe"
    sarif = json.loads(run("bad.py", "--format", "sarif").stdout)
    fixes = sarif["runs"][0]["results"][0]["fixes"]
    assert [f["properties"]["applicability"] for f in fixes] == ["safe", "unsafe"]
    change = fixes[1]["artifactChanges"][0]
    assert change["artifactLocation"]["uri"] == "bad.py"
    assert change["replacements"] == [
        {"deletedRegion": {"startLine": 5, "startColumn": 31, "endLine": 5, "endColumn": 31}, "insertedContent": {"text": ", use_reentrant=False"}}
    ]


# --- the fixtures: fixed, they compile, stay fixed, and the runtime agrees ---------------------------


def test_fixing_the_fixtures(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES, tmp_path / "fixtures")
    monkeypatch.chdir(tmp_path)
    before = findings("fixtures", "--unsafe-fixes")
    result = run("fixtures", "--fix", "--unsafe-fixes")
    after = findings("fixtures", "--unsafe-fixes")
    for path in (tmp_path / "fixtures").rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
    assert not [f for f in after if f["fix"]]
    assert f"({len(before) - len(after)} fixed, {len(after)} remaining)" in result.output
    assert len(before) - len(after) >= 30
    assert run("fixtures", "--diff", "--unsafe-fixes").stdout == ""


@pytest.mark.slow
def test_confirm_on_the_fixed_seed_model_does_not_reproduce(tmp_path, monkeypatch):
    """The seed CIFAR model, confirmed before and after `--fix --unsafe-fixes`: the runtime sees
    the frozen conv blocks before, and trains every block after."""
    pytest.importorskip("torch")
    from ckptlint.confirm import confirm
    from ckptlint.findings import LintReport

    shutil.copy(FIXTURES / "cifar_checkpointed.py", tmp_path / "cifar.py")
    monkeypatch.chdir(tmp_path)
    original = [f for f in findings("cifar.py") if f["code"] == "CKPT001"]
    assert [f["line"] for f in original] == [36, 38]
    before = confirm(LintReport(findings=[_finding(f) for f in original]), timeout=120)
    assert {c.verdict for c in before.values()} == {"confirmed"}
    assert run("cifar.py", "--fix", "--unsafe-fixes").exit_code == 0
    after = confirm(LintReport(findings=[_finding(f) for f in original]), timeout=120)
    assert {c.verdict for c in after.values()} == {"not reproduced"}, after


def _finding(data: dict):
    """A finding as the JSON report gave it (its fix left out)."""
    from ckptlint.findings import Finding

    return Finding.from_dict({key: value for key, value in data.items() if key != "fix"})


def test_readme_documents_the_fix_options():
    readme = (ROOT / "README.md").read_text()
    for option in ("--fix", "--unsafe-fixes", "--diff", "--show-fixes", "--fix-only"):
        assert f"`{option}" in readme


def test_fixes_come_back_from_the_cache(project):
    project({"bad.py": BAD})
    runner = CliRunner()
    args = ["bad.py", "--format", "json", "--torch-version", "2.13"]
    cold = json.loads(runner.invoke(main, args).stdout)["findings"]
    warm = json.loads(runner.invoke(main, args).stdout)["findings"]
    assert cold == warm and warm[0]["fix"]["edits"][0]["content"] == ", use_reentrant=True"
    fixed = runner.invoke(main, ["bad.py", "--fix", "--torch-version", "2.13"])
    assert fixed.exit_code == 0 and "1 fixed" in fixed.output
