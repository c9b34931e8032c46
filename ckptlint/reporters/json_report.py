"""Machine-readable output: one JSON object, nothing else on stdout."""

from __future__ import annotations

import json
from typing import Any, Optional

from ckptlint import __version__
from ckptlint.findings import Confirmation, Finding, LintReport


def render(report: LintReport) -> str:
    document = {
        "version": __version__,
        "files_checked": report.files_checked,
        "findings": [_finding(f, report.confirmations.get(f)) for f in report.findings],
        "errors": [{"path": e.path, "message": e.message} for e in report.errors],
    }
    return json.dumps(document, indent=2) + "\n"


def _finding(f: Finding, confirmation: Optional[Confirmation]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "code": f.code,
        "severity": f.severity.value,
        "path": f.path,
        "line": f.line,
        "column": f.column,
        "end_line": f.end_line,
        "end_column": f.end_column,
        "message": f.message,
        "help": f.help,
    }
    if confirmation is not None:  # only with --confirm
        data["confirmation"] = confirmation_object(confirmation)
    return data


def confirmation_object(c: Confirmation) -> dict[str, Any]:
    return {
        "verdict": c.verdict, "evidence": list(c.evidence), "target": c.target, "device": c.device,
        "cause": c.cause or None, "example": c.example or None,
    }
