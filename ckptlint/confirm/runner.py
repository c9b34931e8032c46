"""The confirm child process: one target per process.

`run_job(job, connection)` is the process entry point (multiprocessing); it never raises: the
result, or why it could not run, goes back through `connection` as a plain dict. Output of the
user's code goes to the job's log file, never to ckptlint's stdout.

`python -m ckptlint.confirm.runner JOB.json` runs one job in the foreground and prints the
result, for debugging a target by hand.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings
from typing import Any

COULD_NOT_RUN = "could not run"


def run_job(job: dict[str, Any], connection: Any) -> None:
    _redirect_output(job.get("log"))
    try:
        result = execute(job)
    except BaseException as error:  # never let anything escape the child
        result = _failure(job, f"internal error: {type(error).__name__}: {error}")
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
        return _failure(job, "torch is not installed in this environment (pip install torch)")
    from ckptlint.confirm import ab, build

    torch.set_num_threads(1)  # tiny models: threads only add scheduling noise and time
    if job.get("cwd"):
        os.chdir(job["cwd"])
    for entry in reversed(job.get("sys_path", [])):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    try:
        device = build.resolve_device(job.get("device", "auto"))
    except build.CannotRun as error:
        return _failure(job, str(error))
    shown = os.path.relpath(job["path"], job.get("cwd") or os.getcwd())
    try:
        module = build.import_file(job["path"])
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        return _failure(job, f"importing {shown} failed: {type(error).__name__}: {error}", device)
    example_errors = build.load_examples([p for p in job.get("examples", []) if os.path.abspath(p) != os.path.abspath(job["path"])])
    try:
        plan = build.plan_for(job, module, device, example_errors)
    except build.CannotRun as error:
        return _failure(job, str(error), device)
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        return _failure(job, f"building the target failed: {type(error).__name__}: {error}", device)
    rtol, atol = ab.TOLERANCES["cuda" if device == "cuda" else "cpu"]
    report = ab.compare_runs(plan.make, steps=job.get("steps", 1), device=device, rtol=rtol, atol=atol)
    verdicts = []
    for finding in job["findings"]:
        verdict, evidence = ab.verdict(finding["code"], report, job["path"], finding["line"], finding.get("end_line"))
        if verdict != COULD_NOT_RUN:
            evidence = evidence + [plan.description]
        verdicts.append({"verdict": verdict, "evidence": evidence})
    return {"device": device, "verdicts": verdicts, "report": _jsonable(report.to_dict())}


def _failure(job: dict[str, Any], reason: str, device: str = "") -> dict[str, Any]:
    return {"device": device, "verdicts": [{"verdict": COULD_NOT_RUN, "evidence": [reason]} for _ in job.get("findings", [])]}


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
