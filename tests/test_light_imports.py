"""Ensembling and EDA import without torch or transformers (a CPU-only EDA kernel, a quick blend)."""

import subprocess
import sys

import pytest
from conftest import ROOT

# versions: which of transformers/accelerate/kaggle the light modules pull in on import
pytestmark = pytest.mark.versions


# utils.kaggle: building the datasets' metadata and the kernels, and printing the kaggle commands,
# loads no model (utils.bundle imports the model inside the two functions that check fp16 weights).
@pytest.mark.parametrize("module", ["utils.ensemble", "utils.eda", "utils.metrics", "utils.data", "utils.kaggle",
                                    "utils.runs"])
def test_module_imports_without_torch_or_transformers(module):
    code = (f"import sys, {module}; heavy = sorted(m for m in ('torch', 'transformers', 'accelerate') "
            "if m in sys.modules); print(','.join(heavy))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "", f"{module} imported {res.stdout.strip()}"
