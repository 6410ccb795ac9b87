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
# # 2 · Train K folds with attention-head pooling
#
# Instead of the CLS token or the mean of the token states, a small learned layer
# `Linear(H, H) -> Tanh -> Linear(H, 1)` scores every token of the encoder's last hidden states;
# padding is masked before the softmax and the weighted sum of the token states feeds the head.
# `competition` says which data, input text, targets, task and metric (`python -m utils.competition
# show`); checkpoints and the CV are in that metric. This notebook trains K folds with one call into
# `utils`, then shows the learning curves, the per-fold scores, the out-of-fold predictions and
# **what the attention head looks at**.
#
# Run it twice with different `pooling`/`model_name`/`run_name` to get two runs for notebook 3.
# With `pseudo_csv` (from notebook 5) it trains a student on the teachers' pseudo-labels as well;
# with `distil_csv` (notebook 5, `distil = True`) each fold's targets mix in its own teachers' predictions.
# The defaults below are `utils.config.TrainConfig`'s, the same as `python -m utils.train`'s.
#
# A decoder LLM (Llama, Mistral, Qwen2, Gemma 2, Phi-3) trains with LoRA adapters on its frozen
# weights: `lora_r = 16`, `pooling = "last"` (its last real token has read the whole text), a
# larger `lr` (e.g. 2e-4); `load_in_4bit` and `gradient_checkpointing` when it does not fit the GPU
# (the run prints its memory estimate first). Its folds hold the adapters only: notebooks 4 and 5
# need its base model attached (the same files, checked).

# %% tags=["parameters"]
competition = ""  # a built-in slug or a competition.json; empty: commonlitreadabilityprize
model_name = "roberta-base"  # hub name (internet on), a folder, or a backbone the kit has offline (utils.models)
pooling = "attention"  # attention | mean | max | cls | last (a decoder's last token) | attention+mean (spans: none)
run_name = "roberta-base-attention"
folds = 5
epochs = 3
batch_size = 16
max_len = 256
lr = 2e-5  # encoder
head_lr = 1e-3  # pooling + head
llrd = 1.0  # layer-wise lr decay: 1 is off, e.g. 0.95
ema = 0.0  # >0: validate and keep a moving average of the weights with this decay, e.g. 0.999
max_rows = 0  # 0 means every row
max_steps = 0  # 0 means no cap
eval_every = 40
eval_schedule = []  # e.g. [[0.50, 16], [0.49, 8], [0.0, 1]]: validate more often as RMSE falls
save_every = 0  # >0: also save the unfinished fold every N steps (always at each validation); run again: it resumes
precision = "auto"  # bf16/fp16 AMP on GPU, fp32 on CPU
gradient_checkpointing = False  # recompute activations in the backward: less memory (large models on a T4)
lora_r = 0  # >0: LoRA adapters of this rank on a frozen backbone (decoder LLMs, e.g. 16); 0: the whole backbone trains
lora_alpha = 0.0  # LoRA scale numerator (0: 2 x lora_r)
lora_dropout = 0.05  # dropout on LoRA's input
lora_targets = []  # module names LoRA adapts, or ["all-linear"] (empty: the family's defaults)
load_in_4bit = False  # QLoRA: the frozen backbone in 4-bit (a CUDA GPU and bitsandbytes; with lora_r)
num_processes = 1  # 2 on Kaggle's "GPU T4 x2": data-parallel through accelerate
pseudo_csv = ""  # pseudo-labels from notebook 5 (same folds): every fold's training side gains them
pseudo_weight = 1.0  # loss weight of a pseudo row when mixed with the real rows
pseudo_epochs = 0  # >0: first this many epochs on the pseudo rows alone, then the real rows
distil_csv = ""  # a teacher's predictions of the training rows (notebook 5 with distil): a student's targets
distil_weight = 0.5  # the teacher's share of each training target (the label keeps 1 - it)
distil_temperature = 1.0  # classes: the teacher's probabilities softened, p ** (1 / T) renormalised
temperature = 0.05  # retrieval: contrastive loss: similarities over this (0.05: sentence-transformers' scale 20)
hard_negatives = 1  # retrieval: negatives per query in each batch, mined by the untrained model (0: in-batch only)
train_options = 0  # multiple choice, reranker: >0 a training row sees this many of its options, the true one among them
options_in_text = False  # multiple choice: each (prompt, option) pair's prompt also lists every option, lettered
n_examples = 4  # validation texts shown with their attention weights (span tasks: with their spans)
data_dir = ""  # empty: found by utils.env (Kaggle input, data/)
runs_dir = ""  # empty: utils.env.working_dir() / "runs" (Google Drive on Colab when mounted)
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
from IPython.display import HTML, display

from utils import env, explain, plots, runs
from utils.competition import load_competition
from utils.config import TrainConfig
from utils.model import TextModel
from utils.objective import objective_of
from utils.tables import read_table
from utils.train import launch

