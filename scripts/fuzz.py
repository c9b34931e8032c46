"""The fuzzing properties of tests/fuzzing.py, run long: valid programs from hypothesmith lint
without an error, findings move with their lines under mutations of the fixtures, and the same
findings come out together or group by group, with 1 or 2 jobs, with and without the cache.

    python scripts/fuzz.py                      # 2,000 programs, 500 mutations, 20 mode checks
    python scripts/fuzz.py --examples 10000 --seed 7
    python scripts/fuzz.py --minutes 30         # rounds of the above (seed, seed+1, ...) until then

Needs the test extra (hypothesis, hypothesmith). Prints a summary that starts with the command
line; exits 1 when a property failed (hypothesis prints the smallest failing example).
"""

from __future__ import annotations

import argparse
import platform
import shlex
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import hypothesis  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import seed as seeded  # noqa: E402

import fuzzing  # noqa: E402
from ckptlint import __version__  # noqa: E402


@dataclass
class Tally:
    name: str
    examples: int = 0
    findings: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


def main() -> int:
    warnings.simplefilter("ignore", SyntaxWarning)  # hypothesmith compiles programs like `"a"()`
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=2000, help="valid programs per round (mutations: a quarter, mode checks: a hundredth)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, default=0.0, help="run rounds until this much time has passed (0: one round)")
    options = parser.parse_args()
    command = shlex.join(["python", *sys.argv])
    started = time.monotonic()
    tallies = {name: Tally(name) for name in ("valid programs", "mutations", "modes")}
    rounds = 0
    with tempfile.TemporaryDirectory(prefix="ckptlint-fuzz-") as scratch:
        while True:
            seed = options.seed + rounds
            _round(tallies, options.examples, seed, Path(scratch))
            rounds += 1
            failed = any(t.failures for t in tallies.values())
            if failed or time.monotonic() - started >= options.minutes * 60:
                break
    _summary(command, options, rounds, tallies, time.monotonic() - started)
    return 1 if any(t.failures for t in tallies.values()) else 0


def _round(tallies: dict[str, Tally], examples: int, seed: int, scratch: Path) -> None:
    originals: dict[Path, Any] = {}

    def original(path: Path) -> Any:
        if path not in originals:
            originals[path] = fuzzing.original_findings(path)
        return originals[path]

    def program(source: str) -> None:
        fuzzing.check_program(source)

    def mutation(plan: tuple) -> None:
        path, mutations, rng = plan
        fuzzing.check_mutation(path, mutations, rng, scratch, original)

    def modes(mutations: dict) -> None:
        with tempfile.TemporaryDirectory(dir=scratch) as project:
            texts = fuzzing.copy_fixtures(Path(project), mutations)
            with fuzzing.chdir(Path(project)):
                tallies["modes"].findings += fuzzing.check_modes(Path(project), texts)

    _run(tallies["valid programs"], fuzzing.programs(), program, examples, seed)
    _run(tallies["mutations"], fuzzing.mutation_plans(), mutation, max(1, examples // 4), seed)
    _run(tallies["modes"], fuzzing.fixture_mutations(), modes, max(1, examples // 100), seed)


def _run(tally: Tally, strategy: Any, check: Callable[[Any], None], examples: int, seed: int) -> None:
    def counted(value: Any) -> None:
        tally.examples += 1
        check(value)

    test = seeded(seed)(settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))(given(strategy)(counted)))
    started = time.monotonic()
    try:
        test()
    except Exception:  # noqa: BLE001 - reported in the summary; hypothesis printed the example
        tally.failures.append(f"seed {seed}: {traceback.format_exc(limit=3)}")
    tally.seconds += time.monotonic() - started


def _summary(command: str, options: argparse.Namespace, rounds: int, tallies: dict[str, Tally], seconds: float) -> None:
    print(f"$ {command}")
    print(f"ckptlint {__version__}, Python {platform.python_version()}, hypothesis {hypothesis.__version__}; seeds {options.seed}..{options.seed + rounds - 1}; {seconds:.0f} s")
    for tally in tallies.values():
        status = "FAILED" if tally.failures else "ok"
        extra = f", {tally.findings:,} findings compared" if tally.findings else ""
        print(f"  {tally.name:<15} {tally.examples:>7,} examples in {tally.seconds:6.0f} s{extra}: {status}")
        for failure in tally.failures:
            print("    " + failure.replace("\n", "\n    "))
    print(f"{sum(len(t.failures) for t in tallies.values())} failure(s)")


if __name__ == "__main__":
    sys.exit(main())
