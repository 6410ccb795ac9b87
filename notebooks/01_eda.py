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
# # 1 · Exploratory data analysis
#
# The competition's data as its description reads it (`competition`): its targets (each one's
# distribution and their correlations, or the class balance), the input texts' length against
# `max_len`, what in the text goes with the target (surface statistics and classic readability
# formulas, for one regression target), the extremes, and cross-validated baselines in the
# competition's metric: the numbers every transformer has to beat. On CommonLit Readability (the
# default) the `target` is a Bradley-Terry easiness score from teachers' pairwise comparisons
# (higher = easier), with a `standard_error` per excerpt: its label noise is shown too.
# Every figure is also saved as a PNG in `out_dir`.

# %% tags=["parameters"]
competition = ""  # a built-in slug or a competition.json; empty: commonlitreadabilityprize
max_len = 256  # the training max_len that the texts' lengths are compared with
tokenizer = ""  # a backbone folder or hub name to count tokens with; empty: regex words
data_dir = ""  # empty: found by utils.env (Kaggle input, data/, $COMMONLIT_DATA)
out_dir = ""  # empty: utils.env.working_dir() / "eda"
max_rows = 0  # 0: every row; else a random subsample (seed fold_seed, as 02_train)
folds = 5  # baselines' CV folds: as 02_train's `folds` and `fold_seed`, the same folds
fold_seed = 42
kit_dataset = "commonlit-kit-code"  # Kaggle: the dataset holding utils/
wheels_dir = ""  # empty: the kit dataset's wheels/ (Kaggle), where textstat is installed from
colab_install = "/content/drive/MyDrive/kaggle-text-kit"  # Colab: pip-installed from here

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
import numpy as np

from utils import env, plots
from utils.competition import load_competition, read_table
from utils.data import competition_folds
from utils.files import write_json
from utils.objective import objective_of

comp = load_competition(competition)
data = env.competition_dir(data_dir, comp.slug)
out = Path(out_dir) if out_dir else env.working_dir() / "eda"
df = read_table(comp, data, "train")
if max_rows:
    df = df.sample(n=min(max_rows, len(df)), random_state=fold_seed).reset_index(drop=True)
texts = eda.plain_texts(comp.input_texts(df))
targets = list(comp.target_cols)
classes = objective_of(comp).classes  # class labels, not values
# One continuous target (no classes, several targets or integer scores): statistics vs it.
one_value = comp.continuous and len(targets) == 1
noise = comp.standard_error_col if comp.standard_error_col in df.columns and one_value else ""
print(f"{comp.title or comp.slug}: {len(df)} rows from {data} | {comp.task}, {comp.metric_name} | "
      f"figures to {out}")

# %% [markdown]
# ## The targets
# Each target's distribution (or the class balance). On CommonLit the target is roughly normal and
# centred near -1: most excerpts are harder than the reference excerpt (target 0). Its standard
# error, about 0.5, is half a target standard deviation: the labels themselves are noisy, so no
# model gets close to 0 (the best Kaggle solutions scored about 0.45).

# %%
if noise:
    plots.save_fig(plots.plot_distributions(df, targets[0], noise), out / "target_distribution.png")
else:
    plots.save_fig(plots.plot_targets(df, comp), out / "target_distribution.png")
if len(targets) > 1:  # scores that move together: one model predicting all of them loses little
    plots.save_fig(plots.plot_target_correlations(df, comp), out / "target_correlations.png")

# %% [markdown]
# Where the data has a per-row standard error: look for the U shape, the extremes carry the
# largest standard errors (a Bradley-Terry score is least certain at the ends of the scale). The
# reference excerpt that every score is relative to (target 0, standard error 0) is left out.

# %%
if noise:
    plots.save_fig(plots.plot_target_vs_se(df, targets[0], noise), out / "target_vs_standard_error.png")

# %% [markdown]
# ## How long the texts are
# Against `max_len`: the share of texts the model sees only in part (the head, or the head and the
# tail with `--fit head_tail`). Counted in the backbone's tokens when `tokenizer` names one.

# %%
tok = None
if tokenizer:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
lengths, unit = eda.token_lengths(comp.input_texts(df), tok)
plots.save_fig(plots.plot_lengths(lengths, max_len, unit), out / "text_lengths.png")
if unit == "tokens":
    print(f"{np.mean(lengths > max_len):.1%} of the texts are longer than max_len {max_len} tokens")
