"""--confirm on code that comes with no example factory: what a user's model class or training
script needs (a config object, a model handed to a training function, ...) is built from what the
code itself says, and the evidence says how."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from confirm_helpers import confirm_all, finding, line_in
from conftest import TOWER_SOURCE

from ckptlint.cli import main

torch = pytest.importorskip("torch")

CONFIG_OBJECTS = """\
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


@dataclass
class EncoderConfig:
    n_mels: int = 20
    d_model: int = 24
    n_layers: int = 2


class Layer(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.ff = nn.Sequential(nn.LayerNorm(cfg.d_model), nn.Linear(cfg.d_model, cfg.d_model), nn.GELU())

    def forward(self, x):
        return x + self.ff(x)


class AnnotatedEncoder(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.inp = nn.Linear(cfg.n_mels, cfg.d_model)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.n_layers))

    def forward(self, feats):
        h = self.inp(feats)
        for layer in self.layers:
            h = checkpoint(layer, h)
        return h


class SpeechFrontEnd(nn.Module):
    # Time-major features (batch, frames, mels), transposed for the convolution.

    def __init__(self, n_mels, d_model):
        super().__init__()
        self.conv = nn.Conv1d(n_mels, d_model, 3, stride=2, padding=1)
        self.block = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, d_model))

    def forward(self, feats, feat_lens):
        x = self.conv(feats.transpose(1, 2)).transpose(1, 2)
        mask = torch.arange(x.size(1))[None, :] < ((feat_lens + 1) // 2)[:, None]
        return checkpoint(self.block, x) * mask[..., None]


class ArgsClassifier(nn.Module):
    \"\"\"`args` comes from argparse in the project: only the attributes read say what it holds.\"\"\"

    def __init__(self, args):
        super().__init__()
        self.embed = nn.Embedding(args.vocab_size, args.hidden_dim)
        self.block = nn.Sequential(nn.Linear(args.hidden_dim, args.hidden_dim), nn.Dropout(args.dropout))
        self.head = nn.Linear(args.hidden_dim, args.num_classes)

    def forward(self, tokens):
        h = checkpoint(self.block, self.embed(tokens))
        return self.head(h.mean(1))
"""

# class -> how it must have been built (the evidence's last line)
BUILT = {
    "AnnotatedEncoder": r"ran AnnotatedEncoder\(cfg=EncoderConfig\(n_mels=20, d_model=24, n_layers=2\)\) \(sizes guessed from the parameter names\) on feats=float32\[2, (6, )?20\]",
    "SpeechFrontEnd": r"ran SpeechFrontEnd\(n_mels=80, d_model=32\) \(sizes guessed from the parameter names\) on feats=float32\[2, 32, 80\], feat_lens=int64\[2\]",
    "ArgsClassifier": r"ran ArgsClassifier\(args=config\(vocab_size=100, hidden_dim=64, dropout=0.1, num_classes=10\)\) \(sizes guessed from the parameter names\) on tokens=int64\[2, 6\]",
}


@pytest.fixture(scope="module")
def config_verdicts(tmp_path_factory):
    path = tmp_path_factory.mktemp("no_examples") / "config_objects.py"
    path.write_text(CONFIG_OBJECTS)
    findings = {name: finding(path, line_in(path, name, "checkpoint("), "CKPT006") for name in BUILT}
    results = confirm_all(findings.values(), examples=[])
    return {name: results[f] for name, f in findings.items()}


@pytest.mark.parametrize("name", sorted(BUILT))
def test_a_config_object_is_built_from_its_class_or_from_the_attributes_read(config_verdicts, name):
    confirmation = config_verdicts[name]
    assert confirmation.verdict == "confirmed", confirmation
    assert re.search(BUILT[name], confirmation.evidence[-1]), confirmation.evidence[-1]


HF_TRAINING_FUNCTIONS = """\
import torch
from transformers import GPT2LMHeadModel


def train_loop(model, batches):
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    caches = []
    for batch in batches:
        out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=True)
        caches.append(out.past_key_values)
        out.loss.backward()
    return caches


