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
# fitted on their out-of-fold predictions: per target for several targets, on the class
# probabilities for classification. The blend is scored in the competition's metric (the runs record
# their competition) and honestly: for each fold, the weights (and a decision rule such as F1's
# threshold) are fitted on the other folds and scored on the held-out one. The weights and the rule
# are saved as `blend.json` for the submission notebook. With `equal_weights` the blend is the plain
# average and nothing is fitted, so runs that share a single finished fold (seeds compared on fold 0)
# blend too.
#
# Runs of one backbone correlate highly and their blend gains little; other seeds of the same run
# average out training noise (4th place averaged 5 seeds x 5 folds); other backbones gain most.
#
# The example blends two backbones: all-MiniLM-L6-v2 (BERT, WordPiece) and all-mpnet-base-v2
# (MPNet, 110M parameters; `python -m utils.models get all-mpnet-base-v2` once, offline after),
# each trained by notebook 2 with its own `model_name` on the same folds:
#
#     python -m utils.train --train-csv data/train.csv --out runs/minilm-attention \
#         --model sentence-transformers/all-MiniLM-L6-v2
#     python -m utils.train --train-csv data/train.csv --out runs/mpnet-attention \
#         --model sentence-transformers/all-mpnet-base-v2
#
# Each fold folder carries its own tokenizer, and a blend reads only the runs' out-of-fold
# predictions, so runs of any backbones, tokenizers and max lengths blend alike.

# %% tags=["parameters"]
runs = ["minilm-attention", "mpnet-attention"]  # run folder names in runs_dir (two backbones)
equal_weights = False  # True: the plain average, nothing fitted (runs that share one finished fold)
with_tfidf = True  # also blend TF-IDF + ridge fitted on the runs' folds (a CV estimate only)
data_dir = ""  # empty: found by utils.env (for train.csv's texts when with_tfidf)
runs_dir = ""  # empty: the models dataset on Kaggle, else utils.env.working_dir() / "runs"
models_dataset = "commonlit-kit-models"  # Kaggle: the dataset holding the run folders
out_dir = ""  # empty: beside the runs when writable, else utils.env.working_dir()
kit_dataset = "commonlit-kit-code"  # Kaggle: the dataset holding utils/
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
import numpy as np
import pandas as pd
from IPython.display import display

from utils import eda, ensemble, env, plots
from utils import runs as runs_table
from utils.files import write_json
from utils.objective import objective_of
from utils.predict import run_competition
from utils.tables import read_table

root = env.runs_dir(runs_dir, models_dataset)
out = env.output_dir(out_dir, root)
paths = [root / r for r in runs]
comp = run_competition(paths[0])  # the runs know their competition: columns, task, metric
report = ensemble.blend_report(paths, equal=equal_weights)
one_output = len(report["outputs"]) == 1 and not comp.span_task  # a span task's outputs: character scores
oofs = ensemble.load_oofs(paths, min_folds=1) if one_output else None  # the rows the report blended
print(f"{comp.title or comp.slug}: {len(paths)} runs, scored by {report['metric']}")

# %% [markdown]
# ## Every run side by side
# All runs in the runs folder (`python -m utils.runs` prints the same table): the settings they
# differ in, the CV in the competition's metric (best first), folds done, minutes, code version.

# %%
all_runs, notes = runs_table.find_runs([root])
for note in notes:
    print(note)
display(runs_table.table(all_runs))

# %% [markdown]
# ## Single runs, their plain average and the fitted blend

# %%
display(ensemble.summary(report).style.format("{:.4f}"))
print("weights:", dict(zip(report["runs"], np.round(report["weights"], 3).tolist())))
display(pd.DataFrame(report["correlation"], report["runs"], report["runs"]).style.format("{:.4f}"))
sign = 1 if report["greater_is_better"] else -1
gain = sign * (report["score_blend_cv"] - sign * max(sign * v for v in report["scores"].values()))
print(f"honest gain of the blend over the best single run: {gain:+.4f} {report['metric']} (> 0: better)")
if report["equal"] and len(report["folds"]) == 1:
    print(f"on one fold ({report['n_rows']} rows) the gain is noisy; finish more folds to be sure of it")

# %%
fig = plots.blend_figure(report, oofs)
plots.save_fig(fig, out / "figures" / "blend.png")

# %% [markdown]
# The weights per CV fold show how stable the blend is: weights that swing from fold to fold are
# fitting noise.

# %%
if report["weights_per_fold"]:  # none when nothing was fitted (equal_weights)
    per_fold = {k: np.asarray(w).reshape(len(report["runs"]), -1).mean(1)
                for k, w in report["weights_per_fold"].items()}
    display(pd.DataFrame(per_fold, index=report["runs"]).T.style.format("{:.3f}"))  # mean over targets

# %%
ensemble.save_blend(out / runs_table.BLEND, report)
print("saved", out / runs_table.BLEND)

# %% [markdown]
# ## Does a classic baseline add anything?
# TF-IDF (1-2 grams) + ridge, fitted on the runs' own folds (so its out-of-fold predictions are as
# honest as theirs), joins the blend as one more member. A CV estimate only: `blend.json` above
# keeps the runs, which the submission notebook predicts with.

# %%
# (not on a single shared fold: the ridge would have no other fold's rows to be fitted on)
if with_tfidf and one_output and len(report["folds"]) > 1 and not objective_of(comp).classes and not comp.text_pair:
    train = read_table(comp, env.competition_dir(data_dir, comp.slug), "train")
    train = train.set_index(comp.id_col).loc[oofs["id"]]
    text = pd.Series(comp.input_texts(train), index=train.index)
    tfidf = eda.tfidf_ridge_oof(text, train[comp.target_cols[0]], oofs["fold"].to_numpy())
    with_baseline = ensemble.blend_report(paths, extra={"tfidf-ridge": pd.Series(tfidf, oofs["id"])},
                                          equal=equal_weights)
    display(ensemble.summary(with_baseline).style.format("{:.4f}"))
    print("weights:", dict(zip(with_baseline["runs"], np.round(with_baseline["weights"], 3).tolist())))
    write_json(out / "blend_with_tfidf.json", with_baseline)
