"""The whole path for competitions that are not built in, as the README tells it: `init`, an edit
of the description, two runs, a blend, `utils.predict`, `build`, and the bundle's submission kernel
run offline on a laid-out /kaggle/input: US Patent Phrase Matching on its real files (three short
text columns, folds grouped by anchor, Pearson), several 0/1 labels, and a metric of one's own
(the kernel has never seen its file: the description carries it)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import (
    METRIC_PY,
    OWNER,
    cfg_for,
    init,
    input_tree,
    jigsaw,
    map_folder,
    real_dir,
    rules_folder,
    run_offline,
    submission_notebook,
    tiny_data,
)

from utils import ensemble, predict
from utils.bundle import BundleSpec, build
from utils.competition import load_competition
from utils.tables import read_table
from utils.train import run_cv

pytestmark = [pytest.mark.integration, pytest.mark.versions]


def whole_path(data: Path, desc: str, tmp: Path, model: str, **kw) -> dict:
    """Two runs (attention, mean pooling) of the description, their blend, the submission."""
    comp = load_competition(desc)
    runs = [tmp / "attn", tmp / "mean"]
    for run, pooling in zip(runs, ("attention", "mean")):
        run_cv(cfg_for(data / comp.train_file, run, model, competition=desc, max_steps=2, max_len=32,
                       lr=2e-5, pooling=pooling, **kw))
    assert ensemble.main(["--runs", *map(str, runs), "--out", str(tmp / "blend.json")]) == 0
    argv = ["--test-csv", str(data / comp.test_file), "--runs", *map(str, runs), "--blend", str(tmp / "blend.json"),
            "--out", str(tmp / "submission.csv")]
    assert predict.main(argv) == 0
    return {"comp": comp, "runs": runs, "blend": tmp / "blend.json", "data": data,
            "submission": pd.read_csv(tmp / "submission.csv", dtype={comp.id_col: str})}


def run_kernel(t: dict, tmp: Path) -> pd.DataFrame:
    comp = t["comp"]
    out = build(BundleSpec(t["runs"], OWNER, tmp / "bundle", blend=t["blend"],
                           notebooks=[submission_notebook(tmp)], wheels=None))
    kernel = Path(out["kernels"][0]["path"])
    meta = json.loads((kernel / "kernel-metadata.json").read_text())
    inp = tmp / "input"
    input_tree(inp, "new", out, t["data"] / comp.test_file, [t["data"] / comp.sample_submission])
    work = run_offline(kernel / meta["code_file"], inp, tmp)
    kernel_sub = pd.read_csv(work / "submission.csv", dtype={comp.id_col: str})
    # What utils.predict writes here from the bundled (fp16) copies the kernel read.
    models = Path(out["models"]["path"])
    local = predict.submit([models / r for r in out["models"]["runs"]], t["data"] / comp.test_file, tmp / "want.csv",
                           blend_json=models / "blend.json", progress=False)
    same_submission(kernel_sub, local.astype({comp.id_col: str}), comp)
    same_submission(kernel_sub, t["submission"], comp, tol=2e-3)  # fp16 copies of the fp32 runs


def kernel_submission(out: dict, data: Path, comp, tmp: Path, files=()) -> pd.DataFrame:
    """The bundle `out`'s submission kernel run offline on a laid-out /kaggle/input (the test file,
    the sample and `files` beside it): its submission.csv, read as text."""
    kernel = Path(out["kernels"][0]["path"])
    meta = json.loads((kernel / "kernel-metadata.json").read_text())
    inp = tmp / "input"
    input_tree(inp, "new", out, data / comp.test_file, [data / comp.sample_submission, *files])
    work = run_offline(kernel / meta["code_file"], inp, tmp)
    return pd.read_csv(work / "submission.csv", dtype=str, keep_default_na=False)


def same_submission(kernel: pd.DataFrame, local: pd.DataFrame, comp, tol: float = 1e-4) -> None:
    assert list(kernel.columns) == list(local.columns)
    assert kernel[comp.id_col].tolist() == local[comp.id_col].tolist()
    a, b = (f.drop(columns=comp.id_col).to_numpy(dtype=float) for f in (kernel, local))
    assert np.abs(a - b).max() < tol


def test_us_patent_real_files_from_init_to_the_offline_kernel(tmp_path, tiny_bert):
    data = real_dir("us-patent-phrase-to-phrase-matching")
    desc = tmp_path / "competition.json"
    from utils.infer import main as init_main

    assert init_main(["--data", str(data), "--out", str(desc)]) == 0
    d = json.loads(desc.read_text())
    assert d["text_cols"] == ["anchor", "target", "context"] and d["group_col"] == "anchor"
    desc.write_text(json.dumps({**d, "slug": "us-patent-phrase-to-phrase-matching", "metric": "pearson"}))
    t = whole_path(data, str(desc), tmp_path, tiny_bert, max_rows=600)
    comp, sub = t["comp"], t["submission"]
    sample = pd.read_csv(data / comp.sample_submission, dtype={"id": str})
    assert list(sub.columns) == ["id", "score"] and sub["id"].tolist() == sample["id"].tolist()
    assert sub["score"].between(0, 1).all()
    metrics = json.loads((tmp_path / "attn" / "metrics.json").read_text())
    assert metrics["metric"] == "pearson"
    folds = pd.read_csv(tmp_path / "attn" / "folds.csv", dtype={"id": str}).set_index("id")["fold"]
    anchors = pd.read_csv(data / "train.csv", dtype={"id": str}).set_index("id")["anchor"].loc[folds.index]
    assert (folds.groupby(anchors.to_numpy()).nunique() == 1).all()  # no anchor in two folds
    run_kernel(t, tmp_path)


def test_multilabel_offline_kernel(tmp_path, tiny_bert):
    data = jigsaw(tmp_path / "jigsaw")
    t = whole_path(data, init(data), tmp_path, tiny_bert)
    assert t["comp"].task == "multilabel"
    probs = t["submission"].drop(columns="id").to_numpy(dtype=float)
    assert probs.shape == (4, 6) and ((probs > 0) & (probs < 1)).all()  # a sigmoid per label
    run_kernel(t, tmp_path)


def test_a_metric_of_ones_own_reaches_the_offline_kernel(tmp_path, tiny_bert):
    data = tiny_data("commonlitreadabilityprize", tmp_path / "cl", 24)
    (data / "my_metric.py").write_text(METRIC_PY)
    desc = init(data, metric="mae_first", metric_file="my_metric.py")
    t = whole_path(data, desc, tmp_path, tiny_bert)
    assert json.loads(t["blend"].read_text())["metric"] == "mae_first"
    (data / "my_metric.py").unlink()  # the kernel's input has no such file: the description carries it
    run_kernel(t, tmp_path)


def test_a_rule_judged_competition_from_init_to_the_offline_kernel(tmp_path, tiny_bert):
    """Agile Community Rules' shape as init describes it (a probability sample: ROC AUC; each
    comment paired after its rule; folds grouped by rule): two runs, their blend, the kernel."""
    data = rules_folder(tmp_path / "rules")
    t = whole_path(data, init(data), tmp_path, tiny_bert)
    comp = t["comp"]
    assert comp.text_cols == ("rule", "body") and comp.group_col == "rule" and comp.metric_name == "roc_auc"
    probs = t["submission"]["rule_violation"].to_numpy(dtype=float)
    assert len(probs) == 4 and ((probs > 0) & (probs < 1)).all()  # probabilities, as the sample holds
    folds = pd.read_csv(tmp_path / "attn" / "folds.csv", dtype={"id": str}).set_index("id")["fold"]
    rules = pd.read_csv(data / "train.csv", dtype={"row_id": str}).set_index("row_id")["rule"].loc[folds.index]
    assert (folds.groupby(rules.to_numpy()).nunique() == 1).all()  # no rule in two folds
    assert json.loads((tmp_path / "attn" / "metrics.json").read_text())["metric"] == "roc_auc"
    run_kernel(t, tmp_path)


def test_joined_answers_from_init_to_the_offline_kernel(tmp_path, tiny_bert):
    """MAP 2025's shape as init describes it: the kernel, offline, writes the joined labels
    ("False_Misconception:Incomplete"), three per row, as utils.predict does from the bundle."""
    data = map_folder(tmp_path / "map")
    desc = init(data)
    comp = load_competition(desc)
    run = tmp_path / "run"
    run_cv(cfg_for(data / comp.train_file, run, tiny_bert, competition=desc, max_steps=2, max_len=32, pooling="mean"))
    out = build(BundleSpec([run], OWNER, tmp_path / "bundle", notebooks=[submission_notebook(tmp_path)],
                           wheels=None))
    got = kernel_submission(out, data, comp, tmp_path)
    models = Path(out["models"]["path"])
    want = predict.submit([models / r for r in out["models"]["runs"]], data / comp.test_file, tmp_path / "want.csv",
                          progress=False).astype(str)
    sample = pd.read_csv(data / comp.sample_submission, dtype=str)
    assert list(got.columns) == list(sample.columns) and got["row_id"].tolist() == sample["row_id"].tolist()
    assert got.equals(want)
    labels = set(read_table(comp, data)["Category:Misconception"])
    for answer in got["Category:Misconception"]:
        assert len(answer.split()) == 3 and set(answer.split()) <= labels  # the joined labels, as written


@pytest.mark.parametrize("slug", ["eedi-mining-misconceptions-in-mathematics", "kaggle-llm-science-exam"])
def test_a_ranking_competitions_offline_kernel_answers_the_samples_rows(slug, tmp_path, tiny_bert):
    """A retriever (its catalogue beside the test file in the competition's input, as Kaggle mounts
    it) and a multiple-choice scorer: the bundle's kernel, offline, writes what utils.predict writes
    from the same bundled runs: the sample's rows, the top answer_k ids or letters each."""
    data = tiny_data(slug, tmp_path / "d", 24)
    comp = load_competition(slug)
    run = tmp_path / "run"
    run_cv(cfg_for(data / comp.train_file, run, tiny_bert, competition=slug, max_steps=2, max_len=32,
                   pooling="mean"))
    out = build(BundleSpec([run], OWNER, tmp_path / "bundle", notebooks=[submission_notebook(tmp_path)],
                           wheels=None))
    kernel = Path(out["kernels"][0]["path"])
    meta = json.loads((kernel / "kernel-metadata.json").read_text())
    inp = tmp_path / "input"
    files = [data / comp.sample_submission] + ([data / comp.catalogue[0]] if comp.catalogue else [])
    input_tree(inp, "new", out, data / comp.test_file, files)
    work = run_offline(kernel / meta["code_file"], inp, tmp_path)
    got = pd.read_csv(work / "submission.csv", dtype=str)
    models = Path(out["models"]["path"])
    want = predict.submit([models / r for r in out["models"]["runs"]], data / comp.test_file, tmp_path / "want.csv",
                          progress=False).astype(str)
    sample = pd.read_csv(data / comp.sample_submission, dtype=str)
    assert list(got.columns) == list(sample.columns) and got[comp.id_col].tolist() == sample[comp.id_col].tolist()
    assert got.equals(want)
    assert all(len(a.split()) == comp.answer_k for a in got[comp.answer_column])


