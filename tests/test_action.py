"""The composite GitHub Action (action.yml): its shell steps run here as the runner runs them."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
import yaml
from conftest import ROOT

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
BAD = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return checkpoint(block, x)\n"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def test_the_action_is_composite_with_its_inputs():
    assert ACTION["runs"]["using"] == "composite"
    assert set(ACTION["inputs"]) == {"args", "version", "sarif"}
    steps = ACTION["runs"]["steps"]
    assert all(step.get("shell") == "bash" for step in steps if "run" in step)
    (upload,) = [step for step in steps if "uses" in step]
    assert upload["uses"] == "github/codeql-action/upload-sarif@v4"  # the current major (v3 runs on Node 20)
    readme = (ROOT / "README.md").read_text()
    assert "uses: ckptlint/ckptlint@v0" in readme and "sarif: true" in readme


class Runner:
    """Just enough of the Actions runner: inputs, `if:`, step outputs, GITHUB_PATH, env, bash -eo pipefail."""

    def __init__(self, tmp_path, workspace, inputs):
        self.inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()} | inputs
        self.outputs: dict[str, dict[str, str]] = {}
        self.tmp, self.workspace = tmp_path, workspace
        self.path = os.environ["PATH"]
        self.stdout = ""

    def value(self, expression: str) -> str:
        kind, _, rest = expression.partition(".")
        if kind == "inputs":
            return self.inputs[rest]
        if kind == "steps":
            step, _, name = rest.partition(".outputs.")
            return self.outputs.get(step, {}).get(name, "")
        raise AssertionError(f"unsupported expression {expression}")

    def condition(self, text: str) -> bool:
        left, right = (part.strip() for part in text.split("=="))
        return self.value(left) == right.strip("'")

    def run(self, skip: tuple[str, ...] = ()) -> list[tuple[str, int]]:
        ran = []
        for number, step in enumerate(ACTION["runs"]["steps"]):
            if "if" in step and not self.condition(step["if"]) or step.get("name") in skip:
                continue
            if "uses" in step:
                ran.append((step["uses"], 0))  # an action of GitHub's: not run here
                continue
            output, path_file = self.tmp / f"output-{number}", self.tmp / f"path-{number}"
            output.touch()
            path_file.touch()
            env = {**os.environ, "PATH": self.path, "RUNNER_TEMP": str(self.tmp), "GITHUB_ACTION_PATH": str(ROOT),
                   "GITHUB_OUTPUT": str(output), "GITHUB_PATH": str(path_file), "CKPTLINT_CACHE_DIR": str(self.tmp / "cache")}  # fmt: skip
            env.update({key: EXPRESSION.sub(lambda m: self.value(m.group(1)), str(value)) for key, value in step.get("env", {}).items()})
            script = self.tmp / f"step-{number}.sh"
            script.write_text(step["run"])
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=self.workspace, env=env, capture_output=True, text=True)
            code = done.returncode
            self.stdout += done.stdout
            ran.append((step["name"], code))
            if "id" in step:
                self.outputs[step["id"]] = dict(line.split("=", 1) for line in output.read_text().splitlines())
            self.path = os.pathsep.join([*path_file.read_text().split(), self.path])
            if code:
                break
        return ran


@pytest.mark.slow
def test_the_steps_install_lint_write_sarif_and_gate(tmp_path):
    workspace = tmp_path / "repo"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "train.py").write_text(BAD)
    runner = Runner(tmp_path, workspace, {"args": "src --torch-version 2.13", "sarif": "true"})
    ran = runner.run()
    assert ran == [("Install ckptlint", 0), ("Run ckptlint", 0), ("github/codeql-action/upload-sarif@v4", 0), ("Fail on findings", 1)]
    assert runner.outputs["lint"]["exit-code"] == "1"
    assert "::warning title=ckptlint (CKPT006),file=src/train.py,line=5,col=12," in runner.stdout
    sarif = json.loads((tmp_path / "ckptlint.sarif").read_text())
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["CKPT006"]
    assert runner.outputs["lint"]["sarif-file"] == str(tmp_path / "ckptlint.sarif")

    (workspace / "src" / "train.py").write_text(BAD.replace("x)\n", "x, use_reentrant=False)\n"))
    (tmp_path / "second").mkdir()
    clean = Runner(tmp_path / "second", workspace, {"args": "src"})
    clean.path = runner.path  # installed by the first run
    assert clean.run(skip=("Install ckptlint",)) == [("Run ckptlint", 0), ("Fail on findings", 0)]
    assert "sarif-file" not in clean.outputs["lint"]
