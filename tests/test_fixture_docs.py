"""fixtures/README.md says what every fixture covers, so a new fixture cannot land undocumented."""

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_every_fixture_is_described_in_the_readme():
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    entries = [
        path.name + ("/" if path.is_dir() else "")
        for path in FIXTURES.iterdir()
        if path.suffix in {".py", ".ipynb"} or (path.is_dir() and not path.name.startswith((".", "_")))
    ]
    assert entries
    missing = [entry for entry in sorted(entries) if f"`{entry}`" not in readme]
    assert not missing, f"add these to fixtures/README.md: {missing}"
