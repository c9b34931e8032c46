"""Which class --confirm runs for a finding in a class that another file builds (ast only)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from ckptlint.confirm import targets

LAYER = """
from torch import nn

class Attention(nn.Module):
    def forward(self, h):
        self.maps.append(h)
        return h
"""


def _holder(cls, import_line, part="Attention", body=""):
    """A module whose class `cls` builds `part` in `__init__`."""
    return (
        f"from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n{import_line}\n\n"
        f"class {cls}(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        f"        self.part = {part}()\n{body}"
    )


def _package(tmp_path, files):
    package = tmp_path / "pkg"
    package.mkdir()
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).write_text(textwrap.dedent(text))
    return package


def _resolve(package, monkeypatch, name="layers.py"):
    monkeypatch.chdir(package.parent)
    path = package / name
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "append" in text)
    return targets.resolve(str(path), line)


def test_a_layer_built_in_another_file_runs_as_part_of_that_files_model(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "layers.py": LAYER,
        "encoder.py": """
            from torch import nn
            from torch.utils.checkpoint import checkpoint
            from .layers import Attention

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attention = Attention()

            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList([Block() for _ in range(2)])

                def forward(self, h):
                    for block in self.blocks:
                        h = checkpoint(block, h, use_reentrant=False)
                    return h
        """,
    })
    target = _resolve(package, monkeypatch)
    assert (target.path, target.qualname) == (str(package / "encoder.py"), "Encoder")
    assert target.via == "Encoder (encoder.py) builds Attention"


def test_files_are_followed_outwards_to_the_model(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "layers.py": LAYER,
        "block.py": _holder("Block", "from .layers import Attention"),
        "model.py": _holder("Model", "from pkg.block import Block", "Block", "\n    def forward(self, h):\n        return checkpoint(self.part, h, use_reentrant=False)\n"),
    })
    target = _resolve(package, monkeypatch)
    assert (target.path, target.qualname, target.via) == (str(package / "model.py"), "Model", "Model (model.py) builds Block")


def test_a_block_of_the_file_that_checkpoints_nothing_runs_inside_the_model_of_another_file(tmp_path, monkeypatch):
    """The layer's own file builds it into a block, but the checkpoint is in the model of another
    file (a LightningModule over MoE blocks): running the block would never reach it."""
    package = _package(tmp_path, {
        "layers.py": LAYER + "\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.attention = Attention()\n",
        "model.py": _holder("Model", "from .layers import Block", "Block", "\n    def forward(self, h):\n        return checkpoint(self.part, h, use_reentrant=True)\n"),
    })
    target = _resolve(package, monkeypatch)
    assert (target.path, target.qualname, target.via) == (str(package / "model.py"), "Model", "Model (model.py) builds Block, which builds Attention")


def test_a_same_named_class_of_another_module_is_not_the_builder(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "layers.py": LAYER,
        "other.py": _holder("Model", "from torch.nn import MultiheadAttention as Attention"),
        "vision.py": _holder("Net", "from .timm_layers import Attention"),
    })
    target = _resolve(package, monkeypatch)
    assert (target.path, target.qualname, target.via) == (str(package / "layers.py"), "Attention", "")


def test_a_class_re_exported_by_its_package_is_found(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "__init__.py": "from .layers import Attention\n",
        "layers.py": LAYER,
        "net.py": _holder("Net", "from . import Attention"),
    })
    target = _resolve(package, monkeypatch)
    assert (target.path, target.qualname) == (str(package / "net.py"), "Net")


def test_a_finding_in_a_flat_training_script_runs_the_script(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "train.py": "import torch\nfrom torch.utils.checkpoint import checkpoint\n\nblock = torch.nn.Linear(4, 4)\nfor _ in range(2):\n    x = torch.randn(2, 4)\n    checkpoint(block, x, use_reentrant=True).sum().backward()  # append\n",
    })
    target = _resolve(package, monkeypatch, "train.py")
    assert (target.kind, target.qualname) == ("script", targets.SCRIPT)


def test_module_level_code_that_does_not_train_is_not_a_script(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "export.py": "import torch\nfrom torch.utils.checkpoint import checkpoint\n\nblock = torch.nn.Linear(4, 4)\nwith torch.no_grad():\n    checkpoint(block, torch.randn(2, 4), use_reentrant=False)  # append\n",
    })
    target = _resolve(package, monkeypatch, "export.py")
    assert isinstance(target, targets.Unrunnable) and "no main or script that trains" in target.reason


def test_a_helper_without_a_model_parameter_runs_through_the_script_that_calls_it(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "train.py": "import torch\nfrom torch.utils.checkpoint import checkpoint\n\n\ndef run(blocks, x):\n    return checkpoint(blocks[0], x)  # append\n\n\nblocks = [torch.nn.Linear(4, 4)]\nrun(blocks, torch.randn(2, 4)).sum().backward()\n",
    })
    target = _resolve(package, monkeypatch, "train.py")
    assert (target.kind, target.qualname) == ("function", "run")


def test_importing_a_flat_script_runs_its_definitions_only():
    from ckptlint.confirm import usage

    tree = ast.parse(textwrap.dedent("""
        import torch
        from transformers import AutoTokenizer
        NAME = "gpt2"
        DTYPE = torch.float32
        tokenizer = AutoTokenizer.from_pretrained(NAME)
        tokenizer.pad_token = tokenizer.eos_token
        PAD = tokenizer.pad_token
        try:
            import numpy
        except ImportError:
            numpy = None
        if DTYPE is None:
            DTYPE = torch.float16

        class Net(torch.nn.Module):
            pass

        for step in range(2):
            loss = Net()(torch.ones(1)).sum()
            loss.backward()
    """))
    kept = [ast.unparse(node).splitlines()[0] for node in usage.definitions(tree).body]
    assert kept == ["import torch", "from transformers import AutoTokenizer", "NAME = 'gpt2'", "DTYPE = torch.float32", "try:", "if DTYPE is None:", "class Net(torch.nn.Module):"]
    assert usage.main_entry(tree)[0] == "module"


MODEL_FILE = """
from torch import nn

