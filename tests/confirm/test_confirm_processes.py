"""The processes behind `--confirm`: each target in its own session (its subprocesses die with it),
an optional memory cap, a fork server that dies is restarted without blaming healthy targets, user
output that cannot corrupt a report, stdin confirmed as linted, failures named for what they are,
the user-output log kept when a target fails, and a summary line that counts the verdicts."""

from __future__ import annotations

import json
import os
import re
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from confirm_helpers import confirm_all, finding, line_in

from ckptlint.cli import main

pytest.importorskip("torch")

HEADER = """\
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
"""


def model(name: str, forward_prefix: str = "", *, top: str = "", init: str = "") -> str:
    """A one-block model whose forward runs `forward_prefix` before its reentrant checkpoint."""
    body = textwrap.indent(textwrap.dedent(forward_prefix), " " * 8)
    init_body = textwrap.indent(textwrap.dedent(init), " " * 8)
    return HEADER + textwrap.dedent(top) + f"""

class {name}(nn.Module):
    def __init__(self):
        super().__init__()
{init_body}        self.block = nn.Linear(4, 4)

    def forward(self, x):
{body}        return checkpoint(self.block, x)
"""


def write(directory: Path, name: str, source: str) -> Path:
    path = directory / name
    path.write_text(source)
    return path


