from __future__ import annotations

from pathlib import Path

import pytest

from ckptlint.config import (
    DEFAULT_EXCLUDE,
    ConfigError,
    Settings,
    WrapperSpec,
    find_config,
    load_settings,
)
from ckptlint.findings import Severity


def write_pyproject(directory: Path, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "pyproject.toml"
    path.write_text(body)
    return path


def load(tmp_path: Path, body: str) -> Settings:
    if not body.startswith("[tool]"):
        body = "[tool.ckptlint]\n" + body
    return load_settings(write_pyproject(tmp_path, body))


# -- select / ignore ----------------------------------------------------------------


def test_defaults_enable_every_ckpt_rule() -> None:
    settings = Settings()
    assert settings.is_enabled("CKPT001")
    assert settings.exclude == DEFAULT_EXCLUDE
    assert settings.respect_gitignore


@pytest.mark.parametrize(
    ("select", "ignore", "code", "enabled"),
    [
        (("CKPT",), ("CKPT006",), "CKPT006", False),  # the more specific ignore wins
        (("CKPT",), ("CKPT006",), "CKPT005", True),
        (("CKPT006",), ("CKPT",), "CKPT006", True),  # the more specific select wins
        (("CKPT006",), ("CKPT",), "CKPT005", False),
        (("CKPT00",), ("CKPT0",), "CKPT001", True),
        (("CKPT006",), ("CKPT006",), "CKPT006", False),  # a tie goes to ignore
        (("ALL",), ("CKPT",), "CKPT001", False),
        (("ALL",), (), "CKPT001", True),
        (("CKPT",), ("ALL",), "CKPT001", True),
        (("CKPT001",), (), "CKPT002", False),
    ],
)
def test_longest_prefix_wins(
    select: tuple[str, ...], ignore: tuple[str, ...], code: str, enabled: bool
) -> None:
    assert Settings(select=select, ignore=ignore).is_enabled(code) is enabled


def test_extend_select_adds_to_select() -> None:
    settings = Settings(select=("CKPT001",), extend_select=("CKPT006",))
    assert settings.is_enabled("CKPT006")
    assert settings.is_enabled("CKPT001")
    assert not settings.is_enabled("CKPT002")


def test_per_file_ignores_globs(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        """
[tool.ckptlint.per-file-ignores]
"tests/**" = ["CKPT001"]
"scripts/*.py" = ["CKPT002"]
"__init__.py" = ["CKPT"]
"**/legacy/*.py" = ["CKPT003"]
"!src/**" = ["CKPT004"]
""",
    )
    root = tmp_path
    assert not settings.is_enabled("CKPT001", str(root / "tests/unit/test_x.py"))
    assert settings.is_enabled("CKPT002", str(root / "tests/unit/test_x.py"))
    assert not settings.is_enabled("CKPT002", "scripts/run.py")  # relative paths are used as given
    # '*' does not cross directories.
    assert settings.is_enabled("CKPT002", str(root / "scripts/sub/run.py"))
    assert not settings.is_enabled("CKPT005", str(root / "src/pkg/__init__.py"))  # basename glob
    assert not settings.is_enabled("CKPT003", str(root / "src/a/legacy/old.py"))
    assert not settings.is_enabled("CKPT003", str(root / "legacy/old.py"))  # **/ matches zero dirs
    assert settings.is_enabled("CKPT003", str(root / "src/legacy.py"))
    # A negated glob applies to the files outside it.
    assert settings.is_enabled("CKPT004", str(root / "src/pkg/mod.py"))
    assert not settings.is_enabled("CKPT004", str(root / "tools/mod.py"))
    # Without a path only select/ignore count.
    assert settings.is_enabled("CKPT001")


def test_per_file_ignores_beat_a_more_specific_select(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        'select = ["CKPT006"]\n[tool.ckptlint.per-file-ignores]\n"tests" = ["CKPT"]\n',
    )
    assert not settings.is_enabled("CKPT006", str(tmp_path / "tests" / "deep" / "t.py"))
    assert settings.is_enabled("CKPT006", str(tmp_path / "src" / "t.py"))


def test_severity_overrides_by_most_specific_prefix() -> None:
    settings = Settings(severity=(("CKPT", Severity.INFO), ("CKPT002", Severity.ERROR)))
    assert settings.severity_for("CKPT002", Severity.WARNING) is Severity.ERROR
    assert settings.severity_for("CKPT001", Severity.WARNING) is Severity.INFO
    assert Settings().severity_for("CKPT001", Severity.WARNING) is Severity.WARNING


# -- loading ----------------------------------------------------------------------


def test_load_every_key(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        """
select = ["CKPT00"]
extend-select = ["CKPT008"]
ignore = ["CKPT003"]
exclude = ["gen"]
extend-exclude = ["fixtures"]
respect-gitignore = false
torch-version = "2.4"
transformers-version = "4.57.1"
cache-dir = ".cache/ckpt"

[tool.ckptlint.severity]
CKPT001 = "error"

[tool.ckptlint.checkpoint-functions]
"mypkg.utils.ckpt" = { reentrant = false, preserve-rng-state = true }
"mypkg.other" = {}
""",
    )
    assert settings.select == ("CKPT00",)
    assert settings.extend_select == ("CKPT008",)
    assert settings.ignore == ("CKPT003",)
    assert settings.exclude == ("gen",)
    assert settings.extend_exclude == ("fixtures",)
    assert settings.respect_gitignore is False
    assert settings.torch_version == "2.4"
    assert settings.transformers_version == "4.57.1"
    assert settings.cache_dir == str(tmp_path / ".cache/ckpt")
    assert settings.severity == (("CKPT001", Severity.ERROR),)
    assert settings.checkpoint_functions == (
        ("mypkg.utils.ckpt", WrapperSpec(reentrant=False, preserve_rng_state=True)),
        ("mypkg.other", WrapperSpec()),
    )
    assert settings.project_root == tmp_path
    assert settings.config_path == tmp_path / "pyproject.toml"


def test_standalone_file_uses_top_level_keys(tmp_path: Path) -> None:
    path = tmp_path / "ckptlint.toml"
    path.write_text('ignore = ["CKPT002"]\n')
    settings = load_settings(path)
    assert settings.ignore == ("CKPT002",)
    assert settings.project_root == tmp_path


def test_no_config_means_defaults() -> None:
    assert load_settings(None) == Settings()


def test_unknown_key_is_named_with_file_and_valid_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, 'selct = ["CKPT"]\n')
    message = str(info.value)
    assert "unknown key 'selct'" in message
    assert str(tmp_path / "pyproject.toml") in message
    assert "[tool.ckptlint]" in message
    assert "extend-select" in message  # the valid keys are listed
    assert "did you mean 'select'" in message


