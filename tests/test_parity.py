"""Same answer whatever you name: `ckptlint FILE` reports for FILE exactly what a run over the whole
project reports for it (pre-commit names only the staged files)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES

import ckptlint.project
from ckptlint.cli import main


def _check(*args: str) -> dict:
    result = CliRunner().invoke(main, ["check", "--format", "json", "--torch-version", "2.13", "--transformers-version", "5.23", *args])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _by_file(report: dict) -> dict[str, list[tuple]]:
    found: dict[str, list[tuple]] = {}
    for f in report["findings"]:
        found.setdefault(f["path"], []).append((f.get("cell"), f["line"], f["column"], f["code"], f["message"]))
    return found


@pytest.fixture
def fixture_project(tmp_path, monkeypatch) -> Path:
    """The fixtures as the lintable files of a project of their own (a bare pyproject.toml marks
    its root), with the working directory at its root, as pre-commit runs the hook."""
    root = tmp_path / "project"
    shutil.copytree(FIXTURES, root / "fixtures")
    (root / "pyproject.toml").write_text("[project]\nname = 'fixtures'\n")
    monkeypatch.chdir(root)
    return root


def test_every_fixture_file_named_alone_gets_what_the_whole_project_gives_it(fixture_project):
    cache = str(fixture_project.parent / "cache")
    whole = _check("--cache-dir", cache, ".")
    assert whole["errors"] == []
    expected = _by_file(whole)
    files = sorted(p.relative_to(fixture_project).as_posix() for p in (fixture_project / "fixtures").rglob("*") if p.suffix in (".py", ".ipynb"))
    assert len(files) >= 30 and len(expected) >= 15
    for name in files:
        alone = _check("--cache-dir", cache, name)
        assert alone["files_checked"] == 1
        assert _by_file(alone) == ({name: expected[name]} if name in expected else {}), name


def test_a_file_linted_alone_without_a_cache_sees_the_project(fixture_project):
    """The index of the other files is built when nothing is cached: a block whose model lives in
    another file is not taken for a top-level model, and findings only reported into it come too."""
    whole = _by_file(_check("--no-cache", "."))
    for name in ("fixtures/crossfile/vision/blocks.py", "fixtures/crossfile/vision/net.py"):
        assert _by_file(_check("--no-cache", name)) == ({name: whole[name]} if name in whole else {}), name


def test_only_named_files_are_reported_even_when_others_are_broken(fixture_project):
    (fixture_project / "fixtures" / "broken.py").write_text("def broken(:\n")
    report = _check("--no-cache", "fixtures/cifar_checkpointed.py")
    assert report["errors"] == []
    assert {f["path"] for f in report["findings"]} == {"fixtures/cifar_checkpointed.py"}


def test_stdin_stands_for_the_project_file_of_its_name(fixture_project):
    name = "fixtures/moe_aux_loss.py"
    text = (fixture_project / name).read_text().replace("self.aux_loss = load_balancing_loss(probs)  # expect: CKPT007", "aux = load_balancing_loss(probs)")
    result = CliRunner().invoke(main, ["check", "--format", "json", "--no-cache", "-", "--stdin-filename", name], input=text)
    codes = sorted(f["code"] for f in json.loads(result.stdout)["findings"])
    on_disk = sorted(f["code"] for f in _check("--no-cache", name)["findings"])
    assert on_disk.count("CKPT007") == codes.count("CKPT007") + 1


def test_a_warm_run_naming_one_file_reads_only_what_changed(fixture_project, monkeypatch):
    """The project's index, and which cached results can hold findings for the named file, come
    from the cache: unchanged files are only stat'ed, named or not."""
    import ckptlint.engine

    cache = str(fixture_project.parent / "cache")
    _check("--cache-dir", cache, ".")
    read: list[str] = []
    real = ckptlint.engine.read_source
    monkeypatch.setattr(ckptlint.engine, "read_source", lambda path, *args: read.append(path) or real(path, *args))
    monkeypatch.setattr(ckptlint.project, "_RACY_NS", 0)  # written just now: trust it anyway
    name = "fixtures/crossfile/text/layers.py"
    assert [f["code"] for f in _check("--cache-dir", cache, name)["findings"]] == ["CKPT007"]
    assert read == []
    with open(name, "a") as staged:  # what pre-commit names: an edited file
        staged.write("# edited\n")
    assert [f["code"] for f in _check("--cache-dir", cache, name)["findings"]] == ["CKPT007"]
    # The edited file, and the files whose cached results depended on it: re-analysed.
    assert read[0] == name and {path.rsplit("/", 1)[0] for path in read} == {"fixtures/crossfile/text"}


def test_an_edit_elsewhere_in_the_project_reaches_the_file_named(fixture_project):
    cache = str(fixture_project.parent / "cache")
    layers, encoder = "fixtures/crossfile/text/layers.py", fixture_project / "fixtures/crossfile/text/encoder.py"
    assert [f["code"] for f in _check("--cache-dir", cache, layers)["findings"]] == ["CKPT007"]
    text = encoder.read_text()
    encoder.write_text(text.replace("h = checkpoint(attention, h, use_reentrant=False)", "h = attention(h)"))
    assert _check("--cache-dir", cache, layers)["findings"] == []
    encoder.write_text(text)
    assert [f["code"] for f in _check("--cache-dir", cache, layers)["findings"]] == ["CKPT007"]


