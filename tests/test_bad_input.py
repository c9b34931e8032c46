"""Input that is not a lintable file gets a message and exit 2, and every other file is still linted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

BAD = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return checkpoint(block, x)\n"
VERSIONS = ["--torch-version", "2.13", "--transformers-version", "5.23"]


def ckptlint(*args: str, input: bytes | None = None, without_permissions: bool = False, cwd=None) -> subprocess.CompletedProcess:
    """The real command in a subprocess (a hang fails the test instead of the suite)."""
    command = [sys.executable, "-m", "ckptlint", *args, "--no-cache", *VERSIONS]
    if without_permissions and os.geteuid() == 0:
        # Root reads anything: drop the capabilities that bypass file permissions.
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv")
        command = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--", *command]
    return subprocess.run(command, input=input, capture_output=True, timeout=120, cwd=cwd)


def report(result: subprocess.CompletedProcess) -> tuple[list[str], dict[str, str]]:
    assert b"Traceback" not in result.stderr, result.stderr.decode()
    document = json.loads(result.stdout)
    return [f["path"] for f in document["findings"]], {e["path"]: e["message"] for e in document["errors"]}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_on_the_command_line_is_refused_not_read(project):
    root = project({"a.py": BAD})
    os.mkfifo(root / "pipe.py")
    result = ckptlint("pipe.py", "a.py", "--format", "json")
    assert result.returncode == 2
    findings, errors = report(result)
    assert findings == ["a.py"] and errors == {"pipe.py": "not a regular file"}


def test_a_symlink_to_a_device_is_refused(project):
    root = project({"a.py": BAD})
    os.symlink("/dev/zero", root / "zero.py")
    result = ckptlint("zero.py", "a.py", "--format", "json")
    assert result.returncode == 2
    findings, errors = report(result)
    assert findings == ["a.py"] and errors == {"zero.py": "not a regular file"}


def test_files_over_the_size_limit_are_reported_as_skipped(project):
    root = project({"a.py": BAD})
    (root / "huge.py").write_bytes(b"# generated\n" * 1_000_000)  # 12 MB
    (root / "medium.py").write_text(BAD + "# padding\n" * 300)  # 3.1 KB
    result = ckptlint(".", "--format", "json")
    assert result.returncode == 2
    findings, errors = report(result)
    assert findings == ["a.py", "medium.py"]
    assert errors == {"huge.py": "skipped: 12 MB is over the 10 MB limit (max-file-size)"}
    (root / "ckptlint.toml").write_text('max-file-size = "2 KB"\n')
    findings, errors = report(ckptlint("a.py", "medium.py", "--format", "json"))
    assert findings == ["a.py"] and errors == {"medium.py": "skipped: 3.1 KB is over the 2 KB limit (max-file-size)"}
    findings, errors = report(ckptlint("a.py", "medium.py", "--format", "json", "--max-file-size", "4KB"))
    assert findings == ["a.py", "medium.py"] and errors == {}


@pytest.mark.parametrize("value", ["-1", "ten", "10 XB", "0"])
def test_a_bad_size_limit_is_a_usage_error(project, value):
    project({"a.py": BAD})
    result = ckptlint("a.py", "--max-file-size", value)
    assert result.returncode == 2 and b"'--max-file-size' on the command line: invalid size" in result.stderr and b"Traceback" not in result.stderr


def test_a_directory_that_cannot_be_listed_is_reported(project):
    root = project({"a.py": BAD, "locked/b.py": BAD})
    (root / "locked").chmod(0)
    try:
        result = ckptlint(".", "--format", "json", without_permissions=True)
        assert result.returncode == 2
        findings, errors = report(result)
        assert findings == ["a.py"] and errors == {"locked": "cannot list directory: Permission denied"}
        # A file inside it, named on the command line.
        result = ckptlint("locked/b.py", "a.py", "--format", "json", without_permissions=True)
        assert result.returncode == 2
        findings, errors = report(result)
        assert findings == ["a.py"] and errors == {"locked/b.py": "cannot read file: Permission denied"}
    finally:
        (root / "locked").chmod(0o755)


def test_undecodable_stdin_is_a_file_error(project):
    project({"a.py": BAD})
    result = ckptlint("-", "a.py", "--stdin-filename", "in.py", "--format", "json", input=b"x = '\xff\xfe'\n")
    assert result.returncode == 2
    findings, errors = report(result)
    assert findings == ["a.py"] and errors == {"in.py": "cannot decode as utf-8 (byte 5): invalid start byte"}
    result = ckptlint("-", "--stdin-filename", "in.py", "--format", "json", input=b"# -*- coding: klingon -*-\nx = 1\n")
    assert result.returncode == 2 and report(result)[1] == {"in.py": "bad encoding declaration: unknown encoding: klingon"}


def test_stdin_with_a_coding_cookie_is_decoded_as_declared(project):
    project({})
    text = "# -*- coding: latin-1 -*-\n# caf\u00e9\n" + BAD
    result = ckptlint("-", "--stdin-filename", "in.py", input=text.encode("latin-1"))
    assert result.returncode == 1, result.stderr
    assert b"in.py:7:12: CKPT006" in result.stdout


def test_stdin_filename_without_reading_stdin_is_a_usage_error(project):
    project({"a.py": BAD})
    result = ckptlint("a.py", "--stdin-filename", "in.py")
    assert result.returncode == 2
    assert result.stderr == b"ckptlint: error: --stdin-filename names the text read from stdin: pass '-' among the paths to read it\n"


def test_python_dash_m_never_imports_the_projects_modules(project):
    """`python -m` puts the working directory first on sys.path; ckptlint must not import a click.py there."""
    shadows = ["click", "json", "libcst", "dataclasses", "re", "tokenize", "sqlite3", "typing"]
    root = project({"bad.py": BAD, **{f"{name}.py": f"open({name!r} + '.executed', 'w').close()\nraise SystemExit(99)\n" for name in shadows}})
    result = ckptlint("bad.py", "--format", "json", cwd=root)
    assert result.returncode == 1, result.stderr.decode()
    assert report(result)[0] == ["bad.py"]
    assert sorted(p.name for p in root.glob("*.executed")) == []