def test_a_rerankers_offline_kernel_retrieves_then_reranks(tmp_path, tiny_bert):
    """Eedi's retriever and a reranker trained on its out-of-fold candidates, bundled together: the
    submission kernel, offline, writes what utils.rerank writes from the same bundled copies; a
    reranker is bundled after one retriever only, and only one of that competition."""
    from utils import rerank
    from utils.bundle import BundleError

    slug = "eedi-mining-misconceptions-in-mathematics"
    data = tiny_data(slug, tmp_path / "d", 24)
    comp = load_competition(slug)
    run_cv(cfg_for(data / comp.train_file, tmp_path / "retriever", tiny_bert, competition=slug, max_steps=2,
                   max_len=32, pooling="mean"))
    assert rerank.main(["build", "--retriever", str(tmp_path / "retriever"), "--data", str(data), "--candidates",
                        "25", "--out", str(tmp_path / "rr")]) == 0
    run_cv(cfg_for(tmp_path / "rr" / "rerank_train.csv", tmp_path / "reranker", tiny_bert,
                   competition=str(tmp_path / "rr" / "competition.json"), max_steps=2, max_len=32, pooling="mean"))
    spec = dict(owner=OWNER, notebooks=[submission_notebook(tmp_path)], wheels=None)
    for runs, reranker, why in (([tmp_path / "retriever"] * 2, tmp_path / "reranker", "give one run"),
                                ([tmp_path / "retriever"], tmp_path / "retriever", "must be folders of other names"),
                                ([tmp_path / "reranker"], tmp_path / "retriever", "is not a retriever run")):
        with pytest.raises(BundleError, match=why):
            build(BundleSpec(runs, out=tmp_path / "refused", reranker=reranker, **spec))
    out = build(BundleSpec([tmp_path / "retriever"], out=tmp_path / "bundle", reranker=tmp_path / "reranker", **spec))
    kernel = next(k for k in out["kernels"] if k["role"] == "submission")
    assert kernel["parameters"]["reranker"] == "reranker" and out["models"]["reranker"] == "reranker"
    meta = json.loads((Path(kernel["path"]) / "kernel-metadata.json").read_text())
    inp = tmp_path / "input"
    input_tree(inp, "new", out, data / comp.test_file, [data / comp.sample_submission, data / comp.catalogue[0]])
    work = run_offline(Path(kernel["path"]) / meta["code_file"], inp, tmp_path)
    got = pd.read_csv(work / "submission.csv", dtype=str)
    models = Path(out["models"]["path"])
    timings: dict = {}
    want = rerank.predict(models / "retriever", models / "reranker", data / comp.test_file, tmp_path / "want.csv",
                          timings=timings, progress=False).astype(str)
    assert set(timings) == {"retrieve", "rerank"}
    assert got.equals(want)
    # Reranked: each row's top 25 hold the retriever's top 25 in the reranker's order.
    plain = predict.submit([models / "retriever"], data / comp.test_file, tmp_path / "plain.csv", progress=False)
    for a, b in zip(got[comp.answer_column], plain[comp.answer_column].astype(str)):
        assert sorted(a.split()[:25]) == sorted(b.split()[:25])
    assert (got[comp.answer_column] != plain[comp.answer_column].astype(str)).all()  # in another order


