"""Plain helpers shared by several test modules (fixtures live in conftest.py).

No test module imports another test module (tests/test_notebook_setup.py checks it): a helper two
modules need lives here, once. The heavier imports (utils.train, nbformat, ...) are made inside
the helpers, so a module of pure-pandas tests importing one of them stays light."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, WORDS, tiny_frame


def write_csv(df: pd.DataFrame, path: Path) -> Path:
    df.to_csv(path, index=False)
    return path


# ----------------------------------------------------------------------------- training settings


def cfg_for(csv, out, model, **kw):
    """A tiny run's TrainConfig: 2 folds, 2 epochs, a validation every 2 steps, lr 1e-3."""
    from utils.config import TrainConfig

    base = dict(train_csv=str(csv), out=str(out), model=model, folds=2, epochs=2, batch_size=8,
                eval_every=2, lr=1e-3, progress=False)
    return TrainConfig(**{**base, **kw})


LORA = dict(pooling="last", lora_r=4, lr=5e-3, head_lr=5e-3)  # as tests/test_decoders.py trains one


def lora_for(csv, out, model, **kw):
    """cfg_for's tiny run, with LoRA adapters of rank 4 on a decoder."""
    return cfg_for(csv, out, model, **{**LORA, **kw})


def train_argv(csv, out, model, *extra) -> list:
    """The CLI twin of cfg_for's defaults."""
    return ["--train-csv", str(csv), "--out", str(out), "--model", str(model), "--folds", "2",
            "--epochs", "2", "--batch-size", "8", "--eval-every", "2", "--lr", "0.001",
            "--no-progress", *map(str, extra)]


def one_fold_argv(csv, model, out, *extra, max_steps: int = 2) -> list:
    """utils.train's (or utils.tune's) arguments for fold 0 of 2 only, `max_steps` steps, a
    validation every 2 steps, the kit's default lr."""
    return ["--train-csv", str(csv), "--model", model, "--out", str(out), "--folds", "2",
            "--only-folds", "0", "--max-steps", str(max_steps), "--eval-every", "2", "--batch-size", "8",
            "--no-progress", *extra]


def pseudo_argv(d, runs, out, *extra, texts=None) -> list:
    """utils.pseudo's arguments: `runs` label `texts` (default: d/texts.csv) against d/train.csv."""
    texts = d / "texts.csv" if texts is None else texts
    return ["--runs", *map(str, runs), "--texts", str(texts), "--train-csv", str(d / "train.csv"),
            "--out", str(out), "--no-progress", *map(str, extra)]


def pseudo_labels(v, names, texts, *extra) -> pd.DataFrame:
    """utils.pseudo's CLI on the runs v/<name> of `names`: v/pseudo.csv, indexed by id."""
    from utils import pseudo

    assert pseudo.main(pseudo_argv(v, [v / n for n in names], v / "pseudo.csv", *extra, texts=texts)) == 0
    return pd.read_csv(v / "pseudo.csv", dtype={"id": str}).set_index("id")


# ----------------------------------------------------------------------------- processes and errors

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}


def cli(module: str, argv: list, **kw) -> subprocess.CompletedProcess:
    """`python -m module argv` in a fresh process (what a Kaggle or Colab user runs)."""
    return subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=600, **kw)


def assert_one_line_error(err: str, *parts: str) -> None:
    """The error is one line, the last on stderr (above it, at most progress bars); no traceback."""
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    errors = [line for line in lines if "error" in line.lower()]
    assert errors == lines[-1:] and lines[-1].startswith("error: "), err
    for part in parts:
        assert part in lines[-1], lines[-1]


def kill_in_fold_1(argv, tmp_path, at: str = "fold 1 step 4/") -> None:
    """Run `python -m utils.train ARGV` and SIGKILL it when it logs a line starting with `at`
    (fold 1's second validation: its state at the first one is saved, the second's perhaps)."""
    cmd = [sys.executable, "-m", "utils.train", *argv]
    with open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            for line in proc.stdout:  # unbuffered: each log line as it is printed
                if line.startswith(at):
                    proc.send_signal(signal.SIGKILL)
                    break
        finally:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "stderr.txt").read_text()


# ----------------------------------------------------------------------------- the walk through utils


def import_floors() -> dict:
    """{utils module: its floor in the package's import graph}: 0 imports no other utils module at
    its top, any other is one floor above the highest one it imports there."""
    import ast

    pkg = ROOT / "utils"
    names = {p.stem for p in pkg.glob("*.py")}
    graph = {}
    for path in pkg.glob("*.py"):
        deps = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        graph[path.stem] = deps & names
    floors: dict = {}

    def floor(m, path=()):
        if m not in floors:
            floors[m] = 1 + max((floor(d, path + (m,)) for d in graph[m] if d not in path), default=-1)
        return floors[m]

    return {m: floor(m) for m in graph}


class Call(tuple):
    """A call from one utils module into another: (caller, caller_function, callee, function)."""

    caller = property(lambda self: self[0])
    caller_function = property(lambda self: self[1])
    callee = property(lambda self: self[2])
    function = property(lambda self: self[3])