def load_model():
    return GPT2LMHeadModel.from_pretrained("gpt2")
"""

IMPORTED_MODEL_CLASS = """\
from transformers import GPT2LMHeadModel


def fine_tune(model, loader):
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    caches = []
    for batch in loader:
        out = model(**batch, labels=batch["input_ids"], use_cache=True)
        caches.append(out.past_key_values)
        out.loss.backward()
    return caches
"""

TENSOR_FOR_A_TRANSFORMERS_MODEL = """\
from transformers import GPT2LMHeadModel


def load_policy():
    return GPT2LMHeadModel.from_pretrained("gpt2")


def cache_prompts(policy, prompts):
    policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    policy.train()
    return policy(prompts, use_cache=True).past_key_values
"""

# function -> the model it must have been handed, and the batch
HANDED = {
    "train_loop": (HF_TRAINING_FUNCTIONS, r"ran train_loop\(model=load_model\(\), batches=\[one batch: \{'input_ids': int64\[2, 8\]\}\]\)"),
    "cache_prompts": (TENSOR_FOR_A_TRANSFORMERS_MODEL, r"ran cache_prompts\(policy=load_policy\(\), prompts=int64\[2, 8\]\)"),
    "fine_tune": (IMPORTED_MODEL_CLASS, r"ran fine_tune\(model=GPT2LMHeadModel\(a tiny GPT2Config\), loader=\[one batch: \{'input_ids': int64\[2, 8\]\}\]\)"),
}


@pytest.fixture(scope="module")
def handed_verdicts(tmp_path_factory):
    pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("no_examples_hf")
    findings = {}
    for name, (source, _) in HANDED.items():
        path = folder / f"{name}_module.py"
        path.write_text(source)
        findings[name] = finding(path, line_in(path, name, "use_cache=True"), "CKPT004")
    results = confirm_all(findings.values(), examples=[])
    return {name: results[f] for name, f in findings.items()}


@pytest.mark.parametrize("name", sorted(HANDED))
def test_a_training_functions_model_comes_from_a_builder_of_the_file_or_an_imported_transformers_class(handed_verdicts, name):
    """`train_loop(model, batches)` with nothing in the project calling it: the model is what the
    file's own `load_model()` returns (from_pretrained offline), or the transformers class the
    file imports; the batch is that model's keyword inputs, keyed as the body reads them, and a
    tensor argument (`prompts`) its main input."""
    confirmation = handed_verdicts[name]
    assert confirmation.verdict == "confirmed", confirmation
    assert any(re.search(HANDED[name][1], line) for line in confirmation.evidence), confirmation.evidence


FIXED_LENGTH = """\
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm, self.q, self.out = nn.LayerNorm(dim), nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, h, memory, bias):
        scores = self.q(self.norm(h)) @ memory.transpose(-1, -2) + bias
        return h + self.out(scores.softmax(-1) @ memory)


class SlotAttention(nn.Module):
    # The learned bias fixes the memory's length at 3: only the 9th candidate length fits.
    def __init__(self, token_dim=12, slot_dim=6, dim=16, slots=3, depth=2):
        super().__init__()
        self.embed = nn.Linear(token_dim, dim)
        self.slot_proj = nn.Linear(slot_dim, dim)
        self.slot_bias = nn.Parameter(torch.zeros(1, 1, slots))
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.bn = nn.LayerNorm(dim)
        self.extra = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, 4)

    def forward(self, tokens, slots):
        h, memory = self.embed(tokens), self.slot_proj(slots)
        for block in self.blocks:
            h = checkpoint(block, h, memory, self.slot_bias)
        return self.head(h.mean(1))
