"""Calls of modules torch.distributed's checkpoint wrappers wrap are checkpoint sites, in the wrapper's
mode, however the wrapping is spelled (tests/runtime/test_reentrant_wrapped_blocks_runtime.py
measures the symptom)."""

from __future__ import annotations

import textwrap

import pytest
from conftest import lint_text

from test_incremental import check, findings

HEADER = """\
import functools

from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper
from torch.distributed.fsdp.wrap import ModuleWrapPolicy, transformer_auto_wrap_policy
from torch.utils.checkpoint import checkpoint

reentrant = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, scale=None):
        return self.fc(x) if scale is None else self.fc(x) * scale
"""

NET = HEADER + """

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(4, 4)
        self.blocks = nn.ModuleList([Block() for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)  # the call
        return x


def build():
    model = Net()
{wrap}
    return model
"""

REENTRANT_WRAPS = {
    "comprehension, keyword impl": "model.blocks = nn.ModuleList([checkpoint_wrapper(b, checkpoint_impl=CheckpointImpl.REENTRANT) for b in model.blocks])",
    "comprehension, positional impl": "model.blocks = nn.ModuleList([checkpoint_wrapper(b, CheckpointImpl.REENTRANT) for b in model.blocks])",
    "indexed loop": "for i, b in enumerate(model.blocks):\n    model.blocks[i] = checkpoint_wrapper(b, checkpoint_impl=CheckpointImpl.REENTRANT)",
    "one element": "model.blocks[0] = checkpoint_wrapper(model.blocks[0], CheckpointImpl.REENTRANT)",
    "module-level partial": "model.blocks = nn.ModuleList([reentrant(b) for b in model.blocks])",
    "check_fn": "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=lambda m: isinstance(m, Block))",
    "check_fn tuple": "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=lambda m: isinstance(m, (Block, nn.LSTM)))",
    "check_fn or": "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=lambda m: isinstance(m, nn.LSTM) or isinstance(m, Block))",
    "check_fn nested def": "def check_fn(m):\n    return isinstance(m, Block)\napply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=check_fn)",
    "check_fn def, type in a set": (
        'def check_fn(m):\n    """Blocks only."""\n    return type(m) in {Block, nn.LSTM}\n'
        "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=check_fn)"
    ),
    "check_fn def, isinstance and more": (
        "def check_fn(submodule):\n    return isinstance(submodule, Block) and submodule.fc.in_features > 2\n"
        "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=check_fn)"
    ),
    "check_fn partial, positional classes": (
        "def check_fn(layer_classes, m):\n    return isinstance(m, layer_classes)\n"
        "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=functools.partial(check_fn, (Block,)))"
    ),
    "check_fn partial, keyword classes": (
        "def check_fn(m, classes=()):\n    return isinstance(m, classes)\n"
        "selector = functools.partial(check_fn, classes=(Block,))\n"
        "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=selector)"
    ),
    "check_fn type is": "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=lambda m: type(m) is Block)",
    "check_fn tuple of a set": (
        "blocks = {Block}\n"
        "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=lambda m: isinstance(m, tuple(blocks)))"
    ),
    "local partial, policy": (
        "wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT)\n"
        "apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper, auto_wrap_policy=ModuleWrapPolicy({Block}))"
    ),
    "inline partial, transformer policy": (
        "policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})\n"
        "apply_activation_checkpointing(\n"
        "    model,\n"
        "    checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT),\n"
        "    auto_wrap_policy=policy,\n"
        ")"
    ),
}

