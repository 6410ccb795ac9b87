"""The demo (`python -m utils.demo`: the four notebooks under papermill) runs end to end on a tiny
model and 60 rows and writes its figures and a valid submission. (EDA units: tests/test_eda.py.)"""

import ast
import json
import re
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from conftest import ROOT, tiny_frame
from helpers import assert_one_line_error, cfg_for, papermill

from utils import runs as run_files
from utils.ensemble import read_blend

NB = ROOT / "notebooks"
NOTEBOOKS = ["01_eda", "02_train", "03_ensemble", "04_submission", "05_pseudo"]


def competition_data(folder: Path, blank_row: int | None = None) -> Path:
    """A tiny competition folder: train.csv (60 rows), test.csv (7), and the sample submission
    beside them, as Kaggle's data has; `blank_row`: that test text blank."""
    folder.mkdir(parents=True)
    tiny_frame(60).to_csv(folder / "train.csv", index=False)
    test = tiny_frame(7, seed=9).drop(columns=["target", "standard_error"])
    if blank_row is not None:
        test.loc[blank_row, "excerpt"] = " "
    test.to_csv(folder / "test.csv", index=False)
    test[["id"]].assign(target=0.0).to_csv(folder / "sample_submission.csv", index=False)
    return folder


def extra_texts(path: Path) -> None:
    """Ten unlabelled texts (ids new0..new9) to pseudo-label."""
    extra = tiny_frame(10, seed=7).drop(columns=["target", "standard_error"])
    extra.assign(id=[f"new{i}" for i in range(10)]).to_csv(path, index=False)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory, tiny_bert):
    """`python -m utils.demo` itself, on a tiny model: EDA, two training runs, blend, submission."""
    import contextlib
    import io

    from utils.demo import main

    d = tmp_path_factory.mktemp("nb")
    data = competition_data(d / "data", blank_row=2)  # a blank hidden-test text must not cost the submission
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        main(["--out", str(d / "sub"), "--data", str(data), "--model", tiny_bert, "--rows", "60",
              "--folds", "2", "--epochs", "2", "--max-len", "64"])
    d.joinpath("demo.log").write_text(log.getvalue())
    prefix = Path(tiny_bert).name.lower()
    return d, data, d / "sub" / "runs", [f"{prefix}-attention", f"{prefix}-mean"]


def test_demo_streams_training_log_and_summary(pipeline):
    d, _, _, names = pipeline
    log = (d / "demo.log").read_text()
    # the notebooks' printed lines reach the terminal: one per evaluation, then the summary
    assert re.search(r"fold 1 step \d+/\d+ \| train loss [\d.]+ \| valid rmse [\d.]+ \| best", log)
    for name in names:
        assert re.search(rf"{name} +CV RMSE \d\.\d{{4}} .*last checkpoints .*: \d\.\d{{4}}\)", log), name
    assert re.search(r"blend +CV RMSE \d\.\d{4}", log)
    assert re.search(r"\+ tfidf +CV RMSE \d\.\d{4} .*TF-IDF alone \d\.\d{4}; weights [\d.]+, [\d.]+, [\d.]+\)", log)
    assert (d / "sub" / "eda").is_dir() and len(list((d / "sub").glob("*.ipynb"))) == 5


def test_training_notebook_figures(pipeline):
    d, _, runs, names = pipeline
    expected = ["learning_curves.png", "oof_scatter_target.png", "token_weights.png", "top_words.png"]
    for f in expected:
        assert (runs / names[0] / "figures" / f).stat().st_size > 5000, f
    # mean pooling has no token weights: only the first two figures
    assert sorted(p.name for p in (runs / names[1] / "figures").iterdir()) == sorted(expected[:2])
    for name in names:
        m = run_files.read_metrics(runs / name)
        assert m["folds_done"] == [0, 1] and m["n_oof"] == 60


def test_ensemble_notebook_writes_blend(pipeline):
    _, _, runs, names = pipeline
    blend = read_blend(runs / run_files.BLEND)
    assert blend["runs"] == names
    assert all(w >= 0 for w in blend["weights"]) and sum(blend["weights"]) == pytest.approx(1.0)
    assert (runs / "figures" / "blend.png").stat().st_size > 5000
    # TF-IDF + ridge joins a second blend, on the runs' own folds; blend.json keeps the runs only.
    tfidf = json.loads((runs / "blend_with_tfidf.json").read_text())
    assert tfidf["runs"] == [*names, "tfidf-ridge"] and tfidf["n_rows"] == blend["n_rows"]
    assert sum(tfidf["weights"]) == pytest.approx(1.0)


