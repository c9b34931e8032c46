"""GitHub Actions workflow commands, which the runner turns into PR annotations."""

from __future__ import annotations

from ckptlint.findings import LintReport, Severity
from ckptlint.reporters import location, normalize_path

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    # '%' first, so the escapes added afterwards are not escaped again.
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    # ':' and ',' delimit properties, so values must escape them too.
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(report: LintReport) -> str:
    lines: list[str] = []
    for f in report.findings:
        path = normalize_path(f.path)
        props = {
            "title": f"ckptlint ({f.code})",
            "file": path,
            "line": f.line,
            "col": f.column,
            "endLine": f.end_line,
            "endColumn": f.end_column,
        }
        joined = ",".join(f"{key}={_escape_property(str(value))}" for key, value in props.items())
        text = f"{location(path, f.cell)}:{f.line}:{f.column}: {f.code} {f.message}"
        confirmation = report.confirmations.get(f)
        if confirmation is not None:  # only with --confirm
            cause = f" ({confirmation.cause})" if confirmation.cause else ""
            text += f"\n= {confirmation.verdict}{cause}: {'; '.join(confirmation.evidence)}"
        data = _escape_data(text)
        lines.append(f"::{_COMMAND[f.severity]} {joined}::{data}")
    for e in report.errors:
        path = normalize_path(e.path)
        data = _escape_data(f"{path}: {e.message}")
        lines.append(f"::error file={_escape_property(path)}::{data}")
    return "".join(line + "\n" for line in lines)