def test_unknown_key_in_checkpoint_function_entry(tmp_path: Path) -> None:
    expected = "unknown key 'reentrnt' in 'checkpoint-functions.\"mypkg.ckpt\"'"
    with pytest.raises(ConfigError, match=expected):
        load(tmp_path, '[tool.ckptlint.checkpoint-functions]\n"mypkg.ckpt" = { reentrnt = true }\n')


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('select = "CKPT"', "'select' in .* must be an array of strings, got a string"),
        ("respect-gitignore = 1", "'respect-gitignore' in .* must be a boolean"),
        ("torch-version = 2.1", "'torch-version' in .* must be a string, got float"),
        ('per-file-ignores = ["x"]', "'per-file-ignores' in .* must be a table"),
        (
            '[tool.ckptlint.per-file-ignores]\n"a.py" = "CKPT001"',
            "'per-file-ignores.\"a.py\"' in .* must be an array of strings",
        ),
        (
            '[tool.ckptlint.severity]\nCKPT001 = "fatal"',
            "'severity.CKPT001' in .* must be one of 'error', 'warning', 'info', got 'fatal'",
        ),
        (
            '[tool.ckptlint.checkpoint-functions]\n"m.f" = { reentrant = "no" }',
            "'checkpoint-functions.\"m.f\".reentrant' in .* must be a boolean",
        ),
        (
            '[tool.ckptlint.checkpoint-functions]\n"m.f" = true',
            "'checkpoint-functions.\"m.f\"' in .* must be a table",
        ),
        ('[tool.ckptlint.checkpoint-functions]\n"not a name" = {}', "not a qualified name"),
        ("[tool]\nckptlint = 3", "'tool.ckptlint' in .* must be a table"),
    ],
)
def test_wrong_types_name_key_and_expected_type(tmp_path: Path, body: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load(tmp_path, body)


@pytest.mark.parametrize("code", ["ckpt001", "E501", "CKPT-1", "CKPT1A", ""])
def test_bad_codes_are_rejected(tmp_path: Path, code: str) -> None:
    with pytest.raises(ConfigError, match="invalid rule code"):
        load(tmp_path, f'ignore = ["{code}"]\n')


def test_bad_code_in_severity_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid rule code 'X1'"):
        load(tmp_path, '[tool.ckptlint.severity]\nX1 = "error"\n')


@pytest.mark.parametrize("version", ["two", "2.x", "", "2.13 beta"])
def test_bad_versions_are_rejected(tmp_path: Path, version: str) -> None:
    with pytest.raises(ConfigError, match="not a valid version"):
        load(tmp_path, f'torch-version = "{version}"\n')


def test_invalid_toml_reports_parser_message(tmp_path: Path) -> None:
    path = write_pyproject(tmp_path, "[tool.ckptlint\nselect = [\n")
    with pytest.raises(ConfigError, match=r"invalid TOML in .*pyproject\.toml: .*line 1"):
        load_settings(path)


def test_missing_explicit_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "nope.toml")


