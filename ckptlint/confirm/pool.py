"""Parent side of `--confirm`: one child process per target, a deadline per child, results back.

Children are forked from a fork server that has already imported torch (`_preload`), so a target
costs a fork instead of a 2-second torch import; where fork servers do not exist (Windows), each
child is spawned. A child that crashes, hangs past its deadline (it is killed) or dies on a signal
becomes a "could not run" result; nothing here raises because of user code.
"""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import multiprocessing.connection
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from multiprocessing import spawn
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence, Union

from ckptlint import progress
from ckptlint.confirm import runner
from ckptlint.findings import COULD_NOT_RUN, CRASHED


def _context(jobs: Sequence[dict[str, Any]]) -> Any:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    preload = ["ckptlint.confirm._preload"]
    # Nothing is downloaded while confirming: transformers must fail (or be served by a tiny
    # config, see hf.py) at once instead of retrying the network. The fork server inherits this.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # transformers takes seconds to import: once in the server rather than in every child, when
    # a target uses it. (Only honoured if the server is not running yet.)
    if any(_mentions(job["path"], "transformers") for job in jobs) and importlib.util.find_spec("transformers"):
        preload += ["transformers", "transformers.modeling_utils", "transformers.modeling_layers"]
    if any(_mentions(job["path"], "lightning") for job in jobs) and importlib.util.find_spec("lightning"):
        preload += ["lightning"]
    context.set_forkserver_preload(preload)
    return context


def _label(job: dict[str, Any]) -> str:
    """`path::Class.method` of a job, for --progress."""
    name = ".".join(part for part in (job.get("qualname"), job.get("method")) if part)
    return f"{os.path.relpath(job['path'])}::{name}" if name else os.path.relpath(job["path"])


def _mentions(path: str, word: str) -> bool:
    try:
        return word in Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def run_jobs(jobs: Sequence[dict[str, Any]], *, timeout: float, parallel: int, memory_gb: Optional[float] = None) -> list[dict[str, Any]]:
    """Run every job; the results in the same order. The user-output log of a job that could not
    run is kept (its path is in the evidence); the others are deleted."""
    results: list[Optional[dict[str, Any]]] = [None] * len(jobs)
    if not jobs:
        return []
    context = _context(jobs)
    pending = list(range(len(jobs)))
    running: dict[int, _Child] = {}
    logs = tempfile.mkdtemp(prefix="ckptlint-confirm-")
    try:
        while pending or running:
            while pending and len(running) < max(1, parallel):
                index = pending.pop(0)
                job = dict(jobs[index], log=os.path.join(logs, f"{index}.log"), memory_gb=memory_gb)
                started = _start(context, job, timeout)
                if isinstance(started, str):
                    results[index] = _failure(job, started)
                else:
                    running[index] = started
            if not running:
                continue
            oldest = min(running)
            progress.running("confirming", len(jobs) - len(pending) - len(running), len(jobs), _label(jobs[oldest]), running[oldest].started)
            deadline = min(child.deadline for child in running.values())
            # Only the result pipes: a child's exit (or its fork server's) closes its pipe. The
            # process sentinel of a forkserver child is the server's, so it cannot tell them apart.
            multiprocessing.connection.wait([child.reader for child in running.values()], timeout=max(0.0, min(deadline - time.monotonic(), 1.0)))
            for index, child in list(running.items()):
                result = _poll(child.reader)
                if isinstance(result, dict):
                    results[index] = result
                    _stop(child, grace=5.0)
                elif result is _CLOSED:
                    results[index] = _failure(jobs[index], _died(child, memory_gb))
                elif time.monotonic() > child.deadline:
                    _stop(child, grace=0.0)
                    results[index] = _failure(jobs[index], f"timed out after {timeout:g} s; the process was killed" + _tail(child.log, prefix=" (last output: "))
                else:
                    continue
                child.reader.close()
                del running[index]
    finally:
        for child in running.values():
            _stop(child, grace=0.0)
            child.reader.close()
        _keep_failed_logs(logs, results)
    return [r if r is not None else _failure(jobs[i], "no result") for i, r in enumerate(results)]


