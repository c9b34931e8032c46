"""CKPT007 through module hooks: a forward hook (or pre-hook) runs inside the call of its module, so
inside a checkpoint that runs the module, and again in the recompute. Measured on torch 2.13 CPU
(rules/CKPT007.md, tests/runtime/test_ckpt007_hooks_runtime.py): a list a hook appends to gets 8
entries for 4 checkpointed blocks; under non-reentrant mode with the early stop, a forward hook on
the checkpointed module itself does not run again (4 entries), one on a submodule does.

Each case lists exactly the (line, code) findings expected (CKPT006 excluded), so both misses and
false positives fail.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import lint_text

from ckptlint.config import Settings
from ckptlint.engine import lint
from ckptlint.versions import resolve_versions

HEADER = "import functools\nimport torch\nimport torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n"

BLOCK = """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.out = nn.Linear(8, 8)
    def forward(self, x):
        return self.out(torch.tanh(self.fc(x)))
"""
BLOCK_LINES = BLOCK.count("\n")


def findings(body: str) -> set[tuple[int, str]]:
    report = lint_text(HEADER + BLOCK + textwrap.dedent(body))
    assert report.errors == []
    offset = HEADER.count("\n") + BLOCK_LINES
    return {(f.line - offset, f.code) for f in report.findings if f.code != "CKPT006"}


def backbone(register: str, hook: str = "", mode: str = "use_reentrant=True", extra: str = "") -> str:
    """A backbone that registers hooks in `__init__` (`register`, indented 8) and checkpoints its blocks."""
    return f"""
class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(4)])
        self.head = Block()
        self.features = []
        self.stats = {{}}
{textwrap.indent(textwrap.dedent(register).strip(), " " * 8)}
{textwrap.indent(textwrap.dedent(hook).strip(), " " * 4) if hook else ""}
    def forward(self, x):
        self.features = []
        for blk in self.blocks:
            x = checkpoint(blk, x, {mode})
        return self.head(x), self.features
{textwrap.dedent(extra)}
"""


SAVE = """
def _save(self, module, inputs, output):
    self.features.append(output)
