"""Command line: `ckptlint [PATHS]...` (ruff-like), `ckptlint rule CODE`, `ckptlint rules`, `ckptlint clean`."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import click

from ckptlint import __version__, progress
from ckptlint.cache import DEFAULT_DIRNAME, CacheError, ResultCache, clean
from ckptlint.config import ConfigError, Settings, find_config, load_settings
from ckptlint.docs import rule_document
from ckptlint.findings import LintReport
from ckptlint.lines import lines_of
from ckptlint.reporters import FORMATS, RenderOptions, render
from ckptlint.rules import all_rules
from ckptlint.source import SourceError, decode
from ckptlint.versions import resolve_versions

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 128 + 2  # SIGINT
_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", ".git")


class _DefaultToCheck(click.Group):
    """`ckptlint src/` means `ckptlint check src/`, as `ruff src/` once did."""

    def invoke(self, ctx: click.Context) -> object:
        with _ctrl_c_remembered() as interrupted:
            try:
                return super().invoke(ctx)
            except KeyboardInterrupt:
                interrupted.append(signal.SIGINT)
            finally:
                if interrupted:
                    # One line, the shell's code for SIGINT (click would say "Aborted!" and exit 1).
                    click.echo("ckptlint: interrupted", err=True)
                    raise click.exceptions.Exit(EXIT_INTERRUPTED) from None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            args = ["check", *args]
        return super().parse_args(ctx, args)


@contextlib.contextmanager
def _ctrl_c_remembered() -> Iterator[list]:
    """A list that gets an entry on Ctrl-C. Python drops a KeyboardInterrupt raised while it runs a
    finaliser or a weakref callback (the process pool's, say) after printing "Exception ignored",
    and the run went on to exit 1: the entry still ends it as interrupted, without that print."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    seen: list = []

    def interrupt(signum: int, frame: object) -> None:
        seen.append(signum)
        raise KeyboardInterrupt

    def unraisable(report: Any) -> None:
        if not isinstance(report.exc_value, KeyboardInterrupt):
            previous_hook(report)

    previous_handler, previous_hook = signal.signal(signal.SIGINT, interrupt), sys.unraisablehook
    sys.unraisablehook = unraisable
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous_handler)
        sys.unraisablehook = previous_hook


