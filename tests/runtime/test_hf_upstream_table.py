"""The transformers facts CKPT005 reads (ckptlint/model/hf_upstream.py) are what the installed
transformers measures, when it is the version the table was measured on."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ckptlint.model.hf_upstream import MEASURED_ON  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(MEASURED_ON != f"transformers {transformers.__version__}", reason=f"the table was measured on {MEASURED_ON}")
def test_the_table_is_what_the_installed_transformers_measures():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "measure_hf_upstream.py"), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