NOT_REENTRANT_OR_UNKNOWN = {
    "default impl": "model.blocks = nn.ModuleList([checkpoint_wrapper(b) for b in model.blocks])",
    "NO_REENTRANT": "model.blocks = nn.ModuleList([checkpoint_wrapper(b, CheckpointImpl.NO_REENTRANT) for b in model.blocks])",
    "default apply": "apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))",
    "custom checkpoint_fn": "model.blocks = nn.ModuleList([checkpoint_wrapper(b, checkpoint_fn=my_checkpoint) for b in model.blocks])",
    "spread keywords": "model.blocks = nn.ModuleList([checkpoint_wrapper(b, **options) for b in model.blocks])",
    "wrapped both ways": (
        "model.blocks[0] = checkpoint_wrapper(model.blocks[0], CheckpointImpl.REENTRANT)\n"
        "model.blocks[1] = checkpoint_wrapper(model.blocks[1], CheckpointImpl.NO_REENTRANT)"
    ),
    "classes the check_fn cannot tell": "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=should_wrap)",
    "every submodule": "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant)",
    "check_fn def of two statements": (
        "def check_fn(m):\n    wrap = isinstance(m, Block)\n    return wrap\n"
        "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=check_fn)"
    ),
    "check_fn def that negates": (
        "def check_fn(m):\n    return not isinstance(m, nn.Linear)\n"
        "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=check_fn)"
    ),
    "check_fn def testing another object": (
        "def check_fn(m):\n    return isinstance(model, Block)\n"
        "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=check_fn)"
    ),
    "check_fn partial binding the module": (
        "def check_fn(m, classes=()):\n    return isinstance(m, classes)\n"
        "apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=functools.partial(check_fn, model, (Block,)))"
    ),
}


def net_with(wrap: str) -> tuple[str, int]:
    source = NET.format(wrap=textwrap.indent(wrap, "    "))
    return source, next(number for number, line in enumerate(source.splitlines(), 1) if line.endswith("# the call"))


@pytest.mark.parametrize("wrap", REENTRANT_WRAPS.values(), ids=REENTRANT_WRAPS.keys())
def test_a_reentrantly_wrapped_block_fed_raw_input_is_reported_at_its_call(wrap):
    source, line = net_with(wrap)
    report = lint_text(source)
    assert report.errors == []
    assert [(f.line, f.code) for f in report.findings if f.code == "CKPT001"] == [(line, "CKPT001")]
    (finding,) = [f for f in report.findings if f.code == "CKPT001"]
    assert "CheckpointImpl.REENTRANT" in finding.message and "example.py:" in finding.message
    assert "CheckpointImpl.NO_REENTRANT" in finding.help


@pytest.mark.parametrize("wrap", NOT_REENTRANT_OR_UNKNOWN.values(), ids=NOT_REENTRANT_OR_UNKNOWN.keys())
def test_non_reentrant_or_unknown_wrappers_report_nothing_at_the_call(wrap):
    source, line = net_with(wrap)
    report = lint_text(source)
    assert report.errors == []
    assert [f for f in report.findings if f.line == line] == []


@pytest.mark.parametrize("after", [False, True], ids=["defined before", "defined after"])
def test_a_module_level_check_fn_def_selects_its_classes(after):
    check = "\n\ndef is_block(module):\n    return isinstance(module, Block)\n"
    source, line = net_with("apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=is_block)")
    if after:
        source += check
    else:
        source = source.replace("\n\nclass Net(", check + "\n\nclass Net(", 1)
        line += check.count("\n")
    report = lint_text(source)
    assert report.errors == []
    assert [(f.line, f.code) for f in report.findings if f.code == "CKPT001"] == [(line, "CKPT001")]


def test_a_block_wrapped_in_init_is_a_site_where_it_is_called():
    source = HEADER + textwrap.dedent(
        """

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.first = checkpoint_wrapper(Block(), checkpoint_impl=CheckpointImpl.REENTRANT)

            def forward(self, x):
                return self.first(x)


        model = Net()
        """
    )
    report = lint_text(source)
    line = next(n for n, text in enumerate(source.splitlines(), 1) if "return self.first(x)" in text)
    assert [(f.line, f.code) for f in report.findings] == [(line, "CKPT001")]


