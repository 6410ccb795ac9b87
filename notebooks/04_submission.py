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
# runs from the attached models dataset. The runs know their competition (columns, input text,
# task, metric): every fold of every run predicts its test file in length-sorted batches (fp16
# autocast on GPU), folds are averaged, runs blended with the weights of notebook 3, labels made with
# the fitted decision rule, and the submission is written in `sample_submission.csv`'s columns and
# row order, checked.
#
# A run trained with LoRA (a decoder LLM) holds its adapters only: its base model must be attached
# too, as a Kaggle Model or a dataset (the bundle's `--base-model-source` attaches it). Each fold
# finds it under the input by itself, by name or by content, and checks it is the one it was
# trained on; `base_model` gives its folder instead.
#
# A ranking competition with a catalogue (Eedi) reads it beside the test file. With a `reranker`
# (a run of `utils.rerank`, in the models dataset beside its one retriever run) the retriever ranks
# the catalogue and the reranker reorders each row's top N.

# %% tags=["parameters"]
kit_dataset = "commonlit-kit-code"  # Kaggle: the dataset holding utils/
models_dataset = "commonlit-kit-models"  # Kaggle: the dataset holding the run folders
runs = ["minilm-attention", "mpnet-attention"]  # run folder names
blend_json = "blend.json"  # beside the runs; empty: equal weights
data_dir = ""  # empty: the competition input (Kaggle) or data/ (local)
runs_dir = ""  # empty: the models dataset on Kaggle, else utils.env.working_dir() / "runs"
out_dir = ""  # empty: utils.env.working_dir(), /kaggle/working on Kaggle
base_model = ""  # a LoRA run's base model folder; empty: as recorded, or an attached Kaggle Model / dataset holding it
reranker = ""  # a reranker run folder name: reorders the one retriever run's top N; empty: none
batch_size = 64
colab_install = "/content/drive/MyDrive/kaggle-text-kit"  # Colab: pip-installed from here

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
from utils.predict import run_competition, submit

root = env.runs_dir(runs_dir, models_dataset)
paths = [root / r for r in runs]
comp = run_competition(paths[0])
data = env.competition_dir(data_dir, comp.slug)
out = Path(out_dir) if out_dir else env.working_dir()
print(f"{comp.title or comp.slug} | runs: {runs} | blend: {blend_json or 'equal weights'} |",
      f"reranker: {reranker} |" if reranker else "", "device:",
      "cuda" if torch.cuda.is_available() else "cpu")

# %%
timings = {}
if reranker:  # retrieve with the one run, then rerank its top N
    from utils import rerank

    assert len(paths) == 1 and not blend_json, "a reranker follows one retriever run, unblended"
    prior = rerank.prior(root / reranker)  # the weight of the retriever's ranks, fitted on its out-of-fold file
    print(f"final order: the reranker's mixed with the retriever's ranks, weight {prior['weight']:g} "
          f"({prior['metric']} out of fold: reranker alone {prior['reranker']:.4f}, "
          f"mixed {prior['mixed_in_sample']:.4f})")
    submission = rerank.predict(paths[0], root / reranker, data / comp.test_file, out / "submission.csv",
                                timings=timings, weight=prior["weight"], batch_size=batch_size,
                                base_model=base_model or None)
else:
    submission = submit(paths, data / comp.test_file, out / "submission.csv",
                        blend_json=root / blend_json if blend_json else None, timings=timings,
                        batch_size=batch_size, base_model=base_model or None)
display(pd.DataFrame({"seconds": timings}).style.format("{:.1f}"))
print("wrote", out / "submission.csv", f"({len(submission)} rows: {', '.join(submission.columns)})")
display(submission.head())

# %%
train_csv = data / comp.train_file
train = pd.read_csv(train_csv) if train_csv.exists() else None
# each target: the submission beside the training target
numeric = [c for c in comp.target_cols if c in submission and pd.api.types.is_numeric_dtype(submission[c])]
for col in numeric[:6]:  # a ranking's answers (ids or letters, space-separated) have no histogram
    fig = plots.prediction_hist(submission[col], train[col] if train is not None and col in train else None)
    fig.axes[0].set_title(f"{col}: submission vs the training target")
    plots.save_fig(fig, out / f"predictions_{col}.png")
