"""`--confirm` on real-world-shaped code with no example factories (fixtures/real_world/): every
bad case is confirmed and every correct look-alike is not reproduced, from nothing but the code.

The inputs come from the project's own usage (construction sites, `__main__` blocks, scripts
written flat at module level, the keywords
it passes, the calls of its training functions) or are synthesised jointly (timesteps, masks and
lengths sized after their partners; a dict batch with the keys the forward reads); transformers models come from tiny configs when the code calls
`from_pretrained`. Without transformers or lightning installed, their fixtures must say which
package to install.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from confirm_helpers import FIXTURES, MODULE, ROOT, missing_module, verdicts_at

from ckptlint.cli import main
from ckptlint.confirm.command_line import switches_reaching

pytest.importorskip("torch")

REAL_WORLD = FIXTURES / "real_world"

# (file, line, code) -> evidence that the confirmation must carry (regular expressions): the
# rule's own symptom, and how the target was run.
EVIDENCE = {
    ("diffusion_unet.py", 56, "CKPT002"): [r"gradient differs, relative", r"torch stream differs after the step", r"ran UNet\(in_channels=3, base_channels=32\) \(sizes guessed from the parameter names\) on x_t=float32\[2, 3, 32, 32\], t=int64\[2\]", r"t as timesteps"],
    ("cross_attention.py", 62, "CKPT003"): [r"Trying to backward through the graph a second time", r"partial keyword `context`", r"text_mask=bool\[2, 6\]", r"text_mask as mask"],
    ("asr_encoder.py", 32, "CKPT001"): [r"frontend\.conv1\.weight: grad None with checkpointing", r"mel=float32\[2, 80, 32\], mel_lengths=int64\[2\]"],
    ("kv_cache_decoder.py", 28, "CKPT004"): [r"CheckpointError: torch\.utils\.checkpoint: Recomputed values .* with checkpointing; no exception without", r'ran the file\'s `if __name__ == "__main__":` block up to its backward number 2'],
    ("train_functions.py", 39, "CKPT001"): [r"0\.weight: grad None with checkpointing", r"ran the file's .* block up to its first backward"],
    ("train_functions.py", 40, "CKPT001"): [r"grad None with checkpointing"],
    ("train_functions.py", 66, "CKPT008"): [r"checkpoint at train_functions\.py:66 ran with grad disabled", r"ran export_embeddings\(encoder=TabularClassifier\(in_features=24, hidden=64, num_classes=3\) \(as the project builds it\), loader=\[one batch: \{'features': float32\[2, 24\]\}\]\)", r"before that, tried: .*the checkpoint call at line 66 did not run"],
    ("hf_from_pretrained.py", 15, "CKPT004"): [r"return value: CausalLMOutputWithPast of 1 with checkpointing after backward; CausalLMOutputWithPast of 2 without", r"LlamaForCausalLM\.from_pretrained\('meta-llama/Llama-3\.2-1B'\) built LlamaForCausalLM from a tiny LlamaConfig with use_cache=True \(no download\)"],
    ("hf_from_pretrained.py", 28, "CKPT005"): [r"element 0 of tensors does not require grad .* with checkpointing; no exception without", r"pixel_values=float32\[2, 3, 32, 32\]", r"tiny ViTConfig"],
    ("flat_regression.py", 21, "CKPT001"): [r"0\.weight: grad None with checkpointing", r"checkpoint at flat_regression\.py:21: reentrant", r"ran the file as a script up to its first backward"],
    ("flat_block_runner.py", 11, "CKPT001"): [r"0\.0\.weight: grad None with checkpointing", r"ran the file as a script up to its first backward"],
    ("flat_block_runner.py", 11, "CKPT006"): [r"ran with use_reentrant omitted: effective use_reentrant=True", r"ran the file as a script"],
    ("hf_flat_chat.py", 11, "CKPT004"): [r"return value: CausalLMOutputWithPast of 2 with checkpointing after backward; CausalLMOutputWithPast of 3 without", r"ran the file as a script up to its backward number 2", r"AutoTokenizer\.from_pretrained\('meta-llama/Llama-3\.2-1B-Instruct'\) built a character-level tokenizer", r"LlamaForCausalLM from a tiny LlamaConfig with use_cache=True"],
    ("flat_finetune.py", 30, "CKPT005"): [r"blocks\.0\.mlp\.0\.weight: grad None with checkpointing", r"ran the file as a script up to its first backward"],
    ("dict_batch_classifier.py", 31, "CKPT001"): [r"stem\.conv\.weight: grad None with checkpointing", r"batch=\{'pixel_values': float32\[2, 3, 32, 32\], 'labels': int64\[2\]\}"],
    ("hf_flat_vit_last_layer.py", 10, "CKPT005"): [r"vit\.layers\.11\.\S+: grad None with checkpointing", r"built ViTForImageClassification from a tiny ViTConfig with num_labels=3"],
    ("runner_object.py", 20, "CKPT005"): [r"backbone\.stages\.0\.0\.weight: grad None with checkpointing", r"ran the file's `if __name__ == \"__main__\":` block up to its first backward"],
    ("no_grad_backbone_adapter.py", 30, "CKPT001"): [r"adapter\.0\.weight: grad None with checkpointing", r"ran the file's `if __name__ == \"__main__\":` block up to its first backward"],
    ("module_checkpoint_kwargs.py", 8, "CKPT002"): [r"gradient differs, relative", r"torch stream differs after the step", r"line 8 sets up the checkpoint call at module_checkpoint_kwargs\.py:31"],
    ("masked_blocks_spread.py", 28, "CKPT001"): [r"blocks\.0\.fc\.weight: grad None with checkpointing", r"ran the file's `if __name__ == \"__main__\":` block up to its first backward"],
    ("cli_domain_vectors.py", 26, "CKPT005"): [r"model\.layers\.0\.\S+: grad None with checkpointing", r"AutoModelForCausalLM\.from_pretrained\('meta-llama/Llama-3\.2-1B'\) built LlamaForCausalLM"],
    ("lightning_classifier.py", 38, "CKPT005"): [r"blocks\.0\.\S+: grad None with checkpointing", r"ran LitTextClassifier\(vocab_size=100, dim=32, heads=2, num_classes=10\)"],
}

LOOK_ALIKES = [
    ("diffusion_unet.py", "ReplayingUNet", "checkpoint(", "CKPT002"),
    ("cross_attention.py", "PositionalLatentDecoder", "checkpoint(", "CKPT003"),
    ("asr_encoder.py", "TrainableInputSpeechEncoder", "checkpoint(self.frontend", "CKPT001"),
    ("train_functions.py", "train_epoch_fixed", "checkpoint(", "CKPT001"),
    ("hf_from_pretrained.py", "load_llama_tuning_queries_only", "gradient_checkpointing_enable(", "CKPT005"),
    ("lightning_classifier.py", "LitTextClassifierNonReentrant", "checkpoint(", "CKPT005"),
    ("flat_regression_stem.py", MODULE, "checkpoint_sequential(body", "CKPT001"),
    ("flat_finetune_hooked.py", "Tagger", "checkpoint(", "CKPT005"),
    ("hf_flat_chat_no_cache.py", MODULE, "from_pretrained(base)", "CKPT004"),
    ("runner_object_head.py", "Backbone", "checkpoint(", "CKPT005"),
    ("dict_batch_classifier_nonreentrant.py", "DictBatchClassifier", "checkpoint(", "CKPT001"),
    ("masked_blocks_spread_stem.py", "MaskedNet", "checkpoint(", "CKPT001"),
    ("module_checkpoint_kwargs_replayed.py", "Net", "checkpoint(", "CKPT002"),
    ("no_grad_backbone_adapter_nonreentrant.py", "AdapterProbe", "checkpoint(", "CKPT001"),
    ("cli_domain_vectors_gpt2.py", "main", "gradient_checkpointing_enable(", "CKPT005"),
]


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    # A configuration without [tool.ckptlint.confirm] examples: nothing but the code itself.
    config = tmp_path_factory.mktemp("no_examples") / "pyproject.toml"
    config.write_text("[tool.ckptlint]\n")
    args = [str(REAL_WORLD.relative_to(ROOT)), "--confirm", "--format", "json", "--no-cache", "--torch-version", "2.13", "--transformers-version", "5.23", "--config", str(config)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


def test_every_bad_case_is_confirmed(document):
    found = {(f["path"].rsplit("/", 1)[-1], f["line"], f["code"]) for f in document["findings"]}
    assert found == set(EVIDENCE)
    for f in document["findings"]:
        confirmation = f["confirmation"]
        where = f"{f['path']}:{f['line']} {f['code']}: {confirmation}"
        missing = missing_module(f["path"])
        if missing:
            assert confirmation["verdict"] == "could not run" and confirmation["cause"] == "needs a package", where
            assert f"pip install {missing}" in confirmation["evidence"][0], where
        else:
            assert confirmation["verdict"] == "confirmed", where


@pytest.mark.parametrize("key", sorted(EVIDENCE), ids=lambda k: f"{k[2]}-{k[0]}:{k[1]}")
def test_confirmation_shows_the_symptom_and_how_it_ran(document, key):
    name, line, code = key
    (entry,) = [f for f in document["findings"] if f["path"].endswith("/" + name) and f["line"] == line and f["code"] == code]
    if missing_module(entry["path"]):
        pytest.skip(f"{missing_module(entry['path'])} is not installed")
    text = "; ".join(entry["confirmation"]["evidence"])
    for pattern in EVIDENCE[key]:
        assert re.search(pattern, text), (pattern, text)


@pytest.fixture(scope="module")
def look_alike_verdicts():
    return verdicts_at(REAL_WORLD, LOOK_ALIKES, examples=[])


@pytest.mark.parametrize("key", LOOK_ALIKES, ids=lambda k: f"{k[3]}-{k[1]}")
def test_correct_look_alike_is_not_reproduced(look_alike_verdicts, key):
    confirmation = look_alike_verdicts[key]
    if missing_module(key[0]):
        assert confirmation.verdict == "could not run" and confirmation.cause == "needs a package", confirmation
        return
    assert confirmation.verdict == "not reproduced", confirmation
    assert re.search(r"after [12] step\(s\) on cpu: all equal", confirmation.evidence[0]), confirmation


def only_finding_confirmed(project, monkeypatch, *options: str) -> dict:
    """`ckptlint . --confirm` in the project folder: its one finding, with the confirmation."""
    (project / "pyproject.toml").write_text("[tool.ckptlint]\n")
    monkeypatch.chdir(project)
    result = CliRunner().invoke(main, [".", "--confirm", "--format", "json", "--no-cache", *options], catch_exceptions=False)
    (finding,) = json.loads(result.stdout)["findings"]
    return finding


def test_a_helper_file_without_transformers_runs_the_main_elsewhere_on_stand_ins(tmp_path, monkeypatch):
    """A memory helper that imports nothing, its finding run through the training script of another
    file: transformers' `from_pretrained` (the tokenizer's too) must be the offline stand-ins there."""
    pytest.importorskip("transformers")
    (tmp_path / "utils.py").write_text(
        "def optimize_model_memory(model):\n"
        "    model.train()\n"
        "    model.config.use_cache = True\n"
        '    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})\n'
        "    return model\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
        "from utils import optimize_model_memory\n\n\n"
        "def main():\n"
        '    tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct")\n'
        '    model = optimize_model_memory(AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct"))\n'
        '    batch = tokenizer(["question: who? answer: me"] * 2, return_tensors="pt")\n'
        "    for _ in range(2):\n"
        '        model(**batch, labels=batch["input_ids"]).loss.backward()\n\n\n'
        'if __name__ == "__main__":\n'
        "    main()\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--transformers-version", "5.23")
    assert (finding["path"], finding["line"], finding["code"]) == ("utils.py", 3, "CKPT004")
    evidence = "; ".join(finding["confirmation"]["evidence"])
    assert finding["confirmation"]["verdict"] == "confirmed", evidence
    assert "ran train.py's `if __name__ == \"__main__\":` block" in evidence and "built a character-level tokenizer" in evidence, evidence


def test_the_model_a_main_in_another_file_set_up_and_returned_with_runs(tmp_path, monkeypatch):
    """A LoRA script whose weight file stays on its author's disk and whose data loop is empty
    here: the load keeps the initial weights, `main()` returns normally, and the model it froze
    and switched to checkpointing runs on synthesised inputs (the bare class, not frozen, would
    say "not reproduced")."""
    (tmp_path / "unet.py").write_text(
        "import torch\nfrom torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
        "class TinyUNet(nn.Module):\n"
        "    def __init__(self, dim=16):\n"
        "        super().__init__()\n"
        "        self.conv_in = nn.Linear(4, dim)\n"
        "        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])\n"
        "        self.lora = nn.ModuleList([nn.Linear(dim, dim, bias=False) for _ in range(2)])\n"
        "        self.gradient_checkpointing = False\n\n"
        "    def enable_gradient_checkpointing(self):\n"
        "        self.gradient_checkpointing = True\n\n"
        "    def forward(self, x):\n"
        "        h = self.conv_in(x)\n"
        "        for block, lora in zip(self.blocks, self.lora):\n"
        "            if self.gradient_checkpointing and self.training:\n"
        "                h = checkpoint(lambda t, b=block, a=lora: b(t) + a(t), h, use_reentrant=True)\n"
        "            else:\n"
        "                h = block(h) + lora(h)\n"
        "        return h\n"
    )
    (tmp_path / "train_lora.py").write_text(
        "import torch\n\nfrom unet import TinyUNet\n\n\n"
        "def main():\n"
        "    unet = TinyUNet()\n"
        '    unet.load_state_dict(torch.load("unet.pt"))\n'
        "    unet.requires_grad_(False)\n"
        "    for lora in unet.lora:\n"
        "        lora.requires_grad_(True)\n"
        "    unet.enable_gradient_checkpointing()\n"
        "    unet.train()\n"
        "    for x in []:\n"
        "        unet(x).pow(2).mean().backward()\n\n\n"
        'if __name__ == "__main__":\n'
        "    main()\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT005")
    assert (finding["path"], finding["code"]) == ("unet.py", "CKPT005")
    evidence = finding["confirmation"]["evidence"]
    assert finding["confirmation"]["verdict"] == "confirmed", evidence
    assert any(line.startswith("ran `unet` (TinyUNet) as the file's main left it, where it stopped (it ended)") for line in evidence), evidence
    assert "unet.pt does not exist here: `TinyUNet.load_state_dict` kept its initial weights (where gradients flow does not depend on their values)" in evidence


def test_a_script_whose_flagged_code_runs_only_under_a_command_line_switch_gets_it(tmp_path, monkeypatch):
    """`if args.grad_ckpt:` around the finding, over `action="store_true"`: run bare, the script
    never checkpoints; --confirm passes the switch, and says so."""
    (tmp_path / "train.py").write_text(
        "import argparse\n\nimport torch\nfrom torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
        "class Tagger(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.embed = nn.Embedding(20, 8)\n"
        "        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])\n"
        "        self.use_checkpoint = False\n\n"
        "    def forward(self, ids):\n"
        "        h = self.embed(ids)\n"
        "        for block in self.blocks:\n"
        "            h = checkpoint(block, h, use_reentrant=True) if self.use_checkpoint else block(h)\n"
        "        return h\n\n\n"
        "def main():\n"
        "    parser = argparse.ArgumentParser()\n"
        '    parser.add_argument("--grad-ckpt", action="store_true")\n'
        '    parser.add_argument("--lr", type=float, default=0.1)\n'
        "    args = parser.parse_args()\n"
        "    model = Tagger()\n"
        "    model.embed.requires_grad_(False)\n"
        "    if args.grad_ckpt:\n"
        "        model.use_checkpoint = True\n"
        "    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=args.lr)\n"
        "    for _ in range(2):\n"
        "        model(torch.randint(0, 20, (2, 5))).sum().backward()\n"
        "        optimizer.step()\n\n\n"
        'if __name__ == "__main__":\n'
        "    main()\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT005")
    evidence = "; ".join(finding["confirmation"]["evidence"])
    assert finding["confirmation"]["verdict"] == "confirmed", evidence
    assert "with `--grad-ckpt` on its command line (the flagged code runs only then)" in evidence, evidence


def test_switches_are_read_from_the_tests_around_the_flagged_lines():
    source = (
        "import argparse\n"
        "p = argparse.ArgumentParser()\n"
        'p.add_argument("-g", "--gradient_checkpointing", action="store_true")\n'
        'p.add_argument("--fp16", action="store_true", dest="half")\n'
        'p.add_argument("--steps", type=int, default=3)\n'
        "args = p.parse_args()\n"
        "if args.gradient_checkpointing and args.half:\n"
        "    enable()\n"
        "if args.steps:\n"
        "    run()\n"
        'p.add_argument("--use-ckpt", action="store_true")\n'
        "if args.use_ckpt:\n"
        "    model.set_grad_checkpointing()\n"
    )
    # Around the flagged line, and around code that switches checkpointing on.
    assert switches_reaching(source, [8]) == ["--gradient_checkpointing", "--fp16", "--use-ckpt"]
    assert switches_reaching(source, [10]) == ["--use-ckpt"]
    assert switches_reaching("def broken(:\n", [1]) == []


def test_a_finding_the_installed_transformers_would_not_get_cannot_be_shown_here(tmp_path, monkeypatch):
    """Linted for transformers 4.57, enabling reentrant checkpointing on a Llama whose embedding is
    frozen leaves its layers without gradients; transformers 5.x hooks the embedding itself, so the
    installed 5.23 trains fine: not "not reproduced" but "could not run", naming the version."""
    pytest.importorskip("transformers")
    (tmp_path / "finetune.py").write_text(
        "from transformers import AutoModelForCausalLM\n\n\n"
        "def main():\n"
        '    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")\n'
        "    model.get_input_embeddings().requires_grad_(False)\n"
        '    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})\n'
        "    model.train()\n"
        "    batch = {\"input_ids\": __import__(\"torch\").randint(0, 50, (2, 6))}\n"
        '    model(**batch, labels=batch["input_ids"]).loss.backward()\n\n\n'
        'if __name__ == "__main__":\n'
        "    main()\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT005", "--transformers-version", "4.57")
    confirmation = finding["confirmation"]
    assert confirmation["verdict"] == "could not run" and confirmation["cause"] == "needs a package", confirmation
    assert confirmation["evidence"][0].startswith("linted for transformers 4.57 (--transformers-version); for the installed 5.23"), confirmation
    assert confirmation["evidence"][0].endswith("pip install 'transformers==4.57.*'"), confirmation


def test_a_lightning_module_without_forward_runs_through_its_training_step(tmp_path, monkeypatch):
    """A LightningModule that only defines `training_step` (Lightning's fit loop calls it; its
    `forward` raises): it runs through `training_step` on a synthesised batch, after its `setup`
    hook froze the embeddings, as the fit loop would."""
    pytest.importorskip("lightning")
    pytest.importorskip("transformers")
    (tmp_path / "lit.py").write_text(
        "import lightning.pytorch as pl\nimport torch\nfrom transformers import ViTForImageClassification\n\n\n"
        "class LitViT(pl.LightningModule):\n"
        '    def __init__(self, name="google/vit-base-patch16-224"):\n'
        "        super().__init__()\n"
        "        self.net = ViTForImageClassification.from_pretrained(name, num_labels=10)\n"
        '        self.net.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})\n\n'
        "    def setup(self, stage):\n"
        "        for p in self.net.vit.embeddings.parameters():\n"
        "            p.requires_grad = False\n\n"
        "    def training_step(self, batch, batch_idx):\n"
        '        return self.net(pixel_values=batch["pixel_values"], labels=batch["labels"]).loss\n\n'
        "    def configure_optimizers(self):\n"
        "        return torch.optim.AdamW((p for p in self.parameters() if p.requires_grad), lr=1e-4)\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT005")
    evidence = "; ".join(finding["confirmation"]["evidence"])
    assert finding["confirmation"]["verdict"] == "confirmed", evidence
    assert "ran LitViT().training_step(batch={'pixel_values': float32[2, 3, 32, 32], 'labels': int64[2]}, batch_idx=0)" in evidence, evidence


def test_a_train_val_loop_over_a_dict_of_loaders_runs_with_the_model_its_main_builds_inline(tmp_path, monkeypatch):
    """The transfer-learning tutorial's loop: `run(DenseNetish(), {"train": [], "val": []})`, a
    loop over phases indexing `loaders[phase]`, the val phase under `set_grad_enabled(False)`.
    The main's data is empty here and the model it leaves, run bare, never goes through `run`:
    `run` is called with the class the main builds inline and a loader per phase."""
    (tmp_path / "model.py").write_text(
        "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
        "class DenseNetish(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.stem = nn.Conv2d(3, 8, 3, padding=1)\n"
        "        self.layers = nn.ModuleList([nn.Conv2d(8, 8, 3, padding=1) for _ in range(2)])\n"
        "        self.fc = nn.Linear(8, 10)\n\n"
        "    def forward(self, x):\n"
        "        h = self.stem(x)\n"
        "        for layer in self.layers:\n"
        "            h = checkpoint(layer, h, use_reentrant=False)\n"
        "        return self.fc(h.mean((2, 3)))\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\n\nfrom model import DenseNetish\n\n\n"
        "def run(model, loaders, epochs=1):\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    crit = torch.nn.CrossEntropyLoss()\n"
        "    for epoch in range(epochs):\n"
        '        for phase in ["train", "val"]:\n'
        '            model.train() if phase == "train" else model.eval()\n'
        "            for inputs, labels in loaders[phase]:\n"
        "                opt.zero_grad()\n"
        '                with torch.set_grad_enabled(phase == "train"):\n'
        "                    loss = crit(model(inputs), labels)\n"
        '                    if phase == "train":\n'
        "                        loss.backward()\n"
        "                        opt.step()\n\n\n"
        'if __name__ == "__main__":\n'
        '    run(DenseNetish(), {"train": [], "val": []})\n'
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT008")
    evidence = finding["confirmation"]["evidence"]
    assert (finding["path"], finding["confirmation"]["verdict"]) == ("train.py", "confirmed"), evidence
    assert "ran run(model=DenseNetish() (as the project builds it), loaders={'train': ((float32[2, 3, 32, 32], int64[2])), 'val': ((float32[2, 3, 32, 32], int64[2]))})" in evidence, evidence
    assert any(line.endswith("no checkpoint call ran for line 15") for line in evidence), evidence


def test_a_trainer_script_written_for_a_gpu_box_without_its_data_runs_here(tmp_path, monkeypatch):
    """`bf16=True` (no CUDA here), `train_dataset=None` and a `main()` called at module level
    without a `__main__` guard: precision is switched off, two examples are synthesised for the
    model, the outputs go to a temporary folder, and the frozen-embedding symptom shows."""
    pytest.importorskip("transformers")
    (tmp_path / "train.py").write_text(
        "from transformers import Trainer, TrainingArguments, ViTForImageClassification\n\n\n"
        "def main():\n"
        '    model = ViTForImageClassification.from_pretrained("google/vit-base-patch16-224", num_labels=3)\n'
        "    model.vit.embeddings.requires_grad_(False)\n"
        "    args = TrainingArguments(\n"
        '        output_dir="runs/vit", bf16=True, per_device_train_batch_size=2, gradient_checkpointing=True,\n'
        '        gradient_checkpointing_kwargs={"use_reentrant": True},\n'
        "    )\n"
        "    Trainer(model=model, args=args, train_dataset=None).train()\n\n\n"
        "main()\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT005")
    evidence = finding["confirmation"]["evidence"]
    assert finding["confirmation"]["verdict"] == "confirmed", evidence
    assert "TrainingArguments: bf16=True switched off (no CUDA here; precision does not change where gradients flow)" in evidence
    assert "the Trainer was handed no train_dataset: it trained on 2 synthesised examples (pixel_values=float32[2, 3, 32, 32], labels=int64[2])" in evidence
    assert not (tmp_path / "runs").exists()  # nothing written into the project


def test_a_finding_in_a_class_that_holds_the_model_runs_the_model_its_main_left(tmp_path, monkeypatch):
    """`Finetuner.__init__` loads the model with `use_cache=True` and switches checkpointing on;
    the class is no nn.Module, and the main's data loop is empty here: the model the main's `ft`
    holds runs instead (it was "not an nn.Module subclass" before)."""
    pytest.importorskip("transformers")
    (tmp_path / "finetune.py").write_text(
        "import torch\nfrom transformers import AutoModelForCausalLM\n\n\n"
        "class Finetuner:\n"
        '    def __init__(self, name="Qwen/Qwen2.5-0.5B"):\n'
        "        self.model = AutoModelForCausalLM.from_pretrained(name, use_cache=True)\n"
        '        self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})\n'
        "        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-5)\n\n"
        "    def step(self, batch):\n"
        "        self.model.train()\n"
        "        self.model(**batch).loss.backward()\n"
        "        self.opt.step()\n\n\n"
        'if __name__ == "__main__":\n'
        "    ft = Finetuner()\n"
        "    for batch in []:\n"
        "        ft.step(batch)\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT004")
    evidence = finding["confirmation"]["evidence"]
    assert finding["confirmation"]["verdict"] == "confirmed", evidence
    assert any(line.startswith("ran `ft.model` (Qwen2ForCausalLM) as the file's main left it, where it stopped (it ended)") for line in evidence), evidence


def test_an_excluded_script_is_not_the_main_that_confirm_runs(tmp_path, monkeypatch):
    """Files the settings exclude are not the project's code to run: a scratch script that builds
    the model without checkpointing sorts first, but the training script's main is what runs."""
    (tmp_path / "encoder.py").write_text(
        "from functools import partial\n\n"
        "import torch\n"
        "from torch import nn\n"
        "from torch.utils.checkpoint import checkpoint\n\n\n"
        "class Encoder(nn.Module):\n"
        "    def __init__(self, use_checkpoint=False):\n"
        "        super().__init__()\n"
        "        self.pos = nn.Linear(4, 4)\n"
        "        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))\n"
        "        self.use_checkpoint = use_checkpoint\n\n"
        "    def forward(self, x):\n"
        "        pos = self.pos(x)\n"
        "        for blk in self.blocks:\n"
        "            fn = partial(lambda h, pos, blk=blk: blk(h) + pos, pos=pos)\n"
        "            x = checkpoint(fn, x, use_reentrant=True) if self.use_checkpoint and self.training else fn(x)\n"
        "        return x\n"
    )
    main = "import torch\n\nfrom encoder import Encoder\n\nif __name__ == '__main__':\n    enc = Encoder({flag}).train()\n    enc(torch.randn(2, 4)).sum().backward()\n"
    (tmp_path / "_scratch.py").write_text(main.format(flag=""))
    (tmp_path / "train.py").write_text(main.format(flag="use_checkpoint=True"))
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT003", "--extend-exclude", "_scratch.py")
    evidence = "; ".join(finding["confirmation"]["evidence"])
    assert finding["confirmation"]["verdict"] == "confirmed", evidence
    assert "train.py" in evidence and "_scratch.py" not in evidence, evidence


