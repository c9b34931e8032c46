"""fixtures/real_world/cli_domain_vectors*.py run as scripts, with their command-line defaults.

Both swap a frozen table (`nn.Embedding.from_pretrained`) into a model switched to reentrant
checkpointing. The Llama the first script's `--model-name` names by default feeds its decoder layers
from that table alone: their checkpoints get no input that requires grad, so the optimizer never
moves them while it moves the head (CKPT005). GPT-2, the look-alike's default, adds the trainable
position table `wpe`: every block trains. The hub is replaced by tiny models of the architecture
each name spells (no download).
"""

import runpy
import sys

import pytest

torch = pytest.importorskip("torch")

from ckpt_runtime import FIXTURES, NO_INPUT_GRAD_WARNING, capture_warnings, real_transformers, warning_texts  # noqa: E402,F401


def tiny_model(transformers, name):
    if "llama" in name.lower():
        config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2)
        return transformers.LlamaForCausalLM(config)
    assert "gpt2" in name
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_positions=32))


def run_script(name, transformers, monkeypatch):
    """Run the script as `python name.py`; the model it loads, with its weights before training."""
    loaded = {}

    def from_pretrained(checkpoint, *args, **kwargs):
        torch.manual_seed(0)
        loaded["model"] = tiny_model(transformers, checkpoint)
        loaded["checkpoint"] = checkpoint
        loaded["before"] = {k: v.detach().clone() for k, v in loaded["model"].named_parameters()}
        return loaded["model"]

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    monkeypatch.setattr(sys, "argv", [name])
    runpy.run_path(str(FIXTURES / "real_world" / name), run_name="__main__")
    return loaded


def moved(loaded, part):
    after = dict(loaded["model"].named_parameters())
    return {name: not torch.equal(after[name], before) for name, before in loaded["before"].items() if part in name and after[name].requires_grad}


def test_the_default_llama_trains_its_head_but_never_its_layers(real_transformers, monkeypatch, capture_warnings):
    loaded = run_script("cli_domain_vectors.py", real_transformers, monkeypatch)
    assert loaded["checkpoint"] == "meta-llama/Llama-3.2-1B"  # the option's default
    layers = moved(loaded, ".layers.")
    assert layers and not any(layers.values())
    assert all(moved(loaded, "lm_head").values()) and moved(loaded, "lm_head")
    assert NO_INPUT_GRAD_WARNING in warning_texts(capture_warnings)


def test_the_default_gpt2_trains_every_block(real_transformers, monkeypatch, capture_warnings):
    loaded = run_script("cli_domain_vectors_gpt2.py", real_transformers, monkeypatch)
    assert loaded["checkpoint"] == "openai-community/gpt2"
    blocks = {name: changed for name, changed in moved(loaded, ".h.").items() if name.endswith("weight")}
    assert blocks and all(blocks.values())
    assert NO_INPUT_GRAD_WARNING not in warning_texts(capture_warnings)