def test_keywords_are_packed_into_reentrant_checkpoint_inputs():
    """checkpoint_wrapper packs keywords into positional inputs under REENTRANT: a keyword that requires
    grad makes the call fine (no CKPT003 either); raw data by keyword is still raw data."""
    wrap = "model.blocks = nn.ModuleList([checkpoint_wrapper(b, CheckpointImpl.REENTRANT) for b in model.blocks])"
    source, line = net_with(wrap)
    gated = lint_text(source.replace("x = block(x)  # the call", "x = block(x, scale=self.gate(x))  # the call"))
    assert [f for f in gated.findings if f.line == line] == []
    raw = lint_text(source.replace("x = block(x)  # the call", "x = block(scale=x, x=x)  # the call"))
    assert [(f.line, f.code) for f in raw.findings] == [(line, "CKPT001")]


def test_a_frozen_embedding_in_front_of_wrapped_blocks_is_ckpt005():
    source = HEADER + textwrap.dedent(
        """

        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.embed.requires_grad_(False)
                self.layers = nn.ModuleList([Block() for _ in range(2)])

            def forward(self, tokens):
                hidden = self.embed(tokens)
                for layer in self.layers:
                    hidden = layer(hidden)
                return hidden


        def build():
            model = LM()
            apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, auto_wrap_policy=ModuleWrapPolicy({Block}))
            return model
        """
    )
    report = lint_text(source)
    line = next(n for n, text in enumerate(source.splitlines(), 1) if "hidden = layer(hidden)" in text)
    assert [(f.line, f.code) for f in report.findings] == [(line, "CKPT005")]


MODEL = """\
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
"""

TRAIN = """\
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

from pkg.model import Net

model = Net()
for i, block in enumerate(model.blocks):
    model.blocks[i] = checkpoint_wrapper(block, CheckpointImpl.REENTRANT)
"""


def test_blocks_wrapped_by_another_file_are_sites_in_the_model_file_and_follow_its_edits(project):
    root = project({"pkg/__init__.py": "", "pkg/model.py": MODEL, "train.py": TRAIN})
    first = check()
    assert findings(first) == [("pkg/model.py", 20, "CKPT001")]
    assert "(train.py:7)" in first["findings"][0]["message"]
    (root / "train.py").write_text("import os\n\n" + TRAIN)
    moved = check()
    assert "(train.py:9)" in moved["findings"][0]["message"]
    assert moved == check(cache=False)
    (root / "train.py").write_text(TRAIN.replace("CheckpointImpl.REENTRANT", "CheckpointImpl.NO_REENTRANT"))
    assert findings(check()) == []


def test_keywords_reach_a_reentrant_checkpoint_fn_unless_the_impl_packs_them():
    """checkpoint_wrapper(b, checkpoint_fn=checkpoint, use_reentrant=True) hands keywords to torch's
    checkpoint (ValueError); with checkpoint_impl=CheckpointImpl.REENTRANT too it packs them."""
    call = "x = block(x, scale=self.gate(x))  # the call"
    unpacked, line = net_with("model.blocks = nn.ModuleList([checkpoint_wrapper(b, checkpoint_fn=checkpoint, use_reentrant=True) for b in model.blocks])")
    report = lint_text(unpacked.replace("x = block(x)  # the call", call))
    (keyword,) = [f for f in report.findings if f.code == "CKPT003"]
    assert keyword.line == line and "Unexpected keyword arguments: scale" in keyword.message
    packed, _ = net_with("model.blocks = nn.ModuleList([checkpoint_wrapper(b, CheckpointImpl.REENTRANT, checkpoint_fn=checkpoint, use_reentrant=True) for b in model.blocks])")
    assert [f for f in lint_text(packed.replace("x = block(x)  # the call", call)).findings if f.line == line] == []
    unknown, _ = net_with("model.blocks = nn.ModuleList([checkpoint_wrapper(b, checkpoint_fn=checkpoint) for b in model.blocks])")
    assert [f for f in lint_text(unknown.replace("x = block(x)  # the call", call)).findings if f.line == line] == []


SETUP = """\
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper


def setup_model(model, cfg=None):
{wrap}
    return model
"""