def test_the_setup_another_file_runs_on_a_new_instance_is_replayed(tmp_path, monkeypatch):
    """The training script builds the model, then a helper of a third file freezes its embedding with
    a table it computes first: --confirm replays both statements on the model it builds, in the
    script's namespace, so the reentrant checkpoint behind the frozen embedding loses its grads."""
    (tmp_path / "modeling.py").write_text(
        "from torch import nn\n"
        "from torch.utils.checkpoint import checkpoint\n\n\n"
        "class Tagger(nn.Module):\n"
        "    def __init__(self, vocab=16, dim=8):\n"
        "        super().__init__()\n"
        "        self.embed = nn.Embedding(vocab, dim)\n"
        "        self.blocks = nn.ModuleList(nn.Linear(dim, dim) for _ in range(2))\n"
        "        self.head = nn.Linear(dim, 3)\n\n"
        "    def forward(self, input_ids):\n"
        "        h = self.embed(input_ids)\n"
        "        for blk in self.blocks:\n"
        "            h = checkpoint(blk, h, use_reentrant=True)\n"
        "        return self.head(h)\n"
    )
    (tmp_path / "embeddings.py").write_text(
        "import torch\n\n\n"
        "def load_static_vectors(model, table):\n"
        "    with torch.no_grad():\n"
        "        model.embed.weight.copy_(table)\n"
        "    model.embed.weight.requires_grad = False\n"
        "    return model\n"
    )
    (tmp_path / "run.py").write_text(
        "import torch\n\n"
        "from embeddings import load_static_vectors\n"
        "from modeling import Tagger\n\n\n"
        "def build(steps):\n"
        "    model = Tagger()\n"
        "    vectors = torch.randn(16, 8)\n"
        "    model = load_static_vectors(model, vectors)\n"
        "    return model, torch.optim.SGD(model.parameters(), lr=0.1), steps\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT005")
    assert (finding["path"], finding["code"]) == ("modeling.py", "CKPT005"), finding
    evidence = "; ".join(finding["confirmation"]["evidence"])
    assert finding["confirmation"]["verdict"] == "confirmed", evidence
    assert "vectors = torch.randn(16, 8)" in evidence and "load_static_vectors(model, vectors)" in evidence and "run.py" in evidence, evidence


