"""CKPT003: a tensor that needs grad reaches a reentrant checkpoint other than positionally."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ckptlint.findings import Severity
from ckptlint.fixes import non_reentrant
from ckptlint.model.apis import CONTROL_KEYWORDS
from ckptlint.model.sites import ApiKind, CheckpointSite
from ckptlint.model.values import Const, DictLit, Grad, Items, Lambda, LocalFunction, ModuleObject, Param, Partial, Tensor, Value, grad_on_some_path, packed
from ckptlint.model.torch_knowledge import ACTIVATION_NAMES
from ckptlint.rules import Diagnostic, Rule, callee_name, spelled

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel

HELP = (
    "pass the tensor positionally (`checkpoint(fn, x, t)` with `fn(x, t)`), or use `use_reentrant=False`, "
    "which supports keyword and captured inputs"
)


HF_HELP = (
    "pass the arguments positionally, in the order of the layer's `forward`, or enable checkpointing with "
    "`gradient_checkpointing_kwargs={\"use_reentrant\": False}`"
)
WRAPPER_HELP = (
    "pass the arguments positionally, or wrap with `checkpoint_impl=CheckpointImpl.REENTRANT` too (checkpoint_wrapper "
    "then packs keywords into positional inputs), or use `use_reentrant=False`"
)
PACKED_HELP = (
    "pass each tensor as a positional checkpoint argument of its own (`checkpoint(fn, h, ctx)`), or use "
    "`use_reentrant=False`, which tracks every tensor the function uses"
)


def spread_keywords(site: CheckpointSite) -> list[str]:
    """The keywords a call of a checkpoint wrapper hands on through the wrapper's `**kwargs` to torch,
    which takes its own control keywords and passes the rest to the checkpointed function."""
    spread = site.spread_value
    return [k for k in spread.entries if k not in CONTROL_KEYWORDS] if isinstance(spread, DictLit) else []


def needs_grad(value: Value) -> bool:
    """A tensor with a graph behind it on some path: a captured leaf (an `nn.Parameter`) is harmless
    (measured). One path is enough: the hazard strikes whenever that path runs."""
    tensor = grad_on_some_path(value)
    return tensor is not None and not tensor.leaf


def _cannot_require_grad(value: Value) -> bool:
    return isinstance(value, Const) or (isinstance(value, Tensor) and value.grad is Grad.NONE)


class GradTensorNotPositional(Rule):
    code = "CKPT003"
    name = "grad-tensor-not-positional"
    severity = Severity.ERROR
    summary = "tensor that needs grad reaches a reentrant checkpoint by keyword, partial, closure or module attribute"

    def check(self, model: FileModel) -> Iterator[Diagnostic]:
        for site in model.sites:
            if not site.reentrant:
                continue
            if site.kind is ApiKind.HF_LAYER_CALL:
                yield from self.layer_keywords(site)
            elif site.kind.runs_checkpoint:
                yield from self.direct_keywords(site)
                yield from self.packed_inputs(site)
                yield from self.captures(site)
                yield from self.stashed_attributes(model, site)

    @staticmethod
    def direct_keywords(site: CheckpointSite) -> Iterator[Diagnostic]:
        spread = spread_keywords(site)
        if not site.keywords and not spread:
            return
        names = ", ".join([*(arg.keyword.value for arg in site.keywords if arg.keyword), *spread])
        if site.kind is ApiKind.HF_FUNC:
            yield Diagnostic(
                site.call,
                f"`self._gradient_checkpointing_func` called with keyword argument(s) {names} under reentrant checkpointing: "
                "transformers sets it to `functools.partial(checkpoint, **gradient_checkpointing_kwargs)`, so the keywords "
                f"reach torch's checkpoint, which raises `ValueError: Unexpected keyword arguments: {names}`; {site.mode.reason}",
                HF_HELP,
            )
            return
        parts = (site.wrapper or "").split(".")
        wrapper = ".".join(parts[-2:]) if parts[-1] in ("forward", "__call__") else parts[-1]
        through = f" (through the `**` of `{wrapper}`)" if spread and site.wrapper else ""
        yield Diagnostic(
            site.call,
            f"reentrant checkpoint of `{callee_name(site)}` with keyword argument(s) {names}{through}: torch raises "
            f"`ValueError: Unexpected keyword arguments: {names}`; {site.mode.reason}",
            WRAPPER_HELP if site.kind is ApiKind.WRAPPED_MODULE_CALL else HELP,
            fixes=non_reentrant(site),
        )

    @staticmethod
    def packed_inputs(site: CheckpointSite) -> Iterator[Diagnostic]:
        """Tensors inside a list, tuple or dict handed positionally: reentrant checkpoint tracks only
        top-level tensor arguments (measured on torch 2.13)."""
        top_level = [v for v in site.input_values if not isinstance(v, (Items, DictLit)) and not (isinstance(v, Tensor) and v.sequence)]
        for value in site.input_values:
            found = next(((path, inner) for path, inner in packed(value) if needs_grad(inner)), None)
            if found is None:
                continue
            path, inner = found
            if site.has_star_args or not all(_cannot_require_grad(v) for v in top_level):
                consequence = (
                    "backward reaches it only from inside the recompute, so once two checkpointed calls read it backward "
                    "fails with \"Trying to backward through the graph a second time\", and unless a top-level input "
                    "requires grad its gradient is lost"
                )
            else:
                consequence = (
                    "no top-level input requires grad, so the checkpoint's output does not either and every gradient "
                    "behind it is lost (silently, or `element 0 of tensors does not require grad` at backward)"
                )
            kind = "dict" if isinstance(value, DictLit) else "list or tuple"
            yield Diagnostic(
                site.call,
                f"reentrant checkpoint of `{callee_name(site)}` gets a tensor that needs grad ({inner.origin}) inside a {kind} "
                f"argument (at `{path}`): reentrant mode tracks only top-level tensor arguments; {consequence}",
                PACKED_HELP,
                fixes=non_reentrant(site),
            )
            return

    @staticmethod
    def captures(site: CheckpointSite) -> Iterator[Diagnostic]:
        function = site.function
        if isinstance(function, Partial):
            bound = list(zip(("positional argument",) * len(function.arg_values), function.arg_values)) + list(function.keywords.items())
            for name, value in bound:
                if needs_grad(value):
                    # A wrapper's partial is spelled in the wrapper: the call handing the tensor is the site.
                    yield Diagnostic(
                        site.call if site.wrapper else function.node,
                        f"`{spelled(site.call if site.wrapper else function.node)}` binds `{name}` ({value.origin}) into a reentrant checkpoint: it is not a "
                        "checkpoint input, so the recompute backpropagates into its graph a second time (\"Trying to backward "
                        "through the graph a second time\") or its gradient is lost",
                        HELP,
                        fixes=non_reentrant(site),
                    )
                    return
        elif isinstance(function, (Lambda, LocalFunction)):
            for name, value in site.captured.items():
                if not needs_grad(value):
                    # `**extra` holding `memory=memory`: a tensor inside what it captures.
                    inside = value.entries if isinstance(value, DictLit) else dict(enumerate(value.values)) if isinstance(value, Items) else {}
                    key, value = next(((k, v) for k, v in inside.items() if needs_grad(v)), (None, value))
                    name = f"{name}[{key!r}]" if key is not None else name
                if needs_grad(value):
                    kind = "lambda" if isinstance(function, Lambda) else f"closure `{function.qualname.rsplit('.', 1)[-1]}`"
                    yield Diagnostic(
                        site.call,
                        f"the {kind} checkpointed here (reentrant) captures `{name}` ({value.origin}): captured tensors are not "
                        "checkpoint inputs, so backward goes through their graph a second time (\"Trying to backward through "
                        "the graph a second time\") or their gradient is lost",
                        HELP,
                        fixes=non_reentrant(site),
                    )
                    return

    @staticmethod
    def stashed_attributes(model: FileModel, site: CheckpointSite) -> Iterator[Diagnostic]:
        if not isinstance(site.function, ModuleObject):
            return
        for part in model.region(site).parts:
            own_stores = {store.attr for store in part.facts.self_stores}
            read = part.facts.self_reads.keys() - own_stores
            # Stored in this file (the model stashing on its blocks), in the part's, or by its class's module.
            stashed = model.stashed(part.owner_class, part.model) if read and part.owner_class else {}
            for attr in read:
                # The store that hands it a tensor needing grad (`blk.set_memory(feats)`), not the
                # setter's own `self.memory = memory`, whose value is its callers'.
                store = next((s for s in stashed.get(attr, ()) if needs_grad(model.resolved(s[1]))), None)
                if store is not None:
                    yield Diagnostic(
                        site.call,
                        f"`{part.facts.qualname}` reads `self.{attr}`, a tensor that needs grad stashed on the module at run "
                        f"time (`{spelled(store[0])}`) rather than passed in: under reentrant checkpointing backward goes "
                        "through its graph a second time (\"Trying to backward through the graph a second time\")",
                        "pass the tensor to the checkpointed module as a positional argument, or use `use_reentrant=False`",
                        fixes=non_reentrant(site),
                    )
                    return

    @staticmethod
    def layer_keywords(site: CheckpointSite) -> Iterator[Diagnostic]:
        for arg, value in zip(site.keywords, site.keyword_values):
            name = arg.keyword.value if arg.keyword else ""
            if name in site.fresh_keywords:
                continue  # computed for this call alone: the recompute's backward is its only one
            if needs_grad(value) or (isinstance(value, Param) and name in ACTIVATION_NAMES):
                carrier = grad_on_some_path(value)
                # Say which path brings the grad when not every path does.
                when = f" (on some paths {carrier.origin})" if carrier is not None and carrier is not value else ""
                yield Diagnostic(
                    arg,  # the keyword itself: in a call spread over lines, the line that passes the tensor
                    f"`{name}=`{when} is passed by keyword to a GradientCheckpointingLayer under reentrant checkpointing: "
                    "transformers binds keywords with functools.partial, so the tensor is not a checkpoint input and "
                    f"backward goes through its graph a second time or its gradient is lost; {site.mode.reason}",
                    f"pass `{name}` positionally (as Bart and Bert do), or enable checkpointing with "
                    "`gradient_checkpointing_kwargs={\"use_reentrant\": False}`",
                )
                return