def _codes(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(code.strip().upper() for value in values for code in value.split(",") if code.strip())


def _fail(message: str) -> "click.exceptions.Exit":
    click.echo(f"ckptlint: error: {message}", err=True)
    return click.exceptions.Exit(EXIT_ERROR)


def _load_settings(config: Optional[str], paths: Sequence[str]) -> Settings:
    config_path = Path(config) if config else find_config([p for p in paths if p != "-"] or ["."])
    return load_settings(config_path)


def project_root(settings: Settings, paths: Sequence[str]) -> Optional[Path]:
    """Where the linted project declares its dependencies: the config's folder or the nearest marker."""
    if settings.project_root is not None:
        return settings.project_root
    start = Path(next((p for p in paths if p != "-"), ".")).resolve()
    for directory in (start, *start.parents):
        if any(os.path.exists(directory / marker) for marker in _PROJECT_MARKERS):  # False in a folder we may not search
            return directory
    return None


def unmarked_project(paths: Sequence[str]) -> Optional[Path]:
    """Without project markers, the outermost package holding the named files (its modules import
    each other); None when they are in different ones or in none: a bare script is linted alone
    (walking whatever folder holds it could be a home directory)."""
    roots = set()
    for given in (p for p in paths if p != "-"):
        path = Path(given).resolve()
        if os.path.isdir(path):
            return None  # a folder is walked whole already
        folder, top = path.parent, None
        while os.path.isfile(folder / "__init__.py") and folder.parent != folder:  # False where we may not look
            folder, top = folder.parent, folder
        roots.add(top)
    return roots.pop() if len(roots) == 1 else None


def cache_dir_for(settings: Settings, root: Optional[Path], override: Optional[str]) -> Path:
    """--cache-dir and CKPTLINT_CACHE_DIR are relative to the working directory, the configured
    one to its config file (already resolved), the default to the project root."""
    chosen = override or os.environ.get("CKPTLINT_CACHE_DIR") or settings.cache_dir
    return Path(os.path.abspath(chosen)) if chosen else (root or Path.cwd()) / DEFAULT_DIRNAME


@click.group(cls=_DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="ckptlint")
def main() -> None:
    """Find misuse of PyTorch activation checkpointing.

    `ckptlint [OPTIONS] [PATHS]...` is short for `ckptlint check [OPTIONS] [PATHS]...`;
    `ckptlint check --help` lists its options by topic: rule selection, output, fixes, baseline,
    files and configuration, library versions, cache and performance, runtime confirmation.
    Exit codes: 0 no findings, 1 findings, 2 usage error or a file that could not be checked.
    """


# `ckptlint check --help`, option by option under these headings (by parameter name); an option
# missing here is listed under "Other options".
_HELP_SECTIONS = {
    "Rule selection": ("select", "extend_select", "ignore"),
    "Output": ("fmt", "output_file", "statistics", "exit_zero", "quiet", "show_source", "color", "show_progress"),
    "Fixes": ("fix", "unsafe_fixes", "diff", "fix_only", "show_fixes", "add_noqa"),
    "Baseline": ("baseline_file", "update_baseline"),
    "Files and configuration": ("config", "exclude", "extend_exclude", "force_exclude", "max_file_size", "stdin_filename"),
    "Library versions": ("torch_version", "transformers_version"),
    "Cache and performance": ("no_cache", "cache_dir", "jobs"),
    "Runtime confirmation (executes the project's code)": ("confirm_findings", "confirm_timeout", "confirm_memory", "device"),
}


class _SectionedCommand(click.Command):
    """Options listed under headings, as `ruff check --help` lists them."""

    # One column for every section, so that the help texts line up from top to bottom.
    term_width = 30

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records: dict[str, list[tuple[str, str]]] = {}
        section_of = {name: title for title, names in _HELP_SECTIONS.items() for name in names}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
            if record is not None:
                term, text = record
                records.setdefault(section_of.get(param.name or "", "Other options"), []).append((term.ljust(self.term_width), text))
        for title in [*_HELP_SECTIONS, "Other options"]:
            if title in records:
                with formatter.section(title):
                    formatter.write_dl(records[title], col_max=self.term_width)


@main.command(cls=_SectionedCommand)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (comma-separated), e.g. CKPT00.")
@click.option("--extend-select", multiple=True, help="Codes or prefixes to enable on top of the configured selection.")
@click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable (comma-separated).")
@click.option("--format", "--output-format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True, help="Output format.")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), help="Write the report to a file instead of stdout.")
@click.option("--statistics", is_flag=True, help="Show counts per rule instead of each finding.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings (errors still exit 2).")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option("--show-source/--no-show-source", default=True, show_default=True, help="Show the source line under each finding.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False), help="pyproject.toml or ckptlint.toml to use instead of searching.")
@click.option("--exclude", multiple=True, help="Replace the default excludes (glob patterns, comma-separated).")
@click.option("--extend-exclude", multiple=True, help="Exclude more paths (glob patterns, comma-separated).")
@click.option("--force-exclude", is_flag=True, default=None, help="Apply excludes to files named on the command line too (for pre-commit).")
@click.option("--max-file-size", metavar="SIZE", help="Skip, and report, files bigger than this (default: 10 MB), e.g. 20MB.")
@click.option("--stdin-filename", help="The name of the file read from `-` (stdin), for messages and per-file settings.")
@click.option("--torch-version", help="Target torch version, e.g. 2.13 (overrides configuration and installed metadata).")
@click.option("--transformers-version", help="Target transformers version, e.g. 4.57.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Result cache folder (default: $CKPTLINT_CACHE_DIR, else .ckptlint_cache in the project).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: all cores).")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True, help="Colour the text output (auto: only on a terminal, never with NO_COLOR).")
@click.option("--confirm", "confirm_findings", is_flag=True, help="Run each finding's module with and without checkpointing and report the evidence. This executes the project's code.")
@click.option("--confirm-timeout", type=click.FloatRange(min=0, min_open=True), default=120.0, show_default=True, metavar="SECONDS", help="With --confirm: time limit per target.")
@click.option("--confirm-memory", type=click.FloatRange(min=0, min_open=True), metavar="GB", help="With --confirm: memory a target may allocate (address space beyond what it starts with); past it the target fails with \"exceeded\" instead of being killed.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True, help="With --confirm: where to run (auto: CUDA when available).")
@click.option("--fix/--no-fix", "fix", default=None, help="Apply safe fixes, then report what remains.")
@click.option("--unsafe-fixes/--no-unsafe-fixes", "unsafe_fixes", default=None, help="Also apply (and show as fixable) fixes that change behaviour.")
@click.option("--show-fixes/--no-show-fixes", "show_fixes", default=None, help="List the fixes applied.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff and write nothing (exit 1 when there would be changes). Implies --fix-only.")
@click.option("--fix-only/--no-fix-only", "fix_only", default=False, help="Apply fixes without reporting what remains (exit 0 unless a file could not be checked).")
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False), help="Report only findings not listed in this baseline file (JSON).")
@click.option("--update-baseline", is_flag=True, help="With --baseline: write the current findings into the file instead of reporting them.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every line with a finding (merged into an existing noqa comment).")
@click.option("--progress/--no-progress", "show_progress", default=None, help="Show progress on stderr (default: on a terminal, outside CI, for runs over a second).")
def check(
    paths: tuple[str, ...],
    select: tuple[str, ...],
    extend_select: tuple[str, ...],
    ignore: tuple[str, ...],
    fmt: str,
    output_file: Optional[str],
    statistics: bool,
    exit_zero: bool,
    quiet: bool,
    show_source: bool,
    config: Optional[str],
    exclude: tuple[str, ...],
    extend_exclude: tuple[str, ...],
    force_exclude: Optional[bool],
    max_file_size: Optional[str],
    stdin_filename: Optional[str],
    torch_version: Optional[str],
    transformers_version: Optional[str],
    no_cache: bool,
    cache_dir: Optional[str],
    jobs: Optional[int],
    color: str,
    confirm_findings: bool,
    confirm_timeout: float,
    confirm_memory: Optional[float],
    device: str,
    fix: Optional[bool],
    unsafe_fixes: Optional[bool],
    show_fixes: Optional[bool],
    diff: bool,
    fix_only: bool,
    baseline_file: Optional[str],
    update_baseline: bool,
    add_noqa: bool,
    show_progress: Optional[bool],
) -> None:
    """Lint PATHS (files, directories, or - for stdin; default: the current directory)."""
    from ckptlint.engine import lint

    paths = paths or (".",)
    try:
        settings = _load_settings(config, paths)
        overrides = {
            key: value
            for key, value in {
                "select": _codes(select),
                "extend_select": _codes(extend_select),
                "ignore": settings.ignore + _codes(ignore),
                "exclude": _codes_or_patterns(exclude),
                "extend_exclude": settings.extend_exclude + _codes_or_patterns(extend_exclude),
                "force_exclude": force_exclude,
                "max_file_size": max_file_size,
            }.items()
            if value
        }
        settings = settings.with_overrides(**overrides)
        root = project_root(settings, paths)
        versions = resolve_versions(settings, root, torch_version, transformers_version)
    except ConfigError as error:
        raise _fail(str(error))
    if stdin_filename is not None and "-" not in paths:
        raise _fail("--stdin-filename names the text read from stdin: pass '-' among the paths to read it")
    stdin_data = (stdin_filename or "-", _read_stdin()) if "-" in paths else None
    stdin = _decoded(stdin_data)  # (name, text), or None when there is none or it does not decode
    try:
        cache = None if no_cache else ResultCache(cache_dir_for(settings, root, cache_dir))
    except CacheError as error:
        raise _fail(str(error))
    unsafe = settings.unsafe_fixes if unsafe_fixes is None else unsafe_fixes
    fixing = diff or fix_only or (settings.fix if fix is None else fix)
    if add_noqa and (fix or diff or fix_only or stdin_data is not None):
        raise _fail("--add-noqa works on files, without --fix, --fix-only or --diff")
    if update_baseline and (not baseline_file or fixing or add_noqa):
        raise _fail("--update-baseline needs --baseline FILE, and no --fix, --diff or --add-noqa")
    baseline = _baseline(baseline_file, update_baseline)

    indexed = root or unmarked_project(paths)

    def run(stdin_text: Optional[str]) -> LintReport:
        # The bytes as read unless fixed: decoded as Python decodes a file, or reported if they do not decode.
        given = stdin_data if stdin is None or stdin_text == stdin[1] else (stdin[0], stdin_text)
        return lint(paths, settings, versions, jobs=jobs, cache=cache, stdin=given, project=indexed)

    feedback = progress.wanted(sys.stderr, show_progress)
    try:
        with progress.reporting(sys.stderr, feedback):
            if not fixing:
                report = run(stdin[1] if stdin else None)
            else:
                from ckptlint.autofix import fix_until_stable

                outcome = fix_until_stable(run, unsafe, stdin)
                report = outcome.report
    finally:
        if cache:
            cache.close()
    options = RenderOptions(
        show_source=show_source, statistics=statistics, quiet=quiet, unsafe_fixes=unsafe,
        show_fixes=settings.show_fixes if show_fixes is None else show_fixes,
    )  # fmt: skip
    if add_noqa:
        _add_noqa(report)
    if fixing:
        _finish_fixes(outcome, options, diff=diff, fix_only=fix_only, stdin=stdin)
        if diff or fix_only:
            raise click.exceptions.Exit(EXIT_ERROR if report.errors else EXIT_FINDINGS if diff and report.fixed else EXIT_CLEAN)
        if stdin is not None:  # what remains is reported on the fixed text
            stdin = (stdin[0], outcome.stdin or "")
    if baseline is not None:
        read_lines = _line_reader(stdin)
        if update_baseline:
            written = baseline.write(report.findings, read_lines)
            click.echo(f"Wrote {written} finding(s) to the baseline {baseline_file}.", err=True)
            raise click.exceptions.Exit(EXIT_ERROR if report.errors else EXIT_CLEAN)
        report.findings, report.baselined, report.stale = baseline.split(report.findings, read_lines)
    if confirm_findings and report.findings:
        from ckptlint.confirm import confirm

        sources = {stdin[0]: stdin[1]} if stdin is not None and stdin[0] != "-" else None
        with progress.reporting(sys.stderr, feedback):
            confirm(
                report, settings=settings, timeout=confirm_timeout, device=device, jobs=jobs, memory_gb=confirm_memory, sources=sources, versions=versions,
                relint=lambda other: lint(paths, settings, other, jobs=jobs, stdin=stdin_data, project=indexed),
            )

    # With stdin fixed, stdout carries the fixed code (ruff's convention): the report goes to stderr.
    to_stderr = fixing and stdin is not None
    stream = sys.stderr if to_stderr else sys.stdout
    use_color = color == "always" or (color == "auto" and output_file is None and stream.isatty() and "NO_COLOR" not in os.environ)
    options = replace(options, color=use_color)
    output = render(fmt, report, all_rules(), options, _line_reader(stdin), rule_document)
    if output_file:
        Path(output_file).write_text(output, encoding="utf-8")
    else:
        click.echo(output, nl=False, err=to_stderr, color=use_color)  # click strips colour in pipes unless told
    if fmt != "text":
        for error in report.errors:
            click.echo(f"{error.path}: error: {error.message}", err=True)
    raise click.exceptions.Exit(_exit_code(report, exit_zero))


def _baseline(path: Optional[str], update: bool):
    if path is None:
        return None
    from ckptlint.baseline import Baseline, BaselineError

    try:
        return Baseline(Path(path)) if update else Baseline.load(Path(path))
    except BaselineError as error:
        raise _fail(str(error))


def _add_noqa(report: LintReport) -> None:
    """ruff's --add-noqa: write the directives, say how many, exit 0 (2 when a file had an error)."""
    from ckptlint.autofix import add_noqa, write
    from ckptlint.findings import FileError

    outcome, added, skipped = add_noqa(report.findings)
    report.errors.extend(FileError(path, "changed on disk while ckptlint added noqa comments: left as it is") for path in write(outcome))
    for path, line in skipped:
        click.echo(f"{path}:{line}: warning: no noqa comment added: the line ends inside a string or a backslash continues it", err=True)
    for error in report.errors:
        click.echo(f"{error.path}: error: {error.message}", err=True)
    click.echo(f"Added {added} noqa directive(s).", err=True)
    raise click.exceptions.Exit(EXIT_ERROR if report.errors else EXIT_CLEAN)


def _finish_fixes(outcome, options: RenderOptions, *, diff: bool, fix_only: bool, stdin: Optional[tuple[str, str]]) -> None:
    """Write the fixed files (or print their diff), and for --diff/--fix-only the one-line summary."""
    from ckptlint.autofix import unified_diff, write
    from ckptlint.findings import FileError

    report = outcome.report
    if diff:
        for path in sorted(outcome.after):
            click.echo(unified_diff(path, outcome.before[path], outcome.after[path]), nl=False)
        if stdin is not None and outcome.stdin != stdin[1]:
            click.echo(unified_diff(stdin[0], stdin[1].encode(), (outcome.stdin or "").encode()), nl=False)
    else:
        report.errors.extend(FileError(path, "changed on disk while ckptlint fixed it: left as it is") for path in write(outcome))
        if stdin is not None:
            click.echo(outcome.stdin, nl=False)
    if not (diff or fix_only):
        return
    for error in report.errors:
        click.echo(f"{error.path}: error: {error.message}", err=True)
    if options.show_fixes and report.fixed:
        from ckptlint.reporters.text import fixed_summary

        click.echo("\n".join(fixed_summary(report.fixed, all_rules())), err=True)
    verb = "Would fix" if diff else "Fixed"
    click.echo(f"{verb} {len(report.fixed)} finding(s)." if report.fixed else "No fixes available.", err=True)


def _codes_or_patterns(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(p.strip() for value in values for p in value.split(",") if p.strip())


def _exit_code(report: LintReport, exit_zero: bool) -> int:
    if report.errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if report.findings and not exit_zero else EXIT_CLEAN


def _read_stdin() -> bytes:
    """Bytes: the text is decoded as Python decodes a file (BOM, coding cookie), not by the locale."""
    stream = getattr(sys.stdin, "buffer", None)
    return stream.read() if stream is not None else sys.stdin.read().encode()


def _decoded(stdin: Optional[tuple[str, bytes]]) -> Optional[tuple[str, str]]:
    if stdin is None:
        return None
    try:
        source = decode(*stdin)
    except SourceError:  # reported by the lint as that file's error
        return None
    # A notebook stays the JSON document read (fixes and excerpts work on its cells).
    return stdin[0], stdin[1].decode("utf-8") if source.cells is not None else source.text


def _line_reader(stdin: Optional[tuple[str, str]]):
    from ckptlint.notebooks import NotebookError, cell_lines

    @lru_cache(maxsize=64)
    def read_lines(path: str, cell: Optional[int]) -> Optional[list[str]]:
        try:
            data = stdin[1].encode() if stdin is not None and path == stdin[0] else Path(path).read_bytes()
            return lines_of(data.decode("utf-8", errors="replace")) if cell is None else cell_lines(data, cell)
        except (OSError, NotebookError):
            return None

    return read_lines


@main.command()
@click.argument("code")
def rule(code: str) -> None:
    """Print the document of rule CODE (what it does, why, examples, the fix)."""
    known = {r.code for r in all_rules()}
    document = rule_document(code) if code.upper() in known else None
    if document is None:
        raise _fail(f"unknown rule code '{code}' (known: {', '.join(sorted(known))})")
    click.echo(document, nl=not document.endswith("\n"))


@main.command()
def rules() -> None:
    """List every rule: code, name, default severity and summary."""
    for r in all_rules():
        click.echo(f"{r.code}  {r.name:<28} {r.severity.value:<8} {r.summary}")


@main.command("clean")
@click.option("--config", type=click.Path(exists=True, dir_okay=False))
@click.option("--cache-dir", type=click.Path(file_okay=False))
def clean_command(config: Optional[str], cache_dir: Optional[str]) -> None:
    """Delete the result cache."""
    try:
        settings = _load_settings(config, ["."])
    except ConfigError as error:
        raise _fail(str(error))
    directory = cache_dir_for(settings, project_root(settings, ["."]), cache_dir)
    try:
        click.echo(clean(directory))
    except CacheError as error:
        raise _fail(str(error))
