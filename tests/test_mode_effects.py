"""Per-function mode summaries (ckptlint/mode_effects.py) as the index records them."""

from __future__ import annotations

import ast
import itertools

import pytest

from ckptlint.mode_effects import LEAVES_MODE, MAY_CHANGE_MODE, ModeEffect, _shortest, folded, mode_steps


def _steps(source: str) -> tuple[dict, object]:
    function = ast.parse(source).body[0]
    return mode_steps(function, lambda node: None)


@pytest.mark.parametrize(
    "source, steps, returned",
    [
        ("def f(m):\n    m.eval()\n    return m\n", {"m": [["set", False, True]]}, "m"),
        ("def f(m: nn.Module):\n    m.train()\n", {"m": [["set", True, True]]}, None),
        # A bare container may hold modules; one whose subscript names only data types cannot.
        ("def f(ms: list):\n    for m in ms:\n        m.eval()\n", {"ms": [["set", False, True]]}, None),
        ("def f(x: Optional[torch.Tensor], n: tuple[int, ...]):\n    x.eval()\n    return x\n", {}, None),
        ("def f(x: 'Net'):\n    x.eval()\n", {"x": [["set", False, True]]}, None),
        ("def f(m):\n    m = m.half()\n    return m\n", {}, None),  # rebound: not returned unchanged
        ("def f(m):\n    def g():\n        m.eval()\n    return g\n", {"m": [["set", None, False]]}, None),
        ("def f(self):\n    self.eval()\n", {}, None),
        # Under an `if` a step runs on some paths only; under a `with` on all of them.
        ("def f(m, c):\n    if c:\n        m.eval()\n", {"m": [["set", False, False]]}, None),
        ("def f(m, c):\n    if m.eval():\n        pass\n", {"m": [["set", False, True]]}, None),
        ("def f(m, c):\n    with c:\n        m.eval()\n", {"m": [["set", False, True]]}, None),
    ],
)
def test_mode_steps_and_the_returned_parameter(source, steps, returned):
    assert _steps(source) == (steps, returned)


def _all_steps(length: int):
    """Every sequence of `length` steps over the step kinds a summary holds."""
    kinds = [["set", mode, definite] for mode in (True, False, None) for definite in (True, False)]
    kinds += [["call", callee, 0, definite, False] for callee in ("leaves", "eval", "unknown") for definite in (True, False)]
    return itertools.product(kinds, repeat=length)


def test_shortened_steps_fold_to_the_same_effect():
    effects = {"leaves": LEAVES_MODE, "eval": ModeEffect(True, False), "unknown": MAY_CHANGE_MODE}
    shortened_somewhere = False
    for length in range(1, 4):
        for steps in _all_steps(length):
            kept = _shortest([list(s) for s in steps])
            shortened_somewhere |= len(kept) < length
            assert folded(kept, lambda callee, key, bound: effects[callee]) == folded(steps, lambda callee, key, bound: effects[callee]), steps
    assert shortened_somewhere


def test_a_parameter_handed_to_something_unknown_keeps_one_step():
    source = "def f(m, x):\n    wrap(m)\n    if x is None:\n        helper(m)\n    m.layer(x)\n    return m(x)\n"
    function = ast.parse(source).body[0]
    steps, _ = mode_steps(function, lambda node: "pkg.helper" if isinstance(node, ast.Name) and node.id == "helper" else None)
    assert steps["m"] == [["set", None, False]] and steps["x"] == [["set", None, False]]
