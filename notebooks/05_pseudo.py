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
# # 5 · In-task pretraining and pseudo-labels
#
# What the top teams added to the public notebooks, in the order they ran it:
# **pretrain** a backbone on the competition's own excerpts (masked LM, no labels read) ->
# **train teachers** (notebook 2) -> **pseudo-label** other excerpts with them (this notebook) ->
# **train students** on real + pseudo-labelled rows (notebook 2 with `pseudo_csv`) ->
# **blend** (notebook 3) -> **submit** (notebook 4).
#
# Fold k's pseudo-label of a text comes only from the teachers' fold-k models, which never saw
# fold k's validation rows, and the students' fold k trains on that column: the CV stays honest.
# Teachers and students must therefore use the same folds (same `folds` and `fold_seed`).
# Leave `teachers` empty to only pretrain; leave `pretrain_model` empty to only pseudo-label.
#
# A teacher may be a decoder LLM trained with LoRA (notebook 2 with `lora_r`): its folds hold only
# the adapters, so its base model must be here too: the folder it was trained from, a Kaggle Model
# or dataset attached to this notebook that holds the same files (found by itself), or `base_model`.
# Pretraining is masked-LM: an encoder's, not a decoder's (leave `pretrain_model` empty then).

# %% tags=["parameters"]
competition = ""  # without teachers: a built-in slug or competition.json; empty: commonlitreadabilityprize
pretrain_model = "roberta-base"  # encoder to pretrain further (hub name or folder; masked LM, no decoder); empty: none
pretrain_epochs = 2
pretrain_batch_size = 16
pretrain_max_len = 256
teachers = ["minilm-attention", "mpnet-attention"]  # run names in runs_dir; [] for none
blend_json = "blend.json"  # teacher weights, beside the runs (notebook 3); empty: equal weights
texts_csv = ""  # CSV of texts to label (the test file's columns), e.g. an attached dataset; empty: the test file
max_std = 0.0  # >0: a text leaves fold k when its fold-k teachers disagree more (sd), e.g. 0.3
distil = False  # also label the training rows themselves: a student's distillation targets (teacher.csv)
data_dir = ""  # empty: found by utils.env (Kaggle input, data/)
runs_dir = ""  # empty: the models dataset on Kaggle, else utils.env.working_dir() / "runs"
models_dataset = "commonlit-kit-models"  # Kaggle: the dataset holding the teacher runs
base_model = ""  # a LoRA teacher's base model folder; empty: as recorded, or an attached Kaggle Model / dataset with it
out_dir = ""  # empty: beside the runs when writable, else utils.env.working_dir()
backbones_dir = ""  # empty: utils.env.working_dir() / "backbones"
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
import json

import pandas as pd

from utils import env, plots, pseudo
from utils.competition import load_competition
from utils.predict import run_competition
from utils.pretrain import PretrainConfig, pretrain

root = env.runs_dir(runs_dir, models_dataset)
comp = run_competition(root / teachers[0]) if teachers else load_competition(competition)
data = env.competition_dir(data_dir, comp.slug)
out = env.output_dir(out_dir, root)
backbones = Path(backbones_dir) if backbones_dir else env.working_dir() / "backbones"
print("data:", data, "| teachers:", root, "| writes:", out)

# %% [markdown]
# ## In-task pretraining
# Masked-LM training continues on train.csv's and test.csv's excerpts (deduplicated). A share of
# them is held out and never trained on: its masked-LM loss, before and after on one fixed
# masking, says whether the backbone learned the excerpts' language. The new backbone folder is a
# `model_name` for notebook 2 as it is. Re-running keeps a backbone already pretrained here.

# %%
backbone = backbones / f"{Path(pretrain_model).name}-itpt" if pretrain_model else None
if backbone and (backbone / "pretrain.json").is_file():
    info = json.loads((backbone / "pretrain.json").read_text())
    print(f"kept {backbone}, pretrained earlier (delete it to pretrain again)")
elif backbone:
    info = pretrain(PretrainConfig(
        texts=(str(data / comp.train_file), str(data / comp.test_file)), model=pretrain_model,
        text_col=comp.text_cols[-1], id_col=comp.id_col,
        out=str(backbone), epochs=pretrain_epochs, batch_size=pretrain_batch_size,
        max_len=pretrain_max_len,
    ))
