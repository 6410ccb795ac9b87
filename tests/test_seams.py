"""Seams between the training loop and the competition: the competition's metric chooses every
checkpoint, a --max-len that leaves no text is refused, oof.csv holds what the CV scores, and a
decoder's load report of its dropped LM head stays out of the user's output."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_frame
from helpers import assert_one_line_error, cfg_for

from utils.competition import Competition, from_settings
from utils.metrics import METRICS
from utils.train import main as train_main
from utils.train import run_cv, scores


def test_a_checkpoint_is_chosen_by_the_competitions_accuracy_not_the_loss_log_loss():
    # Two validations of a 3-class model: A is the more confident (lower log-loss) and right less
    # often; B is right more often. A competition scored by accuracy keeps B.
    comp = Competition(slug="x", text_cols=("text",), target_cols=("level",), task="multiclass", metric="accuracy")
    y = np.array([0, 1, 2, 0])
    a = np.array([[0.98, 0.01, 0.01], [0.01, 0.98, 0.01], [0.34, 0.33, 0.33], [0.33, 0.34, 0.33]])
    b = np.array([[0.40, 0.30, 0.30], [0.30, 0.40, 0.30], [0.30, 0.30, 0.40], [0.40, 0.30, 0.30]])
    sa, sb = scores(comp, y, a), scores(comp, y, b)
    assert sa["log_loss"] < sb["log_loss"] and sa["accuracy"] < sb["accuracy"]  # the two disagree
    assert sb["score"] < sa["score"]  # B is kept
    assert sa["accuracy"] == METRICS["accuracy"].score(y, a) and sa["score"] == -sa["accuracy"]


def test_a_checkpoint_is_chosen_by_the_competitions_roc_auc_for_several_labels():
    comp = Competition(slug="x", text_cols=("text",), target_cols=("a", "b"), task="multilabel", metric="roc_auc")
    y = np.array([[1, 0], [0, 1], [1, 1], [0, 0]], dtype=float)
    confident = np.array([[0.99, 0.01], [0.6, 0.99], [0.5, 0.99], [0.55, 0.01]])  # low log-loss, worse order on a
    ordered = np.array([[0.6, 0.4], [0.4, 0.6], [0.6, 0.6], [0.4, 0.4]])  # every label ranked right
    sc, so = scores(comp, y, confident), scores(comp, y, ordered)
    assert sc["log_loss"] < so["log_loss"] and sc["roc_auc"] < so["roc_auc"] == 1.0
    assert so["score"] < sc["score"] and so["score"] == -1.0


def test_a_fold_keeps_its_best_validation_by_the_competitions_metric(tmp_path, tiny_bert):
    # End to end: the kept fold's score is the best accuracy of its validations (log-loss aside).
    df = tiny_frame(60)
    df["level"] = np.where(df.target < df.target.quantile(0.33), "hard",
                           np.where(df.target < df.target.quantile(0.66), "mid", "easy"))
    df.to_csv(tmp_path / "t.csv", index=False)
    comp = Competition(slug="levels", id_col="id", text_cols=("excerpt",), target_cols=("level",), task="multiclass",
                       metric="accuracy")
    m = run_cv(cfg_for(tmp_path / "t.csv", tmp_path / "r", tiny_bert, only_folds=(0,), eval_every=1, epochs=3), comp)
    hist = json.loads((tmp_path / "r" / "fold0" / "history.json").read_text())["history"]
    assert len(hist) > 3 and all(h["score"] == -h["accuracy"] for h in hist)
    assert m["metric"] == "accuracy" and m["fold_score"][0] == pytest.approx(max(h["accuracy"] for h in hist))
    assert hist[-1]["best"] == pytest.approx(-max(h["accuracy"] for h in hist))


@pytest.mark.parametrize("max_len", ["0", "-3"])
def test_a_max_len_below_one_is_refused_before_anything_is_written(tiny_csv, tiny_bert, tmp_path, capsys, max_len):
    code = train_main(["--train-csv", str(tiny_csv), "--model", tiny_bert, "--out", str(tmp_path / "r"),
                       "--max-len", max_len])
    assert code == 2
    assert_one_line_error(capsys.readouterr().err, "max_len must be >= 1 token", "see no text")
    assert not (tmp_path / "r").exists()


def test_a_max_len_that_holds_only_special_tokens_is_refused(tiny_csv, tiny_bert, tmp_path, capsys):
    # BERT's [CLS] and [SEP] take 2 of 2 tokens: the model would see no word of any text.
    code = train_main(["--train-csv", str(tiny_csv), "--model", tiny_bert, "--out", str(tmp_path / "r"),
                       "--max-len", "2"])
    assert code == 2
    assert_one_line_error(capsys.readouterr().err, "--max-len 2 leaves no room for text", "2 special token(s)",
                          "--max-len 3 or more")
    assert not list((tmp_path / "r").glob("fold*"))


def test_the_cv_is_the_metric_of_oof_csv_as_written(tmp_path, tiny_bert):
    # One rule: oof.csv holds the predictions as the submission writes them (clipped to the
    # target range), and the CV is the metric of exactly those.
    df = tiny_frame(60)
    df.to_csv(tmp_path / "t.csv", index=False)
    lo, hi = float(df.target.min()), float(df.target.max())
    comp = Competition(slug="ranged", text_cols=("excerpt",), target_cols=("target",), target_range=(lo, hi))
    m = run_cv(cfg_for(tmp_path / "t.csv", tmp_path / "r", tiny_bert, lr=5e-3, head_lr=5e-2), comp)
    oof = pd.read_csv(tmp_path / "r" / "oof.csv")
    assert oof.pred.between(lo, hi).all()
    assert m["cv"] == METRICS["rmse"].score(oof[["target"]].to_numpy(), oof[["pred"]].to_numpy())
    for k, score in m["fold_score"].items():
        rows = oof[oof.fold == int(k)]
        assert score == METRICS["rmse"].score(rows[["target"]].to_numpy(), rows[["pred"]].to_numpy())


@pytest.mark.versions  # transformers' load report differs between 4.x and 5.x
def test_a_decoders_dropped_lm_head_is_not_reported_but_a_missing_weight_is(tmp_path, tiny_decoders, capfd):
    from transformers import AutoConfig, AutoModelForCausalLM

    from utils.model import ModelSpec, TextModel, _only_the_lm_head

    causal = tmp_path / "causal"
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(tiny_decoders["llama"])).save_pretrained(causal)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        src = tiny_decoders["llama"] + "/" + f
        if __import__("os").path.exists(src):
            __import__("shutil").copy(src, causal / f)
    capfd.readouterr()
    TextModel.from_backbone(str(causal), ModelSpec(pooling="last"))
    out = capfd.readouterr()
    assert "LOAD REPORT" not in out.err + out.out and "lm_head" not in out.err + out.out
    # The filter drops that report only: one with any other entry is kept.
    head = ("\x1b[1mLlamaModel LOAD REPORT\x1b[0m from: x\nKey            | Status     |  | \n"
            "---------------+------------+--+-\nlm_head.weight | UNEXPECTED |  | \n")
    assert _only_the_lm_head(head)
    assert not _only_the_lm_head(head + "layers.0.mlp.up_proj.weight | MISSING |  | \n")
    assert _only_the_lm_head("Some weights of the model checkpoint at x were not used when initializing "
                             "LlamaModel: ['lm_head.weight']\n- This IS expected ...")
    assert not _only_the_lm_head("Some weights of the model checkpoint at x were not used when initializing "
                                 "LlamaModel: ['lm_head.weight', 'score.weight']")
    assert not _only_the_lm_head("Some weights of LlamaModel were not initialized from the model checkpoint")
    from transformers.utils import logging as hf_logging

    # the filter is removed after the load

    assert not any(f for h in hf_logging._get_library_root_logger().handlers for f in h.filters
                   if type(f).__name__ == "_DropHeadReport")


def test_the_column_flags_build_the_competition_at_the_edge(tmp_path):
    from utils.config import parse_args

    cfg, comp = parse_args(["--train-csv", "t.csv", "--model", "m", "--out", "o", "--text-col", "full_text",
                            "--target-cols", "cohesion", "syntax", "--id-col", "text_id"])
    assert comp == from_settings({"text_col": "full_text", "target_cols": ["cohesion", "syntax"], "id_col": "text_id"})
    assert comp.task == "multi_regression" and not hasattr(cfg, "target_cols")
    cfg, comp = parse_args(
        ["--train-csv", "t.csv", "--model", "m", "--out", "o", "--competition", "nlp-getting-started"]
    )
    assert comp.slug == "nlp-getting-started" and cfg.competition == "nlp-getting-started"
    with pytest.raises(ValueError, match="--task comes from the competition"):
        parse_args(["--train-csv", "t.csv", "--model", "m", "--out", "o", "--competition", "nlp-getting-started",
                    "--task", "regression"])


def test_a_metric_that_scores_finite_predictions_nan_is_blamed_not_the_learning_rate(tiny_csv, tiny_bert, tmp_path,
                                                                                   monkeypatch):
    import utils.train as train

    real = train.scores
    monkeypatch.setattr(train, "scores", lambda comp, y, pred: {**real(comp, y, pred), "rmse": float("nan"),
                                                                 "score": float("nan")})
    with pytest.raises(train.TrainingError) as e:
        run_cv(cfg_for(tiny_csv, tmp_path / "r", tiny_bert, only_folds=(0,), max_steps=2))
    msg = str(e.value)
    assert "every prediction was finite but rmse scored each validation NaN/inf: check the metric" in msg
    assert "--lr" not in msg and "\n" not in msg
    assert not (tmp_path / "r" / "fold0").exists()
