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
from pathlib import Path
from multiprocessing import spawn
from typing import Any, Iterator, Optional, Sequence

from ckptlint.confirm import runner

COULD_NOT_RUN = "could not run"


def _context(jobs: Sequence[dict[str, Any]]) -> Any:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    preload = ["ckptlint.confirm._preload"]
    # transformers takes seconds to import: once in the server rather than in every child, when
    # a target uses it. (Only honoured if the server is not running yet.)
    if any(_mentions(job["path"], "transformers") for job in jobs) and importlib.util.find_spec("transformers"):
        preload += ["transformers", "transformers.modeling_utils", "transformers.modeling_layers"]
    context.set_forkserver_preload(preload)
    return context


def _mentions(path: str, word: str) -> bool:
    try:
        return word in Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def run_jobs(jobs: Sequence[dict[str, Any]], *, timeout: float, parallel: int) -> list[dict[str, Any]]:
    """Run every job; the results in the same order."""
    results: list[Optional[dict[str, Any]]] = [None] * len(jobs)
    if not jobs:
        return []
    context = _context(jobs)
    pending = list(range(len(jobs)))
    running: dict[int, tuple[Any, Any, float, str]] = {}
    with tempfile.TemporaryDirectory(prefix="ckptlint-confirm-") as logs:
        try:
            while pending or running:
                while pending and len(running) < max(1, parallel):
                    index = pending.pop(0)
                    job = dict(jobs[index], log=os.path.join(logs, f"{index}.log"))
                    started = _start(context, job, timeout)
                    if isinstance(started, str):
                        results[index] = _failure(job, started)
                    else:
                        running[index] = started
                if not running:
                    continue
                deadline = min(entry[2] for entry in running.values())
                readers = [entry[1] for entry in running.values()]
                sentinels = [entry[0].sentinel for entry in running.values()]
                multiprocessing.connection.wait(readers + sentinels, timeout=max(0.0, min(deadline - time.monotonic(), 1.0)))
                for index, (process, reader, deadline, log) in list(running.items()):
                    result = _poll(reader)
                    if result is not None:
                        results[index] = result
                        _stop(process, grace=5.0)
                    elif not process.is_alive():
                        results[index] = _failure(jobs[index], _died(process, log))
                    elif time.monotonic() > deadline:
                        _stop(process, grace=0.0)
                        results[index] = _failure(jobs[index], f"timed out after {timeout:g} s; the process was killed" + _tail(log, prefix=" (last output: "))
                    else:
                        continue
                    reader.close()
                    del running[index]
        finally:
            for process, reader, _, _ in running.values():
                _stop(process, grace=0.0)
                reader.close()
    return [r if r is not None else _failure(jobs[i], "no result") for i, r in enumerate(results)]


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


def _start(context: Any, job: dict[str, Any], timeout: float) -> Any:
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(target=runner.run_job, args=(job, writer), name="ckptlint-confirm")
    try:
        with _without_main():
            process.start()
    except Exception as error:  # e.g. no fork server possible
        reader.close()
        writer.close()
        return f"could not start a child process: {type(error).__name__}: {error}"
    writer.close()
    return process, reader, time.monotonic() + timeout, job["log"]


def _poll(reader: Any) -> Optional[dict[str, Any]]:
    try:
        if reader.poll():
            result = reader.recv()
            return result if isinstance(result, dict) else None
    except (EOFError, OSError):
        return None
    return None


def _stop(process: Any, grace: float) -> None:
    process.join(grace)
    if process.is_alive():
        process.kill()
        process.join(5.0)


def _died(process: Any, log: str) -> str:
    process.join(1.0)
    code = process.exitcode
    if code is not None and code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    return f"the process running the target {how} before reporting" + _tail(log, prefix=": ")


def _tail(log: str, prefix: str) -> str:
    try:
        lines = [line.strip() for line in Path(log).read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    if not lines:
        return ""
    text = lines[-1][:300]
    return f"{prefix}{text})" if prefix.endswith("(last output: ") else f"{prefix}{text}"


def _failure(job: dict[str, Any], reason: str) -> dict[str, Any]:
    return {"device": "", "verdicts": [{"verdict": COULD_NOT_RUN, "evidence": [reason]} for _ in job.get("findings", [])]}