def utils_calls(fn, until=None) -> tuple:
    """(fn()'s result, [Call]): every call that `fn` makes from a utils module into another one, in
    order (sys.setprofile); `until(frame)` true ends the recording (e.g. a fold's first forward)."""
    pkg = str(ROOT / "utils")
    calls, done = [], []

    def module(frame):
        name = frame.f_code.co_filename
        return Path(name).stem if name.startswith(pkg) else None

    def profile(frame, event, arg):
        if event != "call" or done or frame.f_back is None:
            return
        if until is not None and until(frame):
            done.append(True)
            return
        callee, caller = module(frame), module(frame.f_back)
        if callee and caller and callee != caller:
            calls.append(Call((caller, frame.f_back.f_code.co_name, callee, frame.f_code.co_name)))

    sys.setprofile(profile)
    try:
        result = fn()
    finally:
        sys.setprofile(None)
    return result, calls


# ----------------------------------------------------------------------------- runs


def assert_fold_reproduces_its_oof(out, fold: int, csv) -> None:
    """Fold `fold` of run `out`, reloaded from its folder alone, predicts its OOF rows (the
    `excerpt` texts of `csv`) as the run recorded them, to 1e-5."""
    from utils.model import TextModel
    from utils.predict import predict_model

    oof = pd.read_csv(out / "oof.csv", dtype={"id": str})
    oof = oof[oof.fold == fold]
    train = pd.read_csv(csv, dtype={"id": str}).set_index("id").loc[oof.id]
    model, tok = TextModel.load(out / f"fold{fold}")
    pred = predict_model(model, tok, train.excerpt.tolist(), 256)[:, 0]
    assert np.abs(pred - oof.pred.to_numpy()).max() < 1e-5


def change_weights(run, fold: int = 0) -> None:
    """Fold `fold`'s weights file with one tensor nudged: as if that fold were trained again."""
    from safetensors.torch import load_file, save_file

    from utils.model import WEIGHTS

    path = run / f"fold{fold}" / WEIGHTS
    weights = load_file(path)
    name = next(k for k, v in weights.items() if v.is_floating_point())
    weights[name] = weights[name] + 0.01
    save_file(weights, path)


# ----------------------------------------------------------------------------- honest folds

K = 0  # the fold whose validation labels are changed


def perturb(frame: pd.DataFrame, folds: np.ndarray, k: int, seed: int = 0) -> pd.DataFrame:
    """`frame` with the targets of fold k's rows replaced by noise (nothing else changed)."""
    out = frame.copy()
    rows = folds == k
    out.loc[rows, "target"] = np.random.default_rng(seed).normal(0, 2, int(rows.sum()))
    return out


def relabel(run, dst, k: int):
    """A copy of `run` whose oof.csv has other labels on fold k's rows (models unchanged)."""
    shutil.copytree(run, dst)
    oof = pd.read_csv(dst / "oof.csv", dtype={"id": str})
    rows = oof.fold == k
    oof.loc[rows, "target"] = np.linspace(-3, 3, int(rows.sum()))
    oof.to_csv(dst / "oof.csv", index=False)
    return dst


def assert_same_fold_k(a: pd.DataFrame, b: pd.DataFrame, n: int):
    col = f"target_fold{K}"
    kept_a, kept_b = a[col].dropna(), b[col].dropna()
    assert sorted(kept_a.index) == sorted(kept_b.index)  # the same rows kept for fold K
    assert 0 < len(kept_a) < n  # the filter did choose
    assert np.allclose(kept_a, kept_b.loc[kept_a.index], atol=1e-5)
    # fold K's spread of every text both files hold (a text no fold keeps leaves the file, and the
    # other folds' models did see fold K's labels: which texts those are may differ)
    common = a.index.intersection(b.index)
    assert set(kept_a.index) <= set(common)
    assert np.allclose(a.loc[common, f"target_std_fold{K}"], b.loc[common, f"target_std_fold{K}"], atol=1e-5)


# ----------------------------------------------------------------------------- competitions' files

ESSAY = "Dear principal, I think students should have a four day school week because it helps. " * 3


