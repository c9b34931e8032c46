"""A script's command-line options (argparse) as values: what `args.NAME` holds when the script
runs as written, which is what its defaults say. Only defaults that turn something on count (a
checkpoint name, `8`, True): a falsy or missing default exists to be overridden (a `store_true`
switch is off by default and still reachable), so it stays unknown."""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from ckptlint.model.values import UNKNOWN, Const, Instance, Items, ParsedArgs, Value

ARGUMENT_PARSERS = frozenset({"argparse.ArgumentParser"})
# Calls on a parser that return an object whose `add_argument` adds to the same namespace.
GROUPS = frozenset({"add_argument_group", "add_mutually_exclusive_group"})
PARSE = frozenset({"parse_args", "parse_known_args"})


def is_parser(value: Value) -> bool:
    return isinstance(value, Instance) and value.ctor in ARGUMENT_PARSERS


def option(call: cst.Call, evaluate: Callable[[cst.BaseExpression], Value]) -> Optional[tuple[str, Value]]:
    """(dest, value when the option is not passed) of `parser.add_argument(...)`; None when its
    destination is not spelled."""
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if any(a.star for a in call.args):
        return None  # `add_argument(*flags, ...)`: which option it is is not spelled
    flags = [evaluate(a.value) for a in call.args if a.keyword is None]
    names = [f.value for f in flags if isinstance(f, Const) and isinstance(f.value, str)]
    if not names or len(names) != len(flags):
        return None
    if "dest" in keywords:
        dest = evaluate(keywords["dest"])
        if not (isinstance(dest, Const) and isinstance(dest.value, str)):
            return None
        name = dest.value
    else:
        long = next((n for n in names if n.startswith("--")), None)
        name = (long or names[0]).lstrip("-").replace("-", "_")
    if not names[0].startswith("-") or "required" in keywords and evaluate(keywords["required"]) != Const(False):
        return name, UNKNOWN  # passed on every command line
    action = evaluate(keywords["action"]) if "action" in keywords else None
    if "default" in keywords:
        default = evaluate(keywords["default"])
    else:
        default = Const(True) if action == Const("store_false") else UNKNOWN
    typed = "type" in keywords and isinstance(default, Const) and isinstance(default.value, str)  # argparse converts a string default
    if typed or not (isinstance(default, Const) and default.value):
        return name, UNKNOWN
    return name, default


def parsed(options: dict[str, Value], method: str) -> Value:
    """What `parse_args()` / `parse_known_args()` returns without arguments, given the options added."""
    namespace = ParsedArgs(dict(options))
    return namespace if method == "parse_args" else Items((namespace, UNKNOWN))
