"""User code that cannot be built, hangs, crashes or prints never crashes ckptlint or corrupts its
output; each such target gets "could not run" with a reason a user can act on."""

from __future__ import annotations

import json
import textwrap
import time

import pytest
from click.testing import CliRunner
from confirm_helpers import confirm_all, finding, line_in

from ckptlint.cli import main

pytest.importorskip("torch")

HEADER = """\
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
"""

NEEDS_ARGUMENTS = HEADER + """
class Needy(nn.Module):
    def __init__(self, config):
        super().__init__()
        # A list of widths: no guessed config attribute (a number) can be iterated.
        self.block = nn.Sequential(*[nn.Linear(a, b) for a, b in zip(config.widths, config.widths[1:])])

    def forward(self, x):
        return checkpoint(self.block, x)
"""

ODD_INPUT = HEADER + """
class Odd(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)

    def forward(self, batch):
        # A project object whose method builds the tensor: nothing to synthesise it from.
        return checkpoint(self.block, batch.load_features(), use_reentrant=False)
"""

HANGS = HEADER + """
import time


class Sleepy(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)

    def forward(self, x):
        time.sleep(600)
        return checkpoint(self.block, x)
"""

EXITS = HEADER + """
import os


class Quitter(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)

    def forward(self, x):
        print("about to leave")
        os._exit(3)
        return checkpoint(self.block, x)
"""

SEGFAULTS = HEADER + """
import ctypes


class Crasher(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)

    def forward(self, x):
        ctypes.string_at(0)
        return checkpoint(self.block, x)
"""

RAISES_AT_IMPORT = HEADER + """
raise RuntimeError("no GPU cluster configured")


class Broken(nn.Module):
    def forward(self, x):
        return checkpoint(self.block, x)
"""

SAME_FILE_EXAMPLE = HEADER + """
import ckptlint


class Needy(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.block = nn.Linear(width, width)

    def forward(self, x):
        return checkpoint(self.block, x)


@ckptlint.example(Needy)
def small_needy():
    return Needy(6), (torch.randn(3, 6),), {}
"""

TRAINING_FUNCTION_EXAMPLE = HEADER + """
import ckptlint


def train_step(model, batch):
    out = checkpoint(model, batch)
    out.pow(2).mean().backward()


@ckptlint.example(train_step)
def one_step():
    model = nn.Sequential(nn.Linear(5, 5), nn.ReLU())
    return model, (model, torch.randn(2, 5)), {}
"""

VALIDATION_STEP = HEADER + """

class LitNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(6, 6)
        self.block = nn.Sequential(nn.Linear(6, 6), nn.ReLU())

    def forward(self, x):
        return self.block(self.stem(x))

    def validation_step(self, batch, batch_idx):
        return checkpoint(self.block, self.stem(batch), use_reentrant=False).mean()
"""


def write(tmp_path, name, source):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    """All misbehaving targets in one confirm() run, with a short per-target timeout."""
    tmp = tmp_path_factory.mktemp("confirm_robustness")
    cases = {
        "needs_arguments": (write(tmp, "needs_arguments.py", NEEDS_ARGUMENTS), "Needy", "checkpoint(", "CKPT006"),
        "odd_input": (write(tmp, "odd_input.py", ODD_INPUT), "Odd", "checkpoint(", "CKPT001"),
        "hangs": (write(tmp, "hangs.py", HANGS), "Sleepy", "checkpoint(", "CKPT006"),
        "exits": (write(tmp, "exits.py", EXITS), "Quitter", "checkpoint(", "CKPT006"),
        "segfaults": (write(tmp, "segfaults.py", SEGFAULTS), "Crasher", "checkpoint(", "CKPT006"),
        "raises_at_import": (write(tmp, "raises_at_import.py", RAISES_AT_IMPORT), "Broken", "checkpoint(", "CKPT006"),
        "same_file_example": (write(tmp, "same_file_example.py", SAME_FILE_EXAMPLE), "Needy", "checkpoint(", "CKPT006"),
        "training_function": (write(tmp, "training_function.py", TRAINING_FUNCTION_EXAMPLE), "train_step", "checkpoint(", "CKPT006"),
        "validation_step": (write(tmp, "validation_step.py", VALIDATION_STEP), "LitNet", "checkpoint(", "CKPT008"),
    }
    findings = {key: finding(path, line_in(path, scope, needle), code) for key, (path, scope, needle, code) in cases.items()}
    started = time.monotonic()
    results = confirm_all(findings.values(), timeout=4.0, examples=[])
    elapsed = time.monotonic() - started
    return {key: results[f] for key, f in findings.items()}, elapsed


def test_module_that_cannot_be_built_says_why_and_what_to_do(verdicts):
    confirmation = verdicts[0]["needs_arguments"]
    assert confirmation.verdict == "could not run"
    reason = confirmation.evidence[0]
    assert "cannot build and feed `Needy`" in reason and "missing 1 required positional argument: 'config'" in reason
    assert "@ckptlint.example(Needy)" in reason
    assert confirmation.cause == "needs an example"
    # A factory to paste, pre-filled with what is known: the target, its constructor, its inputs.
    assert '@ckptlint.example("needs_arguments.Needy")' in confirmation.example
    assert "model = Needy(...)" in confirmation.example and "return model, (...,), {}" in confirmation.example