"""

CASES = {
    "a method hook on every checkpointed block appends the block's output": (
        backbone("for blk in self.blocks:\n    blk.register_forward_hook(self._save)", SAVE),
        {(12, "CKPT007")},
    ),
    "a hook on a submodule of the checkpointed block": (
        backbone("self.blocks[0].fc.register_forward_hook(self._save)", SAVE),
        {(11, "CKPT007")},
    ),
    "a hook on a module outside the region is not flagged": (
        backbone("self.head.fc.register_forward_hook(self._save)", SAVE),
        set(),
    ),
    "a hook on a submodule the checkpointed block holds but never calls": (
        """
        class Tapped(Block):
            def __init__(self):
                super().__init__()
                self.probe = nn.Linear(8, 8)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(8, 8)
                self.block = Tapped()
                self.seen = []
                self.block.probe.register_forward_hook(self._save)
            def _save(self, module, inputs, output):
                self.seen.append(output)
            def forward(self, x):
                return checkpoint(self.block, self.stem(x), use_reentrant=True)
        """,
        set(),
    ),
    "a hook on the ModuleList itself never runs": (
        backbone("self.blocks.register_forward_hook(self._save)", SAVE),
        set(),
    ),
    "a lambda hook appending to an attribute": (
        backbone("for blk in self.blocks:\n    blk.register_forward_hook(lambda m, i, o: self.features.append(o))"),
        {(10, "CKPT007")},
    ),
    "a closure that stores into a dict by name": (
        backbone(
            """
            for index, blk in enumerate(self.blocks):
                def grab(module, inputs, output, index=index):
                    self.stats[index] = output
                blk.register_forward_hook(grab)
            """
        ),
        {(11, "CKPT007")},
    ),
    "a partial binding the layer name": (
        backbone("for i, blk in enumerate(self.blocks):\n    blk.register_forward_hook(functools.partial(self._keep, i))", """
            def _keep(self, index, module, inputs, output):
                self.stats[index] = output
            """),
        {(12, "CKPT007")},
    ),
    "a hook that only computes a python float is not an escape of a tensor": (
        backbone("for blk in self.blocks:\n    blk.register_forward_hook(self._norm)", """
            def _norm(self, module, inputs, output):
                self.features.append(output.norm().item())
            """),
        set(),
    ),
    "a hook that only prints is not an escape": (
        backbone("for blk in self.blocks:\n    blk.register_forward_hook(self._show)", """
            def _show(self, module, inputs, output):
                print(module, output.shape)
            """),
        set(),
    ),
    "a pre-hook keeping the block's input": (
        backbone("for blk in self.blocks:\n    blk.register_forward_pre_hook(self._inp)", """
            def _inp(self, module, inputs):
                self.features.append(inputs[0])
            """),
        {(12, "CKPT007")},
    ),
    "a hook registered with_kwargs=True receives (module, args, kwargs, output)": (
        backbone("for blk in self.blocks:\n    blk.register_forward_hook(self._kw, with_kwargs=True)", """
            def _kw(self, module, args, kwargs, output):
                self.features.append(output)
            """),
        {(12, "CKPT007")},
    ),
    "a module registering a hook on itself": (
        """
        class Tapped(Block):
            def __init__(self):
                super().__init__()
                self.taps = []
                self.register_forward_hook(self._tap)
            def _tap(self, module, inputs, output):
                self.taps.append(output)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Tapped()
            def forward(self, x):
                return checkpoint(self.block, x, use_reentrant=True)
        """,
        {(8, "CKPT007")},
    ),
    "non-reentrant: a forward hook on the checkpointed module itself, its last effect an append, is past the early stop": (
        backbone("for blk in self.blocks:\n    blk.register_forward_hook(self._save)", SAVE, "use_reentrant=False"),
        set(),
    ),
    "non-reentrant: a forward hook on a submodule runs again": (
        backbone("self.blocks[0].fc.register_forward_hook(self._save)", SAVE, "use_reentrant=False"),
        {(11, "CKPT007")},
    ),
    "non-reentrant: a pre-hook on the checkpointed module runs before its operations, so again": (
        backbone("for blk in self.blocks:\n    blk.register_forward_pre_hook(self._inp)", """
            def _inp(self, module, inputs):
                self.features.append(inputs[0])
            """, "use_reentrant=False"),
        {(12, "CKPT007")},
    ),
    "non-reentrant without the early stop: the hook on the checkpointed module runs again": (
        backbone("for blk in self.blocks:\n    blk.register_forward_hook(self._save)", SAVE, "use_reentrant=False, early_stop=False"),
        {(12, "CKPT007")},
    ),
    "non-reentrant: a hook that stores an attribute is not known to be the last effect": (
        backbone("for blk in self.blocks:\n    blk.register_forward_hook(self._last)", """
            def _last(self, module, inputs, output):
                self.last = output
            """, "use_reentrant=False"),
        {(12, "CKPT007")},
    ),
    "a block called through .forward skips its hooks": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
                self.seen = []
                self.block.register_forward_hook(self._save)
            def _save(self, module, inputs, output):
                self.seen.append(output)
            def forward(self, x):
                return checkpoint(self.block.forward, x, use_reentrant=True)
        """,
        set(),
    ),
    "a hook whose handle is removed before training": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(8, 8)
                self.block = Block()
            def forward(self, x):
                return checkpoint(self.block, self.stem(x), use_reentrant=True)
        SEEN = []
        def keep(module, inputs, output):
            SEEN.append(output)
        model = Net()
        handle = model.block.fc.register_forward_hook(keep)
        model(torch.randn(2, 8))
        handle.remove()
        """,
        set(),
    ),
    "a script registering a module-level function on a checkpointed block": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(8, 8)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
            def forward(self, x):
                x = self.stem(x)
                for blk in self.blocks:
                    x = checkpoint(blk, x, use_reentrant=True)
                return x
        FEATURES = []
        def keep(module, inputs, output):
            FEATURES.append(output)
        model = Net()
        model.blocks[0].register_forward_hook(keep)
        """,
        {(14, "CKPT007")},
    ),
    "a script registering a closure on a submodule": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(8, 8)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
            def forward(self, x):
                x = self.stem(x)
                for blk in self.blocks:
                    x = checkpoint(blk, x, use_reentrant=True)
                return x
        def main():
            model = Net()
            maps = []
            def keep(module, inputs, output):
                maps.append(output)
            model.blocks[1].fc.register_forward_hook(keep)
            model(torch.randn(2, 8)).sum().backward()
        """,
        {(16, "CKPT007")},
    ),
    "a hook on another instance of the checkpointed class (a teacher held by a variable)": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(8, 8)
                self.block = Block()
            def forward(self, x):
                return checkpoint(self.block, self.stem(x), use_reentrant=True)
        TEACHER_FEATURES = []
        def keep(module, inputs, output):
            TEACHER_FEATURES.append(output)
        teacher = Block()
        teacher.register_forward_hook(keep)
        """,
        set(),
    ),
    "torch's global forward hook runs for every module of the region": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
            def forward(self, x):
                return checkpoint(self.block, x, use_reentrant=True)
        ACTS = []
        torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: ACTS.append(o))
        """,
        {(9, "CKPT007")},
    ),
    # The most common spelling: a loop over `modules()` / `named_modules()`, filtered by type.
    "a hook factory's closure registered on every Linear of named_modules()": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 8)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
                self.head = nn.Linear(8, 8)
            def forward(self, ids):
                x = self.embed(ids)
                for blk in self.blocks:
                    x = checkpoint(blk, x, use_reentrant=True)
                return self.head(x)
        ACTS = {}
        def save_activation(name):
            def hook(module, inputs, output):
                ACTS[name] = output
            return hook
        def main():
            model = Net()
            for name, module in model.named_modules():
                if isinstance(module, nn.Linear):
                    module.register_forward_hook(save_activation(name))
        """,
        {(16, "CKPT007")},
    ),
    "a type test that skips the others (`if not isinstance(...): continue`)": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 8)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
                self.head = nn.Linear(8, 8)
            def forward(self, ids):
                x = self.embed(ids)
                for blk in self.blocks:
                    x = checkpoint(blk, x, use_reentrant=True)
                return self.head(x)
        FEATURES = []
        def keep(module, inputs, output):
            FEATURES.append(output)
        model = Net()
        for module in model.modules():
            if not isinstance(module, Block):
                continue
            module.register_forward_hook(keep)
        """,
        {(15, "CKPT007")},
    ),
    "a module registering on every submodule of itself, unfiltered": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
                self.acts = []
                for m in self.modules():
                    m.register_forward_hook(self._keep)
            def _keep(self, module, inputs, output):
                self.acts.append(output)
            def forward(self, x):
                for blk in self.blocks:
                    x = checkpoint(blk, x, use_reentrant=True)
                return x
        """,
        {(10, "CKPT007")},
    ),
    "every module of a type the region never runs (the embedding) is not flagged": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 8)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
                self.head = nn.Linear(8, 8)
            def forward(self, ids):
                x = self.embed(ids)
                for blk in self.blocks:
                    x = checkpoint(blk, x, use_reentrant=True)
                return self.head(x)
        ACTS = []
        def keep(module, inputs, output):
            ACTS.append(output)
        model = Net()
        for module in model.modules():
            if isinstance(module, nn.Embedding):
                module.register_forward_hook(keep)
        """,
        set(),
    ),
    "every module under a submodule outside the region is not flagged": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 8)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
                self.head = nn.Linear(8, 8)
            def forward(self, ids):
                x = self.embed(ids)
                for blk in self.blocks:
                    x = checkpoint(blk, x, use_reentrant=True)
                return self.head(x)
        ACTS = []
        def keep(module, inputs, output):
            ACTS.append(output)
        model = Net()
        for module in model.head.modules():
            module.register_forward_hook(keep)
        """,
        set(),
    ),
    "a comprehension over modules() filtered to a type inside the region": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 8)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
                self.head = nn.Linear(8, 8)
            def forward(self, ids):
                x = self.embed(ids)
                for blk in self.blocks:
                    x = checkpoint(blk, x, use_reentrant=True)
                return self.head(x)
        ACTS = []
        def keep(module, inputs, output):
            ACTS.append(output)
        model = Net()
        handles = [m.register_forward_hook(keep) for m in model.modules() if isinstance(m, nn.Linear)]
        """,
        {(15, "CKPT007")},
    ),
    "a comprehension over modules() filtered to a type outside the region": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 8)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
                self.head = nn.Linear(8, 8)
            def forward(self, ids):
                x = self.embed(ids)
                for blk in self.blocks:
                    x = checkpoint(blk, x, use_reentrant=True)
                return self.head(x)
        ACTS = []
        def keep(module, inputs, output):
            ACTS.append(output)
        model = Net()
        handles = [m.register_forward_hook(keep) for m in model.modules() if isinstance(m, nn.Embedding)]
        """,
        set(),
    ),
    "a filter the analysis does not follow (by name, or a type test and more) leaves the modules unknown": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 8)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
                self.head = nn.Linear(8, 8)
            def forward(self, ids):
                x = self.embed(ids)
                for blk in self.blocks:
                    x = checkpoint(blk, x, use_reentrant=True)
                return self.head(x)
        ACTS = []
        def keep(module, inputs, output):
            ACTS.append(output)
        model = Net()
        for name, module in model.named_modules():
            if "embed" in name:
                module.register_forward_hook(keep)
            if isinstance(module, nn.Linear) and name == "head":
                module.register_forward_hook(keep)
        for name, module in model.named_modules():
            if "head" not in name:
                continue
            module.register_forward_hook(keep)
        """,
        set(),
    ),
    "every module of another model (a teacher) is not flagged": (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 8)
                self.blocks = nn.ModuleList([Block() for _ in range(2)])
                self.head = nn.Linear(8, 8)
            def forward(self, ids):
                x = self.embed(ids)
                for blk in self.blocks:
                    x = checkpoint(blk, x, use_reentrant=True)
                return self.head(x)
        class Teacher(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)
            def forward(self, x):
                return self.fc(x)
        ACTS = []
        def keep(module, inputs, output):
            ACTS.append(output)
        teacher = Teacher()
        for module in teacher.modules():
            if isinstance(module, nn.Linear):
                module.register_forward_hook(keep)
        """,
        set(),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_module_hook_cases(name):
    body, expected = CASES[name]
    assert findings(body) == expected


