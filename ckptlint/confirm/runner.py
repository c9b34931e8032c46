"""The confirm child process: one target per process.

`run_job(job, connection)` is the process entry point (multiprocessing); it never raises: the
result, or why it could not run, goes back through `connection` as a plain dict. Output of the
user's code goes to the job's log file, never to ckptlint's stdout.

`python -m ckptlint.confirm.runner JOB.json` runs one job in the foreground and prints the
result, for debugging a target by hand.
"""

from __future__ import annotations

import builtins
import importlib.util
import json
import os
import re
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any, Optional

from ckptlint.confirm import absent_packages, failures
from ckptlint.confirm.failures import StandardInputRead
from ckptlint.findings import COULD_NOT_RUN, CRASHED, NEEDS_PACKAGE

GB = 1024**3
# Packages that are not installed which a target may import as placeholders before it gives up.
_MAX_ABSENT = 5
# Import names whose distribution on PyPI is called otherwise.
DISTRIBUTIONS = {
    "sklearn": "scikit-learn", "skimage": "scikit-image", "PIL": "pillow", "cv2": "opencv-python",
    "yaml": "pyyaml", "pytorch_lightning": "lightning", "attr": "attrs", "Bio": "biopython",
    "google.protobuf": "protobuf", "dateutil": "python-dateutil", "bs4": "beautifulsoup4",
}  # fmt: skip


def run_job(job: dict[str, Any], connection: Any) -> None:
    # Its own session: the parent kills the whole process group, subprocesses of user code included.
    if hasattr(os, "setsid"):
        os.setsid()
    _redirect_output(job.get("log"))
    _cap_memory(job.get("memory_gb"))
    builtins.input = _no_input
    try:
        result = execute(job)
    except BaseException as error:  # never let anything escape the child
        result = failure(job, f"internal error: {type(error).__name__}: {error}", CRASHED)
        traceback.print_exc()
    try:
        connection.send(result)
        connection.close()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # Skip the user's atexit handlers and non-daemon threads: the result is delivered.
        os._exit(0)