@pytest.mark.parametrize("slug", ["tweet-sentiment-extraction", "nbme-score-clinical-patient-notes"])
def test_a_span_competitions_offline_kernel_writes_the_samples_answers(slug, tmp_path, tiny_bert):
    """Tweet (the span's text) and NBME (offsets "s e;s e", its notes and features joined from the
    tables beside the test file, the test file writing the note 00001 where they write 1): the
    bundle's kernel, offline, writes what utils.predict writes from the same bundled runs, in the
    sample's rows and column."""
    data = tiny_data(slug, tmp_path / "d", 24)
    comp = load_competition(slug)
    run = tmp_path / "run"
    run_cv(cfg_for(data / comp.train_file, run, tiny_bert, competition=slug, max_steps=2, max_len=16))
    out = build(BundleSpec([run], OWNER, tmp_path / "bundle", notebooks=[submission_notebook(tmp_path)],
                           wheels=None))
    got = kernel_submission(out, data, comp, tmp_path, [data / f for f, *_ in comp.test_joins])
    models = Path(out["models"]["path"])
    want = predict.submit([models / r for r in out["models"]["runs"]], data / comp.test_file, tmp_path / "want.csv",
                          progress=False)
    want = pd.read_csv(tmp_path / "want.csv", dtype=str, keep_default_na=False)
    sample = pd.read_csv(data / comp.sample_submission, dtype=str)
    assert list(got.columns) == list(sample.columns) and got[comp.id_col].tolist() == sample[comp.id_col].tolist()
    assert got.equals(want)
    from utils.spans import check_spans, parse_location
    from utils.tables import read_table

    texts = read_table(comp, data, "test").set_index(comp.id_col)[comp.span_col]
    for i, answer in zip(got[comp.id_col], got[comp.target_cols[0]]):
        if comp.span_labels == "text":  # one span, copied from its tweet
            assert answer and answer in texts[i]
        else:  # offsets inside its note
            check_spans(parse_location(answer), texts[i])


