"""LibCST parses only what a checkpoint can reach; findings are the same as with the whole file."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
from conftest import FIXTURES, lint_text
from libcst.metadata import MetadataWrapper, PositionProvider

import ckptlint.engine
import ckptlint.relevance
from ckptlint.config import Settings
from ckptlint.engine import _positions, lint
from ckptlint.index import ProjectIndex, summarize
from ckptlint.model.walk import descendants
from ckptlint.relevance import SITE_TEXT, SourceSlice, can_matter, relevant_source, whole_source
from ckptlint.versions import resolve_versions

SOURCE = """import torch
from torch import nn
from torch.utils.checkpoint import checkpoint as ckpt


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()
        self.head = Head()

    def forward(self, x):
        return self.head(self.net(x))


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        return self.out(x)


def rotate(x):
    return torch.cat([-x[..., 2:], x[..., :2]], dim=-1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def extra_repr(self):
        return "block"

    def helper(self, x):
        return x * 2

    def forward(self, x):
        self.cache = rotate(self.proj(x))
        return self.helper(self.proj(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return ckpt(self.block, x, use_reentrant=False)
"""


def sliced(source: str) -> SourceSlice:
    summary = summarize(source, "example.py", "example", False)
    index = ProjectIndex({"example": summary})
    assert can_matter(source, summary, index, Settings())
    return relevant_source(source, summary, index, Settings())


def test_definitions_no_checkpoint_reaches_are_cut_and_lines_map_back():
    cut = sliced(SOURCE)
    # The site calls a renamed checkpoint; the block it runs and the function that block calls stay.
    assert "class Net" in cut.text and "class Block" in cut.text and "def rotate" in cut.text
    assert "class Classifier" not in cut.text and "class Head" not in cut.text
    # In the classes kept, only the methods a checkpoint reaches: forward and what it calls.
    assert "def helper" in cut.text and "def extra_repr" not in cut.text and "def __init__" not in cut.text
    original = SOURCE.splitlines()
    for number, line in enumerate(cut.text.splitlines(), start=1):
        assert original[cut.original_line(number) - 1] == line


def test_findings_point_at_the_original_lines():
    report = lint_text(SOURCE)
    line = SOURCE.splitlines().index("        self.cache = rotate(self.proj(x))") + 1
    assert [(f.line, f.code) for f in report.findings] == [(line, "CKPT007")]


def test_nothing_is_cut_from_a_file_whose_definitions_all_matter():
    source = "from torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return checkpoint(block, x)\n"
    whole = sliced(source)
    assert whole.text == source and whole.lines is None and whole.starts == (1, 4)


def test_fixtures_give_the_same_findings_with_and_without_the_cut(monkeypatch):
    settings = Settings()
    versions = resolve_versions(settings, None, "2.13", "5.23")
    with_cut = lint([str(FIXTURES)], settings, versions, jobs=1)
    monkeypatch.setattr(ckptlint.relevance, "relevant_source", lambda text, *args: SourceSlice(text))
    whole = lint([str(FIXTURES)], settings, versions, jobs=1)
    assert with_cut.findings == whole.findings and len(whole.findings) > 20


TRICKY = '''# header comment
import torch; from torch.utils.checkpoint import checkpoint


# a comment before a decorated class
@torch.no_grad()
@staticmethod
class Odd:
  def run(self, block, x):  # two-space indents
    return checkpoint(block,
                      x)

x = 1; y = checkpoint(len, [x])
if x:
  def inner(b, v):
      return checkpoint(b, v, use_reentrant=True)
'''


def test_positions_per_statement_equal_whole_module_positions():
    tree = cst.parse_module(TRICKY)
    expected = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    calls = [node for node in descendants(tree) if isinstance(node, (cst.Call, cst.Arg, cst.Name))]
    source = whole_source(TRICKY, summarize(TRICKY, "t.py", "t", False))
    assert source.starts == (2, 6, 13, 14)
    found = _positions(tree, source, calls)
    for node in calls:
        where = expected[node]
        assert found[id(node)] == (where.start.line, where.start.column, where.end.line, where.end.column)


CALLEES = """from torch import nn


class Unrelated(nn.Module):
    def forward(self, x):
        return x


class First(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        self.kept = self.proj(x)
        return self.proj(x)


class Second(First):
    def forward(self, x):
        self.also = self.proj(x)
        return self.proj(x)
"""
CALLER = """from torch import nn
from torch.utils.checkpoint import checkpoint

from pkg.callees import First, Second


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = First()
        self.second = Second()

    def forward(self, x):
        x = checkpoint(self.first, x, use_reentrant=False)
        return checkpoint(self.second, x, use_reentrant=False)
"""


def test_another_files_callees_are_parsed_alone_and_found_at_their_lines(project, monkeypatch):
    project({"pkg/__init__.py": "", "pkg/callees.py": CALLEES, "pkg/net.py": CALLER})
    cuts: list[SourceSlice] = []
    real = ckptlint.relevance.definitions_source
    monkeypatch.setattr(ckptlint.relevance, "definitions_source", lambda *args: cuts.append(real(*args)) or cuts[-1])
    settings = Settings()
    report = lint(["."], settings, resolve_versions(settings, None, "2.13", "5.23"), jobs=1)
    # The first site needs First; the second one re-cuts the file for Second too.
    assert ["class First" in cut.text and "class Second" in cut.text for cut in cuts] == [False, True]
    assert all("class Unrelated" not in cut.text for cut in cuts)
    lines = CALLEES.splitlines()
    assert [(f.path, f.line, f.code) for f in report.findings] == [
        ("pkg/callees.py", lines.index("        self.kept = self.proj(x)") + 1, "CKPT007"),
        ("pkg/callees.py", lines.index("        self.also = self.proj(x)") + 1, "CKPT007"),
    ]


def test_calls_of_an_inferred_wrapper_are_found_in_files_without_checkpoint_text(project):
    project({
        "pkg/__init__.py": "",
        "pkg/utils.py": "from torch.utils.checkpoint import checkpoint\n\n\ndef run_blocks(fn, *args):\n    return checkpoint(fn, *args, use_reentrant=True)\n",
        "pkg/train.py": (
            "from torch import nn\n\nfrom pkg.utils import run_blocks\n\n\n"
            "def step(block: nn.Module, loader):\n    for images, labels in loader:\n        run_blocks(block, images).sum().backward()\n"
        ),
    })  # fmt: skip
    summary = summarize((Path("pkg/train.py")).read_text(), "pkg/train.py", "pkg.train", False)
    index = ProjectIndex({"pkg.train": summary, "pkg.utils": summarize(Path("pkg/utils.py").read_text(), "pkg/utils.py", "pkg.utils", False)})
    assert SITE_TEXT.search(Path("pkg/train.py").read_text()) is None
    assert can_matter(Path("pkg/train.py").read_text(), summary, index, Settings())
    settings = Settings()
    report = lint(["."], settings, resolve_versions(settings, None, "2.13", "5.23"), jobs=1)
    assert [(f.path, f.line, f.code) for f in report.findings] == [("pkg/train.py", 8, "CKPT001")]


def test_a_class_that_only_calls_a_wrapper_defined_beside_it_is_kept():
    source = (
        "from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
        "def run_blocks(fn, *args, **kwargs):\n    return checkpoint(fn, *args, use_reentrant=True, **kwargs)\n\n\n"
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n        return run_blocks(self.fc, x, mask=x)\n"
    )
    cut = sliced(source)
    assert "class Net" in cut.text and "run_blocks(self.fc, x, mask=x)" in cut.text
    assert [(f.line, f.code) for f in lint_text(source).findings] == [(15, "CKPT003")]


def test_a_parenthesised_checkpoint_callee_is_a_site():
    """`(checkpoint)(fn, x)` is a call of checkpoint too: the text prefilter let such a file
    through only when another call was spelled plainly (found by the fuzzer's parentheses)."""
    for spelling in ("(torch.utils.checkpoint.checkpoint)(block, x)", "(\n        checkpoint\n    )  (block, x)", "((checkpoint))(block, x)"):
        source = f"import torch.utils.checkpoint\nfrom torch.utils.checkpoint import checkpoint\n\n\ndef step(block, x):\n    return {spelling}\n"
        assert [(f.line, f.code) for f in lint_text(source).findings] == [(6, "CKPT006")], spelling


def test_a_parenthesised_enable_or_mode_switch_on_a_held_model_is_seen():
    """`(self.policy.gradient_checkpointing_enable)(...)` keeps every method of the holder, as the
    plain spelling does (found by the fuzzer's parenthesising mutation)."""
    from ckptlint.relevance import HELD_MODE_TEXT, HELD_MODEL_TEXT

    assert HELD_MODEL_TEXT.search("(self.policy.gradient_checkpointing_enable)(gradient_checkpointing_kwargs=k)")
    assert HELD_MODE_TEXT.search("(self.policy.eval)()")


def test_grad_off_text_keeps_with_blocks_and_module_level_decorated_functions_only():
    from ckptlint.relevance import GRAD_OFF_TEXT

    kept = "with torch.no_grad():\n    model(x)\n@torch.inference_mode()\ndef evaluate(model, loader):\n    pass\n"
    skipped = (
        "class Rotary(nn.Module):\n    @torch.no_grad()\n    def forward(self, x):\n        return x\n"
        '    """\n    >>> with torch.no_grad():\n    ...     outputs = model(**inputs)\n    """\n'
        "# with torch.no_grad(): model(x)\nx = 1  # with torch.no_grad()\n"
    )
    assert [m.group().strip() for m in GRAD_OFF_TEXT.finditer(kept)] == ["with torch.no_grad", "@torch.inference_mode"]
    assert not GRAD_OFF_TEXT.search(skipped)


def test_a_class_whose_methods_enable_checkpointing_does_not_make_its_importers_matter():
    """transformers' PreTrainedModel enables checkpointing in one of its methods: a file that only
    imports and subclasses it has no site (it was analysed for nothing); a file calling a helper
    function that enables checkpointing on the model it is handed still matters."""
    models = (
        "class Pretrained:\n    def enable(self):\n        self.gradient_checkpointing_enable()\n\n\n"
        "def setup(model):\n    model.gradient_checkpointing_enable()\n"
    )
    head = "from pkg.models import Pretrained\n\n\nclass Head(Pretrained):\n    pass\n"
    script = "from pkg.models import setup\n\n\ndef main(model):\n    setup(model)\n"
    summaries = {name: summarize(text, f"pkg/{name}.py", f"pkg.{name}", False) for name, text in (("models", models), ("head", head), ("script", script))}
    index = ProjectIndex({s.name: s for s in summaries.values()})
    assert not index.enables_hf_checkpointing("pkg.models.Pretrained")
    assert index.enables_hf_checkpointing("pkg.models.Pretrained.enable")
    assert index.enables_hf_checkpointing("pkg.models.setup")
    assert not can_matter(head, summaries["head"], index, Settings())
    assert can_matter(script, summaries["script"], index, Settings())


def test_grad_off_text_searched_on_the_lines_with_its_words_finds_every_match():
    """The pattern runs only on lines holding no_grad / inference_mode / set_grad_enabled: the same
    matches as over the whole text, lone carriage returns and several matches per line included."""
    from ckptlint.relevance import GRAD_OFF_TEXT, _grad_off_offsets

    texts = [
        (FIXTURES / "distillation_eval.py").read_text(),
        "with torch.no_grad():\n    model(x)\n@torch.inference_mode()\ndef evaluate(model, loader):\n    pass\n",
        "x = 1\r@torch.no_grad\rwith a, torch.set_grad_enabled(False): pass",
        "if s.startswith(no_grad): pass; with torch.no_grad(): y = model(x); with inference_mode(): z = 1",
        "class Rotary:\n    @torch.no_grad()\n    def forward(self, x):\n        return x\n",
        "with torch.no_grad():",
        "no_grad",
    ]
    for text in texts:
        assert list(_grad_off_offsets(text)) == [match.start() for match in GRAD_OFF_TEXT.finditer(text)], text


def test_grad_off_code_calling_a_model_from_a_checkpointing_module_matters():
    """A model class imported from a module with checkpoint text (directly or through one it
    imports) may checkpoint when called where autograd is off (CKPT008); without grad-off code, or
    importing only modules without checkpoint text, the file holds no site."""
    layers = "import torch.utils.checkpoint as cp\n\n\nclass Layer:\n    def forward(self, x):\n        return cp.checkpoint(self.f, x, use_reentrant=False)\n"
    net = "from pkg.layers import Layer\n\n\nclass Net:\n    pass\n"
    plain = "class Plain:\n    pass\n"
    scripts = {
        "evaluate": ("import torch\nfrom pkg.net import Net\n\n\ndef main():\n    with torch.no_grad():\n        return Net()(1)\n", True),
        "validate": ("from pkg.net import Net\n\n\nclass Lit(Net):\n    def validation_step(self, batch, i):\n        return self(batch)\n", True),
        "train": ("from pkg.net import Net\n\n\ndef main():\n    return Net()(1)\n", False),
        "other": ("import torch\nfrom pkg.plain import Plain\n\n\ndef main():\n    with torch.no_grad():\n        return Plain()\n", False),
    }
    texts = {"layers": layers, "net": net, "plain": plain, **{name: text for name, (text, _) in scripts.items()}}
    summaries = {name: summarize(text, f"pkg/{name}.py", f"pkg.{name}", False) for name, text in texts.items()}
    index = ProjectIndex({s.name: s for s in summaries.values()})
    for name, (text, matters) in scripts.items():
        assert can_matter(text, summaries[name], index, Settings()) is matters, name


def test_a_helper_imported_by_a_module_with_checkpoint_text_matters_when_it_samples_or_switches_grad_off():
    """`def sample(policy, ids): return policy.generate(ids)` in a file of its own, called by a
    training script that switches checkpointing on (CKPT004, CKPT008 through the callers)."""
    train = "from pkg.rollout import sample\n\n\ndef main(policy, ids):\n    policy.gradient_checkpointing_enable()\n    return sample(policy, ids)\n"
    helpers = {
        "rollout": ("def sample(policy, ids):\n    return policy.generate(ids)\n", True),
        "scoring": ("import torch\n\n\ndef score(model, ids):\n    with torch.no_grad():\n        return model(ids)\n", True),
        "text": ("def decode(ids):\n    return ids.tolist()\n", False),
    }
    texts = {"train": train + "from pkg.scoring import score\nfrom pkg.text import decode\n", **{name: text for name, (text, _) in helpers.items()}, "lonely": helpers["rollout"][0]}
    summaries = {name: summarize(text, f"pkg/{name}.py", f"pkg.{name}", False) for name, text in texts.items()}
    index = ProjectIndex({s.name: s for s in summaries.values()})
    for name, (text, matters) in helpers.items():
        assert can_matter(text, summaries[name], index, Settings()) is matters, name
    assert not can_matter(texts["lonely"], summaries["lonely"], index, Settings())  # nothing with checkpoint text imports it


def test_grad_off_code_in_methods_is_cut_from_a_file_that_matters_only_for_its_model_calls():
    """A file without checkpoint text matters for the models its functions call where autograd is off:
    the function is kept, a class whose method turns grad off (weight initialisation) is not."""
    layers = "import torch.utils.checkpoint as cp\n\n\nclass Layer:\n    def forward(self, x):\n        return cp.checkpoint(self.f, x, use_reentrant=False)\n"
    script = (
        "import torch\nfrom pkg.layers import Layer\n\n\n"
        "class Init:\n    def reset(self):\n        with torch.no_grad():\n            self.w.zero_()\n\n\n"
        "def main():\n    with torch.no_grad():\n        return Layer()(1)\n"
    )
    summaries = {name: summarize(text, f"pkg/{name}.py", f"pkg.{name}", False) for name, text in (("layers", layers), ("script", script))}
    index = ProjectIndex({s.name: s for s in summaries.values()})
    assert can_matter(script, summaries["script"], index, Settings())
    kept = relevant_source(script, summaries["script"], index, Settings()).text
    assert "def main" in kept and "class Init" not in kept


def test_text_searched_from_a_literal_still_matches_at_word_starts_only():
    from ckptlint.index import might_switch_hf_checkpointing
    from ckptlint.relevance import may_switch_grad_off

    assert might_switch_hf_checkpointing("args = TrainingArguments(gradient_checkpointing=True)\n")
    assert not might_switch_hf_checkpointing("class Pre:\n    supports_gradient_checkpointing = True\n")
    assert might_switch_hf_checkpointing("args = TrainingArguments(gradient_checkpointing=cli.gc)\n")
    assert not might_switch_hf_checkpointing("self.gradient_checkpointing = gradient_checkpointing\n")
    assert not might_switch_hf_checkpointing("TrainingArguments(gradient_checkpointing=False)\n")
    assert may_switch_grad_off("class Lit:\n    def validation_step(self, batch, i):\n        pass\n")
    assert not may_switch_grad_off("print(undef validation_step(batch))\n")  # `def` inside a word
