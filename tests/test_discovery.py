from __future__ import annotations

import os
from pathlib import Path

import pytest

from ckptlint.config import Settings
from ckptlint.discovery import compile_pattern, discover


def make(root: Path, *files: str) -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")


def found(
    root: Path, settings: Settings | None = None, paths: list[str] | None = None
) -> list[str]:
    result = discover(paths or [str(root)], settings or Settings())
    return [p.relative_to(root).as_posix() for p in result.files]


def git_repo(root: Path, gitignore: str = "") -> Path:
    (root / ".git" / "info").mkdir(parents=True)
    if gitignore:
        (root / ".gitignore").write_text(gitignore)
    return root


# -- pattern semantics --------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "is_dir", "matches"),
    [
        ("*.py", "a.py", False, True),
        ("*.py", "deep/er/a.py", False, True),  # no slash: any depth
        ("*.py", "a.pyc", False, False),
        ("/a.py", "a.py", False, True),  # leading slash anchors
        ("/a.py", "sub/a.py", False, False),
        ("doc/*.txt", "doc/x.txt", False, True),  # inner slash anchors
        ("doc/*.txt", "sub/doc/x.txt", False, False),
        ("doc/*.txt", "doc/sub/x.txt", False, False),  # '*' stops at '/'
        ("build/", "build", True, True),  # trailing slash: directories only
        ("build/", "build", False, False),
        ("**/logs", "logs", True, True),
        ("**/logs", "a/b/logs", True, True),
        ("**/logs/x", "a/logs/x", False, True),
        ("gen/**", "gen/a/b.py", False, True),
        ("gen/**", "gen", True, False),
        ("a/**/b", "a/b", False, True),
        ("a/**/b", "a/x/y/b", False, True),
        ("a/**/b", "a/xb", False, False),
        ("a**b", "axxb", False, True),  # other runs of '*' are a plain '*'
        ("a**b", "ax/xb", False, False),
        ("file?.py", "file1.py", False, True),
        ("file?.py", "file10.py", False, False),
        ("[ab].py", "b.py", False, True),
        ("[!ab].py", "b.py", False, False),
        ("[!ab].py", "c.py", False, True),
        ("[a-c]x", "bx", False, True),
        ("[a-c]x", "dx", False, False),
        ("[]]", "]", False, True),
        ("[x", "[x", False, True),  # unclosed '[' is literal
        (r"\#notes", "#notes", False, True),
        (r"\!important", "!important", False, True),
        (r"\*", "*", False, True),
        (r"\*", "a", False, False),
        ("trailing   ", "trailing", False, True),  # unescaped trailing spaces are dropped
        ("space\\ ", "space ", False, True),  # an escaped one is kept
        ("a.b", "axb", False, False),  # '.' is literal
    ],
)
def test_pattern_semantics(pattern: str, path: str, is_dir: bool, matches: bool) -> None:
    compiled = compile_pattern(pattern)
    assert compiled is not None
    assert compiled.matches(path, is_dir) is matches


@pytest.mark.parametrize("line", ["", "   ", "# comment", "/", "!"])
def test_lines_without_a_pattern(line: str) -> None:
    assert compile_pattern(line) is None


def test_negation_flag() -> None:
    pattern = compile_pattern("!keep.py")
    assert pattern is not None and pattern.negate and pattern.matches("keep.py", False)


# -- walking ------------------------------------------------------------------------


def test_finds_py_and_pyi_sorted(tmp_path: Path) -> None:
    make(tmp_path, "b.py", "a.pyi", "pkg/c.py", "notes.txt", "pkg/data.json")
    assert found(tmp_path) == ["a.pyi", "b.py", "pkg/c.py"]


def test_default_excludes(tmp_path: Path) -> None:
    make(
        tmp_path,
        "ok.py",
        ".venv/lib/x.py",
        "venv/x.py",
        "build/x.py",
        "dist/x.py",
        "pkg/__pycache__/x.py",
        "pkg/.tox/x.py",
        "mypkg.egg-info/x.py",
        "lib/site-packages/x.py",
        "node_modules/x.py",
    )
    assert found(tmp_path) == ["ok.py"]


def test_exclude_replaces_defaults_and_extend_exclude_adds(tmp_path: Path) -> None:
    make(tmp_path, "build/x.py", "gen/y.py", "src/gen_z.py", "src/keep.py")
    assert found(tmp_path, Settings(exclude=(), extend_exclude=("gen", "gen_*.py"))) == [
        "build/x.py",
        "src/keep.py",
    ]


def test_path_like_exclude_is_anchored(tmp_path: Path) -> None:
    make(tmp_path, "src/legacy/a.py", "other/src/legacy/b.py", "src/c.py")
    settings = Settings(extend_exclude=("src/legacy",))
    assert found(tmp_path, settings) == ["other/src/legacy/b.py", "src/c.py"]


def test_path_like_exclude_is_relative_to_project_root(tmp_path: Path) -> None:
    make(tmp_path, "src/legacy/a.py", "src/c.py")
    settings = Settings(extend_exclude=("src/legacy",), project_root=tmp_path)
    assert found(tmp_path, settings, [str(tmp_path / "src")]) == ["src/c.py"]


def test_explicit_excluded_file_is_still_linted(tmp_path: Path) -> None:
    make(tmp_path, "build/gen.py", "script")
    result = discover(
        [str(tmp_path / "build" / "gen.py"), str(tmp_path / "script"), str(tmp_path)], Settings()
    )
    assert result.files == [tmp_path / "build" / "gen.py", tmp_path / "script"]


