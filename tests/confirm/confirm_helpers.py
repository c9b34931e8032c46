"""Helpers for the --confirm tests: findings placed on fixture lines, and one confirm() run for many.

(Not a conftest.py: tests/conftest.py is imported by name from every test folder.)
"""

from __future__ import annotations

import ast
import importlib.util
import os
from pathlib import Path
from typing import Iterable, Optional

from ckptlint.confirm import confirm
from ckptlint.findings import Confirmation, Finding, LintReport, Severity

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
EXAMPLES = FIXTURES / "confirm_examples.py"
HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
HAS_NUMPY = importlib.util.find_spec("numpy") is not None
HAS_LIGHTNING = importlib.util.find_spec("lightning") is not None
HAS_PEFT = importlib.util.find_spec("peft") is not None


MODULE = "<module>"  # the scope of a line in a file's module-level code


def line_in(path: Path, scope: str, needle: str) -> int:
    """Line of the first source line containing `needle` inside class/function `scope` (or, for
    MODULE, anywhere in the file)."""
    tree = ast.parse(path.read_text())
    lines = path.read_text().splitlines()
    if scope == MODULE:
        first, last = 1, len(lines)
    else:
        node = next(n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == scope)
        first, last = node.lineno, node.end_lineno
    for number in range(first, last + 1):
        if needle in lines[number - 1]:
            return number
    raise AssertionError(f"{needle!r} not in {scope} of {path}")


def finding(path: Path, line: int, code: str) -> Finding:
    shown = os.path.relpath(path, ROOT)
    return Finding(path=shown, line=line, column=1, end_line=line, end_column=2, code=code, message="", help="", severity=Severity.ERROR)


def confirm_all(findings: Iterable[Finding], *, timeout: float = 60.0, examples: Optional[list[str]] = None) -> dict[Finding, Confirmation]:
    """One confirm() call for every finding (targets run in parallel), from the repository root."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        report = LintReport(findings=list(findings))
        return confirm(report, examples=[str(EXAMPLES)] if examples is None else examples, timeout=timeout, jobs=os.cpu_count())
    finally:
        os.chdir(cwd)


def verdicts_at(folder: Path, cases: Iterable[tuple[str, str, str, str]], *, examples: Optional[list[str]] = None) -> dict[tuple[str, str, str, str], Confirmation]:
    """Confirm a finding of `code` placed on the line of `scope` in `folder/name` holding `needle`,
    for each (name, scope, needle, code) case, in one run."""
    findings = {case: finding(folder / case[0], line_in(folder / case[0], case[1], case[2]), case[3]) for case in cases}
    results = confirm_all(findings.values(), examples=examples)
    return {case: results[f] for case, f in findings.items()}


def needs_transformers(path: str) -> bool:
    return any(name in path for name in ("gpt2_cross_attention", "hf_vision_adapters", "hf_frozen_parts", "hf_loaders", "hf_builder", "hf_clip_vision", "hf_config", "hf_finetune", "hf_trainer", "hf_dropout_rng", "hf_from_pretrained", "hf_flat_chat", "hf_flat_vit", "hf_relative_position", "hf_trainer_layers", "peft_order", "rl_rollouts", "rl_reference_logprobs", "sampling_callbacks"))


def needs_lightning(path: str) -> bool:
    return "lightning" in path


def missing_module(path: str) -> Optional[str]:
    """The package a fixture needs that is not installed here, if any."""
    if "peft_order" in path and not HAS_PEFT:  # imported before transformers, which peft needs too
        return "peft"
    if needs_transformers(path) and not HAS_TRANSFORMERS:
        return "transformers"
    if needs_lightning(path) and not HAS_LIGHTNING:
        return "lightning"
    if needs_numpy(path) and not HAS_NUMPY:
        return "numpy"
    return None


def needs_numpy(path: str) -> bool:
    return "numpy" in path
