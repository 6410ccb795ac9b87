# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 3 · Blend runs
#
# Any number of runs trained by notebook 2 on the **same folds** (same `fold_seed`, hence the same
# `folds.csv`): other seeds, pooling modes or backbones. They are blended with non-negative weights
# fitted on their out-of-fold predictions. The blend's RMSE is estimated honestly: for each fold,
# the weights are fitted on the other folds and scored on the held-out one. The weights are saved
# as `blend.json` for the submission notebook.
#
# Runs of one backbone correlate highly and their blend gains little; other seeds of the same run
# average out training noise (4th place averaged 5 seeds x 5 folds); other backbones gain most.

# %% tags=["parameters"]
runs = ["roberta-base-attention", "roberta-large-attention"]  # run folder names in runs_dir
with_tfidf = True  # also blend TF-IDF + ridge fitted on the runs' folds (a CV estimate only)
data_dir = ""  # empty: found by utils.env (for train.csv's texts when with_tfidf)
runs_dir = ""  # empty: the models dataset on Kaggle, else utils.env.working_dir() / "runs"
models_dataset = "commonlit-kit-models"  # Kaggle: the dataset holding the run folders
out_dir = ""  # empty: beside the runs when writable, else utils.env.working_dir()
kit_dataset = "commonlit-kit-code"  # Kaggle: the dataset holding utils/
colab_install = "/content/drive/MyDrive/commonlit-kit"  # Colab: pip-installed from here

# %% [markdown]
# Setup: make `import utils` find the kit (attached Kaggle dataset, Colab install, or local checkout).

# %%
import os
import subprocess
import sys
from pathlib import Path

kaggle_input = Path(os.environ.get("KAGGLE_INPUT_ROOT", "/kaggle/input"))
kit_dirs = [
    d
    for d in [kaggle_input / kit_dataset, *kaggle_input.glob(f"datasets/*/{kit_dataset}")]
    if (d / "utils" / "__init__.py").is_file()
]
if kit_dirs:
    sys.path.insert(0, str(kit_dirs[0]))  # at the front: no other `utils` may shadow the kit
elif "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", colab_install], check=True)
elif Path("../utils/__init__.py").is_file():
    sys.path.insert(0, str(Path("..").resolve()))  # a local checkout, run from notebooks/
import utils  # noqa: E402

if kit_dirs:
    assert Path(utils.__file__).resolve().is_relative_to(kit_dirs[0].resolve()), utils.__file__
print("utils", utils.__version__, "from", Path(utils.__file__).parent)

# %%
import pandas as pd
from IPython.display import display

from utils import eda, ensemble, env, plots
from utils.data import read_csv
from utils.files import write_json

root = env.runs_dir(runs_dir, models_dataset)
out = env.output_dir(out_dir, root)
paths = [root / r for r in runs]
report = ensemble.blend_report(paths)
oofs = ensemble.load_oofs(paths)

# %% [markdown]
# ## Single runs, their plain average and the fitted blend

# %%
display(ensemble.summary(report).style.format("{:.4f}"))
print("weights:", dict(zip(report["runs"], [round(w, 3) for w in report["weights"]])))
display(pd.DataFrame(report["correlation"], report["runs"], report["runs"]).style.format("{:.4f}"))
gain = min(report["rmse"].values()) - report["rmse_blend_cv"]
print(f"honest gain of the blend over the best single run: {gain:+.4f} RMSE")

# %%
fig = plots.blend_figure(report, oofs)
plots.save_fig(fig, out / "figures" / "blend.png")

# %% [markdown]
# The weights per CV fold show how stable the blend is: weights that swing from fold to fold are
# fitting noise.

# %%
display(pd.DataFrame(report["weights_per_fold"], index=report["runs"]).T.style.format("{:.3f}"))

# %%
ensemble.save_blend(out / "blend.json", report)
print("saved", out / "blend.json")

# %% [markdown]
# ## Does a classic baseline add anything?
# TF-IDF (1-2 grams) + ridge, fitted on the runs' own folds (so its out-of-fold predictions are as
# honest as theirs), joins the blend as one more member. A CV estimate only: `blend.json` above
# keeps the runs, which the submission notebook predicts with.

# %%
if with_tfidf:
    train = read_csv(env.competition_dir(data_dir) / "train.csv").set_index("id").loc[oofs["id"]]
    tfidf = eda.tfidf_ridge_oof(train["excerpt"], train["target"], oofs["fold"].to_numpy())
    with_baseline = ensemble.blend_report(paths, extra={"tfidf-ridge": pd.Series(tfidf, oofs["id"])})
    display(ensemble.summary(with_baseline).style.format("{:.4f}"))
    print("weights:", dict(zip(with_baseline["runs"], [round(w, 3) for w in with_baseline["weights"]])))
    write_json(out / "blend_with_tfidf.json", with_baseline)