@pytest.fixture
def trusted_state(monkeypatch):
    """The project's state as written just now is trusted (no edit can hide in the clock tick),
    and the runs that decode its details are counted."""
    monkeypatch.setattr(ckptlint.project, "_RACY_NS", 0)
    decoded: list[str] = []
    real = ckptlint.project.ProjectFiles._load_details
    monkeypatch.setattr(ckptlint.project.ProjectFiles, "_load_details", lambda self: decoded.append(self.details_key) or real(self))
    return decoded


def test_a_run_where_nothing_changed_decodes_only_the_head_of_the_state(fixture_project, trusted_state):
    cache = str(fixture_project.parent / "cache")
    whole = _by_file(_check("--cache-dir", cache, "."))
    trusted_state.clear()
    for name in ("fixtures/crossfile/text/layers.py", "fixtures/crossfile/vision/net.py", "fixtures/cifar_checkpointed.py"):
        assert _by_file(_check("--cache-dir", cache, name)) == ({name: whole[name]} if name in whole else {}), name
    assert trusted_state == []


def test_a_file_added_or_an_ignore_file_edited_is_seen_without_a_new_walk_missing_it(fixture_project, trusted_state):
    """The walk's listing is reused while no folder it listed changed: a new file changes its folder,
    an ignore file edited in place is checked itself."""
    cache = str(fixture_project.parent / "cache")
    layers, folder = "fixtures/crossfile/text/layers.py", fixture_project / "fixtures/crossfile/text"
    _check("--cache-dir", cache, ".")
    text = (folder / "encoder.py").read_text()
    (folder / "encoder.py").unlink()
    assert _check("--cache-dir", cache, layers)["findings"] == []
    (folder / "renamed_encoder.py").write_text(text)
    assert [f["code"] for f in _check("--cache-dir", cache, layers)["findings"]] == ["CKPT007"]
    ignore = folder / ".gitignore"
    ignore.write_text("renamed_encoder.py\n")
    assert _check("--cache-dir", cache, layers)["findings"] == []
    with open(ignore, "w") as edited:  # in place: the folder's entries stay as they are
        edited.write("# nothing ignored\n")
    assert [f["code"] for f in _check("--cache-dir", cache, layers)["findings"]] == ["CKPT007"]


def test_a_state_written_too_soon_after_an_edit_is_written_again_once_it_can_be_trusted(fixture_project, monkeypatch):
    """A file changed in the clock tick before the state was written is read again; once the state
    is rewritten later than that, a run where nothing changed decodes only its head again."""
    import os
    import time
    import types

    cache = str(fixture_project.parent / "cache")
    edited = time.time_ns() + 1_000_000_000_000  # later than the folders' ctimes, which cannot be set
    for path in fixture_project.rglob("*.py"):
        os.utime(path, ns=(edited, edited))
    clock = types.SimpleNamespace(time_ns=lambda: edited + 500_000_000)  # half a second after the edit
    monkeypatch.setattr(ckptlint.project, "time", clock)
    name = "fixtures/crossfile/text/layers.py"
    _check("--cache-dir", cache, ".")
    decoded: list[str] = []
    real = ckptlint.project.ProjectFiles._load_details
    monkeypatch.setattr(ckptlint.project.ProjectFiles, "_load_details", lambda self: (self._details is None and decoded.append(self.details_key)) or real(self))
    clock.time_ns = lambda: edited + 100_000_000_000
    for _ in range(2):
        assert [f["code"] for f in _check("--cache-dir", cache, name)["findings"]] == ["CKPT007"]
    assert len(decoded) == 1  # the first run could not trust the state; the second could


PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/runners.py": (
        "from torch.utils.checkpoint import checkpoint\n\n\n"
        "def run(fn, *args, **kwargs):\n    return checkpoint(fn, *args, use_reentrant=True, **kwargs)\n"
    ),
    "pkg/models/__init__.py": "",
    "pkg/models/fusion.py": (
        "from torch import nn\n\nfrom ..runners import run\n\n\n"
        "class Fusion(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n        h = self.fc(x)\n        return run(self.fc, h, mask=h)\n"
    ),
    "train.py": (
        "from pkg.runners import run\n\n\n"
        "def step(block, loader):\n    for x, y in loader:\n        run(block, x).sum().backward()\n"
    ),
}


@pytest.mark.parametrize("named, cwd", [("pkg/models/fusion.py", "."), ("models/fusion.py", "pkg")])
def test_without_project_markers_a_file_alone_sees_its_package(named, cwd, tmp_path, monkeypatch):
    """No pyproject.toml, setup.py, requirements.txt or .git: a file in a package is linted with the
    package it belongs to (a bare script is linted alone)."""
    root = tmp_path / "loose"
    for name, text in PACKAGE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    monkeypatch.chdir(root)
    whole = _by_file(_check("--no-cache", "."))
    assert set(whole) == {"pkg/models/fusion.py", "train.py"}  # the wrapper's calls, in both files
    monkeypatch.chdir(root / cwd)
    alone = _by_file(_check("--no-cache", named))
    assert list(alone.values()) == [whole[Path(cwd, named).as_posix().removeprefix("./")]]