def test_input_that_cannot_be_synthesised_says_so(verdicts):
    confirmation = verdicts[0]["odd_input"]
    assert confirmation.verdict == "could not run"
    assert "no synthesised input worked for `Odd.forward(batch)`" in confirmation.evidence[0]
    assert "@ckptlint.example(Odd)" in confirmation.evidence[0]


def test_hanging_module_is_killed_at_the_timeout(verdicts):
    confirmation = verdicts[0]["hangs"]
    assert confirmation.verdict == "could not run"
    assert confirmation.evidence[0].startswith("timed out after 4 s; the process was killed")
    assert verdicts[1] < 30  # the 600 s sleep did not hold the run


def test_process_exit_in_user_code_is_reported(verdicts):
    confirmation = verdicts[0]["exits"]
    assert confirmation.verdict == "could not run"
    assert "exited with code 3 before reporting: about to leave" in confirmation.evidence[0]


def test_segfault_in_user_code_is_reported(verdicts):
    confirmation = verdicts[0]["segfaults"]
    assert confirmation.verdict == "could not run"
    assert "was killed by SIGSEGV" in confirmation.evidence[0]


def test_import_error_in_user_code_is_reported(verdicts):
    confirmation = verdicts[0]["raises_at_import"]
    assert confirmation.verdict == "could not run"
    assert "raises_at_import.py failed: RuntimeError: no GPU cluster configured" in confirmation.evidence[0]


def test_example_factory_in_the_same_file_is_used(verdicts):
    confirmation = verdicts[0]["same_file_example"]
    assert confirmation.verdict == "confirmed", confirmation
    assert confirmation.evidence[0].startswith("checkpoint at same_file_example.py:")
    assert "ran Needy with example small_needy()" in confirmation.evidence[-1]


def test_training_function_runs_through_its_example(verdicts):
    confirmation = verdicts[0]["training_function"]
    assert confirmation.verdict == "confirmed", confirmation
    assert "ran with use_reentrant omitted" in confirmation.evidence[0]
    assert confirmation.target.endswith("::train_step")


PRINTS = HEADER + """
print("hello from user code")


class Loud(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)

    def forward(self, x):
        print("forward!")
        return checkpoint(self.block, x)


model = Loud()  # the whole model: its input is data
"""


def test_user_output_never_reaches_ckptlint_output(project):
    project({"loud.py": PRINTS})
    result = CliRunner().invoke(main, ["loud.py", "--confirm", "--format", "json", "--no-cache", "--torch-version", "2.13"])
    assert result.exit_code == 1
    document = json.loads(result.stdout)  # one JSON document, nothing else
    assert {f["code"] for f in document["findings"]} == {"CKPT001", "CKPT006"}
    assert {f["confirmation"]["verdict"] for f in document["findings"]} == {"confirmed"}
    assert "hello" not in result.output and "forward!" not in result.output


def test_findings_read_from_stdin_without_a_file_name_cannot_run():
    result = CliRunner().invoke(main, ["-", "--confirm", "--format", "json", "--no-cache", "--torch-version", "2.13"], input=NEEDS_ARGUMENTS)
    findings = json.loads(result.stdout)["findings"]
    assert findings and all(f["confirmation"]["verdict"] == "could not run" for f in findings)
    assert all("--stdin-filename" in f["confirmation"]["evidence"][0] for f in findings)


def test_lightning_validation_step_runs_without_grad_like_lightning(verdicts):
    confirmation = verdicts[0]["validation_step"]
    assert confirmation.verdict == "confirmed", confirmation
    assert confirmation.target.endswith("::LitNet.validation_step")
    assert "ran with grad disabled" in confirmation.evidence[0]
    assert "ran LitNet().validation_step(batch=float32[2, 6], batch_idx=0)" in confirmation.evidence[-1]


def test_a_fifo_named_like_python_in_the_project_is_not_read(tmp_path):
    """The project's files are looked through from the working directory; a FIFO named `*.py` in
    it (open() would wait for a writer forever) reads as empty instead of hanging --confirm."""
    import os
    import threading

    from ckptlint.confirm import usage

    pipe = tmp_path / "pipe.py"
    os.mkfifo(pipe)
    (tmp_path / "model.py").write_text("class Net:\n    pass\n")
    read: dict[str, str] = {}
    reader = threading.Thread(target=lambda: read.update({f: usage.text_of(f) for f in usage.project_files(str(tmp_path / "model.py"), str(tmp_path))}), daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():
        with open(pipe, "w"):  # let the blocked open() return, so the thread ends
            pass
        pytest.fail("reading the project's files blocked on a FIFO")
    assert read[str(pipe)] == "" and "class Net" in read[str(tmp_path / "model.py")]
