"""CKPT002: randomness inside a checkpoint that the recompute does not replay."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ckptlint.findings import Severity
from ckptlint.fixes import replay_rng
from ckptlint.model.hf_configs import MEASURED_ON, layer_dropout
from ckptlint.model.sites import ApiKind
from ckptlint.rules import Diagnostic, Rule, callee_name
from ckptlint.rules.side_effect_escapes import CHECKPOINTED

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel
    from ckptlint.model.sites import CheckpointSite

TRANSFORMERS_KWARGS = (ApiKind.HF_ENABLE, ApiKind.HF_TRAINING_ARGS)

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
            if site.kind in TRANSFORMERS_KWARGS:
                yield from self.transformers_layers(model, site)
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

    @staticmethod
    def transformers_layers(model: FileModel, site: CheckpointSite) -> Iterator[Diagnostic]:
        """transformers hands its checkpointing kwargs to torch's checkpoint around every layer: with
        `preserve_rng_state=False` the recompute of a layer that draws dropout draws new masks."""
        if site.preserve_rng_state is not False or site.preserve_rng_node is None:
            return
        drawn = layer_dropout(site.receiver)
        if not drawn:
            return  # zero dropout draws nothing; unknown dropout may be zero
        how = "for the Trainer handed these TrainingArguments, which checkpoints" if site.kind is ApiKind.HF_TRAINING_ARGS else "while gradient checkpointing"
        yield Diagnostic(
            site.preserve_rng_node,
            f"`preserve_rng_state=False` {how} a model whose layers draw dropout ({', '.join(drawn)}): "
            "the recompute draws different masks, so gradients are computed for masks the forward never used "
            f"(measured with {MEASURED_ON}: relative gradient error 0.6-2.5) and the global RNG stream shifts",
            "drop `preserve_rng_state=False` (the default True replays torch's RNG, making dropout exact), or set the config's layer dropout to 0.0",
            fixes=replay_rng(model, site),
        )
