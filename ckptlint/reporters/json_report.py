"""Machine-readable output: one JSON object, nothing else on stdout."""

from __future__ import annotations

import json

from ckptlint import __version__
from ckptlint.findings import LintReport


def render(report: LintReport) -> str:
    document = {
        "version": __version__,
        "files_checked": report.files_checked,
        "findings": [
            {
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
            for f in report.findings
        ],
        "errors": [{"path": e.path, "message": e.message} for e in report.errors],
    }
    return json.dumps(document, indent=2) + "\n"
