"""A short, seeded run of the fuzzing properties (tests/fuzzing.py); `python scripts/fuzz.py` runs
them long. Derandomized: CI runs the same examples every time, and a failure reproduces."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("hypothesmith")

import fuzzing  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402



def short(examples: int) -> settings:
    return settings(max_examples=examples, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@short(40)
@given(fuzzing.programs())
def test_valid_programs_lint_without_an_error(program):
    fuzzing.check_program(program)


_ORIGINAL: dict[Path, object] = {}


def _original(path: Path):
    if path not in _ORIGINAL:
        _ORIGINAL[path] = fuzzing.original_findings(path)
    return _ORIGINAL[path]


@short(25)
@given(fuzzing.mutation_plans())
def test_findings_move_with_their_lines_under_mutation(tmp_path_factory, plan):
    path, mutations, rng = plan
    fuzzing.check_mutation(path, mutations, rng, tmp_path_factory.mktemp("mutated"), _original)


@short(2)
@given(fuzzing.fixture_mutations())
def test_same_findings_together_alone_parallel_and_cached(tmp_path_factory, mutations):
    project = tmp_path_factory.mktemp("project")
    texts = fuzzing.copy_fixtures(project, mutations)
    with fuzzing.chdir(project):
        assert fuzzing.check_modes(project, texts) >= 60


@pytest.mark.parametrize("mutation", fuzzing.MUTATIONS, ids=lambda m: m.__name__)
def test_every_mutation_changes_some_fixture(mutation):
    """A mutation that never applies would make the property above vacuous."""
    changed = 0
    for path in fuzzing.FIXTURE_FILES:
        mutated = mutation(path.read_text(), random.Random(0))
        changed += mutated is not None and mutated.text != path.read_text()
        if changed == 3:
            return
    pytest.fail(f"{mutation.__name__} changed {changed} fixture(s)")