HANDED_WRAPS = {
    "indexed loop": "for i, block in enumerate(model.blocks):\n    model.blocks[i] = checkpoint_wrapper(block, CheckpointImpl.REENTRANT)",
    "comprehension": "model.blocks = nn.ModuleList([checkpoint_wrapper(b, CheckpointImpl.REENTRANT) for b in model.blocks])",
    "one element": "model.blocks[0] = checkpoint_wrapper(model.blocks[0], CheckpointImpl.REENTRANT)",
}
CALLERS = {
    "built then handed": "model = Net()\nsetup_model(model, None)",
    "handed by keyword, result rebound": "model = Net().train()\nsetup_model(cfg=None, model=model)\nmodel = setup_model(model)",
    "in a function": "def main():\n    model = Net()\n    setup_model(model)\n    return model",
}


@pytest.mark.parametrize("caller", CALLERS.values(), ids=CALLERS.keys())
@pytest.mark.parametrize("wrap", HANDED_WRAPS.values(), ids=HANDED_WRAPS.keys())
def test_blocks_of_a_model_handed_to_a_setup_function_are_sites(project, wrap, caller):
    """The model parameter's class comes from the callers that build it and hand it over."""
    setup = "from torch import nn\n" + SETUP.format(wrap=textwrap.indent(wrap, "    "))
    train = "from pkg.model import Net\nfrom pkg.setup import setup_model\n\n" + caller + "\n"
    project({"pkg/__init__.py": "", "pkg/model.py": MODEL, "pkg/setup.py": setup, "train.py": train})
    report = check()
    assert findings(report) == [("pkg/model.py", 20, "CKPT001")]
    assert "`model.blocks` in `setup_model`" in report["findings"][0]["message"]


@pytest.mark.parametrize(
    "caller",
    [
        "setup_model(load_model())",  # a model the analysis cannot follow
        "model = Net()\nsetup_model(None, model)",  # handed as another parameter
        "model = Net()\nsetup_model(model.blocks)",  # a part of it
        "",  # never called
    ],
    ids=["unknown model", "another parameter", "a submodule", "no caller"],
)
def test_a_setup_function_without_a_known_model_makes_no_site(project, caller):
    setup = "from torch import nn\n" + SETUP.format(wrap=textwrap.indent(HANDED_WRAPS["indexed loop"], "    "))
    train = "from pkg.model import Net\nfrom pkg.setup import setup_model\nfrom pkg.io import load_model\n\n" + caller + "\n"
    project({"pkg/__init__.py": "", "pkg/io.py": "def load_model():\n    pass\n", "pkg/model.py": MODEL, "pkg/setup.py": setup, "train.py": train})
    assert findings(check()) == []


# MODEL's Block and a stack that calls its blocks as one module.
STACK = MODEL.split("class Net")[0].replace("{", "{{").replace("}", "}}") + """class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = {blocks}

    def forward(self, x):
        return self.blocks(x)
"""
APPLY = """\
import functools

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper

from pkg.model import Block

LAYERS = (Block,)
reentrant = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT)


def add_checkpointing(model):
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=lambda m: isinstance(m, LAYERS))
    return model
"""


@pytest.mark.parametrize(
    "blocks, caller, expected",
    [
        # A Sequential of wrapped blocks called whole: its first block gets the raw input.
        ("nn.Sequential(*[Block() for _ in range(2)])", "model = Stack()\nadd_checkpointing(model)", [("pkg/model.py", 19, "CKPT001")]),
        # Built right in the call of a helper of another module that hands the model back: a whole model.
        ("nn.Sequential(*[Block() for _ in range(2)])", "model = add_checkpointing(Stack())", [("pkg/model.py", 19, "CKPT001")]),
        # A trainable layer first: the elements are not all one wrapped class.
        ("nn.Sequential(nn.Linear(4, 4), *[Block() for _ in range(2)])", "model = add_checkpointing(Stack())", []),
    ],
    ids=["sequential", "built in the helper call", "stem first"],
)
def test_a_sequential_of_wrapped_blocks_called_whole(project, blocks, caller, expected):
    train = "from pkg.model import Stack\nfrom pkg.setup import add_checkpointing\n\n" + caller + "\n"
    project({"pkg/__init__.py": "", "pkg/model.py": STACK.format(blocks=blocks), "pkg/setup.py": APPLY, "train.py": train})
    assert findings(check()) == expected