if backbone:
    print(f"held-out MLM loss: {info['loss_before']:.4f} before, {info['loss_after']:.4f} after "
          f"({info['n_valid']} texts never trained on, {info['n_train']} trained on)")

# %% [markdown]
# ## Pseudo-labels
# `utils.pseudo` drops blank texts and texts already in train.csv, labels the rest with every fold
# model of every teacher, and writes `pseudo.csv` (id, the text columns, per fold and output `O`
# (each target, or each class's probability `prob_<label>`) `O_fold{k}` and `O_std_fold{k}`, then
# `O`, `O_std`; on CommonLit `target_fold{k}`, ...) and `pseudo.json` (the folds it was made with:
# training refuses it for others). Fold k's columns use only the teachers' fold-k models and
# `blend.json`'s weights for fold k, both made without fold k's labels.

# %%
texts = Path(texts_csv) if texts_csv else data / comp.test_file
pseudo_csv = out / "pseudo.csv"
other_texts = "texts" in comp.objective.signals  # a row's options are not labelled on other texts (yet)
if teachers and not other_texts:
    print(f"{comp.slug}: no pseudo-labels of other texts for its task ({comp.task}); `distil` still works")
if teachers and other_texts:
    argv = ["--runs", *[str(root / t) for t in teachers], "--texts", str(texts),
            "--train-csv", str(data / comp.train_file), "--out", str(pseudo_csv)]
    argv += ["--blend", str(root / blend_json)] if blend_json else []
    argv += ["--max-std", str(max_std)] if max_std else []
    argv += ["--base-model", base_model] if base_model else []
    assert pseudo.main(argv) == 0, "utils.pseudo stopped: see the error above"

# %% [markdown]
# Pseudo-labels spread less than the training target (models shrink towards the mean). Texts the
# teachers disagree on are the least trustworthy: `max_std` takes a text out of fold k when the
# teachers' fold-k models disagree by more (the models that never saw fold k's labels decide).

# %%
if teachers and other_texts and comp.objective.outputs.signal_numbers:  # (a span task's: character scores)
    labels = pd.read_csv(pseudo_csv, dtype={"id": str})
    info = json.loads(pseudo_csv.with_suffix(".json").read_text())
    first = info["outputs"][0]  # the first target, or the first class's probability
    train = pd.read_csv(data / comp.train_file)
    fig = plots.pseudo_figure(labels, first, train[first] if first in train else None, max_std or None)
    plots.save_fig(fig, out / "figures" / "pseudo.png")
    print(labels[[c for o in info["outputs"] for c in (o, f"{o}_std")]].describe().round(4).T.to_string())

# %% [markdown]
# ## Distillation targets
# With `distil`, the teachers also predict the training rows themselves (`teacher.csv`): a row's
# `O_fold{k}` comes from the fold-k models, trained on exactly the rows fold k's student trains on
# (empty on fold k's own rows). A student of a smaller backbone then learns the labels and the
# teachers' predictions together (notebook 2's `distil_csv`). The teachers' `oof.csv` would leak:
# each of its rows comes from a model that trained on the other folds' validation rows.

# %%
teacher_csv = out / "teacher.csv"
if teachers and distil:
    argv = ["--runs", *[str(root / t) for t in teachers], "--training-rows",
            "--train-csv", str(data / comp.train_file), "--out", str(teacher_csv)]
    argv += ["--blend", str(root / blend_json)] if blend_json else []
    argv += ["--base-model", base_model] if base_model else []
    assert pseudo.main(argv) == 0, "utils.pseudo stopped: see the error above"

# %% [markdown]
# ## Next: train the students
# Run notebook 2 with the parameters below (same `folds` as the teachers); on Kaggle, attach this
# kernel's output and point `pseudo_csv` (and `model_name`) at its files there. Then blend the
# students with the teachers in notebook 3 and submit with notebook 4.

# %%
print("notebook 2 parameters for a student:")
if teachers and other_texts:
    print(f"    pseudo_csv = {str(pseudo_csv)!r}")
    print("    pseudo_epochs = 1  # pseudo rows alone first (1st place); or mixed: pseudo_weight = 0.5")
if teachers and distil:
    print(f"    distil_csv = {str(teacher_csv)!r}")
    print("    distil_weight = 0.5  # the teachers' share of each target; model_name: a smaller backbone")
if backbone:
    print(f"    model_name = {str(backbone)!r}")
