"""Runtime confirmation: run each finding's code with and without checkpointing and compare.

- `confirm(report, ...)`: what `ckptlint check --confirm` does after linting. Each target runs in
  its own child process with a deadline; the verdict of every finding lands in
  `report.confirmations`.
- `compare(model, *args, **kwargs)`: the same A/B comparison in-process, for a project's own
  tests: `assert compare(model, x).identical`.
- `example(Target)`: a decorator for factories that tell `--confirm` how to build a target.

Importing this package does not import torch; `compare()` and the child processes do.
"""

from __future__ import annotations

import os
import re
from importlib import metadata
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

from ckptlint import notebooks
from ckptlint.confirm import targets, usage
from ckptlint.confirm.registry import example
from ckptlint.discovery import excluded_by
from ckptlint.findings import COULD_NOT_RUN, NEEDS_EXAMPLE, NEEDS_PACKAGE, NOT_REPRODUCED, Confirmation, Finding, LintReport
from ckptlint.versions import AssumedVersion, LibraryVersions, parse_version, transformers_default_reentrant

if TYPE_CHECKING:
    from ckptlint.config import Settings
    from ckptlint.confirm.ab import ComparisonReport

__all__ = ["DEFAULT_TIMEOUT", "compare", "compare_call", "confirm", "example"]

DEFAULT_TIMEOUT = 120.0
# Side effects (caches appended by the recompute, aux losses) can need a second step to show.
_TWO_STEP_CODES = ("CKPT004", "CKPT007")


def confirm(
    report: LintReport,
    *,
    settings: Optional["Settings"] = None,
    examples: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
    device: str = "auto",
    jobs: Optional[int] = None,
    memory_gb: Optional[float] = None,
    sources: Optional[Mapping[str, str]] = None,
    versions: Optional[LibraryVersions] = None,
    relint: Optional[Callable[[LibraryVersions], LintReport]] = None,
) -> dict[Finding, Confirmation]:
    """Run the code of every finding in `report` (this executes the project's code) and record a
    verdict per finding in `report.confirmations` (also returned).

    `examples`: files with `@ckptlint.example` factories, on top of `settings.confirm_examples`.
    `timeout`: seconds per target; `device`: "auto" (CUDA when available), "cpu" or "cuda";
    `memory_gb`: address space a target may map on top of what it starts with (RLIMIT_AS);
    `sources`: path -> text that was linted instead of the file (stdin), and is what runs;
    `versions`: what the findings were linted for (a run on a transformers whose checkpointing
    defaults differ cannot show a finding about them); `relint`: the same lint for other versions
    (a finding it does not give for the installed transformers cannot be shown here either). Files
    the settings exclude are never run (a scratch script's main does not stand for the project)."""
    excluded = excluded_by(settings) if settings is not None else (lambda path: False)
    with usage.excluding(excluded):
        return _confirm(report, settings, examples, timeout, device, jobs, memory_gb, sources, versions, relint)


