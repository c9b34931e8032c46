"""The fixtures carry `# expect: CODE` marks; ckptlint must report exactly those."""

from __future__ import annotations

import os

from conftest import FIXTURES, expected_marks

from ckptlint.config import Settings
from ckptlint.engine import lint
from ckptlint.versions import resolve_versions


def test_fixture_findings_match_expect_marks(monkeypatch):
    monkeypatch.chdir(FIXTURES.parent)
    settings = Settings()
    report = lint(["fixtures"], settings, resolve_versions(settings, None, "2.13", "5.23"), jobs=1)
    assert report.errors == []
    found = {(os.path.abspath(f.path), f.line if f.cell is None else (f.cell, f.line), f.code) for f in report.findings}
    fixtures = sorted([*FIXTURES.rglob("*.py"), *FIXTURES.rglob("*.ipynb")])
    marks = {(os.path.abspath(p), line, code) for p, line, code in expected_marks(fixtures)}
    assert found - marks == set(), "unexpected findings"
    assert marks - found == set(), "missed findings"
    assert len(marks) >= 15


def test_linting_never_executes_the_linted_code(monkeypatch):
    marker = FIXTURES / "EXECUTED_BY_CKPTLINT"
    marker.unlink(missing_ok=True)
    monkeypatch.chdir(FIXTURES.parent)
    settings = Settings()
    report = lint(["fixtures/never_executed.py"], settings, resolve_versions(settings, None, "2.13", "5.23"), jobs=1)
    assert [f.code for f in report.findings] == ["CKPT006"]
    assert not marker.exists()
