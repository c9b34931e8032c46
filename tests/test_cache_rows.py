"""A cache row is trusted only if it is intact and well-formed; a broken database is recreated."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from ckptlint.cli import main

BAD = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return checkpoint(block, x)\n"
NO_FINDINGS = [{"findings": [], "unresolved": 0, "error": None, "depends": {}}]


def check():
    result = CliRunner().invoke(main, [".", "--format", "json", "-j", "1", "--torch-version", "2.13", "--transformers-version", "5.23"])
    return result, json.loads(result.stdout) if result.stdout else None


@pytest.fixture
def cached(project):
    root = project({"bad.py": BAD, "other.py": BAD.replace("step", "other")})
    result, document = check()
    assert result.exit_code == 1 and len(document["findings"]) == 2
    return root / ".ckptlint_cache" / "results.sqlite3", document


def rewrite(database, prefix: str, value, *, keep_checksum: bool = True) -> None:
    """Replace every row whose key starts with `prefix` (r: results, s: summaries, d: digests)."""
    from ckptlint.cache import _checksum

    text = json.dumps(value)
    with sqlite3.connect(database) as db:
        for (key,) in db.execute("SELECT key FROM results WHERE key LIKE ?", (prefix + "%",)).fetchall():
            checksum = _checksum(key, text) if keep_checksum else db.execute("SELECT checksum FROM results WHERE key = ?", (key,)).fetchone()[0]
            db.execute("UPDATE results SET value = ?, checksum = ? WHERE key = ?", (text, checksum, key))


def test_an_edited_row_is_a_miss(cached):
    database, cold = cached
    rewrite(database, "r:", NO_FINDINGS, keep_checksum=False)
    result, warm = check()
    assert result.exit_code == 1 and warm == cold


@pytest.mark.parametrize(
    ("prefix", "value"),
    [
        ("r:", 5),
        ("r:", [5]),
        ("r:", [{"findings": 3, "unresolved": 0, "error": None, "depends": {}}]),
        ("r:", [{"findings": [{"code": "CKPT006"}], "unresolved": 0, "error": None, "depends": {}}]),
        ("r:", [{"findings": [], "unresolved": "0", "error": None, "depends": []}]),
        ("d:", 7),
        ("s:", {"name": 3}),
        ("s:", []),
    ],
)
def test_a_wrong_typed_row_is_a_miss(cached, prefix, value):
    database, cold = cached
    rewrite(database, prefix, value)
    if prefix == "s:":  # summaries are read when a result is missing
        rewrite(database, "r:", 5)
    result, warm = check()
    assert result.exit_code == 1, result.output
    assert warm == cold


def test_rows_of_another_tool_version_are_misses(cached, monkeypatch):
    database, cold = cached
    rewrite(database, "r:", NO_FINDINGS)
    monkeypatch.setattr("ckptlint.cache.__version__", "0.0.0-other")
    result, warm = check()
    assert warm == cold


def test_rows_of_another_build_of_the_same_version_are_misses(cached, monkeypatch):
    """Installed from the repository, every commit is version 0.1.0: a newer analysis must not
    reuse what an older one cached (upgrading the pre-commit `rev` keeps the project's cache)."""
    database, cold = cached
    rewrite(database, "r:", NO_FINDINGS)
    monkeypatch.setattr("ckptlint.cache.tool_identity", lambda: "0.1.0+another-build")
    result, warm = check()
    assert warm == cold


def test_the_build_identity_follows_the_package_source(tmp_path):
    from ckptlint.cache import source_digest

    package = tmp_path / "ckptlint"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text("__version__ = '0.1.0'\n")
    (package / "model" / "values.py").write_text("UNKNOWN = None\n")
    before = source_digest(package)
    assert source_digest(package) == before
    (package / "model" / "values.py").write_text("UNKNOWN = object()\n")
    assert source_digest(package) != before


def test_a_corrupt_database_is_recreated_with_a_notice(cached):
    database, cold = cached
    database.write_bytes(b"this is not a database" * 100)
    result, warm = check()
    assert result.exit_code == 1 and warm == cold
    notices = [line for line in result.stderr.splitlines() if "cache" in line]
    assert len(notices) == 1 and "recreated" in notices[0] and str(database) in notices[0]
    result, again = check()
    assert again == cold and result.stderr == ""
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT count(*) FROM results").fetchone()[0] > 0


def test_a_database_from_an_older_layout_is_replaced(cached):
    database, cold = cached
    database.unlink()
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE results (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO results VALUES ('x', '1')")
    result, warm = check()
    assert warm == cold
    result, again = check()
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT count(*) FROM results WHERE key LIKE 'r:%'").fetchone()[0] == 2
