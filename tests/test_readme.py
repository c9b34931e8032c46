"""README promises that must stay true."""

from __future__ import annotations

import re

from conftest import ROOT

from ckptlint.rules import all_rules

README = (ROOT / "README.md").read_text()


def test_ci_runs_exactly_the_readme_test_command():
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)\n```", quick_start, re.DOTALL)
    assert len(commands) == 2, "the quick start is two commands"
    assert "ckptlint fixtures/" in commands[0]
    test_command = commands[1].split("&&")[-1].strip()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_every_rule_is_in_the_readme_table():
    for rule in all_rules():
        assert f"| {rule.code} | {rule.name} | {rule.severity.value} |" in README


def test_the_help_in_the_readme_is_the_real_one():
    from click.testing import CliRunner

    from ckptlint.cli import main

    # What `ckptlint check --help` prints in a terminal of 80 columns or more.
    real = CliRunner().invoke(main, ["check", "--help"], terminal_width=78, prog_name="ckptlint").output
    assert f"```text\n{real}```" in README


def test_every_check_option_has_a_help_section():
    import click

    from ckptlint.cli import _HELP_SECTIONS, check

    sectioned = {name for names in _HELP_SECTIONS.values() for name in names}
    options = {p.name for p in check.params if isinstance(p, click.Option)} - {"help"}
    assert options == sectioned


def test_every_environment_variable_ckptlint_reads_is_documented():
    from click.testing import CliRunner

    from ckptlint.cli import main

    sources = "\n".join(p.read_text() for p in (ROOT / "ckptlint").rglob("*.py"))
    variables = set(re.findall(r"environ(?:\.get\(|\[)\"(CKPTLINT_\w+)\"", sources))
    assert variables, "the pattern no longer finds the variables"
    help_text = " ".join(CliRunner().invoke(main, ["check", "--help"], terminal_width=78).output.split())
    for variable in variables:
        assert variable in README and variable in help_text, variable


def test_the_ci_recipes_match_the_action_the_hook_and_the_version():
    import yaml

    from ckptlint import __version__

    workflow, precommit = (yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", README.split("## In CI and pre-commit", 1)[1], re.DOTALL)[:2])
    steps = workflow["jobs"]["ckptlint"]["steps"]
    (ours,) = [step for step in steps if step["uses"].startswith("ckptlint/")]
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert set(ours["with"]) <= set(action["inputs"])
    assert ours["uses"].split("@")[1] == "v" + __version__.split(".")[0]  # the moving major tag of this release
    (repo,) = precommit["repos"]
    assert repo["rev"] == "v" + __version__
    hooks = {hook["id"] for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert {hook["id"] for hook in repo["hooks"]} <= hooks
    # Installed from the repository by default: the package is not on PyPI yet.
    assert action["inputs"]["version"]["default"] == ""
    assert '"") spec="$GITHUB_ACTION_PATH"' in action["runs"]["steps"][0]["run"]
