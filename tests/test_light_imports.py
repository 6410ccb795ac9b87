"""Ensembling and EDA import without torch or transformers (a CPU-only EDA kernel, a quick blend)."""

import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.mark.parametrize("module", ["utils.ensemble", "utils.eda", "utils.metrics", "utils.data"])
def test_module_imports_without_torch_or_transformers(module):
    code = (f"import sys, {module}; heavy = sorted(m for m in ('torch', 'transformers', 'accelerate') "
            "if m in sys.modules); print(','.join(heavy))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "", f"{module} imported {res.stdout.strip()}"