def execute(job: dict[str, Any]) -> dict[str, Any]:
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    try:
        import torch
    except ImportError:
        return failure(job, "torch is not installed in this environment; install it: pip install torch", NEEDS_PACKAGE)
    from ckptlint.confirm import build, hf, hf_trainer, weights

    failures.memory_cap_gb = job.get("memory_gb")
    torch.set_num_threads(1)  # tiny models: threads only add scheduling noise and time
    if job.get("cwd"):
        os.chdir(job["cwd"])
    for entry in reversed(job.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    try:
        device = build.resolve_device(job.get("device", "auto"))
    except failures.CannotRun as error:
        return failure(job, str(error), error.cause)
    shown = os.path.relpath(job["path"], job.get("cwd") or os.getcwd())
    absent: list[str] = []  # packages that are not installed, imported as placeholders
    needs_package: Optional[dict[str, Any]] = None  # the verdict when the code cannot run without them
    while True:
        try:
            module = build.import_file(job["path"], job.get("source"), definitions_only=job.get("flat_script", False))
            break
        except BaseException as error:
            if isinstance(error, KeyboardInterrupt):
                raise
            missing = missing_package(error, job["path"])
            top = str(getattr(error, "name", "") or "").split(".")[0]
            if missing and top and top not in absent and len(absent) < _MAX_ABSENT:
                needs_package = needs_package or failure(job, f"importing {shown} failed: {type(error).__name__}: {error}; install it: pip install {missing}", NEEDS_PACKAGE, device=device)
                absent.append(top)
                absent_packages.install(absent)
                continue
            if needs_package is not None:
                return needs_package  # the placeholder itself was used while importing
            named = failures.user_failure(f"importing {shown}", error)
            return failure(job, named or f"importing {shown} failed: {type(error).__name__}: {error}", CRASHED, device=device)
    example_errors = build.load_examples([p for p in job.get("examples", []) if os.path.abspath(p) != os.path.abspath(job["path"])])
    _import_transformers_for_a_main_elsewhere(job)
    built: list[str] = []  # models that from_pretrained built from tiny configs, weight files not found
    with hf.offline_from_pretrained(built), weights.missing_weight_files(built), hf_trainer.trainer_stand_ins(built):
        result = _run_plans(job, module, device, example_errors, built)
    if needs_package is None:
        return result
    # The code imports packages that are not installed: a run that failed may have needed them;
    # one that ran used none of them where it ran.
    if any(v["verdict"] == COULD_NOT_RUN for v in result["verdicts"]):
        return needs_package
    note = f"ran without {', '.join(f'`{name}`' for name in absent)} (not installed: a placeholder that raises wherever the code would use it)"
    for verdict in result["verdicts"]:
        verdict["evidence"].append(note)
    return result


def _import_transformers_for_a_main_elsewhere(job: dict[str, Any]) -> None:
    """A main in another file that uses transformers, run for a helper of this file that does not
    import it: import it now, so that its `from_pretrained` is patched before the main loads a model."""
    main_path = (job.get("usage") or {}).get("main_path")
    if not main_path or "transformers" in sys.modules or importlib.util.find_spec("transformers") is None:
        return
    try:
        mentions = "transformers" in Path(main_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    if mentions:
        import transformers  # noqa: F401


def _run_plans(job: dict[str, Any], module: Any, device: str, example_errors: list[str], built: list[str]) -> dict[str, Any]:
    """Try the target's plans in order; the first that reaches the finding gives the verdicts."""
    from ckptlint.confirm import ab, build

    try:
        plans = build.plans_for(job, module, device, example_errors)
    except failures.CannotRun as error:
        return failure(job, str(error), error.cause, error.example, device)
    rtol, atol = ab.TOLERANCES["cuda" if device == "cuda" else "cpu"]
    tried: list[str] = []
    last: Optional[dict[str, Any]] = None
    for make_plan in plans:
        try:
            plan = make_plan()
        except failures.CannotRun as error:
            last = failure(job, str(error), error.cause, error.example, device)
            tried.append(str(error).split("; add a factory")[0])
            continue
        except BaseException as error:
            if isinstance(error, KeyboardInterrupt):
                raise
            named = failures.user_failure("building the target", error)
            last = failure(job, named or f"building the target failed: {type(error).__name__}: {error}", CRASHED, device=device)
            tried.append(last["verdicts"][0]["evidence"][0] if last["verdicts"] else "")
            continue
        report = ab.compare_runs(plan.make, steps=job.get("steps", 1), device=device, rtol=rtol, atol=atol)
        if plan.fallible:
            missed = _missed(report, job, plan.runs_model_only)
            if missed:
                tried.append(f"{plan.description}: {missed}")
                continue
        verdicts = []
        for finding in job["findings"]:
            verdict, evidence = ab.verdict(finding["code"], report, finding.get("path", job["path"]), finding["line"], finding.get("end_line"))
            if verdict != COULD_NOT_RUN:
                evidence = evidence + [plan.description] + list(dict.fromkeys(built)) + [f"before that, tried: {t}" for t in tried]
            verdicts.append({"verdict": verdict, "evidence": evidence, "cause": CRASHED if verdict == COULD_NOT_RUN else ""})
        return {"device": device, "verdicts": verdicts, "report": _jsonable(report.to_dict())}
    if last is None:
        return failure(job, "no way to run the target: " + "; ".join(tried), CRASHED, device=device)
    if len(tried) > 1:
        for verdict in last["verdicts"]:
            verdict["evidence"] += [f"also tried: {t}" for t in tried[:-1]]
    return last


# A call of torch's checkpoint functions or transformers' (not `gradient_checkpointing_enable(`,
# which only switches checkpointing on: its calls happen elsewhere).
_CHECKPOINT_CALL = re.compile(r"(?<![\w])(?:checkpoint|checkpoint_sequential|_gradient_checkpointing_func)\s*\(")


def _missed(report: Any, job: dict[str, Any], runs_model_only: bool = False) -> str:
    """Why a fallible plan (a script) says nothing about the findings: it failed without
    checkpointing too, or never ran the checkpoint call a finding points at (or, for a plan that
    `runs_model_only`, none that belongs to the finding's line)."""
    import linecache

    from ckptlint.confirm import ab

    if report.error_without:
        return f"{report.error_without} without checkpointing too"
    if not report.calls:
        return "no checkpoint call ran"
    for finding in job["findings"]:
        path = finding.get("path", job["path"])
        lines = range(finding["line"], (finding.get("end_line") or finding["line"]) + 1)
        at_site = any(_CHECKPOINT_CALL.search(linecache.getline(path, n)) for n in lines)
        if at_site and not ab.calls_at(report, path, finding["line"], finding.get("end_line") or finding["line"]):
            return f"the checkpoint call at line {finding['line']} did not run"
        if runs_model_only and not ab.checkpoint_scope(report, path, finding["line"], finding.get("end_line") or finding["line"]).calls:
            # The model ran, but not through the flagged code (a function the plan never called).
            return f"no checkpoint call ran for line {finding['line']}"
    return ""


def failure(job: dict[str, Any], reason: str, cause: str, example: str = "", device: str = "") -> dict[str, Any]:
    """The result of a job that could not run, for each of its findings."""
    verdict = {"verdict": COULD_NOT_RUN, "evidence": [reason], "cause": cause, "example": example}
    return {"device": device, "verdicts": [dict(verdict, evidence=[reason]) for _ in job.get("findings", [])]}


def missing_package(error: BaseException, path: str) -> Optional[str]:
    """The `pip install` argument for an import of a module that is nowhere: neither installed
    nor a module of the project (next to the file or in the working directory)."""
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return None
    top = error.name.split(".")[0]
    if importlib.util.find_spec(top) is not None:
        return None  # a submodule that is missing: the package is there
    for folder in {Path(path).resolve().parent, Path.cwd()}:
        if (folder / f"{top}.py").exists() or (folder / top).is_dir():
            return None
    dotted = next((d for name, d in DISTRIBUTIONS.items() if error.name == name or error.name.startswith(name + ".")), None)
    return dotted or DISTRIBUTIONS.get(top, top).replace("_", "-")


def _no_input(prompt: Any = "") -> str:
    raise StandardInputRead(str(prompt))


def _cap_memory(gb: Optional[float]) -> None:
    """RLIMIT_AS at `gb` above what the process has mapped now (torch alone maps ~0.7 GB), so an
    allocation past it fails with an error the runner names instead of a kill by the OOM killer."""
    if not gb:
        return
    import resource

    try:
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        mapped = 0
    limit = mapped + int(gb * GB)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _redirect_output(log: Any) -> None:
    """Point fds 1 and 2 at the job's log: prints and C-level output of user code stay out of
    ckptlint's own output (JSON on stdout must stay one document)."""
    if not log:
        return
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m ckptlint.confirm.runner JOB.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        job = json.load(f)
    result = execute(job)
    print(json.dumps({k: v for k, v in result.items() if k != "report"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