def _confirm(
    report: LintReport,
    settings: Optional["Settings"],
    examples: Sequence[str],
    timeout: float,
    device: str,
    jobs: Optional[int],
    memory_gb: Optional[float],
    sources: Optional[Mapping[str, str]],
    versions: Optional[LibraryVersions],
    relint: Optional[Callable[[LibraryVersions], LintReport]],
) -> dict[Finding, Confirmation]:
    from ckptlint.confirm import pool

    example_files = tuple(os.path.abspath(e) for e in (*examples, *(settings.confirm_examples if settings else ())))
    texts = {os.path.abspath(path): text for path, text in (sources or {}).items()}
    confirmations: dict[Finding, Confirmation] = {}
    groups: dict[targets.Target, list[Finding]] = {}
    # A notebook runs as the module of its joined code cells; its findings move to that code.
    in_notebooks = notebooks.runnable_findings(report.findings, texts)
    for finding in (in_notebooks.moved.get(f, f) for f in report.findings):
        path = os.path.abspath(finding.path)
        if finding.path == "-":
            confirmations[finding] = _confirmation(COULD_NOT_RUN, ("the code was read from stdin without --stdin-filename: name its file to run it",), "", "", NEEDS_EXAMPLE)
            continue
        target = targets.resolve(path, finding.line, example_files, texts.get(path))
        if isinstance(target, targets.Unrunnable):
            label = f"{finding.path}::{target.label}" if target.label else finding.path
            confirmations[finding] = _confirmation(COULD_NOT_RUN, (target.reason,), label, "", target.cause, target.example)
        else:
            groups.setdefault(target, []).append(finding)
    shown = {target: _shown_path(target, findings[0]) for target, findings in groups.items()}
    jobs_list = [_job(target, findings, example_files, device, texts.get(target.path)) for target, findings in groups.items()]
    for job, target in zip(jobs_list, groups):
        job["usage"] = _usage(target, texts.get(target.path))
        job["flat_script"] = usage.flat_script(target.path, texts.get(target.path))
        job["hf_checkpointing"] = usage.hf_checkpointing(target.path) if target.kind == "class" else None
    results = pool.run_jobs(jobs_list, timeout=timeout, parallel=jobs or os.cpu_count() or 1, memory_gb=memory_gb)
    unreproduced = [f for (_, findings), result in zip(groups.items(), results) for f, v in zip(findings, result["verdicts"]) if v["verdict"] == NOT_REPRODUCED]
    installed_would_not = _not_reported_for_installed_transformers(unreproduced, versions, relint) if unreproduced and relint else {}
    for (target, findings), result in zip(groups.items(), results):
        label = target.label(shown[target])
        for finding, verdict in zip(findings, result["verdicts"]):
            evidence = tuple(verdict["evidence"])
            if target.via and verdict["verdict"] != COULD_NOT_RUN:
                evidence += (f"target chosen because {target.via}",)
            mismatch = _transformers_mismatch(finding, versions) or installed_would_not.get(finding) if verdict["verdict"] == NOT_REPRODUCED else None
            if mismatch is not None:
                confirmations[finding] = _confirmation(COULD_NOT_RUN, (mismatch, *evidence), label, result.get("device", ""), NEEDS_PACKAGE)
                continue
            confirmations[finding] = _confirmation(
                verdict["verdict"], evidence, label, result.get("device", ""), verdict.get("cause", ""), verdict.get("example", "")
            )
    confirmations = notebooks.confirmations_in_cells(confirmations, in_notebooks)
    report.confirmations.update(confirmations)
    return confirmations


# C0 and C1 control characters: user output and exception messages end up in the evidence, which
# goes to terminals (text), annotations (github) and logs; each is shown as its escape instead.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], text)


def _confirmation(verdict: str, evidence: Sequence[str], target: str, device: str, cause: str = "", example: str = "") -> Confirmation:
    return Confirmation(
        verdict,
        tuple(printable(line) for line in evidence),
        printable(target),
        device,
        cause if verdict == COULD_NOT_RUN else "",
        "\n".join(printable(line) for line in example.splitlines()),
    )


def _transformers_mismatch(finding: Finding, versions: Optional[LibraryVersions]) -> Optional[str]:
    """Why a run cannot show a finding about transformers' checkpointing: the installed transformers
    is not reentrant by default where the linted one is (or the reverse). None when they agree."""
    if versions is None or "transformers" not in finding.message:
        return None
    try:
        installed = parse_version(metadata.version("transformers"))
    except metadata.PackageNotFoundError:
        return None
    linted = versions.transformers
    if installed is None or transformers_default_reentrant(linted) == transformers_default_reentrant(AssumedVersion("transformers", installed, "installed")):
        return None
    reentrant = transformers_default_reentrant(linted)
    modes = {True: "reentrant", False: "non-reentrant"}
    wanted = "'transformers<5'" if reentrant else "'transformers>=5'"
    return (
        f"linted with the checkpointing of transformers {linted.text} ({linted.source}): {modes[reentrant]} by default; "
        f"the installed {'.'.join(map(str, installed))} is {modes[not reentrant]} by default, so a run here cannot show it: "
        f"pip install {wanted}"
    )


