"""Worker processes die with ckptlint, and Ctrl-C is one line and exit 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

BAD = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return checkpoint(block, x)\n"
# The real command, with analysis slowed down so that a signal lands while the workers work.
SLOW_RUN = """
import sys, time
import ckptlint.engine as engine
from ckptlint.cli import main
engine._PARALLEL_MIN_BYTES = 0
real = engine._analyze_file
def slow(unit, summary):
    time.sleep(0.3)
    return real(unit, summary)
engine._analyze_file = slow
main(['.', '--no-cache', '-j', '2', '--torch-version', '2.13'])
"""


def children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start(root) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", SLOW_RUN], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(children(process.pid)) < 2:
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    time.sleep(0.5)  # the workers are analysing now
    return process


@pytest.fixture
def tree(project):
    return project({f"m{i}.py": BAD for i in range(40)})


def test_workers_die_when_ckptlint_is_killed(tree):
    process = start(tree)
    workers = children(process.pid)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 10
    while any(map(alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [pid for pid in workers if alive(pid)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert survivors == []


def test_ctrl_c_is_one_line_and_exit_130(tree):
    process = start(tree)
    workers = children(process.pid)
    os.killpg(process.pid, signal.SIGINT)  # what the terminal sends: the whole foreground group
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert err.decode() == "ckptlint: interrupted\n"
    assert not any(map(alive, workers))


# Ctrl-C while Python runs a finaliser: the KeyboardInterrupt is raised inside `__del__`, where
# Python only prints "Exception ignored" and carries on (the pool's weakref callbacks are such code).
SWALLOWED_RUN = """
import signal
import ckptlint.engine as engine
from ckptlint.cli import main
class Finaliser:
    def __del__(self):
        signal.raise_signal(signal.SIGINT)
        sum(range(1000))  # the handler runs here, inside the finaliser
real = engine._ticked
def ticked(result, tick):
    Finaliser()
    return real(result, tick)
engine._ticked = ticked
main(['.', '--no-cache', '-j', '1', '--torch-version', '2.13'])
"""


def test_ctrl_c_that_python_swallows_still_ends_the_run_as_interrupted(tree):
    process = subprocess.run([sys.executable, "-c", SWALLOWED_RUN], cwd=tree, capture_output=True, timeout=120)
    assert (process.returncode, process.stderr.decode()) == (130, "ckptlint: interrupted\n")