def test_ensemble_notebook_averages_runs_that_share_one_fold(pipeline, tmp_path):
    """Runs compared on fold 0 alone: with equal_weights the notebook blends them (nothing fitted,
    no per-fold weights, no TF-IDF member that would need another fold) and saves the average."""
    import shutil

    _, data, runs, names = pipeline
    for name in names:
        shutil.copytree(runs / name, tmp_path / "runs" / name)
        oof = pd.read_csv(tmp_path / "runs" / name / "oof.csv", dtype={"id": str})
        oof[oof.fold == 0].to_csv(tmp_path / "runs" / name / "oof.csv", index=False)
    executed = papermill("03_ensemble", tmp_path, {"runs": names, "equal_weights": True, "data_dir": str(data),
                                                   "runs_dir": str(tmp_path / "runs")})
    blend = read_blend(tmp_path / "runs" / run_files.BLEND)
    assert blend["equal"] and blend["weights"] == [0.5, 0.5] and blend["folds"] == [0]
    assert blend["weights_per_fold"] is None and not (tmp_path / "runs" / "blend_with_tfidf.json").exists()
    text = "".join(o.get("text", "") for c in nbformat.read(executed, as_version=4).cells
                   for o in c.get("outputs", []))
    assert "on one fold (" in text


def test_submission_notebook_writes_valid_submission(pipeline):
    d, data, _, _ = pipeline
    sub = pd.read_csv(d / "sub" / "submission.csv", dtype={"id": str})
    test = pd.read_csv(data / "test.csv", dtype={"id": str})
    assert list(sub.columns) == ["id", "target"]
    assert sub["id"].tolist() == test["id"].tolist()
    assert sub["target"].notna().all() and sub["target"].between(-10, 10).all()
    assert (d / "sub" / "predictions_target.png").stat().st_size > 5000
    # The blank row got the blend of the runs' training means (equal within a fold's spread).
    train = pd.read_csv(data / "train.csv")
    assert abs(sub["target"][2] - train["target"].mean()) < 0.1 * train["target"].std()
    executed = nbformat.read(d / "sub" / "04_submission.ipynb", as_version=4)
    stderr = "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    assert "column 'excerpt' is empty at row 4 (id id0002); predicted as the training mean" in stderr


def test_pseudo_notebook_then_a_student_trained_on_its_labels(tmp_path, tiny_bert):
    """Notebook 5 pretrains a backbone and pseudo-labels excerpts with a teacher run; notebook 2
    then trains a student with those labels on every fold's training side."""
    from utils.train import run_cv

    data, runs = competition_data(tmp_path / "data"), tmp_path / "runs"
    run_cv(cfg_for(data / "train.csv", runs / "teacher", tiny_bert, epochs=1, max_len=64))
    extra_texts(tmp_path / "extra.csv")

    executed = papermill("05_pseudo", tmp_path, {
        "pretrain_model": tiny_bert, "pretrain_epochs": 1, "pretrain_batch_size": 8,
        "pretrain_max_len": 64, "teachers": ["teacher"], "blend_json": "",
        "texts_csv": str(tmp_path / "extra.csv"), "data_dir": str(data), "runs_dir": str(runs),
        "backbones_dir": str(tmp_path / "backbones"), "distil": True,
    })
    backbone = tmp_path / "backbones" / f"{Path(tiny_bert).name}-itpt"
    info = json.loads((backbone / "pretrain.json").read_text())
    assert info["n_train"] > 0 and info["loss_after"] < float("inf")
    labels = pd.read_csv(runs / "pseudo.csv", dtype={"id": str})
    assert {"target_fold0", "target_fold1", "target", "target_std"} <= set(labels.columns)
    assert labels["id"].tolist() == [f"new{i}" for i in range(10)]
    assert json.loads((runs / "pseudo.json").read_text())["runs"] == ["teacher"]
    assert (runs / "figures" / "pseudo.png").stat().st_size > 5000
    text = "".join(o.get("text", "") for c in nbformat.read(executed, as_version=4).cells
                   for o in c.get("outputs", []))
    assert "held-out MLM loss: " in text and f"pseudo_csv = {str(runs / 'pseudo.csv')!r}" in text
    assert f"distil_csv = {str(runs / 'teacher.csv')!r}" in text  # the training rows, for a distilled student
    assert json.loads((runs / "teacher.json").read_text())["rows"] == "training"

    papermill("02_train", tmp_path, {
        "model_name": tiny_bert, "run_name": "student", "folds": 2, "epochs": 1, "batch_size": 8,
        "max_len": 64, "eval_every": 4, "n_examples": 1,
        "pseudo_csv": str(runs / "pseudo.csv"), "pseudo_epochs": 1, "distil_csv": str(runs / "teacher.csv"),
        "data_dir": str(data), "runs_dir": str(runs),
    })
    for k in (0, 1):
        assert run_files.read_history(runs / "student", k)["n_pseudo"] == 10
    m = run_files.read_metrics(runs / "student")
    assert m["n_oof"] == len(pd.read_csv(data / "train.csv")) and m["teachers"][0]["run"] == "teacher"


