"""Per-function mode summaries (ckptlint/mode_effects.py) as the index records them."""

from __future__ import annotations

import ast

import pytest

from ckptlint.mode_effects import mode_steps


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
    ],
)
def test_mode_steps_and_the_returned_parameter(source, steps, returned):
    assert _steps(source) == (steps, returned)
