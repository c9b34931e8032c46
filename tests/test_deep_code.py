"""Valid code nested deeper than recursion limits is analysed; one file's failure loses no other file's report."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

import ckptlint.engine
from ckptlint.cli import main

HEADER = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n"
SITE = "    return checkpoint(block, y)\n"

DEEP = {
    "plus_chain.py": HEADER + "    y = " + " + ".join(["x"] * 500) + "\n" + SITE,
    "and_chain.py": HEADER + "    y = " + " and ".join(["x"] * 500) + "\n" + SITE,
    "adjacent_strings.py": HEADER + "    y = " + " ".join(["'a'"] * 500) + "\n" + SITE,
    "nested_calls.py": HEADER + "    y = " + "f(" * 140 + "x" + ")" * 140 + "\n" + SITE,
    "nested_lists.py": HEADER + "    y = " + "[" * 150 + "x" + "]" * 150 + "\n" + SITE,
    "long_elif.py": HEADER + "    if x == 0:\n        y = x\n" + "".join(f"    elif x == {i}:\n        y = x\n" for i in range(1, 351)) + SITE,
    "many_strings.py": HEADER + "    y = " + " ".join(["'a'"] * 5000) + "\n" + SITE,
    "many_strings_lines.py": HEADER + "    y = (\n" + "".join(f"        'line {i}'\n" for i in range(5000)) + "    )\n" + SITE,
}


def lint(*args: str):
    result = CliRunner().invoke(main, [*args, "--no-cache", "--format", "json", "--torch-version", "2.13", "--transformers-version", "5.23"])
    return result, json.loads(result.stdout)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_deep_valid_code_is_analysed(project, monkeypatch, jobs):
    for text in DEEP.values():
        compile(text, "<deep>", "exec")  # valid Python, on this interpreter
    project(DEEP)
    monkeypatch.setattr(ckptlint.engine, "_PARALLEL_MIN_BYTES", 0)
    result, document = lint(".", "--exit-zero", "-j", jobs)
    assert result.exit_code == 0, result.output
    assert document["errors"] == []
    site_line = {name: text.splitlines().index(SITE.rstrip("\n")) + 1 for name, text in DEEP.items()}
    assert sorted((f["path"], f["line"], f["code"]) for f in document["findings"]) == sorted((name, line, "CKPT006") for name, line in site_line.items())


class Exploding(Exception):
    def __str__(self):
        raise RecursionError("str() of this exception fails too")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_internal_error_in_one_file_keeps_every_other_report(project, monkeypatch, jobs):
    project({"a.py": DEEP["plus_chain.py"], "b_boom.py": DEEP["and_chain.py"], "c.py": DEEP["nested_calls.py"]})
    monkeypatch.setattr(ckptlint.engine, "_PARALLEL_MIN_BYTES", 0)
    real = ckptlint.engine._analyze_file

    def failing(unit, summary):
        if unit.source.path.endswith("b_boom.py"):
            raise Exploding()
        return real(unit, summary)

    monkeypatch.setattr(ckptlint.engine, "_analyze_file", failing)
    result, document = lint(".", "--exit-zero", "-j", jobs)
    assert result.exit_code == 2
    assert [f["path"] for f in document["findings"]] == ["a.py", "c.py"]
    [error] = document["errors"]
    assert error["path"] == "b_boom.py" and error["message"].startswith("internal error in ckptlint") and "Exploding" in error["message"]


def test_a_worker_that_dies_loses_only_its_file(project, monkeypatch):
    project({f"f{i}.py": DEEP["plus_chain.py"] for i in range(6)})
    monkeypatch.setattr(ckptlint.engine, "_PARALLEL_MIN_BYTES", 0)
    real = ckptlint.engine._analyze_file

    def dying(unit, summary):
        if unit.source.path.endswith("f3.py"):
            os._exit(139)  # as a segmentation fault in native code would
        return real(unit, summary)

    monkeypatch.setattr(ckptlint.engine, "_analyze_file", dying)
    result, document = lint(".", "-j", "2")
    assert result.exit_code == 2
    assert [f["path"] for f in document["findings"]] == [f"f{i}.py" for i in range(6) if i != 3]
    [error] = document["errors"]
    assert error["path"] == "f3.py" and "crashed" in error["message"]


def test_nesting_beyond_the_analysis_is_named_as_such(project, monkeypatch):
    project({"a.py": DEEP["plus_chain.py"], "b.py": DEEP["and_chain.py"]})

    def too_deep(unit, summary):
        if unit.source.path.endswith("b.py"):
            try:
                raise RecursionError("maximum recursion depth exceeded")
            except RecursionError:
                raise KeyError("raised while the recursion unwound") from None
        return real(unit, summary)

    real = ckptlint.engine._analyze_file
    monkeypatch.setattr(ckptlint.engine, "_analyze_file", too_deep)
    result, document = lint(".")
    assert [f["path"] for f in document["findings"]] == ["a.py"]
    assert document["errors"] == [{"path": "b.py", "message": "cannot analyse: the code is nested deeper than the analysis can follow"}]


def test_what_libcst_cannot_parse_is_not_called_a_syntax_error(project):
    # Adjacent multi-line literals are kept as they are: past LibCST's limit, this valid file stays unparsable for it.
    text = HEADER + "    y = (\n" + '        """a\n        b"""\n' * 3500 + "    )\n" + SITE
    compile(text, "<many>", "exec")
    project({"a.py": text, "b.py": DEEP["plus_chain.py"]})
    result, document = lint(".")
    assert [f["path"] for f in document["findings"]] == ["b.py"]
    [error] = document["errors"]
    assert error["path"] == "a.py" and error["message"].startswith("cannot analyse: LibCST cannot parse this valid Python (line ")
    assert "syntax error" not in error["message"]