# -- overrides and fingerprint ---------------------------------------------------------


def test_with_overrides_validates_codes_and_keeps_the_rest(tmp_path: Path) -> None:
    base = load(tmp_path, 'ignore = ["CKPT002"]\n')
    changed = base.with_overrides(select=["CKPT001"], torch_version="2.4")
    assert changed.select == ("CKPT001",)
    assert changed.ignore == ("CKPT002",)
    assert changed.project_root == tmp_path
    assert base.with_overrides(ignore=None, torch_version=None) == base  # None: option not given
    expected = "invalid rule code 'ckpt001' in '--select' on the command line"
    with pytest.raises(ConfigError, match=expected):
        base.with_overrides(select=("ckpt001",))
    with pytest.raises(ConfigError, match="--torch-version"):
        base.with_overrides(torch_version="latest")


def test_fingerprint_tracks_what_changes_findings() -> None:
    base = Settings()
    assert base.fingerprint() == Settings().fingerprint()
    assert base.fingerprint() != base.with_overrides(ignore=("CKPT001",)).fingerprint()
    assert base.fingerprint() != base.with_overrides(torch_version="2.4").fingerprint()
    spec = (("m.f", WrapperSpec(reentrant=True)),)
    assert base.fingerprint() != base.with_overrides(checkpoint_functions=spec).fingerprint()
    # Excludes and the cache location choose files; they do not change a file's findings.
    assert base.fingerprint() == base.with_overrides(extend_exclude=("x",)).fingerprint()
    assert base.fingerprint() == base.with_overrides(cache_dir="/tmp/c").fingerprint()


# -- find_config ----------------------------------------------------------------------


def test_find_config_walks_up_past_pyproject_without_table(tmp_path: Path) -> None:
    root = write_pyproject(tmp_path, "[tool.ckptlint]\nignore = []\n")
    inner = write_pyproject(tmp_path / "pkg", '[project]\nname = "pkg"\n')
    (tmp_path / "pkg" / "src").mkdir()
    (tmp_path / "pkg" / "src" / "mod.py").write_text("")
    assert inner.exists()
    assert find_config([str(tmp_path / "pkg" / "src" / "mod.py")]) == root
    assert find_config([str(tmp_path / "pkg" / "src")]) == root


def test_find_config_uses_common_parent_of_paths(tmp_path: Path) -> None:
    write_pyproject(tmp_path / "a", "[tool.ckptlint]\n")
    (tmp_path / "b").mkdir()
    assert find_config([str(tmp_path / "a"), str(tmp_path / "b")]) is None
    assert find_config([str(tmp_path / "a" / "x.py")]) == tmp_path / "a" / "pyproject.toml"


def test_find_config_prefers_nearest_and_standalone(tmp_path: Path) -> None:
    write_pyproject(tmp_path, "[tool.ckptlint]\n")
    write_pyproject(tmp_path / "sub", "[tool.ckptlint]\n")
    (tmp_path / "sub" / ".ckptlint.toml").write_text("")
    assert find_config([str(tmp_path / "sub")]) == tmp_path / "sub" / ".ckptlint.toml"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "ckptlint.toml").write_text("")
    assert find_config([str(tmp_path / "other")]) == tmp_path / "other" / "ckptlint.toml"


def test_find_config_ignores_unrelated_broken_pyproject(tmp_path: Path) -> None:
    write_pyproject(tmp_path, "[tool.ckptlint]\n")
    write_pyproject(tmp_path / "sub", "[project\n")
    assert find_config([str(tmp_path / "sub")]) == tmp_path / "pyproject.toml"