def test_pseudo_notebook_on_a_span_competition_writes_character_scores(tmp_path, tiny_bert):
    """Notebook 5 on Tweet: the teachers' character scores of other tweets (pseudo.csv) and of the
    training rows (teacher.csv), no number summary for them, and notebook 2's parameters for both."""
    from helpers import tiny_data

    from utils.spans import cell_scores
    from utils.train import run_cv

    slug = "tweet-sentiment-extraction"
    data, runs = tiny_data(slug, tmp_path / "data", 24), tmp_path / "runs"
    run_cv(cfg_for(data / "train.csv", runs / "teacher", tiny_bert, competition=slug, max_steps=2, max_len=16))
    executed = papermill("05_pseudo", tmp_path, {
        "pretrain_model": "", "teachers": ["teacher"], "blend_json": "", "data_dir": str(data),
        "runs_dir": str(runs), "backbones_dir": str(tmp_path / "backbones"), "distil": True,
    })
    text = "".join(o.get("text", "") for c in nbformat.read(executed, as_version=4).cells
                   for o in c.get("outputs", []))
    for name in ("pseudo", "distil"):  # notebook 2's parameters for a student of both files
        assert f"{name}_csv = {str(runs / ('pseudo.csv' if name == 'pseudo' else 'teacher.csv'))!r}" in text
    test = pd.read_csv(data / "test.csv", dtype=str, keep_default_na=False)
    labels = pd.read_csv(runs / "pseudo.csv", dtype=str, keep_default_na=False).set_index("textID")
    for i, tweet in zip(test["textID"], test["text"]):
        assert len(cell_scores(labels.loc[i, "start_fold0"])) == len(tweet)
    assert json.loads((runs / "teacher.json").read_text())["rows"] == "training"


def test_pseudo_notebook_with_a_lora_teacher_then_a_lora_student(tmp_path, tiny_decoders):
    """Notebook 5 pseudo-labels with a decoder + LoRA teacher whose base model moved since it was
    trained (given as base_model); notebook 2 trains a LoRA student on those labels with the LoRA
    parameters it exposes, and shows a decoder's attention pooling weights."""
    import shutil

    from safetensors.torch import load_file

    from utils.model import KIT_CONFIG, WEIGHTS
    from utils.train import run_cv

    data, runs = competition_data(tmp_path / "data"), tmp_path / "runs"
    base = shutil.copytree(tiny_decoders["llama"], tmp_path / "llama")
    run_cv(cfg_for(data / "train.csv", runs / "teacher", str(base), pooling="last", lora_r=4, lr=5e-3,
                   head_lr=5e-3, epochs=1, max_len=64))
    moved = base.rename(tmp_path / "attached-llama")  # as a Kaggle Model attached elsewhere
    extra_texts(tmp_path / "extra.csv")

    executed = papermill("05_pseudo", tmp_path, {
        "pretrain_model": "", "teachers": ["teacher"], "blend_json": "", "base_model": str(moved),
        "texts_csv": str(tmp_path / "extra.csv"), "data_dir": str(data), "runs_dir": str(runs),
    })
    labels = pd.read_csv(runs / "pseudo.csv", dtype={"id": str})
    assert labels["id"].tolist() == [f"new{i}" for i in range(10)]
    assert labels[["target_fold0", "target_fold1"]].notna().all().all() and labels["target"].std() > 0
    text = "".join(o.get("text", "") for c in nbformat.read(executed, as_version=4).cells
                   for o in c.get("outputs", []))
    assert f"pseudo_csv = {str(runs / 'pseudo.csv')!r}" in text and "model_name" not in text  # nothing pretrained

    papermill("02_train", tmp_path, {
        "model_name": tiny_decoders["qwen2"], "pooling": "attention", "lora_r": 4, "lora_alpha": 16.0,
        "lora_targets": ["q_proj", "v_proj"], "gradient_checkpointing": True, "lr": 5e-3, "head_lr": 5e-3,
        "run_name": "student", "folds": 2, "epochs": 1, "batch_size": 8, "max_len": 64, "max_rows": 60,
        "eval_every": 4, "n_examples": 1, "pseudo_csv": str(runs / "pseudo.csv"), "pseudo_epochs": 1,
        "data_dir": str(data), "runs_dir": str(runs),
    })
    student = runs / "student"
    for k in (0, 1):
        assert run_files.read_history(student, k)["n_pseudo"] == 10
        saved = json.loads((student / f"fold{k}" / KIT_CONFIG).read_text())["model"]
        assert (saved["lora_r"], saved["lora_alpha"], saved["lora_targets"]) == (4, 16.0, ["q_proj", "v_proj"])
        adapted = {n.split(".")[-4] for n in load_file(str(student / f"fold{k}" / WEIGHTS)) if ".lora_A." in n}
        assert adapted == {"q_proj", "v_proj"}
    assert json.loads((student / "config.json").read_text())["gradient_checkpointing"] is True
    assert (student / "figures" / "token_weights.png").stat().st_size > 5000