"""


def test_each_arguments_own_layer_is_tried_at_every_size_before_other_layers(tmp_path):
    """Trying every layer's shapes at one size before the next size ran out of tries before the
    one length a learned bias accepts."""
    path = tmp_path / "slots.py"
    path.write_text(FIXED_LENGTH)
    found = finding(path, line_in(path, "SlotAttention", "checkpoint("), "CKPT006")
    confirmation = confirm_all([found], examples=[])[found]
    assert confirmation.verdict == "confirmed", confirmation
    assert re.search(r"on tokens=float32\[2, (3, )?12\], slots=float32\[2, 3, 6\]", confirmation.evidence[-1]), confirmation.evidence[-1]


SETUP_IN_MAIN = """\
import argparse

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Adapter(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.base = nn.Linear(dim, dim)
        self.lora_down = nn.Linear(dim, 2, bias=False)
        self.lora_up = nn.Linear(2, dim, bias=False)

    def forward(self, x):
        return self.base(x) + self.lora_up(self.lora_down(x))


class TinyLM(nn.Module):
    def __init__(self, vocab_size, dim, depth):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.blocks = nn.ModuleList(Adapter(dim) for _ in range(depth))
        self.head = nn.Linear(dim, vocab_size)

    def forward(self, ids):
        h = self.embed(ids)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=True)
        return self.head(h)


def only_adapters_train(model):
    for name, param in model.named_parameters():
        param.requires_grad = "lora_" in name


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    args = parser.parse_args()
    model = TinyLM(vocab_size=50, dim=16, depth=2)
    model.load_state_dict(torch.load("base.pt"))
    model.embed.weight.data.copy_(torch.load("embeddings.pt"))
    only_adapters_train(model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    for ids in torch.load(args.data):
        model(ids).logsumexp(-1).mean().backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_the_projects_setup_of_a_fresh_model_is_replayed_when_its_main_cannot_run(tmp_path):
    """The main needs command-line arguments and data files, so the model is built from its
    construction site; the freeze the main applies right after building it runs too (the load of
    a missing checkpoint keeps the initial weights, and the evidence says so), so the
    frozen-upstream symptom shows."""
    path = tmp_path / "adapters.py"
    path.write_text(SETUP_IN_MAIN)
    found = finding(path, line_in(path, "TinyLM", "checkpoint("), "CKPT005")
    confirmation = confirm_all([found], examples=[])[found]
    assert confirmation.verdict == "confirmed", confirmation
    ran = next(line for line in confirmation.evidence if line.startswith("ran "))
    assert (
        "ran TinyLM(vocab_size=50, dim=16, depth=2) (as the project builds it), then the project's setup of `model`: "
        "`model.load_state_dict(torch.load('base.pt'))` (line 43), `only_adapters_train(model)` (line 45)"
    ) in ran, ran
    # Any other use of a missing file's weights fails as the load would have: that statement is skipped.
    assert "skipped, failing here: `model.embed.weight.data.copy_(torch.load('embeddings.pt'))` (line 44: TypeError" in ran, ran
    assert "base.pt does not exist here: `TinyLM.load_state_dict` kept its initial weights (where gradients flow does not depend on their values)" in confirmation.evidence
    # Neither the optimizer (it reads a local) nor the training loop is setup.
    assert "optimizer" not in ran and "backward" not in ran, ran


MAIN_WITHOUT_ITS_DATA = """\
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    model.gradient_checkpointing_enable()
    model.config.use_cache = True
    texts = open("train.txt").read().splitlines()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    model.train()
    for text in texts:
        batch = tokenizer(text, return_tensors="pt")
        model(**batch, labels=batch["input_ids"]).loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_the_model_a_main_built_before_it_stopped_on_missing_data_runs(tmp_path):
    """The main fails on its data file without checkpointing too, so it cannot be compared as
    written; the model it had built and set up by then (checkpointing on, use_cache=True) runs on
    synthesised inputs instead, and the evidence says where the main stopped."""
    pytest.importorskip("transformers")
    path = tmp_path / "finetune.py"
    path.write_text(MAIN_WITHOUT_ITS_DATA)
    found = finding(path, line_in(path, "main", "use_cache = True"), "CKPT004")
    confirmation = confirm_all([found], examples=[])[found]
    assert confirmation.verdict == "confirmed", confirmation
    ran = next(line for line in confirmation.evidence if line.startswith("ran "))
    assert ran.startswith("ran `model` (GPT2LMHeadModel) as the file's main left it, where it stopped (FileNotFoundError: "), ran
    assert "'train.txt'" in ran and "on input_ids=int64[2, 8], labels=int64[2, 8]" in ran, ran


UNUSED_PACKAGE = """\
import torch
import wandb_that_is_not_installed as wandb
from datasets_that_is_not_installed import load_dataset
from torch import nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)

    def forward(self, x):
        return checkpoint(self.block, x)