def test_a_callback_built_in_another_file_runs_through_that_files_main(tmp_path, monkeypatch):
    """A TrainerCallback whose file neither builds it nor trains: the training script that hands it
    to the Trainer runs, and the callback's event runs as training calls it."""
    pytest.importorskip("transformers")
    (tmp_path / "callbacks.py").write_text(
        "import torch\n"
        "from transformers import TrainerCallback\n\n\n"
        "class HeldOutProbe(TrainerCallback):\n"
        "    def __init__(self, batch):\n"
        "        self.batch = batch\n\n"
        "    def on_step_end(self, args, state, control, model=None, **kwargs):\n"
        "        with torch.no_grad():\n"
        "            model(**self.batch)\n"
    )
    (tmp_path / "finetune.py").write_text(
        "import tempfile\n\n"
        "import torch\n"
        "from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments\n\n"
        "from callbacks import HeldOutProbe\n\n\n"
        "def build_trainer(out_dir):\n"
        "    ids = torch.randint(0, 64, (4, 8))\n"
        "    data = [{'input_ids': row, 'labels': row} for row in ids]\n"
        "    cfg = LlamaConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, vocab_size=64)\n"
        "    args = TrainingArguments(output_dir=out_dir, per_device_train_batch_size=2, max_steps=1, gradient_checkpointing=True,\n"
        "                             report_to=[], save_strategy='no', use_cpu=True)\n"
        "    probe = HeldOutProbe({'input_ids': ids[:2], 'labels': ids[:2]})\n"
        "    return Trainer(model=LlamaForCausalLM(cfg), args=args, train_dataset=data, callbacks=[probe])\n\n\n"
        "if __name__ == '__main__':\n"
        "    with tempfile.TemporaryDirectory() as d:\n"
        "        build_trainer(d).train()\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT008", "--transformers-version", "5.23")
    assert (finding["path"], finding["code"]) == ("callbacks.py", "CKPT008"), finding
    evidence = "; ".join(finding["confirmation"]["evidence"])
    assert finding["confirmation"]["verdict"] == "confirmed", evidence
    assert "the main of finetune.py uses HeldOutProbe" in evidence, evidence