def tiny_data(slug: str, folder: Path, n: int = 12) -> Path:
    """CSV files of the competition's real shape (names, columns, joins, value types)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    ids = [f"{i:06x}" for i in range(n)]
    test_ids = [f"t{i}" for i in range(3)]
    if slug == "commonlitreadabilityprize":
        train = pd.DataFrame({"id": ids, "url_legal": "", "license": "", "excerpt": [ESSAY] * n,
                              "target": rng.normal(-1, 1, n), "standard_error": 0.5})
        test = pd.DataFrame({"id": test_ids, "url_legal": "", "license": "", "excerpt": ESSAY})
        sub = pd.DataFrame({"id": test_ids, "target": 0.0})
    elif slug == "feedback-prize-english-language-learning":
        cols = ["cohesion", "syntax", "vocabulary", "phraseology", "grammar", "conventions"]
        train = pd.DataFrame({"text_id": ids, "full_text": ESSAY,
                              **{c: rng.integers(2, 11, n) / 2 for c in cols}})
        test = pd.DataFrame({"text_id": test_ids, "full_text": ESSAY})
        sub = pd.DataFrame({"text_id": test_ids, **{c: 3.0 for c in cols}})
    elif slug == "nlp-getting-started":
        train = pd.DataFrame({"id": range(n), "keyword": ["fire", None] * (n // 2), "location": None,
                              "text": "Forest fire near La Ronge Sask. Canada", "target": [0, 1] * (n // 2)})
        test = pd.DataFrame({"id": [100, 101, 102], "keyword": None, "location": None, "text": "Just happened"})
        sub = pd.DataFrame({"id": [100, 101, 102], "target": 0})
    elif slug == "commonlit-evaluate-student-summaries":
        prompts = ["39c16e", "814d6b", "ebad26"]
        train = pd.DataFrame({"student_id": ids, "prompt_id": [prompts[i % 3] for i in range(n)],
                              "text": "The third wave was an experiment.", "content": rng.normal(0, 1, n),
                              "wording": rng.normal(0, 1, n)})
        pd.DataFrame({"prompt_id": prompts, "prompt_question": "Summarize how the experiment ended.",
                      "prompt_title": "The Third Wave", "prompt_text": "Background..."}).to_csv(
            folder / "prompts_train.csv", index=False)
        pd.DataFrame({"prompt_id": ["abc123"], "prompt_question": "Summarize.", "prompt_title": "T",
                      "prompt_text": "P"}).to_csv(folder / "prompts_test.csv", index=False)
        train.to_csv(folder / "summaries_train.csv", index=False)
        pd.DataFrame({"student_id": test_ids, "prompt_id": "abc123", "text": "A summary."}).to_csv(
            folder / "summaries_test.csv", index=False)
        pd.DataFrame({"student_id": test_ids, "content": 0.0, "wording": 0.0}).to_csv(
            folder / "sample_submission.csv", index=False)
        return folder
    elif slug == "eedi-mining-misconceptions-in-mathematics":
        # n questions, each with one tagged distractor (n model rows); a 30-item catalogue (>= 25 answers)
        words = ESSAY.split()
        items = pd.DataFrame({"MisconceptionId": range(30),
                              "MisconceptionName": [" ".join(words[i % 7: i % 7 + 5]) + f" {i}" for i in range(30)]})
        items.to_csv(folder / "misconception_mapping.csv", index=False)

        def questions(qids, tagged: bool):
            q = pd.DataFrame({"QuestionId": qids, "ConstructId": 1, "ConstructName": "the cat sat on a mat",
                              "SubjectId": 2, "SubjectName": "birds sing", "CorrectAnswer": "A",
                              "QuestionText": "we like to play in the sun", "AnswerAText": "a dog ran home",
                              "AnswerBText": "trees grow big", "AnswerCText": "the sun",
                              "AnswerDText": "photosynthesis"})
            if tagged:
                q["MisconceptionAId"] = None
                q["MisconceptionBId"] = [i % 30 for i in range(len(qids))]
                q["MisconceptionCId"] = None
                q["MisconceptionDId"] = None
            return q

        train, test = questions(range(n), True), questions([1869], False)
        sub = pd.DataFrame({"QuestionId_Answer": ["1869_B", "1869_C", "1869_D"],
                            "MisconceptionId": " ".join(map(str, range(1, 26)))})
    elif slug == "kaggle-llm-science-exam":
        opts = {x: [f"{w} option {x}" for w in ESSAY.split()[:n]] for x in "ABCDE"}
        train = pd.DataFrame({"id": range(n), "prompt": "What does photosynthesis convert?", **opts,
                              "answer": ["A", "B", "C", "D", "E", "A"] * (n // 6) + ["B"] * (n % 6)})
        test = pd.DataFrame({"id": [4615, 3226, 1096], "prompt": "Why do birds sing?",
                             **{x: v[:3] for x, v in opts.items()}})
        sub = pd.DataFrame({"id": [4615, 3226, 1096], "prediction": "A B C"})
    elif slug == "learning-agency-lab-automated-essay-scoring-2":
        train = pd.DataFrame({"essay_id": ids, "full_text": ESSAY, "score": rng.integers(1, 7, n)})
        test = pd.DataFrame({"essay_id": test_ids, "full_text": ESSAY})
        sub = pd.DataFrame({"essay_id": test_ids, "score": 3})
    elif slug == "tweet-sentiment-extraction":
        train = tweet_table(n)
        test = tweet_table(3, seed=1).drop(columns=["selected_text"]).assign(textID=test_ids)
        sub = pd.DataFrame({"textID": test_ids, "selected_text": ""})
    elif slug == "nbme-score-clinical-patient-notes":
        return nbme_folder(folder, max(n // 2, 4))
    train.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    sub.to_csv(folder / "sample_submission.csv", index=False)
    return folder


def tweet_table(n: int = 24, seed: int = 0) -> pd.DataFrame:
    """Tweet Sentiment Extraction's columns over the tiny models' words: selected_text a run of words
    of the text (the whole text when neutral, as most neutral rows are)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        words = list(rng.choice(WORDS, 8))
        sentiment = ("positive", "negative", "neutral")[i % 3]
        s = int(rng.integers(0, 6))
        selected = " ".join(words) if sentiment == "neutral" else " ".join(words[s:s + 2])
        rows.append({"textID": f"{i:08x}", "text": " ".join(words), "selected_text": selected, "sentiment": sentiment})
    return pd.DataFrame(rows)


