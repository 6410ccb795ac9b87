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
# # 1 · Exploratory data analysis: what makes an excerpt hard to read?
#
# CommonLit's `target` is a Bradley-Terry easiness score from teachers' pairwise comparisons
# (higher = easier), with a `standard_error` per excerpt. This notebook looks at the target and its
# noise, the surface statistics and classic readability formulas that predict it, the extremes, and
# ends with two cross-validated baselines: the numbers every transformer has to beat.
# Every figure is also saved as a PNG in `out_dir`.

# %% tags=["parameters"]
data_dir = ""  # empty: found by utils.env (Kaggle input, data/, $COMMONLIT_DATA)
out_dir = ""  # empty: utils.env.working_dir() / "eda"
max_rows = 0  # 0: every row; else a random subsample (seed fold_seed, as 02_train)
folds = 5  # baselines' CV folds: as 02_train's `folds` and `fold_seed`, the same folds
fold_seed = 42
kit_dataset = "commonlit-kit-code"  # Kaggle: the dataset holding utils/
wheels_dir = ""  # empty: the kit dataset's wheels/ (Kaggle), where textstat is installed from
colab_install = "/content/drive/MyDrive/commonlit-kit"  # Colab: pip-installed from here

# %% [markdown]
# Setup: make `import utils` find the kit (attached Kaggle dataset, Colab install, or local checkout),
# then make sure textstat is the pinned version (the formulas' numbers depend on it): an offline
# Kaggle kernel pip-installs it from the wheels in the kit's code dataset.

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

from utils import eda, wheels

if kit_dirs and not wheels_dir:
    wheels_dir = kit_dirs[0] / wheels.WHEELS_DIR
print(wheels.ensure("textstat", eda.TEXTSTAT_VERSION, wheels_dir or None))

# %%
from utils import env, plots
from utils.data import make_folds, read_csv
from utils.files import write_json

data = env.competition_dir(data_dir)
out = Path(out_dir) if out_dir else env.working_dir() / "eda"
df = read_csv(data / "train.csv")
if max_rows:
    df = df.sample(n=min(max_rows, len(df)), random_state=fold_seed).reset_index(drop=True)
print(f"{len(df)} excerpts from {data} | figures to {out}")

# %% [markdown]
# ## The target and its noise
# The target is roughly normal and centred near -1: most excerpts are harder than the reference
# excerpt (target 0). Its standard error, about 0.5, is half a target standard deviation: the labels
# themselves are noisy, so no model gets close to 0 (the best Kaggle solutions scored about 0.45).

# %%
plots.save_fig(plots.plot_distributions(df), out / "target_distribution.png")

# %% [markdown]
# Look for the U shape: the easiest and the hardest excerpts carry the largest standard errors
# (a Bradley-Terry score is least certain at the ends of the scale). The reference excerpt that
# every score is relative to (target 0, standard error 0) is left out of both plots.

# %%
plots.save_fig(plots.plot_target_vs_se(df), out / "target_vs_standard_error.png")

# %% [markdown]
# ## Surface statistics
# Long words and long sentences make a text harder; the number of words barely matters (excerpts
# were cut to about 135-205 words). Look at the sign and size of `r` in each title.

# %%
features = eda.text_features(df["excerpt"])
plots.save_fig(plots.plot_stats_vs_target(features, df["target"]), out / "text_stats_vs_target.png")

# %% [markdown]
# ## Classic readability formulas
# Flesch, Flesch-Kincaid, SMOG and the others combine the same counts with fixed weights.
# Each alone correlates at about |r| 0.5 with the target: useful, but far from enough.

# %%
plots.save_fig(
    plots.plot_readability_vs_target(features, df["target"]), out / "readability_vs_target.png"
)
plots.save_fig(plots.plot_correlations(features, df["target"]), out / "feature_correlations.png")

# %% [markdown]
# ## The extremes
# Read them: the easiest are short, concrete sentences written for children; the hardest are old
# technical or literary prose with long sentences and rare words.

# %%
plots.save_fig(plots.plot_extremes(df), out / "easiest_hardest_excerpts.png")

# %% [markdown]
# ## Baselines: the numbers to beat
# The same folds for all, and the same as training: `utils.data.make_folds(df, folds, fold_seed)`
# (stratified on the binned target), which 02_train uses with the same `folds` and `fold_seed`.
# Readability features + ridge learns how to weigh the counts above; TF-IDF (1-2 grams) + ridge
# learns which words signal difficulty. Their out-of-fold predictions are saved as run folders
# (`baselines/*/oof.csv`, `folds.csv`) that the ensemble notebook can blend with the transformers.

# %%
fold_ids = make_folds(df, folds, fold_seed)
rmse_mean, _ = eda.mean_cv(df, fold_ids)
rmse_readability, oof_readability = eda.readability_ridge_cv(df, fold_ids, features=features)
rmse_tfidf, oof_tfidf = eda.tfidf_ridge_cv(df, fold_ids)
eda.write_oof_run(out / "baselines" / "readability-ridge", df, fold_ids, oof_readability)
eda.write_oof_run(out / "baselines" / "tfidf-ridge", df, fold_ids, oof_tfidf)
baselines = {
    "predict_mean_rmse": rmse_mean,
    "readability_ridge_rmse": rmse_readability,
    "tfidf_ridge_rmse": rmse_tfidf,
}
write_json(out / "baselines.json", baselines)
print(f"TF-IDF + ridge CV RMSE {rmse_tfidf:.3f}: the number every model must beat")
plots.save_fig(plots.plot_baselines(baselines), out / "baselines.png")