def test_a_flag_that_gates_the_models_checkpoint_helper_is_switched_on_for_a_finding_in_a_part(tmp_path, monkeypatch):
    """The finding sits in a layer's file; the model that builds the layer checkpoints its stages
    through a helper only after `enable_checkpointing()`, which nothing in the project calls. The
    run switches that flag on, so the recompute draws again and the finding is shown."""
    (tmp_path / "layers.py").write_text(
        "import random\n\n"
        "from torch import nn\n\n\n"
        "class StochasticBlock(nn.Module):\n"
        "    def __init__(self, dim, p=0.5):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(dim, dim)\n"
        "        self.p = p\n\n"
        "    def forward(self, x):\n"
        "        if self.training and random.random() < self.p:\n"
        "            return x\n"
        "        return x + self.fc(x)\n"
    )
    (tmp_path / "utils.py").write_text(
        "import torch.utils.checkpoint as cp\n\n\n"
        "def run_stages(stages, x):\n"
        "    for stage in stages:\n"
        "        x = cp.checkpoint(stage, x, use_reentrant=False)\n"
        "    return x\n"
    )
    (tmp_path / "net.py").write_text(
        "from torch import nn\n\n"
        "from layers import StochasticBlock\n"
        "from utils import run_stages\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self, dim=8, depth=4):\n"
        "        super().__init__()\n"
        "        self.stages = nn.ModuleList(StochasticBlock(dim) for _ in range(depth))\n"
        "        self.head = nn.Linear(dim, 2)\n"
        "        self.memory_saving = False\n\n"
        "    def enable_checkpointing(self):\n"
        "        self.memory_saving = True\n\n"
        "    def forward(self, x):\n"
        "        if not self.memory_saving:\n"
        "            for stage in self.stages:\n"
        "                x = stage(x)\n"
        "        else:\n"
        "            x = run_stages(self.stages, x)\n"
        "        return self.head(x)\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT002")
    evidence = "; ".join(finding["confirmation"]["evidence"])
    assert (finding["path"], finding["confirmation"]["verdict"]) == ("layers.py", "confirmed"), evidence
    assert "`memory_saving` switched on" in evidence, evidence