comp = load_competition(competition)
data = env.competition_dir(data_dir, comp.slug)
run_dir = env.runs_dir(runs_dir) / run_name
cfg = TrainConfig(
    train_csv=str(data / comp.train_file), out=str(run_dir), model=model_name, competition=competition,
    pooling=pooling,
    folds=folds, epochs=epochs, batch_size=batch_size, max_len=max_len, lr=lr, head_lr=head_lr,
    llrd=llrd, ema=ema, max_rows=max_rows, max_steps=max_steps, eval_every=eval_every,
    eval_schedule=tuple(map(tuple, eval_schedule)), save_every=save_every, precision=precision,
    gradient_checkpointing=gradient_checkpointing, lora_r=lora_r, lora_alpha=lora_alpha,
    lora_dropout=lora_dropout, lora_targets=tuple(lora_targets), load_in_4bit=load_in_4bit,
    pseudo_csv=pseudo_csv, pseudo_weight=pseudo_weight, pseudo_epochs=pseudo_epochs,
    distil_csv=distil_csv, distil_weight=distil_weight, distil_temperature=distil_temperature,
    temperature=temperature, hard_negatives=hard_negatives, train_options=train_options,
    options_in_text=options_in_text,
)
print(f"{comp.title or comp.slug} | data: {data} | run: {run_dir} | metric: {comp.metric_name}")

# %% [markdown]
# ## Train
# One call trains every fold not finished yet: re-running this cell after a disconnect or a
# time-out resumes at the first unfinished fold (finished folds are kept, byte for byte).

# %%
metrics = launch(cfg, num_processes, comp)  # the competition, resolved once above
print(f"CV {metrics['metric']} over {metrics['n_oof']} out-of-fold rows: {metrics['cv']:.4f}")

# %% [markdown]
# ## Learning curves and per-fold scores
# The circle marks the checkpoint kept for each fold (best validation score in the competition's
# metric). That checkpoint is chosen on the fold's own validation rows, so the CV is slightly
# optimistic: the `last_` column is the last checkpoint's score, for comparison.

# %%
fig = plots.learning_curves(run_dir)
plots.save_fig(fig, run_dir / "figures" / "learning_curves.png")
display(plots.fold_table(run_dir).style.format(precision=4).hide(axis="index"))

# %% [markdown]
# ## Out-of-fold predictions
# Each regression target against its out-of-fold prediction. On CommonLit, points below the line are
# excerpts predicted harder than they are; like most models, predictions shrink towards the mean
# at both ends.

# %%
for col in () if objective_of(comp).labelled else comp.target_cols:  # values only: not classes nor rankings
    fig = plots.oof_scatter(run_dir, col)
    plots.save_fig(fig, run_dir / "figures" / f"oof_scatter_{col}.png")

# %% [markdown]
# ## What the span model marks
# Span tasks only: fold 0's validation rows with their true spans and the model's answers marked
# (green: true only, red: predicted only, blue: both), each with its own score.

# %%
if comp.span_task:
    train_rows = read_table(comp, data, "train")
    fig = plots.span_predictions(runs.read_oof(run_dir), train_rows, comp, n_examples)
    plots.save_fig(fig, run_dir / "figures" / "spans.png")

# %% [markdown]
# ## What the attention head looks at
# Fold 0's model reads its own validation texts (never seen in training). Each word is coloured
# by its pooling weight; the claim to check: the head focuses on complex vocabulary.

# %%
explained = "attention" in pooling and not comp.text_pair and not comp.ranking
if explained:
    model, tokenizer = TextModel.load(run_dir / "fold0")
    train = read_table(comp, data, "train").set_index(comp.id_col)
    oof = runs.read_oof(run_dir)  # the columns of the run's competition
    valid = oof.frame[oof.frame["fold"] == 0]
    frames = explain.token_weights(model, tokenizer, comp.input_texts(train.loc[valid["id"]]), max_len)
    target = oof.truth[0]
    pcol = "pred" if oof.objective.classes else oof.preds[0]  # the likeliest class, or the value
    rounded = valid.round(2)
    titles = [f"id {i}: {target} {t}, predicted {p}" for i, t, p in zip(rounded["id"], rounded[target], rounded[pcol])]
    display(HTML(plots.token_weights_html(frames[:n_examples], titles[:n_examples])))
    fig = plots.token_weights_figure(frames[:n_examples], titles[:n_examples])
    plots.save_fig(fig, run_dir / "figures" / "token_weights.png")

# %% [markdown]
# Across the whole validation fold: the words with the most weight relative to an equal share, and
# the mean relative weight by word length.

# %%
if explained:
    top = explain.top_words(frames, min_count=3, top=20)
    lengths = explain.weight_vs_length(frames)
    fig = plots.top_words_figure(top, lengths)
    plots.save_fig(fig, run_dir / "figures" / "top_words.png")
    print(f"Spearman(word length, relative weight) = {lengths.attrs['spearman']:.3f}")
