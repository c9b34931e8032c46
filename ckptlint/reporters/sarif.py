"""SARIF 2.1.0, in the subset GitHub code scanning ingests."""

from __future__ import annotations

import json
from typing import Any, Sequence
from urllib.parse import quote

from ckptlint import __version__
from ckptlint.findings import Fix, LintReport, Severity
from ckptlint.reporters import RuleDoc, RuleMeta, normalize_path
from ckptlint.reporters.json_report import confirmation_object

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _location(path: str) -> dict[str, Any]:
    # Relative to the checkout root, which GitHub resolves as %SRCROOT%.
    uri = quote(normalize_path(path))
    return {"physicalLocation": {"artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"}}}


def _fix(path: str, fix: Fix) -> dict[str, Any]:
    replacements = [
        {
            "deletedRegion": {"startLine": e.line, "startColumn": e.column, "endLine": e.end_line, "endColumn": e.end_column},
            "insertedContent": {"text": e.content},
        }
        for e in fix.edits
    ]
    return {
        "description": {"text": fix.message},
        "artifactChanges": [{**_location(path)["physicalLocation"], "replacements": replacements}],
        "properties": {"applicability": fix.applicability},
    }


def _rule(rule: RuleMeta, rule_doc: RuleDoc) -> dict[str, Any]:
    doc = rule_doc(rule.code) or rule.summary
    return {
        "id": rule.code,
        "name": "".join(part.capitalize() for part in rule.name.split("-")),
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.summary},
        "help": {"text": doc, "markdown": doc},
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
        "properties": {"tags": ["pytorch", "checkpointing"]},
    }


def render(report: LintReport, rules: Sequence[RuleMeta], rule_doc: RuleDoc) -> str:
    index = {rule.code: i for i, rule in enumerate(rules)}
    results: list[dict[str, Any]] = []
    for f in report.findings:
        location = _location(f.path)
        location["physicalLocation"]["region"] = {
            "startLine": f.line,
            "startColumn": f.column,
            "endLine": f.end_line,
            "endColumn": f.end_column,
        }
        result: dict[str, Any] = {
            "ruleId": f.code,
            "level": _LEVEL[f.severity],
            "message": {"text": f"{f.message} {f.help}" if f.help else f.message},
            "locations": [location],
        }
        if f.fixes:
            result["fixes"] = [_fix(f.path, fix) for fix in f.fixes]
        properties = {}
        if f.cell is not None:  # lines count from the start of that notebook cell
            properties["cell"] = f.cell
        confirmation = report.confirmations.get(f)
        if confirmation is not None:  # only with --confirm
            properties["confirmation"] = confirmation_object(confirmation)
        if properties:
            result["properties"] = properties
        # ruleIndex must point into driver.rules; omit it for codes not listed there.
        if f.code in index:
            result["ruleIndex"] = index[f.code]
        results.append(result)

    notifications = [
        {"level": "error", "message": {"text": e.message}, "locations": [_location(e.path)]}
        for e in report.errors
    ]
    run = {
        "tool": {
            "driver": {
                "name": "ckptlint",
                "version": __version__,
                "informationUri": "https://github.com/ckptlint/ckptlint",
                "rules": [_rule(rule, rule_doc) for rule in rules],
            }
        },
        # Finding columns count code points (Python str offsets); SARIF defaults to UTF-16 units.
        "columnKind": "unicodeCodePoints",
        "invocations": [
            {"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications}
        ],
        "results": results,
    }
    document = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [run],
    }
    return json.dumps(document, indent=2) + "\n"
