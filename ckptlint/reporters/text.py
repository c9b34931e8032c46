"""Human-readable output in ruff's "full" style."""

from __future__ import annotations

from collections import Counter
from typing import Optional, Sequence

from ckptlint.findings import CAUSES, COULD_NOT_RUN, VERDICTS, Confirmation, Finding, LintReport, Severity
from ckptlint.reporters import ReadLines, RenderOptions, RuleMeta, location

_SEVERITY_SGR = {Severity.ERROR: "31", Severity.WARNING: "33", Severity.INFO: "36"}
_BOLD, _DIM = "1", "2"


class _Painter:
    """Wraps text in ANSI SGR codes only when colour was requested by the CLI."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, *sgr: str) -> str:
        if not self.enabled or not text:
            return text
        return f"\x1b[{';'.join(sgr)}m{text}\x1b[0m"


def render(
    report: LintReport, rules: Sequence[RuleMeta], options: RenderOptions, read_lines: ReadLines
) -> str:
    paint = _Painter(options.color)
    lines: list[str] = []
    if options.statistics:
        lines += _statistics(report, rules, paint, options.unsafe_fixes)
    else:
        for finding in report.findings:
            lines += _finding(finding, options, read_lines, paint, report.confirmations.get(finding))
    error = paint("error", _BOLD, _SEVERITY_SGR[Severity.ERROR])
    lines += [f"{paint(e.path, _BOLD)}: {error}: {e.message}" for e in report.errors]
    if options.show_fixes and report.fixed:
        lines += fixed_summary(report.fixed, rules)
    if not options.quiet:
        lines += _summary(report, options.unsafe_fixes)
    # Finding blocks end in a blank separator; drop it at the very end.
    return "\n".join(lines).rstrip("\n") + "\n" if lines else ""


def _finding(f: Finding, options: RenderOptions, read_lines: ReadLines, paint: _Painter, confirmation: Optional[Confirmation] = None) -> list[str]:
    code = paint(f.code, _BOLD, _SEVERITY_SGR[f.severity])
    marker = " [*]" if f.fix_for(options.unsafe_fixes) else ""
    header = f"{paint(location(f.path, f.cell), _BOLD)}:{f.line}:{f.column}: {code}{marker} {f.message}"
    verdict = _verdict(confirmation, paint) if confirmation else ""
    skeleton = confirmation.example.splitlines() if confirmation else []
    fix = f.shown_fix(options.unsafe_fixes)
    fix_note = f"{fix.message} ({fix.applicability}{'' if f.fix_for(options.unsafe_fixes) else ': apply with --unsafe-fixes'})" if fix else ""
    if not options.show_source:
        block = [header, f"    help: {f.help}"] if f.help else [header]
        block += [f"    fix: {fix_note}"] if fix else []
        return block + ([f"    = {verdict}"] if verdict else []) + [f"      {line}".rstrip() for line in skeleton]

    width = len(str(f.line))
    gutter = paint(" " * width + " |", _DIM)
    block = [header]
    source = read_lines(f.path, f.cell)
    if source is not None and 1 <= f.line <= len(source):
        text = source[f.line - 1]
        # Multi-line spans are underlined to the end of their first line only.
        end = len(text) + 1 if f.end_line > f.line else f.end_column
        # Keep tabs in the padding so carets line up however the terminal expands them.
        pad = "".join(c if c == "\t" else " " for c in text[: f.column - 1])
        carets = "^" * max(1, end - f.column)
        block += [
            gutter,
            f"{paint(f'{f.line} |', _DIM)} {text}",
            f"{gutter} {pad}{paint(carets, _BOLD, _SEVERITY_SGR[f.severity])}",
            gutter,
        ]
    if f.help:
        block.append(f"{paint(' ' * width + ' =', _DIM)} {paint('help', _BOLD)}: {f.help}")
    if fix:
        block.append(f"{paint(' ' * width + ' =', _DIM)} {paint('fix', _BOLD)}: {fix_note}")
    if verdict:
        block.append(f"{paint(' ' * width + ' =', _DIM)} {verdict}")
        block += [f"{' ' * width}     {line}".rstrip() for line in skeleton]
    return block + [""]


def _verdict(confirmation: Confirmation, paint: _Painter) -> str:
    cause = f" ({confirmation.cause})" if confirmation.cause else ""
    return f"{paint(confirmation.verdict + cause, _BOLD)}: {'; '.join(confirmation.evidence)}"


def _statistics(report: LintReport, rules: Sequence[RuleMeta], paint: _Painter, unsafe_fixes: bool) -> list[str]:
    names = {r.code: r.name for r in rules}
    fixable = {f.code for f in report.findings if f.fix_for(unsafe_fixes)}
    counts = Counter(f.code for f in report.findings)
    severities = {f.code: f.severity for f in report.findings}
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    count_width = max([4] + [len(str(n)) for n in counts.values()])
    code_width = max([0] + [len(code) for code in counts])
    lines: list[str] = []
    for code, n in rows:
        # Pad before painting so ANSI codes do not disturb the alignment.
        label = paint(code.ljust(code_width), _BOLD, _SEVERITY_SGR[severities[code]])
        lines.append(f"{n:>{count_width}}  {label}  {'[*] ' if code in fixable else ''}{names.get(code, '')}".rstrip())
    if report.unresolved_sites:
        lines.append(f"{report.unresolved_sites} checkpoint sites could not be resolved")
    if report.stale:
        lines.append(f"{sum(e.count for e in report.stale)} baseline entries match no finding any more (fixed or changed; --update-baseline drops them):")
        lines += [f"  {e.path}:{e.line}: {e.code}" + (f" (x{e.count})" if e.count > 1 else "") for e in report.stale]
    return lines


def fixed_summary(fixed: list[Finding], rules: Sequence[RuleMeta]) -> list[str]:
    """ruff's --show-fixes enumeration."""
    names = {r.code: r.name for r in rules}
    lines = [f"Fixed {len(fixed)} finding(s):"]
    for path in sorted({f.path for f in fixed}):
        lines.append(f"- {path}:")
        counts = Counter(f.code for f in fixed if f.path == path)
        lines += [f"    {n} × {code} ({names.get(code, '')})" for code, n in sorted(counts.items())]
    return lines + [""]


