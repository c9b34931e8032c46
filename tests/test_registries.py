"""Models built by name from a project registry of classes (ckptlint/registries.py): the built
object is one of the registry's classes, each reported alone (CKPT001 at its own checkpoint); a
registry holding an entry the code does not show, or a local dict, tells nothing (measured in
tests/runtime/test_registry_runtime.py)."""

from __future__ import annotations

import textwrap

import pytest

from ckptlint.config import Settings
from ckptlint.engine import lint
from ckptlint.versions import resolve_versions

BLOCKS = '''
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Conv(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3)

    def forward(self, images):
        return checkpoint(self.stem, images, use_reentrant=True).mean()


class Patch(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 4, stride=4)

    def forward(self, images):
        return checkpoint(self.stem, images, use_reentrant=True).mean()
'''
TRAIN = '''
import torch
from models import {imported}


def fit(name, loader):
{body}
    for images, labels in loader:
        model(images).backward()
'''


def findings(project, registry: str, body: str, imported: str = "MODELS") -> set[tuple[str, int]]:
    project({"pyproject.toml": "", "models.py": BLOCKS + textwrap.dedent(registry), "train.py": TRAIN.format(imported=imported, body=textwrap.indent(textwrap.dedent(body), "    "))})
    settings = Settings()
    report = lint(["."], settings, resolve_versions(settings, None, "2.13", "5.23"), jobs=1)
    assert report.errors == []
    return {(f.path.rsplit("/", 1)[-1], f.line) for f in report.findings if f.code == "CKPT001"}


BOTH = {("models.py", 13), ("models.py", 22)}


@pytest.mark.parametrize(
    "registry, body, expected",
    [
        ('MODELS = {"conv": Conv, "patch": Patch}\n', "model = MODELS[name](width=16)", BOTH),
        ('MODELS = dict(conv=Conv)\nMODELS["patch"] = Patch\n', "model = MODELS.get(name)()", BOTH),
        ('MODELS = {}\nMODELS.update({"conv": Conv})\n', "cls = MODELS[name]\nmodel = cls()", {("models.py", 13)}),
        # An entry the code does not show: which classes it holds is unknown.
        ('MODELS = {"conv": Conv, "patch": Patch}\n\n\ndef plug(name, build):\n    MODELS[name] = build()\n', "model = MODELS[name]()", set()),
        ('MODELS = {"conv": Conv, "patch": Patch}\nMODELS.update(torch.hub.load("a", "b"))\n', "model = MODELS[name]()", set()),
        # A local dict of the same name is no registry.
        ('MODELS = {"conv": Conv, "patch": Patch}\n', "MODELS = {}\nmodel = MODELS[name]()", set()),
    ],
)
def test_registry_builds_each_of_its_classes(project, registry, body, expected):
    assert findings(project, registry, body) == expected


def test_registry_filled_by_a_decorator(project):
    registry = '''
        REGISTRY = {}


        def register(name):
            def add(cls):
                REGISTRY[name] = cls
                return cls
            return add


        @register("tiny")
        class Tiny(Conv):
            pass
    '''
    assert findings(project, registry, "model = REGISTRY[name]()", imported="REGISTRY") == {("models.py", 13)}

