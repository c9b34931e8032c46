"""Every rule has a document whose examples are executed: bad ones must fire, good ones must not."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT, lint_text

from ckptlint.rules import all_rules

SECTIONS = ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix")
FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def examples(code: str, section: str) -> list[str]:
    document = (ROOT / "rules" / f"{code}.md").read_text()
    body = document.split(section, 1)[1].split("\n## ", 1)[0]
    return FENCE.findall(body)


def rule_examples(section: str):
    for rule in all_rules():
        for number, source in enumerate(examples(rule.code, section)):
            yield pytest.param(rule.code, source, id=f"{rule.code}-{number}")


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_document_exists_with_every_section(rule):
    document = (ROOT / "rules" / f"{rule.code}.md").read_text()
    assert document.startswith(f"# {rule.code} {rule.name}\n")
    for section in SECTIONS:
        assert section in document, section
    assert examples(rule.code, "## Example") and examples(rule.code, "## Use instead")


@pytest.mark.parametrize("code, source", list(rule_examples("## Example")))
def test_bad_example_fires(code, source):
    report = lint_text(source)
    assert report.errors == []
    assert code in {f.code for f in report.findings}


@pytest.mark.parametrize("code, source", list(rule_examples("## Use instead")))
def test_good_example_is_clean(code, source):
    report = lint_text(source)
    assert report.errors == []
    assert code not in {f.code for f in report.findings}


def test_every_document_belongs_to_a_rule():
    documented = {path.stem for path in (ROOT / "rules").glob("CKPT*.md")}
    assert documented == {rule.code for rule in all_rules()}


def test_codes_are_unique_and_well_formed():
    rules = all_rules()
    assert len({r.code for r in rules}) == len(rules)
    assert all(re.fullmatch(r"CKPT\d{3}", r.code) and re.fullmatch(r"[a-z]+(-[a-z]+)*", r.name) for r in rules)