def test_a_loop_function_runs_through_the_main_that_trains_with_its_neighbour(tmp_path, monkeypatch):
    """`evaluate(model, ...)` under inference_mode, in a loops file whose `train_one_epoch` does the
    backward: the entry script calls both, and its main is what --confirm runs (it trains, through
    the other function of the target's file)."""
    (tmp_path / "model.py").write_text(
        "from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.block = nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n"
        "        if self.training:\n"
        "            return checkpoint(self.block, x, use_reentrant=False)\n"
        "        return self.block(x)\n"
    )
    (tmp_path / "loops.py").write_text(
        "import torch\n\n\n"
        "def train_one_epoch(model, batches, opt):\n"
        "    model.train()\n"
        "    for x in batches:\n"
        "        model(x).pow(2).mean().backward()\n"
        "        opt.step()\n\n\n"
        "@torch.inference_mode()\n"
        "def evaluate(model, batches):\n"
        "    return [model(x).mean().item() for x in batches]\n"
    )
    (tmp_path / "run.py").write_text(
        "import torch\n\nfrom loops import evaluate, train_one_epoch\nfrom model import Net\n\n\n"
        "def main():\n"
        "    model = Net()\n"
        "    batches = [torch.randn(2, 4) for _ in range(2)]\n"
        "    train_one_epoch(model, batches, torch.optim.SGD(model.parameters(), lr=0.1))\n"
        "    print(evaluate(model, batches))\n\n\n"
        'if __name__ == "__main__":\n'
        "    main()\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT008")
    evidence = "; ".join(finding["confirmation"]["evidence"])
    assert (finding["path"], finding["confirmation"]["verdict"]) == ("loops.py", "confirmed"), evidence
    assert "run.py" in evidence, evidence