def test_a_model_built_in_the_call_of_a_helper_that_keeps_it_is_a_part(project):
    """`model = add_checkpointing(Stack())` of a helper (in another module) that returns a module
    holding it: the Stack is a submodule of that one, whose forward feeds it."""
    setup = APPLY.replace("    return model", "    return Classifier(model)") + """

class Classifier(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.body = body

    def forward(self, x):
        return self.body(self.proj(x))
"""
    setup = "from torch import nn\n" + setup
    train = "from pkg.model import Stack\nfrom pkg.setup import add_checkpointing\n\nmodel = add_checkpointing(Stack())\n"
    project({"pkg/__init__.py": "", "pkg/model.py": STACK.format(blocks="nn.Sequential(*[Block() for _ in range(2)])"), "pkg/setup.py": setup, "train.py": train})
    assert findings(check()) == []


APPLY_HELPER = """\
import functools

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper

REENTRANT = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT)


def checkpoint_layers(model, layer_cls, other=None):
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=REENTRANT, check_fn={check})
    return model
"""


@pytest.mark.parametrize("selection", ["lambda m: isinstance(m, layer_cls)", "lambda m: isinstance(m, (layer_cls,))"])
@pytest.mark.parametrize(
    "caller, expected",
    [
        ("model = checkpoint_layers(Net(), Block)", [("pkg/model.py", 20, "CKPT001")]),
        ("model = checkpoint_layers(Net(), layer_cls=Block)", [("pkg/model.py", 20, "CKPT001")]),
        ("def main():\n    model = Net()\n    model = checkpoint_layers(model, Block)\n    return model", [("pkg/model.py", 20, "CKPT001")]),
        ("model = checkpoint_layers(Net(), Net)", []),  # wraps the whole model, not the blocks
        ("model = checkpoint_layers(Net(), nn.Linear)", []),  # torch's own layers: not the project's blocks
        ("model = checkpoint_layers(Net(), pick_class())", []),  # a class the analysis cannot tell
    ],
)
def test_a_helper_applying_checkpointing_to_the_layer_class_its_caller_names(project, selection, caller, expected):
    """`apply_activation_checkpointing(model, ..., check_fn=lambda m: isinstance(m, layer_cls))` in a
    helper whose callers hand it the layer class: the calls of that class's modules are sites."""
    helper = APPLY_HELPER.format(check=selection)
    train = "from torch import nn\n\nfrom pkg.ac import checkpoint_layers\nfrom pkg.model import Block, Net\nfrom pkg.io import pick_class\n\n" + caller + "\n"
    project({"pkg/__init__.py": "", "pkg/io.py": "def pick_class():\n    pass\n", "pkg/model.py": MODEL, "pkg/ac.py": helper, "train.py": train})
    assert findings(check()) == expected


DECORATORS = """\
import functools

import torch
from torch.utils.checkpoint import checkpoint


def checkpointed(forward):
    @functools.wraps(forward)
    def wrapper(self, *args):
        if self.training:
            return checkpoint(forward, self, *args, use_reentrant=True)
        return forward(self, *args)

    return wrapper


def checkpointed_non_reentrant(forward):
    def wrapper(self, *args):
        return checkpoint(forward, self, *args, use_reentrant=False)

    return wrapper


def logged(forward):
    def wrapper(self, *args):
        print(type(self).__name__)
        return forward(self, *args)

    return wrapper
"""

# The blocks of MODEL with their forward decorated (the calls of them stay at line 23).
DECORATED_MODEL = MODEL.replace("from torch import nn\n", "from torch import nn\n\nfrom pkg.deco import {decorator}\n", 1).replace(
    "    def forward(self, x):\n        return self.fc(x)", "    @{decorator}\n    def forward(self, x):\n        return self.fc(x)", 1
)