def cli(*args, input=None):
    return CliRunner().invoke(main, [*args, "--no-cache", "--torch-version", "2.13"], input=input)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie waiting for its parent is dead
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def wait_dead(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


# --- process groups ---------------------------------------------------------------------------------


def test_subprocesses_of_a_target_die_with_it(tmp_path):
    hangs = model("Spawner", f"""\
        child = subprocess.Popen(["sleep", "600"])
        open({str(tmp_path / 'hanging.pid')!r}, "w").write(str(child.pid))
        time.sleep(600)
    """, top="import subprocess\nimport time\n")
    leaves = model("Leaver", f"""\
        child = subprocess.Popen(["sleep", "600"])
        open({str(tmp_path / 'finished.pid')!r}, "w").write(str(child.pid))
    """, top="import subprocess\n")
    paths = [write(tmp_path, "spawner.py", hangs), write(tmp_path, "leaver.py", leaves)]
    findings = [finding(p, line_in(p, n, "checkpoint("), "CKPT006") for p, n in zip(paths, ("Spawner", "Leaver"))]
    results = confirm_all(findings, timeout=4.0, examples=[])
    assert results[findings[0]].evidence[0].startswith("timed out after 4 s; the process was killed")
    assert results[findings[1]].verdict == "confirmed", results[findings[1]]
    for name in ("hanging.pid", "finished.pid"):
        pid = int((tmp_path / name).read_text())
        assert wait_dead(pid), f"{name}: the target's subprocess {pid} survived it"


# --- memory cap --------------------------------------------------------------------------------------


def test_memory_cap_reports_what_was_exceeded(tmp_path, monkeypatch):
    greedy = model("Greedy", "hoard = torch.ones(1 << 30)  # 4 GB\n")
    write(tmp_path, "greedy.py", greedy)
    monkeypatch.chdir(tmp_path)
    result = cli("greedy.py", "--confirm", "--confirm-memory", "1", "--format", "json", "--select", "CKPT006")
    (entry,) = json.loads(result.stdout)["findings"]
    confirmation = entry["confirmation"]
    assert confirmation["verdict"] == "could not run", confirmation
    assert "exceeded the --confirm-memory cap of 1 GB" in confirmation["evidence"][0], confirmation
    assert confirmation["cause"] == "crashed"
    assert "no synthesised input" not in confirmation["evidence"][0]


def test_memory_cap_must_be_positive(tmp_path, monkeypatch):
    write(tmp_path, "greedy.py", model("Greedy"))
    monkeypatch.chdir(tmp_path)
    assert cli("greedy.py", "--confirm", "--confirm-memory", "0").exit_code == 2
    assert "--confirm-memory GB" in cli("check", "--help").output


# --- fork server -----------------------------------------------------------------------------------


def test_a_killed_fork_server_is_restarted_and_not_blamed_on_healthy_targets(tmp_path):
    killer = model("Killer", "os.kill(os.getppid(), signal.SIGKILL)\n", top="import os\nimport signal\n")
    slow = model("Slow", "time.sleep(2.0)\n", top="import time\n")
    later = model("Later")
    paths = [write(tmp_path, "a_killer.py", killer), write(tmp_path, "b_slow.py", slow), write(tmp_path, "c_later.py", later)]
    findings = [finding(p, line_in(p, n, "checkpoint("), "CKPT006") for p, n in zip(paths, ("Killer", "Slow", "Later"))]
    results = confirm_all(findings, timeout=30.0, examples=[])  # two targets at a time
    for f in findings[1:]:
        assert results[f].verdict == "confirmed", results[f]


# --- control characters ------------------------------------------------------------------------------


def test_control_characters_from_user_output_are_escaped_in_every_format(tmp_path, monkeypatch):
    noisy = model("Noisy", 'print("\\x1b[2J\\x1b[31mred\\x07 alert\\rover")\nos._exit(3)\n', top="import os\n")
    write(tmp_path, "noisy.py", noisy)
    monkeypatch.chdir(tmp_path)
    for fmt in ("text", "json", "sarif", "github"):
        result = cli("noisy.py", "--confirm", "--format", fmt, "--select", "CKPT006")
        assert result.exit_code == 1, result.output
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", result.output), (fmt, result.output)
        assert "\\x1b[31mred\\x07 alert\\rover" in result.output.replace("\\\\", "\\"), (fmt, result.output)


# --- stdin ---------------------------------------------------------------------------------------------


def test_stdin_confirms_the_linted_text_not_the_file_on_disk(tmp_path, monkeypatch):
    bad = model("Net")
    good = bad.replace("checkpoint(self.block, x)", "checkpoint(self.block, x, use_reentrant=True)")
    write(tmp_path, "net.py", good)  # on disk: nothing to report, and nothing to confirm
    monkeypatch.chdir(tmp_path)
    result = cli("-", "--stdin-filename", "net.py", "--confirm", "--format", "json", "--select", "CKPT006", input=bad)
    (entry,) = json.loads(result.stdout)["findings"]
    assert entry["confirmation"]["verdict"] == "confirmed", entry
    assert entry["confirmation"]["target"] == "net.py::Net"
    assert f"checkpoint at net.py:{entry['line']} ran with use_reentrant omitted" in entry["confirmation"]["evidence"][0]


def test_stdin_without_a_file_on_disk_is_confirmed_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("-", "--stdin-filename", "nowhere/model.py", "--confirm", "--format", "json", "--select", "CKPT006", input=model("Net"))
    (entry,) = json.loads(result.stdout)["findings"]
    assert entry["confirmation"]["verdict"] == "confirmed", entry


# --- failures named for what they are ------------------------------------------------------------------


def test_exit_input_and_allocation_failures_are_not_input_synthesis_failures(tmp_path):
    cases = {
        "exits": (model("Exits", "sys.exit(2)\n", top="import sys\n"), "Exits", r"`Exits\.forward` called sys\.exit\(2\)"),
        "asks": (model("Asks", 'input("Continue? ")\n'), "Asks", r"`Asks\.forward` called input\(\): --confirm runs without standard input"),
        "allocates": (model("Allocates", "torch.empty(1 << 50)\n"), "Allocates", r"`Allocates\.forward` could not allocate memory: RuntimeError: .*can't allocate memory"),
        "exits_at_import": (model("Script", top="import sys\nsys.exit('usage: script.py DATA')\n"), "Script", r"importing \S*exits_at_import\.py called sys\.exit\('usage: script\.py DATA'\)"),
        "builds_with_input": (model("Prompted", init='input("width? ")\n'), "Prompted", r"`Prompted\(\)` called input\(\)"),
    }
    findings = {}
    for key, (source, scope, _) in cases.items():
        path = write(tmp_path, f"{key}.py", source)
        findings[key] = finding(path, line_in(path, scope, "checkpoint("), "CKPT006")
    results = confirm_all(findings.values(), timeout=60.0, examples=[])
    for key, (_, _, pattern) in cases.items():
        confirmation = results[findings[key]]
        assert confirmation.verdict == "could not run", (key, confirmation)
        assert re.search(pattern, confirmation.evidence[0]), (key, confirmation.evidence)
        assert "no synthesised input" not in confirmation.evidence[0], (key, confirmation.evidence)
        assert confirmation.cause == "crashed", (key, confirmation)


# --- the log of user output ------------------------------------------------------------------------------


def test_log_of_user_output_is_kept_for_a_failed_target(tmp_path):
    talks = model("Talks", init='print("loading weights from /data/ckpt")\nraise RuntimeError("weights not found")\n')
    quiet = model("Quiet", 'print("fine")\n')
    paths = [write(tmp_path, "talks.py", talks), write(tmp_path, "quiet.py", quiet)]
    findings = [finding(p, line_in(p, n, "checkpoint("), "CKPT006") for p, n in zip(paths, ("Talks", "Quiet"))]
    results = confirm_all(findings, timeout=60.0, examples=[])
    failed, passed = results[findings[0]], results[findings[1]]
    assert failed.verdict == "could not run" and passed.verdict == "confirmed"
    kept = [e for e in failed.evidence if e.startswith("output of the target: ")]
    assert len(kept) == 1, failed.evidence
    log = Path(kept[0].split(": ", 1)[1])
    try:
        assert "loading weights from /data/ckpt" in log.read_text()
        assert not any("output of the target" in e for e in passed.evidence)
        assert sorted(p.name for p in log.parent.iterdir()) == [log.name]  # the passing target's log is gone
    finally:
        log.unlink()
        log.parent.rmdir()


def test_no_log_folder_is_left_when_no_target_needs_its_log(tmp_path, monkeypatch):
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temp))
    silent = model("Silent", init='raise RuntimeError("weights not found")\n')
    quiet = model("Quiet", 'print("fine")\n')
    paths = [write(tmp_path, "silent.py", silent), write(tmp_path, "quiet.py", quiet)]
    findings = [finding(p, line_in(p, n, "checkpoint("), "CKPT006") for p, n in zip(paths, ("Silent", "Quiet"))]
    results = confirm_all(findings, timeout=60.0, examples=[])
    assert [results[f].verdict for f in findings] == ["could not run", "confirmed"]
    assert not any("output of the target" in e for f in findings for e in results[f].evidence)
    assert list(temp.iterdir()) == []  # neither the logs nor their folder


# --- the summary line ------------------------------------------------------------------------------------


def test_summary_line_counts_the_verdicts(tmp_path, monkeypatch):
    write(tmp_path, "runs.py", model("Runs"))
    # A list no guessed config attribute (a number) can be.
    needy = model("Needy", init="self.widths = list(config.widths)\n").replace("def __init__(self):", "def __init__(self, config):")
    write(tmp_path, "needy.py", needy)
    write(tmp_path, "missing.py", model("Missing", "package_that_is_not_installed.log(x)\n", top="import package_that_is_not_installed\n"))
    monkeypatch.chdir(tmp_path)
    result = cli(".", "--confirm", "--select", "CKPT006")
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[-3:-1] == ["Found 3 finding(s) in 3 file(s).", "[*] 3 fixable with the `--fix` option."], lines[-3:]
    assert lines[-1] == "--confirm: 1 confirmed, 0 not reproduced, 2 could not run (1 needs a package, 1 needs an example).", lines[-1]