def test_a_model_the_main_builds_through_a_registry_of_its_package_runs_through_that_main(tmp_path, monkeypatch):
    """`create_model(args.model)` returns `MODELS[name](**kwargs)` of the package's `__init__`, and
    the training script switches checkpointing on with `set_grad_checkpointing()`: that script's
    main runs the model as it trains it (built bare, it would checkpoint nothing)."""
    package = tmp_path / "models"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from .net import Net\n\nMODELS = {'net': Net}\n\n\ndef create_model(name, **kwargs):\n    return MODELS[name](**kwargs)\n"
    )
    (package / "net.py").write_text(
        "from torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.stem = nn.Linear(4, 4)\n"
        "        self.grad_checkpointing = False\n\n"
        "    def set_grad_checkpointing(self, enable=True):\n"
        "        self.grad_checkpointing = enable\n\n"
        "    def forward(self, x):\n"
        "        if self.grad_checkpointing:\n"
        "            return checkpoint(self.stem, x, use_reentrant=True)\n"
        "        return self.stem(x)\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\n\nfrom models import create_model\n\n\n"
        "def main():\n"
        "    model = create_model('net')\n"
        "    model.set_grad_checkpointing(True)\n"
        "    model(torch.randn(2, 4)).sum().backward()\n\n\n"
        'if __name__ == "__main__":\n'
        "    main()\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT001")
    evidence = "; ".join(finding["confirmation"]["evidence"])
    assert (finding["path"], finding["confirmation"]["verdict"]) == ("models/net.py", "confirmed"), evidence
    assert "train.py" in evidence, evidence