@pytest.mark.parametrize(
    "decorator, expected",
    [
        ("checkpointed", [("pkg/model.py", 23, "CKPT001")]),
        ("checkpointed_non_reentrant", []),
        ("logged", []),
    ],
)
def test_a_forward_decorated_with_a_checkpointing_decorator_makes_its_calls_sites(project, decorator, expected):
    """`@checkpointed def forward(self, x)` with a project decorator whose wrapper runs
    `checkpoint(forward, self, *args, use_reentrant=True)`: every call of such a module is a reentrant
    checkpoint of it (only in training, where the wrapper checks `self.training`)."""
    train = "import torch\n\nfrom pkg.model import Net\n\nmodel = Net()\nmodel(torch.randn(2, 4)).sum().backward()\n"
    project({"pkg/__init__.py": "", "pkg/deco.py": DECORATORS, "pkg/model.py": DECORATED_MODEL.format(decorator=decorator), "train.py": train})
    report = check()
    assert findings(report) == expected
    if expected:
        assert "`@checkpointed`" in report["findings"][0]["message"], report["findings"][0]["message"]


IMPL_TABLE_HELPER = """\
import functools

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper

from pkg.model import Block

AC_IMPL = {"reentrant": CheckpointImpl.REENTRANT, "no_reentrant": CheckpointImpl.NO_REENTRANT}


def checkpoint_layers(model, impl="reentrant"):
    wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=AC_IMPL[impl])
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper, check_fn=lambda m: isinstance(m, Block))
    return model
"""


@pytest.mark.parametrize(
    "change, caller, expected",
    [
        ("", "model = checkpoint_layers(Net())", [("pkg/model.py", 20, "CKPT001")]),  # every call keeps the default
        ("", "model = checkpoint_layers(Net(), 'reentrant')", [("pkg/model.py", 20, "CKPT001")]),
        ("", "model = checkpoint_layers(Net(), impl='reentrant')", [("pkg/model.py", 20, "CKPT001")]),
        ("AC_IMPL[impl]", "model = checkpoint_layers(Net())", [("pkg/model.py", 20, "CKPT001")]),  # unchanged spelling
        ('AC_IMPL["reentrant"]', "model = checkpoint_layers(Net(), 'no_reentrant')", [("pkg/model.py", 20, "CKPT001")]),
        ("", "model = checkpoint_layers(Net(), 'no_reentrant')", []),
        ("", "model = checkpoint_layers(Net(), impl='no_reentrant')", []),
        ("", "model = checkpoint_layers(Net(), pick_impl())", []),  # an impl the analysis cannot tell
        ("", "a = checkpoint_layers(Net())\nb = checkpoint_layers(Net(), 'no_reentrant')", []),  # the callers disagree
        ('AC_IMPL["no_reentrant"]', "model = checkpoint_layers(Net())", []),
        ("AC_IMPL[pick_impl()]", "model = checkpoint_layers(Net())", []),
    ],
)
def test_a_checkpoint_impl_looked_up_in_a_table_by_a_parameter_takes_the_callers_key(project, change, caller, expected):
    """`checkpoint_impl=AC_IMPL[impl]` with a module-level table: a literal key picks its entry, a
    parameter the key its callers pass (or its default, when none passes one); callers that
    disagree, or a key the analysis cannot tell, leave the mode unknown."""
    helper = IMPL_TABLE_HELPER.replace("AC_IMPL[impl])", f"{change})") if change else IMPL_TABLE_HELPER
    helper = helper.replace("from pkg.model import Block", "from pkg.model import Block\nfrom pkg.io import pick_impl")
    train = "from pkg.ac import checkpoint_layers\nfrom pkg.model import Net\nfrom pkg.io import pick_impl\n\n" + caller + "\n"
    project({"pkg/__init__.py": "", "pkg/io.py": "def pick_impl():\n    pass\n", "pkg/model.py": MODEL, "pkg/ac.py": helper, "train.py": train})
    assert findings(check()) == expected
