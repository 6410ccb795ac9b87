# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,-all
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1 · Exploratory data analysis
#
# The competition's data as its description reads it (`competition`), with the figures that fit
# its shape: the targets (each one's distribution; the class counts; or each label's prevalence and
# which labels come together), the inputs' length against `max_len` (per column when the input
# joins several), the groups that grouped folds keep together, surface statistics and readability
# formulas (only for prose with one continuous target), texts to read, and cross-validated
# baselines in the competition's metric: predicting a constant beside TF-IDF, the better of them
# being the bar every model has to beat. Every figure is also saved as a PNG in `out_dir`.

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
from utils.competition import load_competition
from utils.files import write_json
from utils.metrics import get_metric
from utils.tables import competition_folds, read_catalogue, read_table

comp = load_competition(competition)
data = env.competition_dir(data_dir, comp.slug)
out = Path(out_dir) if out_dir else env.working_dir() / "eda"
df = read_table(comp, data, "train")
if max_rows:
    df = df.sample(n=min(max_rows, len(df)), random_state=fold_seed).reset_index(drop=True)
texts = eda.plain_texts(comp.input_texts(df))
targets = list(comp.target_cols)
metric = get_metric(comp.metric_name)
readable, why = eda.readability_plan(comp, df)  # prose with one continuous target, and why (not)
print(f"{comp.title or comp.slug}: {len(df)} rows from {data} | {comp.task}, {metric.title or metric.name} | "
      f"input {comp.input_description} | figures to {out}")

# %% [markdown]
# ## The targets
# What the model learns, in the description's terms: each target's distribution, the class counts
# (in the description's class order) or each label's prevalence. Several targets: how they move
# together (one model predicting all of them loses little when they do). Several 0/1 labels: of
# the rows with one label, the share that has another. A per-row standard error, where the data
# has one, is shown beside its target: labels that noisy bound what any model can score. Spans
# (the answer is parts of a text): the share of rows with none, their lengths and positions, per
# condition (Tweet's sentiment, NBME's features), and how many a tokenizer cannot mark exactly.

# %%
if comp.candidates:  # a catalogue's coverage and unseen items per fold, or the options' answers
    catalogue = read_catalogue(comp, data) if comp.catalogue else None
    fold_ids = competition_folds(comp, df, folds, fold_seed)
    facts = eda.ranking_facts(comp, df, fold_ids, catalogue)
    for line in eda.ranking_lines(comp, facts):
        print(line)
    for name, fig in plots.ranking_figures(comp, facts).items():
        plots.save_fig(fig, out / name)
elif comp.span_task:  # spans: how many rows have none, how long, where, per condition; what a tokenizer cannot mark
    from utils.model import load_tokenizer

    facts = eda.span_facts(comp, df, load_tokenizer(tokenizer) if tokenizer else None)
    for line in eda.span_lines(comp, facts):
        print(line)
    for name, fig in plots.span_figures(comp, facts).items():
        plots.save_fig(fig, out / name)
else:
    for line in eda.target_summary(comp, df):
        print(line)
    for name, fig in plots.target_figures(df, comp).items():
        plots.save_fig(fig, out / name)

# %% [markdown]
# ## How long the inputs are
# Against `max_len`: the share of inputs the model sees only in part (the head, or the head and
# the tail with `--fit head_tail`); counted in the backbone's tokens when `tokenizer` names one.
# An input joined from several columns: the words of each column too.

# %%
tok = None
if tokenizer:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
lengths, unit = eda.token_lengths(comp.input_texts(df), tok)
plots.save_fig(plots.plot_lengths(lengths, max_len, unit), out / "text_lengths.png")
if unit == "tokens":
    print(f"{np.mean(lengths > max_len):.1%} of the inputs are longer than max_len {max_len} tokens")
else:
    print("lengths in words: set `tokenizer` to a backbone to compare them with max_len (tokens)")
if len(comp.text_cols) > 1:
    plots.save_fig(plots.plot_column_lengths(df, comp), out / "column_lengths.png")