def test_an_escape_from_one_block_of_a_checkpointed_loop_owns_the_crash_it_causes(tmp_path, monkeypatch):
    """Only the aligned block appends its features to a list the model keeps (REPA): the loop
    checkpoints every block, but the crash of step 2 is the escape's, since the checkpoint that ran
    the append is among them."""
    (tmp_path / "sit.py").write_text(
        "import torch\nfrom torch import nn\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, sink=None):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(4, 4)\n"
        "        self.out = nn.Linear(4, 4)\n"
        "        self.sink = sink\n\n"
        "    def forward(self, x, c):\n"
        "        x = x + self.fc(x) * c\n"
        "        if self.sink is not None:\n"
        "            self.sink.append(x)\n"
        "        return x + self.out(x)\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.feats = []\n"
        "        self.cond = nn.Linear(1, 4)\n"
        "        self.blocks = nn.ModuleList(Block(self.feats if i == 1 else None) for i in range(3))\n\n"
        "    def forward(self, x, t):\n"
        "        c = self.cond(t)\n"
        "        for blk in self.blocks:\n"
        "            x = checkpoint(blk, x, c, use_reentrant=False)\n"
        "        return x\n\n\n"
        'if __name__ == "__main__":\n'
        "    model = Net()\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for _ in range(2):\n"
        "        out = model(torch.randn(2, 4), torch.rand(2, 1))\n"
        "        feats = list(model.feats)\n"
        "        model.feats.clear()\n"
        "        loss = out.pow(2).mean() + sum(f.pow(2).mean() for f in feats)\n"
        "        loss.backward()\n"
        "        opt.step()\n"
    )
    finding = only_finding_confirmed(tmp_path, monkeypatch, "--select", "CKPT007")
    evidence = "; ".join(finding["confirmation"]["evidence"])
    assert (finding["line"], finding["confirmation"]["verdict"]) == (16, "confirmed"), evidence
    assert "ran line 16 inside its region" in evidence, evidence