class Logged(Net):
    def forward(self, x):
        wandb.log({"norm": x.norm()})
        return checkpoint(self.block, x)
"""


def test_a_package_that_is_not_installed_blocks_only_the_runs_that_use_it(tmp_path):
    """The training file imports what its model never touches: the model runs, and the evidence
    says without what; a model that uses the package still needs it installed."""
    path = tmp_path / "logged.py"
    path.write_text(UNUSED_PACKAGE)
    unused = finding(path, line_in(path, "Net", "checkpoint("), "CKPT006")
    used = finding(path, line_in(path, "Logged", "checkpoint("), "CKPT006")
    results = confirm_all([unused, used], examples=[])
    assert results[unused].verdict == "confirmed", results[unused]
    assert results[unused].evidence[-1] == (
        "ran without `wandb_that_is_not_installed`, `datasets_that_is_not_installed` (not installed: a placeholder that raises wherever the code would use it)"
    ), results[unused].evidence
    assert results[used].verdict == "could not run" and results[used].cause == "needs a package", results[used]
    assert "pip install wandb-that-is-not-installed" in results[used].evidence[0], results[used]


def test_a_placeholder_transformers_is_not_patched_for_offline_loading():
    """Without transformers installed, a file importing it gets the placeholder: the offline
    `from_pretrained` patch must leave it alone (it crashed every such target, so a torch-only
    install said "crashed" instead of "needs a package")."""
    code = (
        "import sys\n"
        "from ckptlint.confirm import absent_packages, hf\n"
        "absent_packages.install(['transformers'])\n"
        "import transformers\n"
        "assert absent_packages.is_placeholder(sys.modules['transformers'])\n"
        "with hf.offline_from_pretrained([]):\n"
        "    pass\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["ok"], result.stderr


def test_a_stand_in_for_a_hub_checkpoint_keeps_its_vocabulary_and_length_up_to_a_cap():
    """Scripts make up token ids for the model they name (`torch.randint(0, 1000, ...)`) and pad to
    its length: the tiny stand-in keeps the architecture's vocabulary (Llama's 32000) and positions,
    capped for the large ones (Qwen2's 151936 and 32768), so those ids and lengths fit."""
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM, LlamaConfig

    from ckptlint.confirm import hf

    built: list[str] = []
    with hf.offline_from_pretrained(built):
        llama = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf")
        qwen = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B")
        configured = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", config=LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2))
    assert (llama.config.vocab_size, qwen.config.vocab_size, configured.config.vocab_size) == (32000, 65536, 64)
    assert (llama.config.max_position_embeddings, qwen.config.max_position_embeddings) == (2048, 4096)
    assert llama.config.hidden_size == 16
    llama(torch.randint(0, 1000, (2, 8))).logits.sum().backward()


def test_a_setup_method_that_wraps_blocks_is_confirmed_through_the_forward_after_it(tmp_path):
    from test_targets import SETUP_METHOD

    path = tmp_path / "olmo_like.py"
    path.write_text(SETUP_METHOD)
    flagged = finding(path, line_in(path, "Model", "preserve_rng_state=False"), "CKPT002")
    confirmation = confirm_all([flagged], examples=[])[flagged]
    assert confirmation.verdict == "confirmed", confirmation
    assert any("after its apply_activation_checkpointing()" in e for e in confirmation.evidence), confirmation


HF_FROZEN_EMBEDDINGS = """\
import torch
from transformers import ViTConfig, ViTForImageClassification


def fine_tune_last_layers():
    config = ViTConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, image_size=32, patch_size=8, num_labels=3)
    model = ViTForImageClassification(config)
    for param in model.vit.embeddings.parameters():
        param.requires_grad = False
    model.gradient_checkpointing_enable()
    model.train()
    out = model(pixel_values=torch.randn(2, 3, 32, 32), labels=torch.tensor([0, 1]))
    out.loss.backward()
"""


def test_a_finding_about_transformers_defaults_is_not_judged_on_an_installed_version_that_changed_them(tmp_path, monkeypatch):
    """Linted as transformers 4.x (reentrant by default: CKPT005), run on the installed 5.x
    (non-reentrant): the run cannot show it, so it says which transformers to install, not
    "not reproduced"."""
    pytest.importorskip("transformers")
    (tmp_path / "finetune.py").write_text(HF_FROZEN_EMBEDDINGS)
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\ntransformers==4.46.0\n")
    (tmp_path / "pyproject.toml").write_text("[tool.ckptlint]\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["finetune.py", "--confirm", "--format", "json", "--no-cache", "--select", "CKPT005"], catch_exceptions=False)
    (finding,) = json.loads(result.stdout)["findings"]
    confirmation = finding["confirmation"]
    assert (confirmation["verdict"], confirmation["cause"]) == ("could not run", "needs a package"), confirmation
    assert confirmation["evidence"][0].startswith("linted with the checkpointing of transformers 4.36 (requirements.txt: transformers==4.46.0): reentrant by default; the installed 5.")
    assert confirmation["evidence"][0].endswith("pip install 'transformers<5'")
    assert "all equal" in confirmation["evidence"][1]


TOWER = TOWER_SOURCE

GRAD_FREE_SCRIPT = TOWER + '''

def validate(model, batches):
    with torch.no_grad():
        return [model(x).sum().item() for x in batches]


if __name__ == "__main__":
    model = Tower()
    batches = [torch.randn(4, 8) for _ in range(3)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range({epochs}):
        for x in batches:
            model(x).sum().backward()
            optimizer.step()
    print(validate(model, batches))
'''


@pytest.mark.parametrize("epochs", [2, 0])
def test_a_script_that_evaluates_after_training_runs_up_to_the_evaluation(tmp_path, epochs):
    """CKPT008 in a validation the script runs after training (after its first backward), or in a
    training script whose run trains nothing: the run goes on to the evaluation (was stopped at the
    first backward, or failed for want of one)."""
    path = tmp_path / "train_then_validate.py"
    path.write_text(GRAD_FREE_SCRIPT.format(epochs=epochs))
    found = finding(path, line_in(path, "validate", "model(x)"), "CKPT008")
    confirmation = confirm_all([found], examples=[])[found]
    assert confirmation.verdict == "confirmed", confirmation
    assert any("ran with grad disabled" in line for line in confirmation.evidence), confirmation.evidence
    assert any("or its end" in line for line in confirmation.evidence), confirmation.evidence


ROLLOUT_SCRIPT = TOWER + '''

def main():
    policy = Tower()
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
    for step in range(100):
        if step == 2:
            raise RuntimeError("the run went on past the step that scores without grad")
        x = torch.randn(4, 8)
        with torch.no_grad():
            old = policy(x)
        (policy(x) - old).pow(2).sum().backward()
        optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_a_grad_free_run_stops_at_the_first_backward_after_the_code_ran(tmp_path):
    """An RL step scores old log-probs under no_grad, then trains, every iteration (a GRPO loop
    that also generates: 16 of them took longer than the confirm timeout). Once the line reported
    has run without grad, the run ends at the next backward."""
    path = tmp_path / "rl_step.py"
    path.write_text(ROLLOUT_SCRIPT)
    found = finding(path, line_in(path, "main", "old = policy(x)"), "CKPT008")
    confirmation = confirm_all([found], examples=[])[found]
    assert confirmation.verdict == "confirmed", confirmation
    assert not any("went on" in line for line in confirmation.evidence), confirmation.evidence
    assert any("up to the first backward after rl_step.py:" in line for line in confirmation.evidence), confirmation.evidence


@pytest.mark.parametrize("name", ["layer_number", "layer_idx", "block_index", "idx"])
def test_a_layers_position_in_its_stack_is_guessed_within_a_guessed_depth(name):
    """Megatron's `MoELayer(hidden, ffn, num_experts, topk, layer_number, num_layers)` indexes a
    per-layer tracker of `num_layers` entries: a position guessed as a size (32) raised IndexError."""
    from ckptlint.confirm.constructors import PROFILES, guess

    assert guess(name, PROFILES[0]) < guess("num_layers", PROFILES[0])


REENTRANT_ESCAPE = '''import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Router(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.gate = nn.Linear(hidden, 4)

    def forward(self, x):
        probs = self.gate(x).softmax(-1)
        self.l_aux = probs.mean()
        return probs


class Layer(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.router = Router(hidden)
        self.proj = nn.Linear(hidden, 4)

    def forward(self, x):
        return checkpoint(self._inner, x, use_reentrant=True)

    def _inner(self, x):
        return self.proj(x) * self.router(x)
'''


def test_an_escape_is_not_confirmed_by_the_failure_its_inputs_cause(tmp_path):
    """A reentrant checkpoint run on synthesised data that requires no grad fails its backward with
    "element 0 of tensors does not require grad": that is the input's doing, not evidence that a
    tensor escaped (it confirmed CKPT007 on probe b/04's Megatron MoE layer)."""
    path = tmp_path / "router.py"
    path.write_text(REENTRANT_ESCAPE)
    found = finding(path, line_in(path, "Router", "self.l_aux"), "CKPT007")
    confirmation = confirm_all([found], examples=[])[found]
    assert confirmation.verdict != "confirmed", confirmation
    assert not any("does not require grad" in line and "with checkpointing" in line for line in confirmation.evidence), confirmation.evidence


AUX_MIXIN = """import torch


class AuxLossMixin:
    def add_aux_loss(self, loss):
        self.aux_loss = loss
"""

MIXED_MOE = """import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from aux_mixin import AuxLossMixin


class MoELayer(AuxLossMixin, nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.router = nn.Linear(dim, 2)
        self.experts = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])

    def _inner(self, x):
        probs = self.router(x).softmax(-1)
        self.add_aux_loss(probs.mean(0).pow(2).sum())
        return sum(p.unsqueeze(-1) * e(x) for p, e in zip(probs.unbind(-1), self.experts))

    def forward(self, x):
        return checkpoint(self._inner, x, use_reentrant=True)


class MoEModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.layers = nn.ModuleList([MoELayer() for _ in range(2)])

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = h + layer(h)
        return h


if __name__ == "__main__":
    model = MoEModel()
    out = model(torch.randn(3, 4))
    (out.sum() + sum(layer.aux_loss for layer in model.layers)).backward()
"""


def test_a_finding_in_a_mixin_runs_the_module_that_derives_from_it(tmp_path):
    """The escape is written in a mixin of another file (`self.aux_loss = loss`), which is no module:
    the target is the module deriving from it (and the model building that), as its script runs it."""
    (tmp_path / "aux_mixin.py").write_text(AUX_MIXIN)
    (tmp_path / "moe.py").write_text(MIXED_MOE)
    path = tmp_path / "aux_mixin.py"
    found = finding(path, line_in(path, "AuxLossMixin", "self.aux_loss = loss"), "CKPT007")
    confirmation = confirm_all([found], examples=[])[found]
    assert confirmation.verdict == "confirmed", confirmation
    assert any("MoELayer derives from AuxLossMixin" in line for line in confirmation.evidence), confirmation.evidence
