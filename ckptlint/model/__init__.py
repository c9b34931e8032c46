"""The semantic model every rule reads: checkpoint sites with their resolved callee and mode."""

from ckptlint.model.builder import FileModel, build_file_model
from ckptlint.model.sites import ApiKind, CheckpointSite, FlagStatus, GradContext, Mode

__all__ = ["ApiKind", "CheckpointSite", "FileModel", "FlagStatus", "GradContext", "Mode", "build_file_model"]