else:
    print("lengths in words: set `tokenizer` to a backbone to compare them with max_len (tokens)")

# %% [markdown]
# ## Surface statistics
# For one regression target. On CommonLit, long words and long sentences make a text harder; the
# number of words barely matters (excerpts were cut to about 135-205 words). Look at the sign and
# size of `r` in each title.

# %%
if one_value:
    features = eda.text_features(texts)
    y = df[targets[0]]
    plots.save_fig(plots.plot_stats_vs_target(features, y), out / "text_stats_vs_target.png")

# %% [markdown]
# ## Classic readability formulas
# Flesch, Flesch-Kincaid, SMOG and the others combine the same counts with fixed weights.
# On CommonLit each alone correlates at about |r| 0.5 with the target: useful, but far from enough.

# %%
if one_value:
    plots.save_fig(plots.plot_readability_vs_target(features, y), out / "readability_vs_target.png")
    plots.save_fig(plots.plot_correlations(features, y), out / "feature_correlations.png")

# %% [markdown]
# ## The extremes
# Read them. On CommonLit the easiest are short, concrete sentences written for children; the
# hardest are old technical or literary prose with long sentences and rare words. Several targets:
# ranked by their mean; classes: the first rows of each class.

# %%
shown = df.assign(text=texts)
if not classes:
    score = targets[0] if len(targets) == 1 else "mean score"
    shown[score] = shown[targets].astype(float).mean(axis=1)
    names = ("Easiest", "Hardest") if noise else ("Highest", "Lowest")
    fig = plots.plot_extremes(shown, text_col="text", target_col=score, names=names,
                              title=f"{comp.title or comp.slug}: the texts with the highest and lowest {score}")
else:
    pair = sorted(shown[targets[0]].unique(), key=str)[:2]
    shown = shown[shown[targets[0]].isin(pair)]
    shown["class"] = (shown[targets[0]] == pair[-1]).astype(float)
    fig = plots.plot_extremes(shown, text_col="text", target_col="class", names=tuple(map(str, pair[::-1])),
                              title=f"{comp.title or comp.slug}: texts of class {pair[-1]} and {pair[0]}")
plots.save_fig(fig, out / "extremes.png")

# %% [markdown]
# ## Baselines: the numbers to beat
# The same folds for all, and the same as training: `utils.data.competition_folds` with `folds` and
# `fold_seed` (stratified on the binned target or the label, grouped where the competition says so),
# which 02_train uses with the same values. Scored in the competition's metric; where it needs a
# decision rule (F1's threshold, kappa's cut points) each fold's rule is fitted on the other folds.
# TF-IDF (1-2 grams) + ridge (or logistic regression) learns which words signal the target. For one
# regression target, readability features + ridge learns how to weigh the counts above, and the
# out-of-fold predictions are saved as run folders (`baselines/*/`: `oof.csv`, `folds.csv` and a
# `metrics.json` naming the competition) that the ensemble notebook can blend with the transformers.

# %%
fold_ids = competition_folds(comp, df, folds, fold_seed)
results = eda.baseline_cv(comp, df, fold_ids)
baselines = {name: score for name, (score, _) in results.items()}
if one_value:
    score_readability, oof_readability = eda.readability_ridge_cv(comp, df, fold_ids, features=features)
    baselines["readability features + ridge"] = score_readability
    eda.write_oof_run(out / "baselines" / "readability-ridge", comp, df, fold_ids, oof_readability)
    eda.write_oof_run(out / "baselines" / "tfidf-ridge", comp, df, fold_ids,
                      results["TF-IDF 1-2 grams + ridge"][1])
write_json(out / "baselines.json", {"metric": comp.metric_name, **baselines})
tfidf = next(v for k, v in baselines.items() if k.startswith("TF-IDF"))
print(f"TF-IDF CV {comp.metric_name} {tfidf:.4f}: the number every model must beat")
from utils.metrics import get_metric  # noqa: E402

metric = get_metric(comp.metric_name)
plots.save_fig(plots.plot_scores(baselines, metric.title or metric.name, metric.greater_is_better),
               out / "baselines.png")
