"""Automatic fixes, as LibCST codemods cut down to text edits.

A rule describes a fix on the nodes it already holds (`FixPlan`: old node -> rewritten node, or a
statement to add after one). The engine positions those nodes with the finding and keeps, of each
rewrite, only the characters that differ between the node's code and the rewritten node's code: an
edit that leaves the rest of the file, its formatting and its comments alone, and that can be
stored in the result cache and printed in JSON and SARIF. `--fix` and `--diff` apply the edits
(ckptlint.autofix) and lint again until nothing more applies.

Nothing here runs unless a rule fires: a file without findings costs no fix work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator, Optional, Sequence, Union

from ckptlint.findings import SAFE, UNSAFE, Edit, Fix
from ckptlint.lines import LINE_BREAK
from ckptlint.model.sites import ApiKind, CacheUse, CheckpointSite, FlagStatus
from ckptlint.model.values import DictLit, code

if TYPE_CHECKING:
    import libcst as cst

    from ckptlint.model.file_model import FileModel

# The APIs whose call takes `use_reentrant=` itself.
_TAKES_FLAG = (ApiKind.CHECKPOINT, ApiKind.SEQUENTIAL)
_HF_KWARGS = (ApiKind.HF_ENABLE, ApiKind.HF_TRAINING_ARGS)


@dataclass(frozen=True)
class FixPlan:
    """A fix as a rule states it, on nodes of its model."""

    applicability: str
    message: str
    # (node, its rewrite): expressions only, so that the node's code is exactly its span in the file.
    replacements: tuple[tuple["cst.CSTNode", "cst.CSTNode"], ...] = ()
    # (last small statement of a line, code): a statement added on a new line after that line.
    insertions: tuple[tuple["cst.CSTNode", str], ...] = ()

    def nodes(self) -> Iterator["cst.CSTNode"]:
        yield from (old for old, _ in self.replacements)
        yield from (node for node, _ in self.insertions)


# --- what the rules ask for -------------------------------------------------------------------


def explicit_mode(site: CheckpointSite) -> tuple[FixPlan, ...]:
    """CKPT006: spell the mode torch falls back to today (safe: nothing changes but the warning),
    or the recommended `use_reentrant=False` (unsafe: a different checkpoint implementation)."""
    today = site.mode.reentrant
    if today is None:
        return ()
    plans = []
    for value, applicability in [(today, SAFE)] + ([(False, UNSAFE)] if today else []):
        plan = _set_flag(site, value, applicability)
        if plan is None:
            return ()
        plans.append(plan)
    return tuple(plans)


def non_reentrant(site: CheckpointSite) -> tuple[FixPlan, ...]:
    """CKPT001/003/005: switch that call to `use_reentrant=False`, when the call itself decides the
    mode (spelled there, or omitted). A mode from a partial, a dict or a transformers layer is left
    to the user: changing it there changes other calls too."""
    if site.kind not in _TAKES_FLAG:
        return ()
    if site.mode.flag is FlagStatus.EXPLICIT and site.mode.node not in site.call.args:
        return ()
    if site.mode.flag not in (FlagStatus.EXPLICIT, FlagStatus.ABSENT):
        return ()
    plan = _set_flag(site, False, UNSAFE)
    return (plan,) if plan else ()


def input_require_grads(model: FileModel, site: CheckpointSite) -> tuple[FixPlan, ...]:
    """CKPT005 on a transformers model: call `enable_input_require_grads()` right after enabling
    checkpointing, on the same model (unsafe: it adds a forward hook)."""
    import libcst as cst

    func = site.call.func
    statement = _statement_of(model.tree, site.call)
    if not isinstance(func, cst.Attribute) or statement is None:
        return ()
    receiver = code(func.value)
    return (FixPlan(UNSAFE, f"Call `{receiver}.enable_input_require_grads()` after enabling checkpointing", insertions=((statement.body[-1], f"{receiver}.enable_input_require_grads()"),)),)


def no_cache(use: CacheUse) -> tuple[FixPlan, ...]:
    """CKPT004: `use_cache=True` -> `False` (safe: transformers turns caching off while
    checkpointing anyway; the code now says so)."""
    import libcst as cst

    node = use.node
    value = node.value if isinstance(node, (cst.Arg, cst.Assign)) else None
    if not (isinstance(value, cst.Name) and value.value == "True"):
        return ()
    return (FixPlan(SAFE, "Pass `use_cache=False`", ((value, value.with_changes(value="False")),)),)


def replay_rng(model: FileModel, site: CheckpointSite) -> tuple[FixPlan, ...]:
    """CKPT002: drop `preserve_rng_state=False` (safe: the default replays torch's RNG; it costs
    a little speed and makes the recompute draw what the forward drew)."""
    import libcst as cst

    node = site.preserve_rng_node
    if not isinstance(node, (cst.Arg, cst.DictElement)) or isinstance(node, cst.Arg) and node.star:
        return ()  # the flag came through `**kwargs`: nothing to delete here (the spread carries other keywords)
    if isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value != "preserve_rng_state":
        return ()  # transformers kwargs built elsewhere (`gradient_checkpointing_kwargs=shared`): other models may share them
    container = site.call if node in site.call.args else _parent_of(model.tree, node)
    if not isinstance(container, (cst.Call, cst.Dict)):
        return ()
    return (FixPlan(SAFE, "Remove `preserve_rng_state=False`", ((container, _without(container, node)),)),)


def _set_flag(site: CheckpointSite, value: bool, applicability: str) -> Optional[FixPlan]:
    import libcst as cst

    flag = cst.Name(str(value))
    if site.kind in _TAKES_FLAG:
        explicit = site.mode.node if site.mode.flag is FlagStatus.EXPLICIT else None
        if isinstance(explicit, cst.Arg) and explicit in site.call.args:
            change = (explicit.value, flag)
        elif site.mode.flag is FlagStatus.ABSENT and not any(a.star == "**" for a in site.call.args):
            # With `**kwargs` the flag is absent only in the calls seen: another caller's would clash.
            change = (site.call, _with_keyword(site.call, "use_reentrant", flag))
        else:
            return None
        return FixPlan(applicability, f"Pass `use_reentrant={value}`", (change,))
    kwargs = site.kwargs_value
    spelled = site.kwargs_node.value if isinstance(site.kwargs_node, cst.Arg) else None
    if site.kind not in _HF_KWARGS or not isinstance(kwargs, DictLit) or spelled is not kwargs.node:
        return None  # only a dict spelled in the call: a shared dict may go elsewhere too
    if isinstance(spelled, cst.Dict):
        rewritten = _with_entry(spelled, "use_reentrant", flag)
    elif isinstance(spelled, cst.Call):  # dict(...)
        rewritten = _with_keyword(spelled, "use_reentrant", flag)
    else:
        return None
    return FixPlan(applicability, f'Add `"use_reentrant": {value}` to the checkpointing kwargs', ((spelled, rewritten),))


# --- rewriting argument lists and dicts the way they are laid out -------------------------------


def _with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    import libcst as cst

    arg = cst.Arg(value, keyword=cst.Name(name), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    return call.with_changes(args=_appended(list(call.args), arg))


def _with_entry(node: cst.Dict, key: str, value: cst.BaseExpression) -> cst.Dict:
    import libcst as cst

    quote = "'" if any(isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) and e.key.value.startswith("'") for e in node.elements) else '"'
    return node.with_changes(elements=_appended(list(node.elements), cst.DictElement(cst.SimpleString(f"{quote}{key}{quote}"), value)))


def _appended(items: list, new: Union[cst.Arg, cst.DictElement]) -> list:
    """`items + [new]`, laid out like the items before it: one per line stays one per line, a
    trailing comma stays trailing, the whitespace before the closing bracket stays last."""
    import libcst as cst

    if not items:
        return [new]
    last = items[-1]
    separator = _plain(items[-2].comma) if len(items) > 1 and isinstance(items[-2].comma, cst.Comma) else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    moved = {"comma": last.comma}
    if isinstance(last, cst.Arg):
        moved["whitespace_after_arg"] = last.whitespace_after_arg
        last = last.with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
    return [*items[:-1], last.with_changes(comma=separator), new.with_changes(**moved)]


def _plain(comma: cst.Comma) -> cst.Comma:
    """A separator without the comments of the line it was copied from."""
    import libcst as cst

    after = comma.whitespace_after
    if isinstance(after, cst.ParenthesizedWhitespace):
        after = after.with_changes(first_line=cst.TrailingWhitespace(newline=after.first_line.newline), empty_lines=[])
    return comma.with_changes(whitespace_after=after)


def _without(container: Union[cst.Call, cst.Dict], node: cst.CSTNode) -> cst.CSTNode:
    """The call or dict without the argument or entry `node`; the one before takes over its comma
    and trailing whitespace when it was the last."""
    import libcst as cst

    field = "args" if isinstance(container, cst.Call) else "elements"
    items = list(getattr(container, field))
    position = items.index(node)
    removed = items.pop(position)
    if position == len(items) and items:
        moved = {"comma": removed.comma}
        if isinstance(removed, cst.Arg) and isinstance(items[-1], cst.Arg):
            moved["whitespace_after_arg"] = removed.whitespace_after_arg
        items[-1] = items[-1].with_changes(**moved)
    return container.with_changes(**{field: items})


def _parent_of(tree: cst.Module, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    path = _path_to(tree, node)
    return path[-2] if path and len(path) > 1 else None


def _statement_of(tree: cst.Module, node: cst.CSTNode) -> Optional[cst.SimpleStatementLine]:
    """The line statement holding `node`, unless a lambda, a comprehension or a one-line block body
    stands between them (a statement added after it would then run elsewhere)."""
    import libcst as cst

    path = _path_to(tree, node) or []
    for ancestor in reversed(path[:-1]):
        if isinstance(ancestor, cst.SimpleStatementLine):
            return ancestor
        if isinstance(ancestor, (cst.Lambda, cst.BaseComp, cst.SimpleStatementSuite, cst.BaseCompoundStatement)):
            return None
    return None


def _path_to(tree: cst.Module, node: cst.CSTNode) -> Optional[list[cst.CSTNode]]:
    """Root-to-node chain of ancestors (a walk of the tree; run for a finding's fix only)."""
    from ckptlint.model.walk import children

    stack: list[tuple[cst.CSTNode, int]] = [(tree, 0)]
    path: list[cst.CSTNode] = []
    while stack:
        current, depth = stack.pop()
        del path[depth:]
        path.append(current)
        if current is node:
            return path
        stack.extend((child, depth + 1) for child in reversed(list(children(current))))
    return None


# --- from plans to edits (engine side, per finding) --------------------------------------------

Position = tuple[int, int, int, int]  # line, column (0-based), end line, end column, as the engine computes


def plan_nodes(plans: Iterable[FixPlan]) -> list[cst.CSTNode]:
    return [node for plan in plans for node in plan.nodes()]


def anchors(tree: cst.Module, plans: Iterable[FixPlan]) -> dict[int, cst.CSTNode]:
    """The statement holding each node a plan rewrites over several lines (a line break inside
    the node continues at that statement's indentation), in one walk of the tree; most rewritten
    nodes sit on one line and need none."""
    import libcst as cst

    from ckptlint.model.walk import children

    wanted = {id(old) for plan in plans for old, _ in plan.replacements if "\n" in _code(old, "")}
    found: dict[int, cst.CSTNode] = {}
    stack: list[tuple[cst.CSTNode, Optional[cst.CSTNode]]] = [(tree, None)]
    while stack and len(found) < len(wanted):
        node, statement = stack.pop()
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            statement = node
        if id(node) in wanted and statement is not None:
            found[id(node)] = statement
        stack.extend((child, statement) for child in children(node))
    return found


def to_fix(plan: FixPlan, positions: dict[int, Position], anchored: dict[int, cst.CSTNode], lines: Sequence[str], newline: str) -> Optional[Fix]:
    """The plan as edits of the file whose `lines` (no line ends) the positions address; None when a
    node is not where its code says (in another file, or its span does not read as its code)."""
    edits = []
    for old, new in plan.replacements:
        where = positions.get(id(old))
        statement = positions.get(id(anchored.get(id(old))))
        if where is None:
            return None
        indent = _indentation(lines[statement[0] - 1]) if statement else ""
        old_code, new_code = _code(old, indent), _code(new, indent)
        if _span(lines, where) != old_code:
            return None
        edits.append(_minimal_edit(where, old_code, new_code, newline))
    for node, text in plan.insertions:
        where = positions.get(id(node))
        if where is None:
            return None
        start_line, _, end_line, _ = where
        end = len(lines[end_line - 1]) + 1
        edits.append(Edit(end_line, end, end_line, end, newline + _indentation(lines[start_line - 1]) + text))
    return Fix(plan.applicability, plan.message, tuple(sorted(edits)))


def _indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _code(node: cst.CSTNode, indent: str) -> str:
    """The node's code as its position spans it (without the parentheses around it), its line
    breaks continuing at `indent` as they do in the file."""
    from libcst._nodes.internal import CodegenState

    if getattr(node, "lpar", None):
        node = node.with_changes(lpar=[], rpar=[])
    state = CodegenState(default_indent="    ", default_newline="\n", indent_tokens=[indent])
    node._codegen(state)
    return "".join(state.tokens)


def _span(lines: Sequence[str], where: Position) -> str:
    line, column, end_line, end_column = where
    if end_line > len(lines):
        return ""
    if line == end_line:
        return lines[line - 1][column:end_column]
    return "\n".join([lines[line - 1][column:], *lines[line : end_line - 1], lines[end_line - 1][:end_column]])


def _minimal_edit(where: Position, old: str, new: str, newline: str) -> Edit:
    """Only what differs: the common head and tail of the old and new code stay untouched."""
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    start = _advance(where[0], where[1], old[:head])
    end = _advance(where[0], where[1], old[: len(old) - tail])
    return Edit(start[0], start[1] + 1, end[0], end[1] + 1, new[head : len(new) - tail].replace("\n", newline))


def _advance(line: int, column: int, text: str) -> tuple[int, int]:
    breaks = text.count("\n")
    return (line + breaks, len(text) - text.rfind("\n") - 1) if breaks else (line, column + len(text))


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """`text` with non-overlapping edits applied (positions in `text`; equal edits applied once)."""
    starts = [0] + [match.end() for match in LINE_BREAK.finditer(text)]

    def offset(line: int, column: int) -> int:
        return min(starts[line - 1] + column - 1, len(text)) if line <= len(starts) else len(text)

    pieces = []
    position = len(text)
    for edit in sorted(set(edits), reverse=True):
        start, end = offset(edit.line, edit.column), offset(edit.end_line, edit.end_column)
        pieces += [text[end:position], edit.content]
        position = start
    pieces.append(text[:position])
    return "".join(reversed(pieces))
