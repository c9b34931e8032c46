"""Machine-readable output: one JSON object, nothing else on stdout."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Optional

from ckptlint import __version__
from ckptlint.findings import Confirmation, Edit, Finding, Fix, LintReport


def render(report: LintReport, unsafe_fixes: bool = False) -> str:
    document = {
        "version": __version__,
        "files_checked": report.files_checked,
        "findings": [_finding(f, report.confirmations.get(f), unsafe_fixes) for f in report.findings],
        "errors": [{"path": e.path, "message": e.message} for e in report.errors],
    }
    if report.baselined or report.stale:  # only with --baseline
        document["baseline"] = {"hidden": report.baselined, "stale": [asdict(e) for e in report.stale]}
    return json.dumps(document, indent=2) + "\n"


def _finding(f: Finding, confirmation: Optional[Confirmation], unsafe_fixes: bool) -> dict[str, Any]:
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
        "fix": fix_object(f.shown_fix(unsafe_fixes)),
    }
    if f.cell is not None:
        data["cell"] = f.cell
    if confirmation is not None:  # only with --confirm
        data["confirmation"] = confirmation_object(confirmation)
    return data


def fix_object(fix: Optional[Fix]) -> Optional[dict[str, Any]]:
    if fix is None:
        return None
    return {"applicability": fix.applicability, "message": fix.message, "edits": [_edit(e) for e in fix.edits]}


def _edit(e: Edit) -> dict[str, Any]:
    data: dict[str, Any] = {"line": e.line, "column": e.column, "end_line": e.end_line, "end_column": e.end_column, "content": e.content}
    if e.cell is not None:
        data["cell"] = e.cell
    return data


def confirmation_object(c: Confirmation) -> dict[str, Any]:
    return {
        "verdict": c.verdict, "evidence": list(c.evidence), "target": c.target, "device": c.device,
        "cause": c.cause or None, "example": c.example or None,
    }