def test_training_notebook_defaults_are_train_configs():
    """One source of defaults: every parameter named like a TrainConfig field has its default."""
    import dataclasses

    from utils.config import TrainConfig

    nb = nbformat.read(NB / "02_train.ipynb", as_version=4)
    params = {}
    exec(nb.cells[[c.cell_type for c in nb.cells].index("code")].source, {}, params)
    fields = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    renamed = {"model_name": "model"}  # the notebook's names for fields
    shared = {k: v for k, v in params.items() if renamed.get(k, k) in fields}
    assert len(shared) >= 12, sorted(shared)
    lora = {"lora_r", "lora_alpha", "lora_dropout", "lora_targets", "load_in_4bit", "gradient_checkpointing"}
    assert lora <= set(shared), sorted(lora - set(shared))  # a decoder's LoRA run from the notebook
    for k, v in shared.items():
        default = fields[renamed.get(k, k)]
        if k == "model_name":
            continue  # required in TrainConfig; the notebook names the Kaggle run's backbone
        if isinstance(default, tuple):  # a list in the notebook (papermill injects lists)
            v = tuple(tuple(x) if isinstance(x, list) else x for x in v)
        assert v == default, k
    assert "| last " in nb.cells[[c.cell_type for c in nb.cells].index("code")].source  # the pooling comment


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_form(name):
    """Thin notebooks: parameters cell first, no def/class, paired .py in sync, outputs stripped."""
    nb = nbformat.read(NB / f"{name}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    for c in code:
        assert not c.get("outputs") and c.get("execution_count") is None
        tree = ast.parse(c.source)
        assert not [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Lambda))]
    import jupytext

    paired = jupytext.read(NB / f"{name}.py")
    sources = lambda n: [c.source.strip() for c in n.cells]  # noqa: E731
    assert sources(paired) == sources(nb), f"{name}.py and {name}.ipynb differ: run jupytext --sync"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_papermill_sees_every_parameter(name, caplog):
    """papermill's own inspection finds every name the parameters cell assigns, without a
    warning: a line it cannot parse (an '=' in a comment) is a parameter it cannot see, and the
    kernel run would print 'Passed unknown parameter'."""
    import logging

    import papermill as pm

    nb = nbformat.read(NB / f"{name}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assigned = [t.id for n in ast.parse(cell.source).body if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name)]
    with caplog.at_level(logging.WARNING, logger="papermill"):
        found = pm.inspect_notebook(str(NB / f"{name}.ipynb"))
    assert list(found) == assigned
    assert not [r for r in caplog.records if r.name.startswith("papermill")], caplog.text


def test_demo_without_data_stops_at_once_saying_how_to_get_it(tmp_path, monkeypatch, capsys):
    from utils import env
    from utils.demo import find_data, main

    monkeypatch.setattr(env, "project_root", lambda: tmp_path)
    monkeypatch.delenv("COMMONLIT_DATA", raising=False)
    monkeypatch.setenv("KAGGLE_INPUT_ROOT", str(tmp_path / "no-kaggle-input"))
    with pytest.raises(FileNotFoundError, match="make data.*data/README.md"):
        find_data()
    assert main(["--out", str(tmp_path / "out")]) == 2  # the CLI: one line, before any notebook
    assert_one_line_error(capsys.readouterr().err, "make data", "data/README.md")
    assert not (tmp_path / "out").exists()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test.csv").write_text("id\n")
    with pytest.raises(FileNotFoundError, match="has no train.csv"):
        find_data()
    (tmp_path / "data" / "train.csv").write_text("id\n")
    with pytest.raises(FileNotFoundError, match="has no sample_submission.csv"):
        find_data()
    (tmp_path / "data" / "sample_submission.csv").write_text("id,target\n")
    assert find_data() == (tmp_path / "data").resolve()


def test_demo_runs_a_notebook_without_the_kernels_tcp_warning(tmp_path):
    """The kernel's start-up log ("running over TCP without encryption", once per notebook) is
    quiet; the notebook's own output and warnings still reach the terminal and the notebook."""
    import subprocess
    import sys

    script = f"""
import nbformat
from pathlib import Path
import utils.demo as demo
d = Path({str(tmp_path)!r})
nb = nbformat.v4.new_notebook()
nb.cells = [nbformat.v4.new_code_cell("import warnings; print('hello'); warnings.warn('mine')")]
nb.cells[0].metadata["tags"] = ["parameters"]
nbformat.write(nb, d / "q.ipynb")
demo.NOTEBOOKS = d
demo.run_notebook("q", d, {{}}, "q_out")
"""
    res = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "hello" in res.stdout
    assert "without encryption" not in res.stderr + res.stdout
    executed = nbformat.read(tmp_path / "q_out.ipynb", as_version=4)
    assert "UserWarning: mine" in "".join(o.get("text", "") for o in executed.cells[-1].outputs)


def test_training_ensembling_and_submission_notebooks_on_a_span_competition(tmp_path, tiny_bert):
    """NBME through notebooks 02, 03 and 04: the training notebook marks fold 0's true and predicted
    spans; the ensembling notebook blends two runs' character scores; the submission notebook
    writes the blend's answers in the sample's rows, offsets inside each note."""
    from helpers import nbme_folder, papermill

    from utils.competition import load_competition
    from utils.spans import check_spans, parse_location
    from utils.tables import read_table

    slug = "nbme-score-clinical-patient-notes"
    data, runs_dir = nbme_folder(tmp_path / "data"), tmp_path / "runs"
    papermill("02_train", tmp_path, dict(competition=slug, model_name=tiny_bert, run_name="tiny-spans", folds=2,
                                         epochs=1, max_len=16, lr=1e-3, eval_every=2, data_dir=str(data),
                                         runs_dir=str(runs_dir)))
    assert (runs_dir / "tiny-spans" / "figures" / "spans.png").stat().st_size > 5000
    assert not (runs_dir / "tiny-spans" / "figures" / "token_weights.png").exists()
    from utils.train import run_cv

    run_cv(cfg_for(data / "train.csv", runs_dir / "tiny-spans-2", tiny_bert, competition=slug, epochs=1, max_len=16,
                   seed=7))
    papermill("03_ensemble", tmp_path, dict(runs=["tiny-spans", "tiny-spans-2"], runs_dir=str(runs_dir),
                                            data_dir=str(data), out_dir=str(runs_dir)))
    blend = json.loads((runs_dir / "blend.json").read_text())
    assert blend["metric"] == "char_f1" and len(blend["weights"]) == 2
    assert (runs_dir / "figures" / "blend.png").stat().st_size > 5000
    papermill("04_submission", tmp_path, dict(runs=["tiny-spans", "tiny-spans-2"], blend_json="blend.json",
                                              data_dir=str(data), runs_dir=str(runs_dir),
                                              out_dir=str(tmp_path / "out")))
    sub = pd.read_csv(tmp_path / "out" / "submission.csv", dtype=str, keep_default_na=False)
    comp = load_competition(slug)
    assert list(sub.columns) == ["id", "location"]
    assert sub["id"].tolist() == pd.read_csv(data / "sample_submission.csv", dtype=str)["id"].tolist()
    notes = read_table(comp, data, "test").set_index("id")["pn_history"]
    for i, cell in zip(sub["id"], sub["location"]):
        check_spans(parse_location(cell), notes[i])
