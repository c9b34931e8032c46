"""Worker processes that live no longer than ckptlint and stay quiet on Ctrl-C."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor

_PR_SET_PDEATHSIG = 1


def become_worker(parent: int) -> None:
    """In a pool worker: die with `parent`, even by SIGKILL (a killed ckptlint left its workers
    running for good), and leave Ctrl-C to the parent, which stops the pool and says so once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not _kill_me_with_parent():
        threading.Thread(target=_watch, args=(parent,), name="ckptlint-parent-watch", daemon=True).start()
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(1)


def _kill_me_with_parent() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    """Where prctl is missing: once the parent is gone, this process is re-parented."""
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(1)


def stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what is queued and kill the workers now (shutdown would finish every queued task first)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # no public API to reach them
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(OSError):
            process.kill()
    for process in processes:
        process.join(5)