class Net(nn.Module):
    def forward(self, x):
        return x

def build_model(config):
    return Net()
"""


def _main_of(package, monkeypatch, name="Net"):
    from ckptlint.confirm import usage

    monkeypatch.chdir(package.parent)
    path = str(package / "model.py")
    found = usage.usage_of(name, path, usage.project_files(path))
    return found.main, found.main_path


def test_a_main_in_another_file_that_trains_the_model_through_its_builder_runs_it(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "model.py": MODEL_FILE,
        "train.py": """
            from .model import build_model

            def main():
                model = build_model({})
                model(1).backward()

            if __name__ == "__main__":
                main()
        """,
    })
    assert _main_of(package, monkeypatch) == ("block", str(package / "train.py"))


def test_a_main_that_trains_the_model_through_a_builder_of_a_third_file_runs_it(tmp_path, monkeypatch):
    """model.py defines the class, build.py's `build_model(cfg)` builds it, train.py's main trains
    what `build_model` returns: that main runs the class, though it never names it."""
    package = _package(tmp_path, {
        "model.py": "from torch import nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n",
        "build.py": "from .model import Net\n\ndef build_model(cfg):\n    model = Net()\n    return model, []\n",
        "train.py": """
            from .build import build_model

            if __name__ == "__main__":
                model, extra = build_model({})
                model(1).backward()
        """,
        "export.py": "from .build import build_model\n\nif __name__ == '__main__':\n    build_model({})[0].save()\n",
    })
    assert _main_of(package, monkeypatch) == ("block", str(package / "train.py"))


@pytest.mark.parametrize("returned, trains", [("LongDocTrainer(model=Net())", True), ("Runner(model=Net())", False)])
def test_a_main_training_the_trainer_a_function_of_its_file_returns_trains(tmp_path, monkeypatch, returned, trains):
    """`build(d).train()` trains when `build` returns a trainer it builds; `.train()` on anything else
    may be a module's mode switch."""
    package = _package(tmp_path, {
        "model.py": MODEL_FILE,
        "main.py": f"""
            from .model import Net

            def build():
                return {returned}

            if __name__ == "__main__":
                build().train()
        """,
    })
    assert _main_of(package, monkeypatch) == (("block", str(package / "main.py")) if trains else ("", ""))


