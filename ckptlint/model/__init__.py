"""The semantic model every rule reads: checkpoint sites with their resolved callee and mode."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptlint.model.sites import ApiKind, CheckpointSite, FlagStatus, GradContext, Mode

if TYPE_CHECKING:
    from ckptlint.model.builder import build_file_model
    from ckptlint.model.file_model import FileModel

__all__ = ["ApiKind", "CheckpointSite", "FileModel", "FlagStatus", "GradContext", "Mode", "build_file_model"]


def __getattr__(name: str) -> Any:
    # The builder imports LibCST (0.2 s): only a run that builds a model loads it.
    if name == "build_file_model":
        from ckptlint.model.builder import build_file_model

        return build_file_model
    if name == "FileModel":
        from ckptlint.model.file_model import FileModel

        return FileModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