def nbme_folder(folder: Path, notes: int = 8, seed: int = 0) -> Path:
    """NBME's files over the tiny words: patient_notes.csv, features.csv (numbers written 000, as
    Kaggle's), train.csv (a row per note and feature, `location` lists, `[]` for none) and a test.csv
    writing the note 00000-style, as Kaggle's does."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    features = pd.DataFrame({"feature_num": ["000", "001"], "case_num": 0, "feature_text": ["cat-OR-dog", "sun"]})
    texts = [" ".join(rng.choice(WORDS, 14)) + " the cat and the sun" for _ in range(notes)]
    pd.DataFrame({"pn_num": range(notes), "case_num": 0, "pn_history": texts}).to_csv(folder / "patient_notes.csv",
                                                                                      index=False)
    rows = []
    for i, text in enumerate(texts):
        for f, word in ((0, "cat"), (1, "sun")):
            found = [m.span() for m in re.finditer(rf"\b{word}\b", text)]
            rows.append({"id": f"{i:05d}_{f:03d}", "case_num": 0, "pn_num": i, "feature_num": f,
                         "annotation": str([word] * len(found)), "location": str([f"{s} {e}" for s, e in found])})
    pd.DataFrame(rows).to_csv(folder / "train.csv", index=False)
    features.to_csv(folder / "features.csv", index=False)
    ids = ["00001_000", "00001_001", "00002_000"]
    pd.DataFrame({"id": ids, "case_num": 0, "pn_num": ["00001", "00001", "00002"],
                  "feature_num": ["000", "001", "000"]}).to_csv(folder / "test.csv", index=False)
    pd.DataFrame({"id": ids, "location": ""}).to_csv(folder / "sample_submission.csv", index=False)
    return folder


# The real data of each shape, found through an environment variable each (.ci/run sets them).
REAL = {"commonlit": "COMMONLIT_DATA", "feedback-prize-ell": "ELL_DATA", "nlp-getting-started": "TWEETS_DATA",
        "us-patent-phrase-to-phrase-matching": "PATENT_DATA",
        "eedi-mining-misconceptions-in-mathematics": "EEDI_DATA", "kaggle-llm-science-exam": "SCIENCE_DATA",
        "tweet-sentiment-extraction": "TWEET_SPANS_DATA", "nbme-score-clinical-patient-notes": "NBME_DATA"}


def real_dir(which: str) -> Path:
    folder = os.environ.get(REAL[which])
    if not folder or not Path(folder).is_dir():
        if os.environ.get("CI"):  # in CI a missing data set is a failure, not a skip
            raise FileNotFoundError(f"${REAL[which]} does not name a folder: {folder!r}")
        pytest.skip(f"real data not found: set ${REAL[which]}")
    return Path(folder)


LABELS = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]


def jigsaw(folder: Path, n: int = 24) -> Path:
    """Jigsaw Toxic Comment Classification's files: six 0/1 labels, a probability each."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    words = ESSAY.split()
    train = pd.DataFrame({"id": [f"{i:016x}" for i in range(n)],
                          "comment_text": [" ".join(rng.choice(words, 30)) for _ in range(n)],
                          **{c: (rng.random(n) < 0.4).astype(int) for c in LABELS}})
    train.to_csv(folder / "train.csv", index=False)
    test_ids = [f"t{i:015x}" for i in range(4)]
    pd.DataFrame({"id": test_ids, "comment_text": ESSAY}).to_csv(folder / "test.csv", index=False)
    pd.DataFrame({"id": test_ids[::-1], **{c: 0.5 for c in LABELS}}).to_csv(
        folder / "sample_submission.csv", index=False
    )
    return folder