def test_a_main_elsewhere_that_does_not_train_or_does_not_use_the_model_is_not_taken(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "model.py": MODEL_FILE,
        "export.py": "from .model import build_model\n\nif __name__ == '__main__':\n    build_model({}).save()\n",
        "other.py": "from .model import Net\n\ndef main():\n    loss = 1\n    loss.backward()\n",
    })
    assert _main_of(package, monkeypatch) == ("", "")


def test_the_models_own_main_comes_first(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "model.py": MODEL_FILE + "\n\nif __name__ == '__main__':\n    Net()(1).backward()\n",
        "train.py": "from .model import Net\n\ndef main():\n    Net()(1).backward()\n",
    })
    assert _main_of(package, monkeypatch) == ("block", "")


def test_a_helper_without_a_model_parameter_runs_through_another_files_main(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "blocks.py": "from torch.utils.checkpoint import checkpoint\n\n\ndef run(blocks, x):\n    return checkpoint(blocks[0], x)  # append\n",
        "train.py": "import torch\nfrom .blocks import run\n\n\ndef main():\n    run([torch.nn.Linear(4, 4)], torch.randn(2, 4)).sum().backward()\n",
    })
    target = _resolve(package, monkeypatch, "blocks.py")
    assert (target.kind, target.qualname) == ("function", "run")


HANDED_METHOD = """
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.ModuleList([nn.Linear(4, 4)])
        self.cache = []

    def forward(self, obs):
        for layer in self.body:
            obs = checkpoint(self._layer, layer, obs, use_reentrant=False)
        return obs

    def _layer(self, layer, h):
        self.cache.append(h.detach())
        return layer(h)
"""


def test_a_method_that_forward_hands_to_checkpoint_runs_through_forward(tmp_path):
    """`checkpoint(self._layer, ...)` never spells `self._layer(...)`: forward still reaches it."""
    path = tmp_path / "policy.py"
    path.write_text(HANDED_METHOD)
    line = next(i for i, text in enumerate(HANDED_METHOD.splitlines(), 1) if "self.cache.append" in text)
    target = targets.resolve(str(path), line)
    assert isinstance(target, targets.Target) and target.qualname == "Policy" and target.method is None, target


SETUP_METHOD = """
from functools import partial

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return x + self.drop(self.fc(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(8, 8)
        self.blocks = nn.ModuleList(Block() for _ in range(2))

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return x

    def apply_activation_checkpointing(self):
        wrapper = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT, preserve_rng_state=False)
        apply_activation_checkpointing(self, checkpoint_wrapper_fn=wrapper, check_fn=lambda m: isinstance(m, Block))
"""


def test_a_method_that_switches_checkpointing_on_runs_before_forward(tmp_path):
    """OLMo-style `model.apply_activation_checkpointing()`: calling it alone runs no checkpoint; the
    model runs its forward after it."""
    path = tmp_path / "olmo_like.py"
    path.write_text(SETUP_METHOD)
    line = next(i for i, text in enumerate(SETUP_METHOD.splitlines(), 1) if "preserve_rng_state=False" in text)
    target = targets.resolve(str(path), line)
    assert isinstance(target, targets.Target) and (target.qualname, target.method, target.setup) == ("Model", None, "apply_activation_checkpointing"), target


CALLBACK = """
from transformers import Trainer, TrainerCallback


class Sampler(TrainerCallback):
    def on_step_end(self, args, state, control, model=None, **kwargs):
        model.generate(PROMPTS)


class EvalSampler(Sampler):
    def on_step_end(self, args, state, control, model=None, **kwargs):
        model.eval()
        model.generate(PROMPTS)


class Runner:
    def sample(self, model):
        return model.generate(PROMPTS)


def train(model, data):
    Trainer(model=model, train_dataset=data, callbacks=[Sampler()]).train()


def train_in_eval_mode(model, data):
    Trainer(model=model, train_dataset=data, callbacks=[EvalSampler()]).train()
"""