def _not_reported_for_installed_transformers(
    findings: Sequence[Finding], versions: Optional[LibraryVersions], relint: Callable[[LibraryVersions], LintReport],
) -> dict[Finding, str]:
    """Findings linted for another transformers than the installed one that the analysis does not
    report for the installed one (`gradient_checkpointing_enable` hooks a frozen embedding itself
    from 5.0 on, for token-id models): a run here cannot show them. The reason, per finding."""
    try:
        installed = parse_version(metadata.version("transformers"))
    except metadata.PackageNotFoundError:
        return {}
    if versions is None or installed is None or installed[:2] == versions.transformers.version[:2]:
        return {}
    reported = {(f.path, f.line, f.code) for f in relint(LibraryVersions(versions.torch, AssumedVersion("transformers", installed, "installed"))).findings}
    linted = versions.transformers
    return {
        f: (
            f"linted for transformers {linted.text} ({linted.source}); for the installed {'.'.join(map(str, installed))} the "
            f"analysis does not report it (that version does this differently), so a run here cannot show it: "
            f"pip install 'transformers=={linted.text}.*'"
        )
        for f in findings
        if (f.path, f.line, f.code) not in reported
    }


def _shown_path(target: targets.Target, finding: Finding) -> str:
    """The target's file as the finding's path is shown (a target may live in another file)."""
    if os.path.abspath(finding.path) == target.path:
        return finding.path
    return target.path if os.path.isabs(finding.path) else os.path.relpath(target.path)


def _usage(target: targets.Target, source: Optional[str]) -> dict[str, Any]:
    """How the project builds and calls the target (read statically from its files)."""
    import ast

    tree = None
    if source is not None:
        try:
            tree = ast.parse(source, filename=target.path)
        except (SyntaxError, ValueError):
            tree = None
    files = usage.project_files(target.path)
    return usage.usage_of(target.qualname, target.path, files, tree, constructs=target.constructs).to_json()


def _job(target: targets.Target, findings: Sequence[Finding], examples: Sequence[str], device: str, source: Optional[str]) -> dict[str, Any]:
    return {
        "path": target.path,
        "source": source,
        "kind": target.kind,
        "qualname": target.qualname,
        "method": target.method,
        "setup": target.setup,
        "builders": list(target.builders),
        "constructs": list(target.constructs),
        "trains": target.trains,
        "findings": [{"code": f.code, "path": os.path.abspath(f.path), "line": f.line, "end_line": f.end_line} for f in findings],
        "examples": list(examples),
        "device": device,
        "steps": 2 if any(f.code in _TWO_STEP_CODES for f in findings) else 1,
        "cwd": os.getcwd(),
        "sys_path": [os.getcwd()],
    }


def compare(model: Any, *args: Any, **kwargs: Any) -> "ComparisonReport":
    """Run `model(*args, **kwargs)` and one backward twice from the same weights, inputs and seeds:
    as written, and with every checkpoint call made direct. The report says whether the
    checkpointed model trains exactly like its non-checkpointed twin (`.identical`,
    `.assert_identical()`) and, if not, how it differs (`.evidence()`). Imports torch."""
    from ckptlint.confirm.ab import compare as run_compare

    return run_compare(model, *args, **kwargs)


def compare_call(model: Any, args: Sequence[Any] = (), kwargs: Optional[dict[str, Any]] = None, **options: Any) -> "ComparisonReport":
    """`compare()` with options: `call=` (a training function run instead of `model(...)`),
    `steps=`, `rtol=`, `atol=`. See `ckptlint.confirm.ab.compare_call`."""
    from ckptlint.confirm.ab import compare_call as run_compare_call

    return run_compare_call(model, args, kwargs, **options)