def _summary(report: LintReport, unsafe_fixes: bool) -> list[str]:
    if report.fixed:
        total = len(report.fixed) + len(report.findings)
        lines = [f"Found {total} finding(s) ({len(report.fixed)} fixed, {len(report.findings)} remaining)."]
    elif report.findings:
        files = len({f.path for f in report.findings})
        lines = [f"Found {len(report.findings)} finding(s) in {files} file(s)."]
    else:
        lines = ["No findings in the files checked."] if report.errors else ["All checks passed!"]
    fixable = sum(1 for f in report.findings if f.fix_for(unsafe_fixes))
    hidden = sum(1 for f in report.findings if f.fixes and not f.fix_for(unsafe_fixes))
    hint = f" ({hidden} hidden fix(es) can be enabled with the `--unsafe-fixes` option)" if hidden else ""
    if fixable:
        lines.append(f"[*] {fixable} fixable with the `--fix{' --unsafe-fixes' if unsafe_fixes else ''}` option{hint}.")
    elif hidden:
        lines.append(f"No fixes available{hint}.")
    if report.baselined:
        lines.append(f"{report.baselined} finding(s) in the baseline not shown.")
    if report.errors:
        lines.append(f"{len(report.errors)} file(s) could not be checked.")
    if report.confirmations:
        lines.append(_confirm_summary(report))
    return lines


def _confirm_summary(report: LintReport) -> str:
    verdicts = Counter(c.verdict for c in report.confirmations.values())
    causes = Counter(c.cause for c in report.confirmations.values() if c.verdict == COULD_NOT_RUN)
    counted = ", ".join(f"{verdicts[v]} {v}" for v in VERDICTS)
    split = ", ".join(f"{causes[c]} {c}" for c in CAUSES if causes[c])
    return f"--confirm: {counted}" + (f" ({split})." if split else ".")
