from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

import ckptlint.versions
from ckptlint.config import ConfigError, Settings
from ckptlint.versions import (
    AssumedVersion,
    LibraryVersions,
    distribution_version,
    parse_requirement,
    parse_version,
    resolve_versions,
    torch_default_reentrant,
    transformers_default_reentrant,
)

INSTALLED: dict[str, str] = {}


@pytest.fixture(autouse=True)
def installed(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The distributions the resolution sees installed: none unless a test adds some (the lookup
    itself, imported above, still sees the real ones)."""
    INSTALLED.clear()
    monkeypatch.setattr(ckptlint.versions, "distribution_version", INSTALLED.get)
    return INSTALLED


def _metadata_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@pytest.mark.parametrize("name", ["torch", "click", "libcst", "LibCST", "pytest", "ckptlint", "no-such-distribution"])
def test_the_installed_version_is_what_importlib_metadata_says(name: str) -> None:
    assert distribution_version(name) == _metadata_version(name)


def test_the_installed_version_follows_sys_path_as_importlib_metadata_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "Fake_Lib-2.1.dist-info").mkdir(parents=True)
    (first / "Fake_Lib-2.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-lib\nVersion: 2.1.post1\n\nVersion: 9\n")
    (second / "fake_lib-3.0.dist-info").mkdir(parents=True)
    (second / "fake_lib-3.0.dist-info" / "METADATA").write_text("Name: fake_lib\nVersion: 3.0\n")
    (second / "old_lib-1.0.egg-info").mkdir()
    (second / "old_lib-1.0.egg-info" / "PKG-INFO").write_text("Name: old-lib\nVersion: 1.0\n")
    for path in ([str(first), str(second)], [str(second), str(first)], [str(tmp_path / "missing"), str(second)]):
        monkeypatch.setattr(sys, "path", path)
        for name in ("fake-lib", "fake.lib", "old_lib", "other"):
            assert distribution_version(name) == _metadata_version(name), (path, name)


def test_a_warm_run_does_not_import_importlib_metadata() -> None:
    """It imports email, zipfile and csv: a tenth of a run where nothing changed."""
    code = "import sys; from ckptlint.versions import distribution_version; distribution_version('torch'); print('importlib.metadata' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def resolve(root: Path | None = None, **kwargs: str) -> LibraryVersions:
    settings = Settings(
        torch_version=kwargs.pop("settings_torch", None),
        transformers_version=kwargs.pop("settings_transformers", None),
    )
    return resolve_versions(settings, root, **kwargs)


def requirements(root: Path, text: str, name: str = "requirements.txt") -> Path:
    (root / name).write_text(text)
    return root


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.13", (2, 13)),
        ("2.13.0+cpu", (2, 13, 0)),
        ("5.0.0rc1", (5, 0, 0)),
        ("2.1.0.dev20240101+cu121", (2, 1, 0)),
        ("4.57.post1", (4, 57)),
        ("v2.4", (2, 4)),
        ("abc", None),
        ("2.x", None),
        ("", None),
    ],
)
def test_parse_version(text: str, expected: tuple[int, ...] | None) -> None:
    assert parse_version(text) == expected


# -- resolution order ------------------------------------------------------------------


def test_newest_known_behaviour_when_nothing_is_known(tmp_path: Path) -> None:
    versions = resolve(tmp_path)
    assert versions.torch == AssumedVersion("torch", (2, 13), "newest known behaviour")
    assert versions.transformers.version == (5, 23)
    assert versions.transformers.text == "5.23"


def test_installed_metadata_beats_newest(tmp_path: Path, installed: dict[str, str]) -> None:
    installed.update(torch="2.4.1+cu121", transformers="4.57.6")
    versions = resolve(tmp_path)
    assert versions.torch == AssumedVersion("torch", (2, 4, 1), "installed torch 2.4.1+cu121")
    assert versions.transformers.version == (4, 57, 6)
    assert versions.transformers.source == "installed transformers 4.57.6"


def test_declared_range_beats_installed(tmp_path: Path, installed: dict[str, str]) -> None:
    installed["transformers"] = "4.57.6"
    requirements(tmp_path, "transformers>=5.0\n")
    versions = resolve(tmp_path)
    assert versions.transformers == AssumedVersion(
        "transformers", (5, 23), "requirements.txt: transformers>=5.0"
    )


def test_settings_beat_declared_ranges(tmp_path: Path) -> None:
    requirements(tmp_path, "transformers>=5.0\n")
    versions = resolve(tmp_path, settings_transformers="4.36")
    assert versions.transformers == AssumedVersion(
        "transformers", (4, 36), "[tool.ckptlint] transformers-version"
    )


def test_cli_beats_settings(tmp_path: Path) -> None:
    versions = resolve(tmp_path, settings_torch="2.0", cli_torch="2.13", cli_transformers="5.0")
    assert versions.torch == AssumedVersion("torch", (2, 13), "--torch-version")
    assert versions.transformers == AssumedVersion("transformers", (5, 0), "--transformers-version")


def test_invalid_cli_version_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--torch-version"):
        resolve(tmp_path, cli_torch="latest")


def test_no_project_root_skips_declared_ranges(installed: dict[str, str]) -> None:
    installed["transformers"] = "4.40.0"
    assert resolve(None).transformers.source == "installed transformers 4.40.0"


# -- declared ranges ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        ("transformers>=4.40", (4, 57)),  # admits hazardous 4.57: the hazard applies
        ("transformers>=5.0", (5, 23)),  # nothing hazardous: the newest admitted
        ("transformers==4.36.*", (4, 36)),
        ("transformers==4.36.2", (4, 36)),  # a release inside an epoch
        ("transformers~=4.36", (4, 57)),  # >=4.36, <5
        ("transformers>=4.30,<4.36", (4, 34)),
        ("transformers<4.0", (4, 34)),  # the oldest epoch stands for older releases
        ("transformers", (4, 57)),  # unpinned admits hazardous releases
        ("transformers>4.57,<5", (4, 57)),
        ("transformers!=4.57.*,>=4.57,<4.58", None),  # admits nothing: fall through
        ("transformers!=4.57.*,>=4.57,<5", (4, 57)),  # 4.58 and later
        ("transformers>=5,<4", None),
        ("transformers @ https://example.invalid/t.whl", None),
    ],
)
def test_range_picks_newest_hazardous_epoch(
    tmp_path: Path, requirement: str, expected: tuple[int, ...] | None
) -> None:
    requirements(tmp_path, requirement + "\n")
    assumed = resolve(tmp_path).transformers
    if expected is None:
        assert assumed.source == "newest known behaviour"
    else:
        assert assumed.version == expected
        assert assumed.source == f"requirements.txt: {requirement}"


def test_requirements_file_markers_comments_and_options(tmp_path: Path) -> None:
    requirements(
        tmp_path,
        "# pinned for the cluster\n"
        "-r base.txt\n"
        "-e git+https://example.invalid/repo.git#egg=transformers\n"
        "--index-url https://example.invalid/simple\n"
        "numpy>=1.24  # unrelated\n"
        "Transformers[torch] >= 5.0 ; python_version >= '3.9'  # new API\n"
        "torch==2.4.* \\\n"
        "    ; sys_platform == 'linux'\n",
    )
    versions = resolve(tmp_path)
    assert versions.transformers == AssumedVersion(
        "transformers", (5, 23), "requirements.txt: Transformers[torch] >= 5.0"
    )
    assert versions.torch.version == (2, 4)
    assert versions.torch.source == "requirements.txt: torch==2.4.*"


def test_pyproject_dependencies_and_extras(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["torch>=2.0,<2.4"]\n'
        '[project.optional-dependencies]\nhf = ["transformers==4.36.*; extra == \'hf\'"]\n'
    )
    versions = resolve(tmp_path)
    assert versions.torch == AssumedVersion("torch", (2, 0), "pyproject.toml: torch>=2.0,<2.4")
    assert versions.transformers == AssumedVersion(
        "transformers", (4, 36), "pyproject.toml: transformers==4.36.*"
    )


def test_any_declaration_admitting_a_hazard_wins(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["transformers>=5"]\n')
    requirements(tmp_path, "transformers==4.57.1\n", name="requirements-legacy.txt")
    assumed = resolve(tmp_path).transformers
    assert assumed.version == (4, 57)
    assert assumed.source == "requirements-legacy.txt: transformers==4.57.1"


def test_broken_pyproject_is_skipped(tmp_path: Path, installed: dict[str, str]) -> None:
    (tmp_path / "pyproject.toml").write_text("[project\n")
    installed["torch"] = "2.0.1"
    assert resolve(tmp_path).torch.source == "installed torch 2.0.1"


def test_parse_requirement_rejects_garbage() -> None:
    assert parse_requirement("torch >= two") is None
    assert parse_requirement("./local/path") is None
    assert parse_requirement("torch~=2") is None  # ~= needs two components
    requirement = parse_requirement("Torch_Vision (>=0.15)")
    assert requirement is not None and requirement.name == "torch-vision"


# -- behaviour helpers --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "reentrant"),
    [((4, 34), True), ((4, 36, 2), True), ((4, 57, 6), True), ((5,), False), ((5, 0, 0), False),
     ((5, 23), False), ((6, 1), False), ((3, 0), True)],
)  # fmt: skip
def test_transformers_default_reentrant(version: tuple[int, ...], reentrant: bool) -> None:
    assert transformers_default_reentrant(AssumedVersion("transformers", version, "t")) is reentrant


@pytest.mark.parametrize("version", [(1, 13), (2, 0), (2, 4), (2, 13), (2, 13, 0), (3, 0)])
def test_torch_default_reentrant_for_every_known_version(version: tuple[int, ...]) -> None:
    assert torch_default_reentrant(AssumedVersion("torch", version, "t")) is True
