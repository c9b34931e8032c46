from __future__ import annotations

import json
from typing import Any, Optional

import pytest

from ckptlint import __version__
from ckptlint.findings import FileError, Finding, LintReport, Severity
from ckptlint.reporters import FORMATS, RenderOptions, normalize_path, render


class MissingDocstring:
    code = "CKPT001"
    name = "missing-docstring"
    severity = Severity.INFO
    summary = "A rule without findings, still listed in SARIF."


class CheckpointWithoutGrad:
    code = "CKPT002"
    name = "checkpoint-without-grad"
    severity = Severity.WARNING
    summary = "Checkpointed segment has no input requiring grad."


class ImplicitReentrantMode:
    code = "CKPT006"
    name = "implicit-reentrant-mode"
    severity = Severity.ERROR
    summary = "checkpoint() called without an explicit use_reentrant."


RULES = (MissingDocstring, CheckpointWithoutGrad, ImplicitReentrantMode)

# Two-digit line numbers, so the gutter is wider than in a single-digit case.
SOURCE = ["# pad"] * 12 + [
    "        x = checkpoint(self.block, x)",  # 13
    "",  # 14
    "        y = checkpoint(",  # 15
    "            self.block, x",  # 16
    "        )",  # 17
]

ERROR = Finding(
    path="model.py", line=13, column=13, end_line=13, end_column=38, code="CKPT006",
    message="`checkpoint` called without `use_reentrant`", help="pass use_reentrant=False",
    severity=Severity.ERROR,
)
MULTILINE = Finding(
    path="model.py", line=15, column=13, end_line=17, end_column=10, code="CKPT002",
    message="no input requires grad", help="check the inputs", severity=Severity.WARNING,
)
ELSEWHERE = Finding(
    path=".\\pkg\\train.py", line=3, column=5, end_line=3, end_column=9, code="CKPT006",
    message="`checkpoint` called without `use_reentrant`", help="pass use_reentrant=False",
    severity=Severity.ERROR,
)
BROKEN = FileError(path="./broken.py", message="could not parse: unexpected indent")


def make_report(**overrides: Any) -> LintReport:
    fields = dict(findings=[ERROR, MULTILINE, ELSEWHERE], errors=[BROKEN], files_checked=4)
    fields.update(overrides)
    return LintReport(**fields)


def read_lines(path: str, cell: Optional[int] = None) -> Optional[list[str]]:
    return SOURCE if path == "model.py" else None


def rule_doc(code: str) -> Optional[str]:
    return "# CKPT006\n\nLong **markdown** doc." if code == "CKPT006" else None


def run(fmt: str, report: Optional[LintReport] = None, **options: bool) -> str:
    report = make_report() if report is None else report
    return render(fmt, report, RULES, RenderOptions(**options), read_lines, rule_doc)


# --- text ---------------------------------------------------------------------------------------


def test_text_full_layout() -> None:
    assert run("text") == "\n".join([
        "model.py:13:13: CKPT006 `checkpoint` called without `use_reentrant`",
        "   |",
        "13 |         x = checkpoint(self.block, x)",
        "   |             ^^^^^^^^^^^^^^^^^^^^^^^^^",
        "   |",
        "   = help: pass use_reentrant=False",
        "",
        "model.py:15:13: CKPT002 no input requires grad",
        "   |",
        "15 |         y = checkpoint(",
        # Multi-line span: underline to the end of the first line only.
        "   |             ^^^^^^^^^^^",
        "   |",
        "   = help: check the inputs",
        "",
        # No source available: no excerpt, help still shown.
        ".\\pkg\\train.py:3:5: CKPT006 `checkpoint` called without `use_reentrant`",
        "  = help: pass use_reentrant=False",
        "",
        "./broken.py: error: could not parse: unexpected indent",
        "Found 3 finding(s) in 2 file(s).",
        "1 file(s) could not be checked.",
        "",
    ])


def test_text_gutter_width_follows_line_number() -> None:
    finding = Finding("one.py", 2, 1, 2, 4, "CKPT006", "m", "h", Severity.ERROR)
    report = make_report(findings=[finding], errors=[])
    options = RenderOptions(quiet=True)
    out = render("text", report, RULES, options, lambda _, __: ["", "abcdef"], rule_doc)
    assert out.splitlines()[1:] == ["  |", "2 | abcdef", "  | ^^^", "  |", "  = help: h"]