def test_message_names_the_hook_and_its_registration():
    report = lint_text(HEADER + BLOCK + backbone("for blk in self.blocks:\n    blk.register_forward_hook(self._save)", SAVE))
    (finding,) = [f for f in report.findings if f.code == "CKPT007"]
    registration = HEADER.count("\n") + BLOCK_LINES + 10
    assert f"the forward hook registered on `an element of self.blocks` (line {registration})" in finding.message
    assert "runs again in the recompute during backward" in finding.message


def test_a_hook_registered_in_another_file(project):
    project({
        "pkg/__init__.py": "",
        "pkg/model.py": HEADER + BLOCK + (
            "\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.stem = nn.Linear(8, 8)\n        self.blocks = nn.ModuleList([Block() for _ in range(2)])\n\n"
            "    def forward(self, x):\n        x = self.stem(x)\n        for blk in self.blocks:\n            x = checkpoint(blk, x, use_reentrant=True)\n        return x\n"
        ),
        "pkg/train.py": (
            "import torch\n\nfrom pkg.model import Net\n\nACTS = []\n\n\ndef keep(module, inputs, output):\n    ACTS.append(output)\n\n\n"
            "def main():\n    model = Net()\n    model.blocks[0].register_forward_hook(keep)\n    model(torch.randn(2, 8)).sum().backward()\n"
        ),
    })  # fmt: skip
    settings = Settings()
    report = lint(["pkg"], settings, resolve_versions(settings, None, "2.13", "5.23"), jobs=1)
    assert report.errors == []
    assert {(f.path, f.line, f.code) for f in report.findings if f.code != "CKPT006"} == {("pkg/train.py", 9, "CKPT007")}
