"""The ranking competitions on their real data ($EEDI_DATA, $SCIENCE_DATA) with all-MiniLM-L6-v2:
the tables as the kit reads them, a short training run each, and the submission of the real test
file in the sample's rows and columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import cfg_for, real_dir

from utils import predict
from utils.competition import BUILTIN
from utils.tables import competition_folds, read_catalogue, read_table

pytestmark = [pytest.mark.integration, pytest.mark.versions]

EEDI, SCIENCE = "eedi-mining-misconceptions-in-mathematics", "kaggle-llm-science-exam"


def test_eedi_reads_as_3503_distractors_against_its_whole_catalogue_in_question_folds():
    data, comp = real_dir(EEDI), BUILTIN[EEDI]
    df, items = read_table(comp, data), read_catalogue(comp, data)
    assert len(df) == 3503 and len(items) == 2587 and df["MisconceptionId"].isin(items["id"]).all()
    assert df["MisconceptionId"].nunique() == 1412  # the README's count of tagged misconceptions
    folds = competition_folds(comp, df)
    assert (df.groupby("QuestionId")["QuestionId"].transform(lambda g: folds[g.index].min())
            == df.groupby("QuestionId")["QuestionId"].transform(lambda g: folds[g.index].max())).all()
    unseen = ~df["MisconceptionId"][folds == 0].isin(df["MisconceptionId"][folds != 0])
    assert 0.1 < unseen.mean() < 0.5  # a share of fold 0's misconceptions no training row holds
    test = read_table(comp, data, "test")
    sample = pd.read_csv(data / comp.sample_submission)
    assert test["QuestionId_Answer"].tolist() == sample["QuestionId_Answer"].tolist()


def test_eedis_built_in_cut_keeps_every_wrong_answer_at_the_documented_max_len(minilm_path):
    """At --max-len 128 with the description's own cut, no distractor becomes the same sequence as
    a sibling of its question by losing its wrong answer (the first tokens alone: 556 of 3,503 did;
    13 are the same sequence even uncut: the same image description or answer twice)."""
    from collections import Counter

    from utils.batching import encode
    from utils.model import load_tokenizer

    data, comp = real_dir(EEDI), BUILTIN[EEDI]
    df, tok = read_table(comp, data), load_tokenizer(minilm_path)
    texts = comp.input_texts(df)

    def siblings(ids) -> int:  # rows whose sequence another distractor of their question shares
        keys = list(zip(df["QuestionId"], map(tuple, ids)))
        seen = Counter(keys)
        return sum(seen[k] > 1 for k in keys)

    whole = siblings(encode(texts, tok, 10**6)[0])
    fitted, cut = encode(texts, tok, 128, comp.long_text)
    assert len(cut) > 500  # the cut matters: a fifth of the queries are longer than 128 tokens
    assert siblings(fitted) - whole <= 5, (siblings(fitted), whole)


def test_a_short_eedi_retriever_ranks_the_real_catalogue_and_submits_the_samples_rows(tmp_path, minilm_path):
    from utils.train import run_cv

    data, comp = real_dir(EEDI), BUILTIN[EEDI]
    cfg = cfg_for(data / "train.csv", tmp_path / "run", minilm_path, competition=EEDI, folds=5, only_folds=(0,),
                  max_rows=300, max_steps=4, epochs=1, eval_every=100, lr=2e-5, max_len=96, pooling="mean")
    metrics = run_cv(cfg)
    # 60 queries ranked against all 2,587 items: chance is about 0.002; the pretrained model ranks.
    assert metrics["cv"] > 0.05
    out = tmp_path / "submission.csv"
    assert predict.main(["--test-csv", str(data / "test.csv"), "--runs", str(tmp_path / "run"), "--out",
                         str(out)]) == 0
    sub, sample = pd.read_csv(out, dtype=str), pd.read_csv(data / comp.sample_submission, dtype=str)
    assert list(sub.columns) == list(sample.columns) and sub["QuestionId_Answer"].tolist() == \
        sample["QuestionId_Answer"].tolist()
    ids = set(read_catalogue(comp, data)["id"])
    assert all(len(a.split()) == 25 and len(set(a.split())) == 25 and set(a.split()) <= ids
               for a in sub["MisconceptionId"])


def test_a_short_science_exam_scorer_answers_three_letters_per_real_question(tmp_path, minilm_path):
    from utils.train import run_cv

    data, comp = real_dir(SCIENCE), BUILTIN[SCIENCE]
    df = read_table(comp, data)
    assert len(df) == 5983 and set(df["answer"]) == set("ABCDE")
    cfg = cfg_for(data / "train.csv", tmp_path / "run", minilm_path, competition=SCIENCE, folds=5, only_folds=(0,),
                  max_rows=200, max_steps=4, epochs=1, eval_every=100, lr=2e-5, max_len=96, pooling="mean")
    metrics = run_cv(cfg)
    assert 0.0 <= metrics["cv"] <= 1.0
    out = tmp_path / "submission.csv"
    assert predict.main(["--test-csv", str(data / "test.csv"), "--runs", str(tmp_path / "run"), "--out",
                         str(out)]) == 0
    sub = pd.read_csv(out, dtype=str)
    assert list(sub.columns) == ["id", "prediction"] and len(sub) == 3
    assert all(len(p.split()) == 3 and set(p.split()) <= set("ABCDE") for p in sub["prediction"])
    assert np.isfinite(metrics["fold_score"][0])
