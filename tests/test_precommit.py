"""End to end: the `ckptlint` hook of .pre-commit-hooks.yaml, as a user's pre-commit runs it.

`pre-commit try-repo PATH` clones PATH's HEAD and, if tracked files have uncommitted changes,
a snapshot of those changes; it never sees untracked files (a new `.pre-commit-hooks.yaml` or
module that is not yet committed).  So the test commits a snapshot of this working tree (the
files git would commit: tracked and untracked, minus ignored ones) into a throwaway repository
and points try-repo at that: it checks the tree as it is, committed or not.

pre-commit then builds the hook's virtualenv and pip-installs the project from PyPI-only
dependencies (no torch), once per try-repo call: slow, hence the `slow` mark.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOOK_ID = "ckptlint"
TIMEOUT = 600  # seconds for one try-repo: it creates a virtualenv and pip-installs ckptlint

BAD = """\
import torch.utils.checkpoint


def forward(block, x):
    return torch.utils.checkpoint.checkpoint(block, x)
"""

GOOD = """\
import torch.utils.checkpoint


def forward(block, x):
    return torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
"""

# Never copied into the snapshot, even where no .gitignore says so.
_SKIP_PARTS = {".git", "__pycache__", ".ckptlint_cache", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_SKIP_PREFIXES = (".ci/venv/", "build/", "dist/")

pytestmark = pytest.mark.slow


def _requirements() -> None:
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.skip("pre-commit is not installed in this environment (pip install -e '.[test]')")
    if shutil.which("git") is None:
        pytest.skip("git is not on PATH")


def _clean_env(tmp_path: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        # GIT_*: a surrounding git hook's GIT_DIR/GIT_INDEX_FILE would redirect our git calls;
        # PYTHON*: must not leak the test environment (and its torch) into the hook's virtualenv.
        if not key.startswith(("GIT_", "PYTHON", "PRE_COMMIT", "CKPTLINT_")) and key != "VIRTUAL_ENV"
    }
    env.update(
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        PRE_COMMIT_COLOR="never",
        NO_COLOR="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,  # no user hooksPath, signing or templates
    )
    return env


def _git(cwd: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"git {' '.join(args)} failed in {cwd}:\n{done.stdout}{done.stderr}"
    return done.stdout


def _init_repo(path: Path, env: dict[str, str]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    _git(path, env, "init", "-q")
    _git(path, env, "config", "user.name", "ckptlint tests")
    _git(path, env, "config", "user.email", "tests@ckptlint.invalid")
    _git(path, env, "config", "commit.gpgsign", "false")


def _project_files(env: dict[str, str]) -> list[str]:
    """What a commit of the working tree would hold: tracked files plus untracked, non-ignored ones."""
    if (ROOT / ".git").exists():
        listing = _git(ROOT, env, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        names = [name for name in listing.split("\0") if name]
    else:  # an unpacked sdist: no git metadata, take the tree
        names = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file()]
    return sorted(
        name
        for name in names
        if not _SKIP_PARTS.intersection(name.split("/"))
        and not name.startswith(_SKIP_PREFIXES)
        and (ROOT / name).is_file()  # tracked but deleted in the working tree
    )


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """A committed snapshot of this working tree, for `pre-commit try-repo`."""
    _requirements()
    base = tmp_path_factory.mktemp("hook-repo")
    env = _clean_env(base)
    snapshot = base / "ckptlint"
    files = _project_files(env)
    assert ".pre-commit-hooks.yaml" in files and "pyproject.toml" in files, files
    for name in files:
        target = snapshot / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    _init_repo(snapshot, env)
    _git(snapshot, env, "add", "-A")
    _git(snapshot, env, "commit", "-q", "--no-verify", "-m", "snapshot of the working tree")
    return snapshot


@pytest.fixture
def user_repo(tmp_path) -> tuple[Path, dict[str, str]]:
    """A user's repository with one file that CKPT006 flags and one that it does not."""
    env = _clean_env(tmp_path)
    repo = tmp_path / "user"
    _init_repo(repo, env)
    (repo / "bad.py").write_text(BAD)
    (repo / "good.py").write_text(GOOD)
    _git(repo, env, "add", "bad.py", "good.py")
    _git(repo, env, "commit", "-q", "--no-verify", "-m", "code")
    return repo, env


def _try_repo(hook_repo: Path, repo: Path, env: dict[str, str], *files: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), HOOK_ID, "--verbose", "--files", *files],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    print(f"$ pre-commit try-repo ... --files {' '.join(files)}  -> {done.returncode}\n{done.stdout}{done.stderr}")
    return done


def test_hook_fails_on_ckpt006_and_passes_clean_file(hook_repo, user_repo):
    repo, env = user_repo

    bad = _try_repo(hook_repo, repo, env, "bad.py")
    output = bad.stdout + bad.stderr
    assert bad.returncode != 0, output
    assert "CKPT006" in output, output
    assert "bad.py" in output, output
    assert f"- hook id: {HOOK_ID}" in output, output  # failed because the hook found it, not a setup error
    assert "An unexpected error has occurred" not in output, output

    good = _try_repo(hook_repo, repo, env, "good.py")
    output = good.stdout + good.stderr
    assert good.returncode == 0, output
    assert "Passed" in output, output
    assert "CKPT006" not in output, output