def test_a_distilled_span_student_blends_and_travels_to_the_offline_kernel_like_any_run(tmp_path, tiny_bert):
    """Tweet: a student of its teacher's character scores, blended with that teacher, bundled: the
    kernel, offline, writes what utils.predict writes from the bundle, and the bundled student still
    names its teacher by identity."""
    from utils import pseudo, runs

    slug = "tweet-sentiment-extraction"
    data = tiny_data(slug, tmp_path / "d", 24)
    comp = load_competition(slug)
    teacher, student, signal = tmp_path / "teacher", tmp_path / "student", tmp_path / "teacher.csv"
    kw = dict(competition=slug, max_steps=2, max_len=16)
    run_cv(cfg_for(data / comp.train_file, teacher, tiny_bert, **kw))
    assert pseudo.main(["--runs", str(teacher), "--train-csv", str(data / comp.train_file), "--training-rows",
                        "--out", str(signal), "--no-progress"]) == 0
    run_cv(cfg_for(data / comp.train_file, student, tiny_bert, distil_csv=str(signal), pooling="tokens", **kw))
    blend = tmp_path / "blend.json"
    assert ensemble.main(["--runs", str(teacher), str(student), "--out", str(blend), "--equal"]) == 0
    out = build(BundleSpec([teacher, student], OWNER, tmp_path / "bundle", blend=blend,
                           notebooks=[submission_notebook(tmp_path)], wheels=None))
    got = kernel_submission(out, data, comp, tmp_path)
    models = Path(out["models"]["path"])
    predict.submit([models / r for r in out["models"]["runs"]], data / comp.test_file, tmp_path / "want.csv",
                   blend_json=models / "blend.json", progress=False)
    assert got.equals(pd.read_csv(tmp_path / "want.csv", dtype=str, keep_default_na=False))
    bundled = models / out["models"]["runs"][1]
    assert runs.read_metrics(bundled)["teachers"] == [{"run": "teacher", "identity": runs.identity(teacher)}]
