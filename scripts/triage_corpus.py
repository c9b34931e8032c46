"""Lint the real-code corpus and check every finding against its recorded verdict.

    python scripts/triage_corpus.py            # fetch (pip download) if needed, lint, check, rewrite docs
    python scripts/triage_corpus.py --no-write # only check

The corpus is the benchmark's (pinned wheels of transformers, diffusers, timm, peft and accelerate)
plus older releases and projects built on them where checkpointing misuse was reported; all are
fetched by the benchmark's own `fetch_corpus` (the wheel, or the sdist when there is none). Every finding must have a verdict in
docs/corpus-verdicts.json, and every verdict a finding: the script exits 1 otherwise, so a change
in the analysis that adds or drops a finding on real code is noticed and triaged.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VERDICTS = REPO / "docs" / "corpus-verdicts.json"
REPORT = REPO / "docs" / "corpus-triage.md"
# transformers semantics to lint under: today's default, and the 4.x default (use_reentrant=True).
SEMANTICS = ("5.23", "4.57")
# name, version: linted beside the benchmark's corpora.
FURTHER_CORPORA = (
    ("transformers", "4.40.0"),
    ("colossalai", "0.5.0"),
    ("nemo_toolkit", "3.0.0"),
    ("open_clip_torch", "3.3.0"),
    ("litgpt", "0.5.13"),
    ("mmengine", "0.10.7"),
    ("peft", "0.10.0"),
    ("trl", "1.16.0"),
)


HISTORY = """## False positives fixed in the analysis