def test_force_exclude_applies_excludes_to_explicit_files(tmp_path: Path) -> None:
    make(tmp_path, "build/gen.py", "fixtures/deep/x.py", "src/ok.py")
    settings = Settings(extend_exclude=("fixtures",), force_exclude=True, project_root=tmp_path)
    named = [str(tmp_path / p) for p in ("build/gen.py", "fixtures/deep/x.py", "src/ok.py")]
    assert discover(named, settings).files == [tmp_path / "src" / "ok.py"]


def test_explicit_excluded_directory_is_walked(tmp_path: Path) -> None:
    make(tmp_path, "build/gen.py")
    assert found(tmp_path, paths=[str(tmp_path / "build")]) == ["build/gen.py"]


def test_missing_paths_are_reported_as_given(tmp_path: Path) -> None:
    make(tmp_path, "a.py")
    result = discover([str(tmp_path / "a.py"), "no/such/file.py"], Settings())
    assert result.missing == ["no/such/file.py"]
    assert result.files == [tmp_path / "a.py"]


def test_overlapping_paths_are_deduplicated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make(tmp_path, "pkg/a.py")
    monkeypatch.chdir(tmp_path)
    result = discover([".", "pkg", "pkg/a.py", str(tmp_path / "pkg" / "a.py")], Settings())
    assert result.files == [tmp_path / "pkg" / "a.py"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_directory_symlinks_are_not_followed(tmp_path: Path) -> None:
    make(tmp_path, "pkg/a.py", "outside/b.py")
    (tmp_path / "pkg" / "loop").symlink_to(tmp_path / "pkg", target_is_directory=True)
    (tmp_path / "pkg" / "ext").symlink_to(tmp_path / "outside", target_is_directory=True)
    (tmp_path / "pkg" / "link.py").symlink_to(tmp_path / "outside" / "b.py")
    (tmp_path / "pkg" / "broken.py").symlink_to(tmp_path / "nowhere.py")
    assert found(tmp_path, paths=[str(tmp_path / "pkg")]) == ["pkg/a.py", "pkg/link.py"]


# -- .gitignore -----------------------------------------------------------------------


def test_gitignore_negation_and_dir_only(tmp_path: Path) -> None:
    git_repo(tmp_path, "*.py\n!keep.py\n!mod.py\nmod.py/\n# comment\n\nlib\n")
    make(tmp_path, "drop.py", "keep.py", "sub/keep.py", "lib/keep.py", "mod.py", "d/mod.py/keep.py")
    # 'mod.py/' ignores the directory d/mod.py but not the file mod.py.
    assert found(tmp_path) == ["keep.py", "mod.py", "sub/keep.py"]


def test_gitignore_cannot_reinclude_inside_an_ignored_directory(tmp_path: Path) -> None:
    git_repo(tmp_path, "gen/\n!gen/keep.py\n")
    make(tmp_path, "gen/keep.py", "a.py")
    assert found(tmp_path) == ["a.py"]


def test_gitignore_anchoring_is_relative_to_its_directory(tmp_path: Path) -> None:
    git_repo(tmp_path, "/top.py\n")
    make(tmp_path, "top.py", "sub/top.py", "sub/inner.py", "sub/deeper/inner.py")
    (tmp_path / "sub" / ".gitignore").write_text("/inner.py\n")
    assert found(tmp_path) == ["sub/deeper/inner.py", "sub/top.py"]


def test_nested_gitignore_overrides_parent(tmp_path: Path) -> None:
    git_repo(tmp_path, "*_gen.py\n")
    make(tmp_path, "a_gen.py", "pkg/b_gen.py", "pkg/c.py")
    (tmp_path / "pkg" / ".gitignore").write_text("!b_gen.py\nc.py\n")
    assert found(tmp_path) == ["pkg/b_gen.py"]


def test_double_star_patterns(tmp_path: Path) -> None:
    git_repo(tmp_path, "**/fixtures/**\nmigrations/**/auto_*.py\n")
    make(
        tmp_path,
        "fixtures/a.py",
        "pkg/fixtures/deep/b.py",
        "migrations/auto_1.py",
        "migrations/v2/auto_2.py",
        "migrations/manual.py",
    )
    assert found(tmp_path) == ["migrations/manual.py"]


def test_parent_gitignores_apply_when_walking_a_subdirectory(tmp_path: Path) -> None:
    git_repo(tmp_path, "src/pkg/generated/\n")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / ".gitignore").write_text("*_pb2.py\n")
    make(tmp_path, "src/pkg/generated/x.py", "src/pkg/api_pb2.py", "src/pkg/mod.py")
    assert found(tmp_path, paths=[str(tmp_path / "src" / "pkg")]) == ["src/pkg/mod.py"]


def test_git_info_exclude_has_lowest_precedence(tmp_path: Path) -> None:
    git_repo(tmp_path, "!local_keep.py\n")
    (tmp_path / ".git" / "info" / "exclude").write_text("local*.py\n")
    make(tmp_path, "local_a.py", "local_keep.py")
    assert found(tmp_path) == ["local_keep.py"]


def test_respect_gitignore_false(tmp_path: Path) -> None:
    git_repo(tmp_path, "*.py\n")
    make(tmp_path, "a.py")
    assert found(tmp_path) == []
    assert found(tmp_path, Settings(respect_gitignore=False)) == ["a.py"]


def test_gitignore_outside_the_repository_is_not_inherited(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.py\n")
    git_repo(tmp_path / "repo")
    make(tmp_path, "repo/a.py")
    assert found(tmp_path, paths=[str(tmp_path / "repo")]) == ["repo/a.py"]