def effectiveness(folder: Path, n: int = 24) -> Path:
    """Feedback Prize - Predicting Effective Arguments' files: the submission's classes in the
    order Ineffective, Adequate, Effective (not alphabetical)."""
    folder.mkdir(parents=True, exist_ok=True)
    classes = ["Ineffective", "Adequate", "Effective"]
    train = pd.DataFrame({"discourse_id": [f"d{i:011x}" for i in range(n)],
                          "essay_id": [f"E{i // 2:011X}" for i in range(n)],
                          "discourse_text": [ESSAY[i:] for i in range(n)],
                          "discourse_type": ["Claim", "Evidence", "Lead"] * (n // 3),
                          "discourse_effectiveness": [classes[i % 3] for i in range(n)]})
    train.to_csv(folder / "train.csv", index=False)
    test = pd.DataFrame({"discourse_id": ["a1", "a2", "a3"], "essay_id": "EX", "discourse_text": ESSAY,
                         "discourse_type": "Claim"})
    test.to_csv(folder / "test.csv", index=False)
    pd.DataFrame({"discourse_id": ["a3", "a1", "a2"], **{c: 1 / 3 for c in classes}}).to_csv(
        folder / "sample_submission.csv", index=False)
    return folder


def patent_data(folder: Path) -> Path:
    """US Patent's shape, its CPC titles joined from another Kaggle dataset (test_joins and
    train_joins name xhlulu/cpc-codes/titles.csv): train, test, sample submission and titles.csv
    in `folder` (where a user who downloaded it puts it), and competition.json."""
    from utils.competition import Competition

    folder.mkdir(parents=True)
    n = 40
    train = pd.DataFrame({"id": [f"{i:016x}" for i in range(n)], "anchor": [f"abatement {i // 4}" for i in range(n)],
                          "target": [f"noise reduction {i}" for i in range(n)], "context": ["A47", "F16"] * (n // 2),
                          "score": [0, 0.25, 0.5, 0.75, 1.0] * (n // 5)})
    train.to_csv(folder / "train.csv", index=False)
    test = train.drop(columns="score").tail(6).assign(id=[f"t{i}" for i in range(6)])
    test.to_csv(folder / "test.csv", index=False)
    test[["id"]].assign(score=0.0).iloc[::-1].to_csv(folder / "sample_submission.csv", index=False)
    # The CPC table names its key `code` (the competition's files call it `context`).
    pd.DataFrame({"code": ["A47", "F16"], "title": ["furniture; domestic articles", "engineering elements"]}).to_csv(
        folder / "titles.csv", index=False)
    joins = (("xhlulu/cpc-codes/titles.csv", "context", "code"),)
    Competition(slug="us-patent-phrase-to-phrase-matching", text_cols=("anchor", "target", "title"),
                target_cols=("score",), metric="pearson", target_range=(0.0, 1.0), train_joins=joins,
                test_joins=joins).save(folder / "competition.json")
    return folder


def init(data: Path, **edits) -> str:
    """`python -m utils.infer`, then the user's edits to the JSON it wrote."""
    from utils.infer import main as init_main

    out = data / "competition.json"
    assert init_main(["--data", str(data), "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    out.write_text(json.dumps({**d, **edits}))
    return str(out)


METRIC_PY = '''
import numpy as np
from utils.metrics import Metric


def _mae_of_first(y, p):
    return float(np.mean(np.abs(np.asarray(y, float)[:, 0] - np.asarray(p, float)[:, 0])))


METRIC = Metric("mae_first", _mae_of_first, greater_is_better=False, needs="values", title="MAE")
'''


# ----------------------------------------------------------------------------- trained runs (conftest's fixtures)


def train_pair(tmp: Path, tiny_bert, tiny_mpnet) -> dict:
    """Two tiny 2-fold runs of two backbones (BERT with attention pooling, MPNet with mean
    pooling: two tokenizers) on the same folds, a blend.json and a test.csv."""
    from utils.ensemble import save_blend
    from utils.train import run_cv

    tiny_frame(60).to_csv(tmp / "train.csv", index=False)
    runs = [tmp / "bert-attn", tmp / "mpnet-mean"]
    # The kit's default encoder lr: cfg_for's 1e-3 distorts the tiny encoder so much in two steps
    # that fp16 weights move its predictions by ~1.5e-3 (the check rightly refuses that).
    kw = dict(max_steps=2, lr=2e-5)
    run_cv(cfg_for(tmp / "train.csv", runs[0], tiny_bert, **kw))
    run_cv(cfg_for(tmp / "train.csv", runs[1], tiny_mpnet, pooling="mean", **kw))
    save_blend(tmp / "blend.json", {"runs": [r.name for r in runs], "weights": [0.7, 0.3]})
    test = tiny_frame(9, seed=7).drop(columns=["target", "standard_error"])
    test["id"] = [f"t{i:03d}" for i in range(len(test))]
    test.to_csv(tmp / "test.csv", index=False)
    test[["id"]].assign(target=0.0).to_csv(tmp / "sample_submission.csv", index=False)
    return {
        "runs": runs, "blend": tmp / "blend.json", "test": tmp / "test.csv", "sample": tmp / "sample_submission.csv"
    }


def train_other(tmp_path_factory, tiny_bert, slug: str) -> dict:
    """Two tiny 2-fold runs of another built-in competition on data of its real shape (the sample
    submission in another row order than the test file), their blend.json and the data folder."""
    from utils.competition import load_competition
    from utils.ensemble import blend_report, save_blend
    from utils.train import run_cv

    tmp = tmp_path_factory.mktemp(slug)
    data = tiny_data(slug, tmp / "data", 24)
    comp = load_competition(slug)
    sample = pd.read_csv(data / comp.sample_submission)
    sample.iloc[::-1].to_csv(data / comp.sample_submission, index=False)
    runs = [tmp / "bert-attn", tmp / "bert-mean"]
    kw = dict(max_steps=2, lr=2e-5, competition=slug, max_len=32)
    run_cv(cfg_for(data / comp.train_file, runs[0], tiny_bert, **kw))
    run_cv(cfg_for(data / comp.train_file, runs[1], tiny_bert, pooling="mean", **kw))
    save_blend(tmp / "blend.json", blend_report(runs))
    return {"runs": runs, "blend": tmp / "blend.json", "test": data / comp.test_file, "data": data,
            "comp": comp}


def train_lora(tmp: Path, base: str) -> dict:
    """A tiny 2-fold LoRA run (2 steps a fold) on the random decoder in `base`, its test.csv and
    sample submission."""
    from utils.train import run_cv

    tmp.mkdir(parents=True, exist_ok=True)
    tiny_frame(40).to_csv(tmp / "train.csv", index=False)
    run = tmp / "llama-lora"
    run_cv(lora_for(tmp / "train.csv", run, base, max_steps=2))
    test = tiny_frame(9, seed=7).drop(columns=["target", "standard_error"])
    test["id"] = [f"t{i:03d}" for i in range(len(test))]
    test.to_csv(tmp / "test.csv", index=False)
    test[["id"]].assign(target=0.0).to_csv(tmp / "sample_submission.csv", index=False)
    return {"runs": [run], "base": Path(base), "test": tmp / "test.csv", "sample": tmp / "sample_submission.csv"}


def base_weights_in(folder: Path, base: Path) -> list:
    """Files under `folder` that are the base model's weights: a weight file of its names, or of
    the same content as one of the base's."""
    from utils.backbone import base_files
    from utils.files import file_sha256

    shas = {sha for name, sha in base_files(base).items() if name != "config.json"}
    return [p for p in folder.rglob("*") if p.is_file() and (
        p.name == "model.safetensors" or p.suffix == ".bin" or file_sha256(p) in shas)]


# ----------------------------------------------------------------------------- Kaggle notebooks and kernels

OWNER = "kituser"
BASE_HANDLE = f"{OWNER}/tiny-llama/transformers/default/1"  # a Kaggle Model holding a LoRA run's base
SUB_PARAMS = ("kit_dataset", "models_dataset", "runs", "blend_json", "data_dir", "out_dir", "reranker")
PARAMS = {  # what each notebook's parameters cell declares in these tests
    "01_eda": ("kit_dataset", "data_dir"),
    "02_train": ("kit_dataset", "model_name", "num_processes", "data_dir"),
    "03_ensemble": ("kit_dataset", "runs", "runs_dir"),
    "04_submission": (*SUB_PARAMS, "batch_size"),
    "05_pseudo": ("kit_dataset", "models_dataset", "teachers", "blend_json", "runs_dir"),
}
DEFAULTS = {"runs": ["x"], "teachers": ["x"], "batch_size": 64, "model_name": "roberta-base", "num_processes": 1}

# The setup cell of the kit's notebooks: the kit from the attached dataset, first on sys.path.
SETUP = """\
import os
import sys
from pathlib import Path

kaggle_input = Path(os.environ.get("KAGGLE_INPUT_ROOT", "/kaggle/input"))
kit_dirs = [
    d
    for d in [kaggle_input / kit_dataset, *kaggle_input.glob(f"datasets/*/{kit_dataset}")]
    if (d / "utils" / "__init__.py").is_file()
]
if kit_dirs:
    sys.path.insert(0, str(kit_dirs[0]))
import utils

if kit_dirs:
    assert Path(utils.__file__).resolve().is_relative_to(kit_dirs[0].resolve()), utils.__file__
print("utils", utils.__version__, "from", Path(utils.__file__).parent)"""

PREDICT = """\
import pandas as pd

from utils import env
from utils.ensemble import blend_weights
from utils.predict import predict, write_submission

root = env.dataset_dir(models_dataset)
paths = [root / r for r in runs]
test = pd.read_csv(env.competition_dir(data_dir or None) / "test.csv", dtype={"id": str})
weights = blend_weights(root / blend_json, paths)[0] if blend_json else None
preds = predict(paths, test["excerpt"].tolist(), weights, progress=False)
out = Path(out_dir) if out_dir else env.working_dir()
write_submission(out / "submission.csv", test, preds)"""


def fake_notebook(path: Path, names, body=("print('body')",)) -> Path:
    """A notebook whose first cell (tagged 'parameters') declares `names`."""
    import nbformat

    lines = [f"{n} = {DEFAULTS.get(n, 'default')!r}" for n in names]
    params = nbformat.v4.new_code_cell("\n".join(lines), metadata={"tags": ["parameters"]})
    cells = [nbformat.v4.new_markdown_cell("# title"), params]
    cells += [nbformat.v4.new_code_cell(src) for src in body]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def fake_notebooks(folder: Path) -> list:
    return [fake_notebook(folder / f"{stem}.ipynb", names) for stem, names in PARAMS.items()]


def submission_notebook(tmp: Path) -> Path:
    """The submission notebook to prove: the lead's notebooks/04_submission.ipynb when it exists,
    else its jupytext pair 04_submission.py converted, else a stand-in with the same parameters,
    setup cell and calls into utils.predict."""
    real = ROOT / "notebooks" / "04_submission.ipynb"
    if real.is_file():
        return real
    pair = ROOT / "notebooks" / "04_submission.py"
    if pair.is_file():
        import jupytext

        jupytext.write(jupytext.read(pair), tmp / "04_submission.ipynb")
        return tmp / "04_submission.ipynb"
    return fake_notebook(tmp / "04_submission.ipynb", SUB_PARAMS, (SETUP, PREDICT))


def kernel_env(tmp: Path) -> tuple[Path, dict, list]:
    """An interpreter that sees the third-party packages of this one but neither the kit (installed
    editable here) nor pip, a Jupyter kernelspec for it, and a clean environment for the kernel."""
    import site

    venv = tmp / "kenv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    target = Path(
        subprocess.check_output(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    hidden = ("pip", "utils", "commonlit_kit", "__editable__", "_distutils_hack", "sitecustomize")
    for sp in site.getsitepackages():
        for entry in Path(sp).iterdir():
            if (
                entry.name.startswith(hidden)
                or entry.suffix == ".pth"
                or (target / entry.name).exists()
            ):
                continue
            (target / entry.name).symlink_to(entry)
    spec = tmp / "jupyter" / "kernels" / "kit-offline"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(py), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "kit offline",
                "language": "python",
            }
        )
    )
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env.update(
        JUPYTER_PATH=str(tmp / "jupyter"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        IPYTHONDIR=str(tmp / "ipython"),
        MPLCONFIGDIR=str(tmp / "mpl"),
        MPLBACKEND="Agg",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        KAGGLE_KERNEL_RUN_TYPE="Batch",
    )
    # Network denied: a private network namespace with only loopback (Jupyter's kernel talks over
    # 127.0.0.1), else a guard in the kernel's interpreter that refuses any other connection.
    if (
        shutil.which("unshare")
        and shutil.which("ip")
        and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    ):
        prefix = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" "$@"']
    else:
        prefix = []
        (target / "sitecustomize.py").write_text(SOCKET_GUARD)
    return py, env, prefix


SOCKET_GUARD = """\
import ipaddress, socket
_connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex
def _check(address):
    host = address[0] if isinstance(address, tuple) else None
    if host is not None and host != "localhost" and not ipaddress.ip_address(host).is_loopback:
        raise OSError(f"network denied: {address}")
socket.socket.connect = lambda self, a: (_check(a), _connect(self, a))[1]
socket.socket.connect_ex = lambda self, a: (_check(a), _connect_ex(self, a))[1]
"""


def input_tree(root: Path, layout: str, bundle: dict, test_csv: Path, files=(), datasets=None) -> None:
    """The bundle's datasets and the competition data (the test file and `files`) as Kaggle
    mounts them, under the bundle's competition slug; `datasets`: {OWNER/DATASET: files} of other
    attached datasets."""
    owner = bundle["owner"]
    comp = bundle["competition"]
    comp_dir = root / comp if layout == "old" else root / "competitions" / comp
    comp_dir.mkdir(parents=True)
    for f in (test_csv, *files):
        shutil.copy2(f, comp_dir / Path(f).name)
    for key in ("code", "models"):
        src = Path(bundle[key]["path"])
        dst = root / src.name if layout == "old" else root / "datasets" / owner / src.name
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("dataset-metadata.json"))
    for ref, paths in (datasets or {}).items():
        dst = root / ref.split("/")[1] if layout == "old" else root / "datasets" / ref
        dst.mkdir(parents=True)
        for f in paths:
            shutil.copy2(f, dst / Path(f).name)


def run_offline(notebook: Path, inp: Path, tmp: Path) -> Path:
    """Execute `notebook` (a kernel's code file) with papermill on the offline kernel interpreter,
    /kaggle/input at `inp`; the kernel's working folder (where submission.csv lands)."""
    work, cwd = tmp / "working", tmp / "cwd"
    work.mkdir()
    cwd.mkdir()
    py, env, prefix = kernel_env(tmp / "k")
    env.update(KAGGLE_INPUT_ROOT=str(inp), KAGGLE_WORKING_ROOT=str(work))
    cmd = [*prefix, sys.executable, "-m", "papermill", str(notebook), str(tmp / "executed.ipynb"),
           "-k", "kit-offline", "--cwd", str(cwd), "--no-progress-bar"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    return work


# ----------------------------------------------------------------------------- the kit's notebooks under papermill


def python3_kernel() -> None:
    """Make sure the `python3` kernel runs this interpreter (install it into sys.prefix if not)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        argv0 = KernelSpecManager().get_kernel_spec("python3").argv[0]
    except NoSuchKernel:
        argv0 = None
    # jupyter_client swaps a bare "python" for sys.executable
    if argv0 in ("python", "python3") or (argv0 and Path(argv0) == Path(sys.executable)):
        return
    cmd = [sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3"]
    subprocess.run(cmd, check=True, capture_output=True)


def papermill(name: str, out: Path, params: dict) -> Path:
    """notebooks/<name>.ipynb executed by papermill, as on Kaggle, on the `python3` kernel of this
    interpreter, into out/<name>.ipynb."""
    import papermill as pm

    python3_kernel()
    nb = ROOT / "notebooks"
    pm.execute_notebook(str(nb / f"{name}.ipynb"), str(out / f"{name}.ipynb"), parameters=params,
                        cwd=str(nb), kernel_name="python3", language="python", progress_bar=False,
                        extra_arguments=["--IPKernelApp.log_level=ERROR"])
    return out / f"{name}.ipynb"


# ----------------------------------------------------------------------------- 2025's shapes, for init


SHAPE_WORDS = ("the cat sat on a mat and we like to play in the sun a dog ran home birds sing "
         "people read books every day").split()

RULES = ["No advertising: spam, referral links and unsolicited promotion are not allowed here",
         "No legal advice: do not offer or request legal advice in any thread",
         "Be civil: personal attacks and insults against other users are removed",
         "No medical claims: do not give a diagnosis or a treatment plan to anyone",
         "Stay on topic: posts must be about the subject of this community only",
         "No spoilers: mark plot details of recent films and books as spoilers please",
         "No doxxing: never share the personal information of a private person online",
         "No reposts: content posted in the last month will be removed by moderators"]


def distinct_texts(rng, n: int, words: int = 12) -> list:
    """n distinct texts of `words` words (a number keeps each its own)."""
    return [" ".join(rng.choice(SHAPE_WORDS, words)) + f" {i}" for i in range(n)]


def rules_folder(folder: Path, n: int = 80, seed: int = 0, unseen: bool = True) -> Path:
    """Agile Community Rules' shape: a comment, the rule it is judged against (6 rules over the
    training rows; two more only in test when `unseen`), its subreddit (a one-word tag), two
    positive and two negative worked examples of the rule, rule_violation 0/1; the sample
    submission holds 0.5 on every row."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)

    def table(ids, rules, with_label):
        t = pd.DataFrame({"row_id": ids, "body": distinct_texts(rng, len(ids), 20), "rule": rules,
                          "subreddit": rng.choice(["news", "pics", "gaming", "askreddit"], len(ids)),
                          **{f"{kind}_example_{j}": distinct_texts(rng, len(ids), 14)
                             for kind in ("positive", "negative") for j in (1, 2)}})
        if with_label:
            t["rule_violation"] = (np.arange(len(ids)) + rng.integers(0, 2, len(ids))) % 2
        return t

    table(np.arange(n), [RULES[i % 6] for i in range(n)], True).to_csv(folder / "train.csv", index=False)
    test_rules = [RULES[6], RULES[7], RULES[0], RULES[6]] if unseen else [RULES[0], RULES[1], RULES[2], RULES[3]]
    test = table(np.arange(2000, 2004), test_rules, False)
    test.to_csv(folder / "test.csv", index=False)
    pd.DataFrame({"row_id": test.row_id, "rule_violation": 0.5}).to_csv(folder / "sample_submission.csv",
                                                                         index=False)
    return folder


CATEGORIES = ("True_Correct", "True_Neither", "False_Neither", "False_Misconception")
MISCONCEPTIONS = ("Incomplete", "Adding_across", "Duplication")


def map_folder(folder: Path, n: int = 96, seed: int = 0) -> Path:
    """MAP 2025's shape: a question (4 over the rows, the same in test), the chosen answer, the
    student's explanation, a Category and a Misconception (written NA unless the category is a
    misconception); the sample submission answers "Category:Misconception" three per row."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    questions = [f"What fraction of the shape is not shaded when {k} of the parts are?" for k in (2, 3, 4, 5)]
    q = np.arange(n) % 4
    category = np.array(CATEGORIES)[(np.arange(n) // 4) % 4]
    misconception = np.where(category == "False_Misconception",
                             np.array(MISCONCEPTIONS)[np.arange(n) % 3], "NA")
    train = pd.DataFrame({"row_id": np.arange(n), "QuestionId": 31772 + q,
                          "QuestionText": np.array(questions)[q],
                          "MC_Answer": np.array(["1/3", "3/6", "3/8", "3/9"])[q],
                          "StudentExplanation": distinct_texts(rng, n, 10), "Category": category,
                          "Misconception": misconception})
    train.to_csv(folder / "train.csv", index=False)
    test = train.drop(columns=["Category", "Misconception"]).head(3).assign(row_id=[36696, 36697, 36698])
    test["StudentExplanation"] = distinct_texts(rng, 3, 10)
    test.to_csv(folder / "test.csv", index=False)
    pd.DataFrame({"row_id": test.row_id, "Category:Misconception":
                  "True_Correct:NA False_Neither:NA False_Misconception:Incomplete"}).to_csv(
        folder / "sample_submission.csv", index=False)
    return folder
