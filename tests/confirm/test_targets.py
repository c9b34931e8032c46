"""Which class --confirm runs for a finding in a class that another file builds (ast only)."""

from __future__ import annotations

import textwrap

from ckptlint.confirm import targets

LAYER = """
from torch import nn

class Attention(nn.Module):
    def forward(self, h):
        self.maps.append(h)
        return h
"""


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
        "block.py": "from torch import nn\nfrom .layers import Attention\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.attention = Attention()\n",
        "model.py": "from torch import nn\nfrom torch.utils.checkpoint import checkpoint\nfrom pkg.block import Block\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.block = Block()\n\n    def forward(self, h):\n        return checkpoint(self.block, h, use_reentrant=False)\n",
    })
    target = _resolve(package, monkeypatch)
    assert (target.path, target.qualname, target.via) == (str(package / "model.py"), "Model", "Model (model.py) builds Block")


def test_a_same_named_class_of_another_module_is_not_the_builder(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "layers.py": LAYER,
        "other.py": "from torch import nn\nfrom torch.nn import MultiheadAttention as Attention\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.attention = Attention(8, 2)\n",
        "vision.py": "from torch import nn\nfrom .timm_layers import Attention\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.attention = Attention()\n",
    })
    target = _resolve(package, monkeypatch)
    assert (target.path, target.qualname, target.via) == (str(package / "layers.py"), "Attention", "")


def test_a_class_re_exported_by_its_package_is_found(tmp_path, monkeypatch):
    package = _package(tmp_path, {
        "__init__.py": "from .layers import Attention\n",
        "layers.py": LAYER,
        "net.py": "from torch import nn\nfrom . import Attention\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.attention = Attention()\n",
    })
    target = _resolve(package, monkeypatch)
    assert (target.path, target.qualname) == (str(package / "net.py"), "Net")