def test_text_tabs_are_kept_in_caret_padding() -> None:
    finding = Finding("model.py", 1, 3, 1, 5, "CKPT006", "m", "h", Severity.ERROR)
    report = make_report(findings=[finding], errors=[])
    out = render("text", report, RULES, RenderOptions(), lambda _, __: ["\t x()"], rule_doc)
    assert "1 | \t x()\n  | \t ^^\n" in out


def test_text_without_source() -> None:
    assert run("text", show_source=False) == "\n".join([
        "model.py:13:13: CKPT006 `checkpoint` called without `use_reentrant`",
        "    help: pass use_reentrant=False",
        "model.py:15:13: CKPT002 no input requires grad",
        "    help: check the inputs",
        ".\\pkg\\train.py:3:5: CKPT006 `checkpoint` called without `use_reentrant`",
        "    help: pass use_reentrant=False",
        "./broken.py: error: could not parse: unexpected indent",
        "Found 3 finding(s) in 2 file(s).",
        "1 file(s) could not be checked.",
        "",
    ])


def test_text_quiet_and_clean() -> None:
    assert "Found" not in run("text", quiet=True)
    assert run("text", LintReport(files_checked=2), quiet=True) == ""
    assert run("text", LintReport(files_checked=2)) == "All checks passed!\n"


def test_text_colour_only_when_requested() -> None:
    assert "\x1b" not in run("text")
    coloured = run("text", color=True)
    assert "\x1b[1mmodel.py\x1b[0m:13:13: \x1b[1;31mCKPT006\x1b[0m" in coloured
    assert "\x1b[1;33mCKPT002\x1b[0m" in coloured  # warning is yellow
    assert "\x1b[2m   |\x1b[0m" in coloured  # dim gutter


def test_text_statistics() -> None:
    report = make_report(unresolved_sites=2)
    assert run("text", report, statistics=True) == "\n".join([
        "   2  CKPT006  implicit-reentrant-mode",
        "   1  CKPT002  checkpoint-without-grad",
        "2 checkpoint sites could not be resolved",
        "./broken.py: error: could not parse: unexpected indent",
        "Found 3 finding(s) in 2 file(s).",
        "1 file(s) could not be checked.",
        "",
    ])
    assert "could not be resolved" not in run("text", statistics=True)


# --- json ---------------------------------------------------------------------------------------


def test_json_document() -> None:
    out = run("json")
    assert out.endswith("}\n")
    doc = json.loads(out)
    assert doc == {
        "version": __version__,
        "files_checked": 4,
        "findings": [
            {
                "code": "CKPT006", "severity": "error", "path": "model.py", "line": 13,
                "column": 13, "end_line": 13, "end_column": 38,
                "message": "`checkpoint` called without `use_reentrant`",
                "help": "pass use_reentrant=False", "fix": None,
            },
            {
                "code": "CKPT002", "severity": "warning", "path": "model.py", "line": 15,
                "column": 13, "end_line": 17, "end_column": 10,
                "message": "no input requires grad", "help": "check the inputs", "fix": None,
            },
            {
                "code": "CKPT006", "severity": "error", "path": ".\\pkg\\train.py", "line": 3,
                "column": 5, "end_line": 3, "end_column": 9,
                "message": "`checkpoint` called without `use_reentrant`",
                "help": "pass use_reentrant=False", "fix": None,
            },
        ],
        "errors": [{"path": "./broken.py", "message": "could not parse: unexpected indent"}],
    }
    assert list(doc) == ["version", "files_checked", "findings", "errors"]


# --- sarif --------------------------------------------------------------------------------------


