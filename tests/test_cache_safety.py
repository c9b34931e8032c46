"""The cache never touches what ckptlint did not create: `clean` and `--cache-dir` on user folders."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from ckptlint.cli import main

BAD = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return checkpoint(block, x)\n"
VERSIONS = ["--torch-version", "2.13", "--transformers-version", "5.23"]


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def tree(root) -> dict[str, bytes]:
    return {os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read() for d, _, files in os.walk(root) for f in files}


@pytest.fixture
def user_project(project):
    root = project({"keep.py": "x = 1\n", "important/notes.txt": "mine\n", "sub/a.py": BAD, ".gitignore": "*.log\n"})
    return root


def test_clean_refuses_a_parent_folder(user_project, monkeypatch):
    before = tree(user_project)
    monkeypatch.chdir(user_project / "sub")
    result = invoke("clean", "--cache-dir", "..")
    assert result.exit_code == 2
    assert "not a ckptlint cache" in result.output
    assert tree(user_project) == before


@pytest.mark.parametrize("how", ["option", "config", "environment"])
def test_clean_refuses_a_folder_ckptlint_did_not_create(user_project, how):
    before = tree(user_project)
    args, env = ["clean"], None
    if how == "option":
        args += ["--cache-dir", "important"]
    elif how == "config":
        (user_project / "ckptlint.toml").write_text('cache-dir = "important"\n')
        before = tree(user_project)
    else:
        env = {"CKPTLINT_CACHE_DIR": "important"}
    result = invoke(*args, env=env)
    assert result.exit_code == 2, result.output
    assert "important" in result.output and "not a ckptlint cache" in result.output
    assert tree(user_project) == before


def test_clean_removes_only_its_own_files(user_project):
    assert invoke(".", "--cache-dir", "cache", *VERSIONS).exit_code == 1
    cache = user_project / "cache"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    (cache / "mine.txt").write_text("user data\n")
    result = invoke("clean", "--cache-dir", "cache")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in cache.iterdir()) == [".gitignore", "CACHEDIR.TAG", "mine.txt"]
    assert "kept 1 file ckptlint did not create" in result.output
    assert (cache / "CACHEDIR.TAG").is_file()  # still a ckptlint cache: usable, never linted
    (cache / "mine.txt").unlink()
    invoke(".", "--cache-dir", "cache", *VERSIONS)
    assert "removed" in invoke("clean", "--cache-dir", "cache").output
    assert not cache.exists()
    assert invoke("clean", "--cache-dir", "cache").output.startswith("no cache at ")


@pytest.mark.parametrize("folder", [".", "sub", "important"])
def test_an_existing_user_folder_is_never_written_as_a_cache(user_project, folder):
    before = tree(user_project)
    result = invoke("sub", "--cache-dir", folder, *VERSIONS)
    assert result.exit_code == 2
    assert "was not created by ckptlint" in result.output
    assert tree(user_project) == before


def test_a_cache_folder_is_never_linted(user_project):
    cache = user_project / "sub" / "cache"
    assert invoke("sub", "--cache-dir", str(cache), *VERSIONS).exit_code == 1
    (cache / "copied.py").write_text(BAD)
    result = invoke("sub", "--cache-dir", str(cache), "--format", "json", *VERSIONS)
    assert [f["path"] for f in json.loads(result.stdout)["findings"]] == [os.path.join("sub", "a.py")]
    # Another tool's tagged cache is skipped too.
    (user_project / "sub" / "other").mkdir()
    (user_project / "sub" / "other" / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    (user_project / "sub" / "other" / "b.py").write_text(BAD)
    result = invoke("sub", "--no-cache", "--format", "json", *VERSIONS)
    assert [f["path"] for f in json.loads(result.stdout)["findings"]] == [os.path.join("sub", "a.py")]


def test_relative_cache_dirs_from_the_command_line_and_environment_are_relative_to_the_working_directory(user_project, monkeypatch):
    monkeypatch.chdir(user_project / "sub")
    assert invoke("a.py", "--cache-dir", "c1", *VERSIONS).exit_code == 1
    assert invoke("a.py", *VERSIONS, env={"CKPTLINT_CACHE_DIR": "c2"}).exit_code == 1
    assert (user_project / "sub" / "c1" / "CACHEDIR.TAG").is_file()
    assert (user_project / "sub" / "c2" / "CACHEDIR.TAG").is_file()


def test_clean_on_a_read_only_cache_is_a_message(user_project, monkeypatch):
    invoke(".", "--cache-dir", "cache", *VERSIONS)

    def read_only(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("ckptlint.cache.os.unlink", read_only)
    result = invoke("clean", "--cache-dir", "cache")
    assert result.exit_code == 2
    assert result.output.startswith("ckptlint: error: cannot remove") and "Permission denied" in result.output
    assert (user_project / "cache" / "CACHEDIR.TAG").is_file()