def _keep_failed_logs(logs: str, results: Sequence[Optional[dict[str, Any]]]) -> None:
    """Delete the logs of targets that ran; point the evidence of the others at theirs."""
    for index, result in enumerate(results):
        log = os.path.join(logs, f"{index}.log")
        if not os.path.exists(log):
            continue
        failed = result is not None and any(v["verdict"] == COULD_NOT_RUN for v in result["verdicts"])
        if failed and os.path.getsize(log) > 0:
            for verdict in result["verdicts"]:  # type: ignore[index]
                verdict["evidence"].append(f"output of the target: {log}")
        else:
            os.unlink(log)
    with contextlib.suppress(OSError):
        os.rmdir(logs)  # only when no log was kept


@dataclass
class _Child:
    process: Any
    reader: Any
    deadline: float
    log: str
    started: float = 0.0  # time.monotonic() at the start


@contextlib.contextmanager
def _without_main() -> Iterator[None]:
    """Children run `runner.run_job`, which is importable; they must not re-import the parent's
    `__main__` as multiprocessing does by default (it re-runs an unguarded user script, and costs
    an import of the ckptlint CLI or pytest per target)."""
    original = spawn.get_preparation_data

    def preparation_data(name: str) -> dict[str, Any]:
        data = original(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    spawn.get_preparation_data = preparation_data
    try:
        yield
    finally:
        spawn.get_preparation_data = original


def _start(context: Any, job: dict[str, Any], timeout: float) -> Union[_Child, str]:
    error: Optional[BaseException] = None
    for _ in range(2):  # a fork server killed by an earlier target is started again on the retry
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(target=runner.run_job, args=(job, writer), name="ckptlint-confirm")
        try:
            with _without_main():
                process.start()
        except Exception as exc:  # e.g. no fork server possible
            reader.close()
            writer.close()
            error = exc
            continue
        writer.close()
        return _Child(process, reader, time.monotonic() + timeout, job["log"], time.monotonic())
    return f"could not start a child process: {type(error).__name__}: {error}"


_CLOSED = object()


def _poll(reader: Any) -> Any:
    """The child's result, _CLOSED when its pipe closed without one, None while it runs."""
    try:
        if reader.poll():
            result = reader.recv()
            return result if isinstance(result, dict) else _CLOSED
    except (EOFError, OSError):
        return _CLOSED
    return None


def _stop(child: _Child, grace: float) -> None:
    """End the child and everything it started: it leads its own session (runner.run_job), so
    its process group holds the subprocesses of the user's code too."""
    child.process.join(grace)
    with contextlib.suppress(OSError):
        os.killpg(child.process.pid, signal.SIGKILL)
    if child.process.is_alive():
        child.process.kill()
    child.process.join(5.0)


def _died(child: _Child, memory_gb: Optional[float]) -> str:
    child.process.join(1.0)
    code = child.process.exitcode
    with contextlib.suppress(OSError):
        os.killpg(child.process.pid, signal.SIGKILL)  # its subprocesses
    if code is not None and code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
        if memory_gb is not None:
            how += f" (with the --confirm-memory cap of {memory_gb:g} GB)"
    elif code == 255 and not _server_alive():
        how = "ended (its fork server died, so its exit status is unknown)"
    else:
        how = f"exited with code {code}"
    return f"the process running the target {how} before reporting" + _tail(child.log, prefix=": ")


def _server_alive() -> bool:
    """Whether the fork server still runs (without reaping it: multiprocessing restarts it)."""
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if pid is None or not hasattr(os, "waitid"):
        return True
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return False


def _tail(log: str, prefix: str) -> str:
    try:
        # Lines end at "\n" only: a "\r" in user output is shown (escaped), not a line break.
        lines = [line.strip() for line in Path(log).read_bytes().decode("utf-8", errors="replace").split("\n") if line.strip()]
    except OSError:
        return ""
    if not lines:
        return ""
    text = lines[-1][:300]
    return f"{prefix}{text})" if prefix.endswith("(last output: ") else f"{prefix}{text}"


def _failure(job: dict[str, Any], reason: str) -> dict[str, Any]:
    return runner.failure(job, reason, CRASHED)