def test_sarif_document() -> None:
    doc = json.loads(run("sarif"))
    assert doc["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert doc["version"] == "2.1.0"
    (run_,) = doc["runs"]
    driver = run_["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("ckptlint", __version__)
    assert driver["informationUri"] == "https://github.com/ckptlint/ckptlint"

    # Every rule is listed, including those without findings.
    assert [r["id"] for r in driver["rules"]] == ["CKPT001", "CKPT002", "CKPT006"]
    ckpt006 = driver["rules"][2]
    assert ckpt006["name"] == "ImplicitReentrantMode"
    summary = {"text": ImplicitReentrantMode.summary}
    assert ckpt006["shortDescription"] == ckpt006["fullDescription"] == summary
    assert ckpt006["help"]["markdown"] == "# CKPT006\n\nLong **markdown** doc."
    assert ckpt006["defaultConfiguration"] == {"level": "error"}
    assert ckpt006["properties"]["tags"] == ["pytorch", "checkpointing"]
    # No document: fall back to the summary; info maps to SARIF "note".
    fallback = MissingDocstring.summary
    assert driver["rules"][0]["help"] == {"text": fallback, "markdown": fallback}
    assert driver["rules"][0]["defaultConfiguration"] == {"level": "note"}

    results = run_["results"]
    assert [(r["ruleId"], r["ruleIndex"], r["level"]) for r in results] == [
        ("CKPT006", 2, "error"), ("CKPT002", 1, "warning"), ("CKPT006", 2, "error"),
    ]
    assert results[0]["message"]["text"].startswith("`checkpoint` called without `use_reentrant`")
    location = results[1]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "model.py", "uriBaseId": "%SRCROOT%"}
    region = {"startLine": 15, "startColumn": 13, "endLine": 17, "endColumn": 10}
    assert location["region"] == region
    other = results[2]["locations"][0]["physicalLocation"]
    assert other["artifactLocation"]["uri"] == "pkg/train.py"

    (invocation,) = run_["invocations"]
    assert invocation["executionSuccessful"] is False
    (note,) = invocation["toolExecutionNotifications"]
    assert note["level"] == "error"
    assert note["message"]["text"] == "could not parse: unexpected indent"
    assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "broken.py"


def test_sarif_clean_run_is_successful() -> None:
    (run_,) = json.loads(run("sarif", LintReport(files_checked=1)))["runs"]
    assert run_["results"] == []
    assert run_["invocations"][0] == {"executionSuccessful": True, "toolExecutionNotifications": []}
    assert len(run_["tool"]["driver"]["rules"]) == len(RULES)


# --- github -------------------------------------------------------------------------------------


def test_github_lines() -> None:
    assert run("github").splitlines() == [
        "::error title=ckptlint (CKPT006),file=model.py,line=13,col=13,endLine=13,endColumn=38"
        "::model.py:13:13: CKPT006 `checkpoint` called without `use_reentrant`",
        "::warning title=ckptlint (CKPT002),file=model.py,line=15,col=13,endLine=17,endColumn=10"
        "::model.py:15:13: CKPT002 no input requires grad",
        "::error title=ckptlint (CKPT006),file=pkg/train.py,line=3,col=5,endLine=3,endColumn=9"
        "::pkg/train.py:3:5: CKPT006 `checkpoint` called without `use_reentrant`",
        "::error file=broken.py::broken.py: could not parse: unexpected indent",
    ]


def test_github_escaping() -> None:
    finding = Finding("a,b:c.py", 1, 1, 1, 2, "CKPT001", "x: 100%, y\r\nz", "", Severity.INFO)
    out = run("github", LintReport(findings=[finding], errors=[FileError("d:e.py", "bad\nfile")]))
    assert out == (
        "::notice title=ckptlint (CKPT001),file=a%2Cb%3Ac.py,line=1,col=1,endLine=1,endColumn=2"
        "::a,b:c.py:1:1: CKPT001 x: 100%25, y%0D%0Az\n"
        "::error file=d%3Ae.py::d:e.py: bad%0Afile\n"
    )


# --- dispatch -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders(fmt: str) -> None:
    assert run(fmt)


def test_unknown_format() -> None:
    with pytest.raises(ValueError, match="unknown output format"):
        run("xml")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("./a/b.py", "a/b.py"),
        (".\\a\\b.py", "a/b.py"),
        ("././x.py", "x.py"),
        ("../x.py", "../x.py"),
    ],
)
def test_normalize_path(raw: str, expected: str) -> None:
    assert normalize_path(raw) == expected