Earlier versions of the rules reported these on the same corpus; each was fixed in the model, not
suppressed: `past_key_values.update(...)` in transformers attention layers (the layer wrapper sets
`past_key_values=None` while checkpointing); cache parameters the checkpoint call never passes
(clvp, nemotron_asr_streaming); an eval-only attention-bias cache after `if self.training: return`
(timm efficientformer); non-tensor module state such as `self.shift_size` / `self.input_dtype`
(Swin, CLAP, NLLB-MoE, Switch); BigBird's `np.random` draws after `np.random.seed(self.seed)`
(the recompute replays them); a boolean mask unpacked from a module's tuple output
(Mask2Former); mask helpers fed `inputs_embeds` only for its shape; diffusers blocks built by
factory functions taken for top-level models, and diffusers' own `_gradient_checkpointing_func`
(non-reentrant) taken for transformers'. On the further corpora: transformers 4.40 FocalNet's
`self.modulator` (and, briefly, `self.gates`), stored and read back within the same checkpointed
forward, a scratch attribute the recompute overwrites identically, is no longer an escape
(CKPT007); a class that a library's `_init_weights` type-checks is no longer taken for a submodule;
data2vec-vision's relative position bias, a keyword tensor made afresh for each layer from its
table, is read by one checkpointed call only (measured exact), so it is no longer CKPT003 once a
tensor that requires grad on some path (the `has_relative_position_bias` branch) is followed.
transformers 5.23's Bros, DAB-DETR, LW-DETR and RF-DETR decoders, OmDet-Turbo and PP-DocLayout-V2
(CKPT003 under 4.57 semantics, earlier judged true positives) sit in models whose
`supports_gradient_checkpointing` is not True: `gradient_checkpointing_enable()` raises ("BrosModel
does not support activation checkpointing", measured), so their layers never checkpoint and their
calls are no longer sites; SAM 2's mask decoder family, reported once its tensors' grad was known,
is the same case."""


KNOWN_MISSES = """## Known misses

Misuse in these corpora that ckptlint does not report, found while triaging; each is an open gap of
the analysis, not a verdict:

- `transformers-5.23.0/.../clvp/modeling_clvp.py:721` (CKPT001): the conditioning encoder checkpoints
  raw log-mel features reentrantly, as in 4.40 (reported there, where a conversion script builds the
  model); 5.23 ships no code that builds or loads `ClvpModelForConditionalGeneration`, so its inputs
  are not known to be data.
- `litgpt-0.5.13` LoRA fine-tuning: blocks wrapped by `checkpoint_wrapper` come from a `model`
  parameter handed only to Lightning's strategy, so their class (and its LoRA dropout) is unknown.
- `open_clip_torch-3.3.0`: every checkpoint is non-reentrant (correct); the model comes from
  `create_model_and_transforms()`, so `lock_image_tower()` could not be linked to it either.
- `trl-1.16.0/trl/experimental/online_dpo/online_dpo_trainer.py` (CKPT008): with a PEFT model and no
  reference model, the reference log-probs come from `self._forward(self.model, ...)` under
  `torch.no_grad()` with the adapters disabled, while the model trains with checkpointing on
  (`OnlineDPOConfig` defaults `gradient_checkpointing` to True). `no_grad` is now carried into
  `self._forward`, which runs the model it is handed; what is still not known there is the state
  of `self.model`: `training_step` calls `model.train()` on its `model` argument (the wrapper of
  `self.model` that transformers' training loop hands over), but hands it to `self._generate(...)`
  (into `unwrap_model_for_generation`, `FSDP.summon_full_params`) and `self._forward(...)` before the
  `no_grad` block, whose effect on the mode is not followed, and checkpointing is on only if the
  `args` a caller passes leave `gradient_checkpointing` at its default. (`compute_loss` is no such
  fact: transformers 5.23 also calls it from `prediction_step`, after `model.eval()`.) (Its
  `unwrapped_model.generate(...)` is correct: `unwrap_model_for_generation` turns checkpointing off
  around it.)"""


def load_bench():
    spec = importlib.util.spec_from_file_location("ckptlint_bench", REPO / "bench" / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def lint(root: Path, transformers: str) -> list[dict]:
    command = [sys.executable, "-m", "ckptlint", root.name, "--format", "json", "--no-cache",
               "--torch-version", "2.13", "--transformers-version", transformers]  # fmt: skip
    result = subprocess.run(command, cwd=root.parent, capture_output=True, text=True)
    if result.returncode not in (0, 1):
        sys.exit(f"ckptlint failed on {root.name} (exit {result.returncode}):\n{result.stderr}")
    document = json.loads(result.stdout)
    if document["errors"]:
        sys.exit(f"ckptlint could not check files in {root.name}: {document['errors'][:3]}")
    return document["findings"]


def key(entry: dict) -> tuple:
    return entry["semantics"], entry["path"], entry["line"], entry["code"]


def write_report(findings: list[dict], verdicts: dict[tuple, dict], corpora: list[tuple[str, str]]) -> None:
    counts = Counter((f["semantics"], f["code"], verdicts[key(f)]["verdict"]) for f in findings)
    lines = [
        "# Corpus triage",
        "",
        "Every finding ckptlint reports on real code, with its verdict. Regenerate and check with",
        "`python scripts/triage_corpus.py` (it fails when a finding has no verdict or a verdict no finding).",
        "",
        "Corpus: " + ", ".join(f"{n} {v}" for n, v in corpora) + ". Linted with `--torch-version 2.13` and",
        "`--transformers-version` 5.23 (today's default: non-reentrant) and 4.57 (the 4.x default,",
        "`use_reentrant=True`), because several rules depend on the mode transformers picks.",
        "",
        "| transformers semantics | code | verdict | findings |",
        "|---|---|---|---:|",
    ]
    lines += [f"| {s} | {c} | {v} | {n} |" for (s, c, v), n in sorted(counts.items())]
    lines += ["", HISTORY, "", KNOWN_MISSES, "", "## Findings", "", "| semantics | location | code | verdict | why |", "|---|---|---|---|---|"]
    for finding in sorted(findings, key=key):
        verdict = verdicts[key(finding)]
        lines.append(f"| {finding['semantics']} | `{finding['path']}:{finding['line']}` | {finding['code']} | {verdict['verdict']} | {verdict['why']} |")
    fps = sum(1 for f in findings if verdicts[key(f)]["verdict"] == "false positive")
    lines += ["", f"False positives: {fps} of {len(findings)}.", ""]
    REPORT.write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", type=Path, default=None, help="corpus cache (default: the benchmark's)")
    parser.add_argument("--no-write", action="store_true", help="check only, do not rewrite docs/corpus-triage.md")
    args = parser.parse_args()
    bench = load_bench()
    cache = args.cache_dir or bench.DEFAULT_CACHE
    corpora = list(bench.CORPORA) + list(FURTHER_CORPORA)
    roots = [bench.fetch_corpus(cache, name, version) for name, version in corpora]
    findings = []
    for semantics in SEMANTICS:
        for root in roots:
            findings += [{**f, "semantics": semantics} for f in lint(root, semantics)]
    verdicts = {key(v): v for v in json.loads(VERDICTS.read_text())}
    found = {key(f) for f in findings}
    missing = sorted(found - verdicts.keys())
    stale = sorted(verdicts.keys() - found)
    for entry in missing:
        print("no verdict:", *entry)
    for entry in stale:
        print("verdict without finding:", *entry)
    if not (missing or stale) and not args.no_write:
        write_report(findings, verdicts, corpora)
    print(f"{len(findings)} findings, {len(missing)} without verdict, {len(stale)} stale verdicts")
    return 1 if missing or stale else 0


if __name__ == "__main__":
    sys.exit(main())
