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
# # 4 · Offline inference: `submission.csv`
#
# Runs with the internet switched off. `utils` comes from the attached code dataset, the trained
# runs from the attached models dataset. Every fold of every run predicts `test.csv` in
# length-sorted batches (fp16 autocast on GPU), folds are averaged, runs blended with the weights of
# notebook 3, and the checked submission is written.

# %% tags=["parameters"]
kit_dataset = "commonlit-kit-code"  # Kaggle: the dataset holding utils/
models_dataset = "commonlit-kit-models"  # Kaggle: the dataset holding the run folders
runs = ["roberta-base-attention", "roberta-large-attention"]  # run folder names
blend_json = "blend.json"  # beside the runs; empty: equal weights
data_dir = ""  # empty: the competition input (Kaggle) or data/ (local)
runs_dir = ""  # empty: the models dataset on Kaggle, else utils.env.working_dir() / "runs"
out_dir = ""  # empty: utils.env.working_dir(), /kaggle/working on Kaggle
batch_size = 64
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
import torch
from IPython.display import display

from utils import env, plots
from utils.data import read_csv
from utils.predict import load_blend, predict, write_submission

data = env.competition_dir(data_dir)
root = env.runs_dir(runs_dir, models_dataset)
out = Path(out_dir) if out_dir else env.working_dir()
paths = [root / r for r in runs]
test = read_csv(data / "test.csv", target_cols=(), blank="predicted as the training mean")
weights = load_blend(root / blend_json, paths) if blend_json else None
print(f"{len(test)} test rows | runs: {runs} | weights: {weights} | device:",
      "cuda" if torch.cuda.is_available() else "cpu")

# %%
timings = {}
preds = predict(paths, test["excerpt"].tolist(), weights, timings, batch_size=batch_size)
display(pd.DataFrame({"seconds": timings}).style.format("{:.1f}"))

# %%
submission = write_submission(out / "submission.csv", test, preds)
print("wrote", out / "submission.csv")
display(submission.head())

# %%
train_csv = data / "train.csv"
train_target = read_csv(train_csv)["target"] if train_csv.exists() else None
fig = plots.prediction_hist(submission["target"], train_target)
plots.save_fig(fig, out / "predictions.png")