# %% [markdown]
# ## Groups the folds keep together
# Where the description groups its folds by a column (rows sharing it are near-duplicates in
# input), every value's rows stay in one fold: how many values there are, and how many rows each.

# %%
if comp.folds == "group":
    sizes = eda.group_sizes(comp, df)
    print(f"{comp.group_col}: {len(sizes)} values, median {sizes.median():.0f} rows each, largest {sizes.iloc[0]} "
          f"({sizes.iloc[0] / len(df):.1%} of the rows)")
    plots.save_fig(plots.plot_group_sizes(df, comp), out / "group_sizes.png")
else:
    print(f"folds: {comp.folds}, not grouped")

# %% [markdown]
# ## Surface statistics and readability formulas
# Only for prose with one continuous target (the line below says whether, and why): word, sentence
# and length counts against the target, then the classic formulas (Flesch, Flesch-Kincaid, SMOG
# and the others), which weigh the same counts with fixed weights. Look at the sign and size of
# `r` in each title.

# %%
print(why)
if readable:
    features = eda.text_features(texts)
    y = df[targets[0]]
    plots.save_fig(plots.plot_stats_vs_target(features, y), out / "text_stats_vs_target.png")
    plots.save_fig(plots.plot_readability_vs_target(features, y), out / "readability_vs_target.png")
    plots.save_fig(plots.plot_correlations(features, y), out / "feature_correlations.png")

# %% [markdown]
# ## Texts to read
# The highest and lowest target (or mean of the targets), texts of the last and first class, or
# the texts with the most labels and with none; for spans, texts with their labelled spans marked.

# %%
if comp.span_task:  # texts with their labelled spans highlighted
    plots.save_fig(plots.span_examples(df, comp), out / "span_examples.png")
elif not comp.candidates:  # ranked candidates have no extremes of a target
    plots.save_fig(plots.plot_examples(df, comp), out / "extremes.png")

# %% [markdown]
# ## Baselines: the bar
# The same folds for all, and the same as training: `utils.tables.competition_folds` with `folds` and
# `fold_seed` (stratified on the binned target or the label, grouped where the competition says so),
# which 02_train uses with the same values. Scored in the competition's metric; where it needs a
# decision rule (F1's threshold, kappa's cut points) each fold's rule is fitted on the other folds.
# A constant that ignores the text (the mean, the class shares, or each label's prevalence) beside
# TF-IDF 1-2 grams + ridge (or logistic regression), which learns which words signal the target;
# for prose with one target, readability features + ridge too. The best of them is the bar: on
# some data and metrics the constant beats TF-IDF. For one continuous target the out-of-fold
# predictions are saved as run folders (`baselines/*/`: `oof.csv`, `folds.csv` and a
# `metrics.json` naming the competition) that the ensemble notebook can blend with the transformers.

# %%
fold_ids = competition_folds(comp, df, folds, fold_seed)
if comp.ranking:  # the most tagged items or TF-IDF cosine; random order or the longest option; frequent classes
    results = {}
    baselines = eda.ranking_baselines(comp, df, fold_ids, read_catalogue(comp, data) if comp.catalogue else None)
elif comp.span_task:  # no span, the whole text; the condition's training labels found in the text
    results = {}
    baselines = eda.span_baselines(comp, df, fold_ids)
else:
    results = eda.baseline_cv(comp, df, fold_ids)
    baselines = {name: score for name, (score, _) in results.items()}
if readable:
    score_readability, oof_readability = eda.readability_ridge_cv(comp, df, fold_ids, features=features)
    baselines["readability features + ridge"] = score_readability
    eda.write_oof_run(out / "baselines" / "readability-ridge", comp, df, fold_ids, oof_readability)
if comp.continuous and len(targets) == 1 and results:
    eda.write_oof_run(out / "baselines" / "tfidf-ridge", comp, df, fold_ids, results["TF-IDF 1-2 grams + ridge"][1])
write_json(out / "baselines.json", {"metric": comp.metric_name, **baselines})
print(eda.bar_line(baselines, comp.metric_name))
plots.save_fig(plots.plot_scores(baselines, metric.title or metric.name, metric.greater_is_better),
               out / "baselines.png")
