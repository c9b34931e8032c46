"""CKPT002: randomness inside a checkpoint that the recompute does not replay."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ckptlint.findings import Severity
from ckptlint.fixes import replay_rng
from ckptlint.rules import Diagnostic, Rule, callee_name
from ckptlint.rules.side_effect_escapes import CHECKPOINTED

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel


HAND_WRITTEN_HELP = (
    "save `torch.get_rng_state()` in the Function's forward and restore it around the re-run in backward "
    "(`with torch.random.fork_rng(): torch.set_rng_state(ctx.rng_state)`), or use `torch.utils.checkpoint.checkpoint`"
)


class RngNotReplayed(Rule):
    code = "CKPT002"
    name = "rng-not-replayed"
    severity = Severity.ERROR
    summary = "RNG inside a checkpoint region whose state the recompute does not replay (`preserve_rng_state=False`, `random`, numpy, `generator=`)"

    def check(self, model: FileModel) -> Iterator[Diagnostic]:
        for site in model.sites:
            if site.kind not in CHECKPOINTED or site.function is None:
                continue
            region = model.region(site)
            if site.preserve_rng_state is False and site.preserve_rng_node is not None:
                draws = [m.rsplit(".", 1)[-1] for m in region.dropout_modules]
                draws += [effect.description.split("`")[1] for part in region.parts for effect in part.facts.torch_rng]
                if draws:
                    listed = ", ".join(dict.fromkeys(draws))
                    yield Diagnostic(
                        site.preserve_rng_node,
                        f"{site.rng_not_replayed or '`preserve_rng_state=False`'} while the region checkpointed by `{callee_name(site)}` "
                        f"draws random numbers ({listed}): the recompute draws different ones, so gradients are computed for masks "
                        "the forward never used (measured: relative gradient error 0.7-2.0) and the global RNG stream shifts",
                        HAND_WRITTEN_HELP if site.rng_not_replayed else "drop `preserve_rng_state=False` (the default True replays torch's RNG, making Dropout exact)",
                        fixes=replay_rng(model, site),
                    )
            reseeded = {module for part in region.parts for module in part.facts.reseeds}
            for part in region.parts:
                for effect in part.facts.unreplayed_rng:
                    if effect.source in reseeded:
                        continue  # reseeded with an explicit seed inside the region: the recompute replays it
                    yield Diagnostic(
                        effect.node,
                        f"{effect.description} inside the region checkpointed by `{callee_name(site)}`: the recompute draws a "
                        "different value than the forward did (silently wrong gradients, or a different branch taken)",
                        "draw the random value outside the checkpointed function and pass it in as an input, or use torch's "
                        "default generator (which checkpoint replays)",
                        path=part.model.path,
                    )