def test_a_callbacks_method_runs_through_the_function_that_builds_the_callback(tmp_path):
    """The Trainer calls the event; the function that hands the callback to it runs it as training does."""
    path = tmp_path / "callbacks.py"
    path.write_text(CALLBACK)
    lines = [i for i, text in enumerate(CALLBACK.splitlines(), 1) if "generate" in text]
    target = targets.resolve(str(path), lines[0])
    assert isinstance(target, targets.Target) and (target.kind, target.qualname, target.via) == ("function", "train", "train builds Sampler"), target
    # A subclass of such a class of the file is no module either.
    target = targets.resolve(str(path), lines[1])
    assert isinstance(target, targets.Target) and (target.qualname, target.via) == ("train_in_eval_mode", "train_in_eval_mode builds EvalSampler"), target
    # Built by nothing here: the method runs as a function of the object, through an example.
    target = targets.resolve(str(path), lines[2])
    assert isinstance(target, targets.Target) and (target.kind, target.qualname) == ("function", "Runner.sample"), target


def test_a_test_module_that_builds_and_freezes_the_model_is_no_setup_to_replay(tmp_path, monkeypatch):
    """How a test builds a model (`tests/test_model.py`, `conftest.py`) is not the project's setup:
    only other project files are read for the statements replayed on a new instance."""
    from ckptlint.confirm import usage

    package = _package(tmp_path, {
        "model.py": MODEL_FILE,
        "test_model.py": "from .model import Net\n\ndef test_frozen():\n    model = Net()\n    model.requires_grad_(False)\n",
        "train.py": "from .model import Net\n\ndef build():\n    model = Net()\n    model.requires_grad_(False)\n    return model\n",
    })
    monkeypatch.chdir(package.parent)
    path = str(package / "model.py")
    found = usage.usage_of("Net", path, usage.project_files(path))
    assert found.setup["path"] == str(package / "train.py")
    root = str(package)
    assert usage.is_test_file(str(package / "tests" / "helpers.py"), root) and not usage.is_test_file(str(package / "train.py"), root)


def test_a_project_that_lives_under_a_tests_folder_still_has_its_setup_replayed(tmp_path, monkeypatch):
    """Only the folders inside the project tell a test module: a checkout at `~/tests/proj` is no test."""
    from ckptlint.confirm import usage

    outer = tmp_path / "tests"
    outer.mkdir()
    package = _package(outer, {
        "model.py": MODEL_FILE,
        "train.py": "from .model import Net\n\ndef build():\n    model = Net()\n    model.requires_grad_(False)\n    return model\n",
    })
    monkeypatch.chdir(package.parent)
    path = str(package / "model.py")
    found = usage.usage_of("Net", path, usage.project_files(path))
    assert found.setup and found.setup["path"] == str(package / "train.py"), found.setup


def test_a_helper_or_plain_object_a_module_of_another_file_runs_targets_that_module(tmp_path, monkeypatch):
    """A finding in `utils.random_drop(x)` (a function) or `TimeMasker.__call__` (a plain object),
    whose file builds no module: the checkpointing model of another file that calls them is what runs."""
    package = _package(tmp_path, {
        "utils.py": (
            "import numpy as np\nimport torch\n\n\n"
            "def random_drop(x):\n    return x * float(np.random.uniform() > 0.1)\n\n\n"
            "class TimeMasker:\n    def __init__(self):\n        self.gen = torch.Generator()\n\n"
            "    def __call__(self, x):\n        return x * (torch.rand(x.shape, generator=self.gen) > 0.1)\n"
        ),
        "net.py": (
            "from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\nfrom .utils import TimeMasker, random_drop\n\n\n"
            "class Block(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n        self.masker = TimeMasker()\n\n"
            "    def forward(self, x):\n        return self.masker(random_drop(self.fc(x)))\n\n\n"
            "class Net(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.blocks = nn.ModuleList(Block() for _ in range(2))\n\n"
            "    def forward(self, x):\n        for blk in self.blocks:\n            x = checkpoint(blk, x, use_reentrant=False)\n        return x\n"
        ),
    })
    monkeypatch.chdir(package.parent)
    path = package / "utils.py"
    lines = path.read_text().splitlines()
    for needle in ("np.random.uniform", "torch.rand("):
        line = next(i for i, text in enumerate(lines, 1) if needle in text)
        target = targets.resolve(str(path), line)
        assert isinstance(target, targets.Target) and (Path(target.path).name, target.kind, target.qualname) == ("net.py", "class", "Net"), (needle, target)
